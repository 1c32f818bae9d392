// G17R-2, the runtime crate renamed: `extern crate self as ferrocuda_host;` with the real
// `__private` re-exported beside a `require_primitive` of the crate's own skips the by-value
// check, and the CPU launcher's `unsafe { ::core::ptr::read(&n) }` duplicated a non-`Copy` value
// into every thread (`free(): double free detected`, run before the fix). The CPU launcher now
// copies with a safe call bounded by `Copy`; a crate that replaces it must write its own
// `unsafe`. Since session 18 the GPU launch refuses it too (`KernelParam::scalar`'s bounds, the
// first error; a `Copy` one: g17r_2_runtime_renamed_passes_no_host_reference.rs).
extern crate self as ferrocuda_host;

pub mod __private {
    pub use ::ferrocuda::__private::*;
    pub fn require_primitive<A, B>() {}
}

/// Not `Copy`; its key is honest (the type's name, size and alignment).
pub struct Boxed(Box<u64>);
// SAFETY: the key of the type's name, size and alignment, as for a primitive.
unsafe impl ferrocuda_device::LayoutKey for Boxed {
    const LAYOUT_KEY: u64 = ferrocuda_device::layout_key::start("Boxed", 8, 8);
}

pub static KERNELS: ferrocuda::EmbeddedModule = ferrocuda::EmbeddedModule::without_images("t");

mod kernels {
    #[allow(non_camel_case_types)]
    type u16 = crate::Boxed;

    #[ferrocuda_device::kernel]
    pub fn takes_a_box(n: u16) {
        drop(n);
    }
}

fn main() {
    let executor = ferrocuda_device::cpu::CpuExecutor::new();
    kernels::takes_a_box::launch_cpu(&executor, (1u32, 4u32), Boxed(Box::new(7))).unwrap();
}
