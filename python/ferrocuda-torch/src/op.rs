//! An op of your own kernel, or of the library's: declare it with [`Op`], register it from
//! your extension module with [`register`], and `torch.ops.<namespace>.<name>` exists after
//! `import`. The library's own ops (`ferrocuda_torch._C`) are declared the same way, one [`Op`]
//! each (`src/ops.rs`), and registered by the same code.
//!
//! ```no_run
//! use ferrocuda_torch::op::{self, Op, Scalar};
//! use ferrocuda_torch::glue::DType;
//! use pyo3::prelude::*;
//!
//! #[pymodule]
//! fn my_torch_op(m: &Bound<'_, PyModule>) -> PyResult<()> {
//!     let scale_add = Op::new("my_ops::scale_add")
//!         .input("x", &[DType::F32])
//!         .input_like("y", "x")
//!         .scalar("alpha", Scalar::Float)
//!         .output_like("out", "x")
//!         .launch::<f32>(|call, scalars| {
//!             let (x, y) = (call.input::<f32>("x")?, call.input::<f32>("y")?);
//!             let mut out = call.output::<f32>("out")?;
//!             let _alpha = scalars.float("alpha")? as f32;
//!             // my_kernels::scale_add::launch(call.stream(), config, &x, &y, &mut out, alpha)
//!             # let _ = (x, y, &mut out);
//!             Ok(())
//!         });
//!     op::register(m, vec![scale_add])
//! }
//! ```
//!
//! What the op does for you (the same as the library's ops): in `torch.library`, a schema
//! (`scale_add(Tensor x, Tensor y, float alpha) -> Tensor`), and as its CUDA implementation
//! a Rust function (no Python in between) that checks the tensors (declared dtypes, `like`
//! shapes, CUDA, one device, contiguous, no overlap; errors name the argument), allocates the
//! outputs with torch (its C `Tensor.new_empty`, so a `torch.cuda.graph` capture takes
//! them from its pool) and calls your launch with a [`Call`] on torch's current stream,
//! zero-copy; a fake implementation for `torch.compile` (the outputs' shapes and dtypes from
//! their [`Shape`] rules, no launch); and, with [`Op::backward`], autograd through another
//! op (your backward kernel). The registration itself is Python (`register.py`, embedded
//! here), run when your module is imported; it needs torch to be importable then.

use std::ffi::CString;
use std::sync::{Arc, OnceLock};

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::glue::{self, Call, DType, TensorInfo, TorchElement};

/// The kind of a scalar argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scalar {
    /// A Python `float` (schema `float`).
    Float,
    /// A Python `int` (schema `int`).
    Int,
    /// A Python `bool` (schema `bool`).
    Bool,
}

impl Scalar {
    fn schema(self) -> &'static str {
        match self {
            Scalar::Float => "float",
            Scalar::Int => "int",
            Scalar::Bool => "bool",
        }
    }
}

/// The scalar arguments of one call, by name.
pub struct Scalars {
    values: Vec<(&'static str, ScalarValue)>,
}

#[derive(Clone, Copy)]
enum ScalarValue {
    Float(f64),
    Int(i64),
    Bool(bool),
}

impl Scalars {
    fn get(&self, name: &str) -> PyResult<ScalarValue> {
        self.values.iter().find(|(n, _)| *n == name).map(|(_, v)| *v).ok_or_else(|| PyValueError::new_err(format!("no scalar argument named `{name}`")))
    }

    /// The `float` argument `name`.
    pub fn float(&self, name: &str) -> PyResult<f64> {
        match self.get(name)? {
            ScalarValue::Float(v) => Ok(v),
            _ => Err(PyValueError::new_err(format!("`{name}` is not a float argument"))),
        }
    }

    /// The `int` argument `name`.
    pub fn int(&self, name: &str) -> PyResult<i64> {
        match self.get(name)? {
            ScalarValue::Int(v) => Ok(v),
            _ => Err(PyValueError::new_err(format!("`{name}` is not an int argument"))),
        }
    }

    /// The `bool` argument `name`.
    pub fn bool(&self, name: &str) -> PyResult<bool> {
        match self.get(name)? {
            ScalarValue::Bool(v) => Ok(v),
            _ => Err(PyValueError::new_err(format!("`{name}` is not a bool argument"))),
        }
    }
}

/// The tensor inputs of one call, as read before the outputs exist: what a scratch length
/// ([`Op::scratch`]) is computed from.
pub struct Inputs<'a> {
    op: &'a str,
    tensors: &'a [TensorInfo],
}

impl Inputs<'_> {
    /// The description of the input `name`.
    pub fn info(&self, name: &str) -> PyResult<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name).ok_or_else(|| PyValueError::new_err(format!("{}: no tensor input named `{name}`", self.op)))
    }

    /// The op's name, for errors.
    pub fn op(&self) -> &str {
        self.op
    }
}

/// The shape of an output, from the shape of the input it is declared like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// The input's shape.
    Same,
    /// All but the last dimension: one value per row (`x.shape[:-1]`).
    Rows,
    /// The last dimension alone (`x.shape[-1:]`): one value per column.
    Last,
    /// The last dimension halved (`[..., d]` -> `[..., d / 2]`; `d` must be even).
    HalfLast,
}

impl Shape {
    /// The name `register.py` reads.
    fn name(self) -> &'static str {
        match self {
            Shape::Same => "same",
            Shape::Rows => "rows",
            Shape::Last => "last",
            Shape::HalfLast => "half_last",
        }
    }

    fn apply(self, op: &str, like: &TensorInfo) -> PyResult<Vec<usize>> {
        let s = &like.shape;
        let needs_dim = || PyValueError::new_err(format!("{op}: `{}` (shape {s:?}) needs at least one dimension", like.name));
        Ok(match self {
            Shape::Same => s.clone(),
            Shape::Rows => s[..s.len().checked_sub(1).ok_or_else(needs_dim)?].to_vec(),
            Shape::Last => vec![*s.last().ok_or_else(needs_dim)?],
            Shape::HalfLast => match s.split_last() {
                Some((&d, rest)) if d % 2 == 0 => rest.iter().copied().chain([d / 2]).collect(),
                _ => return Err(PyValueError::new_err(format!("{op}: the last dimension of {} (shape {s:?}) must be even: [gate, up]", like.name))),
            },
        })
    }
}

/// An argument of the backward op (see [`Op::backward`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grad {
    /// The gradient that reached the forward output of this name (made contiguous).
    Of(&'static str),
    /// The forward input, output or scalar of this name (tensors saved for the backward).
    Saved(&'static str),
    /// The negation of the forward `bool` scalar of this name (an inverse transform).
    NotSaved(&'static str),
}

/// A launch for one dtype of the op's first input.
type Launch = Arc<dyn Fn(&Call, &Scalars) -> PyResult<()> + Send + Sync>;

/// The length of a scratch output, from the inputs and scalars.
type ScratchLen = Arc<dyn Fn(&Inputs<'_>, &Scalars) -> PyResult<usize> + Send + Sync>;

struct Input {
    name: &'static str,
    dtypes: Vec<DType>,
    like: Option<&'static str>,
    mutated: bool,
}

enum OutputShape {
    Rule(Shape),
    Scratch(ScratchLen),
}

struct Output {
    name: &'static str,
    like: &'static str,
    shape: OutputShape,
    dtype: Option<DType>,
}

struct Backward {
    op: String,
    args: Vec<Grad>,
    grads: Vec<&'static str>,
}

/// The declaration of an op (see the [module docs](self)).
pub struct Op {
    qualname: String,
    inputs: Vec<Input>,
    scalars: Vec<(&'static str, Scalar)>,
    outputs: Vec<Output>,
    launches: Vec<(DType, Launch)>,
    backward: Option<Backward>,
    shared_grads: Vec<(&'static str, &'static str)>,
}

impl Op {
    /// An op named `namespace::name` (`torch.ops.namespace.name`).
    pub fn new(qualname: &str) -> Self {
        Op {
            qualname: qualname.to_string(),
            inputs: Vec::new(),
            scalars: Vec::new(),
            outputs: Vec::new(),
            launches: Vec::new(),
            backward: None,
            shared_grads: Vec::new(),
        }
    }

    /// A tensor input of one of `dtypes` (CUDA, contiguous).
    pub fn input(mut self, name: &'static str, dtypes: &[DType]) -> Self {
        self.inputs.push(Input { name, dtypes: dtypes.to_vec(), like: None, mutated: false });
        self
    }

    /// A tensor input with the shape and dtype of the input `like`.
    pub fn input_like(mut self, name: &'static str, like: &'static str) -> Self {
        self.inputs.push(Input { name, dtypes: Vec::new(), like: Some(like), mutated: false });
        self
    }

    /// A tensor input of one of `dtypes` that the op writes in place (schema `Tensor(a!)`;
    /// the launch takes it with [`Call::output`]). An op with such an input returns nothing.
    pub fn input_mut(mut self, name: &'static str, dtypes: &[DType]) -> Self {
        self.inputs.push(Input { name, dtypes: dtypes.to_vec(), like: None, mutated: true });
        self
    }

    /// A scalar input (after the tensors in the schema).
    pub fn scalar(mut self, name: &'static str, kind: Scalar) -> Self {
        self.scalars.push((name, kind));
        self
    }

    /// An output with the shape and dtype of the input `like`.
    pub fn output_like(self, name: &'static str, like: &'static str) -> Self {
        self.output(name, like, Shape::Same, None)
    }

    /// An output with the shape of the input `like` and dtype `dtype`.
    pub fn output_like_as(self, name: &'static str, like: &'static str, dtype: DType) -> Self {
        self.output(name, like, Shape::Same, Some(dtype))
    }

    /// An output whose shape follows `shape` from the input `like`'s, of dtype `dtype` (`None`:
    /// `like`'s dtype).
    pub fn output(mut self, name: &'static str, like: &'static str, shape: Shape, dtype: Option<DType>) -> Self {
        self.outputs.push(Output { name, like, shape: OutputShape::Rule(shape), dtype });
        self
    }

    /// A float32 scratch tensor of `len(inputs, scalars)` elements on the device of `like`,
    /// allocated by torch like an output and lent to the launch as one ([`Call::output`]), but
    /// not returned (it is not in the schema).
    pub fn scratch(mut self, name: &'static str, like: &'static str, len: impl Fn(&Inputs<'_>, &Scalars) -> PyResult<usize> + Send + Sync + 'static) -> Self {
        self.outputs.push(Output { name, like, shape: OutputShape::Scratch(Arc::new(len)), dtype: Some(DType::F32) });
        self
    }

    /// The launch when the first input's dtype is `T`'s; `launch` gets the call (inputs and
    /// outputs by name, the stream) and the scalars.
    pub fn launch<T: TorchElement>(mut self, launch: impl Fn(&Call, &Scalars) -> PyResult<()> + Send + Sync + 'static) -> Self {
        self.launches.push((T::DTYPE, Arc::new(launch)));
        self
    }

    /// Autograd through the op `backward` (of the same namespace, registered too): it is
    /// called with `args` (gradients of this op's outputs, saved inputs, outputs and scalars),
    /// and its outputs, in order, are the gradients of this op's inputs named in `grads`
    /// (cast to each input's dtype); the other inputs get none.
    pub fn backward(mut self, backward: &str, args: &[Grad], grads: &[&'static str]) -> Self {
        self.backward = Some(Backward { op: backward.to_string(), args: args.to_vec(), grads: grads.to_vec() });
        self
    }

    /// The input `input` gets the same gradient as the input `as_input` (one of the
    /// [`Op::backward`]'s `grads`): `sum = x + residual` gives both the gradient of `sum`.
    pub fn shares_grad(mut self, input: &'static str, as_input: &'static str) -> Self {
        self.shared_grads.push((input, as_input));
        self
    }

    fn returned(&self) -> impl Iterator<Item = &Output> {
        self.outputs.iter().filter(|o| matches!(o.shape, OutputShape::Rule(_)))
    }

    fn mutates(&self) -> bool {
        self.inputs.iter().any(|i| i.mutated)
    }

    /// The op's torch schema, e.g. `scale_add(Tensor x, Tensor y, float alpha) -> Tensor`
    /// (an input written in place is `Tensor(a<i>!)`, `i` its position).
    pub fn schema(&self) -> String {
        let name = self.qualname.rsplit("::").next().unwrap_or(&self.qualname);
        let tensors = self.inputs.iter().enumerate().map(|(i, input)| match input.mutated {
            true => format!("Tensor(a{i}!) {}", input.name),
            false => format!("Tensor {}", input.name),
        });
        let args: Vec<String> = tensors.chain(self.scalars.iter().map(|(n, k)| format!("{} {n}", k.schema()))).collect();
        let outs = match self.returned().count() {
            1 => "Tensor".to_string(),
            n => format!("({})", vec!["Tensor"; n].join(", ")),
        };
        format!("{name}({}) -> {outs}", args.join(", "))
    }

    fn check(&self) -> PyResult<()> {
        let known = |n: &str| self.inputs.iter().any(|i| i.name == n);
        let problem = |what: String| Err(PyValueError::new_err(format!("op {}: {what}", self.qualname)));
        if !self.qualname.contains("::") {
            return problem("the name must be `namespace::name`".into());
        }
        if self.inputs.first().is_none_or(|i| i.like.is_some()) {
            return problem("the first argument must be a tensor input with its dtypes (`.input(name, &[..])`)".into());
        }
        if self.mutates() != (self.returned().count() == 0) {
            return problem("an op either writes inputs in place (`.input_mut`) and returns nothing, or returns outputs".into());
        }
        for like in self.inputs.iter().filter_map(|i| i.like).chain(self.outputs.iter().map(|o| o.like)) {
            if !known(like) {
                return problem(format!("`{like}` is not an input"));
            }
        }
        if self.launches.is_empty() {
            return problem("it needs a launch (`.launch::<f32>(..)`)".into());
        }
        if self.backward.is_none() && !self.shared_grads.is_empty() {
            return problem("`shares_grad` needs a `backward`".into());
        }
        if let Some(b) = &self.backward {
            let saved = |n: &str| known(n) || self.returned().any(|o| o.name == n) || self.scalars.iter().any(|(s, _)| *s == n);
            for arg in &b.args {
                let ok = match *arg {
                    Grad::Of(n) => self.returned().any(|o| o.name == n),
                    Grad::Saved(n) => saved(n),
                    Grad::NotSaved(n) => self.scalars.iter().any(|(s, k)| *s == n && *k == Scalar::Bool),
                };
                if !ok {
                    return problem(format!("the backward's argument {arg:?} names nothing of this op"));
                }
            }
            if let Some(g) = b.grads.iter().chain(self.shared_grads.iter().map(|(i, _)| i)).find(|g| !known(g)) {
                return problem(format!("the backward gives the gradient of `{g}`, which is not an input"));
            }
            if let Some((_, g)) = self.shared_grads.iter().find(|(_, g)| !b.grads.contains(g)) {
                return problem(format!("`{g}` gets no gradient from the backward, so none can be shared"));
            }
        }
        Ok(())
    }

    /// The Rust function torch calls as the op's implementation: `launch(*inputs, *scalars)`.
    fn launcher<'py>(self: &Arc<Self>, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let op = Arc::clone(self);
        let f = move |args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>| -> PyResult<Py<PyAny>> { op.call(args) };
        Ok(pyo3::types::PyCFunction::new_closure(py, None, None, f)?.into_any())
    }

    /// One invocation: reads and checks the inputs, allocates the outputs with torch, launches
    /// on torch's current stream and returns the outputs.
    fn call(&self, args: &Bound<'_, PyTuple>) -> PyResult<Py<PyAny>> {
        let py = args.py();
        let op = self.qualname.as_str();
        let expected = self.inputs.len() + self.scalars.len();
        if args.len() != expected {
            return Err(PyValueError::new_err(format!("{op}: {} arguments, expected {expected} ({})", args.len(), self.schema())));
        }
        // The inputs: what they are (dtype, shape) and the declarations first, then where (device,
        // layout), so that a wrong dtype is named as such even on a CPU tensor.
        let mut read: Vec<(&str, Bound<'_, PyAny>, DType, Vec<usize>)> = Vec::with_capacity(self.inputs.len());
        for (i, input) in self.inputs.iter().enumerate() {
            let tensor = args.get_item(i)?;
            let (dtype, shape) = glue::tensor_dtype_shape(py, op, input.name, &tensor)?;
            match input.like {
                None if !input.dtypes.contains(&dtype) => {
                    let names: Vec<&str> = input.dtypes.iter().map(|d| d.torch_name()).collect();
                    return Err(PyTypeError::new_err(format!("{op}: `{}` has dtype {}; this op takes {}", input.name, dtype.torch_name(), names.join(", "))));
                }
                Some(like) => {
                    let (_, _, like_dtype, like_shape) = read
                        .iter()
                        .find(|(n, ..)| *n == like)
                        .ok_or_else(|| PyValueError::new_err(format!("op {op}: `{}` is declared like `{like}`, which must come before it", input.name)))?;
                    if (*like_dtype, like_shape) != (dtype, &shape) {
                        return Err(PyValueError::new_err(format!(
                            "{op}: `{}` ({shape:?}, {}) must have the shape and dtype of `{like}` ({like_shape:?}, {})",
                            input.name,
                            dtype.torch_name(),
                            like_dtype.torch_name()
                        )));
                    }
                }
                None => {}
            }
            read.push((input.name, tensor, dtype, shape));
        }
        let mut values = Vec::with_capacity(self.scalars.len());
        for (j, (name, kind)) in self.scalars.iter().enumerate() {
            let value = args.get_item(self.inputs.len() + j)?;
            let bad = |e: PyErr| PyTypeError::new_err(format!("{op}: `{name}` must be a {}: {e}", kind.schema()));
            values.push((
                *name,
                match kind {
                    Scalar::Float => ScalarValue::Float(value.extract().map_err(bad)?),
                    Scalar::Int => ScalarValue::Int(value.extract().map_err(bad)?),
                    Scalar::Bool => ScalarValue::Bool(value.extract().map_err(bad)?),
                },
            ));
        }
        let scalars = Scalars { values };
        let mut tensors = Vec::with_capacity(self.inputs.len() + self.outputs.len());
        let mut keep = Vec::with_capacity(self.inputs.len() + self.outputs.len());
        for ((name, tensor, dtype, shape), input) in read.into_iter().zip(&self.inputs) {
            tensors.push(glue::tensor_info(py, op, name, &tensor, dtype, shape, input.mutated)?);
            keep.push(tensor.unbind());
        }
        // The outputs, allocated by torch like their input (so on its device, from its
        // allocator: a capture's pool during a capture), with every Python hook off: no mode or
        // subclass code runs in between (which could switch streams, or change an input). They
        // are read back like the inputs all the same (at each use, `Call::check_at_use`: G23R-3),
        // since a scratch length closure (`Op::scratch`) is the op author's code and runs among
        // them (G23R-1). One section from here to the call's start (host-only mode's
        // `glue::verify` nests in it): torch's guards are entered and left once for them.
        let hooks = crate::native::NoHooks::enter(py)?;
        let mut returned = Vec::with_capacity(self.outputs.len());
        for output in &self.outputs {
            let index = self.inputs.iter().position(|i| i.name == output.like).expect("checked at registration");
            let like = &tensors[index];
            let like_tensor = keep[index].bind(py);
            let shape = match &output.shape {
                OutputShape::Rule(rule) => rule.apply(op, like)?,
                OutputShape::Scratch(len) => vec![len(&Inputs { op, tensors: &tensors[..self.inputs.len()] }, &scalars)?],
            };
            let dtype = output.dtype.unwrap_or(like.dtype);
            // torch's checked C method, and the result read back where it is used (G23R-3).
            let tensor = hooks.new_empty(like_tensor, &shape, dtype.object(py)?)?;
            if glue::host_only_zeros() {
                tensor.call_method0(intern!(py, "zero_"))?;
            }
            let info = TensorInfo::fresh(&hooks, output.name, &tensor, shape, dtype, like.device)?;
            tensors.push(info);
            if matches!(output.shape, OutputShape::Rule(_)) {
                returned.push(tensor.clone().unbind());
            }
            keep.push(tensor.unbind());
        }
        let device = glue::check_tensors(op, &tensors)?;
        if glue::host_only() {
            // Nothing launches: the read a launch's arguments would get, alone (what the overhead
            // benchmark measures of it).
            glue::verify(py, op, &tensors, &keep)?;
            drop(hooks);
        } else {
            let dtype = tensors[0].dtype;
            let launch = self.launches.iter().find(|(d, _)| *d == dtype).map(|(_, l)| l).ok_or_else(|| {
                let names: Vec<&str> = self.launches.iter().map(|(d, _)| d.torch_name()).collect();
                PyTypeError::new_err(format!("{op}: no launch for `{}` of {}: this op takes {}", self.inputs[0].name, dtype.torch_name(), names.join(", ")))
            })?;
            let call = Call::from_checked(py, op, tensors, keep, device)?;
            // The launch itself runs with the hooks as the caller had them.
            drop(hooks);
            // A launch refused where it used a tensor (G23R-1) is a RuntimeError.
            glue::catch_refusal(|| launch(&call, &scalars))?;
        }
        Ok(match returned.len() {
            0 => py.None(),
            1 => returned.pop().expect("one"),
            _ => PyTuple::new(py, returned)?.into_any().unbind(),
        })
    }

    /// The description `register.py` reads.
    fn spec<'py>(self: &Arc<Self>, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let spec = PyDict::new(py);
        spec.set_item("qualname", &self.qualname)?;
        spec.set_item("schema", self.schema())?;
        let inputs = PyList::empty(py);
        for i in &self.inputs {
            let dtypes: Vec<&str> = i.dtypes.iter().map(|d| d.torch_name()).collect();
            inputs.append((i.name, dtypes, i.like, i.mutated))?;
        }
        spec.set_item("inputs", inputs)?;
        let outputs = PyList::empty(py);
        for o in self.returned() {
            let OutputShape::Rule(rule) = o.shape else { unreachable!("returned() filters") };
            outputs.append((o.name, o.like, rule.name(), o.dtype.map(|d| d.torch_name())))?;
        }
        spec.set_item("outputs", outputs)?;
        let scalars: Vec<&str> = self.scalars.iter().map(|(n, _)| *n).collect();
        spec.set_item("scalars", scalars)?;
        match &self.backward {
            Some(b) => {
                let args: Vec<(&str, &str)> = b
                    .args
                    .iter()
                    .map(|a| match *a {
                        Grad::Of(n) => ("grad", n),
                        Grad::Saved(n) => ("saved", n),
                        Grad::NotSaved(n) => ("not", n),
                    })
                    .collect();
                spec.set_item("backward", (&b.op, args, &b.grads, &self.shared_grads))?;
            }
            None => spec.set_item("backward", py.None())?,
        }
        spec.set_item("launch", self.launcher(py)?)?;
        Ok(spec)
    }
}

/// The registration code (Python), run once per copy of this crate ([`registrar`]).
const REGISTER_PY: &str = include_str!("register.py");

/// The specs of `ops` (checked), as `register.py` reads them.
pub(crate) fn specs<'py>(py: Python<'py>, ops: Vec<Op>) -> PyResult<Vec<Bound<'py, PyDict>>> {
    ops.into_iter()
        .map(|op| {
            op.check()?;
            Arc::new(op).spec(py)
        })
        .collect()
}

/// Registers `ops` with `torch.library` (imports torch) and adds each as a function of `m`
/// (`m.scale_add(x, y, 2.0)`, the same as `torch.ops.my_ops.scale_add`).
pub fn register(m: &Bound<'_, PyModule>, ops: Vec<Op>) -> PyResult<()> {
    let py = m.py();
    let registrar = registrar(py)?;
    for spec in specs(py, ops)? {
        registrar.getattr("register")?.call1((m, spec))?;
    }
    Ok(())
}

/// The module of `register.py` of this copy of the crate, made once and kept for the life of the
/// process (it holds the `torch.library.Library` objects of the ops registered through it: a
/// freed `Library` unregisters its ops).
///
/// One per copy of the crate, so one per extension module (each links its own copy), and never
/// in `sys.modules` (audit 2026-11-29d, G23L-1). It used to be `PyModule::from_code(..,
/// "ferrocuda_torch_register")` at every registration, which runs the code *in the module of that
/// name already in `sys.modules`* when there is one: the second registration in a process (a
/// second extension built on ferrocuda-torch, or a second `register` call of one extension)
/// re-ran `register.py` in the first one's module, whose `_LIBRARIES = {}` dropped the
/// `Library` objects of every op registered before. torch unregistered those ops, but the
/// operator handles Python code had already taken (`torch.ops.ferrocuda.gelu.default`, kept by
/// `ferrocuda_torch.ops`) still pointed at the dispatcher's freed entry for them: a use after
/// free inside torch, and the next op registered could take the entry over
/// (`ferrocuda_torch.gelu(x)` ran `g23r1::scale_add_scratch`). Now each copy runs its own
/// `register.py` once, in a module of its own that no other copy can find: whatever other
/// extensions load, and whichever version of this crate they were built with, the `Library`
/// objects of this extension's ops live as long as the process, and its specs are read by the
/// registration code they were written for.
pub(crate) fn registrar(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    static REGISTRAR: OnceLock<Py<PyModule>> = OnceLock::new();
    if let Some(module) = REGISTRAR.get() {
        return Ok(module.bind(py).clone());
    }
    let code = CString::new(REGISTER_PY).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    // A module object outside `sys.modules` (`PyModule::new` does not add it there).
    let module = PyModule::new(py, "ferrocuda_torch_register")?;
    let globals = module.dict();
    globals.set_item("__builtins__", py.import("builtins")?)?;
    // SAFETY: `Py_CompileString` takes two NUL-terminated strings and returns a new reference or
    // null with an exception set; `PyEval_EvalCode` runs that code object with `globals` (a live
    // dict, holding `__builtins__`) as its globals and locals, and returns a new reference or
    // null with an exception set. The GIL is held (`py`).
    unsafe {
        let compiled = pyo3::ffi::Py_CompileString(code.as_ptr(), c"ferrocuda_torch/register.py".as_ptr(), pyo3::ffi::Py_file_input);
        let compiled = Bound::from_owned_ptr_or_err(py, compiled)?;
        let ran = pyo3::ffi::PyEval_EvalCode(compiled.as_ptr(), globals.as_ptr(), globals.as_ptr());
        drop(Bound::from_owned_ptr_or_err(py, ran)?);
    }
    // Two threads importing at once (the code imports torch, which may let the GIL go) may both
    // get here: the one kept is the one every registration of this copy uses.
    Ok(REGISTRAR.get_or_init(|| module.unbind()).bind(py).clone())
}
