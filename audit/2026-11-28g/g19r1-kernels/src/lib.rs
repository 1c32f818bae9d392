//! G19R-1 (audit 2026-11-28g): a safe `#[kernel]` whose by-value parameter `Word` is plain data
//! (`u64`, `Pod`) in the host build and a `&'static mut u32` in the device build. Same tokens
//! (same fingerprint), same size and alignment (same layout table); the type-key table, the one
//! check that would tell the two apart, is computed through `::ferrocuda_device::__private::key_of`,
//! a path this crate makes its own by depending on `g19r1-device-shim` under the name
//! `ferrocuda_device`. The host launcher is safe and passes any `u64`; the device kernel, safe
//! code, writes 42 there. No `unsafe` in this crate.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]

use ferrocuda_device::kernel;

/// The host build's `Word`: an address as a number (plain data, what `KernelParam::value` asks).
#[cfg(not(target_arch = "nvptx64"))]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct Word(pub u64);

/// The device build's `Word`: the same 8 bytes, read as a mutable reference.
#[cfg(target_arch = "nvptx64")]
#[repr(C)]
pub struct Word(pub &'static mut u32);

impl Word {
    /// Device: `*self.0 = 42` (safe code). Host: nothing (the CPU executor's build has a number).
    #[inline(always)]
    fn poke(self) {
        #[cfg(target_arch = "nvptx64")]
        {
            *self.0 = 42;
        }
    }
}

/// Launch it with one thread: it writes 42 at the address the host passed in `w`.
#[kernel]
pub fn poke(w: Word) {
    w.poke();
}

ferrocuda_device::embed_kernels!();
