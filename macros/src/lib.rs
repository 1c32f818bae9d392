//! Procedural macros of ferrocuda: `#[kernel]` and `launch!`.
//!
//! Use them through `ferrocuda_device` (kernel crates) and `ferrocuda` (host code).

mod kernel;
mod launch;
mod layout_key;
mod print;
mod shared_site;

use proc_macro::TokenStream;

/// Marks a `pub fn` as a GPU kernel.
///
/// On the device it becomes a PTX entry point named after the function; slices are passed as
/// pointer + length, `&[T]` as a no-alias read-only pointer (so loads become `ld.global.nc`).
/// On the host the function stays callable (for the CPU executor), and a module of the same
/// name holds its typed launchers: `saxpy::launch(&stream, config, a, &x, &mut y)`,
/// `saxpy::launch_in(&module, &stream, config, ..)`, `saxpy::function(&context)`.
///
/// Parameters may be integer, float or `bool` scalars, `#[repr(C)]` `bytemuck::Pod` structs
/// (or arrays) by value, `&[T]` (read-only input: the launcher takes any
/// `&impl DeviceRead<T>`, e.g. `&buffer` or `&buffer.slice(..)`), `DisjointSlice<T>` (output
/// each thread writes its own elements of) and `AtomicSlice<T>` (elements any thread accesses
/// atomically), both taking `&mut impl DeviceWrite<T>` in the launcher, and raw device
/// pointers `*const T` / `*mut T` (the launcher takes `DevicePtr<T>` and is an `unsafe fn`;
/// the kernel itself may be declared `pub unsafe fn`, which it should be when it dereferences
/// them, and only then). Slice elements are `bytemuck::Pod`. `&mut [T]` is refused: every
/// thread would share one `&mut` (see `ferrocuda_device::global`).
///
/// Each launcher module also has `SYMBOL` (the PTX name, without `r#`), `FINGERPRINT` and
/// `SIGNATURE` (checked against an explicitly loaded module), and `launch_cpu` for the CPU
/// executor. On an error the macro still emits the launcher module as a stub, so the error is
/// reported once, at the kernel.
///
/// A generic kernel lists its instances: `#[kernel(instances(f32, f64))] pub fn
/// scale<T: ..>(..)` builds one PTX kernel per type, named `scale_f32` and `scale_f64`
/// (function name, `_`, the type's last path segment), each with its launcher module of the
/// same name (`scale_f32::launch(..)`). The generic function stays callable on the host.
///
/// A PTX module is flat: two kernels of one crate cannot share a PTX name, whatever modules
/// they are in (the build says so, pointing at both). `#[kernel(name = "scale_rows")]` gives a
/// kernel another PTX symbol (a generic kernel's instances become `scale_rows_f32`, ..); its
/// launcher module keeps the function's name.
///
/// `#[kernel(ftz)]` is nvcc's `-ftz=true` for this kernel: the builder gives its `f32`
/// instructions `.ftz` (subnormals flush to zero), as nvcc's `--use_fast_math` does
/// (docs/performance.md). The CPU executor keeps IEEE arithmetic.
///
/// The body is type-checked as the `fn` you wrote, on the GPU build too: the generated entry
/// point calls your function, so an unsafe operation needs your `unsafe` block, and a crate may
/// `#![forbid(unsafe_code)]` (docs/kernel-model.md, "Generated code").
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    kernel::expand(attr.into(), item.into()).into()
}

/// CUDA-style launch: `launch!(saxpy<<<grid, block, shared_bytes, &stream>>>(a, &x, &mut y))`.
///
/// `shared_bytes` and the stream may be left out; without a stream the launch goes to the
/// default stream of the thread's current context. Returns `Result<(), ferrocuda::Error>`.
#[proc_macro]
pub fn launch(input: TokenStream) -> TokenStream {
    launch::expand(input.into()).into()
}

/// The engine of `ferrocuda_device::println!`/`print!`: a Rust format string compiled into one
/// device `vprintf` call (no `core::fmt` on the GPU). Use those macros, not this one.
#[doc(hidden)]
#[proc_macro]
pub fn device_print(input: TokenStream) -> TokenStream {
    print::expand(input.into()).into()
}

/// A number naming one expansion of `ferrocuda_device::shared_array!`, new at every call (see
/// `shared_site.rs`). Used by that macro; not public API.
#[doc(hidden)]
#[proc_macro]
pub fn __shared_site(input: TokenStream) -> TokenStream {
    shared_site::expand(input.into()).into()
}

/// `#[derive(LayoutKey)]`: implements `ferrocuda_device::LayoutKey` for a struct, with a key of
/// its name, size and alignment and of each field's name, offset, size and type key, computed
/// the same way by the host and the device build. The first launch of a kernel compares the
/// two builds' keys of each parameter type, so a `cfg` that changes the struct's fields on one
/// side is refused (audit 2026-11-27c, F1). Every field's type must implement `LayoutKey`
/// (integers, floats, `bool`, `bf16`/`f16`, arrays of keyed types, and structs that derive it).
#[proc_macro_derive(LayoutKey)]
pub fn derive_layout_key(item: TokenStream) -> TokenStream {
    layout_key::derive(item.into()).into()
}
