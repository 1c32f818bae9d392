//! Launch stubs of the CUDA C++ twins in `bench/ports11/cuda/ports11.cu` (the public sources as
//! written), by their mangled names (`nvdisasm -c twin.cubin | grep '.type.*@function'`): the
//! same parameter list as each CUDA entry, raw pointers where it has pointers. Loaded from the
//! nvcc-built cubins (`launch_in`), never from this crate's own module.
// The stubs' parameters are never read (the bodies are empty).
#![allow(unused_variables)]

use ferrocuda_device::half::bf16;
use ferrocuda_device::kernel;

/// L1 twin: `layernorm_forward_kernel5(float* out, float* mean, float* rstd, const float* inp,
/// const float* weight, const float* bias, int N, int C)`.
///
/// # Safety
/// `out` and `inp` hold `N * C` floats, `mean` and `rstd` `N` (grid `N` blocks), `weight` and
/// `bias` `C`; blocks of at most 1024 threads, a multiple of 32.
#[kernel(name = "_Z25layernorm_forward_kernel5PfS_S_PKfS1_S1_ii")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn twin_layernorm_forward_kernel5(
    out: *mut f32,
    mean: *mut f32,
    rstd: *mut f32,
    inp: *const f32,
    weight: *const f32,
    bias: *const f32,
    n: i32,
    c: i32,
) {
}

/// L2 twin: `matmul_backward_bias_kernel3(floatX* dbias, const floatX* dout, int B, int T, int
/// OC)`, `floatX` = `__nv_bfloat16`.
///
/// # Safety
/// `dout` holds `B * T * OC` elements, `dbias` `OC`; grid `OC` blocks (at most).
#[kernel(name = "_Z28matmul_backward_bias_kernel3P13__nv_bfloat16PKS_iii")]
pub unsafe fn twin_matmul_backward_bias_kernel3(dbias: *mut bf16, dout: *const bf16, b: i32, t: i32, oc: i32) {}

/// L3 twin: `softmax_forward_online_kernel8(float* out, const float* inp, int N, int C)`.
///
/// # Safety
/// `out` and `inp` hold `N * C` floats.
#[kernel(name = "_Z30softmax_forward_online_kernel8PfPKfii")]
pub unsafe fn twin_softmax_forward_online_kernel8(out: *mut f32, inp: *const f32, n: i32, c: i32) {}

/// L4 twin: `norm_kernel2<__nv_bfloat16>(float* out, const T* data, size_t count)`.
///
/// # Safety
/// `data` holds `count` elements, `out` one float.
#[kernel(name = "_Z12norm_kernel2I13__nv_bfloat16EvPfPKT_m")]
pub unsafe fn twin_norm_kernel2(out: *mut f32, data: *const bf16, count: u64) {}

/// L5 twin: `attention_softmax_kernel1(float* att, const float* preatt, int B, int T, int NH)`.
///
/// # Safety
/// `att` and `preatt` hold `B * NH * T * T` floats.
#[kernel(name = "_Z25attention_softmax_kernel1PfPKfiii")]
pub unsafe fn twin_attention_softmax_kernel1(att: *mut f32, preatt: *const f32, b: i32, t: i32, nh: i32) {}

/// L6 twin: `scale_kernel(float* inp, float scale, int B, int NH, int T)`.
///
/// # Safety
/// `inp` holds `B * NH * T * T` floats.
#[kernel(name = "_Z12scale_kernelPffiii")]
pub unsafe fn twin_scale_kernel(inp: *mut f32, scale: f32, b: i32, nh: i32, t: i32) {}

/// V1 twin: `vllm::convert_fp8_kernel<uint8_t, __nv_bfloat16, kFp8E4M3>(const Tin* src_cache,
/// Tout* dst_cache, const float scale, const int64_t block_stride)`.
///
/// # Safety
/// Both hold `gridDim.x * block_stride` elements.
#[kernel(name = "_ZN4vllm18convert_fp8_kernelIh13__nv_bfloat16LNS_18Fp8KVCacheDataTypeE1EEEvPKT0_PT_fl")]
pub unsafe fn twin_convert_fp8_kernel(src_cache: *const bf16, dst_cache: *mut u8, scale: f32, block_stride: i64) {}

/// V2 twin: `prepare_inputs::advance_step_kernel<256>(int num_seqs, int block_size, long const*
/// sampled_token_ids_ptr, long* input_positions_ptr, int* seq_lens_ptr, int* slot_mapping_ptr,
/// int const* block_tables_ptr, int64_t const block_tables_stride)`.
///
/// # Safety
/// The per-sequence arrays hold `num_seqs` elements, `block_tables` `num_seqs` rows of
/// `block_tables_stride` with every position's block inside its row; blocks of 256 threads.
#[kernel(name = "_ZN14prepare_inputs19advance_step_kernelILi256EEEviiPKlPlPiS4_PKil")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn twin_advance_step_kernel(
    num_seqs: i32,
    block_size: i32,
    sampled_token_ids: *const i64,
    input_positions: *mut i64,
    seq_lens: *mut i32,
    slot_mapping: *mut i32,
    block_tables: *const i32,
    block_tables_stride: i64,
) {
}
