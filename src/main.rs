//! The main job: runs the bundled example kernels on the GPU, checks each result against a
//! CPU reference, and prints a table. Without a GPU it says so and runs the same kernels on the
//! CPU executor instead.

use std::process::ExitCode;

use std::time::Instant;

use ferrocuda::cpu::{CpuError, CpuExecutor};
use ferrocuda::{Context, DeviceBuffer, Error, Event, LaunchConfig, Stream, launch};
use gpu_kernels::{KERNELS, saxpy, sum_f32};

/// Elements per array: 64 MiB of f32 each.
const N: usize = 16 << 20;

struct Row {
    kernel: &'static str,
    elements: usize,
    millis: f32,
    bytes_moved: usize,
    verified: Result<(), String>,
}

fn main() -> ExitCode {
    match run() {
        Ok(rows) => {
            print_table(&rows);
            if rows.iter().all(|r| r.verified.is_ok()) { ExitCode::SUCCESS } else { ExitCode::FAILURE }
        }
        Err(Error::NoDriver) if !ferrocuda_test_support::gpu_required() => {
            println!("No GPU: no CUDA driver found (libcuda.so.1 could not be loaded).");
            run_on_cpu()
        }
        Err(Error::NoDevice { count: 0, .. }) if !ferrocuda_test_support::gpu_required() => {
            println!("No GPU: the CUDA driver is installed but reports no device.");
            run_on_cpu()
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
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

fn run() -> ferrocuda::Result<Vec<Row>> {
    let context = Context::primary(0)?;
    let device = context.device();
    let (major, minor) = ferrocuda::driver_version()?;
    let (cc_major, cc_minor) = device.compute_capability()?;
    println!(
        "device 0: {} (sm_{cc_major}{cc_minor}, {} SMs, {:.1} GiB), driver CUDA {major}.{minor}",
        device.name()?,
        device.multiprocessor_count()?,
        device.total_memory()? as f64 / (1u64 << 30) as f64
    );
    println!("kernels: crate {}, built by {}, running {}", KERNELS.crate_name, KERNELS.toolchain, context.embedded_image(&KERNELS)?);
    let stream = Stream::new(&context)?;
    Ok(vec![run_saxpy(&context, &stream)?, run_sum(&context, &stream)?])
}

/// Runs `body` once to warm up, then times a second run with events.
fn timed(context: &Context, stream: &Stream, mut body: impl FnMut() -> ferrocuda::Result<()>) -> ferrocuda::Result<f32> {
    body()?;
    let (start, end) = (Event::new(context)?, Event::new(context)?);
    start.record(stream)?;
    body()?;
    end.record(stream)?;
    end.synchronize()?;
    start.elapsed_ms(&end)
}

fn run_saxpy(context: &Context, stream: &Stream) -> ferrocuda::Result<Row> {
    let a = 2.5f32;
    let x_host: Vec<f32> = (0..N).map(|i| (i % 1000) as f32 * 0.5).collect();
    let y_host: Vec<f32> = (0..N).map(|i| (i % 7) as f32 - 3.0).collect();
    let x = DeviceBuffer::from_slice(context, &x_host)?;
    let mut y = DeviceBuffer::from_slice(context, &y_host)?;
    let config = LaunchConfig::for_elements(N, 256);
    let millis = timed(context, stream, || launch!(saxpy<<<config.grid, config.block, 0, stream>>>(a, &x, &mut y)))?;
    stream.synchronize()?;
    // Two launches ran: y = a*x + (a*x + y0). Each step is one fma on the GPU; compare with
    // the same fused steps on the CPU, which round identically.
    let got = y.to_vec()?;
    let verified = (0..N).try_for_each(|i| {
        let expected = a.mul_add(x_host[i], a.mul_add(x_host[i], y_host[i]));
        if got[i] == expected { Ok(()) } else { Err(format!("y[{i}] = {} but the CPU computed {expected}", got[i])) }
    });
    Ok(Row { kernel: "saxpy", elements: N, millis, bytes_moved: 3 * N * 4, verified })
}

fn run_sum(context: &Context, stream: &Stream) -> ferrocuda::Result<Row> {
    let x_host: Vec<f32> = (0..N).map(|i| ((i * 7919) % 1024) as f32 / 1024.0).collect();
    let x = DeviceBuffer::from_slice(context, &x_host)?;
    let mut out = DeviceBuffer::<f32>::zeroed(context, 1)?;
    let sms = context.device().multiprocessor_count()?;
    let config = LaunchConfig::from((sms * 8, 256u32));
    let millis = timed(context, stream, || {
        out.zero_async(stream)?;
        launch!(sum_f32<<<config.grid, config.block, 0, stream>>>(&x, &mut out))
    })?;
    stream.synchronize()?;
    let got = out.to_vec()?[0] as f64;
    let expected: f64 = x_host.iter().map(|&v| v as f64).sum();
    let verified = check_sum(got, expected, config);
    Ok(Row { kernel: "sum_f32", elements: N, millis, bytes_moved: N * 4, verified })
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
