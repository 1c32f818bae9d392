// Probe loops for nvcc 13.0's run-time-stride unrolling (session 23, gaps2; written here).
// scripts: bench/results/s23-gaps2/strided-unroll.sh; results: strided-unroll.md.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
extern "C" __global__ void a_max(float* out, const float* inp, int N, int C) {
  const float* x = inp + blockIdx.x * C; float m = -1e30f;
  for (int i = threadIdx.x; i < C; i += blockDim.x) m = fmaxf(m, x[i]);
  out[blockIdx.x*blockDim.x+threadIdx.x] = m; }
extern "C" __global__ void a_max_bs(float* out, const float* inp, int N, int C) {
  const float* x = inp + blockIdx.x * C; float m = -1e30f; int bs = blockDim.x;
  for (int i = threadIdx.x; i < C; i += bs) m = fmaxf(m, x[i]);
  out[blockIdx.x*blockDim.x+threadIdx.x] = m; }
extern "C" __global__ void b_sum(float* out, const float* inp, int N, int C) {
  const float* x = inp + blockIdx.x * C; float m = 0;
  for (int i = threadIdx.x; i < C; i += blockDim.x) m += x[i];
  out[blockIdx.x*blockDim.x+threadIdx.x] = m; }
extern "C" __global__ void b_sum_r(float* __restrict__ out, const float* __restrict__ inp, int N, int C) {
  const float* x = inp + blockIdx.x * C; float m = 0;
  for (int i = threadIdx.x; i < C; i += blockDim.x) m += x[i];
  out[blockIdx.x*blockDim.x+threadIdx.x] = m; }
extern "C" __global__ void c_sum2(float* out, const float* inp, int N, int C) {
  const float* x = inp + blockIdx.x * C; float s = 0, s2 = 0;
  for (int i = threadIdx.x; i < C; i += blockDim.x) { float v = x[i]; s += v; s2 += v*v; }
  out[blockIdx.x*blockDim.x+threadIdx.x] = s + s2; }
extern "C" __global__ void c_sum2_r(float* __restrict__ out, const float* __restrict__ inp, int N, int C) {
  const float* x = inp + blockIdx.x * C; float s = 0, s2 = 0;
  for (int i = threadIdx.x; i < C; i += blockDim.x) { float v = x[i]; s += v; s2 += v*v; }
  out[blockIdx.x*blockDim.x+threadIdx.x] = s + s2; }
extern "C" __global__ void d_gather_bf16(float* out, const __nv_bfloat16* dout, int BT, int OC) {
  float s = 0;
  for (int i = threadIdx.x; i < BT; i += blockDim.x) s += (float)dout[i * OC + blockIdx.x];
  out[blockIdx.x*blockDim.x+threadIdx.x] = s; }
extern "C" __global__ void e_gather_f32(float* out, const float* dout, int BT, int OC) {
  float s = 0;
  for (int i = threadIdx.x; i < BT; i += blockDim.x) s += dout[i * OC + blockIdx.x];
  out[blockIdx.x*blockDim.x+threadIdx.x] = s; }
extern "C" __global__ void f_sum_u(float* out, const float* inp, unsigned N, unsigned C) {
  const float* x = inp + blockIdx.x * C; float m = 0;
  for (unsigned i = threadIdx.x; i < C; i += blockDim.x) m += x[i];
  out[blockIdx.x*blockDim.x+threadIdx.x] = m; }
extern "C" __global__ void g_copy(float* out, const float* inp, int N, int C) {
  for (int i = threadIdx.x; i < C; i += blockDim.x) out[blockIdx.x*C+i] = __expf(inp[blockIdx.x*C + i]); }
extern "C" __global__ void h_sum_bs(float* out, const float* inp, int N, int C) {
  const float* x = inp + blockIdx.x * C; float m = 0; int bs = blockDim.x;
  for (int i = threadIdx.x; i < C; i += bs) m += x[i];
  out[blockIdx.x*blockDim.x+threadIdx.x] = m; }
extern "C" __global__ void h_sum_cast(float* out, const float* inp, int N, int C) {
  const float* x = inp + blockIdx.x * C; float m = 0;
  for (int i = threadIdx.x; i < C; i += (int)blockDim.x) m += x[i];
  out[blockIdx.x*blockDim.x+threadIdx.x] = m; }
extern "C" __global__ void h_sum2_bs(float* out, const float* inp, int N, int C) {
  const float* x = inp + blockIdx.x * C; float s = 0, s2 = 0; int bs = blockDim.x;
  for (int i = threadIdx.x; i < C; i += bs) { float v = x[i]; s += v; s2 += v*v; }
  out[blockIdx.x*blockDim.x+threadIdx.x] = s + s2; }
extern "C" __global__ void h_gather_bs(float* out, const __nv_bfloat16* dout, int BT, int OC) {
  float s = 0; int bs = blockDim.x;
  for (int i = threadIdx.x; i < BT; i += bs) s += (float)dout[i * OC + blockIdx.x];
  out[blockIdx.x*blockDim.x+threadIdx.x] = s; }
extern "C" __global__ void h_const256(float* out, const float* inp, int N, int C) {
  const float* x = inp + blockIdx.x * C; float m = 0;
  for (int i = threadIdx.x; i < C; i += 256) m += x[i];
  out[blockIdx.x*blockDim.x+threadIdx.x] = m; }
extern "C" __global__ void h_u_const256(float* out, const float* inp, unsigned N, unsigned C) {
  const float* x = inp + blockIdx.x * C; float m = 0;
  for (unsigned i = threadIdx.x; i < C; i += 256) m += x[i];
  out[blockIdx.x*blockDim.x+threadIdx.x] = m; }
extern "C" __global__ void h_u_bs(float* out, const float* inp, unsigned N, unsigned C) {
  const float* x = inp + blockIdx.x * C; float m = 0; unsigned bs = blockDim.x;
  for (unsigned i = threadIdx.x; i < C; i += bs) m += x[i];
  out[blockIdx.x*blockDim.x+threadIdx.x] = m; }
extern "C" __global__ void h_gelu_like_bs(float* out, const float* inp, int N, int C) {
  int bs = blockDim.x;
  for (int i = threadIdx.x; i < C; i += bs) { float v = inp[blockIdx.x*C+i]; out[blockIdx.x*C+i] = 0.5f*v*(1.f+tanhf(0.79f*(v+0.044f*v*v*v))); } }
extern "C" __global__ void h_grid_int(float* out, const float* inp, int n) {
  float m = 0;
  for (int i = blockIdx.x*blockDim.x+threadIdx.x; i < n; i += blockDim.x*gridDim.x) m += inp[i];
  out[blockIdx.x*blockDim.x+threadIdx.x] = m; }
extern "C" __global__ void h_grid_int_v(float* out, const float* inp, int n) {
  float m = 0; int st = blockDim.x*gridDim.x;
  for (int i = blockIdx.x*blockDim.x+threadIdx.x; i < n; i += st) m += inp[i];
  out[blockIdx.x*blockDim.x+threadIdx.x] = m; }
extern "C" __global__ void k_gather_bs_intidx(float* out, const __nv_bfloat16* dout, int BT, int OC) {
  float s = 0; int bs = blockDim.x; int idx = blockIdx.x;
  for (int i = threadIdx.x; i < BT; i += bs) s += (float)dout[i * OC + idx];
  out[blockIdx.x*blockDim.x+threadIdx.x] = s; }
extern "C" __global__ void k_gather_f32_bs_intidx(float* out, const float* dout, int BT, int OC) {
  float s = 0; int bs = blockDim.x; int idx = blockIdx.x;
  for (int i = threadIdx.x; i < BT; i += bs) s += dout[i * OC + idx];
  out[blockIdx.x*blockDim.x+threadIdx.x] = s; }
extern "C" __global__ void k_stride_f32_bs(float* out, const float* dout, int BT, int OC) {
  float s = 0; int bs = blockDim.x; int idx = blockIdx.x;
  for (int i = threadIdx.x; i < BT; i += bs) s += dout[i * 7 + idx];
  out[blockIdx.x*blockDim.x+threadIdx.x] = s; }
extern "C" __global__ void k_bf16_contig_bs(float* out, const __nv_bfloat16* x, int BT, int OC) {
  float s = 0; int bs = blockDim.x;
  for (int i = threadIdx.x; i < BT; i += bs) s += (float)x[i];
  out[blockIdx.x*blockDim.x+threadIdx.x] = s; }
extern "C" __global__ void m_u16_shift_bs(float* out, const unsigned short* x, int BT, int OC) {
  float s = 0; int bs = blockDim.x;
  for (int i = threadIdx.x; i < BT; i += bs) s += __uint_as_float(((unsigned)x[i]) << 16);
  out[blockIdx.x*blockDim.x+threadIdx.x] = s; }
extern "C" __global__ void m_asm_bs(float* out, const float* x, int BT, int OC) {
  float s = 0; int bs = blockDim.x;
  for (int i = threadIdx.x; i < BT; i += bs) { float v = x[i]; float r; asm("mov.b32 %0, %1;" : "=f"(r) : "f"(v)); s += r; }
  out[blockIdx.x*blockDim.x+threadIdx.x] = s; }
extern "C" __global__ void n_i64_f32(float* out, const float* x, int64_t d) {
  float s = 0;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) s += x[blockIdx.x*d + i];
  out[blockIdx.x*blockDim.x+threadIdx.x] = s; }
extern "C" __global__ void n_i64_bf16(float* out, const __nv_bfloat16* x, int64_t d) {
  float s = 0;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) s += __bfloat162float(x[blockIdx.x*d + i]);
  out[blockIdx.x*blockDim.x+threadIdx.x] = s; }
extern "C" __global__ void n_int_bs_pragma_bf16(float* out, const __nv_bfloat16* x, int BT) {
  float s = 0; int bs = blockDim.x;
  #pragma unroll 4
  for (int i = threadIdx.x; i < BT; i += bs) s += (float)x[i];
  out[blockIdx.x*blockDim.x+threadIdx.x] = s; }
extern "C" __global__ void n_blockdim_pragma(float* out, const float* x, int BT) {
  float s = 0;
  #pragma unroll 4
  for (int i = threadIdx.x; i < BT; i += blockDim.x) s += x[i];
  out[blockIdx.x*blockDim.x+threadIdx.x] = s; }
extern "C" __global__ void p_half_bs(float* out, const __half* x, int n) {
  float s = 0; int bs = blockDim.x;
  for (int i = threadIdx.x; i < n; i += bs) s += __half2float(x[i]);
  out[blockIdx.x*blockDim.x+threadIdx.x] = s; }
extern "C" __global__ void p_ldcs_bs(float* out, const float* x, int n) {
  float s = 0; int bs = blockDim.x;
  for (int i = threadIdx.x; i < n; i += bs) s += __ldcs(x + i);
  out[blockIdx.x*blockDim.x+threadIdx.x] = s; }
extern "C" __global__ void p_ldg_bs(float* out, const float* x, int n) {
  float s = 0; int bs = blockDim.x;
  for (int i = threadIdx.x; i < n; i += bs) s += __ldg(x + i);
  out[blockIdx.x*blockDim.x+threadIdx.x] = s; }
extern "C" __global__ void q_counted_ldcs(float4* out, const float4* x, int B, int stride) {
  float4 s = {0,0,0,0};
  for (int b = 0; b < B; b++) { float4 p = __ldcs(x + b * stride + threadIdx.x); s.x += p.x; s.y += p.y; s.z += p.z; s.w += p.w; }
  out[blockIdx.x*blockDim.x+threadIdx.x] = s; }
extern "C" __global__ void q_counted_plain(float* out, const float* x, int B, int stride) {
  float s = 0;
  for (int b = 0; b < B; b++) s += x[b * stride + threadIdx.x];
  out[blockIdx.x*blockDim.x+threadIdx.x] = s; }
extern "C" __global__ void q_counted_bf16(float* out, const __nv_bfloat16* x, int B, int stride) {
  float s = 0;
  for (int b = 0; b < B; b++) s += __bfloat162float(x[b * stride + threadIdx.x]);
  out[blockIdx.x*blockDim.x+threadIdx.x] = s; }
extern "C" __global__ void q_blockdim_ldcs_sized(float* out, const float* x, int n) {
  float s = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) s += __ldcs(x + i);
  out[blockIdx.x*blockDim.x+threadIdx.x] = s; }
