//! A ferrocuda RMSNorm on candle's CUDA handles, through cudarc, the way a candle `CustomOp2`'s
//! `cuda_fwd` gets them: candle 0.11's `CudaDevice` is a cudarc 0.19 `CudaContext` (the primary
//! context) with a stream made by `context.new_stream()` (`device.cuda_stream()`), and a
//! `CudaStorage` holds a `CudaSlice<f32>` (`storage.as_cuda_slice::<f32>()`). This example makes
//! those exact objects with cudarc, as candle does, borrows them in place with
//! `ferrocuda::borrowed::cudarc`, runs `interop_kernels::rms_norm` on candle's stream, and compares
//! the result with candle's own RMSNorm kernel (`rmsnorm_f32` of candle-kernels' `reduce.cu`,
//! the kernel `candle_nn::ops::rms_norm` launches), launched as candle-nn launches it, on the
//! same stream.
//!
//! candle's kernels are compiled by nvcc when candle is built; give their PTX with
//! `CANDLE_REDUCE_PTX=<target>/release/build/candle-kernels-*/out/reduce.ptx` (docs/interop.md
//! says how to build it). Without it the reference is a double-precision one on the host.
//! Why not candle itself in this binary: see docs/interop.md, "candle".
//!
//! `cargo run --release --example candle_rms_norm`

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr, LaunchConfig as CudaLaunchConfig, PushKernelArg};
use ferrocuda::borrowed;
use interop_kernels::{rms_norm, rows_config};

const EPS: f32 = 1e-6;

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Errors as text (cudarc's, ferrocuda's and the checks' own).
type Result<T> = std::result::Result<T, String>;

fn run() -> Result<()> {
    // candle's `Device::new_cuda(0)` in cudarc terms; a machine without a GPU has nothing to run.
    if let Err(error) = ferrocuda::Context::primary(0) {
        return match error {
            ferrocuda::Error::NoDriver | ferrocuda::Error::NoDevice { .. } if !ferrocuda_test_support::gpu_required() => {
                println!("nothing to run: {error}");
                Ok(())
            }
            other => Err(other.to_string()),
        };
    }
    let context = CudaContext::new(0).map_err(|e| e.to_string())?;
    let stream = context.new_stream().map_err(|e| e.to_string())?;
    let candle = match std::env::var("CANDLE_REDUCE_PTX") {
        Ok(path) => {
            let module = context.load_module(cudarc::nvrtc::Ptx::from_file(&path)).map_err(|e| format!("loading {path}: {e}"))?;
            println!("reference: candle's rmsnorm_f32 from {path}");
            Some(module.load_function("rmsnorm_f32").map_err(|e| e.to_string())?)
        }
        Err(_) => {
            println!("reference: double precision on the host (set CANDLE_REDUCE_PTX for candle's own kernel)");
            None
        }
    };
    let mut failures = 0;
    for (rows, cols) in [(1, 1), (3, 31), (64, 1000), (4096, 4096), (8, 8192)] {
        let x_host = values(rows * cols, 1);
        let w_host = values(cols, 2);
        // candle's storage for x, w and the output (`CudaStorage` wraps exactly these).
        let x = stream.clone_htod(&x_host).map_err(|e| e.to_string())?;
        let w = stream.clone_htod(&w_host).map_err(|e| e.to_string())?;
        let mut out = stream.alloc_zeros::<f32>(rows * cols).map_err(|e| e.to_string())?;
        let addresses = ferrocuda_rms_norm(&stream, &x, &w, &mut out, rows)?;
        let expected = [address(&x, &stream), address(&w, &stream), address(&out, &stream)];
        let zero_copy = addresses == expected;
        failures += usize::from(!zero_copy);
        let ours = stream.clone_dtoh(&out).map_err(|e| e.to_string())?;
        let reference = match &candle {
            Some(function) => {
                let mut theirs = stream.alloc_zeros::<f32>(rows * cols).map_err(|e| e.to_string())?;
                candle_rms_norm(&stream, function, &x, &w, &mut theirs, rows, cols)?;
                stream.clone_dtoh(&theirs).map_err(|e| e.to_string())?
            }
            None => host_rms_norm(&x_host, &w_host, cols),
        };
        let (diff, scale) = ours.iter().zip(&reference).fold((0.0f32, 0.0f32), |(d, s), (a, b)| (d.max((a - b).abs()), s.max(b.abs())));
        let close = diff <= 1e-5 * (1.0 + scale);
        failures += usize::from(!close);
        println!(
            "rms_norm {rows:>4} x {cols:<5}: max |ferrocuda - reference| = {diff:.3e} (max |reference| {scale:.2}) {}; kernel addresses = candle's storage: {}",
            if close { "ok" } else { "MISMATCH" },
            if zero_copy { "yes (zero-copy)" } else { "NO" }
        );
    }
    if let Some(function) = &candle {
        time(&stream, function)?;
    }
    if failures > 0 {
        return Err(format!("{failures} check(s) failed"));
    }
    println!("all checks passed");
    Ok(())
}

/// What a `CustomOp2::cuda_fwd` would do: borrow candle's slices on candle's stream, launch the
/// ferrocuda kernel there; returns the device addresses the kernel received.
fn ferrocuda_rms_norm(stream: &Arc<CudaStream>, x: &CudaSlice<f32>, w: &CudaSlice<f32>, out: &mut CudaSlice<f32>, rows: usize) -> Result<[u64; 3]> {
    let ferro_stream = borrowed::cudarc::stream(stream).map_err(|e| e.to_string())?;
    // The scope orders candle's later work on these slices after the launch when it ends.
    borrowed::cudarc::scope(|scope| {
        let xs = scope.slice(x, stream)?;
        let ws = scope.slice(w, stream)?;
        let mut outs = scope.slice_mut(out, stream)?;
        rms_norm::launch(&ferro_stream, rows_config(rows), &xs, &ws, &mut outs, rows as u32, EPS)?;
        Ok::<_, ferrocuda::Error>([xs.device_ptr(), ws.device_ptr(), outs.device_ptr()])
    })
    .map_err(|e| e.to_string())
}

/// candle's own RMSNorm kernel, launched as `candle_nn::ops::rms_norm` launches it: one block
/// per row, 32 threads below 1024 columns, else 1024.
fn candle_rms_norm(
    stream: &Arc<CudaStream>,
    function: &cudarc::driver::CudaFunction,
    x: &CudaSlice<f32>,
    w: &CudaSlice<f32>,
    out: &mut CudaSlice<f32>,
    rows: usize,
    cols: usize,
) -> Result<()> {
    let block_size: i32 = if cols < 1024 { 32 } else { 1024 };
    let config = CudaLaunchConfig { grid_dim: (rows as u32, 1, 1), block_dim: (block_size as u32, 1, 1), shared_mem_bytes: 0 };
    let cols = cols as i32;
    let mut launch = stream.launch_builder(function);
    launch.arg(x).arg(out).arg(w).arg(&cols).arg(&block_size).arg(&EPS);
    // SAFETY: the arguments match `rmsnorm_f32(const float*, float*, const float*, int, int,
    // float)` of candle-kernels' reduce.cu; the slices hold rows x cols (x, out) and cols (w).
    unsafe { launch.launch(config) }.map(drop).map_err(|e| e.to_string())
}

/// Both kernels on 4096 x 4096, 100 times each after a warm-up: GPU time per launch.
fn time(stream: &Arc<CudaStream>, function: &cudarc::driver::CudaFunction) -> Result<()> {
    let (rows, cols) = (4096, 4096);
    let x = stream.clone_htod(&values(rows * cols, 3)).map_err(|e| e.to_string())?;
    let w = stream.clone_htod(&values(cols, 4)).map_err(|e| e.to_string())?;
    let mut out = stream.alloc_zeros::<f32>(rows * cols).map_err(|e| e.to_string())?;
    let mut measure = |name: &str, launch: &mut dyn FnMut(&mut CudaSlice<f32>) -> Result<()>| -> Result<()> {
        for _ in 0..10 {
            launch(&mut out)?;
        }
        stream.synchronize().map_err(|e| e.to_string())?;
        let start = std::time::Instant::now();
        for _ in 0..100 {
            launch(&mut out)?;
        }
        stream.synchronize().map_err(|e| e.to_string())?;
        let us = start.elapsed().as_secs_f64() * 1e6 / 100.0;
        println!("{name:<34} {us:>7.1} µs per launch ({rows} x {cols} f32, {:.0} GB/s)", 2.0 * (rows * cols * 4) as f64 / us / 1e3);
        Ok(())
    };
    measure("ferrocuda rms_norm (borrowed)", &mut |out| ferrocuda_rms_norm(stream, &x, &w, out, rows).map(drop))?;
    measure("candle rmsnorm_f32 (candle-kernels)", &mut |out| candle_rms_norm(stream, function, &x, &w, out, rows, cols))?;
    Ok(())
}

/// The device address of a cudarc slice, as candle would see it.
fn address(slice: &CudaSlice<f32>, stream: &CudaStream) -> u64 {
    let (ptr, _record) = slice.device_ptr(stream);
    ptr
}

fn host_rms_norm(x: &[f32], w: &[f32], cols: usize) -> Vec<f32> {
    x.chunks(cols)
        .flat_map(|row| {
            let scale = 1.0 / (row.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>() / cols as f64 + f64::from(EPS)).sqrt();
            row.iter().zip(w).map(move |(&v, &g)| (f64::from(v) * scale * f64::from(g)) as f32)
        })
        .collect()
}

/// Deterministic values in [-2, 2).
fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n).map(|i| (((i as u32).wrapping_mul(2654435761).wrapping_add(seed) >> 8) % 4096) as f32 / 1024.0 - 2.0).collect()
}
