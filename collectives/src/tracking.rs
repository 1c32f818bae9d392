//! Stream-ordered buffer lifetimes for work this crate queues outside kernel launches (NCCL
//! calls): "this stream reads / writes this buffer".
//!
//! The host crate's per-buffer tracking (`Stream::will_use(&[BufferAccess::read(&x),
//! BufferAccess::write(&mut y)])`, on branch `host`) is not on this branch's base yet. Every
//! NCCL operation and the peer all-reduce already call these two functions before their work
//! is queued, so wiring it is a change here alone: the bodies become
//! `stream.will_use(&[ferrocuda_host::BufferAccess::read(view)])?; Ok(())` and
//! `stream.will_use(&[ferrocuda_host::BufferAccess::write(view)])?; Ok(())`.
//! Until then the buffers' own rules apply: a `DeviceBuffer` waits for its context's work when
//! dropped, and a stream-ordered one must only be used on its own stream.

use ferrocuda_host::{DeviceView, DeviceViewMut, Stream};

use crate::error::Result;

/// Records that work queued next on `stream` reads `view`.
pub(crate) fn will_read<T>(stream: &Stream, view: &DeviceView<'_, T>) -> Result<()> {
    let _ = (stream, view);
    Ok(())
}

/// Records that work queued next on `stream` writes `view`.
pub(crate) fn will_write<T>(stream: &Stream, view: &mut DeviceViewMut<'_, T>) -> Result<()> {
    let _ = (stream, view);
    Ok(())
}
