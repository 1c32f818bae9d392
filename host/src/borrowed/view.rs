//! Device memory owned by another library (a PyTorch tensor's storage, a cudarc `CudaSlice`),
//! borrowed for `'a` with ferrocuda's use tracking.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use bytemuck::Pod;
use cudarc::driver::sys;

use super::problem;
use crate::driver;
use crate::error::Result;
use crate::memory::usage::BufferUsage;
use crate::memory::view::{DeviceRead, DeviceView, DeviceViewMut, DeviceWrite, SliceArg};
use crate::stream::Stream;

/// `len` values of `T` in device memory another library owns, borrowed for `'a` to be read
/// (like a `&'a [T]`): pass `&slice` (or [`BorrowedSlice::view`]) to a `&[T]` kernel
/// parameter.
///
/// See the [module docs](super) for the home stream and the ordering with the owner's work.
pub struct BorrowedSlice<'a, T> {
    memory: Borrowed,
    _owner: PhantomData<&'a [T]>,
}

/// `len` values of `T` in device memory another library owns, borrowed for `'a` to be written
/// (like a `&'a mut [T]`): pass `&mut slice` (or [`BorrowedSliceMut::view_mut`]) to a
/// `DisjointSlice<T>` / `AtomicSlice<T>` kernel parameter.
pub struct BorrowedSliceMut<'a, T> {
    memory: Borrowed,
    _owner: PhantomData<&'a mut [T]>,
}

/// What both kinds hold: the range, its tracking, and the owner's stream.
struct Borrowed {
    ptr: u64,
    len: usize,
    /// Shared with a [`cudarc::Scope`](super::cudarc::Scope) that lent the memory: the scope
    /// orders the owner after ferrocuda's work when it ends, even if this value was leaked.
    usage: Arc<BufferUsage>,
    home: Stream,
}

impl<'a, T: Pod> BorrowedSlice<'a, T> {
    /// Borrows `len` values of `T` at device address `ptr` for reading. `home` is the owner's
    /// stream (a [`BorrowedStream`](super::BorrowedStream), a [`Stream::from_raw`], or a
    /// default stream): ferrocuda's first use on another stream waits for the work queued on it
    /// so far, and when the borrow ends it waits for ferrocuda's work.
    ///
    /// Checked, with an error that says what is wrong: the address is aligned for `T`, and the
    /// driver knows `ptr .. ptr + len * size_of::<T>()` as one allocation on `home`'s device.
    ///
    /// # Safety
    /// For `'a`: the range holds initialised memory of one allocation of `home`'s context (or
    /// one its kernels may access), which is not freed, and which nobody writes except through
    /// work ordered with ferrocuda's use: queued on `home` before this call, or after this
    /// value drops (on `home`, or after waiting for it), or ordered with events.
    ///
    /// Forgetting the value (`mem::forget`, an `Rc` cycle) means it never drops: the owner
    /// must then never again write (free) the memory except as ordered with events, since
    /// the ordering that the drop queues never happens. `borrowed::cudarc::scope` (feature
    /// `cudarc`) lends cudarc memory without this contract.
    pub unsafe fn new(home: &'a Stream, ptr: u64, len: usize) -> Result<Self> {
        Ok(BorrowedSlice { memory: Borrowed::new::<T>(home.clone(), ptr, len)?, _owner: PhantomData })
    }

    /// [`BorrowedSlice::new`] with a home stream that stays valid while any clone of it lives
    /// (the owner's own handle, [`Stream::from_raw`]), so the borrow needs no `&'a` of it.
    ///
    /// # Safety
    /// As for [`BorrowedSlice::new`].
    #[cfg_attr(not(feature = "cudarc"), allow(dead_code))] // used by the cudarc adapter
    pub(crate) unsafe fn with_home(home: Stream, ptr: u64, len: usize) -> Result<Self> {
        Ok(BorrowedSlice { memory: Borrowed::new::<T>(home, ptr, len)?, _owner: PhantomData })
    }
}

impl<'a, T: Pod> BorrowedSliceMut<'a, T> {
    /// Borrows `len` values of `T` at device address `ptr` for writing (and reading); `home`
    /// and the checks as for [`BorrowedSlice::new`].
    ///
    /// # Safety
    /// As for [`BorrowedSlice::new`], and besides, for `'a`, nobody reads the range either
    /// except through work ordered as said there, and no other borrow of it exists (from this
    /// or another call): as for a `&'a mut [T]`.
    pub unsafe fn new(home: &'a Stream, ptr: u64, len: usize) -> Result<Self> {
        Ok(BorrowedSliceMut { memory: Borrowed::new::<T>(home.clone(), ptr, len)?, _owner: PhantomData })
    }

    /// [`BorrowedSliceMut::new`] with a home stream valid while any clone lives (see
    /// [`BorrowedSlice::with_home`]).
    ///
    /// # Safety
    /// As for [`BorrowedSliceMut::new`].
    #[cfg_attr(not(feature = "cudarc"), allow(dead_code))] // used by the cudarc adapter
    pub(crate) unsafe fn with_home(home: Stream, ptr: u64, len: usize) -> Result<Self> {
        Ok(BorrowedSliceMut { memory: Borrowed::new::<T>(home, ptr, len)?, _owner: PhantomData })
    }

    /// A writable view of the whole range.
    pub fn view_mut(&mut self) -> DeviceViewMut<'_, T> {
        DeviceViewMut::from_tracked(self.memory.ptr, self.memory.len, &self.memory.usage)
    }
}

/// The accessors both kinds share.
macro_rules! common {
    ($ty:ident) => {
        impl<T> $ty<'_, T> {
            /// Number of elements.
            pub fn len(&self) -> usize {
                self.memory.len
            }
            /// True when it holds no elements.
            pub fn is_empty(&self) -> bool {
                self.memory.len == 0
            }
            /// The device address (the owner's, unchanged: nothing was copied).
            pub fn device_ptr(&self) -> u64 {
                self.memory.ptr
            }
            /// The owner's stream (see [`BorrowedSlice::new`]).
            pub fn home(&self) -> &Stream {
                &self.memory.home
            }
            /// A read-only view of the whole range.
            pub fn view(&self) -> DeviceView<'_, T> {
                DeviceView::from_tracked(self.memory.ptr, self.memory.len, &self.memory.usage)
            }
        }

        impl<T> fmt::Debug for $ty<'_, T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($ty)).field("ptr", &format_args!("{:#x}", self.memory.ptr)).field("len", &self.memory.len).finish()
            }
        }

        // SAFETY: the range was checked against the driver's allocation and is valid for the
        // borrow (the constructor's contract); the tracking is this borrow's own.
        unsafe impl<T> DeviceRead<T> for $ty<'_, T> {
            #[inline]
            fn kernel_arg(&self) -> SliceArg<'_> {
                SliceArg::tracked::<T>(self.memory.ptr, self.memory.len, &self.memory.usage)
            }
        }
    };
}
common!(BorrowedSlice);
common!(BorrowedSliceMut);

impl<T> BorrowedSlice<'_, T> {
    #[cfg_attr(not(feature = "cudarc"), allow(dead_code))]
    pub(super) fn shared(&self) -> (Arc<BufferUsage>, Stream) {
        self.memory.shared()
    }
}

impl<T> BorrowedSliceMut<'_, T> {
    #[cfg_attr(not(feature = "cudarc"), allow(dead_code))]
    pub(super) fn shared(&self) -> (Arc<BufferUsage>, Stream) {
        self.memory.shared()
    }
}

// SAFETY: as for `DeviceRead`; exclusive for the borrow (the constructor's contract), and the
// `&mut self` borrow keeps every other view of it out while the argument lives.
unsafe impl<T> DeviceWrite<T> for BorrowedSliceMut<'_, T> {
    #[inline]
    fn kernel_arg_mut(&mut self) -> SliceArg<'_> {
        SliceArg::tracked_mut::<T>(self.memory.ptr, self.memory.len, &self.memory.usage)
    }
}

impl Borrowed {
    fn new<T>(home: Stream, ptr: u64, len: usize) -> Result<Self> {
        let size = std::mem::size_of::<T>();
        let bytes = len.checked_mul(size).ok_or_else(|| problem(format!("{len} elements of {size} bytes do not fit in the address space")))?;
        if bytes > 0 {
            check_range(&home, ptr, bytes, std::mem::align_of::<T>(), std::any::type_name::<T>())?;
        }
        let usage = Arc::new(BufferUsage::lent(home.context(), home.clone()));
        Ok(Borrowed { ptr, len, usage, home })
    }
}

impl Borrowed {
    /// The record of ferrocuda's work on the memory and the home stream, for a scope that
    /// orders the owner after it ([`order_home_after`]).
    #[cfg_attr(not(feature = "cudarc"), allow(dead_code))] // used by the cudarc adapter
    fn shared(&self) -> (Arc<BufferUsage>, Stream) {
        (self.usage.clone(), self.home.clone())
    }
}

/// Makes the owner's later work on `home` wait for everything ferrocuda queued on the memory
/// `usage` tracks (the host waits instead where a wait cannot be queued).
///
/// While a stream that used the memory is captured, the owner is ordered after that stream's
/// work outside the capture (the point recorded when the capture began, never an event
/// recorded into it: issue 29's host item 1). Whenever neither the queued wait nor the host
/// wait can be made ([`after_failed_wait`]: that point is unknown; a timeout was reported and
/// the work still runs, audit 2026-11-27c F5; any other failure but a faulted context) nothing
/// orders the owner's later work (a write, a free) after a kernel that may still use the
/// memory, and the owner gets the memory back when this returns: the process is aborted with a
/// message instead. A faulted context, the one failure that may pass, leaves nothing running to
/// race.
pub(super) fn order_home_after(home: &Stream, usage: &BufferUsage) {
    for stream in usage.take_streams() {
        if home.wait_for(&stream).is_ok() {
            continue;
        }
        let waited = match stream.host_wait() {
            // Inside a door call's work, which waits for no stream lock (G15R-6): a plain wait
            // for all the stream's work (no lock; covers the work on the memory).
            Err(crate::Error::NestedDoorCall { .. }) => stream.synchronize(),
            other => other,
        };
        if let AfterFailedWait::Abort(why) = after_failed_wait(&waited) {
            eprintln!(
                "ferrocuda: a borrow of another library's memory ends (a cudarc scope, a borrowed slice's drop), and the owner's \
                 later work on it cannot be ordered after ferrocuda's: {why}. The owner would get the memory back (to write or \
                 free) while a kernel may still use it, so the process is aborted"
            );
            std::process::abort();
        }
    }
}

/// What the end of a borrow does when its home stream could not be made to wait for a stream
/// that used the memory, by the host wait's outcome ([`order_home_after`]; unit-tested).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum AfterFailedWait {
    /// The work is done, or the context faulted (nothing of it runs any more): the owner may
    /// have the memory back.
    HandBack,
    /// Nothing orders the owner after the work, which may still run: the process must end
    /// (why, and what to do, for the message).
    Abort(&'static str),
}

/// The rule of [`order_home_after`] after the queued wait failed: only a finished wait or a
/// faulted context hand the memory back; every other failure (F5: `WorkStillRunning` after a
/// reported timeout while the home stream is captured by its owner) cannot order.
pub(super) fn after_failed_wait(host_wait: &Result<()>) -> AfterFailedWait {
    use crate::Error;
    match host_wait {
        Ok(()) => AfterFailedWait::HandBack,
        Err(Error::KernelPanic { .. } | Error::StackLimitFault { .. } | Error::ProcessPoisoned { .. }) => AfterFailedWait::HandBack,
        Err(Error::Driver(error)) if error.is_sticky() => AfterFailedWait::HandBack,
        Err(Error::OrderingAfterCapture { .. }) => AfterFailedWait::Abort(
            "a stream that used it is being captured, and the work it queued outside the capture cannot be named (another \
             thread queued work on it while the capture began). End captures before the scope ends, and do not queue work \
             on a stream from one thread while another begins capturing it",
        ),
        Err(Error::WorkStillRunning { .. }) => AfterFailedWait::Abort(
            "`Stream::synchronize_timeout` reported ferrocuda's work on it as still running, so the host does not wait for \
             it, and the home stream cannot queue a wait (its owner is capturing it, or it failed). Wait for the work \
             (`Context::synchronize()`, `Stream::synchronize()`) before the scope ends, and do not capture the home stream \
             inside the scope",
        ),
        Err(_) => AfterFailedWait::Abort(
            "neither the home stream's wait nor the host's wait for the work could be made. Wait for the work \
             (`Stream::synchronize()`) before the scope ends, and do not capture the home stream inside the scope",
        ),
    }
}

impl Drop for Borrowed {
    /// The owner's later work on its home stream waits for everything ferrocuda queued on the
    /// memory. The constructors' contract is written for a value that may never drop
    /// (`mem::forget`): safe code gets borrowed memory only from a scope that does this
    /// ordering itself when it ends ([`cudarc::scope`](super::cudarc::scope)).
    fn drop(&mut self) {
        order_home_after(&self.home, &self.usage);
    }
}

/// Checks `ptr .. ptr + bytes` with the driver: aligned to `align`, device memory (not host
/// memory) of `home`'s device, within one allocation where the driver reports its extent.
fn check_range(home: &Stream, ptr: u64, bytes: usize, align: usize, type_name: &str) -> Result<()> {
    if ptr == 0 {
        return Err(problem(format!("a borrowed range of {bytes} bytes cannot start at address 0")));
    }
    if !ptr.is_multiple_of(align as u64) {
        return Err(problem(format!("device address {ptr:#x} is not aligned for {type_name} ({align} bytes): borrow it as bytes, or fix the offset")));
    }
    let context = home.context();
    let _bound = context.bind()?;
    let not_device = |e| problem(format!("address {ptr:#x} is not device memory the driver knows ({e}); host data must be copied first"));
    use sys::CUpointer_attribute as A;
    let mut memory_type = 0u32;
    let mut ordinal = 0i32;
    // SAFETY: each call writes one value of the attribute's documented type (an unsigned int
    // for the memory type, an int for the ordinal); `ptr` is only looked up.
    unsafe {
        driver::memory::pointer_get_attribute((&mut memory_type as *mut u32).cast(), A::CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr).map_err(not_device)?;
        driver::memory::pointer_get_attribute((&mut ordinal as *mut i32).cast(), A::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr).map_err(not_device)?;
    }
    if memory_type != sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32 {
        return Err(problem(format!("address {ptr:#x} is host memory (CUmemorytype {memory_type}), not device memory: copy it to the device first")));
    }
    let device = context.device().ordinal();
    if ordinal as usize != device {
        return Err(problem(format!(
            "address {ptr:#x} is memory of device {ordinal}, but the home stream is on device {device}: borrow it with a stream of device {ordinal}"
        )));
    }
    // The allocation's context (E1, audit 2026-11-27e): memory of another context on the same
    // device passes the device check above, but its owner's work runs in that context, which
    // nothing made in `home`'s context orders (a stream of one context cannot wait for an event
    // of another), and the use record would name the wrong context for every later check.
    // Memory that belongs to no one context (a memory pool's, virtual memory mapped with
    // `cuMemMap`) reports none: then the constructor's contract covers it.
    let mut owner: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: as above (a CUcontext); only looked up.
    let owner_known =
        unsafe { driver::memory::pointer_get_attribute((&mut owner as *mut sys::CUcontext).cast(), A::CU_POINTER_ATTRIBUTE_CONTEXT, ptr) }.is_ok();
    if owner_known {
        check_same_context(ptr, owner, context.raw())?;
    }
    let (mut start, mut size): (u64, usize) = (0, 0);
    // SAFETY: as above (a CUdeviceptr, a size_t).
    let range = unsafe {
        driver::memory::pointer_get_attribute((&mut start as *mut u64).cast(), A::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, ptr)
            .and_then(|()| driver::memory::pointer_get_attribute((&mut size as *mut usize).cast(), A::CU_POINTER_ATTRIBUTE_RANGE_SIZE, ptr))
    };
    // Where the driver does not report the allocation's extent, the length is the caller's
    // word (the constructor's contract).
    if range.is_ok() && ptr.checked_add(bytes as u64).is_none_or(|end| end > start + size as u64) {
        return Err(problem(format!(
            "{bytes} bytes at {ptr:#x} run past the end of their allocation ({size} bytes at {start:#x}): the length is wrong, or the memory belongs to another owner"
        )));
    }
    Ok(())
}

/// Refuses memory at `ptr` whose allocation belongs to context `owner` (as the driver reports
/// it; null: no one context) when the home stream's context is `home`: E1 (audit 2026-11-27e).
pub(super) fn check_same_context(ptr: u64, owner: sys::CUcontext, home: sys::CUcontext) -> Result<()> {
    if owner.is_null() || owner == home {
        return Ok(());
    }
    Err(problem(format!(
        "address {ptr:#x} is memory of context {owner:p}, but the home stream belongs to context {home:p}: borrow it with a \
         stream of the memory's own context (for cudarc, `slice.stream()` or another stream of `slice.stream().context()`)"
    )))
}
