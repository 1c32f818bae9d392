//! Borrowing what other libraries own: their context, their stream, their device memory, so
//! that ferrocuda kernels run on a PyTorch tensor, a candle or cudarc buffer, or any CUDA
//! allocation, without a copy.
//!
//! Everything works at the level of raw driver handles (`CUcontext`, `CUstream`, a device
//! address), so no version of another crate is forced on you; the `cudarc` feature adds an
//! adapter for cudarc 0.19 (`borrowed::cudarc`, which candle 0.11 is built on).
//!
//! | borrowed thing | constructor | tied to its owner by |
//! |---|---|---|
//! | context | [`BorrowedContext::new`] (unsafe), [`Context::from_raw`] (unsafe) | the lifetime `'a`, or a keep-alive value |
//! | stream | [`BorrowedStream::new`] (unsafe), [`Stream::from_raw`] (unsafe) | the lifetime `'a`, or a keep-alive value |
//! | device memory | [`BorrowedSlice::new`], [`BorrowedSliceMut::new`] (unsafe) | the lifetime `'a` |
//!
//! The constructors are `unsafe` because ferrocuda cannot see who owns a raw handle; each
//! states its contract under `# Safety` and checks what the driver can check (the stream's
//! context, the allocation's device and extent, alignment) before anything runs. Once made,
//! they are used like ferrocuda's own: a launch on a borrowed stream, or on borrowed memory,
//! is a safe call, `saxpy::launch(&stream, config, a, &x, &mut y)`.
//!
//! # What the tracking covers, and what it cannot see
//! Borrowed memory gets the same use tracking as a [`DeviceBuffer`](crate::DeviceBuffer)
//! ([`BufferUsage`](crate::BufferUsage)): work that ferrocuda queues on it, on any stream, is
//! ordered with ferrocuda's other work on it. What the tracking cannot see is the owner's own
//! work. Every borrowed allocation therefore has a *home stream*, the owner's stream (for
//! PyTorch its current stream, for cudarc the slice's stream):
//! - at the first use on another stream, that stream waits for everything queued on the home
//!   stream so far (the owner's work before the borrow included);
//! - when the borrow ends, the home stream waits for every stream ferrocuda used it on, so the
//!   owner's later work on its stream, its stream-ordered free included, comes after ours.
//!
//! Work the owner queues on *other* streams, or at any time during the borrow, is the owner's
//! to order, with events: [`Stream::wait_event`] / [`Stream::wait_raw_event`] on an event the
//! owner recorded, and [`Event::record`](crate::Event::record) on our stream, whose
//! [`Event::raw`](crate::Event::raw) the owner waits on (`cudaStreamWaitEvent`). The cudarc
//! adapter does this for you with cudarc's own per-buffer events.
//!
//! # Why borrowed handles cannot dangle
//! A ferrocuda [`Stream`] is cloned by the buffer tracking (a buffer remembers the streams
//! that used it) and can be cloned by the caller, so a clone may outlive any lifetime. Hence:
//! - [`BorrowedStream`] never hands out the owner's handle: its work goes to a stream of
//!   ferrocuda's own, joined to the owner's with events both ways (at the start it waits for
//!   the owner's stream; when dropped, the owner's stream waits for it). Clones of it are
//!   ferrocuda's stream, valid for as long as they live. Launches cost the same as on any
//!   stream of ours; the borrow itself costs a stream and an event.
//! - [`Stream::from_raw`] uses the owner's handle itself, so its contract asks the handle to
//!   stay valid while any clone lives, which a keep-alive value (an `Arc` of the owner's
//!   stream object) or a handle that lives for the whole process (the legacy default stream,
//!   PyTorch's pooled streams) guarantees. `CU_STREAM_PER_THREAD` is refused there
//!   ([`Error::PerThreadStream`](crate::Error::PerThreadStream), D1): it names a different
//!   stream on each host thread, while a `Stream` is one stream to the buffer records on every
//!   thread; [`BorrowedStream`] borrows it for the calling thread.
//! - [`BorrowedContext`] of a context that is not a device's primary context checks, when
//!   dropped, that nothing made in it survives; if something does (a stream, buffer, module
//!   or event), it aborts the process with a message rather than let the owner destroy the
//!   context under it. A primary context is retained instead (`Context::primary`): it stays
//!   valid while any handle lives, whoever else releases it.
//! - Borrowed memory is reached only through [`BorrowedSlice`] / [`BorrowedSliceMut`], which
//!   borrow their home stream for `'a`; their views borrow them like a `&[T]` / `&mut [T]`.
//!
//! Streams being captured into a CUDA graph cannot be borrowed (an error says so): the
//! ordering above would add waits on work outside the capture.

mod context;
mod stream;
mod view;

#[cfg(feature = "cudarc")]
pub mod cudarc;

pub use context::BorrowedContext;
pub use stream::BorrowedStream;
pub use view::{BorrowedSlice, BorrowedSliceMut};

#[cfg(doc)]
use crate::{Context, Stream};

/// The error for something borrowed that does not fit.
fn problem(message: impl Into<String>) -> crate::Error {
    crate::Error::BorrowedHandle { problem: message.into() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Context, Error};

    /// CI has no driver: the constructors report that first, before looking at the handles.
    #[test]
    fn without_a_driver_borrowing_reports_no_driver() {
        if crate::driver_present() {
            return; // checked on machines without a driver (CI); gpu_borrowed.rs covers the rest
        }
        // SAFETY: refused before the handle is used (no driver).
        assert!(matches!(unsafe { BorrowedContext::new(std::ptr::null_mut()) }, Err(Error::NoDriver)));
        // SAFETY: as above.
        assert!(matches!(unsafe { Context::from_raw(std::ptr::null_mut(), ()) }, Err(Error::NoDriver)));
    }

    #[test]
    fn borrowing_errors_say_what_is_wrong_and_what_to_do() {
        let message = problem("device address 0x2 is not aligned for f32 (4 bytes): borrow it as bytes, or fix the offset").to_string();
        assert!(message.contains("not aligned") && message.contains("fix the offset"), "{message}");
    }

    /// E1 (audit 2026-11-27e): memory whose allocation the driver reports in another context
    /// than the home stream's is refused by name (both contexts named, and what to do); memory
    /// of no one context (a pool's) and of the same context pass.
    #[test]
    fn e1_memory_of_another_context_than_the_home_streams_is_refused() {
        let (a, b) = (0x1000 as crate::sys::CUcontext, 0x2000 as crate::sys::CUcontext);
        assert!(view::check_same_context(0x7000, a, a).is_ok());
        assert!(view::check_same_context(0x7000, std::ptr::null_mut(), a).is_ok());
        let message = view::check_same_context(0x7000, a, b).unwrap_err().to_string();
        assert!(message.contains("0x7000 is memory of context 0x1000") && message.contains("home stream belongs to context 0x2000"), "{message}");
        assert!(message.contains("stream of the memory's own context"), "{message}");
    }

    /// F5 (audit 2026-11-27c): when the home stream cannot queue the wait (its owner captures
    /// it), a host wait refused after a reported timeout (`WorkStillRunning`) must not hand the
    /// memory back as if ordered: it was the path on which a cudarc scope returned while the
    /// kernel still wrote the slice. Only a finished wait or a faulted context hand it back.
    #[test]
    fn f5_a_borrow_never_ends_unordered_when_the_host_wait_is_refused_after_a_timeout() {
        use ::cudarc::driver::sys::CUresult;

        use super::view::{AfterFailedWait, after_failed_wait};
        let driver = |code| crate::driver::DriverError { call: "cuEventSynchronize", code };
        let still_running = after_failed_wait(&Err(Error::WorkStillRunning { operation: "a release's wait for a stream" }));
        let AfterFailedWait::Abort(why) = still_running else { panic!("WorkStillRunning handed the memory back: {still_running:?}") };
        assert!(why.contains("synchronize_timeout") && why.contains("Context::synchronize()"), "{why}");
        assert!(matches!(after_failed_wait(&Err(Error::OrderingAfterCapture { operation: "x" })), AfterFailedWait::Abort(_)));
        // Any other failure cannot order either (a non-sticky driver error, a foreign capture).
        assert!(matches!(after_failed_wait(&Err(Error::Driver(driver(CUresult::CUDA_ERROR_NOT_READY)))), AfterFailedWait::Abort(_)));
        assert!(matches!(after_failed_wait(&Err(Error::CaptureOfBorrowedStream)), AfterFailedWait::Abort(_)));
        // A finished wait, or a faulted context (nothing of the work runs any more), hands back.
        assert_eq!(after_failed_wait(&Ok(())), AfterFailedWait::HandBack);
        assert_eq!(after_failed_wait(&Err(Error::Driver(driver(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS)))), AfterFailedWait::HandBack);
        assert_eq!(after_failed_wait(&Err(Error::ProcessPoisoned { source: driver(CUresult::CUDA_ERROR_LAUNCH_FAILED) })), AfterFailedWait::HandBack);
    }

    /// G16S-1 (audit 2026-11-28d review3): a `BorrowedStream`'s end whose join back was refused
    /// falls back to a host wait (`Stream::synchronize`), and hands the owner's stream back only
    /// when that wait finished or the context faulted; the waits a host callback or a capture
    /// refuse (the driver's `CUDA_ERROR_NOT_PERMITTED`, a capture's
    /// `CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED`, ferrocuda's own refusals) abort instead of handing
    /// it back unordered, as the drop used to (it dropped the wait's error). Inside a callback
    /// the drop aborts before any call (GPU: `g16s_1_*` in `host/tests/gpu_g16s.rs`).
    #[test]
    fn g16s_1_a_borrowed_streams_end_never_hands_the_owner_back_after_a_refused_wait() {
        use ::cudarc::driver::sys::CUresult;

        use super::view::{AfterFailedWait, after_failed_wait};
        let driver = |code| crate::driver::DriverError { call: "cuStreamSynchronize", code };
        for refused in [
            Error::Driver(driver(CUresult::CUDA_ERROR_NOT_PERMITTED)),
            Error::Driver(driver(CUresult::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)),
            Error::Driver(driver(CUresult::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)),
            Error::CallInHostCallback { operation: "BorrowedStream::drop".to_string() },
            Error::NestedDoorCall { operation: "BorrowedStream::drop".to_string() },
        ] {
            let after = after_failed_wait(&Err(refused));
            assert!(matches!(after, AfterFailedWait::Abort(_)), "a refused wait handed the owner's stream back: {after:?}");
        }
        assert_eq!(after_failed_wait(&Ok(())), AfterFailedWait::HandBack);
    }
}
