#include <cuda_bf16.h>
struct alignas(16) x128 { __nv_bfloat16 v[8]; };
extern "C" __global__ void shape_strided(x128* dwpe, const x128* dout, int B, int packs) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= packs) return;
  float accum[8] = {0};
  for (int b = 0; b < B; b++) {
    int4 p = __ldcs((const int4*)(dout + b * packs + i));
    const x128 &r = *reinterpret_cast<const x128*>(&p);
    for (int k = 0; k < 8; k++) accum[k] += __bfloat162float(r.v[k]);
  }
  x128 o; for (int k = 0; k < 8; k++) o.v[k] = __float2bfloat16(accum[k]);
  dwpe[i] = o;
}
extern "C" __global__ void shape_small_strided(float* out, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float s = 0;
  for (int j = i; j < n; j += blockDim.x) s += x[j];
  out[i] = s;
}
extern "C" __global__ void shape_strided_loop(x128* dwpe, const x128* dout, int n, int packs) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= packs) return;
  float accum[8] = {0};
  for (int j = i; j < n; j += packs) {
    int4 raw = __ldcs((const int4*)(dout + j));
    const x128 &r = *reinterpret_cast<const x128*>(&raw);
    for (int k = 0; k < 8; k++) accum[k] += __bfloat162float(r.v[k]);
  }
  x128 o; for (int k = 0; k < 8; k++) o.v[k] = __float2bfloat16(accum[k]);
  dwpe[i] = o;
}
