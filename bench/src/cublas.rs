//! cuBLAS SGEMM (loaded at run time through cudarc) on ferrocuda buffers: the second matmul
//! reference.

use cudarc::cublas::sys as cublas;
use ferrocuda_host::{DeviceBuffer, Stream};

use crate::cases::BenchResult;

/// A cuBLAS handle bound to one stream of the current (primary) context.
pub struct Sgemm {
    handle: cublas::cublasHandle_t,
}

fn check(call: &str, status: cublas::cublasStatus_t) -> BenchResult<()> {
    if status == cublas::cublasStatus_t::CUBLAS_STATUS_SUCCESS { Ok(()) } else { Err(format!("{call} failed: {status:?}").into()) }
}

impl Sgemm {
    /// A handle on `stream`, or why cuBLAS cannot be used.
    pub fn new(stream: &Stream) -> Result<Self, String> {
        // SAFETY: only probes whether libcublas can be opened.
        if !unsafe { cublas::is_culib_present() } {
            return Err("libcublas not found: add its directory (e.g. /usr/local/cuda/lib64) to LD_LIBRARY_PATH; cuBLAS comparison skipped".into());
        }
        stream.context().bind_to_thread().map_err(|e| e.to_string())?;
        let mut handle = std::ptr::null_mut();
        // SAFETY: cuBLAS binds to the current context (ours); destroyed in Drop.
        check("cublasCreate", unsafe { cublas::cublasCreate_v2(&mut handle) }).map_err(|e| e.to_string())?;
        let sgemm = Sgemm { handle };
        // SAFETY: the stream belongs to the current context and outlives the handle's use
        // (the handle is dropped before the stream in every caller).
        check("cublasSetStream", unsafe { cublas::cublasSetStream_v2(handle, stream.raw() as cublas::cudaStream_t) }).map_err(|e| e.to_string())?;
        Ok(sgemm)
    }

    /// Queues `c = a * b` for row-major `side x side` matrices. cuBLAS is column-major, and a
    /// row-major matrix is its transpose in column-major, so this asks for `cᵀ = bᵀ aᵀ`.
    pub fn row_major(&self, a: &DeviceBuffer<f32>, b: &DeviceBuffer<f32>, c: &mut DeviceBuffer<f32>, side: u32) -> BenchResult<()> {
        let n = side as usize * side as usize;
        if a.len() < n || b.len() < n || c.len() < n {
            return Err(format!("SGEMM of {side}x{side} needs {n} elements per matrix").into());
        }
        let (alpha, beta) = (1.0f32, 0.0f32);
        let s = side as i32;
        // SAFETY: the three buffers hold side² floats (checked above), live in the handle's
        // context and outlive the queued work (the callers synchronise before dropping them).
        check("cublasSgemm", unsafe {
            cublas::cublasSgemm_v2(
                self.handle,
                cublas::cublasOperation_t::CUBLAS_OP_N,
                cublas::cublasOperation_t::CUBLAS_OP_N,
                s,
                s,
                s,
                &alpha,
                b.device_ptr() as *const f32,
                s,
                a.device_ptr() as *const f32,
                s,
                &beta,
                c.device_ptr() as *mut f32,
                s,
            )
        })
    }
}

impl Drop for Sgemm {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once.
        unsafe { cublas::cublasDestroy_v2(self.handle) };
    }
}
