//! This thread in the driver's relaxed stream-capture mode, for the waits and queries of work
//! that is in no capture (`Event::is_complete`/`synchronize`, session 19; `Stream::synchronize`/
//! `is_idle`, session 20). Here, under `stream`, so that `event` (which imports `stream`) and
//! `stream` both use it without an import cycle.

use cudarc::driver::sys;

use crate::driver;

/// This thread in the driver's relaxed stream-capture mode while the value lives
/// (`cuThreadExchangeStreamCaptureMode`): a capture in global mode on another thread then does
/// not refuse this thread's "potentially unsafe" calls (an event query) nor get invalidated by
/// them. Only for calls on objects that are in no capture. The previous mode is put back on
/// drop; a failed exchange leaves the mode as it was (the query then meets the driver's check,
/// as before).
///
/// [CUDA driver API: `cuThreadExchangeStreamCaptureMode`](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__STREAM.html).
pub(crate) struct RelaxedCaptureMode(Option<sys::CUstreamCaptureMode>);

impl RelaxedCaptureMode {
    pub(crate) fn enter() -> Self {
        let mut mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
        // SAFETY: swaps this thread's mode with the value given; writes one enum value.
        let swapped = unsafe { driver::stream::exchange_capture_mode(&mut mode) };
        RelaxedCaptureMode(swapped.ok().map(|()| mode))
    }
}

impl Drop for RelaxedCaptureMode {
    fn drop(&mut self) {
        if let Some(mut previous) = self.0.take() {
            // SAFETY: as in `enter`: puts this thread's previous mode back.
            let _ = unsafe { driver::stream::exchange_capture_mode(&mut previous) };
        }
    }
}
