//! Arrays in through DLPack (<https://dmlc.github.io/dlpack/latest/>): `__dlpack_device__`,
//! then `__dlpack__(stream=...)`, which hands over a capsule holding a `DLManagedTensor`.
//! Nothing is copied and nothing is freed twice: the capsule is never consumed, and dropping it
//! makes the producer's own capsule destructor release the array.
//!
//! **No Python code between an address and its use** (audit 2026-11-28h, G20R-3). A producer's
//! `__dlpack_device__` and `__dlpack__` are arbitrary Python, and so is anything a torch tensor
//! runs through `__torch_function__` or a mode. Such code may `resize_()` a torch tensor, which
//! frees its memory in place: the tensor, and a DLPack capsule of it (torch's capsule holds a
//! view of the same storage object, whose data pointer `resize_` overwrites), stay alive while
//! the memory does not. So an address read before such code runs may point into freed memory
//! when it is used. [`import_all`] therefore takes every address after the last Python code of
//! anyone's that the call runs, and the callers run none from there to the last use (the CPU
//! executor's run, or the launch being queued):
//!
//! - `torch.Tensor`s (subclasses too) are not exported at all: their address, size, dtype,
//!   layout and device are read last, through torch's C methods with `__torch_function__` and
//!   the Python dispatch keys off ([`crate::native`]), which run no Python code. On CUDA they are
//!   recorded on the stream first (`record_stream`, G20R-2's fix for the ops, in the same
//!   section), so torch reuses their memory, if they are freed or resized after the call, only
//!   after the call's work.
//! - `numpy.ndarray`s (exactly that type) are exported after every other producer: NumPy's
//!   `__dlpack__` is C code, and its capsule holds the array, which NumPy then refuses to
//!   resize (`ndarray.resize` checks that nothing else refers to it).
//! - Any other producer (a class of the user's, CuPy, JAX, ...) runs its own code: at most one
//!   per call, exported before every array above is read. Two would let the second's code free
//!   the first's memory (refused, with what to do: `torch.from_dlpack(x)` first, whose result is
//!   a torch tensor whose storage cannot be resized). Its capsule keeps its memory by the DLPack
//!   contract; one that exports a torch tensor's memory is only as good as that tensor is left
//!   alone after the call (pass torch tensors directly: they are recorded on the stream).
//!
//! **How long a capsule is kept.** Dropping the capsule is the producer's permission to free
//! (and reuse) the memory, so it must outlive every use of the memory:
//!
//! - Host arrays: the CPU executor has finished with them when the call returns; the capsule
//!   drops then.
//! - CUDA arrays: the kernel is only *queued* on torch's current stream when the call returns.
//!   A producer that orders its memory on a stream of its own (CuPy's and JAX's pools, torch on
//!   a side stream, any temporary array) would free it at once and hand it to its next array
//!   while our kernel still reads or writes it (audit 2026-11-28f, G18R-2: this module used to
//!   drop the capsule at the end of the call). So the capsules of a GPU call are *parked*
//!   ([`park`]) with an event recorded on the stream after the call's work, and released by
//!   [`release_completed`] (at the start of every later DLPack call, and from
//!   `ferrocuda_torch.dlpack.release_pending()`) once that event has completed, or by
//!   [`release_all`] (`release_pending(wait=True)`, and an `atexit` hook of the package),
//!   which waits for the events first. The common path never blocks: one event record per
//!   call, and one non-blocking query per parked call at the next call. What is parked is
//!   counted ([`parked_arrays`], `ferrocuda_torch.dlpack.pending()`): memory held past its use
//!   is visible, never a silent leak.
//! - Capsules are dropped only here, with the GIL held and outside the list's lock: a
//!   producer's deleter may run Python code, call CUDA, or call these functions again. Never in
//!   a CUDA host callback (the driver forbids CUDA calls there, and the GIL would be needed).
//! - If the event cannot be recorded after the launch (the driver fails, or a capture of the
//!   stream began in between on another thread), the call's work has no marker: its capsules
//!   stay parked until a wait for the whole context succeeds ([`release_all`]); they are
//!   counted like the others.
//!
//! **Graph captures.** A kernel queued while torch's current stream is captured runs at every
//! replay of the graph, at times nobody here knows, for as long as the graph lives; DLPack has
//! no way to tie a capsule to a graph's life, and a non-torch producer's memory is not in the
//! graph's memory pool. So the DLPack functions refuse to run while the stream is captured
//! ([`refuse_capture`]), *before* any producer's `__dlpack__` is called, for every producer
//! (torch tensors too: the ops of the package, `torch.ops.ferrocuda.*`, are the capture-safe
//! path, since their tensors are torch's, in the graph's pool). `Stream::from_raw` refuses a
//! captured stream again when the work is queued, and the door refuses work on a stream whose
//! capture began after that (`ForeignCapture`).

use std::ffi::{CStr, c_void};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use ferrocuda_host::{Context, Event, Stream};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// `kDLCPU` and `kDLCUDA` of `DLDeviceType`.
const CPU: i32 = 1;
const CUDA: i32 = 2;
/// `kDLFloat` of `DLDataTypeCode`.
const FLOAT: u8 = 2;

#[repr(C)]
struct DlDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
struct DlDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DlTensor {
    data: *mut c_void,
    device: DlDevice,
    ndim: i32,
    dtype: DlDataType,
    shape: *const i64,
    strides: *const i64,
    byte_offset: u64,
}

/// `DLManagedTensor` (DLPack < 1.0, what `__dlpack__` returns without `max_version`); only its
/// first member is read.
#[repr(C)]
struct DlManagedTensor {
    dl_tensor: DlTensor,
}

/// Where an array lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Host memory: the CPU executor runs the kernel.
    Cpu,
    /// Memory of CUDA device `n`.
    Cuda(usize),
}

/// One imported array: `len` contiguous `f32`s at `address`.
pub struct Imported {
    pub place: Place,
    pub address: u64,
    pub len: usize,
    pub shape: Vec<usize>,
    /// The raw CUDA stream the producer was asked to order its work before (torch's current
    /// stream of the device, 0 for the legacy default stream); 0 for host arrays. The call's
    /// work must be queued on it.
    pub stream: usize,
    /// Keeps the producer's memory alive (the capsule, or the torch tensor itself): dropped
    /// when the call ends for host arrays, parked until the call's GPU work has completed for
    /// CUDA arrays ([`park`]).
    keep: Py<PyAny>,
    /// A CPU torch tensor's values, copied out by torch into memory of the call's own when it
    /// was read (G21R-1: `address` is then never dereferenced; see [`Imported::host_values`]).
    copied: Option<Vec<f32>>,
    /// The garbage collector paused until the call has used the memory (held by the output:
    /// see `import_all`).
    _gc: Option<crate::native::GcPaused>,
}

impl Imported {
    /// The array's values, copied out (CPU arrays only).
    ///
    /// A copy, not a slice of the array: holding the GIL does not keep a host array unchanged.
    /// NumPy's ufunc loops and PyTorch's CPU ops release the GIL while they write, and the
    /// GIL can pass to another thread during this call (torch's `__dlpack__` is Python code),
    /// so another thread may be writing the array now. A `&[f32]` over it would then be a data
    /// race (undefined behaviour on our side); this copy reads each element once with an atomic
    /// load, so a concurrent writer can change which values the kernel sees, never make our
    /// accesses undefined. The kernel then runs on the copies (the CPU executor is far slower
    /// than the copy). Audit 2026-11-28g's wording note on the old `SAFETY` argument.
    ///
    /// A CPU torch tensor was copied when it was read, by torch (`clone`), not here: another
    /// thread's torch op, already running without the GIL, may free a tensor's memory at any
    /// moment (`resize_` of a tensor on the same storage; G21R-1), which no reference we hold
    /// prevents. Those values are returned. A NumPy array's memory cannot be freed while its
    /// capsule lives (NumPy refuses to resize an array referred to), and another producer's
    /// capsule keeps its memory by the DLPack contract.
    pub fn host_values(&self) -> Vec<f32> {
        assert_eq!(self.place, Place::Cpu, "host_values() of a device array");
        if let Some(values) = &self.copied {
            return values.clone();
        }
        (0..self.len)
            .map(|i| {
                // SAFETY: element `i` of `len` initialised f32s of host memory exported through
                // DLPack (not a torch tensor's: those are `copied`), its address read after the
                // last Python code the call runs (`import_all`; the callers run none until their
                // last use); a NumPy array's capsule holds the array, which NumPy refuses to
                // resize (free) while referred to; another producer's capsule keeps its memory
                // by the DLPack contract; 4-byte aligned (checked in `import`, as `AtomicU32`
                // needs); every access from this crate to it is atomic (here and in
                // `store_host`), so another thread's writes race with no non-atomic access of
                // ours.
                let cell = unsafe { AtomicU32::from_ptr((self.address as *mut u32).add(i)) };
                f32::from_bits(cell.load(Ordering::Relaxed))
            })
            .collect()
    }

    /// Writes `values` into the array (CPU outputs only), one atomic store per element, for
    /// the reason [`host_values`](Self::host_values) gives; a torch tensor through torch
    /// (`copy_` from a tensor of the call's own: G21R-1).
    pub fn store_host(&mut self, py: Python<'_>, values: &[f32]) -> PyResult<()> {
        assert_eq!(self.place, Place::Cpu, "store_host() of a device array");
        assert_eq!(values.len(), self.len, "store_host() of a different length");
        if self.copied.is_some() {
            let hooks = crate::native::NoHooks::enter(py)?;
            return hooks.copy_in(self.keep.bind(py), &self.shape, values);
        }
        for (i, &value) in values.iter().enumerate() {
            // SAFETY: as in `host_values`; the array is writable (an output: DLPack hands the
            // consumer the producer's memory, which NumPy and torch let it write), and no other
            // argument of the call overlaps it (`import_all`).
            let cell = unsafe { AtomicU32::from_ptr((self.address as *mut u32).add(i)) };
            cell.store(value.to_bits(), Ordering::Relaxed);
        }
        Ok(())
    }

    fn bytes(&self) -> std::ops::Range<u64> {
        self.address..self.address + 4 * self.len as u64
    }
}

/// PyTorch's current stream on CUDA device `ordinal` (0 is the legacy default stream), through
/// torch's checked C accessor ([`crate::glue::torch_current_stream`], G21R-2), or 0 when
/// PyTorch is not installed.
pub fn torch_current_stream(py: Python<'_>, ordinal: usize) -> PyResult<usize> {
    if py.import("torch").is_err() {
        return Ok(0);
    }
    crate::glue::torch_current_stream(py, ordinal)
}

/// What an array is, by its type alone (read without running Python code).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A `torch.Tensor` (subclasses too): read through torch's C methods, never exported.
    Tensor,
    /// Exactly a `numpy.ndarray`: exported by NumPy's C code.
    NumPy,
    /// Anything else: its `__dlpack_device__` and `__dlpack__` are Python code of its own.
    Foreign,
}

fn kind_of(py: Python<'_>, array: &Bound<'_, PyAny>) -> PyResult<Kind> {
    Ok(if crate::native::is_tensor(py, array)? {
        Kind::Tensor
    } else if crate::native::is_exact_ndarray(py, array)? {
        Kind::NumPy
    } else {
        Kind::Foreign
    })
}

/// Imports `inputs` and `output`: all on one device, `output` overlapping none of the inputs.
///
/// Every array's device is read first, and a CUDA call is refused while torch's current stream
/// is captured ([`refuse_capture`]) before any producer's `__dlpack__` is called. Then the
/// addresses are taken in an order that leaves no Python code of anyone's after any of them
/// (see the module's documentation): the one foreign producer's export (more are refused), the
/// NumPy arrays' exports, and last the torch tensors, read without running Python code.
pub fn import_all<'py>(py: Python<'py>, inputs: &[&Bound<'py, PyAny>], output: &Bound<'py, PyAny>) -> PyResult<(Vec<Imported>, Imported)> {
    let arrays: Vec<&Bound<'py, PyAny>> = inputs.iter().copied().chain(std::iter::once(output)).collect();
    let kinds: Vec<Kind> = arrays.iter().map(|a| kind_of(py, a)).collect::<PyResult<_>>()?;
    // The devices: the foreign producers' own word first (their code), then the tensors'.
    let mut places = Vec::with_capacity(arrays.len());
    for (array, kind) in arrays.iter().zip(&kinds) {
        places.push(match kind {
            Kind::Foreign => Some(place_of(array)?),
            Kind::NumPy => Some(Place::Cpu),
            Kind::Tensor => None,
        });
    }
    if kinds.contains(&Kind::Tensor) {
        let hooks = crate::native::NoHooks::enter(py)?;
        for ((array, kind), place) in arrays.iter().zip(&kinds).zip(&mut places) {
            if *kind == Kind::Tensor {
                *place = Some(tensor_place(hooks.read(&[*array])?[0].device));
            }
        }
    }
    let places: Vec<Place> = places.into_iter().map(|p| p.expect("every array's place was read")).collect();
    let output_place = *places.last().expect("the output is an array");
    for &place in &places[..inputs.len()] {
        if place != output_place {
            return Err(PyValueError::new_err(format!("arrays on different devices ({place:?} and {output_place:?}): move them to one first")));
        }
    }
    let stream = match output_place {
        Place::Cpu => 0,
        Place::Cuda(ordinal) => {
            let stream = torch_current_stream(py, ordinal)?;
            refuse_capture(ordinal, stream)?;
            stream
        }
    };
    if kinds.iter().filter(|k| **k == Kind::Foreign).count() > 1 {
        return Err(PyTypeError::new_err(
            "ferrocuda_torch.dlpack: at most one argument of a call may be an array other than a torch.Tensor or numpy.ndarray: another \
             producer's __dlpack__ runs Python code, which could free an array already exported (audit 2026-11-28h, G20R-3). Convert the \
             others first, e.g. torch.from_dlpack(x)",
        ));
    }
    // torch's current stream as an object, for `record_stream` below (torch's code, before the
    // producers run: a producer that switches streams does not change where the work goes).
    let stream_object = match output_place {
        Place::Cuda(ordinal) if kinds.contains(&Kind::Tensor) => Some(crate::native::current_stream_object(py, ordinal, stream)?),
        _ => None,
    };
    let mut imported: Vec<Option<Imported>> = arrays.iter().map(|_| None).collect();
    for wanted in [Kind::Foreign, Kind::NumPy] {
        for (i, (array, kind)) in arrays.iter().zip(&kinds).enumerate() {
            if *kind == wanted {
                imported[i] = Some(import(py, array, output_place, stream)?);
            }
        }
    }
    // The tensors, last, with no Python code of anyone's able to run from here on. Every tensor
    // is recorded on the stream first (`record_stream` is a dispatched torch op: with the
    // dispatch guard of `NoHooks` it runs no Python code, and should that guard be subverted,
    // what ran did so before any address below was read), then every one is read.
    let mut gc = None;
    if kinds.contains(&Kind::Tensor) {
        let hooks = crate::native::NoHooks::enter(py)?;
        // Paused after the last Python code the call may run, until the output drops (after the
        // CPU executor's run, or once the launch is queued: `on_gpu`).
        gc = Some(crate::native::GcPaused::enter(py)?);
        let tensors: Vec<(usize, &Bound<'py, PyAny>)> =
            arrays.iter().zip(&kinds).enumerate().filter(|(_, (_, kind))| **kind == Kind::Tensor).map(|(i, (array, _))| (i, *array)).collect();
        if let Some(stream) = &stream_object {
            for (_, array) in &tensors {
                hooks.record_stream(array, stream)?;
            }
        }
        for (i, array) in tensors {
            imported[i] = Some(import_tensor(&hooks, array, output_place, stream)?);
        }
    }
    let mut imported: Vec<Imported> = imported.into_iter().map(|a| a.expect("every array was imported")).collect();
    let mut output = imported.pop().expect("the output is an array");
    output._gc = gc;
    let inputs = imported;
    // Every array is at `output_place`: `import` and `import_tensor` checked it.
    for input in &inputs {
        let (a, b) = (input.bytes(), output.bytes());
        if input.len > 0 && output.len > 0 && a.start < b.end && b.start < a.end {
            return Err(PyValueError::new_err("the output overlaps an input: pass a separate output array (e.g. torch.empty_like(x))"));
        }
    }
    Ok((inputs, output))
}

fn tensor_place(device: crate::native::Device) -> Place {
    match device {
        crate::native::Device::Cpu => Place::Cpu,
        crate::native::Device::Cuda(ordinal) => Place::Cuda(ordinal),
    }
}

/// One torch tensor, read through `hooks` (no Python code runs): float32, C-contiguous, at
/// `place`. Its pending work is on torch's current stream, `stream`, which the call's work is
/// queued on (what `__dlpack__(stream=s)` arranges for `s` the current stream: nothing).
fn import_tensor<'py>(hooks: &crate::native::NoHooks<'py>, tensor: &Bound<'py, PyAny>, place: Place, stream: usize) -> PyResult<Imported> {
    let native = hooks.read(&[tensor])?.remove(0);
    if tensor_place(native.device) != place {
        return Err(PyValueError::new_err(format!("a tensor moved to {:?} while the call read its arguments (it was on {place:?})", native.device)));
    }
    if let Some(why) = hooks.refused_export(tensor)? {
        return Err(PyValueError::new_err(why));
    }
    if !hooks.is_f32(tensor, &native)? {
        return Err(PyTypeError::new_err("only float32 arrays are supported: convert with .float()"));
    }
    if !native.contiguous {
        return Err(PyValueError::new_err("the tensor is not C-contiguous: call .contiguous() first"));
    }
    let shape = hooks.shape(tensor)?;
    if shape.iter().product::<usize>() != native.numel {
        return Err(PyValueError::new_err("the tensor's shape and element count disagree"));
    }
    if native.numel > 0 && !native.address.is_multiple_of(4) {
        return Err(PyValueError::new_err(format!("the array's address {:#x} is not aligned for float32", native.address)));
    }
    let stream = if place == Place::Cpu { 0 } else { stream };
    // On the CPU the values are copied now, by torch (G21R-1: see `Imported::host_values`); the
    // address is kept for the overlap check alone.
    let copied = if place == Place::Cpu { Some(hooks.copy_out(tensor, native.numel)?) } else { None };
    Ok(Imported { place, address: native.address, len: native.numel, shape, stream, keep: tensor.clone().unbind(), copied, _gc: None })
}

/// Refuses a call on CUDA device `ordinal` while `stream` (torch's current stream there) is
/// being captured into a graph (see the module's documentation, "Graph captures").
fn refuse_capture(ordinal: usize, stream: usize) -> PyResult<()> {
    // The default stream handles (0 and `CU_STREAM_LEGACY`, `CU_STREAM_PER_THREAD`) are never
    // captured, and querying the legacy one during another stream's capture would invalidate
    // that capture: not asked.
    if stream <= 2 {
        return Ok(());
    }
    let context = crate::glue::context(ordinal)?;
    let current = context.push_current().map_err(crate::glue::gpu_error)?;
    let mut owner = std::ptr::null_mut();
    // SAFETY: torch's current stream of the device (from torch's checked C accessor, G21R-2), a
    // live stream; the call writes one context handle.
    unsafe { ferrocuda_host::driver::stream::get_ctx(stream as ferrocuda_host::sys::CUstream, &mut owner) }.map_err(crate::glue::gpu_error)?;
    if owner != context.raw() {
        return Err(PyRuntimeError::new_err(format!(
            "torch's current stream {stream:#x} of cuda:{ordinal} belongs to another context than the device's primary one: ferrocuda_torch runs \
             on torch's streams of the primary context only"
        )));
    }
    let mut status = ferrocuda_host::sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    // SAFETY: torch's current stream of the device, a live stream of its primary context (pushed
    // on this thread above, its owner checked just now); the call writes one enum value and
    // queues nothing.
    unsafe { ferrocuda_host::driver::stream::is_capturing(stream as ferrocuda_host::sys::CUstream, &mut status) }.map_err(crate::glue::gpu_error)?;
    drop((current, context));
    if status != ferrocuda_host::sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE {
        return Err(PyRuntimeError::new_err(
            "ferrocuda_torch.dlpack: torch's current stream is being captured into a CUDA graph: the DLPack functions cannot keep an array's \
             memory alive for the graph's replays, so they refuse to run in a capture. Inside torch.cuda.graph use the package's ops \
             (ferrocuda_torch.softmax, ferrocuda_torch.rmsnorm, torch.ops.ferrocuda.*), or call this function outside the capture",
        ));
    }
    Ok(())
}

/// Where `array` lives, from its `__dlpack_device__`.
fn place_of(array: &Bound<'_, PyAny>) -> PyResult<Place> {
    let type_name = || array.get_type().name().map(|n| n.to_string()).unwrap_or_default();
    let (device_type, device_id): (i32, i32) = array.call_method0("__dlpack_device__").and_then(|d| d.extract()).map_err(|_| {
        PyTypeError::new_err(format!("a {} is not an array this module can take: pass a torch.Tensor or numpy.ndarray (anything with __dlpack__)", type_name()))
    })?;
    match device_type {
        CPU => Ok(Place::Cpu),
        CUDA => Ok(Place::Cuda(usize::try_from(device_id).map_err(|_| PyValueError::new_err("negative CUDA device id"))?)),
        other => Err(PyValueError::new_err(format!("arrays on DLPack device type {other} are not supported: only CPU (1) and CUDA (2)"))),
    }
}

/// One array through DLPack: float32, C-contiguous, at `place` (its `__dlpack_device__`); for
/// a CUDA array, the producer orders its pending work on it before `stream`.
fn import(py: Python<'_>, array: &Bound<'_, PyAny>, place: Place, stream: usize) -> PyResult<Imported> {
    let capsule = match place {
        Place::Cpu => array.call_method0("__dlpack__")?,
        Place::Cuda(_) => {
            // DLPack spells the legacy default stream 1.
            let kwargs = PyDict::new(py);
            kwargs.set_item("stream", if stream == 0 { 1 } else { stream })?;
            array.call_method("__dlpack__", (), Some(&kwargs))?
        }
    };
    const NAME: &CStr = c"dltensor";
    // SAFETY: a capsule object (or not: then the call fails and sets a Python error); the
    // pointer stays valid while the capsule lives, which `Imported` (and then `park`) ensures.
    let managed = unsafe { pyo3::ffi::PyCapsule_GetPointer(capsule.as_ptr(), NAME.as_ptr()) } as *const DlManagedTensor;
    if managed.is_null() {
        return Err(PyErr::take(py).unwrap_or_else(|| PyTypeError::new_err("__dlpack__ did not return a 'dltensor' capsule")));
    }
    // SAFETY: a live DLManagedTensor (DLPack's contract for a 'dltensor' capsule).
    let tensor = unsafe { &(*managed).dl_tensor };
    let exported_on = match tensor.device.device_type {
        CPU => Some(Place::Cpu),
        CUDA => usize::try_from(tensor.device.device_id).ok().map(Place::Cuda),
        _ => None,
    };
    if exported_on != Some(place) {
        return Err(PyValueError::new_err(format!(
            "__dlpack__ exported an array on DLPack device ({}, {}) but __dlpack_device__ said {place:?}: the producer is inconsistent",
            tensor.device.device_type, tensor.device.device_id
        )));
    }
    if (tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes) != (FLOAT, 32, 1) {
        return Err(PyTypeError::new_err(format!(
            "only float32 arrays are supported (got DLPack type code {} with {} bits x {} lanes): convert with .float() / .astype(numpy.float32)",
            tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes
        )));
    }
    let ndim = usize::try_from(tensor.ndim).map_err(|_| PyValueError::new_err("negative ndim"))?;
    // SAFETY: DLPack's `shape` holds `ndim` int64s (any pointer when ndim is 0).
    let shape: &[i64] = if ndim == 0 { &[] } else { unsafe { std::slice::from_raw_parts(tensor.shape, ndim) } };
    let shape: Vec<usize> = shape.iter().map(|&d| usize::try_from(d)).collect::<Result<_, _>>().map_err(|_| PyValueError::new_err("negative dimension"))?;
    let len = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d)).ok_or_else(|| PyValueError::new_err("the array has more elements than fit in memory"))?;
    if !tensor.strides.is_null() && ndim > 0 && len > 0 {
        // SAFETY: when not null, `strides` holds `ndim` int64s.
        let strides = unsafe { std::slice::from_raw_parts(tensor.strides, ndim) };
        let mut expected = 1i64;
        for (dim, (&stride, &size)) in strides.iter().zip(&shape).enumerate().rev() {
            if size > 1 && stride != expected {
                return Err(PyValueError::new_err(format!(
                    "the array is not C-contiguous (stride {stride} in dimension {dim}): call .contiguous() / numpy.ascontiguousarray first"
                )));
            }
            expected *= size as i64;
        }
    }
    let address = (tensor.data as u64).checked_add(tensor.byte_offset).ok_or_else(|| PyValueError::new_err("the array's address overflows"))?;
    if len > 0 && !address.is_multiple_of(4) {
        return Err(PyValueError::new_err(format!("the array's address {address:#x} is not aligned for float32")));
    }
    Ok(Imported { place, address, len, shape, stream, keep: capsule.unbind(), copied: None, _gc: None })
}

/// The capsules of one GPU call, held until its work has completed.
struct Parked {
    /// Names the entry across a wait that runs without the list's lock.
    id: u64,
    done: Done,
    capsules: Vec<Py<PyAny>>,
}

/// How the end of a parked call's work is known.
enum Done {
    /// Recorded on the call's stream after all of its work (never into a capture: the stream
    /// was not being captured, and the door refuses a capture begun since).
    Event(Arc<Event>),
    /// No event could be recorded: only a wait for the whole context (whose stream the work was
    /// queued on) shows that the work has finished.
    Context(Context),
}

impl Done {
    /// Whether the work has completed; never blocks. An error (a failed context) keeps the
    /// entry: the kernel's state is unknown, so the memory is not handed back.
    fn is_complete(&self) -> bool {
        match self {
            Done::Event(event) => event.is_complete().unwrap_or(false),
            Done::Context(_) => false,
        }
    }
}

static PARKED: Mutex<Vec<Parked>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

fn parked() -> MutexGuard<'static, Vec<Parked>> {
    PARKED.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// This thread in the driver's relaxed stream-capture mode while the value lives.
///
/// A capture in the default (global) mode, which `torch.cuda.graph` uses, is invalidated by a
/// "potentially unsafe" call from any thread, and `cuEventQuery` is one even for an event
/// recorded outside the capture (PyTorch's NCCL watchdog and caching allocator query their
/// events in relaxed mode for this reason). Our events are never recorded into a capture, so
/// querying, recording and destroying them conflicts with none: those calls run in relaxed
/// mode, and a DLPack call made while another thread captures leaves that capture intact.
/// Producers' deleters never run in it (they may make calls that do conflict, which the
/// driver must still catch).
///
/// Only entered once the driver is loaded (something was parked, or a context was made).
struct RelaxedCaptureMode(Option<ferrocuda_host::sys::CUstreamCaptureMode>);

impl RelaxedCaptureMode {
    fn enter() -> Self {
        let mut mode = ferrocuda_host::sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
        // SAFETY: swaps this thread's mode with the value it is given; writes one enum value.
        let swapped = unsafe { ferrocuda_host::driver::stream::exchange_capture_mode(&mut mode) };
        RelaxedCaptureMode(swapped.ok().map(|()| mode))
    }
}

impl Drop for RelaxedCaptureMode {
    fn drop(&mut self) {
        if let Some(mut previous) = self.0.take() {
            // SAFETY: as in `enter`: puts the thread's previous mode back.
            let _ = unsafe { ferrocuda_host::driver::stream::exchange_capture_mode(&mut previous) };
        }
    }
}

/// Parks the capsules of `arrays`, whose memory the work queued on `stream` (of `context`) uses,
/// until that work has completed: records an event on `stream` after it. Called once the
/// call's work (and its borrows' ends) are queued, whether the launch succeeded or not (a failed
/// launch may still have queued work).
pub fn park(context: &Context, stream: &Stream, arrays: impl IntoIterator<Item = Imported>) {
    let capsules: Vec<Py<PyAny>> = arrays.into_iter().map(|array| array.keep).collect();
    if capsules.is_empty() {
        return;
    }
    let done = {
        let _relaxed = RelaxedCaptureMode::enter();
        match Event::without_timing(context).and_then(|event| event.record(stream).map(|()| event)) {
            Ok(event) => Done::Event(Arc::new(event)),
            Err(_) => Done::Context(context.clone()),
        }
    };
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    parked().push(Parked { id, done, capsules });
}

/// Takes out the entries that `finished` names or whose work has completed, and drops their
/// capsules after the list's lock is released (`_py`: with the GIL held; a producer's deleter
/// may run Python code, even call these functions again). Returns the number of arrays still
/// parked.
fn release_where(_py: Python<'_>, finished: &[u64]) -> usize {
    let capsules: Vec<Py<PyAny>> = {
        let mut list = parked();
        if list.is_empty() {
            // Nothing parked: no driver call (without a GPU the driver is not even loaded).
            return 0;
        }
        let _relaxed = RelaxedCaptureMode::enter();
        let (released, kept): (Vec<Parked>, Vec<Parked>) =
            std::mem::take(&mut *list).into_iter().partition(|entry| finished.contains(&entry.id) || entry.done.is_complete());
        *list = kept;
        // The events are destroyed here, in relaxed mode; the capsules outside it. An event's
        // drop binds its context for the destroy and restores the caller's current context,
        // whatever the kind of context (session 22: session 21 pushed the context around this
        // drop because the host's bind left a primary context current; it no longer does).
        released.into_iter().flat_map(|entry| entry.capsules).collect()
    };
    drop(capsules);
    parked_arrays()
}

/// Releases the capsules of parked calls whose work has completed; never blocks. Returns the
/// number of arrays still parked.
pub fn release_completed(py: Python<'_>) -> usize {
    release_where(py, &[])
}

/// Waits (without the GIL) for the work of every call parked now, then releases the capsules
/// of all that completed. Returns the number of arrays still parked: those of calls parked
/// meanwhile by other threads, and those whose wait failed (a failed context, or a capture in
/// progress when only a wait for the whole context can tell).
pub fn release_all(py: Python<'_>) -> usize {
    enum Wait {
        Event(Arc<Event>),
        Context(Context),
    }
    let waits: Vec<(u64, Wait)> = parked()
        .iter()
        .map(|entry| {
            let wait = match &entry.done {
                Done::Event(event) => Wait::Event(event.clone()),
                Done::Context(context) => Wait::Context(context.clone()),
            };
            (entry.id, wait)
        })
        .collect();
    if waits.is_empty() {
        return release_where(py, &[]);
    }
    let finished: Vec<u64> = py.detach(|| {
        let _relaxed = RelaxedCaptureMode::enter();
        waits
            .into_iter()
            .filter(|(_, wait)| match wait {
                Wait::Event(event) => event.synchronize().is_ok(),
                // Refused (not attempted) by ferrocuda while one of its captures of the context
                // runs; a foreign capture makes the driver refuse it: kept either way.
                // The wait binds the context and restores the caller's (session 22).
                Wait::Context(context) => context.synchronize().is_ok(),
            })
            .map(|(id, _)| id)
            .collect()
    });
    release_where(py, &finished)
}

/// The number of arrays whose capsules are parked (their calls' GPU work had not been seen
/// complete at the last release).
pub fn parked_arrays() -> usize {
    parked().iter().map(|entry| entry.capsules.len()).sum()
}
