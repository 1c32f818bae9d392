//! Kernels that exercise the device library, one feature each; the tests in
//! `tests/gpu_device_lib.rs` launch them and check every output against the host.

use core::sync::atomic::{AtomicU32, Ordering};

use ferrocuda_device::atomic::{self, Scope};
use ferrocuda_device::global::{AtomicSlice, DisjointChunks, DisjointPlanes, DisjointSlice, PerBlock, once_per_block, unique_index};
use ferrocuda_device::math::{DeviceFloat, FastMath};
use ferrocuda_device::sync::{sync_threads, sync_threads_and, sync_threads_count, sync_threads_or, sync_warp};
use ferrocuda_device::thread::{block_dim, block_idx, grid_dim, index_1d, index_3d, rank_in_block, thread_idx, thread_idx_x};
use ferrocuda_device::thread::{block_size, grid_stride_range};
use ferrocuda_device::{dynamic_shared, kernel, shared_array, warp};

/// Words written per thread by [`indices_3d`].
pub const INDEX_WORDS: usize = 8;

/// Every thread of a 3-D launch writes its indices at its global linear position:
/// `threadIdx.xyz, blockIdx.xyz, rank in block, global linear id`. The per-thread outputs
/// need a 1-D launch, so a 3-D kernel stores through an `AtomicSlice` (relaxed stores, as
/// cheap as plain ones).
#[kernel]
pub fn indices_3d(out: AtomicSlice<u32>) {
    // The global linear id `x + width * (y + height * z)` over the global coordinates; the
    // test checks word 7 against that formula.
    let ((x, y, z), (d, g)) = (index_3d(), (block_dim(), grid_dim()));
    let (width, height) = ((d.x * g.x) as usize, (d.y * g.y) as usize);
    let i = x + width * (y + height * z);
    let (t, b) = (thread_idx(), block_idx());
    let words = [t.x, t.y, t.z, b.x, b.y, b.z, rank_in_block(), i as u32];
    for (k, word) in words.into_iter().enumerate() {
        out.store(i * INDEX_WORDS + k, word);
    }
}

/// Two static shared arrays of 256 elements: `a` gets `x`, `b` gets `2x`; after a barrier each
/// thread reads `a` reversed and `b` shifted by one, so a block that shared one array for both,
/// or skipped the barrier, gives a different answer. Launch with blocks of 256.
#[kernel]
pub fn shared_two_arrays(x: &[f32], mut out: DisjointSlice<f32>) {
    let a = shared_array![f32; 256];
    let b = shared_array![f32; 256];
    let t = thread_idx_x() as usize;
    let i = unique_index();
    a.set(t, x[i]);
    b.set(t, 2.0 * x[i]);
    sync_threads();
    out[i] = a.get(255 - t) + 1000.0 * b.get((t + 1) % 256);
}

/// Block sum of `x` through dynamic shared memory (one `u32` per thread, a tree reduction);
/// `out[block] = sum`. The second half of the dynamic memory holds each thread's index,
/// checked after the reduction to show the two halves of `split_at` do not overlap.
#[kernel]
pub fn dynamic_shared_sum(x: &[u32], out: AtomicSlice<u32>) {
    let (sums, marks) = dynamic_shared::<u32>().split_at(block_size() as usize);
    let t = thread_idx_x() as usize;
    sums.set(t, x[index_1d()]);
    marks.set(t, t as u32);
    sync_threads();
    let mut width = sums.len() / 2;
    while width > 0 {
        if t < width {
            sums.set(t, sums.get(t) + sums.get(t + width));
        }
        sync_threads();
        width /= 2;
    }
    if t == 0 {
        out.store(2 * block_idx().x as usize, sums.get(0));
    }
    if marks.get(t) != t as u32 {
        // Any number of threads may find a wrong mark: an atomic store, not a plain race.
        out.store(2 * block_idx().x as usize + 1, 1);
    }
}

/// Block barriers with reductions: per block `[count of odd x, all odd, any odd]`.
#[kernel]
pub fn barrier_votes(x: &[u32], mut out: PerBlock<[u32; 3]>) {
    let odd = x[index_1d()] % 2 == 1;
    let count = sync_threads_count(odd);
    let all = sync_threads_and(odd);
    let any = sync_threads_or(odd);
    if let Some(b) = once_per_block() {
        out[b] = [count, all as u32, any as u32];
    }
}

/// Words written per thread by [`warp_ops`].
pub const WARP_WORDS: usize = 14;

/// Each lane writes the results of every warp operation on its `x` (see the test for the list).
#[kernel]
pub fn warp_ops(x: &[u32], mut out: DisjointChunks<u32, WARP_WORDS>) {
    let i = unique_index();
    let v = x[i];
    let lane = warp::lane_id();
    let wide = ((v as u64) << 32) | (v as u64 ^ 0xdead_beef);
    let results = [
        lane,
        warp::shuffle(v, 31 - lane),
        warp::shuffle_up(v, 3),
        warp::shuffle_down(v, 5),
        warp::shuffle_xor(v, 1),
        (warp::shuffle_xor(wide, 2) >> 32) as u32,
        warp::shuffle_xor(wide, 2) as u32,
        warp::ballot(v.is_multiple_of(3)),
        warp::all(v < 1000) as u32,
        warp::any(v == 7) as u32,
        warp::match_any(v % 4),
        warp::reduce_sum(v),
        warp::reduce_max(v),
        warp::reduce_sum(v as f32 * 0.5) as u32,
    ];
    sync_warp(warp::FULL_MASK);
    out[i] = results;
}

/// Float atomic max and min from every thread (CUDA's `atomicMaxFloat` idiom; issue 30's fourth
/// port, D5): `extrema_f32 = [max x, min x]` and `extrema_f64` the same of `x as f64`.
#[kernel]
pub fn atomic_float_extrema(x: &[f32], extrema_f32: AtomicSlice<f32>, extrema_f64: AtomicSlice<f64>) {
    let Some(&v) = x.get(index_1d()) else { return };
    extrema_f32.fetch_max(0, v);
    extrema_f32.fetch_min(1, v);
    extrema_f64.fetch_max(0, v as f64);
    extrema_f64.fetch_min(1, v as f64);
}

/// Atomics from every thread on a few shared counters:
/// `counters = [Σ1 (device), Σ1 (block scope on a per-block slot..), max x, min x, Σx via CAS loop,
/// Σ1 via core::sync::atomic, exchange count]`, `sums_f32[0] = Σ x as f32`, `sums_f64[0] = Σ x as f64`.
#[kernel]
pub fn atomics(x: &[u32], counters: AtomicSlice<u32>, sums_f32: AtomicSlice<f32>, sums_f64: AtomicSlice<f64>) {
    let v = x[index_1d()];
    atomic::fetch_add(counters.at(0), 1u32);
    counters.fetch_add_scoped(Scope::System, 1, 1u32);
    counters.fetch_max(2, v);
    counters.at(3).fetch_min(v);
    // Σx through a compare-and-swap loop, the way any other read-modify-write is built.
    let mut seen = counters.load(4);
    loop {
        let old = counters.compare_exchange(4, seen, seen.wrapping_add(v));
        if old == seen {
            break;
        }
        seen = old;
    }
    assert!(counters.len() > 7, "8 counters");
    // SAFETY: element 5 is a valid, aligned u32 (in bounds: checked above) that every thread
    // updates only atomically.
    let core_counter = unsafe { AtomicU32::from_ptr(counters.as_ptr().add(5)) };
    core_counter.fetch_add(1, Ordering::Relaxed);
    // Exactly one thread sees 0 come back from the exchange.
    if counters.exchange(6, 1u32) == 0 {
        counters.fetch_add(7, 1u32);
    }
    atomic::add(sums_f32.at(0), v as f32);
    sums_f64.add(0, v as f64);
}

/// A 256-bin histogram of the low byte of `x`: per-block bins in shared memory
/// (`atom.shared.add`), then one global atomic add per non-empty bin. Blocks of 256 threads.
#[kernel]
pub fn histogram_256(x: &[u32], bins: AtomicSlice<u32>) {
    let local = shared_array![u32; 256];
    let t = thread_idx_x() as usize;
    local.set(t, 0);
    sync_threads();
    for i in grid_stride_range(x.len()) {
        local.fetch_add((x[i] & 0xff) as usize, 1);
    }
    sync_threads();
    let count = local.get(t);
    if count > 0 {
        bins.add(t, count);
    }
}

/// Functions evaluated by [`math_f32`] and [`math_f64`], in output order.
pub const MATH_FUNCTIONS: [&str; 24] = [
    "sqrt",
    "rsqrt",
    "cbrt",
    "exp",
    "exp2",
    "exp_m1",
    "ln",
    "log2",
    "log10",
    "ln_1p",
    "sin",
    "cos",
    "tan",
    "asin",
    "atan",
    "sinh",
    "tanh",
    "erf",
    "erfc",
    "floor",
    "ceil",
    "round",
    "powf(x, 1.7)",
    "powi(x, 5)",
];

macro_rules! math_list {
    ($x:expr) => {{
        let x = $x;
        [
            x.sqrt(),
            x.rsqrt(),
            x.cbrt(),
            x.exp(),
            x.exp2(),
            x.exp_m1(),
            x.ln(),
            x.log2(),
            x.log10(),
            x.ln_1p(),
            x.sin(),
            x.cos(),
            x.tan(),
            (x * 0.1).asin(),
            x.atan(),
            x.sinh(),
            x.tanh(),
            DeviceFloat::erf(x),
            DeviceFloat::erfc(x),
            x.floor(),
            x.ceil(),
            x.round(),
            x.powf(1.7),
            x.powi(5),
        ]
    }};
}

/// `out[f * n + i] = MATH_FUNCTIONS[f](x[i])` in `f32`.
#[kernel]
pub fn math_f32(x: &[f32], mut out: DisjointPlanes<f32, 24>) {
    let i = unique_index();
    if i.get() < x.len() {
        for (f, r) in math_list!(x[i]).into_iter().enumerate() {
            *out.get_mut(i, f).expect("24 planes of x.len()") = r;
        }
    }
}

/// `out[f * n + i] = MATH_FUNCTIONS[f](x[i])` in `f64`.
#[kernel]
pub fn math_f64(x: &[f64], mut out: DisjointPlanes<f64, 24>) {
    let i = unique_index();
    if i.get() < x.len() {
        for (f, r) in math_list!(x[i]).into_iter().enumerate() {
            *out.get_mut(i, f).expect("24 planes of x.len()") = r;
        }
    }
}

/// The fast approximations, in order `exp, exp2, ln, log2, sin, cos, rsqrt, recip, tanh, div(x, 3)`.
#[kernel]
pub fn fast_math(x: &[f32], mut out: DisjointPlanes<f32, 10>) {
    let i = unique_index();
    if i.get() < x.len() {
        let v = x[i];
        let r = [
            v.fast_exp(),
            v.fast_exp2(),
            v.fast_ln(),
            v.fast_log2(),
            v.fast_sin(),
            v.fast_cos(),
            v.fast_rsqrt(),
            v.fast_recip(),
            v.fast_tanh(),
            v.fast_div(3.0),
        ];
        for (f, r) in r.into_iter().enumerate() {
            *out.get_mut(i, f).expect("10 planes of x.len()") = r;
        }
    }
}

/// Panics with a formatted message when `x[i] > limit` (to test panic reports).
#[kernel]
pub fn panic_formatted(x: &[u32], limit: u32) {
    let i = index_1d();
    if i < x.len() && x[i] > limit {
        panic!("value {} at {} is over the limit {}", x[i], i, limit);
    }
}

/// Thread 0 of each block prints a formatted line; lane 0 of each other warp of block 0 a
/// shorter one (the test reads them back from the process's stdout).
#[kernel]
pub fn print_lines(value: f32, tag: u32) {
    let t = thread_idx_x();
    if t == 0 {
        ferrocuda_device::println!("block {} of {} says {:.3} tag={:x} ok={}", block_idx().x, grid_dim().x, value, tag, true);
    } else if block_idx().x == 0 && t.is_multiple_of(32) {
        ferrocuda_device::println!("warp {:>2} checking in, 100% ready", t / 32);
    }
}

/// Distributed shared memory across a cluster (sm_90 only): each block fills its shared array
/// with `1000 * cluster rank + t`, the cluster synchronises, and each thread reads element `t`
/// of the NEXT block's array. `out[global thread] = that value`. Launch with clusters of 2-8
/// blocks of 128 threads.
#[kernel]
#[cfg_attr(target_arch = "nvptx64", cfg(ferrocuda_sm = "90"))]
pub fn cluster_ring_exchange(mut out: DisjointSlice<u32>) {
    use ferrocuda_device::cluster;
    let values = shared_array![u32; 128];
    let t = thread_idx_x() as usize;
    let rank = cluster::block_rank();
    values.set(t, 1000 * rank + t as u32);
    cluster::sync();
    let next = (rank + 1) % cluster::size();
    if let Some(o) = out.get_mut(unique_index()) {
        // SAFETY: no thread returns before the second `sync()` below, so block `next` is
        // running until every peer has read; its `values` were written before the first
        // `sync()` and are not written again.
        *o = unsafe { cluster::peer_get(&values, next, t) };
    }
    // Keep our array alive until every peer has read it.
    cluster::sync();
}

/// A kernel compiled for clusters of 2 blocks along x (`cluster_dims(2)`, `.reqnctapercluster
/// 2, 1, 1` in its PTX): `out[global thread] = 1000 * cluster size + cluster rank`, so a launch
/// whose configuration names no cluster shows that it still ran in pairs.
#[kernel(cluster_dims(2))]
#[cfg_attr(target_arch = "nvptx64", cfg(ferrocuda_sm = "90"))]
pub fn compiled_cluster_shape(mut out: DisjointSlice<u32>) {
    use ferrocuda_device::cluster;
    if let Some(o) = out.get_mut(unique_index()) {
        *o = 1000 * cluster::size() + cluster::block_rank();
    }
}

/// One warp multiplies a 16x16 f16 matrix `a` (row-major) by a 16x8 f16 matrix `b`
/// (row-major) on the tensor cores, into `c` (16x8 f32, row-major). Launch 1 block of 32.
#[kernel]
pub fn mma_m16n8k16_f16(a: &[u16], b: &[u16], mut c: DisjointSlice<f32>) {
    use ferrocuda_device::mma;
    let lane = warp::lane_id();
    if a.len() >= 256 && b.len() >= 128 && c.len() >= 128 && first_warp_of_the_grid() {
        // SAFETY: the condition is uniform across the warp (lengths, block and warp index), so
        // all 32 lanes of warp 0 execute the mma together.
        let d = unsafe { mma::m16n8k16_f16(mma::load_a(a, 16, lane), mma::load_b(b, 8, lane), [0.0; 4]) };
        // SAFETY: only the first warp of the grid gets here, and its lanes store disjoint
        // elements of the 16 x 8 tile (`store_d`'s fragment layout).
        mma::store_d(unsafe { c.as_mut_slice() }, 8, lane, d);
    }
}

/// True in the 32 threads of warp 0 of block (0, 0, 0), the only warp the single-tile mma
/// kernels let store (any launch shape stays race-free).
#[inline(always)]
fn first_warp_of_the_grid() -> bool {
    let b = block_idx();
    (b.x, b.y, b.z) == (0, 0, 0) && warp::warp_id() == 0 && block_size() >= 32
}

/// Per lane: `[active mask inside an even-lanes branch, match_all of the warp index (uniform),
/// match_all of the lane (not uniform) as 1/0]`; per block, `block_counts[block]` counts its
/// threads with a block-scope atomic, published with fences.
#[kernel]
pub fn warp_masks_and_block_atomics(mut out: DisjointChunks<u32, 3>, block_counts: AtomicSlice<u32>) {
    let i = unique_index();
    let lane = warp::lane_id();
    let mut in_branch = 0;
    if lane.is_multiple_of(2) {
        in_branch = warp::active_mask();
    }
    sync_warp(warp::FULL_MASK);
    let uniform = warp::match_all(warp::warp_id()).map_or(0, |mask| mask);
    let varied = warp::match_all(lane).is_some() as u32;
    ferrocuda_device::sync::fence_block();
    block_counts.fetch_add_scoped(Scope::Block, block_idx().x as usize, 1u32);
    ferrocuda_device::sync::fence_device();
    if let Some(words) = out.get_mut(i) {
        *words = [in_branch, uniform, varied];
    }
}

/// As [`mma_m16n8k16_f16`] with bf16 inputs.
#[kernel]
pub fn mma_m16n8k16_bf16(a: &[u16], b: &[u16], mut c: DisjointSlice<f32>) {
    use ferrocuda_device::mma;
    let lane = warp::lane_id();
    if a.len() >= 256 && b.len() >= 128 && c.len() >= 128 && first_warp_of_the_grid() {
        // SAFETY: as in `mma_m16n8k16_f16`: the whole warp 0 executes it together.
        let d = unsafe { mma::m16n8k16_bf16(mma::load_a(a, 16, lane), mma::load_b(b, 8, lane), [0.0; 4]) };
        // SAFETY: as in `mma_m16n8k16_f16`.
        mma::store_d(unsafe { c.as_mut_slice() }, 8, lane, d);
    }
}
