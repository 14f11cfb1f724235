//! `cargo offload`: build, embed and run kernels written in Rust on GPUs and the CPU device.

mod commands;

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let program = args.first().cloned().unwrap_or_default();
    let tool = std::path::Path::new(&program)
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(commands::tool_personality);
    if let Some(subcommand) = tool {
        // Named after one of clang's tools: that tool, its errors worded as LLVM prints them.
        args.insert(1, subcommand.into());
    } else if args.get(1).is_some_and(|a| a == "offload") {
        // Cargo runs `cargo-offload offload <args>`; run directly, the subcommand name is absent.
        args.remove(1);
    }
    let prefix = match tool {
        Some(_) => format!("{}: ", program.to_string_lossy()),
        None => String::new(),
    };
    match commands::exec(args) {
        Ok(code) => code,
        Err(err) => {
            if tool.is_some() && err.downcast_ref::<commands::OptionError>().is_some() {
                eprintln!("{prefix}{err}");
            } else {
                eprintln!("{prefix}error: {err}");
            }
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
