//! `my_torch_op`: the kernel `my_kernels::scale_add` as the PyTorch op
//! `torch.ops.my_ops.scale_add(x, y, alpha) -> out` (`out = alpha * x + y`), registered when
//! the module is imported.

use ferrocuda_host::LaunchConfig;
use ferrocuda_torch::glue::{DType, gpu_error};
use ferrocuda_torch::op::{self, Op, Scalar};
use pyo3::prelude::*;

/// The module; its name is the `[lib] name` of Cargo.toml.
#[pymodule]
fn my_torch_op(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // The op: its name, its arguments (tensors first, then scalars) and outputs, and the launch.
    let scale_add = Op::new("my_ops::scale_add")
        .input("x", &[DType::F32]) // a float32 CUDA tensor, any shape
        .input_like("y", "x") // the same shape and dtype as x
        .scalar("alpha", Scalar::Float)
        .output_like("out", "x") // allocated by torch: x's shape and dtype
        .launch::<f32>(|call, scalars| {
            // The tensors as borrowed device slices (zero-copy), on torch's current stream.
            let (x, y) = (call.input::<f32>("x")?, call.input::<f32>("y")?);
            let mut out = call.output::<f32>("out")?;
            let alpha = scalars.float("alpha")? as f32;
            let config = LaunchConfig::for_elements(x.len().max(1), 256);
            my_kernels::scale_add::launch(call.stream(), config, alpha, &x, &y, &mut out).map_err(gpu_error)
        });
    op::register(m, vec![scale_add])
}
