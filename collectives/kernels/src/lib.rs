//! Peer-to-peer collective kernels written in Rust: a one-shot all-reduce that reads the other
//! GPUs' buffers directly (NVLink or PCIe peer access) and synchronises the GPUs with
//! system-scope flags.
//!
//! The host side (buffers, flag tables, epochs, launch) is `ferrocuda_collectives::peer`;
//! these kernels take raw device pointers, so their launchers are `unsafe`.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]

use core::sync::atomic::{AtomicU32, Ordering};

use ferrocuda_device::kernel;
use ferrocuda_device::sync::{sync_threads, sync_threads_or};
use ferrocuda_device::thread::{block_dim_x, block_idx_x, grid_dim_x, thread_idx_x};

ferrocuda_device::embed_kernels!();

/// Flag slots per source rank in each rank's flag array: the most blocks a launch may use.
pub const MAX_BLOCKS: u32 = 1024;

/// Ranks a peer all-reduce supports (the size of the pointer table).
pub const MAX_RANKS: u32 = 8;

/// The `u32`s of each rank's flag array for `world` ranks: a slot per (source rank, block),
/// then the rank's abort word ([`abort_slot`]).
pub const fn flag_words(world: u32) -> usize {
    world as usize * MAX_BLOCKS as usize + 1
}

/// The index of the abort word in a rank's flag array for `world` ranks: set (system-scope
/// release) by a peer that gave up on the group, after which this rank's kernels stage,
/// signal and read nothing any more (audit 2026-11-28h G20R-1).
pub const fn abort_slot(world: u32) -> usize {
    world as usize * MAX_BLOCKS as usize
}

/// Elements of one vector access (16 bytes of `f32`): block ranges are cut at multiples of it.
pub const VECTOR: u32 = 4;

/// True once a flag that counts calls has reached `epoch` (wrapping: epochs are compared as a
/// signed distance, so the counter may wrap around `u32::MAX`).
#[inline(always)]
pub fn reached(flag: u32, epoch: u32) -> bool {
    (flag.wrapping_sub(epoch) as i32) >= 0
}

/// The elements `[start, end)` that block `block` of `blocks` handles for `n` elements: equal
/// runs cut at multiples of [`VECTOR`], the same on every rank for the same `n` and grid.
#[inline(always)]
pub fn block_range(n: u32, block: u32, blocks: u32) -> (u32, u32) {
    let vectors = n.div_ceil(VECTOR);
    let per_block = vectors.div_ceil(blocks.max(1));
    let start = (block * per_block * VECTOR).min(n);
    let end = ((block + 1) * per_block * VECTOR).min(n);
    (start, end)
}

/// One-shot all-reduce (sum) of `n` `f32` over `world` GPUs, one launch per GPU per call.
///
/// `table` (device memory of this GPU) holds `2 * world` addresses: the staging buffer of
/// each rank (`2 * capacity` elements: two halves used alternately, `epoch % 2` picks one), then
/// the flag array of each rank ([`flag_words`]`(world)` `u32`, zeroed once: a slot per source
/// rank and block, then the abort word). Each block:
/// 0. returns at once, after marking `output`'s range NaN, storing 1 into `*status` and into
///    every peer's abort word, if this rank's `*status` or abort word is set: the group is over
///    (a rank gave up on a peer in an earlier call, below);
/// 1. copies its range of `input` into this rank's staging half;
/// 2. after `bar.sync`, one thread per peer stores `epoch` into that peer's flag slot for
///    (this rank, this block) with a system-scope release;
/// 3. one thread per peer waits with system-scope acquires until this rank's slot for (that
///    peer, this block) reaches `epoch`, or gives up (after `spin_limit` polls, or when this
///    rank's abort word is set); a block where any thread gave up then ends as in 0 (it reads
///    no peer's staging);
/// 4. sums the range over ranks `0..world` in rank order (so every rank gets bit-identical
///    results) from every rank's staging half, and writes `output`.
///
/// Back-to-back calls are safe with two staging halves: a block of call `k + 2` stages only
/// after this rank's call `k + 1` finished with every wait satisfied (a wait given up sets
/// `*status`, and every later call then ends at 0 without staging), and a satisfied wait of
/// call `k + 1` means the peer's call `k + 1` started, after the peer's call `k` (the last
/// reader of this half) ended. A give-up is never a reason to go on: a rank that gave up never
/// stages, signals or reads a peer's staging again, and its abort words end the peers' waits
/// and calls too, so a late peer gets NaN and a set status, never another call's data or a
/// half being overwritten while it reads it (audit 2026-11-28h G20R-1: carrying on after a
/// give-up let a rank run ahead and overwrite a half a late peer had not read).
///
/// # Safety
/// Launch with the same grid on every rank, at most [`MAX_BLOCKS`] blocks, `world <=
/// MAX_RANKS`, `n <= capacity`, `epoch` one more than in the previous call (starting at 1 on
/// zeroed flags); `input`, `output` and every staging buffer 16-byte aligned; every address in `table` must be readable and (flags)
/// writable from this GPU (peer access enabled); `input`/`output` hold `n` elements on this GPU
/// and `output` is touched by no one else while the kernel runs. Every rank must launch the
/// call, or the others wait: forever when `spin_limit` is 0, else until a waiting thread has
/// polled its flag `spin_limit` times, when it stores 1 into `*status` (a `u32` on this GPU)
/// and ends the group (above). `*status` is never cleared by the kernel: a group that gave
/// up stays over until its buffers are made anew.
#[kernel]
#[allow(clippy::too_many_arguments)] // a kernel's parameters are its ABI
pub unsafe fn one_shot_all_reduce_f32(
    rank: u32,
    world: u32,
    n: u32,
    capacity: u32,
    epoch: u32,
    spin_limit: u32,
    status: *mut u32,
    table: *const u64,
    input: *const f32,
    output: *mut f32,
) {
    let (block, blocks, tid, threads) = (block_idx_x(), grid_dim_x(), thread_idx_x(), block_dim_x());
    let (start, end) = block_range(n, block, blocks);
    // Vectors of 4 from `start` (a multiple of 4) up to `vector_end`; the scalar rest only in
    // the block that holds the end of an `n` that is not a multiple of 4.
    let vector_end = start + (end - start) / VECTOR * VECTOR;
    let half = (epoch % 2) as usize * capacity as usize;
    // Every rank's staging half, loaded once (the table cannot change during the kernel).
    let mut staging = [core::ptr::null::<f32>(); MAX_RANKS as usize];
    let mut r = 0;
    while r < world && r < MAX_RANKS {
        // SAFETY: the caller promised a table of 2 * world addresses on this GPU.
        *unsafe { staging.get_unchecked_mut(r as usize) } = unsafe { (*table.add(r as usize) as *const f32).add(half) };
        r += 1;
    }
    // SAFETY: rank < world <= MAX_RANKS (caller's contract): no bounds check, no panic path.
    let own_staging = unsafe { *staging.get_unchecked(rank as usize) } as *mut f32;
    // SAFETY: every flag array holds flag_words(world) u32 (caller's contract), aligned; the
    // abort word is touched only by atomics.
    let own_abort = unsafe { AtomicU32::from_ptr((*table.add((world + rank) as usize) as *mut u32).add(abort_slot(world))) };
    // SAFETY: `status` is a valid u32 on this GPU (caller's contract), touched only by atomics.
    let status_word = unsafe { AtomicU32::from_ptr(status) };

    // 0. A group that gave up is over (G20R-1): one decision for the whole block.
    let over = sync_threads_or(tid == 0 && (status_word.load(Ordering::Relaxed) != 0 || own_abort.load(Ordering::Acquire) != 0));
    if over {
        // SAFETY: as for the kernel (the caller's contract).
        unsafe { abandon(rank, world, table, status_word, output, start, end) };
        return;
    }

    // 1. This block's range of the input into this rank's staging half.
    let mut i = start + tid * VECTOR;
    while i < vector_end {
        // SAFETY: i + 4 <= n <= capacity; 16-byte aligned (caller's contract); both hold them.
        unsafe { store4(own_staging.add(i as usize), load4(input.add(i as usize))) };
        i += threads * VECTOR;
    }
    let mut i = vector_end + tid;
    while i < end {
        // SAFETY: i < n <= capacity.
        unsafe { *own_staging.add(i as usize) = *input.add(i as usize) };
        i += threads;
    }
    sync_threads();

    // 2. Tell each peer that this block's range is staged (release: the staging writes of the
    //    whole block, ordered before it by bar.sync, become visible before the flag).
    if tid < world && tid != rank {
        // SAFETY: flag arrays of world * MAX_BLOCKS u32 (caller's contract), aligned.
        let slot = unsafe { (*table.add((world + tid) as usize) as *mut u32).add((rank * MAX_BLOCKS + block) as usize) };
        // SAFETY: a valid, aligned u32 that only atomics touch.
        unsafe { AtomicU32::from_ptr(slot) }.store(epoch, Ordering::Release);
    }
    // All of this block's flags are out before any of its threads waits: on the GPU this costs
    // one barrier; on the CPU executor, whose threads of a block take turns at barriers, it is
    // what lets every rank's stores happen whatever the order the waits run in.
    sync_threads();
    // 3. Wait until each peer's block has staged the same range.
    let mut gave_up = false;
    if tid < world && tid != rank {
        // SAFETY: as above, this rank's own flag array.
        let slot = unsafe { (*table.add((world + rank) as usize) as *mut u32).add((tid * MAX_BLOCKS + block) as usize) };
        // SAFETY: a valid, aligned u32 that only atomics touch.
        let flag = unsafe { AtomicU32::from_ptr(slot) };
        let mut spins = 0u32;
        while !reached(flag.load(Ordering::Acquire), epoch) {
            spins = spins.wrapping_add(1);
            // A peer did not arrive in time, or a rank ended the group: give up.
            if (spin_limit != 0 && spins >= spin_limit) || own_abort.load(Ordering::Relaxed) != 0 {
                gave_up = true;
                break;
            }
            core::hint::spin_loop();
        }
    }
    // A block that gave up on any peer reads no staging at all: the peer may be running
    // behind (its half not staged yet), and this rank must never run ahead of it (G20R-1).
    if sync_threads_or(gave_up) {
        // SAFETY: as for the kernel (the caller's contract).
        unsafe { abandon(rank, world, table, status_word, output, start, end) };
        return;
    }

    // 4. Sum over ranks in rank order.
    let mut i = start + tid * VECTOR;
    while i < vector_end {
        let mut sum = Vector([0.0; 4]);
        let mut r = 0;
        while r < world {
            // SAFETY: every rank's staging half holds n elements, 16-byte aligned.
            let v = unsafe { load4(staging.get_unchecked(r as usize).add(i as usize)) };
            sum.0[0] += v.0[0];
            sum.0[1] += v.0[1];
            sum.0[2] += v.0[2];
            sum.0[3] += v.0[3];
            r += 1;
        }
        // SAFETY: i + 4 <= n; output is ours alone, 16-byte aligned.
        unsafe { store4(output.add(i as usize), sum) };
        i += threads * VECTOR;
    }
    let mut i = vector_end + tid;
    while i < end {
        let mut sum = 0.0f32;
        let mut r = 0;
        while r < world {
            // SAFETY: every rank's staging half holds n elements.
            sum += unsafe { *staging.get_unchecked(r as usize).add(i as usize) };
            r += 1;
        }
        // SAFETY: i < n; output is ours alone.
        unsafe { *output.add(i as usize) = sum };
        i += threads;
    }
}

/// Ends a block's part of a call on a group that is over (G20R-1): records it in `status`,
/// tells every peer (its abort word, so its waits and calls end too), and marks this block's
/// range `[start, end)` of `output` NaN (never another call's sum). Called by every thread of
/// the block (uniformly); reads no staging.
///
/// # Safety
/// As for [`one_shot_all_reduce_f32`]: `table`'s flag arrays hold [`flag_words`]`(world)`
/// `u32`, writable from this GPU; `output` holds at least `end` elements of this GPU, written
/// by no one else.
#[inline(always)]
unsafe fn abandon(rank: u32, world: u32, table: *const u64, status: &AtomicU32, output: *mut f32, start: u32, end: u32) {
    let (tid, threads) = (thread_idx_x(), block_dim_x());
    if tid == 0 {
        status.store(1, Ordering::Relaxed);
    }
    if tid < world && tid != rank {
        // SAFETY: the peer's flag array holds flag_words(world) u32 (caller's contract).
        let abort = unsafe { AtomicU32::from_ptr((*table.add((world + tid) as usize) as *mut u32).add(abort_slot(world))) };
        abort.store(1, Ordering::Release);
    }
    let mut i = start + tid;
    while i < end {
        // SAFETY: i < end <= n; output is ours alone.
        unsafe { *output.add(i as usize) = f32::NAN };
        i += threads;
    }
}

/// Four `f32` moved as one 16-byte access (`ld.v4`/`st.v4`).
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct Vector([f32; 4]);

/// Loads 16 bytes as one `ld.v4.f32` (LLVM splits a plain 16-byte copy into two 8-byte ones).
///
/// # Safety
/// `p` is valid for 16 bytes and 16-byte aligned.
#[inline(always)]
unsafe fn load4(p: *const f32) -> Vector {
    #[cfg(target_arch = "nvptx64")]
    {
        let (a, b, c, d): (f32, f32, f32, f32);
        // SAFETY: the caller's contract; a weak (non-.nc) load, so data written by peers
        // before an acquired flag is seen.
        unsafe {
            core::arch::asm!("ld.v4.f32 {{{a}, {b}, {c}, {d}}}, [{p}];", p = in(reg64) p, a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d, options(nostack, readonly, preserves_flags))
        };
        Vector([a, b, c, d])
    }
    #[cfg(not(target_arch = "nvptx64"))]
    // SAFETY: the caller's contract.
    unsafe {
        (p as *const Vector).read()
    }
}

/// Stores 16 bytes as one `st.v4.f32`.
///
/// # Safety
/// `p` is valid for 16 bytes of writes and 16-byte aligned.
#[inline(always)]
unsafe fn store4(p: *mut f32, v: Vector) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the caller's contract.
    unsafe {
        core::arch::asm!("st.v4.f32 [{p}], {{{a}, {b}, {c}, {d}}};", p = in(reg64) p, a = in(reg32) v.0[0], b = in(reg32) v.0[1], c = in(reg32) v.0[2], d = in(reg32) v.0[3], options(nostack, preserves_flags))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    // SAFETY: the caller's contract.
    unsafe {
        (p as *mut Vector).write(v)
    }
}

/// The data-parallel example's gradient: for `n` independent scalar models `t ≈ p * d`, the
/// gradient of `(p[i] * d[i] - t[i])^2` by `p[i]` into `grad[i]`, one element per thread.
///
/// # Safety
/// `params`, `data`, `targets` and `grad` hold `n` `f32` each on this GPU; `grad` is written
/// by no one else while the kernel runs.
#[kernel]
pub unsafe fn local_gradient(n: u32, params: *const f32, data: *const f32, targets: *const f32, grad: *mut f32) {
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    if i < n {
        let i = i as usize;
        // SAFETY: i < n; every pointer holds n elements (caller's contract).
        unsafe {
            let (p, d, t) = (*params.add(i), *data.add(i), *targets.add(i));
            *grad.add(i) = 2.0 * (p * d - t) * d;
        }
    }
}

/// The data-parallel example's update: `params[i] -= rate * grad[i]`, one element per thread.
///
/// # Safety
/// `params` and `grad` hold `n` `f32` each on this GPU; `params` is written by no one else
/// while the kernel runs.
#[kernel]
pub unsafe fn sgd_step(n: u32, rate: f32, grad: *const f32, params: *mut f32) {
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    if i < n {
        // SAFETY: i < n; both pointers hold n elements (caller's contract).
        unsafe { *params.add(i as usize) -= rate * *grad.add(i as usize) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_ranges_cover_every_element_once_in_vector_multiples() {
        for n in [0u32, 1, 3, 4, 5, 1000, 4096, 1 << 20] {
            for blocks in [1u32, 2, 7, 132] {
                let mut next = 0;
                for b in 0..blocks {
                    let (s, e) = block_range(n, b, blocks);
                    assert_eq!(s, next.min(n), "n={n} blocks={blocks} b={b}");
                    assert!(s % VECTOR == 0 || s == n);
                    next = e.max(s);
                }
                assert_eq!(next, n, "n={n} blocks={blocks}");
            }
        }
    }

    #[test]
    fn epochs_compare_across_wraparound() {
        assert!(reached(5, 5));
        assert!(reached(6, 5));
        assert!(!reached(4, 5));
        assert!(!reached(0, 1));
        assert!(reached(1, u32::MAX)); // the flag wrapped past the epoch
        assert!(!reached(u32::MAX, 1));
    }
}
