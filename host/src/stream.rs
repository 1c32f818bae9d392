//! Streams and events.

use cudarc::driver::sys;

use crate::context::Context;
use crate::driver::check;
use crate::error::{Error, Result};

/// A queue of work on one context. [`Stream::default_of`] is CUDA's legacy default stream.
pub struct Stream {
    raw: sys::CUstream,
    context: Context,
    owned: bool,
}

// SAFETY: a CUstream may be used from any thread that binds its context; every use binds it.
unsafe impl Send for Stream {}
// SAFETY: as above; the driver serialises work submitted to one stream.
unsafe impl Sync for Stream {}

impl Stream {
    /// A new stream, ordered with the legacy default stream like `cudaStreamCreate`'s: the
    /// synchronous copies of [`DeviceBuffer`](crate::DeviceBuffer) (which run there) finish
    /// before later launches on it start, and wait for earlier ones.
    pub fn new(context: &Context) -> Result<Self> {
        Self::with_flags(context, sys::CUstream_flags::CU_STREAM_DEFAULT)
    }

    /// A new stream that does not synchronise with the legacy default stream: order its work
    /// against synchronous copies yourself (for example with [`Stream::synchronize`]).
    pub fn non_blocking(context: &Context) -> Result<Self> {
        Self::with_flags(context, sys::CUstream_flags::CU_STREAM_NON_BLOCKING)
    }

    fn with_flags(context: &Context, flags: sys::CUstream_flags) -> Result<Self> {
        context.bind_to_thread()?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: writes one handle; destroyed in Drop.
        check("cuStreamCreate", unsafe { sys::cuStreamCreate(&mut raw, flags as u32) })?;
        Ok(Stream { raw, context: context.clone(), owned: true })
    }

    /// The legacy default stream (`0` in CUDA) of `context`.
    pub fn default_of(context: &Context) -> Self {
        Stream { raw: std::ptr::null_mut(), context: context.clone(), owned: false }
    }

    /// The legacy default stream of the calling thread's current context.
    pub fn current_default() -> Result<Self> {
        Context::current().map(|c| Self::default_of(&c)).ok_or(Error::NoCurrentContext)
    }

    /// Waits for all work queued so far; reports a kernel fault if one happened.
    pub fn synchronize(&self) -> Result<()> {
        self.context.bind_to_thread()?;
        // SAFETY: the stream is alive.
        check("cuStreamSynchronize", unsafe { sys::cuStreamSynchronize(self.raw) })?;
        Ok(())
    }

    /// The stream's context.
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// The raw `CUstream` (null for the default stream).
    pub fn raw(&self) -> sys::CUstream {
        self.raw
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.owned && self.context.bind_to_thread().is_ok() {
            // SAFETY: created by us, destroyed once; queued work still completes.
            unsafe { sys::cuStreamDestroy_v2(self.raw) };
        }
    }
}

/// A point in a stream, for timing and waiting.
pub struct Event {
    raw: sys::CUevent,
    context: Context,
}

impl Event {
    /// A new event that records timing.
    pub fn new(context: &Context) -> Result<Self> {
        context.bind_to_thread()?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: writes one handle; destroyed in Drop.
        check("cuEventCreate", unsafe { sys::cuEventCreate(&mut raw, sys::CUevent_flags::CU_EVENT_DEFAULT as u32) })?;
        Ok(Event { raw, context: context.clone() })
    }

    /// Records the event at the current end of `stream`.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        self.context.bind_to_thread()?;
        // SAFETY: both handles are alive.
        check("cuEventRecord", unsafe { sys::cuEventRecord(self.raw, stream.raw()) })?;
        Ok(())
    }

    /// Waits for the event.
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: the event is alive.
        check("cuEventSynchronize", unsafe { sys::cuEventSynchronize(self.raw) })?;
        Ok(())
    }

    /// Milliseconds from `self` to `end` (both recorded and completed).
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32> {
        let mut ms = 0.0;
        // SAFETY: writes one float.
        check("cuEventElapsedTime", unsafe { sys::cuEventElapsedTime_v2(&mut ms, self.raw, end.raw) })?;
        Ok(ms)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if self.context.bind_to_thread().is_ok() {
            // SAFETY: created by us, destroyed once.
            unsafe { sys::cuEventDestroy_v2(self.raw) };
        }
    }
}
