// P13: generic instances whose PTX symbols collide: `a_b` + `u32` and `a` + `b_u32` are both
// `a_b_u32`. Refused on the host build, pointing at both kernels.
#![allow(non_camel_case_types)]
pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

pub mod one {
    use ferrocuda_device::global::{DisjointSlice, unique_index};
    use ferrocuda_device::kernel;
    #[kernel(instances(u32))]
    pub fn a_b<T: bytemuck::Pod + Default>(mut out: DisjointSlice<T>) {
        if let Some(o) = out.get_mut(unique_index()) {
            *o = T::default();
        }
    }
}

pub mod two {
    use ferrocuda_device::global::{DisjointSlice, unique_index};
    use ferrocuda_device::kernel;
    pub type b_u32 = f64;
    #[kernel(instances(b_u32))]
    pub fn a<T: bytemuck::Pod + Default>(x: &[T], mut out: DisjointSlice<T>) {
        let i = unique_index();
        if let Some(o) = out.get_mut(i) {
            *o = x[i.get()];
        }
    }
}

fn main() {}
