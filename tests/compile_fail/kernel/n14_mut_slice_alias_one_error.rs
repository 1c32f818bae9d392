// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Audit N14 (c05): `&mut [T]` behind an alias is refused as not plain data, as having no layout
// key (session 10's F1) and, since G17R-2, as not `Copy` (the CPU launcher's safe copy): the only
// errors (no E0525 about the CPU launcher's closure after them).
use ferrocuda_device::thread::thread_idx_x;

pub type Out = &'static mut [u32];

#[kernel]
pub fn alias_out(out: Out) {
    out[thread_idx_x() as usize] = 1;
}

fn main() {}
