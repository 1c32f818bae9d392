//! Issue 23's "Speed" rows: the LLM-training kernels of `gpu_kernels::llm` against their CUDA
//! C++ twins (a layer norm, an online softmax, an AdamW step, a bf16 GELU), each checked against the CPU
//! first. All three are memory-bound: the figure is GB/s against the copy bandwidth.

use bytemuck::cast_slice;
use ferrocuda_host::{DeviceBuffer, LaunchConfig};

use super::{BenchResult, Env, Row, compare, describe, float4s};
use crate::examples::Float4;
use crate::llm::{AdamW, Bf16x8, LAYERNORM_C};
use crate::twins::cpu::Random;
use crate::twins::timing::{Implementation, measure};

/// `launch_with!` for the kernels of `gpu_kernels::llm`.
macro_rules! launch_llm {
    ($implementation:expr, $kernel:ident, $stream:expr, $config:expr, $($arg:expr),* $(,)?) => {
        match $implementation {
            Implementation::Rust => crate::llm::$kernel::launch($stream, $config, $($arg),*),
            Implementation::CudaCpp(module) => crate::llm::$kernel::launch_in(module, $stream, $config, $($arg),*),
            Implementation::RustUnchecked => unreachable!("{} has no unsafe twin", stringify!($kernel)),
        }
    };
}

/// Threads per block of the warp-per-row kernels (8 rows per block).
const ROW_BLOCK: u32 = 256;

/// `softmax_online` from the implementation chosen, its `unsafe` twin included.
fn launch_softmax_online(
    implementation: Implementation<'_>,
    env: &Env,
    config: LaunchConfig,
    input: &DeviceBuffer<Float4>,
    output: &mut DeviceBuffer<Float4>,
    rows: u32,
    cols4: u32,
) -> ferrocuda_host::Result<()> {
    match implementation {
        Implementation::RustUnchecked => crate::unchecked::softmax_online_unchecked::launch(&env.stream, config, input, output, rows, cols4),
        other => launch_llm!(other, softmax_online, &env.stream, config, input, output, rows, cols4),
    }
}

/// `layernorm_768` from the implementation chosen, its `unsafe` twin included.
#[allow(clippy::too_many_arguments)]
fn launch_layernorm(
    implementation: Implementation<'_>,
    env: &Env,
    config: LaunchConfig,
    input: &DeviceBuffer<Float4>,
    weight: &DeviceBuffer<Float4>,
    bias: &DeviceBuffer<Float4>,
    out: &mut DeviceBuffer<Float4>,
    mean: &mut DeviceBuffer<f32>,
    rstd: &mut DeviceBuffer<f32>,
    rows: u32,
) -> ferrocuda_host::Result<()> {
    match implementation {
        Implementation::RustUnchecked => crate::unchecked::layernorm_768_unchecked::launch(&env.stream, config, input, weight, bias, out, mean, rstd, rows),
        other => launch_llm!(other, layernorm_768, &env.stream, config, input, weight, bias, out, mean, rstd, rows),
    }
}

/// `layernorm_768`: rows of 768 floats, one array of the sizes' floats in and out.
pub fn layernorm(env: &Env) -> BenchResult<Vec<Row>> {
    let rows = (env.sizes.array_floats / LAYERNORM_C) as u32;
    let n = rows as usize * LAYERNORM_C;
    let mut random = Random::new(11);
    let input = random.floats(n, -4.0, 4.0);
    let weight = random.floats(LAYERNORM_C, 0.5, 1.5);
    let bias = random.floats(LAYERNORM_C, -0.5, 0.5);
    let expected = crate::twins::cpu::layernorm(&input, &weight, &bias, LAYERNORM_C);
    let input_dev = DeviceBuffer::from_slice(&env.context, &float4s(&input))?;
    let weight_dev = DeviceBuffer::from_slice(&env.context, &float4s(&weight))?;
    let bias_dev = DeviceBuffer::from_slice(&env.context, &float4s(&bias))?;
    let mut out = DeviceBuffer::<Float4>::zeroed(&env.context, n / 4)?;
    let mut mean = DeviceBuffer::<f32>::zeroed(&env.context, rows as usize)?;
    let mut rstd = DeviceBuffer::<f32>::zeroed(&env.context, rows as usize)?;
    let config = LaunchConfig::new(rows.div_ceil(ROW_BLOCK / 32), ROW_BLOCK);
    let implementations = env.implementations_with_unchecked();
    let mut checks = Vec::new();
    for &implementation in &implementations {
        out.zero_async(&env.stream)?;
        launch_layernorm(implementation, env, config, &input_dev, &weight_dev, &bias_dev, &mut out, &mut mean, &mut rstd, rows)?;
        env.stream.synchronize()?;
        // rsqrt.approx (2^-22) and f32 sums of 768 values: a few 1e-6 of the output's scale.
        let got = out.to_vec()?;
        checks.push(describe(compare("layernorm", cast_slice(&got), expected.iter().copied(), 2e-5, 1.0)?));
    }
    let times = measure(&env.stream, env.runs, &implementations, |implementation, stopwatch| {
        stopwatch.start()?;
        launch_layernorm(implementation, env, config, &input_dev, &weight_dev, &bias_dev, &mut out, &mut mean, &mut rstd, rows)
    })?;
    let bytes = 2.0 * (n * 4) as f64 + 2.0 * (rows as usize * 4) as f64;
    Ok(env.rows("layernorm_768", format!("{rows}x{LAYERNORM_C} f32"), &implementations, &times, Some(bytes), None, checks))
}

/// `softmax_online`: rows of 8192 floats, one array of the sizes' floats in and out (the
/// second read of each 32 KiB row counts as traffic too).
pub fn softmax_online(env: &Env) -> BenchResult<Vec<Row>> {
    let cols = 8192usize;
    let rows = (env.sizes.array_floats / cols) as u32;
    let n = rows as usize * cols;
    let input = Random::new(12).floats(n, -8.0, 8.0);
    let expected = crate::twins::cpu::softmax_rows(&input, cols);
    let input_dev = DeviceBuffer::from_slice(&env.context, &float4s(&input))?;
    let mut output = DeviceBuffer::<Float4>::zeroed(&env.context, n / 4)?;
    let config = LaunchConfig::new(rows.div_ceil(ROW_BLOCK / 32), ROW_BLOCK);
    let cols4 = (cols / 4) as u32;
    let implementations = env.implementations_with_unchecked();
    let mut checks = Vec::new();
    for &implementation in &implementations {
        output.zero_async(&env.stream)?;
        launch_softmax_online(implementation, env, config, &input_dev, &mut output, rows, cols4)?;
        env.stream.synchronize()?;
        let got = output.to_vec()?;
        // ex2.approx per element and rescalings of the running sum: 1e-5 relative.
        checks.push(describe(compare("softmax_online", cast_slice(&got), expected.iter().copied(), 1e-5, f64::MIN_POSITIVE)?));
    }
    let times = measure(&env.stream, env.runs, &implementations, |implementation, stopwatch| {
        stopwatch.start()?;
        launch_softmax_online(implementation, env, config, &input_dev, &mut output, rows, cols4)
    })?;
    let bytes = 3.0 * (n * 4) as f64;
    Ok(env.rows("softmax_online", format!("{rows}x{cols} f32"), &implementations, &times, Some(bytes), None, checks))
}

/// `adamw_step`: one array of the sizes' floats of parameters (reads params, grads, m, v;
/// writes params, m, v).
pub fn adamw(env: &Env) -> BenchResult<Vec<Row>> {
    let n = env.sizes.array_floats;
    let mut random = Random::new(13);
    let (params, grads) = (random.floats(n, -1.0, 1.0), random.floats(n, -0.1, 0.1));
    let (m, v) = (random.floats(n, -0.01, 0.01), random.floats(n, 0.0, 1e-4));
    let hp = AdamW {
        learning_rate: 1e-3,
        beta1: 0.9,
        beta2: 0.999,
        beta1_correction: 1.0 - 0.9f32.powi(10),
        beta2_correction: 1.0 - 0.999f32.powi(10),
        eps: 1e-8,
        weight_decay: 0.01,
    };
    let expected = crate::twins::cpu::adamw(&params, &grads, &m, &v, &hp);
    let grads_dev = DeviceBuffer::from_slice(&env.context, &grads)?;
    let mut params_dev = DeviceBuffer::from_slice(&env.context, &params)?;
    let mut m_dev = DeviceBuffer::from_slice(&env.context, &m)?;
    let mut v_dev = DeviceBuffer::from_slice(&env.context, &v)?;
    let config = LaunchConfig::new((n as u32).div_ceil(256), 256u32);
    let implementations = env.implementations();
    let mut checks = Vec::new();
    for &implementation in &implementations {
        params_dev.copy_from_host(&params)?;
        m_dev.copy_from_host(&m)?;
        v_dev.copy_from_host(&v)?;
        launch_llm!(implementation, adamw_step, &env.stream, config, &mut params_dev, &grads_dev, &mut m_dev, &mut v_dev, hp)?;
        env.stream.synchronize()?;
        // Same fma/div/sqrt sequence on both sides as the CPU's f32 one: exact up to a rounding.
        checks.push(describe(compare("params", &params_dev.to_vec()?, expected.iter().copied(), 1e-6, 1e-3)?));
    }
    // The step is repeated on its own output (the moments drift; the time does not).
    let times = measure(&env.stream, env.runs, &implementations, |implementation, stopwatch| {
        stopwatch.start()?;
        launch_llm!(implementation, adamw_step, &env.stream, config, &mut params_dev, &grads_dev, &mut m_dev, &mut v_dev, hp)
    })?;
    let bytes = 7.0 * (n * 4) as f64;
    Ok(env.rows("adamw_step", format!("{n} f32 params"), &implementations, &times, Some(bytes), None, checks))
}

/// `gelu_bf16`: one array of the sizes' element count in bf16, in and out. Its CUDA C++ twin
/// is its own NVRTC program (`cuda_bf16.h`); when that does not compile, the Rust row stands
/// alone and the check column says why.
pub fn gelu_bf16(env: &Env) -> BenchResult<Vec<Row>> {
    use ferrocuda_device::half::{Bf16x2, bf16};
    let n = env.sizes.array_floats / 8 * 8;
    let values: Vec<bf16> = Random::new(14).floats(n, -6.0, 6.0).into_iter().map(bf16::from_f32).collect();
    // The CPU reference: f32 tanh of the bf16 input, as f64 (rounded to bf16 by the GPU).
    let expected = values.iter().map(|x| {
        let x = x.to_f64();
        0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
    });
    let packed: Vec<Bf16x8> = values.chunks_exact(8).map(|v| Bf16x8 { pairs: core::array::from_fn(|k| Bf16x2::new(v[2 * k], v[2 * k + 1])) }).collect();
    let input_dev = DeviceBuffer::from_slice(&env.context, &packed)?;
    let mut out = DeviceBuffer::<Bf16x8>::zeroed(&env.context, n / 8)?;
    let config = LaunchConfig::for_elements(n / 8, 256);
    let arch = env.context.device().arch()?;
    let twin = crate::twins::nvrtc::compile_gelu_bf16(&env.context, arch);
    let mut implementations = vec![Implementation::Rust];
    let mut twin_note = None;
    match &twin {
        Ok(compiled) => implementations.push(Implementation::CudaCpp(&compiled.module)),
        Err(why) => twin_note = Some(format!("(no CUDA C++ twin: {why})")),
    }
    let mut checks = Vec::new();
    let expected: Vec<f64> = expected.collect();
    for &implementation in &implementations {
        out.zero_async(&env.stream)?;
        launch_llm!(implementation, gelu_bf16, &env.stream, config, &input_dev, &mut out)?;
        env.stream.synchronize()?;
        let got: Vec<f32> = out.to_vec()?.iter().flat_map(|v| v.pairs.iter().flat_map(|p| [p.lo().to_f32(), p.hi().to_f32()])).collect();
        // bf16 rounding (2^-8 relative) plus tanh.approx (2^-11 relative on tanh, which the
        // 1 + tanh near -1 amplifies for large negative x: absolute floor 1e-3).
        let worst = compare("gelu_bf16", &got, expected.iter().copied(), 1.2e-2, 0.1)?;
        checks.push(match &twin_note {
            Some(note) => format!("{} {note}", describe(worst)),
            None => describe(worst),
        });
    }
    let times = measure(&env.stream, env.runs, &implementations, |implementation, stopwatch| {
        stopwatch.start()?;
        launch_llm!(implementation, gelu_bf16, &env.stream, config, &input_dev, &mut out)
    })?;
    let bytes = 2.0 * (n * 2) as f64;
    Ok(env.rows("gelu_bf16", format!("{n} bf16"), &implementations, &times, Some(bytes), None, checks))
}
