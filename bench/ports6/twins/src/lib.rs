//! The parameter lists of the CUDA C++ twins in `bench/ports6/cuda/ports6.cu`, as `#[kernel]`
//! stubs with empty bodies (README, "A CUDA C++ kernel as its authors wrote it"): raw pointers
//! where the CUDA entry has pointers, the same scalars in the same order. Only their typed,
//! `unsafe` launchers are used, with `launch_in` on the nvcc-built cubins; the stubs' own PTX
//! entries are never launched. A separate crate because a stub and its port would otherwise
//! claim one PTX name in one crate (docs/kernel-model.md, "One PTX name per crate").
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
#![allow(unused_variables)]

use ferrocuda_device::kernel;

ferrocuda_device::embed_kernels!();

/// `rope_forward_kernel1(floatX *out, const floatX *inp, const floatX *freqs_cis, int B, int T,
/// int n_head, int head_dim)` (llm.c, `floatX = float`).
///
/// # Safety
/// `out` and `inp` hold `B T n_head head_dim` floats, `freqs_cis` `T head_dim`.
#[kernel(name = "rope_forward_kernel1")]
pub unsafe fn twin_rope_forward_kernel1(out: *mut f32, inp: *const f32, freqs_cis: *const f32, b: i32, t: i32, n_head: i32, head_dim: i32) {}

/// `repkv_backward_kernel1(floatX* dinp, const floatX* dout, int B, int N, int NH, int
/// replicate_factor, int HD)`.
///
/// # Safety
/// `dout` holds `B N 3 NH HD` floats, `dinp` `B N (NH + 2 NH / replicate_factor) HD`.
#[kernel(name = "repkv_backward_kernel1")]
pub unsafe fn twin_repkv_backward_kernel1(dinp: *mut f32, dout: *const f32, b: i32, n: i32, nh: i32, replicate_factor: i32, hd: i32) {}

/// `matmul_forward_kernel1(float* out, const float* inp, const float* weight, const float* bias,
/// int BT, int C, int OC)`.
///
/// # Safety
/// `out` holds `BT OC` floats, `inp` `BT C`, `weight` `OC C`, `bias` `OC` (or is null).
#[kernel(name = "matmul_forward_kernel1")]
pub unsafe fn twin_matmul_forward_kernel1(out: *mut f32, inp: *const f32, weight: *const f32, bias: *const f32, bt: i32, c: i32, oc: i32) {}

/// `softmax_forward_kernel2(float* out, const float* inp, int N, int C)`.
///
/// # Safety
/// `out` and `inp` hold `N C` floats; the launch has `blockDim.x * 4` shared bytes.
#[kernel(name = "softmax_forward_kernel2")]
pub unsafe fn twin_softmax_forward_kernel2(out: *mut f32, inp: *const f32, n: i32, c: i32) {}

/// `attention_query_key_kernel1(float* preatt, const float* inp, int B, int T, int C, int NH)`.
///
/// # Safety
/// `preatt` holds `B NH T T` floats, `inp` `B T 3C`.
#[kernel(name = "attention_query_key_kernel1")]
pub unsafe fn twin_attention_query_key_kernel1(preatt: *mut f32, inp: *const f32, b: i32, t: i32, c: i32, nh: i32) {}

/// `vllm::activation_kernel<__nv_bfloat16, gelu_new_kernel<__nv_bfloat16>>(scalar_t* out,
/// const scalar_t* input, const int d)` (bf16 as `u16`).
///
/// # Safety
/// `out` and `input` hold `num_tokens d` bf16 for the grid's `num_tokens` blocks.
#[kernel(name = "_ZN4vllm17activation_kernelI13__nv_bfloat16XadL_ZNS_15gelu_new_kernelIS1_EET_RKS3_EEEEvPS3_PS4_i")]
pub unsafe fn twin_activation_kernel_gelu_new(out: *mut u16, input: *const u16, d: i32) {}

/// `vllm::dynamic_scaled_int8_azp_quant_kernel<__nv_bfloat16, float, int32_t>(scalar_t const*
/// input, int8_t* out, scale_type* scale, azp_type* azp, const int hidden_size)`.
///
/// # Safety
/// `input` and `out` hold `num_tokens hidden_size` elements, `scale` and `azp` `num_tokens`.
#[kernel(name = "_ZN4vllm36dynamic_scaled_int8_azp_quant_kernelI13__nv_bfloat16fiEEvPKT_PaPT0_PT1_i")]
pub unsafe fn twin_dynamic_scaled_int8_azp_quant_kernel(input: *const u16, out: *mut i8, scale: *mut f32, azp: *mut i32, hidden_size: i32) {}

/// `per_token_group_quant_8bit_kernel<__nv_bfloat16, Float8_e4m3fn, false, false, float>(const
/// T* input, void* output_q, float* output_s, int group_size, int num_groups, int
/// groups_per_block, float eps, float min_8bit, float max_8bit, int scale_num_rows, int
/// scale_stride)`.
///
/// # Safety
/// `input` and `output_q` hold `num_groups group_size` elements, `output_s` `num_groups`; the
/// launch has `groups_per_block group_size 2` shared bytes.
#[kernel(name = "_Z33per_token_group_quant_8bit_kernelI13__nv_bfloat1613Float8_e4m3fnLb0ELb0EfEvPKT_PvPT3_iiifffii")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn twin_per_token_group_quant_8bit_kernel(
    input: *const u16,
    output_q: *mut u8,
    output_s: *mut f32,
    group_size: i32,
    num_groups: i32,
    groups_per_block: i32,
    eps: f32,
    min_8bit: f32,
    max_8bit: f32,
    scale_num_rows: i32,
    scale_stride: i32,
) {
}
