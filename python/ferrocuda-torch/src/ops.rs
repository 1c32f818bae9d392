//! The library's ops (`ferrocuda_kernels`), one [`Op`] declaration each: the table
//! [`library`]. `ferrocuda_torch/ops.py` registers them (`_C.register_library`) with the code
//! that registers a user's ops (`op::register`), adding the Python-side hooks a few need (a
//! conversion of arguments, a backward made of torch ops). Each launch takes the tensors the
//! generic path lends it ([`Call`]) and the scalars; nothing here allocates device memory (the
//! outputs and scratch come from torch), so every call may be recorded into a
//! `torch.cuda.graph`.
//!
//! Adding an op: a launch function (generic over the float element type) and one entry in
//! [`library`]; `ops.py` gets a public wrapper (defaults, docs) and, only where torch ops are
//! needed, a hook.

use ferrocuda_kernels::Element;
use ferrocuda_kernels::attention::{self, Attention, Layout};
use ferrocuda_kernels::rows::{self, AdamW, Rope, Rows};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::glue::{Call, DType, TorchElement, gpu_error};
use crate::op::{self, Grad, Inputs, Op, Scalar, Scalars, Shape};

/// The float element types of the kernels: `f32`, `bf16`, `f16`.
trait Float: Element + TorchElement {}
impl Float for f32 {}
impl Float for half::bf16 {}
impl Float for half::f16 {}

/// `$op` with the launch `$f::<T>` for each float element type.
macro_rules! floats {
    ($op:expr, $f:ident) => {
        $op.launch::<f32>($f::<f32>).launch::<half::bf16>($f::<half::bf16>).launch::<half::f16>($f::<half::f16>)
    };
}

const FLOATS: &[DType] = DType::FLOATS;
const F32: Option<DType> = Some(DType::F32);

fn rows_of(call: &Call, name: &str) -> PyResult<Rows> {
    let (rows, cols) = call.info(name)?.rows(call.op())?;
    Ok(Rows { rows, cols })
}

fn eps(s: &Scalars) -> PyResult<f32> {
    Ok(s.float("eps")? as f32)
}

/// The norms' backward scratch (each of two) for `x`'s rows.
fn norm_scratch(inputs: &Inputs<'_>, _: &Scalars) -> PyResult<usize> {
    let (rows, cols) = inputs.info("x")?.rows(inputs.op())?;
    Ok(rows::norm_backward_scratch_len(Rows { rows, cols }))
}

fn rmsnorm<T: Float>(call: &Call, s: &Scalars) -> PyResult<()> {
    let shape = rows_of(call, "x")?;
    let (x, w) = (call.input::<T>("x")?, call.input::<T>("weight")?);
    let (mut out, mut rstd) = (call.output::<T>("out")?, call.output::<f32>("rstd")?);
    rows::rmsnorm(call.stream(), &x, &w, &mut out, &mut rstd, shape, eps(s)?).map_err(gpu_error)
}

fn add_rmsnorm<T: Float>(call: &Call, s: &Scalars) -> PyResult<()> {
    let shape = rows_of(call, "x")?;
    let (x, residual, w) = (call.input::<T>("x")?, call.input::<T>("residual")?, call.input::<T>("weight")?);
    let (mut out, mut sum, mut rstd) = (call.output::<T>("out")?, call.output::<T>("sum")?, call.output::<f32>("rstd")?);
    rows::add_rmsnorm(call.stream(), &x, &residual, &w, &mut out, &mut sum, &mut rstd, shape, eps(s)?).map_err(gpu_error)
}

fn rmsnorm_backward<T: Float>(call: &Call, _: &Scalars) -> PyResult<()> {
    let shape = rows_of(call, "x")?;
    let (dout, x, w, rstd) = (call.input::<T>("dout")?, call.input::<T>("x")?, call.input::<T>("weight")?, call.input::<f32>("rstd")?);
    let (mut dx, mut dw) = (call.output::<T>("dx")?, call.output::<f32>("dweight")?);
    let (mut s1, mut s2) = (call.output::<f32>("scratch_dw")?, call.output::<f32>("scratch_db")?);
    rows::rmsnorm_backward_with_scratch(call.stream(), &dout, &x, &w, &rstd, None, &mut dx, &mut dw, &mut s1, &mut s2, shape).map_err(gpu_error)
}

/// RMSNorm backward for `sum = x + residual; out = rmsnorm(sum)`: `dsum` (the gradient of both
/// `x` and `residual`) from `dout` and `dsum_direct`, the gradient that reached `sum` itself.
fn add_rmsnorm_backward<T: Float>(call: &Call, _: &Scalars) -> PyResult<()> {
    let shape = rows_of(call, "sum")?;
    let (dout, dsum_direct) = (call.input::<T>("dout")?, call.input::<T>("dsum_direct")?);
    let (sum, w, rstd) = (call.input::<T>("sum")?, call.input::<T>("weight")?, call.input::<f32>("rstd")?);
    let (mut dx, mut dw) = (call.output::<T>("dsum")?, call.output::<f32>("dweight")?);
    let (mut s1, mut s2) = (call.output::<f32>("scratch_dw")?, call.output::<f32>("scratch_db")?);
    rows::rmsnorm_backward_with_scratch(call.stream(), &dout, &sum, &w, &rstd, Some(&dsum_direct), &mut dx, &mut dw, &mut s1, &mut s2, shape).map_err(gpu_error)
}

fn layernorm<T: Float>(call: &Call, s: &Scalars) -> PyResult<()> {
    let shape = rows_of(call, "x")?;
    let (x, w, b) = (call.input::<T>("x")?, call.input::<T>("weight")?, call.input::<T>("bias")?);
    let (mut out, mut mean, mut rstd) = (call.output::<T>("out")?, call.output::<f32>("mean")?, call.output::<f32>("rstd")?);
    rows::layernorm(call.stream(), &x, &w, &b, &mut out, &mut mean, &mut rstd, shape, eps(s)?).map_err(gpu_error)
}

fn add_layernorm<T: Float>(call: &Call, s: &Scalars) -> PyResult<()> {
    let shape = rows_of(call, "x")?;
    let (x, residual) = (call.input::<T>("x")?, call.input::<T>("residual")?);
    let (w, b) = (call.input::<T>("weight")?, call.input::<T>("bias")?);
    let (mut out, mut sum) = (call.output::<T>("out")?, call.output::<T>("sum")?);
    let (mut mean, mut rstd) = (call.output::<f32>("mean")?, call.output::<f32>("rstd")?);
    rows::add_layernorm(call.stream(), &x, &residual, &w, &b, &mut out, &mut sum, &mut mean, &mut rstd, shape, eps(s)?).map_err(gpu_error)
}

fn layernorm_backward<T: Float>(call: &Call, _: &Scalars) -> PyResult<()> {
    let shape = rows_of(call, "x")?;
    let (dout, x, w) = (call.input::<T>("dout")?, call.input::<T>("x")?, call.input::<T>("weight")?);
    let (mean, rstd) = (call.input::<f32>("mean")?, call.input::<f32>("rstd")?);
    let (mut dx, mut dw, mut db) = (call.output::<T>("dx")?, call.output::<f32>("dweight")?, call.output::<f32>("dbias")?);
    let (mut s1, mut s2) = (call.output::<f32>("scratch_dw")?, call.output::<f32>("scratch_db")?);
    rows::layernorm_backward_with_scratch(call.stream(), &dout, &x, &w, &mean, &rstd, None, &mut dx, &mut dw, &mut db, &mut s1, &mut s2, shape)
        .map_err(gpu_error)
}

/// Layer norm backward for `sum = x + residual; out = layernorm(sum)` (see
/// [`add_rmsnorm_backward`]).
fn add_layernorm_backward<T: Float>(call: &Call, _: &Scalars) -> PyResult<()> {
    let shape = rows_of(call, "sum")?;
    let (dout, dsum_direct) = (call.input::<T>("dout")?, call.input::<T>("dsum_direct")?);
    let (sum, w) = (call.input::<T>("sum")?, call.input::<T>("weight")?);
    let (mean, rstd) = (call.input::<f32>("mean")?, call.input::<f32>("rstd")?);
    let (mut dx, mut dw, mut db) = (call.output::<T>("dsum")?, call.output::<f32>("dweight")?, call.output::<f32>("dbias")?);
    let (mut s1, mut s2) = (call.output::<f32>("scratch_dw")?, call.output::<f32>("scratch_db")?);
    rows::layernorm_backward_with_scratch(call.stream(), &dout, &sum, &w, &mean, &rstd, Some(&dsum_direct), &mut dx, &mut dw, &mut db, &mut s1, &mut s2, shape)
        .map_err(gpu_error)
}

fn softmax<T: Float>(call: &Call, _: &Scalars) -> PyResult<()> {
    let shape = rows_of(call, "x")?;
    let (x, mut out) = (call.input::<T>("x")?, call.output::<T>("out")?);
    rows::softmax(call.stream(), &x, &mut out, shape).map_err(gpu_error)
}

/// Cross-entropy's forward: the loss of each row (`losses`, f32) and its log-sum-exp (`lse`,
/// f32, saved for the backward); no gradient is written here (autograd asks for it later, with
/// the upstream gradient). `targets` int32 (`-1`: an ignored row; `ops.py` converts torch's
/// int64 targets and `ignore_index` before the launch).
fn cross_entropy<T: Float>(call: &Call, _: &Scalars) -> PyResult<()> {
    let shape = rows_of(call, "logits")?;
    let (logits, targets) = (call.input::<T>("logits")?, call.input::<u32>("targets")?);
    let (mut losses, mut lse) = (call.output::<f32>("losses")?, call.output::<f32>("lse")?);
    rows::cross_entropy_forward(call.stream(), &logits, &targets, &mut losses, &mut lse, shape).map_err(gpu_error)
}

/// Cross-entropy's backward in one pass over the logits: `dlogits = (softmax(logits) -
/// onehot(targets)) * dlosses[row]` from the forward's `lse` and the gradient of each row's
/// loss (`dlosses`, f32: what autograd hands the op's `losses`, so any reduction of them), in
/// the logits' dtype. Targets as the forward's.
fn cross_entropy_backward<T: Float>(call: &Call, _: &Scalars) -> PyResult<()> {
    let shape = rows_of(call, "logits")?;
    let (logits, targets) = (call.input::<T>("logits")?, call.input::<u32>("targets")?);
    let (lse, dlosses) = (call.input::<f32>("lse")?, call.input::<f32>("dlosses")?);
    let mut dlogits = call.output::<T>("dlogits")?;
    rows::cross_entropy_backward(call.stream(), &logits, &targets, &lse, &dlosses, &mut dlogits, shape).map_err(gpu_error)
}

fn gelu<T: Float>(call: &Call, _: &Scalars) -> PyResult<()> {
    let (x, mut out) = (call.input::<T>("x")?, call.output::<T>("out")?);
    rows::gelu(call.stream(), &x, &mut out).map_err(gpu_error)
}

fn gelu_backward<T: Float>(call: &Call, _: &Scalars) -> PyResult<()> {
    let (x, dout, mut dx) = (call.input::<T>("x")?, call.input::<T>("dout")?, call.output::<T>("dx")?);
    rows::gelu_backward(call.stream(), &x, &dout, &mut dx).map_err(gpu_error)
}

fn silu_and_mul<T: Float>(call: &Call, _: &Scalars) -> PyResult<()> {
    let shape = rows_of(call, "out")?;
    let (input, mut out) = (call.input::<T>("input")?, call.output::<T>("out")?);
    rows::silu_and_mul(call.stream(), &input, &mut out, shape).map_err(gpu_error)
}

fn silu_and_mul_backward<T: Float>(call: &Call, _: &Scalars) -> PyResult<()> {
    let shape = rows_of(call, "dout")?;
    let (input, dout, mut dinput) = (call.input::<T>("input")?, call.input::<T>("dout")?, call.output::<T>("dinput")?);
    rows::silu_and_mul_backward(call.stream(), &input, &dout, &mut dinput, shape).map_err(gpu_error)
}

/// Rotary embedding (rotate-half) of `x` (`[..., heads, head_dim]`), `positions` int32 (one per
/// token; `ops.py` converts torch's int64), `cos`/`sin` f32 `[max_positions, rotary_dim / 2]`;
/// `inverse` for the backward.
fn rotary<T: Float>(call: &Call, s: &Scalars) -> PyResult<()> {
    let (xi, ci) = (call.info("x")?, call.info("cos")?);
    let (heads, head_dim) = match xi.shape[..] {
        [.., h, d] if h > 0 && d > 0 => (h, d),
        _ => return Err(PyValueError::new_err(format!("ferrocuda::rotary: x has shape {:?}; it needs [..., heads, head_dim]", xi.shape))),
    };
    let (max_positions, half) = match ci.shape[..] {
        [p, r] => (p, r),
        _ => return Err(PyValueError::new_err(format!("ferrocuda::rotary: cos has shape {:?}; it needs [max_positions, rotary_dim / 2]", ci.shape))),
    };
    let shape = Rope { tokens: xi.numel / (heads * head_dim), heads, head_dim, rotary_dim: 2 * half, max_positions };
    let (x, positions) = (call.input::<T>("x")?, call.input::<u32>("positions")?);
    let (cos, sin) = (call.input::<f32>("cos")?, call.input::<f32>("sin")?);
    let mut out = call.output::<T>("out")?;
    rows::rotary_embedding(call.stream(), &x, &positions, &cos, &sin, &mut out, shape, s.bool("inverse")?).map_err(gpu_error)
}

fn adamw<T: Float>(call: &Call, s: &Scalars) -> PyResult<()> {
    let step = s.int("step")?;
    let step =
        u32::try_from(step).ok().filter(|&n| n >= 1).ok_or_else(|| PyValueError::new_err(format!("ferrocuda::adamw_: step counts from 1, got {step}")))?;
    let f = |name| s.float(name).map(|v| v as f32);
    let hyper = AdamW { learning_rate: f("lr")?, beta1: f("beta1")?, beta2: f("beta2")?, eps: f("eps")?, weight_decay: f("weight_decay")? };
    let grads = call.input::<T>("grads")?;
    let (mut params, mut m, mut v) = (call.output::<T>("params")?, call.output::<f32>("m")?, call.output::<f32>("v")?);
    rows::adamw(call.stream(), &mut params, &grads, &mut m, &mut v, hyper, step, f("grad_scale")?).map_err(gpu_error)
}

/// The attention shape of `q` `[B, Hq, Sq, D]` and `k` `[B, Hkv, Skv, D]`.
fn attention_shape(op: &str, q: &crate::glue::TensorInfo, k: &crate::glue::TensorInfo, causal: bool) -> PyResult<Attention> {
    match (&q.shape[..], &k.shape[..]) {
        (&[b, hq, sq, d], &[bk, hkv, skv, dk]) if b == bk && d == dk => {
            Ok(Attention { batch: b, heads_q: hq, heads_kv: hkv, seq_q: sq, seq_kv: skv, head_dim: d, layout: Layout::Bhsd, causal, scale: None })
        }
        _ => Err(PyValueError::new_err(format!(
            "{op}: q {:?} and k {:?} must be [batch, heads, seq, head_dim] with the same batch and head_dim",
            q.shape, k.shape
        ))),
    }
}

fn attention<T: Float>(call: &Call, s: &Scalars) -> PyResult<()> {
    let shape = attention_shape(call.op(), call.info("q")?, call.info("k")?, s.bool("causal")?)?;
    let (q, k, v) = (call.input::<T>("q")?, call.input::<T>("k")?, call.input::<T>("v")?);
    let (mut out, mut lse) = (call.output::<T>("out")?, call.output::<f32>("lse")?);
    attention::attention_forward(call.stream(), &q, &k, &v, &mut out, &mut lse, shape).map_err(gpu_error)
}

fn attention_scratch(inputs: &Inputs<'_>, s: &Scalars) -> PyResult<usize> {
    // Long enough for the sm_90 backward, so a captured backward (`torch.cuda.graph`) keeps it.
    let shape = attention_shape(inputs.op(), inputs.info("q")?, inputs.info("k")?, s.bool("causal")?)?;
    Ok(attention::backward_scratch_len_fastest(&shape))
}

fn attention_backward<T: Float>(call: &Call, s: &Scalars) -> PyResult<()> {
    let shape = attention_shape(call.op(), call.info("q")?, call.info("k")?, s.bool("causal")?)?;
    let (q, k, v) = (call.input::<T>("q")?, call.input::<T>("k")?, call.input::<T>("v")?);
    let (out, dout, lse) = (call.input::<T>("out")?, call.input::<T>("dout")?, call.input::<f32>("lse")?);
    let (mut dq, mut dk, mut dv) = (call.output::<T>("dq")?, call.output::<T>("dk")?, call.output::<T>("dv")?);
    let mut scratch = call.output::<f32>("scratch")?;
    attention::attention_backward_with_scratch(
        call.stream(),
        attention::Backward { q: &q, k: &k, v: &v, out: &out, dout: &dout, lse: &lse, dq: &mut dq, dk: &mut dk, dv: &mut dv },
        &mut scratch,
        shape,
    )
    .map_err(gpu_error)
}

/// The library's ops, in the `ferrocuda` namespace. Inputs before scalars, in schema order;
/// the launch is picked by the first input's dtype.
pub fn library() -> Vec<Op> {
    use Grad::{Of, Saved};
    let op = |name: &str| Op::new(&format!("ferrocuda::{name}"));
    vec![
        // ---- RMSNorm: out = x / sqrt(mean(x², -1) + eps) * weight
        floats!(
            op("rmsnorm")
                .input("x", FLOATS)
                .input("weight", FLOATS)
                .scalar("eps", Scalar::Float)
                .output_like("out", "x")
                .output("rstd", "x", Shape::Rows, F32)
                .backward("rmsnorm_backward", &[Of("out"), Saved("x"), Saved("weight"), Saved("rstd")], &["x", "weight"]),
            rmsnorm
        ),
        floats!(
            op("rmsnorm_backward")
                .input("dout", FLOATS)
                .input("x", FLOATS)
                .input("weight", FLOATS)
                .input("rstd", &[DType::F32])
                .output_like("dx", "x")
                .output("dweight", "x", Shape::Last, F32)
                .scratch("scratch_dw", "x", norm_scratch)
                .scratch("scratch_db", "x", norm_scratch),
            rmsnorm_backward
        ),
        // ---- residual add + RMSNorm: sum = x + residual, out = rmsnorm(sum)
        floats!(
            op("add_rmsnorm")
                .input("x", FLOATS)
                .input("residual", FLOATS)
                .input("weight", FLOATS)
                .scalar("eps", Scalar::Float)
                .output_like("out", "x")
                .output_like("sum", "x")
                .output("rstd", "x", Shape::Rows, F32)
                .backward("add_rmsnorm_backward", &[Of("out"), Of("sum"), Saved("sum"), Saved("weight"), Saved("rstd")], &["x", "weight"])
                .shares_grad("residual", "x"),
            add_rmsnorm
        ),
        floats!(
            op("add_rmsnorm_backward")
                .input("dout", FLOATS)
                .input("dsum_direct", FLOATS)
                .input("sum", FLOATS)
                .input("weight", FLOATS)
                .input("rstd", &[DType::F32])
                .output_like("dsum", "sum")
                .output("dweight", "sum", Shape::Last, F32)
                .scratch("scratch_dw", "sum", |i, _| sum_scratch(i))
                .scratch("scratch_db", "sum", |i, _| sum_scratch(i)),
            add_rmsnorm_backward
        ),
        // ---- LayerNorm: out = (x - mean) * rstd * weight + bias
        floats!(
            op("layernorm")
                .input("x", FLOATS)
                .input("weight", FLOATS)
                .input("bias", FLOATS)
                .scalar("eps", Scalar::Float)
                .output_like("out", "x")
                .output("mean", "x", Shape::Rows, F32)
                .output("rstd", "x", Shape::Rows, F32)
                .backward("layernorm_backward", &[Of("out"), Saved("x"), Saved("weight"), Saved("mean"), Saved("rstd")], &["x", "weight", "bias"]),
            layernorm
        ),
        floats!(
            op("layernorm_backward")
                .input("dout", FLOATS)
                .input("x", FLOATS)
                .input("weight", FLOATS)
                .input("mean", &[DType::F32])
                .input("rstd", &[DType::F32])
                .output_like("dx", "x")
                .output("dweight", "x", Shape::Last, F32)
                .output("dbias", "x", Shape::Last, F32)
                .scratch("scratch_dw", "x", norm_scratch)
                .scratch("scratch_db", "x", norm_scratch),
            layernorm_backward
        ),
        // ---- residual add + LayerNorm
        floats!(
            op("add_layernorm")
                .input("x", FLOATS)
                .input("residual", FLOATS)
                .input("weight", FLOATS)
                .input("bias", FLOATS)
                .scalar("eps", Scalar::Float)
                .output_like("out", "x")
                .output_like("sum", "x")
                .output("mean", "x", Shape::Rows, F32)
                .output("rstd", "x", Shape::Rows, F32)
                .backward(
                    "add_layernorm_backward",
                    &[Of("out"), Of("sum"), Saved("sum"), Saved("weight"), Saved("mean"), Saved("rstd")],
                    &["x", "weight", "bias"]
                )
                .shares_grad("residual", "x"),
            add_layernorm
        ),
        floats!(
            op("add_layernorm_backward")
                .input("dout", FLOATS)
                .input("dsum_direct", FLOATS)
                .input("sum", FLOATS)
                .input("weight", FLOATS)
                .input("mean", &[DType::F32])
                .input("rstd", &[DType::F32])
                .output_like("dsum", "sum")
                .output("dweight", "sum", Shape::Last, F32)
                .output("dbias", "sum", Shape::Last, F32)
                .scratch("scratch_dw", "sum", |i, _| sum_scratch(i))
                .scratch("scratch_db", "sum", |i, _| sum_scratch(i)),
            add_layernorm_backward
        ),
        // ---- softmax over the last dimension (backward: torch ops in ops.py)
        floats!(op("softmax").input("x", FLOATS).output_like("out", "x"), softmax),
        // ---- cross-entropy: the losses and each row's log-sum-exp; the backward is one fused
        // pass (the library's cross_entropy_backward) scaled by the losses' gradient
        floats!(
            op("cross_entropy")
                .input("logits", FLOATS)
                .input("targets", &[DType::I32])
                .scalar("ignore_index", Scalar::Int)
                .output("losses", "logits", Shape::Rows, F32)
                .output("lse", "logits", Shape::Rows, F32)
                .backward("cross_entropy_backward", &[Saved("logits"), Saved("targets"), Saved("lse"), Of("losses"), Saved("ignore_index")], &["logits"]),
            cross_entropy
        ),
        floats!(
            op("cross_entropy_backward")
                .input("logits", FLOATS)
                .input("targets", &[DType::I32])
                .input("lse", &[DType::F32])
                .input("dlosses", &[DType::F32])
                .scalar("ignore_index", Scalar::Int)
                .output_like("dlogits", "logits"),
            cross_entropy_backward
        ),
        // ---- GELU (tanh)
        floats!(op("gelu").input("x", FLOATS).output_like("out", "x").backward("gelu_backward", &[Saved("x"), Of("out")], &["x"]), gelu),
        floats!(op("gelu_backward").input("x", FLOATS).input("dout", FLOATS).output_like("dx", "x"), gelu_backward),
        // ---- SiLU-and-mul (SwiGLU): out = silu(input[..., :d]) * input[..., d:]
        floats!(
            op("silu_and_mul").input("input", FLOATS).output("out", "input", Shape::HalfLast, None).backward(
                "silu_and_mul_backward",
                &[Saved("input"), Of("out")],
                &["input"]
            ),
            silu_and_mul
        ),
        floats!(op("silu_and_mul_backward").input("input", FLOATS).input("dout", FLOATS).output_like("dinput", "input"), silu_and_mul_backward),
        // ---- rotary embeddings (rotate-half); the backward is the inverse rotation
        floats!(
            op("rotary")
                .input("x", FLOATS)
                .input("positions", &[DType::I32])
                .input("cos", &[DType::F32])
                .input("sin", &[DType::F32])
                .scalar("inverse", Scalar::Bool)
                .output_like("out", "x")
                .backward("rotary", &[Of("out"), Saved("positions"), Saved("cos"), Saved("sin"), Grad::NotSaved("inverse")], &["x"]),
            rotary
        ),
        // ---- AdamW, in place on params, m, v
        floats!(
            op("adamw_")
                .input_mut("params", FLOATS)
                .input("grads", FLOATS)
                .input_mut("m", &[DType::F32])
                .input_mut("v", &[DType::F32])
                .scalar("lr", Scalar::Float)
                .scalar("beta1", Scalar::Float)
                .scalar("beta2", Scalar::Float)
                .scalar("eps", Scalar::Float)
                .scalar("weight_decay", Scalar::Float)
                .scalar("step", Scalar::Int)
                .scalar("grad_scale", Scalar::Float),
            adamw
        ),
        // ---- attention, [B, H, S, D]
        floats!(
            op("attention")
                .input("q", FLOATS)
                .input("k", FLOATS)
                .input("v", FLOATS)
                .scalar("causal", Scalar::Bool)
                .output_like("out", "q")
                .output("lse", "q", Shape::Rows, F32)
                .backward(
                    "attention_backward",
                    &[Saved("q"), Saved("k"), Saved("v"), Saved("out"), Of("out"), Saved("lse"), Saved("causal")],
                    &["q", "k", "v"]
                ),
            attention
        ),
        floats!(
            op("attention_backward")
                .input("q", FLOATS)
                .input("k", FLOATS)
                .input("v", FLOATS)
                .input("out", FLOATS)
                .input("dout", FLOATS)
                .input("lse", &[DType::F32])
                .scalar("causal", Scalar::Bool)
                .output_like("dq", "q")
                .output_like("dk", "k")
                .output_like("dv", "v")
                .scratch("scratch", "q", attention_scratch),
            attention_backward
        ),
    ]
}

/// The norms' backward scratch for the rows of `sum` (the fused residual norms).
fn sum_scratch(inputs: &Inputs<'_>) -> PyResult<usize> {
    let (rows, cols) = inputs.info("sum")?.rows(inputs.op())?;
    Ok(rows::norm_backward_scratch_len(Rows { rows, cols }))
}

/// Registers the library's ops with `torch.library` (namespace `ferrocuda`) into `module`,
/// with the Python-side `hooks` (by op name: `prepare`, `autograd`; see `register.py`).
#[pyfunction]
pub fn register_library(module: &Bound<'_, PyModule>, hooks: &Bound<'_, PyDict>) -> PyResult<()> {
    let py = module.py();
    let registrar = op::registrar(py)?;
    for spec in op::specs(py, library())? {
        let qualname: String = spec.get_item("qualname")?.expect("set by spec").extract()?;
        let name = qualname.rsplit("::").next().unwrap_or_default().to_string();
        let hook = hooks.get_item(&name)?;
        registrar.getattr("register")?.call1((module, spec, hook))?;
    }
    Ok(())
}

/// Host-only mode for the overhead benchmark and the CPU tests of the wiring (see
/// [`crate::glue::set_host_only`]).
#[pyfunction]
#[pyo3(name = "_set_host_only", signature = (on, zero_outputs = false))]
pub fn set_host_only(on: bool, zero_outputs: bool) {
    crate::glue::set_host_only(on, zero_outputs);
}

/// The GPU overhead benchmark's breakdown of a call (`bench/results/s24-torch/overhead.py`; not
/// an API): microseconds per step, each step run `iters` times on `x` (a CUDA float32 tensor)
/// and `out` (one like it), every step a path the ops take. Steps: torch's current stream read
/// (its C accessor), the device's context pushed and popped, a [`Call`] with no slice taken, one
/// with both slices taken and no launch, the read at use of one tensor (`record_stream` and the
/// read, G23R-1), a call launching GELU (what the op `gelu` runs below torch's dispatcher), and
/// the GELU launch alone inside one call (its two reads at use included).
#[pyfunction]
#[pyo3(name = "_bench_call_parts")]
pub fn bench_call_parts(py: Python<'_>, x: Bound<'_, PyAny>, out: Bound<'_, PyAny>, iters: usize) -> PyResult<Vec<(&'static str, f64)>> {
    use std::time::Instant;
    let iters = iters.max(1);
    let per = |start: Instant| start.elapsed().as_secs_f64() * 1e6 / iters as f64;
    let (inputs, outputs) = ([("x", &x)], [("out", &out)]);
    let op = "ferrocuda::bench_call_parts";
    let device = Call::with(py, op, &inputs, &outputs, |call| Ok(call.info("x")?.device))?;
    let mut rows = Vec::new();
    let start = Instant::now();
    for _ in 0..iters {
        crate::glue::torch_current_stream(py, device)?;
    }
    rows.push(("torch's current stream (C accessor)", per(start)));
    let context = crate::glue::context(device)?;
    let start = Instant::now();
    for _ in 0..iters {
        drop(context.push_current().map_err(gpu_error)?);
    }
    rows.push(("context push + pop", per(start)));
    let start = Instant::now();
    for _ in 0..iters {
        Call::with(py, op, &inputs, &outputs, |_| Ok(()))?;
    }
    rows.push(("Call::with, no slice taken", per(start)));
    let start = Instant::now();
    for _ in 0..iters {
        Call::with(py, op, &inputs, &outputs, |call| {
            let (_x, _out) = (call.input::<f32>("x")?, call.output::<f32>("out")?);
            Ok(())
        })?;
    }
    rows.push(("Call::with, both slices taken, no launch", per(start)));
    let at_use = Call::with(py, op, &inputs, &outputs, |call| {
        let start = Instant::now();
        for _ in 0..iters {
            call.check_at_use(0)?;
        }
        Ok(per(start))
    })?;
    rows.push(("read at use of one tensor (record_stream + read)", at_use));
    let start = Instant::now();
    for _ in 0..iters {
        Call::with(py, op, &inputs, &outputs, |call| {
            let (x, mut out) = (call.input::<f32>("x")?, call.output::<f32>("out")?);
            rows::gelu(call.stream(), &x, &mut out).map_err(gpu_error)
        })?;
    }
    rows.push(("Call::with + GELU launch (the op below the dispatcher)", per(start)));
    let launch = Call::with(py, op, &inputs, &outputs, |call| {
        let (x, mut out) = (call.input::<f32>("x")?, call.output::<f32>("out")?);
        let start = Instant::now();
        for _ in 0..iters {
            rows::gelu(call.stream(), &x, &mut out).map_err(gpu_error)?;
        }
        Ok(per(start))
    })?;
    rows.push(("GELU launch alone, in one call (2 reads at use included)", launch));
    Ok(rows)
}

/// The CPU measure of the read at use, session 23's way and now (`crate::native::bench_reads`;
/// bench/results/s24-torch/; not an API): microseconds per read of `tensor`, `iters` times each.
#[pyfunction]
#[pyo3(name = "_bench_reads")]
pub fn bench_reads(py: Python<'_>, tensor: Bound<'_, PyAny>, iters: usize) -> PyResult<Vec<(&'static str, f64)>> {
    crate::native::bench_reads(py, &tensor, iters)
}

/// Adds the library's registration to `m` (`ferrocuda_torch._C`).
pub fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(register_library, m)?)?;
    m.add_function(wrap_pyfunction!(set_host_only, m)?)?;
    m.add_function(wrap_pyfunction!(bench_call_parts, m)?)?;
    m.add_function(wrap_pyfunction!(bench_reads, m)?)?;
    Ok(())
}
