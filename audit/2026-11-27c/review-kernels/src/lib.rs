//! Audit 2026-11-27c kernels: safe code only.
#![forbid(unsafe_code)]
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]
#![allow(missing_docs)]

use bytemuck::{Pod, Zeroable};
use ferrocuda_device::global::{AtomicSlice, DisjointSlice, unique_index};
use ferrocuda_device::shared::dynamic_shared;
#[cfg(target_arch = "nvptx64")]
use ferrocuda_device::math::DeviceFloat;
use ferrocuda_device::sync::sync_threads;
use ferrocuda_device::thread::{block_idx_x, thread_idx_x};
use ferrocuda_device::{kernel, shared_array};

ferrocuda_device::embed_kernels!();

// ---- R1: same type name, same size/align, fields in another order on the GPU ----
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct Pair {
    #[cfg(target_arch = "nvptx64")]
    pub b: u32,
    pub a: u32,
    #[cfg(not(target_arch = "nvptx64"))]
    pub b: u32,
}

/// out[i] = p.a (the host sets a = 1, b = 2).
#[kernel]
pub fn r1_permuted_fields(p: Pair, mut out: DisjointSlice<u32>) {
    if let Some(o) = out.get_mut(unique_index()) {
        *o = p.a;
    }
}

// ---- R2: slice element struct whose field is f32 on the GPU, u32 on the host ----
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct Elem {
    #[cfg(target_arch = "nvptx64")]
    pub v: f32,
    #[cfg(not(target_arch = "nvptx64"))]
    pub v: u32,
}

/// out[i] = x[i].v + 1 (as written on each side)
#[kernel]
pub fn r2_field_type_by_cfg(x: &[Elem], mut out: DisjointSlice<Elem>) {
    let i = unique_index();
    if let (Some(o), Some(e)) = (out.get_mut(i), x.get(i.get())) {
        #[cfg(target_arch = "nvptx64")]
        const ONE: f32 = 1.0;
        #[cfg(not(target_arch = "nvptx64"))]
        const ONE: u32 = 1;
        o.v = e.v + ONE;
    }
}

// ---- R3: generic kernel, instance type whose layout differs by cfg (same name) ----
pub trait Bump: Copy + Pod {
    fn bump(self) -> Self;
}
impl Bump for Pair {
    fn bump(self) -> Self {
        Pair { a: self.a + 10, b: self.b + 20 }
    }
}
impl Bump for u32 {
    fn bump(self) -> Self {
        self + 1
    }
}
#[kernel(instances(Pair, u32))]
pub fn r3_generic<T: Bump>(x: &[T], mut out: DisjointSlice<T>) {
    let i = unique_index();
    if let (Some(o), Some(e)) = (out.get_mut(i), x.get(i.get())) {
        *o = e.bump();
    }
}

// ---- R4: block 0 spins on a flag that block 1 sets (GPU: both resident, completes) ----
#[kernel]
pub fn r4_cross_block_flag(flag: AtomicSlice<u32>) {
    if thread_idx_x() == 0 {
        if block_idx_x() == 0 {
            while flag.load(0) == 0 {}
            flag.store(1, 7);
        } else {
            flag.store(0, 1);
        }
    }
}

// ---- R5/R6: launch bounds and reqntid on the CPU executor ----
#[kernel(launch_bounds(64))]
pub fn r5_bounded(mut out: DisjointSlice<u32>) {
    if let Some(o) = out.get_mut(unique_index()) {
        *o = 1;
    }
}
#[kernel(reqntid(128))]
pub fn r6_exact(mut out: DisjointSlice<u32>) {
    if let Some(o) = out.get_mut(unique_index()) {
        *o = 2;
    }
}

// ---- R7: a cluster kernel (sm_90 only on the device) ----
#[cfg_attr(target_arch = "nvptx64", cfg(ferrocuda_sm = "90"))]
#[kernel(cluster_dims(2))]
pub fn r7_cluster(mut out: DisjointSlice<u32>) {
    if let Some(o) = out.get_mut(unique_index()) {
        *o = 3;
    }
}

// ---- R8: a large local array (1 MiB per thread) ----
#[kernel]
pub fn r8_big_local(n: u32, mut out: DisjointSlice<u32>) {
    let mut big = core::hint::black_box([0u32; 262_144]);
    let mut k = 0;
    while k < n as usize && k < big.len() {
        big[k] = k as u32;
        k += 1;
    }
    let big = core::hint::black_box(big);
    if let Some(o) = out.get_mut(unique_index()) {
        *o = big[(n as usize) % big.len()];
    }
}

// ---- R9: dynamic shared memory read before any write ----
#[kernel]
pub fn r9_dynamic_uninit(mut out: DisjointSlice<u32>) {
    let s = dynamic_shared::<u32>();
    let v = if s.is_empty() { 0 } else { s.get(thread_idx_x() as usize % s.len()) };
    if let Some(o) = out.get_mut(unique_index()) {
        *o = v;
    }
}

// ---- R10: a plain shared store racing a shared atomic (no barrier) ----
#[kernel]
pub fn r10_store_vs_atomic(mut out: DisjointSlice<u32>) {
    let s = shared_array![u32; 1];
    if thread_idx_x() == 0 {
        s.set(0, 0);
    }
    sync_threads();
    if thread_idx_x() == 1 {
        s.set(0, 100);
    } else {
        s.fetch_add(0, 1);
    }
    sync_threads();
    if let Some(o) = out.get_mut(unique_index()) {
        *o = s.get(0);
    }
}

// ---- R11: float -> int casts, NaN min/max, integer wrap ----
#[kernel]
pub fn r11_numerics(x: &[f32], mut out: DisjointSlice<u32>) {
    let i = unique_index();
    let g = i.get();
    if let (Some(o), Some(&v)) = (out.get_mut(i), x.get(g)) {
        *o = match g % 6 {
            0 => v as i32 as u32,
            1 => v as u8 as u32,
            2 => v.max(1.0).to_bits(),
            3 => v.min(1.0).to_bits(),
            4 => (v as u32).wrapping_mul(0x9E37_79B9).rotate_left(7),
            _ => v.mul_add(3.0, 1.0).to_bits(),
        };
    }
}

// ---- R12: barriers at two different sites in divergent branches ----
#[kernel]
pub fn r12_two_barrier_sites(mut out: DisjointSlice<u32>) {
    let s = shared_array![u32; 64];
    let t = thread_idx_x() as usize;
    s.set(t, t as u32);
    if t % 2 == 0 {
        sync_threads();
    } else {
        sync_threads();
    }
    let v = s.get((t + 1) % 64);
    if let Some(o) = out.get_mut(unique_index()) {
        *o = v;
    }
}

// ---- R13: a panic on some threads ----
#[kernel]
pub fn r13_panics(n: u32, mut out: DisjointSlice<u32>) {
    let i = unique_index();
    let v = 1000u32 / (n - i.get() as u32 % 2);
    if let Some(o) = out.get_mut(i) {
        *o = v;
    }
}

// ---- R14: a kernel generated by a macro_rules! (hygiene of the generated names) ----
macro_rules! make_kernel {
    ($name:ident, $val:expr) => {
        #[kernel]
        pub fn $name(mut out: DisjointSlice<u32>) {
            let __ferrocuda_kernel = $val;
            if let Some(o) = out.get_mut(unique_index()) {
                *o = __ferrocuda_kernel;
            }
        }
    };
}
make_kernel!(r14_from_macro, 14u32);

// ---- R15: a static with interior mutability: state shared across launches/contexts ----
static COUNTER: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(0);
#[kernel]
pub fn r15_static_counter(mut out: DisjointSlice<u32>) {
    let v = COUNTER.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
    if let Some(o) = out.get_mut(unique_index()) {
        *o = v;
    }
}

// ---- R16: sync_threads in a thread-dependent loop (trip counts differ) ----
#[kernel]
pub fn r16_loop_barrier(mut out: DisjointSlice<u32>) {
    let s = shared_array![u32; 64];
    let t = thread_idx_x() as usize;
    s.set(t, 0);
    let mut k = 0;
    while k < t % 3 {
        sync_threads();
        k += 1;
    }
    if let Some(o) = out.get_mut(unique_index()) {
        *o = k as u32;
    }
}

// ---- R17: generic kernel + cfg_attr inline(never) on the user fn ----
#[kernel]
#[cfg_attr(all(), inline(never))]
pub fn r17_cfg_attr_inline(mut out: DisjointSlice<u32>) {
    if let Some(o) = out.get_mut(unique_index()) {
        *o = 17;
    }
}

// ---- R18: deep (non-recursive) call chain with big frames ----
#[inline(never)]
fn frame_a(n: u32) -> u32 {
    let f = core::hint::black_box([n; 2048]);
    frame_b(f[(n % 2048) as usize]) + f[3]
}
#[inline(never)]
fn frame_b(n: u32) -> u32 {
    let f = core::hint::black_box([n.wrapping_mul(3); 2048]);
    frame_c(f[(n % 2048) as usize]) + f[5]
}
#[inline(never)]
fn frame_c(n: u32) -> u32 {
    let f = core::hint::black_box([n ^ 7; 2048]);
    f[(n % 2048) as usize]
}
#[kernel]
pub fn r18_deep_frames(n: u32, mut out: DisjointSlice<u32>) {
    if let Some(o) = out.get_mut(unique_index()) {
        *o = frame_a(n);
    }
}

// ---- R19: a long-running kernel (dependent chain of atomics), then writes 0xDEAD ----
#[kernel]
pub fn r19_busy(iters: u32, flag: AtomicSlice<u32>, mut out: DisjointSlice<u32>) {
    let mut v = 0u32;
    if thread_idx_x() == 0 && block_idx_x() == 0 {
        let mut k = 0;
        while k < iters {
            v = flag.fetch_add(0, (v & 1) | 1);
            k += 1;
        }
    }
    if let Some(o) = out.get_mut(unique_index()) {
        *o = 0xDEAD + (v & 0);
    }
}

// ---- R20: a hand-written grid barrier (every block arrives, then waits for all) ----
#[kernel]
pub fn r20_grid_barrier(blocks: u32, counter: AtomicSlice<u32>, mut out: DisjointSlice<u32>) {
    if thread_idx_x() == 0 {
        counter.fetch_add(0, 1);
        while counter.load(0) < blocks {}
    }
    sync_threads();
    if let Some(o) = out.get_mut(unique_index()) {
        *o = 20;
    }
}

// ---- R21: output handles carry no lifetime: stash one in a thread_local on the CPU executor ----
#[cfg(not(target_arch = "nvptx64"))]
std::thread_local! {
    static STASH: core::cell::RefCell<Option<AtomicSlice<u32>>> = const { core::cell::RefCell::new(None) };
}
/// mode 0: keep `flag` after the launch; mode 1: write 0xBAD through the kept one.
#[kernel]
pub fn r21_stash(mode: u32, flag: AtomicSlice<u32>) {
    #[cfg(not(target_arch = "nvptx64"))]
    {
        if mode == 0 {
            if thread_idx_x() == 0 && block_idx_x() == 0 {
                STASH.with(|s| *s.borrow_mut() = Some(flag));
            }
        } else if let Some(old) = STASH.with(|s| s.borrow_mut().take()) {
            old.store(0, 0xBAD);
            old.store(1, 0xBAD);
        }
    }
    #[cfg(target_arch = "nvptx64")]
    {
        let _ = (mode, flag);
    }
}

// ---- R22: 48000 bytes of static shared memory plus dynamic shared memory ----
#[kernel]
pub fn r22_static_plus_dynamic(mut out: DisjointSlice<u32>) {
    let s = shared_array![u32; 12000];
    let d = dynamic_shared::<u32>();
    let t = thread_idx_x() as usize;
    s.set(t, 1);
    if t < d.len() {
        d.set(t, 2);
    }
    sync_threads();
    if let Some(o) = out.get_mut(unique_index()) {
        *o = s.get(t) + if t < d.len() { d.get(t) } else { 0 };
    }
}
