//! Kernels that break one rule each, for the CPU executor's sanitizer checks
//! (tests/cpu_sanitizer.rs; issue 20 part 5, audit 2026-11-24 N6-N9, N13). Each comes with a
//! control that follows the rule, so a test can show the check fires on the mistake only.
//! They are valid GPU code, but the broken ones hang or race there: never launch them on a GPU
//! except to see that.

use ferrocuda_device::global::{AtomicSlice, DisjointSlice, unique_index};
use ferrocuda_device::sync::{sync_threads, sync_threads_count, sync_warp};
use ferrocuda_device::thread::{block_idx_x, thread_idx_x};
use ferrocuda_device::{kernel, shared_array, warp};

// ---------------------------------------------------------------------------------------------
// Output elements taken by two threads of a launch.

/// Thread `t` adds 1 to element `t / share` through `get_unchecked_mut`: with `share == 2`,
/// threads 0 and 1 write element 0 (a race); with `share == 1` every thread has its own.
#[kernel]
pub fn unchecked_overlap(share: u32, mut y: DisjointSlice<u32>) {
    let e = (unique_index().get() / share.max(1) as usize).min(y.len().saturating_sub(1));
    if !y.is_empty() {
        // SAFETY: in bounds; exclusivity is what the test breaks on purpose (share == 2).
        unsafe { *y.get_unchecked_mut(e) += 1 };
    }
}

/// Like [`unchecked_overlap`] through the raw escape hatches: thread `t` adds 1 to element
/// `t / share` through `as_mut_slice` (even threads) or `as_mut_ptr` (odd threads). With
/// `share == 2` threads 0 and 1 write element 0 (a race the CPU executor sees through its
/// mirrors of raw views); with `share == 1` every thread has its own.
#[kernel]
pub fn raw_view_overlap(share: u32, mut y: DisjointSlice<u32>) {
    let t = unique_index().get();
    let e = (t / share.max(1) as usize).min(y.len().saturating_sub(1));
    if !y.is_empty() {
        if t.is_multiple_of(2) {
            // SAFETY: exclusivity is what the test breaks on purpose (share == 2).
            unsafe { y.as_mut_slice()[e] += 1 };
        } else {
            // SAFETY: in bounds; exclusivity as above.
            unsafe { *y.as_mut_ptr().add(e) += 1 };
        }
    }
}

/// Thread 0 writes element 1 through `as_mut_ptr` (with `steal`) or its own element 0, then
/// reads it back through the raw view (its own write, in order); thread 1 reads its element 1
/// through the checked `Index` and copies it to `out[1]`. With `steal` that is a write by one
/// thread and a read by another of one element: a race.
#[kernel]
pub fn raw_write_checked_read(steal: bool, mut y: DisjointSlice<u32>, mut out: DisjointSlice<u32>) {
    let i = unique_index();
    if i.get() == 0 {
        let e = if steal { 1 } else { 0 };
        // SAFETY: in bounds (launched with 2 elements); exclusivity broken on purpose (steal).
        let seen = unsafe {
            let p = y.as_mut_ptr().add(e);
            *p = 50;
            *p
        };
        if let Some(o) = out.get_mut(i) {
            *o = seen;
        }
    } else if let Some(o) = out.get_mut(i) {
        *o = y[i];
    }
}

/// One block of 2. Thread 0 reads its own `y[0]` (through `Index`), both wait at a barrier,
/// then thread 1 writes `y[0]` through `get_unchecked_mut` when `steal`: a race even with the
/// barrier between, since thread 0 holds the element for the whole launch (audit N1's
/// `stale_overlap`). Without `steal` thread 1 writes its own `y[1]`.
#[kernel]
pub fn write_after_barrier(steal: bool, mut y: DisjointSlice<u32>, mut out: DisjointSlice<u32>) {
    let i = unique_index();
    let t = thread_idx_x();
    let mut seen = 0;
    if t == 0 && i.get() < y.len() {
        seen = y[i];
    }
    sync_threads();
    if t == 1 {
        let target = if steal { 0 } else { 1 };
        if target < y.len() {
            // SAFETY: in bounds; taking thread 0's element is the mistake under test.
            unsafe { *y.get_unchecked_mut(target) = 100 };
        }
    }
    if let Some(o) = out.get_mut(i) {
        *o = seen;
    }
}

/// Thread 0 of every block writes element `block % blocks_per_element`: with
/// `blocks_per_element == 1` every block writes element 0 (a race between blocks, which run
/// on different workers), otherwise each block its own element.
#[kernel]
pub fn one_element_per_block(blocks_per_element: u32, mut y: DisjointSlice<u32>) {
    if thread_idx_x() != 0 {
        return;
    }
    let e = if blocks_per_element == 1 { 0 } else { block_idx_x() as usize };
    if e < y.len() {
        // SAFETY: in bounds; one block per element unless the test asks for the race.
        unsafe { y.write_unchecked(e, block_idx_x() + 1) };
    }
}

/// Every thread adds 1 to `counts[0]` atomically and writes its own `y[i]`: no race (atomics
/// are never recorded).
#[kernel]
pub fn atomics_and_own_elements(counts: AtomicSlice<u32>, mut y: DisjointSlice<u32>) {
    counts.add(0, 1);
    if let Some(r) = y.get_mut(unique_index()) {
        *r += 1;
    }
}

// ---------------------------------------------------------------------------------------------
// N7: lanes of one warp in different collectives, threads at different kinds of barrier.

/// One warp. `mixed`: lane 0 shuffles from lane 1 while the other lanes vote (`ballot`), two
/// different `.sync` instructions that wait for each other forever on a GPU. Otherwise every
/// lane votes. `out[lane]` is the result.
#[kernel]
pub fn n7_warp_mixed_ops(mixed: bool, mut out: DisjointSlice<u32>) {
    let t = thread_idx_x();
    let v = if mixed && t == 0 { warp::shuffle(7u32, 1) } else { warp::ballot(t == 1) };
    if let Some(o) = out.get_mut(unique_index()) {
        *o = v;
    }
}

/// One warp. Lanes 0 and 1 call `sync_warp` with the masks `mask0` and `mask1`, lane 2 with
/// `mask1`, the others do nothing: with different masks (0x3 and 0x7) lane 0 waits for lane 1
/// to execute `bar.warp.sync 0x3`, which it never does.
#[kernel]
pub fn n7_warp_sync_masks(mask0: u32, mask1: u32, mut out: DisjointSlice<u32>) {
    let t = thread_idx_x();
    if t == 0 {
        sync_warp(mask0);
    } else if t < 3 {
        sync_warp(mask1);
    }
    if let Some(o) = out.get_mut(unique_index()) {
        *o = 1;
    }
}

/// One warp. Lanes 0 and 1 call `sync_warp(mask)`, then every lane a ballot. A mask that
/// leaves out the calling lane (undefined behaviour for `bar.warp.sync` in PTX) gets the
/// lane's own bit added: with `mask == 0x2` lane 0 waits with 0x3 for lane 1, which passed
/// 0x2, went on alone and waits in the ballot (a deadlock, reported); with `mask == 0x3` both
/// meet, and every lane's ballot is the full mask.
#[kernel]
pub fn n7_sync_warp_without_own_lane(mask: u32, mut out: DisjointSlice<u32>) {
    if thread_idx_x() < 2 {
        sync_warp(mask);
    }
    let v = warp::ballot(true);
    if let Some(o) = out.get_mut(unique_index()) {
        *o = v;
    }
}

/// One warp. Lane 0 waits in a shuffle while lanes 1..32 first `sync_warp` among themselves
/// and then join the shuffle: valid (a lane may wait while others complete another
/// collective), and each lane gets lane 31's value.
#[kernel]
pub fn n7_subgroup_then_shuffle(mut out: DisjointSlice<u32>) {
    let t = thread_idx_x();
    if t != 0 {
        sync_warp(!1);
    }
    let v = warp::shuffle(t * 10, 31);
    if let Some(o) = out.get_mut(unique_index()) {
        *o = v;
    }
}

/// Thread 0 waits at `sync_threads()` while the others (when `mixed`) wait at
/// `sync_threads_count`: two kinds of barrier instruction on one hardware barrier. Otherwise
/// every thread calls `sync_threads_count(true)`. `out[t]` is the count (0 for thread 0).
#[kernel]
pub fn n7_mixed_barriers(mixed: bool, mut out: DisjointSlice<u32>) {
    let v = if mixed && thread_idx_x() == 0 {
        sync_threads();
        0
    } else {
        sync_threads_count(true)
    };
    if let Some(o) = out.get_mut(unique_index()) {
        *o = v;
    }
}

// ---------------------------------------------------------------------------------------------
// N8: shared-memory races that keeping one reader per word, or one sync_warp count per warp,
// misses.

/// One block of 64. Thread 0 writes `s[0]`, a barrier, every thread reads it, then thread 63
/// writes it: with `barrier_before_update` false the other threads' reads race with that write
/// (racecheck reports it on an H100); with it, a barrier separates them.
#[kernel]
pub fn n8_broadcast_then_update(barrier_before_update: bool, mut out: DisjointSlice<u32>) {
    let s = shared_array![u32; 1];
    let t = thread_idx_x();
    if t == 0 {
        s.set(0, 1);
    }
    sync_threads();
    let v = s.get(0);
    if barrier_before_update {
        sync_threads();
    }
    if t == 63 {
        s.set(0, v + 1);
    }
    if let Some(o) = out.get_mut(unique_index()) {
        *o = v;
    }
}

/// One warp. Lane 1 writes `s[0]` and waits at `sync_warp(writer_mask)` (when lane 1 is in
/// it); lane 0 waits at `sync_warp(reader_mask)` and reads `s[0]` into `out[0]`. Masks 0x1/0x2
/// (each lane alone): a race. 0x3/0x3: ordered.
#[kernel]
pub fn n8_partial_warp_sync(reader_mask: u32, writer_mask: u32, mut out: DisjointSlice<u32>) {
    let s = shared_array![u32; 1];
    let t = thread_idx_x();
    if t == 1 {
        s.set(0, 42);
        sync_warp(writer_mask);
    }
    let mut v = 0;
    if t == 0 {
        sync_warp(reader_mask);
        v = s.get(0);
    }
    if let Some(o) = out.get_mut(unique_index()) {
        *o = v;
    }
}

/// One warp, ordering by a chain of `sync_warp`s: lane 1 writes `s[0]`; lanes 1 and 2 sync;
/// lanes 2 and 0 sync (`chained`) or lanes 2 and 3 (not); lane 0 reads. Chained, the write is
/// ordered before the read (through lane 2); otherwise lane 0 synced with nobody: a race.
#[kernel]
pub fn n8_warp_sync_chain(chained: bool, mut out: DisjointSlice<u32>) {
    let s = shared_array![u32; 1];
    let t = thread_idx_x();
    let partner = if chained { 0 } else { 3 };
    if t == 1 {
        s.set(0, 42);
        sync_warp(0b110);
    } else if t == 2 {
        sync_warp(0b110);
        sync_warp(0b100 | 1 << partner);
    } else if t == partner {
        sync_warp(0b100 | 1 << partner);
    }
    let mut v = 0;
    if t == 0 {
        v = s.get(0);
    }
    if let Some(o) = out.get_mut(unique_index()) {
        *o = v;
    }
}

// ---------------------------------------------------------------------------------------------
// N13: a destructor that would panic while the executor ends a failed block.

/// Panics when dropped with `1`; counts its drops in `DROPS` (host only).
pub struct Bomb(pub u32);

/// How many `Bomb`s were dropped (the CPU executor's tests read it).
#[cfg(not(target_arch = "nvptx64"))]
pub static DROPS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

impl Drop for Bomb {
    fn drop(&mut self) {
        #[cfg(not(target_arch = "nvptx64"))]
        DROPS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if self.0 == 1 {
            panic!("a Bomb was dropped");
        }
    }
}

/// One block of 2: thread 0 waits at the barrier holding a `Bomb(1)`; thread 1 (when
/// `fail`) panics first, so thread 0 is ended while it waits. Without `fail` both pass the
/// barrier and thread 0's `Bomb` is defused (`Bomb(0)`) before it drops.
#[kernel]
pub fn n13_drop_bomb(fail: bool, mut out: DisjointSlice<u32>) {
    let t = thread_idx_x();
    let mut bomb = Bomb(if t == 0 { 1 } else { 0 });
    if t == 1 && fail {
        panic!("thread 1 fails");
    }
    sync_threads();
    bomb.0 = 0;
    if let Some(o) = out.get_mut(unique_index()) {
        *o = 1;
    }
}

// ---------------------------------------------------------------------------------------------
// N6: distributed shared memory of a block that has exited, and peer accesses that race.

/// Cluster of 2 blocks of 32. Both fill their array and meet at `cluster::sync()`; rank 0
/// then reads rank 1's array (after a block barrier of its own when `reader_syncs_first`, so
/// that on the CPU rank 1 has run to its end before the read). With `peer_waits`, rank 1
/// waits at a second `cluster::sync()` until rank 0 has read (the rule); without, rank 1
/// returns at once and rank 0 reads the memory of an exited block (a GPU faults).
#[kernel]
#[cfg_attr(target_arch = "nvptx64", cfg(ferrocuda_sm = "90"))]
pub fn n6_read_exited_peer(peer_waits: bool, reader_syncs_first: bool, mut out: DisjointSlice<u32>) {
    use ferrocuda_device::cluster;
    let arr = shared_array![u32; 32];
    let t = thread_idx_x();
    arr.set(t as usize, 0xC0DE_0000 + t);
    cluster::sync();
    if reader_syncs_first && cluster::block_rank() == 0 {
        sync_threads();
    }
    if cluster::block_rank() == 0 {
        #[allow(unused_unsafe)]
        // SAFETY: (if `peer_get` is `unsafe`) in bounds; rank 1 is alive only with `peer_waits`,
        // which is what the test checks.
        let v = unsafe { cluster::peer_get(&arr, 1, t as usize) };
        if let Some(o) = out.get_mut(unique_index()) {
            *o = v;
        }
    }
    if peer_waits {
        cluster::sync();
    }
}

/// Cluster of 2 blocks of 32. Rank 1 writes its array; rank 0 reads it with `peer_get` (with
/// a `cluster::sync()` between when `synced`, otherwise none: a race), then both meet at a
/// `cluster::sync()` so neither reads an exited block.
#[kernel]
#[cfg_attr(target_arch = "nvptx64", cfg(ferrocuda_sm = "90"))]
pub fn n6_peer_read_race(synced: bool, mut out: DisjointSlice<u32>) {
    use ferrocuda_device::cluster;
    let arr = shared_array![u32; 32];
    let t = thread_idx_x();
    let rank = cluster::block_rank();
    if rank == 1 {
        arr.set(t as usize, 0xBEEF_0000 + t);
    }
    if synced {
        cluster::sync();
    }
    if rank == 0 {
        #[allow(unused_unsafe)]
        // SAFETY: (if `peer_get` is `unsafe`) in bounds, rank 1 alive (the last sync below).
        let v = unsafe { cluster::peer_get(&arr, 1, t as usize) };
        if let Some(o) = out.get_mut(unique_index()) {
            *o = v;
        }
    }
    cluster::sync();
}

// ---------------------------------------------------------------------------------------------
// N9: `shared_array!` sites are distinct per expansion.

/// Two arrays from one call of a user's macro (one `file!()`/`line!()`/`column!()` for both).
macro_rules! n9_two_tiles {
    () => {
        (shared_array![u32; 32], shared_array![u32; 32])
    };
}

/// One warp: `a[t] = 1`, `b[t] = 2`, barrier, `out[t] = a[t] * 10 + b[t]` (12 when `a` and
/// `b` are two arrays; 22 when they alias). Built for the GPU too: the device build then has
/// two `.shared` variables, which ptxas refused when they had one name.
#[kernel]
pub fn n9_two_arrays_from_one_macro_call(mut out: DisjointSlice<u32>) {
    let (a, b) = n9_two_tiles!();
    let t = thread_idx_x() as usize % 32;
    a.set(t, 1);
    b.set(t, 2);
    sync_threads();
    if let Some(o) = out.get_mut(unique_index()) {
        *o = a.get(t) * 10 + b.get(t);
    }
}

// N9's generic helper whose array's size depends on `T` (`shared_array![T; 8]`) was a CPU
// executor error at its second size; since audit 2026-11-29b (G22R-1) it is a compile error
// on both builds: tests/compile_fail/seams/g22r_1_generic_param_is_refused.rs.

// ---------------------------------------------------------------------------------------------
// Shared memory read before any thread of the block wrote it (audit 2026-11-27b, Q6).

/// The audit's `shared_leftover`: mode 0 writes `s[t] = v + blockIdx.x`, then every thread
/// reads `s[t]` after a barrier; mode 1 reads without writing (a GPU returns what the last
/// kernel left in that shared memory).
#[kernel]
pub fn q6_shared_leftover(mode: u32, v: u32, mut out: DisjointSlice<u32>) {
    let s = shared_array![u32; 256];
    let t = thread_idx_x() as usize;
    if mode == 0 {
        s.set(t, v + block_idx_x());
    }
    sync_threads();
    let r = s.get(t);
    if let Some(o) = out.get_mut(unique_index()) {
        *o = r;
    }
}

/// A counter in shared memory, bumped atomically by every thread: with `init == 1` thread 0
/// zeroes it first (then a barrier), with `init == 0` nobody does (the atomics read whatever
/// was there). `out[t]` = the counter after a second barrier.
#[kernel]
pub fn q6_shared_counter(init: u32, mut out: DisjointSlice<u32>) {
    let counter = shared_array![u32; 1];
    if init == 1 && thread_idx_x() == 0 {
        counter.set(0, 0);
    }
    sync_threads();
    counter.fetch_add(0, 1);
    sync_threads();
    let total = counter.get(0);
    if let Some(o) = out.get_mut(unique_index()) {
        *o = total;
    }
}
