extern "C" __global__ void var1(float* out, const float* a, const float* b, int C) {
  float s = a[threadIdx.x], s2 = b[threadIdx.x];
  s /= C; s2 /= C; float m = s; float var = s2 - m * m; out[threadIdx.x] = var; }
extern "C" __global__ void div1(float* out, const float* a, const float* b) {
  out[threadIdx.x] = a[threadIdx.x] / b[threadIdx.x]; }
extern "C" __global__ void divsub(float* out, const float* a, const float* b, const float* c) {
  out[threadIdx.x] = a[threadIdx.x] / b[threadIdx.x] - c[threadIdx.x]; }
extern "C" __global__ void fdividef1(float* out, const float* a, const float* b) {
  out[threadIdx.x] = __fdividef(a[threadIdx.x], b[threadIdx.x]); }
