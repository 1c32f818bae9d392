//! Stream-ordered buffer lifetimes for work this crate queues outside kernel launches (NCCL
//! calls and the peer all-reduce): "this stream reads / writes this buffer", through the host
//! crate's per-buffer tracking (`Stream::will_use_for`). Called around the queuing of the work, it checks
//! the buffer's context, makes the stream wait for the buffer's earlier work on other streams,
//! and records the stream as its user (so drops free stream-ordered and host copies wait).

use ferrocuda_host::{BufferAccess, BufferUsage, DeviceView, DeviceViewMut, Stream};

use crate::error::Result;

/// Runs `work`, which queues work on `stream` that reads `input`, writes `output` and reads
/// and writes the library state that `state` records, through raw pointers, after declaring
/// those accesses, and holds the declaration until `work` returns ([`Stream::will_use_for`]):
/// views that other threads may use at once (the halves of a split buffer) cannot have another
/// thread's declaration slip in between, which would leave the work out of their record (audit
/// 2026-11-27d, D2). The state's declaration orders calls on different streams (audit
/// 2026-11-28, G13-2).
pub(crate) fn reading_writing<T, R>(
    stream: &Stream,
    input: &DeviceView<'_, T>,
    output: &mut DeviceViewMut<'_, T>,
    state: &BufferUsage,
    work: impl FnOnce() -> R,
) -> Result<R> {
    Ok(stream.will_use_for(&[BufferAccess::read(input), BufferAccess::write(output), BufferAccess::library_state(state)], work)?)
}
