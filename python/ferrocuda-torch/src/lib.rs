//! `ferrocuda_torch`: ferrocuda kernels as PyTorch ops, and the Rust side of your own.
//!
//! - [`glue`]: a [`glue::Call`] lends the `torch.Tensor`s of one op invocation to ferrocuda
//!   launches, zero-copy, on torch's current stream (graph captures included), with checks
//!   that name the argument at fault.
//! - [`op`]: declare an op ([`op::Op`]: inputs, scalars, outputs with shape rules, launches,
//!   backward) and register it with `torch.library` from your extension module
//!   (`templates/torch-op`); the library's ops are declared and registered the same way.
//! - With the `library` feature (default): the extension module `ferrocuda_torch._C`, with the
//!   table of the library's ops (`ferrocuda_kernels`: norms and the fused residual norms,
//!   softmax, cross-entropy, activations, rotary, AdamW, attention; `ferrocuda_torch/ops.py`
//!   registers them as `torch.ops.ferrocuda.*`), and the first three toy functions below, which
//!   take any DLPack array (NumPy too, on the CPU executor) as `ferrocuda_torch.dlpack`.
//!
//! The DLPack functions (`interop_kernels`: saxpy, RMSNorm, softmax):
//!
//! - CUDA tensors: imported through DLPack (`__dlpack__`), nothing copied; the kernel is
//!   launched on PyTorch's current stream of the tensor's device (`torch.cuda.current_stream`),
//!   in the device's primary context, the one PyTorch uses. Each tensor is borrowed
//!   (`ferrocuda_host::borrowed`) for the call, with that stream as its home stream, so
//!   PyTorch's work before and after the call is ordered with the kernel by the stream itself.
//!   The producers' capsules (their permission to free the memory) are kept until the kernel
//!   has completed, not just until the call returns (G18R-2): parked with an event, released
//!   at a later call or by `dlpack_release_pending` (see `dlpack.rs`). Refused while torch's
//!   current stream is captured into a graph.
//! - CPU tensors and NumPy arrays: the same kernels on ferrocuda's CPU executor, in place.
//!
//! Outputs are passed in (`out`, or `y` for saxpy) and written in place; an output may not
//! overlap any other argument (refused: the kernels read inputs as `&[f32]`, which must not
//! change under them). Every array is `float32`, C-contiguous, on one device.

#[cfg(feature = "library")]
mod dlpack;
pub mod glue;
mod native;
pub mod op;
#[cfg(feature = "library")]
mod ops;

/// The `half` crate (`bf16`, `f16`), for [`dispatch_float!`].
pub use half;

#[cfg(feature = "library")]
mod module {
    use std::sync::OnceLock;

    use crate::dlpack::{self, Imported, Place};
    use ferrocuda_device::cpu::CpuExecutor;
    use ferrocuda_host::{BorrowedSlice, BorrowedSliceMut, LaunchConfig, Stream};
    use interop_kernels::{rms_norm as rms_norm_kernel, rows_config, saxpy as saxpy_kernel, softmax as softmax_kernel};
    use pyo3::exceptions::{PyRuntimeError, PyValueError};
    use pyo3::prelude::*;

    /// The CPU executor, made on first use.
    fn executor() -> &'static CpuExecutor {
        static EXECUTOR: OnceLock<CpuExecutor> = OnceLock::new();
        EXECUTOR.get_or_init(CpuExecutor::new)
    }

    use crate::glue::{context, gpu_error};

    fn cpu_error(error: impl std::fmt::Display) -> PyErr {
        PyRuntimeError::new_err(format!("ferrocuda (CPU executor): {error}"))
    }

    use crate::glue::LAST_LAUNCH;

    /// The stream handle and the device addresses the last GPU call used (a library op or a
    /// DLPack function), or `None` before the first one: shows that the kernel ran on PyTorch's
    /// stream, on the tensors' own memory.
    #[pyfunction]
    fn last_launch() -> Option<(usize, Vec<u64>)> {
        LAST_LAUNCH.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The GPU side of one call: the home stream (PyTorch's current one, the stream the arrays
    /// were exported for) and the borrowed arrays. `run` gets the stream, the inputs and the
    /// outputs. Once `run` was called, the arrays' capsules are parked until the work it queued
    /// has completed on the GPU ([`dlpack::park`], G18R-2), whatever it returned.
    fn on_gpu(
        ordinal: usize,
        inputs: Vec<Imported>,
        outputs: Vec<Imported>,
        run: impl FnOnce(&Stream, &[BorrowedSlice<'_, f32>], &mut [BorrowedSliceMut<'_, f32>]) -> ferrocuda_host::Result<()>,
    ) -> PyResult<()> {
        let context = context(ordinal)?;
        // The device's context current for the call, the caller's again at its end (session 21).
        let _current = context.push_current().map_err(gpu_error)?;
        let raw = outputs.first().map_or(0, |output| output.stream);
        // SAFETY: PyTorch's current stream of this device (read by `import_all` in this call),
        // valid for this call, which is as long as the stream and its clones live (the borrows
        // below end with it, and the parked event keeps none); `()` is all it needs.
        let stream = unsafe { Stream::from_raw(&context, raw as ferrocuda_host::sys::CUstream, ()) }.map_err(gpu_error)?;
        let mut addresses = Vec::new();
        let mut reads = Vec::new();
        for input in &inputs {
            addresses.push(input.address);
            // SAFETY: a live array of the device, its address read after the last Python code
            // the call runs (`import_all`; none runs from there to the launch below), exported
            // or read for this stream (the producer's work on it is ordered before it). Its
            // capsule (or tensor) is held until the work queued here has completed (parked
            // below), so the producer does not free it before, and a torch tensor's memory, freed
            // or resized later, is reused only after that work (`record_stream` in `import_all`);
            // written on the device only as ordered with this stream (the DLPack contract; the
            // GIL orders nothing on the GPU, and no host reference to the memory is made here),
            // and no output overlaps it (`import_all`). Not covered (G21R-1, the documented
            // limit, docs/interop.md "Other threads"): another thread's torch op, already
            // running without the GIL, that frees a torch tensor's memory between its final
            // read and this launch (a `resize_` of a tensor on the same storage); torch's own
            // ops have the same window, which only torch could close (pinning the storage).
            reads.push(unsafe { BorrowedSlice::<f32>::new(&stream, input.address, input.len) }.map_err(gpu_error)?);
        }
        let mut writes = Vec::new();
        for output in &outputs {
            addresses.push(output.address);
            // SAFETY: as above, and no other argument overlaps it (checked by `import_all`).
            writes.push(unsafe { BorrowedSliceMut::<f32>::new(&stream, output.address, output.len) }.map_err(gpu_error)?);
        }
        let launched = run(&stream, &reads, &mut writes);
        // The borrows end first (their ends queue the ordering of the home stream), then the
        // event that marks the end of everything queued for this call.
        drop((reads, writes));
        dlpack::park(&context, &stream, inputs.into_iter().chain(outputs));
        launched.map_err(gpu_error)?;
        // The handle the work was queued on, as the door lends it (not `raw` again: the test
        // compares it with PyTorch's current stream).
        let queued_on = stream.enqueue("ferrocuda-torch: stream handle", &[], |handle| Ok::<_, ferrocuda_host::Error>(handle.get())).map_err(gpu_error)?;
        *LAST_LAUNCH.lock().unwrap_or_else(|p| p.into_inner()) = Some((queued_on as usize, addresses));
        Ok(())
    }

    /// Imports the arrays of one DLPack call, after releasing the capsules of earlier calls whose
    /// GPU work has completed.
    fn import_all<'py>(py: Python<'py>, inputs: &[&Bound<'py, PyAny>], output: &Bound<'py, PyAny>) -> PyResult<(Vec<Imported>, Imported)> {
        dlpack::release_completed(py);
        dlpack::import_all(py, inputs, output)
    }

    /// The number of arrays (DLPack capsules) the DLPack functions still hold because the GPU
    /// work of their calls had not been seen complete: their producers may not free them yet.
    /// Released at the next DLPack call once the work is done, or by `dlpack_release_pending`.
    #[pyfunction]
    fn dlpack_pending() -> usize {
        dlpack::parked_arrays()
    }

    /// Releases the arrays of earlier DLPack calls whose GPU work has completed; with
    /// `wait=True`, waits for the work of every call parked now first (the GIL released
    /// meanwhile). Returns the number of arrays still held (`dlpack_pending()`).
    #[pyfunction]
    #[pyo3(signature = (wait = false))]
    fn dlpack_release_pending(py: Python<'_>, wait: bool) -> usize {
        if wait { dlpack::release_all(py) } else { dlpack::release_completed(py) }
    }

    /// `y = a * x + y`, in place on `y` (same length as `x`).
    #[pyfunction]
    #[pyo3(name = "dlpack_saxpy")]
    fn saxpy(py: Python<'_>, a: f32, x: &Bound<'_, PyAny>, y: &Bound<'_, PyAny>) -> PyResult<()> {
        let (inputs, mut y) = import_all(py, &[x], y)?;
        let x = &inputs[0];
        if x.len != y.len {
            return Err(PyValueError::new_err(format!("saxpy: x has {} elements but y has {}", x.len, y.len)));
        }
        let config = LaunchConfig::for_elements(x.len.max(1), 256);
        match x.place {
            Place::Cpu => {
                // On copies (`Imported::host_values`: the GIL does not keep a host array unchanged).
                let mut values = y.host_values();
                saxpy_kernel::launch_cpu(executor(), config, a, &x.host_values(), &mut values).map_err(cpu_error)?;
                y.store_host(py, &values)?;
                Ok(())
            }
            Place::Cuda(ordinal) => on_gpu(ordinal, inputs, vec![y], |stream, r, w| saxpy_kernel::launch(stream, config, a, &r[0], &mut w[0])),
        }
    }

    /// `out = rms_norm(x) * weight` over the last dimension of `x` (whose size is `len(weight)`):
    /// `x / sqrt(mean(x², -1) + eps) * weight`, as `torch.nn.functional.rms_norm(x, (n,), weight, eps)`.
    #[pyfunction]
    #[pyo3(name = "dlpack_rms_norm", signature = (x, weight, out, eps = 1e-6))]
    fn rms_norm(py: Python<'_>, x: &Bound<'_, PyAny>, weight: &Bound<'_, PyAny>, out: &Bound<'_, PyAny>, eps: f32) -> PyResult<()> {
        let (inputs, mut out) = import_all(py, &[x, weight], out)?;
        let (x, weight) = (&inputs[0], &inputs[1]);
        let cols = weight.len;
        let rows = rows_of("rms_norm", x, cols)?;
        if out.shape != x.shape {
            return Err(PyValueError::new_err(format!("rms_norm: out has shape {:?} but x has {:?}", out.shape, x.shape)));
        }
        let config = rows_config(rows);
        let rows = u32::try_from(rows).map_err(|_| PyValueError::new_err("rms_norm: more than 2^32 rows"))?;
        match x.place {
            Place::Cpu => {
                // On copies, as in `saxpy`.
                let mut values = out.host_values();
                rms_norm_kernel::launch_cpu(executor(), config, &x.host_values(), &weight.host_values(), &mut values, rows, eps).map_err(cpu_error)?;
                out.store_host(py, &values)?;
                Ok(())
            }
            Place::Cuda(ordinal) => {
                on_gpu(ordinal, inputs, vec![out], |stream, r, w| rms_norm_kernel::launch(stream, config, &r[0], &r[1], &mut w[0], rows, eps))
            }
        }
    }

    /// `out = softmax(x, dim=-1)`.
    #[pyfunction]
    #[pyo3(name = "dlpack_softmax")]
    fn softmax(py: Python<'_>, x: &Bound<'_, PyAny>, out: &Bound<'_, PyAny>) -> PyResult<()> {
        let (inputs, mut out) = import_all(py, &[x], out)?;
        let x = &inputs[0];
        let cols = x.shape.last().copied().unwrap_or(1);
        let rows = rows_of("softmax", x, cols)?;
        if out.shape != x.shape {
            return Err(PyValueError::new_err(format!("softmax: out has shape {:?} but x has {:?}", out.shape, x.shape)));
        }
        let config = rows_config(rows);
        let (rows, cols) = match (u32::try_from(rows), u32::try_from(cols)) {
            (Ok(rows), Ok(cols)) => (rows, cols),
            _ => return Err(PyValueError::new_err("softmax: more than 2^32 rows or columns")),
        };
        match x.place {
            Place::Cpu => {
                // On copies, as in `saxpy`.
                let mut values = out.host_values();
                softmax_kernel::launch_cpu(executor(), config, &x.host_values(), &mut values, rows, cols).map_err(cpu_error)?;
                out.store_host(py, &values)?;
                Ok(())
            }
            Place::Cuda(ordinal) => on_gpu(ordinal, inputs, vec![out], |stream, r, w| softmax_kernel::launch(stream, config, &r[0], &mut w[0], rows, cols)),
        }
    }

    /// The number of rows of `x` read as rows of `cols` (its last dimension must be `cols`).
    fn rows_of(op: &str, x: &Imported, cols: usize) -> PyResult<usize> {
        match x.shape.last() {
            Some(&last) if last == cols && cols > 0 => Ok(x.len / cols),
            _ => Err(PyValueError::new_err(format!("{op}: the last dimension of x (shape {:?}) must be {cols} and not 0", x.shape))),
        }
    }

    /// The extension module `ferrocuda_torch._C` (the Python package `ferrocuda_torch` wraps it).
    #[pymodule]
    #[pyo3(name = "_C")]
    fn extension(m: &Bound<'_, PyModule>) -> PyResult<()> {
        m.add_function(wrap_pyfunction!(saxpy, m)?)?;
        m.add_function(wrap_pyfunction!(rms_norm, m)?)?;
        m.add_function(wrap_pyfunction!(softmax, m)?)?;
        m.add_function(wrap_pyfunction!(last_launch, m)?)?;
        m.add_function(wrap_pyfunction!(dlpack_pending, m)?)?;
        m.add_function(wrap_pyfunction!(dlpack_release_pending, m)?)?;
        crate::ops::add(m)?;
        Ok(())
    }
}
