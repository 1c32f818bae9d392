//! Arrays in through DLPack (<https://dmlc.github.io/dlpack/latest/>): `__dlpack_device__`,
//! then `__dlpack__(stream=...)`, which hands over a capsule holding a `DLManagedTensor`. The
//! capsule is kept (so the producer keeps the memory alive) until the call ends and then
//! dropped unconsumed, which makes the producer's own capsule destructor release it: nothing is
//! copied and nothing is freed twice.

use std::ffi::{CStr, c_void};

use pyo3::exceptions::{PyTypeError, PyValueError};
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

/// One array imported for the length of a call: `len` contiguous `f32`s at `address`.
pub struct Imported {
    pub place: Place,
    pub address: u64,
    pub len: usize,
    pub shape: Vec<usize>,
    /// Keeps the producer's memory alive until the call ends.
    _capsule: Py<PyAny>,
}

impl Imported {
    /// The array as a host slice (CPU arrays only).
    pub fn host(&self) -> &[f32] {
        assert_eq!(self.place, Place::Cpu, "host() of a device array");
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `len` initialised f32s (every bit pattern is one) of host memory the capsule
        // keeps alive while `self` lives, aligned (checked in `import`); no output of this call
        // overlaps it (`import_all`), and the caller holds the GIL, so Python code does not
        // change it meanwhile.
        unsafe { std::slice::from_raw_parts(self.address as *const f32, self.len) }
    }

    /// The array as a writable host slice (CPU outputs only).
    pub fn host_mut(&mut self) -> &mut [f32] {
        assert_eq!(self.place, Place::Cpu, "host_mut() of a device array");
        if self.len == 0 {
            return &mut [];
        }
        // SAFETY: as in `host`; besides, no other argument of the call overlaps it
        // (`import_all`), so this is the only reference to the memory while it lives.
        unsafe { std::slice::from_raw_parts_mut(self.address as *mut f32, self.len) }
    }

    fn bytes(&self) -> std::ops::Range<u64> {
        self.address..self.address + 4 * self.len as u64
    }
}

/// PyTorch's current stream on CUDA device `ordinal` (`torch.cuda.current_stream(ordinal).cuda_stream`;
/// 0 is the legacy default stream), or 0 when PyTorch is not installed.
pub fn torch_current_stream(py: Python<'_>, ordinal: usize) -> PyResult<usize> {
    let Ok(torch) = py.import("torch") else { return Ok(0) };
    torch.getattr("cuda")?.call_method1("current_stream", (ordinal,))?.getattr("cuda_stream")?.extract()
}

/// Imports `inputs` and `output`: all on one device, `output` overlapping none of the inputs.
pub fn import_all(py: Python<'_>, inputs: &[&Bound<'_, PyAny>], output: &Bound<'_, PyAny>) -> PyResult<(Vec<Imported>, Imported)> {
    let inputs: Vec<Imported> = inputs.iter().map(|x| import(py, x)).collect::<PyResult<_>>()?;
    let output = import(py, output)?;
    for input in &inputs {
        if input.place != output.place {
            return Err(PyValueError::new_err(format!("arrays on different devices ({:?} and {:?}): move them to one first", input.place, output.place)));
        }
        let (a, b) = (input.bytes(), output.bytes());
        if input.len > 0 && output.len > 0 && a.start < b.end && b.start < a.end {
            return Err(PyValueError::new_err("the output overlaps an input: pass a separate output array (e.g. torch.empty_like(x))"));
        }
    }
    Ok((inputs, output))
}

/// One array through DLPack: float32, C-contiguous, on the CPU or a CUDA device.
fn import(py: Python<'_>, array: &Bound<'_, PyAny>) -> PyResult<Imported> {
    let type_name = || array.get_type().name().map(|n| n.to_string()).unwrap_or_default();
    let (device_type, device_id): (i32, i32) = array.call_method0("__dlpack_device__").and_then(|d| d.extract()).map_err(|_| {
        PyTypeError::new_err(format!("a {} is not an array this module can take: pass a torch.Tensor or numpy.ndarray (anything with __dlpack__)", type_name()))
    })?;
    let place = match device_type {
        CPU => Place::Cpu,
        CUDA => Place::Cuda(usize::try_from(device_id).map_err(|_| PyValueError::new_err("negative CUDA device id"))?),
        other => return Err(PyValueError::new_err(format!("arrays on DLPack device type {other} are not supported: only CPU (1) and CUDA (2)"))),
    };
    let capsule = match place {
        Place::Cpu => array.call_method0("__dlpack__")?,
        Place::Cuda(ordinal) => {
            // The stream the kernel will run on (DLPack spells the legacy default stream 1):
            // the producer orders its pending work on the array before it.
            let stream = match torch_current_stream(py, ordinal)? {
                0 => 1,
                raw => raw,
            };
            let kwargs = PyDict::new(py);
            kwargs.set_item("stream", stream)?;
            array.call_method("__dlpack__", (), Some(&kwargs))?
        }
    };
    const NAME: &CStr = c"dltensor";
    // SAFETY: a capsule object (or not: then the call fails and sets a Python error); the
    // pointer stays valid while the capsule lives, which `Imported` ensures.
    let managed = unsafe { pyo3::ffi::PyCapsule_GetPointer(capsule.as_ptr(), NAME.as_ptr()) } as *const DlManagedTensor;
    if managed.is_null() {
        return Err(PyErr::take(py).unwrap_or_else(|| PyTypeError::new_err("__dlpack__ did not return a 'dltensor' capsule")));
    }
    // SAFETY: a live DLManagedTensor (DLPack's contract for a 'dltensor' capsule).
    let tensor = unsafe { &(*managed).dl_tensor };
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
    Ok(Imported { place, address, len, shape, _capsule: capsule.unbind() })
}
