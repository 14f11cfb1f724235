fn main() {
    offload_build::Build::new().compile();
}
