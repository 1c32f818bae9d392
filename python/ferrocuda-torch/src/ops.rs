//! The launch side of the library's ops (`ferrocuda_kernels`), one Python function each, in
//! `ferrocuda_torch._C`. Each takes its inputs and its preallocated outputs (and scratch) as
//! torch tensors; the Python side (`ferrocuda_torch/ops.py`) allocates them, registers the ops
//! with `torch.library` and adds autograd. Nothing here allocates device memory, so every
//! call may be recorded into a `torch.cuda.graph`.

use ferrocuda_kernels::attention::{self, Attention, Layout};
use ferrocuda_kernels::rows::{self, AdamW, Rope, Rows};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::dispatch_float;
use crate::glue::{Call, gpu_error};

fn rows_shape(call: &Call, name: &str) -> PyResult<Rows> {
    let (rows, cols) = call.info(name)?.rows(call.op())?;
    Ok(Rows { rows, cols })
}

/// `out = rmsnorm(x) * weight`, `rstd` per row.
#[pyfunction]
pub fn rmsnorm(py: Python<'_>, x: &Bound<'_, PyAny>, weight: &Bound<'_, PyAny>, out: &Bound<'_, PyAny>, rstd: &Bound<'_, PyAny>, eps: f32) -> PyResult<()> {
    let call = Call::new(py, "ferrocuda::rmsnorm", &[("x", x), ("weight", weight)], &[("out", out), ("rstd", rstd)])?;
    let shape = rows_shape(&call, "x")?;
    dispatch_float!(call.op(), call.info("x")?.dtype, T => {
        let (x, w) = (call.input::<T>("x")?, call.input::<T>("weight")?);
        let (mut out, mut rstd) = (call.output::<T>("out")?, call.output::<f32>("rstd")?);
        rows::rmsnorm(call.stream(), &x, &w, &mut out, &mut rstd, shape, eps).map_err(gpu_error)
    })
}

/// RMSNorm backward: `dx`, `dweight` (f32); `scratch_dw`, `scratch_db`: `norm_scratch_len` each.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn rmsnorm_backward(
    py: Python<'_>,
    dout: &Bound<'_, PyAny>,
    x: &Bound<'_, PyAny>,
    weight: &Bound<'_, PyAny>,
    rstd: &Bound<'_, PyAny>,
    dx: &Bound<'_, PyAny>,
    dweight: &Bound<'_, PyAny>,
    scratch_dw: &Bound<'_, PyAny>,
    scratch_db: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let call = Call::new(
        py,
        "ferrocuda::rmsnorm_backward",
        &[("dout", dout), ("x", x), ("weight", weight), ("rstd", rstd)],
        &[("dx", dx), ("dweight", dweight), ("scratch_dw", scratch_dw), ("scratch_db", scratch_db)],
    )?;
    let shape = rows_shape(&call, "x")?;
    dispatch_float!(call.op(), call.info("x")?.dtype, T => {
        let (dout, x, w, rstd) = (call.input::<T>("dout")?, call.input::<T>("x")?, call.input::<T>("weight")?, call.input::<f32>("rstd")?);
        let (mut dx, mut dw) = (call.output::<T>("dx")?, call.output::<f32>("dweight")?);
        let (mut s1, mut s2) = (call.output::<f32>("scratch_dw")?, call.output::<f32>("scratch_db")?);
        rows::rmsnorm_backward_with_scratch(call.stream(), &dout, &x, &w, &rstd, None, &mut dx, &mut dw, &mut s1, &mut s2, shape).map_err(gpu_error)
    })
}

/// The length of each scratch tensor of the norms' backward for `rows x cols`.
#[pyfunction]
pub fn norm_scratch_len(rows: usize, cols: usize) -> usize {
    rows::norm_backward_scratch_len(Rows { rows, cols })
}

/// `out = layernorm(x) * weight + bias`, `mean` and `rstd` per row.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn layernorm(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    weight: &Bound<'_, PyAny>,
    bias: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
    mean: &Bound<'_, PyAny>,
    rstd: &Bound<'_, PyAny>,
    eps: f32,
) -> PyResult<()> {
    let call = Call::new(py, "ferrocuda::layernorm", &[("x", x), ("weight", weight), ("bias", bias)], &[("out", out), ("mean", mean), ("rstd", rstd)])?;
    let shape = rows_shape(&call, "x")?;
    dispatch_float!(call.op(), call.info("x")?.dtype, T => {
        let (x, w, b) = (call.input::<T>("x")?, call.input::<T>("weight")?, call.input::<T>("bias")?);
        let (mut out, mut mean, mut rstd) = (call.output::<T>("out")?, call.output::<f32>("mean")?, call.output::<f32>("rstd")?);
        rows::layernorm(call.stream(), &x, &w, &b, &mut out, &mut mean, &mut rstd, shape, eps).map_err(gpu_error)
    })
}

/// Layer norm backward: `dx`, `dweight`, `dbias` (f32).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn layernorm_backward(
    py: Python<'_>,
    dout: &Bound<'_, PyAny>,
    x: &Bound<'_, PyAny>,
    weight: &Bound<'_, PyAny>,
    mean: &Bound<'_, PyAny>,
    rstd: &Bound<'_, PyAny>,
    dx: &Bound<'_, PyAny>,
    dweight: &Bound<'_, PyAny>,
    dbias: &Bound<'_, PyAny>,
    scratch_dw: &Bound<'_, PyAny>,
    scratch_db: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let call = Call::new(
        py,
        "ferrocuda::layernorm_backward",
        &[("dout", dout), ("x", x), ("weight", weight), ("mean", mean), ("rstd", rstd)],
        &[("dx", dx), ("dweight", dweight), ("dbias", dbias), ("scratch_dw", scratch_dw), ("scratch_db", scratch_db)],
    )?;
    let shape = rows_shape(&call, "x")?;
    dispatch_float!(call.op(), call.info("x")?.dtype, T => {
        let (dout, x, w) = (call.input::<T>("dout")?, call.input::<T>("x")?, call.input::<T>("weight")?);
        let (mean, rstd) = (call.input::<f32>("mean")?, call.input::<f32>("rstd")?);
        let (mut dx, mut dw, mut db) = (call.output::<T>("dx")?, call.output::<f32>("dweight")?, call.output::<f32>("dbias")?);
        let (mut s1, mut s2) = (call.output::<f32>("scratch_dw")?, call.output::<f32>("scratch_db")?);
        rows::layernorm_backward_with_scratch(call.stream(), &dout, &x, &w, &mean, &rstd, None, &mut dx, &mut dw, &mut db, &mut s1, &mut s2, shape)
            .map_err(gpu_error)
    })
}

/// `out = softmax(x, -1)`.
#[pyfunction]
pub fn softmax(py: Python<'_>, x: &Bound<'_, PyAny>, out: &Bound<'_, PyAny>) -> PyResult<()> {
    let call = Call::new(py, "ferrocuda::softmax", &[("x", x)], &[("out", out)])?;
    let shape = rows_shape(&call, "x")?;
    dispatch_float!(call.op(), call.info("x")?.dtype, T => {
        let x = call.input::<T>("x")?;
        let mut out = call.output::<T>("out")?;
        rows::softmax(call.stream(), &x, &mut out, shape).map_err(gpu_error)
    })
}

/// Cross-entropy per row (`losses`, f32) and its gradient `dlogits` for `dloss`; `targets` is
/// int32 (`-1`: ignored row).
#[pyfunction]
pub fn cross_entropy(
    py: Python<'_>,
    logits: &Bound<'_, PyAny>,
    targets: &Bound<'_, PyAny>,
    losses: &Bound<'_, PyAny>,
    dlogits: &Bound<'_, PyAny>,
    dloss: f32,
) -> PyResult<()> {
    let call = Call::new(py, "ferrocuda::cross_entropy", &[("logits", logits), ("targets", targets)], &[("losses", losses), ("dlogits", dlogits)])?;
    let shape = rows_shape(&call, "logits")?;
    dispatch_float!(call.op(), call.info("logits")?.dtype, T => {
        let (logits, targets) = (call.input::<T>("logits")?, call.input::<u32>("targets")?);
        let (mut losses, mut dlogits) = (call.output::<f32>("losses")?, call.output::<T>("dlogits")?);
        rows::cross_entropy(call.stream(), &logits, &targets, &mut losses, &mut dlogits, shape, dloss).map_err(gpu_error)
    })
}

/// `out = gelu(x)` (tanh approximation).
#[pyfunction]
pub fn gelu(py: Python<'_>, x: &Bound<'_, PyAny>, out: &Bound<'_, PyAny>) -> PyResult<()> {
    let call = Call::new(py, "ferrocuda::gelu", &[("x", x)], &[("out", out)])?;
    dispatch_float!(call.op(), call.info("x")?.dtype, T => {
        let x = call.input::<T>("x")?;
        let mut out = call.output::<T>("out")?;
        rows::gelu(call.stream(), &x, &mut out).map_err(gpu_error)
    })
}

/// `dx = gelu'(x) * dout`.
#[pyfunction]
pub fn gelu_backward(py: Python<'_>, x: &Bound<'_, PyAny>, dout: &Bound<'_, PyAny>, dx: &Bound<'_, PyAny>) -> PyResult<()> {
    let call = Call::new(py, "ferrocuda::gelu_backward", &[("x", x), ("dout", dout)], &[("dx", dx)])?;
    dispatch_float!(call.op(), call.info("x")?.dtype, T => {
        let (x, dout) = (call.input::<T>("x")?, call.input::<T>("dout")?);
        let mut dx = call.output::<T>("dx")?;
        rows::gelu_backward(call.stream(), &x, &dout, &mut dx).map_err(gpu_error)
    })
}

/// `out = silu(input[..., :d]) * input[..., d:]`.
#[pyfunction]
pub fn silu_and_mul(py: Python<'_>, input: &Bound<'_, PyAny>, out: &Bound<'_, PyAny>) -> PyResult<()> {
    let call = Call::new(py, "ferrocuda::silu_and_mul", &[("input", input)], &[("out", out)])?;
    let shape = rows_shape(&call, "out")?;
    dispatch_float!(call.op(), call.info("input")?.dtype, T => {
        let input = call.input::<T>("input")?;
        let mut out = call.output::<T>("out")?;
        rows::silu_and_mul(call.stream(), &input, &mut out, shape).map_err(gpu_error)
    })
}

/// SiLU-and-mul backward: `dinput` from `dout`.
#[pyfunction]
pub fn silu_and_mul_backward(py: Python<'_>, input: &Bound<'_, PyAny>, dout: &Bound<'_, PyAny>, dinput: &Bound<'_, PyAny>) -> PyResult<()> {
    let call = Call::new(py, "ferrocuda::silu_and_mul_backward", &[("input", input), ("dout", dout)], &[("dinput", dinput)])?;
    let shape = rows_shape(&call, "dout")?;
    dispatch_float!(call.op(), call.info("input")?.dtype, T => {
        let (input, dout) = (call.input::<T>("input")?, call.input::<T>("dout")?);
        let mut dinput = call.output::<T>("dinput")?;
        rows::silu_and_mul_backward(call.stream(), &input, &dout, &mut dinput, shape).map_err(gpu_error)
    })
}

/// Rotary embedding (rotate-half) of `x` (`[..., heads, head_dim]`), `positions` int32 (one per
/// token), `cos`/`sin` f32 `[max_positions, rotary_dim / 2]`; `inverse` for the backward.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn rotary(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    positions: &Bound<'_, PyAny>,
    cos: &Bound<'_, PyAny>,
    sin: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
    inverse: bool,
) -> PyResult<()> {
    let call = Call::new(py, "ferrocuda::rotary", &[("x", x), ("positions", positions), ("cos", cos), ("sin", sin)], &[("out", out)])?;
    let xi = call.info("x")?;
    let ci = call.info("cos")?;
    let (heads, head_dim) = match xi.shape[..] {
        [.., h, d] if h > 0 && d > 0 => (h, d),
        _ => return Err(PyValueError::new_err(format!("ferrocuda::rotary: x has shape {:?}; it needs [..., heads, head_dim]", xi.shape))),
    };
    let (max_positions, half) = match ci.shape[..] {
        [p, r] => (p, r),
        _ => return Err(PyValueError::new_err(format!("ferrocuda::rotary: cos has shape {:?}; it needs [max_positions, rotary_dim / 2]", ci.shape))),
    };
    let shape = Rope { tokens: xi.numel / (heads * head_dim), heads, head_dim, rotary_dim: 2 * half, max_positions };
    dispatch_float!(call.op(), xi.dtype, T => {
        let (x, positions) = (call.input::<T>("x")?, call.input::<u32>("positions")?);
        let (cos, sin) = (call.input::<f32>("cos")?, call.input::<f32>("sin")?);
        let mut out = call.output::<T>("out")?;
        rows::rotary_embedding(call.stream(), &x, &positions, &cos, &sin, &mut out, shape, inverse).map_err(gpu_error)
    })
}

/// One AdamW step in place on `params`, `m`, `v` (f32 moments).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn adamw(
    py: Python<'_>,
    params: &Bound<'_, PyAny>,
    grads: &Bound<'_, PyAny>,
    m: &Bound<'_, PyAny>,
    v: &Bound<'_, PyAny>,
    lr: f32,
    beta1: f32,
    beta2: f32,
    eps: f32,
    weight_decay: f32,
    step: u32,
    grad_scale: f32,
) -> PyResult<()> {
    let call = Call::new(py, "ferrocuda::adamw_", &[("grads", grads)], &[("params", params), ("m", m), ("v", v)])?;
    let hyper = AdamW { learning_rate: lr, beta1, beta2, eps, weight_decay };
    dispatch_float!(call.op(), call.info("params")?.dtype, T => {
        let grads = call.input::<T>("grads")?;
        let (mut params, mut m, mut v) = (call.output::<T>("params")?, call.output::<f32>("m")?, call.output::<f32>("v")?);
        rows::adamw(call.stream(), &mut params, &grads, &mut m, &mut v, hyper, step, grad_scale).map_err(gpu_error)
    })
}

/// The attention shape of `q` `[B, Hq, Sq, D]` and `k` `[B, Hkv, Skv, D]`.
fn attention_shape(call: &Call, causal: bool) -> PyResult<Attention> {
    let (q, k) = (call.info("q")?, call.info("k")?);
    match (&q.shape[..], &k.shape[..]) {
        (&[b, hq, sq, d], &[bk, hkv, skv, dk]) if b == bk && d == dk => {
            Ok(Attention { batch: b, heads_q: hq, heads_kv: hkv, seq_q: sq, seq_kv: skv, head_dim: d, layout: Layout::Bhsd, causal, scale: None })
        }
        _ => Err(PyValueError::new_err(format!(
            "{}: q {:?} and k {:?} must be [batch, heads, seq, head_dim] with the same batch and head_dim",
            call.op(),
            q.shape,
            k.shape
        ))),
    }
}

/// Attention forward: `out` and `lse` (f32, `[B, Hq, Sq]`).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn attention_forward(
    py: Python<'_>,
    q: &Bound<'_, PyAny>,
    k: &Bound<'_, PyAny>,
    v: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
    lse: &Bound<'_, PyAny>,
    causal: bool,
) -> PyResult<()> {
    let call = Call::new(py, "ferrocuda::attention", &[("q", q), ("k", k), ("v", v)], &[("out", out), ("lse", lse)])?;
    let shape = attention_shape(&call, causal)?;
    dispatch_float!(call.op(), call.info("q")?.dtype, T => {
        let (q, k, v) = (call.input::<T>("q")?, call.input::<T>("k")?, call.input::<T>("v")?);
        let (mut out, mut lse) = (call.output::<T>("out")?, call.output::<f32>("lse")?);
        attention::attention_forward(call.stream(), &q, &k, &v, &mut out, &mut lse, shape).map_err(gpu_error)
    })
}

/// The length of the f32 scratch of the attention backward.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn attention_scratch_len(batch: usize, heads_q: usize, heads_kv: usize, seq_q: usize, seq_kv: usize, head_dim: usize, causal: bool) -> usize {
    attention::backward_scratch_len(&Attention { batch, heads_q, heads_kv, seq_q, seq_kv, head_dim, layout: Layout::Bhsd, causal, scale: None })
}

/// Attention backward: `dq`, `dk`, `dv`.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn attention_backward(
    py: Python<'_>,
    q: &Bound<'_, PyAny>,
    k: &Bound<'_, PyAny>,
    v: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
    dout: &Bound<'_, PyAny>,
    lse: &Bound<'_, PyAny>,
    dq: &Bound<'_, PyAny>,
    dk: &Bound<'_, PyAny>,
    dv: &Bound<'_, PyAny>,
    scratch: &Bound<'_, PyAny>,
    causal: bool,
) -> PyResult<()> {
    let call = Call::new(
        py,
        "ferrocuda::attention_backward",
        &[("q", q), ("k", k), ("v", v), ("out", out), ("dout", dout), ("lse", lse)],
        &[("dq", dq), ("dk", dk), ("dv", dv), ("scratch", scratch)],
    )?;
    let shape = attention_shape(&call, causal)?;
    dispatch_float!(call.op(), call.info("q")?.dtype, T => {
        let (q, k, v) = (call.input::<T>("q")?, call.input::<T>("k")?, call.input::<T>("v")?);
        let (out, dout, lse) = (call.input::<T>("out")?, call.input::<T>("dout")?, call.input::<f32>("lse")?);
        let (mut dq, mut dk, mut dv) = (call.output::<T>("dq")?, call.output::<T>("dk")?, call.output::<T>("dv")?);
        let mut scratch = call.output::<f32>("scratch")?;
        attention::attention_backward_with_scratch(call.stream(), &q, &k, &v, &out, &dout, &lse, &mut dq, &mut dk, &mut dv, &mut scratch, shape)
            .map_err(gpu_error)
    })
}

/// Adds the library ops to `m` (`ferrocuda_torch._C`).
pub fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(rmsnorm, m)?)?;
    m.add_function(wrap_pyfunction!(rmsnorm_backward, m)?)?;
    m.add_function(wrap_pyfunction!(norm_scratch_len, m)?)?;
    m.add_function(wrap_pyfunction!(layernorm, m)?)?;
    m.add_function(wrap_pyfunction!(layernorm_backward, m)?)?;
    m.add_function(wrap_pyfunction!(softmax, m)?)?;
    m.add_function(wrap_pyfunction!(cross_entropy, m)?)?;
    m.add_function(wrap_pyfunction!(gelu, m)?)?;
    m.add_function(wrap_pyfunction!(gelu_backward, m)?)?;
    m.add_function(wrap_pyfunction!(silu_and_mul, m)?)?;
    m.add_function(wrap_pyfunction!(silu_and_mul_backward, m)?)?;
    m.add_function(wrap_pyfunction!(rotary, m)?)?;
    m.add_function(wrap_pyfunction!(adamw, m)?)?;
    m.add_function(wrap_pyfunction!(attention_forward, m)?)?;
    m.add_function(wrap_pyfunction!(attention_scratch_len, m)?)?;
    m.add_function(wrap_pyfunction!(attention_backward, m)?)?;
    Ok(())
}
