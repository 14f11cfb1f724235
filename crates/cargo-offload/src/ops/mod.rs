//! One module per operation of `cargo offload`, each taking an options value (cargo's
//! `ops/` under its `commands/`): what the command does, with no argument parsing.

mod build_status;
pub mod cargo;
pub mod command_line;
pub mod dependency_source;
pub mod doctor;
pub mod init;
pub mod new;
mod phases;
pub mod prebuilt;
pub mod profile;
pub mod setup;
