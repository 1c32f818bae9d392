//! Issue 30's benchmark rows: the Rust kernels of tests/kernels/src/port_patterns.rs beside
//! CUDA C++ twins written as the public sources write them (bench/cuda/port_patterns.cu, and
//! port_patterns_cub.cu for cub), compiled by NVRTC at run time for the GPU at hand and
//! launched through the same typed launcher (`launch` / `launch_in`), with the same buffers and
//! configuration. CUDA events, 3 warm-up and 20 timed runs interleaved, median.
//!
//! Rows: llm.c's GELU backward under fast math (`fast_tanh`/`fast_cosh`, as `fast_math(true)`
//! compiles `tanh`/`cosh`, against `--use_fast_math`) and without; a `float4` copy-and-scale
//! (`vector::load16`/`store16` against `float4 v = x[i]`), with the struct-copy trap beside it;
//! row sums with `RuntimeBlockReduce` at 1024 and 256 threads against llm.c's `blockReduce` and
//! cub's `BlockReduce<float, 1024>`, with the compile-time `BlockReduce` beside them.
//!
//! `cargo run --release --example port_patterns_bench` (a GPU, libnvrtc; the CUDA include
//! directory for the cub row).

use ferrocuda::{Context, DeviceBuffer, LaunchConfig, Module, Stream};
use gpu_kernels::twins::nvrtc::{Compiled, compile_with, cuda_include_dirs};
use gpu_kernels::twins::timing::{Runs, copy_bandwidth_gbps, measure, median};
use test_kernels::port_gaps::F4;
use test_kernels::port_patterns as k;

const SOURCE: &str = include_str!("../bench/cuda/port_patterns.cu");
const CUB_SOURCE: &str = include_str!("../bench/cuda/port_patterns_cub.cu");
const RUNS: Runs = Runs { warmup: 3, timed: 20 };

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("port_patterns_bench: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// NVRTC's module of `file` for `arch`, or the reason it is missing (printed, `None`).
fn program(context: &Context, file: &str, source: &str, arch: &str, extra: &[String]) -> Option<Compiled> {
    // SAFETY: the twins are launched only through the typed launchers of the Rust kernels of the
    // same names, whose parameter layouts the sources declare (see their comments).
    match unsafe { compile_with(context, file, source, arch, extra) } {
        Ok(compiled) => Some(compiled),
        Err(why) => {
            println!("SKIPPED {file} {extra:?}: {why}");
            None
        }
    }
}

/// One table row: the medians of each implementation, and each one's time over the first's.
fn row(name: &str, labels: &[&str], times: &[Vec<f64>], bytes: f64) {
    let first = median(&times[0]);
    let mut line = format!("{name:<26}");
    for (label, t) in labels.iter().zip(times) {
        let ms = median(t);
        line += &format!("  {label} {ms:.4} ms ({:.0} GB/s, x{:.3})", bytes / (ms * 1e-3) / 1e9, ms / first);
    }
    println!("{line}");
}

fn run() -> Result<()> {
    let context = Context::primary(0)?;
    let stream = Stream::new(&context)?;
    let device = context.device();
    let arch = format!("sm_{}", device.arch()?);
    println!("device: {} ({arch}); CUDA events, {} warm-up + {} timed runs interleaved, median", device.name()?, RUNS.warmup, RUNS.timed);
    println!("columns: each implementation's median, its bandwidth (bytes read + written), and its time over the first one's (below 1: faster)");
    let (copy, _) = copy_bandwidth_gbps(&stream, 1 << 30, RUNS)?;
    println!("device-to-device copy: {copy:.0} GB/s");

    let precise = program(&context, "bench/cuda/port_patterns.cu", SOURCE, &arch, &[]);
    let fast = program(&context, "bench/cuda/port_patterns.cu", SOURCE, &arch, &["--use_fast_math".into(), "-DGELU_SYMBOL=p30_gelu_backward_fast".into()]);
    let includes: Vec<String> = cuda_include_dirs().into_iter().map(|d| format!("--include-path={d}")).collect();
    let cub = program(&context, "bench/cuda/port_patterns_cub.cu", CUB_SOURCE, &arch, &includes);
    let (Some(precise), Some(fast)) = (precise, fast) else { return Err("NVRTC is needed for the CUDA C++ twins".into()) };

    gelu(&context, &stream, &precise.module, &fast.module)?;
    load16(&context, &stream, &precise.module)?;
    row_sums(&context, &stream, &precise.module, cub.as_ref().map(|c| &c.module))?;
    Ok(())
}

/// llm.c's GELU backward, 32 Mi elements: 12 bytes per element.
fn gelu(context: &Context, stream: &Stream, precise: &Module, fast: &Module) -> Result<()> {
    let n = 32usize << 20;
    let inp: Vec<f32> = (0..n).map(|i| ((i % 4096) as f32 - 2048.0) * 0.002).collect();
    let dout = vec![1.0f32; n];
    let (x, d) = (DeviceBuffer::from_slice(context, &inp)?, DeviceBuffer::from_slice(context, &dout)?);
    let mut out = DeviceBuffer::<f32>::zeroed(context, n)?;
    let config = LaunchConfig::for_elements(n, 256);
    let bytes = 12.0 * n as f64;
    let times = measure(stream, RUNS, &[0, 1], |which, stopwatch| -> ferrocuda::Result<()> {
        stopwatch.start()?;
        match which {
            0 => k::p30_gelu_backward_fast::launch(stream, config, &x, &d, &mut out),
            _ => k::p30_gelu_backward_fast::launch_in(fast, stream, config, &x, &d, &mut out),
        }
    })?;
    row("gelu_backward fast math", &["Rust", "nvcc --use_fast_math"], &times, bytes);
    let times = measure(stream, RUNS, &[0, 1], |which, stopwatch| -> ferrocuda::Result<()> {
        stopwatch.start()?;
        match which {
            0 => k::p30_gelu_backward::launch(stream, config, &x, &d, &mut out),
            _ => k::p30_gelu_backward::launch_in(precise, stream, config, &x, &d, &mut out),
        }
    })?;
    row("gelu_backward precise", &["Rust", "nvcc"], &times, bytes);
    Ok(())
}

/// A float4 copy-and-scale of 32 Mi elements (512 MiB each way).
fn load16(context: &Context, stream: &Stream, module: &Module) -> Result<()> {
    let n = 32usize << 20;
    let host: Vec<F4> = (0..n).map(|i| F4 { x: i as f32, y: 1.0, z: 2.0, w: 3.0 }).collect();
    let x = DeviceBuffer::from_slice(context, &host)?;
    let mut out = DeviceBuffer::<F4>::zeroed(context, n)?;
    let config = LaunchConfig::for_elements(n, 256);
    let times = measure(stream, RUNS, &[0, 1, 2], |which, stopwatch| -> ferrocuda::Result<()> {
        stopwatch.start()?;
        match which {
            0 => k::p30_load16_input::launch(stream, config, &x, &mut out),
            1 => k::p30_load16_input::launch_in(module, stream, config, &x, &mut out),
            _ => k::p30_struct_copy::launch(stream, config, &x, &mut out),
        }
    })?;
    row("float4 load16/store16", &["Rust load16", "CUDA float4", "Rust *o = *v"], &times, 32.0 * n as f64);
    Ok(())
}

/// Row sums of 16 Ki rows of 4096 floats (256 MiB).
fn row_sums(context: &Context, stream: &Stream, module: &Module, cub: Option<&Module>) -> Result<()> {
    let (rows, cols) = (16usize << 10, 4096usize);
    let host: Vec<f32> = (0..rows * cols).map(|i| (i % 17) as f32).collect();
    let x = DeviceBuffer::from_slice(context, &host)?;
    let mut sums = DeviceBuffer::<f32>::zeroed(context, rows)?;
    let bytes = 4.0 * (rows * cols) as f64;
    for threads in [1024u32, 256] {
        let config = LaunchConfig::new(rows as u32, threads);
        let mut labels = vec!["Rust Runtime", "llm.c blockReduce"];
        let mut which = vec![0, 1];
        if threads == 1024 {
            labels.push("Rust BlockReduce<1024>");
            which.push(2);
            if cub.is_some() {
                labels.push("cub BlockReduce<1024>");
                which.push(3);
            }
        }
        let times = measure(stream, RUNS, &which, |w, stopwatch| -> ferrocuda::Result<()> {
            stopwatch.start()?;
            match w {
                0 => k::p30_row_sum_unchecked::launch(stream, config, &x, cols as u32, &mut sums),
                1 => k::p30_row_sum_unchecked::launch_in(module, stream, config, &x, cols as u32, &mut sums),
                2 => k::p30_row_sum_fixed_1024::launch(stream, config, &x, cols as u32, &mut sums),
                _ => k::p30_row_sum_unchecked::launch_in(cub.expect("cub"), stream, config, &x, cols as u32, &mut sums),
            }
        })?;
        row(&format!("row sum, {threads} threads"), &labels, &times, bytes);
        let variants = measure(stream, RUNS, &[0, 1, 2], |w, stopwatch| -> ferrocuda::Result<()> {
            stopwatch.start()?;
            match w {
                0 => k::p30_row_sum_unchecked::launch_in(module, stream, config, &x, cols as u32, &mut sums),
                1 => k::p30_row_sum::launch(stream, config, &x, cols as u32, &mut sums),
                _ => k::p30_row_sum_slice::launch(stream, config, &x, cols as u32, &mut sums),
            }
        })?;
        row(&format!("row sum, {threads}, loops"), &["llm.c blockReduce", "Rust x[..] checked", "Rust row slice"], &variants, bytes);
        // Session 14: what `RuntimeBlockReduce`'s trailing barrier costs (the one difference
        // between the first and the third kernel: the third reduces by hand as CUB does).
        let barriers = measure(stream, RUNS, &[0, 1, 2], |w, stopwatch| -> ferrocuda::Result<()> {
            stopwatch.start()?;
            match w {
                0 => k::p30_row_sum_unchecked::launch(stream, config, &x, cols as u32, &mut sums),
                1 => k::p30_row_sum_unchecked::launch_in(module, stream, config, &x, cols as u32, &mut sums),
                _ => k::p30_row_sum_one_barrier::launch(stream, config, &x, cols as u32, &mut sums),
            }
        })?;
        row(&format!("row sum, {threads}, barriers"), &["Rust Runtime (2 barriers)", "llm.c blockReduce", "Rust by hand (1 barrier)"], &barriers, bytes);
    }
    let expected: f32 = host[..cols].iter().sum();
    assert_eq!(sums.to_vec()?[0], expected, "row 0's sum");
    Ok(())
}
