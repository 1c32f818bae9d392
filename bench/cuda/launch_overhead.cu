// CPU time per launch of an empty kernel through the CUDA runtime API's <<<>>>, measured the
// way ferrocuda-bench measures raw cuLaunchKernel and the typed launch: 3 rounds of 100 000
// launches on a non-blocking stream, in batches of 500 with an uncounted synchronisation
// between batches (so the launch queue never fills and the time is the CPU's); the figure is
// the median over all batches. Built and run on the GPU machine by bench/run-on-gpu.sh.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>
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
    std::vector<double> per_batch;
    for (int r = 0; r < rounds; ++r) {
        for (int b = 0; b < launches / batch; ++b) {
            auto start = std::chrono::steady_clock::now();
            for (int i = 0; i < batch; ++i) empty<<<1, 32, 0, stream>>>();
            per_batch.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() * 1e6 / batch);
            CHECK(cudaStreamSynchronize(stream));
        }
        CHECK(cudaGetLastError());
    }
    std::sort(per_batch.begin(), per_batch.end());
    size_t n = per_batch.size();
    double median = n % 2 ? per_batch[n / 2] : (per_batch[n / 2 - 1] + per_batch[n / 2]) / 2;
    std::printf("{\"variant\": \"runtime <<<>>>\", \"us_per_launch\": %.4f}\n", median);
    return 0;
}
