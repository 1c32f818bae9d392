//! Warpgroup matrix multiply-accumulate on Hopper tensor cores (`wgmma.mma_async`, sm_90a).
//!
//! A warpgroup is 4 consecutive warps whose first warp index is a multiple of 4 (128 threads).
//! One `wgmma` computes a 64xNx16 product (N a multiple of 8, up to 256) with A and B read from
//! shared memory through 64-bit [`Descriptor`]s and the f32 accumulators in registers: thread
//! `t` of the warpgroup (warp `w = t / 32`, `lane = t % 32`) holds, for `i` in `0..N/8`,
//! - `acc[4i]`, `acc[4i+1]`: row `16w + lane/4`, columns `8i + 2(lane%4)` and `+1`;
//! - `acc[4i+2]`, `acc[4i+3]`: row `16w + lane/4 + 8`, the same columns.
//!
//! The protocol (PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"):
//! [`fence`] before the first `wgmma` that touches registers written otherwise, several
//! `wgmma`s, [`commit`], then [`wait`]`::<N>()` (all but the newest N groups done) before the
//! accumulators or the shared operands are touched again; [`fence_accumulators_128`] (and
//! friends) keep the compiler from copying accumulators while a group is in flight.
//!
//! Cost: a m64n256k16 bf16 `wgmma` keeps one SM's tensor cores busy ~128 cycles (4·64·256·16
//! FLOP per 4 sub-cores at 1024 dense bf16 FLOP/cycle each); issuing it takes a few cycles.
//! In SASS it is `HGMMA.64x256x16.F32.BF16`.
//!
//! On the host (the CPU executor) each `wgmma` is computed at once by each thread for its own
//! accumulators (`hopper::emu`; 128-byte-swizzled K-major operands only).
//!
//! This module needs the arch-specific target (`Arch::SM_90A`, `cfg(ferrocuda_sm = "90a")`).

#[path = "wgmma_shapes.rs"]
mod shapes;
pub use shapes::*;

/// Swizzle mode of a shared-memory operand (the same one its TMA load used).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Swizzle {
    /// No swizzle ("interleave"): 8x8 core matrices of 16-byte rows.
    None = 0,
    /// 128-byte swizzle: rows of 128 bytes (64 bf16), 8-row groups 1024 bytes apart.
    B128 = 1,
    /// 64-byte swizzle.
    B64 = 2,
    /// 32-byte swizzle.
    B32 = 3,
}

/// A `wgmma` shared-memory matrix descriptor (PTX ISA "Matrix Descriptor Format"): start
/// address, leading- and stride-dimension byte offsets, swizzle mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Descriptor(pub u64);

impl Descriptor {
    /// A descriptor of the operand at shared-window address `address` (16-byte aligned; the
    /// swizzle pattern repeats every 1024 bytes from an aligned base).
    /// `leading_bytes`/`stride_bytes` are the LBO/SBO of the PTX ISA (multiples of 16).
    #[inline(always)]
    pub const fn new(address: u32, leading_bytes: u32, stride_bytes: u32, swizzle: Swizzle) -> Descriptor {
        let start = ((address & 0x3ffff) >> 4) as u64;
        let leading = ((leading_bytes & 0x3ffff) >> 4) as u64;
        let stride = ((stride_bytes & 0x3ffff) >> 4) as u64;
        Descriptor(start | (leading << 16) | (stride << 32) | ((swizzle as u64) << 62))
    }

    /// Where element `k` (0..64, 16-bit) of row `row` of a 128-byte-swizzled K-major tile at
    /// `base` (1024-byte aligned) lives: for tiles written by threads (`st.shared`, `stmatrix`)
    /// rather than TMA, to be read through [`Descriptor::k_major_128b`]. The 16-byte chunks of
    /// each row are XOR-permuted by `row % 8`.
    #[inline(always)]
    pub const fn swizzled_128b_address(base: u32, row: u32, k: u32) -> u32 {
        let logical = base + (row / 8) * 1024 + (row % 8) * 128 + 2 * k;
        logical ^ (((logical >> 7) & 7) << 4)
    }

    /// An N-major B operand (`imm-trans-b = 1`, the `*_rs_n_major` shapes) loaded by TMA with
    /// the 128-byte swizzle from an array whose N index is contiguous: each K row holds 64
    /// N-elements (128 bytes), 8 K rows make a 1024-byte atom (SBO = 1024), and the next 64
    /// N-elements lie `next_n_bytes` further (LBO; a separate TMA box, e.g. 16 KiB for a
    /// 128-row box). Step along K by adding 16 rows x 128 bytes = 2048 bytes per `k16` step.
    #[inline(always)]
    pub const fn n_major_128b(address: u32, next_n_bytes: u32) -> Descriptor {
        Descriptor::new(address, next_n_bytes, 1024, Swizzle::B128)
    }

    /// A K-major operand tile with 64 16-bit elements (128 bytes) per row, loaded by TMA with
    /// the 128-byte swizzle: 8-row groups are 1024 bytes apart. Step along K inside the tile
    /// by adding 32 bytes (16 elements) to `address`.
    #[inline(always)]
    pub const fn k_major_128b(address: u32) -> Descriptor {
        Descriptor::new(address, 16, 1024, Swizzle::B128)
    }
}

/// Orders register and shared-memory accesses before the following `wgmma`s
/// (`wgmma.fence.sync.aligned`).
///
/// # Safety
/// Every thread of the warpgroup (4 warps) executes this same call together: the
/// `.sync.aligned` form executed by part of a warpgroup is undefined behaviour.
#[inline(always)]
pub unsafe fn fence() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a fence.
    unsafe {
        core::arch::asm!("wgmma.fence.sync.aligned;", options(nostack))
    };
}

/// Closes the group of `wgmma`s issued so far (`wgmma.commit_group.sync.aligned`).
///
/// # Safety
/// Every thread of the warpgroup (4 warps) executes this same call together: the
/// `.sync.aligned` form executed by part of a warpgroup is undefined behaviour.
#[inline(always)]
pub unsafe fn commit() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: bookkeeping.
    unsafe {
        core::arch::asm!("wgmma.commit_group.sync.aligned;", options(nostack))
    };
}

/// Waits until at most `N` committed groups are pending (`wgmma.wait_group.sync.aligned N`).
///
/// # Safety
/// Every thread of the warpgroup (4 warps) executes this same call together: the
/// `.sync.aligned` form executed by part of a warpgroup is undefined behaviour.
#[inline(always)]
pub unsafe fn wait<const N: u32>() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a wait.
    unsafe {
        core::arch::asm!("wgmma.wait_group.sync.aligned {n};", n = const N, options(nostack))
    };
}

macro_rules! a_fragments {
    ($($name:ident: $acc:literal => $steps:literal, $n:literal;)*) => {$(
        /// The accumulator-to-operand conversion: this thread's f32 accumulators of a
        #[doc = concat!("m64n", $n, " `wgmma` (an `M x ", $n, "` product, e.g. attention's probabilities P)")]
        /// rounded to bf16 and packed as the A fragments of the next `wgmma` that reads the
        /// product as its A operand from registers (the `*_rs` shapes): element `t` is the A
        /// fragment of K step `t` (columns `16t..16t+16`).
        ///
        /// No data moves between threads: the accumulator layout (columns `8i + 2(lane%4)`,
        /// rows `lane/4` and `+8`) is the A-fragment layout of two neighbouring 8-column
        /// groups, so step `t`'s registers are `pack(acc[8t], acc[8t+1])` (row `lane/4`, k
        /// `2(lane%4)`), `pack(acc[8t+2], acc[8t+3])` (row `+8`), `pack(acc[8t+4], acc[8t+5])`
        /// (k `+8`) and `pack(acc[8t+6], acc[8t+7])`. Cost: one `cvt.rn.bf16x2.f32` per pair.
        #[inline(always)]
        pub fn $name(acc: &[f32; $acc]) -> [[u32; 4]; $steps] {
            use crate::half::pack_bf16x2;
            // SAFETY: all-zero bits are valid `u32`s (not a repeat expression: that would be a
            // store loop keeping the array in local memory, docs/performance.md).
            let mut fragments: [[u32; 4]; $steps] = unsafe { core::mem::zeroed() };
            crate::unroll::unroll::<$steps>(|t| {
                fragments[t] = [
                    pack_bf16x2(acc[8 * t], acc[8 * t + 1]),
                    pack_bf16x2(acc[8 * t + 2], acc[8 * t + 3]),
                    pack_bf16x2(acc[8 * t + 4], acc[8 * t + 5]),
                    pack_bf16x2(acc[8 * t + 6], acc[8 * t + 7]),
                ];
            });
            fragments
        }
    )*};
}

a_fragments! {
    a_fragments_bf16_32: 32 => 4, 64;
    a_fragments_bf16_64: 64 => 8, 128;
    a_fragments_bf16_128: 128 => 16, 256;
}
