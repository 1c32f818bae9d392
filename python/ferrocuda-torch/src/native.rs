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
//! caller runs no Python code, with the garbage collector paused ([`GcPaused`]: its
//! finalizers are Python code). torch's and NumPy's C code is trusted (it is the platform the
//! tensors come from); the objects passed in, the hooks a program installs, and whatever a
//! program put under torch's or NumPy's names (module attributes, `sys.modules`) are not: every
//! platform object is checked to be C code before use (audit 2026-11-29, G21R-2; see [`api`]).
//!
//! Other threads (audit 2026-11-29, G21R-1): the GIL keeps their Python code out, not their
//! torch ops, which run without it; one that frees an argument's memory (`resize_` of a tensor
//! on the same storage) during a call is why the CPU path has torch copy the tensors
//! ([`NoHooks::copy_out`], [`NoHooks::copy_in`]). On the GPU that window (final read to launch)
//! is a documented limit (docs/interop.md, "Other threads"), as it is for torch's own ops.

use std::cell::RefCell;
use std::sync::{Mutex, OnceLock};

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyType;

/// torch's entry points that run no user code (see the module's documentation), each taken
/// from an object that Python code cannot rebind (G21R-2, below).
struct Api {
    /// `torch._C.TensorBase`, the C base class of `torch.Tensor`: a static type (made by C code,
    /// immutable), checked.
    tensor_base: Py<PyType>,
    /// `torch._C.DisableTorchFunction` (a static type) and its C `__enter__`/`__exit__`.
    disable_function: Py<PyAny>,
    function_enter: Py<PyAny>,
    function_exit: Py<PyAny>,
    /// `torch._C._DisableTorchDispatch` and its `__enter__`/`__exit__` (see [`dispatch_guard`]).
    disable_dispatch: Py<PyAny>,
    dispatch_enter: Py<PyAny>,
    dispatch_exit: Py<PyAny>,
    data_ptr: Py<PyAny>,
    numel: Py<PyAny>,
    element_size: Py<PyAny>,
    is_contiguous: Py<PyAny>,
    /// The getter of `dtype` (torch's dtype objects are singletons: compared by identity).
    dtype: Py<PyAny>,
    is_floating_point: Py<PyAny>,
    get_device: Py<PyAny>,
    size: Py<PyAny>,
    record_stream: Py<PyAny>,
    is_neg: Py<PyAny>,
    /// `clone` and `new_empty`, `copy_`: the CPU path's copies in and out (G21R-1).
    #[cfg_attr(not(feature = "library"), allow(dead_code))]
    clone: Py<PyAny>,
    new_empty: Py<PyAny>,
    #[cfg_attr(not(feature = "library"), allow(dead_code))]
    copy_: Py<PyAny>,
    /// The getter of `requires_grad` (each getter: the checked descriptor, called by [`get`]).
    requires_grad: Py<PyAny>,
    /// The getters of the `is_cuda` and `is_cpu` properties.
    is_cuda: Py<PyAny>,
    is_cpu: Py<PyAny>,
    current_stream: Py<PyAny>,
    /// `torch._C._CudaStreamBase` (static) and the getter (descriptor) of its `cuda_stream`, to check what
    /// `torch.cuda.current_stream` returned; `None` in a torch built without CUDA.
    cuda_stream_base: Option<(Py<PyType>, Py<PyAny>)>,
}

// G21R-2 (audit 2026-11-29): the platform's objects are found by name in mutable Python state
// (module attributes, `sys.modules`), which any Python code can rebind: `torch._C.TensorBase =
// Base` made a class of the program's decide which objects are tensors and what their
// addresses are. So nothing found by name is trusted as found; it is checked to be something
// Python code cannot make:
//
// - a *static* type (no `Py_TPFLAGS_HEAPTYPE`): made by C code, and immutable since CPython
//   3.10 (its attributes cannot be set, so its methods are the C code it was made with). Every
//   class defined in Python is a heap type. Its `__module__` and `__name__` come from its C
//   `tp_name` (read through its static metatype: no Python code runs), and are checked too;
// - a method taken from such a type's own `__dict__` must be a `method_descriptor` (or a
//   `getset_descriptor` for a property) whose `__objclass__` is that type and whose `__name__`
//   is the one asked for: Python code cannot make either kind of object;
// - a module-level function must be a `builtin_function_or_method` (a C function) of the name
//   asked for, bound to a module: its name is its C `PyMethodDef`'s, read-only.
//
// Only what passed is cached. A check that fails is an error that says what was replaced.

/// `ty`'s `Py_TPFLAGS_*` flags (a C read).
fn type_flags(ty: &Bound<'_, PyType>) -> std::os::raw::c_ulong {
    // SAFETY: a live type object; `PyType_GetFlags` reads one field.
    unsafe { pyo3::ffi::PyType_GetFlags(ty.as_type_ptr()) }
}

/// Whether `ty` is a static type (made by C code, not by a class statement) whose metatype is
/// static too (so reading its attributes runs no Python code).
fn is_static(ty: &Bound<'_, PyType>) -> bool {
    type_flags(ty) & pyo3::ffi::Py_TPFLAGS_HEAPTYPE == 0 && type_flags(&ty.get_type()) & pyo3::ffi::Py_TPFLAGS_HEAPTYPE == 0
}

/// Whether `ty` is the static type `module.name` (one of `names`).
fn is_static_named(ty: &Bound<'_, PyType>, module: &str, names: &[&str]) -> PyResult<bool> {
    if !is_static(ty) {
        return Ok(false);
    }
    let py = ty.py();
    let module_now: String = ty.getattr(intern!(py, "__module__"))?.extract()?;
    let name_now: String = ty.getattr(intern!(py, "__name__"))?.extract()?;
    Ok(module_now == module && names.contains(&name_now.as_str()))
}

fn replaced(what: &str) -> PyErr {
    PyRuntimeError::new_err(format!(
        "ferrocuda_torch: {what} is not torch's C object (Python code replaced it): the package takes the memory of tensors only from \
         torch's own C types and functions (audit 2026-11-29, G21R-2). Do not rebind torch's attributes"
    ))
}

/// `object` checked to be the static type `module.name` (one of `names`), as `what` for errors.
fn static_type<'py>(object: Bound<'py, PyAny>, module: &str, names: &[&str], what: &str) -> PyResult<Bound<'py, PyType>> {
    let ty = object.cast_into::<PyType>().map_err(|_| replaced(what))?;
    if !is_static_named(&ty, module, names)? {
        return Err(replaced(what));
    }
    Ok(ty)
}

/// The descriptor `name` of `ty`'s own `__dict__`, checked to be of the exact C descriptor type
/// `kind` (`PyMethodDescr_Type`, `PyGetSetDescr_Type`), of `ty`, named `name`.
fn c_descriptor<'py>(ty: &Bound<'py, PyType>, name: &str, kind: *mut pyo3::ffi::PyTypeObject) -> PyResult<Bound<'py, PyAny>> {
    let py = ty.py();
    let what = || format!("{}.{name}", ty.name().map(|n| n.to_string()).unwrap_or_default());
    let descriptor = ty.getattr(intern!(py, "__dict__"))?.get_item(name).map_err(|_| replaced(&what()))?;
    // SAFETY: reads the object's type pointer.
    let exact = unsafe { pyo3::ffi::Py_TYPE(descriptor.as_ptr()) } == kind;
    if !exact || !descriptor.getattr(intern!(py, "__objclass__"))?.is(ty) || descriptor.getattr(intern!(py, "__name__"))?.extract::<String>()? != name {
        return Err(replaced(&what()));
    }
    Ok(descriptor)
}

/// The C method `name` of the static type `ty` (called unbound: `method(tensor, ...)`).
fn c_method(ty: &Bound<'_, PyType>, name: &str) -> PyResult<Py<PyAny>> {
    c_descriptor(ty, name, &raw mut pyo3::ffi::PyMethodDescr_Type).map(Bound::unbind)
}

/// The C property `name` of the static type `ty`: its getset descriptor, checked (called
/// through [`get`]).
fn c_getter(ty: &Bound<'_, PyType>, name: &str) -> PyResult<Py<PyAny>> {
    c_descriptor(ty, name, &raw mut pyo3::ffi::PyGetSetDescr_Type).map(Bound::unbind)
}

/// `PyObject_Vectorcall` (CPython's call without an argument tuple), looked up in the running
/// interpreter: exported from 3.11 on (stable ABI from 3.12), not in the 3.9 ABI the wheel is
/// built for; `None` before 3.11, where [`call_c`] builds the tuple.
type Vectorcall = unsafe extern "C" fn(*mut pyo3::ffi::PyObject, *const *mut pyo3::ffi::PyObject, usize, *mut pyo3::ffi::PyObject) -> *mut pyo3::ffi::PyObject;

fn vectorcall() -> Option<Vectorcall> {
    static FUNCTION: OnceLock<Option<usize>> = OnceLock::new();
    let address = *FUNCTION.get_or_init(|| {
        // SAFETY: dlsym with the default handle and a NUL-terminated name.
        let found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"PyObject_Vectorcall".as_ptr()) };
        (!found.is_null()).then_some(found as usize)
    });
    // SAFETY: a found symbol is CPython's `PyObject_Vectorcall`, of this signature (its C API).
    address.map(|a| unsafe { std::mem::transmute::<usize, Vectorcall>(a) })
}

/// `f(*args)` for a C function or method descriptor checked at load ([`api`]): with
/// `PyObject_Vectorcall` where the interpreter has it, so no argument tuple is allocated (a
/// tuple is a GC-tracked object; torch's C methods are called with the tensor as `self`).
fn call_c<'py>(py: Python<'py>, f: &Py<PyAny>, args: &[&Bound<'py, PyAny>]) -> PyResult<Bound<'py, PyAny>> {
    let Some(vectorcall) = vectorcall().filter(|_| args.len() <= 4) else {
        return f.bind(py).call1(pyo3::types::PyTuple::new(py, args)?);
    };
    let mut pointers = [std::ptr::null_mut(); 4];
    for (pointer, arg) in pointers.iter_mut().zip(args) {
        *pointer = arg.as_ptr();
    }
    // SAFETY: `f` and each argument are live objects (borrowed for the call), `args.len()`
    // pointers are passed, no keyword names; the GIL is held. Returns a new reference or null
    // with an exception set.
    unsafe { Bound::from_owned_ptr_or_err(py, vectorcall(f.as_ptr(), pointers.as_ptr(), args.len(), std::ptr::null_mut())) }
}

/// CPython's `tp_descr_get` of getset descriptors (`PyGetSetDescr_Type`), which checks the
/// object's type against the descriptor's and calls its C getter: no argument tuple. `None` on
/// CPython 3.9, whose `PyType_GetSlot` does not read a static type's slots (`__get__` is called).
type DescrGet = unsafe extern "C" fn(*mut pyo3::ffi::PyObject, *mut pyo3::ffi::PyObject, *mut pyo3::ffi::PyObject) -> *mut pyo3::ffi::PyObject;

fn descr_get(py: Python<'_>) -> Option<DescrGet> {
    static SLOT: OnceLock<Option<usize>> = OnceLock::new();
    let address = *SLOT.get_or_init(|| {
        if py.version_info() < (3, 10) {
            return None;
        }
        let slot = type_slot(&raw mut pyo3::ffi::PyGetSetDescr_Type, pyo3::ffi::Py_tp_descr_get);
        (slot != 0).then_some(slot)
    });
    // SAFETY: the `tp_descr_get` slot of CPython's getset descriptor type, of this signature.
    address.map(|a| unsafe { std::mem::transmute::<usize, DescrGet>(a) })
}

/// The C property `descriptor` (from [`c_getter`]) of `object`.
fn get<'py>(py: Python<'py>, descriptor: &Py<PyAny>, object: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    match descr_get(py) {
        // SAFETY: `descriptor` is a live getset descriptor (checked at load: exactly
        // `PyGetSetDescr_Type`), `object` a live object; the slot checks the object's type and
        // returns a new reference or null with an exception set. The GIL is held.
        Some(get) => unsafe { Bound::from_owned_ptr_or_err(py, get(descriptor.as_ptr(), object.as_ptr(), std::ptr::null_mut())) },
        None => descriptor.bind(py).call_method1(intern!(py, "__get__"), (object,)),
    }
}

/// `object` checked to be a C function named `name`, bound to a module (a module-level
/// function of a C extension).
pub(crate) fn c_function<'py>(object: Bound<'py, PyAny>, name: &str, what: &str) -> PyResult<Bound<'py, PyAny>> {
    let py = object.py();
    // SAFETY: reads the object's type pointer.
    let exact = unsafe { pyo3::ffi::Py_TYPE(object.as_ptr()) } == &raw mut pyo3::ffi::PyCFunction_Type;
    if !exact || object.getattr(intern!(py, "__name__"))?.extract::<String>()? != name {
        return Err(replaced(what));
    }
    let owner = object.getattr(intern!(py, "__self__"))?;
    // SAFETY: reads the object's type pointer.
    if unsafe { pyo3::ffi::Py_TYPE(owner.as_ptr()) } != &raw mut pyo3::ffi::PyModule_Type {
        return Err(replaced(what));
    }
    Ok(object)
}

/// `object` checked to be torch's dtype `name` (`torch.float32`, ...): an instance of torch's
/// static C type `torch.dtype` whose C `repr` is `name` (G23R-3's second instance, audit
/// 2026-11-29d: `torch.float32` is a module attribute Python code can rebind, to another dtype of
/// another element size, and the outputs a call allocates are made of it).
pub(crate) fn checked_dtype<'py>(object: Bound<'py, PyAny>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    let ty = object.get_type();
    if !is_static_named(&ty, "torch", &["dtype"])? {
        return Err(replaced(name));
    }
    // SAFETY: a live object; `PyObject_Repr` of an instance of a static type runs its C `tp_repr`
    // (no Python code); returns a new reference or null with an exception set.
    let repr = unsafe { Bound::from_owned_ptr_or_err(object.py(), pyo3::ffi::PyObject_Repr(object.as_ptr())) }?;
    if repr.extract::<String>()? != name {
        return Err(replaced(name));
    }
    Ok(object)
}

/// `torch._C._DisableTorchDispatch`, with its `__enter__` and `__exit__`.
///
/// torch makes it with pybind11: a heap type whose attributes can be set, so its methods are
/// taken once, checked, and called directly (`enter(guard)`), never looked up on the class or
/// the instance again. Each is checked to be pybind11's wrapper (an `instancemethod`) of a C
/// function of that name whose signature (its C docstring, read-only, written by pybind11 from
/// the C++ binding) names `_DisableTorchDispatch`: a Python function, or another class's
/// `__enter__`, does not pass. If torch ever makes it a static type, the static checks apply.
///
/// The class itself is checked to be made by C code (session 22): it and every base class up to
/// `object` (the `tp_base` chain, read through C slots) lacks CPython's `subtype_dealloc`, the
/// deallocator of every class a class statement or `type(...)` makes, and it is named
/// `_DisableTorchDispatch`. A Python subclass of torch's class, with torch's own `__enter__` and
/// `__exit__` copied into it, would otherwise pass the method checks, and its instances would
/// run its Python code (`__init__`, `__del__`) inside a call. And the instance is made once per
/// thread and kept ([`NoHooks::enter`]): a `__del__` or a weakref callback that Python code puts
/// on torch's class (whose attributes can be set) never runs inside a call, where the old
/// per-section instance was dropped right after the final read of the addresses.
///
/// What it does not cover: Python code that replaces `__enter__` *before the first call* with
/// a C function of another binding whose docstring names `_DisableTorchDispatch` (there is
/// none in torch 2.11); and pybind11's `__init__`, which runs when the guard is made: Python
/// code it might run runs before any address is read (the readers make the guard, record every
/// tensor, then read every address: `dlpack::import_all`, and `glue`'s read where a launch uses a tensor, which also
/// compares with what the checks saw). What a subverted guard still allows is narrower: a
/// handler run by `record_stream` that moves a tensor to memory of another stream after its
/// record (the DLPack path would then not have that memory recorded: G20R-2's case).
fn dispatch_guard<'py>(c: &Bound<'py, PyAny>) -> PyResult<(Bound<'py, PyAny>, Py<PyAny>, Py<PyAny>)> {
    let py = c.py();
    let what = "torch._C._DisableTorchDispatch";
    let class = c.getattr("_DisableTorchDispatch")?.cast_into::<PyType>().map_err(|_| replaced(what))?;
    if is_static(&class) {
        let class = static_type(class.into_any(), "torch._C", &["_DisableTorchDispatch"], what)?;
        let enter = c_method(&class, "__enter__")?;
        let exit = c_method(&class, "__exit__")?;
        return Ok((class.into_any(), enter, exit));
    }
    if !made_by_c(&class)? || class.name()? != "_DisableTorchDispatch" {
        return Err(replaced(what));
    }
    let dict = class.getattr(intern!(py, "__dict__"))?;
    let method = |name: &str| -> PyResult<Py<PyAny>> {
        let wrapper = dict.get_item(name).map_err(|_| replaced(&format!("{what}.{name}")))?;
        // SAFETY: reads the object's type pointer.
        let wrapper_type = unsafe { pyo3::ffi::Py_TYPE(wrapper.as_ptr()) };
        // pybind11 stores methods as `instancemethod(C function)`; `instancemethod` is a static
        // C type (made by no class statement), whose `__func__` cannot be set.
        // SAFETY: a live type object.
        let wrapper_static = unsafe { pyo3::ffi::PyType_GetFlags(wrapper_type) } & pyo3::ffi::Py_TPFLAGS_HEAPTYPE == 0;
        let function = if wrapper_static { wrapper.getattr(intern!(py, "__func__")).ok() } else { None };
        let function = function.ok_or_else(|| replaced(&format!("{what}.{name}")))?;
        // SAFETY: reads the object's type pointer.
        let exact = unsafe { pyo3::ffi::Py_TYPE(function.as_ptr()) } == &raw mut pyo3::ffi::PyCFunction_Type;
        let named = exact && function.getattr(intern!(py, "__name__"))?.extract::<String>()? == name;
        let doc: Option<String> = if named { function.getattr(intern!(py, "__doc__"))?.extract().ok() } else { None };
        if !doc.is_some_and(|doc| doc.contains("_DisableTorchDispatch")) {
            return Err(replaced(&format!("{what}.{name}")));
        }
        Ok(function.unbind())
    };
    let enter = method("__enter__")?;
    let exit = method("__exit__")?;
    Ok((class.into_any(), enter, exit))
}

/// A type slot of `ty` (`PyType_GetSlot`: a C read, no Python code), as an address; 0 when
/// unset. Static types answer only from CPython 3.10 on: callers ask heap types only.
fn type_slot(ty: *mut pyo3::ffi::PyTypeObject, slot: std::os::raw::c_int) -> usize {
    // SAFETY: a live type object and a slot number of CPython's `typeslots.h`; reads one field.
    unsafe { pyo3::ffi::PyType_GetSlot(ty, slot) as usize }
}

/// Whether `ty` and its base classes (the `tp_base` chain up to `object`) were all made by C
/// code, not by a class statement or `type(...)` (session 22, see [`dispatch_guard`]): every
/// class Python code makes gets CPython's `subtype_dealloc` as its deallocator, read here from
/// a class made for the comparison; a C extension's heap types (pybind11's) have their own.
/// Static types are C code by definition.
fn made_by_c(ty: &Bound<'_, PyType>) -> PyResult<bool> {
    static SUBTYPE_DEALLOC: OnceLock<usize> = OnceLock::new();
    let py = ty.py();
    let subtype_dealloc = match SUBTYPE_DEALLOC.get() {
        Some(address) => *address,
        None => {
            // `type("...", (), {})` through the C type object itself (`type` in `builtins` can be
            // rebound; `PyType_Type` cannot).
            // SAFETY: CPython's static `type` object, alive for the process; borrowed.
            let type_type = unsafe { Bound::from_borrowed_ptr(py, (&raw mut pyo3::ffi::PyType_Type).cast()) };
            let probe = type_type.call1(("ferrocuda_probe", pyo3::types::PyTuple::empty(py), pyo3::types::PyDict::new(py)))?;
            let address = type_slot(probe.as_ptr().cast(), pyo3::ffi::Py_tp_dealloc);
            *SUBTYPE_DEALLOC.get_or_init(|| address)
        }
    };
    let object = &raw mut pyo3::ffi::PyBaseObject_Type;
    let mut current = ty.as_type_ptr();
    // A chain is short (pybind11: the class, `pybind11_object`); bounded all the same.
    for _ in 0..64 {
        if current.is_null() || current == object {
            return Ok(true);
        }
        // SAFETY: a live type object; reads its flags.
        if unsafe { pyo3::ffi::PyType_GetFlags(current) } & pyo3::ffi::Py_TPFLAGS_HEAPTYPE == 0 {
            return Ok(true); // a static type and its bases: C code
        }
        if subtype_dealloc == 0 || type_slot(current, pyo3::ffi::Py_tp_dealloc) == subtype_dealloc {
            return Ok(false);
        }
        current = type_slot(current, pyo3::ffi::Py_tp_base) as *mut pyo3::ffi::PyTypeObject;
    }
    Ok(false)
}

/// torch's API, once checked.
static API: OnceLock<Api> = OnceLock::new();

fn api(py: Python<'_>) -> PyResult<&'static Api> {
    if let Some(api) = API.get() {
        return Ok(api);
    }
    let torch = py.import("torch")?;
    let c = torch.getattr("_C")?;
    let base = c.getattr("TensorBase").or_else(|_| c.getattr("_TensorBase"))?;
    let base = static_type(base, "torch._C", &["TensorBase", "_TensorBase"], "torch._C.TensorBase")?;
    let method = |name: &str| c_method(&base, name);
    let getter = |name: &str| c_getter(&base, name);
    let disable_function = static_type(c.getattr("DisableTorchFunction")?, "torch._C", &["DisableTorchFunction"], "torch._C.DisableTorchFunction")?;
    let (disable_dispatch, dispatch_enter, dispatch_exit) = dispatch_guard(&c)?;
    let cuda_stream_base = match c.getattr("_CudaStreamBase") {
        Ok(class) => {
            let class = static_type(class, "torch._C", &["_CudaStreamBase"], "torch._C._CudaStreamBase")?;
            let getter = c_getter(&class, "cuda_stream")?;
            Some((class.unbind(), getter))
        }
        Err(_) => None,
    };
    let api = Api {
        function_enter: c_method(&disable_function, "__enter__")?,
        function_exit: c_method(&disable_function, "__exit__")?,
        disable_function: disable_function.into_any().unbind(),
        disable_dispatch: disable_dispatch.unbind(),
        dispatch_enter,
        dispatch_exit,
        data_ptr: method("data_ptr")?,
        numel: method("numel")?,
        element_size: method("element_size")?,
        is_contiguous: method("is_contiguous")?,
        is_floating_point: method("is_floating_point")?,
        get_device: method("get_device")?,
        size: method("size")?,
        record_stream: method("record_stream")?,
        is_neg: method("is_neg")?,
        clone: method("clone")?,
        new_empty: method("new_empty")?,
        copy_: method("copy_")?,
        requires_grad: getter("requires_grad")?,
        dtype: getter("dtype")?,
        is_cuda: getter("is_cuda")?,
        is_cpu: getter("is_cpu")?,
        // Python code of torch's (`torch.cuda.current_stream`); what it returns is checked
        // (`current_stream_object`).
        current_stream: torch.getattr("cuda")?.getattr("current_stream")?.unbind(),
        cuda_stream_base,
        tensor_base: base.unbind(),
    };
    Ok(API.get_or_init(|| api))
}

/// Whether `object` is a `torch.Tensor` (a subclass too), without importing torch (an object of
/// that type exists only once torch is imported) and without running any Python code: the
/// type's C-level ancestry is checked (`PyType_IsSubtype`), not `isinstance`, which would ask the
/// object's `__class__` (a property a class may override), against torch's C base type, checked
/// to be one (G21R-2).
#[cfg_attr(not(feature = "library"), allow(dead_code))]
pub(crate) fn is_tensor(py: Python<'_>, object: &Bound<'_, PyAny>) -> PyResult<bool> {
    // Once torch's API was checked, `sys.modules` (which Python code may edit) is not asked.
    if API.get().is_none() && !loaded(py, "torch")? {
        return Ok(false);
    }
    let base = api(py)?.tensor_base.bind(py);
    // SAFETY: two live type objects (the object's own type and `torch._C.TensorBase`); the call
    // reads their MROs and runs no Python code.
    Ok(unsafe { pyo3::ffi::PyType_IsSubtype(object.get_type().as_type_ptr(), base.as_type_ptr()) } != 0)
}

/// Whether `object`'s type is exactly `numpy.ndarray` (no subclass: an instance of a subclass may
/// carry a `__dlpack__` of its own), without importing NumPy and without running Python code.
/// The type is checked to be NumPy's C type (static, `numpy.ndarray` by its C name), not taken
/// from `numpy.ndarray`, which Python code can rebind (G21R-2).
#[cfg_attr(not(feature = "library"), allow(dead_code))]
pub(crate) fn is_exact_ndarray(_py: Python<'_>, object: &Bound<'_, PyAny>) -> PyResult<bool> {
    static NDARRAY: OnceLock<Py<PyType>> = OnceLock::new();
    let ty = object.get_type();
    if let Some(ndarray) = NDARRAY.get() {
        return Ok(ty.is(ndarray.bind(ty.py())));
    }
    if !is_static_named(&ty, "numpy", &["ndarray"])? {
        return Ok(false);
    }
    let _ = NDARRAY.set(ty.clone().unbind());
    Ok(true)
}

/// Whether the module `name` has been imported (is in `sys.modules`).
#[cfg_attr(not(feature = "library"), allow(dead_code))]
fn loaded(py: Python<'_>, name: &str) -> PyResult<bool> {
    py.import(intern!(py, "sys"))?.getattr(intern!(py, "modules"))?.contains(name)
}

/// The cyclic garbage collector paused while the value lives (G21R-1's review, "GC finalizers").
///
/// An allocation of a GC-tracked object (a tuple, a list, a `torch.Size`) may run a collection,
/// and a collection runs the finalizers (`__del__`, weakref callbacks) of unreachable objects:
/// arbitrary Python code, which could resize a tensor whose address was read. The calls made
/// between an address read and its use allocate such objects (pyo3's calls under the stable ABI
/// pass a new argument tuple, `size()` returns a `torch.Size`), so instead of an argument that
/// none does, the collector is paused there: `PyGC_Disable` (a C call: `gc.disable` is a module
/// attribute Python can rebind) from before the first address read to after the last use, and
/// re-enabled after, if it was enabled. Nothing in between runs Python code (so nothing can
/// re-enable it, or collect explicitly), and no GIL is released in between (so no other thread
/// runs at all). Cheap: a flag.
pub(crate) struct GcPaused {
    was_enabled: bool,
}

type GcFn = unsafe extern "C" fn() -> std::os::raw::c_int;

/// `PyGC_Disable` and `PyGC_Enable` (CPython >= 3.10, not in the 3.9 stable ABI the wheel is
/// built for: looked up in the running interpreter), or `None` on 3.9.
fn gc_functions() -> Option<(GcFn, GcFn)> {
    static FUNCTIONS: OnceLock<Option<(GcFn, GcFn)>> = OnceLock::new();
    *FUNCTIONS.get_or_init(|| {
        // SAFETY: dlsym with the default handle and two NUL-terminated names; a found symbol is
        // CPython's function of that name, whose signature is `int (void)` (CPython's C API).
        unsafe {
            let disable = libc::dlsym(libc::RTLD_DEFAULT, c"PyGC_Disable".as_ptr());
            let enable = libc::dlsym(libc::RTLD_DEFAULT, c"PyGC_Enable".as_ptr());
            if disable.is_null() || enable.is_null() {
                return None;
            }
            Some((std::mem::transmute::<*mut libc::c_void, GcFn>(disable), std::mem::transmute::<*mut libc::c_void, GcFn>(enable)))
        }
    })
}

impl GcPaused {
    /// Pauses the collector (with the GIL held, `_py`).
    pub(crate) fn enter(py: Python<'_>) -> PyResult<Self> {
        if let Some((disable, _)) = gc_functions() {
            // SAFETY: CPython's `PyGC_Disable`, called with the GIL held; returns the previous state.
            let was = unsafe { disable() };
            return Ok(GcPaused { was_enabled: was != 0 });
        }
        // CPython 3.9: the `gc` module's C functions, checked to be C functions of those names.
        let gc = py.import(intern!(py, "gc"))?;
        let was_enabled = c_function(gc.getattr("isenabled")?, "isenabled", "gc.isenabled")?.call0()?.extract()?;
        c_function(gc.getattr("disable")?, "disable", "gc.disable")?.call0()?;
        Ok(GcPaused { was_enabled })
    }
}

impl Drop for GcPaused {
    fn drop(&mut self) {
        if !self.was_enabled {
            return;
        }
        Python::attach(|py| {
            if let Some((_, enable)) = gc_functions() {
                // SAFETY: CPython's `PyGC_Enable`, with the GIL held.
                unsafe { enable() };
            } else if let Ok(gc) = py.import(intern!(py, "gc"))
                && let Ok(enable) = gc.getattr("enable").and_then(|f| c_function(f, "enable", "gc.enable"))
            {
                let _ = enable.call0();
            }
        });
    }
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

/// What [`NoHooks::read_for_use`] read of a tensor.
#[derive(Clone, Copy, Debug)]
pub(crate) struct UseRead {
    pub address: u64,
    pub numel: usize,
    /// The address of its dtype object (compared with torch's checked dtypes).
    pub dtype: usize,
    pub contiguous: bool,
    /// Its CUDA device index, `None` when it is not a CUDA tensor.
    pub cuda: Option<i64>,
}

/// `__torch_function__` handling and the Python dispatch keys off while the value lives: the
/// calls made through it run torch's C code only.
///
/// One section per op (session 21): a [`NoHooks`] entered while another of the same thread is
/// alive enters nothing itself (a counter). torch's guards are left only when the last
/// `NoHooks` of the thread is dropped, whatever the order of the drops, so every one of them has
/// the hooks off for its whole life. Entering and leaving are four calls of torch's checked C
/// methods on two guard objects made once per thread (session 24: the at-use read of each tensor
/// enters a section of its own, so its cost is paid per tensor per launch).
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
    /// This thread's `DisableTorchFunction` instance, made at its first section and kept
    /// (session 24; a static C type with no Python code of its own: kept for the cost of making
    /// one per section). It saves the state it replaces when entered: entered once at a time (the
    /// [`ENTERED`] counter), on this thread only.
    static FUNCTION_GUARD: RefCell<Option<Py<PyAny>>> = const { RefCell::new(None) };
    /// This thread's `_DisableTorchDispatch` instance, made at its first section and kept for
    /// the thread's life (session 22): it is entered and left by torch's checked C methods
    /// only, never dropped inside a call, so no `__del__` or weakref callback that Python code
    /// attached to torch's (settable) class runs between an address read and its use. One per
    /// thread because torch's guard object holds its thread's dispatch state while entered.
    static DISPATCH_GUARD: RefCell<Option<Py<PyAny>>> = const { RefCell::new(None) };
}

/// This thread's `_DisableTorchDispatch` instance ([`DISPATCH_GUARD`]), made on first use.
fn dispatch_guard_instance<'py>(py: Python<'py>, api: &Api) -> PyResult<Bound<'py, PyAny>> {
    if let Some(guard) = DISPATCH_GUARD.with_borrow(|g| g.as_ref().map(|g| g.clone_ref(py))) {
        return Ok(guard.into_bound(py));
    }
    let guard = api.disable_dispatch.bind(py).call0()?;
    DISPATCH_GUARD.with_borrow_mut(|g| *g = Some(guard.clone().unbind()));
    Ok(guard)
}

/// This thread's `DisableTorchFunction` instance ([`FUNCTION_GUARD`]), made on first use.
fn function_guard_instance<'py>(py: Python<'py>, api: &Api) -> PyResult<Bound<'py, PyAny>> {
    if let Some(guard) = FUNCTION_GUARD.with_borrow(|g| g.as_ref().map(|g| g.clone_ref(py))) {
        return Ok(guard.into_bound(py));
    }
    let guard = api.disable_function.bind(py).call0()?;
    FUNCTION_GUARD.with_borrow_mut(|g| *g = Some(guard.clone().unbind()));
    Ok(guard)
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
            // Both guards' `__enter__` and `__exit__` as checked once (`api`, `dispatch_guard`),
            // never looked up on the instances.
            let function = function_guard_instance(py, api)?;
            call_c(py, &api.function_enter, &[&function])?;
            let dispatch = match dispatch_guard_instance(py, api).and_then(|d| call_c(py, &api.dispatch_enter, &[&d]).map(|_| d)) {
                Ok(dispatch) => dispatch,
                Err(error) => {
                    let none = py.None().into_bound(py);
                    let _ = call_c(py, &api.function_exit, &[&function, &none, &none, &none]);
                    return Err(error);
                }
            };
            ENTERED.with_borrow_mut(|entered| *entered = (1, Some((function.unbind(), dispatch.unbind()))));
        }
        Ok(NoHooks { py, api })
    }

    fn call(&self, f: &Py<PyAny>, tensor: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        call_c(self.py, f, &[tensor])
    }

    /// The C property `getter` of `tensor`.
    fn get(&self, getter: &Py<PyAny>, tensor: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        get(self.py, getter, tensor)
    }

    /// What a launch needs of `tensor` now, read where its memory is used (`glue`'s at-use
    /// check, G23R-1): its address, element count, dtype object (torch's dtypes are singletons,
    /// checked at load to be its C ones: `glue::dtypes`), contiguity and CUDA device (`None`
    /// when it is not a CUDA tensor). Six C calls, no argument tuple where the interpreter has
    /// `PyObject_Vectorcall`; the results are ints, bools and a dtype torch keeps.
    pub(crate) fn read_for_use(&self, tensor: &Bound<'py, PyAny>) -> PyResult<UseRead> {
        let address = self.call(&self.api.data_ptr, tensor)?.extract()?;
        let cuda = if self.get(&self.api.is_cuda, tensor)?.extract()? { Some(self.call(&self.api.get_device, tensor)?.extract()?) } else { None };
        Ok(UseRead {
            address,
            numel: self.call(&self.api.numel, tensor)?.extract()?,
            dtype: self.get(&self.api.dtype, tensor)?.as_ptr() as usize,
            contiguous: self.call(&self.api.is_contiguous, tensor)?.extract()?,
            cuda,
        })
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
                let device = if self.get(&self.api.is_cuda, t)?.extract()? {
                    let index: i64 = self.call(&self.api.get_device, t)?.extract()?;
                    Device::Cuda(usize::try_from(index).map_err(|_| PyValueError::new_err("a CUDA tensor with a negative device index"))?)
                } else if self.get(&self.api.is_cpu, t)?.extract()? {
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

    /// A new tensor of `shape` and torch dtype `dtype` on `like`'s device, from torch's caching
    /// allocator on the current stream (a capture's pool during a capture): torch's C method
    /// `TensorBase.new_empty`, called unbound on `like` (G23R-3, audit 2026-11-29d: not
    /// `torch.empty_like` or `torch.empty`, module attributes Python code can rebind). What it
    /// returns is read back all the same (where a launch uses it: `glue`).
    pub(crate) fn new_empty(&self, like: &Bound<'py, PyAny>, shape: &[usize], dtype: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let kwargs = pyo3::types::PyDict::new(self.py);
        kwargs.set_item(intern!(self.py, "dtype"), dtype)?;
        self.api.new_empty.bind(self.py).call((like, shape.to_vec()), Some(&kwargs))
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
        if self.get(&self.api.requires_grad, tensor)?.extract()? {
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

    /// The values of the CPU float32 tensor `tensor` (`numel` elements, C-contiguous, as read
    /// before), copied by torch into a tensor of the call's own, then from there into memory of
    /// the call (G21R-1).
    ///
    /// Never read from `tensor`'s memory here: another thread's torch op, running without the
    /// GIL, may free it at any moment (`resize_` of a tensor on the same storage swaps the
    /// storage's memory in place), and holding the tensor does not pin its memory. torch's
    /// `clone` copies it: a race with another thread's op is then one between two torch ops,
    /// which torch's own contract covers (a torch program doing the same reads the same freed
    /// memory). The clone is referenced by this call alone and no Python code runs between its
    /// making and the copy out of it (the GIL is held throughout), so nothing frees it meanwhile.
    #[cfg_attr(not(feature = "library"), allow(dead_code))]
    pub(crate) fn copy_out(&self, tensor: &Bound<'py, PyAny>, numel: usize) -> PyResult<Vec<f32>> {
        let copy = self.call(&self.api.clone, tensor)?;
        let native = self.read(&[&copy])?.remove(0);
        self.check_owned(&copy, &native, numel)?;
        Ok((0..numel)
            .map(|i| {
                // SAFETY: element `i` of the `numel` f32s of `copy`'s memory (checked just now:
                // a CPU float32 tensor of `numel` elements, C-contiguous, 4-byte aligned), which
                // only this call refers to and nothing frees before `copy` drops (see above). An
                // atomic load: if a hook's `clone` handed back memory that others write, their
                // writes race with no non-atomic access of ours.
                let cell = unsafe { std::sync::atomic::AtomicU32::from_ptr((native.address as *mut u32).add(i)) };
                f32::from_bits(cell.load(std::sync::atomic::Ordering::Relaxed))
            })
            .collect())
    }

    /// Writes `values` into the CPU float32 tensor `tensor` (of shape `shape`) through torch:
    /// into a new tensor of the call's own first, then `tensor.copy_(that)` (G21R-1: as in
    /// [`copy_out`](Self::copy_out), the call never writes `tensor`'s memory itself).
    #[cfg_attr(not(feature = "library"), allow(dead_code))]
    pub(crate) fn copy_in(&self, tensor: &Bound<'py, PyAny>, shape: &[usize], values: &[f32]) -> PyResult<()> {
        let staging = self.api.new_empty.bind(self.py).call1((tensor, shape.to_vec()))?;
        let native = self.read(&[&staging])?.remove(0);
        self.check_owned(&staging, &native, values.len())?;
        for (i, &value) in values.iter().enumerate() {
            // SAFETY: as in `copy_out`: element `i` of `values.len()` f32s of memory that torch
            // just allocated for this call alone.
            let cell = unsafe { std::sync::atomic::AtomicU32::from_ptr((native.address as *mut u32).add(i)) };
            cell.store(value.to_bits(), std::sync::atomic::Ordering::Relaxed);
        }
        self.api.copy_.bind(self.py).call1((tensor, &staging)).map(drop)
    }

    /// That `copy` (a tensor torch made for the call) is what the call asked for.
    #[cfg_attr(not(feature = "library"), allow(dead_code))]
    fn check_owned(&self, copy: &Bound<'py, PyAny>, native: &Native, numel: usize) -> PyResult<()> {
        let f32_ok = self.is_f32(copy, native)?;
        if native.device != Device::Cpu || native.numel != numel || !native.contiguous || !f32_ok || (numel > 0 && !native.address.is_multiple_of(4)) {
            return Err(PyRuntimeError::new_err(
                "a tensor changed (its size, dtype or device) while the call copied it: another thread resized it during the call",
            ));
        }
        Ok(())
    }

    /// `tensor.record_stream(stream)` (torch's caching allocator then reuses the tensor's memory,
    /// when it is freed, only after the work queued on `stream` so far; a no-op for memory
    /// allocated on `stream`, and for memory not from the caching allocator).
    pub(crate) fn record_stream(&self, tensor: &Bound<'py, PyAny>, stream: &Bound<'py, PyAny>) -> PyResult<()> {
        call_c(self.py, &self.api.record_stream, &[tensor, stream]).map(drop)
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
            let py = self.py;
            let none = py.None().into_bound(py);
            // `__exit__` as checked once (`api`, `dispatch_guard`), not looked up on the instances.
            let _ = call_c(py, &self.api.dispatch_exit, &[dispatch.bind(py), &none, &none, &none]);
            let _ = call_c(py, &self.api.function_exit, &[function.bind(py), &none, &none, &none]);
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
    let api = api(py)?;
    let stream = api.current_stream.bind(py).call1((device,))?;
    // What `torch.cuda.current_stream` returned (Python code, rebindable: G21R-2) must be one of
    // torch's C stream objects, its handle read through the C getter: `record_stream` reads the
    // stream from the object's C fields.
    let Some((base, cuda_stream)) = &api.cuda_stream_base else {
        return Err(PyRuntimeError::new_err("torch has no CUDA streams (torch._C._CudaStreamBase): a CPU-only torch build cannot run CUDA tensors"));
    };
    // SAFETY: two live type objects; reads their MROs and runs no Python code.
    if unsafe { pyo3::ffi::PyType_IsSubtype(stream.get_type().as_type_ptr(), base.bind(py).as_type_ptr()) } == 0 {
        return Err(replaced("torch.cuda.current_stream"));
    }
    let handle: usize = get(py, cuda_stream, &stream)?.extract()?;
    if handle != raw {
        return Err(PyRuntimeError::new_err(format!(
            "torch's current stream changed while the call read it ({raw:#x}, then {handle:#x}): do not switch streams from another thread during a call"
        )));
    }
    *LAST.lock().unwrap_or_else(|p| p.into_inner()) = Some((device, raw, stream.clone().unbind()));
    Ok(stream)
}

/// The overhead benchmark's CPU measure of the read at use (`ferrocuda_torch._C._bench_reads`,
/// bench/results/s24-torch/; not an API): microseconds per read of `tensor` (a CPU tensor
/// does: nothing here needs a GPU), `iters` times, (1) as session 23 made it (a
/// `DisableTorchFunction` made per section and its methods looked up on it, every call through
/// an argument tuple, the getters through their `__get__`) and (2) as [`NoHooks::read_for_use`]
/// makes it now; `record_stream` (CUDA only) is in neither.
#[cfg(feature = "library")]
pub(crate) fn bench_reads(py: Python<'_>, tensor: &Bound<'_, PyAny>, iters: usize) -> PyResult<Vec<(&'static str, f64)>> {
    use std::time::Instant;
    let api = api(py)?;
    let iters = iters.max(1);
    let per = |start: Instant| start.elapsed().as_secs_f64() * 1e6 / iters as f64;
    let start = Instant::now();
    for _ in 0..iters {
        let gc = GcPaused::enter(py)?;
        let function = api.disable_function.bind(py).call0()?;
        function.call_method0(intern!(py, "__enter__"))?;
        let dispatch = dispatch_guard_instance(py, api)?;
        api.dispatch_enter.bind(py).call1((&dispatch,))?;
        let getter = |d: &Py<PyAny>| d.bind(py).getattr(intern!(py, "__get__")).and_then(|g| g.call1((tensor,)));
        let _: u64 = api.data_ptr.bind(py).call1((tensor,))?.extract()?;
        let _: bool = getter(&api.is_cuda)?.extract()?;
        let _: bool = getter(&api.is_cpu)?.extract()?;
        let _: usize = api.numel.bind(py).call1((tensor,))?.extract()?;
        let _: usize = api.element_size.bind(py).call1((tensor,))?.extract()?;
        let _: bool = api.is_contiguous.bind(py).call1((tensor,))?.extract()?;
        api.dispatch_exit.bind(py).call1((&dispatch, py.None(), py.None(), py.None()))?;
        function.call_method1(intern!(py, "__exit__"), (py.None(), py.None(), py.None()))?;
        drop(gc);
    }
    let before = per(start);
    let start = Instant::now();
    for _ in 0..iters {
        let gc = GcPaused::enter(py)?;
        let hooks = NoHooks::enter(py)?;
        let read = hooks.read_for_use(tensor)?;
        drop(hooks);
        drop(gc);
        std::hint::black_box(read);
    }
    let after = per(start);
    Ok(vec![("session 23's read (guards made per section, argument tuples)", before), ("session 24's read (read_for_use)", after)])
}
