//! Your own kernel as a PyTorch op: declare it with [`Op`], register it from your extension
//! module with [`register`], and `torch.ops.<namespace>.<name>` exists after `import`.
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
//! (`scale_add(Tensor x, Tensor y, float alpha) -> Tensor`), a CUDA implementation that checks
//! the dtypes and the `like` shapes (errors name the argument), allocates the outputs with
//! torch (`torch.empty_like`, so a `torch.cuda.graph` capture takes them from its pool) and
//! calls your launch with a [`Call`] on torch's current stream, zero-copy; and a fake
//! implementation for `torch.compile` (the outputs' shapes and dtypes, no launch). The
//! registration itself is Python (`register.py`, embedded here), run when your module is
//! imported; it needs torch to be importable then.

use std::ffi::CString;
use std::sync::Arc;

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::glue::{Call, DType, TorchElement};

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

/// A launch for one dtype of the op's first input.
type Launch = Arc<dyn Fn(&Call, &Scalars) -> PyResult<()> + Send + Sync>;

struct Input {
    name: &'static str,
    dtypes: Vec<DType>,
    like: Option<&'static str>,
}

struct Output {
    name: &'static str,
    like: &'static str,
    dtype: Option<DType>,
}

/// The declaration of an op (see the [module docs](self)).
pub struct Op {
    qualname: String,
    inputs: Vec<Input>,
    scalars: Vec<(&'static str, Scalar)>,
    outputs: Vec<Output>,
    launches: Vec<(DType, Launch)>,
}

impl Op {
    /// An op named `namespace::name` (`torch.ops.namespace.name`).
    pub fn new(qualname: &str) -> Self {
        Op { qualname: qualname.to_string(), inputs: Vec::new(), scalars: Vec::new(), outputs: Vec::new(), launches: Vec::new() }
    }

    /// A tensor input of one of `dtypes` (CUDA, contiguous).
    pub fn input(mut self, name: &'static str, dtypes: &[DType]) -> Self {
        self.inputs.push(Input { name, dtypes: dtypes.to_vec(), like: None });
        self
    }

    /// A tensor input with the shape and dtype of the input `like`.
    pub fn input_like(mut self, name: &'static str, like: &'static str) -> Self {
        self.inputs.push(Input { name, dtypes: Vec::new(), like: Some(like) });
        self
    }

    /// A scalar input (after the tensors in the schema).
    pub fn scalar(mut self, name: &'static str, kind: Scalar) -> Self {
        self.scalars.push((name, kind));
        self
    }

    /// An output with the shape and dtype of the input `like`.
    pub fn output_like(mut self, name: &'static str, like: &'static str) -> Self {
        self.outputs.push(Output { name, like, dtype: None });
        self
    }

    /// An output with the shape of the input `like` and dtype `dtype`.
    pub fn output_like_as(mut self, name: &'static str, like: &'static str, dtype: DType) -> Self {
        self.outputs.push(Output { name, like, dtype: Some(dtype) });
        self
    }

    /// The launch when the first input's dtype is `T`'s; `launch` gets the call (inputs and
    /// outputs by name, the stream) and the scalars.
    pub fn launch<T: TorchElement>(mut self, launch: impl Fn(&Call, &Scalars) -> PyResult<()> + Send + Sync + 'static) -> Self {
        self.launches.push((T::DTYPE, Arc::new(launch)));
        self
    }

    /// The op's torch schema, e.g. `scale_add(Tensor x, Tensor y, float alpha) -> Tensor`.
    pub fn schema(&self) -> String {
        let name = self.qualname.rsplit("::").next().unwrap_or(&self.qualname);
        let args: Vec<String> =
            self.inputs.iter().map(|i| format!("Tensor {}", i.name)).chain(self.scalars.iter().map(|(n, k)| format!("{} {n}", k.schema()))).collect();
        let outs = match self.outputs.len() {
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
        if self.outputs.is_empty() {
            return problem("it needs at least one output".into());
        }
        for like in self.inputs.iter().filter_map(|i| i.like).chain(self.outputs.iter().map(|o| o.like)) {
            if !known(like) {
                return problem(format!("`{like}` is not an input"));
            }
        }
        if self.launches.is_empty() {
            return problem("it needs a launch (`.launch::<f32>(..)`)".into());
        }
        Ok(())
    }

    /// The Python function `launch(*inputs, *outputs, *scalars)` that torch's CUDA
    /// implementation calls.
    fn launcher<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let qualname = self.qualname.clone();
        let inputs: Vec<&'static str> = self.inputs.iter().map(|i| i.name).collect();
        let outputs: Vec<&'static str> = self.outputs.iter().map(|o| o.name).collect();
        let scalars = self.scalars.clone();
        let launches = self.launches.clone();
        let f = move |args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>| -> PyResult<()> {
            let py = args.py();
            let expected = inputs.len() + outputs.len() + scalars.len();
            if args.len() != expected {
                return Err(PyValueError::new_err(format!("{qualname}: {} arguments, expected {expected}", args.len())));
            }
            let items: Vec<Bound<'_, PyAny>> = args.iter().collect();
            let ins: Vec<(&'static str, &Bound<'_, PyAny>)> = inputs.iter().copied().zip(&items[..inputs.len()]).collect();
            let outs: Vec<(&'static str, &Bound<'_, PyAny>)> = outputs.iter().copied().zip(&items[inputs.len()..inputs.len() + outputs.len()]).collect();
            let mut values = Vec::with_capacity(scalars.len());
            for ((name, kind), value) in scalars.iter().zip(&items[inputs.len() + outputs.len()..]) {
                values.push((
                    *name,
                    match kind {
                        Scalar::Float => ScalarValue::Float(value.extract()?),
                        Scalar::Int => ScalarValue::Int(value.extract()?),
                        Scalar::Bool => ScalarValue::Bool(value.extract()?),
                    },
                ));
            }
            let call = Call::new(py, &qualname, &ins, &outs)?;
            let dtype = call.info(inputs[0])?.dtype;
            let launch = launches.iter().find(|(d, _)| *d == dtype).map(|(_, l)| l).ok_or_else(|| {
                let names: Vec<&str> = launches.iter().map(|(d, _)| d.torch_name()).collect();
                PyValueError::new_err(format!("{qualname}: no launch for `{}` of {}: this op takes {}", inputs[0], dtype.torch_name(), names.join(", ")))
            })?;
            launch(&call, &Scalars { values }).map_err(|e| PyRuntimeError::new_err(format!("{e}")))
        };
        Ok(pyo3::types::PyCFunction::new_closure(py, None, None, f)?.into_any())
    }

    /// The description `register.py` reads.
    fn spec<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let spec = PyDict::new(py);
        spec.set_item("qualname", &self.qualname)?;
        spec.set_item("schema", self.schema())?;
        let inputs = PyList::empty(py);
        for i in &self.inputs {
            let dtypes: Vec<&str> = i.dtypes.iter().map(|d| d.torch_name()).collect();
            inputs.append((i.name, dtypes, i.like))?;
        }
        spec.set_item("inputs", inputs)?;
        let outputs = PyList::empty(py);
        for o in &self.outputs {
            outputs.append((o.name, o.like, o.dtype.map(|d| d.torch_name())))?;
        }
        spec.set_item("outputs", outputs)?;
        let scalars: Vec<&str> = self.scalars.iter().map(|(n, _)| *n).collect();
        spec.set_item("scalars", scalars)?;
        spec.set_item("launch", self.launcher(py)?)?;
        Ok(spec)
    }
}

/// The registration code (Python), shared by every module built with [`register`].
const REGISTER_PY: &str = include_str!("register.py");

/// Registers `ops` with `torch.library` (imports torch) and adds each as a function of `m`
/// (`m.scale_add(x, y, 2.0)`, the same as `torch.ops.my_ops.scale_add`).
pub fn register(m: &Bound<'_, PyModule>, ops: Vec<Op>) -> PyResult<()> {
    let py = m.py();
    let code = CString::new(REGISTER_PY).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    let registrar = PyModule::from_code(py, &code, c"ferrocuda_torch_register.py", c"ferrocuda_torch_register")?;
    for op in &ops {
        op.check()?;
        registrar.getattr("register")?.call1((m, op.spec(py)?))?;
    }
    Ok(())
}
