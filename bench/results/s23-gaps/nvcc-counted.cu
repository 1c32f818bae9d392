// Session 23, helper gaps (issue 30, tenth port's gap 4): the loops that `unroll::counted` and
// `unroll::counted_loads_first` are checked against, in CUDA C++, for their SASS (nvcc -cubin
// -arch=sm_90 + nvdisasm here; no GPU). Written for this comparison, after the public sources'
// loops (llm.c's layernorm_backward_kernel1 as bench/ports10/cuda/ports10.cu quotes it; vLLM's
// finalizeMoeRoutingKernel loop over `k` experts, with a 16-byte pack, which is what our port
// loads, where the twin's cutlass stand-in reads four 4-byte words).
#include <cuda_bf16.h>
#include <cstdint>

#ifndef UNROLL_K
#define UNROLL_K 4
#endif
constexpr int kUnrollK = UNROLL_K;

// llm.c's loops with `#pragma unroll 4` written on each (nvcc's own choice without it is
// `l2_default`): the comparison for `unroll::counted::<4>`.
extern "C" __global__ void l2_pragma4(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                                      const float* weight, const float* mean, const float* rstd, int B, int T, int C) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * T) return;
    int b = idx / T, t = idx % T;
    const float* dout_bt = dout + b * T * C + t * C;
    const float* inp_bt = inp + b * T * C + t * C;
    float* dinp_bt = dinp + b * T * C + t * C;
    const float mean_bt = mean[b * T + t], rstd_bt = rstd[b * T + t];
    float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
#pragma unroll 4
    for (int i = 0; i < C; i++) {
        float norm_bti = (inp_bt[i] - mean_bt) * rstd_bt;
        float dnorm_i = weight[i] * dout_bt[i];
        dnorm_mean += dnorm_i;
        dnorm_norm_mean += dnorm_i * norm_bti;
    }
    dnorm_mean = dnorm_mean / C;
    dnorm_norm_mean = dnorm_norm_mean / C;
#pragma unroll 4
    for (int i = 0; i < C; i++) {
        float norm_bti = (inp_bt[i] - mean_bt) * rstd_bt;
        float dnorm_i = weight[i] * dout_bt[i];
        atomicAdd(&dbias[i], dout_bt[i]);
        atomicAdd(&dweight[i], norm_bti * dout_bt[i]);
        float dval = 0.0f;
        dval += dnorm_i;
        dval -= dnorm_mean;
        dval -= norm_bti * dnorm_norm_mean;
        dval *= rstd_bt;
        dinp_bt[i] += dval;
    }
}

// vLLM's loop over the token's experts, a 16-byte pack (8 bf16) per expert, `#pragma unroll
// UNROLL_K` (4: the comparison for `unroll::counted_loads_first::<4, _>`).
struct alignas(16) Pack { __nv_bfloat162 h[4]; };
extern "C" __global__ void v1_pragma4(const Pack* rows, Pack* out, const float* scales, const int* map, int64_t cols_v, int64_t k) {
    int64_t const row = blockIdx.x;
    for (int col = threadIdx.x; col < cols_v; col += blockDim.x) {
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll kUnrollK
        for (int e = 0; e < k; ++e) {
            int64_t const dest = map[row * k + e];
            float const s = scales[row * k + e];
            // One 16-byte load, as the port's `Bf16x8::load` (a struct copy of four
            // `__nv_bfloat162` is four 4-byte loads).
            uint4 raw = reinterpret_cast<const uint4*>(rows)[dest * cols_v + col];
            Pack p = *reinterpret_cast<Pack*>(&raw);
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                float2 f = __bfloat1622float2(p.h[j]);
                acc[2 * j] += s * f.x;
                acc[2 * j + 1] += s * f.y;
            }
        }
        Pack o;
#pragma unroll
        for (int j = 0; j < 4; ++j) o.h[j] = __floats2bfloat162_rn(acc[2 * j], acc[2 * j + 1]);
        reinterpret_cast<uint4*>(out)[row * cols_v + col] = *reinterpret_cast<uint4*>(&o);
    }
}
