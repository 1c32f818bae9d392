//! torch tensors read (and their streams recorded) without running anyone's Python code.
//!
//! Every Python call a function makes while it holds a tensor's address is a window in which
//! other Python code may run: a `torch.Tensor` subclass's `__torch_function__`, a property it
//! overrides, a `TorchFunctionMode` or `TorchDispatchMode` of the thread, a DLPack producer's
//! `__dlpack__`. Any of them may `resize_()` a tensor whose address was already read: torch then
//! allocates new storage, copies, and frees the old memory *in place* (the tensor's storage
//! object stays, its data pointer is overwritten), so a slice over the old address points into
//! freed memory (audit 2026-11-28h, G20R-3). Holding the tensor, or a DLPack capsule of it (which
//! holds a view of the same storage object), does not pin the old memory.
//!
//! So the final read of every address happens here, after the last Python call that may run
//! such code, through a path that runs none: torch's C methods called unbound on the tensor
//! (`torch._C.TensorBase.data_ptr(t)`: no instance attribute or subclass method can stand in),
//! with `__torch_function__` handling off (`torch._C.DisableTorchFunction`: neither a subclass's
//! nor a mode's runs) and the Python dispatch keys excluded (`torch._C._DisableTorchDispatch`:
//! no `__torch_dispatch__` of a subclass or mode runs for the `record_stream` op). Between that
//! read and the use of the memory (the CPU executor's run, or the launch being queued) the
//! caller runs no Python code. torch and its modules themselves are trusted (they are the
//! platform the tensors come from); the objects passed in, and the hooks a program installs,
//! are not.

use std::cell::RefCell;
use std::sync::{Mutex, OnceLock};

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;

/// torch's entry points that run no user code (see the module's documentation).
struct Api {
    /// `torch._C.TensorBase`, the C base class of `torch.Tensor`.
    tensor_base: Py<PyAny>,
    disable_function: Py<PyAny>,
    disable_dispatch: Py<PyAny>,
    data_ptr: Py<PyAny>,
    numel: Py<PyAny>,
    element_size: Py<PyAny>,
    is_contiguous: Py<PyAny>,
    is_floating_point: Py<PyAny>,
    get_device: Py<PyAny>,
    size: Py<PyAny>,
    record_stream: Py<PyAny>,
    is_neg: Py<PyAny>,
    /// The getters of `requires_grad` and `device`.
    requires_grad: Py<PyAny>,
    device: Py<PyAny>,
    /// The getters of the `is_cuda` and `is_cpu` properties (`TensorBase.is_cuda.__get__`).
    is_cuda: Py<PyAny>,
    is_cpu: Py<PyAny>,
    current_stream: Py<PyAny>,
}

fn api(py: Python<'_>) -> PyResult<&'static Api> {
    static API: OnceLock<Api> = OnceLock::new();
    if let Some(api) = API.get() {
        return Ok(api);
    }
    let torch = py.import("torch")?;
    let c = torch.getattr("_C")?;
    let base = c.getattr("TensorBase").or_else(|_| c.getattr("_TensorBase"))?;
    let method = |name: &str| base.getattr(name).map(Bound::unbind);
    let getter = |name: &str| base.getattr(name).and_then(|d| d.getattr("__get__")).map(Bound::unbind);
    let api = Api {
        tensor_base: base.clone().unbind(),
        disable_function: c.getattr("DisableTorchFunction")?.unbind(),
        disable_dispatch: c.getattr("_DisableTorchDispatch")?.unbind(),
        data_ptr: method("data_ptr")?,
        numel: method("numel")?,
        element_size: method("element_size")?,
        is_contiguous: method("is_contiguous")?,
        is_floating_point: method("is_floating_point")?,
        get_device: method("get_device")?,
        size: method("size")?,
        record_stream: method("record_stream")?,
        is_neg: method("is_neg")?,
        requires_grad: getter("requires_grad")?,
        device: getter("device")?,
        is_cuda: getter("is_cuda")?,
        is_cpu: getter("is_cpu")?,
        current_stream: torch.getattr("cuda")?.getattr("current_stream")?.unbind(),
    };
    Ok(API.get_or_init(|| api))
}

/// Whether `object` is a `torch.Tensor` (a subclass too), without importing torch (an object of
/// that type exists only once torch is imported) and without running any Python code: the
/// type's C-level ancestry is checked (`PyType_IsSubtype`), not `isinstance`, which would ask the
/// object's `__class__` (a property a class may override).
#[cfg_attr(not(feature = "library"), allow(dead_code))]
pub(crate) fn is_tensor(py: Python<'_>, object: &Bound<'_, PyAny>) -> PyResult<bool> {
    if !loaded(py, "torch")? {
        return Ok(false);
    }
    let base = api(py)?.tensor_base.bind(py);
    // SAFETY: two live type objects (the object's own type and `torch._C.TensorBase`); the call
    // reads their MROs and runs no Python code.
    Ok(unsafe { pyo3::ffi::PyType_IsSubtype(object.get_type().as_type_ptr(), base.as_ptr().cast()) } != 0)
}

/// Whether `object`'s type is exactly `numpy.ndarray` (no subclass: an instance of a subclass may
/// carry a `__dlpack__` of its own), without importing NumPy and without running Python code.
#[cfg_attr(not(feature = "library"), allow(dead_code))]
pub(crate) fn is_exact_ndarray(py: Python<'_>, object: &Bound<'_, PyAny>) -> PyResult<bool> {
    if !loaded(py, "numpy")? {
        return Ok(false);
    }
    let ndarray = py.import(intern!(py, "numpy"))?.getattr(intern!(py, "ndarray"))?;
    Ok(object.get_type().is(&ndarray))
}

/// Whether the module `name` has been imported (is in `sys.modules`).
#[cfg_attr(not(feature = "library"), allow(dead_code))]
fn loaded(py: Python<'_>, name: &str) -> PyResult<bool> {
    py.import(intern!(py, "sys"))?.getattr(intern!(py, "modules"))?.contains(name)
}

/// Where a tensor lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Device {
    Cpu,
    Cuda(usize),
}

/// What a tensor is now, read by [`NoHooks`].
#[derive(Clone, Debug)]
pub(crate) struct Native {
    pub address: u64,
    pub numel: usize,
    pub element_size: usize,
    pub contiguous: bool,
    pub device: Device,
}

/// `__torch_function__` handling and the Python dispatch keys off while the value lives: the
/// calls made through it run torch's C code only.
///
/// One section per op (session 21): a [`NoHooks`] entered while another of the same thread is
/// alive enters nothing itself (a counter), so an op that holds one from its outputs'
/// allocation to its final read (`glue::verify`, which enters its own) pays for torch's two
/// guards once, not twice (each pair in and out is six Python calls, ~1.1 us). torch's guards are
/// left only when the last `NoHooks` of the thread is dropped, whatever the order of the drops,
/// so every one of them has the hooks off for its whole life.
pub(crate) struct NoHooks<'py> {
    py: Python<'py>,
    api: &'static Api,
}

/// torch's two guards, entered: `DisableTorchFunction` and `_DisableTorchDispatch`.
type Guards = (Py<PyAny>, Py<PyAny>);

thread_local! {
    /// How many [`NoHooks`] of this thread are alive, and torch's guards while any is. torch
    /// keeps the guards' state per thread too.
    static ENTERED: RefCell<(usize, Option<Guards>)> = const { RefCell::new((0, None)) };
}

impl<'py> NoHooks<'py> {
    /// Enters both guards (torch's own C context managers: entering them runs no Python code),
    /// unless a [`NoHooks`] of this thread already holds them.
    pub(crate) fn enter(py: Python<'py>) -> PyResult<Self> {
        let api = api(py)?;
        let nested = ENTERED.with_borrow_mut(|(live, _)| {
            let nested = *live > 0;
            if nested {
                *live += 1;
            }
            nested
        });
        if !nested {
            let function = api.disable_function.bind(py).call0()?;
            function.call_method0(intern!(py, "__enter__"))?;
            let dispatch = match api.disable_dispatch.bind(py).call0().and_then(|d| d.call_method0(intern!(py, "__enter__")).map(|_| d)) {
                Ok(dispatch) => dispatch,
                Err(error) => {
                    let _ = function.call_method1(intern!(py, "__exit__"), (py.None(), py.None(), py.None()));
                    return Err(error);
                }
            };
            ENTERED.with_borrow_mut(|entered| *entered = (1, Some((function.unbind(), dispatch.unbind()))));
        }
        Ok(NoHooks { py, api })
    }

    fn call(&self, f: &Py<PyAny>, tensor: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        f.bind(self.py).call1((tensor,))
    }

    /// What `tensor` (a `torch.Tensor`, subclasses included) is now. The data pointers of all
    /// of `tensors` are read first: a tensor without storage (a wrapper subclass, a fake tensor)
    /// fails there, before any other getter could reach a subclass's sizes or strides policy.
    pub(crate) fn read(&self, tensors: &[&Bound<'py, PyAny>]) -> PyResult<Vec<Native>> {
        let addresses: Vec<u64> = tensors.iter().map(|t| self.call(&self.api.data_ptr, t)?.extract()).collect::<PyResult<_>>()?;
        tensors
            .iter()
            .zip(addresses)
            .map(|(t, address)| {
                let device = if self.call(&self.api.is_cuda, t)?.extract()? {
                    let index: i64 = self.call(&self.api.get_device, t)?.extract()?;
                    Device::Cuda(usize::try_from(index).map_err(|_| PyValueError::new_err("a CUDA tensor with a negative device index"))?)
                } else if self.call(&self.api.is_cpu, t)?.extract()? {
                    Device::Cpu
                } else {
                    return Err(PyValueError::new_err("a tensor on a device other than the CPU or CUDA (meta, mps, ...): move it with .cuda()"));
                };
                Ok(Native {
                    address,
                    numel: self.call(&self.api.numel, t)?.extract()?,
                    element_size: self.call(&self.api.element_size, t)?.extract()?,
                    contiguous: self.call(&self.api.is_contiguous, t)?.extract()?,
                    device,
                })
            })
            .collect()
    }

    /// The address of element 0 of `tensor`.
    pub(crate) fn address(&self, tensor: &Bound<'py, PyAny>) -> PyResult<u64> {
        self.call(&self.api.data_ptr, tensor)?.extract()
    }

    /// `tensor.device` (torch's getter, not a property a subclass may define).
    pub(crate) fn device_object(&self, tensor: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        self.call(&self.api.device, tensor)
    }

    /// The shape of `tensor`.
    #[cfg_attr(not(feature = "library"), allow(dead_code))]
    pub(crate) fn shape(&self, tensor: &Bound<'py, PyAny>) -> PyResult<Vec<usize>> {
        let sizes: Vec<i64> = self.call(&self.api.size, tensor)?.extract()?;
        sizes.into_iter().map(|d| usize::try_from(d).map_err(|_| PyValueError::new_err("negative dimension"))).collect()
    }

    /// Why `tensor` cannot be handed over as plain memory the way torch's own `__dlpack__`
    /// would refuse it (it requires grad, or its negative bit is set), if it cannot.
    #[cfg_attr(not(feature = "library"), allow(dead_code))]
    pub(crate) fn refused_export(&self, tensor: &Bound<'py, PyAny>) -> PyResult<Option<&'static str>> {
        if self.call(&self.api.requires_grad, tensor)?.extract()? {
            return Ok(Some("a tensor that requires grad cannot be handed over (torch refuses to export it too): pass tensor.detach()"));
        }
        if self.call(&self.api.is_neg, tensor)?.extract()? {
            return Ok(Some("a tensor with its negative bit set cannot be handed over: call tensor.resolve_neg() first"));
        }
        Ok(None)
    }

    /// Whether `tensor` is float32 (torch's only floating-point dtype of 4 bytes).
    #[cfg_attr(not(feature = "library"), allow(dead_code))]
    pub(crate) fn is_f32(&self, tensor: &Bound<'py, PyAny>, native: &Native) -> PyResult<bool> {
        Ok(native.element_size == 4 && self.call(&self.api.is_floating_point, tensor)?.extract()?)
    }

    /// `tensor.record_stream(stream)` (torch's caching allocator then reuses the tensor's memory,
    /// when it is freed, only after the work queued on `stream` so far; a no-op for memory
    /// allocated on `stream`, and for memory not from the caching allocator).
    pub(crate) fn record_stream(&self, tensor: &Bound<'py, PyAny>, stream: &Bound<'py, PyAny>) -> PyResult<()> {
        self.api.record_stream.bind(self.py).call1((tensor, stream)).map(drop)
    }
}

impl Drop for NoHooks<'_> {
    fn drop(&mut self) {
        // Taken out before the calls: no borrow of the cell is held while Python runs.
        let last = ENTERED.with_borrow_mut(|(live, guards)| {
            *live -= 1;
            if *live == 0 { guards.take() } else { None }
        });
        if let Some((function, dispatch)) = last {
            let none = || (self.py.None(), self.py.None(), self.py.None());
            let _ = dispatch.bind(self.py).call_method1(intern!(self.py, "__exit__"), none());
            let _ = function.bind(self.py).call_method1(intern!(self.py, "__exit__"), none());
        }
    }
}

/// torch's current stream of CUDA device `device` as a `torch.cuda.Stream`, the handle `raw`
/// (read from torch just before). The object of the last handle asked for is kept: the same
/// handle is the same CUDA stream, which is all `record_stream` uses of it.
pub(crate) fn current_stream_object<'py>(py: Python<'py>, device: usize, raw: usize) -> PyResult<Bound<'py, PyAny>> {
    static LAST: Mutex<Option<(usize, usize, Py<PyAny>)>> = Mutex::new(None);
    if let Some((d, r, stream)) = LAST.lock().unwrap_or_else(|p| p.into_inner()).as_ref()
        && (*d, *r) == (device, raw)
    {
        return Ok(stream.bind(py).clone());
    }
    let stream = api(py)?.current_stream.bind(py).call1((device,))?;
    let handle: usize = stream.getattr(intern!(py, "cuda_stream"))?.extract()?;
    if handle != raw {
        return Err(PyRuntimeError::new_err(format!(
            "torch's current stream changed while the call read it ({raw:#x}, then {handle:#x}): do not switch streams from another thread during a call"
        )));
    }
    *LAST.lock().unwrap_or_else(|p| p.into_inner()) = Some((device, raw, stream.clone().unbind()));
    Ok(stream)
}
