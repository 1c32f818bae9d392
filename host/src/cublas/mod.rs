//! cuBLAS and cuBLASLt on ferrocuda buffers: typed GEMMs (`f32`, TF32, `f16`, `bf16`),
//! transposes, leading dimensions, strided batches, and cuBLASLt matmuls with fused epilogues
//! (bias, ReLU, GELU). The libraries are loaded at run time through cudarc, like the driver.
//!
//! - [`Gemm`] describes `c = alpha · op(a) · op(b) + beta · c` from three [`MatrixLayout`]s
//!   (and optionally a [`Batch`]); everything that does not need the buffers is checked when
//!   it is built. Its element types are type parameters: an input/output pairing cuBLAS does
//!   not support ([`GemmOutput`]) does not compile, and [`Gemm::tf32`] exists only for `f32`.
//! - [`Cublas::gemm`] runs it with `cublasGemmEx` (or `cublasGemmStridedBatchedEx` for a
//!   batch); [`CublasLt::matmul`] with `cublasLtMatmul` and an [`Epilogue`].
//!
//! # Safety argument
//!
//! Each call goes through [`Stream::enqueue`] with what it touches: `a`, `b` (and a bias)
//! read, `c` written, and for cuBLASLt its workspace written. So the work is ordered after
//! earlier conflicting work on other streams, later work (other streams, host copies, the
//! buffers' release) waits for it, and buffers of another context are refused. `c` is taken
//! by `&mut`, so it cannot alias `a`, `b` or the bias. Before anything is queued, the lengths
//! of the buffers are checked against the elements the layouts reach (`ld * (cols - 1) +
//! rows`, plus `stride * (count - 1)` for batches), and the batches of `c` may not overlap (they
//! are written concurrently). A handle is `Send` but not `Sync` and works on its one stream, so
//! its work area (cuBLAS's internal one, cuBLASLt's workspace buffer) is never used by two
//! streams at once. `alpha` and `beta` are host values: every call sets the host pointer mode,
//! and the handle's stream to the one the call declared its accesses on (so a `raw()` user who
//! changed either cannot make a later typed call read device memory as `alpha` or run
//! unordered).
//!
//! # Row-major data
//!
//! A row-major `r x c` matrix is, byte for byte, the column-major `c x r` matrix of its
//! transpose. For row-major `C = A · B` (`A` is `m x k`, `B` is `k x n`) ask cuBLAS for the
//! column-major `Cᵀ = Bᵀ · Aᵀ`: pass `B` first, `A` second, with `Gemm::dense(n, m, k)`
//! (examples/cublas_gemm.rs does it). A row-major operand used transposed becomes an
//! untransposed column-major one and vice versa.
//!
//! # `raw()`
//!
//! [`Cublas::raw`] stays for the cuBLAS calls not covered here (other BLAS levels, other
//! types): make them inside [`Stream::enqueue`] on [`Cublas::stream`], declaring their buffers.

use std::ffi::c_void;

use cudarc::cublas::sys as cublas;

use crate::context::Handle;
use crate::error::{Error, Result};
use crate::memory::view::{DeviceRead, DeviceWrite};
use crate::stream::Stream;

mod gemm;
mod lt;

pub use gemm::{Batch, Compute, ElementType, Gemm, GemmElement, GemmOutput, MatrixLayout};
pub use lt::{CublasLt, Epilogue, EpilogueKind, WORKSPACE_BYTES};

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
        crate::loader::library_present(crate::loader::CudaLibrary::Cublas)
    }

    /// A handle in `stream`'s context whose work is queued on `stream`, or
    /// [`Error::LibraryUnavailable`] when libcublas cannot be loaded.
    pub fn new(stream: &Stream) -> Result<Self> {
        if !Self::is_available() {
            return Err(Error::LibraryUnavailable { library: "cuBLAS (libcublas)" });
        }
        let _bound = stream.context().bind()?;
        // cuBLAS loads its kernels into the context here, which may wait for its work (E2).
        stream.context().refuse_after_timeout(|| "Cublas::new (cublasCreate)".to_string())?;
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
    /// (leading dimension = rows). [`Cublas::gemm`] with [`Gemm::dense`]; fails with
    /// [`Error::InvalidGemm`] when a buffer is too short or a dimension exceeds `i32`.
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
        self.gemm(&Gemm::dense(m, n, k)?, alpha, a, b, beta, c)
    }

    /// Queues `c = alpha · op(a) · op(b) + beta · c` as `gemm` describes it
    /// (`cublasGemmEx`, or `cublasGemmStridedBatchedEx` for a [`Gemm::batched`] one), with
    /// `f32` accumulation ([`Gemm::tf32`] for the TF32 tensor-core path of `f32` inputs).
    /// `alpha` and `beta` are `f32` for every element type. When `beta` is 0, `c` is not read
    /// (NaNs in it do not propagate).
    ///
    /// Fails with [`Error::InvalidGemm`] when a buffer holds fewer elements than its layout
    /// reaches, [`Error::BufferInOtherContext`] for a buffer of another context, and
    /// [`Error::Library`] with cuBLAS's status when cuBLAS refuses the call.
    ///
    /// ```no_run
    /// # use ferrocuda_host::{Context, Cublas, DeviceBuffer, Gemm, MatrixLayout, Stream};
    /// # use half::bf16;
    /// # fn main() -> ferrocuda_host::Result<()> {
    /// let context = Context::primary(0)?;
    /// let stream = Stream::new(&context)?;
    /// let (m, n, k) = (128, 64, 256);
    /// let a = DeviceBuffer::from_slice(&context, &vec![bf16::ONE; k * m])?; // stored k x m
    /// let b = DeviceBuffer::from_slice(&context, &vec![bf16::ONE; k * n])?; // k x n
    /// let mut c = DeviceBuffer::<f32>::zeroed(&context, m * n)?; // m x n, f32 output
    /// // c = aᵀ · b: a is used transposed.
    /// let gemm = Gemm::new(MatrixLayout::col_major(k, m).transposed(), MatrixLayout::col_major(k, n), MatrixLayout::col_major(m, n))?;
    /// Cublas::new(&stream)?.gemm(&gemm, 1.0, &a, &b, 0.0, &mut c)?;
    /// assert!(c.to_vec()?.iter().all(|&x| x == k as f32));
    /// # Ok(()) }
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn gemm<In: GemmElement, Out: GemmOutput<In>>(
        &self,
        gemm: &Gemm<In, Out>,
        alpha: f32,
        a: &(impl DeviceRead<In> + ?Sized),
        b: &(impl DeviceRead<In> + ?Sized),
        beta: f32,
        c: &mut (impl DeviceWrite<Out> + ?Sized),
    ) -> Result<()> {
        let (a, b, c) = (a.kernel_arg(), b.kernel_arg(), c.kernel_arg_mut());
        gemm.check_lengths(a.len, b.len, c.len)?;
        if gemm.is_empty() {
            return Ok(());
        }
        let (m, n, k) = gemm.shape();
        let [la, lb, lc] = gemm.layouts();
        // Checked by `Gemm::new` / `Gemm::batched`; converted again, not cast.
        let (mi, ni, ki) = (gemm::to_i32("m", m)?, gemm::to_i32("n", n)?, gemm::to_i32("k", k)?);
        let (lda, ldb, ldc) = (gemm::to_i32("lda", la.ld)?, gemm::to_i32("ldb", lb.ld)?, gemm::to_i32("ldc", lc.ld)?);
        let batch = match gemm.batch() {
            Some(batch) => Some((
                gemm::to_i32("the batch count", batch.count)?,
                gemm::to_i64("stride_a", batch.stride_a)?,
                gemm::to_i64("stride_b", batch.stride_b)?,
                gemm::to_i64("stride_c", batch.stride_c)?,
            )),
            None => None,
        };
        let (ta, tb) = (op(la.transpose), op(lb.transpose));
        let (ty_in, ty_out) = (data_type(In::TYPE), data_type(Out::TYPE));
        let compute = match gemm.compute() {
            gemm::Compute::F32 => cublas::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            gemm::Compute::Tf32 => cublas::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
        };
        let (alpha, beta) = ((&alpha as *const f32).cast::<c_void>(), (&beta as *const f32).cast::<c_void>());
        let (pa, pb, pc) = (a.ptr as *const c_void, b.ptr as *const c_void, c.ptr as *mut c_void);
        let handle = self.handle;
        let algo = cublas::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT;
        let name = if batch.is_some() { "cublasGemmStridedBatchedEx" } else { "cublasGemmEx" };
        // SAFETY: every element the layouts reach lies within the buffers (checked above:
        // `ld * (cols - 1) + rows` plus the batch strides), which are in the handle's context
        // (the door refused others) and stay allocated until the work is done (their release
        // waits for this stream, recorded by the door). `c` is borrowed exclusively, so it
        // aliases neither input, and its batches do not overlap (`Gemm::batched`). alpha and
        // beta are read on the host during the call (host pointer mode, set first, and the
        // handle's stream set to the one the accesses were declared on), as f32,
        // the scale type of CUBLAS_COMPUTE_32F*; the type pairing is one GemmEx supports
        // (`GemmOutput`).
        self.stream.enqueue(name, &[a.read("a"), b.read("b"), c.write("c")], |stream| {
            // The stream the accesses were declared on, even if a `raw()` user changed it.
            check("cublasSetStream", unsafe { cublas::cublasSetStream_v2(handle, stream.get() as cublas::cudaStream_t) })?;
            check("cublasSetPointerMode", unsafe { cublas::cublasSetPointerMode_v2(handle, cublas::cublasPointerMode_t::CUBLAS_POINTER_MODE_HOST) })?;
            match batch {
                None => check("cublasGemmEx", unsafe {
                    cublas::cublasGemmEx(handle, ta, tb, mi, ni, ki, alpha, pa, ty_in, lda, pb, ty_in, ldb, beta, pc, ty_out, ldc, compute, algo)
                }),
                Some((count, sa, sb, sc)) => check("cublasGemmStridedBatchedEx", unsafe {
                    cublas::cublasGemmStridedBatchedEx(
                        handle, ta, tb, mi, ni, ki, alpha, pa, ty_in, lda, sa, pb, ty_in, ldb, sb, beta, pc, ty_out, ldc, sc, count, compute, algo,
                    )
                }),
            }
        })
    }
}

/// cuBLAS's operation for a transpose flag.
fn op(transpose: bool) -> cublas::cublasOperation_t {
    if transpose { cublas::cublasOperation_t::CUBLAS_OP_T } else { cublas::cublasOperation_t::CUBLAS_OP_N }
}

/// cuBLAS's data type for an element type.
fn data_type(ty: ElementType) -> cublas::cudaDataType {
    match ty {
        ElementType::F32 => cublas::cudaDataType::CUDA_R_32F,
        ElementType::F16 => cublas::cudaDataType::CUDA_R_16F,
        ElementType::Bf16 => cublas::cudaDataType::CUDA_R_16BF,
    }
}

impl Drop for Cublas {
    fn drop(&mut self) {
        let handle = Handle(self.handle);
        self.stream.context().release(crate::context::Released::Cublas, move |context| {
            // cublasDestroy synchronises the device: after a reported timeout it would wait for
            // the work given up on, for ever (F12-2); leak the handle instead.
            if !crate::memory::leaks::may_release("cuBLAS handle", context.timed_out(), "cublasDestroy (it waits for the whole device)") {
                return;
            }
            if let Ok(_bound) = context.bind() {
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
