//! One function per example kernel: inputs, a checked run of each implementation, then the
//! timed runs, at the [`Sizes`] the caller picks.

use crate::examples::{
    self, BLOCK_THREADS, Float4, HISTOGRAM_BINS, MATMUL_BLOCK_M, MATMUL_BLOCK_N, MATMUL_THREADS, SOFTMAX_COLS, STENCIL_BLOCK_X, STENCIL_ROWS_PER_THREAD,
    TRANSPOSE_ROWS, TRANSPOSE_TILE, U32x4,
};
use bytemuck::cast_slice;
use ferrocuda_host::{Context, DeviceBuffer, LaunchConfig, Module, Stream};

mod llm;
mod partitions;

pub use super::Row;
use super::cpu::{self, Random, mismatch};
use super::timing::{Implementation, Runs, measure, median};
use crate::launch_with;
pub use llm::{adamw, gelu_bf16, layernorm, softmax_online};
pub use partitions::partitions;

/// What every case needs.
pub struct Env<'m> {
    /// The primary context of the GPU measured.
    pub context: Context,
    /// The stream everything runs on.
    pub stream: Stream,
    /// Warm-up and timed runs.
    pub runs: Runs,
    /// The CUDA C++ module, when NVRTC is there.
    pub cuda: Option<&'m Module>,
    /// Streaming multiprocessors (grid sizing for grid-stride kernels).
    pub sm_count: u32,
    /// Problem sizes.
    pub sizes: Sizes,
}

/// The binary's error type: a driver error, or a GPU result that disagrees with the CPU.
pub type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Problem sizes: [`Sizes::BENCH`] for the benchmark, [`Sizes::QUICK`] for the main job.
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    /// `f32` per array of the memory-bound kernels (saxpy, sum, softmax, histogram bytes / 4).
    pub array_floats: usize,
    /// Side of the square matrices of transpose and stencil.
    pub grid_side: u32,
    /// Side of the square matrices of the matmuls.
    pub matmul_side: u32,
}

impl Sizes {
    /// The benchmark's: 256 MiB per array (8192² floats for the 2-D kernels), matmul 4096³.
    pub const BENCH: Sizes = Sizes { array_floats: 64 << 20, grid_side: 8192, matmul_side: 4096 };
    /// The main job's: 64 MiB per array (beyond an H100's or H200's 50-60 MB L2, so still
    /// memory-bound), 4096² for the 2-D kernels, matmul 2048³; a few seconds in all.
    pub const QUICK: Sizes = Sizes { array_floats: 16 << 20, grid_side: 4096, matmul_side: 2048 };
}

impl<'m> Env<'m> {
    fn implementations(&self) -> Vec<Implementation<'m>> {
        let mut list = vec![Implementation::Rust];
        if let Some(module) = self.cuda {
            list.push(Implementation::CudaCpp(module));
        }
        list
    }

    /// The safe kernel, its `unsafe` twin, and the CUDA C++ twin (issue 20's speed rows).
    fn implementations_with_unchecked(&self) -> Vec<Implementation<'m>> {
        let mut list = vec![Implementation::Rust, Implementation::RustUnchecked];
        if let Some(module) = self.cuda {
            list.push(Implementation::CudaCpp(module));
        }
        list
    }

    fn registers(&self, implementation: Implementation<'_>, symbol: &str) -> Option<u32> {
        let function = match implementation {
            Implementation::Rust => ferrocuda_host::Function::from_embedded(&self.context, &crate::KERNELS, leak(symbol)),
            Implementation::RustUnchecked => ferrocuda_host::Function::from_embedded(&self.context, &crate::KERNELS, leak(&format!("{symbol}_unchecked"))),
            Implementation::CudaCpp(module) => module.function(symbol),
        };
        function.and_then(|f| f.attributes()).ok().map(|a| a.registers)
    }

    /// Rows from interleaved timings, in the order of `implementations`.
    #[allow(clippy::too_many_arguments)]
    fn rows(
        &self,
        kernel: &'static str,
        size: String,
        implementations: &[Implementation<'_>],
        times: &[Vec<f64>],
        bytes: Option<f64>,
        flops: Option<f64>,
        checks: Vec<String>,
    ) -> Vec<Row> {
        implementations
            .iter()
            .zip(times)
            .zip(checks)
            .map(|((&implementation, times), check)| Row {
                kernel,
                implementation: implementation.label().to_string(),
                size: size.clone(),
                median_ms: median(times),
                min_ms: times.iter().copied().fold(f64::INFINITY, f64::min),
                bytes,
                flops,
                registers: self.registers(implementation, kernel),
                check,
            })
            .collect()
    }
}

/// Symbols are `&'static str` in the launch API; the benchmark's few names may live forever.
fn leak(symbol: &str) -> &'static str {
    Box::leak(symbol.to_string().into_boxed_str())
}

/// `values` as `float4`s (a copy: a `Vec<f32>` is only 4-byte aligned).
fn float4s(values: &[f32]) -> Vec<Float4> {
    values.chunks_exact(4).map(|v| Float4 { x: v[0], y: v[1], z: v[2], w: v[3] }).collect()
}

/// Largest relative error over all elements, failing at the first one beyond `tolerance`
/// (relative to `max(|expected|, floor)`).
#[allow(clippy::neg_cmp_op_on_partial_ord)] // `!(e <= t)` also rejects NaN
fn compare(what: &str, got: &[f32], expected: impl Iterator<Item = f64>, tolerance: f64, floor: f64) -> BenchResult<f64> {
    let mut worst = 0.0f64;
    let mut count = 0;
    for (index, (&g, e)) in got.iter().zip(expected).enumerate() {
        let error = (g as f64 - e).abs() / e.abs().max(floor);
        if !(error <= tolerance) {
            return Err(mismatch(what, index, g as f64, e, tolerance * e.abs().max(floor)).into());
        }
        worst = worst.max(error);
        count += 1;
    }
    if count != got.len() {
        return Err(format!("{what}: {} results but the CPU reference has {count}", got.len()).into());
    }
    Ok(worst)
}

fn describe(worst: f64) -> String {
    if worst == 0.0 { "exact".to_string() } else { format!("max rel err {worst:.1e}") }
}

/// `saxpy_x4`: y = a x + y.
pub fn saxpy(env: &Env) -> BenchResult<Vec<Row>> {
    let mut random = Random::new(1);
    let (x, y) = (random.floats(env.sizes.array_floats, -1.0, 1.0), random.floats(env.sizes.array_floats, -1.0, 1.0));
    let a = 1.5f32;
    let expected = cpu::saxpy(a, &x, &y);
    let x_dev = DeviceBuffer::from_slice(&env.context, &float4s(&x))?;
    let y4 = float4s(&y);
    let mut y_dev = DeviceBuffer::from_slice(&env.context, &y4)?;
    let vectors = env.sizes.array_floats / 4;
    let config = LaunchConfig::new((vectors as u32).div_ceil(BLOCK_THREADS), BLOCK_THREADS);
    let implementations = env.implementations();
    let mut checks = Vec::new();
    for &implementation in &implementations {
        y_dev.copy_from_host(&y4)?;
        launch_with!(implementation, saxpy_x4, &env.stream, config, a, &x_dev, &mut y_dev)?;
        env.stream.synchronize()?;
        let got = y_dev.to_vec()?;
        // fma on both sides: bit-identical.
        checks.push(describe(compare("y", cast_slice(&got), expected.iter().map(|&v| v as f64), 0.0, f64::MIN_POSITIVE)?));
    }
    let times = measure(&env.stream, env.runs, &implementations, |implementation, stopwatch| {
        stopwatch.start()?;
        launch_with!(implementation, saxpy_x4, &env.stream, config, a, &x_dev, &mut y_dev)
    })?;
    let bytes = 3.0 * (env.sizes.array_floats * 4) as f64;
    Ok(env.rows("saxpy_x4", format!("{} f32 x2", env.sizes.array_floats), &implementations, &times, Some(bytes), None, checks))
}

/// `sum_x4`: the sum of an array.
#[allow(clippy::neg_cmp_op_on_partial_ord)] // `!(e <= t)` also rejects NaN
pub fn sum(env: &Env) -> BenchResult<Vec<Row>> {
    let x = Random::new(2).floats(env.sizes.array_floats, 0.0, 1.0);
    let (exact, abs_sum) = cpu::sum(&x);
    let x_dev = DeviceBuffer::from_slice(&env.context, &float4s(&x))?;
    let mut out = DeviceBuffer::<f32>::zeroed(&env.context, 1)?;
    let blocks = env.sm_count * examples::sum_x4::function(&env.context)?.max_active_blocks_per_sm(BLOCK_THREADS, 0)?;
    let config = LaunchConfig::new(blocks, BLOCK_THREADS);
    // Error bound of the summation order used: each of a thread's 4 partial sums adds
    // ~n / (4 threads) values, then 2 + 5 (warp) + 5 (block) levels of a tree, then one
    // atomic add per block in sequence; each step rounds with at most eps * (running |sum|).
    let threads = (blocks * BLOCK_THREADS) as usize;
    let steps = env.sizes.array_floats.div_ceil(4 * threads) + 12 + blocks as usize;
    let bound = steps as f64 * f32::EPSILON as f64 * abs_sum;
    let implementations = env.implementations();
    let mut checks = Vec::new();
    for &implementation in &implementations {
        out.zero_async(&env.stream)?;
        launch_with!(implementation, sum_x4, &env.stream, config, &x_dev, &mut out)?;
        env.stream.synchronize()?;
        let got = out.to_vec()?[0] as f64;
        if !((got - exact).abs() <= bound) {
            return Err(format!("sum = {got} but the CPU says {exact} (bound {bound:e})").into());
        }
        checks.push(format!("rel err {:.1e}", (got - exact).abs() / exact));
    }
    let times = measure(&env.stream, env.runs, &implementations, |implementation, stopwatch| {
        out.zero_async(&env.stream)?;
        stopwatch.start()?;
        launch_with!(implementation, sum_x4, &env.stream, config, &x_dev, &mut out)
    })?;
    let bytes = (env.sizes.array_floats * 4) as f64;
    Ok(env.rows("sum_x4", format!("{} f32", env.sizes.array_floats), &implementations, &times, Some(bytes), None, checks))
}

/// `transpose_32`: a square matrix (8192² in the benchmark).
pub fn transpose(env: &Env) -> BenchResult<Vec<Row>> {
    let (rows, cols) = (env.sizes.grid_side, env.sizes.grid_side);
    let n = (rows * cols) as usize;
    let input = Random::new(3).floats(n, -1.0, 1.0);
    let expected = cpu::transpose(&input, rows as usize, cols as usize);
    let input_dev = DeviceBuffer::from_slice(&env.context, &input)?;
    let mut output = DeviceBuffer::<f32>::zeroed(&env.context, n)?;
    let config = LaunchConfig::new((cols / TRANSPOSE_TILE, rows / TRANSPOSE_TILE), (TRANSPOSE_TILE, TRANSPOSE_ROWS));
    let implementations = env.implementations();
    let mut checks = Vec::new();
    for &implementation in &implementations {
        output.zero_async(&env.stream)?;
        launch_with!(implementation, transpose_32, &env.stream, config, &input_dev, &mut output, rows, cols)?;
        env.stream.synchronize()?;
        checks.push(describe(compare("out", &output.to_vec()?, expected.iter().map(|&v| v as f64), 0.0, f64::MIN_POSITIVE)?));
    }
    let times = measure(&env.stream, env.runs, &implementations, |implementation, stopwatch| {
        stopwatch.start()?;
        launch_with!(implementation, transpose_32, &env.stream, config, &input_dev, &mut output, rows, cols)
    })?;
    Ok(env.rows("transpose_32", format!("{rows}x{cols} f32"), &implementations, &times, Some(2.0 * (n * 4) as f64), None, checks))
}

/// Matrix sizes of the matmul benchmark (M = N = K).
/// Elements of C checked against the CPU (a full check of 4096³ would take minutes).
const MATMUL_SAMPLES: usize = 16384;

/// Checks sampled elements of `c` (plus the four corners) against f64 dot products, within
/// the FP32 accumulation bound `k * eps * sum |a_ip b_pj|`.
#[allow(clippy::neg_cmp_op_on_partial_ord)] // `!(e <= t)` also rejects NaN
fn check_matmul(c: &[f32], a: &[f32], b: &[f32], side: usize) -> BenchResult<String> {
    let mut random = Random::new(99);
    let corners = [(0, 0), (0, side - 1), (side - 1, 0), (side - 1, side - 1)];
    let samples = corners.into_iter().chain((0..MATMUL_SAMPLES).map(|_| ((random.next_u64() as usize) % side, (random.next_u64() as usize) % side)));
    let mut worst = 0.0f64;
    for (row, col) in samples {
        let (exact, scale) = cpu::matmul_element(a, b, side, side, row, col);
        let got = c[row * side + col] as f64;
        let bound = side as f64 * f32::EPSILON as f64 * scale;
        if !((got - exact).abs() <= bound) {
            return Err(format!("C[{row}, {col}] = {got} but the CPU says {exact} (bound {bound:e})").into());
        }
        worst = worst.max((got - exact).abs() / scale);
    }
    Ok(format!("{} sampled, max err {worst:.1e}·Σ|ab|", MATMUL_SAMPLES + 4))
}

/// `matmul_128x128` and `sgemm_pipelined`, their `unsafe` twins (`UncheckedSlice` C) and cuBLAS
/// SGEMM on the same buffers, in FP32
/// (4096³ in the benchmark). Both kernels' rows are compared with the one cuBLAS row (same size).
pub fn matmul(env: &Env) -> BenchResult<(Vec<Row>, Option<String>)> {
    let side = env.sizes.matmul_side;
    let n = (side * side) as usize;
    let mut random = Random::new(4);
    let (a, b) = (random.floats(n, -1.0, 1.0), random.floats(n, -1.0, 1.0));
    let a_dev = DeviceBuffer::from_slice(&env.context, &a)?;
    let b_dev = DeviceBuffer::from_slice(&env.context, &b)?;
    let mut c_dev = DeviceBuffer::<f32>::zeroed(&env.context, n)?;
    let config = LaunchConfig::new((side / MATMUL_BLOCK_N, side / MATMUL_BLOCK_M), MATMUL_THREADS);
    let implementations = env.implementations_with_unchecked();
    let flops = 2.0 * (side as f64).powi(3);
    let size = format!("{side}x{side}x{side} f32");
    let mut rows = Vec::new();
    // The same launch, check and timing for each kernel (`launch_with!` takes the kernel's name).
    macro_rules! bench_kernel {
        ($kernel:ident | $twin:ident) => {{
            let mut checks = Vec::new();
            for &implementation in &implementations {
                c_dev.zero_async(&env.stream)?;
                launch_with!(implementation, $kernel | $twin, &env.stream, config, &a_dev, &b_dev, &mut c_dev, side, side, side)?;
                env.stream.synchronize()?;
                checks.push(check_matmul(&c_dev.to_vec()?, &a, &b, side as usize)?);
            }
            let times = measure(&env.stream, env.runs, &implementations, |implementation, stopwatch| {
                stopwatch.start()?;
                launch_with!(implementation, $kernel | $twin, &env.stream, config, &a_dev, &b_dev, &mut c_dev, side, side, side)
            })?;
            rows.extend(env.rows(stringify!($kernel), size.clone(), &implementations, &times, None, Some(flops), checks));
        }};
    }
    bench_kernel!(matmul_128x128 | matmul_128x128_unchecked);
    bench_kernel!(sgemm_pipelined | sgemm_pipelined_unchecked);

    let skipped = match super::cublas::Sgemm::new(&env.stream) {
        Ok(sgemm) => {
            c_dev.zero_async(&env.stream)?;
            sgemm.row_major(&a_dev, &b_dev, &mut c_dev, side)?;
            env.stream.synchronize()?;
            let check = check_matmul(&c_dev.to_vec()?, &a, &b, side as usize)?;
            let times = measure(&env.stream, env.runs, &[()], |(), stopwatch| -> BenchResult<()> {
                stopwatch.start()?;
                sgemm.row_major(&a_dev, &b_dev, &mut c_dev, side)
            })?;
            rows.push(Row {
                kernel: "matmul_128x128",
                implementation: "cuBLAS".to_string(),
                size,
                median_ms: median(&times[0]),
                min_ms: times[0].iter().copied().fold(f64::INFINITY, f64::min),
                bytes: None,
                flops: Some(flops),
                registers: None,
                check,
            });
            None
        }
        Err(why) => Some(why),
    };
    Ok((rows, skipped))
}

/// `softmax_rows_1024`: rows of 1024 floats (65 536 rows in the benchmark).
pub fn softmax(env: &Env) -> BenchResult<Vec<Row>> {
    let rows = (env.sizes.array_floats / SOFTMAX_COLS) as u32;
    let input = Random::new(5).floats(env.sizes.array_floats, -8.0, 8.0);
    let expected = cpu::softmax(&input);
    let input_dev = DeviceBuffer::from_slice(&env.context, &float4s(&input))?;
    let mut output = DeviceBuffer::<Float4>::zeroed(&env.context, env.sizes.array_floats / 4)?;
    let rows_per_block = BLOCK_THREADS / 32;
    let config = LaunchConfig::new(rows.div_ceil(rows_per_block), BLOCK_THREADS);
    let implementations = env.implementations_with_unchecked();
    let mut checks = Vec::new();
    for &implementation in &implementations {
        output.zero_async(&env.stream)?;
        launch_with!(implementation, softmax_rows_1024 | softmax_rows_1024_unchecked, &env.stream, config, &input_dev, &mut output, rows)?;
        env.stream.synchronize()?;
        // ex2.approx (2^-22 relative) of an argument rounded to f32, then a rounded sum:
        // a few 1e-6 relative; 1e-5 leaves room and still catches any real mistake.
        let got = output.to_vec()?;
        checks.push(describe(compare("softmax", cast_slice(&got), expected.iter().copied(), 1e-5, f64::MIN_POSITIVE)?));
    }
    let times = measure(&env.stream, env.runs, &implementations, |implementation, stopwatch| {
        stopwatch.start()?;
        launch_with!(implementation, softmax_rows_1024 | softmax_rows_1024_unchecked, &env.stream, config, &input_dev, &mut output, rows)
    })?;
    let bytes = 2.0 * (env.sizes.array_floats * 4) as f64;
    Ok(env.rows("softmax_rows_1024", format!("{rows}x{SOFTMAX_COLS} f32"), &implementations, &times, Some(bytes), None, checks))
}

/// `histogram_bytes`: random bytes into 256 bins (256 MiB in the benchmark).
pub fn histogram(env: &Env) -> BenchResult<Vec<Row>> {
    let bytes_len = env.sizes.array_floats * 4;
    let mut random = Random::new(6);
    let data: Vec<U32x4> = (0..bytes_len / 16)
        .map(|_| {
            let (p, q) = (random.next_u64(), random.next_u64());
            U32x4 { x: p as u32, y: (p >> 32) as u32, z: q as u32, w: (q >> 32) as u32 }
        })
        .collect();
    let expected = cpu::histogram(cast_slice(&data));
    let data_dev = DeviceBuffer::from_slice(&env.context, &data)?;
    let mut bins = DeviceBuffer::<u32>::zeroed(&env.context, HISTOGRAM_BINS)?;
    // One full wave: 32 KiB of shared memory per block limits the blocks per SM (7 on H100/H200),
    // and a partial second wave of single blocks would idle most of the GPU.
    let blocks = env.sm_count * examples::histogram_bytes::function(&env.context)?.max_active_blocks_per_sm(BLOCK_THREADS, 0)?;
    let config = LaunchConfig::new(blocks, BLOCK_THREADS);
    let implementations = env.implementations();
    let mut checks = Vec::new();
    for &implementation in &implementations {
        bins.zero_async(&env.stream)?;
        launch_with!(implementation, histogram_bytes, &env.stream, config, &data_dev, &mut bins)?;
        env.stream.synchronize()?;
        let got = bins.to_vec()?;
        if let Some(bin) = (0..HISTOGRAM_BINS).find(|&b| got[b] as u64 != expected[b]) {
            return Err(format!("bin {bin} = {} but the CPU counts {}", got[bin], expected[bin]).into());
        }
        checks.push("exact".to_string());
    }
    let times = measure(&env.stream, env.runs, &implementations, |implementation, stopwatch| {
        bins.zero_async(&env.stream)?;
        stopwatch.start()?;
        launch_with!(implementation, histogram_bytes, &env.stream, config, &data_dev, &mut bins)
    })?;
    Ok(env.rows("histogram_bytes", format!("{bytes_len} u8"), &implementations, &times, Some(bytes_len as f64), None, checks))
}

/// `stencil_5pt`: one Jacobi step on a square grid (8192² in the benchmark).
pub fn stencil(env: &Env) -> BenchResult<Vec<Row>> {
    let (rows, cols) = (env.sizes.grid_side, env.sizes.grid_side);
    let n = (rows * cols) as usize;
    let input = Random::new(7).floats(n, 0.0, 1.0);
    let expected = cpu::stencil(&input, rows as usize, cols as usize);
    let input_dev = DeviceBuffer::from_slice(&env.context, &input)?;
    let mut output = DeviceBuffer::<f32>::zeroed(&env.context, n)?;
    let config = LaunchConfig::new((cols / STENCIL_BLOCK_X, rows / STENCIL_ROWS_PER_THREAD), STENCIL_BLOCK_X);
    let implementations = env.implementations_with_unchecked();
    let mut checks = Vec::new();
    for &implementation in &implementations {
        output.zero_async(&env.stream)?;
        launch_with!(implementation, stencil_5pt | stencil_5pt_unchecked, &env.stream, config, &input_dev, &mut output, rows, cols)?;
        env.stream.synchronize()?;
        // Values in [0, 1): a few roundings of f32 (one fma, one mul, three adds).
        checks.push(describe(compare("out", &output.to_vec()?, expected.iter().copied(), 1e-6, 0.1)?));
    }
    let times = measure(&env.stream, env.runs, &implementations, |implementation, stopwatch| {
        stopwatch.start()?;
        launch_with!(implementation, stencil_5pt | stencil_5pt_unchecked, &env.stream, config, &input_dev, &mut output, rows, cols)
    })?;
    Ok(env.rows("stencil_5pt", format!("{rows}x{cols} f32"), &implementations, &times, Some(2.0 * (n * 4) as f64), None, checks))
}
