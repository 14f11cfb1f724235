//! `cargo offload`: build, embed and run kernels written in Rust on GPUs and the CPU device.

mod commands;

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // Cargo runs `cargo-offload offload <args>`; run directly, the subcommand name is absent.
    if args.get(1).is_some_and(|a| a == "offload") {
        args.remove(1);
    }
    match commands::exec(args) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err}");
            for cause in err.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            ExitCode::FAILURE
        }
    }
}
