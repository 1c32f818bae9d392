// P1 (audit badbuild/b03): the `cols(..)` width expression was expanded inside the generated
// `unsafe { .. }` that builds the output, on the device and in the CPU launcher, so an unsafe
// call compiled there with no `unsafe` written. It is now evaluated outside any generated
// `unsafe`, and the unsafe call needs the user's own block.
use ferrocuda_device::global::{DisjointMatrix, unique_cell};
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

#[kernel(cols(out = core::num::NonZeroU32::new_unchecked(4).get()))]
pub fn width_from_unsafe(mut out: DisjointMatrix<u32>) {
    if let Some(o) = out.get_mut(unique_cell()) {
        *o = 1;
    }
}

fn main() {}
