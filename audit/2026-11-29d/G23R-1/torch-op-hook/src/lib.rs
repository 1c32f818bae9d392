//! G23R-1 (audit 2026-11-29d): an op author's *safe* Rust runs Python code, or lets the GIL go,
//! between the `Call`'s final read of a tensor's address and the launch. ferrocuda-torch's
//! soundness argument ("From there to the launch no Python code runs", glue.rs, "Why the memory
//! is there") rests on that never happening, but nothing enforces it: the launch closure of
//! `Op::launch` and every caller of the public `Call::new` hold (or can get) the GIL token, and
//! the slices being `!Send` does not stop `py.detach(|| ..)` with nothing captured.
//!
//! No `unsafe` in this crate. Three ways, all the template's `scale_add` kernel
//! (`out = alpha * x + y`):
//! - `scale_add_into(x, y, out, alpha, hook)`: `Call::new`, slices taken, `hook()` called (any
//!   Python: it frees `out`'s memory with `out.untyped_storage().resize_(0)` and allocates
//!   another tensor, which torch's caching allocator puts in the same block), then the launch
//!   writes `out`'s old address: the other tensor is overwritten.
//! - `torch.ops.g23r1.scale_add_hook(x, y, alpha)`: the same from an `Op`'s launch closure
//!   (`Python::attach` inside it), the hook freeing `x`: the kernel reads another tensor.
//! - `torch.ops.g23r1.scale_add_detach(x, y, alpha)`: the closure only lets the GIL go for a
//!   while (`py.detach(|| sleep)`, capturing nothing: the `!Send` slices stay on the stack);
//!   another Python thread frees `x` meanwhile.

use std::sync::Mutex;
use std::time::Duration;

use ferrocuda_host::{DeviceBuffer, LaunchConfig};
use ferrocuda_torch::glue::{self, Call, DType, gpu_error};
use ferrocuda_torch::op::{self, Op, Scalar};
use pyo3::prelude::*;

/// The Python callable the `_hook` op calls between taking its slices and launching.
static HOOK: Mutex<Option<Py<PyAny>>> = Mutex::new(None);

/// G23R-2: a ferrocuda buffer the `_scratch` op also writes, and the buffer allocated after it
/// is freed (to read what a replay wrote there).
static SCRATCH: Mutex<Option<DeviceBuffer<f32>>> = Mutex::new(None);
static VICTIMS: Mutex<Vec<DeviceBuffer<f32>>> = Mutex::new(Vec::new());

/// G23R-2: allocates the scratch buffer (`n` zeros) in device 0's primary context (torch's).
#[pyfunction]
fn alloc_scratch(n: usize) -> PyResult<u64> {
    let buffer = DeviceBuffer::from_slice(&glue::context(0)?, &vec![0.0f32; n]).map_err(gpu_error)?;
    let address = buffer.device_ptr();
    *SCRATCH.lock().unwrap() = Some(buffer);
    Ok(address)
}

/// G23R-2: drops the scratch buffer (ferrocuda frees it: no use of it is recorded).
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

/// G23R-4: makes a `Call` (public, safe) and forgets it (`mem::forget`, safe): its guards never
/// run, so the cyclic garbage collector it paused stays off for the rest of the process, and
/// the primary context it pushed stays on this thread's context stack.
#[pyfunction]
fn forget_call(py: Python<'_>, x: Bound<'_, PyAny>, out: Bound<'_, PyAny>) -> PyResult<()> {
    let call = Call::new(py, "g23r4::forget_call", &[("x", &x)], &[("out", &out)])?;
    std::mem::forget(call);
    Ok(())
}

/// Sets the hook of `scale_add_hook`.
#[pyfunction]
fn set_hook(hook: Py<PyAny>) {
    *HOOK.lock().unwrap() = Some(hook);
}

/// `out = alpha * x + y` through `Call::new` (the public constructor), calling `hook()` after the
/// slices are taken and before the launch.
#[pyfunction]
fn scale_add_into(py: Python<'_>, x: Bound<'_, PyAny>, y: Bound<'_, PyAny>, out: Bound<'_, PyAny>, alpha: f32, hook: Bound<'_, PyAny>) -> PyResult<()> {
    let call = Call::new(py, "g23r1::scale_add_into", &[("x", &x), ("y", &y)], &[("out", &out)])?;
    let (xs, ys) = (call.input::<f32>("x")?, call.input::<f32>("y")?);
    let mut outs = call.output::<f32>("out")?;
    hook.call0()?; // any Python code, with the GIL this thread holds
    let config = LaunchConfig::for_elements(xs.len().max(1), 256);
    my_kernels::scale_add::launch(call.stream(), config, alpha, &xs, &ys, &mut outs).map_err(gpu_error)
}

/// The module.
#[pymodule]
fn g23r1_op(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(set_hook, m)?)?;
    m.add_function(wrap_pyfunction!(scale_add_into, m)?)?;
    for f in [
        wrap_pyfunction!(alloc_scratch, m)?,
        wrap_pyfunction!(free_scratch, m)?,
        wrap_pyfunction!(alloc_victim, m)?,
        wrap_pyfunction!(read_victim, m)?,
        wrap_pyfunction!(forget_call, m)?,
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
                my_kernels::scale_add::launch(call.stream(), config, scalars.float("alpha")? as f32, &x, &y, &mut out).map_err(gpu_error)
            },
        );
    let detach =
        Op::new("g23r1::scale_add_detach").input("x", &[DType::F32]).input_like("y", "x").scalar("alpha", Scalar::Float).output_like("out", "x").launch::<f32>(
            |call, scalars| {
                let (x, y) = (call.input::<f32>("x")?, call.input::<f32>("y")?);
                let mut out = call.output::<f32>("out")?;
                // Nothing `!Send` is moved into the closure: the slices stay here, alive, while
                // the GIL is let go and other threads' Python code runs.
                Python::attach(|py| py.detach(|| std::thread::sleep(Duration::from_millis(300))));
                let config = LaunchConfig::for_elements(x.len().max(1), 256);
                my_kernels::scale_add::launch(call.stream(), config, scalars.float("alpha")? as f32, &x, &y, &mut out).map_err(gpu_error)
            },
        );
    // G23R-2: the launch closure queues, on `call.stream()` (torch's current stream, which joins
    // torch's captures), a kernel writing a ferrocuda `DeviceBuffer` besides the op's output.
    // Inside `torch.cuda.graph` the kernel goes into torch's graph and no use of the buffer is
    // recorded; the buffer can then be dropped, and `g.replay()` writes where it was.
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
            my_kernels::scale_add::launch(call.stream(), config, alpha, &x, &y, &mut out).map_err(gpu_error)?;
            let mut guard = SCRATCH.lock().unwrap();
            if let Some(buffer) = guard.as_mut().filter(|b| b.len() == x.len()) {
                my_kernels::scale_add::launch(call.stream(), config, alpha, &x, &y, buffer).map_err(gpu_error)?;
            }
            Ok(())
        });
    op::register(m, vec![hook, detach, scratch])
}
