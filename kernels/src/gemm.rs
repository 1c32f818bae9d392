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
//! Which implementation runs is [`gemm_path`]'s choice, from the shape, whether the sm_90
//! bf16 kernel takes the call ([`hopper_gemm_fits`]) and a table of measured ratios to cuBLAS
//! ([`HOPPER_GEMM_TABLE`]). The sm_90 kernel (`ferrocuda_kernels_hopper::gemm`: TMA, `wgmma`,
//! a producer and two consumer warpgroups) can also be called directly, whatever the table
//! says: [`hopper_gemm_bf16`].

use ferrocuda_host::__private::SliceArg;
use ferrocuda_host::cublas::{Batch, Cublas, CublasLt, ElementType, Gemm, GemmElement, GemmOutput, MatrixLayout};
use ferrocuda_host::{DeviceRead, DeviceTensorMap, DeviceWrite, LaunchConfig, Stream, TensorDataType, TensorMap, TensorSwizzle, TiledLayout};
use ferrocuda_kernels_hopper::gemm::{
    BK, BM, BN, BOX_A, BOX_B, BOX_B_HALF, BOX_C, SHARED_BYTES, STORE_STAGES, STORE3_STAGES, THREADS, gemm_bf16_tn, gemm_bf16_tn_cluster2, gemm_bf16_tn_store,
    gemm_bf16_tn_store_cluster2, gemm_bf16_tn_store3, gemm_bf16_tn_store3_cluster2, store_shared_bytes,
};
use half::bf16;

use crate::error::{expect_len, unsupported};
use crate::{Result, len_of};

/// The cuBLAS and cuBLASLt handles of one stream (and cuBLASLt's plan cache): make one per
/// stream and reuse it.
pub struct GemmEngine {
    cublas: Cublas,
    lt: CublasLt,
    /// Compute capability of the stream's GPU (`90` for sm_90).
    arch: u32,
    /// The sm_90 kernel's tensor maps, per operand address and shape (`MapCache`).
    maps: std::sync::Mutex<MapCache>,
}

impl GemmEngine {
    /// Handles bound to `stream` (loads cuBLAS and cuBLASLt on first use;
    /// [`Error::Library`](ferrocuda_host::Error) when they are not installed).
    pub fn new(stream: &Stream) -> Result<Self> {
        let arch = stream.context().device().arch()?;
        Ok(GemmEngine { cublas: Cublas::new(stream)?, lt: CublasLt::new(stream)?, arch, maps: Default::default() })
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
    /// The sm_90 bf16 kernel ([`hopper_gemm_bf16`]): where it takes the call
    /// ([`hopper_gemm_fits`]) and the measured table says it beats cuBLAS.
    Hopper,
}

/// One measured point of the sm_90 bf16 GEMM as [`gemm`] calls it
/// ([`GemmEngine::hopper_gemm_bf16_with`]: checks, the engine's cached tensor maps, the
/// launch) with the best schedule measured there, against cuBLAS (`cublasGemmEx`) on a square
/// `side³` problem: the lowest of its steady-state (20 launches back to back per event pair),
/// burst (20 after 1 s idle) and sustained (400 back to back) ratios in `hopper-gemm`
/// (`scripts/gpu-run/gemm.sh`, `scripts/gpu-run/gemm_table.py`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmMeasurement {
    /// `m = n = k`.
    pub side: usize,
    /// cuBLAS's time over ours (above 1: ours is faster), the lowest of the three ratios.
    pub ratio_to_cublas: f64,
    /// The schedule measured (and the one [`hopper_schedule`] picks for shapes nearest this
    /// side): the one with the highest lowest ratio of those timed.
    pub schedule: HopperSchedule,
    /// Where the figure comes from.
    pub source: &'static str,
}

/// Tiles in bands of 16 along M, balanced grid, copy-engine epilogue (4-stage ring).
const TMA_G16_BALANCED: HopperSchedule = HopperSchedule { cluster: false, group: 16, balanced_grid: true, store: HopperStore::Tma };

/// The measured table behind [`gemm_path`] and [`hopper_schedule`] for the bf16 `x · Wᵀ` calls
/// the sm_90 kernel takes ([`hopper_gemm_fits`]). A call goes to that kernel only where the
/// nearest measured side (within a factor of 2 of the call's, by the cube root of `m n k`) has
/// a ratio of at least 1 (and the call has at least [`HOPPER_MIN_TILES`] output tiles);
/// elsewhere it stays on cuBLASLt.
///
/// Session 16 (one H200, `bench/results/s16-gemm/run3`): with the copy-engine epilogue
/// ([`HopperStore::Tma`], launched as a programmatic dependent launch) ours leads cuBLAS at
/// 2048³, 4096³ and 8192³ in every mode (steady, burst, sustained), so those sides run the
/// sm_90 kernel, in bands of 16 tiles.
pub const HOPPER_GEMM_TABLE: &[GemmMeasurement] = &[
    GemmMeasurement {
        side: 2048,
        ratio_to_cublas: 1.045,
        schedule: TMA_G16_BALANCED,
        source: "bench/results/s16-gemm/run3 (H200, one run): tma-g16-bal 1.119 steady (732 vs 654 TFLOP/s), 1.24 burst (664 vs 536), 1.045 sustained (748 vs 716); fast.cu kernel 12 614 burst, 680 sustained",
    },
    GemmMeasurement {
        side: 4096,
        ratio_to_cublas: 1.031,
        schedule: TMA_G16_BALANCED,
        source: "bench/results/s16-gemm/run3 (H200, one run): tma-g16-bal 1.046 steady (698 vs 667 TFLOP/s), 1.031 burst (797 vs 773), 1.083 sustained (804 vs 743, 1980 MHz); fast.cu kernel 12 781 burst, 740 sustained",
    },
    GemmMeasurement {
        side: 8192,
        ratio_to_cublas: 1.017,
        schedule: TMA_G16_BALANCED,
        source: "bench/results/s16-gemm/run3 (H200, one run): tma-g16-bal 1.077 steady (695 vs 645 TFLOP/s), 1.024 burst (817 vs 798), 1.017 sustained (704 vs 692, 1500 vs 1530 MHz, 700 W cap); fast.cu kernel 12 816 burst, 704 sustained",
    },
];

/// Largest `m`, `n` or `k` of the sm_90 kernel: its TMA coordinates are `i32`.
const HOPPER_MAX_SIDE: usize = i32::MAX as usize;

/// Why the sm_90 bf16 kernel cannot compute `shape` (`None` when it can): one GEMM (no
/// batch), `a` stored `m x k` and `b` stored `n x k` (`transpose_b`, not `transpose_a`: both
/// K-major), `m, n, k >= 1`, `k % 8 == 0` (the copy engine needs 16-byte row strides), `n`
/// even (bf16 pairs are stored), every side below 2^31. Any other `m` and `n`: partial tiles
/// at the edges are read as zeros and stored with guards.
pub fn hopper_gemm_refusal(shape: GemmShape) -> Option<(&'static str, usize, &'static str)> {
    let GemmShape { m, n, k, batch, transpose_a, transpose_b } = shape;
    if batch != 1 {
        return Some(("batch", batch, "the sm_90 kernel computes one GEMM (batch 1)"));
    }
    if transpose_a || !transpose_b {
        return Some(("transpose_b", transpose_b as usize, "the sm_90 kernel takes `a` stored m x k and `b` stored n x k (transpose_b, not transpose_a)"));
    }
    for (name, side) in [("m", m), ("n", n), ("k", k)] {
        if side == 0 || side > HOPPER_MAX_SIDE {
            return Some((name, side, "between 1 and 2^31 - 1"));
        }
    }
    if !k.is_multiple_of(8) {
        return Some(("k", k, "a multiple of 8 (TMA reads rows of 16-byte multiples)"));
    }
    if !n.is_multiple_of(2) {
        return Some(("n", n, "even (the sm_90 kernel stores bf16 pairs)"));
    }
    if tiles_of(m, n).is_none() {
        return Some(("m", m, "at most 2^32 - 1 output tiles of 128 x 256"));
    }
    None
}

/// Output tiles of an `m x n` result, when they fit the kernel's `u32` counter.
fn tiles_of(m: usize, n: usize) -> Option<u32> {
    let tiles = m.div_ceil(BM as usize).checked_mul(n.div_ceil(BN as usize))?;
    u32::try_from(tiles).ok()
}

/// True when the sm_90 bf16 kernel could compute `shape` ([`hopper_gemm_refusal`] has no
/// objection), with bf16 in and out, no epilogue, on a GPU of compute capability `arch` (90).
/// The call must also have `alpha == 1` and `beta == 0` ([`gemm`] checks them).
pub fn hopper_gemm_fits(shape: GemmShape, bf16_in_and_out: bool, has_epilogue: bool, arch: u32) -> bool {
    arch == 90 && bf16_in_and_out && !has_epilogue && hopper_gemm_refusal(shape).is_none()
}

/// The measured ratio of the sm_90 kernel to cuBLAS for the side nearest to `shape`'s (the
/// cube root of `m n k`), from [`HOPPER_GEMM_TABLE`]; `None` when no measured side is within
/// a factor of 2.
pub fn hopper_gemm_ratio(shape: GemmShape) -> Option<f64> {
    let side = ((shape.m as f64) * (shape.n as f64) * (shape.k as f64)).cbrt();
    HOPPER_GEMM_TABLE
        .iter()
        .min_by(|a, b| (a.side as f64 - side).abs().total_cmp(&(b.side as f64 - side).abs()))
        .filter(|m| (0.5..=2.0).contains(&(side / m.side as f64)))
        .map(|m| m.ratio_to_cublas)
}

/// Fewest output tiles (128 x 256) for which [`gemm_path`] takes the sm_90 kernel: one full
/// wave of a 132-SM H100/H200 (as 2048 x 2048 gives). The kernel computes each tile on one SM
/// over the whole K (no split-K), so a call with fewer tiles leaves SMs idle where cuBLAS
/// splits the work; the table was measured on square shapes with at least this many.
pub const HOPPER_MIN_TILES: usize = 128;

/// The implementation [`gemm`] runs for `shape`: strided batches on cuBLAS; a single GEMM
/// that the sm_90 kernel takes (`hopper_fits`: [`hopper_gemm_fits`] with `alpha == 1`, `beta
/// == 0`), with at least [`HOPPER_MIN_TILES`] output tiles, on that kernel where
/// [`hopper_gemm_ratio`] is at least 1; every other on cuBLASLt.
pub fn gemm_path(shape: GemmShape, hopper_fits: bool) -> GemmPath {
    let enough_tiles = shape.m.div_ceil(BM as usize).saturating_mul(shape.n.div_ceil(BN as usize)) >= HOPPER_MIN_TILES;
    if shape.batch > 1 {
        GemmPath::CublasStridedBatched
    } else if hopper_fits && enough_tiles && hopper_gemm_ratio(shape).is_some_and(|r| r >= 1.0) {
        GemmPath::Hopper
    } else {
        GemmPath::CublasLt
    }
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
/// operand. The path is [`gemm_path`]'s: the sm_90 bf16 kernel where it takes the call and
/// the measured table says it wins (and the operands meet its alignment, and the stream is
/// not being captured into a graph: a tensor map it has not cached yet is copied in stream
/// order), with [`hopper_schedule`]'s schedule and the engine's cached tensor maps
/// ([`GemmEngine::hopper_gemm_bf16`]), otherwise cuBLASLt
/// (its heuristic's algorithm, cached per shape) for single GEMMs and cuBLAS for strided
/// batches.
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
    let bf16_in_and_out = In::TYPE == ElementType::Bf16 && Out::TYPE == ElementType::Bf16;
    let fits = hopper_gemm_fits(shape, bf16_in_and_out, has_epilogue, engine.arch) && alpha == 1.0 && beta == 0.0;
    let path = gemm_path(shape, fits);
    if path == GemmPath::Hopper && hopper_ready(engine.stream(), a, b, c)? {
        // `In` and `Out` are bf16 (`GemmElement` is sealed: `TYPE == Bf16` is bf16 only).
        let (a, b) = (AsBf16(a.kernel_arg()), AsBf16(b.kernel_arg()));
        let mut c = AsBf16(c.kernel_arg_mut());
        return engine.hopper_gemm_bf16(&a, &b, &mut c, shape.m, shape.n, shape.k);
    }
    if path == GemmPath::CublasStridedBatched {
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

/// A bf16 operand of [`gemm`] whose element type is bf16 only by `GemmElement::TYPE` (the
/// generic `In`/`Out`): the same memory and use tracking, as `DeviceRead<bf16>`.
struct AsBf16<'a>(SliceArg<'a>);

// SAFETY: made only in `gemm` from the slice argument of an operand whose element type is
// bf16 (checked by `GemmElement::TYPE`, a sealed trait), borrowed (mutably for `c`) for the
// whole call: the same pointer, length and tracking, of the same type.
unsafe impl DeviceRead<bf16> for AsBf16<'_> {
    fn kernel_arg(&self) -> SliceArg<'_> {
        self.0
    }
}
// SAFETY: as above; made from `c`'s `kernel_arg_mut` while `c` is mutably borrowed.
unsafe impl DeviceWrite<bf16> for AsBf16<'_> {
    fn kernel_arg_mut(&mut self) -> SliceArg<'_> {
        self.0
    }
}

/// Whether [`hopper_gemm_bf16`] can run now for these operands: `a` and `b` 16-byte aligned,
/// `c` 4-byte aligned, and `stream` not capturing (a map not cached yet is copied in stream
/// order).
fn hopper_ready<In, Out>(
    stream: &Stream,
    a: &(impl DeviceRead<In> + ?Sized),
    b: &(impl DeviceRead<In> + ?Sized),
    c: &mut (impl DeviceWrite<Out> + ?Sized),
) -> Result<bool> {
    let aligned = a.kernel_arg().ptr().is_multiple_of(16) && b.kernel_arg().ptr().is_multiple_of(16) && c.kernel_arg_mut().ptr().is_multiple_of(4);
    Ok(aligned && !stream.is_capturing()?)
}

/// How the sm_90 kernel walks the output tiles of one call: which kernel, the order of the
/// tiles and the size of the persistent grid. [`gemm`] takes [`hopper_schedule`]'s pick for the
/// shape; [`GemmEngine::hopper_gemm_bf16_with`] runs any (the benchmark measures them all).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HopperSchedule {
    /// Clusters of two blocks on vertically adjacent tiles sharing B by TMA multicast
    /// (`gemm_bf16_tn_cluster2`; needs an even number of 128-row tiles, else the plain
    /// kernel runs), or one block per tile (`gemm_bf16_tn`).
    pub cluster: bool,
    /// Tiles (tile pairs in a cluster) walked in bands of this many along M, M fastest inside
    /// a band, so the blocks running at once share A and B panels in L2; 0: one band (plain
    /// column-major order, M fastest).
    pub group: u32,
    /// Grid of as few blocks as give the same number of waves (`ceil(units / waves)`, e.g.
    /// 128 of 132 SMs for 2048 tiles: 16 full waves), instead of one block per SM.
    pub balanced_grid: bool,
    /// How C is written (and the ring's depth that goes with it).
    pub store: HopperStore,
}

/// How the sm_90 kernel writes its output tiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HopperStore {
    /// Each consumer thread stores its bf16 pairs to global memory, guarded at the edges
    /// (`gemm_bf16_tn`, `gemm_bf16_tn_cluster2`; 4-stage ring; sessions 12-13's kernels).
    Direct,
    /// Through shared memory and the copy engine: `stmatrix` into a swizzled staging buffer,
    /// TMA stores that run while the next tile starts (`gemm_bf16_tn_store`,
    /// `gemm_bf16_tn_store_cluster2`; 4-stage ring, half a tile staged at a time). Needs `n %
    /// 8 == 0` and `c` 16-byte aligned; other calls run [`HopperStore::Direct`].
    Tma,
    /// [`HopperStore::Tma`] with a 3-stage ring and the whole tile staged at once
    /// (`gemm_bf16_tn_store3`, `gemm_bf16_tn_store3_cluster2`): fast.cu kernel 12's split of
    /// the shared memory.
    Tma3,
}

impl HopperSchedule {
    /// Session 12's schedule: one block per tile, column-major order, one block per SM.
    pub const PLAIN: HopperSchedule = HopperSchedule { cluster: false, group: 0, balanced_grid: false, store: HopperStore::Direct };

    /// The grid (blocks) for `units_m x units_n` output tiles on `sms` multiprocessors: at most
    /// one block per SM and per tile, an even number for a cluster schedule.
    pub fn grid(self, tiles: u32, sms: u32) -> u32 {
        let width = if self.cluster { 2 } else { 1 };
        let (units, slots) = ((tiles / width).max(1), (sms / width).max(1));
        let waves = units.div_ceil(slots);
        let blocks = if self.balanced_grid { units.div_ceil(waves) } else { units.min(slots) };
        blocks * width
    }
}

/// The schedule [`gemm`] runs the sm_90 kernel with for `shape` (see [`HOPPER_GEMM_TABLE`]).
pub fn hopper_schedule(shape: GemmShape) -> HopperSchedule {
    let side = ((shape.m as f64) * (shape.n as f64) * (shape.k as f64)).cbrt();
    HOPPER_GEMM_TABLE.iter().min_by(|a, b| (a.side as f64 - side).abs().total_cmp(&(b.side as f64 - side).abs())).map_or(HopperSchedule::PLAIN, |m| m.schedule)
}

/// Most tensor maps a [`GemmEngine`] keeps (two per distinct `a`/`b` operand).
pub const MAP_CACHE_CAPACITY: usize = 64;

/// What identifies a cached tensor map: the address and layout it encodes. A map is a pure
/// function of these (plus the constant element type and swizzle), so two maps with the same
/// key are the same 128 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct MapKey {
    address: u64,
    rows: u64,
    k: u64,
    box_rows: u32,
}

/// The device copies of the tensor maps a [`GemmEngine`] has built, most recently used last,
/// at most [`MAP_CACHE_CAPACITY`]. Why a cached map is sound: see
/// [`GemmEngine::hopper_gemm_bf16`].
#[derive(Default)]
struct MapCache {
    entries: Vec<(MapKey, DeviceTensorMap<'static>)>,
    /// Maps built (cache misses), for the tests.
    built: u64,
}

impl MapCache {
    /// The cached map of `key`, building and uploading it on `stream` on a miss (evicting the
    /// least recently used when full). `source` is the operand the caller checked: it starts
    /// at `key.address` and holds `key.rows x key.k` elements.
    fn get(&mut self, stream: &Stream, key: MapKey) -> Result<&DeviceTensorMap<'static>> {
        if let Some(at) = self.entries.iter().position(|(k, _)| *k == key) {
            let entry = self.entries.remove(at);
            self.entries.push(entry);
        } else {
            let dims = [key.k, key.rows];
            let strides = [2 * key.k];
            let box_dims = [BK, key.box_rows];
            let layout =
                TiledLayout { data_type: TensorDataType::Bf16, dims: &dims, strides_bytes: &strides, box_dims: &box_dims, swizzle: TensorSwizzle::B128 };
            // SAFETY: `key.address` is 16-byte aligned device memory of this stream's context
            // holding `rows x k` bf16 (the caller checked the operand it came from). The map
            // borrows nothing; it is read by a kernel only in launches that pass an operand
            // covering exactly this memory as a declared `&[bf16]` argument (see
            // `GemmEngine::hopper_gemm_bf16`'s docs), which keeps it allocated and ordered
            // for those kernels.
            let map = unsafe { TensorMap::encode_tiled(key.address, &layout) }?.to_device_async(stream)?;
            if self.entries.len() >= MAP_CACHE_CAPACITY {
                self.entries.remove(0);
            }
            self.entries.push((key, map));
            self.built += 1;
        }
        Ok(&self.entries.last().expect("just pushed").1)
    }
}

/// The checks every sm_90 call makes before anything is queued (see [`hopper_gemm_bf16`]);
/// returns the output tiles.
fn hopper_checks(
    stream: &Stream,
    a: &(impl DeviceRead<bf16> + ?Sized),
    b: &(impl DeviceRead<bf16> + ?Sized),
    c: &mut (impl DeviceWrite<bf16> + ?Sized),
    (m, n, k): (usize, usize, usize),
) -> Result<u32> {
    let shape = GemmShape { transpose_b: true, ..GemmShape::new(m, n, k) };
    if let Some((parameter, value, problem)) = hopper_gemm_refusal(shape) {
        return Err(unsupported(parameter, value, problem));
    }
    let tiles = tiles_of(m, n).ok_or_else(|| unsupported("m", m, "at most 2^32 - 1 output tiles"))?;
    let arch = stream.context().device().arch()?;
    if arch != 90 {
        return Err(unsupported("arch", arch, "the sm_90 GEMM runs on sm_90 (H100, H200) only; call `gemm`, which takes cuBLASLt elsewhere"));
    }
    let count = |x: usize, y: usize| x.checked_mul(y).ok_or_else(|| unsupported("m", m, "m x k, n x k and m x n must fit usize"));
    expect_len("a", len_of(a), count(m, k)?, || format!("m {m} x k {k}, stored row-major"))?;
    expect_len("b", len_of(b), count(n, k)?, || format!("n {n} x k {k}, stored row-major (the transposed operand)"))?;
    expect_len("c", c.kernel_arg_mut().len(), count(m, n)?, || format!("m {m} x n {n}"))?;
    for (name, ptr) in [("a", a.kernel_arg().ptr()), ("b", b.kernel_arg().ptr())] {
        if !ptr.is_multiple_of(16) {
            return Err(unsupported(
                name,
                format!("{ptr:#x}"),
                "an address 16-byte aligned (TMA's rule; a view starting at an odd multiple of 8 elements is not)",
            ));
        }
    }
    let c_ptr = c.kernel_arg_mut().ptr();
    if !c_ptr.is_multiple_of(4) {
        return Err(unsupported("c", format!("{c_ptr:#x}"), "an address 4-byte aligned (bf16 pairs are stored)"));
    }
    if stream.is_capturing()? {
        return Err(unsupported("stream", "capturing", "a stream not being captured (the tensor maps are copied in stream order); `gemm` takes cuBLASLt then"));
    }
    Ok(tiles)
}

/// Launches the kernel of `schedule` with maps `a_map` (box [`BOX_A`]), `b_map` (box
/// [`BOX_B`], or [`BOX_B_HALF`] for a cluster schedule) and, for a copy-engine store,
/// `c_map` (box [`BOX_C`]) of exactly `a`, `b` and `c`, after [`hopper_checks`].
///
/// # Safety
/// The maps are 2-D bf16 maps of exactly `a` (`[k, m]`), `b` (`[k, n]`) and `c` (`[n, m]`),
/// 128-byte swizzle, with those boxes; `schedule.cluster` only with an even number of M tiles;
/// `c_map` is `Some` when `schedule.store` is not [`HopperStore::Direct`].
#[allow(clippy::too_many_arguments)]
unsafe fn launch_hopper(
    stream: &Stream,
    schedule: HopperSchedule,
    tiles: u32,
    (a_map, b_map, c_map): (&DeviceTensorMap<'_>, &DeviceTensorMap<'_>, Option<&DeviceTensorMap<'_>>),
    a: &(impl DeviceRead<bf16> + ?Sized),
    b: &(impl DeviceRead<bf16> + ?Sized),
    c: &mut (impl DeviceWrite<bf16> + ?Sized),
    (m, n, k): (usize, usize, usize),
) -> Result<()> {
    let sms = stream.context().device().multiprocessor_count()?;
    let grid = schedule.grid(tiles, sms);
    let (m, n, k, group) = (m as u32, n as u32, k as u32, schedule.group);
    let ctx = stream.context();
    let shared = match schedule.store {
        HopperStore::Direct => SHARED_BYTES,
        HopperStore::Tma => store_shared_bytes(STORE_STAGES),
        HopperStore::Tma3 => store_shared_bytes(STORE3_STAGES),
    };
    let config = LaunchConfig::new(grid, THREADS).with_shared_bytes(shared);
    let config = if schedule.store == HopperStore::Direct {
        config
    } else {
        // SAFETY: the copy-engine kernels (`gemm_bf16_tn_store*`) call
        // `wait_for_prerequisites()` in every thread before they read the tensor maps, A or B
        // or write C, having touched only their own shared memory before it, and on their
        // early return.
        unsafe { config.with_programmatic_dependent_launch() }
    };
    let c_map = || c_map.ok_or_else(|| unsupported("store", format!("{:?}", schedule.store), "a map of C (internal error: report it)"));
    // SAFETY (every arm): the caller's contract (the maps, B's half box for a cluster
    // schedule with an even tile count, C's map for a copy-engine store).
    unsafe {
        match (schedule.store, schedule.cluster) {
            (HopperStore::Direct, false) => {
                gemm_bf16_tn::function(ctx)?.set_max_dynamic_shared_bytes(shared)?;
                gemm_bf16_tn::launch(stream, config, a_map, b_map, a, b, c, m, n, k, group)
            }
            (HopperStore::Direct, true) => {
                gemm_bf16_tn_cluster2::function(ctx)?.set_max_dynamic_shared_bytes(shared)?;
                gemm_bf16_tn_cluster2::launch(stream, config, a_map, b_map, a, b, c, m, n, k, group)
            }
            (HopperStore::Tma, false) => {
                gemm_bf16_tn_store::function(ctx)?.set_max_dynamic_shared_bytes(shared)?;
                gemm_bf16_tn_store::launch(stream, config, a_map, b_map, c_map()?, a, b, c, m, n, k, group)
            }
            (HopperStore::Tma, true) => {
                gemm_bf16_tn_store_cluster2::function(ctx)?.set_max_dynamic_shared_bytes(shared)?;
                gemm_bf16_tn_store_cluster2::launch(stream, config, a_map, b_map, c_map()?, a, b, c, m, n, k, group)
            }
            (HopperStore::Tma3, false) => {
                gemm_bf16_tn_store3::function(ctx)?.set_max_dynamic_shared_bytes(shared)?;
                gemm_bf16_tn_store3::launch(stream, config, a_map, b_map, c_map()?, a, b, c, m, n, k, group)
            }
            (HopperStore::Tma3, true) => {
                gemm_bf16_tn_store3_cluster2::function(ctx)?.set_max_dynamic_shared_bytes(shared)?;
                gemm_bf16_tn_store3_cluster2::launch(stream, config, a_map, b_map, c_map()?, a, b, c, m, n, k, group)
            }
        }
    }?;
    Ok(())
}

/// The schedule that runs: `schedule`, with the plain kernel (same tile order and grid) when a
/// cluster schedule meets an odd number of M tiles, and direct stores when a copy-engine store
/// meets a C that TMA cannot write (`n % 8 != 0`, or `c` not 16-byte aligned).
fn runnable(schedule: HopperSchedule, m: usize, n: usize, c_address: u64) -> HopperSchedule {
    let mut schedule = schedule;
    if schedule.cluster && !m.div_ceil(BM as usize).is_multiple_of(2) {
        schedule.cluster = false;
    }
    if schedule.store != HopperStore::Direct && !(n.is_multiple_of(8) && c_address.is_multiple_of(16)) {
        schedule.store = HopperStore::Direct;
    }
    schedule
}

/// The untracked map of C for a copy-engine store (`[n, m]` bf16, box [`BOX_C`], 128-byte
/// swizzle), copied to the device on `stream`.
///
/// # Safety
/// `address` is 16-byte aligned device memory of `stream`'s context holding `m x n` bf16, `n %
/// 8 == 0`; the map is handed only to launches that pass that memory as their declared `c`
/// (see [`GemmEngine::hopper_gemm_bf16`]'s "Why a cached map is sound").
unsafe fn c_map_of(stream: &Stream, address: u64, m: usize, n: usize) -> Result<DeviceTensorMap<'static>> {
    let dims = [n as u64, m as u64];
    let layout = TiledLayout { data_type: TensorDataType::Bf16, dims: &dims, strides_bytes: &[2 * n as u64], box_dims: &BOX_C, swizzle: TensorSwizzle::B128 };
    // SAFETY: the caller's contract.
    Ok(unsafe { TensorMap::encode_tiled(address, &layout) }?.to_device_async(stream)?)
}

/// Queues the sm_90 bf16 GEMM on `stream`: `c (m x n) = a · bᵀ`, with `a` stored `m x k` and
/// `b` stored `n x k` (row-major bf16, both K-major: a linear layer's `x · Wᵀ`), f32
/// accumulation, `c` row-major bf16, with [`hopper_schedule`]'s schedule for the shape. This
/// form builds its two tensor maps per call (tracked: they borrow `a` and `b`) and copies them
/// to the device in stream order, about 5 µs of host work;
/// [`GemmEngine::hopper_gemm_bf16`] (what [`gemm`] runs on its [`GemmPath::Hopper`] path)
/// reuses them from the engine's cache.
///
/// Before anything is queued it checks, naming the operand: the GPU is sm_90 (`arch`), the
/// shape is one the kernel takes ([`hopper_gemm_refusal`]: any `m`, `n` even, `k` a multiple
/// of 8), `a` holds `m·k`, `b` `n·k` and `c` `m·n` elements, `a` and `b` start 16-byte
/// aligned and `c` 4-byte aligned, and the stream is not being captured. The launch declares
/// reads of `a` and `b` and a write of `c`.
///
/// # Errors
/// [`KernelsError::Unsupported`](crate::KernelsError) or [`KernelsError::Shape`](crate::KernelsError)
/// for the checks above; the driver's errors.
pub fn hopper_gemm_bf16(
    stream: &Stream,
    a: &(impl DeviceRead<bf16> + ?Sized),
    b: &(impl DeviceRead<bf16> + ?Sized),
    c: &mut (impl DeviceWrite<bf16> + ?Sized),
    m: usize,
    n: usize,
    k: usize,
) -> Result<()> {
    let tiles = hopper_checks(stream, a, b, c, (m, n, k))?;
    // The maps live only for this call: no capture may record their copies or the launch
    // that reads them (audit 2026-11-28, S1). Until they are dropped, no capture can start
    // on `stream`.
    let _stretch = stream.hold_off_capture("hopper_gemm_bf16")?;
    let c_address = c.kernel_arg_mut().ptr();
    let schedule = runnable(hopper_schedule(GemmShape { transpose_b: true, ..GemmShape::new(m, n, k) }), m, n, c_address);
    let b_box = if schedule.cluster { BOX_B_HALF } else { BOX_B };
    let (mu, nu, ku) = (m as u64, n as u64, k as u64);
    let a_map = TensorMap::tiled_view(a, TensorDataType::Bf16, &[ku, mu], &BOX_A, TensorSwizzle::B128)?.to_device_async(stream)?;
    let b_map = TensorMap::tiled_view(b, TensorDataType::Bf16, &[ku, nu], &b_box, TensorSwizzle::B128)?.to_device_async(stream)?;
    let c_map = match schedule.store {
        HopperStore::Direct => None,
        // SAFETY: `c` was checked to hold exactly `m x n` bf16 (`hopper_checks`), 16-byte
        // aligned with `n % 8 == 0` (`runnable`), memory of this stream's context; the map is
        // handed to this call's launch only, which passes `c` itself (its declared write).
        _ => Some(unsafe { c_map_of(stream, c_address, m, n) }?),
    };
    // SAFETY: the maps were built just above as the kernels require: 2-D bf16 `[k, m]`, `[k,
    // n]` and `[n, m]` maps of exactly `a`, `b` and `c` (from their first element), boxes
    // `BOX_A`, the schedule's B box and `BOX_C`, the 128-byte swizzle; `runnable` gave a
    // cluster schedule only an even tile count and a copy-engine store only a C it can write.
    unsafe { launch_hopper(stream, schedule, tiles, (&a_map, &b_map, c_map.as_ref()), a, b, c, (m, n, k)) }
}

impl GemmEngine {
    /// [`hopper_gemm_bf16`] on the engine's stream with its tensor maps from the engine's
    /// cache: built and uploaded (in stream order) on the first call for an operand's address
    /// and shape, reused after, so a steady call builds nothing on the host (one lookup in a
    /// list of at most [`MAP_CACHE_CAPACITY`] maps, least recently used evicted). What
    /// [`gemm`] runs on its [`GemmPath::Hopper`] path. [`GemmEngine::tensor_maps_built`] counts
    /// the maps built.
    ///
    /// # Why a cached map is sound
    /// A per-call map (`TensorMap::tiled_view`) borrows its operand, so the borrow checker
    /// keeps the buffer alive while the map exists. A cached map outlives the call, so it
    /// cannot borrow; it is an untracked map (`TensorMap::encode_tiled`) of a raw address,
    /// and the argument is about when it is *read*, which is the only time a map can do harm:
    /// - A tensor map is 128 bytes that encode an address and a layout (`[k, rows]` bf16, the
    ///   box, the swizzle) and nothing else. The cache key is exactly that (address, rows, k,
    ///   box), so two maps with one key are the same bytes.
    /// - A map is handed to a kernel only by a call whose operand starts at exactly the key's
    ///   address and holds exactly `rows x k` elements (both checked before the lookup, naming
    ///   the operand). The launch passes that operand itself beside its map (`a: &[bf16]`,
    ///   `b: &[bf16]` kernel parameters), so the stream's door declares the read as for any
    ///   slice argument: the kernel is ordered after earlier writes of that memory on any
    ///   stream, and the operand's owner (a buffer's drop, a host copy) waits for the kernel.
    ///   So every byte the copy engine reads through the map belongs, for the whole kernel, to
    ///   a live operand that this launch borrowed and declared.
    /// - A map whose buffer has been freed is never read unless a live operand has its address
    ///   and shape again, and then it is bit for bit the map a fresh call would build for that
    ///   operand (a reallocated buffer at the same address is just another operand). It never
    ///   aliases freed memory in a running kernel.
    /// - The map's own 128 bytes are a device buffer owned by the cache and declared read by
    ///   every launch that uses them, so evicting it (or dropping the engine) waits for those
    ///   kernels. The cache belongs to one engine, bound to one stream and its context, so a
    ///   map of another context's memory never meets it.
    ///
    /// The kernels check the rest themselves (launch shape, the lengths of `a`, `b`, `c`
    /// against `m`, `n`, `k`), so a wrong map can come only from this module.
    ///
    /// # Errors
    /// As for [`hopper_gemm_bf16`].
    pub fn hopper_gemm_bf16(
        &self,
        a: &(impl DeviceRead<bf16> + ?Sized),
        b: &(impl DeviceRead<bf16> + ?Sized),
        c: &mut (impl DeviceWrite<bf16> + ?Sized),
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<()> {
        let schedule = hopper_schedule(GemmShape { transpose_b: true, ..GemmShape::new(m, n, k) });
        self.hopper_gemm_bf16_with(schedule, a, b, c, m, n, k)
    }

    /// [`GemmEngine::hopper_gemm_bf16`] with the schedule `schedule` (a cluster schedule runs
    /// the plain kernel when the number of 128-row tiles is odd).
    ///
    /// # Errors
    /// As for [`hopper_gemm_bf16`].
    #[allow(clippy::too_many_arguments)]
    pub fn hopper_gemm_bf16_with(
        &self,
        schedule: HopperSchedule,
        a: &(impl DeviceRead<bf16> + ?Sized),
        b: &(impl DeviceRead<bf16> + ?Sized),
        c: &mut (impl DeviceWrite<bf16> + ?Sized),
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<()> {
        let stream = self.stream();
        let tiles = hopper_checks(stream, a, b, c, (m, n, k))?;
        let c_address = c.kernel_arg_mut().ptr();
        let schedule = runnable(schedule, m, n, c_address);
        let b_rows = if schedule.cluster { BOX_B_HALF[1] } else { BOX_B[1] };
        let a_key = MapKey { address: a.kernel_arg().ptr(), rows: m as u64, k: k as u64, box_rows: BOX_A[1] };
        let b_key = MapKey { address: b.kernel_arg().ptr(), rows: n as u64, k: k as u64, box_rows: b_rows };
        // C's map: `[n, m]` with box `BOX_C` (64 x 64), i.e. the same kind of key with `n` as
        // the inner extent.
        let c_key = (schedule.store != HopperStore::Direct).then_some(MapKey { address: c_address, rows: m as u64, k: n as u64, box_rows: BOX_C[1] });
        // The cache is held across the copies and the launch (door calls): inside another door
        // call's work its holder may be waiting for this thread (audit 2026-11-28c G15R-6).
        Stream::refuse_inside_door_work("GemmEngine (sm_90 tensor maps)")?;
        let mut cache = self.maps.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        cache.get(stream, a_key)?;
        cache.get(stream, b_key)?;
        if let Some(c_key) = c_key {
            cache.get(stream, c_key)?;
        }
        let find = |key: MapKey| cache.entries.iter().find(|(k, _)| *k == key).map(|(_, map)| map).expect("cached above");
        // SAFETY: the cached maps encode exactly `a`, `b` and `c` (the keys are their checked
        // addresses, `hopper_checks` checked they hold `m x k`, `n x k` and `m x n` elements),
        // 2-D bf16, boxes `BOX_A`, the schedule's B box and `BOX_C`, the 128-byte swizzle; the
        // launch passes `a`, `b` and `c` themselves, so it declares the memory the maps read
        // and write (see the docs above); `runnable` gave a copy-engine store only a C it can
        // write (`n % 8 == 0`, 16-byte aligned).
        unsafe { launch_hopper(stream, schedule, tiles, (find(a_key), find(b_key), c_key.map(find)), a, b, c, (m, n, k)) }
    }

    /// Tensor maps this engine has built for the sm_90 kernel (cache misses) since it was made:
    /// a steady sequence of calls on the same operands builds none after the first.
    pub fn tensor_maps_built(&self) -> u64 {
        self.maps.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).built
    }

    /// Tensor maps the engine's cache holds now (at most [`MAP_CACHE_CAPACITY`]).
    pub fn tensor_maps_cached(&self) -> usize {
        self.maps.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).entries.len()
    }
}
