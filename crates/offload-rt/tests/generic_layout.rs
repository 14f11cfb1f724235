//! The padding check of a generic `#[derive(DeviceCopy)]` struct is made per instantiation,
//! when a build (not `cargo check`) gets to code that moves its bytes: a crate using a padded
//! instantiation fails to build, naming the struct, and one using only unpadded ones builds.

use std::path::Path;
use std::process::Command;

const STRUCT: &str = r#"
use offload_rt::{Device, DeviceBuffer, DeviceCopy};

#[derive(Clone, Copy, DeviceCopy)]
#[repr(C)]
pub struct Tagged<T> {
    pub tag: u8,
    pub value: T,
}
"#;

/// Builds a binary crate of `main` (after [`STRUCT`]) against this offload-rt; its output.
fn build(name: &str, main: &str) -> std::process::Output {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("generic-layout")
        .join(name);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"{name}\"\nversion = \"0.0.0\"\nedition = \"2024\"\n\n\
             [dependencies]\noffload-rt = {{ path = {:?} }}\n\n[workspace]\n",
            env!("CARGO_MANIFEST_DIR")
        ),
    )
    .unwrap();
    std::fs::write(dir.join("src/main.rs"), format!("{STRUCT}\n{main}")).unwrap();
    Command::new(env!("CARGO"))
        .args(["build", "--quiet"])
        .current_dir(&dir)
        // Its own target directory: the outer `cargo test` holds the workspace's lock.
        .env("CARGO_TARGET_DIR", dir.parent().unwrap().join("target"))
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .unwrap()
}

#[test]
fn a_padded_instantiation_does_not_build_and_an_unpadded_one_does() {
    let fine = build(
        "unpadded",
        "fn main() {\n    let d = Device::cpu();\n    \
         let _ = DeviceBuffer::<Tagged<u8>>::zeroed(&d, 4);\n}\n",
    );
    assert!(
        fine.status.success(),
        "{}",
        String::from_utf8_lossy(&fine.stderr)
    );
    let padded = build(
        "padded",
        "fn main() {\n    let d = Device::cpu();\n    \
         let _ = DeviceBuffer::<Tagged<u32>>::zeroed(&d, 4);\n}\n",
    );
    let stderr = String::from_utf8_lossy(&padded.stderr);
    assert!(!padded.status.success(), "a padded instantiation built");
    assert!(stderr.contains("`Tagged` has padding bytes"), "{stderr}");
}
