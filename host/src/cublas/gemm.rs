//! The typed description of a GEMM, validated on the host before anything is queued: element
//! types (a pairing cuBLAS supports, or the program does not compile), matrix layouts,
//! transposes, leading dimensions, batches.
//!
//! Everything is column-major, as in cuBLAS: element `(row, col)` of a matrix with leading
//! dimension `ld` is at `row + col * ld`. See the [module docs](crate::cublas) for row-major
//! data.

use std::marker::PhantomData;

use bytemuck::Pod;
use half::{bf16, f16};

use crate::error::{Error, Result};

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
}

/// The element types of cuBLAS's typed GEMMs, as CUDA names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ElementType {
    /// `f32` (`CUDA_R_32F`).
    F32,
    /// `half::f16` (`CUDA_R_16F`).
    F16,
    /// `half::bf16` (`CUDA_R_16BF`).
    Bf16,
}

/// An element type a GEMM multiplies: `f32`, `half::f16` or `half::bf16` (sealed).
pub trait GemmElement: Pod + sealed::Sealed {
    /// The CUDA data type.
    const TYPE: ElementType;
}

impl GemmElement for f32 {
    const TYPE: ElementType = ElementType::F32;
}
impl GemmElement for f16 {
    const TYPE: ElementType = ElementType::F16;
}
impl GemmElement for bf16 {
    const TYPE: ElementType = ElementType::Bf16;
}

/// `Self` is an output type cuBLAS can write for inputs of type `In` with `f32` accumulation:
/// `f32 -> f32`, `f16 -> f16 | f32`, `bf16 -> bf16 | f32`. Any other pairing is a compile
/// error.
#[diagnostic::on_unimplemented(
    message = "cuBLAS has no GEMM from `{In}` inputs to a `{Self}` output",
    label = "unsupported output type for `{In}` inputs",
    note = "supported (f32 accumulation): f32 -> f32, f16 -> f16 or f32, bf16 -> bf16 or f32; convert the inputs first for other pairings"
)]
pub trait GemmOutput<In: GemmElement>: GemmElement {}

impl GemmOutput<f32> for f32 {}
impl GemmOutput<f16> for f16 {}
impl GemmOutput<f16> for f32 {}
impl GemmOutput<bf16> for bf16 {}
impl GemmOutput<bf16> for f32 {}

/// How the products are computed. Accumulation is always in `f32` (`CUBLAS_COMPUTE_32F`);
/// [`Gemm::tf32`] (for `f32` inputs only) lets the tensor cores round the inputs to TF32.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compute {
    /// `CUBLAS_COMPUTE_32F`: f32 accumulation (f16/bf16 inputs use the tensor cores).
    F32,
    /// `CUBLAS_COMPUTE_32F_FAST_TF32`: f32 inputs rounded to TF32 (10-bit mantissa) on the
    /// tensor cores, f32 accumulation.
    Tf32,
}

/// One matrix operand as it is stored, column-major: `rows x cols` elements with leading
/// dimension `ld` (the distance between the starts of two columns, `ld >= rows`), and whether
/// the GEMM uses it transposed (`op(X) = Xᵀ`, cuBLAS's `CUBLAS_OP_T`).
///
/// For `c = op(a) · op(b)` with `c` of `m x n`: `op(a)` is `m x k`, so `a` is stored `m x k`
/// untransposed or `k x m` transposed; likewise `b` is `k x n` or, transposed, `n x k`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MatrixLayout {
    /// Rows as stored.
    pub rows: usize,
    /// Columns as stored.
    pub cols: usize,
    /// Leading dimension: elements from one column's start to the next one's (`>= rows`).
    pub ld: usize,
    /// The GEMM reads the transpose of the stored matrix.
    pub transpose: bool,
}

impl MatrixLayout {
    /// A densely packed, untransposed `rows x cols` column-major matrix (`ld = rows`, or 1
    /// for no rows, as BLAS wants `ld >= 1`).
    #[must_use]
    pub const fn col_major(rows: usize, cols: usize) -> Self {
        MatrixLayout { rows, cols, ld: if rows == 0 { 1 } else { rows }, transpose: false }
    }

    /// The same matrix with leading dimension `ld` (a sub-matrix of a taller one, or padded
    /// columns).
    #[must_use]
    pub const fn with_ld(self, ld: usize) -> Self {
        MatrixLayout { ld, ..self }
    }

    /// The same stored matrix, used transposed by the GEMM.
    #[must_use]
    pub const fn transposed(self) -> Self {
        MatrixLayout { transpose: !self.transpose, ..self }
    }

    /// Rows of `op(X)`, the matrix as the GEMM uses it.
    pub const fn op_rows(&self) -> usize {
        if self.transpose { self.cols } else { self.rows }
    }

    /// Columns of `op(X)`.
    pub const fn op_cols(&self) -> usize {
        if self.transpose { self.rows } else { self.cols }
    }

    /// Elements from the first to one past the last the matrix touches: `ld * (cols - 1) +
    /// rows` (0 for an empty matrix), or `None` when that overflows `usize`.
    pub fn extent(&self) -> Option<usize> {
        if self.rows == 0 || self.cols == 0 {
            return Some(0);
        }
        self.ld.checked_mul(self.cols - 1)?.checked_add(self.rows)
    }
}

/// A strided batch: `count` GEMMs, the `i`-th reading `a` at element offset `i * stride_a`,
/// `b` at `i * stride_b` and writing `c` at `i * stride_c` (`cublasGemmStridedBatchedEx`).
/// A stride of 0 for `a` or `b` shares one matrix among the batch; the batches of `c` may not
/// overlap (`stride_c` at least the extent of one `c`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Batch {
    /// Number of GEMMs.
    pub count: usize,
    /// Elements between consecutive `a` matrices.
    pub stride_a: usize,
    /// Elements between consecutive `b` matrices.
    pub stride_b: usize,
    /// Elements between consecutive `c` matrices.
    pub stride_c: usize,
}

/// A validated GEMM `c = alpha · op(a) · op(b) + beta · c` (optionally batched) on `In`
/// inputs and an `Out` output, for [`Cublas::gemm`](crate::Cublas::gemm) and
/// [`CublasLt::matmul`](crate::CublasLt::matmul).
///
/// Built with [`Gemm::new`] from the three layouts (the shape `m, n, k` follows from them and
/// must agree), or [`Gemm::dense`]. Every check that does not need the buffers happens here;
/// the buffers' lengths are checked at the call.
#[derive(Debug)]
pub struct Gemm<In, Out> {
    pub(crate) a: MatrixLayout,
    pub(crate) b: MatrixLayout,
    pub(crate) c: MatrixLayout,
    pub(crate) compute: Compute,
    pub(crate) batch: Option<Batch>,
    /// Elements each operand spans, batches included.
    pub(crate) spans: [usize; 3],
    _types: PhantomData<fn() -> (In, Out)>,
}

impl<In, Out> Clone for Gemm<In, Out> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<In, Out> Copy for Gemm<In, Out> {}

/// The error for a GEMM description that cuBLAS would reject or that would reach outside its
/// buffers.
fn invalid(problem: String) -> Error {
    Error::InvalidGemm { problem }
}

/// `x` as cuBLAS's `int`, or an error naming `what`.
pub(crate) fn to_i32(what: &str, x: usize) -> Result<i32> {
    i32::try_from(x).map_err(|_| invalid(format!("{what} = {x} exceeds cuBLAS's 32-bit limit ({}); split the GEMM", i32::MAX)))
}

/// `x` as a 64-bit stride, or an error naming `what`.
pub(crate) fn to_i64(what: &str, x: usize) -> Result<i64> {
    i64::try_from(x).map_err(|_| invalid(format!("{what} = {x} exceeds i64")))
}

impl<In: GemmElement, Out: GemmOutput<In>> Gemm<In, Out> {
    /// `c (m x n) = op(a) (m x k) · op(b) (k x n)`, with `m, n` from `c` and `k` from `a`.
    ///
    /// Fails with [`Error::InvalidGemm`] when `c` is marked transposed, the shapes disagree
    /// (`op(a)` must have `m` rows, `op(b)` `k` rows and `n` columns), a leading dimension is
    /// below its matrix's rows (or 0), or a dimension does not fit cuBLAS's 32-bit `int`.
    pub fn new(a: MatrixLayout, b: MatrixLayout, c: MatrixLayout) -> Result<Self> {
        if c.transpose {
            return Err(invalid("c cannot be transposed (cuBLAS writes c as stored); transpose the whole product instead: cᵀ = op(b)ᵀ · op(a)ᵀ".into()));
        }
        let (m, n, k) = (c.rows, c.cols, a.op_cols());
        if a.op_rows() != m {
            return Err(invalid(format!("op(a) has {} rows but c has {m}: op(a) must be m x k = {m} x {k}", a.op_rows())));
        }
        if b.op_rows() != k || b.op_cols() != n {
            return Err(invalid(format!("op(b) is {} x {} but must be k x n = {k} x {n} (k from op(a), n from c)", b.op_rows(), b.op_cols())));
        }
        for (name, layout) in [("a", a), ("b", b), ("c", c)] {
            if layout.ld < layout.rows.max(1) {
                return Err(invalid(format!("{name}'s leading dimension {} is below its {} stored rows (ld >= max(1, rows))", layout.ld, layout.rows)));
            }
            to_i32(&format!("{name}'s leading dimension"), layout.ld)?;
        }
        to_i32("m", m)?;
        to_i32("n", n)?;
        to_i32("k", k)?;
        let spans = [Self::span("a", &a, None)?, Self::span("b", &b, None)?, Self::span("c", &c, None)?];
        Ok(Gemm { a, b, c, compute: Compute::F32, batch: None, spans, _types: PhantomData })
    }

    /// Densely packed, untransposed operands: `a` is `m x k`, `b` `k x n`, `c` `m x n`.
    pub fn dense(m: usize, n: usize, k: usize) -> Result<Self> {
        Self::new(MatrixLayout::col_major(m, k), MatrixLayout::col_major(k, n), MatrixLayout::col_major(m, n))
    }

    /// The same GEMM over a strided batch (`cublasGemmStridedBatchedEx`).
    ///
    /// Fails with [`Error::InvalidGemm`] when the batches of `c` would overlap (`stride_c`
    /// below the extent of one `c`, with more than one batch: they would be written at once),
    /// the count does not fit an `i32`, or a batch's extent overflows.
    pub fn batched(mut self, batch: Batch) -> Result<Self> {
        to_i32("the batch count", batch.count)?;
        for (name, stride) in [("stride_a", batch.stride_a), ("stride_b", batch.stride_b), ("stride_c", batch.stride_c)] {
            to_i64(name, stride)?;
        }
        let one_c = self.c.extent().unwrap_or(usize::MAX);
        if batch.count > 1 && batch.stride_c < one_c {
            return Err(invalid(format!(
                "the batches of c overlap: stride_c = {} but one c spans {one_c} elements (ld {} x {} columns); use stride_c >= {one_c}",
                batch.stride_c, self.c.ld, self.c.cols
            )));
        }
        self.spans = [
            Self::span("a", &self.a, Some((batch.count, batch.stride_a)))?,
            Self::span("b", &self.b, Some((batch.count, batch.stride_b)))?,
            Self::span("c", &self.c, Some((batch.count, batch.stride_c)))?,
        ];
        self.batch = Some(batch);
        Ok(self)
    }

    /// Elements `layout` spans over `batch = (count, stride)`.
    fn span(name: &str, layout: &MatrixLayout, batch: Option<(usize, usize)>) -> Result<usize> {
        let overflow = || invalid(format!("{name} ({} x {}, ld {}) spans more elements than a usize holds", layout.rows, layout.cols, layout.ld));
        let one = layout.extent().ok_or_else(overflow)?;
        match batch {
            Some((count, stride)) if count > 0 && one > 0 => stride.checked_mul(count - 1).and_then(|s| s.checked_add(one)).ok_or_else(overflow),
            Some(_) => Ok(0),
            None => Ok(one),
        }
    }

    /// `(m, n, k)`: `c` is `m x n`, the inner dimension is `k`.
    pub fn shape(&self) -> (usize, usize, usize) {
        (self.c.rows, self.c.cols, self.a.op_cols())
    }

    /// The layouts of `a`, `b` and `c`.
    pub fn layouts(&self) -> [MatrixLayout; 3] {
        [self.a, self.b, self.c]
    }

    /// The batch, if any.
    pub fn batch(&self) -> Option<Batch> {
        self.batch
    }

    /// How the products are computed.
    pub fn compute(&self) -> Compute {
        self.compute
    }

    /// Elements each of `a`, `b`, `c` must hold at least (batches included).
    pub fn min_lengths(&self) -> [usize; 3] {
        self.spans
    }

    /// True when there is nothing to compute (`m`, `n` or the batch count is 0).
    pub(crate) fn is_empty(&self) -> bool {
        let (m, n, _) = self.shape();
        m == 0 || n == 0 || self.batch.is_some_and(|b| b.count == 0)
    }

    /// Checks that buffers of these lengths hold every element the GEMM touches.
    pub fn check_lengths(&self, a: usize, b: usize, c: usize) -> Result<()> {
        for ((name, layout, have), needed) in [("a", self.a, a), ("b", self.b, b), ("c", self.c, c)].into_iter().zip(self.spans) {
            if have < needed {
                let batch = self.batch.map(|b| format!(" over {} batches", b.count)).unwrap_or_default();
                return Err(invalid(format!(
                    "buffer {name} holds {have} elements but its layout ({} x {}, ld {}){batch} spans {needed}",
                    layout.rows, layout.cols, layout.ld
                )));
            }
        }
        Ok(())
    }
}

impl Gemm<f32, f32> {
    /// Lets the tensor cores round the `f32` inputs to TF32 (`CUBLAS_COMPUTE_32F_FAST_TF32`):
    /// several times the FP32 rate, about 3 significant decimal digits per input product.
    /// Only for `f32` inputs (other element types do not have this method).
    #[must_use]
    pub fn tf32(mut self) -> Self {
        self.compute = Compute::Tf32;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(rows: usize, cols: usize, ld: usize, transpose: bool) -> MatrixLayout {
        MatrixLayout { rows, cols, ld, transpose }
    }

    fn problem(error: Error) -> String {
        match error {
            Error::InvalidGemm { problem } => problem,
            other => panic!("expected InvalidGemm, got {other:?}"),
        }
    }

    #[test]
    fn shape_comes_from_the_layouts_with_transposes() {
        // op(a) = aᵀ: a stored k x m = 8 x 4; op(b) = bᵀ: b stored n x k = 5 x 8.
        let g = Gemm::<f32, f32>::new(layout(8, 4, 8, true), layout(5, 8, 5, true), MatrixLayout::col_major(4, 5)).unwrap();
        assert_eq!(g.shape(), (4, 5, 8));
        assert_eq!(g.min_lengths(), [32, 40, 20]);
    }

    #[test]
    fn disagreeing_shapes_are_refused_naming_the_dimension() {
        let e = problem(Gemm::<f32, f32>::new(MatrixLayout::col_major(4, 8), MatrixLayout::col_major(7, 5), MatrixLayout::col_major(4, 5)).unwrap_err());
        assert!(e.contains("op(b) is 7 x 5 but must be k x n = 8 x 5"), "{e}");
        let e = problem(Gemm::<f32, f32>::new(MatrixLayout::col_major(3, 8), MatrixLayout::col_major(8, 5), MatrixLayout::col_major(4, 5)).unwrap_err());
        assert!(e.contains("op(a) has 3 rows but c has 4"), "{e}");
    }

    #[test]
    fn a_transposed_c_is_refused() {
        let e = problem(
            Gemm::<f32, f32>::new(MatrixLayout::col_major(4, 8), MatrixLayout::col_major(8, 4), MatrixLayout::col_major(4, 4).transposed()).unwrap_err(),
        );
        assert!(e.contains("c cannot be transposed"), "{e}");
    }

    #[test]
    fn leading_dimension_below_rows_is_refused() {
        let e = problem(Gemm::<f32, f32>::new(layout(4, 8, 3, false), MatrixLayout::col_major(8, 5), MatrixLayout::col_major(4, 5)).unwrap_err());
        assert!(e.contains("a's leading dimension 3 is below its 4 stored rows"), "{e}");
        // ld 0 for an empty matrix is refused too (BLAS wants ld >= 1).
        let e = problem(Gemm::<f32, f32>::new(layout(0, 8, 0, false), MatrixLayout::col_major(8, 5), MatrixLayout::col_major(0, 5)).unwrap_err());
        assert!(e.contains("leading dimension 0"), "{e}");
    }

    #[test]
    fn dimensions_beyond_i32_are_refused() {
        let big = i32::MAX as usize + 1;
        let e = problem(Gemm::<bf16, f32>::dense(big, 1, 1).unwrap_err());
        assert!(e.contains("exceeds cuBLAS's 32-bit limit"), "{e}");
        let e = problem(
            Gemm::<bf16, f32>::new(MatrixLayout::col_major(2, 2).with_ld(big), MatrixLayout::col_major(2, 2), MatrixLayout::col_major(2, 2)).unwrap_err(),
        );
        assert!(e.contains("a's leading dimension = 2147483648 exceeds"), "{e}");
        let g = Gemm::<f16, f16>::dense(2, 2, 2).unwrap();
        let e = problem(g.batched(Batch { count: big, stride_a: 0, stride_b: 0, stride_c: 4 }).unwrap_err());
        assert!(e.contains("batch count"), "{e}");
    }

    #[test]
    fn short_buffers_are_refused_naming_the_operand() {
        let g = Gemm::<f32, f32>::new(MatrixLayout::col_major(4, 8).with_ld(6), MatrixLayout::col_major(8, 5), MatrixLayout::col_major(4, 5)).unwrap();
        // a spans 6 * 7 + 4 = 46 elements.
        assert_eq!(g.min_lengths()[0], 46);
        g.check_lengths(46, 40, 20).unwrap();
        let e = problem(g.check_lengths(45, 40, 20).unwrap_err());
        assert!(e.contains("buffer a holds 45 elements but its layout (4 x 8, ld 6) spans 46"), "{e}");
        let e = problem(g.check_lengths(46, 40, 19).unwrap_err());
        assert!(e.contains("buffer c holds 19"), "{e}");
    }

    #[test]
    fn overlapping_batches_of_c_are_refused_and_shared_inputs_allowed() {
        let g = Gemm::<bf16, bf16>::dense(4, 5, 8).unwrap();
        let e = problem(g.batched(Batch { count: 3, stride_a: 32, stride_b: 40, stride_c: 19 }).unwrap_err());
        assert!(e.contains("the batches of c overlap: stride_c = 19 but one c spans 20"), "{e}");
        let e = problem(g.batched(Batch { count: 2, stride_a: 32, stride_b: 40, stride_c: 0 }).unwrap_err());
        assert!(e.contains("overlap"), "{e}");
        // One batch may use any stride; a shared a (stride 0) is fine.
        g.batched(Batch { count: 1, stride_a: 0, stride_b: 0, stride_c: 0 }).unwrap();
        let b = g.batched(Batch { count: 3, stride_a: 0, stride_b: 40, stride_c: 20 }).unwrap();
        // The last batch's extent: a 32 (shared), b 2 * 40 + 40, c 2 * 20 + 20.
        assert_eq!(b.min_lengths(), [32, 120, 60]);
        let e = problem(b.check_lengths(32, 119, 60).unwrap_err());
        assert!(e.contains("buffer b holds 119 elements but its layout (8 x 5, ld 8) over 3 batches spans 120"), "{e}");
    }

    #[test]
    fn extents_that_overflow_are_refused() {
        let huge = i32::MAX as usize;
        let g = Gemm::<f32, f32>::new(MatrixLayout::col_major(2, huge).with_ld(huge), MatrixLayout::col_major(huge, 1), MatrixLayout::col_major(2, 1)).unwrap();
        let e = problem(g.batched(Batch { count: huge, stride_a: usize::MAX / 2, stride_b: 0, stride_c: 2 }).unwrap_err());
        assert!(e.contains("stride_a") || e.contains("spans more elements"), "{e}");
    }

    #[test]
    fn empty_gemms_need_no_memory() {
        let g = Gemm::<f32, f32>::dense(0, 5, 8).unwrap();
        assert!(g.is_empty());
        assert_eq!(g.min_lengths(), [0, 40, 0]);
        let b = Gemm::<f32, f32>::dense(2, 2, 2).unwrap().batched(Batch { count: 0, stride_a: 0, stride_b: 0, stride_c: 0 }).unwrap();
        assert!(b.is_empty());
        assert_eq!(b.min_lengths(), [0, 0, 0]);
    }

    #[test]
    fn tf32_is_recorded() {
        assert_eq!(Gemm::<f32, f32>::dense(1, 1, 1).unwrap().tf32().compute(), Compute::Tf32);
        assert_eq!(Gemm::<bf16, f32>::dense(1, 1, 1).unwrap().compute(), Compute::F32);
    }
}
