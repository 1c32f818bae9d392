// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Issue 30: `Option<&[T]>` is the one optional parameter (an input, CUDA's `const T*` that may
// be `nullptr`). Each other optional form is refused with what to write instead.
use ferrocuda_device::global::DisjointSlice;

#[kernel]
pub fn optional_output(x: Option<&mut [f32]>, out: DisjointSlice<f32>) {}

#[kernel]
pub fn optional_value(scale: Option<&f32>, out: DisjointSlice<f32>) {}

#[kernel]
pub fn optional_with_lifetime(x: Option<&'static [f32]>, out: DisjointSlice<f32>) {}

#[kernel]
pub fn optional_partition(out: Option<DisjointSlice<f32>>) {}

#[kernel(same_len(x, out))]
pub fn optional_in_same_len(x: Option<&[f32]>, out: DisjointSlice<f32>) {}

fn main() {}
