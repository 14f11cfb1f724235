//! The one place external commands run.
//!
//! Every failure keeps the exact command line, so a user can copy it and run it by hand,
//! and separates "not found", "could not start" and "exited non-zero".

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// A command as it was run, printable as a shell line.
#[derive(Debug, Clone)]
pub struct CommandLine {
    /// The program as given to `Command`.
    pub program: OsString,
    /// Its arguments, in order.
    pub args: Vec<OsString>,
    /// The directory it ran in, when not the current one.
    pub cwd: Option<PathBuf>,
}

impl CommandLine {
    /// Records `cmd`'s program, arguments and directory.
    pub fn of(cmd: &Command) -> Self {
        CommandLine {
            program: cmd.get_program().to_owned(),
            args: cmd.get_args().map(|a| a.to_owned()).collect(),
            cwd: cmd.get_current_dir().map(|p| p.to_owned()),
        }
    }
}

impl fmt::Display for CommandLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(cwd) = &self.cwd {
            write!(
                f,
                "(cd {} && ",
                shell_quote(&cwd.as_os_str().to_string_lossy())
            )?;
        }
        write!(f, "{}", shell_quote(&self.program.to_string_lossy()))?;
        for a in &self.args {
            write!(f, " {}", shell_quote(&a.to_string_lossy()))?;
        }
        if self.cwd.is_some() {
            write!(f, ")")?;
        }
        Ok(())
    }
}

fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Why an external command did not do its job.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    /// The program is not installed.
    #[error("`{program}` was not found on PATH (needed to run `{command}`){hint}")]
    NotFound {
        /// The program's name.
        program: String,
        /// The command that needed it.
        command: CommandLine,
        /// Text appended to the message, e.g. the install command; may be empty.
        hint: String,
    },
    /// The program exists but could not be started.
    #[error("could not start `{command}`: {source}")]
    Spawn {
        /// The command.
        command: CommandLine,
        /// Why it could not start.
        #[source]
        source: std::io::Error,
    },
    /// The program started, but its output could not be read or its end waited for.
    #[error("`{command}`: reading its output or waiting for it failed: {source}")]
    Io {
        /// The command.
        command: CommandLine,
        /// What failed.
        #[source]
        source: std::io::Error,
    },
    /// The program ran and exited unsuccessfully.
    #[error("`{command}` failed ({status}){}", stderr_tail(stderr))]
    Failed {
        /// The command.
        command: CommandLine,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// What it wrote to standard error; the message shows its last lines.
        stderr: String,
    },
}

fn stderr_tail(stderr: &str) -> String {
    let trimmed = stderr.trim_end();
    if trimmed.is_empty() {
        String::new()
    } else {
        format!(":\n{trimmed}")
    }
}

/// Runs `cmd` to completion, capturing stdout and stderr.
pub fn run(cmd: &mut Command) -> Result<Output, CommandError> {
    run_with_hint(cmd, "")
}

/// Like [`run`], with a hint appended when the program is missing (e.g. the install command).
pub fn run_with_hint(cmd: &mut Command, hint: &str) -> Result<Output, CommandError> {
    let command = CommandLine::of(cmd);
    let output = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|source| spawn_error(command.clone(), source, hint))?;
    if output.status.success() {
        Ok(output)
    } else {
        Err(CommandError::Failed {
            command,
            status: output.status,
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        })
    }
}

/// Runs `cmd` with stderr passed through to the user's terminal (rustc diagnostics stay
/// readable and coloured) and stdout captured.
pub fn run_stderr_inherited(cmd: &mut Command) -> Result<Output, CommandError> {
    let output = output_stderr_inherited(cmd)?;
    if output.status.success() {
        Ok(output)
    } else {
        Err(CommandError::Failed {
            command: CommandLine::of(cmd),
            status: output.status,
            stderr: String::new(),
        })
    }
}

/// [`run_stderr_inherited`] that returns the output of a failed run too (its status tells).
pub fn output_stderr_inherited(cmd: &mut Command) -> Result<Output, CommandError> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|source| spawn_error(CommandLine::of(cmd), source, ""))
}

/// Runs `cmd` on the user's terminal (standard input, output and error inherited): a program
/// of the user's, or one that may ask the user something. Returns its exit status,
/// successful or not.
pub fn status_interactive(cmd: &mut Command) -> Result<std::process::ExitStatus, CommandError> {
    cmd.status()
        .map_err(|source| spawn_error(CommandLine::of(cmd), source, ""))
}

/// Starts `cmd` with the standard streams it was given, for a caller that streams the
/// child's output or writes its input as it runs.
pub fn spawn(cmd: &mut Command) -> Result<std::process::Child, CommandError> {
    cmd.spawn()
        .map_err(|source| spawn_error(CommandLine::of(cmd), source, ""))
}

fn spawn_error(command: CommandLine, source: std::io::Error, hint: &str) -> CommandError {
    if source.kind() == std::io::ErrorKind::NotFound {
        CommandError::NotFound {
            program: command.program.to_string_lossy().into_owned(),
            command,
            hint: if hint.is_empty() {
                String::new()
            } else {
                format!("; {hint}")
            },
        }
    } else {
        CommandError::Spawn { command, source }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_program_is_not_found_with_the_command_line() {
        let err = run_with_hint(
            Command::new("surely-not-a-program-xyz").arg("a b"),
            "install it",
        )
        .unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, CommandError::NotFound { .. }), "{msg}");
        assert!(msg.contains("surely-not-a-program-xyz 'a b'"), "{msg}");
        assert!(msg.ends_with("; install it"), "{msg}");
    }

    #[test]
    fn non_zero_exit_keeps_status_and_stderr() {
        let err = run(Command::new("sh").args(["-c", "echo boom >&2; exit 3"])).unwrap_err();
        match &err {
            CommandError::Failed { status, stderr, .. } => {
                assert_eq!(status.code(), Some(3));
                assert_eq!(stderr.trim(), "boom");
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(err.to_string().contains("exit status: 3"));
    }
}
