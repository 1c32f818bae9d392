//! GEMM: one row-major call over cuBLAS and cuBLASLt.
//!
//! `c (m x n) = epilogue(alpha · op(a) · op(b) + beta · c)`, all row-major (C order, as
//! PyTorch and llm.c store matrices): `op(a)` is `m x k` (`a` stored `m x k`, or `k x m` with
//! [`GemmShape::transpose_a`]), `op(b)` is `k x n` (`b` stored `k x n`, or `n x k` with
//! [`GemmShape::transpose_b`]; a linear layer's `x · Wᵀ` is `transpose_b` with `W` stored `out x
//! in`). Element types: `f32`, `bf16`, `f16` inputs with `f32` accumulation, output of the
//! input type or `f32` (cuBLAS's pairings; others do not compile). Epilogues (cuBLASLt): a
//! bias per output column (`n` values of the output type) and GELU (tanh), fused. A strided
//! batch (`batch` GEMMs of packed operands one after another) runs through
//! `cublasGemmStridedBatchedEx` without an epilogue.
//!
//! Row-major `c = a · b` is column-major `cᵀ = bᵀ · aᵀ`, which is what is queued: no copy.
//!
//! Which implementation runs is [`gemm_path`]'s choice, from the shape and a table of
//! measured ratios ([`HOPPER_GEMM_TABLE`]). **Not yet in this crate:** the Hopper bf16 GEMM of
//! `bench/hopper` is still a raw, `unsafe` entry point there. Its measured ratios to cuBLAS
//! with per-call tensor maps (what a library can use: constant-memory maps are one per
//! module, so one per process) are below 1 at every size measured, so the table would send
//! no shape to it yet; every shape goes to cuBLAS/cuBLASLt.

use ferrocuda_host::cublas::{Batch, Cublas, CublasLt, Gemm, GemmElement, GemmOutput, MatrixLayout};
use ferrocuda_host::{DeviceRead, DeviceWrite, Stream};

use crate::error::{expect_len, unsupported};
use crate::{Result, len_of};

/// The cuBLAS and cuBLASLt handles of one stream (and cuBLASLt's plan cache): make one per
/// stream and reuse it.
pub struct GemmEngine {
    cublas: Cublas,
    lt: CublasLt,
}

impl GemmEngine {
    /// Handles bound to `stream` (loads cuBLAS and cuBLASLt on first use;
    /// [`Error::Library`](ferrocuda_host::Error) when they are not installed).
    pub fn new(stream: &Stream) -> Result<Self> {
        Ok(GemmEngine { cublas: Cublas::new(stream)?, lt: CublasLt::new(stream)? })
    }

    /// The stream every GEMM of this engine is queued on.
    pub fn stream(&self) -> &Stream {
        self.lt.stream()
    }
}

/// The shape of a row-major GEMM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemmShape {
    /// Rows of `c` and of `op(a)`.
    pub m: usize,
    /// Columns of `c` and of `op(b)`.
    pub n: usize,
    /// Columns of `op(a)`, rows of `op(b)`.
    pub k: usize,
    /// GEMMs in a strided batch (1 for one); operands packed one after another.
    pub batch: usize,
    /// `a` is stored `k x m` and used transposed.
    pub transpose_a: bool,
    /// `b` is stored `n x k` and used transposed.
    pub transpose_b: bool,
}

impl GemmShape {
    /// `c = a · b` with `a` of `m x k` and `b` of `k x n`, no batch, no transposes.
    pub fn new(m: usize, n: usize, k: usize) -> Self {
        GemmShape { m, n, k, batch: 1, transpose_a: false, transpose_b: false }
    }
}

/// What happens to each result before it is stored.
pub enum GemmEpilogue<'a, T> {
    /// Nothing.
    None,
    /// Adds `bias[col]` (`n` values of the output type, 16-byte aligned).
    Bias(&'a dyn DeviceRead<T>),
    /// GELU (tanh approximation).
    Gelu,
    /// Bias, then GELU.
    BiasGelu(&'a dyn DeviceRead<T>),
}

impl<T> GemmEpilogue<'_, T> {
    fn bias(&self) -> Option<&dyn DeviceRead<T>> {
        match self {
            GemmEpilogue::Bias(b) | GemmEpilogue::BiasGelu(b) => Some(*b),
            _ => None,
        }
    }
}

/// The implementation [`gemm`] runs for a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GemmPath {
    /// cuBLASLt's matmul with its heuristic's algorithm (cached per shape): single GEMMs, with
    /// or without an epilogue.
    CublasLt,
    /// cuBLAS's `cublasGemmStridedBatchedEx`: strided batches (no epilogue).
    CublasStridedBatched,
}

/// One measured point of the sm_90 bf16 GEMM (`bench/hopper`'s `gemm_bf16_tn`: TMA, wgmma,
/// one producer and two consumer warpgroups, per-call tensor maps in global memory) against
/// cuBLAS on a square `side³` problem, in steady state (20 launches back to back per event
/// pair: what a training step sees; isolated launches read 0.95-1.01 at 8192³).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmMeasurement {
    /// `m = n = k`.
    pub side: usize,
    /// Its time over cuBLAS's, as the lower end of the measured range (above 1: faster).
    pub ratio_to_cublas: f64,
    /// Where the figure comes from.
    pub source: &'static str,
}

/// The measured table behind [`gemm_path`] for bf16 `x · Wᵀ` shapes the sm_90 kernel takes
/// ([`hopper_gemm_fits`]). A shape would go to that kernel only where the nearest measured
/// side has a ratio of at least 1; none has, so none does.
pub const HOPPER_GEMM_TABLE: &[GemmMeasurement] = &[
    GemmMeasurement { side: 4096, ratio_to_cublas: 0.89, source: "BENCHMARKS.md, steady-state GEMM (issue 24): H100, three runs, 0.89-0.91" },
    GemmMeasurement { side: 8192, ratio_to_cublas: 0.94, source: "BENCHMARKS.md, steady-state GEMM (issue 24): H100, three runs, 0.94-0.96" },
];

/// True when the sm_90 bf16 GEMM could compute `shape` (bf16 in and out, `transpose_b` only:
/// `a` `m x k`, `b` `n x k`, both K-major, one GEMM, no epilogue, `m % 128 == 0`, `n % 256 ==
/// 0`, `k % 64 == 0`), on a GPU of compute capability `arch` (90).
pub fn hopper_gemm_fits(shape: GemmShape, bf16_in_and_out: bool, has_epilogue: bool, arch: u32) -> bool {
    arch == 90
        && bf16_in_and_out
        && !has_epilogue
        && shape.batch == 1
        && !shape.transpose_a
        && shape.transpose_b
        && shape.m > 0
        && shape.m.is_multiple_of(128)
        && shape.n > 0
        && shape.n.is_multiple_of(256)
        && shape.k > 0
        && shape.k.is_multiple_of(64)
}

/// The measured ratio of the sm_90 kernel to cuBLAS nearest to `shape` (by the cube root of
/// `m n k`), from [`HOPPER_GEMM_TABLE`].
pub fn hopper_gemm_ratio(shape: GemmShape) -> Option<f64> {
    let side = ((shape.m as f64) * (shape.n as f64) * (shape.k as f64)).cbrt();
    HOPPER_GEMM_TABLE.iter().min_by(|a, b| (a.side as f64 - side).abs().total_cmp(&(b.side as f64 - side).abs())).map(|m| m.ratio_to_cublas)
}

/// The implementation [`gemm`] runs for `shape`: strided batches on cuBLAS, single GEMMs on
/// cuBLASLt. A shape the sm_90 kernel fits ([`hopper_gemm_fits`]) would go to it where
/// [`hopper_gemm_ratio`] is at least 1: no measured size is, and the kernel is not in this
/// crate yet, so such shapes take cuBLASLt too.
pub fn gemm_path(shape: GemmShape) -> GemmPath {
    if shape.batch > 1 { GemmPath::CublasStridedBatched } else { GemmPath::CublasLt }
}

/// The column-major GEMM that computes the row-major one (`cᵀ = op(b)ᵀ · op(a)ᵀ`), after
/// checking every length against the shape. Pure host code: no GPU needed.
pub fn plan<In: GemmElement, Out: GemmOutput<In>>(shape: GemmShape, a: usize, b: usize, c: usize, bias: Option<usize>) -> Result<Gemm<In, Out>> {
    let GemmShape { m, n, k, batch, transpose_a, transpose_b } = shape;
    if batch == 0 {
        return Err(unsupported("batch", 0, "at least 1 (1 for a single GEMM)"));
    }
    let overflow = || unsupported("m", m, "batch x m x k (or k x n, m x n) overflows usize");
    let (ea, eb, ec) = (m.checked_mul(k).ok_or_else(overflow)?, k.checked_mul(n).ok_or_else(overflow)?, m.checked_mul(n).ok_or_else(overflow)?);
    let (ta, tb, tc) = (ea.checked_mul(batch).ok_or_else(overflow)?, eb.checked_mul(batch).ok_or_else(overflow)?, ec.checked_mul(batch).ok_or_else(overflow)?);
    let stored_a = if transpose_a { format!("k {k} x m {m}") } else { format!("m {m} x k {k}") };
    let stored_b = if transpose_b { format!("n {n} x k {k}") } else { format!("k {k} x n {n}") };
    expect_len("a", a, ta, || format!("batch {batch} x {stored_a}"))?;
    expect_len("b", b, tb, || format!("batch {batch} x {stored_b}"))?;
    expect_len("c", c, tc, || format!("batch {batch} x m {m} x n {n}"))?;
    if let Some(bias) = bias {
        expect_len("bias", bias, n, || format!("one per output column, n {n}"))?;
        if batch > 1 {
            return Err(unsupported("batch", batch, "epilogues run on single GEMMs (cuBLASLt); loop over the batch, or add the bias separately"));
        }
    }
    // Column-major: first operand op(b)ᵀ (n x k), second op(a)ᵀ (k x m), c stored n x m.
    let first = if transpose_b { MatrixLayout::col_major(k, n).transposed() } else { MatrixLayout::col_major(n, k) };
    let second = if transpose_a { MatrixLayout::col_major(m, k).transposed() } else { MatrixLayout::col_major(k, m) };
    let gemm = Gemm::new(first, second, MatrixLayout::col_major(n, m))?;
    if batch > 1 { Ok(gemm.batched(Batch { count: batch, stride_a: eb, stride_b: ea, stride_c: ec })?) } else { Ok(gemm) }
}

/// Queues `c = epilogue(alpha · op(a) · op(b) + beta · c)` (row-major; see the
/// [module docs](self)) on the engine's stream. Every length is checked first, naming the
/// operand. Unbatched GEMMs go to cuBLASLt (its heuristic's algorithm, cached per shape),
/// strided batches to cuBLAS.
#[allow(clippy::too_many_arguments)]
pub fn gemm<In: GemmElement, Out: GemmOutput<In>>(
    engine: &GemmEngine,
    a: &(impl DeviceRead<In> + ?Sized),
    b: &(impl DeviceRead<In> + ?Sized),
    c: &mut (impl DeviceWrite<Out> + ?Sized),
    shape: GemmShape,
    epilogue: GemmEpilogue<'_, Out>,
    alpha: f32,
    beta: f32,
) -> Result<()> {
    let has_epilogue = !matches!(epilogue, GemmEpilogue::None);
    let gemm = plan::<In, Out>(shape, len_of(a), len_of(b), len_of(c), epilogue.bias().map(|b| len_of(b)))?;
    if gemm_path(shape) == GemmPath::CublasStridedBatched {
        if has_epilogue {
            return Err(unsupported("batch", shape.batch, "epilogues run on single GEMMs (cuBLASLt)"));
        }
        return Ok(engine.cublas.gemm(&gemm, alpha, b, a, beta, c)?);
    }
    use ferrocuda_host::cublas::Epilogue;
    let lt_epilogue = match epilogue {
        GemmEpilogue::None => Epilogue::none(),
        GemmEpilogue::Bias(bias) => Epilogue::bias(bias),
        GemmEpilogue::Gelu => Epilogue::gelu(),
        GemmEpilogue::BiasGelu(bias) => Epilogue::bias_gelu(bias),
    };
    Ok(engine.lt.matmul(&gemm, lt_epilogue, alpha, b, a, beta, c)?)
}
