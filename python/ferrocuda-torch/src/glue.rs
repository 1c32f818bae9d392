//! The glue between PyTorch tensors and ferrocuda launches, for the library's ops and for your
//! own ([`crate::op`]).
//!
//! A [`Call`] is one op invocation on CUDA tensors: it reads each tensor's address, element
//! count, shape, dtype and device from the `torch.Tensor` object itself (nothing copied, no
//! DLPack round trip), checks them (CUDA, one device, C-contiguous, outputs overlapping nothing
//! else), and lends them as [`TensorSlice`] (inputs) and [`TensorSliceMut`] (outputs, once
//! each) on PyTorch's current stream of that device, which it borrows as a ferrocuda
//! [`Stream`]. The stream joins `torch.cuda.graph` captures ([`Stream::from_raw_in_owner_captures`]),
//! so the launches of an op called inside a capture are recorded into torch's graph.
//!
//! A `Call` holds a reference to each of its tensors, so their storage outlives the slices it
//! lends. Holding a tensor does not hold its *memory*: `resize_()` frees it in place, and any
//! Python code can call it, including code that runs while the call reads its arguments (a
//! subclass's `__torch_function__` or property, a torch function or dispatch mode, torch's
//! `empty_like` of the outputs under such a mode, the op author's own code). So the addresses,
//! sizes, dtypes, layouts and devices the checks saw are read again, last, where a launch uses
//! each tensor's slice, through a path that runs no Python code (`native.rs`: torch's C methods
//! with `__torch_function__` and the Python dispatch keys off), and a launch whose tensors
//! changed meanwhile is refused (audit 2026-11-28h, G20R-3; session 23, G23R-1; the same read
//! catches a subclass that reports a storage that is not its own). Since session 24 that read
//! is the only one after the checks (the call's start read none: everything it guarded, the
//! read at use guards, later), and a cheap one (see "Why the memory is there").
//!
//! **Why the memory is there** (session 21: the argument used to end "the GIL keeps other
//! threads' Python code out", which is not enough: torch's bindings release the GIL inside its
//! ops, so another thread's `x.resize_()` runs in C++ while this thread holds the GIL). A slice
//! lent by a `Call` is sound when (a) the address, size and layout it uses are the tensor's
//! when the work is queued, (b) the memory stays allocated, and unused by anything else, until
//! the work has run on the GPU, and (c) torch's own accesses to it are ordered with the work.
//! - (a) On this thread: the values are read last where the memory is used, by the slice's
//!   `kernel_arg` (`Call::check_at_use`: what every launcher takes the address from), inside
//!   torch's C methods with `__torch_function__` and the Python dispatch keys off
//!   (`native::NoHooks`) and the collector paused; from there to the queuing only
//!   ferrocuda's code runs (the launcher's other arguments, read the same way, and the door),
//!   no callback, property or hook (session 23, G23R-1: the last read used to be `verify`'s,
//!   at the call's start, and the op author's closure, which runs after it, could run Python
//!   code or let the GIL go before its launches; a changed tensor now refuses the launch).
//!   Session 24 made that read cheap without moving it: torch's checked C methods and
//!   property getters are called through CPython's C entry points (`PyObject_Vectorcall`, the
//!   getset descriptor's `tp_descr_get`) with no argument tuple, torch's two guards are entered
//!   on objects kept per thread, and nothing of the read itself can run Python code (its
//!   results are ints, bools and a dtype torch keeps). A
//!   tensor map made from a slice reads it when the map is made: keep no Python code between
//!   the two (docs/interop.md). On other
//!   threads: while this thread holds the GIL no Python code runs there, but torch code that a
//!   thread entered earlier may (torch's bindings release the GIL around an op). Such code
//!   changing one of this call's tensors (`resize_`, `set_`) while this thread reads it is a
//!   data race on the tensor's fields inside torch, the same race a torch op of this thread in
//!   place of ours would have (`x.mul(2)` reads the fields this call reads): the program has
//!   undefined behaviour by torch's rules (a tensor is not changed by one thread while another
//!   uses it) before anything of ferrocuda's runs. ferrocuda cannot order another thread's C++
//!   code, and it adds no race that torch's own op in its place would not have. The GIL is
//!   what keeps other threads' *Python* code (a `del`, a `resize_()` called from Python, which
//!   is not a race inside torch) from starting between the last read and the launch: **a slice
//!   is read and launched with the GIL held**, and the types enforce it (session 22): a `Call` is
//!   `!Sync`, and the slices it lends ([`TensorSlice`], [`TensorSliceMut`]) are neither `Send`
//!   nor `Sync`, and hand out nothing that is (no `Deref` to the host's `BorrowedSlice`, no
//!   `DeviceView`): a closure given to `Python::detach` (which requires `Send`) or to another
//!   thread cannot take them, so no launch of them can happen while another thread's Python code
//!   runs and frees the memory (before session 22 the slices were `BorrowedSlice`s, which are
//!   `Send`: moved into `detach`, they launched after the GIL was released).
//! - (b) The `Call` holds a reference to each tensor (its storage lives), and each tensor is
//!   recorded on the launch stream at each use (`record_stream`, in the hooks-off section,
//!   before the read): torch's caching allocator, when the memory is freed (a
//!   `del`, a `resize_` after the call), reuses it only after the work queued on that stream by
//!   then, which includes this call's (queued before the call returns and lets the tensors go).
//!   Outputs the op allocated come from the launch stream itself, in its order. The record is
//!   made at the use, not once at the call's start: memory freed and allocated again by code
//!   the call runs (at the same address, from another stream's pool) carries no record of this
//!   stream, and the address alone does not tell the two allocations apart.
//! - (c) Torch writes a tensor through work on the stream current at the time; work of torch
//!   on another stream that touches this call's tensors concurrently is a race torch's own ops
//!   would have too (torch leaves cross-stream ordering to the program, `record_stream`,
//!   `wait_stream`), i.e. the same contract as a torch op queued on the current stream.
//! - The thread's current CUDA context is the caller's again when the `Call` ends: it pushes
//!   the device's primary context for the call and pops it at its end (session 21: a call on
//!   cuda:1 from a thread whose torch device is cuda:0 left cuda:1's context current, which is
//!   `torch.cuda.current_device()` for torch afterwards). The `Call` is only ever lent by
//!   reference ([`Call::with`], an op's launch), so its end cannot be skipped by `mem::forget`,
//!   and the collector is paused only inside ferrocuda's own reads, never across the op
//!   author's code (session 23, G23R-4).
//! - (d) Inside `torch.cuda.graph` the work goes into torch's graph, which keeps torch's memory
//!   alive for its replays, never ferrocuda's: the door refuses ferrocuda-owned memory on a
//!   stream its owner captures (`Error::OwnedMemoryInOwnerCapture`), and the call's stream
//!   launches no kernel after the call (`Stream::end_loan`), so a clone kept past it launches
//!   nothing on a handle torch may destroy or capture later (copies and cuBLAS calls through such
//!   a clone are not refused: docs/interop.md) (session 23, G23R-2).
//! - (e) Per launch, not per tensor (session 24, audit 2026-11-29f). G24R-1: the check at use
//!   of one argument lets the GIL go (its `record_stream`, a torch op whose binding releases
//!   it), so another thread's Python code could free an argument read before; each check at use
//!   therefore reads again every tensor taken so far (`Call::read_used`), and the launch's last
//!   argument's check is a read of all its tensors after the last GIL release. G24R-2: the
//!   checks across tensors (no output overlaps another tensor, each output lent once) are a
//!   call's; one launch could mix slices of two calls if a call opened inside another's closure,
//!   so a thread has one open call at a time (`OpenCall`).
//!
//! **Streams** (G20R-2). The work is queued on torch's current stream; torch's caching
//! allocator reuses a freed tensor's memory in the order of the stream it was allocated on. A
//! tensor allocated on another stream and freed (or resized) after the call returns would be
//! reused there while the kernel still reads or writes it. Torch's own ops leave that to the
//! user (`Tensor.record_stream`); a `Call` does it itself: every tensor a launch uses (its outputs
//! too, at each use) is recorded on the current stream (`record_stream`, in the same
//! no-Python-code section, before the read), so the allocator reuses its memory only after
//! the work queued on that stream so far. For a tensor allocated on the current stream the
//! allocator returns at once (no event, no memory held longer); the cost is the call itself.
//! The outputs an op allocates come from the current stream with every hook off (`op.rs`, torch's
//! checked C `new_empty`), and are recorded and read back like the inputs all the same (G23R-3:
//! the allocator, and the dtype objects it is given, were found by name).

use std::cell::RefCell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use bytemuck::Pod;
use ferrocuda_host::__private::SliceArg;
use ferrocuda_host::{BorrowedSlice, BorrowedSliceMut, Context, CurrentGuard, DeviceRead, DeviceWrite, Stream};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;

/// The dtypes a [`Call`] understands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// `torch.float32`.
    F32,
    /// `torch.bfloat16`.
    BF16,
    /// `torch.float16`.
    F16,
    /// `torch.int32` (read as `u32` or `i32` by kernels).
    I32,
    /// `torch.int64`.
    I64,
}

impl DType {
    const ALL: [DType; 5] = [DType::F32, DType::BF16, DType::F16, DType::I32, DType::I64];

    /// The floating-point dtypes of the library's kernels: float32, bfloat16, float16.
    pub const FLOATS: &'static [DType] = &[DType::F32, DType::BF16, DType::F16];

    /// The name torch prints (`torch.float32`, ...).
    pub fn torch_name(self) -> &'static str {
        match self {
            DType::F32 => "torch.float32",
            DType::BF16 => "torch.bfloat16",
            DType::F16 => "torch.float16",
            DType::I32 => "torch.int32",
            DType::I64 => "torch.int64",
        }
    }

    /// torch's dtype object (`torch.float32`, ...).
    pub fn object(self, py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
        let index = DType::ALL.iter().position(|d| *d == self).expect("every dtype is in ALL");
        Ok(dtypes(py)?[index].bind(py))
    }

    fn attribute(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::BF16 => "bfloat16",
            DType::F16 => "float16",
            DType::I32 => "int32",
            DType::I64 => "int64",
        }
    }
}

/// A Rust element type with its torch dtype: what [`Call::input`] and [`Call::output`] lend.
pub trait TorchElement: Pod {
    /// The torch dtype whose memory holds values of this type.
    const DTYPE: DType;
}

impl TorchElement for f32 {
    const DTYPE: DType = DType::F32;
}
impl TorchElement for half::bf16 {
    const DTYPE: DType = DType::BF16;
}
impl TorchElement for half::f16 {
    const DTYPE: DType = DType::F16;
}
impl TorchElement for i32 {
    const DTYPE: DType = DType::I32;
}
/// `torch.int32` memory read as `u32` (indices and positions, never negative, or the kernel's
/// "ignore" marker `u32::MAX`, which is `-1` as an `int32`).
impl TorchElement for u32 {
    const DTYPE: DType = DType::I32;
}
impl TorchElement for i64 {
    const DTYPE: DType = DType::I64;
}

/// torch's dtype objects (singletons), compared by identity.
fn dtypes(py: Python<'_>) -> PyResult<&'static [Py<PyAny>]> {
    static DTYPES: OnceLock<Vec<Py<PyAny>>> = OnceLock::new();
    if let Some(d) = DTYPES.get() {
        return Ok(d);
    }
    let torch = py.import("torch")?;
    // Each checked to be torch's C dtype of that name (G23R-3): outputs are allocated of them.
    let list = DType::ALL
        .iter()
        .map(|d| torch.getattr(d.attribute()).and_then(|o| crate::native::checked_dtype(o, d.torch_name())).map(Bound::unbind))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(DTYPES.get_or_init(|| list))
}

/// One tensor of a call, as read from the `torch.Tensor`.
#[derive(Clone, Debug)]
pub struct TensorInfo {
    /// The argument's name (for errors).
    pub name: &'static str,
    /// The device address of element 0 (`data_ptr()`).
    pub address: u64,
    /// Elements (`numel()`).
    pub numel: usize,
    /// The shape.
    pub shape: Vec<usize>,
    /// The dtype.
    pub dtype: DType,
    /// The CUDA device index.
    pub device: usize,
    output: bool,
    /// Allocated by the call itself (for errors: it is read back like the rest, G23R-3).
    fresh: bool,
}

impl DType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::BF16 | DType::F16 => 2,
            DType::I64 => 8,
        }
    }
}

impl TensorInfo {
    /// A tensor that torch has just allocated for the call (`torch.empty_like` and kin) while
    /// `hooks` kept every Python hook off, asked for C-contiguous, of the given shape and dtype,
    /// on `device`; only its address is read here (through `hooks`). What the allocator returned
    /// is not trusted: each use reads it back like an input (G23R-3, [`Call::check_at_use`]).
    pub(crate) fn fresh(
        hooks: &crate::native::NoHooks<'_>,
        name: &'static str,
        tensor: &Bound<'_, PyAny>,
        shape: Vec<usize>,
        dtype: DType,
        device: usize,
    ) -> PyResult<TensorInfo> {
        let address = hooks.address(tensor)?;
        Ok(TensorInfo { name, address, numel: shape.iter().product(), shape, dtype, device, output: true, fresh: true })
    }

    fn bytes(&self) -> u64 {
        self.numel as u64 * self.dtype.size() as u64
    }

    fn overlaps(&self, other: &TensorInfo) -> bool {
        let (a, b) = (self.address..self.address + self.bytes(), other.address..other.address + other.bytes());
        self.numel > 0 && other.numel > 0 && a.start < b.end && b.start < a.end
    }

    /// The shape as rows of the last dimension: `(numel / cols, cols)`.
    pub fn rows(&self, op: &str) -> PyResult<(usize, usize)> {
        match self.shape.last() {
            Some(&cols) if cols > 0 => Ok((self.numel / cols, cols)),
            _ => Err(PyValueError::new_err(format!("{op}: `{}` (shape {:?}) needs at least one dimension, the last one not 0", self.name, self.shape))),
        }
    }
}

/// The class `torch.Tensor`.
fn torch_tensor_class(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static TENSOR: OnceLock<Py<PyAny>> = OnceLock::new();
    if TENSOR.get().is_none() {
        let t = py.import("torch")?.getattr("Tensor")?.unbind();
        let _ = TENSOR.set(t);
    }
    Ok(TENSOR.get().expect("set above").bind(py))
}

/// The first half of reading a tensor argument: that it is a `torch.Tensor`, its dtype (one a
/// [`Call`] understands) and its shape. Nothing about its device or layout yet, so that
/// declaration checks (dtypes, shapes) can speak before the device check does.
pub(crate) fn tensor_dtype_shape(py: Python<'_>, op: &str, name: &str, tensor: &Bound<'_, PyAny>) -> PyResult<(DType, Vec<usize>)> {
    if !tensor.is_instance(torch_tensor_class(py)?)? {
        let type_name = tensor.get_type().name().map(|n| n.to_string()).unwrap_or_default();
        return Err(PyTypeError::new_err(format!("{op}: `{name}` must be a torch.Tensor, not {type_name}")));
    }
    let dtype_object = tensor.getattr(intern!(py, "dtype"))?;
    let dtype = dtypes(py)?.iter().zip(DType::ALL).find(|(d, _)| d.as_ptr() == dtype_object.as_ptr()).map(|(_, d)| d).ok_or_else(|| {
        PyTypeError::new_err(format!(
            "{op}: `{name}` has dtype {dtype_object}, which this op does not take (float32, bfloat16, float16; int32/int64 for indices)"
        ))
    })?;
    let shape: Vec<usize> = tensor.getattr(intern!(py, "shape"))?.extract()?;
    Ok((dtype, shape))
}

/// The second half: the CUDA device (refused: a CPU tensor, unless [`host_only`]), C-contiguity
/// and the address. `dtype` and `shape` come from [`tensor_dtype_shape`].
pub(crate) fn tensor_info(
    py: Python<'_>,
    op: &str,
    name: &'static str,
    tensor: &Bound<'_, PyAny>,
    dtype: DType,
    shape: Vec<usize>,
    output: bool,
) -> PyResult<TensorInfo> {
    let device: i64 = tensor.call_method0(intern!(py, "get_device"))?.extract()?;
    if device < 0 && !host_only() {
        return Err(PyValueError::new_err(format!("{op}: `{name}` is on the CPU; ferrocuda ops run on CUDA tensors: move it with .cuda()")));
    }
    if !tensor.call_method0(intern!(py, "is_contiguous"))?.extract::<bool>()? {
        return Err(PyValueError::new_err(format!(
            "{op}: `{name}` is not contiguous (strides {}): call .contiguous() first",
            tensor.call_method0(intern!(py, "stride"))?
        )));
    }
    let address: u64 = tensor.call_method0(intern!(py, "data_ptr"))?.extract()?;
    Ok(TensorInfo { name, address, numel: shape.iter().product(), shape, dtype, device: device.max(0) as usize, output, fresh: false })
}

/// Reads one tensor's description and checks that it is a C-contiguous CUDA tensor.
fn read_tensor(py: Python<'_>, op: &str, name: &'static str, tensor: &Bound<'_, PyAny>, output: bool) -> PyResult<TensorInfo> {
    let (dtype, shape) = tensor_dtype_shape(py, op, name, tensor)?;
    tensor_info(py, op, name, tensor, dtype, shape, output)
}

static HOST_ONLY: AtomicBool = AtomicBool::new(false);
static HOST_ONLY_ZEROS: AtomicBool = AtomicBool::new(false);

/// Host-only mode, for the CPU-only overhead benchmark (`bench/overhead_cpu.py`) and the CPU
/// tests of the ops' wiring: while on, a [`Call`] accepts CPU tensors and stops before the driver
/// (no context, no stream, no borrow), and the ops of [`crate::op`] check and allocate as usual
/// but launch nothing: their outputs are left uninitialised, or zeroed with `zero_outputs` (so
/// that two runs agree, as `torch.library.opcheck` asks). Off unless a benchmark or test turns
/// it on.
pub fn set_host_only(on: bool, zero_outputs: bool) {
    HOST_ONLY_ZEROS.store(on && zero_outputs, Ordering::Relaxed);
    HOST_ONLY.store(on, Ordering::Relaxed);
}

/// Whether host-only mode ([`set_host_only`]) is on.
pub fn host_only() -> bool {
    HOST_ONLY.load(Ordering::Relaxed)
}

/// Whether host-only mode zeroes the outputs ([`set_host_only`]).
pub(crate) fn host_only_zeros() -> bool {
    HOST_ONLY_ZEROS.load(Ordering::Relaxed)
}

/// The primary context of device `ordinal` (PyTorch's), kept for the life of the process:
/// kernels loaded into it stay loaded, which graphs captured by torch rely on.
///
/// It does not make the context current on the thread (session 21): ferrocuda's calls bind it
/// for their own driver calls, and [`Call`] keeps it current for a call and then makes the
/// caller's context current again; hold [`Context::push_current`] around raw driver calls of
/// your own. (torch takes the thread's current context for its current device: a context of
/// another device left current would move `torch.cuda.current_device()`.)
pub fn context(ordinal: usize) -> PyResult<Context> {
    static CONTEXTS: Mutex<Vec<Context>> = Mutex::new(Vec::new());
    let mut contexts = CONTEXTS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(context) = contexts.iter().find(|c| c.device().ordinal() == ordinal) {
        return Ok(context.clone());
    }
    // Retained without being made current (G23S-2: `Context::primary` binds it, which is
    // refused inside a guard such as an open `Call`'s; nothing here needs it current).
    let context = Context::retain_primary(ordinal).map_err(gpu_error)?;
    contexts.push(context.clone());
    Ok(context)
}

/// A ferrocuda error as a Python `RuntimeError`.
pub fn gpu_error(error: impl std::fmt::Display) -> PyErr {
    PyRuntimeError::new_err(format!("ferrocuda: {error}"))
}

/// PyTorch's current stream of CUDA device `ordinal` (0: the legacy default stream), through
/// torch's C accessor `torch._C._cuda_getCurrentRawStream` (what its Triton launcher uses),
/// checked to be that C function (G21R-2: a module attribute, which Python code can rebind; the
/// handle goes to `unsafe` driver calls, which check it belongs to the device's context).
pub fn torch_current_stream(py: Python<'_>, ordinal: usize) -> PyResult<usize> {
    static RAW: OnceLock<Py<PyAny>> = OnceLock::new();
    if RAW.get().is_none() {
        let f = py.import("torch")?.getattr("_C")?.getattr("_cuda_getCurrentRawStream").map_err(|_| {
            PyRuntimeError::new_err(
                "this torch has no torch._C._cuda_getCurrentRawStream (a CPU-only build, or older than 2.0): CUDA tensors need a CUDA build",
            )
        })?;
        let f = crate::native::c_function(f, "_cuda_getCurrentRawStream", "torch._C._cuda_getCurrentRawStream")?;
        let _ = RAW.set(f.unbind());
    }
    RAW.get().expect("set above").bind(py).call1((ordinal,))?.extract()
}

/// What the last call on the GPU received: the stream and the device address of each tensor,
/// for tests to compare with torch's current stream and `data_ptr()`.
pub(crate) static LAST_LAUNCH: Mutex<Option<(usize, Vec<u64>)>> = Mutex::new(None);

/// The checks across the tensors of one call: all on one device (which it returns), and no
/// output overlapping any other tensor.
pub(crate) fn check_tensors(op: &str, tensors: &[TensorInfo]) -> PyResult<usize> {
    let device = tensors.first().map(|t| t.device).ok_or_else(|| PyValueError::new_err(format!("{op}: no tensor arguments")))?;
    for t in tensors {
        if t.device != device {
            return Err(PyValueError::new_err(format!(
                "{op}: `{}` is on cuda:{} but `{}` on cuda:{device}: move them to one device",
                t.name, t.device, tensors[0].name
            )));
        }
    }
    for (i, a) in tensors.iter().enumerate() {
        for b in &tensors[i + 1..] {
            if (a.output || b.output) && a.overlaps(b) {
                return Err(PyValueError::new_err(format!(
                    "{op}: `{}` and `{}` overlap in memory, and one of them is written: pass separate tensors (e.g. torch.empty_like)",
                    a.name, b.name
                )));
            }
        }
    }
    Ok(device)
}

/// Host-only mode's read of a call's tensors ([`set_host_only`]: nothing launches, so no
/// [`Call::check_at_use`] reads them): with no Python code of anyone's able to run, reads each
/// of `objects` (the tensors `tensors` describe, the outputs the call allocated included) and
/// refuses the call if any differs from what the checks saw. What the CPU overhead benchmark
/// measures in place of the reads a launch's arguments get on the GPU.
pub(crate) fn verify(py: Python<'_>, op: &str, tensors: &[TensorInfo], objects: &[Py<PyAny>]) -> PyResult<()> {
    let objects: Vec<&Bound<'_, PyAny>> = objects.iter().map(|o| o.bind(py)).collect();
    // The collector paused before anything here allocates (a collection runs finalizers, which
    // are Python code): no finalizer runs among the reads.
    let gc = crate::native::GcPaused::enter(py)?;
    let hooks = crate::native::NoHooks::enter(py)?;
    let now = hooks.read(&objects)?;
    drop(hooks);
    let outcome = tensors.iter().zip(&now).try_for_each(|(t, n)| compare(op, t, n));
    drop(gc);
    outcome
}

/// What the checks saw of `t` against what it is now (`n`, read with the hooks off).
fn compare(op: &str, t: &TensorInfo, n: &crate::native::Native) -> PyResult<()> {
    let device_ok = match n.device {
        crate::native::Device::Cuda(d) => d == t.device,
        crate::native::Device::Cpu => host_only(),
    };
    if (n.address, n.numel, n.element_size) == (t.address, t.numel, t.dtype.size()) && n.contiguous && device_ok {
        return Ok(());
    }
    let role = if t.fresh { "an output the op allocated (torch.empty_like or torch.empty, or what a program put under their names)" } else { "an argument" };
    Err(PyRuntimeError::new_err(format!(
        "{op}: `{}` ({role}) is not what the op checked (address {:#x}, {} elements of {} bytes, cuda:{}, contiguous; now {:#x}, {} of \
         {} bytes, {:?}, contiguous: {}): Python code run during the call (a __torch_function__, a property, a torch function or \
         dispatch mode, a hook run by the op itself, another thread while the op let the GIL go) resized or re-pointed it, or it \
         reports a storage that is not its own. Pass plain tensors (t.as_subclass(torch.Tensor)), do not change them from hooks, \
         and do not rebind torch's functions (audit 2026-11-28h G20R-3, 2026-11-29d G23R-1/G23R-3)",
        t.name,
        t.address,
        t.numel,
        t.dtype.size(),
        t.device,
        n.address,
        n.numel,
        n.element_size,
        n.device,
        n.contiguous
    )))
}

/// What the call checked of `t` against what it is where a launch uses it (`n`, read with the
/// hooks off: [`Call::check_at_use`]).
fn compare_at_use(py: Python<'_>, op: &str, t: &TensorInfo, n: &crate::native::UseRead) -> PyResult<()> {
    let dtype_ok = t.dtype.object(py).is_ok_and(|d| d.as_ptr() as usize == n.dtype);
    if (n.address, n.numel) == (t.address, t.numel) && dtype_ok && n.contiguous && n.cuda == Some(t.device as i64) {
        return Ok(());
    }
    let role = if t.fresh { "an output the op allocated" } else { "an argument" };
    let device = n.cuda.map_or_else(|| "not a CUDA tensor".to_string(), |d| format!("cuda:{d}"));
    Err(PyRuntimeError::new_err(format!(
        "{op}: `{}` ({role}) is not what the op checked (address {:#x}, {} elements of {}, cuda:{}, contiguous; now {:#x}, {} elements, \
         {}, {device}, contiguous: {}): Python code run during the call (a __torch_function__, a property, a torch function or dispatch \
         mode, a hook run by the op itself, another thread while the op let the GIL go) resized, re-pointed or re-typed it, or it reports \
         a storage that is not its own. Pass plain tensors (t.as_subclass(torch.Tensor)), do not change them from hooks, and do not \
         rebind torch's functions (audit 2026-11-28h G20R-3, 2026-11-29d G23R-1/G23R-3)",
        t.name,
        t.address,
        t.numel,
        t.dtype.torch_name(),
        t.device,
        n.address,
        n.numel,
        if dtype_ok { t.dtype.torch_name() } else { "another dtype" },
        n.contiguous
    )))
}

/// One op invocation on CUDA tensors (see the [module docs](self)).
///
/// Lent by reference only, to the closure of [`Call::with`] or of an [`Op`](crate::op::Op)'s
/// launch: ferrocuda's own frame owns it, so what it restores when it ends (the thread's current
/// context; the loan of its stream) cannot be skipped by `mem::forget` (G23R-4, audit
/// 2026-11-29d).
///
/// ```compile_fail
/// // The call cannot leave the closure it is lent to (nothing outside can own, so forget, it).
/// fn keep(py: pyo3::Python<'_>, x: &pyo3::Bound<'_, pyo3::PyAny>) -> pyo3::PyResult<()> {
///     let _escaped = ferrocuda_torch::glue::Call::with(py, "keep", &[("x", x)], &[], |call| Ok(call))?;
///     Ok(())
/// }
/// ```
pub struct Call {
    op: String,
    tensors: Vec<TensorInfo>,
    taken: RefCell<Vec<bool>>,
    stream: Stream,
    /// torch's current stream (the `torch.cuda.Stream` of `stream`'s handle): what each use of
    /// a tensor records it on ([`Call::check_at_use`]).
    stream_object: Py<PyAny>,
    /// The device's primary context, pushed for the call and popped when it ends (after the
    /// stream, before the tensors, whose release may run Python code): the thread's current
    /// context is the caller's again (see the [module docs](self)).
    _current: CurrentGuard,
    /// Which tensors a launch has taken so far (their `kernel_arg`): each use reads them all
    /// again, after its own `record_stream` (G24R-1, [`Call::read_used`]).
    used: RefCell<Vec<bool>>,
    /// This thread's open call is this one: no other `Call` opens on the thread until it ends
    /// (G24R-2, [`OpenCall`]). Before `keep`: no slice of the call is left when it is dropped,
    /// and the tensors' release may run Python code that calls an op.
    _open: OpenCall,
    /// The tensors themselves, so that their storage outlives every slice lent from `self`
    /// even if the caller lets go of its references; read again at each use.
    keep: Vec<Py<PyAny>>,
}

impl Drop for Call {
    fn drop(&mut self) {
        // G23R-2: a clone of the stream kept past the call launches no kernel from now on (torch
        // may destroy the handle, or capture the stream later).
        self.stream.end_loan();
    }
}

impl Call {
    /// Reads and checks `inputs` and `outputs` (name and tensor), borrows torch's current
    /// stream of their device, and runs `f` with the call. Refused, with an error that names the
    /// argument: a tensor that is not a CUDA tensor, not contiguous, of an unknown dtype, on
    /// another device than the first, or an output that overlaps any other argument; and a
    /// tensor that changed while it was read (G20R-3: see the [module docs](self)).
    ///
    /// Each tensor is read again, with every Python hook off, where a launch uses its slice
    /// ([`TensorSlice`]'s `kernel_arg`), so Python code that `f` runs (or lets run, releasing the
    /// GIL) before its launches cannot move the memory under them: such a launch panics instead
    /// (G23R-1, audit 2026-11-29d). When `f` returns, the stream's clones refuse launches and the
    /// thread's current context is the caller's again (session 23: this replaces `Call::new`,
    /// whose guards a `mem::forget` of the returned `Call` skipped, G23R-4).
    ///
    /// ```no_run
    /// # use pyo3::prelude::*;
    /// # fn scale(py: Python<'_>, x: &Bound<'_, PyAny>, out: &Bound<'_, PyAny>) -> PyResult<()> {
    /// ferrocuda_torch::glue::Call::with(py, "my_ops::scale", &[("x", x)], &[("out", out)], |call| {
    ///     let (x, mut out) = (call.input::<f32>("x")?, call.output::<f32>("out")?);
    ///     // my_kernels::scale::launch(call.stream(), config, &x, &mut out).map_err(ferrocuda_torch::glue::gpu_error)
    ///     # let _ = (x, &mut out);
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn with<R>(
        py: Python<'_>,
        op: &str,
        inputs: &[(&'static str, &Bound<'_, PyAny>)],
        outputs: &[(&'static str, &Bound<'_, PyAny>)],
        f: impl FnOnce(&Call) -> PyResult<R>,
    ) -> PyResult<R> {
        let mut tensors = Vec::with_capacity(inputs.len() + outputs.len());
        for (name, t) in inputs {
            tensors.push(read_tensor(py, op, name, t, false)?);
        }
        for (name, t) in outputs {
            tensors.push(read_tensor(py, op, name, t, true)?);
        }
        let keep = inputs.iter().chain(outputs).map(|(_, t)| (*t).clone().unbind()).collect();
        let device = check_tensors(op, &tensors)?;
        let call = Call::from_checked(py, op, tensors, keep, device)?;
        catch_refusal(|| f(&call))
    }

    /// A call of `tensors` (read and checked by [`check_tensors`], which gave `device`), holding
    /// `keep` (the tensors themselves) for its life. Crate-private: the `Call` must stay in
    /// ferrocuda's frame (G23R-4).
    pub(crate) fn from_checked(py: Python<'_>, op: &str, tensors: Vec<TensorInfo>, keep: Vec<Py<PyAny>>, device: usize) -> PyResult<Self> {
        // First: nothing of this call is lent while another call is open on the thread (G24R-2).
        let open = OpenCall::enter(op).map_err(PyRuntimeError::new_err)?;
        if host_only() {
            return Err(PyRuntimeError::new_err(format!("{op}: host-only mode (the overhead benchmark's, set_host_only) is on: nothing may launch")));
        }
        let context = context(device)?;
        let raw = torch_current_stream(py, device)?;
        let stream_object = crate::native::current_stream_object(py, device, raw)?;
        // No read of the tensors here (session 24): G20R-2's `record_stream` and G20R-3's read,
        // which `verify` made here until session 23, are made where each tensor's memory is
        // used (`check_at_use`), after any Python code the call runs; a tensor no launch uses is
        // not touched, so it needs neither.
        // SAFETY: torch's current stream of `device`, a stream torch keeps for the life of the
        // process (its pooled streams and the default streams; a user-made `torch.cuda.Stream`
        // is kept alive by torch's current-stream state while it is current, which it is for
        // this call), and every clone of this `Stream` refuses kernel launches once the call
        // ends (`end_loan` in `Drop`; the `Call` is never owned by code outside this crate);
        // other work through a kept clone is a documented residual (docs/interop.md).
        // Work queued on it during a torch capture may use only memory torch keeps alive for
        // the graph: the door refuses ferrocuda-owned memory there (G23R-2,
        // `Error::OwnedMemoryInOwnerCapture`), and the slices this call lends are torch's
        // tensors, read at each use; kernels of `context`, which stays loaded for the life
        // of the process (`context` above); an explicitly loaded `Module`'s launch declares its
        // globals at the door, so it is refused there too (docs/interop.md).
        let current = context.push_current().map_err(gpu_error)?;
        let stream = unsafe { Stream::from_raw_in_owner_captures(&context, raw as ferrocuda_host::sys::CUstream, ()) }.map_err(gpu_error)?;
        *LAST_LAUNCH.lock().unwrap_or_else(|p| p.into_inner()) = Some((raw, tensors.iter().map(|t| t.address).collect()));
        let taken = RefCell::new(vec![false; tensors.len()]);
        let used = RefCell::new(vec![false; tensors.len()]);
        Ok(Call { op: op.to_string(), tensors, taken, stream, stream_object: stream_object.unbind(), _current: current, used, _open: open, keep })
    }

    /// Reads tensor `index`, with every Python hook off, where its memory is handed to a launch
    /// (G23R-1, audit 2026-11-29d): records it on the launch stream, then compares its address,
    /// element count, dtype, contiguity and device with what the call checked. From the read to
    /// the launch only ferrocuda's code runs: the launcher's later arguments' checks, each of
    /// which reads every tensor the launch took so far after its own `record_stream`
    /// ([`Call::read_used`], G24R-1), and the door.
    ///
    /// The only read of the tensor between the call's checks and its launches (session 24: the
    /// read at the call's start, `verify`'s, went; everything it guarded is guarded here, after
    /// any Python code the call runs), and a cheap one: torch's checked C methods called without
    /// argument tuples, its two guards entered on objects kept per thread
    /// ([`crate::native::NoHooks`]). The collector is paused around `record_stream` and the read
    /// (`record_stream` makes an argument tuple inside torch, a GC-tracked object whose allocation
    /// may run a collection, and a collection runs finalizers: Python code that could change an
    /// argument of this launch already read), and again after `record_stream`, which lets the
    /// GIL go (another thread may re-enable the collector meanwhile).
    pub(crate) fn check_at_use(&self, index: usize) -> PyResult<()> {
        Python::attach(|py| {
            let gc = crate::native::GcPaused::enter(py)?;
            let object = self.keep[index].bind(py);
            let hooks = crate::native::NoHooks::enter(py)?;
            hooks.record_stream(object, self.stream_object.bind(py))?;
            let gc_again = crate::native::GcPaused::enter(py)?;
            let outcome = self.read_used(py, &hooks, index);
            drop(hooks);
            drop(gc_again);
            drop(gc);
            outcome
        })
    }

    /// G24R-1 (audit 2026-11-29f): marks tensor `index` as taken by a launch, then reads every
    /// tensor so marked (`index` among them) with the GIL held and compares each with what the
    /// call checked. Called by [`Call::check_at_use`] after its `record_stream`, the one step of
    /// the check that lets the GIL go.
    ///
    /// Why all of them: a launcher checks its arguments one after another (`x`, `y`, `out`),
    /// and `record_stream(y)` (a torch op: its Python binding releases the GIL) lets another
    /// thread's *Python* code run after `x`'s read; that code may free `x`'s memory
    /// (`x.untyped_storage().resize_(0)`: no race inside torch, every access is ordered by the
    /// GIL) and hand it to a new tensor. Re-reading only `y` there (G23R-1's fix) left `x`
    /// unchecked for the launch. Reading every tensor taken so far after each `record_stream`
    /// makes the last argument's check a read of all the launch's tensors after the last GIL
    /// release: from there to the launch nothing lets the GIL go (the reads are torch's C
    /// getters, which keep it, with the collector paused; then ferrocuda's door and
    /// `cuLaunchKernel`). A tensor map made from a slice is covered the same way: its source was
    /// taken (marked) when the map was made, and the launch's later arguments read it again.
    /// A tensor taken by an earlier launch of the call is read too (a call's tensors are not
    /// changed during the call: doing so refuses its later launches).
    fn read_used(&self, py: Python<'_>, hooks: &crate::native::NoHooks<'_>, index: usize) -> PyResult<()> {
        let indices = mark_used(&mut self.used.borrow_mut(), index);
        indices.iter().try_for_each(|&i| {
            let now = hooks.read_for_use(self.keep[i].bind(py))?;
            compare_at_use(py, &self.op, &self.tensors[i], &now)
        })
    }

    /// The stream to launch on (torch's current stream).
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// The op's name, for errors.
    pub fn op(&self) -> &str {
        &self.op
    }

    /// The description of the argument `name`.
    pub fn info(&self, name: &str) -> PyResult<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name).ok_or_else(|| PyValueError::new_err(format!("{}: no tensor argument named `{name}`", self.op)))
    }

    fn typed<T: TorchElement>(&self, name: &str, output: bool) -> PyResult<(usize, &TensorInfo)> {
        let (index, info) = self
            .tensors
            .iter()
            .enumerate()
            .find(|(_, t)| t.name == name)
            .ok_or_else(|| PyValueError::new_err(format!("{}: no tensor argument named `{name}`", self.op)))?;
        if info.output != output {
            let role = if info.output { "an output" } else { "an input" };
            return Err(PyValueError::new_err(format!("{}: `{name}` is {role}", self.op)));
        }
        if info.dtype != T::DTYPE {
            return Err(PyTypeError::new_err(format!("{}: `{name}` must be {} here, not {}", self.op, T::DTYPE.torch_name(), info.dtype.torch_name())));
        }
        Ok((index, info))
    }

    /// The input `name` as a read-only borrowed slice of `T` (its dtype must be `T`'s), for
    /// this thread, with the GIL held ([`TensorSlice`]).
    pub fn input<T: TorchElement>(&self, name: &str) -> PyResult<TensorSlice<'_, T>> {
        let (index, info) = self.typed::<T>(name, false)?;
        // SAFETY: the memory of a CUDA tensor of this device as the call checked it: `self` holds
        // a reference to the tensor, and the slice's memory reaches the GPU only through its
        // `kernel_arg`, which first records the tensor on the launch stream and reads its
        // address, size, dtype, layout and device again (`check_at_use`), refusing the launch
        // if any differs; from that read to the launch no Python code of this thread runs (and
        // another thread's torch code changing the tensor meanwhile is a race inside torch, see
        // the module docs, "Why the memory is there"), so at the launch its storage is there:
        // `numel` elements of `T` (its dtype is `T`'s; every bit pattern is a value of each
        // `TorchElement`), contiguous. Torch writes it only through work queued on its current
        // stream (the home stream) before or after this call, and reuses it, once freed or
        // resized, only after the work queued on that stream (`record_stream` at the use,
        // whatever stream allocated it); no output overlaps it (`check_tensors`). Not covered
        // (G21R-1, documented in docs/interop.md "Other threads"): another thread's torch op,
        // running without the GIL, that frees the memory between the read at use and the
        // launch, as it would under torch's own ops.
        let slice = unsafe { BorrowedSlice::<T>::new(&self.stream, info.address, info.numel) }.map_err(gpu_error)?;
        Ok(TensorSlice { slice, call: self, index, _gil_bound: PhantomData })
    }

    /// The output `name` as a writable borrowed slice of `T`; each output can be taken once.
    /// For this thread, with the GIL held ([`TensorSliceMut`]).
    pub fn output<T: TorchElement>(&self, name: &str) -> PyResult<TensorSliceMut<'_, T>> {
        let (index, info) = self.typed::<T>(name, true)?;
        let mut taken = self.taken.borrow_mut();
        if taken[index] {
            return Err(PyValueError::new_err(format!("{}: the output `{name}` was taken twice", self.op)));
        }
        taken[index] = true;
        // SAFETY: as in `input`; besides, no other argument overlaps it (`check_tensors`) and it is
        // lent once (`taken`), so this is the only access to its memory for the call; and no
        // other call is open on this thread while this one is (`OpenCall`, G24R-2), so no slice
        // of another call can join it in a launch.
        let slice = unsafe { BorrowedSliceMut::<T>::new(&self.stream, info.address, info.numel) }.map_err(gpu_error)?;
        Ok(TensorSliceMut { slice, call: self, index, _gil_bound: PhantomData })
    }
}

/// Marks tensor `index` as taken by a launch and returns every tensor so marked, in order: what
/// [`Call::read_used`] reads (G24R-1).
fn mark_used(used: &mut [bool], index: usize) -> Vec<usize> {
    used[index] = true;
    used.iter().enumerate().filter_map(|(i, &u)| u.then_some(i)).collect()
}

thread_local! {
    /// The op of the [`Call`] open on this thread, if any ([`OpenCall`]).
    static OPEN_CALL: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// The mark of the one [`Call`] open on this thread (G24R-2, audit 2026-11-29f): a second
/// `Call` is refused while it lives.
///
/// A call's checks (`check_tensors`: no output overlaps any other tensor; `taken`: each output
/// lent once) hold among its own tensors. The closure of [`Call::with`] (or of an
/// [`Op`](crate::op::Op)'s launch) could open another call, from Rust or by calling an op from
/// Python, and launch with slices of both: the outer call's input `t[:-1]` as a kernel's `&[T]`
/// and the inner call's output `t[1:]` as its exclusive output (or two outputs over one tensor),
/// the overlap each call refuses of its own tensors: a data race in the kernel, and `&[T]`
/// (`ld.global.nc`) over memory the kernel writes. With one call open per thread, every slice
/// a launch on this thread can take comes from one call (the slices are neither `Send` nor
/// `Sync`, so no other thread's call can lend them here), so that call's checks cover the
/// launch. A registry of the byte ranges every open call lent would allow nesting; no op needs
/// it (an op's closure launches kernels; calling another op from it is refused with an error
/// that says so).
pub(crate) struct OpenCall {
    /// Stays on its thread (the mark is the thread's).
    _thread_bound: PhantomData<*const ()>,
}

impl OpenCall {
    /// Marks `op`'s call as open on this thread, or the error if another is open (its op named)
    /// or the thread is ending.
    pub(crate) fn enter(op: &str) -> Result<OpenCall, String> {
        let entered = OPEN_CALL.try_with(|open| {
            let mut open = open.borrow_mut();
            if let Some(outer) = open.as_deref() {
                return Err(format!(
                    "{op}: called while `{outer}` is running on this thread (from its launch closure, or from Python code that                      closure runs): a launch could then take slices of both calls, which neither call checks against the other                      (an output overlapping an input, audit 2026-11-29f G24R-2). Call ops one after another, not one inside another"
                ));
            }
            *open = Some(op.to_string());
            Ok(OpenCall { _thread_bound: PhantomData })
        });
        entered.unwrap_or_else(|_| Err(format!("{op}: called while this thread is ending (its thread-locals are gone): call it from a live thread")))
    }
}

impl Drop for OpenCall {
    fn drop(&mut self) {
        // `enter` set it on this thread; gone only if the thread is ending, when nothing opens.
        let _ = OPEN_CALL.try_with(|open| open.borrow_mut().take());
    }
}

/// The panic of a launch refused where a tensor's memory is used ([`TensorSlice`]'s
/// `kernel_arg`, which cannot return an error: G23R-1), with the error's text; turned back into
/// a `RuntimeError` by [`catch_refusal`].
pub(crate) struct RefusedAtUse(String);

/// Runs `f` (an op's launch, a [`Call::with`] closure), turning a launch refused at use
/// ([`RefusedAtUse`]) into the `RuntimeError` it stands for; any other panic goes on.
pub(crate) fn catch_refusal<R>(f: impl FnOnce() -> PyResult<R>) -> PyResult<R> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(outcome) => outcome,
        Err(payload) => match payload.downcast::<RefusedAtUse>() {
            Ok(refused) => Err(PyRuntimeError::new_err(refused.0)),
            Err(other) => std::panic::resume_unwind(other),
        },
    }
}

/// An input tensor of a [`Call`] as device memory of `T`, read-only: pass `&slice` to a kernel's
/// `&[T]` parameter (it is a [`DeviceRead`]).
///
/// Neither `Send` nor `Sync` (session 22). The tensor's memory is known to be there only while
/// no Python code runs between the call's last read of the tensor and the launch, which the GIL,
/// held by the op's thread from [`Call::with`] to its end, ensures (see the
/// [module docs](self), "Why the memory is there"). A slice that could move to another thread,
/// or into `Python::detach` (which releases the GIL and requires `Send`), could be launched
/// after another thread's Python code freed the memory (`del`, `resize_`). It exposes nothing
/// that is `Send` either: no `Deref` to the host's [`BorrowedSlice`] and no `DeviceView`.
///
/// ```compile_fail,E0277
/// // The slice cannot be moved into a closure that runs without the GIL.
/// fn launch_without_the_gil(py: pyo3::Python<'_>, call: &ferrocuda_torch::glue::Call) -> pyo3::PyResult<()> {
///     let x = call.input::<f32>("x")?;
///     py.detach(move || x.len());
///     Ok(())
/// }
/// ```
pub struct TensorSlice<'a, T> {
    slice: BorrowedSlice<'a, T>,
    /// The call and the tensor's index in it: read again at each use ([`Call::check_at_use`]).
    call: &'a Call,
    index: usize,
    /// `!Send` and `!Sync`: the slice is valid only on the thread holding the GIL for the call.
    _gil_bound: PhantomData<*const ()>,
}

/// An output tensor of a [`Call`] as writable device memory of `T`: pass `&mut slice` to a
/// kernel's output parameter (it is a [`DeviceWrite`]). Neither `Send` nor `Sync`, for the
/// reason given at [`TensorSlice`].
///
/// ```compile_fail,E0277
/// fn launch_on_another_thread(call: &ferrocuda_torch::glue::Call) -> pyo3::PyResult<()> {
///     let out = call.output::<f32>("out")?;
///     std::thread::scope(|s| {
///         s.spawn(move || out.len());
///     });
///     Ok(())
/// }
/// ```
pub struct TensorSliceMut<'a, T> {
    slice: BorrowedSliceMut<'a, T>,
    /// As for [`TensorSlice`].
    call: &'a Call,
    index: usize,
    /// As for [`TensorSlice`].
    _gil_bound: PhantomData<*const ()>,
}

// Both stay on the op's thread (session 22): checked at compile time here, not only by the
// doctests, so a change that made either `Send` or `Sync` fails this crate's build.
const _: () = {
    trait AmbiguousIfSendOrSync<A> {
        fn some_item() {}
    }
    impl<T: ?Sized> AmbiguousIfSendOrSync<()> for T {}
    impl<T: ?Sized + Send> AmbiguousIfSendOrSync<u8> for T {}
    impl<T: ?Sized + Sync> AmbiguousIfSendOrSync<u16> for T {}
    // Resolves only when exactly one impl applies: the type is neither `Send` nor `Sync`.
    let _ = <TensorSlice<'static, f32> as AmbiguousIfSendOrSync<_>>::some_item;
    let _ = <TensorSliceMut<'static, f32> as AmbiguousIfSendOrSync<_>>::some_item;
};

macro_rules! tensor_slice_common {
    ($ty:ident) => {
        impl<T> $ty<'_, T> {
            /// Number of elements.
            pub fn len(&self) -> usize {
                self.slice.len()
            }
            /// True when it holds no elements.
            pub fn is_empty(&self) -> bool {
                self.slice.is_empty()
            }
            /// The tensor's device address (`data_ptr()`, as read by the call).
            pub fn device_ptr(&self) -> u64 {
                self.slice.device_ptr()
            }

            /// The tensor read again before its memory goes to a launch ([`Call::check_at_use`]).
            /// `kernel_arg` cannot return an error, so a tensor that changed since the call
            /// checked it (Python code run meanwhile freed or moved its memory) is a panic
            /// ([`RefusedAtUse`]): the launch never happens, and the call ([`Call::with`], an
            /// op) turns it into a `RuntimeError`.
            fn checked_at_use(&self) {
                if let Err(error) = self.call.check_at_use(self.index) {
                    std::panic::panic_any(RefusedAtUse(format!("ferrocuda_torch: launch refused (G23R-1): {error}")));
                }
            }
        }

        impl<T> std::fmt::Debug for $ty<'_, T> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($ty)).field("ptr", &format_args!("{:#x}", self.slice.device_ptr())).field("len", &self.slice.len()).finish()
            }
        }

        // SAFETY: the borrowed slice's own argument (memory of `len` valid `T`s for the borrow,
        // with its use tracking), given only after the tensor was read again, here, where the
        // launch uses it (G23R-1: `check_at_use`).
        unsafe impl<T> DeviceRead<T> for $ty<'_, T> {
            #[inline]
            fn kernel_arg(&self) -> SliceArg<'_> {
                self.checked_at_use();
                self.slice.kernel_arg()
            }
        }
    };
}
tensor_slice_common!(TensorSlice);
tensor_slice_common!(TensorSliceMut);

// SAFETY: the borrowed output's own argument; exclusive as the `BorrowedSliceMut` is (taken
// once from the call, `Call::output`), and the `&mut self` borrow keeps other views out.
unsafe impl<T> DeviceWrite<T> for TensorSliceMut<'_, T> {
    #[inline]
    fn kernel_arg_mut(&mut self) -> SliceArg<'_> {
        self.checked_at_use();
        self.slice.kernel_arg_mut()
    }
}

/// Runs `$body` with `$t` bound to the element type of `$dtype` (float32, bfloat16, float16);
/// any other dtype is a `TypeError` naming `$op`.
#[macro_export]
macro_rules! dispatch_float {
    ($op:expr, $dtype:expr, $t:ident => $body:expr) => {
        match $dtype {
            $crate::glue::DType::F32 => {
                type $t = f32;
                $body
            }
            $crate::glue::DType::BF16 => {
                type $t = $crate::half::bf16;
                $body
            }
            $crate::glue::DType::F16 => {
                type $t = $crate::half::f16;
                $body
            }
            other => {
                Err(::pyo3::exceptions::PyTypeError::new_err(format!("{}: dtype {} is not supported: float32, bfloat16 or float16", $op, other.torch_name())))
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// G24R-2: a second call on a thread with one open is refused, naming the open one; it opens
    /// once the first ends; another thread is not affected.
    #[test]
    fn g24r2_one_open_call_per_thread() {
        let outer = OpenCall::enter("t::outer").expect("the first call opens");
        let refused = OpenCall::enter("t::inner").err().expect("a call inside another is refused");
        assert!(refused.starts_with("t::inner: called while `t::outer` is running on this thread"), "{refused}");
        assert!(refused.contains("G24R-2"), "{refused}");
        // The refusal left the outer call's mark alone.
        assert!(OpenCall::enter("t::again").is_err());
        std::thread::spawn(|| drop(OpenCall::enter("t::other_thread").expect("another thread's call opens"))).join().unwrap();
        drop(outer);
        let next = OpenCall::enter("t::next").expect("after the first ended, the next opens");
        drop(next);
    }

    /// G24R-2: a panic out of a call's closure (a launch refused at use unwinds) ends the call.
    #[test]
    fn g24r2_an_unwound_call_ends() {
        let unwound = std::panic::catch_unwind(|| {
            let _open = OpenCall::enter("t::panics").unwrap();
            panic!("refused at use");
        });
        assert!(unwound.is_err());
        drop(OpenCall::enter("t::after_panic").expect("the unwound call ended"));
    }

    /// G24R-1: each use reads every tensor a launch took so far, the one used last among them:
    /// the launch's last argument's check reads all its arguments.
    #[test]
    fn g24r1_each_use_reads_every_tensor_taken_so_far() {
        let mut used = vec![false; 4];
        assert_eq!(mark_used(&mut used, 1), [1]);
        assert_eq!(mark_used(&mut used, 0), [0, 1]);
        assert_eq!(mark_used(&mut used, 3), [0, 1, 3]);
        assert_eq!(mark_used(&mut used, 1), [0, 1, 3]);
        assert_eq!(used, [true, true, false, true]);
    }
}
