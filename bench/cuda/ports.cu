// CUDA C++ twins of the ported kernels (bench/ports/src/lib.rs), transcribed as the public
// sources write them (vLLM csrc/, llm.c llmc/), for nvcc:
//
//   nvcc -cubin -O3 -arch=sm_90 -DPORTS_VLLM bench/cuda/ports.cu -o ports_vllm.cubin
//   nvcc -cubin -O3 -arch=sm_90 -DPORTS_LLMC --use_fast_math bench/cuda/ports.cu -o ports_llmc.cubin
//
// (llm.c's Makefile builds with --use_fast_math, vLLM's without.) Each kernel is extern "C"
// with the Rust kernel's symbol and parameter layout, so the Rust launcher launches both: a
// slice or output is a pointer and its length (`usize`, unused where the source has no
// length), a `u32` an int. Where the source's parameters differ, the body derives what it had
// (said at each kernel); the body itself is the source's.

#include <cassert>
#include <cmath>
#include <cfloat>
#include <cstdint>
#include <cuda_bf16.h>

typedef unsigned long long usize;
typedef __nv_bfloat16 bf16;

#ifdef PORTS_VLLM
#include <cub/cub.cuh>
#include <cuda/functional>
#include <cuda/std/functional>

// ---- vLLM csrc/activation_kernels.cu: act_and_mul_kernel<bf16, gelu_kernel, true> ----------
template <typename T>
__device__ __forceinline__ T gelu_kernel(const T& x) {
    const float f = (float)x;
    constexpr float ALPHA = M_SQRT1_2;
    return (T)(f * 0.5f * (1.0f + ::erf(f * ALPHA)));
}

extern "C" __global__ void gelu_and_mul(const bf16* __restrict__ input, usize n_input, const int d, bf16* __restrict__ out, usize n_out) {
    const int64_t token_idx = blockIdx.x;
    for (int64_t idx = threadIdx.x; idx < d; idx += blockDim.x) {
        const bf16 x = __ldg(&input[token_idx * 2 * d + idx]);
        const bf16 y = __ldg(&input[token_idx * 2 * d + d + idx]);
        out[token_idx * d + idx] = gelu_kernel<bf16>(x) * y;
    }
}

// ---- vLLM csrc/moe/topk_softmax_kernels.cu: moeSoftmax<TPB = 256> ---------------------------
#define TPB 256
extern "C" __launch_bounds__(TPB) __global__
    void moe_softmax(const float* input, usize n_input, const bool* finished, usize n_finished, const int num_cols, float* output, usize n_output) {
    using BlockReduce = cub::BlockReduce<float, TPB>;
    __shared__ typename BlockReduce::TempStorage tmpStorage;

    __shared__ float normalizing_factor;
    __shared__ float float_max;

    const int thread_row_offset = blockIdx.x * num_cols;

    float threadData(-FLT_MAX);

    // Don't touch finished rows.
    if ((finished != nullptr) && finished[blockIdx.x]) {
        return;
    }

    for (int ii = threadIdx.x; ii < num_cols; ii += TPB) {
        const int idx = thread_row_offset + ii;
        threadData = max(static_cast<float>(input[idx]), threadData);
    }

    const float maxElem = BlockReduce(tmpStorage).Reduce(threadData, cuda::maximum<>());
    if (threadIdx.x == 0) {
        float_max = maxElem;
    }
    __syncthreads();

    threadData = 0;

    for (int ii = threadIdx.x; ii < num_cols; ii += TPB) {
        const int idx = thread_row_offset + ii;
        threadData += exp((static_cast<float>(input[idx]) - float_max));
    }

    const auto Z = BlockReduce(tmpStorage).Reduce(threadData, cuda::std::plus<>());

    if (threadIdx.x == 0) {
        normalizing_factor = 1.f / Z;
    }
    __syncthreads();

    for (int ii = threadIdx.x; ii < num_cols; ii += TPB) {
        const int idx = thread_row_offset + ii;
        const float val = exp((static_cast<float>(input[idx]) - float_max)) * normalizing_factor;
        output[idx] = val;
    }
}

// ---- vLLM csrc/quantization/compressed_tensors/int8_quant_kernels.cu ------------------------
// vec_n_t as csrc/quantization/vectorization.cuh declares it.
template <typename scalar_t, size_t vec_size>
struct __align__(vec_size * sizeof(scalar_t)) vec_n_t {
    scalar_t val[vec_size];
};

static inline __device__ int8_t float_to_int8_rn(float x) {
    uint32_t dst;
    asm volatile("cvt.rni.sat.s8.f32 %0, %1;" : "=r"(dst) : "f"(x));
    return reinterpret_cast<const int8_t&>(dst);
}

// dynamic_scaled_int8_quant_kernel<bf16, float>; the Rust kernel takes hidden_size / 16.
extern "C" __global__ void dynamic_scaled_int8_quant(const bf16* __restrict__ input, usize n_input, const int hidden16, int8_t* __restrict__ out, usize n_out, float* scale, usize n_scale) {
    const int hidden_size = hidden16 * 16;
    constexpr int VEC_SIZE = 16;
    using in_vec_t = vec_n_t<bf16, VEC_SIZE>;
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
            thread_absmax = fmaxf(thread_absmax, fabsf(static_cast<float>(in_vec.val[j])));
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
    float block_absmax_val_maybe = BlockReduce(reduce_storage).Reduce(thread_absmax, cuda::maximum<>());
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
            out_vec.val[j] = float_to_int8_rn(static_cast<float>(in_vec.val[j]) * tmp_scale);
        }
        vectorized_out[i] = out_vec;
    }
    // handle the rest
    for (int64_t i = remainder_start + tid; i < hidden_size; i += blockDim.x) {
        out[i] = float_to_int8_rn(static_cast<float>(input[i]) * tmp_scale);
    }
}

// ---- vLLM csrc/moe/moe_align_sum_kernels.cu: moe_sum_kernel<bf16, TOPK = 2> -----------------
#define TOPK 2
extern "C" __global__ void moe_sum(const bf16* __restrict__ input, usize n_input, const int d, bf16* __restrict__ out, usize n_out) {
    const int64_t token_idx = blockIdx.x;
    for (int64_t idx = threadIdx.x; idx < d; idx += blockDim.x) {
        bf16 x = 0.0;
#pragma unroll
        for (int k = 0; k < TOPK; ++k) {
            x += __ldg(&input[token_idx * TOPK * d + k * d + idx]);
        }
        out[token_idx * d + idx] = x;
    }
}
#endif  // PORTS_VLLM

#ifdef PORTS_LLMC
// ---- llm.c llmc/cuda_utils.cuh: Packed128, load128cs, store128, warp/block reductions --------
#define WARP_SIZE 32
#include "llmc_cuda_utils.cuh"  // llm.c's Packed128, load128/store128*, warp/block reductions (staged beside this file)
typedef bf16 floatX;
typedef Packed128<floatX> x128;

// ---- llm.c llmc/encoder.cuh: encoder_forward_kernel3 ----------------------------------------
// The Rust kernel's parameters: (inp, wte, wpe, T, C, out); N = B * T * C is out's length.
extern "C" __global__ void encoder_forward(const int* inp, usize n_inp, const floatX* wte, usize n_wte, const floatX* wpe, usize n_wpe, int T, int C, floatX* out, usize n_out) {
    int N = (int)(n_out * x128::size);
    int idx = (blockIdx.x * blockDim.x + threadIdx.x) * x128::size;
    if (idx >= N) { return; }

    int bt = idx / C;
    int b = bt / T;
    int t = bt % T;
    int c = idx % C;

    int ix = inp[b * T + t];

    floatX* out_btc = out + b * T * C + t * C + c;
    const floatX* wte_ix = wte + ix * C + c;
    const floatX* wpe_tc = wpe + t * C + c;

    x128 packed_out;
    x128 wte128 = load128cs(wte_ix);
    x128 wpe128 = load128cs(wpe_tc);
    for (int k = 0; k < x128::size; k++) {
        packed_out[k] = (floatX)((float)wte128[k] + (float)wpe128[k]);
    }
    store128(out_btc, packed_out);
}

// ---- llm.c llmc/global_norm.cuh: global_norm_squared_kernel<bf16> ---------------------------
// One slice (gridDim.y = 1, stride 0): the Rust kernel's parameters are (data, out).
template <class T>
__device__ float global_norm_squared_for_range(const T* data, size_t count) {
    size_t index = blockIdx.x * blockDim.x + threadIdx.x;
    size_t grid_width = blockDim.x * gridDim.x;
    float accumulator = 0.f;
    for (size_t i = index; i < count; i += grid_width) {
        accumulator += (float)data[i] * (float)data[i];
    }
    // block-level reduce
    return blockReduce<warpReduceSum>(accumulator);
}

extern "C" __global__ void global_norm_squared(const floatX* data, usize count, float* out, usize n_out) {
    const ptrdiff_t stride = 0;
    float block_sum = global_norm_squared_for_range(data + blockIdx.y * stride, count);
    if (threadIdx.x == 0) {
        size_t out_index = blockIdx.y * gridDim.x + blockIdx.x;
        out[out_index] = out[out_index] + block_sum;
    }
}

// ---- llm.c llmc/attention.cuh: softmax_forward_kernel5 --------------------------------------
// The Rust kernel's parameters: (inp, inv_temperature, T, out); N = inp's length / (T T).
extern "C" __global__ void softmax_forward(const floatX* inp, usize n_inp, float inv_temperature, int T, floatX* out, usize n_out) {
    int N = (int)(n_inp / ((usize)T * T));
    assert(T % 4 == 0);
    int lane_id = threadIdx.x % WARP_SIZE;
    int warp_id = threadIdx.x / WARP_SIZE;
    int num_warps = blockDim.x / WARP_SIZE;

    int idx = (gridDim.x - blockIdx.x - 1) * num_warps + warp_id;  // backward order
    if (idx >= N * T) {
        return;
    }
    int own_pos = idx % T;
    int pos_by_4 = own_pos / 4;

    const floatX* x = inp + idx * T;

    const float flt_max = 340282346638528859811704183484516925440.0f;
    float maxval = -flt_max;
    float sumval = 0.0f;

    const floatX* x_aligned = reinterpret_cast<const floatX*>(__builtin_assume_aligned(x, 16));
    for (int i = lane_id; i < pos_by_4; i += WARP_SIZE) {
        float regarray[4];
        for (int k = 0; k < 4; ++k) {
            regarray[k] = (float)x_aligned[4 * i + k];
        }
        float old_maxval = maxval;
        for (int k = 0; k < 4; ++k) {
            maxval = fmaxf(maxval, regarray[k]);
        }
        sumval *= expf(inv_temperature * (old_maxval - maxval));
        for (int k = 0; k < 4; ++k) {
            sumval += expf(inv_temperature * (regarray[k] - maxval));
        }
    }

    if (4 * pos_by_4 + lane_id <= own_pos) {
        float old_maxval = maxval;
        maxval = fmaxf(maxval, (float)x[4 * pos_by_4 + lane_id]);
        sumval *= expf(inv_temperature * (old_maxval - maxval));
        sumval += expf(inv_temperature * ((float)x[4 * pos_by_4 + lane_id] - maxval));
    }

    float global_maxval = warpReduceMax(maxval);
    sumval *= expf(inv_temperature * (maxval - global_maxval));

    float sum = warpReduceSum(sumval);
    float norm = 1.f / sum;

    for (int i = lane_id; i <= own_pos; i += WARP_SIZE) {
        float ev = expf(inv_temperature * ((float)__ldcs(x + i) - global_maxval));
        __stcs(out + idx * T + i, (floatX)(ev * norm));
    }
}
#endif  // PORTS_LLMC
