//! ARCHITECTURE.md's invariant on what the format crate costs: without features (the device
//! ABI, which the kernel side of `offload-rt` takes in every nested device build) and with `std`
//! alone (the kernel macros) it depends on nothing; with `binaries`, what the runtime takes, on
//! `thiserror` and `crc32fast` alone.

const MANIFEST: &str = include_str!("../Cargo.toml");

/// The lines of the manifest's `[name]` table that are neither blank nor comments.
fn table(name: &str) -> Vec<&'static str> {
    let section = MANIFEST
        .split(&format!("\n[{name}]\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("a [{name}] table"));
    let section = section.split("\n[").next().unwrap_or(section);
    section
        .lines()
        .filter(|line| !line.trim().is_empty() && !line.trim_start().starts_with('#'))
        .collect()
}

#[test]
fn without_features_the_format_crate_depends_on_nothing() {
    let required: Vec<&str> = table("dependencies")
        .into_iter()
        .filter(|line| !line.contains("optional = true"))
        .collect();
    assert_eq!(required, Vec::<&str>::new());
}

#[test]
fn its_binaries_feature_brings_thiserror_and_crc32fast_alone() {
    let binaries = table("features")
        .into_iter()
        .find(|line| line.starts_with("binaries ="))
        .expect("a `binaries` feature");
    assert_eq!(
        binaries,
        r#"binaries = ["std", "dep:thiserror", "dep:crc32fast"]"#
    );
    let std = table("features")
        .into_iter()
        .find(|line| line.starts_with("std ="))
        .expect("a `std` feature");
    assert_eq!(std, "std = []");
    let containers = table("features")
        .into_iter()
        .find(|line| line.starts_with("containers ="))
        .expect("a `containers` feature");
    assert!(containers.contains(r#""binaries""#), "{containers}");
}
