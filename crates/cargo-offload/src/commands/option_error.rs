//! The error of a command line that the option parser itself refuses.

/// A command line refused by the option parser itself, worded as LLVM's parser words it;
/// under a tool's name it is printed as LLVM prints such errors, after the program's name
/// and without `error:`.
#[derive(Debug)]
pub struct OptionError(pub String);

impl std::fmt::Display for OptionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for OptionError {}
