//! Several GPUs: a context per device, peer access, peer copies. Skips (printed) with fewer
//! than two devices; fails instead under `REQUIRE_MULTI_GPU=1`.

mod common;

use ferrocuda::{Context, Device, DeviceBuffer, Error, Stream};

fn multi_gpu_required() -> bool {
    std::env::var("REQUIRE_MULTI_GPU").is_ok_and(|v| v == "1")
}

#[test]
fn peer_copies_between_every_pair_of_devices() {
    let Some(_first) = common::gpu_or_skip("peer_copies_between_every_pair_of_devices") else { return };
    let count = Device::count().unwrap();
    if count < 2 {
        assert!(!multi_gpu_required(), "REQUIRE_MULTI_GPU=1 but the driver sees {count} device(s)");
        eprintln!("SKIPPED peer_copies_between_every_pair_of_devices: the driver sees {count} device(s), 2 are needed");
        return;
    }
    let contexts: Vec<Context> = (0..count).map(|d| Context::primary(d).unwrap()).collect();
    for (i, source_context) in contexts.iter().enumerate() {
        for (j, destination_context) in contexts.iter().enumerate() {
            if i == j {
                continue;
            }
            let direct = destination_context.can_access_peer(source_context).unwrap();
            match destination_context.enable_peer_access(source_context) {
                Ok(()) => assert!(direct),
                Err(Error::PeerAccessUnsupported { .. }) => assert!(!direct),
                Err(other) => panic!("enable_peer_access {j} -> {i}: {other}"),
            }
            let n = (1 << 20) + 17;
            let data: Vec<u32> = (0..n as u32).map(|v| v ^ ((i as u32) << 24) ^ ((j as u32) << 16)).collect();
            let source = DeviceBuffer::from_slice(source_context, &data).unwrap();
            let mut destination = DeviceBuffer::<u32>::zeroed(destination_context, n).unwrap();
            destination.copy_from_peer(&source).unwrap();
            assert_eq!(destination.to_vec().unwrap(), data, "synchronous copy {i} -> {j}");
            let stream = Stream::non_blocking(destination_context).unwrap();
            let mut second = DeviceBuffer::<u32>::zeroed(destination_context, n).unwrap();
            second.copy_from_peer_async(&source, &stream).unwrap();
            stream.synchronize().unwrap();
            assert_eq!(second.to_vec().unwrap(), data, "asynchronous copy {i} -> {j}");
            eprintln!("device {i} -> device {j}: peer access {}, copies verified", if direct { "enabled" } else { "unavailable (staged through the host)" });
        }
    }
}
