// The cub twin of p30_row_sum_unchecked (tests/kernels/src/port_patterns.rs): cub::BlockReduce
// for 1024 threads (cub fixes the block size at compile time), the result in thread 0.
#include <cub/block/block_reduce.cuh>

typedef unsigned long long usize;

extern "C" __global__ void p30_row_sum_unchecked(const float* x, usize n_x, unsigned cols, float* sums, usize n_sums) {
    using Reduce = cub::BlockReduce<float, 1024>;
    __shared__ typename Reduce::TempStorage temp;
    const float* row = x + (usize)blockIdx.x * cols;
    float s = 0.0f;
    for (unsigned c = threadIdx.x; c < cols; c += blockDim.x) s += row[c];
    float total = Reduce(temp).Sum(s);
    if (threadIdx.x == 0 && blockIdx.x < n_sums) sums[blockIdx.x] = total;
}
