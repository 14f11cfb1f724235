//! The recovery API on the CPU device, which has no context to lose: a reset changes nothing,
//! a wait with a limit has nothing to wait for, and an allocation past the machine's memory is
//! a typed error after which the device goes on.

use std::time::Duration;

use offload_rt::{Device, DeviceBuffer, Error};

#[test]
fn the_cpu_device_has_nothing_to_lose() {
    let device = Device::cpu();
    let buffer = DeviceBuffer::from_slice(&device, &[1u32, 2, 3]).unwrap();
    let stream = device.stream().unwrap();
    assert_eq!(device.lost(), None);
    device.reset().unwrap();
    assert_eq!(
        buffer.to_vec().unwrap(),
        [1, 2, 3],
        "a reset leaves the CPU device's buffers"
    );
    device
        .synchronize_timeout(Duration::from_millis(1))
        .unwrap();
    stream.synchronize_timeout(Duration::from_secs(5)).unwrap();

    match DeviceBuffer::<u8>::zeroed(&device, usize::MAX / 2) {
        Err(
            e @ Error::OutOfMemory {
                requested,
                free: Some(free),
                total: Some(total),
                ..
            },
        ) => {
            assert_eq!(requested, usize::MAX / 2);
            assert!(free <= total);
            assert!(e.to_string().contains("bytes free"), "{e}");
        }
        other => panic!("expected out of memory, got {other:?}"),
    }
    assert_eq!(buffer.to_vec().unwrap(), [1, 2, 3]);
    assert_eq!(
        DeviceBuffer::from_slice(&device, &[4u8])
            .unwrap()
            .to_vec()
            .unwrap(),
        [4]
    );
}
