//! Issue 30's second held-out port, the llm.c half: five kernels of karpathy/llm.c (`llmc/*.cuh`)
//! ported to safe Rust from the docs alone, first try (see ../RESULTS.md). This crate is built
//! with `KernelBuilder::fast_math(true)`, as llm.c builds with `nvcc --use_fast_math`; the vLLM
//! ports (built without) are in `ferrocuda-ports2`. Each kernel keeps the public source's name,
//! parameters (as far as the launcher allows: lengths and widths noted at each) and launch
//! configuration; its CUDA C++ twin is `bench/ports2/cuda/ports2.cu`.

#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]

use bytemuck::{Pod, Zeroable};
use core::num::NonZeroU32;
use ferrocuda_device::cache::{self, Load, Store};
use ferrocuda_device::global::{PerWarpRow, warp_row};
use ferrocuda_device::half::{Bf16x2, F32ToHalf, HalfFloat, bf16};
use ferrocuda_device::prelude::*;
use ferrocuda_device::thread::{block_dim_z, block_idx_y, grid_dim_y, thread_idx_y, thread_idx_z};
use ferrocuda_device::unroll::unroll;
use ferrocuda_device::{LayoutKey, kernel, shared_array, warp};

ferrocuda_device::embed_kernels!();

/// llm.c's `x128` for `floatX = __nv_bfloat16`: eight bf16 in one 16-byte aligned pack.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable, LayoutKey)]
pub struct X128 {
    /// The eight values.
    pub v: [bf16; 8],
}

/// `sqrtf(2.0f / M_PI)`, llm.c's `GELU_SCALING_FACTOR`.
pub const GELU_SCALING_FACTOR: f32 = 0.797_884_6;

/// llm.c `llmc/gelu.cuh` `gelu_backward_inplace_kernel`: `d_in_out = gelu'(inp) * d_in_out`, in
/// place, one 16-byte pack per thread (llm.c: blocks of 128, `N / (128 * 8)` blocks).
#[kernel(same_len(d_in_out, inp))]
pub fn gelu_backward_inplace_kernel(mut d_in_out: DisjointSlice<X128>, inp: &[X128]) {
    let i = unique_index();
    let Some(d) = d_in_out.get_mut(i) else { return };
    let packed_inp = cache::load(&inp[i], Load::Streaming); // load128cs
    let packed_dout = vector::load16(&*d); // load128
    let mut packed_dinp = X128::default();
    unroll::<8>(|k| {
        let x = packed_inp.v[k].widen();
        let cube = 0.044715f32 * x * x * x;
        let tanh_arg = GELU_SCALING_FACTOR * (x + cube);
        let tanh_out = tanh_arg.tanh();
        let coshf_out = tanh_arg.cosh();
        let sech_out = 1.0f32 / (coshf_out * coshf_out);
        let local_grad = 0.5f32 * (1.0f32 + tanh_out) + x * 0.5f32 * sech_out * GELU_SCALING_FACTOR * (1.0f32 + 3.0f32 * 0.044715f32 * x * x);
        packed_dinp.v[k] = (local_grad * packed_dout.v[k].widen()).to_bf16();
    });
    vector::store16(d, packed_dinp); // store128
}

/// llm.c's `lerp`: two FMAs.
#[inline(always)]
fn lerp(start: f32, end: f32, weight: f32) -> f32 {
    weight.mul_add(end, (-weight).mul_add(start, start))
}

/// llm.c `SquirrelNoise5` (llmc/cuda_utils.cuh).
#[inline(always)]
pub fn squirrel_noise5(position_x: u32, seed: u32) -> u32 {
    const SQ5_BIT_NOISE1: u32 = 0xd2a8_0a3f;
    const SQ5_BIT_NOISE2: u32 = 0xa884_f197;
    const SQ5_BIT_NOISE3: u32 = 0x6C73_6F4B;
    const SQ5_BIT_NOISE4: u32 = 0xB79F_3ABB;
    const SQ5_BIT_NOISE5: u32 = 0x1b56_c4f5;
    let mut mangled_bits = position_x;
    mangled_bits = mangled_bits.wrapping_mul(SQ5_BIT_NOISE1);
    mangled_bits = mangled_bits.wrapping_add(seed);
    mangled_bits ^= mangled_bits >> 9;
    mangled_bits = mangled_bits.wrapping_add(SQ5_BIT_NOISE2);
    mangled_bits ^= mangled_bits >> 11;
    mangled_bits = mangled_bits.wrapping_mul(SQ5_BIT_NOISE3);
    mangled_bits ^= mangled_bits >> 13;
    mangled_bits = mangled_bits.wrapping_add(SQ5_BIT_NOISE4);
    mangled_bits ^= mangled_bits >> 15;
    mangled_bits = mangled_bits.wrapping_mul(SQ5_BIT_NOISE5);
    mangled_bits ^= mangled_bits >> 17;
    mangled_bits
}

/// llm.c `Get2dNoiseUint`.
#[inline(always)]
pub fn get_2d_noise_uint(index_x: u32, index_y: u32, seed: u32) -> u32 {
    const PRIME_NUMBER: u32 = 198_491_317;
    squirrel_noise5(index_x.wrapping_add(PRIME_NUMBER.wrapping_mul(index_y)), seed)
}

/// llm.c `stochastic_rounding(float, __nv_bfloat16*, seed)`, given the thread's random number.
#[inline(always)]
pub fn stochastic_round(value: f32, random: u32) -> bf16 {
    let threshold = random & 0xFFFF;
    let mut float_bits = value.to_bits();
    let rounded_bits = float_bits & 0x0000_FFFF;
    float_bits = if rounded_bits > threshold { float_bits | 0xFFFF } else { float_bits & !0xFFFF };
    f32::from_bits(float_bits).to_bf16()
}

/// llm.c `llmc/adamw.cuh` `adamw_kernel3<__nv_bfloat16, __nv_bfloat16>` with master weights (llm.c's
/// default), one slice (`blockIdx.y == 0`, so the strides are not parameters): m, v, the master
/// weights and the bf16 weights updated in place. Blocks of 512. `num_parameters` is the
/// buffers' length (`same_len`).
#[kernel(same_len(params_memory, master_params_memory, grads_memory, m_memory, v_memory))]
#[allow(clippy::too_many_arguments)]
pub fn adamw_kernel3(
    mut params_memory: DisjointSlice<bf16>,
    mut master_params_memory: DisjointSlice<f32>,
    grads_memory: &[bf16],
    mut m_memory: DisjointSlice<f32>,
    mut v_memory: DisjointSlice<f32>,
    learning_rate: f32,
    beta1: f32,
    beta2: f32,
    beta1_correction: f32,
    beta2_correction: f32,
    eps: f32,
    weight_decay: f32,
    grad_scale: f32,
    seed: u32,
) {
    let idx = unique_index();
    let (Some(param_out), Some(master), Some(m_out), Some(v_out)) =
        (params_memory.get_mut(idx), master_params_memory.get_mut(idx), m_memory.get_mut(idx), v_memory.get_mut(idx))
    else {
        return;
    };
    let grad = grad_scale * grads_memory[idx].widen();
    let mut m = *m_out;
    let mut v = *v_out;
    m = lerp(grad, m, beta1);
    *m_out = m;
    v = lerp(grad * grad, v, beta2);
    *v_out = v;
    m /= beta1_correction;
    v /= beta2_correction;
    let old_param = *master;
    let param = old_param - (learning_rate * (m / (v.sqrt() + eps) + weight_decay * old_param));
    let random = get_2d_noise_uint(thread_idx_x(), block_idx_x().wrapping_mul(block_dim_x()).wrapping_add(block_idx_y()), seed);
    *param_out = stochastic_round(param, random);
    *master = param;
}

/// llm.c `llmc/layernorm.cuh` `layernorm_forward_kernel3`: a warp per row of `c` (llm.c's fallback
/// path: blocks of 256, `ceil(n * 32 / 256)` blocks), mean and rstd per row from lane 0,
/// streaming loads and stores as llm.c's `__ldcs`/`__stcs`.
#[kernel(cols(out = c, mean = 1, rstd = 1))]
#[allow(clippy::too_many_arguments)]
pub fn layernorm_forward_kernel3(
    mut out: PerWarpRow<bf16>,
    mut mean: PerWarpRow<f32>,
    mut rstd: PerWarpRow<f32>,
    inp: &[bf16],
    weight: &[bf16],
    bias: &[bf16],
    n: u32,
    c: u32,
) {
    let me = warp_row();
    let Some(o) = out.row_mut(me) else { return };
    let idx = o.row();
    if idx >= n {
        return;
    }
    let lane = o.lane() as usize;
    let cs = c as usize;
    let start = idx as usize * cs;
    let Some(x) = inp.get(start..start + cs) else { return };

    // mean
    let mut sum = 0.0f32;
    let mut i = lane;
    while i < cs {
        sum += x[i].widen();
        i += 32;
    }
    sum = warp::reduce_sum(sum);
    let m = sum / c as f32;
    if let Some(mut row) = mean.row_mut(me)
        && let Some(mean_out) = row.get_mut(0)
    {
        cache::store(mean_out, m, Store::Streaming);
    }

    // rstd
    sum = 0.0f32;
    let mut i = lane;
    while i < cs {
        let diff = x[i].widen() - m;
        sum += diff * diff;
        i += 32;
    }
    sum = warp::reduce_sum(sum);
    let s = (sum / c as f32 + 1e-5f32).rsqrt();
    if let Some(mut row) = rstd.row_mut(me)
        && let Some(rstd_out) = row.get_mut(0)
    {
        cache::store(rstd_out, s, Store::Streaming);
    }

    // final normalization and scaling by weight/bias
    for ([xc, w, b], o) in o.zip_inputs([x, weight, bias]) {
        let nrm = s * (cache::load(xc, Load::Streaming).widen() - m);
        cache::store(o, (nrm * w.widen() + b.widen()).to_bf16(), Store::Streaming);
    }
}

/// `bdx` of `matmul_backward_bias_kernel9`: lanes that split the `bt` rows.
const BDX: u32 = 4;
/// `bdy = WARP_SIZE / bdx`: the warp's 8 column groups of 8.
const BDY: u32 = 32 / BDX;

/// llm.c `llmc/matmul.cuh` `matmul_backward_bias_kernel9<float, true>` (the path llm.c takes when
/// the grid has more than one row of blocks, as on an H100 for GPT-2's 768 channels): blocks of
/// `(4, 8, 32)`, grid `(ceil(OC / 64), grid_y)`; block row `y` writes its partial column sums to
/// `dbias[y * OC ..]` (llm.c's `dbias_buffer`, summed by `reduce_add_sum_kernel` afterwards).
/// The writes are at indices computed from `threadIdx.{x,y,z}` and `blockIdx.{x,y}`, which no
/// partition expresses, so they go through `AtomicSlice::store` (a relaxed store).
#[kernel]
pub fn matmul_backward_bias_kernel9(dbias: AtomicSlice<f32>, dout: &[X128], b: u32, t: u32, oc: u32) {
    let warp_d = thread_idx_x();
    let warp_c = thread_idx_y();
    let block_d = thread_idx_z();

    let oc_per_warp = BDY * 8; // 64 at BF16

    let local_oc = warp_c * 8;
    let global_oc = block_idx_x() * oc_per_warp + local_oc;

    let local_bt = warp_d + BDX * block_d;
    let bt_per_block = BDX * block_dim_z();

    let mut accumulators = [0.0f32; 8];

    if global_oc < oc {
        // sum up over all bt within registers
        let mut idx = block_idx_y() * bt_per_block + local_bt;
        while idx < b * t {
            let packed_dout = vector::load16(&dout[((global_oc + idx * oc) / 8) as usize]);
            unroll::<8>(|k| accumulators[k] += packed_dout.v[k].widen());
            idx += grid_dim_y() * bt_per_block;
        }
    }

    // __shared__ float sub_results[x128::size][WARP_SIZE][bdy];
    let sub_results = shared_array![f32; 8 * 32 * 8];
    let at = |k: u32, r: u32, c: u32| (k * 32 * BDY + r * BDY + c) as usize;

    // reduce within-warp results
    unroll::<8>(|k| {
        let mut v = accumulators[k];
        v += warp::shuffle_down_within::<4, f32>(v, 1);
        v += warp::shuffle_down_within::<4, f32>(v, 2);
        if warp_d == 0 {
            sub_results.set(at(k as u32, block_d, warp_c), v);
        }
    });
    sync_threads();

    // block-wide reductions
    let mut k = block_d;
    while k < 8 {
        let mut a = 0.0f32;
        let mut r = warp_d;
        while r < block_dim_z() {
            let mut v = sub_results.get(at(k, r, warp_c));
            v += warp::shuffle_down_within::<4, f32>(v, 1);
            v += warp::shuffle_down_within::<4, f32>(v, 2);
            a += v;
            r += BDX;
        }
        if warp_d == 0 && global_oc < oc {
            dbias.store((global_oc + k + block_idx_y() * oc) as usize, a);
        }
        k += block_dim_z();
    }
}

/// llm.c `llmc/attention.cuh` `permute_kernel`: `inp` (B, N, 3, NH, d) to q, k, v (B, NH, N, d),
/// one element per thread, blocks of 256. The divisors are `NonZeroU32` (no divide-by-zero
/// path); the guard `idx < B NH N d` is the outputs' length (`same_len`).
#[kernel(same_len(q, k, v))]
#[allow(clippy::too_many_arguments)]
pub fn permute_kernel(
    mut q: DisjointSlice<bf16>,
    mut k: DisjointSlice<bf16>,
    mut v: DisjointSlice<bf16>,
    inp: &[bf16],
    _b: u32,
    n: NonZeroU32,
    nh: NonZeroU32,
    d: NonZeroU32,
) {
    let i = unique_index();
    let (Some(q_out), Some(k_out), Some(v_out)) = (q.get_mut(i), k.get_mut(i), v.get_mut(i)) else { return };
    let idx = i.get() as u32;
    let nd = n.saturating_mul(d);
    let nhnd = nh.saturating_mul(nd);

    // Q[b][nh_][n][d_] = inp[b][n][0][nh_][d_]
    let b = idx / nhnd;
    let rest = idx % nhnd;
    let nh_ = rest / nd;
    let rest = rest % nd;
    let n_ = rest / d;
    let d_ = rest % d;
    let (n, nh, d) = (n.get(), nh.get(), d.get());
    let inp_idx = ((b * n * 3 * nh * d) + (n_ * 3 * nh * d) + (nh_ * d) + d_) as usize;
    let nhd = (nh * d) as usize;
    *q_out = cache::load(&inp[inp_idx], Load::Streaming);
    *k_out = cache::load(&inp[inp_idx + nhd], Load::Streaming);
    *v_out = cache::load(&inp[inp_idx + 2 * nhd], Load::Streaming);
}

// ---- Fix round (RESULTS.md): the first tries above stay as they were written ----------------

/// [`gelu_backward_inplace_kernel()`] after the fix round: the eight results are rounded to bf16 in
/// pairs (`Bf16x2::from_f32s`, one `cvt.rn.bf16x2.f32`, SASS `F2FP.BF16.F32.PACK_AB`, as nvcc
/// packs `x128`'s stores) instead of one `to_bf16` each (eight `F2F.BF16.F32` on the conversion
/// pipe, then shifts and masks to pack them).
#[kernel(same_len(d_in_out, inp))]
pub fn gelu_backward_inplace_fixed(mut d_in_out: DisjointSlice<X128>, inp: &[X128]) {
    let i = unique_index();
    let Some(d) = d_in_out.get_mut(i) else { return };
    let packed_inp = cache::load(&inp[i], Load::Streaming); // load128cs
    let packed_dout = vector::load16(&*d); // load128
    let mut packed_dinp = X128::default();
    unroll::<4>(|p| {
        let mut r = [0.0f32; 2];
        unroll::<2>(|h| {
            let k = 2 * p + h;
            let x = packed_inp.v[k].widen();
            let cube = 0.044715f32 * x * x * x;
            let tanh_arg = GELU_SCALING_FACTOR * (x + cube);
            let tanh_out = tanh_arg.tanh();
            let coshf_out = tanh_arg.cosh();
            let sech_out = 1.0f32 / (coshf_out * coshf_out);
            let local_grad = 0.5f32 * (1.0f32 + tanh_out) + x * 0.5f32 * sech_out * GELU_SCALING_FACTOR * (1.0f32 + 3.0f32 * 0.044715f32 * x * x);
            r[h] = local_grad * packed_dout.v[k].widen();
        });
        let pair = Bf16x2::from_f32s(r[0], r[1]);
        packed_dinp.v[2 * p] = pair.lo();
        packed_dinp.v[2 * p + 1] = pair.hi();
    });
    vector::store16(d, packed_dinp); // store128
}

/// [`layernorm_forward_kernel3()`] after the fix round: the normalisation loop is
/// `o.zip_inputs([x, weight, bias]).for_each(..)` instead of a `for` loop over the same
/// iterator. The `for` loop calls `next()`, whose `None` LLVM merges into the loop's pointers as
/// nulls: NVPTX then cannot trace `weight` and `bias` to the read-only kernel parameters and
/// reads them with plain `ld.global` (not `.nc`), with a null test and four 64-bit pointer
/// updates per step. `for_each` runs the iterator's own loop (`fold`, added to the row iterators
/// in this round): `.nc` loads, and LLVM unrolls it by 4 as nvcc does.
#[kernel(cols(out = c, mean = 1, rstd = 1))]
#[allow(clippy::too_many_arguments)]
pub fn layernorm_forward_fixed(
    mut out: PerWarpRow<bf16>,
    mut mean: PerWarpRow<f32>,
    mut rstd: PerWarpRow<f32>,
    inp: &[bf16],
    weight: &[bf16],
    bias: &[bf16],
    n: u32,
    c: u32,
) {
    let me = warp_row();
    let Some(o) = out.row_mut(me) else { return };
    let idx = o.row();
    if idx >= n {
        return;
    }
    let lane = o.lane();
    let cs = c as usize;
    let start = idx as usize * cs;
    let Some(x) = inp.get(start..start + cs) else { return };

    let mut sum = 0.0f32;
    let mut i = lane;
    while i < c {
        sum += x[i as usize].widen();
        i += 32;
    }
    sum = warp::reduce_sum(sum);
    let m = sum / c as f32;
    if let Some(mut row) = mean.row_mut(me)
        && let Some(mean_out) = row.get_mut(0)
    {
        cache::store(mean_out, m, Store::Streaming);
    }

    sum = 0.0f32;
    let mut i = lane;
    while i < c {
        let diff = x[i as usize].widen() - m;
        sum += diff * diff;
        i += 32;
    }
    sum = warp::reduce_sum(sum);
    let s = (sum / c as f32 + 1e-5f32).rsqrt();
    if let Some(mut row) = rstd.row_mut(me)
        && let Some(rstd_out) = row.get_mut(0)
    {
        cache::store(rstd_out, s, Store::Streaming);
    }

    o.zip_inputs([x, weight, bias]).for_each(|([xc, w, b], o)| {
        let nrm = s * (cache::load(xc, Load::Streaming).widen() - m);
        cache::store(o, (nrm * w.widen() + b.widen()).to_bf16(), Store::Streaming);
    });
}

/// [`permute_kernel()`] after the fix round: the three source elements are taken with
/// `inp.get(..)` (no panic path, so no kernel-tag store and no bounds-check calls) and the
/// divisors are `NonZeroU32::new` of the products (one test each) instead of
/// `NonZeroU32::saturating_mul` (a wide multiply and a select each).
#[kernel(same_len(q, k, v))]
#[allow(clippy::too_many_arguments)]
pub fn permute_fixed(
    mut q: DisjointSlice<bf16>,
    mut k: DisjointSlice<bf16>,
    mut v: DisjointSlice<bf16>,
    inp: &[bf16],
    _b: u32,
    n: NonZeroU32,
    nh: NonZeroU32,
    d: NonZeroU32,
) {
    let i = unique_index();
    let (Some(q_out), Some(k_out), Some(v_out)) = (q.get_mut(i), k.get_mut(i), v.get_mut(i)) else { return };
    let idx = i.get() as u32;
    let (Some(nd), Some(nhd)) = (NonZeroU32::new(n.get().wrapping_mul(d.get())), NonZeroU32::new(nh.get().wrapping_mul(d.get()))) else { return };
    let Some(nhnd) = NonZeroU32::new(nh.get().wrapping_mul(nd.get())) else { return };

    let b = idx / nhnd;
    let rest = idx % nhnd;
    let nh_ = rest / nd;
    let rest = rest % nd;
    let n_ = rest / d;
    let d_ = rest % d;
    let nhd = nhd.get();
    let inp_idx = (b * n.get() * 3 * nhd + n_ * 3 * nhd + nh_ * d.get() + d_) as usize;
    let nhd = nhd as usize;
    let (Some(x), Some(y), Some(z)) = (inp.get(inp_idx), inp.get(inp_idx + nhd), inp.get(inp_idx + 2 * nhd)) else { return };
    *q_out = cache::load(x, Load::Streaming);
    *k_out = cache::load(y, Load::Streaming);
    *v_out = cache::load(z, Load::Streaming);
}
