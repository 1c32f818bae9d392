//! `f32` <-> 16-bit conversions with the GPU's `cvt` instructions ([`HalfFloat`],
//! [`F32ToHalf`]), and their software twins on the host and on GPUs without them.

use ::half::{bf16, f16};

mod sealed {
    pub trait Sealed {}
    impl Sealed for ::half::bf16 {}
    impl Sealed for ::half::f16 {}
}

/// `bf16` and `f16`: conversion to and from `f32` at one instruction each on the GPU, for
/// generic kernels (`fn kernel<T: HalfFloat>`). The table in the [module docs](super) lists
/// the PTX and the GPUs that have it.
pub trait HalfFloat: bytemuck::Pod + sealed::Sealed {
    /// The nearest value to `value` (ties to even; beyond the largest finite value,
    /// infinity; a NaN stays a NaN), as CUDA's `__float2bfloat16_rn`/`__float2half_rn`.
    fn from_f32_rn(value: f32) -> Self;

    /// The exact `f32` value, as CUDA's `__bfloat162float`/`__half2float` (every bf16 and
    /// f16 is an `f32`).
    fn widen(self) -> f32;
}

impl HalfFloat for bf16 {
    #[inline(always)]
    fn from_f32_rn(value: f32) -> bf16 {
        #[cfg(all(target_arch = "nvptx64", ferrocuda_sm = "80"))]
        {
            let bits: u16;
            // SAFETY: a register-only conversion.
            unsafe { core::arch::asm!("cvt.rn.bf16.f32 {b}, {x};", b = out(reg16) bits, x = in(reg32) value, options(pure, nomem, nostack, preserves_flags)) };
            bf16::from_bits(bits)
        }
        #[cfg(not(all(target_arch = "nvptx64", ferrocuda_sm = "80")))]
        super::soft::bf16_from_f32(value)
    }

    #[inline(always)]
    fn widen(self) -> f32 {
        // bf16 is the top half of an f32: exact, and one shift on every GPU (`half`'s
        // `to_f32` adds a NaN-quieting select).
        f32::from_bits((self.to_bits() as u32) << 16)
    }
}

impl HalfFloat for f16 {
    #[inline(always)]
    fn from_f32_rn(value: f32) -> f16 {
        #[cfg(target_arch = "nvptx64")]
        {
            let bits: u16;
            // SAFETY: a register-only conversion.
            unsafe { core::arch::asm!("cvt.rn.f16.f32 {b}, {x};", b = out(reg16) bits, x = in(reg32) value, options(pure, nomem, nostack, preserves_flags)) };
            f16::from_bits(bits)
        }
        #[cfg(not(target_arch = "nvptx64"))]
        super::soft::f16_from_f32(value)
    }

    #[inline(always)]
    fn widen(self) -> f32 {
        #[cfg(target_arch = "nvptx64")]
        {
            let value: f32;
            // SAFETY: a register-only conversion.
            unsafe {
                core::arch::asm!("cvt.f32.f16 {x}, {b};", x = out(reg32) value, b = in(reg16) self.to_bits(), options(pure, nomem, nostack, preserves_flags))
            };
            value
        }
        #[cfg(not(target_arch = "nvptx64"))]
        super::soft::f16_to_f32(self)
    }
}

/// `x.to_bf16()` and `x.to_f16()` on `f32`: [`HalfFloat::from_f32_rn`] read left to right.
pub trait F32ToHalf: sealed_f32::Sealed {
    /// The nearest bf16 (`cvt.rn.bf16.f32` on sm_80+).
    fn to_bf16(self) -> bf16;
    /// The nearest f16 (`cvt.rn.f16.f32`).
    fn to_f16(self) -> f16;
}

mod sealed_f32 {
    pub trait Sealed {}
    impl Sealed for f32 {}
}

impl F32ToHalf for f32 {
    #[inline(always)]
    fn to_bf16(self) -> bf16 {
        bf16::from_f32_rn(self)
    }

    #[inline(always)]
    fn to_f16(self) -> f16 {
        f16::from_f32_rn(self)
    }
}
