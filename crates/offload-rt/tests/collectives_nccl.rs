//! The collectives' NCCL path against stand-ins of the CUDA driver (tests/fixtures/fake-cuda)
//! and of NCCL (tests/fixtures/fake-nccl), whose memory is host memory: the calls the
//! communicator makes, with their counts, types, operations and stream, in order; the data
//! each moves (one rank: its own); and the errors. One test, because the libraries are
//! chosen once per process (`OFFLOAD_CUDA_LIBRARY`, `OFFLOAD_NCCL_LIBRARY`).

mod fake_driver;

use std::path::Path;

use offload_rt::collective::{CommId, Communicator, ReduceOp};
use offload_rt::{Device, DeviceBuffer, Error};

/// Every call the stand-in NCCL has seen, a line each.
fn nccl_log(library: &Path) -> Vec<String> {
    // SAFETY: the stand-in, already loaded by the runtime; leaked, so it stays open.
    let lib = Box::leak(Box::new(
        unsafe { libloading::Library::new(library) }.unwrap(),
    ));
    // SAFETY: the stand-in exports it with this signature.
    let log =
        unsafe { lib.get::<extern "C" fn() -> *const std::ffi::c_char>(b"fake_nccl_log") }.unwrap();
    // SAFETY: a NUL-terminated string the stand-in keeps until the next call.
    let text = unsafe { std::ffi::CStr::from_ptr(log()) }
        .to_string_lossy()
        .into_owned();
    text.lines().map(str::to_owned).collect()
}

/// The log's lines from `from` on, without their `stream=…` field, and that field's values.
fn calls_since(library: &Path, from: usize) -> (Vec<String>, Vec<String>) {
    let lines = nccl_log(library);
    let mut calls = Vec::new();
    let mut streams = Vec::new();
    for line in &lines[from..] {
        let (call, stream) = match line.split_once(" stream=") {
            Some((call, stream)) => (call.to_owned(), Some(stream.to_owned())),
            None => (line.clone(), None),
        };
        calls.push(call);
        streams.extend(stream);
    }
    (calls, streams)
}

#[test]
fn collectives_call_nccl_on_the_communicators_stream_and_report_its_errors() {
    let cuda = fake_driver::build("fake-cuda");
    let nccl = fake_driver::build("fake-nccl");
    // SAFETY: the only test of this process, and no thread reads the environment yet.
    unsafe {
        std::env::set_var("OFFLOAD_CUDA_LIBRARY", &cuda);
        std::env::set_var("OFFLOAD_NCCL_LIBRARY", &nccl);
    }
    let device = Device::from_spec("cuda:0").unwrap();

    // The CPU device has no NCCL: its collectives are MPI's (the error says how to get them,
    // with or without the `mpi` feature in this build).
    let err = CommId::new(&Device::cpu()).unwrap_err();
    assert!(matches!(err, Error::CollectivesUnavailable { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("the CPU device's collectives are MPI's")
            && err.to_string().contains("Communicator::from_mpi"),
        "{err}"
    );

    let id = CommId::new(&device).unwrap();
    // Another rank would get the identity as bytes.
    let id = CommId::from_bytes(*id.as_bytes());
    let err = Communicator::with_id(&device, &id, 1, 1).unwrap_err();
    assert!(
        matches!(
            err,
            Error::CollectiveArgs {
                call: "with_id",
                ..
            }
        ),
        "{err}"
    );
    let mut comm = Communicator::with_id(&device, &id, 0, 1).unwrap();
    assert_eq!((comm.rank(), comm.size()), (0, 1));
    assert!(
        comm.library().starts_with("NCCL 2.21.5 ("),
        "{}",
        comm.library()
    );
    let stream = device.stream().unwrap();
    comm.set_stream(&stream).unwrap();
    let start = nccl_log(&nccl).len();

    let data: Vec<f32> = (0..100).map(|i| i as f32 * 0.5).collect();
    let send = DeviceBuffer::from_slice(&device, &data).unwrap();
    let mut recv = DeviceBuffer::<f32>::zeroed(&device, 100).unwrap();
    comm.all_reduce(&send, &mut recv, ReduceOp::Max).unwrap();
    let mut ints = DeviceBuffer::from_slice(&device, &[7i64, 8, 9]).unwrap();
    comm.all_reduce_in_place(&mut ints, ReduceOp::Prod).unwrap();
    let mut bytes = DeviceBuffer::from_slice(&device, &[1u8, 2, 3, 4]).unwrap();
    comm.broadcast(&mut bytes, 0).unwrap();
    let mut gathered = DeviceBuffer::<f32>::zeroed(&device, 100).unwrap();
    comm.all_gather(&send, &mut gathered).unwrap();
    let mut part = DeviceBuffer::<f32>::zeroed(&device, 100).unwrap();
    comm.reduce_scatter(&send, &mut part, ReduceOp::Sum)
        .unwrap();
    let words = DeviceBuffer::from_slice(&device, &[5u32, 6]).unwrap();
    let mut got_words = DeviceBuffer::<u32>::zeroed(&device, 2).unwrap();
    comm.group(|g| {
        g.send(&words, 0)?;
        g.recv(&mut got_words, 0)
    })
    .unwrap();
    stream.synchronize().unwrap();

    let (calls, streams) = calls_since(&nccl, start);
    assert_eq!(
        calls,
        [
            // ncclFloat32 = 7, ncclMax = 2; ncclInt64 = 4, ncclProd = 1; ncclUint8 = 1.
            "ncclAllReduce count=100 type=7 op=2",
            "ncclAllReduce count=3 type=4 op=1",
            "ncclBroadcast count=4 type=1 root=0",
            // NCCL's counts: all-gather the count sent, reduce-scatter the count received.
            "ncclAllGather sendcount=100 type=7",
            "ncclReduceScatter recvcount=100 type=7 op=0",
            "ncclGroupStart",
            "ncclSend count=2 type=3 peer=0",
            "ncclRecv count=2 type=3 peer=0",
            "ncclGroupEnd",
        ]
    );
    let own_stream = format!("{:p}", stream.device().raw_stream());
    assert!(
        streams.iter().all(|s| *s == own_stream),
        "every call on the communicator's stream {own_stream}: {streams:?}"
    );
    assert_ne!(own_stream, format!("{:p}", device.raw_stream()));
    // One rank: each result is its own input.
    assert_eq!(recv.to_vec().unwrap(), data);
    assert_eq!(ints.to_vec().unwrap(), [7, 8, 9]);
    assert_eq!(gathered.to_vec().unwrap(), data);
    assert_eq!(part.to_vec().unwrap(), data);
    assert_eq!(got_words.to_vec().unwrap(), [5, 6]);

    // Arguments that do not fit are refused before NCCL.
    let before = nccl_log(&nccl).len();
    let mut short = DeviceBuffer::<f32>::zeroed(&device, 99).unwrap();
    let err = comm
        .all_reduce(&send, &mut short, ReduceOp::Sum)
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::CollectiveArgs {
                call: "all_reduce",
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("recv has 99 elements, send is 100"),
        "{err}"
    );
    let err = comm.all_gather(&send, &mut short).unwrap_err();
    assert!(err.to_string().contains("size() × send is 100"), "{err}");
    let err = comm.broadcast(&mut short, 1).unwrap_err();
    assert!(err.to_string().contains("root 1 is no rank"), "{err}");
    let err = comm.send(&send, 3).unwrap_err();
    assert!(err.to_string().contains("peer 3 is no rank"), "{err}");
    let cpu_buffer = DeviceBuffer::<f32>::zeroed(&Device::cpu(), 100).unwrap();
    let err = comm
        .all_reduce(&cpu_buffer, &mut recv, ReduceOp::Sum)
        .unwrap_err();
    assert!(err.to_string().contains("a buffer of cpu"), "{err}");
    assert_eq!(nccl_log(&nccl).len(), before, "nothing reached NCCL");

    // A failing call: NCCL's message and its last error, in a typed error naming the call.
    // SAFETY: the only thread of this test reading the environment is the stand-in's, which
    // reads it in the calls below.
    unsafe { std::env::set_var("FAKE_NCCL_FAIL", "ncclAllReduce") };
    let err = comm
        .all_reduce(&send, &mut recv, ReduceOp::Sum)
        .unwrap_err();
    // SAFETY: as above.
    unsafe { std::env::remove_var("FAKE_NCCL_FAIL") };
    match &err {
        Error::Collective {
            library,
            call,
            code,
            message,
        } => {
            assert_eq!((*call, *code), ("ncclAllReduce", 5));
            assert_eq!(library, nccl.to_str().unwrap());
            assert!(message.contains("invalid usage"), "{message}");
            assert!(
                message.contains("fake failure of ncclAllReduce"),
                "{message}"
            );
        }
        other => panic!("expected Error::Collective, got {other:?}"),
    }
    assert!(
        err.to_string().starts_with(&format!(
            "{}: ncclAllReduce failed with code 5",
            nccl.display()
        )),
        "{err}"
    );
    // The communicator still works after an error of one call.
    comm.all_reduce(&send, &mut recv, ReduceOp::Sum).unwrap();

    // Dropping the communicator destroys it.
    drop(comm);
    assert_eq!(
        nccl_log(&nccl).last().map(String::as_str),
        Some("ncclCommDestroy")
    );
}
