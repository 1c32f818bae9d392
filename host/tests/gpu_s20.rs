//! GPU tests of session 20's host item: `Stream::synchronize` and `Stream::is_idle` (the
//! stream query) made while another thread captures a stream in the driver's global mode
//! (PyTorch's `torch.cuda.graph`) must neither fail nor invalidate that capture, as session 19
//! made `Event::is_complete`/`Event::synchronize` (tests/gpu_s19.rs is the model). Host API and
//! cudarc only (no kernel crate). They skip without a GPU and fail under `REQUIRE_GPU=1`.
//!
//! Run: `REQUIRE_GPU=1 cargo test --release -p ferrocuda-host --test gpu_s20 -- --nocapture`.

use std::sync::Barrier;

use cudarc::driver::{CudaContext, sys};
use ferrocuda_host::{DeviceBuffer, Stream};

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
    let cuda = CudaContext::new(0).expect("cudarc opens device 0");
    let captured = cuda.new_stream().unwrap();
    // Work on this thread's own stream, queued before the other thread's capture begins (an
    // allocation during a global-mode capture is itself refused), waited for during it.
    let mut copy = DeviceBuffer::<u32>::zeroed(&context, 1024).unwrap();
    copy.copy_from_device_async(&data, &stream).unwrap();
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
        let answers = (stream.is_idle().map(|_| ()).map_err(|e| e.to_string()), stream.synchronize().map_err(|e| e.to_string()));
        let mode_after = this_threads_capture_mode();
        queried.wait();
        (mode_before, answers, mode_after, capturer.join().unwrap())
    });
    println!("s20: capture begun {:?}, ended {:?}; query/synchronize {answers:?}; this thread's mode {mode_before:?} -> {mode_after:?}", ended.0, ended.1);
    assert_eq!(ended.0, sys::CUresult::CUDA_SUCCESS, "the other thread's global-mode capture began");
    assert_eq!(answers, (Ok(()), Ok(())), "the stream is queried and waited for");
    assert_eq!(ended.1, sys::CUresult::CUDA_SUCCESS, "the global-mode capture ends cleanly (not CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)");
    assert_eq!(mode_before, sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL, "a thread's default mode");
    assert_eq!(mode_after, mode_before, "the calls put this thread's capture mode back");
    assert_eq!(copy.to_vec().unwrap(), vec![7u32; 1024], "the wait covered the copy");
}
