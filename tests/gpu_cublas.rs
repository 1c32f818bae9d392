//! Runtime-library interop: cuBLAS (loaded at run time through cudarc) runs SGEMM on our
//! buffers, in our primary context, on our stream, and matches a CPU matrix product.
//!
//! cuBLAS is a runtime-API library: it uses whatever context is current on the thread, which
//! is the primary context that `Context::primary` retained and bound. That sharing is why the
//! primary context is ferrocuda's default.

mod common;

use ferrocuda::{Cublas, DeviceBuffer, Stream};

#[test]
fn cublas_sgemm_on_our_buffers_matches_the_cpu() {
    let Some(context) = common::gpu_or_skip("cublas_sgemm_on_our_buffers_matches_the_cpu") else { return };
    if !Cublas::is_available() {
        assert!(
            !ferrocuda_test_support::gpu_required(),
            "REQUIRE_GPU=1 but libcublas could not be loaded (add its directory, e.g. /usr/local/cuda/lib64, to LD_LIBRARY_PATH)"
        );
        eprintln!("SKIPPED cublas_sgemm_on_our_buffers_matches_the_cpu: libcublas not found (add its directory to LD_LIBRARY_PATH)");
        return;
    }
    // Column-major, as BLAS wants: A is m x k, B is k x n, C is m x n.
    let (m, n, k) = (123usize, 77usize, 64usize);
    let a: Vec<f32> = (0..m * k).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
    let b: Vec<f32> = (0..k * n).map(|i| ((i * 3) % 13) as f32 * 0.5 - 3.0).collect();
    let c0: Vec<f32> = (0..m * n).map(|i| (i % 5) as f32).collect();
    let (alpha, beta) = (1.5f32, 0.5f32);

    let stream = Stream::new(&context).unwrap();
    let a_dev = DeviceBuffer::from_slice(&context, &a).unwrap();
    let b_dev = DeviceBuffer::from_slice(&context, &b).unwrap();
    let c_dev = DeviceBuffer::from_slice(&context, &c0).unwrap();
    let mut c_dev = c_dev;
    let cublas = Cublas::new(&stream).unwrap();
    cublas.sgemm((m, n, k), alpha, &a_dev, &b_dev, beta, &mut c_dev).unwrap();
    stream.synchronize().unwrap();

    let got = c_dev.to_vec().unwrap();
    let mut worst = 0.0f64;
    for col in 0..n {
        for row in 0..m {
            let dot: f64 = (0..k).map(|p| a[row + p * m] as f64 * b[p + col * k] as f64).sum();
            let expected = alpha as f64 * dot + beta as f64 * c0[row + col * m] as f64;
            let error = (got[row + col * m] as f64 - expected).abs();
            worst = worst.max(error);
            assert!(error <= 1e-3 * expected.abs().max(1.0), "C[{row}, {col}] = {} but the CPU says {expected}", got[row + col * m]);
        }
    }
    eprintln!("cuBLAS SGEMM {m}x{n}x{k} on ferrocuda buffers: worst error {worst:e}");
}
