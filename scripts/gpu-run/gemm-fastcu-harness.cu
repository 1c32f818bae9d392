// Times fast.cu's kernel 12 (pranjalssh/fast.cu, examples/matmul/matmul_12.cuh, fetched and
// built on the GPU machine: never copied into this repository) beside cuBLAS, with the same
// burst / sustained windows and nvidia-smi sampling as `hopper-gemm` (bench/hopper): issue 31's
// "ours, cuBLAS and fast.cu's kernel 12 in one job". This file is ferrocuda's harness only;
// the kernel and its launcher (runKernel12: tensor maps and Hilbert schedule built once per M,
// 128 blocks in clusters of 2) are fast.cu's, included from the folder given with -I.
//
//   nvcc -std=c++17 -O3 -DNDEBUG -arch=sm_90a --expt-relaxed-constexpr -w \
//        -I <fast.cu>/examples/matmul gemm-fastcu-harness.cu -lcublas -lcuda -o gemm-fastcu
//   ./gemm-fastcu 4096,8192
//
// Problem: C = A · Bᵀ, A m x k and B n x k row-major bf16 (both K-major, cuBLAS's "TN", the
// same as ours). Kernel 12 stores C transposed (n rows of m); cuBLAS's C is m rows of n. Each
// is checked on 512 sampled entries against an f64 host reference (bound 2^-8 |ref| +
// 2^-16 sum |a b|, as ours). Timing: CUDA events on the legacy stream; steady (median of 10
// batches of 20 back to back), burst (20 back to back after 1 s idle) and sustained (400 back
// to back per event pair), each window's SM clock and power from nvidia-smi sampled every
// 50 ms during the whole run. Output lines start "fastcu" so that they stand apart.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda/barrier>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <algorithm>
#include <cassert>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

typedef __nv_bfloat16 bf16;
#define CEIL_DIV(M, N) (((M) + (N)-1) / (N))
static void cudaCheckAt(cudaError_t error, const char *file, int line) {
  if (error != cudaSuccess) {
    printf("fastcu FAIL CUDA error at %s:%d: %s\n", file, line, cudaGetErrorString(error));
    exit(1);
  }
}
#define cudaCheck(err) (cudaCheckAt(err, __FILE__, __LINE__))

#include "matmul_12.cuh"

using Clock = std::chrono::steady_clock;

// nvidia-smi in the background, each sample stamped on arrival.
struct Sampler {
  std::mutex lock;
  std::vector<std::tuple<Clock::time_point, double, double>> samples;
  FILE *pipe = nullptr;
  std::thread reader;
  // Power is power.draw.instant (power.draw is a one-second average on recent drivers);
  // drivers without the field fall back to power.draw.
  void start() {
    for (const char *field : {"power.draw.instant", "power.draw"}) {
      std::string command = std::string("nvidia-smi --query-gpu=clocks.sm,") + field + " --format=csv,noheader,nounits -lms 50 -i 0 2>/dev/null";
      pipe = popen(command.c_str(), "r");
      if (!pipe) return;
      char line[256];
      double clock, power;
      if (!fgets(line, sizeof line, pipe) || sscanf(line, "%lf , %lf", &clock, &power) != 2) {
        pclose(pipe);
        pipe = nullptr;
        continue;
      }
      printf("fastcu sampler: clocks.sm and %s every 50 ms\n", field);
      samples.emplace_back(Clock::now(), clock, power);
      reader = std::thread([this] {
        char line[256];
        while (fgets(line, sizeof line, pipe)) {
          double clock, power;
          if (sscanf(line, "%lf , %lf", &clock, &power) == 2) {
            std::lock_guard<std::mutex> guard(lock);
            samples.emplace_back(Clock::now(), clock, power);
          }
        }
      });
      reader.detach();
      usleep(300000);
      return;
    }
  }
  std::string window(Clock::time_point from, Clock::time_point to) {
    std::lock_guard<std::mutex> guard(lock);
    std::vector<double> clocks, powers;
    auto late = to + std::chrono::milliseconds(60);
    for (auto &[t, c, p] : samples)
      if (t >= from && t <= late) clocks.push_back(c), powers.push_back(p);
    const char *note = "samples inside";
    if (clocks.empty()) {
      note = "first sample after the start";
      for (auto &[t, c, p] : samples)
        if (t >= from) { clocks.push_back(c), powers.push_back(p); break; }
    }
    if (clocks.empty()) return "no nvidia-smi sample";
    size_t count = clocks.size();
    double lo = *std::min_element(clocks.begin(), clocks.end()), hi = *std::max_element(clocks.begin(), clocks.end());
    std::sort(clocks.begin(), clocks.end());
    std::sort(powers.begin(), powers.end());
    char text[200];
    snprintf(text, sizeof text, "SM clock %.0f MHz (%.0f..%.0f), power %.0f W (%zu %s)", clocks[count / 2], lo, hi, powers[count / 2], count, note);
    return text;
  }
};

// Uniform bf16 in [-1, 1) from a hash of the index (the same on host and device).
__host__ __device__ inline float value_of(unsigned long long i, unsigned long long seed) {
  unsigned long long x = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed;
  x ^= x >> 31; x *= 0xbf58476d1ce4e5b9ull; x ^= x >> 29;
  return 2.0f * (float)(x >> 40) / (float)(1ull << 24) - 1.0f;
}
__global__ void fill(bf16 *out, unsigned long long count, unsigned long long seed) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < count; i += (unsigned long long)gridDim.x * blockDim.x)
    out[i] = __float2bfloat16(value_of(i, seed));
}

int main(int argc, char **argv) {
  std::vector<int> sizes = {4096, 8192};
  if (argc > 1) {
    sizes.clear();
    for (char *s = strtok(argv[1], ","); s; s = strtok(nullptr, ",")) sizes.push_back(atoi(s));
  }
  cudaDeviceProp prop;
  cudaCheck(cudaGetDeviceProperties(&prop, 0));
  printf("fastcu device: %s (%d SMs); kernel 12 of pranjalssh/fast.cu, 128 blocks in clusters of 2\n", prop.name, prop.multiProcessorCount);
  cublasHandle_t handle;
  cublasCreate(&handle);
  Sampler sampler;
  sampler.start();
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  bool ok = true;
  for (int side : sizes) {
    long m = side, n = side, k = side;
    bf16 *a, *b, *c12, *cref;
    cudaCheck(cudaMalloc(&a, sizeof(bf16) * m * k));
    cudaCheck(cudaMalloc(&b, sizeof(bf16) * n * k));
    cudaCheck(cudaMalloc(&c12, sizeof(bf16) * m * n));
    cudaCheck(cudaMalloc(&cref, sizeof(bf16) * m * n));
    fill<<<1024, 256>>>(a, m * k, 11 + side);
    fill<<<1024, 256>>>(b, n * k, 29 + side);
    cudaCheck(cudaMemset(c12, 0xff, sizeof(bf16) * m * n));
    cudaCheck(cudaMemset(cref, 0xff, sizeof(bf16) * m * n));
    float alpha = 1, beta = 0;
    // Row-major C (m x n) = A · Bᵀ: column-major Cᵀ (n x m) = op_T(B as k x n) · (A as k x m).
    auto blas = [&](bf16 *c) {
      cublasStatus_t status = cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, b, CUDA_R_16BF, k, a, CUDA_R_16BF, k, &beta, c,
                                           CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
      if (status != CUBLAS_STATUS_SUCCESS) { printf("fastcu FAIL cublasGemmEx %d\n", (int)status); exit(1); }
    };
    auto k12 = [&]() { runKernel12(m, n, k, a, b, c12, nullptr); };
    blas(cref);
    k12();
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaGetLastError());
    // Sampled check against f64 (kernel 12's C is n rows of m).
    std::vector<bf16> got12(m * n), gotref(m * n);
    cudaCheck(cudaMemcpy(got12.data(), c12, sizeof(bf16) * m * n, cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(gotref.data(), cref, sizeof(bf16) * m * n, cudaMemcpyDeviceToHost));
    int bad12 = 0, badref = 0, bad12_rowmajor = 0;
    unsigned long long pick = 0x5151;
    for (int s = 0; s < 512; ++s) {
      pick = pick * 6364136223846793005ull + 1442695040888963407ull;
      long i = (pick >> 33) % m;
      pick = pick * 6364136223846793005ull + 1442695040888963407ull;
      long j = (pick >> 33) % n;
      double exact = 0, magnitude = 0;
      for (long kk = 0; kk < k; ++kk) {
        double product = (double)__bfloat162float(__float2bfloat16(value_of(i * k + kk, 11 + side))) *
                         (double)__bfloat162float(__float2bfloat16(value_of(j * k + kk, 29 + side)));
        exact += product;
        magnitude += fabs(product);
      }
      double bound = fabs(exact) / 256.0 + magnitude / 65536.0;
      auto off = [&](bf16 v) { double e = fabs((double)__bfloat162float(v) - exact); return !(e <= bound); };
      bad12 += off(got12[j * m + i]);
      bad12_rowmajor += off(got12[i * n + j]);
      badref += off(gotref[i * n + j]);
    }
    bool pass = bad12 == 0 && badref == 0;
    ok &= pass;
    printf("fastcu %d^3 check: %s (512 sampled entries vs f64: kernel 12 %d outside the bound (C read as n x m; %d read as m x n), cuBLAS %d)\n", side,
           pass ? "PASS" : "FAIL", bad12, bad12_rowmajor, badref);
    double flop = 2.0 * m * n * k;
    auto timed = [&](auto &&work, int launches) {
      cudaEventRecord(start);
      for (int j = 0; j < launches; ++j) work();
      cudaEventRecord(stop);
      cudaEventSynchronize(stop);
      float ms;
      cudaEventElapsedTime(&ms, start, stop);
      return (double)ms / launches;
    };
    struct Impl { const char *name; std::function<void()> run; };
    std::vector<Impl> impls = {{"fastcu-k12", k12}, {"cuBLAS", [&] { blas(cref); }}};
    // Steady: 10 batches of 20, interleaved, after one warm-up batch each.
    std::vector<std::vector<double>> steady(impls.size());
    for (int round = 0; round < 11; ++round)
      for (size_t i = 0; i < impls.size(); ++i) {
        double ms = timed(impls[i].run, 20);
        if (round > 0) steady[i].push_back(ms);
      }
    for (size_t i = 0; i < impls.size(); ++i) {
      std::sort(steady[i].begin(), steady[i].end());
      double ms = steady[i][steady[i].size() / 2];
      printf("fastcu %d^3 steady (20 back-to-back launches per event pair) %s: %.4f ms, %.1f TFLOP/s\n", side, impls[i].name, ms, flop / (ms * 1e-3) / 1e12);
    }
    for (auto &impl : impls) {
      for (auto [mode, launches] : {std::pair<const char *, int>{"burst", 20}, {"sustained", 400}}) {
        cudaCheck(cudaDeviceSynchronize());
        if (!strcmp(mode, "burst")) sleep(1);
        auto from = Clock::now();
        double ms = timed(impl.run, launches);
        auto to = Clock::now();
        printf("fastcu %d^3 %s (%d launches) %s: %.4f ms, %.1f TFLOP/s; during it: %s\n", side, mode, launches, impl.name, ms, flop / (ms * 1e-3) / 1e12,
               sampler.window(from, to).c_str());
      }
    }
    cudaCheck(cudaGetLastError());
    cudaFree(a), cudaFree(b), cudaFree(c12), cudaFree(cref);
  }
  fflush(stdout);
  _exit(ok ? 0 : 1);
}
