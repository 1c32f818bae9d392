// The CUDA C++ twin of the Rust Hopper GEMM `gemm_bf16_tn` (bench/hopper/src/gemm.rs): the same
// algorithm, the same tile sizes, the same instructions, written as a CUDA engineer would with
// inline PTX, compiled at run time by NVRTC for sm_90a (`hopper-gemm` does it), so the two are
// measured side by side on one GPU in one run.
//
// C (M x N, row-major bf16) = A (M x K, row-major) · Bᵀ, B N x K row-major, f32 accumulation.
// Per block (384 threads, persistent over the 128x256 output tiles): warpgroup 0 gives up
// registers and one of its threads issues the TMA loads (A 128x64, B 256x64, 128-byte swizzle)
// into a 4-stage mbarrier pipeline; warpgroups 1 and 2 take 240 registers, wait for a full stage,
// issue four wgmma m64n256k16 (K = 64), keep one group in flight, release the previous stage, and
// finally store their 64x256 f32 accumulators as bf16.
//
// Parameters, as the Rust kernel's: the generic addresses of the two tensor maps in global
// memory, C as bf16 pairs, and M, N, K (multiples of 128, 256 and 64; the host checks).
// No headers: NVRTC compiles it without include paths.

typedef unsigned int u32;
typedef unsigned long long u64;

constexpr u32 BM = 128, BN = 256, BK = 64, STAGES = 4;
constexpr u32 A_TILE = BM * BK * 2, B_TILE = BN * BK * 2, STAGE = A_TILE + B_TILE;

__device__ __forceinline__ u32 shared_address(const void* pointer) {
  u32 address;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(address) : "l"(pointer));
  return address;
}

__device__ __forceinline__ void mbarrier_init(u32 bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count));
}

__device__ __forceinline__ void mbarrier_arrive(u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar));
}

__device__ __forceinline__ void mbarrier_arrive_expect_tx(u32 bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes));
}

__device__ __forceinline__ bool mbarrier_try_wait(u32 bar, u32 parity) {
  u32 done;
  asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
               : "=r"(done)
               : "r"(bar), "r"(parity));
  return done != 0;
}

__device__ __forceinline__ void mbarrier_wait(u32 bar, u32 parity) {
  while (!mbarrier_try_wait(bar, parity)) {
  }
}

__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n\tfence.proxy.async.shared::cta;" ::: "memory");
}

__device__ __forceinline__ void tensormap_acquire(const void* map) {
  asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" ::"l"(map) : "memory");
}

__device__ __forceinline__ void tma_load_2d(u32 dst, const void* map, u32 bar, int x, int y) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
      "l"(map), "r"(x), "r"(y), "r"(bar)
      : "memory");
}

template <u32 N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}

template <u32 N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// A K-major operand with 128-byte rows loaded by TMA with the 128-byte swizzle: leading byte
// offset 16, stride byte offset 1024 (8-row groups), swizzle mode 1 (the Rust `k_major_128b`).
__device__ __forceinline__ u64 descriptor_k_major_128b(u32 address) {
  return (u64)((address & 0x3ffff) >> 4) | ((u64)(16 >> 4) << 16) | ((u64)(1024 >> 4) << 32) | ((u64)1 << 62);
}

__device__ __forceinline__ u32 pack_bf16x2(float lo, float hi) {
  u32 packed;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
  return packed;
}

// One wgmma.mma_async m64n256k16 (bf16 in, f32 accumulate) with A and B from shared-memory
// descriptors, accumulating into the 128 f32 registers `d`: the Rust `m64n256k16_bf16`.
__device__ __forceinline__ void wgmma_m64n256k16_bf16(float (&d)[128], u64 desc_a, u64 desc_b) {
  asm volatile(
      "{ .reg .pred p; setp.ne.u32 p, %130, 0; "
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
      "%128, %129, p, 1, 1, 0, 0; }"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(desc_a), "l"(desc_b), "r"(1u));
}

// Keeps the compiler from moving or copying the accumulators across a wgmma wait (CUTLASS's
// warpgroup_fence_operand; the Rust `fence_accumulators_128`).
__device__ __forceinline__ void fence_accumulators(float (&d)[128]) {
#pragma unroll
  for (int i = 0; i < 128; ++i) asm volatile("" : "+f"(d[i]));
}

extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_bf16_tn_cpp(const void* a_map, const void* b_map, u32* c, u32 m, u32 n, u32 k) {
  extern __shared__ unsigned char shared[];
  const u32 tid = threadIdx.x;
  const u32 base = (shared_address(shared) + 1023) & ~1023u;
  const u32 bars = base + STAGES * STAGE;
  auto full = [=](u32 s) { return bars + 8 * s; };
  auto empty = [=](u32 s) { return bars + 8 * (STAGES + s); };
  if (tid == 0) {
    for (u32 s = 0; s < STAGES; ++s) {
      mbarrier_init(full(s), 1);
      mbarrier_init(empty(s), 8);
    }
    fence_barrier_init();
  }
  __syncthreads();
  const u32 tiles_m = m / BM;
  const u32 tiles = tiles_m * (n / BN);
  const u32 k_steps = k / BK;
  if (tid / 128 == 0) {
    setmaxnreg_dec<24>();
    if (tid == 0) {
      tensormap_acquire(a_map);
      tensormap_acquire(b_map);
      u32 step = 0;
      for (u32 tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const u32 tm = tile % tiles_m, tn = tile / tiles_m;
        for (u32 kb = 0; kb < k_steps; ++kb, ++step) {
          const u32 s = step % STAGES;
          mbarrier_wait(empty(s), ((step / STAGES) & 1) ^ 1);
          mbarrier_arrive_expect_tx(full(s), STAGE);
          const u32 dst = base + s * STAGE;
          tma_load_2d(dst, a_map, full(s), kb * BK, tm * BM);
          tma_load_2d(dst + A_TILE, b_map, full(s), kb * BK, tn * BN);
        }
      }
    }
  } else {
    setmaxnreg_inc<240>();
    const u32 consumer = tid / 128 - 1;
    const u32 lane = tid % 32;
    const u32 warp = (tid % 128) / 32;
    u32 step = 0;
    for (u32 tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      const u32 tm = tile % tiles_m, tn = tile / tiles_m;
      float acc[128];
#pragma unroll
      for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
      for (u32 kb = 0; kb < k_steps; ++kb, ++step) {
        const u32 s = step % STAGES;
        mbarrier_wait(full(s), (step / STAGES) & 1);
        const u32 a_tile = base + s * STAGE + consumer * 64 * 128;
        const u32 b_tile = base + s * STAGE + A_TILE;
        wgmma_fence();
#pragma unroll
        for (u32 j = 0; j < 4; ++j) {
          wgmma_m64n256k16_bf16(acc, descriptor_k_major_128b(a_tile + 32 * j), descriptor_k_major_128b(b_tile + 32 * j));
        }
        wgmma_commit();
        // This step's group may still run; the previous one is done, so its stage is released.
        wgmma_wait<1>();
        fence_accumulators(acc);
        if (lane == 0 && kb > 0) mbarrier_arrive(empty((step + STAGES - 1) % STAGES));
      }
      wgmma_wait<0>();
      fence_accumulators(acc);
      if (lane == 0 && k_steps > 0) mbarrier_arrive(empty((step + STAGES - 1) % STAGES));
      const u32 row = tm * BM + consumer * 64 + warp * 16 + lane / 4;
      const u32 col0 = tn * BN + 2 * (lane % 4);
#pragma unroll
      for (u32 i = 0; i < 32; ++i) {
        const u32 col = col0 + 8 * i;
        c[(row * n + col) / 2] = pack_bf16x2(acc[4 * i], acc[4 * i + 1]);
        c[((row + 8) * n + col) / 2] = pack_bf16x2(acc[4 * i + 2], acc[4 * i + 3]);
      }
    }
  }
}
