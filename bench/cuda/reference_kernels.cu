// The CUDA C++ twins of gpu-kernels/src/examples.rs: same names, same algorithms, same
// parameter layout (a Rust slice arrives as a pointer and a length), so that ferrocuda-bench
// launches both through the same typed launcher with the same configuration.
// Compiled at benchmark time by NVRTC (no headers needed: float4/uint4 are built in).

typedef unsigned long long usize;

#define WARP_SIZE 32
#define FULL_MASK 0xffffffffu

__device__ __forceinline__ float warp_sum(float v) {
    #pragma unroll
    for (int mask = WARP_SIZE / 2; mask > 0; mask /= 2) v += __shfl_xor_sync(FULL_MASK, v, mask);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    #pragma unroll
    for (int mask = WARP_SIZE / 2; mask > 0; mask /= 2) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, mask));
    return v;
}

extern "C" __global__ void saxpy_x4(float a, const float4* __restrict__ x, usize nx, float4* __restrict__ y, usize ny) {
    usize i = (usize)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < nx && i < ny) {
        float4 xv = x[i], yv = y[i];
        y[i] = make_float4(a * xv.x + yv.x, a * xv.y + yv.y, a * xv.z + yv.z, a * xv.w + yv.w);
    }
}

extern "C" __global__ void sum_x4(const float4* __restrict__ x, usize n, float* __restrict__ out, usize out_len) {
    __shared__ float warp_sums[32];
    usize stride = (usize)gridDim.x * blockDim.x;
    float4 partial = make_float4(0.f, 0.f, 0.f, 0.f);
    for (usize i = (usize)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float4 v = x[i];
        partial.x += v.x; partial.y += v.y; partial.z += v.z; partial.w += v.w;
    }
    float thread_sum = warp_sum((partial.x + partial.y) + (partial.z + partial.w));
    unsigned lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    if (lane == 0 && warp < 32) warp_sums[warp] = thread_sum;
    __syncthreads();
    if (warp == 0) {
        unsigned warps = (blockDim.x + WARP_SIZE - 1) / WARP_SIZE;
        float block_sum = warp_sum(lane < warps ? warp_sums[lane] : 0.f);
        if (lane == 0 && out_len > 0) atomicAdd(out, block_sum);
    }
}

#define TILE 32
#define TILE_ROWS 8
extern "C" __global__ void transpose_32(const float* __restrict__ input, usize n_in, float* __restrict__ output, usize n_out,
                                        unsigned rows, unsigned cols) {
    __shared__ float tile[TILE][TILE + 1];
    usize elements = (usize)rows * cols;
    if (rows % TILE != 0 || cols % TILE != 0 || n_in < elements || n_out < elements) return;
    unsigned tx = threadIdx.x, ty = threadIdx.y;
    if (tx >= TILE || ty >= TILE_ROWS) return;
    unsigned tile_col = blockIdx.x * TILE, tile_row = blockIdx.y * TILE;
    if (tile_col >= cols || tile_row >= rows) return;
    #pragma unroll
    for (unsigned j = 0; j < TILE; j += TILE_ROWS)
        tile[ty + j][tx] = input[(usize)(tile_row + ty + j) * cols + (tile_col + tx)];
    __syncthreads();
    #pragma unroll
    for (unsigned j = 0; j < TILE; j += TILE_ROWS)
        output[(usize)(tile_col + ty + j) * rows + (tile_row + tx)] = tile[tx][ty + j];
}

#define BM 128
#define BN 128
#define BK 8
#define TT 8
extern "C" __global__ void __launch_bounds__(256) matmul_128x128(const float* __restrict__ a, usize na, const float* __restrict__ b, usize nb,
                                                                 float* __restrict__ c, usize nc, unsigned m, unsigned n, unsigned k) {
    __shared__ __align__(16) float a_tile[BK * BM];
    __shared__ __align__(16) float b_tile[BK * BN];
    bool sizes_fit = m % BM == 0 && n % BN == 0 && k % BK == 0 && na >= (usize)m * k && nb >= (usize)k * n && nc >= (usize)m * n &&
                     (((usize)a | (usize)b | (usize)c) % 16) == 0 && blockDim.x == 256;
    unsigned block_row = blockIdx.y * BM, block_col = blockIdx.x * BN;
    if (!sizes_fit || block_row >= m || block_col >= n) return;
    unsigned tid = threadIdx.x;
    unsigned a_row = tid / 2, a_col = (tid % 2) * 4;
    unsigned b_row = tid / 32, b_col = (tid % 32) * 4;
    unsigned c_row = (tid / 16) * TT, c_col = (tid % 16) * TT;
    float acc[TT][TT] = {};
    for (unsigned k0 = 0; k0 < k; k0 += BK) {
        float4 av = *reinterpret_cast<const float4*>(&a[(usize)(block_row + a_row) * k + (k0 + a_col)]);
        float4 bv = *reinterpret_cast<const float4*>(&b[(usize)(k0 + b_row) * n + (block_col + b_col)]);
        a_tile[(a_col + 0) * BM + a_row] = av.x;
        a_tile[(a_col + 1) * BM + a_row] = av.y;
        a_tile[(a_col + 2) * BM + a_row] = av.z;
        a_tile[(a_col + 3) * BM + a_row] = av.w;
        *reinterpret_cast<float4*>(&b_tile[b_row * BN + b_col]) = bv;
        __syncthreads();
        #pragma unroll
        for (unsigned kk = 0; kk < BK; ++kk) {
            float4 a_lo = *reinterpret_cast<const float4*>(&a_tile[kk * BM + c_row]);
            float4 a_hi = *reinterpret_cast<const float4*>(&a_tile[kk * BM + c_row + 4]);
            float4 b_lo = *reinterpret_cast<const float4*>(&b_tile[kk * BN + c_col]);
            float4 b_hi = *reinterpret_cast<const float4*>(&b_tile[kk * BN + c_col + 4]);
            float a_frag[TT] = {a_lo.x, a_lo.y, a_lo.z, a_lo.w, a_hi.x, a_hi.y, a_hi.z, a_hi.w};
            float b_frag[TT] = {b_lo.x, b_lo.y, b_lo.z, b_lo.w, b_hi.x, b_hi.y, b_hi.z, b_hi.w};
            #pragma unroll
            for (int i = 0; i < TT; ++i)
                #pragma unroll
                for (int j = 0; j < TT; ++j) acc[i][j] = a_frag[i] * b_frag[j] + acc[i][j];
        }
        __syncthreads();
    }
    #pragma unroll
    for (int i = 0; i < TT; ++i) {
        usize index = (usize)(block_row + c_row + i) * n + (block_col + c_col);
        *reinterpret_cast<float4*>(&c[index]) = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
        *reinterpret_cast<float4*>(&c[index + 4]) = make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]);
    }
}

// sgemm_pipelined: the same 128 x 128 x 8 tiles, two shared-memory stages (the next tile's
// global loads issued before this tile's math, stored to the other stage after it, one
// barrier per step), A depth-major with rows padded to 132, and each thread's 8 x 8 block of
// C split into 4 x 4 quadrants 64 rows / columns apart.
#define SG_A_STRIDE (BM + 4)
extern "C" __global__ void __launch_bounds__(256, 2) sgemm_pipelined(const float* __restrict__ a, usize na, const float* __restrict__ b, usize nb,
                                                                    float* __restrict__ c, usize nc, unsigned m, unsigned n, unsigned k) {
    __shared__ __align__(16) float a_tile[2][BK][SG_A_STRIDE];
    __shared__ __align__(16) float b_tile[2][BK][BN];
    const usize u32_max = 0xffffffffull;
    bool sizes_fit = m % BM == 0 && n % BN == 0 && k % BK == 0 && k != 0 && (usize)m * k <= u32_max && (usize)k * n <= u32_max &&
                     (usize)m * n <= u32_max && na >= (usize)m * k && nb >= (usize)k * n && nc >= (usize)m * n &&
                     (((usize)a | (usize)b | (usize)c) % 16) == 0 && blockDim.x == 256 && blockDim.y == 1 && blockDim.z == 1 && blockIdx.z == 0;
    if (!sizes_fit || blockIdx.x >= n / BN || blockIdx.y >= m / BM) return;
    unsigned block_row = blockIdx.y * BM, block_col = blockIdx.x * BN;
    unsigned tid = threadIdx.x;
    unsigned a_row = tid / 2, a_col = (tid % 2) * 4;
    unsigned b_row = tid / 32, b_col = (tid % 32) * 4;
    unsigned a_global = (block_row + a_row) * k + a_col;
    unsigned b_global = b_row * n + block_col + b_col;
    unsigned ty = tid / 16, tx = tid % 16;
    float acc[TT][TT] = {};

    float4 av = *reinterpret_cast<const float4*>(&a[a_global]);
    float4 bv = *reinterpret_cast<const float4*>(&b[b_global]);
    a_tile[0][a_col + 0][a_row] = av.x;
    a_tile[0][a_col + 1][a_row] = av.y;
    a_tile[0][a_col + 2][a_row] = av.z;
    a_tile[0][a_col + 3][a_row] = av.w;
    *reinterpret_cast<float4*>(&b_tile[0][b_row][b_col]) = bv;
    __syncthreads();

    unsigned stage = 0;
    for (unsigned k0 = 0; k0 < k; k0 += BK) {
        unsigned k_next = k0 + BK < k ? k0 + BK : k0;
        av = *reinterpret_cast<const float4*>(&a[a_global + k_next]);
        bv = *reinterpret_cast<const float4*>(&b[b_global + k_next * n]);
        #pragma unroll
        for (unsigned kk = 0; kk < BK; ++kk) {
            float4 a_lo = *reinterpret_cast<const float4*>(&a_tile[stage][kk][4 * ty]);
            float4 a_hi = *reinterpret_cast<const float4*>(&a_tile[stage][kk][64 + 4 * ty]);
            float4 b_lo = *reinterpret_cast<const float4*>(&b_tile[stage][kk][4 * tx]);
            float4 b_hi = *reinterpret_cast<const float4*>(&b_tile[stage][kk][64 + 4 * tx]);
            float a_frag[TT] = {a_lo.x, a_lo.y, a_lo.z, a_lo.w, a_hi.x, a_hi.y, a_hi.z, a_hi.w};
            float b_frag[TT] = {b_lo.x, b_lo.y, b_lo.z, b_lo.w, b_hi.x, b_hi.y, b_hi.z, b_hi.w};
            #pragma unroll
            for (int i = 0; i < TT; ++i)
                #pragma unroll
                for (int j = 0; j < TT; ++j) acc[i][j] = a_frag[i] * b_frag[j] + acc[i][j];
        }
        stage ^= 1;
        a_tile[stage][a_col + 0][a_row] = av.x;
        a_tile[stage][a_col + 1][a_row] = av.y;
        a_tile[stage][a_col + 2][a_row] = av.z;
        a_tile[stage][a_col + 3][a_row] = av.w;
        *reinterpret_cast<float4*>(&b_tile[stage][b_row][b_col]) = bv;
        __syncthreads();
    }
    #pragma unroll
    for (int i = 0; i < TT; ++i) {
        unsigned index = (block_row + 4 * ty + (i / 4) * 64 + i % 4) * n + block_col + 4 * tx;
        *reinterpret_cast<float4*>(&c[index]) = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
        *reinterpret_cast<float4*>(&c[index + 64]) = make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]);
    }
}

#define SOFTMAX_COLS 1024
#define ROW_VECTORS (SOFTMAX_COLS / 4)
#define V (ROW_VECTORS / 32)
extern "C" __global__ void softmax_rows_1024(const float4* __restrict__ input, usize n_in, float4* __restrict__ output, usize n_out, unsigned rows) {
    unsigned warps_per_block = blockDim.x / WARP_SIZE;
    unsigned row = blockIdx.x * warps_per_block + threadIdx.x / WARP_SIZE;
    unsigned lane = threadIdx.x % WARP_SIZE;
    usize vectors = (usize)rows * ROW_VECTORS;
    if (row >= rows || n_in < vectors || n_out < vectors) return;
    usize base = (usize)row * ROW_VECTORS + lane;
    float4 values[V];
    #pragma unroll
    for (int v = 0; v < V; ++v) values[v] = input[base + 32 * v];
    float max = __int_as_float(0xff800000);  // -infinity
    #pragma unroll
    for (int v = 0; v < V; ++v) max = fmaxf(fmaxf(fmaxf(fmaxf(max, values[v].x), values[v].y), values[v].z), values[v].w);
    max = warp_max(max);
    float sum = 0.f;
    #pragma unroll
    for (int v = 0; v < V; ++v) {
        values[v].x = __expf(values[v].x - max);
        values[v].y = __expf(values[v].y - max);
        values[v].z = __expf(values[v].z - max);
        values[v].w = __expf(values[v].w - max);
        sum += (values[v].x + values[v].y) + (values[v].z + values[v].w);
    }
    float scale = 1.f / warp_sum(sum);
    #pragma unroll
    for (int v = 0; v < V; ++v)
        output[base + 32 * v] = make_float4(values[v].x * scale, values[v].y * scale, values[v].z * scale, values[v].w * scale);
}

#define BINS 256
#define LANES 32
extern "C" __global__ void histogram_bytes(const uint4* __restrict__ data, usize n, unsigned* __restrict__ bins, usize n_bins) {
    // One copy of the bins per lane: local[bin][lane], so lane l only touches bank l.
    __shared__ unsigned local[BINS * LANES];
    if (n_bins < BINS) return;
    unsigned tid = threadIdx.x, threads = blockDim.x, lane = tid % LANES;
    for (unsigned i = tid; i < BINS * LANES; i += threads) local[i] = 0;
    __syncthreads();
    usize stride = (usize)gridDim.x * threads;
    for (usize i = (usize)blockIdx.x * threads + tid; i < n; i += stride) {
        uint4 words = data[i];
        unsigned w[4] = {words.x, words.y, words.z, words.w};
        #pragma unroll
        for (int q = 0; q < 4; ++q)
            #pragma unroll
            for (int shift = 0; shift < 32; shift += 8) atomicAdd(&local[((w[q] >> shift) & 0xff) * LANES + lane], 1u);
    }
    __syncthreads();
    for (unsigned bin = tid; bin < BINS; bin += threads) {
        unsigned count = 0;
        #pragma unroll
        for (unsigned l = 0; l < LANES; ++l) count += local[bin * LANES + (l + bin) % LANES];
        if (count != 0) atomicAdd(&bins[bin], count);
    }
}

#define ROWS_PER_THREAD 8
#define STENCIL_BLOCK_X 128
extern "C" __global__ void stencil_5pt(const float* __restrict__ input, usize n_in, float* __restrict__ output, usize n_out, unsigned rows, unsigned cols) {
    const int R = ROWS_PER_THREAD;
    usize elements = (usize)rows * cols;
    if (rows % ROWS_PER_THREAD != 0 || cols % STENCIL_BLOCK_X != 0 || n_in < elements || n_out < elements) return;
    unsigned col = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned first_row = blockIdx.y * ROWS_PER_THREAD;
    if (col >= cols || first_row >= rows) return;
    bool inner_col = col > 0 && col + 1 < cols;
    // column[i] is row first_row + i - 1.
    float column[R + 2];
    #pragma unroll
    for (int i = 0; i < R + 2; ++i) {
        unsigned row_plus_one = first_row + i;
        column[i] = row_plus_one >= 1 && row_plus_one <= rows ? input[(usize)(row_plus_one - 1) * cols + col] : 0.f;
    }
    float west[R], east[R];
    #pragma unroll
    for (int r = 0; r < R; ++r) {
        usize centre = (usize)(first_row + r) * cols + col;
        west[r] = inner_col ? input[centre - 1] : 0.f;
        east[r] = inner_col ? input[centre + 1] : 0.f;
    }
    #pragma unroll
    for (int r = 0; r < R; ++r) {
        unsigned row = first_row + r;
        float value;
        if (inner_col && row > 0 && row + 1 < rows)
            value = 0.5f * column[r + 1] + 0.125f * ((column[r] + column[r + 2]) + (west[r] + east[r]));
        else
            value = column[r + 1];
        output[(usize)row * cols + col] = value;
    }
}

// ---- Issue 23's LLM kernels (gpu-kernels/src/llm.rs), as llm.c writes them. ----

#define LN_C 768
#define LN_V (LN_C / 4 / 32)
extern "C" __global__ void layernorm_768(const float4* __restrict__ input, usize n_in, const float4* __restrict__ weight, usize n_w,
                                         const float4* __restrict__ bias, usize n_b, float4* __restrict__ out, usize n_out,
                                         float* __restrict__ mean, usize n_mean, float* __restrict__ rstd, usize n_rstd, unsigned rows) {
    unsigned row = blockIdx.x * (blockDim.x / WARP_SIZE) + threadIdx.x / WARP_SIZE;
    unsigned lane = threadIdx.x % WARP_SIZE;
    usize vectors = (usize)rows * (LN_C / 4);
    if (row >= rows || n_in < vectors || n_out < vectors || n_w < LN_C / 4 || n_b < LN_C / 4 || n_mean < rows || n_rstd < rows) return;
    const float4* x = input + (usize)row * (LN_C / 4);
    float4 v[LN_V];
    float sum = 0.f;
    #pragma unroll
    for (int i = 0; i < LN_V; ++i) {
        v[i] = __ldcs(x + lane + 32 * i);
        sum += (v[i].x + v[i].y) + (v[i].z + v[i].w);
    }
    float m = warp_sum(sum) * (1.f / LN_C);
    float squares = 0.f;
    #pragma unroll
    for (int i = 0; i < LN_V; ++i) {
        float a = v[i].x - m, b = v[i].y - m, c = v[i].z - m, d = v[i].w - m;
        squares += (a * a + b * b) + (c * c + d * d);
    }
    float s = rsqrtf(warp_sum(squares) * (1.f / LN_C) + 1e-5f);
    float4* o = out + (usize)row * (LN_C / 4);
    #pragma unroll
    for (int i = 0; i < LN_V; ++i) {
        int c = lane + 32 * i;
        float4 w = weight[c], b = bias[c];
        __stcs(o + c, make_float4((v[i].x - m) * s * w.x + b.x, (v[i].y - m) * s * w.y + b.y, (v[i].z - m) * s * w.z + b.z, (v[i].w - m) * s * w.w + b.w));
    }
    if (lane == 0) {
        __stcs(mean + row, m);
        __stcs(rstd + row, s);
    }
}

extern "C" __global__ void softmax_online(const float4* __restrict__ input, usize n_in, float4* __restrict__ output, usize n_out, unsigned rows, unsigned cols4) {
    unsigned row = blockIdx.x * (blockDim.x / WARP_SIZE) + threadIdx.x / WARP_SIZE;
    unsigned lane = threadIdx.x % WARP_SIZE;
    usize vectors = (usize)rows * cols4;
    if (row >= rows || n_in < vectors || n_out < vectors) return;
    const float4* x = input + (usize)row * cols4;
    float maxv = -3.402823466e38f, sum = 0.f;
    for (unsigned c = lane; c < cols4; c += WARP_SIZE) {
        float4 v = x[c];
        float bm = fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w));
        if (bm > maxv) {
            sum *= __expf(maxv - bm);
            maxv = bm;
        }
        sum += (__expf(v.x - maxv) + __expf(v.y - maxv)) + (__expf(v.z - maxv) + __expf(v.w - maxv));
    }
    #pragma unroll
    for (int mask = WARP_SIZE / 2; mask > 0; mask /= 2) {
        float om = __shfl_xor_sync(FULL_MASK, maxv, mask), os = __shfl_xor_sync(FULL_MASK, sum, mask);
        float nm = fmaxf(maxv, om);
        sum = sum * __expf(maxv - nm) + os * __expf(om - nm);
        maxv = nm;
    }
    float scale = 1.f / sum;
    float4* y = output + (usize)row * cols4;
    for (unsigned c = lane; c < cols4; c += WARP_SIZE) {
        float4 v = __ldcs(x + c);
        __stcs(y + c, make_float4(__expf(v.x - maxv) * scale, __expf(v.y - maxv) * scale, __expf(v.z - maxv) * scale, __expf(v.w - maxv) * scale));
    }
}

struct AdamW { float learning_rate, beta1, beta2, beta1_correction, beta2_correction, eps, weight_decay; };

__device__ __forceinline__ float lerp_fma(float start, float end, float weight) { return fmaf(weight, end, fmaf(-weight, start, start)); }

extern "C" __global__ void adamw_step(float* __restrict__ params, usize n_p, const float* __restrict__ grads, usize n_g, float* __restrict__ m, usize n_m,
                                      float* __restrict__ v, usize n_v, AdamW hp) {
    usize i = (usize)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_p || i >= n_g || i >= n_m || i >= n_v) return;
    float g = grads[i];
    float mm = lerp_fma(g, m[i], hp.beta1);
    m[i] = mm;
    float vv = lerp_fma(g * g, v[i], hp.beta2);
    v[i] = vv;
    mm /= hp.beta1_correction;
    vv /= hp.beta2_correction;
    params[i] -= hp.learning_rate * (mm / (sqrtf(vv) + hp.eps) + hp.weight_decay * params[i]);
}

// ---- Issue 30: the output partitions' kernels (gpu-kernels/src/partitions.rs), written as
// vLLM and llm.c write them.

__device__ __forceinline__ float block_sum(float v) {
    __shared__ float sums[32];
    v = warp_sum(v);
    unsigned lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    if (lane == 0) sums[warp] = v;
    __syncthreads();
    unsigned warps = (blockDim.x + WARP_SIZE - 1) / WARP_SIZE;
    float total = warp_sum(lane < warps ? sums[lane] : 0.f);
    __syncthreads();
    return total;
}

// vLLM csrc/layernorm_kernels.cu, fused_add_rms_norm_kernel (the vectorised one), float4 for
// its vec_n_t: one block per token, input and residual updated in place.
extern "C" __global__ void fused_add_rms_norm(float4* __restrict__ input, usize n_in, float4* __restrict__ residual, usize n_res,
                                              const float4* __restrict__ weight, usize n_w, float epsilon, unsigned hidden4) {
    float variance = 0.0f;
    usize row = (usize)blockIdx.x * hidden4;
    for (unsigned idx = threadIdx.x; idx < hidden4; idx += blockDim.x) {
        usize id = row + idx;
        float4 x = input[id], r = residual[id];
        float4 z = make_float4(x.x + r.x, x.y + r.y, x.z + r.z, x.w + r.w);
        variance += (z.x * z.x + z.y * z.y) + (z.z * z.z + z.w * z.w);
        residual[id] = z;
    }
    variance = block_sum(variance);
    float s = rsqrtf(variance / (hidden4 * 4) + epsilon);
    for (unsigned idx = threadIdx.x; idx < hidden4; idx += blockDim.x) {
        usize id = row + idx;
        float4 r = residual[id], w = weight[idx];
        input[id] = make_float4(r.x * s * w.x, r.y * s * w.y, r.z * s * w.z, r.w * s * w.w);
    }
}

// RMS norm, one warp per row, grid-strided over warps (llm.c's warp-per-row kernels with a
// grid-stride loop over rows).
extern "C" __global__ void rms_norm_warp_rows(const float4* __restrict__ x, usize n_x, const float4* __restrict__ weight, usize n_w,
                                              float4* __restrict__ out, usize n_out, float epsilon, unsigned rows, unsigned cols4) {
    unsigned warps = gridDim.x * blockDim.x / WARP_SIZE;
    unsigned lane = threadIdx.x % WARP_SIZE;
    for (unsigned row = (blockIdx.x * blockDim.x + threadIdx.x) / WARP_SIZE; row < rows; row += warps) {
        const float4* xr = x + (usize)row * cols4;
        float squares = 0.f;
        for (unsigned c = lane; c < cols4; c += WARP_SIZE) {
            float4 v = xr[c];
            squares += (v.x * v.x + v.y * v.y) + (v.z * v.z + v.w * v.w);
        }
        float s = rsqrtf(warp_sum(squares) / (cols4 * 4) + epsilon);
        float4* o = out + (usize)row * cols4;
        for (unsigned c = lane; c < cols4; c += WARP_SIZE) {
            float4 v = xr[c], w = weight[c];
            o[c] = make_float4(v.x * s * w.x, v.y * s * w.y, v.z * s * w.z, v.w * s * w.w);
        }
    }
}

// llm.c dev/cuda/attention_forward.cu, unpermute_kernel, in a 3-D launch: (B, NH, T, HS) ->
// (B, T, NH, HS), thread (hs, h, b T + t).
extern "C" __global__ void unpermute_3d(const float* __restrict__ inp, usize n_in, float* __restrict__ out, usize n_out, unsigned T, unsigned NH,
                                        unsigned HS) {
    unsigned x = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned y = blockIdx.y * blockDim.y + threadIdx.y;
    unsigned z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x < HS && y < NH) {
        unsigned b = z / T, t = z % T;
        usize from = (((usize)b * NH + y) * T + t) * HS + x;
        usize to = ((usize)z * NH + y) * HS + x;
        if (to < n_out && from < n_in) out[to] = inp[from];
    }
}

// CUDA samples' threadFenceReduction (and llm.c's last-block reductions): each block
// publishes its sum, __threadfence(), atomicAdd on a counter; the last block reads the
// partials with 16-byte __ldcg loads and writes the total, resetting the counter.
extern "C" __global__ void sum_last_block(const float4* __restrict__ x, usize n, float* partials, usize n_partials, unsigned* counter, usize n_counter,
                                          float* total, usize n_total) {
    __shared__ bool am_last;
    usize stride = (usize)gridDim.x * blockDim.x;
    float partial = 0.f;
    for (usize i = (usize)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float4 v = x[i];
        partial += (v.x + v.y) + (v.z + v.w);
    }
    float block_total = block_sum(partial);
    if (threadIdx.x == 0) {
        partials[blockIdx.x] = block_total;
        __threadfence();
        unsigned ticket = atomicAdd(counter, 1);
        am_last = ticket == gridDim.x - 1;
    }
    __syncthreads();
    if (am_last) {
        float mine = 0.f;
        unsigned pieces = gridDim.x / 4;
        for (unsigned p = threadIdx.x; p < pieces; p += blockDim.x) {
            float4 v = __ldcg((const float4*)partials + p);
            mine += (v.x + v.y) + (v.z + v.w);
        }
        for (unsigned i = pieces * 4 + threadIdx.x; i < gridDim.x; i += blockDim.x) mine += __ldcg(partials + i);
        float all = block_sum(mine);
        if (threadIdx.x == 0) {
            *total = all;
            *counter = 0;
        }
    }
}
