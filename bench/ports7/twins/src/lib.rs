//! The parameter lists of the CUDA C++ twins in `bench/ports7/cuda/ports7.cu`, as `#[kernel]`
//! stubs with empty bodies (README, "A CUDA C++ kernel as its authors wrote it"): raw pointers
//! where the CUDA entry has pointers, the same scalars in the same order. Only their typed,
//! `unsafe` launchers are used, with `launch_in` on the nvcc-built cubins; the stubs' own PTX
//! entries are never launched. A crate of its own because a stub and its port would otherwise
//! claim one PTX name in one crate (docs/kernel-model.md, "One PTX name per crate").
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
#![allow(unused_variables)]

use ferrocuda_device::kernel;

ferrocuda_device::embed_kernels!();

/// `residual_forward_kernel(floatX* out, const floatX* inp1, const floatX* inp2)` (bf16 as `u16`).
///
/// # Safety
/// The buffers hold `8 * threads of the launch` bf16 each.
#[kernel(name = "residual_forward_kernel")]
pub unsafe fn twin_residual_forward_kernel(out: *mut u16, inp1: *const u16, inp2: *const u16) {}

/// `unpermute_kernel_backward(floatX* dinp, const floatX* dout, int B, int N, int NH, int d)`.
///
/// # Safety
/// `dinp` and `dout` hold `B N NH d` bf16.
#[kernel(name = "unpermute_kernel_backward")]
pub unsafe fn twin_unpermute_kernel_backward(dinp: *mut u16, dout: *const u16, b: i32, n: i32, nh: i32, d: i32) {}

/// `permute_kernel_backward(floatX* dinp, const floatX* dq, const floatX* dk, const floatX* dv,
/// int B, int N, int NH, int d)`.
///
/// # Safety
/// `dq`, `dk`, `dv` hold `B NH N d` bf16, `dinp` three times that.
#[kernel(name = "permute_kernel_backward")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn twin_permute_kernel_backward(dinp: *mut u16, dq: *const u16, dk: *const u16, dv: *const u16, b: i32, n: i32, nh: i32, d: i32) {}

/// `reduce_add_sum_kernel(floatX* dst, const float* src, size_t n, size_t m)`.
///
/// # Safety
/// `dst` holds `n` bf16, `src` `n m` floats; `n % 8 == 0`.
#[kernel(name = "reduce_add_sum_kernel")]
pub unsafe fn twin_reduce_add_sum_kernel(dst: *mut u16, src: *const f32, n: u64, m: u64) {}

/// `fused_residual_forward_kernel5(floatX* residual, floatX* normed, float* mean, float* rstd,
/// const floatX* inp1, const floatX* inp2, const floatX* weight, const floatX* bias, int N, int C)`.
///
/// # Safety
/// `residual`, `normed`, `inp1`, `inp2` hold `N C` bf16, `mean` and `rstd` `N` floats, `weight`
/// and `bias` `C` bf16; blocks of `(32, block_y)` with `(2 + block_y) C 2` shared bytes.
#[kernel(name = "fused_residual_forward_kernel5")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn twin_fused_residual_forward_kernel5(
    residual: *mut u16,
    normed: *mut u16,
    mean: *mut f32,
    rstd: *mut f32,
    inp1: *const u16,
    inp2: *const u16,
    weight: *const u16,
    bias: *const u16,
    n: i32,
    c: i32,
) {
}

/// `vllm::act_and_mul_kernel_with_param<__nv_bfloat16, fatrelu_kernel<__nv_bfloat16>>(scalar_t*
/// out, const scalar_t* input, const int d, const float param)`.
///
/// # Safety
/// `out` holds `num_tokens d` bf16, `input` twice that, for a grid of `num_tokens` blocks.
#[kernel(name = "_ZN4vllm29act_and_mul_kernel_with_paramI13__nv_bfloat16XadL_ZNS_14fatrelu_kernelIS1_EET_RKS3_fEEEEvPS3_PS4_if")]
pub unsafe fn twin_act_and_mul_kernel_with_param(out: *mut u16, input: *const u16, d: i32, param: f32) {}

/// `vllm::static_scaled_int8_quant_kernel<__nv_bfloat16, float>(scalar_t const* input, int8_t*
/// out, scale_type const* scale_ptr, const int hidden_size)`.
///
/// # Safety
/// `input` and `out` hold `num_tokens hidden_size` elements, `scale_ptr` one float.
#[kernel(name = "_ZN4vllm31static_scaled_int8_quant_kernelI13__nv_bfloat16fEEvPKT_PaPKT0_i")]
pub unsafe fn twin_static_scaled_int8_quant_kernel(input: *const u16, out: *mut i8, scale_ptr: *const f32, hidden_size: i32) {}

/// `vllm::dynamic_scaled_int8_quant_kernel<__nv_bfloat16, float>(scalar_t const* input, int8_t*
/// out, scale_type* scale, const int hidden_size)`.
///
/// # Safety
/// `input` and `out` hold `num_tokens hidden_size` elements, `scale` `num_tokens` floats.
#[kernel(name = "_ZN4vllm32dynamic_scaled_int8_quant_kernelI13__nv_bfloat16fEEvPKT_PaPT0_i")]
pub unsafe fn twin_dynamic_scaled_int8_quant_kernel(input: *const u16, out: *mut i8, scale: *mut f32, hidden_size: i32) {}
