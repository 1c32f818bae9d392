//! Issue 30's rows: the kernels of `gpu_kernels::partitions` (one per output partition added
//! for ported code) against their CUDA C++ twins, each checked against the CPU first. All
//! memory-bound: the figure is GB/s against the copy bandwidth.

use bytemuck::cast_slice;
use core::num::NonZeroU32;

use ferrocuda_host::{DeviceBuffer, Dim3, LaunchConfig};

use super::{BenchResult, Env, Row, compare, describe, float4s};
use crate::examples::Float4;
use crate::twins::cpu::Random;
use crate::twins::timing::{Implementation, measure};

/// `launch_with!` for the kernels of `gpu_kernels::partitions` (no `unsafe` twins).
macro_rules! launch_partition {
    ($implementation:expr, $kernel:ident, $stream:expr, $config:expr, $($arg:expr),* $(,)?) => {
        match $implementation {
            Implementation::Rust => crate::partitions::$kernel::launch($stream, $config, $($arg),*),
            Implementation::CudaCpp(module) => crate::partitions::$kernel::launch_in(module, $stream, $config, $($arg),*),
            Implementation::RustUnchecked => unreachable!("{} has no unsafe twin", stringify!($kernel)),
        }
    };
}

/// Row width of the RMS norms (floats): Llama-7B's hidden size.
const HIDDEN: usize = 4096;
/// Row width of the warp-per-row RMS norm (floats).
const WARP_ROW: usize = 1024;

fn rms_norm_rows(x: &[f32], weight: &[f32], cols: usize, epsilon: f32) -> Vec<f64> {
    x.chunks_exact(cols)
        .flat_map(|row| {
            let mean = row.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / cols as f64;
            let s = 1.0 / (mean + epsilon as f64).sqrt();
            row.iter().zip(weight).map(move |(&v, &w)| v as f64 * s * w as f64)
        })
        .collect()
}

/// The four partition kernels; the timings of each against its twin.
pub fn partitions(env: &Env) -> BenchResult<Vec<Row>> {
    let mut rows = fused_add_rms_norm(env)?;
    rows.extend(rms_norm_warp_rows(env)?);
    rows.extend(unpermute_3d(env)?);
    rows.extend(sum_last_block(env)?);
    Ok(rows)
}

/// vLLM's fused residual add + RMS norm, in place, one block of 256 threads per token.
fn fused_add_rms_norm(env: &Env) -> BenchResult<Vec<Row>> {
    let tokens = env.sizes.array_floats / HIDDEN;
    let n = tokens * HIDDEN;
    let mut random = Random::new(31);
    let (input, residual, weight) = (random.floats(n, -1.0, 1.0), random.floats(n, -1.0, 1.0), random.floats(HIDDEN, 0.5, 1.5));
    let epsilon = 1e-6f32;
    let summed: Vec<f32> = input.iter().zip(&residual).map(|(a, b)| a + b).collect();
    let expected = rms_norm_rows(&summed, &weight, HIDDEN, epsilon);
    let weight_dev = DeviceBuffer::from_slice(&env.context, &float4s(&weight))?;
    let mut input_dev = DeviceBuffer::from_slice(&env.context, &float4s(&input))?;
    let mut residual_dev = DeviceBuffer::from_slice(&env.context, &float4s(&residual))?;
    let config = LaunchConfig::new(tokens as u32, 256u32);
    let hidden4 = (HIDDEN / 4) as u32;
    let implementations = env.implementations();
    let mut checks = Vec::new();
    for &implementation in &implementations {
        input_dev.copy_from_host(&float4s(&input))?;
        residual_dev.copy_from_host(&float4s(&residual))?;
        launch_partition!(implementation, fused_add_rms_norm, &env.stream, config, &mut input_dev, &mut residual_dev, &weight_dev, epsilon, hidden4)?;
        env.stream.synchronize()?;
        let got = input_dev.to_vec()?;
        compare("fused_add_rms_norm residual", cast_slice(&residual_dev.to_vec()?), summed.iter().map(|&v| v as f64), 1e-6, 1.0)?;
        checks.push(describe(compare("fused_add_rms_norm", cast_slice(&got), expected.iter().copied(), 2e-5, 1.0)?));
    }
    let times = measure(&env.stream, env.runs, &implementations, |implementation, stopwatch| {
        stopwatch.start()?;
        launch_partition!(implementation, fused_add_rms_norm, &env.stream, config, &mut input_dev, &mut residual_dev, &weight_dev, epsilon, hidden4)
    })?;
    // Reads input and residual, writes residual, reads it again (from L2 or memory), writes input.
    let bytes = 4.0 * (n * 4) as f64;
    Ok(env.rows("fused_add_rms_norm", format!("{tokens}x{HIDDEN} f32, in place"), &implementations, &times, Some(bytes), None, checks))
}

/// RMS norm, one warp per 1024-float row, grid-strided over 8 warps x 4 blocks per SM.
fn rms_norm_warp_rows(env: &Env) -> BenchResult<Vec<Row>> {
    let rows = env.sizes.array_floats / WARP_ROW;
    let n = rows * WARP_ROW;
    let mut random = Random::new(32);
    let (x, weight) = (random.floats(n, -2.0, 2.0), random.floats(WARP_ROW, 0.5, 1.5));
    let epsilon = 1e-5f32;
    let expected = rms_norm_rows(&x, &weight, WARP_ROW, epsilon);
    let x_dev = DeviceBuffer::from_slice(&env.context, &float4s(&x))?;
    let weight_dev = DeviceBuffer::from_slice(&env.context, &float4s(&weight))?;
    let mut out = DeviceBuffer::<Float4>::zeroed(&env.context, n / 4)?;
    let config = LaunchConfig::new(env.sm_count * 4, 256u32);
    let cols4 = (WARP_ROW / 4) as u32;
    let implementations = env.implementations();
    let mut checks = Vec::new();
    for &implementation in &implementations {
        out.zero_async(&env.stream)?;
        launch_partition!(implementation, rms_norm_warp_rows, &env.stream, config, &x_dev, &weight_dev, &mut out, epsilon, rows as u32, cols4)?;
        env.stream.synchronize()?;
        checks.push(describe(compare("rms_norm_warp_rows", cast_slice(&out.to_vec()?), expected.iter().copied(), 2e-5, 1.0)?));
    }
    let times = measure(&env.stream, env.runs, &implementations, |implementation, stopwatch| {
        stopwatch.start()?;
        launch_partition!(implementation, rms_norm_warp_rows, &env.stream, config, &x_dev, &weight_dev, &mut out, epsilon, rows as u32, cols4)
    })?;
    let bytes = 2.0 * (n * 4) as f64;
    Ok(env.rows("rms_norm_warp_rows", format!("{rows}x{WARP_ROW} f32, {} blocks", env.sm_count * 4), &implementations, &times, Some(bytes), None, checks))
}

/// llm.c's unpermute, `(B, NH, T, HS) -> (B, T, NH, HS)` with NH = 16, HS = 64, T = 1024, in
/// blocks of (64, 2, 2) threads (the grid's z, `B T / 2`, stays below 65536).
fn unpermute_3d(env: &Env) -> BenchResult<Vec<Row>> {
    let (nh, hs, t) = (16usize, 64usize, 1024usize);
    let b = (env.sizes.array_floats / (nh * hs * t)).max(1);
    let n = b * nh * t * hs;
    let inp = Random::new(33).floats(n, -1.0, 1.0);
    let mut expected = vec![0.0f64; n];
    for bb in 0..b {
        for h in 0..nh {
            for tt in 0..t {
                for x in 0..hs {
                    expected[((bb * t + tt) * nh + h) * hs + x] = inp[((bb * nh + h) * t + tt) * hs + x] as f64;
                }
            }
        }
    }
    let inp_dev = DeviceBuffer::from_slice(&env.context, &inp)?;
    let mut out = DeviceBuffer::<f32>::zeroed(&env.context, n)?;
    let t_steps = NonZeroU32::new(t as u32).ok_or("unpermute_3d: T = 0")?;
    let config = LaunchConfig::new(Dim3 { x: 1, y: (nh / 2) as u32, z: (b * t / 2) as u32 }, Dim3 { x: 64, y: 2, z: 2 });
    let implementations = env.implementations();
    let mut checks = Vec::new();
    for &implementation in &implementations {
        out.zero_async(&env.stream)?;
        launch_partition!(implementation, unpermute_3d, &env.stream, config, &inp_dev, &mut out, t_steps, nh as u32, hs as u32)?;
        env.stream.synchronize()?;
        checks.push(describe(compare("unpermute_3d", &out.to_vec()?, expected.iter().copied(), 0.0, 1.0)?));
    }
    let times = measure(&env.stream, env.runs, &implementations, |implementation, stopwatch| {
        stopwatch.start()?;
        launch_partition!(implementation, unpermute_3d, &env.stream, config, &inp_dev, &mut out, t_steps, nh as u32, hs as u32)
    })?;
    let bytes = 2.0 * (n * 4) as f64;
    Ok(env.rows("unpermute_3d", format!("B={b} NH={nh} T={t} HS={hs} f32"), &implementations, &times, Some(bytes), None, checks))
}

/// The threadfence ("last block") sum of one array, 2048 blocks of 256 threads.
fn sum_last_block(env: &Env) -> BenchResult<Vec<Row>> {
    let n = env.sizes.array_floats;
    let x = Random::new(34).floats(n, 0.0, 1.0);
    let expected: f64 = x.iter().map(|&v| v as f64).sum();
    let x_dev = DeviceBuffer::from_slice(&env.context, &float4s(&x))?;
    let blocks = 2048u32;
    let mut partials = DeviceBuffer::<f32>::zeroed(&env.context, blocks as usize)?;
    let mut counter = DeviceBuffer::<u32>::zeroed(&env.context, 1)?;
    let mut total = DeviceBuffer::<f32>::zeroed(&env.context, 1)?;
    let config = LaunchConfig::new(blocks, 256u32);
    let implementations = env.implementations();
    let mut checks = Vec::new();
    for &implementation in &implementations {
        total.zero_async(&env.stream)?;
        launch_partition!(implementation, sum_last_block, &env.stream, config, &x_dev, &mut partials, &mut counter, &mut total)?;
        env.stream.synchronize()?;
        if counter.to_vec()? != [0] {
            return Err("sum_last_block: the counter was not reset to 0".into());
        }
        checks.push(describe(compare("sum_last_block", &total.to_vec()?, [expected].into_iter(), 1e-4, 1.0)?));
    }
    let times = measure(&env.stream, env.runs, &implementations, |implementation, stopwatch| {
        stopwatch.start()?;
        launch_partition!(implementation, sum_last_block, &env.stream, config, &x_dev, &mut partials, &mut counter, &mut total)
    })?;
    let bytes = (n * 4) as f64;
    Ok(env.rows("sum_last_block", format!("{n} f32, {blocks} blocks"), &implementations, &times, Some(bytes), None, checks))
}
