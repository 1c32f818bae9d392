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

    /// `self + other` rounded once to nearest even: CUDA's `__hadd` and the `+`/`+=` of
    /// `__nv_bfloat16`/`__half`. One `add.rn.bf16` on sm_90+ (SASS `HADD2.BF16`; sm_80:
    /// `fma.rn.bf16` by 1.0, exact), one `add.rn.f16` on every GPU. The same bits as
    /// `(self.widen() + other.widen())` rounded back (that double rounding is exact for `+`,
    /// `-`, `*`: `f32` carries more than twice the bits plus two), which costs a widening, an
    /// `f32` add and a `cvt` each time. `half`'s own `bf16 + bf16` is the same value computed
    /// in portable integer code (tens of instructions on the GPU): in kernels, call this.
    fn add_rn(self, other: Self) -> Self;

    /// `self - other` rounded once to nearest even (`__hsub`, `-`): `sub.rn.bf16` on sm_90+
    /// (sm_80: `fma.rn.bf16`), `sub.rn.f16`.
    fn sub_rn(self, other: Self) -> Self;

    /// `self * other` rounded once to nearest even (`__hmul`, `*`): `mul.rn.bf16` on sm_90+
    /// (SASS `HMUL2.BF16`; sm_80: `fma.rn.bf16` plus -0.0), `mul.rn.f16`.
    fn mul_rn(self, other: Self) -> Self;

    /// `self * b + c` rounded once to nearest even (`__hfma`): `fma.rn.bf16` on sm_80+,
    /// `fma.rn.f16` on every GPU.
    fn fma_rn(self, b: Self, c: Self) -> Self;

    /// The larger of the two; a NaN loses to a number (`__hmax`, `fmaxf`'s rule): `max.bf16`
    /// / `max.f16` on sm_80+ (older GPUs: compared as `f32`). `half`'s inherent `max` gives the
    /// same value in portable integer code.
    fn max_num(self, other: Self) -> Self;

    /// The smaller of the two; a NaN loses to a number (`__hmin`): `min.bf16` / `min.f16` on
    /// sm_80+.
    fn min_num(self, other: Self) -> Self;
}

#[cfg(target_arch = "nvptx64")]
/// Emits `$ptx` on 16-bit registers (`{d}` out, the named inputs in) on the GPU.
macro_rules! scalar_asm {
    ($ty:ident, $ptx:literal, $($name:ident = $value:expr),*) => {{
        let d: u16;
        // SAFETY: a register-only arithmetic instruction.
        unsafe { core::arch::asm!($ptx, d = out(reg16) d, $($name = in(reg16) $value.to_bits(),)* options(pure, nomem, nostack, preserves_flags)) };
        $ty::from_bits(d)
    }};
}

/// The host's (and older GPUs') `max_num`/`min_num`: a NaN loses, then `f32`'s order; the
/// result is one of the inputs, so exact.
#[allow(dead_code, reason = "unused on GPUs that have the instruction")]
#[inline(always)]
fn pick<T: HalfFloat>(a: T, b: T, take_b: impl Fn(f32, f32) -> bool) -> T {
    let (x, y) = (a.widen(), b.widen());
    if x.is_nan() || (!y.is_nan() && take_b(x, y)) { b } else { a }
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

    #[inline(always)]
    fn add_rn(self, other: bf16) -> bf16 {
        #[cfg(all(target_arch = "nvptx64", ferrocuda_sm = "90"))]
        {
            scalar_asm!(bf16, "add.rn.bf16 {d}, {a}, {b};", a = self, b = other)
        }
        #[cfg(all(target_arch = "nvptx64", ferrocuda_sm = "80", not(ferrocuda_sm = "90")))]
        {
            self.fma_rn(bf16::ONE, other)
        }
        #[cfg(not(all(target_arch = "nvptx64", ferrocuda_sm = "80")))]
        super::soft::bf16_from_f32(self.widen() + other.widen())
    }

    #[inline(always)]
    fn sub_rn(self, other: bf16) -> bf16 {
        #[cfg(all(target_arch = "nvptx64", ferrocuda_sm = "90"))]
        {
            scalar_asm!(bf16, "sub.rn.bf16 {d}, {a}, {b};", a = self, b = other)
        }
        #[cfg(all(target_arch = "nvptx64", ferrocuda_sm = "80", not(ferrocuda_sm = "90")))]
        {
            other.fma_rn(bf16::NEG_ONE, self)
        }
        #[cfg(not(all(target_arch = "nvptx64", ferrocuda_sm = "80")))]
        super::soft::bf16_from_f32(self.widen() - other.widen())
    }

    #[inline(always)]
    fn mul_rn(self, other: bf16) -> bf16 {
        #[cfg(all(target_arch = "nvptx64", ferrocuda_sm = "90"))]
        {
            scalar_asm!(bf16, "mul.rn.bf16 {d}, {a}, {b};", a = self, b = other)
        }
        // Adding -0.0 changes no product, a +0.0 one included.
        #[cfg(all(target_arch = "nvptx64", ferrocuda_sm = "80", not(ferrocuda_sm = "90")))]
        {
            self.fma_rn(other, bf16::NEG_ZERO)
        }
        // The product of two 8-bit significands is exact in `f32`: one rounding.
        #[cfg(not(all(target_arch = "nvptx64", ferrocuda_sm = "80")))]
        super::soft::bf16_from_f32(self.widen() * other.widen())
    }

    #[inline(always)]
    fn fma_rn(self, b: bf16, c: bf16) -> bf16 {
        #[cfg(all(target_arch = "nvptx64", ferrocuda_sm = "80"))]
        {
            scalar_asm!(bf16, "fma.rn.bf16 {d}, {a}, {b}, {c};", a = self, b = b, c = c)
        }
        #[cfg(not(all(target_arch = "nvptx64", ferrocuda_sm = "80")))]
        super::soft::fma_bf16(self, b, c)
    }

    #[inline(always)]
    fn max_num(self, other: bf16) -> bf16 {
        #[cfg(all(target_arch = "nvptx64", ferrocuda_sm = "80"))]
        {
            scalar_asm!(bf16, "max.bf16 {d}, {a}, {b};", a = self, b = other)
        }
        #[cfg(not(all(target_arch = "nvptx64", ferrocuda_sm = "80")))]
        pick(self, other, |x, y| y > x)
    }

    #[inline(always)]
    fn min_num(self, other: bf16) -> bf16 {
        #[cfg(all(target_arch = "nvptx64", ferrocuda_sm = "80"))]
        {
            scalar_asm!(bf16, "min.bf16 {d}, {a}, {b};", a = self, b = other)
        }
        #[cfg(not(all(target_arch = "nvptx64", ferrocuda_sm = "80")))]
        pick(self, other, |x, y| y < x)
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

    #[inline(always)]
    fn add_rn(self, other: f16) -> f16 {
        #[cfg(target_arch = "nvptx64")]
        {
            scalar_asm!(f16, "add.rn.f16 {d}, {a}, {b};", a = self, b = other)
        }
        #[cfg(not(target_arch = "nvptx64"))]
        super::soft::f16_from_f32(self.widen() + other.widen())
    }

    #[inline(always)]
    fn sub_rn(self, other: f16) -> f16 {
        #[cfg(target_arch = "nvptx64")]
        {
            scalar_asm!(f16, "sub.rn.f16 {d}, {a}, {b};", a = self, b = other)
        }
        #[cfg(not(target_arch = "nvptx64"))]
        super::soft::f16_from_f32(self.widen() - other.widen())
    }

    #[inline(always)]
    fn mul_rn(self, other: f16) -> f16 {
        #[cfg(target_arch = "nvptx64")]
        {
            scalar_asm!(f16, "mul.rn.f16 {d}, {a}, {b};", a = self, b = other)
        }
        #[cfg(not(target_arch = "nvptx64"))]
        super::soft::f16_from_f32(self.widen() * other.widen())
    }

    #[inline(always)]
    fn fma_rn(self, b: f16, c: f16) -> f16 {
        #[cfg(target_arch = "nvptx64")]
        {
            scalar_asm!(f16, "fma.rn.f16 {d}, {a}, {b}, {c};", a = self, b = b, c = c)
        }
        #[cfg(not(target_arch = "nvptx64"))]
        super::soft::fma_f16(self, b, c)
    }

    #[inline(always)]
    fn max_num(self, other: f16) -> f16 {
        #[cfg(all(target_arch = "nvptx64", ferrocuda_sm = "80"))]
        {
            scalar_asm!(f16, "max.f16 {d}, {a}, {b};", a = self, b = other)
        }
        #[cfg(not(all(target_arch = "nvptx64", ferrocuda_sm = "80")))]
        pick(self, other, |x, y| y > x)
    }

    #[inline(always)]
    fn min_num(self, other: f16) -> f16 {
        #[cfg(all(target_arch = "nvptx64", ferrocuda_sm = "80"))]
        {
            scalar_asm!(f16, "min.f16 {d}, {a}, {b};", a = self, b = other)
        }
        #[cfg(not(all(target_arch = "nvptx64", ferrocuda_sm = "80")))]
        pick(self, other, |x, y| y < x)
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
