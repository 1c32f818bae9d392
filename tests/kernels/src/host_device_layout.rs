//! Kernels whose host and device builds see different types (audit 2026-11-27b, Q1, Q2): a
//! `cfg`-chosen type alias and a `cfg_attr`-chosen `cols(..)` width. Their launchers must
//! refuse them (tests/host_device_layout.rs); nothing else launches them.

use ferrocuda_device::global::{DisjointMatrix, DisjointSlice, unique_cell, unique_index};
use ferrocuda_device::kernel;

/// `u64` in the device build, `u32` in the host build: the same tokens, another type.
#[cfg(target_arch = "nvptx64")]
pub type Elem = u64;
/// `u64` in the device build, `u32` in the host build: the same tokens, another type.
#[cfg(not(target_arch = "nvptx64"))]
pub type Elem = u32;

/// Q1: the device build indexes the host's `u32` buffers as `u64`s (it wrote outside the view
/// on an H100 before the layout check).
#[kernel]
pub fn q1_cfg_alias(x: &[Elem], mut out: DisjointSlice<Elem>) {
    let i = unique_index();
    let extra = x.get(i.get()).copied().unwrap_or(0);
    if let Some(o) = out.get_mut(i) {
        *o = Elem::MAX - extra;
    }
}

/// Q2: rows of 8 in the host build (the launchers' checks, the CPU executor), rows of 16 in
/// the device build.
#[cfg_attr(not(target_arch = "nvptx64"), kernel(cols(out = 8)))]
#[cfg_attr(target_arch = "nvptx64", kernel(cols(out = 16)))]
pub fn q2_cfg_width(mut out: DisjointMatrix<u32>) {
    let cell = unique_cell();
    if let Some(o) = out.get_mut(cell) {
        *o = cell.row() * 1000 + cell.col();
    }
}

/// `f32` in the device build, `u32` in the host build: one size and alignment, another type.
#[cfg(target_arch = "nvptx64")]
pub type Same = f32;
/// `f32` in the device build, `u32` in the host build: one size and alignment, another type.
#[cfg(not(target_arch = "nvptx64"))]
pub type Same = u32;

/// The rest of Q1: the layout is the same (4 bytes, align 4) in both builds, the type is not:
/// the device build would read the host's integers as floats.
#[kernel]
pub fn q1_same_size_alias(x: &[u32], mut out: DisjointSlice<Same>) {
    let i = unique_index();
    let v = x.get(i.get()).copied().unwrap_or(0);
    #[allow(clippy::unnecessary_cast, reason = "a cast on the host, a conversion on the device")]
    let w = v as Same;
    if let Some(o) = out.get_mut(i) {
        *o = w;
    }
}
