//! Kernels for the device-library gaps of issue 23 (16-byte shared memory, cache hints, fast
//! math, block collectives); `tests/port_gaps.rs` runs each on the CPU executor and the GPU
//! and checks every output against the host, and `tests/port_gaps_ptx.rs` checks the
//! instructions they compile to.

use bytemuck::{Pod, Zeroable};
use ferrocuda_device::block::{self, BlockReduce, BlockScan, BlockScratch};
use ferrocuda_device::cache::{self, CachePolicy, Load, Store};
use ferrocuda_device::global::{DisjointChunks, DisjointSlice, unique_index};
use ferrocuda_device::math::FastMath;
use ferrocuda_device::sync::sync_threads;
use ferrocuda_device::thread::{index_1d, thread_idx_x};
use ferrocuda_device::{block_scratch, kernel, shared_array};

/// CUDA's `float4`: 16 bytes, 16-byte aligned.
#[repr(C, align(16))]
#[derive(Debug, Clone, Copy, PartialEq, Default, Pod, Zeroable, ferrocuda_device::LayoutKey)]
pub struct F4 {
    /// Lane 0.
    pub x: f32,
    /// Lane 1.
    pub y: f32,
    /// Lane 2.
    pub z: f32,
    /// Lane 3.
    pub w: f32,
}

/// Blocks of 256: each thread writes its 4 inputs into a 1024-float tile with one 16-byte
/// shared store, and after a barrier reads the 4 floats of thread `(t + 1) % 256` with one
/// 16-byte load; the f64 tile does the same with `x2` (16 bytes of two f64s), read from
/// thread `255 - t`. `out[4i..4i+4]` and `wide[2i..2i+2]`.
#[kernel]
pub fn shared_x4_rotate(x: &[F4], mut out: DisjointSlice<F4>, mut wide: DisjointSlice<[f64; 2]>) {
    let tile = shared_array![f32; 1024];
    let pairs = shared_array![f64; 512];
    let t = thread_idx_x() as usize;
    let i = unique_index();
    let v = x[i.get()];
    tile.set_x4(t, [v.x, v.y, v.z, v.w]);
    pairs.set_x2(t, [v.x as f64 * 0.5, v.w as f64 * 0.25]);
    sync_threads();
    let [a, b, c, d] = tile.get_x4((t + 1) % 256);
    out[i] = F4 { x: a, y: b, z: c, w: d };
    wide[i] = pairs.get_x2(255 - t);
}

/// Blocks of 256: four back-to-back scalar shared stores of consecutive floats (which ptxas
/// merges into one `STS.128`: docs/performance.md), read back in rotated order.
#[kernel]
pub fn shared_four_scalar_stores(x: &[F4], mut out: DisjointSlice<F4>) {
    let tile = shared_array![f32; 1024];
    let t = thread_idx_x() as usize;
    let i = unique_index();
    let v = x[i.get()];
    // SAFETY: t < 256, so 4t + 3 < 1024.
    unsafe {
        tile.set_unchecked(4 * t, v.x);
        tile.set_unchecked(4 * t + 1, v.y);
        tile.set_unchecked(4 * t + 2, v.z);
        tile.set_unchecked(4 * t + 3, v.w);
    }
    sync_threads();
    let [a, b, c, d] = tile.get_x4(255 - t);
    out[i] = F4 { x: a, y: b, z: c, w: d };
}

/// Copies `x` to `out` with load hint `load` (0..=6: CacheAll, CacheGlobal, Streaming,
/// LastUse, EvictFirst, EvictLast, NoAllocate) and store hint `store` (0..=5: CacheGlobal,
/// Streaming, WriteThrough, EvictFirst, EvictLast, NoAllocate), adding 1 so the copy is seen.
#[kernel]
pub fn cache_hint_copy(x: &[f32], load: u32, store: u32, mut out: DisjointSlice<f32>) {
    let i = unique_index();
    if i.get() >= x.len() {
        return;
    }
    let src = &x[i.get()];
    let v = match load {
        0 => cache::load(src, Load::CacheAll),
        1 => cache::load(src, Load::CacheGlobal),
        2 => cache::load(src, Load::Streaming),
        3 => cache::load(src, Load::LastUse),
        4 => cache::load(src, Load::EvictFirst),
        5 => cache::load(src, Load::EvictLast),
        _ => cache::load(src, Load::NoAllocate),
    } + 1.0;
    let Some(dst) = out.get_mut(i) else { return };
    match store {
        0 => cache::store(dst, v, Store::CacheGlobal),
        1 => cache::store(dst, v, Store::Streaming),
        2 => cache::store(dst, v, Store::WriteThrough),
        3 => cache::store(dst, v, Store::EvictFirst),
        4 => cache::store(dst, v, Store::EvictLast),
        _ => cache::store(dst, v, Store::NoAllocate),
    }
}

/// A streaming 16-byte copy (`__ldcs`/`__stcs` of a `float4`) plus an f64 copy through the
/// L2 evict-last policy: `out[i] = 2 x[i]`, `wide_out[i] = y[i] + 1`.
#[kernel]
pub fn cache_hint_wide(x: &[F4], y: &[f64], mut out: DisjointSlice<F4>, mut wide_out: DisjointSlice<f64>) {
    let i = unique_index();
    if i.get() >= x.len() || i.get() >= y.len() {
        return;
    }
    let v = cache::load(&x[i.get()], Load::Streaming);
    if let Some(dst) = out.get_mut(i) {
        cache::store(dst, F4 { x: 2.0 * v.x, y: 2.0 * v.y, z: 2.0 * v.z, w: 2.0 * v.w }, Store::Streaming);
    }
    let keep = CachePolicy::evict_last();
    let w = cache::load_with_policy(&y[i.get()], keep) + 1.0;
    if let Some(dst) = wide_out.get_mut(i) {
        cache::store_with_policy(dst, w, CachePolicy::evict_first());
    }
}

/// Words per thread written by [`fast_math_ops`].
pub const FAST_WORDS: usize = 10;

/// The `FastMath` methods of issue 23 on `x[i]` and `y[i]`: `[sqrt x, x / y, exp2 y, rsqrt x,
/// tanh y, exp10 y, log10 x, tan y, powf(x, y), sqrt(x) via fast_sqrt of a denormal·x]`.
#[kernel]
pub fn fast_math_ops(x: &[f32], y: &[f32], mut out: DisjointChunks<f32, FAST_WORDS>) {
    let i = unique_index();
    let (a, b) = (x[i.get()], y[i.get()]);
    let words = [
        a.fast_sqrt(),
        a.fast_div(b),
        b.fast_exp2(),
        a.fast_rsqrt(),
        b.fast_tanh(),
        b.fast_exp10(),
        a.fast_log10(),
        b.fast_tan(),
        a.fast_powf(b),
        // A denormal input flushes to zero (`.ftz`) on both back ends.
        (a * 1.0e-40).fast_div(1.0),
    ];
    if let Some(chunk) = out.get_mut(i) {
        *chunk = words;
    }
}

/// Words per thread written by [`block_collectives_256`].
pub const BLOCK_WORDS: usize = 10;

/// A helper that needs block scratch takes it from its caller (see `ferrocuda_device::block`):
/// the sum of `value` over the block, computed twice on the same scratch back to back (a
/// reuse that would race without the collectives' trailing barrier).
fn twice_sum<const THREADS: u32>(scratch: BlockScratch<u32>, value: u32) -> (u32, u32) {
    let reduce = BlockReduce::<u32, THREADS>::new(scratch);
    (reduce.sum(value), reduce.sum(value + 1))
}

/// Blocks of 256 (8 warps): per thread `[f32 sum, f32 sum_x4, f32 max, u32 min, u32
/// inclusive sum, u32 exclusive sum, u32 block total, any(v == 7), all(v < 1000), twice_sum
/// second minus first]` (floats as bits).
#[kernel]
pub fn block_collectives_256(x: &[f32], v: &[u32], mut out: DisjointChunks<u32, BLOCK_WORDS>) {
    let i = unique_index();
    let (a, b) = (x[index_1d()], v[index_1d()]);
    let floats = BlockReduce::<f32, 256>::new(block_scratch!(f32));
    let sum = floats.sum(a);
    let sum_x4 = floats.sum_x4(a);
    let max = floats.max(a);
    let ints = BlockReduce::<u32, 256>::new(block_scratch!(u32));
    let min = ints.min(b);
    let scan = BlockScan::<u32, 256>::new(block_scratch!(u32));
    let inclusive = scan.inclusive_sum(b);
    let (exclusive, total) = scan.exclusive_sum(b);
    let any = block::any(b == 7);
    let all = block::all(b < 1000);
    let (first, second) = twice_sum::<256>(block_scratch!(u32), b);
    let words = [sum.to_bits(), sum_x4.to_bits(), max.to_bits(), min, inclusive, exclusive, total, any as u32, all as u32, second - first];
    if let Some(chunk) = out.get_mut(i) {
        *chunk = words;
    }
}

/// Words per thread written by [`block_collectives_small`].
pub const SMALL_WORDS: usize = 4;

/// Blocks of 64 (two warps: the fold without 16-byte reads) or of 32 (one warp: no shared
/// memory), chosen by `one_warp`: per thread `[u32 sum, u32 max, inclusive scan with max,
/// exclusive scan with max from 0]`.
#[kernel]
pub fn block_collectives_small(v: &[u32], one_warp: bool, mut out: DisjointChunks<u32, SMALL_WORDS>) {
    let i = unique_index();
    let b = v[index_1d()];
    let max = |p: u32, q: u32| p.max(q);
    let words = if one_warp {
        let reduce = BlockReduce::<u32, 32>::new(block_scratch!(u32));
        let scan = BlockScan::<u32, 32>::new(block_scratch!(u32));
        [reduce.sum(b), reduce.max(b), scan.inclusive(b, max), scan.exclusive(b, 0, max).0]
    } else {
        let reduce = BlockReduce::<u32, 64>::new(block_scratch!(u32));
        let scan = BlockScan::<u32, 64>::new(block_scratch!(u32));
        [reduce.sum(b), reduce.max(b), scan.inclusive(b, max), scan.exclusive(b, 0, max).0]
    };
    if let Some(chunk) = out.get_mut(i) {
        *chunk = words;
    }
}

/// `out[0] = tile.get_x4(index)[0]` on a 16-float tile (indices 0..4 are in bounds), and, when
/// `split` is nonzero, a 16-byte read of dynamic shared memory split `split` floats in (which
/// is misaligned unless `split` is a multiple of 4). For the panics of the checked forms.
#[kernel]
pub fn shared_x4_checks(index: u32, split: u32, mut out: DisjointSlice<f32>) {
    let tile = shared_array![f32; 16];
    let i = unique_index();
    tile.set_x4(thread_idx_x() as usize % 4, [1.0, 2.0, 3.0, 4.0]);
    sync_threads();
    let mut v = tile.get_x4(index as usize)[0];
    if split != 0 {
        let (_, rest) = ferrocuda_device::dynamic_shared::<f32>().split_at(split as usize);
        if thread_idx_x() == 0 {
            // All four floats the vector read takes: a read of shared memory no thread wrote is
            // an error on the CPU executor (audit 2026-11-27b, Q6), even of lanes left unused.
            for (k, value) in [5.0, 0.0, 0.0, 0.0].into_iter().enumerate() {
                rest.set(k, value);
            }
        }
        sync_threads();
        v += rest.get_x4(0)[0];
    }
    if let Some(o) = out.get_mut(i) {
        *o = v;
    }
}

/// A cache hint on a reference to a local (per-thread) array: the state-space test keeps the
/// hinted global load away from it (a plain local load instead), so the value is right.
/// `out[i] = local[x[i] as usize % 8]` where `local[k] = 10 k + i`.
#[kernel]
pub fn cache_hint_local(x: &[u32], mut out: DisjointSlice<u32>) {
    let i = unique_index();
    let mut local = [0u32; 8];
    for (k, slot) in local.iter_mut().enumerate() {
        *slot = 10 * k as u32 + i.get() as u32;
    }
    let Some(&k) = x.get(i.get()) else { return };
    // An opaque index keeps the array in local memory.
    let v = cache::load(&local[k as usize % 8], Load::Streaming);
    if let Some(o) = out.get_mut(i) {
        cache::store(o, v, Store::Streaming);
    }
}
