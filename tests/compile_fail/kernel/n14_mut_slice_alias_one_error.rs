// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Audit N14 (c05): `&mut [T]` behind an alias is refused as not plain data (and, since session
// 10's F1 fix, as having no layout key, the same parameter's other requirement), and those are
// the only errors (no E0525 about the CPU launcher's closure after them).
use ferrocuda_device::thread::thread_idx_x;

pub type Out = &'static mut [u32];

#[kernel]
pub fn alias_out(out: Out) {
    out[thread_idx_x() as usize] = 1;
}

fn main() {}
