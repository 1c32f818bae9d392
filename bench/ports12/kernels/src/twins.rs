//! The CUDA C++ twins' parameter lists (bench/ports12/cuda/ports12.cu, built by nvcc): empty
//! stubs whose typed launchers launch the nvcc-built entries from a loaded cubin
//! (`launch_in`). Each `name` is the entry's mangled name, as `nvdisasm -c` lists it.
// The stubs' parameters are never read (the body is empty).
#![allow(unused_variables)]

use ferrocuda_device::half::{bf16, f16};
use ferrocuda_device::kernel;

/// `attention_value_kernel1(float* out, const float* att, const float* inp, int B, int T, int C, int NH)`.
///
/// # Safety
/// `out` holds `B T C` floats, `att` `B NH T T`, `inp` `B T 3C`; the grid covers `B T NH` threads.
#[kernel(name = "_Z23attention_value_kernel1PfPKfS1_iiii")]
pub unsafe fn twin_attention_value_kernel1(out: *mut f32, att: *const f32, inp: *const f32, b: i32, t: i32, c: i32, nh: i32) {}

/// `softmax_forward_kernel7(float* out, const float* inp, int N, int C)`.
///
/// # Safety
/// `out` and `inp` hold `N C` floats; one block per row, dynamic shared memory `2 blockDim.x / 32` floats.
#[kernel(name = "_Z23softmax_forward_kernel7PfPKfii")]
pub unsafe fn twin_softmax_forward_kernel7(out: *mut f32, inp: *const f32, n: i32, c: i32) {}

/// `mean_kernel(float* mean, const float* inp, int N, int C, int block_size)`.
///
/// # Safety
/// `mean` holds `N` floats, `inp` `N C`; one block of `block_size` threads per row, dynamic
/// shared memory `block_size` floats.
#[kernel(name = "_Z11mean_kernelPfPKfiii")]
pub unsafe fn twin_mean_kernel(mean: *mut f32, inp: *const f32, n: i32, c: i32, block_size: i32) {}

/// `matmul_backward_bias_kernel2(floatX* dbias, const floatX* dout, int B, int T, int OC)`, `floatX` = bf16.
///
/// # Safety
/// `dbias` holds `OC` values, `dout` `B T OC`.
#[kernel(name = "_Z28matmul_backward_bias_kernel2P13__nv_bfloat16PKS_iii")]
pub unsafe fn twin_matmul_backward_bias_kernel2(dbias: *mut bf16, dout: *const bf16, b: i32, t: i32, oc: i32) {}

/// `softmax_forward_online_kernel2(float* out, const float* inp, int N, int C)`.
///
/// # Safety
/// `out` and `inp` hold `N C` floats; a warp per row.
#[kernel(name = "_Z30softmax_forward_online_kernel2PfPKfii")]
pub unsafe fn twin_softmax_forward_online_kernel2(out: *mut f32, inp: *const f32, n: i32, c: i32) {}

/// `vllm::act_and_mul_quant_kernel<__nv_bfloat16, silu_kernel>(FP8_TYPE* out, const bf16* input, const float* scale, int d)`.
///
/// # Safety
/// `out` holds `tokens d` bytes, `input` `tokens 2d` bf16, `scale` one float; grid `(tokens, blocks_per_token)`.
#[kernel(name = "_ZN4vllm24act_and_mul_quant_kernelI13__nv_bfloat16XadL_ZNS_11silu_kernelIS1_EET_RKS3_EEEEvPN3c1013Float8_e4m3fnEPS4_PKfi")]
pub unsafe fn twin_act_and_mul_quant_kernel(out: *mut u8, input: *const bf16, scale: *const f32, d: i32) {}

/// `quantize_q8_1<__nv_bfloat16>(const bf16* x, void* vy, int kx, int kx_padded)`.
///
/// # Safety
/// `x` holds `ky kx` values, `vy` `ky kx_padded / 32` 36-byte blocks; grid `(kx_padded / 256, ky)` of 256 threads.
#[kernel(name = "_Z13quantize_q8_1I13__nv_bfloat16EvPKT_Pvii")]
pub unsafe fn twin_quantize_q8_1(x: *const bf16, vy: *mut u8, kx: i32, kx_padded: i32) {}

/// `dequantize_block<QK4_0, QR4_0, dequantize_q4_0, half>(const void* vx, half* y, int k)`.
///
/// # Safety
/// `vx` holds `k / 32` 18-byte blocks, `y` `k` halves; `k / 2` threads.
#[kernel(name = "_Z16dequantize_blockILi32ELi2EXadL_Z15dequantize_q4_0PKviiR7__half2EE6__halfEvS1_PT2_i")]
pub unsafe fn twin_dequantize_block_q4_0(vx: *const u8, y: *mut f16, k: i32) {}
