//! Why an operation failed ([`OpsError`]), and the errors of I/O and of the formats turned
//! into it with the file they concern.

use std::io;
use std::path::{Path, PathBuf};

use offload_build::tooling::command::CommandError;

/// An I/O error as LLVM words it: the system's message, without Rust's `(os error N)`.
fn io_words(e: &io::Error) -> String {
    let text = e.to_string();
    match text.rfind(" (os error ") {
        Some(at) if text.ends_with(')') => text[..at].to_owned(),
        _ => text,
    }
}

/// Why a bundle or package operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpsError {
    /// A file could not be read or written: LLVM's words (`'PATH': No such file or
    /// directory`), then what was being done.
    #[error("'{}': {}\nnote: while {what} it", path.display(), io_words(source))]
    Io {
        /// What was being done, e.g. `reading`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The error the operating system reported.
        #[source]
        source: io::Error,
    },
    /// A file's contents are not a valid bundle, archive or OffloadBinary: what is wrong
    /// first (clang's words where clang has them), then the file.
    #[error("{source}\nnote: in {}", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong with its contents.
        #[source]
        source: offload_format::Error,
    },
    /// An OffloadBinary that does not parse, in `llvm-offload-binary`'s words, then ours.
    #[error("Invalid data was encountered while parsing the file\nnote: {}: {source}", path.display())]
    BadOffloadBinary {
        /// The file, or `archive(member)`, or `file/section`.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        source: offload_format::Error,
    },
    /// A bundle's targets that break the bundler's rules (duplicates, conflicting target IDs,
    /// the host count), in clang's words.
    #[error(transparent)]
    TargetRules(offload_format::Error),
    /// An object file (by its magic) that the object reader refuses, so its images cannot be
    /// looked for; never taken for a file without images.
    #[error("{path}: not a readable object file: {reason}")]
    Unreadable {
        /// The file, or `archive(member)`.
        path: PathBuf,
        /// What the object reader reported.
        reason: String,
    },
    /// A `-type` the bundler does not know.
    #[error(
        "'{file_type}': invalid file type specified (known: i ii cui hipi d ll bc s o a gch ast)"
    )]
    UnknownFileType {
        /// The type as given.
        file_type: String,
    },
    /// Bundling with a different number of inputs and targets.
    #[error(
        "number of input files ({inputs}) and targets ({targets}) should match in bundling mode"
    )]
    BundleInputCount {
        /// Number of input files.
        inputs: usize,
        /// Number of targets.
        targets: usize,
    },
    /// Bundling into more than one output.
    #[error("only one output file supported in bundling mode, {outputs} given")]
    BundleOutputCount {
        /// Number of output files given.
        outputs: usize,
    },
    /// More than one input in a mode that reads one.
    #[error("only one input file supported in {mode} mode, {inputs} given")]
    SingleInput {
        /// The mode, e.g. `unbundling`.
        mode: &'static str,
        /// Number of input files given.
        inputs: usize,
    },
    /// Unbundling with a different number of outputs and targets.
    #[error(
        "number of output files ({outputs}) and targets ({targets}) should match in unbundling mode"
    )]
    UnbundleOutputCount {
        /// Number of output files.
        outputs: usize,
        /// Number of targets.
        targets: usize,
    },
    /// A required option is missing.
    #[error("no {what} given (use {option})")]
    MissingOption {
        /// What is missing, e.g. `targets`.
        what: &'static str,
        /// The option that gives it.
        option: &'static str,
    },
    /// `-type=a` in bundling mode: archives can only be unbundled.
    #[error("archives cannot be bundled, only unbundled (-type=a with -unbundle)")]
    ArchiveBundling,
    /// A `-targets` entry that is not a valid bundle entry ID.
    #[error("bundle entry ID {id:?}: {source}")]
    Target {
        /// The entry ID as given.
        id: String,
        /// What is wrong with it.
        #[source]
        source: offload_format::Error,
    },
    /// Every requested target without an entry, named as clang names them.
    #[error("Can't find bundles for {targets}\nnote: looked in {path}{note}")]
    MissingBundle {
        /// The bundle file.
        path: PathBuf,
        /// The missing targets, comma-separated.
        targets: String,
        /// Text appended to the message (e.g. that the bundle has no entries); may be empty.
        note: &'static str,
    },
    /// An object bundle needs `llvm-objcopy` for its host entry and none was found.
    #[error(
        "{path}: the host entry of an object bundle needs llvm-objcopy, which was not found (tried {tried})"
    )]
    ObjcopyNotFound {
        /// The bundle file.
        path: PathBuf,
        /// The places looked in.
        tried: String,
    },
    /// An external program could not be run or failed.
    #[error(transparent)]
    Command(#[from] CommandError),
    /// An `--image` specification that cannot be parsed.
    #[error("{reason}\nnote: in --image={spec}")]
    BadImageSpec {
        /// The specification as given.
        spec: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A file larger than this platform's address space.
    #[error("{path}: {size} bytes does not fit in memory on this platform")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size, in bytes.
        size: u64,
    },
}

/// Result of the operations.
pub type Result<T, E = OpsError> = std::result::Result<T, E>;

pub(super) trait IoAt<T> {
    fn at(self, what: &'static str, path: &Path) -> Result<T>;
}

impl<T> IoAt<T> for io::Result<T> {
    fn at(self, what: &'static str, path: &Path) -> Result<T> {
        self.map_err(|source| OpsError::Io {
            what,
            path: path.to_owned(),
            source,
        })
    }
}

pub(super) trait FormatAt<T> {
    fn at(self, path: &Path) -> Result<T>;
}

impl<T> FormatAt<T> for offload_format::Result<T> {
    fn at(self, path: &Path) -> Result<T> {
        self.map_err(|source| match source {
            offload_format::Error::Io(source) => OpsError::Io {
                what: "reading or writing",
                path: path.to_owned(),
                source,
            },
            source => OpsError::Format {
                path: path.to_owned(),
                source,
            },
        })
    }
}
