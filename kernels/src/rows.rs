//! Row and element-wise kernels on the GPU: norms, softmax, cross-entropy, activations,
//! rotary embeddings, the optimiser step and gradient clipping.
//!
//! Matrices are row-major `rows x cols` ([`Rows`]). Norms and softmax run a block per row with
//! 8 columns per thread and 16-byte accesses when `cols` is a multiple of 8 from 256 to 8192,
//! else one warp per row (any width); element-wise ones a grid-stride loop (GELU in chunks of
//! 8 when the length is a multiple of 8). The choice is the call's; results agree. Every
//! call checks each operand's length against the shape before it queues anything and names
//! the operand that is wrong ([`KernelsError::Shape`](crate::KernelsError::Shape)). Outputs are written, never
//! accumulated, unless a call says otherwise. [`cpu`](crate::cpu) has the same calls on the
//! CPU executor.

use core::num::NonZeroU32;

use ferrocuda_host::{DeviceBuffer, DeviceRead, DeviceWrite, Stream};
use ferrocuda_kernels_device::{AdamWStep, RopeShape, sum_column_partials};

use crate::error::{expect_at_least, expect_len, unsupported};
use crate::launchers::Launchers;
use crate::{Element, Result, grid_stride, len_of, packed_elements, packed_rows, warp_per_row};

/// The shape of a row-major matrix: `rows x cols`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Rows {
    /// Rows (tokens, for activations).
    pub rows: usize,
    /// Columns (channels, vocabulary).
    pub cols: usize,
}

impl Rows {
    /// `rows * cols`.
    pub fn len(&self) -> usize {
        self.rows * self.cols
    }

    /// True when the matrix has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The shape as the kernels take it; refuses what they cannot run.
    pub(crate) fn check(&self) -> Result<(u32, u32)> {
        if self.cols == 0 {
            return Err(unsupported("cols", 0, "rows need at least one column"));
        }
        let rows = u32::try_from(self.rows)
            .ok()
            .filter(|r| *r < (1 << 26))
            .ok_or_else(|| unsupported("rows", self.rows, "at most 2^26 - 1 rows per call (one warp each)"))?;
        let cols = u32::try_from(self.cols).map_err(|_| unsupported("cols", self.cols, "at most u32::MAX columns"))?;
        self.rows.checked_mul(self.cols).ok_or_else(|| unsupported("rows", self.rows, "rows x cols overflows usize"))?;
        Ok((rows, cols))
    }

    pub(crate) fn matrix(&self, operand: &'static str, got: usize) -> Result<()> {
        expect_len(operand, got, self.len(), || format!("rows {} x cols {}", self.rows, self.cols))
    }

    pub(crate) fn row(&self, operand: &'static str, got: usize) -> Result<()> {
        expect_len(operand, got, self.cols, || format!("one per column, cols {}", self.cols))
    }

    pub(crate) fn per_row(&self, operand: &'static str, got: usize) -> Result<()> {
        expect_len(operand, got, self.rows, || format!("one per row, rows {}", self.rows))
    }
}

/// RMSNorm: `out = x / sqrt(mean(x^2) + eps) * weight` per row, and `rstd[row]` (f32, for
/// [`rmsnorm_backward`]). `x`, `out`: `rows x cols`; `weight`: `cols`; `rstd`: `rows`.
pub fn rmsnorm<T: Element>(
    stream: &Stream,
    x: &(impl DeviceRead<T> + ?Sized),
    weight: &(impl DeviceRead<T> + ?Sized),
    out: &mut (impl DeviceWrite<T> + ?Sized),
    rstd: &mut (impl DeviceWrite<f32> + ?Sized),
    shape: Rows,
    eps: f32,
) -> Result<()> {
    let (rows, cols) = shape.check()?;
    shape.matrix("x", len_of(x))?;
    shape.row("weight", len_of(weight))?;
    shape.matrix("out", len_of(out))?;
    shape.per_row("rstd", len_of(rstd))?;
    if rows == 0 {
        return Ok(());
    }
    if let Some(config) = packed_rows(shape.rows, shape.cols) {
        return Ok(<T as Launchers>::rmsnorm_forward_packed(stream, config, x, weight, out, rstd, cols, eps)?);
    }
    Ok(<T as Launchers>::rmsnorm_forward(stream, warp_per_row(shape.rows), x, weight, out, rstd, rows, cols, eps)?)
}

/// Residual add fused with RMSNorm: `sum = x + residual` (rounded to `T`; the residual stream
/// the next layer adds to), then `out = rmsnorm(sum)`. Shapes as [`rmsnorm`]; `residual` and
/// `sum` are `rows x cols`.
#[allow(clippy::too_many_arguments)]
pub fn add_rmsnorm<T: Element>(
    stream: &Stream,
    x: &(impl DeviceRead<T> + ?Sized),
    residual: &(impl DeviceRead<T> + ?Sized),
    weight: &(impl DeviceRead<T> + ?Sized),
    out: &mut (impl DeviceWrite<T> + ?Sized),
    sum: &mut (impl DeviceWrite<T> + ?Sized),
    rstd: &mut (impl DeviceWrite<f32> + ?Sized),
    shape: Rows,
    eps: f32,
) -> Result<()> {
    let (rows, cols) = shape.check()?;
    shape.matrix("x", len_of(x))?;
    shape.matrix("residual", len_of(residual))?;
    shape.row("weight", len_of(weight))?;
    shape.matrix("out", len_of(out))?;
    shape.matrix("sum", len_of(sum))?;
    shape.per_row("rstd", len_of(rstd))?;
    if rows == 0 {
        return Ok(());
    }
    if let Some(config) = packed_rows(shape.rows, shape.cols) {
        return Ok(<T as Launchers>::add_rmsnorm_forward_packed(stream, config, x, residual, weight, out, sum, rstd, cols, eps)?);
    }
    Ok(<T as Launchers>::add_rmsnorm_forward(stream, warp_per_row(shape.rows), x, residual, weight, out, sum, rstd, rows, cols, eps)?)
}

/// Layer norm: `out = (x - mean) * rstd * weight + bias` per row, and `mean[row]`,
/// `rstd[row]` (f32, for [`layernorm_backward`]).
#[allow(clippy::too_many_arguments)]
pub fn layernorm<T: Element>(
    stream: &Stream,
    x: &(impl DeviceRead<T> + ?Sized),
    weight: &(impl DeviceRead<T> + ?Sized),
    bias: &(impl DeviceRead<T> + ?Sized),
    out: &mut (impl DeviceWrite<T> + ?Sized),
    mean: &mut (impl DeviceWrite<f32> + ?Sized),
    rstd: &mut (impl DeviceWrite<f32> + ?Sized),
    shape: Rows,
    eps: f32,
) -> Result<()> {
    let (rows, cols) = shape.check()?;
    shape.matrix("x", len_of(x))?;
    shape.row("weight", len_of(weight))?;
    shape.row("bias", len_of(bias))?;
    shape.matrix("out", len_of(out))?;
    shape.per_row("mean", len_of(mean))?;
    shape.per_row("rstd", len_of(rstd))?;
    if rows == 0 {
        return Ok(());
    }
    if let Some(config) = packed_rows(shape.rows, shape.cols) {
        return Ok(<T as Launchers>::layernorm_forward_packed(stream, config, x, weight, bias, out, mean, rstd, cols, eps)?);
    }
    Ok(<T as Launchers>::layernorm_forward(stream, warp_per_row(shape.rows), x, weight, bias, out, mean, rstd, rows, cols, eps)?)
}

/// Residual add fused with layer norm: `sum = x + residual` (rounded to `T`), then `out =
/// layernorm(sum)`.
#[allow(clippy::too_many_arguments)]
pub fn add_layernorm<T: Element>(
    stream: &Stream,
    x: &(impl DeviceRead<T> + ?Sized),
    residual: &(impl DeviceRead<T> + ?Sized),
    weight: &(impl DeviceRead<T> + ?Sized),
    bias: &(impl DeviceRead<T> + ?Sized),
    out: &mut (impl DeviceWrite<T> + ?Sized),
    sum: &mut (impl DeviceWrite<T> + ?Sized),
    mean: &mut (impl DeviceWrite<f32> + ?Sized),
    rstd: &mut (impl DeviceWrite<f32> + ?Sized),
    shape: Rows,
    eps: f32,
) -> Result<()> {
    let (rows, cols) = shape.check()?;
    shape.matrix("x", len_of(x))?;
    shape.matrix("residual", len_of(residual))?;
    shape.row("weight", len_of(weight))?;
    shape.row("bias", len_of(bias))?;
    shape.matrix("out", len_of(out))?;
    shape.matrix("sum", len_of(sum))?;
    shape.per_row("mean", len_of(mean))?;
    shape.per_row("rstd", len_of(rstd))?;
    if rows == 0 {
        return Ok(());
    }
    if let Some(config) = packed_rows(shape.rows, shape.cols) {
        return Ok(<T as Launchers>::add_layernorm_forward_packed(stream, config, x, residual, weight, bias, out, sum, mean, rstd, cols, eps)?);
    }
    Ok(<T as Launchers>::add_layernorm_forward(stream, warp_per_row(shape.rows), x, residual, weight, bias, out, sum, mean, rstd, rows, cols, eps)?)
}

/// Layer norm backward: `dx` (`rows x cols`, plus `dresidual` when given: the gradient that
/// reached the residual stream directly, for [`add_layernorm`]), and the weight and bias
/// gradients `dweight`, `dbias` (`cols`, f32, written; summed over rows in order, so
/// deterministic). `x` is the norm's input (`sum` for the fused form), `mean`/`rstd` the
/// forward's. Two launches.
#[allow(clippy::too_many_arguments)]
pub fn layernorm_backward<T: Element>(
    stream: &Stream,
    dout: &(impl DeviceRead<T> + ?Sized),
    x: &(impl DeviceRead<T> + ?Sized),
    weight: &(impl DeviceRead<T> + ?Sized),
    mean: &(impl DeviceRead<f32> + ?Sized),
    rstd: &(impl DeviceRead<f32> + ?Sized),
    dresidual: Option<&dyn DeviceRead<T>>,
    dx: &mut (impl DeviceWrite<T> + ?Sized),
    dweight: &mut (impl DeviceWrite<f32> + ?Sized),
    dbias: &mut (impl DeviceWrite<f32> + ?Sized),
    shape: Rows,
) -> Result<()> {
    shape.check()?;
    let n = norm_backward_scratch_len(shape);
    let mut partial_dw = DeviceBuffer::<f32>::zeroed_async(stream, n)?;
    let mut partial_db = DeviceBuffer::<f32>::zeroed_async(stream, n)?;
    layernorm_backward_with_scratch(stream, dout, x, weight, mean, rstd, dresidual, dx, dweight, dbias, &mut partial_dw, &mut partial_db, shape)
}

/// The length of each of the two `f32` scratch areas of [`layernorm_backward_with_scratch`]
/// and [`rmsnorm_backward_with_scratch`] for `shape`: per chunk of rows, a partial sum per
/// column.
pub fn norm_backward_scratch_len(shape: Rows) -> usize {
    weight_chunks(shape.rows) * shape.cols
}

/// [`layernorm_backward`] with its `f32` scratch passed in (`partial_dw`, `partial_db`, each
/// [`norm_backward_scratch_len`] long, contents ignored): it allocates nothing, so it may be
/// recorded into a CUDA graph on memory its caller owns.
#[allow(clippy::too_many_arguments)]
pub fn layernorm_backward_with_scratch<T: Element>(
    stream: &Stream,
    dout: &(impl DeviceRead<T> + ?Sized),
    x: &(impl DeviceRead<T> + ?Sized),
    weight: &(impl DeviceRead<T> + ?Sized),
    mean: &(impl DeviceRead<f32> + ?Sized),
    rstd: &(impl DeviceRead<f32> + ?Sized),
    dresidual: Option<&dyn DeviceRead<T>>,
    dx: &mut (impl DeviceWrite<T> + ?Sized),
    dweight: &mut (impl DeviceWrite<f32> + ?Sized),
    dbias: &mut (impl DeviceWrite<f32> + ?Sized),
    partial_dw: &mut (impl DeviceWrite<f32> + ?Sized),
    partial_db: &mut (impl DeviceWrite<f32> + ?Sized),
    shape: Rows,
) -> Result<()> {
    let (rows, cols) = shape.check()?;
    shape.matrix("dout", len_of(dout))?;
    shape.matrix("x", len_of(x))?;
    shape.row("weight", len_of(weight))?;
    shape.per_row("mean", len_of(mean))?;
    shape.per_row("rstd", len_of(rstd))?;
    if let Some(d) = dresidual {
        shape.matrix("dresidual", len_of(d))?;
    }
    shape.matrix("dx", len_of(dx))?;
    shape.row("dweight", len_of(dweight))?;
    shape.row("dbias", len_of(dbias))?;
    scratch(shape, partial_dw, partial_db)?;
    if let Some(config) = packed_rows(shape.rows, shape.cols) {
        match dresidual {
            Some(d) => <T as Launchers>::norm_backward_packed(stream, config, dout, x, weight, mean, rstd, d, dx, cols, 1, 1)?,
            None => <T as Launchers>::norm_backward_packed(stream, config, dout, x, weight, mean, rstd, dout, dx, cols, 0, 1)?,
        }
    } else if rows > 0 {
        match dresidual {
            Some(d) => <T as Launchers>::layernorm_backward(stream, warp_per_row(shape.rows), dout, x, weight, mean, rstd, d, dx, rows, cols, 1)?,
            None => <T as Launchers>::layernorm_backward(stream, warp_per_row(shape.rows), dout, x, weight, mean, rstd, dout, dx, rows, cols, 0)?,
        }
    }
    let chunks = weight_gradients::<T>(stream, dout, x, mean, rstd, dweight, partial_dw, partial_db, shape, true)?;
    Ok(sum_column_partials::launch(stream, grid_stride(shape.cols), &*partial_db, dbias, chunks, cols)?)
}

/// RMSNorm backward: `dx` (plus `dresidual` when given) and `dweight` (`cols`, f32,
/// written, deterministic). `x` is the norm's input, `rstd` the forward's. Two launches.
#[allow(clippy::too_many_arguments)]
pub fn rmsnorm_backward<T: Element>(
    stream: &Stream,
    dout: &(impl DeviceRead<T> + ?Sized),
    x: &(impl DeviceRead<T> + ?Sized),
    weight: &(impl DeviceRead<T> + ?Sized),
    rstd: &(impl DeviceRead<f32> + ?Sized),
    dresidual: Option<&dyn DeviceRead<T>>,
    dx: &mut (impl DeviceWrite<T> + ?Sized),
    dweight: &mut (impl DeviceWrite<f32> + ?Sized),
    shape: Rows,
) -> Result<()> {
    shape.check()?;
    let n = norm_backward_scratch_len(shape);
    let mut partial_dw = DeviceBuffer::<f32>::zeroed_async(stream, n)?;
    let mut partial_db = DeviceBuffer::<f32>::zeroed_async(stream, n)?;
    rmsnorm_backward_with_scratch(stream, dout, x, weight, rstd, dresidual, dx, dweight, &mut partial_dw, &mut partial_db, shape)
}

/// [`rmsnorm_backward`] with its `f32` scratch passed in (as for
/// [`layernorm_backward_with_scratch`]): it allocates nothing.
#[allow(clippy::too_many_arguments)]
pub fn rmsnorm_backward_with_scratch<T: Element>(
    stream: &Stream,
    dout: &(impl DeviceRead<T> + ?Sized),
    x: &(impl DeviceRead<T> + ?Sized),
    weight: &(impl DeviceRead<T> + ?Sized),
    rstd: &(impl DeviceRead<f32> + ?Sized),
    dresidual: Option<&dyn DeviceRead<T>>,
    dx: &mut (impl DeviceWrite<T> + ?Sized),
    dweight: &mut (impl DeviceWrite<f32> + ?Sized),
    partial_dw: &mut (impl DeviceWrite<f32> + ?Sized),
    partial_db: &mut (impl DeviceWrite<f32> + ?Sized),
    shape: Rows,
) -> Result<()> {
    let (rows, cols) = shape.check()?;
    shape.matrix("dout", len_of(dout))?;
    shape.matrix("x", len_of(x))?;
    shape.row("weight", len_of(weight))?;
    shape.per_row("rstd", len_of(rstd))?;
    if let Some(d) = dresidual {
        shape.matrix("dresidual", len_of(d))?;
    }
    shape.matrix("dx", len_of(dx))?;
    shape.row("dweight", len_of(dweight))?;
    scratch(shape, partial_dw, partial_db)?;
    if let Some(config) = packed_rows(shape.rows, shape.cols) {
        match dresidual {
            Some(d) => <T as Launchers>::norm_backward_packed(stream, config, dout, x, weight, rstd, rstd, d, dx, cols, 1, 0)?,
            None => <T as Launchers>::norm_backward_packed(stream, config, dout, x, weight, rstd, rstd, dout, dx, cols, 0, 0)?,
        }
    } else if rows > 0 {
        match dresidual {
            Some(d) => <T as Launchers>::rmsnorm_backward(stream, warp_per_row(shape.rows), dout, x, weight, rstd, d, dx, rows, cols, 1)?,
            None => <T as Launchers>::rmsnorm_backward(stream, warp_per_row(shape.rows), dout, x, weight, rstd, dout, dx, rows, cols, 0)?,
        }
    }
    weight_gradients::<T>(stream, dout, x, rstd, rstd, dweight, partial_dw, partial_db, shape, false)?;
    Ok(())
}

/// Rows each thread of the weight gradients' first step sums (in order).
pub(crate) const ROWS_PER_CHUNK: usize = 64;

/// The chunks of rows of the weight gradients' first step.
pub(crate) fn weight_chunks(rows: usize) -> usize {
    rows.div_ceil(ROWS_PER_CHUNK).max(1)
}

/// Checks the two scratch areas of a norm backward against `shape`.
fn scratch(shape: Rows, partial_dw: &(impl DeviceWrite<f32> + ?Sized), partial_db: &(impl DeviceWrite<f32> + ?Sized)) -> Result<()> {
    let n = norm_backward_scratch_len(shape);
    let why = || format!("norm_backward_scratch_len: {} chunks of rows x cols {}", weight_chunks(shape.rows), shape.cols);
    expect_len("partial_dw", len_of(partial_dw), n, why)?;
    expect_len("partial_db", len_of(partial_db), n, why)
}

/// The weight (and bias) gradients of a norm, in two deterministic launches: per chunk of
/// [`ROWS_PER_CHUNK`] rows and column into the `f32` scratch (`partial_dw`, `partial_db`,
/// checked by [`scratch`]), then the chunks summed in order per column into `dweight`.
/// Returns the number of chunks (the bias's partial sums are left in `partial_db`).
#[allow(clippy::too_many_arguments)]
fn weight_gradients<T: Element>(
    stream: &Stream,
    dout: &(impl DeviceRead<T> + ?Sized),
    x: &(impl DeviceRead<T> + ?Sized),
    mean: &(impl DeviceRead<f32> + ?Sized),
    rstd: &(impl DeviceRead<f32> + ?Sized),
    dweight: &mut (impl DeviceWrite<f32> + ?Sized),
    partial_dw: &mut (impl DeviceWrite<f32> + ?Sized),
    partial_db: &mut (impl DeviceWrite<f32> + ?Sized),
    shape: Rows,
    centred: bool,
) -> Result<u32> {
    let (rows, cols) = shape.check()?;
    let nonzero_cols = NonZeroU32::new(cols).ok_or_else(|| unsupported("cols", 0, "rows need at least one column"))?;
    let chunks = weight_chunks(shape.rows);
    if shape.cols.is_multiple_of(8) {
        <T as Launchers>::norm_backward_weights_partial_packed(
            stream,
            grid_stride(chunks * shape.cols / 8),
            dout,
            x,
            mean,
            rstd,
            partial_dw,
            partial_db,
            rows,
            cols,
            ROWS_PER_CHUNK as u32,
            centred as u32,
        )?;
    } else {
        <T as Launchers>::norm_backward_weights_partial(
            stream,
            grid_stride(chunks * shape.cols),
            dout,
            x,
            mean,
            rstd,
            partial_dw,
            partial_db,
            rows,
            nonzero_cols,
            ROWS_PER_CHUNK as u32,
            centred as u32,
        )?;
    }
    sum_column_partials::launch(stream, grid_stride(shape.cols), &*partial_dw, dweight, chunks as u32, cols)?;
    Ok(chunks as u32)
}

/// Softmax of each row: `out = exp(x - max) / sum(exp(x - max))`.
pub fn softmax<T: Element>(stream: &Stream, x: &(impl DeviceRead<T> + ?Sized), out: &mut (impl DeviceWrite<T> + ?Sized), shape: Rows) -> Result<()> {
    let (rows, cols) = shape.check()?;
    shape.matrix("x", len_of(x))?;
    shape.matrix("out", len_of(out))?;
    if rows == 0 {
        return Ok(());
    }
    if let Some(config) = packed_rows(shape.rows, shape.cols) {
        return Ok(<T as Launchers>::softmax_forward_packed(stream, config, x, out, cols)?);
    }
    Ok(<T as Launchers>::softmax_forward(stream, warp_per_row(shape.rows), x, out, rows, cols)?)
}

/// Cross-entropy with its gradient in one pass (llm.c's fused classifier): `logits` is `rows x
/// vocab` (`shape.cols` = vocab), `targets` one class per row (`u32`); writes `losses[row] =
/// logsumexp(row) - row[target]` (f32) and `dlogits = (softmax(row) - onehot(target)) *
/// dloss` (`dloss` is usually `1 / rows` for a mean loss). A target of
/// [`IGNORE_TARGET`](crate::IGNORE_TARGET) gives loss 0 and a zero gradient row; any other
/// target `>= vocab` gives NaN (targets live on the GPU, so they are not checked before the
/// launch; the kernel never reads out of bounds).
#[allow(clippy::too_many_arguments)]
pub fn cross_entropy<T: Element>(
    stream: &Stream,
    logits: &(impl DeviceRead<T> + ?Sized),
    targets: &(impl DeviceRead<u32> + ?Sized),
    losses: &mut (impl DeviceWrite<f32> + ?Sized),
    dlogits: &mut (impl DeviceWrite<T> + ?Sized),
    shape: Rows,
    dloss: f32,
) -> Result<()> {
    let (rows, vocab) = shape.check()?;
    shape.matrix("logits", len_of(logits))?;
    shape.per_row("targets", len_of(targets))?;
    shape.per_row("losses", len_of(losses))?;
    shape.matrix("dlogits", len_of(dlogits))?;
    if rows == 0 {
        return Ok(());
    }
    Ok(<T as Launchers>::cross_entropy_forward_backward(stream, warp_per_row(shape.rows), logits, targets, losses, dlogits, rows, vocab, dloss)?)
}

/// `out = gelu(x)` (GPT-2's tanh approximation), element-wise; `out` as long as `x`.
pub fn gelu<T: Element>(stream: &Stream, x: &(impl DeviceRead<T> + ?Sized), out: &mut (impl DeviceWrite<T> + ?Sized)) -> Result<()> {
    let n = len_of(x);
    expect_len("out", len_of(out), n, || "as long as x".into())?;
    if n == 0 {
        return Ok(());
    }
    if let Some(config) = packed_elements(n) {
        return Ok(<T as Launchers>::gelu_forward_packed(stream, config, x, out)?);
    }
    Ok(<T as Launchers>::gelu_forward(stream, grid_stride(n), x, out)?)
}

/// `dx = gelu'(x) * dout`, element-wise.
pub fn gelu_backward<T: Element>(
    stream: &Stream,
    x: &(impl DeviceRead<T> + ?Sized),
    dout: &(impl DeviceRead<T> + ?Sized),
    dx: &mut (impl DeviceWrite<T> + ?Sized),
) -> Result<()> {
    let n = len_of(x);
    expect_len("dout", len_of(dout), n, || "as long as x".into())?;
    expect_len("dx", len_of(dx), n, || "as long as x".into())?;
    if n == 0 {
        return Ok(());
    }
    if let Some(config) = packed_elements(n) {
        return Ok(<T as Launchers>::gelu_backward_packed(stream, config, x, dout, dx)?);
    }
    Ok(<T as Launchers>::gelu_backward(stream, grid_stride(n), x, dout, dx)?)
}

/// The gate width of a SiLU-and-mul shape, checked.
pub(crate) fn silu_width(shape: Rows) -> Result<NonZeroU32> {
    shape.check()?;
    let d = NonZeroU32::new(shape.cols as u32).ok_or_else(|| unsupported("cols", 0, "at least one column"))?;
    shape.len().checked_mul(2).ok_or_else(|| unsupported("rows", shape.rows, "rows x 2 cols overflows usize"))?;
    Ok(d)
}

/// SiLU-and-mul (SwiGLU): `input` is `rows x 2d` (the gate in columns `0..d`, the up
/// projection in `d..2d`), `out` (`rows x d`, `shape.cols` = d) `= silu(gate) * up`.
pub fn silu_and_mul<T: Element>(stream: &Stream, input: &(impl DeviceRead<T> + ?Sized), out: &mut (impl DeviceWrite<T> + ?Sized), shape: Rows) -> Result<()> {
    let d = silu_width(shape)?;
    expect_len("input", len_of(input), 2 * shape.len(), || format!("rows {} x 2 cols {}", shape.rows, shape.cols))?;
    shape.matrix("out", len_of(out))?;
    if shape.is_empty() {
        return Ok(());
    }
    Ok(<T as Launchers>::silu_and_mul_forward(stream, grid_stride(shape.len()), input, out, d)?)
}

/// SiLU-and-mul backward: `dinput` (`rows x 2d`) from `dout` (`rows x d`) and the forward's
/// `input`.
pub fn silu_and_mul_backward<T: Element>(
    stream: &Stream,
    input: &(impl DeviceRead<T> + ?Sized),
    dout: &(impl DeviceRead<T> + ?Sized),
    dinput: &mut (impl DeviceWrite<T> + ?Sized),
    shape: Rows,
) -> Result<()> {
    let d = silu_width(shape)?;
    expect_len("input", len_of(input), 2 * shape.len(), || format!("rows {} x 2 cols {}", shape.rows, shape.cols))?;
    shape.matrix("dout", len_of(dout))?;
    expect_len("dinput", len_of(dinput), 2 * shape.len(), || format!("rows {} x 2 cols {}", shape.rows, shape.cols))?;
    if shape.is_empty() {
        return Ok(());
    }
    Ok(<T as Launchers>::silu_and_mul_backward(stream, grid_stride(2 * shape.len()), input, dout, dinput, d)?)
}

/// The shape of a rotary-embedding call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Rope {
    /// Tokens (rows of `x` are `tokens x heads`).
    pub tokens: usize,
    /// Heads per token.
    pub heads: usize,
    /// Elements per head.
    pub head_dim: usize,
    /// Leading elements of each head that rotate (even, `<= head_dim`; the rest are copied).
    pub rotary_dim: usize,
    /// Rows of the `cos`/`sin` tables.
    pub max_positions: usize,
}

impl Rope {
    pub(crate) fn check(&self, x: usize, positions: usize, cos: usize, sin: usize, out: usize) -> Result<(NonZeroU32, NonZeroU32, RopeShape)> {
        let head_dim = u32::try_from(self.head_dim).ok().and_then(NonZeroU32::new).ok_or_else(|| unsupported("head_dim", self.head_dim, "1 to u32::MAX"))?;
        let heads = u32::try_from(self.heads).ok().and_then(NonZeroU32::new).ok_or_else(|| unsupported("heads", self.heads, "1 to u32::MAX"))?;
        if !self.rotary_dim.is_multiple_of(2) || self.rotary_dim > self.head_dim {
            return Err(unsupported("rotary_dim", self.rotary_dim, format!("an even number up to head_dim {}", self.head_dim)));
        }
        let max_positions = u32::try_from(self.max_positions).map_err(|_| unsupported("max_positions", self.max_positions, "at most u32::MAX"))?;
        let n = self
            .tokens
            .checked_mul(self.heads)
            .and_then(|n| n.checked_mul(self.head_dim))
            .ok_or_else(|| unsupported("tokens", self.tokens, "tokens x heads x head_dim overflows"))?;
        let why = || format!("tokens {} x heads {} x head_dim {}", self.tokens, self.heads, self.head_dim);
        expect_len("x", x, n, why)?;
        expect_len("out", out, n, why)?;
        expect_len("positions", positions, self.tokens, || format!("one per token, tokens {}", self.tokens))?;
        let table = self.max_positions * (self.rotary_dim / 2);
        let twhy = || format!("max_positions {} x rotary_dim/2 {}", self.max_positions, self.rotary_dim / 2);
        expect_len("cos", cos, table, twhy)?;
        expect_len("sin", sin, table, twhy)?;
        Ok((head_dim, heads, RopeShape { heads: heads.get(), head_dim: head_dim.get(), rotary_dim: self.rotary_dim as u32, max_positions, inverse: 0 }))
    }
}

/// Rotary position embeddings (rotate-half convention of GPT-NeoX and Llama): `x` and `out`
/// are `tokens x heads x head_dim`; `positions[token]` (u32) picks a row of `cos` and `sin`
/// (`max_positions x rotary_dim/2`, f32, usually `cos(p * theta^(-2k/rotary_dim))`). For `k <
/// rotary_dim/2`, `(x[k], x[k + rotary_dim/2])` becomes `(x1 cos - x2 sin, x2 cos + x1 sin)`.
/// `inverse` rotates the other way: the backward pass (`dx` from `dout`). A position past
/// the tables writes NaN (positions live on the GPU; the kernel never reads out of bounds).
#[allow(clippy::too_many_arguments)]
pub fn rotary_embedding<T: Element>(
    stream: &Stream,
    x: &(impl DeviceRead<T> + ?Sized),
    positions: &(impl DeviceRead<u32> + ?Sized),
    cos: &(impl DeviceRead<f32> + ?Sized),
    sin: &(impl DeviceRead<f32> + ?Sized),
    out: &mut (impl DeviceWrite<T> + ?Sized),
    shape: Rope,
    inverse: bool,
) -> Result<()> {
    let (head_dim, heads, mut rope) = shape.check(len_of(x), len_of(positions), len_of(cos), len_of(sin), len_of(out))?;
    rope.inverse = inverse as u32;
    let n = len_of(x);
    if n == 0 {
        return Ok(());
    }
    Ok(<T as Launchers>::rotary_embedding(stream, grid_stride(n), x, positions, cos, sin, out, head_dim, heads, rope)?)
}

/// AdamW's hyperparameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamW {
    /// Learning rate.
    pub learning_rate: f32,
    /// First-moment decay (0.9).
    pub beta1: f32,
    /// Second-moment decay (0.999 or 0.95).
    pub beta2: f32,
    /// Added to the denominator (1e-8).
    pub eps: f32,
    /// Decoupled weight decay (0 for none).
    pub weight_decay: f32,
}

impl AdamW {
    /// The kernel's parameters for step `step` (1 for the first), gradients multiplied by
    /// `grad_scale` first.
    pub(crate) fn at(&self, step: u32, grad_scale: f32) -> Result<AdamWStep> {
        if step == 0 {
            return Err(unsupported("step", 0, "steps count from 1 (the bias corrections divide by 1 - beta^step)"));
        }
        let t = step.min(i32::MAX as u32) as i32;
        Ok(AdamWStep {
            learning_rate: self.learning_rate,
            beta1: self.beta1,
            beta2: self.beta2,
            beta1_correction: 1.0 - self.beta1.powi(t),
            beta2_correction: 1.0 - self.beta2.powi(t),
            eps: self.eps,
            weight_decay: self.weight_decay,
            grad_scale,
        })
    }
}

/// One AdamW step in place: `params` (`T`), moments `m`, `v` (f32, zero before the first
/// step), from `grads` times `grad_scale` (1.0 for none). `step` counts from 1. All four the
/// same length.
#[allow(clippy::too_many_arguments)]
pub fn adamw<T: Element>(
    stream: &Stream,
    params: &mut (impl DeviceWrite<T> + ?Sized),
    grads: &(impl DeviceRead<T> + ?Sized),
    m: &mut (impl DeviceWrite<f32> + ?Sized),
    v: &mut (impl DeviceWrite<f32> + ?Sized),
    hyper: AdamW,
    step: u32,
    grad_scale: f32,
) -> Result<()> {
    let n = len_of(params);
    let why = || "as long as params".to_string();
    expect_len("grads", len_of(grads), n, why)?;
    expect_len("m", len_of(m), n, why)?;
    expect_len("v", len_of(v), n, why)?;
    let hp = hyper.at(step, grad_scale)?;
    if n == 0 {
        return Ok(());
    }
    Ok(<T as Launchers>::adamw_step(stream, grid_stride(n), params, grads, m, v, hp)?)
}

/// Adds `sum(x^2)` (f32) into `total[0]`: call it for each gradient tensor on one `total`,
/// zeroed first, to get the squared global norm for [`clip_by_global_norm`].
pub fn sum_of_squares<T: Element>(stream: &Stream, x: &(impl DeviceRead<T> + ?Sized), total: &mut (impl DeviceWrite<f32> + ?Sized)) -> Result<()> {
    expect_at_least("total", len_of(total), 1, || "one f32 accumulator".into())?;
    let n = len_of(x);
    if n == 0 {
        return Ok(());
    }
    let config = ferrocuda_host::LaunchConfig::new(n.div_ceil(crate::BLOCK as usize).clamp(1, 1024) as u32, crate::BLOCK);
    Ok(<T as Launchers>::sum_of_squares(stream, config, x, total)?)
}

/// Clips in place by global norm: with `norm = sqrt(norm_squared[0])` (from
/// [`sum_of_squares`] over every gradient), multiplies `grads` by `max_norm / (norm + 1e-6)`
/// when `norm > max_norm`. Call once per gradient tensor.
pub fn clip_by_global_norm<T: Element>(
    stream: &Stream,
    grads: &mut (impl DeviceWrite<T> + ?Sized),
    norm_squared: &(impl DeviceRead<f32> + ?Sized),
    max_norm: f32,
) -> Result<()> {
    expect_at_least("norm_squared", len_of(norm_squared), 1, || "the squared norm in element 0".into())?;
    if max_norm.is_nan() || max_norm <= 0.0 {
        return Err(unsupported("max_norm", max_norm, "a positive norm"));
    }
    let n = len_of(grads);
    if n == 0 {
        return Ok(());
    }
    Ok(<T as Launchers>::clip_by_global_norm(stream, grid_stride(n), grads, norm_squared, max_norm)?)
}
