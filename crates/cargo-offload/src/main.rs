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
            // Many errors print their source in their own message; say each thing once.
            let mut previous = err.to_string();
            for cause in err.chain().skip(1) {
                let text = cause.to_string();
                if !previous.contains(&text) {
                    eprintln!("  caused by: {text}");
                }
                previous = text;
            }
            ExitCode::FAILURE
        }
    }
}
