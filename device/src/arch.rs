//! Which GPU architecture the device build targets, as trait bounds: an intrinsic that needs
//! sm_80 says `where Target: Sm80`, and a kernel that calls it in a build for an older
//! architecture does not compile, with a message naming the architecture it needs:
//!
//! ```text
//! error[E0277]: this needs sm_80 or newer, and this device build targets an older GPU
//!   |     let p = CachePolicy::evict_last();
//!   |             ^^^^^^^^^^^^^^^^^^^^^^^^^ needs sm_80
//!   = note: build the kernel crate for sm_80 or newer (`KernelBuilder::arch`), or call this
//!           only under `#[cfg(ferrocuda_sm = "80")]`
//! note: required by a bound in `CachePolicy::evict_last`
//! ```
//!
//! The bounds hold on the host (the CPU executor emulates every architecture), so kernels
//! type-check there whatever their target. In a device build they hold when the builder set
//! `ferrocuda_sm = "NN"` (sm_NN or newer). Whole modules that need a newer GPU (`tma`,
//! `cluster`, `cp_async`, ...) are left out of older builds instead (`#[cfg(ferrocuda_sm)]`):
//! rustc then says "could not find `tma` in `ferrocuda_device`" (showing the cfg that left it
//! out), and `ferrocuda-builder`'s error adds the architecture the module needs
//! (`ferrocuda_builder::ARCH_GATED_MODULES`):
//!
//! ```text
//! note: `ferrocuda_device::cluster` needs sm_90 or newer, and this device build targets sm_75: the
//! module is left out of builds for older GPUs. Build the kernel crate for sm_90
//! (`KernelBuilder::arch(Arch::SM_90)`), or use the module only under `#[cfg(ferrocuda_sm = "90")]`.
//! ```
//!
//! The same rule at run time: the builder declares, per architecture, a PTX ISA version under
//! which every instruction this crate offers for that architecture assembles
//! (`ferrocuda_builder::pinned_ptx_isa`), so no call that compiles is refused by `ptxas`.

/// The architecture of the device build (a marker type): implements [`Sm75`], [`Sm80`],
/// [`Sm90`] when the build targets at least that architecture (always on the host).
pub struct Target;

// `diagnostic::on_unimplemented` takes literals only, so each bound is written out.

/// The build targets sm_75 (Turing) or newer: `tanh.approx`, `ldmatrix`.
#[diagnostic::on_unimplemented(
    message = "this needs sm_75 or newer, and this device build targets an older GPU",
    label = "needs sm_75",
    note = "build the kernel crate for sm_75 or newer (`KernelBuilder::arch`), or call this only under `#[cfg(ferrocuda_sm = \"75\")]`"
)]
pub trait Sm75 {}

#[cfg(any(not(target_arch = "nvptx64"), ferrocuda_sm = "75"))]
impl Sm75 for Target {}

/// The build targets sm_80 (Ampere) or newer: `createpolicy`/`L2::cache_hint`, `cp.async`,
/// `redux.sync`, bf16 conversions.
#[diagnostic::on_unimplemented(
    message = "this needs sm_80 or newer, and this device build targets an older GPU",
    label = "needs sm_80",
    note = "build the kernel crate for sm_80 or newer (`KernelBuilder::arch`), or call this only under `#[cfg(ferrocuda_sm = \"80\")]`"
)]
pub trait Sm80 {}

#[cfg(any(not(target_arch = "nvptx64"), ferrocuda_sm = "80"))]
impl Sm80 for Target {}

/// The build targets sm_90 (Hopper) or newer: clusters, TMA, `mbarrier` transactions.
#[diagnostic::on_unimplemented(
    message = "this needs sm_90 or newer, and this device build targets an older GPU",
    label = "needs sm_90",
    note = "build the kernel crate for sm_90 or newer (`KernelBuilder::arch`), or call this only under `#[cfg(ferrocuda_sm = \"90\")]`"
)]
pub trait Sm90 {}

#[cfg(any(not(target_arch = "nvptx64"), ferrocuda_sm = "90"))]
impl Sm90 for Target {}
