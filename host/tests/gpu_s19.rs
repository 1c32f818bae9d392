//! GPU tests of session 19's host item: an event query made while another thread captures a
//! stream in the driver's global mode (PyTorch's `torch.cuda.graph`) must neither fail nor
//! invalidate that capture. Host API and cudarc only (no kernel crate). They skip without a GPU
//! and fail under `REQUIRE_GPU=1`.
//!
//! Run: `REQUIRE_GPU=1 cargo test --release -p ferrocuda-host --test gpu_s19 -- --nocapture`.

use std::sync::Barrier;

use cudarc::driver::{CudaContext, sys};
use ferrocuda_host::{Event, Stream};

mod common;
use common::gpu_or_skip;

/// This thread's stream-capture mode, read by exchanging it and putting it back.
fn this_threads_capture_mode() -> sys::CUstreamCaptureMode {
    let mut mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
    // SAFETY: swaps the thread's mode with the value given (one enum value written), twice.
    unsafe {
        sys::cuThreadExchangeStreamCaptureMode(&mut mode).result().expect("cuThreadExchangeStreamCaptureMode");
        let mut back = mode;
        sys::cuThreadExchangeStreamCaptureMode(&mut back).result().expect("cuThreadExchangeStreamCaptureMode back");
    }
    mode
}

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
    let cuda = CudaContext::new(0).expect("cudarc opens device 0");
    let captured = cuda.new_stream().unwrap();
    let (begun, queried) = (Barrier::new(2), Barrier::new(2));
    let (mode_before, answers, mode_after, ended) = std::thread::scope(|s| {
        let capturer = s.spawn(|| {
            cuda.bind_to_thread().expect("bind the context");
            // SAFETY: a live stream of the bound context; capture begun and ended on this thread.
            let begin = unsafe { sys::cuStreamBeginCapture_v2(captured.cu_stream(), sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL) };
            begun.wait();
            queried.wait();
            let mut graph = std::ptr::null_mut();
            // SAFETY: as above; writes one graph handle, destroyed below.
            let end = unsafe { sys::cuStreamEndCapture(captured.cu_stream(), &mut graph) };
            if !graph.is_null() {
                // SAFETY: the graph the end made, destroyed once.
                let _ = unsafe { sys::cuGraphDestroy(graph) };
            }
            (begin, end)
        });
        begun.wait();
        let mode_before = this_threads_capture_mode();
        let answers = (event.is_complete().map_err(|e| e.to_string()), event.synchronize().map_err(|e| e.to_string()));
        let mode_after = this_threads_capture_mode();
        queried.wait();
        (mode_before, answers, mode_after, capturer.join().unwrap())
    });
    println!("s19: capture begun {:?}, ended {:?}; queries {answers:?}; this thread's mode {mode_before:?} -> {mode_after:?}", ended.0, ended.1);
    assert_eq!(ended.0, sys::CUresult::CUDA_SUCCESS, "the other thread's global-mode capture began");
    assert_eq!(answers, (Ok(true), Ok(())), "the event was complete before the capture began: both queries answer");
    assert_eq!(ended.1, sys::CUresult::CUDA_SUCCESS, "the global-mode capture ends cleanly (not CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)");
    assert_eq!(mode_before, sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL, "a thread's default mode");
    assert_eq!(mode_after, mode_before, "the queries put this thread's capture mode back");
}
