//! GPU tests of session 20's host item: `Stream::synchronize` and `Stream::is_idle` (the
//! stream query) made while another thread captures a stream in the driver's global mode
//! (PyTorch's `torch.cuda.graph`) must neither fail nor invalidate that capture, as session 19
//! made `Event::is_complete`/`Event::synchronize` (tests/gpu_s19.rs is the model). Host API and
//! cudarc only (no kernel crate). They skip without a GPU and fail under `REQUIRE_GPU=1`.
//!
//! Run: `REQUIRE_GPU=1 cargo test --release -p ferrocuda-host --test gpu_s20 -- --nocapture`.

use cudarc::driver::sys;
use ferrocuda_host::{DeviceBuffer, Stream};

mod common;
#[path = "common/global_capture.rs"]
mod global_capture;
use common::gpu_or_skip;
use global_capture::{GlobalCapture, during_a_global_capture};

/// Session 20: `Stream::synchronize` (`cuStreamSynchronize`) and `Stream::is_idle`
/// (`cuStreamQuery`) ran in the calling thread's capture mode, the default global one. While
/// any thread runs a capture begun in global mode, the driver refuses such a "potentially
/// unsafe" call from every thread and invalidates that capture. Now both run in relaxed mode
/// for their thread. A second thread begins a global-mode capture on a raw stream, this thread
/// waits both ways for a copy queued before on its own (uncaptured) stream, and the capture must
/// then end cleanly, with both calls answered and this thread's mode put back to global.
#[test]
fn s20_stream_waits_leave_another_threads_global_capture_intact() {
    let Some(context) = gpu_or_skip("s20_stream_waits_leave_another_threads_global_capture_intact") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    let data = DeviceBuffer::from_slice(&context, &[7u32; 1024]).unwrap();
    // Work on this thread's own stream, queued before the other thread's capture begins (an
    // allocation during a global-mode capture is itself refused), waited for during it.
    let mut copy = DeviceBuffer::<u32>::zeroed(&context, 1024).unwrap();
    copy.copy_from_device_async(&data, &stream).unwrap();
    let GlobalCapture { begun, ended, answers, mode_before, mode_after } =
        during_a_global_capture(|| (stream.is_idle().map(|_| ()).map_err(|e| e.to_string()), stream.synchronize().map_err(|e| e.to_string())));
    println!("s20: capture begun {:?}, ended {:?}; query/synchronize {answers:?}; this thread's mode {mode_before:?} -> {mode_after:?}", begun, ended);
    assert_eq!(begun, sys::CUresult::CUDA_SUCCESS, "the other thread's global-mode capture began");
    assert_eq!(answers, (Ok(()), Ok(())), "the stream is queried and waited for");
    assert_eq!(ended, sys::CUresult::CUDA_SUCCESS, "the global-mode capture ends cleanly (not CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)");
    assert_eq!(mode_before, sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL, "a thread's default mode");
    assert_eq!(mode_after, mode_before, "the calls put this thread's capture mode back");
    assert_eq!(copy.to_vec().unwrap(), vec![7u32; 1024], "the wait covered the copy");
}
