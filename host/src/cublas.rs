//! cuBLAS on ferrocuda buffers: one RAII handle bound to one stream (the library is loaded at
//! run time through cudarc, like the driver). The benchmark, the example and the GPU test use
//! this one way of making a handle.
//!
//! Each call goes through [`Stream::enqueue`] with the buffers it reads and writes, so cuBLAS
//! work is ordered with kernels and copies on other streams like a launch is. The handle's
//! own work area is used on its one stream only (the handle is `Send` but not `Sync`).

use cudarc::cublas::sys as cublas;

use crate::context::Handle;
use crate::error::{Error, Result};
use crate::memory::view::{DeviceRead, DeviceWrite};
use crate::stream::Stream;

/// A cuBLAS handle whose work goes to one stream, in that stream's context.
pub struct Cublas {
    handle: cublas::cublasHandle_t,
    stream: Stream,
}

// SAFETY: a cuBLAS handle may move between threads; it is not `Sync` (cuBLAS forbids using
// one handle from several threads at once).
unsafe impl Send for Cublas {}

fn check(call: &'static str, status: cublas::cublasStatus_t) -> Result<()> {
    if status == cublas::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(Error::Library { library: "cuBLAS", call, status: format!("{status:?}") })
    }
}

impl Cublas {
    /// True when libcublas can be loaded.
    pub fn is_available() -> bool {
        // SAFETY: only probes whether the library can be opened.
        unsafe { cublas::is_culib_present() }
    }

    /// A handle in `stream`'s context whose work is queued on `stream`, or
    /// [`Error::LibraryUnavailable`] when libcublas cannot be loaded.
    pub fn new(stream: &Stream) -> Result<Self> {
        if !Self::is_available() {
            return Err(Error::LibraryUnavailable { library: "cuBLAS (libcublas)" });
        }
        stream.context().bind_to_thread()?;
        let mut handle = std::ptr::null_mut();
        // SAFETY: cuBLAS binds the handle to the current context (the stream's); destroyed in Drop.
        check("cublasCreate", unsafe { cublas::cublasCreate_v2(&mut handle) })?;
        let cublas = Cublas { handle, stream: stream.clone() };
        // SAFETY: the stream belongs to the handle's context and lives as long as the handle
        // (held above). The handle's work area is used on this one stream only.
        stream.enqueue("cublasSetStream", &[], |raw| {
            check("cublasSetStream", unsafe { cublas::cublasSetStream_v2(handle, raw.get() as cublas::cudaStream_t) })
        })?;
        Ok(cublas)
    }

    /// The stream the handle's work goes to.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// The raw handle, for cuBLAS calls this wrapper does not cover: make them inside
    /// [`Stream::enqueue`] on [`Cublas::stream`], declaring their buffers there.
    pub fn raw(&self) -> cublas::cublasHandle_t {
        self.handle
    }

    /// Queues `c = alpha * a * b + beta * c` (SGEMM) for column-major matrices without
    /// transposition: `a` is `m x k`, `b` is `k x n`, `c` is `m x n`, each densely packed
    /// (leading dimension = rows). Fails with [`Error::LengthMismatch`] when a buffer is too short.
    #[allow(clippy::too_many_arguments)]
    pub fn sgemm(
        &self,
        (m, n, k): (usize, usize, usize),
        alpha: f32,
        a: &(impl DeviceRead<f32> + ?Sized),
        b: &(impl DeviceRead<f32> + ?Sized),
        beta: f32,
        c: &mut (impl DeviceWrite<f32> + ?Sized),
    ) -> Result<()> {
        let (a, b, c) = (a.kernel_arg(), b.kernel_arg(), c.kernel_arg_mut());
        for (needed, have) in [(m * k, a.len), (k * n, b.len), (m * n, c.len)] {
            if have < needed {
                return Err(Error::LengthMismatch { destination: needed, source_len: have });
            }
        }
        let dims =
            |x: usize| i32::try_from(x).map_err(|_| Error::Library { library: "cuBLAS", call: "cublasSgemm", status: format!("dimension {x} exceeds i32") });
        let (mi, ni, ki) = (dims(m)?, dims(n)?, dims(k)?);
        let handle = self.handle;
        // SAFETY: the pointers hold at least m*k, k*n and m*n floats (checked above) in the
        // handle's context (the door refused others), stay allocated until the work is done
        // (their drops wait for this stream), and `c` is borrowed exclusively.
        self.stream.enqueue("cublasSgemm", &[a.read("a"), b.read("b"), c.write("c")], |_bound_stream| {
            check("cublasSgemm", unsafe {
                cublas::cublasSgemm_v2(
                    handle,
                    cublas::cublasOperation_t::CUBLAS_OP_N,
                    cublas::cublasOperation_t::CUBLAS_OP_N,
                    mi,
                    ni,
                    ki,
                    &alpha,
                    a.ptr as *const f32,
                    mi,
                    b.ptr as *const f32,
                    ki,
                    &beta,
                    c.ptr as *mut f32,
                    mi,
                )
            })
        })
    }
}

impl Drop for Cublas {
    fn drop(&mut self) {
        let handle = Handle(self.handle);
        self.stream.context().release(crate::context::Released::Cublas, move |context| {
            if context.bind_to_thread().is_ok() {
                // SAFETY: created in `new`, destroyed once; queued work still completes.
                unsafe { cublas::cublasDestroy_v2(handle.into_inner()) };
            }
        });
    }
}

impl std::fmt::Debug for Cublas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cublas").field("handle", &self.handle).field("stream", &self.stream).finish()
    }
}
