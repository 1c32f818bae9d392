// The C++ reference for collectives/examples/allreduce_bench.rs: the same protocol on libnccl
// directly (one thread per GPU, f32 sum out of place, a barrier per size, warm-up, `iters`
// calls between two events, the slowest rank's time, the result checked).
//
// Build on the GPU machine (no nccl.h needed: the few prototypes are declared below, NCCL's
// stable 2.x C ABI):
//   nvcc -O2 -std=c++20 -o nccl_allreduce_ref nccl_allreduce_ref.cu -L/usr/lib/x86_64-linux-gnu -l:libnccl.so.2 -lpthread
// (nvcc refuses a .so path as an input file: name the library with -l:)
// Prints lines `<impl> <bytes> <time_us> <algbw_GBps> <busbw_GBps>`.
#include <cuda_runtime.h>
#include <algorithm>
#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

extern "C" {
typedef struct ncclComm* ncclComm_t;
typedef struct { char internal[128]; } ncclUniqueId;
int ncclGetVersion(int* version);
int ncclGetUniqueId(ncclUniqueId* id);
int ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank);
int ncclAllReduce(const void* send, void* recv, size_t count, int datatype, int op, ncclComm_t comm, cudaStream_t stream);
int ncclCommDestroy(ncclComm_t comm);
const char* ncclGetErrorString(int result);
}
static const int ncclFloat32 = 7, ncclSum = 0;

#define CHECK_CUDA(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)
#define CHECK_NCCL(x) do { int r = (x); if (r != 0) { fprintf(stderr, "%s: %s\n", #x, ncclGetErrorString(r)); exit(1); } } while (0)

int main(int argc, char** argv) {
  size_t max_bytes = (argc > 1) ? strtoull(argv[1], nullptr, 10) : (size_t(1) << 30);
  int world = 0;
  CHECK_CUDA(cudaGetDeviceCount(&world));
  if (world < 2) { fprintf(stderr, "needs 2 GPUs\n"); return 1; }
  int version = 0;
  CHECK_NCCL(ncclGetVersion(&version));
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  printf("# %d x %s, NCCL %d.%d.%d (C++ reference on libnccl)\n", world, prop.name, version / 10000, version % 10000 / 100, version % 100);
  ncclUniqueId id;
  CHECK_NCCL(ncclGetUniqueId(&id));
  std::barrier sync(world);
  std::vector<double> times(world);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      CHECK_CUDA(cudaSetDevice(rank));
      ncclComm_t comm;
      CHECK_NCCL(ncclCommInitRank(&comm, world, id, rank));
      cudaStream_t stream;
      CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      size_t max_count = max_bytes / 4;
      float *x, *y;
      CHECK_CUDA(cudaMalloc(&x, max_bytes));
      CHECK_CUDA(cudaMalloc(&y, max_bytes));
      std::vector<float> host(max_count, float(rank + 1));
      CHECK_CUDA(cudaMemcpy(x, host.data(), max_bytes, cudaMemcpyHostToDevice));
      cudaEvent_t start, end;
      CHECK_CUDA(cudaEventCreate(&start));
      CHECK_CUDA(cudaEventCreate(&end));
      float want = float(world * (world + 1) / 2);
      for (size_t bytes = 8; bytes <= max_bytes; bytes *= 2) {
        size_t count = bytes / 4;
        int warmup = bytes <= (1 << 20) ? 10 : 5, iters = bytes <= (1 << 20) ? 100 : 20;
        sync.arrive_and_wait();
        for (int i = 0; i < warmup; ++i) CHECK_NCCL(ncclAllReduce(x, y, count, ncclFloat32, ncclSum, comm, stream));
        CHECK_CUDA(cudaStreamSynchronize(stream));
        sync.arrive_and_wait();
        CHECK_CUDA(cudaEventRecord(start, stream));
        for (int i = 0; i < iters; ++i) CHECK_NCCL(ncclAllReduce(x, y, count, ncclFloat32, ncclSum, comm, stream));
        CHECK_CUDA(cudaEventRecord(end, stream));
        CHECK_CUDA(cudaEventSynchronize(end));
        float ms = 0;
        CHECK_CUDA(cudaEventElapsedTime(&ms, start, end));
        size_t check = std::min(count, size_t(4096));
        CHECK_CUDA(cudaMemcpy(host.data(), y + (count - check), check * 4, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < check; ++i) if (host[i] != want) { fprintf(stderr, "rank %d: wrong result at %zu B\n", rank, bytes); exit(1); }
        times[rank] = ms * 1e3 / iters;
        sync.arrive_and_wait();
        if (rank == 0) {
          double slowest = *std::max_element(times.begin(), times.end());
          double algbw = bytes / (slowest * 1e-6) / 1e9;
          printf("cpp-nccl %zu %.2f %.3f %.3f\n", bytes, slowest, algbw, algbw * 2.0 * (world - 1) / world);
          fflush(stdout);
        }
        sync.arrive_and_wait();
      }
      CHECK_NCCL(ncclCommDestroy(comm));
    });
  }
  for (auto& t : threads) t.join();
  return 0;
}
