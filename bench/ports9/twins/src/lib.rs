//! Launch stubs of bench/ports9's CUDA C++ twins (`cuda/ports9.cu`, compiled by nvcc on the
//! GPU machine): each declares the C++ entry's parameter list with raw pointers, named by its
//! mangled symbol (`nvdisasm -c ports9.cubin | grep '\.type.*@function'`). Nothing of this
//! crate's own PTX runs; the stubs give typed `unsafe` launchers (`launch_in`) on the cubin.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
#![allow(unused_variables, clippy::too_many_arguments)]

use ferrocuda_device::half::bf16;
use ferrocuda_device::kernel;

ferrocuda_device::embed_kernels!();

/// `unpermute_kernel_backward(floatX* dinp, const floatX* dout, int B, int N, int NH, int d)`.
///
/// # Safety
/// `dinp` and `dout` hold `B N NH d` elements; a 1-D launch.
#[kernel(name = "_Z25unpermute_kernel_backwardP13__nv_bfloat16PKS_iiii")]
pub unsafe fn twin_unpermute_kernel_backward(dinp: *mut bf16, dout: *const bf16, b: i32, n: i32, nh: i32, d: i32) {}

/// `permute_kernel_backward(floatX* dinp, const floatX* dq, const floatX* dk, const floatX* dv, int B, int N, int NH, int d)`.
///
/// # Safety
/// `dinp` holds `3 B N NH d` elements, `dq`/`dk`/`dv` `B N NH d` each.
#[kernel(name = "_Z23permute_kernel_backwardP13__nv_bfloat16PKS_S2_S2_iiii")]
pub unsafe fn twin_permute_kernel_backward(dinp: *mut bf16, dq: *const bf16, dk: *const bf16, dv: *const bf16, b: i32, n: i32, nh: i32, d: i32) {}

/// `layernorm_backward_kernel2<floatX, floatX, floatX, floatX>(dinp, dweight, dbias, dout,
/// inp, weight, mean, rstd, B, T, C, dweight_tmp, dbias_tmp)`.
///
/// # Safety
/// Row tensors hold `B T C` elements, `weight` `C`, `mean`/`rstd` `B T`, the f32 sums `C`;
/// `2 C` floats of dynamic shared memory; the grid covers `B T` warps.
#[kernel(name = "_Z26layernorm_backward_kernel2I13__nv_bfloat16S0_S0_S0_EvPT_PT0_S4_PKT1_PKT2_PKS3_SA_SA_iiiPfSD_")]
pub unsafe fn twin_layernorm_backward_kernel2(
    dinp: *mut bf16,
    dweight: *mut bf16,
    dbias: *mut bf16,
    dout: *const bf16,
    inp: *const bf16,
    weight: *const bf16,
    mean: *const bf16,
    rstd: *const bf16,
    b: i32,
    t: i32,
    c: i32,
    dweight_tmp: *mut f32,
    dbias_tmp: *mut f32,
) {
}

/// `matmul_backward_bias_kernel4(floatX* dbias, const floatX* dout, int B, int T, int OC)`.
///
/// # Safety
/// `dbias` holds `OC` elements (a multiple of 32), `dout` `B T OC`; grid `OC / 32`,
/// `blockDim.x` floats of dynamic shared memory.
#[kernel(name = "_Z28matmul_backward_bias_kernel4P13__nv_bfloat16PKS_iii")]
pub unsafe fn twin_matmul_backward_bias_kernel4(dbias: *mut bf16, dout: *const bf16, b: i32, t: i32, oc: i32) {}

/// `encoder_backward_kernel2(float* dwte, float* dwpe, const float* dout, const int* inp, int B, int T, int C)`.
///
/// # Safety
/// `dwte` holds `V C` elements for every token id `< V` in `inp` (`B T`), `dwpe` `T C`, `dout` `B T C`.
#[kernel(name = "_Z24encoder_backward_kernel2PfS_PKfPKiiii")]
pub unsafe fn twin_encoder_backward_kernel2(dwte: *mut f32, dwpe: *mut f32, dout: *const f32, inp: *const i32, b: i32, t: i32, c: i32) {}

/// `vllm::copy_blocks_kernel<__nv_bfloat16>(int64_t* key_cache_ptrs, int64_t* value_cache_ptrs, const int64_t* block_mapping, const int numel_per_block)`.
///
/// # Safety
/// The pointer arrays hold a device address per layer (`gridDim.x`), each cache valid for
/// every block `block_mapping` names; `block_mapping` holds `2 gridDim.y` block numbers.
#[kernel(name = "_ZN4vllm18copy_blocks_kernelI13__nv_bfloat16EEvPlS2_PKli")]
pub unsafe fn twin_copy_blocks_kernel(key_cache_ptrs: *mut i64, value_cache_ptrs: *mut i64, block_mapping: *const i64, numel_per_block: i32) {}

/// `vllm::poly_norm_kernel<__nv_bfloat16, 0>(out, input, weight, bias, float epsilon, int hidden_size)`.
///
/// # Safety
/// `out`/`input` hold `gridDim.x hidden_size` elements, `weight` 3, `bias` 1; at most 1024 threads.
#[kernel(name = "_ZN4vllm16poly_norm_kernelI13__nv_bfloat16Li0EEEvPT_PKS2_S5_S5_fi")]
pub unsafe fn twin_poly_norm_kernel(out: *mut bf16, input: *const bf16, weight: *const bf16, bias: *const bf16, epsilon: f32, hidden_size: i32) {}

/// `vllm::swigluoai_and_mul_kernel<__nv_bfloat16, swigluoai_and_mul>(out, input, int d, float alpha, float limit)`.
///
/// # Safety
/// `out` holds `gridDim.x d` elements, `input` `2 gridDim.x d`.
#[kernel(name = "_ZN4vllm24swigluoai_and_mul_kernelI13__nv_bfloat16XadL_ZNS_17swigluoai_and_mulIS1_EET_RKS3_S5_ffEEEEvPS3_PS4_iff")]
pub unsafe fn twin_swigluoai_and_mul_kernel(out: *mut bf16, input: *const bf16, d: i32, alpha: f32, limit: f32) {}
