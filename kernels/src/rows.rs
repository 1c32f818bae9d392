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

use ferrocuda_device::cpu::CpuExecutor;
use ferrocuda_host::{DeviceRead, DeviceWrite, Stream};
use ferrocuda_kernels_device::{AdamWStep, RopeShape};

use crate::error::{expect_at_least, expect_len, unsupported};
use crate::launchers::{Cpu, Gpu};
use crate::{Element, Result, chunk_grid, grid_stride, packed_elements, packed_rows, warp_per_row};

/// A parameter of a call on the GPU: `[in T]` an input of the element type, `[out f32]` an
/// output of `f32`, `[opt T]` an optional input, anything else by value.
macro_rules! gpu_operand {
    ([in T]) => { &(impl DeviceRead<T> + ?Sized) };
    ([in $t:ty]) => { &(impl DeviceRead<$t> + ?Sized) };
    ([out T]) => { &mut (impl DeviceWrite<T> + ?Sized) };
    ([out $t:ty]) => { &mut (impl DeviceWrite<$t> + ?Sized) };
    ([opt T]) => { Option<&dyn DeviceRead<T>> };
    ($t:ty) => { $t };
}

/// The same parameter on the CPU executor (host slices).
macro_rules! cpu_operand {
    ([in T]) => { &[T] };
    ([in $t:ty]) => { &[$t] };
    ([out T]) => { &mut [T] };
    ([out $t:ty]) => { &mut [$t] };
    ([opt T]) => { Option<&[T]> };
    ($t:ty) => { $t };
}

/// One description of a call, two executors: writes `pub fn $name` (on a GPU stream, device
/// buffers) and `pub fn $cpu` (on the CPU executor, host slices; hidden here, public as
/// [`cpu::$name`](crate::cpu)) from one body. In the body `$run` is the runner
/// ([`Gpu`] or [`Cpu`]): `$run.len(x)` measures an operand, `$run.kernel::<T>(config, ...)`
/// launches a kernel of `ferrocuda-kernels-device` for the element type, `$run.scratch(n)`
/// allocates `f32` scratch. So every shape check and every choice of kernel is written once.
macro_rules! row_op {
    (
        $(#[$attr:meta])*
        $vis:vis fn $name:ident, $cpu:ident <T>($run:ident; $($arg:ident : $kind:tt),* $(,)?) $body:block
    ) => {
        $(#[$attr])*
        #[allow(clippy::too_many_arguments)]
        $vis fn $name<T: Element>(stream: &Stream, $($arg: gpu_operand!($kind)),*) -> Result<()> {
            let $run = Gpu(stream);
            $body
        }

        #[doc = concat!("[`rows::", stringify!($name), "`](crate::rows::", stringify!($name), ") on the CPU executor, on host slices: ")]
        #[doc = "the same shape checks, the same choice of kernels, the same errors."]
        #[doc(hidden)]
        #[allow(clippy::too_many_arguments)]
        $vis fn $cpu<T: Element>(executor: &CpuExecutor, $($arg: cpu_operand!($kind)),*) -> Result<()> {
            let $run = Cpu(executor);
            $body
        }
    };
}

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
        // The warp-per-row kernels' columns are `u32` and a lane's last chunk reaches 255
        // columns past the row (ferrocuda_kernels_device::MAX_COLS).
        let cols = u32::try_from(self.cols)
            .ok()
            .filter(|&c| c <= ferrocuda_kernels_device::MAX_COLS)
            .ok_or_else(|| unsupported("cols", self.cols, format!("at most {} columns (2^32 - 256)", ferrocuda_kernels_device::MAX_COLS)))?;
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

/// The launch of `layernorm_forward_packed16` (one block per row, 16 columns a thread, so
/// `cols / 16` threads): widths that are multiples of 16 from 2048 (128 threads) to 4096 (256,
/// its launch bounds), where it keeps four rows of 4096 on an SM where the 8-column kernel keeps
/// three; `None` otherwise.
pub(crate) fn packed_rows16(rows: usize, cols: usize) -> Option<ferrocuda_host::LaunchConfig> {
    let threads = cols / 16;
    (cols.is_multiple_of(16) && (128..=256).contains(&threads) && rows > 0 && rows < (1 << 31))
        .then(|| ferrocuda_host::LaunchConfig::new(rows as u32, threads as u32))
}

/// The launch of `rmsnorm_forward_packed16` (one block per row, 16 columns a thread, so
/// `cols / 16` threads): widths that are multiples of 16 from 2048 (128 threads) to 8192 (512,
/// its launch bounds); `None` otherwise (the 8-column kernel or the warp-per-row one). Public
/// for benchmarks and tests, as [`fused_backward_blocks`].
pub fn rmsnorm_rows16(rows: usize, cols: usize) -> Option<ferrocuda_host::LaunchConfig> {
    let threads = cols / 16;
    (cols.is_multiple_of(16) && (128..=512).contains(&threads) && rows > 0 && rows < (1 << 31))
        .then(|| ferrocuda_host::LaunchConfig::new(rows as u32, threads as u32))
}

/// The first step of a norm's weight gradients outside the fused kernel, in a call's body
/// (`$run` its runner): per chunk of [`ROWS_PER_CHUNK`] rows and column, `sum dout * xhat`
/// into `$partial_dw` and `sum dout` into `$partial_db` (each `weight_chunks(rows) x cols`),
/// 16-byte loads when `cols % 8 == 0`.
macro_rules! weight_partials {
    ($run:ident, $dout:expr, $x:expr, $mean:expr, $rstd:expr, $partial_dw:expr, $partial_db:expr, $shape:expr, $centred:expr) => {{
        let (rows, cols) = $shape.check()?;
        let chunks = weight_chunks($shape.rows);
        if $shape.cols.is_multiple_of(8) {
            let config = grid_stride(chunks * $shape.cols / 8);
            $run.norm_backward_weights_partial_packed::<T>(
                config,
                $dout,
                $x,
                $mean,
                $rstd,
                $partial_dw,
                $partial_db,
                rows,
                cols,
                ROWS_PER_CHUNK as u32,
                $centred,
            )
        } else {
            let nonzero_cols = NonZeroU32::new(cols).ok_or_else(|| unsupported("cols", 0, "rows need at least one column"))?;
            let config = grid_stride(chunks * $shape.cols);
            $run.norm_backward_weights_partial::<T>(
                config,
                $dout,
                $x,
                $mean,
                $rstd,
                $partial_dw,
                $partial_db,
                rows,
                nonzero_cols,
                ROWS_PER_CHUNK as u32,
                $centred,
            )
        }
    }};
}

/// The second step of a norm's weight gradients, in a call's body (`$run` its runner): `$out_a`
/// (and `$out_b`) `[c] = sum over k < $chunks of $partial_a[k * cols + c]`, in an order fixed by
/// the shape. Widths that are a multiple of 4 take eight threads a column
/// ([`sum_column_split`]); others one thread a column.
macro_rules! sum_columns {
    ($run:ident, $partial_a:expr, $partial_b:expr, $out_a:expr, $out_b:expr, $chunks:expr, $shape:expr) => {{
        let (_, cols) = $shape.check()?;
        match sum_column_split($shape.cols) {
            Some(config) => $run.sum_column_pairs_split(config, $partial_a, $partial_b, $out_a, $out_b, $chunks, cols),
            None => $run.sum_column_pairs(grid_stride($shape.cols), $partial_a, $partial_b, $out_a, $out_b, $chunks, cols),
        }
    }};
}

/// [`sum_columns!`] for one partial matrix (RMSNorm's weight gradient): eight threads a column
/// (`sum_column_partials_split`) when `cols` is a multiple of 4, else one thread a column
/// (`sum_column_partials`, 16 blocks for 4096 columns: 0.011 ms slower on an H200).
macro_rules! sum_column {
    ($run:ident, $partial:expr, $out:expr, $chunks:expr, $shape:expr) => {{
        let (_, cols) = $shape.check()?;
        match sum_column_split($shape.cols) {
            Some(config) => $run.sum_column_partials_split(config, $partial, $out, $chunks, cols),
            None => $run.sum_column_partials(grid_stride($shape.cols), $partial, $out, $chunks, cols),
        }
    }};
}

/// The launch of `sum_column_pairs_split` and `sum_column_partials_split` (a warp per 4
/// columns) for `cols`, or `None` when `cols` is not a multiple of 4 (the one-thread-a-column
/// kernels then).
pub(crate) fn sum_column_split(cols: usize) -> Option<ferrocuda_host::LaunchConfig> {
    let threads = cols.checked_mul(8).filter(|t| cols.is_multiple_of(4) && *t <= u32::MAX as usize)?;
    Some(ferrocuda_host::LaunchConfig::new(threads.div_ceil(crate::BLOCK as usize) as u32, crate::BLOCK))
}

row_op! {
    /// RMSNorm: `out = x / sqrt(mean(x^2) + eps) * weight` per row, and `rstd[row]` (f32, for
    /// [`rmsnorm_backward`]). `x`, `out`: `rows x cols`; `weight`: `cols`; `rstd`: `rows`.
    ///
    /// ```no_run
    /// # use ferrocuda_host::{Context, DeviceBuffer, Stream};
    /// # use ferrocuda_kernels::{bf16, rows::{self, Rows}};
    /// # fn main() -> Result<(), ferrocuda_kernels::KernelsError> {
    /// # let context = Context::primary(0)?;
    /// # let stream = Stream::new(&context)?;
    /// let shape = Rows { rows: 8, cols: 768 };
    /// let x = DeviceBuffer::from_slice(&context, &vec![bf16::from_f32(0.5); shape.len()])?;
    /// let weight = DeviceBuffer::from_slice(&context, &vec![bf16::ONE; shape.cols])?;
    /// let mut out = DeviceBuffer::<bf16>::zeroed(&context, shape.len())?;
    /// let mut rstd = DeviceBuffer::<f32>::zeroed(&context, shape.rows)?;
    /// rows::rmsnorm(&stream, &x, &weight, &mut out, &mut rstd, shape, 1e-6)?;
    /// assert!(out.to_vec()?.iter().all(|y| *y == bf16::ONE)); // 0.5 / sqrt(0.25 + 1e-6)
    /// # Ok(())
    /// # }
    /// ```
    pub fn rmsnorm, rmsnorm_cpu<T>(run; x: [in T], weight: [in T], out: [out T], rstd: [out f32], shape: Rows, eps: f32) {
        let (rows, cols) = shape.check()?;
        shape.matrix("x", run.len(x))?;
        shape.row("weight", run.len(weight))?;
        shape.matrix("out", run.len(out))?;
        shape.per_row("rstd", run.len(rstd))?;
        if rows == 0 {
            return Ok(());
        }
        if let Some(config) = rmsnorm_rows16(shape.rows, shape.cols) {
            return run.rmsnorm_forward_packed16::<T>(config, x, weight, out, rstd, cols, eps);
        }
        match packed_rows(shape.rows, shape.cols) {
            // 768 and 1024 columns (96 and 128 threads): kernels compiled for that block
            // (`reqntid`), whose reduction has no run-time tests of the block's shape.
            Some(config) if config.block.x == 96 => run.rmsnorm_forward_packed_t96::<T>(config, x, weight, out, rstd, cols, eps),
            Some(config) if config.block.x == 128 => run.rmsnorm_forward_packed_t128::<T>(config, x, weight, out, rstd, cols, eps),
            Some(config) => run.rmsnorm_forward_packed::<T>(config, x, weight, out, rstd, cols, eps),
            None => run.rmsnorm_forward::<T>(warp_per_row(shape.rows), x, weight, out, rstd, rows, cols, eps),
        }
    }
}

row_op! {
    /// Residual add fused with RMSNorm: `sum = x + residual` (rounded to `T`; the residual stream
    /// the next layer adds to), then `out = rmsnorm(sum)`. Shapes as [`rmsnorm`]; `residual` and
    /// `sum` are `rows x cols`.
    ///
    /// ```no_run
    /// # use ferrocuda_host::{Context, DeviceBuffer, Stream};
    /// # use ferrocuda_kernels::{bf16, rows::{self, Rows}};
    /// # fn main() -> Result<(), ferrocuda_kernels::KernelsError> {
    /// # let context = Context::primary(0)?;
    /// # let stream = Stream::new(&context)?;
    /// let shape = Rows { rows: 8, cols: 768 };
    /// let x = DeviceBuffer::<bf16>::zeroed(&context, shape.len())?; // this layer's output
    /// let residual = DeviceBuffer::from_slice(&context, &vec![bf16::ONE; shape.len()])?;
    /// let weight = DeviceBuffer::from_slice(&context, &vec![bf16::ONE; shape.cols])?;
    /// let (mut out, mut sum) = (DeviceBuffer::<bf16>::zeroed(&context, shape.len())?, DeviceBuffer::<bf16>::zeroed(&context, shape.len())?);
    /// let mut rstd = DeviceBuffer::<f32>::zeroed(&context, shape.rows)?;
    /// rows::add_rmsnorm(&stream, &x, &residual, &weight, &mut out, &mut sum, &mut rstd, shape, 1e-6)?;
    /// // `sum` is the residual stream the next layer adds to; keep it (and rstd) for the backward.
    /// # Ok(())
    /// # }
    /// ```
    pub fn add_rmsnorm, add_rmsnorm_cpu<T>(
        run; x: [in T], residual: [in T], weight: [in T], out: [out T], sum: [out T], rstd: [out f32], shape: Rows, eps: f32
    ) {
        let (rows, cols) = shape.check()?;
        shape.matrix("x", run.len(x))?;
        shape.matrix("residual", run.len(residual))?;
        shape.row("weight", run.len(weight))?;
        shape.matrix("out", run.len(out))?;
        shape.matrix("sum", run.len(sum))?;
        shape.per_row("rstd", run.len(rstd))?;
        if rows == 0 {
            return Ok(());
        }
        match packed_rows(shape.rows, shape.cols) {
            // 4096 columns, 512 threads: the kernel compiled for that block (`reqntid(512)`).
            Some(config) if config.block.x == 512 => run.add_rmsnorm_forward_packed_t512::<T>(config, x, residual, weight, out, sum, rstd, cols, eps),
            Some(config) => run.add_rmsnorm_forward_packed::<T>(config, x, residual, weight, out, sum, rstd, cols, eps),
            None => run.add_rmsnorm_forward::<T>(warp_per_row(shape.rows), x, residual, weight, out, sum, rstd, rows, cols, eps),
        }
    }
}

row_op! {
    /// Layer norm: `out = (x - mean) * rstd * weight + bias` per row, and `mean[row]`,
    /// `rstd[row]` (f32, for [`layernorm_backward`]).
    ///
    /// ```no_run
    /// # use ferrocuda_host::{Context, DeviceBuffer, Stream};
    /// # use ferrocuda_kernels::{bf16, rows::{self, Rows}};
    /// # fn main() -> Result<(), ferrocuda_kernels::KernelsError> {
    /// # let context = Context::primary(0)?;
    /// # let stream = Stream::new(&context)?;
    /// let shape = Rows { rows: 8, cols: 768 };
    /// let x = DeviceBuffer::from_slice(&context, &vec![bf16::from_f32(2.0); shape.len()])?;
    /// let weight = DeviceBuffer::from_slice(&context, &vec![bf16::ONE; shape.cols])?;
    /// let bias = DeviceBuffer::<bf16>::zeroed(&context, shape.cols)?;
    /// let mut out = DeviceBuffer::<bf16>::zeroed(&context, shape.len())?;
    /// let (mut mean, mut rstd) = (DeviceBuffer::<f32>::zeroed(&context, shape.rows)?, DeviceBuffer::<f32>::zeroed(&context, shape.rows)?);
    /// rows::layernorm(&stream, &x, &weight, &bias, &mut out, &mut mean, &mut rstd, shape, 1e-5)?;
    /// assert_eq!(mean.to_vec()?, vec![2.0; 8]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn layernorm, layernorm_cpu<T>(
        run; x: [in T], weight: [in T], bias: [in T], out: [out T], mean: [out f32], rstd: [out f32], shape: Rows, eps: f32
    ) {
        let (rows, cols) = shape.check()?;
        shape.matrix("x", run.len(x))?;
        shape.row("weight", run.len(weight))?;
        shape.row("bias", run.len(bias))?;
        shape.matrix("out", run.len(out))?;
        shape.per_row("mean", run.len(mean))?;
        shape.per_row("rstd", run.len(rstd))?;
        if rows == 0 {
            return Ok(());
        }
        if let Some(config) = packed_rows16(shape.rows, shape.cols) {
            // 4096 columns, 256 threads: the kernel compiled for that block (`reqntid(256)`).
            if config.block.x == 256 {
                return run.layernorm_forward_packed16_t256::<T>(config, x, weight, bias, out, mean, rstd, cols, eps);
            }
            return run.layernorm_forward_packed16::<T>(config, x, weight, bias, out, mean, rstd, cols, eps);
        }
        match packed_rows(shape.rows, shape.cols) {
            Some(config) => run.layernorm_forward_packed::<T>(config, x, weight, bias, out, mean, rstd, cols, eps),
            None => run.layernorm_forward::<T>(warp_per_row(shape.rows), x, weight, bias, out, mean, rstd, rows, cols, eps),
        }
    }
}

row_op! {
    /// Residual add fused with layer norm: `sum = x + residual` (rounded to `T`), then `out =
    /// layernorm(sum)`.
    pub fn add_layernorm, add_layernorm_cpu<T>(
        run; x: [in T], residual: [in T], weight: [in T], bias: [in T], out: [out T], sum: [out T], mean: [out f32], rstd: [out f32], shape: Rows,
        eps: f32
    ) {
        let (rows, cols) = shape.check()?;
        shape.matrix("x", run.len(x))?;
        shape.matrix("residual", run.len(residual))?;
        shape.row("weight", run.len(weight))?;
        shape.row("bias", run.len(bias))?;
        shape.matrix("out", run.len(out))?;
        shape.matrix("sum", run.len(sum))?;
        shape.per_row("mean", run.len(mean))?;
        shape.per_row("rstd", run.len(rstd))?;
        if rows == 0 {
            return Ok(());
        }
        match packed_rows(shape.rows, shape.cols) {
            Some(config) => run.add_layernorm_forward_packed::<T>(config, x, residual, weight, bias, out, sum, mean, rstd, cols, eps),
            None => run.add_layernorm_forward::<T>(warp_per_row(shape.rows), x, residual, weight, bias, out, sum, mean, rstd, rows, cols, eps),
        }
    }
}

row_op! {
    /// Layer norm backward: `dx` (`rows x cols`, plus `dresidual` when given: the gradient that
    /// reached the residual stream directly, for [`add_layernorm`]), and the weight and bias
    /// gradients `dweight`, `dbias` (`cols`, f32, written; summed over rows in a fixed order, so
    /// deterministic). `x` is the norm's input (`sum` for the fused form), `mean`/`rstd` the
    /// forward's. Widths the packed kernels take: one pass that writes `dx` and per-block partial
    /// sums of the weight gradients, then one launch that adds them up; other widths: three
    /// launches.
    ///
    /// This form takes its `f32` scratch from the caller (`partial_dw`, `partial_db`, each
    /// [`norm_backward_scratch_len`] long, contents ignored) and allocates nothing, so it may be
    /// recorded into a CUDA graph on memory the caller owns; [`layernorm_backward`] allocates it.
    pub fn layernorm_backward_with_scratch, layernorm_backward_with_scratch_cpu<T>(
        run; dout: [in T], x: [in T], weight: [in T], mean: [in f32], rstd: [in f32], dresidual: [opt T], dx: [out T], dweight: [out f32],
        dbias: [out f32], partial_dw: [out f32], partial_db: [out f32], shape: Rows
    ) {
        let (rows, cols) = shape.check()?;
        shape.matrix("dout", run.len(dout))?;
        shape.matrix("x", run.len(x))?;
        shape.row("weight", run.len(weight))?;
        shape.per_row("mean", run.len(mean))?;
        shape.per_row("rstd", run.len(rstd))?;
        if let Some(d) = dresidual {
            shape.matrix("dresidual", run.len(d))?;
        }
        shape.matrix("dx", run.len(dx))?;
        shape.row("dweight", run.len(dweight))?;
        shape.row("dbias", run.len(dbias))?;
        expect_scratch(shape, run.len(partial_dw), run.len(partial_db))?;
        if let Some(config) = fused_backward(shape) {
            let blocks = config.grid.x;
            match dresidual {
                Some(d) => run.layernorm_backward_fused_packed::<T>(config, dout, x, weight, mean, rstd, d, dx, &mut *partial_dw, &mut *partial_db, cols, 1)?,
                None => run.layernorm_backward_fused_packed::<T>(config, dout, x, weight, mean, rstd, dout, dx, &mut *partial_dw, &mut *partial_db, cols, 0)?,
            }
            return sum_columns!(run, &*partial_dw, &*partial_db, dweight, dbias, blocks, shape);
        }
        let packed = packed_rows(shape.rows, shape.cols);
        match (packed, dresidual) {
            (Some(config), Some(d)) => run.norm_backward_packed::<T>(config, dout, x, weight, mean, rstd, d, dx, cols, 1, 1)?,
            (Some(config), None) => run.norm_backward_packed::<T>(config, dout, x, weight, mean, rstd, dout, dx, cols, 0, 1)?,
            (None, _) if rows == 0 => {}
            (None, Some(d)) => run.layernorm_backward::<T>(warp_per_row(shape.rows), dout, x, weight, mean, rstd, d, dx, rows, cols, 1)?,
            (None, None) => run.layernorm_backward::<T>(warp_per_row(shape.rows), dout, x, weight, mean, rstd, dout, dx, rows, cols, 0)?,
        }
        let chunks = weight_chunks(shape.rows);
        weight_partials!(run, dout, x, mean, rstd, &mut *partial_dw, &mut *partial_db, shape, 1)?;
        sum_columns!(run, &*partial_dw, &*partial_db, dweight, dbias, chunks as u32, shape)
    }
}

row_op! {
    /// RMSNorm backward: `dx` (plus `dresidual` when given) and `dweight` (`cols`, f32,
    /// written, deterministic). `x` is the norm's input, `rstd` the forward's. Launches as
    /// [`layernorm_backward`].
    ///
    /// This form takes its `f32` scratch from the caller, as
    /// [`layernorm_backward_with_scratch`] does; [`rmsnorm_backward`] allocates it.
    pub fn rmsnorm_backward_with_scratch, rmsnorm_backward_with_scratch_cpu<T>(
        run; dout: [in T], x: [in T], weight: [in T], rstd: [in f32], dresidual: [opt T], dx: [out T], dweight: [out f32],
        partial_dw: [out f32], partial_db: [out f32], shape: Rows
    ) {
        let (rows, cols) = shape.check()?;
        shape.matrix("dout", run.len(dout))?;
        shape.matrix("x", run.len(x))?;
        shape.row("weight", run.len(weight))?;
        shape.per_row("rstd", run.len(rstd))?;
        if let Some(d) = dresidual {
            shape.matrix("dresidual", run.len(d))?;
        }
        shape.matrix("dx", run.len(dx))?;
        shape.row("dweight", run.len(dweight))?;
        expect_scratch(shape, run.len(partial_dw), run.len(partial_db))?;
        // The fused pass writes no bias partials (`partial_db` is unused there).
        if let Some(config) = fused_backward(shape) {
            let blocks = config.grid.x;
            match dresidual {
                Some(d) => run.rmsnorm_backward_fused_packed::<T>(config, dout, x, weight, rstd, d, dx, &mut *partial_dw, cols, 1)?,
                None => run.rmsnorm_backward_fused_packed::<T>(config, dout, x, weight, rstd, dout, dx, &mut *partial_dw, cols, 0)?,
            }
            return sum_column!(run, &*partial_dw, dweight, blocks, shape);
        }
        // `rstd` stands in for the mean the kernels do not read (not centred).
        let packed = packed_rows(shape.rows, shape.cols);
        match (packed, dresidual) {
            (Some(config), Some(d)) => run.norm_backward_packed::<T>(config, dout, x, weight, rstd, rstd, d, dx, cols, 1, 0)?,
            (Some(config), None) => run.norm_backward_packed::<T>(config, dout, x, weight, rstd, rstd, dout, dx, cols, 0, 0)?,
            (None, _) if rows == 0 => {}
            (None, Some(d)) => run.rmsnorm_backward::<T>(warp_per_row(shape.rows), dout, x, weight, rstd, d, dx, rows, cols, 1)?,
            (None, None) => run.rmsnorm_backward::<T>(warp_per_row(shape.rows), dout, x, weight, rstd, dout, dx, rows, cols, 0)?,
        }
        let chunks = weight_chunks(shape.rows);
        weight_partials!(run, dout, x, rstd, rstd, &mut *partial_dw, &mut *partial_db, shape, 0)?;
        sum_column!(run, &*partial_dw, dweight, chunks as u32, shape)
    }
}

/// The length of each of the two `f32` scratch areas of [`layernorm_backward_with_scratch`]
/// and [`rmsnorm_backward_with_scratch`] for `shape`: one partial sum per column for each
/// block of the fused pass, or for each chunk of 64 rows on the other paths.
pub fn norm_backward_scratch_len(shape: Rows) -> usize {
    match fused_backward(shape) {
        Some(config) => config.grid.x as usize * shape.cols,
        None => weight_chunks(shape.rows) * shape.cols,
    }
}

/// The norm backward's operand lengths (`dout, x, weight, rstd, dx, dweight`; `mean` and `dbias`
/// for the layer norm, `dresidual` when given), each refused by name in the order the
/// `_with_scratch` forms check them; the allocating forms call it before they allocate their
/// scratch (audit 2026-11-27f F12-4).
fn check_norm_backward_operands(shape: Rows, lens: [usize; 6], mean: Option<usize>, dresidual: Option<usize>, dbias: Option<usize>) -> Result<()> {
    let [dout, x, weight, rstd, dx, dweight] = lens;
    shape.matrix("dout", dout)?;
    shape.matrix("x", x)?;
    shape.row("weight", weight)?;
    if let Some(mean) = mean {
        shape.per_row("mean", mean)?;
    }
    shape.per_row("rstd", rstd)?;
    if let Some(d) = dresidual {
        shape.matrix("dresidual", d)?;
    }
    shape.matrix("dx", dx)?;
    shape.row("dweight", dweight)?;
    match dbias {
        Some(dbias) => shape.row("dbias", dbias),
        None => Ok(()),
    }
}

/// Refuses scratch areas of another length than [`norm_backward_scratch_len`].
fn expect_scratch(shape: Rows, dw: usize, db: usize) -> Result<()> {
    let want = norm_backward_scratch_len(shape);
    let why = || format!("norm_backward_scratch_len(rows {} x cols {})", shape.rows, shape.cols);
    expect_len("partial_dw", dw, want, why)?;
    expect_len("partial_db", db, want, why)
}

/// Layer norm backward: [`layernorm_backward_with_scratch`] with its scratch allocated on the
/// stream (stream-ordered, so it is refused inside a capture: pass scratch there).
#[allow(clippy::too_many_arguments)]
///
/// ```no_run
/// # use ferrocuda_host::{Context, DeviceBuffer, Stream};
/// # use ferrocuda_kernels::{bf16, rows::{self, Rows}};
/// # fn main() -> Result<(), ferrocuda_kernels::KernelsError> {
/// # let context = Context::primary(0)?;
/// # let stream = Stream::new(&context)?;
/// let shape = Rows { rows: 8, cols: 768 };
/// let x = DeviceBuffer::<bf16>::zeroed(&context, shape.len())?;
/// let (weight, bias) = (DeviceBuffer::from_slice(&context, &vec![bf16::ONE; 768])?, DeviceBuffer::<bf16>::zeroed(&context, 768)?);
/// let mut out = DeviceBuffer::<bf16>::zeroed(&context, shape.len())?;
/// let (mut mean, mut rstd) = (DeviceBuffer::<f32>::zeroed(&context, 8)?, DeviceBuffer::<f32>::zeroed(&context, 8)?);
/// rows::layernorm(&stream, &x, &weight, &bias, &mut out, &mut mean, &mut rstd, shape, 1e-5)?;
/// // ... the loss's gradient reaches `out` as `dout`:
/// let dout = DeviceBuffer::<bf16>::zeroed(&context, shape.len())?;
/// let mut dx = DeviceBuffer::<bf16>::zeroed(&context, shape.len())?;
/// let (mut dweight, mut dbias) = (DeviceBuffer::<f32>::zeroed(&context, 768)?, DeviceBuffer::<f32>::zeroed(&context, 768)?);
/// rows::layernorm_backward(&stream, &dout, &x, &weight, &mean, &rstd, None, &mut dx, &mut dweight, &mut dbias, shape)?;
/// # Ok(())
/// # }
/// ```
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
    // Every operand first, so that a refused call allocates nothing (F12-4).
    let lens = [crate::len_of(dout), crate::len_of(x), crate::len_of(weight), crate::len_of(rstd), crate::len_of(dx), crate::len_of(dweight)];
    check_norm_backward_operands(shape, lens, Some(crate::len_of(mean)), dresidual.map(|d| crate::len_of(d)), Some(crate::len_of(dbias)))?;
    let gpu = Gpu(stream);
    // One allocation (and one memset) for both scratch areas.
    let len = norm_backward_scratch_len(shape);
    let mut scratch = gpu.scratch(2 * len)?;
    // The scratch is freed on return: no capture may record the launches that use it (S1).
    let _stretch = stream.hold_off_capture("layernorm_backward")?;
    let (mut dw, mut db) = scratch.split_at_mut(len);
    layernorm_backward_with_scratch(stream, dout, x, weight, mean, rstd, dresidual, dx, dweight, dbias, &mut dw, &mut db, shape)
}

/// [`layernorm_backward`] on the CPU executor (re-exported as `cpu::layernorm_backward`).
#[doc(hidden)]
#[allow(clippy::too_many_arguments)]
pub fn layernorm_backward_cpu<T: Element>(
    executor: &CpuExecutor,
    dout: &[T],
    x: &[T],
    weight: &[T],
    mean: &[f32],
    rstd: &[f32],
    dresidual: Option<&[T]>,
    dx: &mut [T],
    dweight: &mut [f32],
    dbias: &mut [f32],
    shape: Rows,
) -> Result<()> {
    shape.check()?;
    let (mut dw, mut db) = (vec![0.0; norm_backward_scratch_len(shape)], vec![0.0; norm_backward_scratch_len(shape)]);
    layernorm_backward_with_scratch_cpu(executor, dout, x, weight, mean, rstd, dresidual, dx, dweight, dbias, &mut dw, &mut db, shape)
}

/// RMSNorm backward: [`rmsnorm_backward_with_scratch`] with its scratch allocated on the stream
/// (refused inside a capture: pass scratch there).
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
    // Every operand first, so that a refused call allocates nothing (F12-4).
    let lens = [crate::len_of(dout), crate::len_of(x), crate::len_of(weight), crate::len_of(rstd), crate::len_of(dx), crate::len_of(dweight)];
    check_norm_backward_operands(shape, lens, None, dresidual.map(|d| crate::len_of(d)), None)?;
    let gpu = Gpu(stream);
    let len = norm_backward_scratch_len(shape);
    let mut scratch = gpu.scratch(2 * len)?;
    // As in `layernorm_backward` (S1).
    let _stretch = stream.hold_off_capture("rmsnorm_backward")?;
    let (mut dw, mut db) = scratch.split_at_mut(len);
    rmsnorm_backward_with_scratch(stream, dout, x, weight, rstd, dresidual, dx, dweight, &mut dw, &mut db, shape)
}

/// [`rmsnorm_backward`] on the CPU executor (re-exported as `cpu::rmsnorm_backward`).
#[doc(hidden)]
#[allow(clippy::too_many_arguments)]
pub fn rmsnorm_backward_cpu<T: Element>(
    executor: &CpuExecutor,
    dout: &[T],
    x: &[T],
    weight: &[T],
    rstd: &[f32],
    dresidual: Option<&[T]>,
    dx: &mut [T],
    dweight: &mut [f32],
    shape: Rows,
) -> Result<()> {
    shape.check()?;
    let (mut dw, mut db) = (vec![0.0; norm_backward_scratch_len(shape)], vec![0.0; norm_backward_scratch_len(shape)]);
    rmsnorm_backward_with_scratch_cpu(executor, dout, x, weight, rstd, dresidual, dx, dweight, &mut dw, &mut db, shape)
}

/// Rows each thread of the weight gradients' first step sums (in order), for widths the
/// packed kernels do not take.
pub(crate) const ROWS_PER_CHUNK: usize = 64;

/// The chunks of rows of the weight gradients' first step.
pub(crate) fn weight_chunks(rows: usize) -> usize {
    rows.div_ceil(ROWS_PER_CHUNK).max(1)
}

/// Threads the fused norm backward aims for in all (a full H100 holds 270k; its 64 registers a
/// thread allow half of that resident, and more blocks only add partial sums to add up).
const FUSED_THREADS: usize = 1 << 17;

/// The blocks (`G`, so the partial rows of the weight gradients) of the fused norm backward
/// for `shape`, or `None` when the shape takes another path (the two-kernel one). For tests and
/// benchmarks; the value depends on the shape only.
pub fn fused_backward_blocks(shape: Rows) -> Option<u32> {
    fused_backward(shape).map(|config| config.grid.x)
}

/// Widest row of the fused norm backward: `cols / 8` threads a block, at most 512 (its launch
/// bounds; about 120 registers a thread).
const FUSED_MAX_COLS: usize = 4096;

/// The launch of the fused norm backward (`norm_backward_fused_packed`) for widths the packed
/// kernels take up to [`FUSED_MAX_COLS`]: `cols / 8` threads a block and `G = min(2^17 / (cols
/// / 8), ceil(rows / 8))` blocks, so each block walks at least 8 rows and the partial sums (`G
/// x cols` f32) stay a small part of the traffic. `G` depends on the shape only, so the weight
/// gradients are the same bits on every GPU and on the CPU executor.
pub(crate) fn fused_backward(shape: Rows) -> Option<ferrocuda_host::LaunchConfig> {
    let config = packed_rows(shape.rows, shape.cols).filter(|_| shape.cols <= FUSED_MAX_COLS)?;
    let threads = shape.cols / 8;
    let blocks = (FUSED_THREADS / threads).min(shape.rows.div_ceil(8)).max(1);
    Some(ferrocuda_host::LaunchConfig::new(blocks as u32, config.block.x))
}

row_op! {
    /// Softmax of each row: `out = exp(x - max) / sum(exp(x - max))`.
    ///
    /// ```no_run
    /// # use ferrocuda_host::{Context, DeviceBuffer, Stream};
    /// # use ferrocuda_kernels::{bf16, rows::{self, Rows}};
    /// # fn main() -> Result<(), ferrocuda_kernels::KernelsError> {
    /// # let context = Context::primary(0)?;
    /// # let stream = Stream::new(&context)?;
    /// let shape = Rows { rows: 4, cols: 1000 };
    /// let x = DeviceBuffer::from_slice(&context, &vec![bf16::ZERO; shape.len()])?;
    /// let mut out = DeviceBuffer::<bf16>::zeroed(&context, shape.len())?;
    /// rows::softmax(&stream, &x, &mut out, shape)?;
    /// assert!(out.to_vec()?.iter().all(|p| (p.to_f32() - 1e-3).abs() < 1e-5));
    /// # Ok(())
    /// # }
    /// ```
    pub fn softmax, softmax_cpu<T>(run; x: [in T], out: [out T], shape: Rows) {
        let (rows, cols) = shape.check()?;
        shape.matrix("x", run.len(x))?;
        shape.matrix("out", run.len(out))?;
        if rows == 0 {
            return Ok(());
        }
        match packed_rows(shape.rows, shape.cols) {
            // 4096 columns, 512 threads: the kernel compiled for that block (`reqntid(512)`).
            Some(config) if config.block.x == 512 => run.softmax_forward_packed_t512::<T>(config, x, out, cols),
            Some(config) => run.softmax_forward_packed::<T>(config, x, out, cols),
            None => run.softmax_forward::<T>(warp_per_row(shape.rows), x, out, rows, cols),
        }
    }
}

row_op! {
    /// Cross-entropy with its gradient in one pass (llm.c's fused classifier): `logits` is `rows x
    /// vocab` (`shape.cols` = vocab), `targets` one class per row (`u32`); writes `losses[row] =
    /// logsumexp(row) - row[target]` (f32) and `dlogits = (softmax(row) - onehot(target)) *
    /// dloss` (`dloss` is usually `1 / rows` for a mean loss). A target of
    /// [`IGNORE_TARGET`](crate::IGNORE_TARGET) gives loss 0 and a zero gradient row; any other
    /// target `>= vocab` gives NaN (targets live on the GPU, so they are not checked before the
    /// launch; the kernel never reads out of bounds).
    ///
    /// ```no_run
    /// # use ferrocuda_host::{Context, DeviceBuffer, Stream};
    /// # use ferrocuda_kernels::{bf16, rows::{self, Rows}};
    /// # fn main() -> Result<(), ferrocuda_kernels::KernelsError> {
    /// # let context = Context::primary(0)?;
    /// # let stream = Stream::new(&context)?;
    /// let shape = Rows { rows: 4, cols: 50304 }; // tokens x vocabulary
    /// let logits = DeviceBuffer::<bf16>::zeroed(&context, shape.len())?;
    /// let targets = DeviceBuffer::from_slice(&context, &[7u32, 11, ferrocuda_kernels::IGNORE_TARGET, 3])?;
    /// let mut losses = DeviceBuffer::<f32>::zeroed(&context, shape.rows)?;
    /// let mut dlogits = DeviceBuffer::<bf16>::zeroed(&context, shape.len())?;
    /// // dloss 1/3: the gradient of the mean over the three rows that are not ignored.
    /// rows::cross_entropy(&stream, &logits, &targets, &mut losses, &mut dlogits, shape, 1.0 / 3.0)?;
    /// let losses = losses.to_vec()?;
    /// assert_eq!(losses[2], 0.0);
    /// assert!((losses[0] - (50304f32).ln()).abs() < 1e-3);
    /// # Ok(())
    /// # }
    /// ```
    pub fn cross_entropy, cross_entropy_cpu<T>(
        run; logits: [in T], targets: [in u32], losses: [out f32], dlogits: [out T], shape: Rows, dloss: f32
    ) {
        let (rows, vocab) = shape.check()?;
        shape.matrix("logits", run.len(logits))?;
        shape.per_row("targets", run.len(targets))?;
        shape.per_row("losses", run.len(losses))?;
        shape.matrix("dlogits", run.len(dlogits))?;
        if rows == 0 {
            return Ok(());
        }
        run.cross_entropy_forward_backward::<T>(warp_per_row(shape.rows), logits, targets, losses, dlogits, rows, vocab, dloss)
    }
}

row_op! {
    /// Cross-entropy's forward pass alone: `losses[row] = logsumexp(row) - row[target]` as
    /// [`cross_entropy`] writes it, and `lse[row] = logsumexp(row)` (f32) for
    /// [`cross_entropy_backward`]; no gradient (for callers that learn the loss's gradient only
    /// later, as PyTorch's autograd: the row is read once here and once in the backward).
    /// Targets as [`cross_entropy`].
    ///
    /// ```no_run
    /// # use ferrocuda_host::{Context, DeviceBuffer, Stream};
    /// # use ferrocuda_kernels::{bf16, rows::{self, Rows}};
    /// # fn main() -> Result<(), ferrocuda_kernels::KernelsError> {
    /// # let context = Context::primary(0)?;
    /// # let stream = Stream::new(&context)?;
    /// let shape = Rows { rows: 4, cols: 50304 };
    /// let logits = DeviceBuffer::<bf16>::zeroed(&context, shape.len())?;
    /// let targets = DeviceBuffer::from_slice(&context, &[7u32, 11, 13, 3])?;
    /// let (mut losses, mut lse) = (DeviceBuffer::<f32>::zeroed(&context, 4)?, DeviceBuffer::<f32>::zeroed(&context, 4)?);
    /// rows::cross_entropy_forward(&stream, &logits, &targets, &mut losses, &mut lse, shape)?;
    /// // Later, once the losses' gradient is known (here: a mean over the 4 rows):
    /// let dlosses = DeviceBuffer::from_slice(&context, &[0.25f32; 4])?;
    /// let mut dlogits = DeviceBuffer::<bf16>::zeroed(&context, shape.len())?;
    /// rows::cross_entropy_backward(&stream, &logits, &targets, &lse, &dlosses, &mut dlogits, shape)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn cross_entropy_forward, cross_entropy_forward_cpu<T>(
        run; logits: [in T], targets: [in u32], losses: [out f32], lse: [out f32], shape: Rows
    ) {
        let (rows, vocab) = shape.check()?;
        shape.matrix("logits", run.len(logits))?;
        shape.per_row("targets", run.len(targets))?;
        shape.per_row("losses", run.len(losses))?;
        shape.per_row("lse", run.len(lse))?;
        if rows == 0 {
            return Ok(());
        }
        run.cross_entropy_forward::<T>(warp_per_row(shape.rows), logits, targets, losses, lse, rows, vocab)
    }
}

row_op! {
    /// Cross-entropy's gradient from [`cross_entropy_forward`]'s `lse` and the upstream
    /// gradient of each row's loss: `dlogits[r, c] = (softmax(row r)[c] - [c == target[r]]) *
    /// dlosses[r]` (`dlosses`: f32, one per row; all `1 / rows` for a mean loss), one pass over
    /// the logits (8 columns a thread with 16-byte accesses when `vocab % 8 == 0`). An ignored
    /// row ([`IGNORE_TARGET`](crate::IGNORE_TARGET)) gets a zero gradient, another target `>=
    /// vocab` NaN. With the same `lse` and a uniform `dlosses`, the same values as
    /// [`cross_entropy`]'s gradient.
    pub fn cross_entropy_backward, cross_entropy_backward_cpu<T>(
        run; logits: [in T], targets: [in u32], lse: [in f32], dlosses: [in f32], dlogits: [out T], shape: Rows
    ) {
        let (rows, vocab) = shape.check()?;
        shape.matrix("logits", run.len(logits))?;
        shape.per_row("targets", run.len(targets))?;
        shape.per_row("lse", run.len(lse))?;
        shape.per_row("dlosses", run.len(dlosses))?;
        shape.matrix("dlogits", run.len(dlogits))?;
        if rows == 0 {
            return Ok(());
        }
        let nonzero_vocab = NonZeroU32::new(vocab).ok_or_else(|| unsupported("cols", 0, "rows need at least one column"))?;
        let chunks = shape.len() / 8;
        match NonZeroU32::new(vocab / 8).filter(|_| vocab.is_multiple_of(8) && chunks <= u32::MAX as usize) {
            Some(chunks_per_row) => run.cross_entropy_backward_packed::<T>(chunk_grid(chunks), logits, targets, lse, dlosses, dlogits, chunks_per_row),
            None => run.cross_entropy_backward::<T>(grid_stride(shape.len()), logits, targets, lse, dlosses, dlogits, nonzero_vocab),
        }
    }
}

row_op! {
    /// `out = gelu(x)` (GPT-2's tanh approximation), element-wise; `out` as long as `x`.
    ///
    /// ```no_run
    /// # use ferrocuda_host::{Context, DeviceBuffer, Stream};
    /// # use ferrocuda_kernels::{bf16, rows::{self, Rows}};
    /// # fn main() -> Result<(), ferrocuda_kernels::KernelsError> {
    /// # let context = Context::primary(0)?;
    /// # let stream = Stream::new(&context)?;
    /// let x = DeviceBuffer::from_slice(&context, &vec![bf16::ONE; 8192])?;
    /// let mut out = DeviceBuffer::<bf16>::zeroed(&context, 8192)?;
    /// rows::gelu(&stream, &x, &mut out)?;
    /// let dout = DeviceBuffer::from_slice(&context, &vec![bf16::ONE; 8192])?;
    /// let mut dx = DeviceBuffer::<bf16>::zeroed(&context, 8192)?;
    /// rows::gelu_backward(&stream, &x, &dout, &mut dx)?;
    /// assert!((out.to_vec()?[0].to_f32() - 0.8412).abs() < 4e-3);
    /// # Ok(())
    /// # }
    /// ```
    pub fn gelu, gelu_cpu<T>(run; x: [in T], out: [out T]) {
        let n = run.len(x);
        expect_len("out", run.len(out), n, || "as long as x".into())?;
        if n == 0 {
            return Ok(());
        }
        match packed_elements(n) {
            Some(config) => run.gelu_forward_packed::<T>(config, x, out),
            None => run.gelu_forward::<T>(grid_stride(n), x, out),
        }
    }
}

row_op! {
    /// `dx = gelu'(x) * dout`, element-wise.
    pub fn gelu_backward, gelu_backward_cpu<T>(run; x: [in T], dout: [in T], dx: [out T]) {
        let n = run.len(x);
        expect_len("dout", run.len(dout), n, || "as long as x".into())?;
        expect_len("dx", run.len(dx), n, || "as long as x".into())?;
        if n == 0 {
            return Ok(());
        }
        match packed_elements(n) {
            Some(config) => run.gelu_backward_packed::<T>(config, x, dout, dx),
            None => run.gelu_backward::<T>(grid_stride(n), x, dout, dx),
        }
    }
}

/// The gate width of a SiLU-and-mul shape, checked.
pub(crate) fn silu_width(shape: Rows) -> Result<NonZeroU32> {
    shape.check()?;
    let d = NonZeroU32::new(shape.cols as u32).ok_or_else(|| unsupported("cols", 0, "at least one column"))?;
    shape.len().checked_mul(2).ok_or_else(|| unsupported("rows", shape.rows, "rows x 2 cols overflows usize"))?;
    Ok(d)
}

/// `d / 8` when the packed SiLU-and-mul kernels take the shape: `d % 8 == 0` and the chunks
/// of `rows x 2d` fit in `u32`.
fn silu_packed(shape: Rows) -> Option<NonZeroU32> {
    (shape.cols.is_multiple_of(8) && shape.len() / 4 <= u32::MAX as usize).then(|| NonZeroU32::new((shape.cols / 8) as u32)).flatten()
}

row_op! {
    /// SiLU-and-mul (SwiGLU): `input` is `rows x 2d` (the gate in columns `0..d`, the up
    /// projection in `d..2d`), `out` (`rows x d`, `shape.cols` = d) `= silu(gate) * up`.
    ///
    /// ```no_run
    /// # use ferrocuda_host::{Context, DeviceBuffer, Stream};
    /// # use ferrocuda_kernels::{bf16, rows::{self, Rows}};
    /// # fn main() -> Result<(), ferrocuda_kernels::KernelsError> {
    /// # let context = Context::primary(0)?;
    /// # let stream = Stream::new(&context)?;
    /// let shape = Rows { rows: 8, cols: 2048 }; // cols = d, the gate's width
    /// let input = DeviceBuffer::<bf16>::zeroed(&context, shape.rows * 2 * shape.cols)?; // [gate | up]
    /// let mut out = DeviceBuffer::<bf16>::zeroed(&context, shape.len())?;
    /// rows::silu_and_mul(&stream, &input, &mut out, shape)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn silu_and_mul, silu_and_mul_cpu<T>(run; input: [in T], out: [out T], shape: Rows) {
        let d = silu_width(shape)?;
        expect_len("input", run.len(input), 2 * shape.len(), || format!("rows {} x 2 cols {}", shape.rows, shape.cols))?;
        shape.matrix("out", run.len(out))?;
        if shape.is_empty() {
            return Ok(());
        }
        match silu_packed(shape) {
            Some(chunks_per_row) => run.silu_and_mul_forward_packed::<T>(chunk_grid(shape.len() / 8), input, out, chunks_per_row),
            None => run.silu_and_mul_forward::<T>(grid_stride(shape.len()), input, out, d),
        }
    }
}

row_op! {
    /// SiLU-and-mul backward: `dinput` (`rows x 2d`) from `dout` (`rows x d`) and the forward's
    /// `input`.
    pub fn silu_and_mul_backward, silu_and_mul_backward_cpu<T>(run; input: [in T], dout: [in T], dinput: [out T], shape: Rows) {
        let d = silu_width(shape)?;
        expect_len("input", run.len(input), 2 * shape.len(), || format!("rows {} x 2 cols {}", shape.rows, shape.cols))?;
        shape.matrix("dout", run.len(dout))?;
        expect_len("dinput", run.len(dinput), 2 * shape.len(), || format!("rows {} x 2 cols {}", shape.rows, shape.cols))?;
        if shape.is_empty() {
            return Ok(());
        }
        match silu_packed(shape) {
            Some(chunks_per_row) => run.silu_and_mul_backward_packed::<T>(chunk_grid(shape.len() / 4), input, dout, dinput, chunks_per_row),
            None => run.silu_and_mul_backward::<T>(grid_stride(2 * shape.len()), input, dout, dinput, d),
        }
    }
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

row_op! {
    /// Rotary position embeddings (rotate-half convention of GPT-NeoX and Llama): `x` and `out`
    /// are `tokens x heads x head_dim`; `positions[token]` (u32) picks a row of `cos` and `sin`
    /// (`max_positions x rotary_dim/2`, f32, usually `cos(p * theta^(-2k/rotary_dim))`). For `k <
    /// rotary_dim/2`, `(x[k], x[k + rotary_dim/2])` becomes `(x1 cos - x2 sin, x2 cos + x1 sin)`.
    /// `inverse` rotates the other way: the backward pass (`dx` from `dout`). A position past
    /// the tables writes NaN (positions live on the GPU; the kernel never reads out of bounds).
    /// With `head_dim % 8 == 0` and `rotary_dim % 16 == 0` a thread handles 8 consecutive
    /// elements with 16-byte accesses; other shapes one element at a time.
    ///
    /// ```no_run
    /// # use ferrocuda_host::{Context, DeviceBuffer, Stream};
    /// # use ferrocuda_kernels::{bf16, rows::{self, Rows}};
    /// # fn main() -> Result<(), ferrocuda_kernels::KernelsError> {
    /// # let context = Context::primary(0)?;
    /// # let stream = Stream::new(&context)?;
    /// use ferrocuda_kernels::rows::Rope;
    /// let shape = Rope { tokens: 16, heads: 12, head_dim: 64, rotary_dim: 64, max_positions: 1024 };
    /// // cos[p][k] = cos(p * 10000^(-2k/rotary_dim)), sin likewise.
    /// let (half, mut cos, mut sin) = (shape.rotary_dim / 2, Vec::new(), Vec::new());
    /// for p in 0..shape.max_positions {
    ///     for k in 0..half {
    ///         let angle = p as f32 * 10000f32.powf(-2.0 * k as f32 / shape.rotary_dim as f32);
    ///         cos.push(angle.cos());
    ///         sin.push(angle.sin());
    ///     }
    /// }
    /// let (cos, sin) = (DeviceBuffer::from_slice(&context, &cos)?, DeviceBuffer::from_slice(&context, &sin)?);
    /// let positions = DeviceBuffer::from_slice(&context, &(0..16u32).collect::<Vec<_>>())?;
    /// let q = DeviceBuffer::<bf16>::zeroed(&context, 16 * 12 * 64)?;
    /// let mut q_rotated = DeviceBuffer::<bf16>::zeroed(&context, 16 * 12 * 64)?;
    /// rows::rotary_embedding(&stream, &q, &positions, &cos, &sin, &mut q_rotated, shape, false)?;
    /// // The backward rotates the gradient back: `inverse = true`.
    /// # Ok(())
    /// # }
    /// ```
    pub fn rotary_embedding, rotary_embedding_cpu<T>(
        run; x: [in T], positions: [in u32], cos: [in f32], sin: [in f32], out: [out T], shape: Rope, inverse: bool
    ) {
        let (head_dim, heads, mut rope) = shape.check(run.len(x), run.len(positions), run.len(cos), run.len(sin), run.len(out))?;
        rope.inverse = inverse as u32;
        let n = run.len(x);
        if n == 0 {
            return Ok(());
        }
        let packed = shape.head_dim.is_multiple_of(8) && shape.rotary_dim.is_multiple_of(16) && n / 8 <= u32::MAX as usize;
        match NonZeroU32::new(head_dim.get() / 8).filter(|_| packed) {
            Some(head_chunks) => run.rotary_embedding_packed::<T>(crate::rotary_grid(n / 8), x, positions, cos, sin, out, head_chunks, heads, rope),
            None => run.rotary_embedding::<T>(grid_stride(n), x, positions, cos, sin, out, head_dim, heads, rope),
        }
    }
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

row_op! {
    /// One AdamW step in place: `params` (`T`), moments `m`, `v` (f32, zero before the first
    /// step), from `grads` times `grad_scale` (1.0 for none). `step` counts from 1. All four the
    /// same length. A length that is a multiple of 8 runs 8 elements a thread with 16-byte
    /// accesses; others one element at a time (the same values).
    ///
    /// ```no_run
    /// # use ferrocuda_host::{Context, DeviceBuffer, Stream};
    /// # use ferrocuda_kernels::{bf16, rows::{self, Rows}};
    /// # fn main() -> Result<(), ferrocuda_kernels::KernelsError> {
    /// # let context = Context::primary(0)?;
    /// # let stream = Stream::new(&context)?;
    /// use ferrocuda_kernels::rows::AdamW;
    /// let n = 1 << 20;
    /// let mut params = DeviceBuffer::from_slice(&context, &vec![bf16::ONE; n])?;
    /// let grads = DeviceBuffer::<bf16>::zeroed(&context, n)?;
    /// let (mut m, mut v) = (DeviceBuffer::<f32>::zeroed(&context, n)?, DeviceBuffer::<f32>::zeroed(&context, n)?);
    /// let hyper = AdamW { learning_rate: 3e-4, beta1: 0.9, beta2: 0.95, eps: 1e-8, weight_decay: 0.1 };
    /// for step in 1..=10 {
    ///     rows::adamw(&stream, &mut params, &grads, &mut m, &mut v, hyper, step, 1.0)?;
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn adamw, adamw_cpu<T>(
        run; params: [out T], grads: [in T], m: [out f32], v: [out f32], hyper: AdamW, step: u32, grad_scale: f32
    ) {
        let n = run.len(params);
        let why = || "as long as params".to_string();
        expect_len("grads", run.len(grads), n, why)?;
        expect_len("m", run.len(m), n, why)?;
        expect_len("v", run.len(v), n, why)?;
        let hp = hyper.at(step, grad_scale)?;
        if n == 0 {
            return Ok(());
        }
        match packed_elements(n) {
            Some(config) => run.adamw_step_packed::<T>(config, params, grads, m, v, hp),
            None => run.adamw_step::<T>(grid_stride(n), params, grads, m, v, hp),
        }
    }
}

row_op! {
    /// Adds `sum(x^2)` (f32) into `total[0]`: call it for each gradient tensor on one `total`,
    /// zeroed first, to get the squared global norm for [`clip_by_global_norm`].
    pub fn sum_of_squares, sum_of_squares_cpu<T>(run; x: [in T], total: [out f32]) {
        expect_at_least("total", run.len(total), 1, || "one f32 accumulator".into())?;
        let n = run.len(x);
        if n == 0 {
            return Ok(());
        }
        if n.is_multiple_of(8) {
            // Two chunks of 8 a thread a step: up to 1024 blocks of 256 threads.
            let config = ferrocuda_host::LaunchConfig::new((n / 8).div_ceil(2 * crate::BLOCK as usize).clamp(1, 1024) as u32, crate::BLOCK);
            return run.sum_of_squares_packed::<T>(config, x, total);
        }
        let config = ferrocuda_host::LaunchConfig::new(n.div_ceil(crate::BLOCK as usize).clamp(1, 1024) as u32, crate::BLOCK);
        run.sum_of_squares::<T>(config, x, total)
    }
}

row_op! {
    /// Clips in place by global norm: with `norm = sqrt(norm_squared[0])` (from
    /// [`sum_of_squares`] over every gradient), multiplies `grads` by `max_norm / (norm + 1e-6)`
    /// when `norm > max_norm`. Call once per gradient tensor.
    ///
    /// ```no_run
    /// # use ferrocuda_host::{Context, DeviceBuffer, Stream};
    /// # use ferrocuda_kernels::{bf16, rows::{self, Rows}};
    /// # fn main() -> Result<(), ferrocuda_kernels::KernelsError> {
    /// # let context = Context::primary(0)?;
    /// # let stream = Stream::new(&context)?;
    /// let mut grads_a = DeviceBuffer::from_slice(&context, &vec![bf16::ONE; 4096])?;
    /// let mut grads_b = DeviceBuffer::from_slice(&context, &vec![bf16::ONE; 768])?;
    /// let mut norm_squared = DeviceBuffer::<f32>::zeroed(&context, 1)?; // zeroed before the sums
    /// rows::sum_of_squares(&stream, &grads_a, &mut norm_squared)?;
    /// rows::sum_of_squares(&stream, &grads_b, &mut norm_squared)?;
    /// rows::clip_by_global_norm(&stream, &mut grads_a, &norm_squared, 1.0)?;
    /// rows::clip_by_global_norm(&stream, &mut grads_b, &norm_squared, 1.0)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn clip_by_global_norm, clip_by_global_norm_cpu<T>(run; grads: [out T], norm_squared: [in f32], max_norm: f32) {
        expect_at_least("norm_squared", run.len(norm_squared), 1, || "the squared norm in element 0".into())?;
        if max_norm.is_nan() || max_norm <= 0.0 {
            return Err(unsupported("max_norm", max_norm, "a positive norm"));
        }
        let n = run.len(grads);
        if n == 0 {
            return Ok(());
        }
        run.clip_by_global_norm::<T>(grid_stride(n), grads, norm_squared, max_norm)
    }
}
