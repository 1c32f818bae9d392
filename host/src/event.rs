//! Events: points in a stream, for timing and for ordering other streams and the host.
//!
//! Driver reference: [event management](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__EVENT.html).

use cudarc::driver::sys;

use crate::context::{Context, Handle};
use crate::driver;
use crate::error::{Error, Result};
use crate::stream::{Stream, not_ready_is_false};

/// A point in a stream, for timing and waiting.
pub struct Event {
    raw: sys::CUevent,
    context: Context,
}

// SAFETY: a CUevent may be used from any thread; calls that need a context bind it.
unsafe impl Send for Event {}
// SAFETY: as above; the driver synchronises concurrent use of one event.
unsafe impl Sync for Event {}

impl Event {
    /// A new event that records timing (for [`Event::elapsed_ms`]).
    pub fn new(context: &Context) -> Result<Self> {
        Self::with_flags(context, sys::CUevent_flags::CU_EVENT_DEFAULT as u32)
    }

    /// A new event without timing: cheaper to record and wait on, for ordering only.
    pub fn without_timing(context: &Context) -> Result<Self> {
        Self::with_flags(context, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32)
    }

    fn with_flags(context: &Context, flags: u32) -> Result<Self> {
        context.bind_to_thread()?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: writes one handle; destroyed in Drop.
        unsafe { driver::event::create(&mut raw, flags) }?;
        Ok(Event { raw, context: context.clone() })
    }

    /// Records the event at the current end of `stream`, a stream of the event's context
    /// (else [`Error::StreamInOtherContext`]: the driver would answer `CUDA_ERROR_INVALID_HANDLE`).
    pub fn record(&self, stream: &Stream) -> Result<()> {
        if stream.context().raw() != self.context.raw() {
            return Err(Error::StreamInOtherContext { operation: "Event::record" });
        }
        let event = self.raw;
        // SAFETY: both handles are alive and of one context (checked above).
        stream.enqueue("cuEventRecord", &[], |s| Ok(unsafe { driver::event::record(event, s.get()) }?))
    }

    /// Waits for the event.
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: the event is alive.
        unsafe { driver::event::synchronize(self.raw) }?;
        Ok(())
    }

    /// True when the work before the event has finished (or it was never recorded). Never blocks.
    pub fn is_complete(&self) -> Result<bool> {
        // SAFETY: the event is alive.
        not_ready_is_false(unsafe { driver::event::query(self.raw) })
    }

    /// Milliseconds from `self` to `end` (both recorded and completed).
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32> {
        let mut ms = 0.0;
        // SAFETY: writes one float.
        unsafe { driver::event::elapsed_time(&mut ms, self.raw, end.raw) }?;
        Ok(ms)
    }

    /// The raw `CUevent`.
    pub fn raw(&self) -> sys::CUevent {
        self.raw
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        let event = Handle(self.raw);
        self.context.release(crate::context::Released::Event, move |context| {
            if context.bind_to_thread().is_ok() {
                // SAFETY: created by us, destroyed once.
                let _ = unsafe { driver::event::destroy(event.into_inner()) };
            }
        });
    }
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event").field("raw", &self.raw).finish()
    }
}

/// Event ordering on a stream lives here, with the event.
impl Stream {
    /// Makes later work on this stream wait until `event` (recorded on any stream of the same
    /// context, or of a peer) has completed. The host does not wait.
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        // Waiting on an event recorded in a capture joins this stream to it: not while another
        // thread checks this stream for captures (P2).
        let _gate = self.capture_gate_exclusive();
        let event = event.raw;
        // SAFETY: both handles are alive; flags must be 0 (CU_EVENT_WAIT_DEFAULT).
        self.enqueue("cuStreamWaitEvent", &[], |s| Ok(unsafe { driver::stream::wait_event(s.get(), event, 0) }?))
    }
}
