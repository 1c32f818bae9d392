//! cuBLAS SGEMM (loaded at run time through cudarc) on ferrocuda buffers: the second matmul
//! reference.

use ferrocuda_host::{Cublas, DeviceBuffer, Stream};

use super::cases::BenchResult;

/// A cuBLAS handle (ferrocuda-host's one way of making one) bound to one stream.
pub struct Sgemm {
    cublas: Cublas,
}

impl Sgemm {
    /// A handle on `stream`, or why cuBLAS cannot be used.
    pub fn new(stream: &Stream) -> Result<Self, String> {
        if !Cublas::is_available() {
            return Err("libcublas not found: add its directory (e.g. /usr/local/cuda/lib64) to LD_LIBRARY_PATH; cuBLAS comparison skipped".into());
        }
        Ok(Sgemm { cublas: Cublas::new(stream).map_err(|e| e.to_string())? })
    }

    /// Queues `c = a * b` for row-major `side x side` matrices. cuBLAS is column-major, and a
    /// row-major matrix is its transpose in column-major, so this asks for `cᵀ = bᵀ aᵀ`.
    pub fn row_major(&self, a: &DeviceBuffer<f32>, b: &DeviceBuffer<f32>, c: &mut DeviceBuffer<f32>, side: u32) -> BenchResult<()> {
        let s = side as usize;
        self.cublas.sgemm((s, s, s), 1.0, b, a, 0.0, c).map_err(|e| e.to_string().into())
    }
}
