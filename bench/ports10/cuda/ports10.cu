// bench/ports10's CUDA C++ twins: the public sources as written (kernel bodies unchanged), with
// only the helpers they include, so that nvcc builds them alone on the GPU machine.
//
// llm.c: https://github.com/karpathy/llm.c at commit f1e2ace651495b74ae22d45d1723443fd00ecd3a
//   L1 softmax_forward_kernel4          dev/cuda/softmax_forward.cu (warpReduceMax from the same file,
//                                       warpReduceSum from dev/cuda/common.h)
//   L2 layernorm_backward_kernel1       dev/cuda/layernorm_backward.cu
//   L3 matmul_backward_bias_kernel1     dev/cuda/matmul_backward_bias.cu (floatX = __nv_bfloat16: ENABLE_BF16)
//   L4 encoder_forward_kernel2          dev/cuda/encoder_forward.cu (floatX = __nv_bfloat16: ENABLE_BF16)
//   L5 global_sum_single_block_kernel   llmc/cuda_utils.cuh (blockReduce, warpReduceSum from the same file),
//                                       instantiated for float as train_gpt2.cu's losses
//   Built as each source builds: -O3 --use_fast_math (softmax_forward.cu, layernorm_backward.cu,
//   encoder_forward.cu, the Makefile for llmc/); matmul_backward_bias.cu's compile line has no
//   --use_fast_math (-DPORTS10_LLMC_NOFAST selects it).
// vLLM: https://github.com/vllm-project/vllm
//   V1 finalizeMoeRoutingKernel<bf16, bf16, false>  csrc/moe/permute_unpermute_kernels/moe_permute_unpermute_kernel.inl
//                                       at commit deae5aaa49c3ab0bc928b7298b0c35871b31ba2d
//   V2 expandInputRowsKernel<bf16, false>           the same file and commit
//   V3 preprocessTopkIdKernel                       csrc/moe/permute_unpermute_kernels/moe_permute_unpermute_kernel.cu
//                                       at commit c30af8668c06a53ca6757f992f8bf9125e3fdd41
//   Built as vLLM builds them: -O3 --expt-relaxed-constexpr, no fast math (-DPORTS10_VLLM).
//   cutlass::Array and cutlass::sizeof_bits are replaced by the minimal stand-in below (what the
//   kernels use of them, with cutlass's storage layouts), since the GPU machine has no cutlass
//   checkout. The kernels' bodies are vLLM's.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cstdint>
#include <cassert>
#include <algorithm>

#define WARP_SIZE 32

#if defined(PORTS10_LLMC) || defined(PORTS10_LLMC_NOFAST)
typedef __nv_bfloat16 floatX;
#endif

#ifdef PORTS10_LLMC
// dev/cuda/common.h
__device__ float warpReduceSum(float val) {
    for (int offset = 16; offset > 0; offset /= 2) {
        val += __shfl_xor_sync(0xFFFFFFFF, val, offset);
    }
    return val;
}

// dev/cuda/softmax_forward.cu
// warp-level reduction for finding the maximum value
__device__ float warpReduceMax(float val) {
    for (int offset = 16; offset > 0; offset /= 2) {
        val = fmaxf(val, __shfl_down_sync(0xFFFFFFFF, val, offset));
    }
    return val;
}

__global__ void softmax_forward_kernel4(float* out, const float* inp, int N, int C) {
    // out is (N, C) just like inp. Each row of inp will get softmaxed.
    // same as kernel3, but can handle any block size (multiple of 32)
    // each row of C elements is handled by block_size threads
    // furthermore, each block_size threads get executed in warps of 32 threads

    // special reduction operations warpReduceMax/warpReduceSum are used for intra-warp reductions
    // shared memory is used for inter-warp reduction
    extern __shared__ float shared[];
    int idx = blockIdx.x;
    int tid = threadIdx.x;
    int warpId = threadIdx.x / 32; // warp index within a block
    int laneId = threadIdx.x % 32; // thread index within a warp

    // the number of warps per block. recall that blockDim.x is block_size
    int warpsPerBlock = blockDim.x / 32;

    // shared[] must be allocated to have warpsPerBlock elements
    // those will be used for max and sum values
    float* max_or_sum_storage = shared;

    // one row of inp, i.e. inp[idx, :] of shape (C,)
    const float* x = inp + idx * C;

    // first, thread coarsening by directly accessing global memory in series
    float maxval = -INFINITY;
    for (int i = tid; i < C; i += blockDim.x) {
        maxval = fmaxf(maxval, x[i]);
    }
    // now within-warp reductions for maxval
    maxval = warpReduceMax(maxval);

    // the 0th thread of each warp writes the maxval of that warp to shared memory
    if (laneId == 0) max_or_sum_storage[warpId] = maxval;
    __syncthreads();

    // now the 0th thread of the block reduces the max values in shared memory, i.e. across warps
    if (tid == 0) {
        float val = max_or_sum_storage[tid];
        for (int i = 1; i < warpsPerBlock; i++) {
            val = fmaxf(val, max_or_sum_storage[i]);
        }
        // store the final max in the first position
        max_or_sum_storage[0] = val;
    }
    __syncthreads();
    // broadcast the max to all threads
    float offset = max_or_sum_storage[0];

    // compute expf and write the result to global memory
    for (int i = tid; i < C; i += blockDim.x) {
        out[idx * C + i] = expf(x[i] - offset);
    }

    // okay now we calculated exp(x - max(x))
    // step 2: sum all the values and divide by the sum

    // thread coarsening for sum
    x = out + idx * C;
    float sumval = 0.0f;
    for (int i = tid; i < C; i += blockDim.x) {
        sumval += x[i];
    }
    // within-warp reduction for sumval
    sumval = warpReduceSum(sumval);

    // write sumval to shared memory
    if (laneId == 0) max_or_sum_storage[warpId] = sumval;
    __syncthreads();

    // inter-thread reduction of sum
    if (tid == 0) {
        float val = max_or_sum_storage[tid];
        for (int i = 1; i < warpsPerBlock; ++i) {
            val += max_or_sum_storage[i];
        }
        max_or_sum_storage[0] = val;
    }
    __syncthreads();
    // broadcast the sum to all threads
    float sum = max_or_sum_storage[0];

    // divide the whole row by the sum
    for (int i = tid; i < C; i += blockDim.x) {
        out[idx * C + i] = x[i] / sum;
    }
}

// dev/cuda/layernorm_backward.cu
// super naive kernel that just parallelizes over B,T and loops over C
__global__ void layernorm_backward_kernel1(float* dinp, float* dweight, float* dbias,
                        const float* dout, const float* inp, const float* weight, const float* mean, const float* rstd,
                        int B, int T, int C) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B*T) return;
    int b = idx / T;
    int t = idx % T;

    const float* dout_bt = dout + b * T * C + t * C;
    const float* inp_bt = inp + b * T * C + t * C;
    float* dinp_bt = dinp + b * T * C + t * C;
    const float mean_bt = mean[b * T + t];
    const float rstd_bt = rstd[b * T + t];

    // first: two reduce operations
    float dnorm_mean = 0.0f;
    float dnorm_norm_mean = 0.0f;
    for (int i = 0; i < C; i++) {
        float norm_bti = (inp_bt[i] - mean_bt) * rstd_bt;
        float dnorm_i = weight[i] * dout_bt[i];
        dnorm_mean += dnorm_i;
        dnorm_norm_mean += dnorm_i * norm_bti;
    }
    dnorm_mean = dnorm_mean / C;
    dnorm_norm_mean = dnorm_norm_mean / C;

    // now iterate again and accumulate all the gradients
    for (int i = 0; i < C; i++) {
        float norm_bti = (inp_bt[i] - mean_bt) * rstd_bt;
        float dnorm_i = weight[i] * dout_bt[i];
        // gradient contribution to bias
        atomicAdd(&dbias[i], dout_bt[i]);
        // gradient contribution to weight
        atomicAdd(&dweight[i], norm_bti * dout_bt[i]);
        // gradient contribution to input
        float dval = 0.0f;
        dval += dnorm_i; // term 1
        dval -= dnorm_mean; // term 2
        dval -= norm_bti * dnorm_norm_mean; // term 3
        dval *= rstd_bt; // final scale
        dinp_bt[i] += dval;
    }
}

// dev/cuda/encoder_forward.cu
// optimized implementation: parallelize over all of B,T,C
__global__ void encoder_forward_kernel2(floatX* out,
                               const int* inp, const floatX* wte, const floatX* wpe,
                               int B, int T, int C) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int N = B * T * C;

    if (idx < N) {
        int bt = idx / C;
        int b = bt / T;
        int t = bt % T;
        int c = idx % C;

        int ix = inp[b * T + t];

        floatX* out_btc = out + b * T * C + t * C + c;
        const floatX* wte_ix = wte + ix * C + c;
        const floatX* wpe_tc = wpe + t * C + c;
        *out_btc = (floatX)((float)*wte_ix + (float)*wpe_tc);
    }
}

// llmc/cuda_utils.cuh
// warp-level reduction for summing values
__device__ inline float warpReduceSum_llmc(float val) {
    for (int offset = 16; offset > 0; offset /= 2) {
        val += __shfl_xor_sync(0xFFFFFFFF, val, offset);
    }
    return val;
}
using reduction_func_t = float (*) (float);
template<reduction_func_t warp_reduction>
__device__ inline float blockReduce(float val, bool final_sync=false, float out_of_bounds=0.0f) {
    // two reductions of up to 1024 threads:
    // 1) inside warp (shuffle), 2) cross-warp (shared memory), 3) inside warp (shuffle)
    __shared__ float shared_val[WARP_SIZE];
    const int lane_id = threadIdx.x % WARP_SIZE;
    const int warp_id = threadIdx.x / WARP_SIZE;
    const int num_warps = blockDim.x / WARP_SIZE;

    float warp_val = warp_reduction(val);
    if (lane_id == 0) { shared_val[warp_id] = warp_val; }
    __syncthreads();
    warp_val = (lane_id < num_warps) ? shared_val[lane_id] : out_of_bounds;
    float block_val = warp_reduction(warp_val);

    if (final_sync) {
        __syncthreads(); // only needed in loops when effectively reusing shared memory etc.
    }
    return block_val;
}

// Performs a _deterministic_ sum reduction. determinism is achieved by requiring that only
// a single block be used.
template<class Float>
__global__ void global_sum_single_block_kernel(float* result, const Float* values, size_t count) {
    assert(gridDim.x == 1);     // only a single block!
    float thread_sum = 0;
    for(size_t index = threadIdx.x; index < count; index += blockDim.x) {
        thread_sum += (float)values[index];
    }

    float reduction = blockReduce<warpReduceSum_llmc>(thread_sum, true);
    if(threadIdx.x == 0) {
        *result = reduction;
    }
}
template __global__ void global_sum_single_block_kernel<float>(float* result, const float* values, size_t count);
#endif // PORTS10_LLMC

#ifdef PORTS10_LLMC_NOFAST
// dev/cuda/matmul_backward_bias.cu
__global__ void matmul_backward_bias_kernel1(floatX* dbias, const floatX* dout, int B, int T, int OC) {
    extern __shared__ float shared[];
    int o = blockIdx.x; // range [0, OC)
    int tid = threadIdx.x; // range [0, block_size)
    int block_size = blockDim.x;
    const floatX* x = dout + o;
    // thread coarsening
    float sum = 0.0;
    for (int i = tid; i < B * T; i += block_size) {
        sum += (float)x[i * OC];
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
        dbias[o] = (floatX)((float)dbias[o] + shared[0]);
    }
}
#endif // PORTS10_LLMC_NOFAST

#ifdef PORTS10_VLLM
// Stand-in for the parts of cutlass/numeric_size.h, cutlass/array.h and cutlass/array_subbyte.h
// the kernels use, with cutlass's layouts: `Array<T, N, true>` (T of 32 bits or more) stores `T
// storage[N]`; `Array<T, N, false>` (narrower T: __nv_bfloat16 here) stores the elements packed
// in 32-bit words (`uint32_t storage[N / (32 / bits)]`, alignment 4, as array_subbyte.h's
// Storage for a size that is a multiple of 32 bits) and reads and writes an element by shifts
// and masks through a reference proxy. So a `DataElem` copy is four 4-byte accesses, as vLLM's
// build makes it (not one 16-byte access: nothing aligns the array to 16).
namespace cutlass {
template <typename T> struct sizeof_bits { static constexpr int value = int(sizeof(T) * 8); };
template <typename T, int N, bool RegisterSized = (sizeof_bits<T>::value >= 32)> struct Array;
template <typename T, int N> struct Array<T, N, true> {
    using Element = T;
    static constexpr int kElements = N;
    T storage[N];
    __host__ __device__ T& operator[](int i) { return storage[i]; }
    __host__ __device__ T const& operator[](int i) const { return storage[i]; }
    __host__ __device__ void fill(T const& v) {
        #pragma unroll
        for (int i = 0; i < N; ++i) storage[i] = v;
    }
};
template <typename T, int N> struct Array<T, N, false> {
    using Element = T;
    static constexpr int kElements = N;
    static constexpr int kBits = sizeof_bits<T>::value;
    static_assert((kBits * N) % 32 == 0, "the stand-in covers sizes of whole 32-bit words");
    using Storage = uint32_t;
    static constexpr int kElementsPerStoredItem = 32 / kBits;
    static constexpr Storage kMask = (Storage(1) << kBits) - 1;
    Storage storage[N / kElementsPerStoredItem];
    struct reference {
        Storage* ptr;
        int idx;
        __host__ __device__ operator T() const {
            Storage item = (ptr[idx / kElementsPerStoredItem] >> ((idx % kElementsPerStoredItem) * kBits)) & kMask;
            uint16_t bits = uint16_t(item);
            return reinterpret_cast<T const&>(bits);
        }
        __host__ __device__ reference& operator=(T x) {
            uint16_t bits = reinterpret_cast<uint16_t const&>(x);
            int shift = (idx % kElementsPerStoredItem) * kBits;
            Storage& word = ptr[idx / kElementsPerStoredItem];
            word = (word & ~(kMask << shift)) | (Storage(bits) << shift);
            return *this;
        }
    };
    __host__ __device__ reference operator[](int i) { return reference{storage, i}; }
    __host__ __device__ T operator[](int i) const {
        Storage item = (storage[i / kElementsPerStoredItem] >> ((i % kElementsPerStoredItem) * kBits)) & kMask;
        uint16_t bits = uint16_t(item);
        return reinterpret_cast<T const&>(bits);
    }
};
// cutlass/array.h's `multiplies<Array<T, N>>` (scalar * array) and `plus<Array<T, N>>`, element
// by element.
template <typename T, int N>
__host__ __device__ Array<T, N> operator*(T const& s, Array<T, N> const& a) {
    Array<T, N> r;
    #pragma unroll
    for (int i = 0; i < N; ++i) r[i] = s * a[i];
    return r;
}
template <typename T, int N>
__host__ __device__ Array<T, N> operator+(Array<T, N> const& a, Array<T, N> const& b) {
    Array<T, N> r;
    #pragma unroll
    for (int i = 0; i < N; ++i) r[i] = a[i] + b[i];
    return r;
}
}  // namespace cutlass

// moe_permute_unpermute_kernel.inl at deae5aaa
template <typename T, bool CHECK_SKIPPED>
__global__ void expandInputRowsKernel(
    T const* unpermuted_input, T* permuted_output, int* sorted_experts,
    int const* expanded_dest_row_to_expanded_source_row,
    int* expanded_source_row_to_expanded_dest_row, int* permuted_idx,
    int64_t const* expert_first_token_offset, int64_t const num_rows,
    int64_t const* num_dest_rows, int64_t const cols, int64_t k,
    int num_local_experts) {
  // Reverse permutation map.
  // I do this so that later, we can use the source -> dest map to do the k-way
  // reduction and unpermuting. I need the reverse map for that reduction to
  // allow each threadblock to do 1 k-way reduce without atomics later in MoE. 1
  // thread block will be responsible for all k summations.
  int64_t expanded_dest_row = blockIdx.x;
  int64_t const expanded_source_row =
      expanded_dest_row_to_expanded_source_row[expanded_dest_row];
  int expert_id = sorted_experts[expanded_dest_row];

  if (threadIdx.x == 0) {
    assert(expanded_dest_row <= INT32_MAX);
    expanded_source_row_to_expanded_dest_row[expanded_source_row] =
        static_cast<int>(expanded_dest_row);
    // skip non local expert token
    if (!CHECK_SKIPPED || blockIdx.x < *num_dest_rows) {
      permuted_idx[expanded_dest_row] = expanded_source_row;
    }
  }

  if (!CHECK_SKIPPED || blockIdx.x < *num_dest_rows) {
    // Load 128-bits per thread
    constexpr int64_t ELEM_PER_THREAD = 128 / cutlass::sizeof_bits<T>::value;
    using DataElem = cutlass::Array<T, ELEM_PER_THREAD>;

    // Duplicate and permute rows
    int64_t const source_row = expanded_source_row / k;

    auto const* source_row_ptr =
        reinterpret_cast<DataElem const*>(unpermuted_input + source_row * cols);
    auto* dest_row_ptr =
        reinterpret_cast<DataElem*>(permuted_output + expanded_dest_row * cols);

    int64_t const start_offset = threadIdx.x;
    int64_t const stride = blockDim.x;
    int64_t const num_elems_in_col = cols / ELEM_PER_THREAD;

    for (int elem_index = start_offset; elem_index < num_elems_in_col;
         elem_index += stride) {
      dest_row_ptr[elem_index] = source_row_ptr[elem_index];
    }
  }
}

template <class T, class U>
__host__ __device__ constexpr static U arrayConvert(T const& input) {
  using Type = typename U::Element;
  static_assert(T::kElements == U::kElements);
  U u;
#pragma unroll
  for (int i = 0; i < U::kElements; i++) {
    u[i] = static_cast<Type>(input[i]);
  }
  return u;
}

template <typename T, typename OutputType, bool CHECK_SKIPPED>
__global__ void finalizeMoeRoutingKernel(
    T const* expanded_permuted_rows, OutputType* reduced_unpermuted_output,
    float const* scales, int const* expanded_source_row_to_expanded_dest_row,
    int64_t const orig_cols, int64_t const k, int64_t const* num_valid_ptr) {
  assert(orig_cols % 4 == 0);
  int64_t const original_row = blockIdx.x;
  auto const offset = original_row * orig_cols;
  OutputType* reduced_row_ptr = reduced_unpermuted_output + offset;
  int64_t const num_valid = *num_valid_ptr;

  // Load 128-bits per thread, according to the smallest data type we read/write
  constexpr int64_t FINALIZE_ELEM_PER_THREAD =
      128 / std::min(cutlass::sizeof_bits<OutputType>::value,
                     cutlass::sizeof_bits<T>::value);

  int64_t const start_offset = threadIdx.x;
  int64_t const stride = blockDim.x;
  int64_t const num_elems_in_col = orig_cols / FINALIZE_ELEM_PER_THREAD;

  using InputElem = cutlass::Array<T, FINALIZE_ELEM_PER_THREAD>;
  using OutputElem = cutlass::Array<OutputType, FINALIZE_ELEM_PER_THREAD>;
  using ComputeElem = cutlass::Array<float, FINALIZE_ELEM_PER_THREAD>;
  auto const* expanded_permuted_rows_v =
      reinterpret_cast<InputElem const*>(expanded_permuted_rows);
  auto* reduced_row_ptr_v = reinterpret_cast<OutputElem*>(reduced_row_ptr);

#pragma unroll
  for (int elem_index = start_offset; elem_index < num_elems_in_col;
       elem_index += stride) {
    ComputeElem thread_output;
    thread_output.fill(0);
    for (int k_idx = 0; k_idx < k; ++k_idx) {
      int64_t const expanded_original_row = original_row * k + k_idx;
      int64_t const expanded_permuted_row =
          expanded_source_row_to_expanded_dest_row[expanded_original_row];

      int64_t const k_offset = original_row * k + k_idx;
      float const row_scale = scales[k_offset];

      if (CHECK_SKIPPED && expanded_permuted_row >= num_valid) {
        continue;
      }

      auto const* expanded_permuted_rows_row_ptr =
          expanded_permuted_rows_v + expanded_permuted_row * num_elems_in_col;

      ComputeElem expert_result = arrayConvert<InputElem, ComputeElem>(
          expanded_permuted_rows_row_ptr[elem_index]);
      thread_output = thread_output + row_scale * (expert_result);
    }

    OutputElem output_elem =
        arrayConvert<ComputeElem, OutputElem>(thread_output);
    reduced_row_ptr_v[elem_index] = output_elem;
  }
}

// moe_permute_unpermute_kernel.cu at c30af866
__global__ void preprocessTopkIdKernel(int* topk_id_ptr, int size,
                                       const int* expert_map_ptr,
                                       int num_experts) {
  auto tidx = threadIdx.x;
  auto bidx = blockIdx.x;
  auto offset = bidx * blockDim.x;
  auto bound = min(offset + blockDim.x, size);
  extern __shared__ int smem_expert_map[];
  // store expert_map in smem
  for (int i = tidx; i < num_experts; i += blockDim.x) {
    smem_expert_map[i] = expert_map_ptr[i];
  }
  __syncthreads();

  // query global expert id in expert map.
  // if global expert id = -1 in exert map, plus n_expert
  // else set global expert id = exert map[global expert id]
  if (offset + tidx < bound) {
    auto topk_id = topk_id_ptr[offset + tidx];
    auto local_expert_idx = smem_expert_map[topk_id];
    if (local_expert_idx == -1) {
      topk_id += num_experts;
    } else {
      topk_id = local_expert_idx;
    }
    __syncwarp();
    topk_id_ptr[offset + tidx] = topk_id;
  }
}

// The instances the launchers of the source use for bf16 (no num_valid pointer: CHECK_SKIPPED false).
template __global__ void expandInputRowsKernel<__nv_bfloat16, false>(
    __nv_bfloat16 const*, __nv_bfloat16*, int*, int const*, int*, int*, int64_t const*, int64_t const,
    int64_t const*, int64_t const, int64_t, int);
template __global__ void finalizeMoeRoutingKernel<__nv_bfloat16, __nv_bfloat16, false>(
    __nv_bfloat16 const*, __nv_bfloat16*, float const*, int const*, int64_t const, int64_t const, int64_t const*);
#endif // PORTS10_VLLM
