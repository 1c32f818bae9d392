//! Every path the generated code names, in one place. Generated code reaches the runtime only
//! through these absolute, hidden paths, so a kernel crate needs no `use` for them.

use proc_macro2::TokenStream;
use quote::quote;

/// The host runtime's macro support (launching, buffers, `DeviceRead`/`DeviceWrite`, the
/// types the launchers name), as seen from a kernel crate, which depends on ferrocuda-host
/// for host targets (INTERFACE-host-macro.md).
pub fn host() -> TokenStream {
    quote!(::ferrocuda_host::__private)
}

/// `core` as the device entry names it: `__ferrocuda_core`, which the entry's `const` block binds
/// with `extern crate core as __ferrocuda_core;` ([`device_core_item`]). An `extern crate` item
/// loads the crate the compiler's crate loader finds under that name (the sysroot's `core`;
/// a Cargo dependency called `core` is refused by the builder), not the name `::core` resolves
/// to in the kernel's crate, which the crate can make its own (`extern crate self as core;`, a
/// form the builder's text check can miss, or, in edition 2015, a root module `core`).
/// Session 21: the entry took its address parameters as `&::core::cell::UnsafeCell<..>` and
/// called `.get()` on them, so a crate's own `core::cell::UnsafeCell` chose the address that
/// the real `output` was given in generated `unsafe`.
pub fn device_core() -> TokenStream {
    quote!(__ferrocuda_core)
}

/// The item that binds [`device_core`] in the device entry's `const` block.
pub fn device_core_item() -> TokenStream {
    quote!(
        extern crate core as __ferrocuda_core;
    )
}

/// The builders of kernel parameters (`DisjointSlice`, `AtomicSlice`, CPU-side parts).
pub fn args() -> TokenStream {
    quote!(::ferrocuda_device::__private::args)
}

/// The CPU executor.
pub fn cpu() -> TokenStream {
    quote!(::ferrocuda_device::cpu)
}

/// The device panic support (the kernel-name tag written at entry).
pub fn panic() -> TokenStream {
    quote!(::ferrocuda_device::panic)
}

/// The device crate's `thread` module (the `reqntid` block-shape assumption).
pub fn thread() -> TokenStream {
    quote!(::ferrocuda_device::thread)
}

/// The crate's embedded PTX/cubins, defined by `embed_kernels!()` at the kernel crate's root.
pub fn kernels() -> TokenStream {
    quote!(crate::KERNELS)
}

/// The launch-bounds marker the builder turns into `.maxntid`/`.minnctapersm`/`.reqntid`
/// (hopper's `ferrocuda_device::launch_bounds!`).
pub fn launch_bounds() -> TokenStream {
    quote!(::ferrocuda_device::launch_bounds!)
}

/// The cluster-dims marker the builder turns into `.reqnctapercluster`
/// (`ferrocuda_device::cluster_dims!`).
pub fn cluster_dims() -> TokenStream {
    quote!(::ferrocuda_device::cluster_dims!)
}
