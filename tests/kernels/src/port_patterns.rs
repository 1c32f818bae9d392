//! Kernels for the patterns of issue 30 (what other people's kernels do): `tests/port_patterns.rs`
//! runs each on the CPU executor and the GPU and checks it against the host, and
//! `tests/port_patterns_ptx.rs` checks the instructions they compile to.

use ferrocuda_device::block::RuntimeBlockReduce;
use ferrocuda_device::global::{DisjointSlice, PerBlock, once_per_block, unique_index};
use ferrocuda_device::sync::sync_threads;
use ferrocuda_device::thread::{block_dim_x, block_idx_x, thread_idx_x};
use ferrocuda_device::{block_scratch, kernel, shared_array, vector};

use crate::port_gaps::F4;

/// Regression p30_1: a kernel that can panic (the bounds-checked `x[i]`) and declares a 4-byte
/// `shared_array!` first. The panic report's kernel tag (16 bytes, written with one
/// `st.shared.v2.u64` at entry) was declared `.align 8`; ptxas placed it at offset 8, and
/// every launch faulted with `CUDA_ERROR_MISALIGNED_ADDRESS` before this code ran.
/// `out[i] = x[i] + (sum of the block's first thread's x)`.
#[kernel]
pub fn p30_small_shared_first_can_panic(x: &[f32], mut out: DisjointSlice<f32>) {
    let first = shared_array![f32; 1];
    let i = unique_index();
    // Bounds-checked: this kernel keeps its panic path, so the tag store stays.
    let v = x[i.get()];
    if thread_idx_x() == 0 {
        first.set(0, v);
    }
    sync_threads();
    if let Some(o) = out.get_mut(i) {
        *o = v + first.get(0);
    }
}

/// A 16-byte vector load at `offset` 4-byte words into `x`: aligned only when `offset` is a
/// multiple of 4 (and `x` 16-byte aligned). With another offset a GPU faults
/// (`CUDA_ERROR_MISALIGNED_ADDRESS`); the CPU executor refuses it (p30_1). `out[i]` is the
/// sum of the four words.
#[kernel]
pub fn p30_vector_load_at(x: &[u32], offset: u32, mut out: DisjointSlice<u32>) {
    let i = unique_index();
    let start = offset as usize + 4 * i.get();
    if start + 4 <= x.len() {
        // SAFETY: 16 readable bytes inside `x`, which no thread writes; the 16-byte alignment is
        // the caller's (the test's) to keep, and the CPU executor checks it.
        let [a, b, c, d] = unsafe { vector::load_nc_v4(x.as_ptr().add(start).cast()) };
        if let Some(o) = out.get_mut(i) {
            *o = a.wrapping_add(b).wrapping_add(c).wrapping_add(d);
        }
    }
}

/// `[cosh x, sinh x, tanh x]` by the fast approximations of issue 30 (`fast_math(true)`'s
/// `cosh`, `sinh`, `tanh`), per thread.
#[kernel]
pub fn p30_fast_hyperbolic(x: &[f32], mut out: ferrocuda_device::global::DisjointChunks<f32, 3>) {
    use ferrocuda_device::math::FastMath;
    let i = unique_index();
    if let (Some(o), Some(&v)) = (out.get_mut(i), x.get(i.get())) {
        *o = [v.fast_cosh(), v.fast_sinh(), v.fast_tanh()];
    }
}

/// p30_5: a 16-byte copy of an input, `out[i] = x[i] * 2`, through `vector::load16` /
/// `store16`: one `ld.global.nc.v4` (the input is read-only for the launch) and one
/// `st.global.v4` (a plain `*o = *v` is two 8-byte loads without `.nc`).
#[kernel]
pub fn p30_load16_input(x: &[F4], mut out: DisjointSlice<F4>) {
    let i = unique_index();
    if let (Some(o), Some(v)) = (out.get_mut(i), x.get(i.get())) {
        let v = vector::load16(v);
        vector::store16(o, F4 { x: v.x * 2.0, y: v.y * 2.0, z: v.z * 2.0, w: v.w * 2.0 });
    }
}

/// p30_5: an in-place update of the thread's own output element, `out[i] += 1`, in 16-byte
/// accesses: the load is the plain weak `ld.global.v4` (`LDG.E.128`), not `.nc` (the element
/// is written during the launch).
#[kernel]
pub fn p30_load16_in_place(mut out: DisjointSlice<F4>) {
    let i = unique_index();
    if let Some(o) = out.get_mut(i) {
        let v = vector::load16(&*o);
        vector::store16(o, F4 { x: v.x + 1.0, y: v.y + 1.0, z: v.z + 1.0, w: v.w + 1.0 });
    }
}

/// The trap `load16` avoids (pinned): `*o = *v` of a 16-byte struct.
#[kernel]
pub fn p30_struct_copy(x: &[F4], mut out: DisjointSlice<F4>) {
    let i = unique_index();
    if let (Some(o), Some(v)) = (out.get_mut(i), x.get(i.get())) {
        *o = *v;
    }
}

/// p30_5: `out[i] = x[i]` of 16-byte elements with the load hint `hint` (0 none through
/// `vector::load16`, 1 `CacheAll`, 2 `CacheGlobal`, 3 `Streaming`, 4 `LastUse`): one kernel
/// holding every form, whose SASS is compared with nvcc's for the CUDA names.
#[kernel]
pub fn p30_wide_load_hints(x: &[F4], hint: u32, mut out: DisjointSlice<F4>) {
    use ferrocuda_device::cache::{self, Load};
    let i = unique_index();
    if let (Some(o), Some(v)) = (out.get_mut(i), x.get(i.get())) {
        let value = match hint {
            1 => cache::load(v, Load::CacheAll),
            2 => cache::load(v, Load::CacheGlobal),
            3 => cache::load(v, Load::Streaming),
            4 => cache::load(v, Load::LastUse),
            _ => vector::load16(v),
        };
        vector::store16(o, value);
    }
}

/// p30_3: row sums with the block size chosen at launch: block `b` sums row `b` (`cols` wide),
/// its threads striding by the block size; thread 0 writes the sum (CUB's `BlockReduce` as
/// kernels use it).
#[kernel]
pub fn p30_row_sum(x: &[f32], cols: u32, mut sums: PerBlock<f32>) {
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    let row = block_idx_x() as usize * cols as usize;
    let mut s = 0.0f32;
    let mut c = thread_idx_x();
    while c < cols {
        s += x[row + c as usize];
        c += block_dim_x();
    }
    if let Some(total) = reduce.sum(s)
        && let Some(b) = once_per_block()
        && let Some(out) = sums.get_mut(b)
    {
        *out = total;
    }
}

/// p30_3: `y = x / sum(row)` with the sum in every thread (`sum_all`), and the row's maximum and
/// minimum of `u32` keys in thread 0 (`[max, min]` per block): a second and third collective
/// on the same scratch, back to back.
#[kernel]
pub fn p30_row_normalize(x: &[f32], keys: &[u32], cols: u32, mut y: DisjointSlice<f32>, mut extremes: PerBlock<[u32; 2]>) {
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    let keys_reduce = RuntimeBlockReduce::new(block_scratch!(u32));
    let row = block_idx_x() as usize * cols as usize;
    let (mut s, mut high, mut low) = (0.0f32, 0u32, u32::MAX);
    let mut c = thread_idx_x();
    while c < cols {
        s += x[row + c as usize];
        high = high.max(keys[row + c as usize]);
        low = low.min(keys[row + c as usize]);
        c += block_dim_x();
    }
    let inverse = 1.0 / reduce.sum_all(s);
    let high = keys_reduce.max(high);
    let low = keys_reduce.min(low);
    if let (Some(high), Some(low)) = (high, low)
        && let Some(b) = once_per_block()
        && let Some(out) = extremes.get_mut(b)
    {
        *out = [high, low];
    }
    let i = unique_index();
    if let (Some(o), Some(&v)) = (y.get_mut(i), x.get(i.get())) {
        *o = v * inverse;
    }
}

/// p30_3, llm.c's softmax reductions: a block per row, a thread per column (`cols` threads,
/// 1 to 1024), the row's maximum then the sum of `exp(x - max)` with
/// `RuntimeBlockReduce::max_then_sum_all` (2 barriers, llm.c's count), then a layer norm's
/// sum and sum of squared deviations with `sum_then_sum_all`, on the same scratch. Writes the
/// softmax to `y` and `[sum, squares]` per row to `moments`.
#[kernel]
pub fn p30_row_softmax_paired(x: &[f32], cols: u32, mut y: DisjointSlice<f32>, mut moments: PerBlock<[f32; 2]>) {
    #[cfg_attr(not(target_arch = "nvptx64"), allow(unused_imports))]
    use ferrocuda_device::math::DeviceFloat;
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    let i = unique_index();
    let v = x.get(i.get()).copied().unwrap_or(0.0);
    let (max, sum) = reduce.max_then_sum_all(v, |m| (v - m).exp());
    let (total, squares) = reduce.sum_then_sum_all(v, |t| {
        let d = v - t / cols as f32;
        d * d
    });
    if let Some(o) = y.get_mut(i) {
        *o = (v - max).exp() / sum;
    }
    if let Some(b) = once_per_block()
        && let Some(out) = moments.get_mut(b)
    {
        *out = [total, squares];
    }
}

/// p30, a compile-time block size: `reqntid(256)` tells the compiler the block's shape, so
/// `block_dim_x()` is the constant 256 (no `%ntid.x` read), the strided loop's trip count is a
/// shift and LLVM unrolls it (four loads in flight, as nvcc over llm.c's `constexpr
/// BlockSize`), and the block reduction's warp count is a constant. Each block sums all of `x`.
#[kernel(reqntid(256))]
pub fn p30_strided_sum_reqntid(x: &[f32], mut sums: PerBlock<f32>) {
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    let mut s = 0.0f32;
    for i in ferrocuda_device::thread::strided_range(thread_idx_x() as usize, x.len(), block_dim_x() as usize) {
        s += x[i];
    }
    if let Some(total) = reduce.sum(s)
        && let Some(b) = once_per_block()
        && let Some(out) = sums.get_mut(b)
    {
        *out = total;
    }
}

/// p30_3, a measurement: [`p30_row_sum_unchecked`] with the reduction written as CUB's and
/// llm.c's are, by hand: each warp's partial stored by its lane 0, one barrier, thread 0 folds
/// them, and no barrier after (nothing else in the kernel touches the slots). The difference
/// from `p30_row_sum_unchecked` is `RuntimeBlockReduce`'s trailing barrier (31 warps held
/// behind warp 0's fold), which port_patterns_bench times (`row sum, N, barriers`). Blocks of
/// whole warps only (a measurement, not a library pattern).
#[kernel]
pub fn p30_row_sum_one_barrier(x: &[f32], cols: u32, mut sums: PerBlock<f32>) {
    let slots = shared_array![f32; 32];
    let row = block_idx_x() * cols;
    let mut s = 0.0f32;
    let mut c = thread_idx_x();
    while c < cols {
        s += x.get((row + c) as usize).copied().unwrap_or(0.0);
        c += block_dim_x();
    }
    let partial = ferrocuda_device::warp::reduce_sum(s);
    let warps = block_dim_x().div_ceil(32).min(32);
    if thread_idx_x().is_multiple_of(32) {
        slots.set((thread_idx_x() / 32).min(31) as usize, partial);
    }
    sync_threads();
    if thread_idx_x() == 0 {
        let mut total = slots.get(0);
        for w in 1..warps as usize {
            total += slots.get(w);
        }
        if let Some(b) = once_per_block()
            && let Some(out) = sums.get_mut(b)
        {
            *out = total;
        }
    }
}

/// p30_3: [`p30_row_sum`] without a panic path (`x.get` instead of `x[..]`), for comparing the
/// reduction's registers with CUB's (the panic handler alone takes 24).
#[kernel]
pub fn p30_row_sum_unchecked(x: &[f32], cols: u32, mut sums: PerBlock<f32>) {
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    let row = block_idx_x() * cols;
    let mut s = 0.0f32;
    let mut c = thread_idx_x();
    while c < cols {
        s += x.get((row + c) as usize).copied().unwrap_or(0.0);
        c += block_dim_x();
    }
    if let Some(total) = reduce.sum(s)
        && let Some(b) = once_per_block()
        && let Some(out) = sums.get_mut(b)
    {
        *out = total;
    }
}

/// [`p30_row_sum_unchecked`] with the compile-time `BlockReduce::<f32, 1024>` (every thread
/// folds the 32 warps' partials), for the register comparison of docs/performance.md.
#[kernel]
pub fn p30_row_sum_fixed_1024(x: &[f32], cols: u32, mut sums: PerBlock<f32>) {
    let reduce = ferrocuda_device::block::BlockReduce::<f32, 1024>::new(block_scratch!(f32));
    let row = block_idx_x() * cols;
    let mut s = 0.0f32;
    let mut c = thread_idx_x();
    while c < cols {
        s += x.get((row + c) as usize).copied().unwrap_or(0.0);
        c += block_dim_x();
    }
    let total = reduce.sum(s);
    if let Some(b) = once_per_block()
        && let Some(out) = sums.get_mut(b)
    {
        *out = total;
    }
}

/// p30_6: shuffles within segments of 4 lanes (CUDA's `__shfl_*_sync(mask, v, x, 4)`), per
/// thread: `[sum over the 4-lane group, down 1, up 1, lane 2 of the group, xor 1, sum over
/// 16-lane groups]`. Whole warps shuffle; threads past `x` use 0 and write nothing.
#[kernel]
pub fn p30_shuffle_width(x: &[u32], mut out: ferrocuda_device::global::DisjointChunks<u32, 6>) {
    use ferrocuda_device::warp;
    let i = unique_index();
    let v = x.get(i.get()).copied().unwrap_or(0);
    let words = [
        warp::reduce_within::<4, u32>(v, |a, b| a.wrapping_add(b)),
        warp::shuffle_down_within::<4, u32>(v, 1),
        warp::shuffle_up_within::<4, u32>(v, 1),
        warp::shuffle_within::<4, u32>(v, 2),
        warp::shuffle_xor_within::<4, u32>(v, 1),
        warp::reduce_within::<16, u32>(v, |a, b| a.wrapping_add(b)),
    ];
    if let Some(o) = out.get_mut(i) {
        *o = words;
    }
}

/// p30_6: CUDA's `atomicInc(&counter[0], limit)` and `atomicDec(&counter[1], limit)` from every
/// thread; each thread records the old values it saw.
#[kernel]
pub fn p30_atomic_inc_dec(limit: u32, counters: ferrocuda_device::global::AtomicSlice<u32>, mut seen: ferrocuda_device::global::DisjointChunks<u32, 2>) {
    let i = unique_index();
    if let Some(o) = seen.get_mut(i) {
        *o = [counters.at(0).fetch_inc(limit), counters.at(1).fetch_dec(limit)];
    }
}

/// `sqrt(2 / pi)`, llm.c's `GELU_SCALING_FACTOR`.
const GELU_SCALING_FACTOR: f32 = 0.797_884_6;

/// llm.c's GELU backward (dev/cuda/gelu_backward.cu, kernel 1) as `fast_math(true)` compiles it:
/// `tanhf` → `fast_tanh` (`tanh.approx`), `coshf` → `fast_cosh`, `/` → an approximate division.
/// Benchmarked against nvcc's `--use_fast_math` build of the CUDA source (p30_4).
#[kernel]
pub fn p30_gelu_backward_fast(inp: &[f32], dout: &[f32], mut dinp: DisjointSlice<f32>) {
    use ferrocuda_device::math::FastMath;
    let i = unique_index();
    if let (Some(o), Some(&x), Some(&d)) = (dinp.get_mut(i), inp.get(i.get()), dout.get(i.get())) {
        let cube = 0.044715 * x * x * x;
        let tanh_arg = GELU_SCALING_FACTOR * (x + cube);
        let tanh_out = tanh_arg.fast_tanh();
        let cosh_out = tanh_arg.fast_cosh();
        let sech_out = 1.0f32.fast_div(cosh_out * cosh_out);
        let local_grad = 0.5 * (1.0 + tanh_out) + x * 0.5 * sech_out * GELU_SCALING_FACTOR * (1.0 + 3.0 * 0.044715 * x * x);
        *o = local_grad * d;
    }
}

/// The same without fast math (`DeviceFloat`'s precise `tanh`/`cosh`, libm), against nvcc's
/// default build.
#[kernel]
pub fn p30_gelu_backward(inp: &[f32], dout: &[f32], mut dinp: DisjointSlice<f32>) {
    use ferrocuda_device::math::DeviceFloat;
    let i = unique_index();
    if let (Some(o), Some(&x), Some(&d)) = (dinp.get_mut(i), inp.get(i.get()), dout.get(i.get())) {
        let cube = 0.044715 * x * x * x;
        let tanh_arg = GELU_SCALING_FACTOR * (x + cube);
        let tanh_out = DeviceFloat::tanh(tanh_arg);
        let cosh_out = DeviceFloat::cosh(tanh_arg);
        let sech_out = 1.0 / (cosh_out * cosh_out);
        let local_grad = 0.5 * (1.0 + tanh_out) + x * 0.5 * sech_out * GELU_SCALING_FACTOR * (1.0 + 3.0 * 0.044715 * x * x);
        *o = local_grad * d;
    }
}

/// p30_3: [`p30_row_sum`] reading a row slice cut once (`x.get(start..end)`), so the loop's
/// index is proven below the row's length: no check per element, one load per iteration.
#[kernel]
pub fn p30_row_sum_slice(x: &[f32], cols: u32, mut sums: PerBlock<f32>) {
    let reduce = RuntimeBlockReduce::new(block_scratch!(f32));
    let start = block_idx_x() as usize * cols as usize;
    let row = x.get(start..start + cols as usize).unwrap_or(&[]);
    let mut s = 0.0f32;
    let mut c = thread_idx_x() as usize;
    while c < row.len() {
        s += row[c];
        c += block_dim_x() as usize;
    }
    if let Some(total) = reduce.sum(s)
        && let Some(b) = once_per_block()
        && let Some(out) = sums.get_mut(b)
    {
        *out = total;
    }
}
