// CPU time per launch of an empty kernel through the CUDA runtime API's <<<>>>, measured the
// way ferrocuda-bench measures raw cuLaunchKernel and the typed launch: 100 000 launches on a
// non-blocking stream, submitted in batches of 500 with an uncounted synchronisation between
// batches (so the launch queue never fills and the time is the CPU's), best of 3 rounds.
// Built and run on the GPU machine by bench/run-on-gpu.sh (nvcc -O3).
#include <chrono>
#include <cstdio>
#include <cuda_runtime.h>

__global__ void empty() {}

#define CHECK(call)                                                                      \
    do {                                                                                 \
        cudaError_t e = (call);                                                          \
        if (e != cudaSuccess) {                                                          \
            std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e));       \
            return 1;                                                                    \
        }                                                                                \
    } while (0)

int main() {
    const int launches = 100000, batch = 500, rounds = 3;
    cudaStream_t stream;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    for (int i = 0; i < 1000; ++i) empty<<<1, 32, 0, stream>>>();
    CHECK(cudaStreamSynchronize(stream));
    double best = 1e30;
    for (int r = 0; r < rounds; ++r) {
        double submit = 0;
        for (int b = 0; b < launches / batch; ++b) {
            auto start = std::chrono::steady_clock::now();
            for (int i = 0; i < batch; ++i) empty<<<1, 32, 0, stream>>>();
            submit += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            CHECK(cudaStreamSynchronize(stream));
        }
        CHECK(cudaGetLastError());
        double us = submit * 1e6 / launches;
        if (us < best) best = us;
    }
    std::printf("{\"variant\": \"runtime <<<>>>\", \"us_per_launch\": %.4f}\n", best);
    return 0;
}
