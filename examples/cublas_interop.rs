//! Runtime-library interop: cuBLAS SGEMM on ferrocuda buffers, in the primary context that
//! ferrocuda retained (cuBLAS, a runtime-API library, uses the current context), on a
//! ferrocuda stream. cuBLAS is loaded at run time through cudarc.
//!
//! `LD_LIBRARY_PATH=/usr/local/cuda/lib64 cargo run --release --example cublas_interop`

use std::process::ExitCode;

use cudarc::cublas::sys as cublas;
use ferrocuda::{Context, DeviceBuffer, Stream};

fn main() -> ExitCode {
    ferrocuda_test_support::exit_code(run())
}

fn run() -> ferrocuda::Result<()> {
    let context = Context::primary(0)?;
    // SAFETY: only probes whether the library can be opened.
    if !unsafe { cublas::is_culib_present() } {
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
    context.bind_to_thread()?;
    let (alpha, beta) = (1.0f32, 0.0f32);
    let mut handle = std::ptr::null_mut();
    // SAFETY: standard cuBLAS calls on live buffers of n*n floats; the handle is destroyed
    // after the stream is synchronised.
    let status = unsafe {
        let mut status = cublas::cublasCreate_v2(&mut handle);
        if status == cublas::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
            cublas::cublasSetStream_v2(handle, stream.raw() as cublas::cudaStream_t);
            status = cublas::cublasSgemm_v2(
                handle,
                cublas::cublasOperation_t::CUBLAS_OP_N,
                cublas::cublasOperation_t::CUBLAS_OP_N,
                n as i32,
                n as i32,
                n as i32,
                &alpha,
                a_dev.device_ptr() as *const f32,
                n as i32,
                b_dev.device_ptr() as *const f32,
                n as i32,
                &beta,
                c_dev.device_ptr() as *mut f32,
                n as i32,
            );
        }
        status
    };
    stream.synchronize()?;
    if !handle.is_null() {
        // SAFETY: created above, its work is done.
        unsafe { cublas::cublasDestroy_v2(handle) };
    }
    assert_eq!(status, cublas::cublasStatus_t::CUBLAS_STATUS_SUCCESS, "cuBLAS failed");
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
