//! G24R-2 (audit 2026-11-29f): two `Call`s, one inside the other's closure, lend slices of the
//! same torch memory, and one launch takes both: an input slice of the outer call and an output
//! slice of the inner one. Each call checks that its own outputs overlap nothing of its own
//! (`check_tensors`); nothing checks across calls. No `unsafe` in this crate: only the safe API an
//! op author has (`Call::with`, `Call::input`, `Call::output`, a `#[kernel]` launcher).
//!
//! The kernel is `g23r_kernels::scale_add` (`out[i] = alpha * x[i] + y[i]`, one element a thread,
//! `x` read as a `&[f32]`: `ld.global.nc` in its PTX).

use ferrocuda_host::LaunchConfig;
use ferrocuda_torch::glue::{Call, gpu_error};
use pyo3::prelude::*;

/// `out = alpha * x + y` in one call: the library's own overlap check refuses `out` overlapping
/// `x` (the control).
#[pyfunction]
fn one_call(py: Python<'_>, x: Bound<'_, PyAny>, y: Bound<'_, PyAny>, out: Bound<'_, PyAny>, alpha: f32) -> PyResult<()> {
    Call::with(py, "g24r2::one_call", &[("x", &x), ("y", &y)], &[("out", &out)], |call| {
        let (xs, ys) = (call.input::<f32>("x")?, call.input::<f32>("y")?);
        let mut outs = call.output::<f32>("out")?;
        let config = LaunchConfig::for_elements(xs.len().max(1), 256);
        g23r_kernels::scale_add::launch(call.stream(), config, alpha, &xs, &ys, &mut outs).map_err(gpu_error)
    })
}

/// The same launch with `x` and `y` lent by an outer call and `out` by an inner call opened in
/// the outer call's closure: nothing compares `out` with `x`.
#[pyfunction]
fn nested_calls(py: Python<'_>, x: Bound<'_, PyAny>, y: Bound<'_, PyAny>, out: Bound<'_, PyAny>, alpha: f32) -> PyResult<()> {
    Call::with(py, "g24r2::outer", &[("x", &x), ("y", &y)], &[], |outer| {
        let (xs, ys) = (outer.input::<f32>("x")?, outer.input::<f32>("y")?);
        Call::with(py, "g24r2::inner", &[], &[("out", &out)], |inner| {
            let mut outs = inner.output::<f32>("out")?;
            let config = LaunchConfig::for_elements(xs.len().max(1), 256);
            g23r_kernels::scale_add::launch(inner.stream(), config, alpha, &xs, &ys, &mut outs).map_err(gpu_error)
        })
    })
}

/// The module.
#[pymodule]
fn g24r2_op(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(one_call, m)?)?;
    m.add_function(wrap_pyfunction!(nested_calls, m)?)?;
    Ok(())
}
