// G17R-2's GPU residual (closed in session 18): `extern crate self as ferrocuda_host;` with the
// real `__private` re-exported beside checks of the crate's own (`require_primitive`,
// `require_kernel_value`) let a `Copy` type holding a host reference go to a GPU by value: the
// generated `unsafe { launch_embedded(..) }` reached the real launch through the re-export with
// `void*`s that only the replaced checks had vetted. The real launch now takes `KernelParam`s,
// whose constructors carry the bounds (`KernelScalar`, `KernelValue`), so the replaced checks
// check nothing that matters: both kernels are refused at the parameter's type.
extern crate self as ferrocuda_host;

pub mod __private {
    pub use ::ferrocuda::__private::*;
    pub fn require_primitive<A, B>() {}
    pub fn require_kernel_value<A>() {}
}

/// `Copy`, and holds a host address.
#[derive(Clone, Copy)]
pub struct HostRef(pub &'static u64);
// SAFETY: the key of the type's name, size and alignment, as for a primitive.
unsafe impl ferrocuda_device::LayoutKey for HostRef {
    const LAYOUT_KEY: u64 = ferrocuda_device::layout_key::start("HostRef", 8, 8);
}

pub static KERNELS: ferrocuda::EmbeddedModule = ferrocuda::EmbeddedModule::without_images("t");

mod kernels {
    #[allow(non_camel_case_types)]
    type u64 = crate::HostRef;

    #[ferrocuda_device::kernel]
    pub fn written_like_a_primitive(n: u64) {
        let _ = n;
    }

    #[ferrocuda_device::kernel]
    pub fn by_value(r: crate::HostRef) {
        let _ = r;
    }
}

static SEVEN: u64 = 7;

pub fn gpu(stream: &ferrocuda::Stream) {
    kernels::written_like_a_primitive::launch(stream, (1u32, 1u32), HostRef(&SEVEN)).unwrap();
    kernels::by_value::launch(stream, (1u32, 1u32), HostRef(&SEVEN)).unwrap();
}

fn main() {}
