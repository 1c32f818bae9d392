// Session 23, helper gaps: CUDA C++ for the SASS comparisons of bench/ports10/kernels/src/s23.rs
// (nvcc -cubin -arch=sm_90 -O3 + nvdisasm here; no GPU). Written for the comparison, in the
// style of vLLM's vectorised kernels (`vec_n_t<T, N>`, `const T* __restrict__`).
#include <cuda_bf16.h>
#include <cstdint>

template <typename T, int N>
struct alignas(sizeof(T) * N) vec_n_t { T val[N]; };
using bf16x4 = vec_n_t<__nv_bfloat16, 4>;

// pack8: a thread per 8-byte pack of four bf16.
extern "C" __global__ void scale_add_bf16x4(bf16x4* __restrict__ out, const bf16x4* __restrict__ x, const bf16x4* __restrict__ y, float s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    bf16x4 a = x[i], b = y[i], o;
#pragma unroll
    for (int k = 0; k < 4; k++) o.val[k] = __float2bfloat16(__bfloat162float(a.val[k]) * s + __bfloat162float(b.val[k]));
    out[i] = o;
}

// Item 3: a block per row, strided sums, cub::BlockReduce<float, N>::Sum, thread 0 writes (the
// way vLLM's and llm.c's kernels use CUB).
#include <cub/block/block_reduce.cuh>
template <int N>
__device__ void row_sum(float* __restrict__ sums, const float* __restrict__ x, int cols) {
    using BlockReduce = cub::BlockReduce<float, N>;
    __shared__ typename BlockReduce::TempStorage temp;
    const float* row = x + (int64_t)blockIdx.x * cols;
    float s = 0.0f;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) s += row[i];
    float total = BlockReduce(temp).Sum(s);
    if (threadIdx.x == 0) sums[blockIdx.x] = total;
}
extern "C" __global__ void __launch_bounds__(256) row_sum_256(float* __restrict__ sums, const float* __restrict__ x, int cols) { row_sum<256>(sums, x, cols); }
extern "C" __global__ void __launch_bounds__(1024) row_sum_1024(float* __restrict__ sums, const float* __restrict__ x, int cols) { row_sum<1024>(sums, x, cols); }
