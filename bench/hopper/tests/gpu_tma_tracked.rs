//! The memory behind a tensor map is tracked like a buffer (issue 21), on a Hopper GPU
//! (skipped, printed, without one; a failure under `REQUIRE_GPU=1`). `tma_copy_boxes` takes
//! its maps as `&TensorMap` kernel parameters, so its generated launcher declares a read of
//! the source map's buffer and a write of the destination map's (`TensorMap::tiled_mut`).
//!
//! Each case puts nothing between the two launches it orders but frees (no allocation, no
//! upload: every map is made first): a first version of these tests made the maps in between,
//! and its untracked control showed that this alone kept the two streams from overlapping
//! (`bench/results/h100-2026-11-25-s7-track-gpu_tma_tracked-control.txt`). Each case has a
//! control with a map of the raw address (`TensorMap::encode_tiled`, which declares nothing
//! for its memory) that must see the race: the proof that the case can fail.

use std::io::Write;

use ferrocuda_host::{Access, Context, DeviceBuffer, DeviceTensorMap, LaunchConfig, Stream, TensorDataType, TensorMap, TensorSwizzle, TiledLayout};
use hopper_kernels::tracked::{TRACKED_BOX, TRACKED_SHARED_BYTES, fill_late, tma_copy_boxes};

/// How late the copy starts: long enough that unordered work on the other stream overlaps it.
const LATE_NS: u64 = 200_000_000;
const BOXES: u32 = 64;
const N: usize = (BOXES * TRACKED_BOX) as usize;

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

fn layout() -> TiledLayout<'static> {
    TiledLayout { data_type: TensorDataType::U32, dims: &[N as u64], strides_bytes: &[], box_dims: &[TRACKED_BOX], swizzle: TensorSwizzle::None }
}

/// A tracked load map of `buffer`, on the device.
fn load_map<'b>(context: &Context, buffer: &'b DeviceBuffer<u32>) -> DeviceTensorMap<'b> {
    TensorMap::tiled(buffer, TensorDataType::U32, &[N as u64], &[TRACKED_BOX], TensorSwizzle::None).unwrap().to_device(context).unwrap()
}

/// A tracked store map of `buffer`, on the device.
fn store_map<'b>(context: &Context, buffer: &'b mut DeviceBuffer<u32>) -> DeviceTensorMap<'b> {
    TensorMap::tiled_mut(buffer, TensorDataType::U32, &[N as u64], &[TRACKED_BOX], TensorSwizzle::None).unwrap().to_device(context).unwrap()
}

/// A map of `buffer`'s raw address: its launches declare nothing for the memory behind it.
fn untracked_map(context: &Context, buffer: &DeviceBuffer<u32>) -> DeviceTensorMap<'static> {
    // SAFETY: `buffer` holds the array and outlives every launch with the map (each control
    // synchronises the context before the buffer can go); the missing ordering is the point.
    let map = unsafe { TensorMap::encode_tiled(buffer.device_ptr(), &layout()) }.unwrap().to_device(context).unwrap();
    assert_eq!(map.access(), None);
    map
}

/// Launches both kernels once and waits. Under CUDA's lazy module loading (the default) a
/// kernel's first launch loads its code, and that load waits for the kernels already running
/// in the context: the first launch of `fill_late` behind a late `tma_copy_boxes` would be
/// serialised by the load, not by the tracking, and the untracked control would see no race
/// (it saw none on an H100 until this warm-up: `bench/results/h100-2026-11-25-s7-final-run.txt`; with it, 16384 of 16384 in three runs: `h100-2026-11-25-s7-final-tma-tracked.txt`).
fn load_both_kernels(context: &Context, stream: &Stream) {
    let source = DeviceBuffer::<u32>::zeroed(context, N).unwrap();
    let mut scratch = DeviceBuffer::<u32>::zeroed(context, N).unwrap();
    {
        let (s, mut d) = (load_map(context, &source), store_map(context, &mut scratch));
        tma_copy_boxes::launch(stream, config(), &s, &mut d, 0).unwrap();
    }
    fill_late::launch(stream, (N as u32 / 256, 256u32), 0, 0, &mut scratch).unwrap();
    context.synchronize().unwrap();
}

fn count_not(values: &[u32], want: u32) -> usize {
    values.iter().filter(|&&v| v != want).count()
}

/// A write of the buffer on stream A queued after a (late) TMA load through a map of it on
/// stream B waits for the load: the read is declared. Control: with an untracked map the
/// write lands first and the copy reads the new values.
#[test]
fn tma_load_through_a_map_is_waited_for_by_a_later_write_on_another_stream() {
    let Some(context) = hopper_or_skip("tma_load_through_a_map_is_waited_for_by_a_later_write_on_another_stream") else { return };
    let (a, b) = (Stream::non_blocking(&context).unwrap(), Stream::non_blocking(&context).unwrap());
    load_both_kernels(&context, &a);
    let grid = (BOXES * TRACKED_BOX / 256, 256u32);

    // Control first (untracked source map).
    let mut src = DeviceBuffer::from_slice(&context, &vec![1u32; N]).unwrap();
    let mut dst = DeviceBuffer::<u32>::zeroed(&context, N).unwrap();
    let raw_src = untracked_map(&context, &src);
    {
        let mut d = store_map(&context, &mut dst);
        context.synchronize().unwrap();
        tma_copy_boxes::launch(&b, config(), &raw_src, &mut d, LATE_NS).unwrap();
        fill_late::launch(&a, grid, 0, 2, &mut src).unwrap();
    }
    let raced = count_not(&dst.to_vec().unwrap(), 1);
    context.synchronize().unwrap();
    drop(raw_src);
    println!("control (untracked load map): {raced} of {N} elements read after the later write on the other stream");
    assert!(raced > 0, "the untracked control saw no race: this case could not detect a missing declaration");

    // Tracked.
    let mut src = DeviceBuffer::from_slice(&context, &vec![1u32; N]).unwrap();
    let mut dst = DeviceBuffer::<u32>::zeroed(&context, N).unwrap();
    {
        let (s, mut d) = (load_map(&context, &src), store_map(&context, &mut dst));
        assert_eq!((s.access(), d.access()), (Some(Access::Read), Some(Access::Write)));
        context.synchronize().unwrap();
        tma_copy_boxes::launch(&b, config(), &s, &mut d, LATE_NS).unwrap();
    } // the maps go (frees only): nothing else between the two launches
    fill_late::launch(&a, grid, 0, 2, &mut src).unwrap();
    let wrong = count_not(&dst.to_vec().unwrap(), 1);
    assert_eq!(wrong, 0, "{wrong} of {N} elements were read after the later write on stream A: the map's read was not declared");
    assert_eq!(count_not(&src.to_vec().unwrap(), 2), 0);
    println!("tracked load map: the write on stream A waited for the late TMA load on stream B ({N} u32 right)");
}

/// A read of the buffer on stream A queued after a (late) TMA store through a `tiled_mut` map
/// on stream B waits for the store: the write is declared. Control: untracked store map.
#[test]
fn tma_store_through_a_map_is_waited_for_by_a_later_read_on_another_stream() {
    let Some(context) = hopper_or_skip("tma_store_through_a_map_is_waited_for_by_a_later_read_on_another_stream") else { return };
    let (a, b) = (Stream::non_blocking(&context).unwrap(), Stream::non_blocking(&context).unwrap());
    load_both_kernels(&context, &a);
    let seed = DeviceBuffer::from_slice(&context, &vec![3u32; N]).unwrap();

    // Control (untracked destination map).
    let mid = DeviceBuffer::<u32>::zeroed(&context, N).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(&context, N).unwrap();
    let (s, mut raw_mid) = (load_map(&context, &seed), untracked_map(&context, &mid));
    context.synchronize().unwrap();
    tma_copy_boxes::launch(&b, config(), &s, &mut raw_mid, LATE_NS).unwrap();
    out.copy_from_device_async(&mid, &a).unwrap();
    let raced = count_not(&out.to_vec().unwrap(), 3);
    context.synchronize().unwrap();
    drop((s, raw_mid));
    println!("control (untracked store map): {raced} of {N} elements read before the store on the other stream");
    assert!(raced > 0, "the untracked control saw no race: this case could not detect a missing declaration");

    // Tracked.
    let mut mid = DeviceBuffer::<u32>::zeroed(&context, N).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(&context, N).unwrap();
    {
        let (s, mut m) = (load_map(&context, &seed), store_map(&context, &mut mid));
        context.synchronize().unwrap();
        tma_copy_boxes::launch(&b, config(), &s, &mut m, LATE_NS).unwrap();
    }
    out.copy_from_device_async(&mid, &a).unwrap();
    let wrong = count_not(&out.to_vec().unwrap(), 3);
    assert_eq!(wrong, 0, "stream A read {wrong} of {N} elements before stream B's TMA store: the map's write was not declared");
    println!("tracked store map: the read on stream A waited for the late TMA store on stream B ({N} u32 right)");
}

/// Dropping the buffer behind a store map, once the map is gone, while the late copy through
/// it is still queued, frees it only after the copy: the next allocation (which the pool may
/// place at the same address) keeps its values. Control: untracked store map.
#[test]
fn dropping_a_mapped_buffer_after_its_map_waits_for_the_kernels_that_used_it() {
    let Some(context) = hopper_or_skip("dropping_a_mapped_buffer_after_its_map_waits_for_the_kernels_that_used_it") else { return };
    let b = Stream::non_blocking(&context).unwrap();
    let seed = DeviceBuffer::from_slice(&context, &vec![5u32; N]).unwrap();
    let run = |tracked: bool| -> (usize, bool) {
        let mut dst = DeviceBuffer::<u32>::zeroed(&context, N).unwrap();
        let address = dst.device_ptr();
        let s = load_map(&context, &seed);
        let mut keep = None;
        if tracked {
            let mut d = store_map(&context, &mut dst);
            context.synchronize().unwrap();
            tma_copy_boxes::launch(&b, config(), &s, &mut d, LATE_NS).unwrap();
            drop(d);
            drop(dst); // waits (stream-ordered) for the copy on B
        } else {
            let mut d = untracked_map(&context, &dst);
            context.synchronize().unwrap();
            tma_copy_boxes::launch(&b, config(), &s, &mut d, LATE_NS).unwrap();
            drop(dst); // nothing recorded B: freed on the legacy stream at once
            keep = Some(d); // the map's own copy stays until the kernel has run
        }
        let fresh = DeviceBuffer::from_slice(&context, &vec![9u32; N]).unwrap();
        let reused = fresh.device_ptr() == address;
        context.synchronize().unwrap();
        drop(keep);
        (count_not(&fresh.to_vec().unwrap(), 9), reused)
    };
    let (raced, reused) = run(false);
    println!("control (untracked store map): address reused {reused}; {raced} of {N} elements of the next allocation overwritten");
    let (wrong, reused_tracked) = run(true);
    println!("tracked store map: address reused {reused_tracked}; {wrong} of {N} elements of the next allocation overwritten");
    assert_eq!(wrong, 0, "the copy through the store map wrote into freed memory that the next allocation reused");
    assert!(!reused || raced > 0, "the untracked control reused the address but saw no overwrite: this case could not fail");
}

/// A map made for loads (`TensorMap::tiled`) passed where the kernel stores (`&StoreMap`) is
/// refused before anything is queued: its launches would declare a read while the kernel
/// writes.
#[test]
fn a_load_map_passed_for_stores_is_refused() {
    let Some(context) = hopper_or_skip("a_load_map_passed_for_stores_is_refused") else { return };
    let b = Stream::non_blocking(&context).unwrap();
    let (seed, dst) = (DeviceBuffer::from_slice(&context, &vec![4u32; N]).unwrap(), DeviceBuffer::<u32>::zeroed(&context, N).unwrap());
    let s = load_map(&context, &seed);
    let mut not_for_stores = load_map(&context, &dst);
    let error = tma_copy_boxes::launch(&b, config(), &s, &mut not_for_stores, 0).unwrap_err();
    assert!(matches!(error, ferrocuda_host::Error::TensorMapNotForStores { parameter: "dst", .. }), "{error:?}");
    assert!(error.to_string().contains("tiled_mut"), "{error}");
    b.synchronize().unwrap();
    drop((s, not_for_stores));
    assert_eq!(count_not(&dst.to_vec().unwrap(), 0), 0, "the refused launch must not have run");
    println!("a load map for a store parameter: {error}");
}
