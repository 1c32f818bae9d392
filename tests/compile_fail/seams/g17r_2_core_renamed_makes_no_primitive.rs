// G17R-2 (audit 2026-11-28e review): the launchers check that a parameter written like a
// primitive is that primitive by naming it `::core::primitive::u32`, and a crate can make
// `::core` itself with `extern crate self as core;` (safe code). Here `::core::primitive::u16`
// is a non-`Copy` type holding a `Box`, so the check passed, and the CPU launcher's bitwise copy
// of the parameter into every GPU thread dropped the box once per thread (a double free in
// safe code); a `Copy` type holding a host reference went to a GPU by value. The check now
// also bounds the named primitive by `KernelScalar`, implemented for the real primitives only.
extern crate self as core;

// What `::core` names in this crate: std's modules, with `primitive::u16` and `primitive::f64`
// the crate's own types.
pub use ::std::{any, cell, clone, cmp, convert, default, ffi, fmt, hash, hint, iter, marker, mem, num, ops, option, panic, ptr, result, slice, str, sync};
pub mod primitive {
    pub use ::std::primitive::*;
    pub type u16 = crate::Boxed;
    pub type f64 = crate::HostRef;
}

/// Not `Copy`: a copy per thread drops the box once per thread.
pub struct Boxed(Box<u64>);
// SAFETY: the key only needs to agree with itself here (one build).
unsafe impl ferrocuda_device::LayoutKey for Boxed {
    const LAYOUT_KEY: u64 = 1;
}

/// `Copy`, but a host address: on a GPU the kernel dereferences host memory.
#[derive(Clone, Copy)]
pub struct HostRef(&'static std::primitive::u64);
// SAFETY: as above.
unsafe impl ferrocuda_device::LayoutKey for HostRef {
    const LAYOUT_KEY: u64 = 2;
}

pub static KERNELS: ferrocuda::EmbeddedModule = ferrocuda::EmbeddedModule::without_images("t");

mod kernels {
    use crate::primitive::{f64, u16};
    use ferrocuda_device::kernel;

    #[kernel]
    pub fn takes_a_box(n: u16) {
        drop(n);
    }

    #[kernel]
    pub fn takes_a_host_reference(n: f64) {
        let _ = *n.0;
    }
}

fn main() {
    let executor = ferrocuda_device::cpu::CpuExecutor::new();
    kernels::takes_a_box::launch_cpu(&executor, (1u32, 4u32), Boxed(Box::new(7))).unwrap();
}
