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

use ferrocuda_device::cpu::CpuExecutor;

use crate::attention::Attention;
use crate::launchers::CpuLaunchers;
use crate::{Element, Result, warp_per_row};

// The row calls: written once in `rows.rs` (`row_op!`), for a stream there and for the CPU
// executor here.
pub use crate::rows::{
    adamw_cpu as adamw, add_layernorm_cpu as add_layernorm, add_rmsnorm_cpu as add_rmsnorm, clip_by_global_norm_cpu as clip_by_global_norm,
    cross_entropy_cpu as cross_entropy, gelu_backward_cpu as gelu_backward, gelu_cpu as gelu, layernorm_backward_cpu as layernorm_backward,
    layernorm_cpu as layernorm, rmsnorm_backward_cpu as rmsnorm_backward, rmsnorm_cpu as rmsnorm, rotary_embedding_cpu as rotary_embedding,
    silu_and_mul_backward_cpu as silu_and_mul_backward, silu_and_mul_cpu as silu_and_mul, softmax_cpu as softmax, sum_of_squares_cpu as sum_of_squares,
};

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
