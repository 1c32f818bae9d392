//! Typed cuBLAS GEMMs on ferrocuda buffers: a bf16 GEMM written for row-major data (the
//! operand swap cuBLAS's column-major convention needs), a strided batch, and a cuBLASLt
//! matmul with a fused bias + GELU epilogue (a transformer MLP layer's first half). Each
//! result is checked against the host; then the bf16 GemmEx (beside the raw `cublasGemmEx` a
//! CUDA C++ user writes, same handle and buffers, interleaved) and the Lt matmul with and
//! without bias + GELU are timed at 4096³ and 512³ (20 back-to-back calls per event pair, the
//! median of 5 such batches).
//!
//! `LD_LIBRARY_PATH=/usr/local/cuda/lib64 cargo run --release --example cublas_gemm`

use std::process::ExitCode;

use ferrocuda::half::bf16;
use ferrocuda::{Batch, Context, Cublas, CublasLt, DeviceBuffer, Epilogue, Event, Gemm, MatrixLayout, Stream};

fn main() -> ExitCode {
    ferrocuda_test_support::exit_code(run())
}

/// Values in [-1, 1) as bf16 (multiples of 1/32: exact).
fn values(len: usize, seed: usize) -> Vec<bf16> {
    (0..len).map(|i| bf16::from_f32((((i * 7 + seed * 13) % 64) as f32 - 32.0) / 32.0)).collect()
}

fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
}

fn run() -> ferrocuda::Result<()> {
    let context = Context::primary(0)?;
    if !Cublas::is_available() || !CublasLt::is_available() {
        println!("nothing to run: libcublas/libcublasLt not found; add its directory (e.g. /usr/local/cuda/lib64) to LD_LIBRARY_PATH");
        return Ok(());
    }
    let stream = Stream::new(&context)?;
    let blas = Cublas::new(&stream)?;
    let lt = CublasLt::new(&stream)?;

    // 1. Row-major Y (m x n) = X (m x k) · Wᵀ with W stored row-major n x k (a linear layer).
    // Column-major sees the row-major X as Xᵀ (k x m) and W as Wᵀ (k x n), and writes Yᵀ
    // (n x m): Yᵀ = W · Xᵀ = op_T(Wᵀ as stored) · (Xᵀ as stored).
    let (m, n, k) = (64usize, 96usize, 128usize);
    let (x, w) = (values(m * k, 1), values(n * k, 2));
    let (x_dev, w_dev) = (DeviceBuffer::from_slice(&context, &x)?, DeviceBuffer::from_slice(&context, &w)?);
    let mut y_dev = DeviceBuffer::<f32>::zeroed(&context, m * n)?;
    let row_major = Gemm::<bf16, f32>::new(MatrixLayout::col_major(k, n).transposed(), MatrixLayout::col_major(k, m), MatrixLayout::col_major(n, m))?;
    blas.gemm(&row_major, 1.0, &w_dev, &x_dev, 0.0, &mut y_dev)?;
    let y = y_dev.to_vec()?;
    let mut worst = 0.0f64;
    for i in 0..m {
        for j in 0..n {
            let exact: f64 = (0..k).map(|p| x[i * k + p].to_f64() * w[j * k + p].to_f64()).sum();
            worst = worst.max((y[i * n + j] as f64 - exact).abs()); // row-major Y[i][j]
        }
    }
    assert!(worst < 1e-3, "row-major GEMM differs from the host by {worst}");
    println!("row-major bf16 Y = X·Wᵀ ({m}x{n}x{k}) through column-major cuBLAS: worst difference from the host {worst:e}: verified");

    // 2. A strided batch of 8: one W shared (stride 0), 8 inputs, 8 outputs.
    let batch = Batch { count: 8, stride_a: 0, stride_b: k * m, stride_c: n * m };
    let xs = values(8 * m * k, 3);
    let xs_dev = DeviceBuffer::from_slice(&context, &xs)?;
    let mut ys_dev = DeviceBuffer::<f32>::zeroed(&context, 8 * m * n)?;
    blas.gemm(&row_major.batched(batch)?, 1.0, &w_dev, &xs_dev, 0.0, &mut ys_dev)?;
    let ys = ys_dev.to_vec()?;
    let (b, i, j) = (5, 17, 33);
    let exact: f64 = (0..k).map(|p| xs[b * m * k + i * k + p].to_f64() * w[j * k + p].to_f64()).sum();
    assert!((ys[b * m * n + i * n + j] as f64 - exact).abs() < 1e-3);
    println!("strided batch of 8 with a shared weight matrix: verified (sampled)");

    // 3. cuBLASLt: Y = gelu(X·Wᵀ + bias), bf16 in and out, bias and GELU fused into the GEMM.
    let bias = values(n, 4);
    let bias_dev = DeviceBuffer::from_slice(&context, &bias)?;
    let mut h_dev = DeviceBuffer::<bf16>::zeroed(&context, m * n)?;
    let layer = Gemm::<bf16, bf16>::new(MatrixLayout::col_major(k, n).transposed(), MatrixLayout::col_major(k, m), MatrixLayout::col_major(n, m))?;
    lt.matmul(&layer, Epilogue::bias_gelu(&bias_dev), 1.0, &w_dev, &x_dev, 0.0, &mut h_dev)?;
    let h = h_dev.to_vec()?;
    let mut worst = 0.0f64;
    for i in 0..m {
        for j in 0..n {
            let pre: f64 = (0..k).map(|p| x[i * k + p].to_f64() * w[j * k + p].to_f64()).sum::<f64>() + bias[j].to_f64();
            let exact = gelu(pre);
            worst = worst.max((h[i * n + j].to_f64() - exact).abs() / (1.0 + exact.abs()));
        }
    }
    assert!(worst < 1.5e-2, "cuBLASLt bias+GELU differs from the host by {worst}");
    println!("cuBLASLt bf16 gelu(X·Wᵀ + bias) ({m}x{n}x{k}): worst relative difference from the host {worst:.2e}: verified");

    // 4. Timing: bf16 GemmEx (bf16 out, f32 compute) and the Lt bias + GELU matmul, TN, at 4096³
    // (compute-bound) and 512³ (where per-call costs would show).
    for side in [4096usize, 512] {
        time_size(&context, &stream, &blas, &lt, side)?;
    }
    Ok(())
}

/// Times the three TN calls at `side`³: 20 back-to-back calls per event pair, median of 5.
fn time_size(context: &Context, stream: &Stream, blas: &Cublas, lt: &CublasLt, side: usize) -> ferrocuda::Result<()> {
    let big_a = DeviceBuffer::from_slice(context, &values(side * side, 5))?;
    let big_b = DeviceBuffer::from_slice(context, &values(side * side, 6))?;
    let big_bias = DeviceBuffer::from_slice(context, &values(side, 7))?;
    let mut big_c = DeviceBuffer::<bf16>::zeroed(context, side * side)?;
    let tn =
        Gemm::<bf16, bf16>::new(MatrixLayout::col_major(side, side).transposed(), MatrixLayout::col_major(side, side), MatrixLayout::col_major(side, side))?;
    let flop = 2.0 * (side as f64).powi(3);
    let (start, end) = (Event::new(context)?, Event::new(context)?);
    let time = |what: &str, call: &mut dyn FnMut() -> ferrocuda::Result<()>| -> ferrocuda::Result<f64> {
        const BATCH: usize = 20;
        call()?; // warm-up (and the Lt heuristic)
        let mut ms = Vec::new();
        for _ in 0..5 {
            start.record(stream)?;
            for _ in 0..BATCH {
                call()?;
            }
            end.record(stream)?;
            end.synchronize()?;
            ms.push(start.elapsed_ms(&end)? as f64 / BATCH as f64);
        }
        stream.synchronize()?;
        ms.sort_by(f64::total_cmp);
        let tflops = flop / (ms[2] * 1e-3) / 1e12;
        println!("{what}: {:.4} ms, {tflops:.1} TFLOP/s (median of 5 batches of {BATCH}; spread {:.1}%)", ms[2], (ms[4] - ms[0]) / ms[2] * 100.0);
        Ok(tflops)
    };
    // The baseline: the very `cublasGemmEx` call a CUDA C++ user writes, on the same handle and
    // buffers, with nothing checked or declared (the buffers are ordered by hand here: one
    // stream). Interleaved with the typed call, batch by batch, so clocks affect both alike.
    let (pa, pb, pc) = (big_a.device_ptr(), big_b.device_ptr(), big_c.device_ptr());
    let raw = || -> ferrocuda::Result<()> {
        use cudarc::cublas::sys as cublas;
        let (alpha, beta, n) = (1.0f32, 0.0f32, side as i32);
        let bf = cublas::cudaDataType::CUDA_R_16BF;
        stream.enqueue("raw cublasGemmEx (baseline)", &[], |_| {
            // SAFETY: the three buffers hold side² bf16 each and outlive the call (synchronised
            // by `time` before they drop); nothing else uses them meanwhile.
            let status = unsafe {
                cublas::cublasGemmEx(
                    blas.raw(),
                    cublas::cublasOperation_t::CUBLAS_OP_T,
                    cublas::cublasOperation_t::CUBLAS_OP_N,
                    n,
                    n,
                    n,
                    (&alpha as *const f32).cast(),
                    pa as *const std::ffi::c_void,
                    bf,
                    n,
                    pb as *const std::ffi::c_void,
                    bf,
                    n,
                    (&beta as *const f32).cast(),
                    pc as *mut std::ffi::c_void,
                    bf,
                    n,
                    cublas::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                    cublas::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                )
            };
            if status == cublas::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
                Ok(())
            } else {
                Err(ferrocuda::Error::Library { library: "cuBLAS", call: "cublasGemmEx", status: format!("{status:?}") })
            }
        })
    };
    let mut typed_ms = Vec::new();
    let mut raw_ms = Vec::new();
    for _ in 0..3 {
        let t = time(&format!("{side}^3 bf16 GemmEx TN (Cublas::gemm, bf16 out, f32 compute)"), &mut || blas.gemm(&tn, 1.0, &big_a, &big_b, 0.0, &mut big_c))?;
        typed_ms.push(t);
        raw_ms.push(time(&format!("{side}^3 bf16 GemmEx TN (raw cublasGemmEx, the C++ call)"), &mut || raw())?);
    }
    typed_ms.sort_by(f64::total_cmp);
    raw_ms.sort_by(f64::total_cmp);
    println!("{side}^3 bf16 GemmEx: typed / raw throughput {:.3}x (medians of 3 interleaved rounds)", typed_ms[1] / raw_ms[1]);
    time(&format!("{side}^3 bf16 cuBLASLt TN (CublasLt::matmul, no epilogue)"), &mut || {
        lt.matmul(&tn, Epilogue::none(), 1.0, &big_a, &big_b, 0.0, &mut big_c)
    })?;
    time(&format!("{side}^3 bf16 cuBLASLt TN + bias + GELU (CublasLt::matmul, Epilogue::bias_gelu)"), &mut || {
        lt.matmul(&tn, Epilogue::bias_gelu(&big_bias), 1.0, &big_a, &big_b, 0.0, &mut big_c)
    })?;
    Ok(())
}
