// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Issue 20, 2-D outputs: a matrix output behind a type alias is not mistaken for a plain
// output and built without a width: the macro sees `Grid`, a by-value type, and the `Pod`
// check refuses it. (An alias of an output names its lifetime, the launch's borrow: G13-1.)
use ferrocuda_device::global::{DisjointMatrix, unique_cell};

type Grid<'a> = DisjointMatrix<'a, u32>;

#[kernel]
pub fn aliased(mut out: Grid) {
    if let Some(element) = out.get_mut(unique_cell()) {
        *element = 1;
    }
}

fn main() {}
