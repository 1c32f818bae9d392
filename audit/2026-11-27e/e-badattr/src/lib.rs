//! Audit 2026-11-27e: `#[kernel]` attribute arguments at their edges (E-M1). Safe code only.
#![forbid(unsafe_code)]
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx))]
#![allow(missing_docs)]

use ferrocuda_device::global::{DisjointSlice, unique_index};
use ferrocuda_device::kernel;

ferrocuda_device::embed_kernels!();

macro_rules! body {
    ($out:ident) => {
        if let Some(o) = $out.get_mut(unique_index()) {
            *o = 1;
        }
    };
}

#[kernel(launch_bounds(0))]
pub fn lb0(mut out: DisjointSlice<u32>) {
    body!(out);
}

#[cfg(feature = "reqntid0")] // E-M1a: ptxas "Positive non-zero value expected for reqntid", reported as a code-generation bug
#[kernel(reqntid(0))]
pub fn rq0(mut out: DisjointSlice<u32>) {
    body!(out);
}

#[kernel(launch_bounds(4096))]
pub fn lb4096(mut out: DisjointSlice<u32>) {
    body!(out);
}

#[kernel(launch_bounds(128, 64))]
pub fn lb128_min64(mut out: DisjointSlice<u32>) {
    body!(out);
}

#[kernel(cluster_dims(0))]
pub fn cd0(mut out: DisjointSlice<u32>) {
    body!(out);
}

#[kernel(cluster_dims(16))]
pub fn cd16(mut out: DisjointSlice<u32>) {
    body!(out);
}

#[kernel(cluster_dims(2, 2, 4))]
pub fn cd2x2x4(mut out: DisjointSlice<u32>) {
    body!(out);
}
