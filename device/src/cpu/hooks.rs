//! The one interface between the intrinsics and the CPU executor: what an intrinsic does when
//! a kernel runs on the CPU.
//!
//! The intrinsics (`thread`, `sync`, `warp`, `shared`, `cluster`, ...) call the free functions
//! below on the host; each asks the GPU thread that the executor runs on this OS thread,
//! through the `Hooks` trait that the executor's block implements and registers with
//! `enter`. This file imports nothing else of the crate, so the intrinsics (above it) and the
//! executor (which implements it) never import each other. Outside the executor there is no
//! GPU thread, and a hook panics saying so.

use core::cell::Cell;
use core::ptr::NonNull;

/// The kind of block barrier being waited on (`bar.sync` and its `.red` forms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BarrierKind {
    /// `sync_threads`.
    Plain,
    /// `sync_threads_count`: how many threads passed `true`.
    Count,
    /// `sync_threads_and`.
    And,
    /// `sync_threads_or`.
    Or,
    /// The phase barrier of an in-place row (`RowRead::write_own`, barrier 4).
    RowPhase,
    /// The barrier after a block collective's partials are stored: `sync_threads` (barrier 0)
    /// on a GPU; here its own kind, replying how many threads arrived (the G13R-2 check). Not
    /// `Count`: a GPU's collective never meets a `sync_threads_count` (barrier 1) elsewhere,
    /// and with it the executor did, folding the partials of warps that had skipped the
    /// collective where a GPU hangs (audit 2026-11-28c, G15-2c). Keyed by the collective's
    /// scratch address: threads at two collectives' partials barriers meet on a GPU (one
    /// `sync_threads`) and each folds the other half's stale partials; here they are two kinds
    /// and so reported (G15-2d).
    Partials(u32),
}

impl BarrierKind {
    /// The device library's function that waits at this barrier.
    pub(crate) fn function(self) -> &'static str {
        match self {
            BarrierKind::Plain => "sync_threads",
            BarrierKind::Count => "sync_threads_count",
            BarrierKind::And => "sync_threads_and",
            BarrierKind::Or => "sync_threads_or",
            BarrierKind::RowPhase => "RowRead::write_own (the in-place row's phase barrier)",
            BarrierKind::Partials(_) => {
                "a block collective's partials barrier (every thread of the block must call the same collective on the same \
                 scratch: a GPU meets it at any `sync_threads`, another collective's included, and folds the absent warps' \
                 stale partials, or hangs beside the other barrier kinds)"
            }
        }
    }
}

/// A warp collective a lane waits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WarpOp {
    /// `shfl.sync` of the lane's 32-bit value, reading lane `source` (already resolved by the
    /// intrinsic with PTX's clamping rules; the lane's own index when out of range).
    Shuffle { source: u32 },
    /// `vote.sync.ballot` of the lane's predicate (0 or 1).
    Ballot,
    /// `match.any.sync` of the lane's value.
    MatchAny,
    /// `bar.warp.sync`.
    Sync,
    /// `elect.sync` (`warpgroup::elect_one`): true for the lowest lane of those that
    /// completed it together; a full-warp collective like the others (E3, audit 2026-11-27e:
    /// it used to answer from `activemask`, so a divergent use that hangs a GPU passed).
    Elect,
    /// `activemask`: which lanes are here together. Not a barrier: it completes for the lanes
    /// that reached it in the same pass (the lanes a GPU would have converged there), without
    /// waiting for the others.
    ActiveMask,
}

/// Why a shared-memory address cannot be accessed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SharedFault {
    /// The address is not a multiple of the access's alignment.
    Misaligned,
    /// The access ends past the `end` bytes handed out.
    OutOfBounds { end: usize },
    /// A cluster peer rank beyond the cluster's `size` blocks.
    NoSuchBlock { size: u32 },
    /// `shared_array!`s need `needed` bytes of static shared memory, over `limit`.
    StaticLimit { needed: usize, limit: usize },
    /// The cluster's block `rank` has exited: its shared memory is gone (audit N6).
    ExitedBlock { rank: u32 },
    /// `shared_array!`s need `static_bytes` bytes, which with the launch's `dynamic_bytes`
    /// exceed the `max` a block may have (F7).
    TotalLimit { static_bytes: u32, dynamic_bytes: u32, max: u32 },
    /// A `shared_array!` site first reached with `first_bytes` bytes aligned to
    /// `first_align`, now with others.
    SiteMismatch { first_bytes: usize, first_align: usize },
}

/// The running block's shared memory as plain data, so that a shared load or store needs no
/// call into the executor (the hot path of tiled kernels): the arena's first byte, the cell
/// holding how many bytes are handed out (it grows as `shared_array!` sites are reached), and
/// whether accesses are recorded for the race detector (then one call per access).
#[derive(Clone, Copy)]
pub(crate) struct SharedWindow {
    /// The arena's first byte; valid for `*end` bytes while the block is entered.
    pub(crate) base: *mut u8,
    /// Bytes handed out so far.
    pub(crate) end: *const Cell<u32>,
    /// Accesses go to [`Hooks::note_shared_access`].
    pub(crate) recorded: bool,
}

impl SharedWindow {
    /// A pointer to `bytes` bytes at `address`, checked for bounds and alignment.
    #[inline(always)]
    fn pointer(&self, address: u32, bytes: usize, align: usize) -> Result<*mut u8, SharedFault> {
        // SAFETY: `end` points into the block's shared-memory layout, alive while the block is
        // entered (the window is only read through `running_shared`, inside that window).
        let end = unsafe { (*self.end).get() } as usize;
        if !(address as usize).is_multiple_of(align) {
            return Err(SharedFault::Misaligned);
        }
        if address as usize + bytes > end {
            return Err(SharedFault::OutOfBounds { end });
        }
        // SAFETY: in bounds of the arena (checked against `end`, which never exceeds it).
        Ok(unsafe { self.base.add(address as usize) })
    }
}

/// What the intrinsics ask of the GPU thread running on this OS thread. Implemented by the
/// executor's block (`cpu::block::BlockContext`), for its running thread.
///
/// Methods return faults instead of panicking: the free functions below panic with
/// `#[track_caller]`, so a kernel's panic names the kernel's line (a call through `dyn` does
/// not carry the caller's location).
pub(crate) trait Hooks {
    /// `threadIdx` of the running thread, `[x, y, z]`.
    fn thread_idx(&self) -> [u32; 3];
    /// `blockIdx`.
    fn block_idx(&self) -> [u32; 3];
    /// `blockDim`.
    fn block_dim(&self) -> [u32; 3];
    /// `gridDim`.
    fn grid_dim(&self) -> [u32; 3];
    /// The identity of the running launch (the address of its stop flag, unique while it
    /// runs): an output's parts tell one launch from another by it (session 19, G18S-1).
    fn launch_id(&self) -> usize;
    /// The running thread's linear rank in its block (x fastest).
    fn rank(&self) -> u32;
    /// Waits at the block barrier; returns the barrier's reduction (0 for `Plain`).
    fn barrier(&self, kind: BarrierKind, predicate: bool) -> u32;
    /// Waits in a warp collective with the lanes of `mask`; returns this lane's result.
    fn warp_op(&self, op: WarpOp, mask: u32, value: u64) -> u64;
    /// The address of the `shared_array!` at `site` (handed out on first use).
    fn static_shared(&self, site: u64, bytes: usize, align: usize) -> Result<u32, SharedFault>;
    /// Bytes of dynamic shared memory (at address 0).
    fn dynamic_shared_bytes(&self) -> u32;
    /// A pointer to `bytes` bytes at `address` of the shared memory of the cluster's block
    /// `rank`, checked for bounds and alignment.
    fn peer_shared_pointer(&self, rank: u32, address: u32, bytes: usize, align: usize) -> Result<*mut u8, SharedFault>;
    /// Records a plain access of this block's shared memory for the race detector.
    fn note_shared_access(&self, address: u32, bytes: usize, write: bool);
    /// Records a plain access of the shared memory of the cluster's block `rank` (distributed
    /// shared memory) for the race detector.
    fn note_peer_access(&self, rank: u32, address: u32, bytes: usize, write: bool);
    /// Marks `bytes` at `address` of the shared memory of the cluster's block `rank` as
    /// written (an access the race detector does not record: the CPU bodies of cp.async, TMA
    /// and mbarrier), so that later reads of it are not reported as uninitialised (Q6).
    fn note_unrecorded_shared(&self, rank: u32, address: u32, bytes: usize);
    /// An atomic read-modify-write of this block's shared memory: a read of memory no thread
    /// of the block has written is reported as uninitialised (Q6); it races with a plain access
    /// of another thread that nothing orders (F3), not with other atomics; then it counts as
    /// written.
    fn note_shared_atomic(&self, address: u32, bytes: usize);
    /// Records that the running thread takes elements `index..index + count` (of
    /// `element_bytes` bytes each) of the kernel output of `elements` elements at `base`, to write them or only to
    /// read them, for the race detector of global memory.
    /// Returns the address the thread accesses the output at: `base`, or its mirror of the
    /// output if it took a raw view of it (`raw_views`).
    fn note_output_access(&self, base: usize, elements: usize, element_bytes: usize, index: usize, count: usize, write: bool) -> usize;
    /// The address of the running thread's mirror of the output of `elements` elements at
    /// `base` (made on first use; `base` itself past the launch's mirror budget).
    /// `atomic_word`: 0 when other threads access the elements through the race detector's
    /// claims (plain partitions), else the size of the atomic words they access them in.
    fn raw_output_view(&self, base: usize, elements: usize, element_bytes: usize, atomic_word: usize) -> usize;
    /// `%cluster_ctarank`.
    fn cluster_rank(&self) -> u32;
    /// `%cluster_nctarank`.
    fn cluster_size(&self) -> u32;
    /// Waits at the cluster barrier.
    fn cluster_barrier(&self);
    /// Counts an atomic access of the running thread (of `address`, which held `value` before
    /// it, which it `changed` or not); after a run of them with no other wait, yields to the
    /// block's other threads (a spin-wait's writer may be among them: audit P8). A run that
    /// repeats the same few unchanged values is a spin (F2: see `cpu::spin`).
    fn atomic_access(&self, address: usize, value: u64, changed: bool);
    /// Arrives at named barrier `id` of `threads` threads per phase (`wait`: as a waiter);
    /// returns the number of the phase arrived in.
    fn named_barrier(&self, id: u32, threads: u32, wait: bool) -> u64;
    /// How many phases of named barrier `id` have completed.
    fn named_barrier_completed(&self, id: u32) -> u64;
}

thread_local! {
    /// The GPU thread's hooks on this OS thread (none outside the executor).
    static CURRENT: Cell<Option<Current>> = const { Cell::new(None) };
}

/// What `enter` registers: the hooks and the block's shared-memory window.
#[derive(Clone, Copy)]
struct Current {
    hooks: NonNull<dyn Hooks + 'static>,
    shared: SharedWindow,
}

/// Restores the hooks that were current before [`enter`] when dropped.
pub(crate) struct Entered<'a> {
    previous: Option<Current>,
    _hooks: core::marker::PhantomData<&'a ()>,
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.previous));
    }
}

/// Makes `hooks` and its block's `shared` window what the intrinsics on this OS thread see
/// until the returned guard drops.
///
/// # Safety
/// The guard must be dropped (not leaked with `mem::forget`) before `hooks` ends, and the
/// window must stay valid as long: the thread-local keeps lifetime-erased pointers to both.
pub(crate) unsafe fn enter<'a>(hooks: &'a (dyn Hooks + 'a), shared: SharedWindow) -> Entered<'a> {
    // SAFETY: only the trait object's lifetime bound changes; the caller keeps `hooks` alive
    // until the guard restores the previous pointer.
    let erased = unsafe { core::mem::transmute::<NonNull<dyn Hooks + 'a>, NonNull<dyn Hooks + 'static>>(NonNull::from(hooks)) };
    let previous = CURRENT.with(|c| c.replace(Some(Current { hooks: erased, shared })));
    Entered { previous, _hooks: core::marker::PhantomData }
}

/// Whether a GPU thread of the executor runs on this OS thread (a launch from a kernel).
pub(crate) fn inside_kernel() -> bool {
    CURRENT.with(|c| c.get().is_some())
}

#[track_caller]
#[cold]
fn no_gpu_thread(what: &str) -> ! {
    panic!("`{what}` only has a value inside a kernel (on a GPU, or run by the CPU executor)")
}

/// The running GPU thread (panics, naming `what`, outside the executor).
#[track_caller]
#[inline(always)]
fn running(what: &str) -> &'static dyn Hooks {
    running_shared(what).0
}

/// The running GPU thread and its block's shared-memory window.
#[track_caller]
#[inline(always)]
fn running_shared(what: &str) -> (&'static dyn Hooks, SharedWindow) {
    match CURRENT.with(|c| c.get()) {
        // SAFETY: set by `enter` on this OS thread, whose guard clears it before the hooks end;
        // the reference is used only while this GPU thread runs, inside that window.
        Some(current) => (unsafe { current.hooks.as_ref() }, current.shared),
        None => no_gpu_thread(what),
    }
}

#[cold]
#[track_caller]
fn shared_fault(fault: SharedFault, address: u32, bytes: usize, align: usize) -> ! {
    match fault {
        SharedFault::Misaligned => panic!("misaligned shared memory access: {bytes} bytes at address {address:#x} (needs {align}-byte alignment)"),
        SharedFault::OutOfBounds { end } => {
            panic!("shared memory access out of bounds: {bytes} bytes at address {address:#x}, but this block has {end} bytes of shared memory")
        }
        SharedFault::NoSuchBlock { size } => panic!("cluster block rank out of range: the cluster has {size} blocks"),
        SharedFault::ExitedBlock { rank } => panic!(
            "distributed shared memory of cluster block {rank}, which has exited: a block's shared memory is gone once all its threads \
             have returned (a GPU faults). Keep the block alive until its peers are done with its memory: put a cluster::sync() after \
             the last peer access, before any block returns"
        ),
        SharedFault::SiteMismatch { first_bytes, first_align } => panic!(
            "a shared_array! site reached with {bytes} bytes aligned to {align}, where it was first reached with {first_bytes} bytes \
             aligned to {first_align}: one site is one array per block (as on the GPU). A generic function's shared_array! whose \
             element type or length depends on a type parameter has one array for every instance: give each instance its own \
             site, or make the array's type independent of the parameter"
        ),
        SharedFault::TotalLimit { static_bytes, dynamic_bytes, max } => panic!(
            "this kernel's shared_array!s need {static_bytes} bytes per block, which with the launch's {dynamic_bytes} bytes of \
             dynamic shared memory exceed the {max} bytes a block may have (a GPU refuses the launch)"
        ),
        SharedFault::StaticLimit { needed, limit } => panic!(
            "this kernel's shared_array!s need {needed} bytes per block, more than CUDA's static limit of {limit}; \
             use dynamic shared memory (`dynamic_shared`) for more"
        ),
    }
}

/// The GPU's rule for a wide (vector) access to global memory: its address is a multiple of its
/// width (`ld.global.v4.b32` of 16 bytes at a 16-byte boundary), whatever the alignment of the
/// Rust type it reads (`[u32; 4]` is 4-byte aligned on the host). A GPU faults otherwise
/// (`CUDA_ERROR_MISALIGNED_ADDRESS`), so the CPU executor refuses it too, naming the
/// instruction, instead of running a kernel that cannot run on a GPU.
#[track_caller]
#[inline(always)]
pub fn check_global_alignment(address: usize, bytes: usize, instruction: &str) {
    if !address.is_multiple_of(bytes) {
        misaligned_global(address, bytes, instruction);
    }
}

#[cold]
#[track_caller]
fn misaligned_global(address: usize, bytes: usize, instruction: &str) -> ! {
    panic!(
        "misaligned global memory access: `{instruction}` moves {bytes} bytes at address {address:#x}, which is not a multiple of {bytes} \
         (a GPU faults with CUDA_ERROR_MISALIGNED_ADDRESS). A {bytes}-byte access needs a {bytes}-byte aligned address: \
         use an element type aligned to {bytes} (`#[repr(C, align({bytes}))]`) or an offset that keeps the alignment"
    )
}

#[track_caller]
pub(crate) fn thread_idx() -> [u32; 3] {
    running("thread_idx").thread_idx()
}
#[track_caller]
pub(crate) fn block_idx() -> [u32; 3] {
    running("block_idx").block_idx()
}
#[track_caller]
pub(crate) fn block_dim() -> [u32; 3] {
    running("block_dim").block_dim()
}
#[track_caller]
pub(crate) fn grid_dim() -> [u32; 3] {
    running("grid_dim").grid_dim()
}
/// The running launch's identity ([`Hooks::launch_id`]) and its grid and block as a
/// configuration (the parts of it that output partitions read); `None` outside the executor.
pub(crate) fn running_launch() -> Option<(usize, ferrocuda_types::LaunchConfig)> {
    let current = CURRENT.with(|c| c.get())?;
    // SAFETY: as in `running_shared`: set by `enter` on this OS thread, cleared before the
    // hooks end; used only here, while this GPU thread runs.
    let hooks = unsafe { current.hooks.as_ref() };
    let ([gx, gy, gz], [bx, by, bz]) = (hooks.grid_dim(), hooks.block_dim());
    Some((hooks.launch_id(), ferrocuda_types::LaunchConfig::new((gx, gy, gz), (bx, by, bz))))
}
thread_local! {
    /// The GPU thread (block identity, rank) running a closure that must not call warp or
    /// block collectives, and what that closure is; `None` almost always.
    static SOLO: Cell<Option<(usize, u32, &'static str)>> = const { Cell::new(None) };
}

/// Clears [`SOLO`] when the closure returns or unwinds.
struct SoloGuard(Option<(usize, u32, &'static str)>);

impl Drop for SoloGuard {
    fn drop(&mut self) {
        SOLO.with(|s| s.set(self.0));
    }
}

/// Runs `f`, which one thread of a warp runs while the others wait in a collective (the
/// `then` of `RuntimeBlockReduce::reduce_broadcast`, `what`): a warp or block collective
/// called inside it panics, naming `what`. On a GPU such a call meets the collective the
/// other lanes wait in (sm_70+ matches collectives by kind and mask, not call site) and hands
/// thread 0 and the rest different values silently, or hangs (audit 2026-11-28c, G15-2b).
#[track_caller]
pub(crate) fn solo<R>(what: &'static str, f: impl FnOnce() -> R) -> R {
    let me = (block_identity(), rank(), what);
    let _guard = SoloGuard(SOLO.with(|s| s.replace(Some(me))));
    f()
}

/// Panics when the running GPU thread is inside a [`solo`] closure.
#[track_caller]
#[inline]
fn not_solo(collective: &str) {
    if let Some((block, rank, what)) = SOLO.with(|s| s.get())
        && rank == self::rank()
        && block == block_identity()
    {
        solo_collective(collective, what);
    }
}

#[cold]
#[track_caller]
fn solo_collective(collective: &str, what: &str) -> ! {
    panic!(
        "`{collective}` called inside {what}, which runs in one thread while the rest of its warp waits in a collective: on a GPU \
         the two meet (sm_70+ matches warp collectives by kind, not call site), so the threads get different values or hang. \
         Compute the value without warp or block collectives, or do the collective before or after the call (audit 2026-11-28c, G15-2b)"
    )
}

#[track_caller]
pub(crate) fn barrier(kind: BarrierKind, predicate: bool) -> u32 {
    not_solo("sync_threads");
    running("sync_threads").barrier(kind, predicate)
}
#[track_caller]
pub(crate) fn warp_sync(mask: u32) {
    not_solo("sync_warp");
    running("sync_warp").warp_op(WarpOp::Sync, mask, 0);
}
/// The running thread's lane (`%laneid`): its rank modulo the warp size.
#[track_caller]
pub(crate) fn lane_id() -> u32 {
    running("lane_id").rank() % 32
}
/// `shfl.sync` with the full mask, reading lane `source` (which the caller resolved).
#[track_caller]
pub(crate) fn warp_shuffle(value: u32, source: u32) -> u32 {
    not_solo("shuffle");
    running("shuffle").warp_op(WarpOp::Shuffle { source }, u32::MAX, value as u64) as u32
}
#[track_caller]
pub(crate) fn warp_ballot(predicate: bool) -> u32 {
    not_solo("ballot");
    running("ballot").warp_op(WarpOp::Ballot, u32::MAX, predicate as u64) as u32
}
/// `elect.sync` with the full mask: true in the lowest lane of the warp's live lanes, once
/// all of them arrive (the executor reports a divergent use, where a GPU hangs).
#[track_caller]
pub(crate) fn warp_elect() -> bool {
    not_solo("elect_one");
    running("elect_one").warp_op(WarpOp::Elect, u32::MAX, 0) != 0
}
#[track_caller]
pub(crate) fn warp_active_mask() -> u32 {
    running("active_mask").warp_op(WarpOp::ActiveMask, u32::MAX, 0) as u32
}
#[track_caller]
pub(crate) fn warp_match_any(value: u64) -> u32 {
    not_solo("match_any");
    running("match_any").warp_op(WarpOp::MatchAny, u32::MAX, value) as u32
}
/// The shared-memory address of the `shared_array!` at `site` in the running block.
#[track_caller]
pub fn static_shared(site: u64, bytes: usize, align: usize) -> u32 {
    match running("shared_array!").static_shared(site, bytes, align) {
        Ok(address) => address,
        // Not in a closure: the panic names the kernel's line (`track_caller`).
        Err(fault) => shared_fault(fault, 0, bytes, align),
    }
}
/// `(address, bytes)` of the running block's dynamic shared memory.
#[track_caller]
pub(crate) fn dynamic_shared() -> (u32, u32) {
    (0, running("dynamic_shared").dynamic_shared_bytes())
}

/// A pointer to `size_of::<T>()` bytes at `address` in `window`, after checking the bounds
/// and alignment (panicking like an out-of-bounds index).
#[track_caller]
#[inline(always)]
fn window_pointer<T>(window: &SharedWindow, address: u32) -> *mut T {
    let (bytes, align) = (core::mem::size_of::<T>(), core::mem::align_of::<T>());
    match window.pointer(address, bytes, align) {
        Ok(pointer) => pointer.cast(),
        Err(fault) => shared_fault(fault, address, bytes, align),
    }
}

/// A pointer to a `T` at `address` in the running block's shared memory, checked for bounds
/// and alignment (panicking like an out-of-bounds index); accesses through it are not
/// recorded by the race detector (for the CPU bodies of asynchronous copies and barriers).
#[track_caller]
#[allow(dead_code, reason = "for the CPU bodies of cp.async, mbarrier and TMA (hopper's branch)")]
pub(crate) fn shared_pointer<T>(address: u32) -> *mut T {
    let (hooks, window) = running_shared("shared memory");
    let pointer = window_pointer::<T>(&window, address);
    if window.recorded {
        // Read or written, it is never reported as uninitialised later (no false reports).
        hooks.note_unrecorded_shared(hooks.cluster_rank(), address, core::mem::size_of::<T>());
    }
    pointer
}

/// The running thread's rank in its block (x fastest).
#[track_caller]
pub(crate) fn rank() -> u32 {
    running("rank_in_block").rank()
}

/// A number identifying the running block among those running now (its executor state's
/// address): a key for per-block emulation state kept outside the executor.
#[track_caller]
pub(crate) fn block_identity() -> usize {
    (running("block identity") as *const dyn Hooks).cast::<()>() as usize
}

/// `ld.shared` on the host: a bounds-checked read of the block's arena, checked for data races.
///
/// # Safety
/// `T` is valid for every bit pattern (the shared-element types are).
#[track_caller]
#[inline]
pub(crate) unsafe fn shared_load<T: Copy>(address: u32) -> T {
    let (hooks, window) = running_shared("shared memory");
    let pointer = window_pointer::<T>(&window, address);
    if window.recorded {
        hooks.note_shared_access(address, core::mem::size_of::<T>(), false);
    }
    // SAFETY: in bounds and aligned (checked above); any bit pattern is a valid `T`.
    unsafe { pointer.read_volatile() }
}

/// `st.shared` on the host: a bounds-checked write of the block's arena, checked for data races.
///
/// # Safety
/// As for [`shared_load`].
#[track_caller]
#[inline]
pub(crate) unsafe fn shared_store<T: Copy>(address: u32, value: T) {
    let (hooks, window) = running_shared("shared memory");
    let pointer = window_pointer::<T>(&window, address);
    if window.recorded {
        hooks.note_shared_access(address, core::mem::size_of::<T>(), true);
    }
    // SAFETY: in bounds and aligned (checked above).
    unsafe { pointer.write_volatile(value) }
}

/// `*target = f(*target)` atomically, returning the old value (a compare-exchange loop on the
/// value's bits; the element types are 2, 4 or 8 bytes).
///
/// # Safety
/// `target` is valid and aligned for `T`, and accessed by others only atomically.
pub(crate) unsafe fn atomic_update<T: Copy>(target: *mut T, f: impl Fn(T) -> T) -> T {
    use core::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, Ordering};
    fn from_bits<T: Copy, B: Copy>(bits: B) -> T {
        // SAFETY: only called with B of T's size (checked below); all element types are Pod.
        unsafe { core::mem::transmute_copy(&bits) }
    }
    // `(old bits, new bits)` of one update.
    let (old, new): (u64, u64) = match core::mem::size_of::<T>() {
        2 => {
            // SAFETY: T is 2 bytes (a 16-bit float) and suitably aligned.
            let atomic = unsafe { AtomicU16::from_ptr(target.cast()) };
            let update = |bits| from_bits::<u16, T>(f(from_bits::<T, u16>(bits)));
            let old = atomic.fetch_update(Ordering::AcqRel, Ordering::Acquire, |bits| Some(update(bits))).unwrap_or_else(|b| b);
            (old as u64, update(old) as u64)
        }
        4 => {
            // SAFETY: T is 4 bytes and suitably aligned (the caller's guarantee).
            let atomic = unsafe { AtomicU32::from_ptr(target.cast()) };
            let update = |bits| from_bits::<u32, T>(f(from_bits::<T, u32>(bits)));
            let old = atomic.fetch_update(Ordering::AcqRel, Ordering::Acquire, |bits| Some(update(bits))).unwrap_or_else(|b| b);
            (old as u64, update(old) as u64)
        }
        8 => {
            // SAFETY: T is 8 bytes and suitably aligned.
            let atomic = unsafe { AtomicU64::from_ptr(target.cast()) };
            let update = |bits| from_bits::<u64, T>(f(from_bits::<T, u64>(bits)));
            let old = atomic.fetch_update(Ordering::AcqRel, Ordering::Acquire, |bits| Some(update(bits))).unwrap_or_else(|b| b);
            (old, update(old))
        }
        size => unreachable!("atomics on {size}-byte values"),
    };
    atomic_access(target as usize, old, old != new);
    match core::mem::size_of::<T>() {
        2 => from_bits(old as u16),
        4 => from_bits(old as u32),
        _ => from_bits(old),
    }
}

/// Atomic add on this block's shared memory, recorded by the race detector as an atomic
/// access: it never races with another atomic, but it does with a plain load or store of
/// another thread that no barrier orders (audit 2026-11-27c, F3).
///
/// # Safety
/// `address` is in bounds and aligned.
#[track_caller]
pub(crate) unsafe fn shared_fetch_add<T: Copy + core::ops::Add<Output = T>>(address: u32, value: T) -> T {
    let (hooks, window) = running_shared("shared memory");
    let pointer = window_pointer::<T>(&window, address);
    if window.recorded {
        hooks.note_shared_atomic(address, core::mem::size_of::<T>());
    }
    // SAFETY: `window_pointer` checked bounds and alignment; a block runs on one OS thread, so
    // the arena is only ever touched from here (atomically or not).
    unsafe { atomic_update(pointer, |old| old + value) }
}

/// Records that the running GPU thread takes elements `index..index + count` of the kernel
/// output of `elements` elements that starts at `base` (a `DisjointSlice` or another output
/// type, or a view of one), to write them
/// (`write`; also for a `&mut` that is only read) or only to read them. On the CPU executor
/// with race detection, a thread taking an element that another thread of the launch has
/// taken, one of the two to write it, ends the launch with a
/// [`GlobalMemoryRace`](super::GlobalMemoryRace).
///
/// The output types call it from every method that hands out an element or a pointer into
/// the output; atomic accesses are not recorded (they never race). Outside a kernel it does
/// nothing.
///
/// Returns where the thread accesses the output: `base`, or its private mirror of the output
/// once it has taken a raw view of it ([`raw_output_view`]).
#[inline]
pub fn note_output_access<T>(base: *mut T, elements: usize, index: usize, count: usize, write: bool) -> *mut T {
    if let Some(current) = CURRENT.with(|c| c.get())
        && current.shared.recorded
    {
        // SAFETY: as in `running_shared`: set by `enter` on this OS thread for as long as the
        // hooks live.
        let hooks = unsafe { current.hooks.as_ref() };
        let at = hooks.note_output_access(base as usize, elements, core::mem::size_of::<T>(), index, count, write);
        return output_at(base, at);
    }
    base
}

/// `base`, or the mirror at `at` (whose address `raw_views` exposed).
#[inline(always)]
fn output_at<T>(base: *mut T, at: usize) -> *mut T {
    if at == base as usize { base } else { core::ptr::with_exposed_provenance_mut(at) }
}

/// The pointer a raw view (`as_mut_slice`, `as_mut_ptr`) of the output of `elements` elements
/// at `base` hands out: on the CPU executor with race detection, the running thread's private
/// mirror of the output, whose changed elements are recorded as the thread's writes when it
/// returns (see `raw_views`); `base` elsewhere. `atomic_word`: 0 when the other threads of
/// the launch access the output's elements only through the race detector's claims, else the
/// size of the atomic words in which they access them (the mirror's copy reads them so).
#[inline]
pub fn raw_output_view<T>(base: *mut T, elements: usize, atomic_word: usize) -> *mut T {
    if let Some(current) = CURRENT.with(|c| c.get())
        && current.shared.recorded
    {
        // SAFETY: as in `note_output_access`.
        let hooks = unsafe { current.hooks.as_ref() };
        let at = hooks.raw_output_view(base as usize, elements, core::mem::size_of::<T>(), atomic_word);
        return output_at(base, at);
    }
    base
}

/// An atomic access (load, store or read-modify-write) of the running GPU thread, of
/// `address`, which held the bits `value` before it and which it `changed` or not: on the CPU
/// executor, a thread that polls an atomic many times in a row without waiting otherwise
/// yields to the other threads of its block, so that a spin-wait on a flag another warp sets
/// completes as on a GPU (audit P8); one that keeps polling the same unchanged values spins
/// (F2). Outside a kernel it does nothing.
#[inline]
pub(crate) fn atomic_access(address: usize, value: u64, changed: bool) {
    if let Some(current) = CURRENT.with(|c| c.get()) {
        // SAFETY: as in `running_shared`: set by `enter` on this OS thread for as long as the
        // hooks live.
        unsafe { current.hooks.as_ref() }.atomic_access(address, value, changed);
    }
}

/// `barrier.arrive`/`barrier.sync id, threads`: one arrival of the running thread; the number
/// of the phase it arrived in.
#[track_caller]
pub(crate) fn named_barrier_arrive(id: u32, threads: u32, wait: bool) -> u64 {
    not_solo("NamedBarrier");
    running("NamedBarrier").named_barrier(id, threads, wait)
}

/// Phases of the running block's named barrier `id` completed so far.
#[track_caller]
pub(crate) fn named_barrier_completed(id: u32) -> u64 {
    running("NamedBarrier").named_barrier_completed(id)
}

/// `%cluster_ctarank`.
#[track_caller]
pub(crate) fn cluster_block_rank() -> u32 {
    running("cluster::block_rank").cluster_rank()
}
/// `%cluster_nctarank`.
#[track_caller]
pub(crate) fn cluster_size() -> u32 {
    running("cluster::size").cluster_size()
}
/// `barrier.cluster.arrive` + `wait`.
#[track_caller]
pub(crate) fn cluster_sync() {
    not_solo("cluster::sync");
    running("cluster::sync").cluster_barrier()
}
/// A pointer to `size_of::<T>()` bytes at `address` in the shared memory of cluster block
/// `rank` (bounds and alignment checked, refused if that block has exited; not recorded by the
/// race detector), for the CPU
/// bodies of the Hopper instructions that reach a peer block (multicast TMA, remote arrive).
#[track_caller]
pub(crate) fn cluster_peer_pointer<T>(rank: u32, address: u32) -> *mut T {
    let (bytes, align) = (core::mem::size_of::<T>(), core::mem::align_of::<T>());
    let hooks = running("distributed shared memory");
    match hooks.peer_shared_pointer(rank, address, bytes, align) {
        Ok(pointer) => {
            hooks.note_unrecorded_shared(rank, address, bytes);
            pointer.cast::<T>()
        }
        Err(fault) => shared_fault(fault, address, bytes, align),
    }
}

/// `ld.shared::cluster` of a `u32` at `address` in block `rank` of the cluster: refused if
/// that block has exited (a GPU faults), recorded by the race detector.
#[track_caller]
pub(crate) fn cluster_peer_load_u32(address: u32, rank: u32) -> u32 {
    let hooks = running("cluster::peer_get");
    let pointer = match hooks.peer_shared_pointer(rank, address, 4, 4) {
        Ok(pointer) => pointer.cast::<u32>(),
        Err(fault) => shared_fault(fault, address, 4, 4),
    };
    hooks.note_peer_access(rank, address, 4, false);
    // SAFETY: in bounds and aligned (checked by `peer_shared_pointer`); the peer block runs on
    // this OS thread, not concurrently.
    unsafe { pointer.read_volatile() }
}

/// Device printing on the host: through `std::print!`, so a test harness captures it.
pub(crate) fn print(args: core::fmt::Arguments<'_>) {
    std::print!("{args}");
}
