// P13: the way out of a PTX-name clash (tests/compile_fail/seams/p13_same_kernel_name_in_two_modules.rs)
// that keeps both functions' names: `#[kernel(name = "..")]` gives one kernel another PTX symbol.
// Its launcher module keeps the function's name; `SYMBOL` is the PTX name. A generic kernel's
// instances take the name as their base.
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
    #[kernel(name = "k_doubled")]
    pub fn k(x: &[u32], mut out: DisjointSlice<u32>) {
        let i = unique_index();
        if let (Some(o), Some(v)) = (out.get_mut(i), x.get(i.get())) {
            *o = 2 * *v;
        }
    }

    #[kernel(instances(u32), name = "k_generic")]
    pub fn k_of<T: bytemuck::Pod + Default>(mut out: DisjointSlice<T>) {
        if let Some(o) = out.get_mut(unique_index()) {
            *o = T::default();
        }
    }
}

fn main() {
    use ferrocuda_device::cpu::CpuExecutor;
    assert_eq!(a::k::SYMBOL, "k");
    assert_eq!(b::k::SYMBOL, "k_doubled");
    assert_eq!(b::k_of_u32::SYMBOL, "k_generic_u32");
    let executor = CpuExecutor::new();
    let mut out = [0u32; 4];
    a::k::launch_cpu(&executor, (1u32, 4u32), &mut out).unwrap();
    assert_eq!(out, [1; 4]);
    b::k::launch_cpu(&executor, (1u32, 4u32), &[1, 2, 3, 4], &mut out).unwrap();
    assert_eq!(out, [2, 4, 6, 8]);
    b::k_of_u32::launch_cpu(&executor, (1u32, 4u32), &mut out).unwrap();
    assert_eq!(out, [0; 4]);
}
