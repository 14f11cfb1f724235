//! ARCHITECTURE.md's invariant on what the format crate costs the runtime: without its
//! optional features it depends on `thiserror` and `crc32fast` alone.

#[test]
fn without_features_the_format_crate_depends_on_thiserror_and_crc32fast_alone() {
    let manifest = include_str!("../Cargo.toml");
    let section = manifest
        .split("\n[dependencies]\n")
        .nth(1)
        .expect("a [dependencies] table");
    let section = section.split("\n[").next().unwrap_or(section);
    let mut required: Vec<&str> = section
        .lines()
        .filter(|line| !line.trim().is_empty() && !line.trim_start().starts_with('#'))
        .filter(|line| !line.contains("optional = true"))
        .map(|line| line.split(['=', '.']).next().unwrap_or(line).trim())
        .collect();
    required.sort_unstable();
    assert_eq!(required, ["crc32fast", "thiserror"]);
}
