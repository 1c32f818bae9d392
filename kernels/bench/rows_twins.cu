// CUDA C++ twins of ferrocuda-kernels' row kernels (kernels/device/src/packed.rs and lib.rs),
// the instances the row benchmark runs (bf16; AdamW and the global norm in f32): the same
// algorithm as the Rust kernel (block shape, work per thread, 16-byte accesses with the same
// cache hints, the same reductions and the same arithmetic in f32), written as plain CUDA C++
// would write it. For issue 31's "every row kernel >= 0.97x the same algorithm in CUDA C++".
//
//   nvcc -cubin -O3 -arch=sm_90 kernels/bench/rows_twins.cu -o rows_twins.cubin
//
// No --use_fast_math: where the Rust kernel calls a fast function (`fast_exp`: ex2.approx.ftz
// after a multiply; `fast_recip`: rcp.approx.ftz) the twin calls the same one (`__expf`,
// `rcp_approx` below); elsewhere both use the IEEE forms (sqrt.rn, div.rn, expf, logf).
//
// Each kernel is extern "C" with the Rust instance's symbol and parameter layout, so the Rust
// launcher launches both (`launch_in` on this cubin, `kernels/examples/bench_rows.rs`): a slice
// or an output is a pointer and its length (`usize`; elements), a `u32`/`NonZeroU32` an
// unsigned, a `#[repr(C)]` struct the same struct. Unlike the Rust kernels, the twins assume
// what the host guarantees for these launches and a CUDA C++ kernel would assume: 16-byte
// aligned rows (the Rust kernels check it at run time and fall back to element accesses).

#include <cstdint>
#include <cuda_bf16.h>

typedef unsigned long long usize;
typedef __nv_bfloat16 bf16;

// ---------------------------------------------------------------- memory helpers

// 16-byte loads and stores with the cache hints the Rust kernels use (`cache::load`/`store`).
__device__ __forceinline__ uint4 ld_first(const void* p) {
    uint4 r;
    asm("ld.global.L1::evict_first.v4.b32 {%0, %1, %2, %3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return r;
}
__device__ __forceinline__ uint4 ld_last(const void* p) {
    uint4 r;
    asm("ld.global.L1::evict_last.v4.b32 {%0, %1, %2, %3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return r;
}
__device__ __forceinline__ void st_first(void* p, uint4 v) {
    asm volatile("st.global.L1::evict_first.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// 8 bf16 (one 16-byte word) <-> 8 f32.
__device__ __forceinline__ void widen8(uint4 r, float v[8]) {
    const uint32_t w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int k = 0; k < 4; k++) {
        v[2 * k] = __uint_as_float(w[k] << 16);
        v[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
    }
}
__device__ __forceinline__ uint4 narrow8(const float v[8]) {
    uint32_t w[4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
        __nv_bfloat162 h = __floats2bfloat162_rn(v[2 * k], v[2 * k + 1]);
        w[k] = *reinterpret_cast<uint32_t*>(&h);
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}
__device__ __forceinline__ void load8_first(const bf16* p, float v[8]) { widen8(ld_first(p), v); }
__device__ __forceinline__ void load8_last(const bf16* p, float v[8]) { widen8(ld_last(p), v); }
__device__ __forceinline__ void store8(bf16* p, const float v[8]) { st_first(p, narrow8(v)); }
// f32 chunks of 8: two 16-byte words.
__device__ __forceinline__ void load8_first(const float* p, float v[8]) {
    uint4 a = ld_first(p), b = ld_first(p + 4);
    const uint32_t w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
    for (int u = 0; u < 8; u++) v[u] = __uint_as_float(w[u]);
}
__device__ __forceinline__ void store8(float* p, const float v[8]) {
    st_first(p, make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]), __float_as_uint(v[2]), __float_as_uint(v[3])));
    st_first(p + 4, make_uint4(__float_as_uint(v[4]), __float_as_uint(v[5]), __float_as_uint(v[6]), __float_as_uint(v[7])));
}
__device__ __forceinline__ float bf16_round(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }

// ---------------------------------------------------------------- block reductions

// The Rust kernels' `RuntimeBlockReduce::*_all` for blocks of whole warps: a butterfly in each
// warp, lane 0 of each warp stores its partial, a barrier, every warp folds the partials
// (a butterfly of log2 W steps when W is a power of two), a barrier so the slots can be reused.
struct Sum {
    __device__ float operator()(float a, float b) const { return a + b; }
    __device__ float2 operator()(float2 a, float2 b) const { return make_float2(a.x + b.x, a.y + b.y); }
};
struct Max {
    __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
__device__ __forceinline__ float shfl_xor(float v, int m) { return __shfl_xor_sync(0xffffffffu, v, m); }
__device__ __forceinline__ float2 shfl_xor(float2 v, int m) { return make_float2(__shfl_xor_sync(0xffffffffu, v.x, m), __shfl_xor_sync(0xffffffffu, v.y, m)); }

template <typename T, typename Op>
__device__ __forceinline__ T block_reduce_all(T v, Op op, T identity, T* slots) {
#pragma unroll
    for (int m = 16; m > 0; m >>= 1) v = op(v, shfl_xor(v, m));
    const int warps = blockDim.x / 32;
    if (warps == 1) return v;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) slots[warp] = v;
    __syncthreads();
    if ((warps & (warps - 1)) == 0) {
        v = slots[lane & (warps - 1)];
        for (int m = warps / 2; m > 0; m >>= 1) v = op(v, shfl_xor(v, m));
    } else {
        v = lane < warps ? slots[lane] : identity;
#pragma unroll
        for (int m = 16; m > 0; m >>= 1) v = op(v, shfl_xor(v, m));
    }
    __syncthreads();
    return v;
}
__device__ __forceinline__ float block_sum_all(float v) {
    __shared__ float slots[32];
    return block_reduce_all(v, Sum(), 0.0f, slots);
}
__device__ __forceinline__ float block_max_all(float v) {
    __shared__ float slots[32];
    return block_reduce_all(v, Max(), -INFINITY, slots);
}
__device__ __forceinline__ float2 block_sum2_all(float a, float b) {
    __shared__ float2 slots[32];
    return block_reduce_all(make_float2(a, b), Sum(), make_float2(0.0f, 0.0f), slots);
}

// ---------------------------------------------------------------- norms, forward

// rmsnorm_forward_packed: a block per row, 8 columns a thread (cols / 8 threads).
extern "C" __global__ void __launch_bounds__(1024, 2) rmsnorm_forward_packed_bf16(
    const bf16* x, usize nx, const bf16* weight, usize nw, bf16* out, usize nout, float* rstd, usize nrstd, unsigned cols, float eps) {
    const usize at = ((usize)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    const unsigned c = threadIdx.x * 8;
    float v[8], w[8];
    load8_first(x + at, v);
    load8_last(weight + c, w);
    float squares = 0.0f;
#pragma unroll
    for (int u = 0; u < 8; u++) squares += v[u] * v[u];
    const float s = 1.0f / sqrtf(block_sum_all(squares) / (float)cols + eps);
    float o[8];
#pragma unroll
    for (int u = 0; u < 8; u++) o[u] = v[u] * s * w[u];
    store8(out + at, o);
    if (threadIdx.x == 0) rstd[blockIdx.x] = s;
}

// rmsnorm_forward_packed16: a block per row, 16 columns a thread (cols / 16 threads), both
// 16-byte loads of x issued together and kept as loaded (raw words) across the reduction, the
// weight read after it; the launch bounds of ours (nvcc needs 40 registers here, ours 48).
extern "C" __global__ void __launch_bounds__(512, 2) rmsnorm_forward_packed16_bf16(
    const bf16* x, usize nx, const bf16* weight, usize nw, bf16* out, usize nout, float* rstd, usize nrstd, unsigned cols, float eps) {
    const usize at = ((usize)blockIdx.x * blockDim.x + threadIdx.x) * 16;
    const unsigned c = threadIdx.x * 16;
    const uint4 r0 = ld_first(x + at), r1 = ld_first(x + at + 8);
    float squares = 0.0f;
    {
        float v0[8], v1[8];
        widen8(r0, v0);
        widen8(r1, v1);
#pragma unroll
        for (int u = 0; u < 8; u++) squares += v0[u] * v0[u] + v1[u] * v1[u];
    }
    const float s = 1.0f / sqrtf(block_sum_all(squares) / (float)cols + eps);
    const uint4 q0 = ld_last(weight + c), q1 = ld_last(weight + c + 8);
    float v0[8], v1[8], w0[8], w1[8], o0[8], o1[8];
    widen8(r0, v0);
    widen8(r1, v1);
    widen8(q0, w0);
    widen8(q1, w1);
#pragma unroll
    for (int u = 0; u < 8; u++) {
        o0[u] = v0[u] * s * w0[u];
        o1[u] = v1[u] * s * w1[u];
    }
    store8(out + at, o0);
    store8(out + at + 8, o1);
    if (threadIdx.x == 0) rstd[blockIdx.x] = s;
}

// add_rmsnorm_forward_packed: sum = round(x + residual), out = rmsnorm(sum).
extern "C" __global__ void __launch_bounds__(1024, 2) add_rmsnorm_forward_packed_bf16(
    const bf16* x, usize nx, const bf16* residual, usize nr, const bf16* weight, usize nw, bf16* out, usize nout, bf16* sum, usize nsum,
    float* rstd, usize nrstd, unsigned cols, float eps) {
    const usize at = ((usize)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    const unsigned c = threadIdx.x * 8;
    float a[8], b[8], w[8], h[8];
    load8_first(x + at, a);
    load8_first(residual + at, b);
    load8_last(weight + c, w);
    float squares = 0.0f;
#pragma unroll
    for (int u = 0; u < 8; u++) {
        h[u] = bf16_round(a[u] + b[u]);
        squares += h[u] * h[u];
    }
    const float s = 1.0f / sqrtf(block_sum_all(squares) / (float)cols + eps);
    store8(sum + at, h);
    float o[8];
#pragma unroll
    for (int u = 0; u < 8; u++) o[u] = h[u] * s * w[u];
    store8(out + at, o);
    if (threadIdx.x == 0) rstd[blockIdx.x] = s;
}

// layernorm_forward_packed16: a block per row, 16 columns a thread; one reduction of the sums
// of (v - shift) and (v - shift)^2 with shift the row's first value.
extern "C" __global__ void __launch_bounds__(256, 4) layernorm_forward_packed16_bf16(
    const bf16* x, usize nx, const bf16* weight, usize nw, const bf16* bias, usize nb, bf16* out, usize nout, float* mean, usize nmean,
    float* rstd, usize nrstd, unsigned cols, float eps) {
    const usize at = ((usize)blockIdx.x * blockDim.x + threadIdx.x) * 16;
    const unsigned c = threadIdx.x * 16;
    const float shift = __bfloat162float(x[at - c]);
    const uint4 r0 = ld_first(x + at), r1 = ld_first(x + at + 8);
    float v0[8], v1[8];
    widen8(r0, v0);
    widen8(r1, v1);
    float sum = 0.0f, squares = 0.0f;
#pragma unroll
    for (int u = 0; u < 8; u++) {
        const float d0 = v0[u] - shift, d1 = v1[u] - shift;
        sum += d0 + d1;
        squares += d0 * d0 + d1 * d1;
    }
    const float2 t = block_sum2_all(sum, squares);
    const float n = (float)cols, offset = t.x / n;
    const float variance = fmaxf(t.y / n - offset * offset, 0.0f);
    const float s = 1.0f / sqrtf(variance + eps);
    float w0[8], w1[8], b0[8], b1[8], o0[8], o1[8];
    load8_last(weight + c, w0);
    load8_last(weight + c + 8, w1);
    load8_last(bias + c, b0);
    load8_last(bias + c + 8, b1);
#pragma unroll
    for (int u = 0; u < 8; u++) {
        o0[u] = ((v0[u] - shift) - offset) * s * w0[u] + b0[u];
        o1[u] = ((v1[u] - shift) - offset) * s * w1[u] + b1[u];
    }
    store8(out + at, o0);
    store8(out + at + 8, o1);
    if (threadIdx.x == 0) {
        mean[blockIdx.x] = shift + offset;
        rstd[blockIdx.x] = s;
    }
}

// ---------------------------------------------------------------- norms, backward

// The fused backward walk (llm.c's layout): block b of G walks rows b, b + G, ...; each row's
// dx is written, and this thread's sums of dout * xhat (and dout when CENTRED) over its 8
// columns are returned. The next row's dout, x and statistics are loaded before this row's
// reduction (kept as raw words), the one after that is prefetched to L2.
template <bool CENTRED>
__device__ __forceinline__ void norm_backward_fused(const bf16* dout, usize n, const bf16* x, const bf16* weight, const float* mean, const float* rstd, usize rows,
                                                    const bf16* dresidual, bool add_dresidual, bf16* dx, unsigned cols, float dw[8], float db[8]) {
    const float nf = (float)cols;
    const unsigned c = threadIdx.x * 8;
    const usize blocks = gridDim.x;
    const usize step = blocks * blockDim.x * 8;
    float w[8];
    load8_last(weight + c, w);
    const usize chunks = n / 8;
    usize i = (usize)blockIdx.x * blockDim.x + threadIdx.x;
    usize row = blockIdx.x;
    const uint4 zero = make_uint4(0, 0, 0, 0);
    uint4 nd = i * 8 < n ? ld_first(dout + i * 8) : zero;
    uint4 nx = i * 8 < n ? ld_first(x + i * 8) : zero;
    float nm = CENTRED && row < rows ? mean[row] : 0.0f, ns = row < rows ? rstd[row] : 0.0f;
#pragma unroll
    for (int u = 0; u < 8; u++) dw[u] = db[u] = 0.0f;
    for (; i < chunks; i += (usize)gridDim.x * blockDim.x) {
        const usize at = i * 8;
        const uint4 rd = nd, rx = nx;
        const float m = nm, s = ns;
        nd = at + step < n ? ld_first(dout + at + step) : zero;
        nx = at + step < n ? ld_first(x + at + step) : zero;
        nm = CENTRED && row + blocks < rows ? mean[row + blocks] : 0.0f;
        ns = row + blocks < rows ? rstd[row + blocks] : 0.0f;
        if (at + 2 * step < n) {
            prefetch_l2(dout + at + 2 * step);
            prefetch_l2(x + at + 2 * step);
        }
        const uint4 re = add_dresidual ? ld_first(dresidual + at) : zero;
        float d[8], v[8], xhat[8];
        widen8(rd, d);
        widen8(rx, v);
        float g_sum = 0.0f, gx_sum = 0.0f;
#pragma unroll
        for (int u = 0; u < 8; u++) {
            xhat[u] = (v[u] - m) * s;
            const float g = d[u] * w[u];
            g_sum += g;
            gx_sum += g * xhat[u];
            dw[u] += d[u] * xhat[u];
            if (CENTRED) db[u] += d[u];
        }
        float g_mean = 0.0f, gx_mean;
        if (CENTRED) {
            const float2 t = block_sum2_all(g_sum, gx_sum);
            g_mean = t.x / nf;
            gx_mean = t.y / nf;
        } else {
            gx_mean = block_sum_all(gx_sum) / nf;
        }
        float e[8], o[8];
        widen8(re, e);
#pragma unroll
        for (int u = 0; u < 8; u++) o[u] = s * (d[u] * w[u] - g_mean - xhat[u] * gx_mean) + e[u];
        store8(dx + at, o);
        row += blocks;
    }
}

extern "C" __global__ void __launch_bounds__(512, 1) layernorm_backward_fused_packed_bf16(
    const bf16* dout, usize ndout, const bf16* x, usize nx, const bf16* weight, usize nw, const float* mean, usize nmean, const float* rstd, usize nrstd,
    const bf16* dresidual, usize ndres, bf16* dx, usize ndx, float* partial_dweight, usize npdw, float* partial_dbias, usize npdb, unsigned cols,
    unsigned add_dresidual) {
    float dw[8], db[8];
    norm_backward_fused<true>(dout, ndx, x, weight, mean, rstd, nrstd, dresidual, add_dresidual != 0, dx, cols, dw, db);
    const usize me = (usize)blockIdx.x * blockDim.x + threadIdx.x;
    store8(partial_dweight + me * 8, dw);
    store8(partial_dbias + me * 8, db);
}

extern "C" __global__ void __launch_bounds__(512, 1) rmsnorm_backward_fused_packed_bf16(
    const bf16* dout, usize ndout, const bf16* x, usize nx, const bf16* weight, usize nw, const float* rstd, usize nrstd, const bf16* dresidual,
    usize ndres, bf16* dx, usize ndx, float* partial_dweight, usize npdw, unsigned cols, unsigned add_dresidual) {
    float dw[8], db[8];
    norm_backward_fused<false>(dout, ndx, x, weight, rstd, rstd, nrstd, dresidual, add_dresidual != 0, dx, cols, dw, db);
    store8(partial_dweight + ((usize)blockIdx.x * blockDim.x + threadIdx.x) * 8, dw);
}

// The column sums of N partial matrices (chunks x cols), eight threads a column: warp w takes
// columns 4w .. 4w + 4, lane 4s + j sums rows s, s + 8, ... of column 4w + j (eight loads in
// flight), then three xor shuffles add the eight slices; lanes 0..4 write.
template <int N>
__device__ __forceinline__ void split_column_totals(const float* const partials[N], float* const outs[N], unsigned chunks, unsigned cols) {
    const usize warp = ((usize)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const unsigned lane = threadIdx.x % 32;
    if (warp >= cols / 4) return;
    const unsigned slice = lane / 4;
    const usize c = warp * 4 + lane % 4;
    float totals[N];
#pragma unroll
    for (int a = 0; a < N; a++) totals[a] = 0.0f;
    for (unsigned k = 0; k < chunks; k += 64) {
        float v[N][8];
#pragma unroll
        for (int u = 0; u < 8; u++) {
            const unsigned row = k + slice + 8 * u;
#pragma unroll
            for (int a = 0; a < N; a++) v[a][u] = row < chunks ? partials[a][(usize)row * cols + c] : 0.0f;
        }
#pragma unroll
        for (int u = 0; u < 8; u++)
#pragma unroll
            for (int a = 0; a < N; a++) totals[a] += v[a][u];
    }
#pragma unroll
    for (int m = 4; m <= 16; m <<= 1)
#pragma unroll
        for (int a = 0; a < N; a++) totals[a] += shfl_xor(totals[a], m);
    if (lane < 4)
#pragma unroll
        for (int a = 0; a < N; a++) outs[a][warp * 4 + lane] = totals[a];
}

extern "C" __global__ void sum_column_pairs_split(const float* partial_a, usize na, const float* partial_b, usize nb, float* out_a, usize noa, float* out_b,
                                                  usize nob, unsigned chunks, unsigned cols) {
    const float* const partials[2] = {partial_a, partial_b};
    float* const outs[2] = {out_a, out_b};
    split_column_totals<2>(partials, outs, chunks, cols);
}

extern "C" __global__ void sum_column_partials_split(const float* partial, usize np, float* out, usize no, unsigned chunks, unsigned cols) {
    const float* const partials[1] = {partial};
    float* const outs[1] = {out};
    split_column_totals<1>(partials, outs, chunks, cols);
}

// ---------------------------------------------------------------- softmax, cross-entropy

// softmax_forward_packed: a block per row, 8 columns a thread; max and sum from registers.
extern "C" __global__ void softmax_forward_packed_bf16(const bf16* x, usize nx, bf16* out, usize nout, unsigned cols) {
    const usize at = ((usize)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    float v[8];
    load8_first(x + at, v);
    float local_max = v[0];
#pragma unroll
    for (int u = 0; u < 8; u++) local_max = fmaxf(local_max, v[u]);
    const float max = block_max_all(local_max);
    float sum = 0.0f;
#pragma unroll
    for (int u = 0; u < 8; u++) {
        v[u] = __expf(v[u] - max);
    }
#pragma unroll
    for (int u = 0; u < 8; u++) sum += v[u];
    const float scale = 1.0f / block_sum_all(sum);
#pragma unroll
    for (int u = 0; u < 8; u++) v[u] *= scale;
    store8(out + at, v);
}

// The log-sum-exp of one row for the warp-per-row cross-entropy kernels: lane l reads columns
// l + 32 (j + u), eight at a time, keeps an online max and sum, and the warp combines them by
// butterfly (every lane gets the row's value). Inlined, so each kernel's code is as if written
// in place.
__device__ __forceinline__ float warp_row_lse(const bf16* x, unsigned lane, unsigned vocab) {
    float max = -3.40282347e38f, sum = 0.0f;
    for (unsigned j = 0; j < (vocab + 31) / 32; j += 8) {
        float v[8];
#pragma unroll
        for (int u = 0; u < 8; u++) {
            const unsigned col = lane + 32 * (j + u);
            v[u] = col < vocab ? __bfloat162float(x[col]) : -INFINITY;
        }
        float chunk_max = v[0];
#pragma unroll
        for (int u = 0; u < 8; u++) chunk_max = fmaxf(chunk_max, v[u]);
        if (chunk_max > max) {
            sum *= expf(max - chunk_max);
            max = chunk_max;
        }
#pragma unroll
        for (int u = 0; u < 8; u++) sum += expf(v[u] - max);
    }
#pragma unroll
    for (int m = 16; m > 0; m >>= 1) {
        const float other_max = shfl_xor(max, m), other_sum = shfl_xor(sum, m);
        const float new_max = fmaxf(max, other_max);
        sum = sum * expf(max - new_max) + other_sum * expf(other_max - new_max);
        max = new_max;
    }
    return max + logf(sum);
}

// cross_entropy_forward_backward: a warp per row (8 rows a block of 256); lane l reads columns
// l + 32 (j + u), eight at a time; an online max/sum, then one pass writing the gradient.
extern "C" __global__ void cross_entropy_forward_backward_bf16(const bf16* logits, usize nlogits, const unsigned* targets, usize ntargets, float* losses,
                                                               usize nlosses, bf16* dlogits, usize ndlogits, unsigned rows, unsigned vocab, float dloss) {
    const unsigned row = ((usize)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const unsigned lane = threadIdx.x % 32;
    if (row >= rows) return;
    const bf16* x = logits + (usize)row * vocab;
    const unsigned target = targets[row];
    const float lse = warp_row_lse(x, lane, vocab);
    float loss, scale;
    if (target < vocab) {
        loss = lse - __bfloat162float(x[target]);
        scale = dloss;
    } else if (target == 0xffffffffu) {
        loss = 0.0f;
        scale = 0.0f;
    } else {
        loss = NAN;
        scale = NAN;
    }
    if (lane == 0) losses[row] = loss;
    bf16* d = dlogits + (usize)row * vocab;
    for (unsigned j = 0; j < (vocab + 31) / 32; j += 8) {
        float v[8];
#pragma unroll
        for (int u = 0; u < 8; u++) {
            const unsigned col = lane + 32 * (j + u);
            v[u] = col < vocab ? __bfloat162float(x[col]) : 0.0f;
        }
#pragma unroll
        for (int u = 0; u < 8; u++) {
            const unsigned col = lane + 32 * (j + u);
            const float hot = col == target ? 1.0f : 0.0f;
            if (col < vocab) d[col] = __float2bfloat16_rn((expf(v[u] - lse) - hot) * scale);
        }
    }
}

// cross_entropy_forward: the fused kernel's first pass alone (loss and lse per row).
extern "C" __global__ void cross_entropy_forward_bf16(const bf16* logits, usize nlogits, const unsigned* targets, usize ntargets, float* losses, usize nlosses,
                                                      float* lse_out, usize nlse, unsigned rows, unsigned vocab) {
    const unsigned row = ((usize)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const unsigned lane = threadIdx.x % 32;
    if (row >= rows) return;
    const bf16* x = logits + (usize)row * vocab;
    const unsigned target = targets[row];
    const float lse = warp_row_lse(x, lane, vocab);
    const float loss = target < vocab ? lse - __bfloat162float(x[target]) : target == 0xffffffffu ? 0.0f : NAN;
    if (lane == 0) {
        losses[row] = loss;
        lse_out[row] = lse;
    }
}

// cross_entropy_backward_packed: 8 columns a thread, (exp(x - lse) - onehot) * dlosses[row].
extern "C" __global__ void cross_entropy_backward_packed_bf16(const bf16* logits, usize nlogits, const unsigned* targets, usize ntargets, const float* lse,
                                                              usize nlse, const float* dlosses, usize ndlosses, bf16* dlogits, usize ndlogits,
                                                              unsigned chunks_per_row) {
    const unsigned vocab = chunks_per_row * 8;
    const usize chunks = ndlogits / 8;
    for (usize i = (usize)blockIdx.x * blockDim.x + threadIdx.x; i < chunks; i += (usize)gridDim.x * blockDim.x) {
        const unsigned chunk = (unsigned)i;
        const unsigned row = chunk / chunks_per_row, c = (chunk % chunks_per_row) * 8;
        float v[8], o[8];
        load8_first(logits + i * 8, v);
        const unsigned target = targets[row];
        const float scale = target < vocab ? dlosses[row] : target == 0xffffffffu ? 0.0f : NAN;
        const float l = lse[row];
#pragma unroll
        for (int u = 0; u < 8; u++) {
            const float hot = c + u == target ? 1.0f : 0.0f;
            o[u] = (expf(v[u] - l) - hot) * scale;
        }
        store8(dlogits + i * 8, o);
    }
}

// ---------------------------------------------------------------- activations

// The Rust kernels' `sigmoid`: rcp.approx.ftz(1 + ex2.approx.ftz(-z log2 e)).
__device__ __forceinline__ float rcp_approx(float x) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}
__device__ __forceinline__ float sigmoid(float z) { return rcp_approx(1.0f + __expf(-z)); }
#define GELU_SCALE 0.7978846f
__device__ __forceinline__ float gelu(float x) {
    const float u = GELU_SCALE * (x + 0.044715f * x * x * x);
    return x * sigmoid(2.0f * u);
}
__device__ __forceinline__ float gelu_derivative(float x) {
    const float u = GELU_SCALE * (x + 0.044715f * x * x * x);
    const float s = sigmoid(2.0f * u);
    const float du = GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
    return s * (1.0f + 2.0f * x * (1.0f - s) * du);
}

// gelu_forward_packed: chunks of 8, grid-stride (one thread a chunk with the host's grid).
extern "C" __global__ void gelu_forward_packed_bf16(const bf16* x, usize nx, bf16* out, usize nout) {
    const usize chunks = nout / 8;
    for (usize i = (usize)blockIdx.x * blockDim.x + threadIdx.x; i < chunks; i += (usize)gridDim.x * blockDim.x) {
        float v[8];
        load8_first(x + i * 8, v);
#pragma unroll
        for (int u = 0; u < 8; u++) v[u] = gelu(v[u]);
        store8(out + i * 8, v);
    }
}

extern "C" __global__ void gelu_backward_packed_bf16(const bf16* x, usize nx, const bf16* dout, usize nd, bf16* dx, usize ndx) {
    const usize chunks = ndx / 8;
    for (usize i = (usize)blockIdx.x * blockDim.x + threadIdx.x; i < chunks; i += (usize)gridDim.x * blockDim.x) {
        float v[8], d[8];
        load8_first(x + i * 8, v);
        load8_first(dout + i * 8, d);
#pragma unroll
        for (int u = 0; u < 8; u++) v[u] = gelu_derivative(v[u]) * d[u];
        store8(dx + i * 8, v);
    }
}

// silu_and_mul_forward_packed: output chunk i is row i / (d / 8), columns 8 (i % (d / 8)).
extern "C" __global__ void silu_and_mul_forward_packed_bf16(const bf16* input, usize ninput, bf16* out, usize nout, unsigned chunks_per_row) {
    const usize d = (usize)chunks_per_row * 8;
    const usize chunks = nout / 8;
    for (usize i = (usize)blockIdx.x * blockDim.x + threadIdx.x; i < chunks; i += (usize)gridDim.x * blockDim.x) {
        const unsigned chunk = (unsigned)i;
        const usize row = chunk / chunks_per_row, c = (usize)(chunk % chunks_per_row) * 8;
        const usize at = row * 2 * d + c;
        float g[8], up[8], o[8];
        load8_first(input + at, g);
        load8_first(input + at + d, up);
#pragma unroll
        for (int u = 0; u < 8; u++) o[u] = g[u] * sigmoid(g[u]) * up[u];
        store8(out + i * 8, o);
    }
}

extern "C" __global__ void silu_and_mul_backward_packed_bf16(const bf16* input, usize ninput, const bf16* dout, usize nd, bf16* dinput, usize ndinput,
                                                             unsigned chunks_per_row) {
    const usize d = (usize)chunks_per_row * 8;
    const unsigned width = chunks_per_row * 2;
    const usize chunks = ndinput / 8;
    for (usize i = (usize)blockIdx.x * blockDim.x + threadIdx.x; i < chunks; i += (usize)gridDim.x * blockDim.x) {
        const unsigned chunk = (unsigned)i;
        const usize row = chunk / width;
        const unsigned cc = chunk % width;
        const bool is_gate = cc < chunks_per_row;
        const usize c = (usize)(is_gate ? cc : cc - chunks_per_row) * 8;
        const usize at = row * 2 * d + c;
        float g[8], up[8], dy[8], o[8];
        load8_first(input + at, g);
        load8_first(input + at + d, up);
        load8_first(dout + row * d + c, dy);
#pragma unroll
        for (int u = 0; u < 8; u++) {
            const float s = sigmoid(g[u]);
            o[u] = is_gate ? dy[u] * up[u] * s * (1.0f + g[u] * (1.0f - s)) : dy[u] * g[u] * s;
        }
        store8(dinput + i * 8, o);
    }
}

// rotary_embedding_packed: 8 consecutive elements a thread; cos/sin as two 16-byte loads each.
struct RopeShape {
    unsigned heads, head_dim, rotary_dim, max_positions, inverse;
};

__device__ __forceinline__ void load8_last(const float* p, float v[8]) {
    uint4 a = ld_last(p), b = ld_last(p + 4);
    const uint32_t w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
    for (int u = 0; u < 8; u++) v[u] = __uint_as_float(w[u]);
}

extern "C" __global__ void rotary_embedding_packed_bf16(const bf16* x, usize nx, const unsigned* positions, usize npositions, const float* cos, usize ncos,
                                                        const float* sin, usize nsin, bf16* out, usize nout, unsigned head_chunks, unsigned heads,
                                                        RopeShape shape) {
    const usize half = shape.rotary_dim / 2;
    const float sign = shape.inverse != 0 ? -1.0f : 1.0f;
    const usize chunks = nout / 8;
    for (usize i = (usize)blockIdx.x * blockDim.x + threadIdx.x; i < chunks; i += (usize)gridDim.x * blockDim.x) {
        const unsigned chunk = (unsigned)i;
        const unsigned row = chunk / head_chunks;
        const usize c = (usize)(chunk % head_chunks) * 8;
        const usize token = row / heads;
        const usize at = i * 8;
        float o[8];
        if (c >= 2 * half) {
            load8_first(x + at, o);
        } else {
            const bool first = c < half;
            const usize k = first ? c : c - half;
            const usize pair = at - c + k;
            float x1[8], x2[8];
            load8_first(x + pair, x1);
            load8_first(x + pair + half, x2);
            const unsigned p = token < npositions ? positions[token] : 0xffffffffu;
            if (p < shape.max_positions) {
                const usize t = (usize)p * half + k;
                float cs[8], sn[8];
                load8_last(cos + t, cs);
                load8_last(sin + t, sn);
#pragma unroll
                for (int u = 0; u < 8; u++) {
                    const float s = sign * sn[u];
                    o[u] = first ? x1[u] * cs[u] - x2[u] * s : x2[u] * cs[u] + x1[u] * s;
                }
            } else {
#pragma unroll
                for (int u = 0; u < 8; u++) o[u] = NAN;
            }
        }
        store8(out + at, o);
    }
}

// ---------------------------------------------------------------- optimiser, global norm

struct AdamWStep {
    float learning_rate, beta1, beta2, beta1_correction, beta2_correction, eps, weight_decay, grad_scale;
};

// adamw_step_packed: 8 elements a thread, all loads issued before the arithmetic.
extern "C" __global__ void adamw_step_packed_f32(float* params, usize np, const float* grads, usize ng, float* m, usize nm, float* v, usize nv, AdamWStep hp) {
    const usize chunks = np / 8;
    for (usize i = (usize)blockIdx.x * blockDim.x + threadIdx.x; i < chunks; i += (usize)gridDim.x * blockDim.x) {
        float g[8], p[8], m0[8], v0[8], p1[8], m1[8], v1[8];
        load8_first(grads + i * 8, g);
        load8_first(params + i * 8, p);
        load8_first(m + i * 8, m0);
        load8_first(v + i * 8, v0);
#pragma unroll
        for (int u = 0; u < 8; u++) {
            const float gs = g[u] * hp.grad_scale;
            m1[u] = hp.beta1 * m0[u] + (1.0f - hp.beta1) * gs;
            v1[u] = hp.beta2 * v0[u] + (1.0f - hp.beta2) * gs * gs;
            const float mean = m1[u] / hp.beta1_correction, var = v1[u] / hp.beta2_correction;
            p1[u] = p[u] - hp.learning_rate * (mean / (sqrtf(var) + hp.eps) + hp.weight_decay * p[u]);
        }
        store8(m + i * 8, m1);
        store8(v + i * 8, v1);
        store8(params + i * 8, p1);
    }
}

// sum_of_squares_packed: two chunks of 8 a thread a step, one block reduction, one atomic add
// a block.
extern "C" __global__ void __launch_bounds__(256, 8) sum_of_squares_packed_f32(const float* x, usize n, float* total, usize ntotal) {
    const usize stride = (usize)gridDim.x * blockDim.x;
    const usize chunks = n / 8;
    float sum = 0.0f;
    for (usize i = (usize)blockIdx.x * blockDim.x + threadIdx.x; i < chunks; i += 2 * stride) {
        float a[8], b[8];
        load8_first(x + i * 8, a);
        if (i + stride < chunks) {
            load8_first(x + (i + stride) * 8, b);
        } else {
#pragma unroll
            for (int u = 0; u < 8; u++) b[u] = 0.0f;
        }
#pragma unroll
        for (int u = 0; u < 8; u++) sum += a[u] * a[u];
#pragma unroll
        for (int u = 0; u < 8; u++) sum += b[u] * b[u];
    }
    // CUB-style: warp butterflies, partials through shared memory, warp 0 folds them.
#pragma unroll
    for (int m = 16; m > 0; m >>= 1) sum += shfl_xor(sum, m);
    __shared__ float slots[32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    if (lane == 0) slots[warp] = sum;
    __syncthreads();
    if (warp == 0) {
        sum = lane < warps ? slots[lane] : 0.0f;
#pragma unroll
        for (int m = 16; m > 0; m >>= 1) sum += shfl_xor(sum, m);
        if (lane == 0 && ntotal > 0) atomicAdd(total, sum);
    }
}
