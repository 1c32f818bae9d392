//! Kernels for the rules only a GPU enforced and for the CPU executor's agreement with the GPU
//! (issue 29, classes 5 and 6; audit 2026-11-27 findings P4, P7, P8, P9, P10, P11). Safe code
//! only: no `unsafe` in this file.

use ferrocuda_device::global::{AtomicSlice, DisjointSlice, unique_index};
use ferrocuda_device::sync::{sync_threads, sync_threads_and, sync_threads_count, sync_threads_or};
use ferrocuda_device::thread::thread_idx_x;
use ferrocuda_device::{kernel, shared_array};

/// P4 (blocks of 64). mode 0: warp 0 `sync_threads()`, warp 1 `sync_threads_count(true)`.
/// mode 1: warp 0 `sync_threads_and(true)`, warp 1 `sync_threads_or(false)`.
/// mode 2 (control): every thread `sync_threads_count(t < 10)`; mode 3 (control): every thread
/// `sync_threads_and(t < 64)` then `sync_threads_or(t == 5)` then `sync_threads()`.
/// `out[t]` = what the barrier returned, `out[64 + t]` = 1 after it.
#[kernel]
pub fn p4_mixed_barriers(mode: u32, out: AtomicSlice<u32>) {
    let t = thread_idx_x();
    let r = match mode {
        0 => {
            if t < 32 {
                sync_threads();
                1000
            } else {
                sync_threads_count(true)
            }
        }
        1 => {
            if t < 32 {
                sync_threads_and(true) as u32
            } else {
                sync_threads_or(false) as u32 + 10
            }
        }
        2 => sync_threads_count(t < 10),
        _ => {
            let all = sync_threads_and(t < 64) as u32;
            let any = sync_threads_or(t == 5) as u32;
            sync_threads();
            10 * all + any
        }
    };
    let t = t as usize;
    out.store(t, r);
    out.store(64 + t, 1);
}

/// P7 (blocks of 64, the producer/consumer idiom of named barriers, as FlashAttention-3's
/// ping-pong): warp 1 (the producer) writes `s[0] = 42 + b` and arrives on barrier 4 (64
/// threads); warp 0 waits on it and reads `s[0]` into `out[b]`.
/// mode 1: the consumer reads before its wait (a race); mode 2: the producer writes after its
/// arrival (a race).
#[cfg_attr(target_arch = "nvptx64", cfg(ferrocuda_sm = "90"))]
#[kernel]
pub fn p7_named_producer_consumer(mode: u32, out: AtomicSlice<u32>) {
    let (b, t) = (ferrocuda_device::thread::block_idx_x(), thread_idx_x());
    let s = shared_array![u32; 4];
    // SAFETY: barrier 4 is used with 64 threads (both warps) only.
    let full = unsafe { ferrocuda_device::named_barrier::NamedBarrier::new(4, 64) };
    if t >= 32 {
        if t == 32 && mode != 2 {
            s.set(0, 42 + b);
        }
        full.arrive();
        if t == 32 && mode == 2 {
            s.set(0, 42 + b);
        }
    } else {
        let early = if t == 0 && mode == 1 { s.get(0) } else { 0 };
        full.sync();
        if t == 0 {
            out.store(b as usize, s.get(0).wrapping_add(early.wrapping_mul(0)));
        }
    }
}

/// P7, two rounds of ping-pong between two warps through two named barriers, each round
/// handing a shared value to the other warp (the FA3 schedule, in miniature): warp 0 writes
/// round 0, arrives on 4; warp 1 waits on 4, reads, writes round 1, arrives on 5; warp 0 waits
/// on 5 and reads. `out[b * 2 + r]` = the value read in round `r`.
#[cfg_attr(target_arch = "nvptx64", cfg(ferrocuda_sm = "90"))]
#[kernel]
pub fn p7_ping_pong(out: AtomicSlice<u32>) {
    let (b, t) = (ferrocuda_device::thread::block_idx_x(), thread_idx_x());
    let s = shared_array![u32; 2];
    // SAFETY: barriers 4 and 5 are used with 64 threads (both warps) only.
    let (first, second) = unsafe { (ferrocuda_device::named_barrier::NamedBarrier::new(4, 64), ferrocuda_device::named_barrier::NamedBarrier::new(5, 64)) };
    if t < 32 {
        if t == 0 {
            s.set(0, 100 + b);
        }
        first.arrive();
        second.sync();
        if t == 0 {
            out.store(b as usize * 2 + 1, s.get(1));
        }
    } else {
        first.sync();
        if t == 32 {
            out.store(b as usize * 2, s.get(0));
            s.set(1, 200 + b);
        }
        second.arrive();
    }
}

/// P8 (one block of 64): thread 32 sets `flag[0] = 1`; thread 0 spins until it sees it, then
/// writes `flag[1] = 7`.
#[kernel]
pub fn p8_spin_flag(flag: AtomicSlice<u32>) {
    let t = thread_idx_x();
    if t == 32 {
        flag.store(0, 1);
    }
    if t == 0 {
        while flag.load(0) == 0 {}
        flag.store(1, 7);
    }
}

/// P8 with a compare-and-swap lock between warps: each warp's lane 0 takes the lock
/// (`compare_exchange` until it gets 0), counts itself in `flag[1]`, and keeps the lock until
/// every warp has tried once (`flag[2]`, counted before the first attempt), then releases it.
/// `flag[1]` ends at the number of warps; a thread that never let the others run would spin
/// for ever on the second warp's lock attempt.
#[kernel]
pub fn p8_spin_lock(warps: u32, flag: AtomicSlice<u32>) {
    if thread_idx_x().is_multiple_of(32) {
        flag.fetch_add(2, 1);
        while flag.compare_exchange(0, 0, 1) != 0 {}
        flag.fetch_add(1, 1);
        // Hold the lock until every warp has arrived (they spin on the lock meanwhile).
        while flag.load(2) < warps {}
        flag.exchange(0, 0);
    }
}

/// P9 (blocks of 64): threads 32..64 return at once; threads 0..32 `sync_threads()` and write
/// 1. mode 1: the same with `sync_threads_count(true)`, whose count is written.
#[kernel]
pub fn p9_exited_then_barrier(mode: u32, out: AtomicSlice<u32>) {
    let t = thread_idx_x();
    if t >= 32 {
        return;
    }
    let r = if mode == 0 {
        sync_threads();
        1
    } else {
        sync_threads_count(true)
    };
    out.store(t as usize, r);
}

/// P9 (blocks of 64): thread 32 writes `s[0]` and returns; threads 0..32 `sync_threads()` and
/// read it. The exited thread never arrived at the barrier, so nothing orders its write
/// before the reads (a race; control `mode 1`: thread 32 waits at the barrier too, then
/// returns).
#[kernel]
pub fn p9_exited_writer(mode: u32, mut out: DisjointSlice<u32>) {
    let t = thread_idx_x();
    let s = shared_array![u32; 1];
    if t >= 32 {
        if t == 32 {
            s.set(0, 5);
        }
        if mode == 1 {
            sync_threads();
        }
        return;
    }
    sync_threads();
    let v = s.get(0);
    if let Some(o) = out.get_mut(unique_index()) {
        *o = v;
    }
}

/// P11: compiled with `.maxntid 64`; `out[i] = 1`.
#[kernel(launch_bounds(64))]
pub fn p11_bounded(mut out: DisjointSlice<u32>) {
    if let Some(o) = out.get_mut(unique_index()) {
        *o = 1;
    }
}

/// P11: compiled with `.reqntid 128`; `out[i] = 2`.
#[kernel(reqntid(128))]
pub fn p11_exact(mut out: DisjointSlice<u32>) {
    if let Some(o) = out.get_mut(unique_index()) {
        *o = 2;
    }
}

#[inline(never)]
fn deep_frames(n: u32, seed: u32) -> u32 {
    let frame = core::hint::black_box([seed.wrapping_add(n); 64]);
    frame[(n % 64) as usize].wrapping_add(frame[7])
}

#[inline(never)]
fn deep_chain_3(seed: u32) -> u32 {
    let frame = core::hint::black_box([seed; 256]);
    deep_frames(3, frame[9]).wrapping_add(frame[200])
}

#[inline(never)]
fn deep_chain_2(seed: u32) -> u32 {
    let frame = core::hint::black_box([seed; 256]);
    deep_chain_3(frame[5]).wrapping_add(frame[100])
}

#[inline(never)]
fn deep_chain_1(seed: u32) -> u32 {
    let frame = core::hint::black_box([seed; 256]);
    deep_chain_2(frame[1]).wrapping_add(frame[255])
}

/// P10's control: a call chain with about 3 KiB of frames but no recursion. ptxas bounds its
/// stack, and the driver gives it that stack whatever the context's limit (1 KiB by default):
/// it runs correctly. `out[i] = deep_chain_1(i)`.
#[kernel]
pub fn p10_deep_but_bounded(mut out: DisjointSlice<u32>) {
    let i = unique_index();
    let v = deep_chain_1(i.get() as u32);
    if let Some(o) = out.get_mut(i) {
        *o = v;
    }
}

/// P11, a limit no attribute names: 96 live accumulators per thread (no launch bounds), so
/// ptxas gives the kernel more than 64 registers and it cannot run 1024 threads per block
/// (`CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK` below 1024). `out[i]` = a sum over them.
#[kernel]
pub fn p11_register_heavy(x: &[f32], mut out: DisjointSlice<f32>) {
    use ferrocuda_device::unroll::unroll;
    let i = unique_index();
    let v = x.get(i.get()).copied().unwrap_or(1.0);
    let mut acc = [0.0f32; 96];
    unroll::<96>(|k| acc[k] = v * (k as f32 + 1.0));
    for r in 0..8u32 {
        let t = core::hint::black_box(r as f32);
        unroll::<96>(|k| acc[k] = acc[k] * t + acc[(k + 7) % 96]);
    }
    let mut s = 0.0f32;
    unroll::<96>(|k| s += acc[k] * (k as f32));
    if let Some(o) = out.get_mut(i) {
        *o = s;
    }
}

/// Q7 (audit 2026-11-27b): the audit's `big_stack`, 512 KiB of locals per thread (a 256 KiB
/// array and its `black_box` copy; `ptxas -v`: 524288 bytes stack frame), no recursion. An
/// H100 refused the launch with a bare `CUDA_ERROR_INVALID_VALUE`. `out[i] = a[(7 i + k) %
/// 65536]` with `a[j] = j ^ k`.
#[kernel]
pub fn q7_big_stack(k: u32, mut out: DisjointSlice<u32>) {
    let i = unique_index();
    let mut a = [0u32; 65536];
    let mut j = 0;
    while j < a.len() {
        a[j] = (j as u32) ^ k;
        j += 1;
    }
    let a = core::hint::black_box(a);
    let v = a[(i.get().wrapping_mul(7).wrapping_add(k as usize)) % 65536];
    if let Some(o) = out.get_mut(i) {
        *o = v;
    }
}

/// Q7's control: the same with a 16 KiB array (32 KiB of stack), which a GPU runs.
#[kernel]
pub fn q7_small_stack(k: u32, mut out: DisjointSlice<u32>) {
    let i = unique_index();
    let mut a = [0u32; 4096];
    let mut j = 0;
    while j < a.len() {
        a[j] = (j as u32) ^ k;
        j += 1;
    }
    let a = core::hint::black_box(a);
    let v = a[(i.get().wrapping_mul(7).wrapping_add(k as usize)) % 4096];
    if let Some(o) = out.get_mut(i) {
        *o = v;
    }
}

/// Q11 (audit 2026-11-27b): integer arithmetic that overflows. mode 0: `x + 1`; 1: `x << s`;
/// 2: `x * 3`. With overflow checks off in both builds (this crate, built in release) the GPU
/// and the CPU executor wrap alike; with them on in both, both panic at this line
/// (tests/kernels-checked).
#[kernel]
pub fn q11_int_ops(mode: u32, x: &[u32], s: u32, mut out: DisjointSlice<u32>) {
    let i = unique_index();
    let Some(&v) = x.get(i.get()) else { return };
    let r = match mode {
        0 => v + 1,
        1 => v << s,
        _ => v * 3,
    };
    if let Some(o) = out.get_mut(i) {
        *o = r;
    }
}

/// A step of [`q4_fnptr_recurse`]'s recursion, called through a pointer.
#[derive(Clone, Copy)]
pub struct Q4Step(pub fn(u32, u32, Q4Step) -> u32);

#[inline(never)]
fn q4_deep_a(n: u32, seed: u32, me: Q4Step) -> u32 {
    let frame = core::hint::black_box([seed.wrapping_add(n); 32]);
    if n == 0 { frame[3] } else { (me.0)(n - 1, frame[(n % 32) as usize], me).wrapping_add(frame[7]) }
}

#[inline(never)]
fn q4_deep_b(n: u32, seed: u32, me: Q4Step) -> u32 {
    let frame = core::hint::black_box([seed.wrapping_mul(3).wrapping_add(n); 32]);
    if n == 0 { frame[5] } else { (me.0)(n - 1, frame[(n % 32) as usize], me).wrapping_add(frame[1]) }
}

/// Q4 (audit 2026-11-27b): the audit's `fnptr_recurse`, recursion through a function pointer
/// picked at run time, 128-byte frames. The builder refuses it unless the build script vouches
/// for it (this crate's build.rs does, with `allow_recursion`); a depth past the context's
/// stack limit faults, and the error names the kernel and the limit (`Error::StackLimitFault`).
#[kernel]
pub fn q4_fnptr_recurse(depth: u32, pick: u32, mut out: DisjointSlice<u32>) {
    let i = unique_index();
    let table = [Q4Step(q4_deep_a), Q4Step(q4_deep_b)];
    let step = core::hint::black_box(table[(pick & 1) as usize]);
    let v = (step.0)(depth, i.get() as u32, step);
    if let Some(o) = out.get_mut(i) {
        *o = v;
    }
}

/// F2 (audit 2026-11-27c, `r20_grid_barrier`): a hand-written grid barrier. Each block's thread
/// 0 arrives at `counter[0]` and spins until every block has, then the block syncs, and every
/// thread writes what it saw to `out[global index]` (the block count). Needs every block
/// resident at once: only a cooperative launch promises that.
#[kernel]
pub fn f2_grid_barrier(counter: AtomicSlice<u32>, out: AtomicSlice<u32>) {
    let blocks = ferrocuda_device::thread::grid_dim_x();
    if thread_idx_x() == 0 {
        counter.fetch_add(0, 1);
        while counter.load(0) < blocks {}
    }
    sync_threads();
    let index = ferrocuda_device::thread::block_idx_x() * ferrocuda_device::thread::block_dim_x() + thread_idx_x();
    out.store(index as usize, counter.load(0));
}

/// F7 (audit 2026-11-27c, `r22_static_plus_dynamic`): 48000 bytes of `shared_array!` beside
/// the launch's dynamic shared memory; each thread writes its index through both and `out[t]`
/// gets their sum.
#[kernel]
pub fn f7_static_plus_dynamic(mut out: DisjointSlice<u32>) {
    let big = shared_array![u32; 12000];
    let dynamic = ferrocuda_device::shared::dynamic_shared::<u32>();
    let t = thread_idx_x() as usize;
    big.set(t, t as u32);
    dynamic.set(t, 1);
    if let Some(o) = out.get_mut(unique_index()) {
        *o = big.get(t) + dynamic.get(t);
    }
}

/// G8 (audit 2026-11-27d, `partial_sync`): barriers in a block of 48 threads, whose second warp
/// has 16 lanes. mode 0: `sync_warp(u32::MAX)` (the mask names lanes 48..63, which do not
/// exist), then 1; mode 1: `sync_threads_count(true)`; mode 2: `sync_threads_count(t odd)`.
/// `out[t]` = what thread `t` got.
#[kernel]
pub fn g8_partial_warp_barriers(mode: u32, mut out: DisjointSlice<u32>) {
    let t = thread_idx_x();
    let v = match mode {
        0 => {
            ferrocuda_device::sync::sync_warp(u32::MAX);
            1
        }
        1 => sync_threads_count(true),
        _ => sync_threads_count(t % 2 == 1),
    };
    if let Some(o) = out.get_mut(unique_index()) {
        *o = v;
    }
}
