// Audit 2026-11-27c, F1 (the gap closed in session 10): a struct that derives only `Pod` could
// be taken by a kernel, and was compared between the host and the device build by its name,
// size and alignment alone, so a `cfg` that reordered or retyped its fields passed. Every struct
// a kernel takes (by value or as elements) must now derive `LayoutKey`; the error says so.
use ferrocuda_device::global::unique_index;
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Pair {
    #[cfg(target_arch = "nvptx64")]
    pub b: u32,
    pub a: u32,
    #[cfg(not(target_arch = "nvptx64"))]
    pub b: u32,
}

#[kernel]
pub fn by_value(p: Pair, mut out: ferrocuda_device::DisjointSlice<u32>) {
    if let Some(o) = out.get_mut(unique_index()) {
        *o = p.a;
    }
}

#[kernel]
pub fn as_elements(x: &[Pair], mut out: ferrocuda_device::DisjointSlice<Pair>) {
    if let (Some(o), Some(e)) = (out.get_mut(unique_index()), x.first()) {
        *o = *e;
    }
}

fn main() {}
