//! Launch stubs of the CUDA C++ twins in `bench/ports8/cuda/ports8.cu`: each declares a twin's
//! parameter list (raw pointers where the CUDA entry has pointers, the same scalars in the same
//! order) under its mangled symbol, so that the bench launches the nvcc-built cubin through a
//! typed (`unsafe`) launcher. The bodies are empty: these entries are never run from this crate's
//! own PTX. A crate of their own, as the README advises, so the ports keep the sources' names.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
#![allow(unused_variables, clippy::too_many_arguments)]

use ferrocuda_device::half::bf16;
use ferrocuda_device::kernel;

ferrocuda_device::embed_kernels!();

/// llm.c's `init_from_master_kernel<__nv_bfloat16>(Tp* params, float* master, size_t
/// num_parameters, ptrdiff_t w_stride, ptrdiff_t s_stride, unsigned int seed)`.
///
/// # Safety
/// `params` holds `(slices - 1) w_stride + num_parameters` elements and `master` `(slices - 1)
/// s_stride + num_parameters` for a grid of `slices` along y; nothing else touches `params`.
#[kernel(name = "_Z23init_from_master_kernelI13__nv_bfloat16EvPT_Pfmllj")]
pub unsafe fn twin_init_from_master(params: *mut bf16, master: *mut f32, num_parameters: u64, w_stride: i64, s_stride: i64, seed: u32) {}

/// llm.c's `wpe_backward_kernel(floatX* dwpe, const floatX* dout, const int* inp, int B, int T,
/// int C, unsigned int seed)`.
///
/// # Safety
/// `dwpe` holds `T C` elements, `dout` `B T C`, `C % 8 == 0`, 16-byte aligned; `inp` is not read.
#[kernel(name = "_Z19wpe_backward_kernelP13__nv_bfloat16PKS_PKiiiij")]
pub unsafe fn twin_wpe_backward(dwpe: *mut bf16, dout: *const bf16, inp: *const i32, b: i32, t: i32, c: i32, seed: u32) {}

/// llm.c's `global_norm_aggregate_kernel(float* out, size_t grid_size)`.
///
/// # Safety
/// `out` holds `max(grid_size, 1)` elements; one block of at most 1024 threads.
#[kernel(name = "_Z28global_norm_aggregate_kernelPfm")]
pub unsafe fn twin_global_norm_aggregate(out: *mut f32, grid_size: u64) {}

/// llm.c's `layernorm_forward_kernel6(floatX* out, float* mean, float* rstd, const floatX* inp,
/// const floatX* weight, const floatX* bias, int N, int C)`.
///
/// # Safety
/// `out` and `inp` hold `N C` elements, `weight` and `bias` `C`, `mean` and `rstd` `N`, `C % 8 ==
/// 0`, 16-byte aligned; blocks `(32, y)` with `(2 + y) C 2` bytes of dynamic shared memory.
#[kernel(name = "_Z25layernorm_forward_kernel6P13__nv_bfloat16PfS1_PKS_S3_S3_ii")]
pub unsafe fn twin_layernorm_forward6(
    out: *mut bf16,
    mean: *mut f32,
    rstd: *mut f32,
    inp: *const bf16,
    weight: *const bf16,
    bias: *const bf16,
    n: i32,
    c: i32,
) {
}

/// vLLM's `reshape_and_cache_kernel<__nv_bfloat16, __nv_bfloat16, kAuto>(key, value, key_cache,
/// value_cache, slot_mapping, key_stride, value_stride, num_heads, head_size, block_size, x,
/// k_scale, v_scale)`.
///
/// # Safety
/// The caches hold every slot `slot_mapping` names, the inputs `num_tokens` rows of the strides.
#[kernel(name = "_ZN4vllm24reshape_and_cache_kernelI13__nv_bfloat16S1_LNS_18Fp8KVCacheDataTypeE0EEEvPKT_S5_PT0_S7_PKliiiiiiff")]
pub unsafe fn twin_reshape_and_cache(
    key: *const bf16,
    value: *const bf16,
    key_cache: *mut bf16,
    value_cache: *mut bf16,
    slot_mapping: *const i64,
    key_stride: i32,
    value_stride: i32,
    num_heads: i32,
    head_size: i32,
    block_size: i32,
    x: i32,
    k_scale: f32,
    v_scale: f32,
) {
}

/// vLLM's `segmented_max_reduction<__nv_bfloat16>(float* scale, const scalar_t* input, int64_t
/// num_elems)`.
///
/// # Safety
/// `scale` holds one element, `input` `num_elems`; blocks of at most 1024 threads.
#[kernel(name = "_ZN4vllm23segmented_max_reductionI13__nv_bfloat16EEvPfPKT_l")]
pub unsafe fn twin_segmented_max_reduction(scale: *mut f32, input: *const bf16, num_elems: i64) {}

/// vLLM's `scaled_fp8_quant_kernel<__nv_bfloat16>(c10::Float8_e4m3fn* out, const scalar_t* input,
/// const float* scale, int64_t num_elems)`.
///
/// # Safety
/// `out` (bytes) and `input` hold `num_elems` elements, `input` 8-byte aligned, `out` 4-byte.
#[kernel(name = "_ZN4vllm23scaled_fp8_quant_kernelI13__nv_bfloat16EEvPN3c1013Float8_e4m3fnEPKT_PKfl")]
pub unsafe fn twin_scaled_fp8_quant(out: *mut u8, input: *const bf16, scale: *const f32, num_elems: i64) {}

/// vLLM's `fused_add_rms_norm_static_fp8_quant_kernel<__nv_bfloat16, 8, Float8_e4m3fn>(out,
/// input, input_stride, residual, weight, scale, epsilon, num_tokens, hidden_size)`.
///
/// # Safety
/// `out` (bytes) and `residual` hold `num_tokens hidden_size` elements, `input` `num_tokens`
/// rows `input_stride` apart, `weight` `hidden_size`; 16-byte aligned, `hidden_size % 8 == 0`;
/// blocks of at most 1024 threads.
#[kernel(
    name = "_ZN4vllm42fused_add_rms_norm_static_fp8_quant_kernelI13__nv_bfloat16Li8EN3c1013Float8_e4m3fnEEENSt9enable_ifIXaagtT0_Li0Esr4vllm12_typeConvertIT_EE6existsEvE4typeEPT1_PS5_iSA_PKS5_PKffii"
)]
pub unsafe fn twin_fused_add_rms_norm_static_fp8_quant(
    out: *mut u8,
    input: *mut bf16,
    input_stride: i32,
    residual: *mut bf16,
    weight: *const bf16,
    scale: *const f32,
    epsilon: f32,
    num_tokens: i32,
    hidden_size: i32,
) {
}
