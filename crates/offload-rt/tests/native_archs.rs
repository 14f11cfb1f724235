//! `native_archs` against the stand-in drivers (tests/fixtures/fake-cuda: one `sm_80` device;
//! fake-hip: two `gfx90a:sramecc+:xnack-` devices). One test, because each driver library is
//! chosen once per process through `OFFLOAD_CUDA_LIBRARY` and `OFFLOAD_HIP_LIBRARY`.

mod fake_driver;

#[test]
fn native_archs_lists_each_gpu_architecture_once_in_device_order() {
    let cuda = fake_driver::build("fake-cuda");
    let hip = fake_driver::build("fake-hip");
    // SAFETY: the only test of this process, and no thread reads the environment yet.
    unsafe {
        std::env::set_var("OFFLOAD_CUDA_LIBRARY", &cuda);
        std::env::set_var("OFFLOAD_HIP_LIBRARY", &hip);
    }
    let found = offload_rt::__internal::native_archs();
    assert_eq!(found.archs, ["sm_80", "gfx90a:sramecc+:xnack-"]);
    assert!(found.unavailable.is_empty(), "{:?}", found.unavailable);
}
