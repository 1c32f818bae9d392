// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// W1/E3: names the generated code uses cannot be parameters; `stream`, `config`, `module` and
// `executor` can (see gpu_kernels::kernel_model::hygiene).
use ferrocuda_device::global::DisjointSlice;

#[kernel]
pub fn hygiene(x: &[u32], __ferrocuda_x_arg: u32, SYMBOL: u32, out: DisjointSlice<u32>) {}

fn main() {}
