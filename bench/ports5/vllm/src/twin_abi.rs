//! The parameter lists of the vLLM twins (bench/ports5/cuda/ports5.cu, `-DPORTS5_VLLM`), as
//! stub kernels with raw pointers, so that the host harness launches the nvcc-built cubin's
//! kernels with typed launchers (`twin_x::launch_in(&twins, ..)`). The stubs' own bodies are
//! empty: only their signatures (PTX parameter lists identical to the CUDA C++ ones) are used.
#![allow(unused_variables, clippy::too_many_arguments)]

use ferrocuda_device::half::bf16;
use ferrocuda_device::kernel;

/// `act_and_mul_kernel<bf16, gelu_tanh_kernel, true>(scalar_t* out, const scalar_t* input, const int d)`.
///
/// # Safety
/// `input` holds `2 d` bf16 per token (block), `out` `d`.
#[kernel]
pub unsafe fn twin_gelu_tanh_and_mul_kernel(out: *mut bf16, input: *const bf16, d: i32) {}

/// `rms_norm_static_fp8_quant_kernel<bf16, fp8>(out, input, input_stride, weight, scale, epsilon, num_tokens, hidden_size)`.
///
/// # Safety
/// `out` holds `hidden_size` bytes per token (block), `input` rows of `input_stride`, `weight`
/// `hidden_size` bf16, `scale` one `f32`; blocks of at most 1024 threads.
#[kernel]
pub unsafe fn twin_rms_norm_static_fp8_quant_kernel(
    out: *mut u8,
    input: *const bf16,
    input_stride: i32,
    weight: *const bf16,
    scale: *const f32,
    epsilon: f32,
    num_tokens: i32,
    hidden_size: i32,
) {
}

/// `apply_repetition_penalties_kernel<float>(logits, prompt_mask, output_mask, repetition_penalties, num_seqs, vocab_size, tile_size)`.
///
/// # Safety
/// `logits` and both masks (bytes 0 or 1) hold `num_seqs vocab_size` elements, the penalties `num_seqs`.
#[kernel]
pub unsafe fn twin_apply_repetition_penalties_kernel(
    logits: *mut f32,
    prompt_mask: *const u8,
    output_mask: *const u8,
    repetition_penalties: *const f32,
    num_seqs: i32,
    vocab_size: i32,
    tile_size: i32,
) {
}

/// `topkGatingSoftmax<4, 64, 4, 16>(input, finished, output, num_rows, indices, source_rows, k, start_expert, end_expert)`.
///
/// # Safety
/// `input` holds `64 num_rows` floats, the outputs `k num_rows`; `finished` null or `num_rows`
/// bytes; blocks of `(32, 4)`.
#[kernel]
pub unsafe fn twin_topk_gating_softmax_64(
    input: *const f32,
    finished: *const u8,
    output: *mut f32,
    num_rows: i32,
    indices: *mut i32,
    source_rows: *mut i32,
    k: i32,
    start_expert: i32,
    end_expert: i32,
) {
}
