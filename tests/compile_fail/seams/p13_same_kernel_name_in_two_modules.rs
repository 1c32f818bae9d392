// P13: two kernels named `k` in two modules of one crate. A PTX module is flat, so both would
// be the entry `k`; the build used to fail with ``symbol `__ferrocuda_fingerprint_k` is already
// defined`` (an internal symbol, on the device build only). Now the host build already refuses
// it, pointing at both kernels.
pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

pub mod a {
    use ferrocuda_device::global::{DisjointSlice, unique_index};
    use ferrocuda_device::kernel;
    #[kernel]
    pub fn k(mut out: DisjointSlice<u32>) {
        if let Some(o) = out.get_mut(unique_index()) {
            *o = 1;
        }
    }
}

pub mod b {
    use ferrocuda_device::global::{DisjointSlice, unique_index};
    use ferrocuda_device::kernel;
    #[kernel]
    pub fn k(x: &[f64], mut out: DisjointSlice<f64>) {
        let i = unique_index();
        if let Some(o) = out.get_mut(i) {
            *o = x[i.get()] * 2.0;
        }
    }
}

fn main() {}
