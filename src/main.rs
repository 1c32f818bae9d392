//! The main job: runs the example kernels (`gpu_kernels::examples`) on GPU 0 beside their CUDA
//! C++ twins (compiled at run time by NVRTC), checks every result against a CPU reference, and
//! prints their times side by side. Without NVRTC it shows the Rust kernels alone and says what
//! to install; without a GPU it says so and runs two kernels on the CPU executor instead.

use std::process::ExitCode;

use std::time::Instant;

use ferrocuda::cpu::{CpuError, CpuExecutor};
use ferrocuda::{Context, Error, LaunchConfig, Stream};
use gpu_kernels::twins::nvrtc;
use gpu_kernels::twins::timing::Runs;
use gpu_kernels::twins::{Env, Outcome, Sizes};
use gpu_kernels::{KERNELS, saxpy, sum_f32};

/// Elements per array on the CPU executor: 64 MiB of f32 each.
const N: usize = 16 << 20;

/// One kernel's line in the CPU executor's table.
struct Row {
    kernel: &'static str,
    elements: usize,
    millis: f32,
    bytes_moved: usize,
    verified: Result<(), String>,
}

fn main() -> ExitCode {
    match run() {
        Ok(outcome) => {
            if outcome.failures.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(error) => match error.downcast_ref::<Error>() {
            Some(Error::NoDriver) if !ferrocuda_test_support::gpu_required() => {
                println!("No GPU: no CUDA driver found (libcuda.so.1 could not be loaded).");
                run_on_cpu()
            }
            Some(Error::NoDevice { count: 0, .. }) if !ferrocuda_test_support::gpu_required() => {
                println!("No GPU: the CUDA driver is installed but reports no device.");
                run_on_cpu()
            }
            _ => {
                eprintln!("error: {error}");
                ExitCode::FAILURE
            }
        },
    }
}

/// Without a GPU: the same kernels on the CPU executor, checked against the same references.
fn run_on_cpu() -> ExitCode {
    let executor = CpuExecutor::new();
    println!("Running the kernels on the CPU executor instead ({} worker threads); times are CPU times, not GPU ones.", executor.workers());
    let rows = match cpu_rows(&executor) {
        Ok(rows) => rows,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    print_table(&rows);
    println!("On a GPU the main job runs the example kernels beside their CUDA C++ twins instead.");
    if rows.iter().all(|r| r.verified.is_ok()) { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

fn cpu_rows(executor: &CpuExecutor) -> Result<Vec<Row>, CpuError> {
    let a = 2.5f32;
    let x: Vec<f32> = (0..N).map(|i| (i % 1000) as f32 * 0.5).collect();
    let y0: Vec<f32> = (0..N).map(|i| (i % 7) as f32 - 3.0).collect();
    let mut y = y0.clone();
    let start = Instant::now();
    saxpy::launch_cpu(executor, LaunchConfig::for_elements(N, 256), a, &x, &mut y)?;
    let millis = start.elapsed().as_secs_f32() * 1e3;
    // The executor runs the kernel's own Rust code on the host: unfused, exactly `a * x + y`.
    let verified = (0..N).try_for_each(|i| {
        let expected = a * x[i] + y0[i];
        if y[i] == expected { Ok(()) } else { Err(format!("y[{i}] = {} but the reference computed {expected}", y[i])) }
    });
    let saxpy_row = Row { kernel: "saxpy", elements: N, millis, bytes_moved: 3 * N * 4, verified };

    let x: Vec<f32> = (0..N).map(|i| ((i * 7919) % 1024) as f32 / 1024.0).collect();
    let mut out = [0.0f32];
    let config = LaunchConfig::from((64u32, 256u32));
    let start = Instant::now();
    sum_f32::launch_cpu(executor, config, &x, &mut out)?;
    let millis = start.elapsed().as_secs_f32() * 1e3;
    let expected: f64 = x.iter().map(|&v| v as f64).sum();
    let sum_row = Row { kernel: "sum_f32", elements: N, millis, bytes_moved: N * 4, verified: check_sum(out[0] as f64, expected, config) };
    Ok(vec![saxpy_row, sum_row])
}

/// The f32 sum of `sum_f32` against the exact one: each thread adds serially, a 5-step warp
/// tree follows, then one atomic add per warp into the total. The classic bound for recursive
/// f32 summation over that many steps is steps * eps * sum|x| (the inputs are >= 0).
fn check_sum(got: f64, expected: f64, config: LaunchConfig) -> Result<(), String> {
    let threads = config.grid.volume() as usize * config.block.volume() as usize;
    let steps = N.div_ceil(threads) + 5 + threads / 32;
    let bound = steps as f64 * f32::EPSILON as f64 * expected;
    let error = (got - expected).abs();
    if error <= bound { Ok(()) } else { Err(format!("sum = {got} but the CPU computed {expected} (error {error} > bound {bound})")) }
}

/// The GPU run: device and toolchains, then every example kernel beside its CUDA C++ twin.
fn run() -> Result<Outcome, Box<dyn std::error::Error>> {
    let context = Context::primary(0)?;
    let device = context.device();
    let (major, minor) = ferrocuda::driver_version()?;
    let arch = device.arch()?;
    let sm_count = device.multiprocessor_count()?;
    println!(
        "device 0: {} (sm_{arch}, {sm_count} SMs, {:.1} GiB), driver CUDA {major}.{minor}",
        device.name()?,
        device.total_memory()? as f64 / (1u64 << 30) as f64
    );
    println!("Rust kernels: crate {}, built by {}, running {}", KERNELS.crate_name, KERNELS.toolchain, context.embedded_image(&KERNELS)?);
    let (twins, nvrtc_missing) = match nvrtc::compile_reference(&context, arch) {
        Ok(compiled) => {
            println!("CUDA C++ twins: bench/cuda/reference_kernels.cu, NVRTC {} -> cubin sm_{arch} in {:.0} ms", compiled.version, compiled.compile_ms);
            (Some(compiled), false)
        }
        Err(why) => {
            println!("CUDA C++ twins: not shown ({why})");
            (None, matches!(why, nvrtc::Unavailable::NoLibrary))
        }
    };
    let runs = Runs { warmup: 2, timed: 5 };
    let env =
        Env { context: context.clone(), stream: Stream::non_blocking(&context)?, runs, cuda: twins.as_ref().map(|t| &t.module), sm_count, sizes: Sizes::QUICK };
    println!(
        "Each time is the median of {} runs (CUDA events), after {} warm-up runs; every result is checked against the CPU first.\n",
        runs.timed, runs.warmup
    );
    let outcome = gpu_kernels::twins::run_all(&env, |_| {});
    print_twin_table(&outcome, twins.is_some());
    if nvrtc_missing {
        println!("\nTo see the CUDA C++ twins beside these, make NVRTC (libnvrtc.so of CUDA 13) loadable and run again:");
        println!("  with the CUDA toolkit:  LD_LIBRARY_PATH=/usr/local/cuda/lib64 cargo run --release");
        println!("  without it:             pip install 'nvidia-cuda-nvrtc==13.0.*', then put its nvidia/cu13/lib on LD_LIBRARY_PATH");
    }
    Ok(outcome)
}

/// One line per kernel: the Rust time, the CUDA C++ time, their ratio, the Rust kernel's rate
/// and the check; then cuBLAS beside the matmuls, the comparisons skipped and the failures.
fn print_twin_table(outcome: &Outcome, with_twins: bool) {
    println!("{:<18} {:<22} {:>10} {:>14} {:>10} {:>14}  {:<26} verified", "kernel", "size", "Rust (ms)", "CUDA C++ (ms)", "CUDA/Rust", "Rust rate", "check");
    let twin_of = |kernel: &str, label: &str| outcome.rows.iter().find(|r| r.kernel == kernel && r.implementation == label);
    for rust in outcome.rows.iter().filter(|r| r.implementation == gpu_kernels::twins::timing::Implementation::Rust.label()) {
        let cuda = twin_of(rust.kernel, "CUDA C++ (NVRTC)");
        let (cuda_ms, ratio) = match cuda {
            Some(cuda) => (format!("{:.3}", cuda.median_ms), format!("{:.2}x", cuda.median_ms / rust.median_ms)),
            None => ("-".to_string(), "-".to_string()),
        };
        let rate = match (rust.gbps(), rust.tflops()) {
            (Some(gbps), _) => format!("{gbps:.0} GB/s"),
            (None, Some(tflops)) => format!("{tflops:.1} TFLOP/s"),
            (None, None) => "-".to_string(),
        };
        println!("{:<18} {:<22} {:>10.3} {:>14} {:>10} {:>14}  {:<26} yes", rust.kernel, rust.size, rust.median_ms, cuda_ms, ratio, rate, rust.check);
    }
    if let Some(cublas) = outcome.rows.iter().find(|r| r.implementation == "cuBLAS") {
        let rate = cublas.tflops().map(|t| format!(" ({t:.1} TFLOP/s)")).unwrap_or_default();
        println!("cuBLAS SGEMM on the matmuls' inputs: {:.3} ms{rate}, checked: {}", cublas.median_ms, cublas.check);
    }
    if with_twins {
        println!("CUDA/Rust: the CUDA C++ twin's time over the Rust kernel's (above 1: Rust is faster).");
    }
    for skipped in &outcome.skipped {
        println!("skipped: {skipped}");
    }
    for failure in &outcome.failures {
        println!("NOT verified: {failure}");
    }
}

fn print_table(rows: &[Row]) {
    println!("{:<10} {:>12} {:>10} {:>10}  verified", "kernel", "elements", "time (ms)", "GB/s");
    for row in rows {
        let gbps = row.bytes_moved as f64 / (row.millis as f64 * 1e-3) / 1e9;
        let verified = match &row.verified {
            Ok(()) => "yes".to_string(),
            Err(why) => format!("NO: {why}"),
        };
        println!("{:<10} {:>12} {:>10.3} {:>10.1}  {verified}", row.kernel, row.elements, row.millis, gbps);
    }
}
