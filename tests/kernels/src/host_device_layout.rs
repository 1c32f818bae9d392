//! Kernels whose host and device builds see different types (audit 2026-11-27b, Q1, Q2): a
//! `cfg`-chosen type alias and a `cfg_attr`-chosen `cols(..)` width. Their launchers must
//! refuse them (tests/host_device_layout.rs); nothing else launches them.

use ferrocuda_device::global::partition::GridSlices;
use ferrocuda_device::global::{DisjointMatrix, DisjointSlice, unique_cell, unique_index, unique_slice_cell};
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

// ---- Audit 2026-11-27c F1: a `cfg` that changes a struct's fields (its name, size and
// alignment stay the same). Each struct derives `LayoutKey`, so the two builds' keys differ
// and the first launch refuses the kernel. ----

/// Fields in another order in the device build: the GPU would read the host's `a` as `b`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable, ferrocuda_device::LayoutKey)]
pub struct F1Pair {
    /// First in the device build.
    #[cfg(target_arch = "nvptx64")]
    pub b: u32,
    /// First in the host build.
    pub a: u32,
    /// Second in the host build.
    #[cfg(not(target_arch = "nvptx64"))]
    pub b: u32,
}

/// F1, case r1: a by-value struct whose fields a `cfg` permutes.
#[kernel]
pub fn f1_permuted_fields(p: F1Pair, mut out: DisjointSlice<u32>) {
    if let Some(o) = out.get_mut(unique_index()) {
        *o = p.a;
    }
}

/// A field that is `f32` in the device build and `u32` in the host build.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable, ferrocuda_device::LayoutKey)]
pub struct F1Elem {
    /// `f32` on the device, `u32` on the host.
    #[cfg(target_arch = "nvptx64")]
    pub v: f32,
    /// `f32` on the device, `u32` on the host.
    #[cfg(not(target_arch = "nvptx64"))]
    pub v: u32,
}

/// F1, case r2: slice elements whose field type a `cfg` changes.
#[kernel]
pub fn f1_field_type_by_cfg(x: &[F1Elem], mut out: DisjointSlice<F1Elem>) {
    let i = unique_index();
    if let (Some(o), Some(e)) = (out.get_mut(i), x.get(i.get())) {
        *o = *e;
    }
}

/// Adds one to each field (the generic kernel's operation).
pub trait F1Bump: Copy + bytemuck::Pod {
    /// The value with its fields bumped.
    fn bump(self) -> Self;
}
impl F1Bump for F1Pair {
    fn bump(self) -> Self {
        F1Pair { a: self.a + 10, b: self.b + 20 }
    }
}
impl F1Bump for u32 {
    fn bump(self) -> Self {
        self + 1
    }
}

/// F1, case r3: a generic kernel's instance over the permuted struct (refused) and over `u32`
/// (whose builds agree).
#[kernel(instances(F1Pair, u32))]
pub fn f1_generic<T: F1Bump>(x: &[T], mut out: DisjointSlice<T>) {
    let i = unique_index();
    if let (Some(o), Some(e)) = (out.get_mut(i), x.get(i.get())) {
        *o = e.bump();
    }
}

/// G17R-1 (audit 2026-11-28e): a `GridSlices` output whose `(n, stride)` come from parameters
/// the two builds name in another order. The launcher checks the launch-time bound (`n <=
/// stride`, every slice of the grid inside the buffer) with the host's order, the device entry
/// builds the output with its own, and its accesses check `i < n` alone: one slice with the
/// host's `n = 1` in a one-element view is the device's `n = stride`, written past the view.
/// The width parameters are now part of the output's type key in both builds, so the first
/// launch refuses it.
#[cfg_attr(not(target_arch = "nvptx64"), kernel(cols(dst = (n, stride))))]
#[cfg_attr(target_arch = "nvptx64", kernel(cols(dst = (stride, n))))]
pub fn g17r_1_cfg_width_parameters(mut dst: DisjointSlice<u32, GridSlices>, n: u32, stride: u32) {
    if let Some(o) = dst.get_mut(unique_slice_cell()) {
        *o = 7;
    }
}

/// The same kernel with one order in both builds: its keys agree and it runs.
#[kernel(cols(dst = (n, stride)))]
pub fn g17r_1_width_parameters(mut dst: DisjointSlice<u32, GridSlices>, n: u32, stride: u32) {
    if let Some(o) = dst.get_mut(unique_slice_cell()) {
        *o = 7;
    }
}

/// G17R-4 (audit 2026-11-28e): a tensor map parameter whose type a `cfg` changes. The macro
/// knows a tensor map by the written name (`&TensorMap`), and the host build's check that it
/// is `ferrocuda_device::tma::TensorMap` runs in the host build only; the layout held 0 and 0
/// and no type key for it. So `use G17rWide as TensorMap` in the device build passed the first
/// launch, and the kernel read 4 KiB through the address of the map's 128-byte copy. The map
/// type is now part of the layout and the type keys. (`tma` is in sm_90 device builds only.)
#[cfg(any(not(target_arch = "nvptx64"), ferrocuda_sm = "90"))]
pub mod g17r_4 {
    #[cfg(target_arch = "nvptx64")]
    use super::G17rWide as TensorMap;
    use ferrocuda_device::global::{DisjointSlice, unique_index};
    use ferrocuda_device::kernel;
    #[cfg(not(target_arch = "nvptx64"))]
    use ferrocuda_device::tma::TensorMap;

    /// Writes, to each thread's element, a word 4000 bytes into what the device build takes for
    /// the map (0 in the host build).
    #[kernel]
    pub fn g17r_4_cfg_map_type(map: &TensorMap, mut out: DisjointSlice<u32>) {
        let far = super::G17rFar::far(map);
        if let Some(o) = out.get_mut(unique_index()) {
            *o = far;
        }
    }
}

/// The device build's "tensor map": 4 KiB, as aligned as a map.
#[cfg(target_arch = "nvptx64")]
#[repr(C, align(64))]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable, ferrocuda_device::LayoutKey)]
pub struct G17rWide {
    /// 1024 words, where a map has 32.
    pub words: [u32; 1024],
}

/// A word far into the map's memory (the device build's `G17rWide`), or 0 (the host build's map).
pub trait G17rFar {
    /// The word.
    fn far(&self) -> u32;
}
#[cfg(any(not(target_arch = "nvptx64"), ferrocuda_sm = "90"))]
impl G17rFar for ferrocuda_device::tma::TensorMap {
    fn far(&self) -> u32 {
        0
    }
}
#[cfg(target_arch = "nvptx64")]
impl G17rFar for G17rWide {
    fn far(&self) -> u32 {
        self.words[1000]
    }
}
