// The CUDA C++ twins of bench/ports7 (issue 30's seventh held-out port): the public sources as
// written, each with its URL, path, commit and launch shape above it. Substitutions are
// minimal and each is commented: kernels are `extern "C"` where the source's are plain C++
// functions (so the stubs in twins/ name them without mangling), templates are explicitly
// instantiated at the types the bench runs, and the few helpers the kernels include from
// elsewhere in the same repositories are copied here as written.
//
// Built on the GPU machine by bench/ports7/scripts/gpu-job.sh, as each project builds them:
//   llm.c: nvcc -cubin -arch=sm_90 -O3 --use_fast_math -DPORTS7_LLMC
//   vLLM:  nvcc -cubin -arch=sm_90 -O3 -std=c++17 -DPORTS7_VLLM (no fast math)

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <assert.h>
#include <stdint.h>

#ifdef PORTS7_LLMC
// ---------------------------------------------------------------------------------------------
// karpathy/llm.c, commit f1e2ace651495b74ae22d45d1723443fd00ecd3a (2025-05-10).
// llmc/cuda_common.h: floatX is __nv_bfloat16 (the default, ENABLE_BF16); WARP_SIZE 32U.
typedef __nv_bfloat16 floatX;
#define WARP_SIZE 32U

// llmc/cuda_utils.cuh, as written (the parts the kernels below use).
template<class ElementType>
struct alignas(16) Packed128 {
    Packed128() = default;
    __device__ explicit Packed128(int4 bits) {
        static_assert(sizeof(bits) == sizeof(payload), "Size mismatch.");
        memcpy(&payload, &bits, sizeof(bits));
    }
    __device__ ElementType& operator[](int index) {
        return payload[index];
    }
    __device__ const ElementType& operator[](int index) const {
        return payload[index];
    }
    __device__ int4 get_bits() const {
        int4 bits;
        static_assert(sizeof(bits) == sizeof(payload), "Size mismatch.");
        memcpy(&bits, &payload, sizeof(bits));
        return bits;
    }
    static constexpr const size_t size = sizeof(int4) / sizeof(ElementType);
    ElementType payload[size];
};
template<class ElementType>
__device__ Packed128<ElementType> load128(const ElementType* address) {
    return Packed128<ElementType>{*reinterpret_cast<const int4*>(address)};
}
template<class ElementType>
__device__ Packed128<ElementType> load128cs(const ElementType* address) {
    return Packed128<ElementType>{__ldcs(reinterpret_cast<const int4*>(address))};
}
template<class ElementType>
__device__ void store128(ElementType* target, Packed128<ElementType> value) {
    *reinterpret_cast<int4*>(target) = value.get_bits();
}
template<class ElementType>
__device__ void store128cs(ElementType* target, Packed128<ElementType> value) {
    __stcs(reinterpret_cast<int4*>(target), value.get_bits());
}
typedef Packed128<float> f128;
typedef Packed128<floatX> x128;
__device__ inline float warpReduceSum(float val) {
    for (int offset = 16; offset > 0; offset /= 2) {
        val += __shfl_xor_sync(0xFFFFFFFF, val, offset);
    }
    return val;
}

extern "C" {  // substitution: C linkage, for the stubs' names

// https://github.com/karpathy/llm.c/blob/f1e2ace651495b74ae22d45d1723443fd00ecd3a/llmc/layernorm.cuh#L221
// residual_forward: block 256, grid N / (256 * 8).
__global__ void residual_forward_kernel(floatX* out, const floatX* inp1, const floatX* inp2) {
    int idx = (blockIdx.x * blockDim.x + threadIdx.x) * x128::size;

    x128 packed_out;
    x128 packed_inp1 = load128cs(inp1 + idx);
    x128 packed_inp2 = load128cs(inp2 + idx);
    for (int k = 0; k < packed_inp1.size; k++) {
        packed_out[k] = (floatX)((float)packed_inp1[k] + (float)packed_inp2[k]);
    }
    store128(out + idx, packed_out);
}

// https://github.com/karpathy/llm.c/blob/f1e2ace651495b74ae22d45d1723443fd00ecd3a/llmc/attention.cuh#L71
// attention_backward: block 256, grid CEIL_DIV(B * T * C, 256).
__global__ void unpermute_kernel_backward(floatX* dinp, const floatX *dout, int B, int N, int NH, int d) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * NH * N * d) { return; }

    int b = idx / (NH * N * d);
    int rest = idx % (NH * N * d);
    int nh_ = rest / (N * d);
    rest = rest % (N * d);
    int n = rest / d;
    int d_ = rest % d;
    int other_idx = (b * NH * N * d) + (n * NH * d) + (nh_ * d) + d_;
    dinp[idx] = (floatX)dout[other_idx];
}

// https://github.com/karpathy/llm.c/blob/f1e2ace651495b74ae22d45d1723443fd00ecd3a/llmc/attention.cuh#L35
// attention_backward: block 256, grid CEIL_DIV(B * NH * T * HS, 256).
__global__ void permute_kernel_backward(floatX* dinp,
                                        const floatX* dq, const floatX* dk, const floatX* dv,
                                        int B, int N, int NH, int d) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * NH * N * d) { return; }

    int b = idx / (NH * N * d);
    int rest = idx % (NH * N * d);
    int nh_ = rest / (N * d);
    rest = rest % (N * d);
    int n = rest / d;
    int d_ = rest % d;

    int inp_idx = (b * N * 3 * NH * d) + (n * 3 * NH * d) + (0 * NH * d) + (nh_ * d) + d_;
    dinp[inp_idx] = dq[idx];
    dinp[inp_idx + NH * d] = dk[idx];
    dinp[inp_idx + 2 * (NH * d)] = dv[idx];
}

// https://github.com/karpathy/llm.c/blob/f1e2ace651495b74ae22d45d1723443fd00ecd3a/llmc/matmul.cuh#L83
// matmul_backward_bias: block 256, grid CEIL_DIV(OC, 256 * f128::size).
__global__ void reduce_add_sum_kernel(floatX* dst, const float* src, size_t n, size_t m) {
    const size_t idx = (blockIdx.x * blockDim.x + threadIdx.x) * f128::size;
    assert(n % x128::size == 0);
    if (idx < n) {
        f128 acc;
        for(int k = 0; k < f128::size; ++k) {
            acc[k] = 0.f;
        }

        for(int l = 0; l < m; ++l) {
            f128 s = load128(src + idx + n * l);
            for(int k = 0; k < f128::size; ++k) {
                acc[k] += s[k];
            }
        }
        for(int k = 0; k < f128::size; ++k) {
            dst[idx + k] = (floatX) ((float)dst[idx + k] + acc[k]);
        }
    }
}

// https://github.com/karpathy/llm.c/blob/f1e2ace651495b74ae22d45d1723443fd00ecd3a/llmc/layernorm.cuh#L142
// fused_residual_forward5: block (32, 8), grid CEIL_DIV(N, 8), (2 + 8) * C * 2 shared bytes.
__global__ void fused_residual_forward_kernel5(floatX* residual, floatX* normed, float* mean, float* rstd,
                                               const floatX* inp1, const floatX* inp2,
                                               const floatX* weight, const floatX* bias,
                                               int N, int C) {
    assert(blockDim.x == WARP_SIZE);

    // load weights and biases into shared memory
    // do this before we allow any threads to exit!
    extern __shared__ char* params[];
    // load128/store128 sometimes generated multiple instructions when the types here were floatX*, so
    // let's keep everything as x128
    x128* s_weight = reinterpret_cast<x128*>(params);
    x128* s_bias = reinterpret_cast<x128*>(params) + (C / x128::size);
    x128* s_res = reinterpret_cast<x128*>(params) + ((2 + threadIdx.y) * C / x128::size);

    int sidx = (threadIdx.x + WARP_SIZE * threadIdx.y) * x128::size;
    for(int i = sidx; i < C; i += blockDim.y * WARP_SIZE * x128::size) {
        s_weight[i/x128::size] = load128(weight + i);
        s_bias[i/x128::size] = load128(bias + i);
    }
    __syncthreads();

    int idx = blockIdx.x * blockDim.y + threadIdx.y;
    if(idx > N) return;

    // adjust pointers to current token
    residual += C * idx;
    normed += C * idx;
    inp1 += C * idx;
    inp2 += C * idx;

    const float eps = 1e-5f;
    float sum = 0.0f;
    for(int c = threadIdx.x * x128::size; c < C; c += WARP_SIZE * x128::size) {
        const x128 in1 = load128cs(inp1 + c);
        const x128 in2 = load128cs(inp2 + c);
        x128 out;
        for(int k = 0; k < x128::size; ++k) {
            out[k] = (float)in1[k] + (float)in2[k];
            sum += (float)out[k];
        }
        store128cs(residual + c, out);
        s_res[c / x128::size] = out;
    }

    sum = warpReduceSum(sum);
    float m = sum / C;
    float v = 0.f;

    for(int c = threadIdx.x * x128::size; c < C; c += WARP_SIZE * x128::size) {
        const x128 res = s_res[c / x128::size];
        for(int k = 0; k < x128::size; ++k) {
            v += ((float)res[k] - m) * ((float)res[k] - m);
        }
    }

    v = warpReduceSum(v) / C;
    float s = rsqrtf(v + eps);

    for(int c = threadIdx.x * x128::size; c < C; c += WARP_SIZE * x128::size) {
        const x128 res = s_res[c / x128::size];
        const x128 w = s_weight[c / x128::size];
        const x128 b = s_bias[c / x128::size];
        x128 out;
        for(int k = 0; k < x128::size; ++k) {
            float n = s * ((float)res[k] - m); // normalized output
            float o = n * (float)w[k] + (float)b[k]; // scale and shift it
            out[k] = o;
        }

        store128cs(normed + c, out);
    }
    // cache the mean and rstd for the backward pass later
    if(threadIdx.x == 0) {
        mean[idx] = m;
        rstd[idx] = s;
    }
}

}  // extern "C"
#endif  // PORTS7_LLMC

#ifdef PORTS7_VLLM
// ---------------------------------------------------------------------------------------------
// vllm-project/vllm. Substitutions: torch/ATen includes dropped (the kernels use none of it);
// VLLM_LDG is cuda_compat.h's `__ldg` on CUDA; vec_n_t from csrc/quantization/vectorization.cuh
// (commit 89b1388d) as written; the host launchers are the bench's.
#include <cub/cub.cuh>
#include <cmath>
#include <limits>
#define VLLM_LDG(arg) __ldg(arg)

namespace vllm {
template <typename scalar_t, size_t vec_size>
struct __align__(8) vec_n_t {
  scalar_t val[vec_size];
};
}  // namespace vllm

// https://github.com/vllm-project/vllm/blob/00ccbd42dc1f40412cc711c5737cc4be0e7a8145/csrc/activation_kernels.cu
// fatrelu_and_mul: grid num_tokens, block min(d, 1024).
namespace vllm {

template <typename T>
__device__ __forceinline__ T fatrelu_kernel(const T& x, const float threshold) {
  const float f = (float)x;
  return (T)(f > threshold ? f : 0.0f);
}

template <typename scalar_t, scalar_t (*ACT_FN)(const scalar_t&, const float)>
__global__ void act_and_mul_kernel_with_param(
    scalar_t* __restrict__ out, const scalar_t* __restrict__ input, const int d,
    const float param) {
  const int64_t token_idx = blockIdx.x;
  for (int64_t idx = threadIdx.x; idx < d; idx += blockDim.x) {
    const scalar_t x = VLLM_LDG(&input[token_idx * 2 * d + idx]);
    const scalar_t y = VLLM_LDG(&input[token_idx * 2 * d + d + idx]);
    out[token_idx * d + idx] = ACT_FN(x, param) * y;
  }
}

// substitution: explicit instantiation at the bench's type
template __global__ void act_and_mul_kernel_with_param<__nv_bfloat16, fatrelu_kernel<__nv_bfloat16>>(
    __nv_bfloat16* __restrict__, const __nv_bfloat16* __restrict__, const int, const float);

}  // namespace vllm

// https://github.com/vllm-project/vllm/blob/00b0571eba087855604d6122143a749e25207d9b/csrc/quantization/compressed_tensors/int8_quant_kernels.cu
// static_scaled_int8_quant and dynamic_scaled_int8_quant: grid num_tokens, block min(hidden, 1024).
static inline __device__ int8_t float_to_int8_rn(float x) {
  // CUDA path
  uint32_t dst;
  asm volatile("cvt.rni.sat.s8.f32 %0, %1;" : "=r"(dst) : "f"(x));
  return reinterpret_cast<const int8_t&>(dst);
}

namespace vllm {

template <typename scalar_t, typename scale_type>
__global__ void static_scaled_int8_quant_kernel(
    scalar_t const* __restrict__ input, int8_t* __restrict__ out,
    scale_type const* scale_ptr, const int hidden_size) {
  int const VEC_SIZE = 16;
  using in_vec_t = vec_n_t<scalar_t, VEC_SIZE>;
  using out_vec_t = vec_n_t<int8_t, VEC_SIZE>;

  int const tid = threadIdx.x;
  int64_t const token_idx = blockIdx.x;
  scale_type const scale_val = *scale_ptr;

  // Must be performed using 64-bit math to avoid integer overflow.
  out += token_idx * hidden_size;
  input += token_idx * hidden_size;

  auto const* vectorized_in = reinterpret_cast<in_vec_t const*>(input);
  auto* vectorized_out = reinterpret_cast<out_vec_t*>(out);
  int64_t const num_vec_elements = hidden_size / VEC_SIZE;

  // vectorized quantization
  for (int i = tid; i < num_vec_elements; i += blockDim.x) {
    in_vec_t in_vec = vectorized_in[i];
    out_vec_t out_vec;
#pragma unroll
    for (int j = 0; j < VEC_SIZE; ++j) {
      out_vec.val[j] =
          float_to_int8_rn(static_cast<float>(in_vec.val[j]) / scale_val);
    }
    vectorized_out[i] = out_vec;
  }
  // handle the rest
  int64_t const remainder_start = num_vec_elements * VEC_SIZE;
  for (int64_t i = remainder_start + tid; i < hidden_size; i += blockDim.x) {
    out[i] = float_to_int8_rn(static_cast<float>(input[i]) / scale_val);
  }
}

template <typename scalar_t, typename scale_type>
__global__ void dynamic_scaled_int8_quant_kernel(
    scalar_t const* __restrict__ input, int8_t* __restrict__ out,
    scale_type* scale, const int hidden_size) {
  constexpr int VEC_SIZE = 16;
  using in_vec_t = vec_n_t<scalar_t, VEC_SIZE>;
  using out_vec_t = vec_n_t<int8_t, VEC_SIZE>;
  int const tid = threadIdx.x;
  int64_t const token_idx = blockIdx.x;

  // Must be performed using 64-bit math to avoid integer overflow.
  out += token_idx * hidden_size;
  input += token_idx * hidden_size;
  auto const* vectorized_in = reinterpret_cast<in_vec_t const*>(input);
  auto* vectorized_out = reinterpret_cast<out_vec_t*>(out);
  int64_t const num_vec_elements = hidden_size / VEC_SIZE;

  // vectorized scan for absmax
  float thread_absmax = 0.0f;
  for (int64_t i = tid; i < num_vec_elements; i += blockDim.x) {
    in_vec_t in_vec = vectorized_in[i];
#pragma unroll
    for (int j = 0; j < VEC_SIZE; ++j) {
      thread_absmax =
          fmaxf(thread_absmax, fabsf(static_cast<float>(in_vec.val[j])));
    }
  }

  // handle the rest
  int64_t const remainder_start = num_vec_elements * VEC_SIZE;
  for (int64_t i = remainder_start + tid; i < hidden_size; i += blockDim.x) {
    thread_absmax = fmaxf(thread_absmax, fabsf(static_cast<float>(input[i])));
  }

  // reduce the absmax across the block
  using BlockReduce = cub::BlockReduce<float, 1024>;
  __shared__ typename BlockReduce::TempStorage reduce_storage;
  // substitution: cub::Max() is gone from CUDA 13's CCCL; cuda::maximum<> is its successor
  float block_absmax_val_maybe =
      BlockReduce(reduce_storage).Reduce(thread_absmax, cuda::maximum<>());
  __shared__ float block_absmax_val;
  if (tid == 0) {
    block_absmax_val = block_absmax_val_maybe;
    scale[token_idx] = block_absmax_val / 127.0f;
  }
  __syncthreads();

  // vectorized quantization
  float const tmp_scale = 127.0f / block_absmax_val;
  for (int64_t i = tid; i < num_vec_elements; i += blockDim.x) {
    in_vec_t in_vec = vectorized_in[i];
    out_vec_t out_vec;
#pragma unroll
    for (int j = 0; j < VEC_SIZE; ++j) {
      out_vec.val[j] =
          float_to_int8_rn(static_cast<float>(in_vec.val[j]) * tmp_scale);
    }
    vectorized_out[i] = out_vec;
  }
  // handle the rest
  for (int64_t i = remainder_start + tid; i < hidden_size; i += blockDim.x) {
    out[i] = float_to_int8_rn(static_cast<float>(input[i]) * tmp_scale);
  }
}

// substitution: explicit instantiations at the bench's types
template __global__ void static_scaled_int8_quant_kernel<__nv_bfloat16, float>(
    __nv_bfloat16 const* __restrict__, int8_t* __restrict__, float const*, const int);
template __global__ void dynamic_scaled_int8_quant_kernel<__nv_bfloat16, float>(
    __nv_bfloat16 const* __restrict__, int8_t* __restrict__, float*, const int);

}  // namespace vllm
#endif  // PORTS7_VLLM
