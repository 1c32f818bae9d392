// CUDA C++ twins of issue 30's fourth held-out port (bench/ports4): each kernel as its public
// source writes it (same body, same launch configuration on the host side), behind an
// `extern "C"` entry whose parameters match the Rust port's launcher (a `size_t` length after
// every pointer, which the body ignores).
//
// Build (as each project builds):
//   nvcc -cubin -O3 -arch=sm_90 -DPORTS4_LLMC --use_fast_math ports4.cu -o ports4_llmc.cubin
//   nvcc -cubin -O3 -arch=sm_90 -DPORTS4_VLLM ports4.cu -o ports4_vllm.cubin
//
// Sources: karpathy/llm.c @ f1e2ace651495b74ae22d45d1723443fd00ecd3a (MIT): llmc/gelu.cuh,
// llmc/attention.cuh, llmc/cuda_utils.cuh, dev/cuda/encoder_backward.cu,
// dev/cuda/fused_residual_forward.cu, dev/cuda/common.h. vllm-project/vllm (Apache-2.0):
// csrc/activation_kernels.cu @ 00ccbd42dc1f40412cc711c5737cc4be0e7a8145,
// csrc/layernorm_kernels.cu @ 0112cf233e0c60674c2844a09695ddeb2b901dc0,
// csrc/quantization/fp8/common.cu @ 006ccf0ea309e73ee3b7dc3bbb7017fa2bf7b721. vLLM's
// `scalar_t` for bf16 is c10::BFloat16; without torch's headers the twin uses
// `__nv_bfloat16` (the same values: both round to nearest even; nvcc emits HMUL2.BF16 for
// `__nv_bfloat16`'s `operator*`, where c10's is an FMUL and a conversion).
#include <cuda_bf16.h>
#include <stdint.h>
#include <stddef.h>

#ifdef PORTS4_LLMC
// ---------------------------------------------------------------- llm.c helpers (as written)
#define WARP_SIZE 32U
typedef __nv_bfloat16 floatX;

#if __has_include("llmc_cuda_utils.cuh")
#include "llmc_cuda_utils.cuh"  // staged beside this file (scripts/gpu-run)
#else
#include "../../cuda/llmc_cuda_utils.cuh"  // llm.c's Packed128, load128/store128*, warp/block reductions
#endif
typedef Packed128<floatX> x128;

// ---------------------------------------------------------------- llmc/gelu.cuh
#define GELU_SCALING_FACTOR sqrtf(2.0f / M_PI)
__device__ __forceinline__ void gelu_forward_kernel2_body(floatX* out, const floatX* inp) {
    int idx = (blockIdx.x * blockDim.x + threadIdx.x) * x128::size;
    x128 packed_out;
    x128 packed_inp = load128cs(inp + idx);
    for(int k = 0; k < packed_inp.size; ++k) {
        float xi = (float)packed_inp[k];
        float cube = 0.044715f * xi * xi * xi;
        packed_out[k] = (floatX)(0.5f * xi * (1.0f + tanhf(GELU_SCALING_FACTOR * (xi + cube))));
    }
    store128(out + idx, packed_out);
}
extern "C" __global__ void gelu_forward_kernel2(floatX* out, size_t, const floatX* inp, size_t) {
    gelu_forward_kernel2_body(out, inp);
}

// ---------------------------------------------------------------- llmc/attention.cuh
__device__ __forceinline__ void softmax_autoregressive_backward_inplace_body(floatX* datt, const floatX* att,
                                                               int B, int T, int C, float scale) {
    constexpr const int BlockSize = 256;
    constexpr int T_per_block = 4;
    int t0 = T - 1 - T_per_block*blockIdx.x;
    int idx = blockIdx.y;
    att += idx * T * T;
    datt += idx * T * T;
    for(int to = 0; to < T_per_block; ++to) {
        int t = t0 - to;
        if(t < 0) return;
        const floatX* att_bth = att + t * T;
        const floatX* datt_bth = datt + t * T;
        floatX* dpreatt_bth = datt + t * T;
        float local_sum = 0;
        for (int t2 = threadIdx.x; t2 <= t; t2 += BlockSize) {
            local_sum += (float)att_bth[t2] * (float)datt_bth[t2];
        }
        local_sum = blockReduce<warpReduceSum>(local_sum);
        for (int t3 = threadIdx.x; t3 < T; t3 += BlockSize) {
            if(t3 <= t) {
                float acc = (float) __ldcs(att_bth + t3) * ((float) __ldcs(datt_bth + t3) - local_sum);
                __stcs(dpreatt_bth + t3, (floatX) (scale * acc));
            } else {
                __stcs(dpreatt_bth + t3, (floatX)0.f);
            }
        }
    }
}
extern "C" __global__ void softmax_autoregressive_backward_inplace_kernel_twin(floatX* datt, size_t, const floatX* att, size_t,
                                                                          int B, int T, int C, float scale) {
    softmax_autoregressive_backward_inplace_body(datt, att, B, T, C, scale);
}

__device__ __forceinline__ void unpermute_body(floatX* inp, floatX *out, int B, int N, int NH, int d) {
    int idx = (blockIdx.x * blockDim.x + threadIdx.x);
    if (idx >= B * NH * N * d) { return; }
    int b = idx / (NH * N * d);
    int rest = idx % (NH * N * d);
    int nh_ = rest / (N * d);
    rest = rest % (N * d);
    int n = rest / d;
    int d_ = rest % d;
    int other_idx = (b * NH * N * d) + (n * NH * d) + (nh_ * d) + d_;
    out[other_idx] = __ldcs(&inp[idx]);
}
extern "C" __global__ void unpermute_kernel(floatX* inp, size_t, floatX* out, size_t, int B, int N, int NH, int d) {
    unpermute_body(inp, out, B, N, NH, d);
}

// ---------------------------------------------------------------- dev/cuda/encoder_backward.cu
__device__ __forceinline__ void encoder_backward_kernel1_body(float* dwte, float* dwpe,
                                        const float* dout, const int* inp,
                                        int B, int T, int C) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int N = B * T * C;
    if (idx < N) {
        int bt = idx / C;
        int b = bt / T;
        int t = bt % T;
        int c = idx % C;
        int ix = inp[b * T + t];
        const float* dout_btc = dout + b * T * C + t * C + c;
        float* dwte_ix = dwte + ix * C + c;
        float* dwpe_tc = dwpe + t * C + c;
        atomicAdd(dwte_ix, *dout_btc);
        atomicAdd(dwpe_tc, *dout_btc);
    }
}
extern "C" __global__ void encoder_backward_kernel1(float* dwte, size_t, float* dwpe, size_t, const float* dout, size_t,
                                                    const int* inp, size_t, int B, int T, int C) {
    encoder_backward_kernel1_body(dwte, dwpe, dout, inp, B, T, C);
}

// ---------------------------------------------------------------- dev/cuda/fused_residual_forward.cu
__device__ __forceinline__ void fused_residual_forward3_body(floatX* residual, floatX* normed, floatX* mean, floatX* rstd,
                                        const floatX* inp1, const floatX* inp2,
                                        const floatX* weight, const floatX* bias,
                                        int N, int C) {
    constexpr const int WarpSize = 32;
    int idx = blockIdx.x * blockDim.y + threadIdx.y;
    if(idx > N) return;
    residual += C * idx;
    normed += C * idx;
    inp1 += C * idx;
    inp2 += C * idx;
    float eps = 1e-5f;
    float m = 0.0f;
    for(int c = threadIdx.x; c < C; c += WarpSize) {
        float out = (float)inp1[c] + (float)inp2[c];
        m += out;
        residual[c] = out;
    }
    m = warpReduceSum(m);
    m = m / C;
    float v = 0.0f;
    for(int c = threadIdx.x; c < C; c += WarpSize) {
        float xshift = (float)residual[c] - m;
        v += xshift * xshift;
    }
    v = warpReduceSum(v);
    v = v / C;
    float s = 1.0f / sqrtf(v + eps);
    for(int c = threadIdx.x; c < C; c += WarpSize) {
        float n = (s * ((float)residual[c] - m));
        float o = n * (float)weight[c] + (float)bias[c];
        normed[c] = o;
    }
    if(threadIdx.x == 0) {
        mean[idx] = m;
        rstd[idx] = s;
    }
}
extern "C" __global__ void fused_residual_forward3_twin(floatX* residual, size_t, floatX* normed, size_t, floatX* mean, size_t,
                                                   floatX* rstd, size_t, const floatX* inp1, size_t, const floatX* inp2, size_t,
                                                   const floatX* weight, size_t, const floatX* bias, size_t, int N, int C) {
    fused_residual_forward3_body(residual, normed, mean, rstd, inp1, inp2, weight, bias, N, C);
}
#endif // PORTS4_LLMC

#ifdef PORTS4_VLLM
#include <cub/cub.cuh>
#include <cuda/std/functional>
using AddOp = cuda::std::plus<>;
#define VLLM_LDG(arg) __ldg(arg)
typedef __nv_bfloat16 scalar_bf16;

namespace vllm {
// ---------------------------------------------------------------- csrc/activation_kernels.cu
template <typename scalar_t, scalar_t (*ACT_FN)(const scalar_t&), bool act_first>
__device__ __forceinline__ scalar_t compute(const scalar_t& x, const scalar_t& y) {
  return act_first ? ACT_FN(x) * y : x * ACT_FN(y);
}
template <typename scalar_t, scalar_t (*ACT_FN)(const scalar_t&), bool act_first>
__device__ void _act_and_mul_kernel(scalar_t* __restrict__ out, const scalar_t* __restrict__ input,
                                    const int d, const int64_t token_idx) {
  for (int64_t idx = threadIdx.x; idx < d; idx += blockDim.x) {
    const scalar_t x = VLLM_LDG(&input[token_idx * 2 * d + idx]);
    const scalar_t y = VLLM_LDG(&input[token_idx * 2 * d + d + idx]);
    out[token_idx * d + idx] = compute<scalar_t, ACT_FN, act_first>(x, y);
  }
}
template <typename scalar_t, scalar_t (*ACT_FN)(const scalar_t&), bool act_first>
__device__ __forceinline__ void act_and_mul_kernel(scalar_t* __restrict__ out, const scalar_t* __restrict__ input, const int d) {
  const int64_t token_idx = blockIdx.x;
  _act_and_mul_kernel<scalar_t, ACT_FN, act_first>(out, input, d, token_idx);
}
template <typename T>
__device__ __forceinline__ T silu_kernel(const T& x) {
  return (T)(((float)x) / (1.0f + expf((float)-x)));
}

// ---------------------------------------------------------------- csrc/layernorm_kernels.cu
template <typename scalar_t>
__device__ __forceinline__ void rms_norm_kernel(scalar_t* __restrict__ out, const scalar_t* __restrict__ input,
    const int64_t input_stride, const scalar_t* __restrict__ weight,
    const float epsilon, const int num_tokens, const int hidden_size) {
  __shared__ float s_variance;
  float variance = 0.0f;
  for (int idx = threadIdx.x; idx < hidden_size; idx += blockDim.x) {
    const float x = (float)input[blockIdx.x * input_stride + idx];
    variance += x * x;
  }
#ifndef RMS_WARP0_REDUCE
  using BlockReduce = cub::BlockReduce<float, 1024>;
  __shared__ typename BlockReduce::TempStorage reduceStore;
  variance = BlockReduce(reduceStore).Reduce(variance, AddOp{}, blockDim.x);
#else
  // Session 16's diagnostic (not vLLM's): ferrocuda's `RuntimeBlockReduce` second level in
  // CUDA C++ (built into its own cubin with -DRMS_WARP0_REDUCE): each warp's butterfly sum to a
  // slot, a barrier, then warp 0 folds the slots by shuffles (cub: thread 0 adds them in turn).
  __shared__ float slots[32];
  for (int d = 16; d > 0; d /= 2) variance += __shfl_xor_sync(0xffffffffu, variance, d);
  if (threadIdx.x % 32 == 0) slots[threadIdx.x / 32] = variance;
  __syncthreads();
  if (threadIdx.x < 32) {
    const int warps = (blockDim.x + 31) / 32;
    float p = threadIdx.x < warps ? slots[threadIdx.x] : 0.0f;
    for (int d = 16; d > 0; d /= 2) p += __shfl_down_sync(0xffffffffu, p, d);
    variance = p;
  }
#endif
  if (threadIdx.x == 0) {
    s_variance = rsqrtf(variance / hidden_size + epsilon);
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < hidden_size; idx += blockDim.x) {
    float x = (float)input[blockIdx.x * input_stride + idx];
    out[blockIdx.x * hidden_size + idx] = ((scalar_t)(x * s_variance)) * weight[idx];
  }
}

// ---------------------------------------------------------------- csrc/quantization/fp8/common.cu
__device__ __forceinline__ float atomicMaxFloat(float* addr, float value) {
  float old;
  old = (value >= 0)
            ? __int_as_float(atomicMax((int*)addr, __float_as_int(value)))
            : __uint_as_float(atomicMin((unsigned int*)addr, __float_as_uint(value)));
  return old;
}
#define FP8_E4M3_MAX_F 448.0f  // std::numeric_limits<c10::Float8_e4m3fn>::max()
template <typename scalar_t>
__device__ __forceinline__ void segmented_max_reduction(float* __restrict__ scale, const scalar_t* __restrict__ input,
                                        int64_t num_elems) {
  __shared__ float cache[1024];
  int i = blockDim.x * blockIdx.x + threadIdx.x;
  scalar_t tmp = 0.0;
  while (i < num_elems) {
    float x = static_cast<float>(input[i]);
    tmp = max(tmp, fabs(x));
    i += blockDim.x * gridDim.x;
  }
  cache[threadIdx.x] = tmp;
  __syncthreads();
  int ib = blockDim.x / 2;
  while (ib != 0) {
    if (threadIdx.x < ib && cache[threadIdx.x + ib] > cache[threadIdx.x]) {
      cache[threadIdx.x] = cache[threadIdx.x + ib];
    }
    __syncthreads();
    ib /= 2;
  }
  if (threadIdx.x == 0) {
    atomicMaxFloat(scale, cache[0] / FP8_E4M3_MAX_F);
  }
}
}  // namespace vllm

extern "C" __global__ void silu_and_mul_kernel(scalar_bf16* __restrict__ out, size_t, const scalar_bf16* __restrict__ input, size_t, const int d) {
  vllm::act_and_mul_kernel<scalar_bf16, vllm::silu_kernel<scalar_bf16>, true>(out, input, d);
}
extern "C" __global__ void rms_norm_kernel(scalar_bf16* __restrict__ out, size_t, const scalar_bf16* __restrict__ input, size_t,
    const int64_t input_stride, const scalar_bf16* __restrict__ weight, size_t,
    const float epsilon, const int num_tokens, const int hidden_size) {
  vllm::rms_norm_kernel<scalar_bf16>(out, input, input_stride, weight, epsilon, num_tokens, hidden_size);
}
extern "C" __global__ void segmented_max_reduction(float* __restrict__ scale, size_t, const float* __restrict__ input, size_t, int64_t num_elems) {
  vllm::segmented_max_reduction<float>(scale, input, num_elems);
}
#endif // PORTS4_VLLM
