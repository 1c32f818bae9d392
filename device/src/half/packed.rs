//! [`Bf16x2`] and [`F16x2`]: a pair of 16-bit floats in one 32-bit register, for the GPU's
//! packed conversions and arithmetic (two results per instruction).

use ::half::{bf16, f16};

use super::soft;

#[cfg(target_arch = "nvptx64")]
/// Emits `$ptx` (three or four `.b32` operands: `{d}, {a}, {b}[, {c}]`) on the GPU.
macro_rules! packed_asm {
    ($ptx:literal, $($name:ident = $value:expr),*) => {{
        let d: u32;
        // SAFETY: a register-only arithmetic instruction.
        unsafe { core::arch::asm!($ptx, d = out(reg32) d, $($name = in(reg32) $value,)* options(pure, nomem, nostack, preserves_flags)) };
        d
    }};
}

macro_rules! packed_type {
    ($(#[$doc:meta])* $name:ident, $elem:ident, $soft_fma:path, $max_ptx:literal, $min_ptx:literal) => {
        $(#[$doc])*
        ///
        /// The low element is bits 0-15 (PTX's `b` operand of a packing `cvt`, the element at
        /// the lower address in memory). Comparing two pairs means comparing their elements
        /// ([`lo`](Self::lo), [`hi`](Self::hi)), so the type has no `PartialEq` of its own.
        #[repr(transparent)]
        #[derive(Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
        pub struct $name(u32);

        impl $name {
            /// The pair `(lo, hi)`.
            #[inline(always)]
            pub const fn new(lo: $elem, hi: $elem) -> Self {
                $name(lo.to_bits() as u32 | (hi.to_bits() as u32) << 16)
            }

            /// Both elements `value`.
            #[inline(always)]
            pub const fn splat(value: $elem) -> Self {
                Self::new(value, value)
            }

            /// From the register's bits (`lo | hi << 16`).
            #[inline(always)]
            pub const fn from_bits(bits: u32) -> Self {
                $name(bits)
            }

            /// The register's bits (`lo | hi << 16`).
            #[inline(always)]
            pub const fn to_bits(self) -> u32 {
                self.0
            }

            /// The low element.
            #[inline(always)]
            pub const fn lo(self) -> $elem {
                $elem::from_bits(self.0 as u16)
            }

            /// The high element.
            #[inline(always)]
            pub const fn hi(self) -> $elem {
                $elem::from_bits((self.0 >> 16) as u16)
            }

            /// Both elements widened to `f32` (exact), low first.
            #[inline(always)]
            pub fn to_f32s(self) -> (f32, f32) {
                use super::HalfFloat;
                (self.lo().widen(), self.hi().widen())
            }
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.debug_tuple(stringify!($name)).field(&self.lo()).field(&self.hi()).finish()
            }
        }

        impl core::ops::Add for $name {
            type Output = $name;
            /// Element-wise sum, each rounded to nearest even.
            #[inline(always)]
            fn add(self, other: $name) -> $name {
                self.add_rn(other)
            }
        }

        impl core::ops::Mul for $name {
            type Output = $name;
            /// Element-wise product, each rounded to nearest even.
            #[inline(always)]
            fn mul(self, other: $name) -> $name {
                self.mul_rn(other)
            }
        }

        impl $name {
            /// Element by element, the larger of the two; a NaN loses to a number (CUDA's
            /// `__hmax2`): one `max.bf16x2`/`max.f16x2` on sm_80+.
            #[inline(always)]
            pub fn max_num(self, other: $name) -> $name {
                #[cfg(all(target_arch = "nvptx64", ferrocuda_sm = "80"))]
                {
                    $name(packed_asm!($max_ptx, a = self.0, b = other.0))
                }
                #[cfg(not(all(target_arch = "nvptx64", ferrocuda_sm = "80")))]
                {
                    use super::HalfFloat;
                    $name::new(self.lo().max_num(other.lo()), self.hi().max_num(other.hi()))
                }
            }

            /// Element by element, the smaller of the two; a NaN loses to a number (`__hmin2`):
            /// one `min.bf16x2`/`min.f16x2` on sm_80+.
            #[inline(always)]
            pub fn min_num(self, other: $name) -> $name {
                #[cfg(all(target_arch = "nvptx64", ferrocuda_sm = "80"))]
                {
                    $name(packed_asm!($min_ptx, a = self.0, b = other.0))
                }
                #[cfg(not(all(target_arch = "nvptx64", ferrocuda_sm = "80")))]
                {
                    use super::HalfFloat;
                    $name::new(self.lo().min_num(other.lo()), self.hi().min_num(other.hi()))
                }
            }

            /// The software twin of `fma`, element by element.
            #[allow(dead_code, reason = "unused on GPUs that have the instruction")]
            #[inline]
            fn fma_soft(self, b: $name, c: $name) -> $name {
                $name::new($soft_fma(self.lo(), b.lo(), c.lo()), $soft_fma(self.hi(), b.hi(), c.hi()))
            }
        }
    };
}

packed_type!(
    /// Two `bf16` in one 32-bit register: what `cvt.rn.bf16x2.f32`, `fma.rn.bf16x2` and the
    /// bf16 `mma`/`wgmma` fragments work on.
    Bf16x2, bf16, soft::fma_bf16, "max.bf16x2 {d}, {a}, {b};", "min.bf16x2 {d}, {a}, {b};"
);

packed_type!(
    /// Two `f16` in one 32-bit register: what `cvt.rn.f16x2.f32`, `fma.rn.f16x2` and the f16
    /// `mma` fragments work on.
    F16x2, f16, soft::fma_f16, "max.f16x2 {d}, {a}, {b};", "min.f16x2 {d}, {a}, {b};"
);

impl Bf16x2 {
    /// `lo` and `hi` rounded to nearest even: one `cvt.rn.bf16x2.f32` on sm_80+.
    #[inline(always)]
    pub fn from_f32s(lo: f32, hi: f32) -> Bf16x2 {
        #[cfg(all(target_arch = "nvptx64", ferrocuda_sm = "80"))]
        {
            // PTX packs its first source into the upper half.
            Bf16x2(packed_asm!("cvt.rn.bf16x2.f32 {d}, {a}, {b};", a = hi, b = lo))
        }
        #[cfg(not(all(target_arch = "nvptx64", ferrocuda_sm = "80")))]
        Bf16x2::new(soft::bf16_from_f32(lo), soft::bf16_from_f32(hi))
    }

    /// `self * b + c` element by element, each rounded once to nearest even: one
    /// `fma.rn.bf16x2` on sm_80+.
    #[inline(always)]
    pub fn fma(self, b: Bf16x2, c: Bf16x2) -> Bf16x2 {
        #[cfg(all(target_arch = "nvptx64", ferrocuda_sm = "80"))]
        {
            Bf16x2(packed_asm!("fma.rn.bf16x2 {d}, {a}, {b}, {c};", a = self.0, b = b.0, c = c.0))
        }
        #[cfg(not(all(target_arch = "nvptx64", ferrocuda_sm = "80")))]
        self.fma_soft(b, c)
    }

    /// `self + other`: `add.rn.bf16x2` on sm_90+, `fma.rn.bf16x2` by 1.0 on sm_80 (exact, so
    /// the same result).
    #[inline(always)]
    fn add_rn(self, other: Bf16x2) -> Bf16x2 {
        #[cfg(all(target_arch = "nvptx64", ferrocuda_sm = "90"))]
        {
            Bf16x2(packed_asm!("add.rn.bf16x2 {d}, {a}, {b};", a = self.0, b = other.0))
        }
        #[cfg(not(all(target_arch = "nvptx64", ferrocuda_sm = "90")))]
        self.fma(Bf16x2::splat(bf16::ONE), other)
    }

    /// `self * other`: `mul.rn.bf16x2` on sm_90+, `fma.rn.bf16x2` plus -0.0 on sm_80 (adding
    /// -0.0 changes no result, a +0.0 product included).
    #[inline(always)]
    fn mul_rn(self, other: Bf16x2) -> Bf16x2 {
        #[cfg(all(target_arch = "nvptx64", ferrocuda_sm = "90"))]
        {
            Bf16x2(packed_asm!("mul.rn.bf16x2 {d}, {a}, {b};", a = self.0, b = other.0))
        }
        #[cfg(not(all(target_arch = "nvptx64", ferrocuda_sm = "90")))]
        self.fma(other, Bf16x2::splat(bf16::NEG_ZERO))
    }
}

impl F16x2 {
    /// `lo` and `hi` rounded to nearest even: one `cvt.rn.f16x2.f32` on sm_80+, two
    /// `cvt.rn.f16.f32` before.
    #[inline(always)]
    pub fn from_f32s(lo: f32, hi: f32) -> F16x2 {
        #[cfg(all(target_arch = "nvptx64", ferrocuda_sm = "80"))]
        {
            F16x2(packed_asm!("cvt.rn.f16x2.f32 {d}, {a}, {b};", a = hi, b = lo))
        }
        #[cfg(not(all(target_arch = "nvptx64", ferrocuda_sm = "80")))]
        {
            use super::HalfFloat;
            F16x2::new(f16::from_f32_rn(lo), f16::from_f32_rn(hi))
        }
    }

    /// `self * b + c` element by element, each rounded once to nearest even: one
    /// `fma.rn.f16x2`.
    #[inline(always)]
    pub fn fma(self, b: F16x2, c: F16x2) -> F16x2 {
        #[cfg(target_arch = "nvptx64")]
        {
            F16x2(packed_asm!("fma.rn.f16x2 {d}, {a}, {b}, {c};", a = self.0, b = b.0, c = c.0))
        }
        #[cfg(not(target_arch = "nvptx64"))]
        self.fma_soft(b, c)
    }

    /// `self + other`: one `add.rn.f16x2` (`.rn` keeps ptxas from fusing it with a multiply).
    #[inline(always)]
    fn add_rn(self, other: F16x2) -> F16x2 {
        #[cfg(target_arch = "nvptx64")]
        {
            F16x2(packed_asm!("add.rn.f16x2 {d}, {a}, {b};", a = self.0, b = other.0))
        }
        #[cfg(not(target_arch = "nvptx64"))]
        self.fma_soft(F16x2::splat(f16::ONE), other)
    }

    /// `self * other`: one `mul.rn.f16x2`.
    #[inline(always)]
    fn mul_rn(self, other: F16x2) -> F16x2 {
        #[cfg(target_arch = "nvptx64")]
        {
            F16x2(packed_asm!("mul.rn.f16x2 {d}, {a}, {b};", a = self.0, b = other.0))
        }
        #[cfg(not(target_arch = "nvptx64"))]
        self.fma_soft(other, F16x2::splat(f16::NEG_ZERO))
    }
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;

    #[test]
    fn pairs_pack_low_first() {
        let pair = Bf16x2::from_f32s(1.0, -2.0);
        assert_eq!(pair.to_bits(), 0xc000_3f80);
        assert_eq!((pair.lo(), pair.hi()), (bf16::ONE, bf16::from_f32(-2.0)));
        assert_eq!(pair.to_f32s(), (1.0, -2.0));
        assert_eq!(F16x2::from_f32s(1.0, -2.0).to_bits(), 0xc000_3c00);
        assert_eq!(format!("{:?}", F16x2::from_f32s(0.5, 3.0)), "F16x2(0.5, 3.0)");
    }

    #[test]
    fn packed_arithmetic_is_elementwise_and_rounds_once() {
        let (a, b) = (Bf16x2::from_f32s(1.5, -3.0), Bf16x2::from_f32s(2.0, 0.25));
        assert_eq!((a + b).to_f32s(), (3.5, -2.75));
        assert_eq!((a * b).to_f32s(), (3.0, -0.75));
        // bf16 has 8 significant bits: 1 + 2^-8 is a tie between 1 and 1 + 2^-7 (even: 1).
        let tiny = Bf16x2::splat(bf16::from_f32(2f32.powi(-8)));
        assert_eq!((Bf16x2::splat(bf16::ONE) + tiny).to_f32s(), (1.0, 1.0));
        // Fused: (1 + 2^-7)^2 - (1 + 2^-6) = 2^-14 exactly, lost if the product were rounded.
        let x = Bf16x2::splat(bf16::from_f32(1.0 + 2f32.powi(-7)));
        let c = Bf16x2::splat(bf16::from_f32(-(1.0 + 2f32.powi(-6))));
        assert_eq!(x.fma(x, c).to_f32s(), (2f32.powi(-14), 2f32.powi(-14)));
        let h = F16x2::from_f32s(0.5, 4.0);
        assert_eq!((h * h + h).to_f32s(), (0.75, 20.0));
        // f16 overflows past 65504: 256 * 256 is infinity.
        let big = F16x2::splat(f16::from_f32(256.0));
        assert_eq!((big * big).to_f32s(), (f32::INFINITY, f32::INFINITY));
    }

    #[test]
    fn multiplying_keeps_the_sign_of_zero() {
        // The sm_80 path multiplies as fma(a, b, -0.0): a +0.0 product must stay +0.0.
        let zero = Bf16x2::from_f32s(0.0, -0.0);
        let one = Bf16x2::splat(bf16::ONE);
        assert_eq!((zero * one).to_bits(), Bf16x2::from_f32s(0.0, -0.0).to_bits());
        let zero = F16x2::from_f32s(0.0, -0.0);
        assert_eq!((zero * F16x2::splat(f16::ONE)).to_bits(), zero.to_bits());
    }
}
