// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Issue 30: a 64-lane segment spans two warps (no shuffle joins them): `segment_row::<64>()`
// does not compile, even without an output to write.
use ferrocuda_device::global::segment_row;

#[kernel]
pub fn two_warps(out: ferrocuda_device::global::AtomicSlice<u32>) {
    let me = segment_row::<64>();
    if let Some(o) = out.get(me.row() as usize) {
        o.store(me.lane());
    }
}

fn main() {}
