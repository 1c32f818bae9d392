//! Another thread's global-mode stream capture (what PyTorch's `torch.cuda.graph` begins), for
//! the GPU tests of the calls that must neither fail nor invalidate it (`gpu_s19`: event
//! queries, `gpu_s20`: stream waits).

use std::sync::Barrier;

use cudarc::driver::{CudaContext, sys};

/// What [`during_a_global_capture`] saw.
pub struct GlobalCapture<R> {
    /// The other thread's `cuStreamBeginCapture` result.
    pub begun: sys::CUresult,
    /// The other thread's `cuStreamEndCapture` result (`CUDA_ERROR_STREAM_CAPTURE_INVALIDATED`
    /// when a call of this thread broke the capture).
    pub ended: sys::CUresult,
    /// What the calls returned.
    pub answers: R,
    /// This thread's capture mode before the calls, and after them.
    pub mode_before: sys::CUstreamCaptureMode,
    /// As above.
    pub mode_after: sys::CUstreamCaptureMode,
}

/// This thread's stream-capture mode, read by exchanging it and putting it back.
pub fn this_threads_capture_mode() -> sys::CUstreamCaptureMode {
    let mut mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
    // SAFETY: swaps the thread's mode with the value given (one enum value written), twice.
    unsafe {
        sys::cuThreadExchangeStreamCaptureMode(&mut mode).result().expect("cuThreadExchangeStreamCaptureMode");
        let mut back = mode;
        sys::cuThreadExchangeStreamCaptureMode(&mut back).result().expect("cuThreadExchangeStreamCaptureMode back");
    }
    mode
}

/// Runs `calls` on this thread while a second thread holds a capture begun in global mode on a
/// raw stream of device 0's primary context (as PyTorch does), then ends that capture; reads
/// this thread's capture mode just before and after the calls.
pub fn during_a_global_capture<R>(calls: impl FnOnce() -> R) -> GlobalCapture<R> {
    let cuda = CudaContext::new(0).expect("cudarc opens device 0");
    let captured = cuda.new_stream().unwrap();
    let (begun, queried) = (Barrier::new(2), Barrier::new(2));
    let (mode_before, answers, mode_after, (begin, end)) = std::thread::scope(|s| {
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
        let answers = calls();
        let mode_after = this_threads_capture_mode();
        queried.wait();
        (mode_before, answers, mode_after, capturer.join().unwrap())
    });
    GlobalCapture { begun: begin, ended: end, answers, mode_before, mode_after }
}
