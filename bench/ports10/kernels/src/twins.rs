//! Launch stubs of the CUDA C++ twins in `bench/ports10/cuda/ports10.cu` (nvcc's cubins, loaded
//! by the bench): each declares a twin's parameter list, raw pointers where the CUDA entry has
//! pointers, the same scalars in the same order (`int` is `i32`, `size_t` and `int64_t` are
//! `u64`/`i64`), under the entry's mangled name (the source's kernels are C++, not `extern "C"`:
//! `nvdisasm -c ports10.cubin | grep '\.type.*@function'`). Their bodies are empty: only the
//! cubin's code runs.
//!
//! # Safety (every stub)
//! Each pointer is valid for every element the CUDA kernel touches at the launch's shape (the
//! lengths its scalars and grid imply), nothing else touches the outputs during the launch, and
//! the buffers outlive it.

// The stubs' parameters name the CUDA entry's; their empty bodies use none of them.
#![allow(unused_variables, clippy::missing_safety_doc, clippy::too_many_arguments)]

use ferrocuda_device::kernel;
use ferrocuda_device::prelude::bf16;

/// `softmax_forward_kernel4(float* out, const float* inp, int N, int C)`; dynamic shared memory
/// `blockDim.x / 32` floats.
#[kernel(name = "_Z23softmax_forward_kernel4PfPKfii")]
pub unsafe fn twin_softmax_forward_kernel4(out: *mut f32, inp: *const f32, n: i32, c: i32) {}

/// `layernorm_backward_kernel1(float* dinp, float* dweight, float* dbias, const float* dout,
/// const float* inp, const float* weight, const float* mean, const float* rstd, int B, int T, int C)`.
#[kernel(name = "_Z26layernorm_backward_kernel1PfS_S_PKfS1_S1_S1_S1_iii")]
pub unsafe fn twin_layernorm_backward_kernel1(
    dinp: *mut f32,
    dweight: *mut f32,
    dbias: *mut f32,
    dout: *const f32,
    inp: *const f32,
    weight: *const f32,
    mean: *const f32,
    rstd: *const f32,
    b: i32,
    t: i32,
    c: i32,
) {
}

/// `matmul_backward_bias_kernel1(floatX* dbias, const floatX* dout, int B, int T, int OC)`;
/// dynamic shared memory `blockDim.x` floats.
#[kernel(name = "_Z28matmul_backward_bias_kernel1P13__nv_bfloat16PKS_iii")]
pub unsafe fn twin_matmul_backward_bias_kernel1(dbias: *mut bf16, dout: *const bf16, b: i32, t: i32, oc: i32) {}

/// `encoder_forward_kernel2(floatX* out, const int* inp, const floatX* wte, const floatX* wpe,
/// int B, int T, int C)`.
#[kernel(name = "_Z23encoder_forward_kernel2P13__nv_bfloat16PKiPKS_S4_iii")]
pub unsafe fn twin_encoder_forward_kernel2(out: *mut bf16, inp: *const i32, wte: *const bf16, wpe: *const bf16, b: i32, t: i32, c: i32) {}

/// `global_sum_single_block_kernel<float>(float* result, const float* values, size_t count)`.
#[kernel(name = "_Z30global_sum_single_block_kernelIfEvPfPKT_m")]
pub unsafe fn twin_global_sum_single_block_kernel(result: *mut f32, values: *const f32, count: u64) {}

/// `finalizeMoeRoutingKernel<__nv_bfloat16, __nv_bfloat16, false>(const T* expanded_permuted_rows,
/// OutputType* reduced_unpermuted_output, const float* scales, const int*
/// expanded_source_row_to_expanded_dest_row, int64_t orig_cols, int64_t k, const int64_t*
/// num_valid_ptr)`.
#[kernel(name = "_Z24finalizeMoeRoutingKernelI13__nv_bfloat16S0_Lb0EEvPKT_PT0_PKfPKillPKl")]
pub unsafe fn twin_finalize_moe_routing_kernel(
    expanded_permuted_rows: *const bf16,
    reduced_unpermuted_output: *mut bf16,
    scales: *const f32,
    source_to_dest: *const i32,
    orig_cols: i64,
    k: i64,
    num_valid_ptr: *const i64,
) {
}

/// `expandInputRowsKernel<__nv_bfloat16, false>(const T* unpermuted_input, T* permuted_output,
/// int* sorted_experts, const int* expanded_dest_row_to_expanded_source_row, int*
/// expanded_source_row_to_expanded_dest_row, int* permuted_idx, const int64_t*
/// expert_first_token_offset, int64_t num_rows, const int64_t* num_dest_rows, int64_t cols,
/// int64_t k, int num_local_experts)`.
#[kernel(name = "_Z21expandInputRowsKernelI13__nv_bfloat16Lb0EEvPKT_PS1_PiPKiS5_S5_PKllS9_lli")]
pub unsafe fn twin_expand_input_rows_kernel(
    unpermuted_input: *const bf16,
    permuted_output: *mut bf16,
    sorted_experts: *mut i32,
    dest_to_source: *const i32,
    source_to_dest: *mut i32,
    permuted_idx: *mut i32,
    expert_first_token_offset: *const i64,
    num_rows: i64,
    num_dest_rows: *const i64,
    cols: i64,
    k: i64,
    num_local_experts: i32,
) {
}

/// `preprocessTopkIdKernel(int* topk_id_ptr, int size, const int* expert_map_ptr, int
/// num_experts)`; dynamic shared memory `num_experts` ints.
#[kernel(name = "_Z22preprocessTopkIdKernelPiiPKii")]
pub unsafe fn twin_preprocess_topk_id_kernel(topk_id: *mut i32, size: i32, expert_map: *const i32, num_experts: i32) {}
