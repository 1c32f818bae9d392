//! Stream-ordered buffer lifetimes for work this crate queues outside kernel launches (NCCL
//! calls and the peer all-reduce): "this stream reads / writes this buffer", through the host
//! crate's per-buffer tracking (`Stream::will_use`). Called before the work is queued, it checks
//! the buffer's context, makes the stream wait for the buffer's earlier work on other streams,
//! and records the stream as its user (so drops free stream-ordered and host copies wait).

use ferrocuda_host::{BufferAccess, DeviceView, DeviceViewMut, Stream};

use crate::error::Result;

/// Records that work queued next on `stream` reads `view`.
pub(crate) fn will_read<T>(stream: &Stream, view: &DeviceView<'_, T>) -> Result<()> {
    stream.will_use(&[BufferAccess::read(view)])?;
    Ok(())
}

/// Records that work queued next on `stream` writes `view`.
pub(crate) fn will_write<T>(stream: &Stream, view: &mut DeviceViewMut<'_, T>) -> Result<()> {
    stream.will_use(&[BufferAccess::write(view)])?;
    Ok(())
}
