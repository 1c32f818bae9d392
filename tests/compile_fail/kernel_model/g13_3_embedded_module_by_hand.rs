// Audit 2026-11-28, G13-3: device code made by hand in safe code. A crate's `KERNELS` is what
// its typed launchers load and launch, and the launchers' checks read tables the images carry
// (a module without them passes), so making one of images is `unsafe`
// (`EmbeddedModule::new`, which `embed_kernels!()` calls with the builder's output). With
// public fields, this crate's own `KERNELS` of hand-made PTX ran through the safe launcher of
// `square_checked` and wrote past its output. A literal does not compile (a changed module
// without images neither: `g13_3_module_without_images_stays_so.rs`).
use ferrocuda_device::global::{DisjointSlice, unique_index};
use ferrocuda_device::kernel;

const HAND_MADE_PTX: &str = ".version 7.8\n.target sm_80\n.address_size 64\n";

pub static KERNELS: ferrocuda::EmbeddedModule = ferrocuda::EmbeddedModule {
    images: ferrocuda::EmbeddedImages {
        crate_name: "t",
        toolchain: "",
        ptx: &[(80, HAND_MADE_PTX)],
        cubins: &[],
        resources: &[],
        device_overflow_checks: false,
        host_overflow_probe: |x| x,
    },
    _made_by_a_constructor: (),
};

#[kernel]
pub fn square_checked(x: &[u32], mut out: DisjointSlice<u32>) {
    let i = unique_index();
    if let (Some(o), Some(&v)) = (out.get_mut(i), x.get(i.get())) {
        *o = v;
    }
}

fn main() {}
