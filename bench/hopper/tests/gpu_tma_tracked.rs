//! The memory behind a tensor map is tracked like a buffer (issue 21), on a Hopper GPU
//! (skipped, printed, without one; a failure under `REQUIRE_GPU=1`). `tma_copy_boxes` takes
//! its maps as `&TensorMap` kernel parameters, so its generated launcher declares a read of
//! the source map's buffer and a write of the destination map's (`TensorMap::tiled_mut`).

use std::io::Write;
use std::time::Duration;

use ferrocuda_host::{Access, Context, DeviceBuffer, LaunchConfig, Stream, TensorDataType, TensorMap, TensorSwizzle};
use hopper_kernels::tracked::{TRACKED_BOX, TRACKED_SHARED_BYTES, fill_late, tma_copy_boxes};

/// Long enough that a launch not ordered after the writer reads before it writes.
const LATE_NS: u64 = 200_000_000;
const BOXES: u32 = 64;

fn hopper_or_skip(test: &str) -> Option<Context> {
    let required = ferrocuda_test_support::gpu_required();
    let context = match Context::primary(0) {
        Ok(context) => context,
        Err(error) => {
            assert!(!required, "REQUIRE_GPU=1 but no GPU could be opened: {error}");
            let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {error}");
            return None;
        }
    };
    let arch = context.device().arch().expect("compute capability");
    if arch != 90 {
        assert!(!required, "REQUIRE_GPU=1 but the GPU is sm_{arch}: these kernels are sm_90a (H100/H200)");
        let _ = writeln!(std::io::stderr(), "SKIPPED {test}: sm_{arch} GPU, the kernels are sm_90a");
        return None;
    }
    Some(context)
}

fn config() -> LaunchConfig {
    LaunchConfig::new(BOXES, 128u32).with_shared_bytes(TRACKED_SHARED_BYTES)
}

fn map<'b>(buffer: &'b DeviceBuffer<u32>) -> TensorMap<'b> {
    TensorMap::tiled(buffer, TensorDataType::U32, &[buffer.len() as u64], &[TRACKED_BOX], TensorSwizzle::None).unwrap()
}

fn map_mut<'b>(buffer: &'b mut DeviceBuffer<u32>) -> TensorMap<'b> {
    let n = buffer.len() as u64;
    TensorMap::tiled_mut(buffer, TensorDataType::U32, &[n], &[TRACKED_BOX], TensorSwizzle::None).unwrap()
}

/// A kernel reading through a map on stream B while the buffer is written (late) on stream A
/// reads the written values; the destination written through a store map on B is read back
/// (legacy stream) only after B's copy.
#[test]
fn tma_read_through_a_map_waits_for_a_write_of_its_buffer_on_another_stream() {
    let Some(context) = hopper_or_skip("tma_read_through_a_map_waits_for_a_write_of_its_buffer_on_another_stream") else { return };
    let n = (BOXES * TRACKED_BOX) as usize;
    let (a, b) = (Stream::non_blocking(&context).unwrap(), Stream::non_blocking(&context).unwrap());
    let mut src = DeviceBuffer::<u32>::zeroed(&context, n).unwrap();
    let mut dst = DeviceBuffer::<u32>::zeroed(&context, n).unwrap();
    // Control: the same launch with a map of the raw address (`encode_tiled`, which declares
    // nothing for the memory behind it) copies before the late write. This is what the
    // tracked maps below prevent, and shows that the check can fail.
    fill_late::launch(&a, (BOXES * TRACKED_BOX / 256, 256u32), LATE_NS, 99, &mut src).unwrap();
    let layout = ferrocuda_host::TiledLayout {
        data_type: TensorDataType::U32,
        dims: &[n as u64],
        strides_bytes: &[],
        box_dims: &[TRACKED_BOX],
        swizzle: TensorSwizzle::None,
    };
    // SAFETY: `src` holds the array and outlives the launch (synchronised below); nothing
    // orders the copy after the fill on stream A: the race is the point of the control.
    let raw_src = unsafe { TensorMap::encode_tiled(src.device_ptr(), &layout) }.unwrap().to_device(&context).unwrap();
    assert_eq!(raw_src.access(), None);
    {
        let dst_map = map_mut(&mut dst).to_device(&context).unwrap();
        tma_copy_boxes::launch(&b, config(), &raw_src, &dst_map).unwrap();
    }
    let control = dst.to_vec().unwrap();
    context.synchronize().unwrap();
    drop(raw_src);
    let raced = control.iter().filter(|&&v| v != 99).count();
    println!("control (untracked map of the same buffer): {raced} of {n} elements copied before the write on the other stream");
    assert!(raced > 0, "the untracked control saw no race: this test could not detect a missing declaration");
    for round in 1..=3u32 {
        fill_late::launch(&a, (BOXES * TRACKED_BOX / 256, 256u32), LATE_NS / 4, round * 7, &mut src).unwrap();
        let src_map = map(&src).to_device(&context).unwrap();
        let dst_map = map_mut(&mut dst).to_device(&context).unwrap();
        assert_eq!((src_map.access(), dst_map.access()), (Some(Access::Read), Some(Access::Write)));
        tma_copy_boxes::launch(&b, config(), &src_map, &dst_map).unwrap();
        drop((src_map, dst_map));
        let got = dst.to_vec().unwrap();
        let wrong = got.iter().filter(|&&v| v != round * 7).count();
        assert_eq!(wrong, 0, "round {round}: {wrong} of {n} elements were copied before the write on the other stream (first {})", got[0]);
    }
    println!("tma_read_through_a_map: 3 rounds of {n} u32, TMA copy on stream B after a late fill on stream A: all values right");
}

/// A write through a store map on stream B, then the buffer read on stream A (a TMA load
/// through a read map): A waits for B's store.
#[test]
fn tma_store_through_a_map_is_waited_for_by_a_later_read_on_another_stream() {
    let Some(context) = hopper_or_skip("tma_store_through_a_map_is_waited_for_by_a_later_read_on_another_stream") else { return };
    let n = (BOXES * TRACKED_BOX) as usize;
    let (a, b) = (Stream::non_blocking(&context).unwrap(), Stream::non_blocking(&context).unwrap());
    let mut src = DeviceBuffer::<u32>::zeroed(&context, n).unwrap();
    let mut mid = DeviceBuffer::<u32>::zeroed(&context, n).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(&context, n).unwrap();
    fill_late::launch(&b, (BOXES * TRACKED_BOX / 256, 256u32), LATE_NS, 11, &mut src).unwrap();
    {
        let (s, m) = (map(&src).to_device(&context).unwrap(), map_mut(&mut mid).to_device(&context).unwrap());
        tma_copy_boxes::launch(&b, config(), &s, &m).unwrap(); // mid written on B, late
    }
    {
        let (m, o) = (map(&mid).to_device(&context).unwrap(), map_mut(&mut out).to_device(&context).unwrap());
        tma_copy_boxes::launch(&a, config(), &m, &o).unwrap(); // mid read on A
    }
    let got = out.to_vec().unwrap();
    assert!(got.iter().all(|&v| v == 11), "stream A read the store map's memory before stream B's store: first {}", got[0]);
    println!("tma_store_through_a_map: the read on stream A waited for the TMA store on stream B ({n} u32 right)");
}

/// Dropping the buffer once its map is gone, while a kernel still copies through the map,
/// waits for the kernel: the next allocation (which may reuse the address) is not overwritten.
#[test]
fn dropping_a_mapped_buffer_after_its_map_waits_for_the_kernels_that_used_it() {
    let Some(context) = hopper_or_skip("dropping_a_mapped_buffer_after_its_map_waits_for_the_kernels_that_used_it") else { return };
    let n = (BOXES * TRACKED_BOX) as usize;
    let b = Stream::non_blocking(&context).unwrap();
    let mut src = DeviceBuffer::<u32>::zeroed(&context, n).unwrap();
    let mut dst = DeviceBuffer::<u32>::zeroed(&context, n).unwrap();
    fill_late::launch(&b, (BOXES * TRACKED_BOX / 256, 256u32), LATE_NS, 5, &mut src).unwrap();
    {
        let (s, d) = (map(&src).to_device(&context).unwrap(), map_mut(&mut dst).to_device(&context).unwrap());
        tma_copy_boxes::launch(&b, config(), &s, &d).unwrap(); // writes dst late
    }
    drop(dst); // freed after stream B's copy (stream-ordered or host-waited)
    let fresh = DeviceBuffer::from_slice(&context, &vec![9u32; n]).unwrap();
    b.synchronize().unwrap();
    std::thread::sleep(Duration::from_millis(10));
    let got = fresh.to_vec().unwrap();
    assert!(got.iter().all(|&v| v == 9), "the copy through the store map wrote into freed memory reused by the next allocation");
    println!("dropping_a_mapped_buffer: the free waited for the TMA store; the next allocation kept its {n} values");
}
