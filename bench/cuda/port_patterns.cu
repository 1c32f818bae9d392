// CUDA C++ twins of issue 30's benchmark kernels (tests/kernels/src/port_patterns.rs), written
// as the public sources write them. Same symbols and parameter layouts as the Rust kernels: a
// slice or output arrives as a pointer and a length (usize), a u32 as an unsigned.
// No headers: NVRTC compiles it as it is (the cub twin is in port_patterns_cub.cu).

typedef unsigned long long usize;

#define GELU_SCALING_FACTOR 0.7978845608f  // sqrtf(2.0f / M_PI)

// llm.c dev/cuda/gelu_backward.cu, kernel 1 (fp32), compiled with and without --use_fast_math
// (the same symbol in two programs: p30_gelu_backward_fast and p30_gelu_backward).
#ifndef GELU_SYMBOL
#define GELU_SYMBOL p30_gelu_backward
#endif
extern "C" __global__ void GELU_SYMBOL(const float* inp, usize n_inp, const float* dout, usize n_dout, float* dinp, usize n_dinp) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n_dinp && i < n_inp && i < n_dout) {
        float x = inp[i];
        float cube = 0.044715f * x * x * x;
        float tanh_arg = GELU_SCALING_FACTOR * (x + cube);
        float tanh_out = tanhf(tanh_arg);
        float coshf_out = coshf(tanh_arg);
        float sech_out = 1.0f / (coshf_out * coshf_out);
        float local_grad = 0.5f * (1.0f + tanh_out) + x * 0.5f * sech_out * GELU_SCALING_FACTOR * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] = local_grad * dout[i];
    }
}

// A float4 copy-and-scale as llm.c reads its x128 packs: a plain 16-byte load (LDG.E.128) of a
// const pointer, a 16-byte store.
extern "C" __global__ void p30_load16_input(const float4* x, usize n_x, float4* out, usize n_out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n_out && i < n_x) {
        float4 v = x[i];
        out[i] = make_float4(v.x * 2.0f, v.y * 2.0f, v.z * 2.0f, v.w * 2.0f);
    }
}

// llm.c's block reduction (llmc/cuda_utils.cuh blockReduce<warpReduceSum>): warp shuffles, one
// shared slot per warp, the warps' sums folded by every thread's warp; here the result is
// written by thread 0. The block size is the launch's.
__device__ __forceinline__ float warp_reduce_sum(float v) {
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffff, v, offset);
    return v;
}

extern "C" __global__ void p30_row_sum_unchecked(const float* x, usize n_x, unsigned cols, float* sums, usize n_sums) {
    __shared__ float shared[32];
    const float* row = x + (usize)blockIdx.x * cols;
    float s = 0.0f;
    for (unsigned c = threadIdx.x; c < cols; c += blockDim.x) s += row[c];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    float warp_sum = warp_reduce_sum(s);
    if (lane == 0) shared[warp] = warp_sum;
    __syncthreads();
    float v = (lane < warps) ? shared[lane] : 0.0f;
    float total = warp_reduce_sum(v);
    if (threadIdx.x == 0 && blockIdx.x < n_sums) sums[blockIdx.x] = total;
}
