//! GPU tests of session 19's host item: an event query made while another thread captures a
//! stream in the driver's global mode (PyTorch's `torch.cuda.graph`) must neither fail nor
//! invalidate that capture. Host API and cudarc only (no kernel crate). They skip without a GPU
//! and fail under `REQUIRE_GPU=1`.
//!
//! Run: `REQUIRE_GPU=1 cargo test --release -p ferrocuda-host --test gpu_s19 -- --nocapture`.

use cudarc::driver::sys;
use ferrocuda_host::{Event, Stream};

mod common;
#[path = "common/global_capture.rs"]
mod global_capture;
use common::gpu_or_skip;
use global_capture::{GlobalCapture, during_a_global_capture};

/// Session 19: `Event::is_complete` and `Event::synchronize` queried the event
/// (`cuEventQuery`) in the calling thread's capture mode, the default global one. While any
/// thread runs a capture begun in global mode, the driver refuses such a "potentially unsafe"
/// call from every thread (`CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED`) and invalidates that
/// capture: a ferrocuda user polling its own (uncaptured) event broke a PyTorch CUDA graph
/// capture on another thread. The queries now run in relaxed mode for their thread. Here a
/// second thread begins a global-mode capture on a raw stream (as PyTorch does), this thread
/// polls a completed event both ways, and the capture must then end cleanly, with the queries
/// answered and this thread's mode put back to global.
#[test]
fn s19_event_queries_leave_another_threads_global_capture_intact() {
    let Some(context) = gpu_or_skip("s19_event_queries_leave_another_threads_global_capture_intact") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    let event = Event::without_timing(&context).unwrap();
    event.record(&stream).unwrap();
    stream.synchronize().unwrap();
    let GlobalCapture { begun, ended, answers, mode_before, mode_after } =
        during_a_global_capture(|| (event.is_complete().map_err(|e| e.to_string()), event.synchronize().map_err(|e| e.to_string())));
    println!("s19: capture begun {:?}, ended {:?}; queries {answers:?}; this thread's mode {mode_before:?} -> {mode_after:?}", begun, ended);
    assert_eq!(begun, sys::CUresult::CUDA_SUCCESS, "the other thread's global-mode capture began");
    assert_eq!(answers, (Ok(true), Ok(())), "the event was complete before the capture began: both queries answer");
    assert_eq!(ended, sys::CUresult::CUDA_SUCCESS, "the global-mode capture ends cleanly (not CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)");
    assert_eq!(mode_before, sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL, "a thread's default mode");
    assert_eq!(mode_after, mode_before, "the queries put this thread's capture mode back");
}
