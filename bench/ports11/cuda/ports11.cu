// bench/ports11: the CUDA C++ twins of issue 30's eleventh held-out port, the public sources as
// written (only the kernels, with the few lines of their headers that the kernels use, written
// for this bench where a header cannot be included: see each section). Not a ferrocuda source:
// the GPU job (bench/ports11/scripts/gpu-job.sh) builds it with nvcc as each project builds it,
// and the bench (src/bin/ports11_bench.rs) launches its kernels through raw-pointer stubs
// (kernels/src/twins.rs, by their mangled names) beside the Rust ports.
//
// Sources:
//   karpathy/llm.c at f1e2ace651495b74ae22d45d1723443fd00ecd3a (2025-05-10):
//     L1 dev/cuda/layernorm_forward.cu   layernorm_forward_kernel5   (nvcc -O3 --use_fast_math)
//     L2 dev/cuda/matmul_backward_bias.cu matmul_backward_bias_kernel3 (nvcc -O3, ENABLE_BF16: floatX = __nv_bfloat16)
//     L3 dev/cuda/softmax_forward.cu     softmax_forward_online_kernel8 (nvcc -O3 --use_fast_math)
//     L4 dev/cuda/global_norm.cu         norm_kernel2<__nv_bfloat16> (nvcc -O3 --use_fast_math, ENABLE_BF16)
//     L5 dev/cuda/attention_forward.cu   attention_softmax_kernel1   (nvcc -O3 --use_fast_math)
//     L6 dev/cuda/attention_forward.cu   scale_kernel                (nvcc -O3 --use_fast_math)
//   vllm-project/vllm:
//     V1 csrc/cache_kernels.cu at 693083ae80680811c9c2a22edad2568e6635e190:
//        convert_fp8_kernel<uint8_t, __nv_bfloat16, Fp8KVCacheDataType::kFp8E4M3>
//        (vLLM's CMake: -O3 --expt-relaxed-constexpr, no fast math)
//     V2 csrc/prepare_inputs/advance_step.cu at 02617c490ac011865cef4b5197f9f666f354c3af:
//        prepare_inputs::advance_step_kernel<max_threads> (max_threads = 256, advance_step.cuh)
//
// Build (the job script's lines):
//   nvcc -O3 --use_fast_math -std=c++17 -arch=sm_90 -cubin -DPORTS11_LLMC ports11.cu -o llmc.cubin
//   nvcc -O3 -std=c++17 -arch=sm_90 -cubin -DPORTS11_LLMC_NOFAST ports11.cu -o llmc_nofast.cubin
//   nvcc -O3 --expt-relaxed-constexpr -std=c++17 -arch=sm_90 -cubin -DPORTS11_VLLM ports11.cu -o vllm.cubin

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <float.h>
#include <stdint.h>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

#if defined(PORTS11_LLMC) || defined(PORTS11_LLMC_NOFAST)
// dev/cuda/common.h (llm.c) under ENABLE_BF16: the one typedef the kernels below use.
typedef __nv_bfloat16 floatX;
#endif

#ifdef PORTS11_LLMC
// ---- L1: dev/cuda/layernorm_forward.cu, the public source as written ----
__global__ void layernorm_forward_kernel5(float* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd,
                                    const float*  __restrict__ inp, const float*  __restrict__ weight,
                                    const float* __restrict__ bias, int N, int C) {
    namespace cg = cooperative_groups;
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    __shared__ float shared_sum[32]; // block_size max is 1024 = 32 * 32 warps
    __shared__ float shared_sum2[32]; // warps will be writing into shared memeory after warp-reduce
    int num_warps = blockDim.x / 32;
    int warp_id = threadIdx.x / 32;
    int lane_id = threadIdx.x % 32;
    int idx = blockIdx.x; // simply one block per row
    // the row of input that this group of threads is responsible for
    const float* x = inp + idx * C;
    // thread coarsening through the row, reduce the sum in series
    float thread_sum = 0.0; // stores sum(x)
    float thread_sum2 = 0.0; // stores sum(x**2)
    // for (int i = C + threadIdx.x - blockDim.x; i >= 0; i -= blockDim.x) {
    for (int i = threadIdx.x; i < C; i += blockDim.x) {
        float xi = x[i];
        thread_sum += xi;
        thread_sum2 += xi * xi;
    }
    // warp-level reduction
    float warp_sum = cg::reduce(warp, thread_sum, cg::plus<float>{}); // sum(x)
    float warp_sum2 = cg::reduce(warp, thread_sum2, cg::plus<float>{}); // sum(x**2)
    // store the warp-level reduction in shared memory (we could have lane_id == 0 guard but not needed)
    shared_sum[warp_id] = warp_sum;
    shared_sum2[warp_id] = warp_sum2;
    __syncthreads();
    // load results from shared memory to threads, pad with zeros for threads that are out of bounds
    warp_sum = (lane_id < num_warps) ? shared_sum[lane_id] : 0.0f;
    warp_sum2 = (lane_id < num_warps) ? shared_sum2[lane_id] : 0.0f;
    // now reduce the warp-level reductions
    float block_sum = cg::reduce(warp, warp_sum, cg::plus<float>{}); // sum(x)
    float block_sum2 = cg::reduce(warp, warp_sum2, cg::plus<float>{}); // sum(x**2)
    // mean, var, rstd
    block_sum /= C; // mean(x)
    block_sum2 /= C; // mean(x**2)
    float m = block_sum;
    float var = block_sum2 - m * m;
    float s = rsqrtf(var + 1e-5f);
    // store the mean, no need to cache it
    if(threadIdx.x == 0 && mean != nullptr) {
        __stcs(mean + idx, m);
    }
    // store the rstd, no need to cache it
    if(threadIdx.x == 0 && rstd != nullptr) {
        __stcs(rstd + idx, s);
    }
    // final normalization and scaling by weight/bias
    float* o = out + idx * C;
    for (int i = threadIdx.x; i < C; i += blockDim.x) {
        float n = s * (__ldcs(x+i) - m);
        __stcs(o+i, n * weight[i] + bias[i]);
    }
}

// ---- L3: dev/cuda/softmax_forward.cu, the public source as written ----
__global__ void softmax_forward_online_kernel8(float* out, const float* inp, int N, int C) {
    // online softmax paper: http://arxiv.org/abs/1805.02867
    // online softmax reduces loops from 3 to 2
    // which is done by calculating sumval and maxval in one loop
    const int warpsPerBlock = blockDim.x / warpSize;
    int tid = threadIdx.x;

    if (tid >= C) {
        return;
    }

    int warpId = tid / warpSize;
    int laneId = tid % warpSize;
    // one warp one row
    int row = blockIdx.x * warpsPerBlock + warpId;

    if (row >= N) {
        return;
    }

    const float* x = inp + row * C;
    float* const y = out + row * C;

    // merge calculating maxval and sumval in one loop
    // which is an arithmetic improvment from online softmax over normal softmax
    float maxval = -INFINITY, sumval = 0.0f, bigger;
    for (int i = laneId; i < C; i += warpSize) {
        // when updating the maxval, dynamically updates the previous sumval by
        // multiplying e^{previous_maxval - current_maxval}
        bigger = fmaxf(maxval, x[i]);
        sumval = sumval * expf(maxval - bigger) + expf(x[i] - bigger);
        maxval = bigger;
    }

    // use warp functions instead of cooperative groups for better readibility
    // calculate the warp wised maxval and sumval
    float offsetMaxval, offsetSumval;
    for (int offset = warpSize / 2; offset > 0; offset >>= 1) {
        __syncwarp();
        offsetMaxval = __shfl_down_sync(0xFFFFFFFF, maxval, offset);
        offsetSumval = __shfl_down_sync(0xFFFFFFFF, sumval, offset);
        if (offsetMaxval > maxval) {
            sumval *= expf(maxval - offsetMaxval);
            maxval = offsetMaxval;
        } else {
            offsetSumval *= expf(offsetMaxval - maxval);
        }
        sumval += offsetSumval;
    }

    // sync the warp wised maxval and sumval
    // which are also the maxval and sumval of one row in C
    maxval = __shfl_sync(0xFFFFFFFF, maxval, 0);
    sumval = __shfl_sync(0xFFFFFFFF, sumval, 0);

    for (int i = laneId; i < C; i += warpSize) {
        y[i] = expf(x[i] - maxval) / sumval;
    }
}

// ---- L4: dev/cuda/global_norm.cu, the public source as written ----
template<class T>
__global__ void norm_kernel2(float* out, const T* data, size_t count) {
    // concrete example for an A100 GPU (108 SMs, 2048 max threads each)
    // so there are 2048 * 108 = 221,184 threads total
    // say the block_size is 512, then we would launch 432 blocks in total
    // say num_params is ~100M, each thread will process ~500 elements
    // warps reduce with warp-level reduce, we have 221,184/32 = 6,912 warps
    // and then each warp atomicAdd's to global memory, total of 6,912 atomics

    // no shared memory; but one atomic per warp instead of per block
    namespace cg = cooperative_groups;
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);

    // out will be updated atomically from all thread blocks
    size_t index = threadIdx.x + blockDim.x * blockIdx.x;
    size_t grid_width = blockDim.x * gridDim.x;
    float accumulator = 0.f;
    for(size_t i = index; i < count; i += grid_width) {
        accumulator += (float)data[i] * (float)data[i];
    }

    // warp-level reduce
    float warp_result = cg::reduce(warp, accumulator, cg::plus<float>{});
    // and atomic in global buffer
    if(warp.thread_rank() == 0) {
        atomicAdd(out, warp_result);
    }
}

// the instance dev/cuda/global_norm.cu launches under ENABLE_BF16 (T = floatX)
template __global__ void norm_kernel2<__nv_bfloat16>(float* out, const __nv_bfloat16* data, size_t count);

// ---- L5: dev/cuda/attention_forward.cu, the public source as written ----
__global__ void attention_softmax_kernel1(float* att, const float* preatt,
                                         int B, int T, int NH) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int total_threads = B * T * NH;

    if (idx < total_threads) {
        int h = idx % NH;
        int t = (idx / NH) % T;
        int b = idx / (NH * T);

        const float* preatt_bth = preatt + b*NH*T*T + h*T*T + t*T;
        float* att_bth = att + b*NH*T*T + h*T*T + t*T;

        // find maxval
        float maxval = -FLT_MAX;
        for (int t2 = 0; t2 <= t; t2++) {
            if (preatt_bth[t2] > maxval) {
                maxval = preatt_bth[t2];
            }
        }

        // calculate the exp and keep track of sum
        float expsum = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) {
            float expv = expf(preatt_bth[t2] - maxval);
            expsum += expv;
            att_bth[t2] = expv;
        }
        float expsum_inv = expsum == 0.0f ? 0.0f : 1.0f / expsum;

        // normalize to get the softmax
        for (int t2 = 0; t2 < T; t2++) {
            if (t2 <= t) {
                att_bth[t2] *= expsum_inv;
            } else {
                // causal attention mask. not strictly necessary to set to zero here
                // only doing this explicitly for debugging and checking to PyTorch
                att_bth[t2] = 0.0f;
            }
        }
    }
}

// ---- L6: dev/cuda/attention_forward.cu, the public source as written ----
__global__ void scale_kernel(float* inp, float scale, int B, int NH, int T) {
    // scales the pre-softmax attention scores by scale
    // and sets the autoregressive locations to -INFINITY
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < B * NH * T * T) {
        int rest = idx % (NH * T * T);
        rest = rest % (T * T);
        int t2 = rest / T;
        int t = rest % T;
        if (t > t2) {
            inp[idx] = -INFINITY;
        } else {
            inp[idx] *= scale;
        }
    }
}
#endif  // PORTS11_LLMC

#ifdef PORTS11_LLMC_NOFAST
// ---- L2: dev/cuda/matmul_backward_bias.cu, the public source as written ----
__global__ void matmul_backward_bias_kernel3(floatX* dbias, const floatX* dout, int B, int T, int OC) {
    // dout is (B, T, OC), dbias is (OC)
    // in this version of the kernel the entire block of block_size is dedicated to one output channel
    namespace cg = cooperative_groups;
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    __shared__ float shared_sum[32]; // block_size max is 1024 = 32 * 32 warps
    int BT = B * T; // number of elements to reduce in total, per channel
    int num_warps = blockDim.x / 32;
    int warp_id = threadIdx.x / 32;
    int lane_id = threadIdx.x % 32;
    int idx = blockIdx.x; // simply one block per row
    // round 1: thread coarsening to reduce the problem size from B*T to block_size
    float thread_sum = 0.0f;
    for(int i = threadIdx.x; i < BT; i += blockDim.x) {
        thread_sum += (float)dout[i * OC + idx];
    }
    // now do a warp-level reduce to get the sum across the 32 threads in each warp
    // reduce the problem size from block_size to block_size/32 i.e. `num_warps`
    float warp_sum = cg::reduce(warp, thread_sum, cg::plus<float>{});
    // store the warp sum in shared memory (we could have lane_id == 0 guard but not needed)
    shared_sum[warp_id] = warp_sum;
    __syncthreads();
    // load results from shared memory to threads, pad with zeros for threads that are out of bounds
    warp_sum = (lane_id < num_warps) ? shared_sum[lane_id] : 0.0f;
    // now reduce the warp-level reductions
    float block_sum = cg::reduce(warp, warp_sum, cg::plus<float>{}); // sum(x)
    // write the result to output (global memory)
    if(threadIdx.x == 0) {
        dbias[idx] = (float)dbias[idx] + block_sum;
    }
}
#endif  // PORTS11_LLMC_NOFAST

#ifdef PORTS11_VLLM
// Stand-ins for the vLLM headers the two kernels include (torch, c10 and the dispatch macros are
// not on the GPU machine), written for this bench, not copied: what the kernels use and nothing
// more.
//  - csrc/attention/dtype_fp8.cuh's enum (the values vLLM gives it).
//  - csrc/quantization/fp8/nvidia/quant_utils.cuh's path for bf16 -> FP8 E4M3 with a scale:
//    scaled_convert<uint8_t, __nv_bfloat16, kFp8E4M3>(x, scale) is
//    __nv_cvt_float_to_fp8(__bfloat162float(x) / scale, __NV_SATFINITE, __NV_E4M3), a precise
//    division then the saturating conversion (cvt.rn.satfinite.e4m3x2.f32 on sm_89+).
//  - csrc/prepare_inputs/advance_step.cuh: max_threads = 256; div_ceil as vLLM's (a + b - 1) / b.
namespace vllm {
enum class Fp8KVCacheDataType { kAuto = 0, kFp8E4M3 = 1, kFp8E5M2 = 2 };
namespace fp8 {
template <typename Tout, typename Tin, Fp8KVCacheDataType kv_dt>
__inline__ __device__ Tout scaled_convert(const Tin& x, const float scale);
template <>
__inline__ __device__ uint8_t
scaled_convert<uint8_t, __nv_bfloat16, Fp8KVCacheDataType::kFp8E4M3>(const __nv_bfloat16& x, const float scale) {
  __nv_fp8_storage_t res = __nv_cvt_float_to_fp8(__bfloat162float(x) / scale, __NV_SATFINITE, __NV_E4M3);
  return (uint8_t)res;
}
}  // namespace fp8
}  // namespace vllm
namespace prepare_inputs {
static constexpr int max_threads = 256;
static constexpr int div_ceil(int a, int b) { return (a + b - 1) / b; }
}  // namespace prepare_inputs

// ---- V1: csrc/cache_kernels.cu (693083ae), the public source as written ----
namespace vllm {

template <typename Tout, typename Tin, Fp8KVCacheDataType kv_dt>
__global__ void convert_fp8_kernel(const Tin* __restrict__ src_cache,
                                   Tout* __restrict__ dst_cache,
                                   const float scale,
                                   const int64_t block_stride) {
  const int64_t block_idx = blockIdx.x;
  for (int i = threadIdx.x; i < block_stride; i += blockDim.x) {
    int64_t idx = block_idx * block_stride + i;
    dst_cache[idx] =
        fp8::scaled_convert<Tout, Tin, kv_dt>(src_cache[idx], scale);
  }
}

}  // namespace vllm
// the instance convert_fp8 launches for a bf16 source and an "fp8_e4m3" cache
template __global__ void vllm::convert_fp8_kernel<uint8_t, __nv_bfloat16, vllm::Fp8KVCacheDataType::kFp8E4M3>(
    const __nv_bfloat16* __restrict__, uint8_t* __restrict__, const float, const int64_t);

// ---- V2: csrc/prepare_inputs/advance_step.cu (02617c49), the public source as written ----
namespace prepare_inputs {

template <int const num_threads>
__global__ void advance_step_kernel(int num_seqs, int block_size,
                                    long const* sampled_token_ids_ptr,
                                    long* input_positions_ptr,
                                    int* seq_lens_ptr, int* slot_mapping_ptr,
                                    int const* block_tables_ptr,
                                    int64_t const block_tables_stride) {
  int num_seq_blocks = div_ceil(num_seqs, num_threads);

  if (blockIdx.x >= num_seq_blocks) {
    return;
  }

  int cur_seq_id = blockIdx.x * num_threads + threadIdx.x;

  if (cur_seq_id >= num_seqs) {
    return;
  }

  int seq_len = seq_lens_ptr[cur_seq_id];
  int next_seq_len = seq_len + 1;
  int next_input_pos = next_seq_len - 1;

  seq_lens_ptr[cur_seq_id] = next_seq_len;
  input_positions_ptr[cur_seq_id] = next_input_pos;

  int const* seq_block_tables_ptr =
      block_tables_ptr + block_tables_stride * cur_seq_id;

  int block_index = next_input_pos / block_size;
  int block_offset = next_input_pos % block_size;

  int slot_num = seq_block_tables_ptr[block_index] * block_size + block_offset;
  slot_mapping_ptr[cur_seq_id] = slot_num;
}

}  // namespace prepare_inputs
// the instance advance_step launches
template __global__ void prepare_inputs::advance_step_kernel<prepare_inputs::max_threads>(
    int, int, long const*, long*, int*, int*, int const*, int64_t const);
#endif  // PORTS11_VLLM
