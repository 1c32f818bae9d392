//! The ops of the G23R regression tests (audit 2026-11-29d; `tests/test_g23r_fixes.py`): an op
//! author's *safe* Rust that runs Python code, lets the GIL go, queues ferrocuda memory into a
//! torch capture, keeps the call's stream, or forgets the call. No `unsafe` in this crate.
//! Adapted from the review's repro crate (audit/2026-11-29d/G23R-1/torch-op-hook) to the session
//! 23 API (`Call::with` in place of `Call::new`).
//!
//! The kernel is the template's `scale_add` (`out = alpha * x + y`).
//!
//! Also G23L-1's second extension (`tests/test_g23l1_two_extensions.py`): this module links its
//! own copy of ferrocuda-torch beside `ferrocuda_torch`'s, registers its ops in two calls, and
//! `g23l1::gelu` has the signature of the library's `ferrocuda::gelu` (`out = 3 * x` here).

use std::sync::Mutex;
use std::time::Duration;

use ferrocuda_host::{DeviceBuffer, LaunchConfig, Stream};
use ferrocuda_torch::glue::{self, Call, DType, gpu_error};
use ferrocuda_torch::op::{self, Op, Scalar};
use pyo3::prelude::*;

/// The Python callable the `_hook` op calls between taking its slices and launching.
static HOOK: Mutex<Option<Py<PyAny>>> = Mutex::new(None);

/// G23R-2: a ferrocuda buffer the `_scratch` op also writes, and the buffers allocated after it
/// is freed (to read what a replay wrote there).
static SCRATCH: Mutex<Option<DeviceBuffer<f32>>> = Mutex::new(None);
static VICTIMS: Mutex<Vec<DeviceBuffer<f32>>> = Mutex::new(Vec::new());

/// G23R-2: a clone of a call's stream, kept past the call.
static KEPT: Mutex<Option<Stream>> = Mutex::new(None);

/// G23R-2: allocates the scratch buffer (`n` zeros) in device 0's primary context (torch's).
#[pyfunction]
fn alloc_scratch(n: usize) -> PyResult<u64> {
    let buffer = DeviceBuffer::from_slice(&glue::context(0)?, &vec![0.0f32; n]).map_err(gpu_error)?;
    let address = buffer.device_ptr();
    *SCRATCH.lock().unwrap() = Some(buffer);
    Ok(address)
}

/// G23R-2: drops the scratch buffer (ferrocuda frees it).
#[pyfunction]
fn free_scratch() {
    drop(SCRATCH.lock().unwrap().take());
}

/// G23R-2: new ferrocuda buffers of `n` sevens, up to 16, until one lands at `want` (the freed
/// scratch's address); returns the last one's address (all are kept).
#[pyfunction]
fn alloc_victim(n: usize, want: u64) -> PyResult<u64> {
    let context = glue::context(0)?;
    let mut victims = VICTIMS.lock().unwrap();
    for _ in 0..16 {
        let buffer = DeviceBuffer::from_slice(&context, &vec![7.0f32; n]).map_err(gpu_error)?;
        let address = buffer.device_ptr();
        victims.push(buffer);
        if address == want {
            break;
        }
    }
    Ok(victims.last().map_or(0, |b| b.device_ptr()))
}

/// G23R-2: the victim's first `k` values, read back (a synchronous copy).
#[pyfunction]
fn read_victim(k: usize) -> PyResult<Vec<f32>> {
    let guard = VICTIMS.lock().unwrap();
    let buffer = guard.last().ok_or_else(|| pyo3::exceptions::PyRuntimeError::new_err("no victim"))?;
    let all = buffer.to_vec().map_err(gpu_error)?;
    Ok(all[..k.min(all.len())].to_vec())
}

/// G23R-2: a call that keeps a clone of its stream (`Stream` is `Clone + Send + 'static`).
#[pyfunction]
fn keep_stream(py: Python<'_>, x: Bound<'_, PyAny>, out: Bound<'_, PyAny>) -> PyResult<()> {
    Call::with(py, "g23r2::keep_stream", &[("x", &x)], &[("out", &out)], |call| {
        *KEPT.lock().unwrap() = Some(call.stream().clone());
        Ok(())
    })
}

/// G23R-2: launches on the kept stream, after its call ended, with ferrocuda buffers of `n`
/// elements; returns the error's text, or `"launched"`.
#[pyfunction]
fn launch_on_kept_stream(n: usize) -> PyResult<String> {
    let stream = KEPT.lock().unwrap().clone().ok_or_else(|| pyo3::exceptions::PyRuntimeError::new_err("no kept stream"))?;
    let context = glue::context(0)?;
    let x = DeviceBuffer::from_slice(&context, &vec![1.0f32; n]).map_err(gpu_error)?;
    let mut out = DeviceBuffer::from_slice(&context, &vec![0.0f32; n]).map_err(gpu_error)?;
    let config = LaunchConfig::for_elements(n.max(1), 256);
    Ok(match g23r_kernels::scale_add::launch(&stream, config, 2.0, &x, &x, &mut out) {
        Ok(()) => "launched".to_string(),
        Err(error) => error.to_string(),
    })
}

/// G23R-4: a call whose closure forgets what it was lent (`mem::forget` of the `&Call`: the
/// `Call` itself is never the closure's to forget), then returns.
#[pyfunction]
#[allow(forgetting_references)] // the point: forgetting what is lent is all an op author can do
fn forget_call(py: Python<'_>, x: Bound<'_, PyAny>, out: Bound<'_, PyAny>) -> PyResult<()> {
    Call::with(py, "g23r4::forget_call", &[("x", &x)], &[("out", &out)], |call| {
        let (x, out) = (call.input::<f32>("x")?, call.output::<f32>("out")?);
        std::mem::forget(x);
        std::mem::forget(out);
        std::mem::forget(call);
        Ok(())
    })
}

/// Sets (or, with `None`, clears) the hook of `scale_add_hook`.
#[pyfunction]
#[pyo3(signature = (hook))]
fn set_hook(hook: Option<Py<PyAny>>) {
    *HOOK.lock().unwrap() = hook;
}

/// `out = alpha * x + y` through `Call::with`, calling `hook()` after the slices are taken and
/// before the launch.
#[pyfunction]
fn scale_add_into(py: Python<'_>, x: Bound<'_, PyAny>, y: Bound<'_, PyAny>, out: Bound<'_, PyAny>, alpha: f32, hook: Bound<'_, PyAny>) -> PyResult<()> {
    Call::with(py, "g23r1::scale_add_into", &[("x", &x), ("y", &y)], &[("out", &out)], |call| {
        let (xs, ys) = (call.input::<f32>("x")?, call.input::<f32>("y")?);
        let mut outs = call.output::<f32>("out")?;
        hook.call0()?; // any Python code, with the GIL this thread holds
        let config = LaunchConfig::for_elements(xs.len().max(1), 256);
        g23r_kernels::scale_add::launch(call.stream(), config, alpha, &xs, &ys, &mut outs).map_err(gpu_error)
    })
}

/// G24R-2 (audit 2026-11-29f): `out = alpha * x + y` with `x` and `y` lent by one call and `out`
/// by a second call opened inside the first one's closure, all three in one launch. Each call
/// checks overlaps among its own tensors only, so before the fix an `out` overlapping `x` launched;
/// now the inner call is refused (one open call per thread).
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
fn g23r_op(m: &Bound<'_, PyModule>) -> PyResult<()> {
    for f in [
        wrap_pyfunction!(set_hook, m)?,
        wrap_pyfunction!(scale_add_into, m)?,
        wrap_pyfunction!(alloc_scratch, m)?,
        wrap_pyfunction!(free_scratch, m)?,
        wrap_pyfunction!(alloc_victim, m)?,
        wrap_pyfunction!(read_victim, m)?,
        wrap_pyfunction!(keep_stream, m)?,
        wrap_pyfunction!(launch_on_kept_stream, m)?,
        wrap_pyfunction!(forget_call, m)?,
        wrap_pyfunction!(nested_calls, m)?,
    ] {
        m.add_function(f)?;
    }
    let hook =
        Op::new("g23r1::scale_add_hook").input("x", &[DType::F32]).input_like("y", "x").scalar("alpha", Scalar::Float).output_like("out", "x").launch::<f32>(
            |call, scalars| {
                let (x, y) = (call.input::<f32>("x")?, call.input::<f32>("y")?);
                let mut out = call.output::<f32>("out")?;
                // The op's thread holds the GIL (torch called us from Python): `attach` hands the
                // token back, and the hook runs.
                Python::attach(|py| -> PyResult<()> {
                    let hook = HOOK.lock().unwrap().as_ref().map(|h| h.clone_ref(py));
                    if let Some(hook) = hook {
                        hook.call0(py)?;
                    }
                    Ok(())
                })?;
                let config = LaunchConfig::for_elements(x.len().max(1), 256);
                g23r_kernels::scale_add::launch(call.stream(), config, scalars.float("alpha")? as f32, &x, &y, &mut out).map_err(gpu_error)
            },
        );
    let detach =
        Op::new("g23r1::scale_add_detach").input("x", &[DType::F32]).input_like("y", "x").scalar("alpha", Scalar::Float).output_like("out", "x").launch::<f32>(
            |call, scalars| {
                let (x, y) = (call.input::<f32>("x")?, call.input::<f32>("y")?);
                let mut out = call.output::<f32>("out")?;
                // Nothing `!Send` is moved into the closure: the slices stay here while the GIL is
                // let go and other threads' Python code runs.
                Python::attach(|py| py.detach(|| std::thread::sleep(Duration::from_millis(300))));
                let config = LaunchConfig::for_elements(x.len().max(1), 256);
                g23r_kernels::scale_add::launch(call.stream(), config, scalars.float("alpha")? as f32, &x, &y, &mut out).map_err(gpu_error)
            },
        );
    // G23R-2: the launch closure also queues, on `call.stream()`, a kernel writing a ferrocuda
    // `DeviceBuffer`: inside `torch.cuda.graph` the door now refuses it.
    let scratch = Op::new("g23r1::scale_add_scratch")
        .input("x", &[DType::F32])
        .input_like("y", "x")
        .scalar("alpha", Scalar::Float)
        .output_like("out", "x")
        .launch::<f32>(|call, scalars| {
            let (x, y) = (call.input::<f32>("x")?, call.input::<f32>("y")?);
            let mut out = call.output::<f32>("out")?;
            let alpha = scalars.float("alpha")? as f32;
            let config = LaunchConfig::for_elements(x.len().max(1), 256);
            g23r_kernels::scale_add::launch(call.stream(), config, alpha, &x, &y, &mut out).map_err(gpu_error)?;
            let mut guard = SCRATCH.lock().unwrap();
            if let Some(buffer) = guard.as_mut().filter(|b| b.len() == x.len()) {
                g23r_kernels::scale_add::launch(call.stream(), config, alpha, &x, &y, buffer).map_err(gpu_error)?;
            }
            Ok(())
        });
    op::register(m, vec![hook, detach, scratch])?;
    // G23L-1 (audit 2026-11-29d): a second registration of this extension, of an op with the
    // signature (and the name) of the library's `ferrocuda::gelu` in another namespace. Before
    // the fix, each registration re-ran the registrar in one shared module, which dropped the
    // `torch.library.Library` objects of every op registered before it (this module's first
    // batch, and `ferrocuda_torch`'s ops when that was imported first).
    // `out = 2 * x + x`: not the library's GELU, so a test can tell which op ran.
    let twin = Op::new("g23l1::gelu").input("x", &[DType::F32]).output_like("out", "x").launch::<f32>(|call, _| {
        let x = call.input::<f32>("x")?;
        let mut out = call.output::<f32>("out")?;
        let config = LaunchConfig::for_elements(x.len().max(1), 256);
        g23r_kernels::scale_add::launch(call.stream(), config, 2.0, &x, &x, &mut out).map_err(gpu_error)
    });
    op::register(m, vec![twin])
}
