//! The cudarc 0.19 adapter (feature `cudarc`): cudarc's contexts, streams and slices as
//! ferrocuda's, with cudarc's own per-buffer events honoured. candle 0.11's CUDA device is
//! built on these types (`CudaDevice::cuda_stream()`, `CudaStorage::as_cuda_slice()`).
//!
//! ```ignore
//! let ctx = cudarc::driver::CudaContext::new(0)?;
//! let cu_stream = ctx.default_stream();
//! let x = cu_stream.clone_htod(&[1.0f32; 1024])?;
//! let mut y = cu_stream.alloc_zeros::<f32>(1024)?;
//! let stream = borrowed::cudarc::stream(&cu_stream)?;            // the same CUstream
//! borrowed::cudarc::scope(|scope| {
//!     let (xs, mut ys) = (scope.slice(&x, &cu_stream)?, scope.slice_mut(&mut y, &cu_stream)?);
//!     saxpy::launch(&stream, LaunchConfig::for_elements(1024, 256), 2.0, &xs, &mut ys)
//! })?; // cudarc's events now cover the launch: cudarc may use x and y again
//! ```
//!
//! cudarc keeps a read and a write event per slice when its context tracks events on several
//! streams ([`CudaContext::is_managing_stream_synchronization`](cudarc::driver::CudaContext::is_managing_stream_synchronization)).
//! [`Scope::slice`] and [`Scope::slice_mut`] go through cudarc's own `DevicePtr::device_ptr` /
//! `DevicePtrMut::device_ptr_mut` on the stream you name: that stream first waits for the
//! slice's earlier writes (and reads, for a write), and when the [`scope()`] ends, after the
//! stream waited for ferrocuda's work on the slice, cudarc records the slice's read (write)
//! event there, so cudarc's later work on any stream waits for ours.
//!
//! Why a scope and not a guard (P3): a guard's `Drop` can be skipped by safe code
//! (`mem::forget`), and the ordering above would then never happen while cudarc's borrow of
//! the slice had ended. The scope performs it in its own frame after the closure, so it
//! happens whatever the closure does with what it was lent. The guard forms [`slice()`] and
//! [`slice_mut()`] remain, `unsafe`, with "drop the guard" as their contract.

use std::cell::RefCell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, Weak};

use bytemuck::Pod;
use cudarc::driver::{CudaContext, CudaStream, DevicePtr, DevicePtrMut, DeviceSlice, SyncOnDrop};

use super::view::order_home_after;
use super::{BorrowedSlice, BorrowedSliceMut, problem};
use crate::context::Context;
use crate::error::Result;
use crate::stream::Stream;

/// cudarc's context as a ferrocuda [`Context`] (the same `CUcontext`): the primary context
/// for `CudaContext::new`, else one kept alive by a clone of the `Arc`.
///
/// A primary context's ferrocuda handle is cached while `ctx` (that `CudaContext`) lives, so
/// that the code one writes naturally, `stream(&cu_stream)` in every call of an op, pays for
/// ferrocuda's per-context setup once: the embedded kernels are loaded (every kernel's code
/// and check tables read) into a ferrocuda context handle once, and its teardown (a
/// context-wide synchronisation, the modules unloaded) runs when the last handle drops.
/// Without the cache each call made and dropped the only handle, paying both every time
/// (about 3 ms a call on an H200, measured through candle's CustomOps). The cached handle
/// retains the primary context on ferrocuda's own account; it is dropped at the first lookup
/// after every `Arc` of `ctx` dropped, or by [`forget_cached_contexts`].
///
/// A non-primary context (`CudaContext::new_non_primary`) is not cached (a cached handle would
/// keep cudarc's context alive for ever): keep the [`Context`] this returns and use
/// [`stream_in`] to pay the setup once.
pub fn context(ctx: &Arc<CudaContext>) -> Result<Context> {
    let context = lock(&CACHED).get_or_adopt(ctx, || {
        // SAFETY: the CudaContext stays valid while the Arc clone held as keep-alive lives.
        let context = unsafe { Context::from_raw(ctx.cu_ctx(), ctx.clone()) }?;
        let cache = context.is_primary();
        Ok((context, cache))
    });
    let (context, stale) = context;
    drop(stale); // outside the lock: dropping a last handle waits for its context's work
    // Not bound here (session 21, G20R-4's class; session 22 for a primary context): cudarc
    // makes its context current before each of its own calls, and ferrocuda's calls bind it for
    // theirs and restore what was current.
    context
}

/// Drops the primary-context handles [`context`] cached for cudarc contexts (each is dropped
/// anyway at the first lookup after its cudarc context dropped). For a program that drops its
/// cudarc (candle) devices and wants ferrocuda's hold on their primary contexts released now,
/// or that calls [`Context::recover`] (which needs every other handle of the primary context
/// gone). The next lookup loads the kernels again.
pub fn forget_cached_contexts() {
    let stale = std::mem::take(&mut lock(&CACHED).entries);
    drop(stale);
}

/// The ferrocuda handles of cudarc's primary contexts, while those live (see [`context`]). Each
/// holds its context (retained) and that context's own state (modules, panic record): no driver
/// object made in one context serves another (G22S-2's audit, docs/host-safety.md).
static CACHED: Mutex<Cache<CudaContext, Context>> = Mutex::new(Cache { entries: Vec::new() });

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Values (ferrocuda handles) kept while their owners (cudarc contexts) live.
struct Cache<O, V> {
    entries: Vec<(Weak<O>, V)>,
}

impl<O, V: Clone> Cache<O, V> {
    /// The value cached for `owner`, else one made by `make` (cached when it says so). Also
    /// returns the values of owners that are gone, taken out of the cache, for the caller to
    /// drop outside the cache's lock.
    fn get_or_adopt(&mut self, owner: &Arc<O>, make: impl FnOnce() -> Result<(V, bool)>) -> (Result<V>, Vec<V>) {
        let mut stale = Vec::new();
        let mut index = 0;
        while index < self.entries.len() {
            if self.entries[index].0.strong_count() == 0 {
                stale.push(self.entries.swap_remove(index).1);
            } else {
                index += 1;
            }
        }
        // A live `Weak` keeps its allocation, so a new owner never shares a cached owner's address.
        if let Some((_, value)) = self.entries.iter().find(|(weak, _)| std::ptr::eq(weak.as_ptr(), Arc::as_ptr(owner))) {
            return (Ok(value.clone()), stale);
        }
        let made = make().map(|(value, cache)| {
            if cache {
                self.entries.push((Arc::downgrade(owner), value.clone()));
            }
            value
        });
        (made, stale)
    }
}

/// cudarc's stream as a ferrocuda [`Stream`]: the same `CUstream` (work queued on it runs on
/// cudarc's stream), kept alive by a clone of the `Arc`. Its context comes from [`context`]
/// (cached for a primary context: calling this once per op costs a lookup, not a kernel load).
pub fn stream(stream: &Arc<CudaStream>) -> Result<Stream> {
    stream_in(&context(stream.context())?, stream)
}

/// [`stream`] in a [`Context`] you already have for the stream's context (saves looking the
/// context up; a non-primary context's ferrocuda handle then loads kernels once, not per call).
pub fn stream_in(context: &Context, stream: &Arc<CudaStream>) -> Result<Stream> {
    if stream.context().cu_ctx() != context.raw() {
        return Err(problem("the cudarc stream belongs to another context than the ferrocuda one given: use `borrowed::cudarc::context(stream.context())`"));
    }
    // SAFETY: a stream of `context` (checked), valid while the Arc clone kept with it lives
    // (cudarc destroys a stream when its last Arc drops; a stream cudarc only wraps, its
    // owner keeps alive while the wrapper lives: `CudaContext::wrap_borrowed_stream`'s contract).
    unsafe { Stream::from_raw(context, stream.cu_stream(), stream.clone()) }
}

/// Refuses a home stream `on` of another context than the slice's (E1, audit 2026-11-27e):
/// the use record would belong to `on`'s context, a launch there would be let through to
/// memory of another context, and at the end of the borrow cudarc's events of the slice's
/// context would be recorded on (or waited for by) a stream of another context, which orders
/// nothing. Checked before cudarc is asked for the pointer (which already joins `on`).
fn check_home_context<T, S: DeviceSlice<T>>(slice: &S, on: &Arc<CudaStream>) -> Result<()> {
    let (owner, home) = (slice.stream().context().cu_ctx(), on.context().cu_ctx());
    if owner == home {
        return Ok(());
    }
    Err(problem(format!(
        "the cudarc slice belongs to context {owner:p}, but the stream `on` given as its home stream belongs to context \
         {home:p}: lend it with a stream of the slice's context (`slice.stream()`, or a stream of `slice.stream().context()`), \
         and launch on a stream of that context"
    )))
}

/// Lends cudarc slices to ferrocuda work inside `body`, and orders cudarc's later work on them
/// after ferrocuda's when `body` returns or unwinds (P3).
///
/// ```ignore
/// borrowed::cudarc::scope(|scope| {
///     let xs = scope.slice(&x, &cu_stream)?;            // cudarc's earlier writes first
///     let mut ys = scope.slice_mut(&mut y, &cu_stream)?;
///     saxpy::launch(&stream, LaunchConfig::for_elements(n, 256), 2.0, &xs, &mut ys)
/// })?; // here cu_stream waits for the launch and cudarc records x's and y's events on it
/// ```
///
/// The ordering is done by `scope` itself, after `body`, not by the values `body` gets: it
/// happens even if those are leaked (`mem::forget`, an `Rc` cycle) or `body` panics. Nothing
/// lent escapes `body` (the lent values borrow the scope, as with `std::thread::scope`), and
/// the cudarc slices stay borrowed until `scope` returns, so cudarc's safe API cannot touch
/// them while ferrocuda's work is unordered with it.
pub fn scope<'env, R>(body: impl for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> R) -> R {
    let scope = Scope { lent: RefCell::new(Vec::new()), _scope: PhantomData, _env: PhantomData };
    // Runs on return and on unwind alike: a local of this frame, out of `body`'s reach.
    struct OrderOnExit<'s, 'scope, 'env>(&'s Scope<'scope, 'env>);
    impl Drop for OrderOnExit<'_, '_, '_> {
        fn drop(&mut self) {
            // Each lent slice: the home stream waits for ferrocuda's work on it, then cudarc
            // records the slice's event there (dropping its `SyncOnDrop`).
            for Lent { usage, home, cudarc } in self.0.lent.borrow_mut().drain(..) {
                order_home_after(&home, &usage);
                drop(cudarc);
            }
        }
    }
    let exit = OrderOnExit(&scope);
    let result = body(exit.0);
    drop(exit);
    result
}

/// The scope of [`scope()`]: lends cudarc slices for `'scope` (see there).
pub struct Scope<'scope, 'env: 'scope> {
    lent: RefCell<Vec<Lent<'env>>>,
    /// Invariant in both lifetimes, as `std::thread::Scope` is: nothing lent outlives the scope.
    _scope: PhantomData<&'scope mut &'scope ()>,
    _env: PhantomData<&'env mut &'env ()>,
}

/// One lent slice: its tracking, its home stream, and cudarc's pending event record.
struct Lent<'env> {
    usage: Arc<crate::memory::usage::BufferUsage>,
    home: Stream,
    cudarc: SyncOnDrop<'env>,
}

impl<'scope, 'env> Scope<'scope, 'env> {
    /// Lends `slice` (a `CudaSlice<T>`, or a `CudaView` / `CudaViewMut` of part of one) to be
    /// read by ferrocuda work until the scope ends, with `on` (a stream of the slice's context,
    /// usually `slice.stream()`) as its home stream: `on` first waits for cudarc's earlier
    /// writes of the slice, and when the scope ends it waits for ferrocuda's work on it and
    /// cudarc records the slice's read event there.
    ///
    /// A stream `on` of another context than the slice's is refused by name (E1): nothing
    /// would order cudarc's later work in the slice's context after ferrocuda's.
    pub fn slice<T: Pod, S: DevicePtr<T>>(&'scope self, slice: &'env S, on: &'env Arc<CudaStream>) -> Result<BorrowedSlice<'scope, T>> {
        check_home_context::<T, S>(slice, on)?;
        let home = stream(on)?;
        let len = slice.len();
        let (ptr, sync) = slice.device_ptr(on);
        // SAFETY: the slice is borrowed shared for 'env, which outlives the scope, so cudarc's
        // safe API cannot write or free it before the scope ends; cudarc's earlier writes are
        // ordered before `on` (device_ptr above), so the range holds initialised `T`s (`Pod`)
        // of a live allocation. The value may be leaked: the scope, not its drop, orders the
        // owner after ferrocuda's work (the `Lent` below, performed by `scope`).
        let borrowed = unsafe { BorrowedSlice::with_home(home, ptr, len) }?;
        let (usage, home) = borrowed.shared();
        self.lent.borrow_mut().push(Lent { usage, home, cudarc: sync });
        Ok(borrowed)
    }

    /// Lends `slice` (a `CudaSlice<T>` or a `CudaViewMut` of part of one) to be written by
    /// ferrocuda work until the scope ends, with `on` as its home stream (see
    /// [`Scope::slice`]; `on` first waits for cudarc's earlier reads and writes of it).
    pub fn slice_mut<T: Pod, S: DevicePtrMut<T>>(&'scope self, slice: &'env mut S, on: &'env Arc<CudaStream>) -> Result<BorrowedSliceMut<'scope, T>> {
        check_home_context::<T, S>(&*slice, on)?;
        let home = stream(on)?;
        let len = slice.len();
        let (ptr, sync) = slice.device_ptr_mut(on);
        // SAFETY: as in `slice`, and the slice is borrowed exclusively for 'env, so nothing
        // else reaches it before the scope ends; its earlier reads and writes are ordered
        // before `on`.
        let borrowed = unsafe { BorrowedSliceMut::with_home(home, ptr, len) }?;
        let (usage, home) = borrowed.shared();
        self.lent.borrow_mut().push(Lent { usage, home, cudarc: sync });
        Ok(borrowed)
    }
}

/// A cudarc slice borrowed for reading by [`slice()`] (`unsafe`): dereferences to a
/// [`BorrowedSlice`]. Dropping it orders cudarc's later work after ferrocuda's; [`scope()`]
/// is the safe way, which does not rest on a drop.
pub struct CudaRead<'a, T> {
    // Dropped first: the home stream waits for ferrocuda's work ...
    slice: BorrowedSlice<'a, T>,
    // ... then cudarc records the slice's read event on it.
    _cudarc: SyncOnDrop<'a>,
}

/// A cudarc slice borrowed for writing by [`slice_mut()`] (`unsafe`): dereferences to a
/// [`BorrowedSliceMut`] (pass `&mut *borrow` to an output kernel parameter).
pub struct CudaWrite<'a, T> {
    slice: BorrowedSliceMut<'a, T>,
    _cudarc: SyncOnDrop<'a>,
}

/// Borrows `slice` (a `CudaSlice<T>`, or a `CudaView` / `CudaViewMut` of part of one) to be
/// read by ferrocuda work, with `on` (a stream of the slice's context, usually
/// `slice.stream()`) as its home stream, until the guard drops. Prefer [`scope()`].
///
/// # Safety
/// The guard is dropped, not leaked (`mem::forget`, an `Rc` cycle, a `Box::leak`): its drop
/// is what orders cudarc's later work on the slice (a write, a free) after the ferrocuda work
/// that read it (P3). Leaked, cudarc may overwrite the slice while a kernel still reads it.
pub unsafe fn slice<'a, T: Pod, S: DevicePtr<T>>(slice: &'a S, on: &'a Arc<CudaStream>) -> Result<CudaRead<'a, T>> {
    check_home_context::<T, S>(slice, on)?;
    let home = stream(on)?;
    let len = slice.len();
    let (ptr, sync) = slice.device_ptr(on);
    // SAFETY: the slice (or view) is borrowed shared for 'a, so cudarc's safe API cannot
    // write it meanwhile or free it; cudarc's earlier writes are ordered before `on` (device_ptr above),
    // so the range holds initialised `T`s (`Pod`) of a live allocation; the guard drops
    // (the caller's contract), ordering the owner after our work.
    let slice = unsafe { BorrowedSlice::with_home(home, ptr, len) }?;
    Ok(CudaRead { slice, _cudarc: sync })
}

/// Borrows `slice` (a `CudaSlice<T>` or a `CudaViewMut` of part of one) to be written by
/// ferrocuda work, with `on` as its home stream (see [`slice()`]). Prefer [`scope()`].
///
/// # Safety
/// As for [`slice()`]: the guard is dropped, not leaked. Leaked, cudarc may read the slice
/// before a kernel finished writing it, or free it under the kernel.
pub unsafe fn slice_mut<'a, T: Pod, S: DevicePtrMut<T>>(slice: &'a mut S, on: &'a Arc<CudaStream>) -> Result<CudaWrite<'a, T>> {
    check_home_context::<T, S>(&*slice, on)?;
    let home = stream(on)?;
    let len = slice.len();
    let (ptr, sync) = slice.device_ptr_mut(on);
    // SAFETY: as in `slice`, and the slice (or view) is borrowed exclusively for 'a, so
    // nothing else reaches it meanwhile; its earlier reads and writes are ordered before `on`.
    let slice = unsafe { BorrowedSliceMut::with_home(home, ptr, len) }?;
    Ok(CudaWrite { slice, _cudarc: sync })
}

impl<'a, T> Deref for CudaRead<'a, T> {
    type Target = BorrowedSlice<'a, T>;
    fn deref(&self) -> &Self::Target {
        &self.slice
    }
}

impl<'a, T> Deref for CudaWrite<'a, T> {
    type Target = BorrowedSliceMut<'a, T>;
    fn deref(&self) -> &Self::Target {
        &self.slice
    }
}

impl<T> DerefMut for CudaWrite<'_, T> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.slice
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// candle-ops' per-call cost (docs/interop.md, the candle section): looking up one cudarc
    /// context twice, with no handle kept in between, gives the same cached value (one
    /// ferrocuda handle, so one set of loaded modules), made once.
    #[test]
    fn candle_per_call_two_lookups_of_one_owner_share_one_handle() {
        let mut cache: Cache<u8, Arc<()>> = Cache { entries: Vec::new() };
        let owner = Arc::new(0u8);
        let made = Cell::new(0);
        let make = || {
            made.set(made.get() + 1);
            Ok((Arc::new(()), true))
        };
        let (first, stale) = cache.get_or_adopt(&owner, make);
        assert!(stale.is_empty());
        let first = first.unwrap();
        let (second, _) = cache.get_or_adopt(&owner, make);
        assert!(Arc::ptr_eq(&first, &second.unwrap()), "the second lookup made a new handle");
        assert_eq!(made.get(), 1);
        // Another owner gets its own.
        let other = Arc::new(1u8);
        let (third, _) = cache.get_or_adopt(&other, make);
        assert!(!Arc::ptr_eq(&first, &third.unwrap()));
        assert_eq!(made.get(), 2);
    }

    /// The cached handle goes with its owner: the first lookup after the owner dropped hands
    /// it back to be dropped (for a primary context: ferrocuda's retain released).
    #[test]
    fn candle_per_call_a_gone_owners_handle_is_dropped_at_the_next_lookup() {
        let mut cache: Cache<u8, Arc<()>> = Cache { entries: Vec::new() };
        let owner = Arc::new(0u8);
        let (value, _) = cache.get_or_adopt(&owner, || Ok((Arc::new(()), true)));
        let weak = Arc::downgrade(&value.unwrap());
        drop(owner);
        let next = Arc::new(1u8);
        let (_, stale) = cache.get_or_adopt(&next, || Ok((Arc::new(()), true)));
        assert_eq!(stale.len(), 1);
        drop(stale);
        assert_eq!(weak.strong_count(), 0, "the gone owner's handle is still held");
        assert_eq!(cache.entries.len(), 1);
    }

    /// Values made with "do not cache" (non-primary contexts) are made at every lookup, and
    /// errors are passed on without caching anything.
    #[test]
    fn candle_per_call_uncached_values_and_errors_are_not_kept() {
        let mut cache: Cache<u8, Arc<()>> = Cache { entries: Vec::new() };
        let owner = Arc::new(0u8);
        let (a, _) = cache.get_or_adopt(&owner, || Ok((Arc::new(()), false)));
        let (b, _) = cache.get_or_adopt(&owner, || Ok((Arc::new(()), false)));
        assert!(!Arc::ptr_eq(&a.unwrap(), &b.unwrap()));
        let (e, _) = cache.get_or_adopt(&owner, || Err(problem("no")));
        assert!(e.is_err());
        assert!(cache.entries.is_empty());
    }
}
