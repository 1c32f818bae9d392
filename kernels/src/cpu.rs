//! The calls of [`rows`](crate::rows) and [`attention`](crate::attention) on the CPU
//! executor, on host slices: the same kernels, the same shape checks, the same errors. The
//! executor runs every GPU thread (with barriers, warp shuffles and atomics) and reports races
//! and panics, so these are how the crate is tested without a GPU, and how a program can test
//! its own use of the kernels. Slow: keep shapes small.
//!
//! ```
//! use ferrocuda_device::cpu::CpuExecutor;
//! use ferrocuda_kernels::{cpu, rows::Rows};
//! let executor = CpuExecutor::new();
//! let x = [1.0f32, 2.0, 3.0, 4.0];
//! let mut out = [0.0f32; 4];
//! cpu::softmax(&executor, &x, &mut out, Rows { rows: 1, cols: 4 })?;
//! assert!((out.iter().sum::<f32>() - 1.0).abs() < 1e-6);
//! # Ok::<(), ferrocuda_kernels::KernelsError>(())
//! ```

use core::num::NonZeroU32;

use ferrocuda_device::cpu::CpuExecutor;
use ferrocuda_kernels_device::sum_column_partials;

use crate::attention::Attention;
use crate::error::{expect_at_least, expect_len, unsupported};
use crate::launchers::CpuLaunchers;
use crate::rows::{AdamW, ROWS_PER_CHUNK, Rope, Rows, silu_width, weight_chunks};
use crate::{Element, Result, grid_stride, packed_elements, packed_rows, warp_per_row};

/// [`rows::rmsnorm`](crate::rows::rmsnorm) on the CPU executor.
pub fn rmsnorm<T: Element>(executor: &CpuExecutor, x: &[T], weight: &[T], out: &mut [T], rstd: &mut [f32], shape: Rows, eps: f32) -> Result<()> {
    let (rows, cols) = shape.check()?;
    shape.matrix("x", x.len())?;
    shape.row("weight", weight.len())?;
    shape.matrix("out", out.len())?;
    shape.per_row("rstd", rstd.len())?;
    if rows == 0 {
        return Ok(());
    }
    if let Some(config) = packed_rows(shape.rows, shape.cols) {
        return Ok(<T as CpuLaunchers>::rmsnorm_forward_packed(executor, config, x, weight, out, rstd, cols, eps)?);
    }
    Ok(<T as CpuLaunchers>::rmsnorm_forward(executor, warp_per_row(shape.rows), x, weight, out, rstd, rows, cols, eps)?)
}

/// [`rows::add_rmsnorm`](crate::rows::add_rmsnorm) on the CPU executor.
#[allow(clippy::too_many_arguments)]
pub fn add_rmsnorm<T: Element>(
    executor: &CpuExecutor,
    x: &[T],
    residual: &[T],
    weight: &[T],
    out: &mut [T],
    sum: &mut [T],
    rstd: &mut [f32],
    shape: Rows,
    eps: f32,
) -> Result<()> {
    let (rows, cols) = shape.check()?;
    shape.matrix("x", x.len())?;
    shape.matrix("residual", residual.len())?;
    shape.row("weight", weight.len())?;
    shape.matrix("out", out.len())?;
    shape.matrix("sum", sum.len())?;
    shape.per_row("rstd", rstd.len())?;
    if rows == 0 {
        return Ok(());
    }
    if let Some(config) = packed_rows(shape.rows, shape.cols) {
        return Ok(<T as CpuLaunchers>::add_rmsnorm_forward_packed(executor, config, x, residual, weight, out, sum, rstd, cols, eps)?);
    }
    Ok(<T as CpuLaunchers>::add_rmsnorm_forward(executor, warp_per_row(shape.rows), x, residual, weight, out, sum, rstd, rows, cols, eps)?)
}

/// [`rows::layernorm`](crate::rows::layernorm) on the CPU executor.
#[allow(clippy::too_many_arguments)]
pub fn layernorm<T: Element>(
    executor: &CpuExecutor,
    x: &[T],
    weight: &[T],
    bias: &[T],
    out: &mut [T],
    mean: &mut [f32],
    rstd: &mut [f32],
    shape: Rows,
    eps: f32,
) -> Result<()> {
    let (rows, cols) = shape.check()?;
    shape.matrix("x", x.len())?;
    shape.row("weight", weight.len())?;
    shape.row("bias", bias.len())?;
    shape.matrix("out", out.len())?;
    shape.per_row("mean", mean.len())?;
    shape.per_row("rstd", rstd.len())?;
    if rows == 0 {
        return Ok(());
    }
    if let Some(config) = packed_rows(shape.rows, shape.cols) {
        return Ok(<T as CpuLaunchers>::layernorm_forward_packed(executor, config, x, weight, bias, out, mean, rstd, cols, eps)?);
    }
    Ok(<T as CpuLaunchers>::layernorm_forward(executor, warp_per_row(shape.rows), x, weight, bias, out, mean, rstd, rows, cols, eps)?)
}

/// [`rows::add_layernorm`](crate::rows::add_layernorm) on the CPU executor.
#[allow(clippy::too_many_arguments)]
pub fn add_layernorm<T: Element>(
    executor: &CpuExecutor,
    x: &[T],
    residual: &[T],
    weight: &[T],
    bias: &[T],
    out: &mut [T],
    sum: &mut [T],
    mean: &mut [f32],
    rstd: &mut [f32],
    shape: Rows,
    eps: f32,
) -> Result<()> {
    let (rows, cols) = shape.check()?;
    shape.matrix("x", x.len())?;
    shape.matrix("residual", residual.len())?;
    shape.row("weight", weight.len())?;
    shape.row("bias", bias.len())?;
    shape.matrix("out", out.len())?;
    shape.matrix("sum", sum.len())?;
    shape.per_row("mean", mean.len())?;
    shape.per_row("rstd", rstd.len())?;
    if rows == 0 {
        return Ok(());
    }
    if let Some(config) = packed_rows(shape.rows, shape.cols) {
        return Ok(<T as CpuLaunchers>::add_layernorm_forward_packed(executor, config, x, residual, weight, bias, out, sum, mean, rstd, cols, eps)?);
    }
    Ok(<T as CpuLaunchers>::add_layernorm_forward(executor, warp_per_row(shape.rows), x, residual, weight, bias, out, sum, mean, rstd, rows, cols, eps)?)
}

/// [`rows::layernorm_backward`](crate::rows::layernorm_backward) on the CPU executor.
#[allow(clippy::too_many_arguments)]
pub fn layernorm_backward<T: Element>(
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
    let (rows, cols) = shape.check()?;
    shape.matrix("dout", dout.len())?;
    shape.matrix("x", x.len())?;
    shape.row("weight", weight.len())?;
    shape.per_row("mean", mean.len())?;
    shape.per_row("rstd", rstd.len())?;
    if let Some(d) = dresidual {
        shape.matrix("dresidual", d.len())?;
    }
    shape.matrix("dx", dx.len())?;
    shape.row("dweight", dweight.len())?;
    shape.row("dbias", dbias.len())?;
    if rows > 0 {
        let (d, add) = match dresidual {
            Some(d) => (d, 1),
            None => (dout, 0),
        };
        match packed_rows(shape.rows, shape.cols) {
            Some(config) => <T as CpuLaunchers>::norm_backward_packed(executor, config, dout, x, weight, mean, rstd, d, dx, cols, add, 1)?,
            None => <T as CpuLaunchers>::layernorm_backward(executor, warp_per_row(shape.rows), dout, x, weight, mean, rstd, d, dx, rows, cols, add)?,
        }
    }
    weight_gradients(executor, dout, x, mean, rstd, dweight, Some(dbias), shape, true)
}

/// [`rows::rmsnorm_backward`](crate::rows::rmsnorm_backward) on the CPU executor.
#[allow(clippy::too_many_arguments)]
pub fn rmsnorm_backward<T: Element>(
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
    let (rows, cols) = shape.check()?;
    shape.matrix("dout", dout.len())?;
    shape.matrix("x", x.len())?;
    shape.row("weight", weight.len())?;
    shape.per_row("rstd", rstd.len())?;
    if let Some(d) = dresidual {
        shape.matrix("dresidual", d.len())?;
    }
    shape.matrix("dx", dx.len())?;
    shape.row("dweight", dweight.len())?;
    if rows > 0 {
        let (d, add) = match dresidual {
            Some(d) => (d, 1),
            None => (dout, 0),
        };
        match packed_rows(shape.rows, shape.cols) {
            Some(config) => <T as CpuLaunchers>::norm_backward_packed(executor, config, dout, x, weight, rstd, rstd, d, dx, cols, add, 0)?,
            None => <T as CpuLaunchers>::rmsnorm_backward(executor, warp_per_row(shape.rows), dout, x, weight, rstd, d, dx, rows, cols, add)?,
        }
    }
    weight_gradients(executor, dout, x, rstd, rstd, dweight, None, shape, false)
}

/// The weight (and bias) gradients of a norm, as on the GPU (two launches, deterministic).
#[allow(clippy::too_many_arguments)]
fn weight_gradients<T: Element>(
    executor: &CpuExecutor,
    dout: &[T],
    x: &[T],
    mean: &[f32],
    rstd: &[f32],
    dweight: &mut [f32],
    dbias: Option<&mut [f32]>,
    shape: Rows,
    centred: bool,
) -> Result<()> {
    let (rows, cols) = shape.check()?;
    let nonzero_cols = NonZeroU32::new(cols).ok_or_else(|| unsupported("cols", 0, "rows need at least one column"))?;
    let chunks = weight_chunks(shape.rows);
    let (mut partial_dw, mut partial_db) = (vec![0.0f32; chunks * shape.cols], vec![0.0f32; chunks * shape.cols]);
    if shape.cols.is_multiple_of(8) {
        <T as CpuLaunchers>::norm_backward_weights_partial_packed(
            executor,
            grid_stride(chunks * shape.cols / 8),
            dout,
            x,
            mean,
            rstd,
            &mut partial_dw,
            &mut partial_db,
            rows,
            cols,
            ROWS_PER_CHUNK as u32,
            centred as u32,
        )?;
    } else {
        <T as CpuLaunchers>::norm_backward_weights_partial(
            executor,
            grid_stride(chunks * shape.cols),
            dout,
            x,
            mean,
            rstd,
            &mut partial_dw,
            &mut partial_db,
            rows,
            nonzero_cols,
            ROWS_PER_CHUNK as u32,
            centred as u32,
        )?;
    }
    sum_column_partials::launch_cpu(executor, grid_stride(shape.cols), &partial_dw, dweight, chunks as u32, cols)?;
    if let Some(dbias) = dbias {
        sum_column_partials::launch_cpu(executor, grid_stride(shape.cols), &partial_db, dbias, chunks as u32, cols)?;
    }
    Ok(())
}

/// [`rows::softmax`](crate::rows::softmax) on the CPU executor.
pub fn softmax<T: Element>(executor: &CpuExecutor, x: &[T], out: &mut [T], shape: Rows) -> Result<()> {
    let (rows, cols) = shape.check()?;
    shape.matrix("x", x.len())?;
    shape.matrix("out", out.len())?;
    if rows == 0 {
        return Ok(());
    }
    if let Some(config) = packed_rows(shape.rows, shape.cols) {
        return Ok(<T as CpuLaunchers>::softmax_forward_packed(executor, config, x, out, cols)?);
    }
    Ok(<T as CpuLaunchers>::softmax_forward(executor, warp_per_row(shape.rows), x, out, rows, cols)?)
}

/// [`rows::cross_entropy`](crate::rows::cross_entropy) on the CPU executor.
#[allow(clippy::too_many_arguments)]
pub fn cross_entropy<T: Element>(
    executor: &CpuExecutor,
    logits: &[T],
    targets: &[u32],
    losses: &mut [f32],
    dlogits: &mut [T],
    shape: Rows,
    dloss: f32,
) -> Result<()> {
    let (rows, vocab) = shape.check()?;
    shape.matrix("logits", logits.len())?;
    shape.per_row("targets", targets.len())?;
    shape.per_row("losses", losses.len())?;
    shape.matrix("dlogits", dlogits.len())?;
    if rows == 0 {
        return Ok(());
    }
    Ok(<T as CpuLaunchers>::cross_entropy_forward_backward(executor, warp_per_row(shape.rows), logits, targets, losses, dlogits, rows, vocab, dloss)?)
}

/// [`rows::gelu`](crate::rows::gelu) on the CPU executor.
pub fn gelu<T: Element>(executor: &CpuExecutor, x: &[T], out: &mut [T]) -> Result<()> {
    expect_len("out", out.len(), x.len(), || "as long as x".into())?;
    if x.is_empty() {
        return Ok(());
    }
    if let Some(config) = packed_elements(x.len()) {
        return Ok(<T as CpuLaunchers>::gelu_forward_packed(executor, config, x, out)?);
    }
    Ok(<T as CpuLaunchers>::gelu_forward(executor, grid_stride(x.len()), x, out)?)
}

/// [`rows::gelu_backward`](crate::rows::gelu_backward) on the CPU executor.
pub fn gelu_backward<T: Element>(executor: &CpuExecutor, x: &[T], dout: &[T], dx: &mut [T]) -> Result<()> {
    expect_len("dout", dout.len(), x.len(), || "as long as x".into())?;
    expect_len("dx", dx.len(), x.len(), || "as long as x".into())?;
    if x.is_empty() {
        return Ok(());
    }
    if let Some(config) = packed_elements(x.len()) {
        return Ok(<T as CpuLaunchers>::gelu_backward_packed(executor, config, x, dout, dx)?);
    }
    Ok(<T as CpuLaunchers>::gelu_backward(executor, grid_stride(x.len()), x, dout, dx)?)
}

/// [`rows::silu_and_mul`](crate::rows::silu_and_mul) on the CPU executor.
pub fn silu_and_mul<T: Element>(executor: &CpuExecutor, input: &[T], out: &mut [T], shape: Rows) -> Result<()> {
    let d = silu_width(shape)?;
    expect_len("input", input.len(), 2 * shape.len(), || format!("rows {} x 2 cols {}", shape.rows, shape.cols))?;
    shape.matrix("out", out.len())?;
    if shape.is_empty() {
        return Ok(());
    }
    Ok(<T as CpuLaunchers>::silu_and_mul_forward(executor, grid_stride(shape.len()), input, out, d)?)
}

/// [`rows::silu_and_mul_backward`](crate::rows::silu_and_mul_backward) on the CPU executor.
pub fn silu_and_mul_backward<T: Element>(executor: &CpuExecutor, input: &[T], dout: &[T], dinput: &mut [T], shape: Rows) -> Result<()> {
    let d = silu_width(shape)?;
    expect_len("input", input.len(), 2 * shape.len(), || format!("rows {} x 2 cols {}", shape.rows, shape.cols))?;
    shape.matrix("dout", dout.len())?;
    expect_len("dinput", dinput.len(), 2 * shape.len(), || format!("rows {} x 2 cols {}", shape.rows, shape.cols))?;
    if shape.is_empty() {
        return Ok(());
    }
    Ok(<T as CpuLaunchers>::silu_and_mul_backward(executor, grid_stride(2 * shape.len()), input, dout, dinput, d)?)
}

/// [`rows::rotary_embedding`](crate::rows::rotary_embedding) on the CPU executor.
#[allow(clippy::too_many_arguments)]
pub fn rotary_embedding<T: Element>(
    executor: &CpuExecutor,
    x: &[T],
    positions: &[u32],
    cos: &[f32],
    sin: &[f32],
    out: &mut [T],
    shape: Rope,
    inverse: bool,
) -> Result<()> {
    let (head_dim, heads, mut rope) = shape.check(x.len(), positions.len(), cos.len(), sin.len(), out.len())?;
    rope.inverse = inverse as u32;
    if x.is_empty() {
        return Ok(());
    }
    Ok(<T as CpuLaunchers>::rotary_embedding(executor, grid_stride(x.len()), x, positions, cos, sin, out, head_dim, heads, rope)?)
}

/// [`rows::adamw`](crate::rows::adamw) on the CPU executor.
#[allow(clippy::too_many_arguments)]
pub fn adamw<T: Element>(
    executor: &CpuExecutor,
    params: &mut [T],
    grads: &[T],
    m: &mut [f32],
    v: &mut [f32],
    hyper: AdamW,
    step: u32,
    grad_scale: f32,
) -> Result<()> {
    let n = params.len();
    let why = || "as long as params".to_string();
    expect_len("grads", grads.len(), n, why)?;
    expect_len("m", m.len(), n, why)?;
    expect_len("v", v.len(), n, why)?;
    let hp = hyper.at(step, grad_scale)?;
    if n == 0 {
        return Ok(());
    }
    Ok(<T as CpuLaunchers>::adamw_step(executor, grid_stride(n), params, grads, m, v, hp)?)
}

/// [`rows::sum_of_squares`](crate::rows::sum_of_squares) on the CPU executor.
pub fn sum_of_squares<T: Element>(executor: &CpuExecutor, x: &[T], total: &mut [f32]) -> Result<()> {
    expect_at_least("total", total.len(), 1, || "one f32 accumulator".into())?;
    if x.is_empty() {
        return Ok(());
    }
    let config = ferrocuda_host::LaunchConfig::new(x.len().div_ceil(crate::BLOCK as usize).clamp(1, 1024) as u32, crate::BLOCK);
    Ok(<T as CpuLaunchers>::sum_of_squares(executor, config, x, total)?)
}

/// [`rows::clip_by_global_norm`](crate::rows::clip_by_global_norm) on the CPU executor.
pub fn clip_by_global_norm<T: Element>(executor: &CpuExecutor, grads: &mut [T], norm_squared: &[f32], max_norm: f32) -> Result<()> {
    expect_at_least("norm_squared", norm_squared.len(), 1, || "the squared norm in element 0".into())?;
    if max_norm.is_nan() || max_norm <= 0.0 {
        return Err(unsupported("max_norm", max_norm, "a positive norm"));
    }
    if grads.is_empty() {
        return Ok(());
    }
    Ok(<T as CpuLaunchers>::clip_by_global_norm(executor, grid_stride(grads.len()), grads, norm_squared, max_norm)?)
}

/// [`attention::attention_forward`](crate::attention::attention_forward) on the CPU executor.
pub fn attention_forward<T: Element>(executor: &CpuExecutor, q: &[T], k: &[T], v: &[T], out: &mut [T], lse: &mut [f32], shape: Attention) -> Result<()> {
    let (head_dim, kernel_shape) = shape.check()?;
    shape.q("q", q.len())?;
    shape.kv("k", k.len())?;
    shape.kv("v", v.len())?;
    shape.q("out", out.len())?;
    shape.lse("lse", lse.len())?;
    if shape.q_rows() == 0 {
        return Ok(());
    }
    if crate::attention::uses_tensor_cores::<T>(&shape) {
        let config = crate::attention::mma_config(&shape);
        let tile_width = ferrocuda_kernels_device::attention::MMA_ROWS * head_dim;
        return Ok(<T as CpuLaunchers>::attention_forward_mma(executor, config, q, k, v, out, lse, tile_width, head_dim, kernel_shape)?);
    }
    Ok(<T as CpuLaunchers>::attention_forward(executor, warp_per_row(shape.q_rows()), q, k, v, out, lse, head_dim, kernel_shape)?)
}

/// [`attention::attention_backward`](crate::attention::attention_backward) on the CPU
/// executor.
#[allow(clippy::too_many_arguments)]
pub fn attention_backward<T: Element>(
    executor: &CpuExecutor,
    q: &[T],
    k: &[T],
    v: &[T],
    out: &[T],
    dout: &[T],
    lse: &[f32],
    dq: &mut [T],
    dk: &mut [T],
    dv: &mut [T],
    shape: Attention,
) -> Result<()> {
    let (head_dim, kernel_shape) = shape.check()?;
    shape.q("q", q.len())?;
    shape.kv("k", k.len())?;
    shape.kv("v", v.len())?;
    shape.q("out", out.len())?;
    shape.q("dout", dout.len())?;
    shape.lse("lse", lse.len())?;
    shape.q("dq", dq.len())?;
    shape.kv("dk", dk.len())?;
    shape.kv("dv", dv.len())?;
    let mut delta = vec![0.0f32; shape.q_rows()];
    if crate::attention::backward_uses_tensor_cores::<T>(&shape) {
        let (dkv_config, dq_config) = crate::attention::backward_mma_configs(&shape);
        if shape.q_rows() > 0 {
            <T as CpuLaunchers>::attention_backward_delta(executor, warp_per_row(shape.q_rows()), out, dout, &mut delta, head_dim)?;
            <T as CpuLaunchers>::attention_backward_dq_mma(executor, dq_config, q, k, v, dout, lse, &delta, dq, head_dim, kernel_shape)?;
        }
        if shape.kv_rows() > 0 {
            <T as CpuLaunchers>::attention_backward_dkv_mma(executor, dkv_config, q, k, v, dout, lse, &delta, dk, dv, head_dim, kernel_shape)?;
        }
        return Ok(());
    }
    if shape.q_rows() > 0 {
        <T as CpuLaunchers>::attention_backward_dq(executor, warp_per_row(shape.q_rows()), q, k, v, out, dout, lse, dq, &mut delta, head_dim, kernel_shape)?;
    }
    if shape.kv_rows() > 0 {
        <T as CpuLaunchers>::attention_backward_dkv(executor, warp_per_row(shape.kv_rows()), q, k, v, dout, lse, &delta, dk, dv, head_dim, kernel_shape)?;
    }
    Ok(())
}
