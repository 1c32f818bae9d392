//! Must NOT build: unsafe operations hidden in kernel forms under forbid(unsafe_code).
#![forbid(unsafe_code)]
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
#![allow(missing_docs)]
use ferrocuda_device::global::{DisjointSlice, unique_index};
use ferrocuda_device::kernel;
ferrocuda_device::embed_kernels!();

// B1: an unsafe block in a generic kernel's body, only on the device (cfg trick)
#[kernel(instances(u32))]
pub fn b1_generic<T: Copy + bytemuck::Pod>(x: &[T], mut out: DisjointSlice<T>) {
    let i = unique_index();
    #[cfg(target_arch = "nvptx64")]
    let v = unsafe { *x.get_unchecked(i.get()) };
    #[cfg(not(target_arch = "nvptx64"))]
    let v = x[i.get()];
    if let Some(o) = out.get_mut(i) { *o = v; }
}

// B2: a device-only #[no_mangle] helper smuggled through cfg_attr
#[cfg_attr(target_arch = "nvptx64", unsafe(no_mangle))]
pub fn b2_helper() -> u32 { 2 }

// B3: launch_bounds argument calling an unsafe fn
const unsafe fn bound() -> u32 { 64 }
#[kernel(launch_bounds(bound()))]
pub fn b3_bounds(mut out: DisjointSlice<u32>) {
    if let Some(o) = out.get_mut(unique_index()) { *o = 3; }
}
