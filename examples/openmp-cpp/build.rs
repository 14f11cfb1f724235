fn main() {
    // Compiles the C++ with OpenMP target offload, device-links it into one relocatable
    // object and links it, with LLVM's offload runtime, into this program.
    offload_build::Build::new()
        .openmp_cpp("cpp/saxpy.cpp")
        .compile();
}
