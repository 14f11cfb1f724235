//! CUDA sources: a device-only compile with clang-22 per `sm_XX`, PTX for each, a cubin
//! where `ptxas` knows the `sm`.

use std::path::{Path, PathBuf};

use offload_format::Sm;

use super::{Clang, Options, Source};
use crate::env::Env;
use crate::error::Result;
use crate::image::DeviceImage;

/// What one source compiled to: its images and the files it depends on.
#[derive(Debug, Clone)]
pub struct Compiled {
    pub images: Vec<DeviceImage>,
    pub watch: Vec<PathBuf>,
}

pub fn build(
    _env: &Env,
    _clang: &Clang,
    _source: &Source,
    _sms: &[Sm],
    _options: &Options,
    _out_dir: &Path,
) -> Result<Compiled> {
    Ok(Compiled {
        images: Vec::new(),
        watch: Vec::new(),
    })
}
