//! The device-side library of ferrocuda: what a `#[kernel]` function calls.
//!
//! One dependency for a kernel crate: it re-exports [`kernel`] and [`embed_kernels!`].
//! Intrinsics compile to single PTX instructions on `nvptx64`; the same names exist on the
//! host so that kernels type-check there (running them on the CPU is the CPU executor's job).
//!
//! Coming from CUDA C++: docs/performance.md has a table from each construct to its spelling
//! here and its cost. The pieces a port usually needs beyond indexing and barriers:
//! [`block`] (CUB's `BlockReduce`/`BlockScan`), [`warp`] (`__shfl_*_sync`, votes),
//! [`shared_vector`] (`float4` on `__shared__ __align__(16)` arrays), [`cache`] (`__ldcs`,
//! `__stcs`, L1/L2 eviction policies), [`math`] (`FastMath`, and `KernelBuilder::fast_math`
//! for `--use_fast_math`), [`vector`] (16-byte global accesses), [`unroll`] and
//! [`launch_bounds`](mod@launch_bounds). What needs a newer GPU than the build targets is refused at compile time
//! with the architecture it needs ([`arch`]).
//!
//! A kernel crate starts with:
//! ```ignore
//! #![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
//! ferrocuda_device::embed_kernels!();
//! ```
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(stdarch_nvptx, asm_experimental_arch))]
// `where Target: Sm80` on an intrinsic (see `arch`) is a bound without type parameters; in a
// device build for an older GPU it does not hold, which makes the intrinsic uncallable there
// (the caller gets the bound's message) instead of being an error in this crate.
#![cfg_attr(target_arch = "nvptx64", feature(trivial_bounds, link_llvm_intrinsics))]
#![cfg_attr(target_arch = "nvptx64", allow(internal_features))]
#![allow(trivial_bounds)]

// `#[derive(LayoutKey)]` names `::ferrocuda_device`, in this crate's tests too.
extern crate self as ferrocuda_device;

pub mod arch;
pub mod atomic;
pub mod block;
pub mod cache;
#[cfg(any(not(target_arch = "nvptx64"), ferrocuda_sm = "90"))]
pub mod cluster;
#[cfg(any(not(target_arch = "nvptx64"), ferrocuda_sm = "80"))]
pub mod cp_async;
#[cfg(not(target_arch = "nvptx64"))]
pub mod cpu;
/// The old name of [`cpu::hooks`], kept while code written against it is merged; new code
/// names `crate::cpu::hooks`.
#[cfg(not(target_arch = "nvptx64"))]
#[allow(unused_imports)]
pub(crate) use cpu::hooks as emu;
pub mod global;
#[cfg(any(not(target_arch = "nvptx64"), ferrocuda_sm = "90"))]
pub mod grid_dependency;
pub mod half;
#[cfg(any(not(target_arch = "nvptx64"), ferrocuda_sm = "90"))]
pub mod hopper;
pub mod launch_bounds;
pub mod layout_key;
#[cfg(any(not(target_arch = "nvptx64"), ferrocuda_sm = "75"))]
pub mod ldmatrix;
pub mod math;
pub mod matrix;
#[doc(no_inline)]
#[cfg(any(not(target_arch = "nvptx64"), ferrocuda_sm = "90"))]
pub use hopper::mbarrier;
#[cfg(any(not(target_arch = "nvptx64"), ferrocuda_sm = "80"))]
pub mod mma;
#[doc(no_inline)]
#[cfg(any(not(target_arch = "nvptx64"), ferrocuda_sm = "90"))]
pub use hopper::named_barrier;
pub mod pack16;
pub mod pack8;
pub mod panic;
pub mod panic_args;
#[doc(no_inline)]
#[cfg(any(not(target_arch = "nvptx64"), ferrocuda_sm = "90"))]
pub use hopper::pipeline;
pub mod print;
pub mod shared;
pub mod shared_checked;
pub mod shared_threads;
pub mod shared_vector;
pub mod sync;
pub mod thread;
#[doc(no_inline)]
#[cfg(any(not(target_arch = "nvptx64"), ferrocuda_sm = "90"))]
pub use hopper::tma;
pub mod unroll;
pub mod vector;
pub mod warp;
#[doc(no_inline)]
#[cfg(any(not(target_arch = "nvptx64"), ferrocuda_sm = "90"))]
pub use hopper::warpgroup;
#[doc(no_inline)]
#[cfg(any(not(target_arch = "nvptx64"), ferrocuda_sm = "90a"))]
pub use hopper::wgmma;

// Declared after the modules whose items it re-exports, so that rustc's diagnostics keep
// naming those items by their modules (`ferrocuda_device::thread::thread_idx_x`): it picks the
// first path it finds, module by module in declaration order.
pub mod prelude;

pub use global::{AtomicSlice, BlockIndex, DisjointChunks, DisjointPlanes, DisjointSlice, PerBlock, ThreadIndex, UncheckedSlice};
pub use shared::{SharedArray, SharedSlice, dynamic_shared};
pub use shared_threads::{PerThreadShared, ThreadSlot};
pub use shared_vector::{SharedSliceX4, dynamic_shared_x4};

pub use ferrocuda_macros::{LayoutKey, kernel};
pub use layout_key::LayoutKey;

/// Embeds the kernels of this crate, as built by `ferrocuda-builder` in its build script.
///
/// On the host it defines `pub static KERNELS: EmbeddedModule` (the PTX and cubins), which
/// every generated launcher loads on first use; on the device it expands to nothing.
#[macro_export]
macro_rules! embed_kernels {
    () => {
        #[cfg(not(target_arch = "nvptx64"))]
        #[doc(hidden)]
        pub mod __ferrocuda_artifacts {
            // Through `$crate`: a crate's own `macro_rules! include` (or `concat`, `env`) shadows the
            // built-in macros named plainly here, and gave `KERNELS` PTX of its choosing (session 18).
            $crate::__private::include!($crate::__private::concat!($crate::__private::env!("OUT_DIR"), "/ferrocuda_artifacts.rs"));
        }

        /// The PTX and cubins of this crate's kernels, embedded at build time.
        #[cfg(not(target_arch = "nvptx64"))]
        // SAFETY: the images are the builder's output for this crate (`OUT_DIR`, written by its
        // build script's `KernelBuilder`), compiled from its `#[kernel]` functions.
        pub static KERNELS: $crate::__private::types::EmbeddedModule = unsafe {
            $crate::__private::types::EmbeddedModule::new($crate::__private::types::EmbeddedImages {
                crate_name: __ferrocuda_artifacts::CRATE_NAME,
                toolchain: __ferrocuda_artifacts::TOOLCHAIN,
                ptx: __ferrocuda_artifacts::PTX,
                cubins: __ferrocuda_artifacts::CUBINS,
                resources: {
                    const ROWS: usize = __ferrocuda_artifacts::RESOURCES.len();
                    const RESOURCES: [$crate::__private::types::KernelResources; ROWS] =
                        $crate::__private::types::KernelResources::from_tuples(__ferrocuda_artifacts::RESOURCES);
                    &RESOURCES
                },
                device_overflow_checks: __ferrocuda_artifacts::OVERFLOW_CHECKS,
                // Compiled here, with this crate's profile: it panics for 255 exactly when this
                // crate's host build checks integer overflow (Q11).
                host_overflow_probe: |x| x + 1,
            })
        };
    };
}

/// Used by generated code; not part of the public API.
#[doc(hidden)]
pub mod __private {
    /// What generated kernel entries and launchers call to build kernel parameters.
    pub use crate::global::__private as args;
    pub use crate::layout_key::{self, key_of};
    /// `core` and its built-in macros as the exported `macro_rules!` name them: `$crate::__private::core`
    /// cannot be renamed by the calling crate, while `::core` can (`extern crate self as core;`, a
    /// dependency renamed in Cargo.toml) and a plain `assert!`, `concat!` or `include!` is shadowed by a
    /// `macro_rules!` of the same name (session 18, the `macro_rules!` part of G17R-2's class).
    pub use ::core;
    pub use ::core::{assert, concat, env, include, stringify};
    pub use ferrocuda_macros::device_print;
    pub use ferrocuda_types as types;
}
