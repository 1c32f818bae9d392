// bench/ports12's CUDA C++ twins: the public sources as written, for the GPU bench of issue 30's
// twelfth held-out port (bench/ports12/RESULTS.md). Built by nvcc on the GPU machine
// (bench/ports12/scripts/gpu-job.sh) with each project's own flags:
//   -DPORTS12_LLMC: nvcc -O3 --use_fast_math -std=c++17 -arch=sm_90 -cubin (dev/cuda/Makefile's CFLAGS)
//   -DPORTS12_VLLM: nvcc -O3 --expt-relaxed-constexpr -std=c++17 -arch=sm_90 -cubin (vLLM's CMake)
//
// llm.c: karpathy/llm.c at f1e2ace651495b74ae22d45d1723443fd00ecd3a
//   dev/cuda/common.h (warpReduceSum), dev/cuda/softmax_forward.cu (warpReduceMax, SumMax,
//   reduce_sum_max_op, softmax_forward_online_kernel2, softmax_forward_kernel7),
//   dev/cuda/attention_forward.cu (attention_value_kernel1), dev/cuda/layernorm_forward.cu
//   (mean_kernel), dev/cuda/matmul_backward_bias.cu (matmul_backward_bias_kernel2, with
//   ENABLE_BF16: floatX = __nv_bfloat16).
// vLLM: vllm-project/vllm
//   csrc/quantization/activation_kernels.cu at 008b7250f5607e64a5088f35671914088159d75a
//     (silu_kernel, act_and_mul_quant_kernel)
//   csrc/quantization/fp8/common.cuh at 0a9a96faa56110f9b3cd2e202a6904196ff29c51
//     (scaled_fp8_conversion)
//   csrc/quantization/gguf/gguf_kernel.cu at 02619b9157ed2522e272d2726568a42710fbd7fe (quantize_q8_1)
//   csrc/quantization/gguf/dequantize.cuh at 266447bf767c99f15b6786989d8e614d2e0ee643
//     (dequantize_q4_0, dequantize_block)
//   csrc/quantization/gguf/ggml-common.h at 0ca2077f442ff0af6cbc831ed054453cb3f23aa1
//     (block_q4_0, block_q8_1, QK/QR constants)
// Only the kernels and the device functions they call are here; the host code, the CPU
// references and the other kernels of each file are left out. Stand-ins written for this bench
// (marked "stand-in") replace the headers the GPU machine lacks (c10, torch, vLLM's
// cuda_compat.h / core/math.hpp); the kernels' own text is unchanged.

#ifdef PORTS12_LLMC
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <float.h>

// matmul_backward_bias.cu defines ENABLE_BF16 before including common.h: floatX is bf16.
typedef __nv_bfloat16 floatX;

// ---- dev/cuda/common.h
__device__ float warpReduceSum(float val) {
    for (int offset = 16; offset > 0; offset /= 2) {
        val += __shfl_xor_sync(0xFFFFFFFF, val, offset);
    }
    return val;
}

// ---- dev/cuda/softmax_forward.cu
// warp-level reduction for finding the maximum value
__device__ float warpReduceMax(float val) {
    for (int offset = 16; offset > 0; offset /= 2) {
        val = fmaxf(val, __shfl_down_sync(0xFFFFFFFF, val, offset));
    }
    return val;
}


// struct for the reduction operation, guarantees 8-byte alignment
struct __align__(8) SumMax
{
    float maxval;
    float sum;
};

// forceinline helps avoid function call overhead
__device__ __forceinline__ SumMax reduce_sum_max_op(SumMax a, SumMax b) {
    bool a_bigger = (a.maxval > b.maxval);
    SumMax bigger_m = a_bigger ? a : b;
    SumMax smaller_m = a_bigger ? b : a;
    SumMax res;
    res.maxval = bigger_m.maxval;
    res.sum = bigger_m.sum + smaller_m.sum * expf(smaller_m.maxval - bigger_m.maxval);
    return res;
}

__global__ void softmax_forward_online_kernel2(float* out, const float* inp, int N, int C) {
	namespace cg = cooperative_groups;
	cg::thread_block block = cg::this_thread_block();
	cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
	int idx = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();
	if (idx >= N) {
		return;
	}

	// one row of inp, i.e. inp[idx, :] of shape (C,)
	const float* x = inp + idx * C;

    // base case for the reduction
    SumMax sm_partial;
	sm_partial.maxval = -INFINITY;
	sm_partial.sum = 0.0f;

	// first, thread coarsening by directly accessing global memory in series
	for (int i = warp.thread_rank(); i < C; i += warp.size()) {
		sm_partial = reduce_sum_max_op(sm_partial, { x[i], 1.0f });
	}

    // second, the reduction
	SumMax sm_total = cg::reduce(warp, sm_partial, reduce_sum_max_op);

	// divide the whole row by the sum
	for (int i = warp.thread_rank(); i < C; i += warp.size()) {
        // the below is equivalent to
        // out[idx * C + i] = expf(x[i] - sm_total.maxval) / sm_total.sum;
        // but uses special instruction that bypasses the cache
        __stcs(out + idx * C + i, expf(x[i] - sm_total.maxval) / sm_total.sum);
	}
}

__global__ void softmax_forward_kernel7(float* out, const float* inp, int N, int C) {
    // out is (N, C) just like inp. Each row of inp will get softmaxed.
    // same as kernel4, but optimised for very large Cs with advanced unrolling

    // The trick is to read into a register array (all indices known at compile time)
    // and always read UNROLL_FACTOR values to maximise memory level parallelism
    // even if we would be out of bounds, we set the index to min(C-1, idx)
    // so we just do some unnecessary reads (obviously bad for small C)
    // the writes are in a separate loop with a conditional check for out of bounds
    // making it separate is necessary to convince the compiler to do the right thing
    const int UNROLL_FACTOR = 8;
    const int warpsPerBlock = blockDim.x / 32;

    extern __shared__ float shared[];
    int idx = blockIdx.x;
    int tid = threadIdx.x;
    int warpId = threadIdx.x / 32; // warp index within a block
    int laneId = threadIdx.x % 32; // thread index within a warp

    // shared[] must be allocated to have 2 * warpsPerBlock elements
    // first half for max values, the second half for sum values
    float* maxvals = shared;
    float* sumvals = &shared[warpsPerBlock];

    if (tid >= C) {
        maxvals[warpId] = -INFINITY;
        sumvals[warpId] = 0.0f;
        return;
    }

    const float* x = inp + idx * C; // input
    float* y = out + idx * C; // output

    // first, thread coarsening by directly accessing global memory in series
    float maxval = -INFINITY;
    for (int i = tid; i < C; i += blockDim.x * UNROLL_FACTOR) {
        #pragma unroll
        for (int u = 0; u < UNROLL_FACTOR; u++) {
            maxval = fmaxf(maxval, x[min(C - 1, i + u*blockDim.x)]);
        }
    }

    // now within-warp reductions for maxval
    maxval = warpReduceMax(maxval);
    // the 0th thread of each warp writes the maxval of that warp to shared memory
    if (laneId == 0) maxvals[warpId] = maxval;
    __syncthreads();
    // now the 0th thread reduces the maxvals in shared memory, i.e. across warps
    if (tid == 0) {
        float val = maxvals[tid];
        #pragma unroll
        for (int i = 1; i < warpsPerBlock; i++) {
            val = fmaxf(val, maxvals[i]);
        }
        // store the final max in the first position
        maxvals[0] = val;
    }
    __syncthreads();
    // broadcast the max to all threads
    float offset = maxvals[0];

    // compute expf and write the result to global memory
    // + thread coarsening for sum
    float sumval = 0.0f;
    for (int i = tid; i < C; i += blockDim.x * UNROLL_FACTOR) {
        float reg_array[UNROLL_FACTOR];
        #pragma unroll
        for (int u = 0; u < UNROLL_FACTOR; u++) {
            reg_array[u] = __ldcs(&x[min(C - 1, i + u*blockDim.x)]);
        }
        #pragma unroll
        for (int u = 0; u < UNROLL_FACTOR; u++) {
            if (i + u*blockDim.x < C) {
                float output = expf(reg_array[u] - offset);
                y[min(C - 1, i + u*blockDim.x)] = output; // compiler likes redundant min()?!
                sumval += output; // combined into the same loop unlike kernel3
            }
        }
    }

    // okay now we calculated exp(x - max(x))
    // step 2: sum all the values and divide by the sum

    // within-warp reduction for sumval
    sumval = warpReduceSum(sumval);
    // write sumval to shared memory
    if (laneId == 0) sumvals[warpId] = sumval;
    __syncthreads();
    // inter-thread reduction of sum
    if (tid == 0) {
        float val = sumvals[tid];
        #pragma unroll
        for (int i = 1; i < warpsPerBlock; ++i) {
            val += sumvals[i];
        }
        sumvals[0] = val;
    }
    __syncthreads();
    // broadcast the sum to all threads
    float sum = sumvals[0];

    // divide the whole row by the sum
    for (int i = tid; i < C; i += blockDim.x * UNROLL_FACTOR) {
        float reg_array[UNROLL_FACTOR];
        #pragma unroll
        for (int u = 0; u < UNROLL_FACTOR; u++) {
            reg_array[u] = y[min(C - 1, i + u*blockDim.x)];
        }
        #pragma unroll
        for (int u = 0; u < UNROLL_FACTOR; u++) {
            if (i + u*blockDim.x < C) {
                y[i + u*blockDim.x] = reg_array[u] / sum;
            }
        }
    }
}

// ---- dev/cuda/attention_forward.cu
__global__ void attention_value_kernel1(float* out, const float* att, const float* inp,
                                       int B, int T, int C, int NH) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int total_threads = B * T * NH;

    if (idx < total_threads) {
        int h = idx % NH;
        int t = (idx / NH) % T;
        int b = idx / (NH * T);

        int C3 = C*3;
        int hs = C / NH; // head size

        float* out_bth = out + b * T * C + t * C + h * hs;
        const float* att_bth = att + b*NH*T*T + h*T*T + t*T;

        for (int i = 0; i < hs; i++) { out_bth[i] = 0.0f; }
        for (int t2 = 0; t2 <= t; t2++) {
           const  float* value_t2 = inp + b * T * C3 + t2 * C3 + h * hs + C*2; // +C*2 because it's value
            float att_btht2 = att_bth[t2];
            for (int i = 0; i < hs; i++) {
                out_bth[i] += att_btht2 * value_t2[i];
            }
        }
    }
}

// ---- dev/cuda/layernorm_forward.cu
__global__ void mean_kernel(float* mean, const float* inp, int N, int C, int block_size) {
    extern __shared__ float shared[];
    int idx = blockIdx.x; // range [0, B*T)
    int tid = threadIdx.x; // range [0, block_size)
    const float* x = inp + idx * C;
    // thread coarsening
    float sum = 0.0f;
    for (int i = tid; i < C; i += block_size) {
        sum += x[i];
    }
    shared[tid] = sum;
    __syncthreads();
    // reductions
    for (int stride = block_size / 2; stride >= 1; stride /= 2) {
        __syncthreads();
        if (tid < stride) {
            shared[tid] += shared[tid + stride];
        }
    }
    // write the final result (at thread 0) to global memory
    if (tid == 0) {
        mean[idx] = shared[0] / C;
    }
}

// ---- dev/cuda/matmul_backward_bias.cu
// cooperative groups solution, one warp per output channel
__global__ void matmul_backward_bias_kernel2(floatX* dbias, const floatX* dout, int B, int T, int OC) {
    // dout is (B, T, OC), dbias is (OC)
    // e.g. if block_size = 128, then we have 4 warps per block, each in charge of one output channel
    namespace cg = cooperative_groups;
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    // meta_group_size is the number of warps in a block (e.g. 4), meta_group_rank is the warp index (0,1,2,3)
    int idx = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();
    if(idx >= OC) { return; }
    int BT = B * T; // number of elements to reduce in total, per channel
    // first, thread coarsening to sum reduce the problem size from B*T to 32
    float sum = 0.0f;
    for(int i = warp.thread_rank(); i < BT; i += warp.size()) {
        sum += (float)dout[i * OC + idx];
    }
    // now do a warp-level reduce to get the sum across the 32 threads in this warp
    sum = cg::reduce(warp, sum, cg::plus<float>{});
    // write the result to output (global memory)
    if(warp.thread_rank() == 0) {
        dbias[idx] = (float)dbias[idx] + sum;
    }
}

#endif  // PORTS12_LLMC

#ifdef PORTS12_VLLM
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <array>
#include <cmath>
#include <cstdint>

// ---- stand-ins (written for this bench, not copied from the libraries)
// vLLM's cuda_compat.h: VLLM_LDG is __ldg on CUDA; VLLM_SHFL_XOR_SYNC_WIDTH is
// __shfl_xor_sync over the full warp with a width.
#define VLLM_LDG(arg) __ldg(arg)
#define VLLM_SHFL_XOR_SYNC_WIDTH(var, lane_mask, width) __shfl_xor_sync(uint32_t(-1), var, lane_mask, width)
// vLLM's core/math.hpp helpers, as their names say (integer ceil division, rounding up and
// down to a multiple).
template <typename T>
__host__ __device__ constexpr T div_ceil(T a, T b) { return (a + b - 1) / b; }
template <typename T>
__host__ __device__ constexpr T round_to_next_multiple_of(T num, T multiple) { return div_ceil(num, multiple) * multiple; }
template <typename T>
__host__ __device__ constexpr T round_to_previous_multiple_of(T multiple, T num) { return (num / multiple) * multiple; }
// c10::Float8_e4m3fn (PyTorch c10/util/Float8_e4m3fn.h): one byte, built from a float. c10
// rounds in software (round to nearest even, NaN above 464); the stand-in uses CUDA's
// conversion (one cvt on sm_90, saturating). scaled_fp8_conversion clamps to +-448 first, so
// the bits are c10's; the twin's conversion is faster than c10's, so the ratio against it is
// conservative for the port (bench/ports12/RESULTS.md).
namespace c10 {
struct alignas(1) Float8_e4m3fn {
  uint8_t x;
  Float8_e4m3fn() = default;
  __device__ Float8_e4m3fn(float f) : x(__nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3)) {}
};
}  // namespace c10
using FP8_TYPE = c10::Float8_e4m3fn;
// std::numeric_limits<c10::Float8_e4m3fn>::max() is 448.
constexpr float FP8_E4M3_MAX = 448.0f;
// GGUF (vLLM's gguf headers): the dequantizers' value pair type is half2.
typedef half dfloat;
typedef half2 dfloat2;
typedef void (*dequantize_kernel_t)(const void* vx, const int ib, const int iqs, dfloat2& v);

// ---- csrc/quantization/gguf/ggml-common.h (the two block types and their constants)
#define CUDA_DEQUANTIZE_BLOCK_SIZE 256
#define CUDA_QUANTIZE_BLOCK_SIZE 256

#define QK4_0 32
#define QR4_0 2
#define QI4_0 (QK4_0 / (4 * QR4_0))
typedef struct {
    half    d;              // delta
    uint8_t qs[QK4_0 / 2];  // nibbles / quants
} block_q4_0;

#define QK8_0 32
#define QK8_1 32
#define QR8_1 1
#define QI8_1 (QK8_1 / (4 * QR8_1))
typedef struct {
    half2   ds;             // ds.x = delta, ds.y = sum
    int8_t  qs[QK8_0];      // quants
} block_q8_1;

namespace vllm {

// ---- csrc/quantization/fp8/common.cuh
template <bool is_scale_inverted>
__device__ __forceinline__ FP8_TYPE scaled_fp8_conversion(float const val,
                                                          float const scale) {
  float x = 0.0f;
  if constexpr (is_scale_inverted) {
    x = val * scale;
  } else {
    x = val / scale;
  }

  float r = fmax(-FP8_E4M3_MAX, fmin(x, FP8_E4M3_MAX));
#ifndef USE_ROCM
  return static_cast<c10::Float8_e4m3fn>(r);
#else
  // Use hardware cvt instruction for fp8 on rocm
  return c10::Float8_e4m3fnuz(hip_fp8(r).data,
                              c10::Float8_e4m3fnuz::from_bits());
#endif
}

// ---- csrc/quantization/activation_kernels.cu
template <typename T>
__device__ __forceinline__ T silu_kernel(const T& x) {
  // x * sigmoid(x)
  return (T)(((float)x) / (1.0f + expf((float)-x)));
}

// Activation and gating kernel template.
template <typename scalar_t, scalar_t (*ACT_FN)(const scalar_t&)>
__global__ void act_and_mul_quant_kernel(
    FP8_TYPE* __restrict__ out,          // [..., d]
    const scalar_t* __restrict__ input,  // [..., 2, d]
    const float* scale, const int d) {
  const int32_t blocks_per_token = gridDim.y;

  const int32_t elems_per_128bit_load = (128 / 8) / sizeof(scalar_t);

  // We don't expect the hidden dimension to exceed 32 bits so int32 should
  // be safe here.
  const int32_t tgt_elems_per_block = div_ceil(d, blocks_per_token);
  const int32_t elems_per_block =
      round_to_next_multiple_of(tgt_elems_per_block, elems_per_128bit_load);
  const int32_t block_start = blockIdx.y * elems_per_block;
  int32_t block_end = block_start + elems_per_block;
  block_end = block_end > d ? d : block_end;

  // token_idx is 64 bit to prevent 32 bit overflow when the number of tokens
  // is very large
  const int64_t token_idx = blockIdx.x;
  const scalar_t* __restrict__ x_ptr = input + token_idx * 2 * d;
  const scalar_t* __restrict__ y_ptr = input + token_idx * 2 * d + d;
  FP8_TYPE* __restrict__ out_ptr = out + token_idx * d;

  // 128-bit vectorized code
  const int32_t vec_loop_end =
      round_to_previous_multiple_of(elems_per_128bit_load, block_end);
  const int32_t vec_end_idx = vec_loop_end / elems_per_128bit_load;
  const int32_t vec_start_idx = block_start / elems_per_128bit_load;

  const int4* __restrict__ x_128bit_ptr = reinterpret_cast<const int4*>(x_ptr);
  const int4* __restrict__ y_128bit_ptr = reinterpret_cast<const int4*>(y_ptr);
  int2* __restrict__ out_128bit_ptr = reinterpret_cast<int2*>(out_ptr);

  float inverted_scale = 1 / *scale;
#pragma unroll
  for (int32_t vec_idx = vec_start_idx + threadIdx.x; vec_idx < vec_end_idx;
       vec_idx += blockDim.x) {
    const int4 x_128bit = VLLM_LDG(&x_128bit_ptr[vec_idx]);
    const int4 y_128bit = VLLM_LDG(&y_128bit_ptr[vec_idx]);
    using scalar_128bit_vec_t = std::array<scalar_t, elems_per_128bit_load>;
    using scalar_64bit_vec_t = std::array<FP8_TYPE, elems_per_128bit_load>;

    scalar_64bit_vec_t out_vec;
    const auto x_vec = reinterpret_cast<scalar_128bit_vec_t const&>(x_128bit);
    const auto y_vec = reinterpret_cast<scalar_128bit_vec_t const&>(y_128bit);

#pragma unroll
    for (int i = 0; i < elems_per_128bit_load; i++) {
      out_vec[i] = scaled_fp8_conversion<true>(ACT_FN(x_vec[i]) * y_vec[i],
                                               inverted_scale);
    }

    out_128bit_ptr[vec_idx] = reinterpret_cast<const int2&>(out_vec);
  }

  // Scalar cleanup code
  if (block_end > vec_loop_end) {
    for (int64_t idx = vec_loop_end + threadIdx.x; idx < block_end;
         idx += blockDim.x) {
      const scalar_t x = VLLM_LDG(&x_ptr[idx]);
      const scalar_t y = VLLM_LDG(&y_ptr[idx]);
      out_ptr[idx] = scaled_fp8_conversion<true>(ACT_FN(x) * y, inverted_scale);
    }
  }
}

template __global__ void act_and_mul_quant_kernel<__nv_bfloat16, silu_kernel<__nv_bfloat16>>(
    FP8_TYPE* __restrict__, const __nv_bfloat16* __restrict__, const float*, const int);

}  // namespace vllm

// ---- csrc/quantization/gguf/gguf_kernel.cu
// Q8 gemv
template<typename scalar_t>
static __global__ void quantize_q8_1(const scalar_t* __restrict__ x,
                                     void* __restrict__ vy, const int kx,
                                     const int kx_padded) {
  const int ix = blockDim.x * blockIdx.x + threadIdx.x;
  if (ix >= kx_padded) {
    return;
  }
  const int iy = blockDim.y * blockIdx.y + threadIdx.y;
  const int i_padded = iy * kx_padded + ix;

  block_q8_1* y = (block_q8_1*)vy;

  const int ib = i_padded / QK8_1;   // block index
  const int iqs = i_padded % QK8_1;  // quant index

  const float xi = ix < kx ? static_cast<float>(x[iy * kx + ix]) : 0.0f;
  float amax = fabsf(xi);
  float sum = xi;

#pragma unroll
  for (int mask = 16; mask > 0; mask >>= 1) {
    amax = fmaxf(amax, VLLM_SHFL_XOR_SYNC_WIDTH(amax, mask, 32));
    sum += VLLM_SHFL_XOR_SYNC_WIDTH(sum, mask, 32);
  }

  const float d = amax / 127;
  const int8_t q = amax == 0.0f ? 0 : roundf(xi / d);

  y[ib].qs[iqs] = q;

  if (iqs > 0) {
    return;
  }

  y[ib].ds.x = __float2half(d);
  y[ib].ds.y = __float2half(sum);
}

template __global__ void quantize_q8_1<__nv_bfloat16>(const __nv_bfloat16* __restrict__, void* __restrict__, const int, const int);

// ---- csrc/quantization/gguf/dequantize.cuh
// Dequant functions
// (the one edit of this file's text: `static` dropped from dequantize_q4_0. The kernel's
// template argument is this function, and a static function's mangled name carries a hash
// of the compilation (`_INTERNAL_<hash>_..`), different on every machine, which the stub's
// `#[kernel(name = ..)]` cannot name. Linkage only: the code is the same.)
__device__ __forceinline__ void dequantize_q4_0(const void* vx,
                                                       const int ib,
                                                       const int iqs,
                                                       dfloat2& v) {
  const block_q4_0* x = (const block_q4_0*)vx;

  const dfloat d = x[ib].d;

  const int vui = x[ib].qs[iqs];

  v.x = __int2half_rn(vui & 0xF);
  v.y = __int2half_rn(vui >> 4);

  v = __hsub2(v, __floats2half2_rn(8.0f, 8.0f));
  v = __hmul2(v, {d, d});
}

template <int qk, int qr, dequantize_kernel_t dequantize_kernel, typename dst_t>
static __global__ void dequantize_block(const void* __restrict__ vx,
                                        dst_t* __restrict__ y, const int k) {
  const int i = 2 * (blockDim.x * blockIdx.x + threadIdx.x);

  if (i >= k) {
    return;
  }

  const int ib = i / qk;          // block index
  const int iqs = (i % qk) / qr;  // quant index
  const int iybs = i - i % qk;    // y block start index
  const int y_offset = qr == 1 ? 1 : qk / 2;

  // dequantize
  dfloat2 v;
  dequantize_kernel(vx, ib, iqs, v);

  y[iybs + iqs + 0] = v.x;
  y[iybs + iqs + y_offset] = v.y;
}

template __global__ void dequantize_block<QK4_0, QR4_0, dequantize_q4_0, half>(const void* __restrict__, half* __restrict__, const int);

#endif  // PORTS12_VLLM
