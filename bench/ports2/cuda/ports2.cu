// CUDA C++ twins of issue 30's second held-out port (bench/ports2: llmc/src/lib.rs and
// src/lib.rs), transcribed as the public sources write them (llm.c llmc/*.cuh at f1e2ace, vLLM
// csrc/), for nvcc:
//
//   nvcc -cubin -O3 -arch=sm_90 -DPORTS2_VLLM bench/ports2/cuda/ports2.cu -o ports2_vllm.cubin
//   nvcc -cubin -O3 -arch=sm_90 -DPORTS2_LLMC --use_fast_math bench/ports2/cuda/ports2.cu -o ports2_llmc.cubin
//
// (llm.c's Makefile builds with --use_fast_math, vLLM's without.) Each kernel is extern "C" with
// the Rust kernel's symbol and parameter layout, so the Rust launcher launches both: a slice or
// output is a pointer and its length (`usize`, unused where the source has no length). Where the
// source's parameters differ, a thin extern "C" entry derives what the source had and calls the
// source's body, which is kept as the source writes it.

#include <cassert>
#include <cmath>
#include <cstdint>
#include <cuda_bf16.h>

typedef unsigned long long usize;

#ifdef PORTS2_LLMC
// ---- llm.c llmc/cuda_common.h, llmc/cuda_utils.cuh -----------------------------------------
#define WARP_SIZE 32U
typedef __nv_bfloat16 floatX;

#if __has_include("llmc_cuda_utils.cuh")
#include "llmc_cuda_utils.cuh"  // staged beside this file (scripts/gpu-run)
#else
#include "../../cuda/llmc_cuda_utils.cuh"  // llm.c's Packed128, load128/store128*, warp/block reductions
#endif
typedef Packed128<floatX> x128;

__device__ __host__ constexpr unsigned int SquirrelNoise5(unsigned int positionX, unsigned int seed) {
    constexpr unsigned int SQ5_BIT_NOISE1 = 0xd2a80a3f;
    constexpr unsigned int SQ5_BIT_NOISE2 = 0xa884f197;
    constexpr unsigned int SQ5_BIT_NOISE3 = 0x6C736F4B;
    constexpr unsigned int SQ5_BIT_NOISE4 = 0xB79F3ABB;
    constexpr unsigned int SQ5_BIT_NOISE5 = 0x1b56c4f5;
    unsigned int mangledBits = positionX;
    mangledBits *= SQ5_BIT_NOISE1;
    mangledBits += seed;
    mangledBits ^= (mangledBits >> 9);
    mangledBits += SQ5_BIT_NOISE2;
    mangledBits ^= (mangledBits >> 11);
    mangledBits *= SQ5_BIT_NOISE3;
    mangledBits ^= (mangledBits >> 13);
    mangledBits += SQ5_BIT_NOISE4;
    mangledBits ^= (mangledBits >> 15);
    mangledBits *= SQ5_BIT_NOISE5;
    mangledBits ^= (mangledBits >> 17);
    return mangledBits;
}
__device__ __host__ constexpr unsigned int Get2dNoiseUint(int indexX, int indexY, unsigned int seed) {
    constexpr unsigned int PRIME_NUMBER = 198491317u;
    unsigned int x = static_cast<unsigned int>(indexX);
    unsigned int y = static_cast<unsigned int>(indexY);
    return SquirrelNoise5(x + (PRIME_NUMBER * y), seed);
}
__device__ __forceinline__ void stochastic_rounding(float in, __nv_bfloat16 *out, unsigned int seed) {
    unsigned int random = Get2dNoiseUint(threadIdx.x, blockIdx.x * blockDim.x + blockIdx.y, seed);
    unsigned int threshold = random & 0xFFFF;
    unsigned int float_bits = __float_as_uint(in);
    unsigned int rounded_bits = float_bits & 0x0000FFFF;
    float_bits = (rounded_bits > threshold) ? (float_bits | 0xFFFF) : (float_bits  & ~0xFFFF);
    *out = __float2bfloat16_rn(__uint_as_float(float_bits));
}

// ---- llm.c llmc/gelu.cuh: gelu_backward_inplace_kernel -----------------------------------------
#define GELU_SCALING_FACTOR sqrtf(2.0f / M_PI)
extern "C" __global__ void gelu_backward_inplace_kernel(floatX* d_in_out, usize n_d, const floatX* inp, usize n_inp) {
    int idx = (blockIdx.x * blockDim.x + threadIdx.x) * x128::size;

    x128 packed_dinp;
    x128 packed_inp = load128cs(inp + idx);
    x128 packed_dout = load128(d_in_out + idx);
    for (int k = 0; k < packed_inp.size; ++k) {
        float x = (float)packed_inp[k];
        float cube = 0.044715f * x * x * x;
        float tanh_arg = GELU_SCALING_FACTOR * (x + cube);
        float tanh_out = tanhf(tanh_arg);
        float coshf_out = coshf(tanh_arg);
        float sech_out = 1.0f / (coshf_out * coshf_out);
        float local_grad = 0.5f * (1.0f + tanh_out) + x * 0.5f * sech_out * GELU_SCALING_FACTOR * (1.0f + 3.0f * 0.044715f * x * x);
        packed_dinp[k] = (floatX)(local_grad * (float)packed_dout[k]);
    }
    store128(d_in_out + idx, packed_dinp);
}

// ---- llm.c llmc/adamw.cuh: adamw_kernel3<floatX, floatX> ------------------------------------
__device__ float lerp(float start, float end, float weight) {
    return fma(weight, end, fma(-weight, start, start));
}

template <typename Tp, typename Tg>
__device__ void adamw_update(Tp* params_memory, float* master_params_memory, Tg* grads_memory, float* m_memory, float* v_memory, size_t num_parameters,
                             float learning_rate, float beta1, float beta2, float beta1_correction, float beta2_correction, float eps, float weight_decay,
                             float grad_scale, unsigned int seed) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= num_parameters) { return; }  // guard
    float grad = grad_scale * (float)grads_memory[idx];
    float m = m_memory[idx];
    float v = v_memory[idx];
    m = lerp(grad, m, beta1);
    m_memory[idx] = m;
    v = lerp(grad * grad, v, beta2);
    v_memory[idx] = v;
    m /= beta1_correction;  // m_hat
    v /= beta2_correction;  // v_hat
    float old_param = (master_params_memory != NULL) ? master_params_memory[idx] : (float)params_memory[idx];
    float param = old_param - (learning_rate * (m / (sqrtf(v) + eps) + weight_decay * old_param));
    stochastic_rounding(param, &params_memory[idx], seed);
    if (master_params_memory != NULL) { master_params_memory[idx] = param; }
}

template <typename Tp, typename Tg>
__device__ void adamw_kernel3_body(Tp* params_memory, float* master_params_memory, Tg* grads_memory, float* m_memory, float* v_memory, size_t num_parameters,
                              ptrdiff_t w_stride, ptrdiff_t g_stride, ptrdiff_t s_stride,
                              float learning_rate, float beta1, float beta2, float beta1_correction, float beta2_correction, float eps, float weight_decay,
                              float grad_scale, unsigned int seed) {
    adamw_update(params_memory + blockIdx.y * w_stride,
                 master_params_memory ? master_params_memory + blockIdx.y * s_stride : NULL,
                 grads_memory + blockIdx.y * g_stride,
                 m_memory + blockIdx.y * s_stride,
                 v_memory + blockIdx.y * s_stride,
                 num_parameters, learning_rate, beta1, beta2, beta1_correction, beta2_correction, eps, weight_decay, grad_scale,
                 seed
                 );
}

// The Rust kernel's layout: the buffers (their common length is num_parameters), then the
// scalars; one slice, so the strides are 0.
extern "C" __global__ void adamw_kernel3(floatX* params_memory, usize n_params, float* master_params_memory, usize n_master,
                                         const floatX* grads_memory, usize n_grads, float* m_memory, usize n_m, float* v_memory, usize n_v,
                                         float learning_rate, float beta1, float beta2, float beta1_correction, float beta2_correction,
                                         float eps, float weight_decay, float grad_scale, unsigned int seed) {
    adamw_kernel3_body(params_memory, master_params_memory, grads_memory, m_memory, v_memory, n_params, 0, 0, 0,
                       learning_rate, beta1, beta2, beta1_correction, beta2_correction, eps, weight_decay, grad_scale, seed);
}

// ---- llm.c llmc/layernorm.cuh: layernorm_forward_kernel3 --------------------------------------
extern "C" __global__ void layernorm_forward_kernel3(floatX* __restrict__ out, usize n_out, float* __restrict__ mean, usize n_mean,
                                    float* __restrict__ rstd, usize n_rstd,
                                    const floatX*  __restrict__ inp, usize n_inp, const floatX*  __restrict__ weight, usize n_weight,
                                    const floatX* __restrict__ bias, usize n_bias, int N, int C) {
    int lane_id = threadIdx.x % WARP_SIZE;
    int warp_id = threadIdx.x / WARP_SIZE;
    int num_warps = blockDim.x / WARP_SIZE;

    int idx = blockIdx.x * num_warps + warp_id;
    if(idx >= N) { return; } // guard

    // the row of input that this group of threads is responsible for
    const floatX* x = inp + idx * C;

    // mean
    float sum = 0.0f;
    for (int i = lane_id; i < C; i += WARP_SIZE) {
        sum += (float)x[i];
    }
    sum = warpReduceSum(sum);
    float m = sum / C;
    if(lane_id == 0 && mean != nullptr) {
        __stcs(mean + idx, m);
    }

    // rstd
    sum = 0.0f;
    for (int i = lane_id; i < C; i += WARP_SIZE) {
        float diff = (float)x[i] - m;
        sum += diff * diff;
    }
    sum = warpReduceSum(sum);
    float s = rsqrtf(sum / C + 1e-5f);
    if(lane_id == 0 && rstd != nullptr) {
        __stcs(rstd + idx, s);
    }

    // final normalization and scaling by weight/bias
    floatX* o = out + idx * C;
    for (int c = lane_id; c < C; c += WARP_SIZE) {
        float n = s * ((float)__ldcs(x+c) - m);
        __stcs(o+c, (floatX)(n * (float)weight[c] + (float)bias[c]));
    }
}

// ---- llm.c llmc/matmul.cuh: matmul_backward_bias_kernel9<float, true> ----------------------------
extern "C" __global__ void matmul_backward_bias_kernel9(float* dbias, usize n_dbias, const floatX* dout, usize n_dout, int B, int T, int OC) {
    constexpr const int UseAuxBuffer = true;
    typedef float OutFloat;
    constexpr const int bdx = 4;
    constexpr const int bdy = WARP_SIZE / bdx;
    assert(blockDim.x == bdx);
    assert(blockDim.y == bdy);

    int warp_d = (int)threadIdx.x;
    int warp_c = (int)threadIdx.y;
    int block_d = (int)threadIdx.z;

    const int OC_per_warp = bdy * x128::size;  // 64 at BF16

    int local_oc = warp_c * x128::size;
    int global_oc = blockIdx.x * OC_per_warp + local_oc;

    int local_bt = warp_d + bdx * block_d;
    int bt_per_block = bdx * blockDim.z;

    float accumulators[x128::size];
    for (int k = 0; k < x128::size; k++) {
        accumulators[k] = 0.0f;
    }

    if(global_oc < OC) {
        // sum up over all bt within registers
        for (int idx = blockIdx.y * bt_per_block + local_bt; idx < B * T; idx += gridDim.y * bt_per_block) {
            x128 packed_dout = load128(dout + global_oc + idx*OC);
            for (int k = 0; k < x128::size; k++) {
                accumulators[k] += (float)packed_dout[k];
            }
        }
    }

    __shared__ float sub_results[x128::size][WARP_SIZE][bdy];

    // reduce within-warp results
    for (int k = 0; k < x128::size; k++) {
        float v = accumulators[k];
        v += __shfl_down_sync(0xffffffff, v, 1, 4);
        v += __shfl_down_sync(0xffffffff, v, 2, 4);
        if(warp_d == 0) {
            sub_results[k][block_d][warp_c] = v;
        }
    }
    __syncthreads();

    // block-wide reductions
    for (int k = block_d; k < x128::size; k += blockDim.z) {
        float a = 0.f;
        for (int r = warp_d; r < blockDim.z; r += bdx) {
            float v = sub_results[k][r][warp_c];
            v += __shfl_down_sync(0xffffffff, v, 1, 4);
            v += __shfl_down_sync(0xffffffff, v, 2, 4);
            a += v;
        }
        if(warp_d == 0 && global_oc < OC) {
            if constexpr (!UseAuxBuffer) {
                dbias[global_oc + k] = (OutFloat)(a + (float)dbias[global_oc + k]);
            } else {
                dbias[global_oc + k + blockIdx.y * OC] = a;
            }
        }
    }
}

// ---- llm.c llmc/attention.cuh: permute_kernel ---------------------------------------------------
extern "C" __global__ void permute_kernel(floatX* q, usize n_q, floatX* k, usize n_k, floatX* v, usize n_v,
                               const floatX* inp, usize n_inp,
                               int B, int N, int NH, int d) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * NH * N * d) { return; }

    // Q[b][nh_][n][d_] = inp[b][n][0][nh_][d_]
    int b = idx / (NH * N * d);
    int rest = idx % (NH * N * d);
    int nh_ = rest / (N * d);
    rest = rest % (N * d);
    int n = rest / d;
    int d_ = rest % d;
    int inp_idx = (b * N * 3 * NH * d) + (n * 3 * NH * d) + (0 * NH * d) + (nh_ * d) + d_;
    q[idx] = __ldcs(&inp[inp_idx]);
    k[idx] = __ldcs(&inp[inp_idx + NH * d]);
    v[idx] = __ldcs(&inp[inp_idx + 2 * (NH * d)]);
}
#endif // PORTS2_LLMC

#ifdef PORTS2_VLLM
#include <cub/cub.cuh>
#include <cuda/std/functional>
using AddOp = cuda::std::plus<>;

// ---- vLLM csrc/type_convert.cuh: _typeConvert<BFloat16>, _f16Vec ------------------------------
struct _typeConvertBF16 {
  static constexpr bool exists = true;
  using hip_type = __nv_bfloat16;
  using packed_hip_type = __nv_bfloat162;
  __device__ static __forceinline__ float convert(hip_type x) { return __bfloat162float(x); }
  __device__ static __forceinline__ float2 convert(packed_hip_type x) { return __bfloat1622float2(x); }
  __device__ static __forceinline__ hip_type convert(float x) { return __float2bfloat16(x); }
  __device__ static __forceinline__ packed_hip_type convert(float2 x) { return __float22bfloat162_rn(x); }
};

template <int width>
struct alignas(16) _f16Vec {
  using Converter = _typeConvertBF16;
  using T1 = typename Converter::hip_type;
  using T2 = typename Converter::packed_hip_type;
  T1 data[width];

  __device__ _f16Vec& operator+=(const _f16Vec<width>& other) {
#pragma unroll
    for (int i = 0; i < width; i += 2) {
      T2 temp{data[i], data[i + 1]};
      temp += T2{other.data[i], other.data[i + 1]};
      data[i] = temp.x;
      data[i + 1] = temp.y;
    }
    return *this;
  }
  __device__ _f16Vec& operator*=(const _f16Vec<width>& other) {
#pragma unroll
    for (int i = 0; i < width; i += 2) {
      T2 temp{data[i], data[i + 1]};
      temp *= T2{other.data[i], other.data[i + 1]};
      data[i] = temp.x;
      data[i + 1] = temp.y;
    }
    return *this;
  }
  __device__ _f16Vec& operator*=(const float scale) {
#pragma unroll
    for (int i = 0; i < width; i += 2) {
      float2 temp_f = Converter::convert(T2{data[i], data[i + 1]});
      temp_f.x *= scale;
      temp_f.y *= scale;
      T2 temp = Converter::convert(temp_f);
      data[i] = temp.x;
      data[i + 1] = temp.y;
    }
    return *this;
  }
  __device__ float sum_squares() const {
    float result = 0.0f;
#pragma unroll
    for (int i = 0; i < width; i += 2) {
      float2 z = Converter::convert(T2{data[i], data[i + 1]});
      result += z.x * z.x + z.y * z.y;
    }
    return result;
  }
};

// ---- vLLM csrc/layernorm_kernels.cu: fused_add_rms_norm_kernel<BFloat16, 8> ----------------------
template <typename scalar_t, int width>
__device__ void fused_add_rms_norm_body(
    scalar_t* __restrict__ input,  // [..., hidden_size]
    const int64_t input_stride,
    scalar_t* __restrict__ residual,      // [..., hidden_size]
    const scalar_t* __restrict__ weight,  // [hidden_size]
    const float epsilon, const int num_tokens, const int hidden_size) {
  const int vec_hidden_size = hidden_size / width;
  const int64_t vec_input_stride = input_stride / width;
  __shared__ float s_variance;
  float variance = 0.0f;
  auto* __restrict__ input_v = reinterpret_cast<_f16Vec<width>*>(input);
  auto* __restrict__ residual_v = reinterpret_cast<_f16Vec<width>*>(residual);
  auto* __restrict__ weight_v = reinterpret_cast<const _f16Vec<width>*>(weight);

  for (int idx = threadIdx.x; idx < vec_hidden_size; idx += blockDim.x) {
    int id = blockIdx.x * vec_hidden_size + idx;
    int64_t strided_id = blockIdx.x * vec_input_stride + idx;
    _f16Vec<width> temp = input_v[strided_id];
    temp += residual_v[id];
    variance += temp.sum_squares();
    residual_v[id] = temp;
  }

  using BlockReduce = cub::BlockReduce<float, 1024>;
  __shared__ typename BlockReduce::TempStorage reduceStore;
  variance = BlockReduce(reduceStore).Reduce(variance, AddOp{}, blockDim.x);

  if (threadIdx.x == 0) {
    s_variance = rsqrtf(variance / hidden_size + epsilon);
  }
  __syncthreads();

  for (int idx = threadIdx.x; idx < vec_hidden_size; idx += blockDim.x) {
    int id = blockIdx.x * vec_hidden_size + idx;
    int64_t strided_id = blockIdx.x * vec_input_stride + idx;
    _f16Vec<width> temp = residual_v[id];
    temp *= s_variance;
    temp *= weight_v[idx];
    input_v[strided_id] = temp;
  }
}

// The Rust kernel passes vec_hidden_size (the rows' width in packs of 8); hidden_size is 8 times it.
extern "C" __global__ void fused_add_rms_norm_kernel(__nv_bfloat16* __restrict__ input, usize n_input, const int64_t input_stride,
                                                     __nv_bfloat16* __restrict__ residual, usize n_residual,
                                                     const __nv_bfloat16* __restrict__ weight, usize n_weight,
                                                     const float epsilon, const int num_tokens, const int vec_hidden_size) {
  fused_add_rms_norm_body<__nv_bfloat16, 8>(input, input_stride, residual, weight, epsilon, num_tokens, vec_hidden_size * 8);
}

// ---- vLLM csrc/pos_encoding_kernels.cu: rotary_embedding_kernel<BFloat16, BFloat16, true> -------
#define VLLM_LDG(arg) __ldg(arg)
template <typename scalar_t, typename cache_t, bool IS_NEOX>
inline __device__ void apply_token_rotary_embedding(
    scalar_t* __restrict__ arr, const cache_t* __restrict__ cos_ptr,
    const cache_t* __restrict__ sin_ptr, int rot_offset, int embed_dim,
    const bool inverse) {
  int x_index, y_index;
  float cos_f, sin_f;
  if (IS_NEOX) {
    x_index = rot_offset;
    y_index = embed_dim + rot_offset;
    cos_f = static_cast<float>(VLLM_LDG(cos_ptr + x_index));
    sin_f = static_cast<float>(VLLM_LDG(sin_ptr + x_index));
  } else {
    x_index = 2 * rot_offset;
    y_index = 2 * rot_offset + 1;
    cos_f = static_cast<float>(VLLM_LDG(cos_ptr + x_index / 2));
    sin_f = static_cast<float>(VLLM_LDG(sin_ptr + x_index / 2));
  }
  if (inverse) {
    sin_f = -sin_f;
  }
  const float x_f = static_cast<float>(arr[x_index]);
  const float y_f = static_cast<float>(arr[y_index]);
  arr[x_index] = static_cast<scalar_t>(x_f * cos_f - y_f * sin_f);
  arr[y_index] = static_cast<scalar_t>(y_f * cos_f + x_f * sin_f);
}

template <typename scalar_t, typename cache_t, bool IS_NEOX>
inline __device__ void apply_rotary_embedding(
    scalar_t* __restrict__ query, scalar_t* __restrict__ key,
    const cache_t* cache_ptr, const int head_size, const int num_heads,
    const int num_kv_heads, const int rot_dim, const int token_idx,
    const int64_t query_stride, const int64_t key_stride,
    const int64_t head_stride, const int64_t rope_dim_offset,
    const bool inverse) {
  const int embed_dim = rot_dim / 2;
  const cache_t* cos_ptr = cache_ptr;
  const cache_t* sin_ptr = cache_ptr + embed_dim;

  const int nq = num_heads * embed_dim;
  for (int i = threadIdx.x; i < nq; i += blockDim.x) {
    const int head_idx = i / embed_dim;
    const int64_t token_head =
        token_idx * query_stride + head_idx * head_stride + rope_dim_offset;
    const int rot_offset = i % embed_dim;
    apply_token_rotary_embedding<scalar_t, cache_t, IS_NEOX>(
        query + token_head, cos_ptr, sin_ptr, rot_offset, embed_dim, inverse);
  }

  if (key != nullptr) {
    const int nk = num_kv_heads * embed_dim;
    for (int i = threadIdx.x; i < nk; i += blockDim.x) {
      const int head_idx = i / embed_dim;
      const int64_t token_head =
          token_idx * key_stride + head_idx * head_stride + rope_dim_offset;
      const int rot_offset = i % embed_dim;
      apply_token_rotary_embedding<scalar_t, cache_t, IS_NEOX>(
          key + token_head, cos_ptr, sin_ptr, rot_offset, embed_dim, inverse);
    }
  }
}

extern "C" __global__ void rotary_embedding_kernel(
    const int64_t* __restrict__ positions, usize n_positions,
    __nv_bfloat16* __restrict__ query, usize n_query,
    __nv_bfloat16* __restrict__ key, usize n_key,
    const __nv_bfloat16* __restrict__ cos_sin_cache, usize n_cache,
    const int rot_dim, const int64_t query_stride, const int64_t key_stride,
    const int64_t head_stride, const int num_heads, const int num_kv_heads,
    const int head_size, const int64_t rope_dim_offset, const bool inverse) {
  const int token_idx = blockIdx.x;
  int64_t pos = positions[token_idx];
  const __nv_bfloat16* cache_ptr = cos_sin_cache + pos * rot_dim;

  apply_rotary_embedding<__nv_bfloat16, __nv_bfloat16, true>(
      query, key, cache_ptr, head_size, num_heads, num_kv_heads, rot_dim,
      token_idx, query_stride, key_stride, head_stride, rope_dim_offset,
      inverse);
}

// ---- vLLM csrc/moe/moe_align_sum_kernels.cu: count_and_sort_expert_tokens_kernel<int32_t> --------
extern "C" __global__ void count_and_sort_expert_tokens_kernel(const int32_t* __restrict__ topk_ids, usize n_topk,
    int32_t* __restrict__ sorted_token_ids, usize n_sorted, int32_t* __restrict__ cumsum_buffer, usize n_cumsum, size_t numel) {
  const size_t tid = blockIdx.x * blockDim.x + threadIdx.x;
  const size_t stride = blockDim.x * gridDim.x;

  for (size_t i = tid; i < numel; i += stride) {
    int32_t expert_id = topk_ids[i];
    int32_t rank_post_pad = atomicAdd(&cumsum_buffer[expert_id], 1);
    sorted_token_ids[rank_post_pad] = i;
  }
}

// ---- CUDA samples 6_Performance/threadFenceReduction: reduceSinglePass<256, false> ----------------
// The sample's retirementCount is a __device__ global; here it is the `counter` parameter (the
// Rust port's launcher passes it), and the total goes to total[0] (the sample writes
// g_odata[0]). Blocks of 256, min(64, ceil(n / 512)) blocks, as the sample's
// getNumBlocksAndThreads.
template <unsigned int blockSize>
__device__ void reduceBlock(volatile float* sdata, float mySum, const unsigned int tid) {
  sdata[tid] = mySum;
  __syncthreads();
  for (unsigned int s = blockSize / 2; s >= 32; s >>= 1) {
    if (tid < s) sdata[tid] = mySum = mySum + sdata[tid + s];
    __syncthreads();
  }
  if (tid < 32) {
    for (int offset = 16; offset > 0; offset >>= 1) mySum += __shfl_down_sync(0xffffffff, mySum, offset);
    if (tid == 0) sdata[0] = mySum;
  }
}

template <unsigned int blockSize, bool nIsPow2>
__device__ void reduceBlocks(const float* g_idata, float* g_odata, unsigned int n, float* sdata) {
  unsigned int tid = threadIdx.x;
  unsigned int i = blockIdx.x * (blockSize * 2) + threadIdx.x;
  unsigned int gridSize = blockSize * 2 * gridDim.x;
  float mySum = 0;
  while (i < n) {
    mySum += g_idata[i];
    if (nIsPow2 || i + blockSize < n) mySum += g_idata[i + blockSize];
    i += gridSize;
  }
  reduceBlock<blockSize>(sdata, mySum, tid);
  if (tid == 0) g_odata[blockIdx.x] = sdata[0];
}

extern "C" __global__ void reduce_single_pass(const float* g_idata, usize n_idata, float* g_odata, usize n_odata,
                                              unsigned int* retirementCount, usize n_counter, float* total, usize n_total) {
  constexpr unsigned int blockSize = 256;
  __shared__ float smem[blockSize];
  __shared__ bool amLast;
  const unsigned int n = (unsigned int)n_idata;
  reduceBlocks<blockSize, false>(g_idata, g_odata, n, smem);
  if (gridDim.x > 1) {
    const unsigned int tid = threadIdx.x;
    if (tid == 0) {
      __threadfence();
      unsigned int ticket = atomicInc(retirementCount, gridDim.x);
      amLast = (ticket == gridDim.x - 1);
    }
    __syncthreads();
    if (amLast) {
      int i = tid;
      float mySum = 0;
      while (i < gridDim.x) {
        mySum += g_odata[i];
        i += blockSize;
      }
      __syncthreads();  // smem was used by this block's first reduction
      reduceBlock<blockSize>(smem, mySum, tid);
      if (tid == 0) {
        total[0] = smem[0];
        *retirementCount = 0;
      }
    }
  } else if (threadIdx.x == 0) {
    total[0] = g_odata[0];
  }
}
#endif // PORTS2_VLLM
