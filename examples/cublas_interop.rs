//! Runtime-library interop: cuBLAS SGEMM on ferrocuda buffers, in the primary context that
//! ferrocuda retained (cuBLAS, a runtime-API library, uses the current context), on a
//! ferrocuda stream. cuBLAS is loaded at run time through cudarc.
//!
//! `LD_LIBRARY_PATH=/usr/local/cuda/lib64 cargo run --release --example cublas_interop`

use std::process::ExitCode;

use ferrocuda::{Context, Cublas, DeviceBuffer, Stream};

fn main() -> ExitCode {
    ferrocuda_test_support::exit_code(run())
}

fn run() -> ferrocuda::Result<()> {
    let context = Context::primary(0)?;
    if !Cublas::is_available() {
        println!("nothing to run: libcublas not found; add its directory (e.g. /usr/local/cuda/lib64) to LD_LIBRARY_PATH");
        return Ok(());
    }
    let n = 256usize; // C = A * B, square, column-major
    let a: Vec<f32> = (0..n * n).map(|i| ((i % 17) as f32 - 8.0) / 8.0).collect();
    let b: Vec<f32> = (0..n * n).map(|i| ((i % 13) as f32 - 6.0) / 4.0).collect();
    let stream = Stream::new(&context)?;
    let a_dev = DeviceBuffer::from_slice(&context, &a)?;
    let b_dev = DeviceBuffer::from_slice(&context, &b)?;
    let c_dev = DeviceBuffer::<f32>::zeroed(&context, n * n)?;
    let mut c_dev = c_dev;
    // One handle on our stream, in our primary context; it declares the buffers it uses, so
    // the SGEMM is ordered with kernels and copies on other streams like a launch.
    let cublas = Cublas::new(&stream)?;
    cublas.sgemm((n, n, n), 1.0, &a_dev, &b_dev, 0.0, &mut c_dev)?;
    stream.synchronize()?;
    let c = c_dev.to_vec()?;
    let mut worst = 0.0f64;
    for col in 0..n {
        for row in 0..n {
            let expected: f64 = (0..n).map(|k| a[row + k * n] as f64 * b[k + col * n] as f64).sum();
            worst = worst.max((c[row + col * n] as f64 - expected).abs());
        }
    }
    assert!(worst < 1e-2, "cuBLAS SGEMM differs from the CPU by {worst}");
    println!("cuBLAS SGEMM {n}x{n} on ferrocuda buffers in the primary context: worst difference from the CPU {worst:e}: verified");
    Ok(())
}
