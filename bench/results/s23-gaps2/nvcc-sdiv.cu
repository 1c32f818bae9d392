extern "C" __global__ void sdiv(int* out, const int* a, const int* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = a[i] / b[i]; }
extern "C" __global__ void srem(int* out, const int* a, const int* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = a[i] % b[i]; }
extern "C" __global__ void sdiv_param(int* out, const int* a, int d, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = a[i] / d; }
