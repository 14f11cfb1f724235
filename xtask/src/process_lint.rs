//! ARCHITECTURE.md's invariant "every external command goes through `offload-build`'s
//! `command` module", checked: outside that module (and outside `offload-toolchain`, which sits
//! below it, and test code), no source of the workspace's crates starts a process itself
//! (`.output()`, `.status()`, `.spawn()` on a `Command`).

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// Where processes may be started: the module every other one goes through, and the
    /// toolchain's own probes, which cannot depend on it.
    const ALLOWED: &[&str] = &[
        "crates/offload-build/src/command.rs",
        "crates/offload-toolchain/src/lib.rs",
    ];

    #[test]
    fn the_tool_lint_catches_rust_and_sudo_started_by_name() {
        let programs: Vec<&str> = offload_toolchain::Tool::ALL
            .iter()
            .map(|t| t.program())
            .collect();
        for program in ["rustup", "rustc", "sudo", "ptxas"] {
            let line = format!("let out = Command::new(\"{program}\").arg(\"-V\");");
            assert!(crate::starts_tool_by_name(&line, &programs), "{line}");
        }
        assert!(crate::starts_tool_by_name(
            "Command::new(\"clang-22\")",
            &programs
        ));
        assert!(!crate::starts_tool_by_name(
            "Tool::Rustup.command().args([\"run\"])",
            &programs
        ));
    }

    #[test]
    fn processes_start_only_in_the_command_module() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut found = Vec::new();
        for file in crate::rust_sources(&root.join("crates")) {
            let rel = file
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if ALLOWED.contains(&rel.as_str()) || !rel.contains("/src/") {
                continue;
            }
            let text = std::fs::read_to_string(&file).unwrap();
            // A source file's unit tests come last, after `#[cfg(test)]`.
            let code = text
                .split("\n#[cfg(test)]\nmod tests")
                .next()
                .unwrap_or_default();
            for (n, line) in code.lines().enumerate() {
                let line = line.trim();
                if line.starts_with("//") {
                    continue;
                }
                if [".output()", ".status()", ".spawn()"]
                    .iter()
                    .any(|call| line.contains(call))
                {
                    found.push(format!("{rel}:{}: {line}", n + 1));
                }
            }
        }
        assert!(
            found.is_empty(),
            "these start a process outside offload_build::tooling::command (use its `run`, \
             `status_interactive` or `spawn`, which name the command in their errors): {found:#?}"
        );
    }
}
