// The CUDA C++ twin of gpu_kernels::llm::gelu_bf16: llm.c's gelu_forward_kernel2 with
// floatX = __nv_bfloat16, eight values per thread in one 16-byte load (x128). Same symbol and
// parameter layout as the Rust kernel (a slice arrives as a pointer and a length). Its own
// NVRTC program (it needs cuda_bf16.h, found through the CUDA include directory), so that the
// other twins compile where the header is missing.

#include <cuda_bf16.h>

typedef unsigned long long usize;

#define GELU_SCALING_FACTOR 0.7978845608f  // sqrtf(2.0f / M_PI)

// tanh.approx.f32 (sm_75+): what --use_fast_math gives tanhf, written out.
__device__ __forceinline__ float tanh_fast(float x) {
    float y;
    asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ float gelu(float x) {
    float cube = 0.044715f * x * x * x;
    return 0.5f * x * (1.0f + tanh_fast(GELU_SCALING_FACTOR * (x + cube)));
}

extern "C" __global__ void gelu_bf16(const uint4* __restrict__ input, usize n_in, uint4* __restrict__ out, usize n_out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_in || i >= n_out) return;
    uint4 packed_in = __ldcs(input + i);  // streaming: read once
    uint4 packed_out;
    const __nv_bfloat162* x = reinterpret_cast<const __nv_bfloat162*>(&packed_in);
    __nv_bfloat162* y = reinterpret_cast<__nv_bfloat162*>(&packed_out);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        float2 v = __bfloat1622float2(x[k]);
        y[k] = __floats2bfloat162_rn(gelu(v.x), gelu(v.y));
    }
    out[i] = packed_out;
}
