// The CUDA C++ twins of issue 30's fifth held-out port (bench/ports5): each kernel written as
// its public source writes it (same loads, loops, launch shape and types), re-typed here for
// `extern "C"` symbols and without the sources' frameworks (torch, c10, the dev/cuda harness).
// They are the reference the Rust ports are timed and checked against, not product code.
//
// Sources (read 2026-11-28):
// - llm.c (MIT, Andrej Karpathy), github.com/karpathy/llm.c at f1e2ace:
//   dev/cuda/residual_forward.cu (residual_forward_kernel2, x128 = Packed128<bf16>),
//   dev/cuda/crossentropy_forward.cu (crossentropy_forward_kernel1),
//   dev/cuda/crossentropy_softmax_backward.cu (crossentropy_softmax_backward_kernel1),
//   llmc/cuda_utils.cuh (copy_and_cast_kernel<__nv_bfloat16, float>, Packed128/load128cs).
//   llm.c builds with `nvcc -O3 --use_fast_math`: compile with -DPORTS5_LLMC --use_fast_math.
// - vLLM (Apache-2.0), github.com/vllm-project/vllm, csrc/ at the commits the search index holds:
//   activation_kernels.cu @00ccbd42 (act_and_mul_kernel<bf16, gelu_tanh_kernel, true>),
//   layernorm_quant_kernels.cu @0112cf23 (rms_norm_static_fp8_quant_kernel<bf16, Float8_e4m3fn>),
//   quantization/fp8/common.cuh @0a9a96fa (scaled_fp8_conversion<true>),
//   sampler.cu @00e831b2 (apply_repetition_penalties_kernel<float>),
//   moe/topk_softmax_kernels.cu (topkGatingSoftmax<VPT 4, 64 experts, 4 warps, 16 B>).
//   c10::Float8_e4m3fn's float conversion is c10's fp8e4m3fn_from_fp32_value (software).
//   vLLM builds without --use_fast_math: compile with -DPORTS5_VLLM.
#include <cuda_bf16.h>
#include <stdint.h>

#ifdef PORTS5_LLMC
// llm.c's Packed128, load128cs and store128 (llmc/cuda_utils.cuh): the one copy the twins of
// issue 30's ports share (bench/cuda/llmc_cuda_utils.cuh; WARP_SIZE first, as llm.c's
// cuda_common.h defines it).
#define WARP_SIZE 32U
#if __has_include("llmc_cuda_utils.cuh")
#include "llmc_cuda_utils.cuh"  // staged beside this file (scripts/gpu-run)
#else
#include "../../cuda/llmc_cuda_utils.cuh"
#endif
typedef __nv_bfloat16 floatX;
typedef Packed128<floatX> x128;

extern "C" __global__ void twin_residual_forward_kernel2(floatX* out, const floatX* inp1, const floatX* inp2, int N) {
    int idx = (blockIdx.x * blockDim.x + threadIdx.x) * x128::size;
    if (idx < N) {
        x128 packed_out;
        x128 packed_inp1 = load128cs(inp1 + idx);
        x128 packed_inp2 = load128cs(inp2 + idx);
        for (int k = 0; k < packed_inp1.size; ++k) {
            packed_out[k] = (floatX)((float)packed_inp1[k] + (float)packed_inp2[k]);
        }
        store128(out + idx, packed_out);
    }
}

extern "C" __global__ void twin_crossentropy_forward_kernel1(float* losses, const float* probs, const int* targets,
                                                             int B, int T, int V) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < B * T) {
        int b = i / T;
        int t = i % T;
        const float* probs_bt = probs + b * T * V + t * V;
        int ix = targets[b * T + t];
        losses[b * T + t] = -logf(probs_bt[ix]);
    }
}

extern "C" __global__ void twin_crossentropy_softmax_backward_kernel1(float* dlogits, const float* dlosses,
                                                                      const float* probs, const int* targets,
                                                                      int B, int T, int V) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < B * T * V) {
        int b = i / (T * V);
        int t = (i / V) % T;
        int v = i % V;
        float* dlogits_bt = dlogits + b * T * V + t * V;
        const float* probs_bt = probs + b * T * V + t * V;
        float dloss = dlosses[b * T + t];
        int ix = targets[b * T + t];
        float p = probs_bt[v];
        float indicator = v == ix ? 1.0f : 0.0f;
        dlogits_bt[v] += (p - indicator) * dloss;
    }
}

// llmc/cuda_utils.cuh: cast_value<__nv_bfloat16, float> is __float2bfloat16.
extern "C" __global__ void twin_copy_and_cast_kernel(__nv_bfloat16* dst, const float* src, size_t n,
                                                     ptrdiff_t stride_dst, ptrdiff_t stride_src) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    // need to try grid stride looping for more perf later
    if (idx < n) {
        dst[idx + stride_dst * blockIdx.y] = __float2bfloat16(src[idx + stride_src * blockIdx.y]);
    }
}
#endif  // PORTS5_LLMC

#ifdef PORTS5_VLLM
#include <cub/cub.cuh>

typedef __nv_bfloat16 scalar_t;

// act_and_mul_kernel<bf16, gelu_tanh_kernel, act_first = true> (activation_kernels.cu).
__device__ __forceinline__ scalar_t gelu_tanh_kernel(const scalar_t& x) {
    const float f = (float)x;
    constexpr float BETA = M_SQRT2 * M_2_SQRTPI * 0.5f;
    constexpr float KAPPA = 0.044715;
    float x_cube = f * f * f;
    float inner = BETA * (f + KAPPA * x_cube);
    return (scalar_t)(0.5f * f * (1.0f + ::tanhf(inner)));
}
extern "C" __global__ void twin_gelu_tanh_and_mul_kernel(scalar_t* __restrict__ out, const scalar_t* __restrict__ input,
                                                         const int d) {
    const int64_t token_idx = blockIdx.x;
    for (int64_t idx = threadIdx.x; idx < d; idx += blockDim.x) {
        const scalar_t x = __ldg(&input[token_idx * 2 * d + idx]);
        const scalar_t y = __ldg(&input[token_idx * 2 * d + d + idx]);
        out[token_idx * d + idx] = gelu_tanh_kernel(x) * y;
    }
}

// c10::Float8_e4m3fn(float): c10/util/Float8_e4m3fn.h's fp8e4m3fn_from_fp32_value.
__device__ __forceinline__ uint8_t fp8e4m3fn_from_fp32_value(float f) {
    constexpr uint32_t fp8_max = UINT32_C(1087) << 20;
    constexpr uint32_t denorm_mask = UINT32_C(141) << 23;
    uint32_t f_bits = __float_as_uint(f);
    uint8_t result = 0u;
    const uint32_t sign = f_bits & UINT32_C(0x80000000);
    f_bits ^= sign;
    if (f_bits >= fp8_max) {
        result = 0x7f;
    } else {
        if (f_bits < (UINT32_C(121) << 23)) {
            f_bits = __float_as_uint(__uint_as_float(f_bits) + __uint_as_float(denorm_mask));
            result = static_cast<uint8_t>(f_bits - denorm_mask);
        } else {
            uint8_t mant_odd = (f_bits >> 20) & 1;
            f_bits += ((uint32_t)(7 - 127) << 23) + 0x7FFFF;
            f_bits += mant_odd;
            result = static_cast<uint8_t>(f_bits >> 20);
        }
    }
    result |= static_cast<uint8_t>(sign >> 24);
    return result;
}
#define FP8_E4M3_MAX 448.0f
__device__ __forceinline__ uint8_t scaled_fp8_conversion_inv(float const val, float const scale) {
    float x = val * scale;  // is_scale_inverted
    float r = fmax(-FP8_E4M3_MAX, fmin(x, FP8_E4M3_MAX));
    return fp8e4m3fn_from_fp32_value(r);
}
extern "C" __global__ void twin_rms_norm_static_fp8_quant_kernel(
    uint8_t* __restrict__ out, const scalar_t* __restrict__ input, const int input_stride,
    const scalar_t* __restrict__ weight, const float* __restrict__ scale, const float epsilon,
    const int num_tokens, const int hidden_size) {
    __shared__ float s_variance;
    float variance = 0.0f;
    for (int idx = threadIdx.x; idx < hidden_size; idx += blockDim.x) {
        const float x = (float)input[blockIdx.x * input_stride + idx];
        variance += x * x;
    }
    using BlockReduce = cub::BlockReduce<float, 1024>;
    __shared__ typename BlockReduce::TempStorage reduceStore;
    variance = BlockReduce(reduceStore).Reduce(variance, cuda::std::plus<>{}, blockDim.x);
    if (threadIdx.x == 0) {
        s_variance = rsqrtf(variance / hidden_size + epsilon);
    }
    __syncthreads();
    // invert scale to avoid division
    float const scale_inv = 1.0f / *scale;
    for (int idx = threadIdx.x; idx < hidden_size; idx += blockDim.x) {
        float x = (float)input[blockIdx.x * input_stride + idx];
        float const out_norm = ((scalar_t)(x * s_variance)) * weight[idx];
        out[blockIdx.x * hidden_size + idx] = scaled_fp8_conversion_inv(out_norm, scale_inv);
    }
}

// apply_repetition_penalties_kernel<float> (sampler.cu).
extern "C" __global__ void twin_apply_repetition_penalties_kernel(
    float* __restrict__ logits, const bool* __restrict__ prompt_mask, const bool* __restrict__ output_mask,
    const float* __restrict__ repetition_penalties, const int num_seqs, const int vocab_size, const int tile_size) {
    const int seq_idx = blockIdx.x;
    if (seq_idx >= num_seqs) return;
    const int tile_start = blockIdx.y * tile_size;
    const int tile_end = min(tile_start + tile_size, vocab_size);
    const float penalty = repetition_penalties[seq_idx];
    for (int vocab_idx = tile_start + threadIdx.x; vocab_idx < tile_end; vocab_idx += blockDim.x) {
        const int64_t idx = static_cast<int64_t>(seq_idx) * vocab_size + vocab_idx;
        const bool is_repeated = prompt_mask[idx] || output_mask[idx];
        if (is_repeated) {
            float logit = logits[idx];
            if (logit > 0) {
                logits[idx] = logit / penalty;
            } else {
                logits[idx] = logit * penalty;
            }
        }
    }
}

// topkGatingSoftmax<VPT, NUM_EXPERTS, WARPS_PER_CTA, BYTES_PER_LDG> (moe/topk_softmax_kernels.cu),
// instantiated as the launcher does for 64 experts: <4, 64, 4, 16>, block (32, 4).
#define WARP_SIZE 32
template <typename T, int N, int Alignment = sizeof(T) * N>
struct alignas(Alignment) AlignedArray { T data[N]; };
template <int VPT, int NUM_EXPERTS, int WARPS_PER_CTA, int BYTES_PER_LDG>
__device__ __forceinline__ void topkGatingSoftmax(const float* input, const bool* finished, float* output,
                                                  const int num_rows, int* indices, int* source_rows, const int k,
                                                  const int start_expert, const int end_expert) {
    static constexpr int ELTS_PER_LDG = BYTES_PER_LDG / sizeof(float);
    static constexpr int ELTS_PER_ROW = NUM_EXPERTS;
    static constexpr int THREADS_PER_ROW = ELTS_PER_ROW / VPT;
    static constexpr int LDG_PER_THREAD = VPT / ELTS_PER_LDG;
    static constexpr int ELTS_PER_WARP = WARP_SIZE * VPT;
    static constexpr int ROWS_PER_WARP = ELTS_PER_WARP / ELTS_PER_ROW;
    static constexpr int ROWS_PER_CTA = WARPS_PER_CTA * ROWS_PER_WARP;
    const int cta_base_row = blockIdx.x * ROWS_PER_CTA;
    const int warp_base_row = cta_base_row + threadIdx.y * ROWS_PER_WARP;
    const int thread_row_in_warp = threadIdx.x / THREADS_PER_ROW;
    const int thread_row = warp_base_row + thread_row_in_warp;
    if (thread_row >= num_rows) {
        return;
    }
    const bool row_is_active = finished ? !finished[thread_row] : true;
    const float* thread_row_ptr = input + thread_row * ELTS_PER_ROW;
    const int thread_group_idx = threadIdx.x % THREADS_PER_ROW;
    const int first_elt_read_by_thread = thread_group_idx * ELTS_PER_LDG;
    const float* thread_read_ptr = thread_row_ptr + first_elt_read_by_thread;
    using AccessType = AlignedArray<float, ELTS_PER_LDG>;
    float row_chunk[VPT];
    AccessType* row_chunk_vec_ptr = reinterpret_cast<AccessType*>(&row_chunk);
    const AccessType* vec_thread_read_ptr = reinterpret_cast<const AccessType*>(thread_read_ptr);
#pragma unroll
    for (int ii = 0; ii < LDG_PER_THREAD; ++ii) {
        row_chunk_vec_ptr[ii] = vec_thread_read_ptr[ii * THREADS_PER_ROW];
    }
    float thread_max = row_chunk[0];
#pragma unroll
    for (int ii = 1; ii < VPT; ++ii) {
        thread_max = max(thread_max, row_chunk[ii]);
    }
#pragma unroll
    for (int mask = THREADS_PER_ROW / 2; mask > 0; mask /= 2) {
        thread_max = max(thread_max, __shfl_xor_sync(0xffffffff, thread_max, mask, THREADS_PER_ROW));
    }
    float row_sum = 0;
#pragma unroll
    for (int ii = 0; ii < VPT; ++ii) {
        row_chunk[ii] = expf(row_chunk[ii] - thread_max);
        row_sum += row_chunk[ii];
    }
#pragma unroll
    for (int mask = THREADS_PER_ROW / 2; mask > 0; mask /= 2) {
        row_sum += __shfl_xor_sync(0xffffffff, row_sum, mask, THREADS_PER_ROW);
    }
    const float reciprocal_row_sum = 1.f / row_sum;
#pragma unroll
    for (int ii = 0; ii < VPT; ++ii) {
        row_chunk[ii] = row_chunk[ii] * reciprocal_row_sum;
    }
    int start_col = first_elt_read_by_thread;
    static constexpr int COLS_PER_GROUP_LDG = ELTS_PER_LDG * THREADS_PER_ROW;
    for (int k_idx = 0; k_idx < k; ++k_idx) {
        float max_val = row_chunk[0];
        int expert = start_col;
#pragma unroll
        for (int ldg = 0, col = start_col; ldg < LDG_PER_THREAD; ++ldg, col += COLS_PER_GROUP_LDG) {
#pragma unroll
            for (int ii = 0; ii < ELTS_PER_LDG; ++ii) {
                float val = row_chunk[ldg * ELTS_PER_LDG + ii];
                if (val > max_val) {
                    max_val = val;
                    expert = col + ii;
                }
            }
        }
#pragma unroll
        for (int mask = THREADS_PER_ROW / 2; mask > 0; mask /= 2) {
            float other_max = __shfl_xor_sync(0xffffffff, max_val, mask, THREADS_PER_ROW);
            int other_expert = __shfl_xor_sync(0xffffffff, expert, mask, THREADS_PER_ROW);
            if (other_max > max_val || (other_max == max_val && other_expert < expert)) {
                max_val = other_max;
                expert = other_expert;
            }
        }
        if (thread_group_idx == 0) {
            const bool node_uses_expert = expert >= start_expert && expert < end_expert;
            const bool should_process_row = row_is_active && node_uses_expert;
            const int idx = k * thread_row + k_idx;
            output[idx] = max_val;
            indices[idx] = should_process_row ? (expert - start_expert) : NUM_EXPERTS;
            source_rows[idx] = k_idx * num_rows + thread_row;
        }
        if (k_idx + 1 < k) {
            const int ldg_group_for_expert = expert / COLS_PER_GROUP_LDG;
            const int thread_to_clear_in_group = (expert / ELTS_PER_LDG) % THREADS_PER_ROW;
            if (thread_group_idx == thread_to_clear_in_group) {
                const int offset_for_expert = expert % ELTS_PER_LDG;
                row_chunk[ldg_group_for_expert * ELTS_PER_LDG + offset_for_expert] = -10000.f;
            }
        }
    }
}
extern "C" __launch_bounds__(4 * WARP_SIZE) __global__ void twin_topk_gating_softmax_64(
    const float* input, const bool* finished, float* output, const int num_rows, int* indices, int* source_rows,
    const int k, const int start_expert, const int end_expert) {
    topkGatingSoftmax<4, 64, 4, 16>(input, finished, output, num_rows, indices, source_rows, k, start_expert,
                                    end_expert);
}
#endif  // PORTS5_VLLM
