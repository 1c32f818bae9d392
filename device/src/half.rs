//! The 16-bit floats: the [`half`] crate's [`bf16`] and [`f16`](struct@f16), on the host and in
//! kernels, with the GPU's conversion and packed instructions.
//!
//! `bf16` and `f16` are the 16-bit floats of Rust's GPU ecosystem (candle, burn, cudarc's
//! `f16` feature and `half` itself), so a kernel taking `&[bf16]` takes what a candle tensor
//! holds. Through `half`'s `bytemuck` feature they are [`bytemuck::Pod`] on every target,
//! the device included: kernel slice elements (`&[bf16]`, `DisjointSlice<bf16>`), by-value
//! parameters, shared-memory elements ([`SharedElement`](crate::shared::SharedElement)), warp
//! shuffle values ([`ShuffleValue`](crate::warp::ShuffleValue)) and atomic elements
//! ([`AtomicElement`](crate::atomic::AtomicElement), with [`AtomicAdd`](crate::atomic::AtomicAdd)).
//!
//! ```ignore
//! use ferrocuda_device::half::{F32ToHalf, HalfFloat, bf16};
//! use ferrocuda_device::{DisjointSlice, global::unique_index, kernel};
//!
//! /// `out[i] = x[i] * scale`, in f32, rounded once (tests/kernels/src/half_floats.rs has
//! /// this kernel with a bias, run on the GPU and the CPU executor).
//! #[kernel]
//! pub fn scale_bf16(x: &[bf16], scale: bf16, mut out: DisjointSlice<bf16>) {
//!     let i = unique_index();
//!     if i.get() < x.len() {
//!         out[i] = (x[i].widen() * scale.widen()).to_bf16(); // shifts, mul.rn.f32, cvt.rn.bf16.f32
//!     }
//! }
//!
//! // On the host: the same type, from `ferrocuda::half` or the `half` crate.
//! let x = DeviceBuffer::from_slice(&context, &[bf16::from_f32(1.5); 1024])?;
//! let mut out = DeviceBuffer::<bf16>::zeroed(&context, 1024)?;
//! scale_bf16::launch(&stream, LaunchConfig::for_elements(1024, 256), &x, bf16::from_f32(2.0), &mut out)?;
//! ```
//!
//! # Conversions in kernels
//! `half`'s own `bf16::from_f32` and `f16::from_f32`/`to_f32` are portable integer code: on
//! the GPU they cost 10 to 40 instructions each. In kernels convert with [`F32ToHalf`] and
//! [`HalfFloat`], which are one instruction where the GPU has it:
//!
//! | call | PTX | where |
//! |------|-----|-------|
//! | `x.to_bf16()`, `bf16::from_f32_rn(x)` | `cvt.rn.bf16.f32` | sm_80+ (older: integer rounding) |
//! | `x.to_f16()`, `f16::from_f32_rn(x)` | `cvt.rn.f16.f32` | every GPU |
//! | `h.widen()` on `bf16` | a 16-bit shift (bf16 is the top half of an f32) | every GPU |
//! | `h.widen()` on `f16` | `cvt.f32.f16` | every GPU |
//! | [`Bf16x2::from_f32s`] | `cvt.rn.bf16x2.f32` | sm_80+ |
//! | [`F16x2::from_f32s`] | `cvt.rn.f16x2.f32` | sm_80+ (older: two `cvt.rn.f16.f32`) |
//! | [`Bf16x2::fma`] | `fma.rn.bf16x2` | sm_80+ |
//! | `Bf16x2 + Bf16x2`, `*` | `add.rn.bf16x2`, `mul.rn.bf16x2` | sm_90+ (sm_80: `fma.rn.bf16x2`) |
//! | [`F16x2::fma`], `+`, `*` | `fma.rn.f16x2`, `add.rn.f16x2`, `mul.rn.f16x2` | every GPU |
//! | `a.add_rn(b)`, `sub_rn`, `mul_rn` on `bf16` ([`HalfFloat`]) | `add.rn.bf16`, `sub.rn.bf16`, `mul.rn.bf16` (`HADD2.BF16`, `HMUL2.BF16`) | sm_90+ (sm_80: `fma.rn.bf16`; older: via `f32`) |
//! | `a.fma_rn(b, c)` on `bf16`; `max_num`, `min_num` | `fma.rn.bf16`; `max.bf16`, `min.bf16` | sm_80+ (older: software, via `f32`) |
//! | `add_rn`, `sub_rn`, `mul_rn`, `fma_rn` on `f16`; `max_num`, `min_num` | `add/sub/mul/fma.rn.f16`; `max.f16`, `min.f16` | every GPU; max/min sm_80+ |
//! | [`Bf16x2::max_num`], `min_num` (and `F16x2`) | `max.bf16x2`, `min.bf16x2` (`max.f16x2`, ...) | sm_80+ |
//!
//! CUDA's `__nv_bfloat16` operators (`a + b`, `x += v`, `a * b`) are `add_rn`/`mul_rn` here:
//! one instruction on sm_90, as nvcc compiles them. `half`'s own `bf16 + bf16` computes the
//! same value in portable integer code (tens of instructions), and
//! `(a.widen() + b.widen()).to_bf16()` in three (a widening, an `f32` add, a `cvt`).
//! | `AtomicSlice<f16>::add` (and `F16x2`) | `atom.add.noftz.f16` (`.f16x2`) | every GPU |
//! | `AtomicSlice<bf16>::add` (and `Bf16x2`) | `atom.add.noftz.bf16` (`.bf16x2`) | sm_90+ only |
//!
//! Every one rounds to nearest, ties to even, and keeps subnormals (no `.ftz`). Where a GPU
//! lacks the instruction, and on the host (the CPU executor, host code), a software twin
//! computes the same correctly rounded result: the same bits for every result that is not a
//! NaN. A NaN result is a NaN on both, but its payload may differ (the GPU returns a canonical
//! NaN). The twins live in [`soft`] and are tested against an independent oracle.
//!
//! # Why two types of our own
//! `half` has no packed pair, and the GPU's packed instructions work on a pair held in one
//! 32-bit register. [`Bf16x2`] and [`F16x2`] are that register: 4-byte aligned, so a pair is
//! one 32-bit load or store (a `[bf16; 2]` is only 2-byte aligned, so it can't be), with the
//! low element in bits 0-15 as in `mma`/`wgmma` fragments. Everything else is `half`'s.
//!
//! On the host, depend on `half` 2 (or name these re-exports): the types are the same.

mod convert;
pub mod fp8;
mod packed;
pub mod soft;

pub use ::half::{bf16, f16};

/// The project's own bf16 before the `half` crate's replaced it (same bits, same `from_f32`,
/// `from_f32_const`, `to_f32`, `to_bits`, `from_bits`, `ZERO`, `ONE`; not the tuple
/// constructor `Bf16(bits)`: write `bf16::from_bits(bits)`).
#[deprecated(
    note = "use `ferrocuda_device::half::bf16` (the `half` crate's type); in kernels convert with `x.to_bf16()` and `h.widen()` (`F32ToHalf`, `HalfFloat`), one instruction each"
)]
pub type Bf16 = bf16;

/// The project's own f16 before the `half` crate's replaced it (see [`Bf16`]).
#[deprecated(
    note = "use `ferrocuda_device::half::f16` (the `half` crate's type); in kernels convert with `x.to_f16()` and `h.widen()` (`F32ToHalf`, `HalfFloat`)"
)]
pub type F16 = f16;
pub use convert::{F32ToHalf, HalfFloat};
pub use packed::{Bf16x2, F16x2};

/// Two `f32` rounded to bf16 and packed as `lo | hi << 16` (`cvt.rn.bf16x2.f32` on sm_80+):
/// the register layout of a bf16 pair in `mma`/`wgmma` fragments and 32-bit stores. The same
/// as [`Bf16x2::from_f32s`]`(lo, hi).to_bits()`.
#[inline(always)]
pub fn pack_bf16x2(lo: f32, hi: f32) -> u32 {
    Bf16x2::from_f32s(lo, hi).to_bits()
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    /// The deprecated names of the project's own 16-bit floats still compile for the uses the
    /// old types had (constructors, conversions, constants), as the `half` crate's types.
    #[test]
    #[allow(deprecated)]
    fn the_removed_bf16_and_f16_types_still_compile_as_aliases() {
        use super::{Bf16, F16};
        const HALF: Bf16 = Bf16::from_f32_const(0.5);
        assert_eq!(Bf16::from_f32(1.5).to_f32(), 1.5);
        assert_eq!(HALF.to_bits(), 0x3f00);
        assert_eq!(Bf16::from_bits(Bf16::ONE.to_bits()), super::bf16::ONE);
        assert_eq!(F16::from_f32(-2.0).to_f32(), -2.0);
        assert_eq!(F16::ZERO.to_bits(), 0);
    }
}
