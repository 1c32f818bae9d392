// llm.c's device helpers (karpathy/llm.c, commit f1e2ace651495b74ae22d45d1723443fd00ecd3a,
// llmc/cuda_utils.cuh), as llm.c writes them: Packed128 and its 16-byte loads and stores,
// the warp reductions and blockReduce. One copy for the CUDA C++ twins of issue 30's ports
// (bench/cuda/ports.cu, bench/ports2/cuda/ports2.cu, bench/ports3/cuda/ports3.cu,
// bench/ports4/cuda/ports4.cu, bench/ports5/cuda/ports5.cu), which include it in their llm.c part; their kernels stay as
// their sources wrote them.
//
// The including file defines WARP_SIZE first (llm.c's cuda_common.h: 32U) and its floatX /
// x128 typedefs after. The twins' files include it as
//   #if __has_include("llmc_cuda_utils.cuh")     // staged beside the .cu (scripts/gpu-run)
//   #include "llmc_cuda_utils.cuh"
//   #else                                        // in the repository
//   #include "../../cuda/llmc_cuda_utils.cuh"
//   #endif
// so the staging scripts copy this file next to the .cu they stage.
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>
#include <string.h>

template<class ElementType>
struct alignas(16) Packed128 {
    Packed128() = default;
    __device__ explicit Packed128(int4 bits) {
        static_assert(sizeof(bits) == sizeof(payload), "Size mismatch.");
        memcpy(&payload, &bits, sizeof(bits));
    }
    __device__  static Packed128 constant(ElementType value) {
        Packed128 result;
        for(int k = 0; k < size; ++k) {
            result.payload[k] = value;
        }
        return result;
    }
    __device__ static Packed128 zeros() {
        return constant(0.f);
    }
    __device__ ElementType& operator[](int index) {
        return payload[index];
    }
    __device__ const ElementType& operator[](int index) const {
        return payload[index];
    }
    __device__ int4 get_bits() const {
        int4 bits;
        static_assert(sizeof(bits) == sizeof(payload), "Size mismatch.");
        memcpy(&bits, &payload, sizeof(bits));
        return bits;
    }
    static constexpr const size_t size = sizeof(int4) / sizeof(ElementType);
    ElementType payload[size];
};

template<class ElementType>
__device__ Packed128<ElementType> load128(const ElementType* address) {
    return Packed128<ElementType>{*reinterpret_cast<const int4*>(address)};
}
template<class ElementType>
__device__ Packed128<ElementType> load128cs(const ElementType* address) {
    return Packed128<ElementType>{__ldcs(reinterpret_cast<const int4*>(address))};
}
template<class ElementType>
__device__ void store128(ElementType* target, Packed128<ElementType> value) {
    *reinterpret_cast<int4*>(target) = value.get_bits();
}
template<class ElementType>
__device__ void store128cs(ElementType* target, Packed128<ElementType> value) {
    __stcs(reinterpret_cast<int4*>(target), value.get_bits());
}
template<class ElementType>
__device__ void store128cg(ElementType* target, Packed128<ElementType> value) {
    __stcg(reinterpret_cast<int4*>(target), value.get_bits());
}

// Butterfly reductions over a warp, and blockReduce: each warp's value in a `__shared__` array
// of its own per instantiation (so one call needs one barrier), folded by every warp.
__device__ inline float warpReduceSum(float val) {
    for (int offset = 16; offset > 0; offset /= 2) {
        val += __shfl_xor_sync(0xFFFFFFFF, val, offset);
    }
    return val;
}
__device__ inline float warpReduceMax(float val) {
    for (int offset = 16; offset > 0; offset /= 2) {
        val = fmaxf(val, __shfl_xor_sync(0xFFFFFFFF, val, offset));
    }
    return val;
}
using reduction_func_t = float (*) (float);
template<reduction_func_t warp_reduction>
__device__ inline float blockReduce(float val, bool final_sync=false, float out_of_bounds=0.0f) {
    __shared__ float shared_val[WARP_SIZE];
    const int lane_id = threadIdx.x % WARP_SIZE;
    const int warp_id = threadIdx.x / WARP_SIZE;
    const int num_warps = blockDim.x / WARP_SIZE;

    float warp_val = warp_reduction(val);
    if (lane_id == 0) { shared_val[warp_id] = warp_val; }
    __syncthreads();
    warp_val = (lane_id < num_warps) ? shared_val[lane_id] : out_of_bounds;
    float block_val = warp_reduction(warp_val);

    if (final_sync) {
        __syncthreads();
    }
    return block_val;
}
