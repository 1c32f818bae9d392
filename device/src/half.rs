//! 16-bit floating-point storage types, [`Bf16`] and [`F16`], usable on the host and the device.
//!
//! Both are plain `#[repr(transparent)]` wrappers of their bits (`u16`): any bit pattern is a
//! value (NaNs included), so they are `Pod` on the host and can sit in device buffers, shared
//! memory and tensor-core fragments. Arithmetic is done in `f32`: convert with
//! [`Bf16::from_f32`] (round to nearest even, as `cvt.rn.bf16.f32`) and [`Bf16::to_f32`]
//! (exact). [`pack_bf16x2`] converts two `f32` into the packed pair the tensor cores and 32-bit
//! stores use.
//!
//! Cost on the GPU: `to_f32` is one shift/`mov` (bf16) or one `cvt.f32.f16`; `from_f32` is one
//! `cvt.rn` on sm_80+ (sm_70 gets the integer rounding sequence, ~5 instructions);
//! `pack_bf16x2` is one `cvt.rn.bf16x2.f32` on sm_80+.

/// bfloat16: 1 sign, 8 exponent, 7 mantissa bits (the top half of an `f32`).
#[allow(non_camel_case_types)]
#[repr(transparent)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, Debug)]
pub struct Bf16(pub u16);

/// IEEE binary16: 1 sign, 5 exponent, 10 mantissa bits.
#[repr(transparent)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, Debug)]
pub struct F16(pub u16);

#[cfg(not(target_arch = "nvptx64"))]
// SAFETY: `repr(transparent)` over `u16`; every bit pattern is a valid value.
unsafe impl bytemuck::Zeroable for Bf16 {}
#[cfg(not(target_arch = "nvptx64"))]
// SAFETY: as above; no padding, no pointers.
unsafe impl bytemuck::Pod for Bf16 {}
#[cfg(not(target_arch = "nvptx64"))]
// SAFETY: `repr(transparent)` over `u16`; every bit pattern is a valid value.
unsafe impl bytemuck::Zeroable for F16 {}
#[cfg(not(target_arch = "nvptx64"))]
// SAFETY: as above; no padding, no pointers.
unsafe impl bytemuck::Pod for F16 {}

/// Round-to-nearest-even `f32` -> bf16 bits in integer arithmetic (NaN stays a quiet NaN).
#[inline(always)]
const fn bf16_bits_rne(x: f32) -> u16 {
    let bits = x.to_bits();
    if (bits & 0x7fff_ffff) > 0x7f80_0000 {
        return ((bits >> 16) | 0x40) as u16;
    }
    let rounding = 0x7fff + ((bits >> 16) & 1);
    ((bits.wrapping_add(rounding)) >> 16) as u16
}

impl Bf16 {
    /// 0.0
    pub const ZERO: Bf16 = Bf16(0);
    /// 1.0
    pub const ONE: Bf16 = Bf16(0x3f80);

    /// The nearest bf16 (ties to even), as `cvt.rn.bf16.f32`.
    #[inline(always)]
    pub fn from_f32(x: f32) -> Bf16 {
        #[cfg(all(target_arch = "nvptx64", ferrocuda_sm = "80"))]
        {
            let bits: u16;
            // SAFETY: a register-only conversion.
            unsafe { core::arch::asm!("cvt.rn.bf16.f32 {b}, {x};", b = out(reg16) bits, x = in(reg32) x, options(pure, nomem, nostack)) };
            Bf16(bits)
        }
        #[cfg(not(all(target_arch = "nvptx64", ferrocuda_sm = "80")))]
        Bf16(bf16_bits_rne(x))
    }

    /// The same rounding, usable in constants.
    pub const fn from_f32_const(x: f32) -> Bf16 {
        Bf16(bf16_bits_rne(x))
    }

    /// The exact `f32` value.
    #[inline(always)]
    pub const fn to_f32(self) -> f32 {
        f32::from_bits((self.0 as u32) << 16)
    }

    /// The raw bits.
    #[inline(always)]
    pub const fn to_bits(self) -> u16 {
        self.0
    }

    /// From raw bits.
    #[inline(always)]
    pub const fn from_bits(bits: u16) -> Bf16 {
        Bf16(bits)
    }
}

impl F16 {
    /// 0.0
    pub const ZERO: F16 = F16(0);
    /// 1.0
    pub const ONE: F16 = F16(0x3c00);

    /// The nearest f16 (ties to even; overflow gives infinity), as `cvt.rn.f16.f32`.
    #[inline(always)]
    pub fn from_f32(x: f32) -> F16 {
        #[cfg(target_arch = "nvptx64")]
        {
            let bits: u16;
            // SAFETY: a register-only conversion.
            unsafe { core::arch::asm!("cvt.rn.f16.f32 {b}, {x};", b = out(reg16) bits, x = in(reg32) x, options(pure, nomem, nostack)) };
            F16(bits)
        }
        #[cfg(not(target_arch = "nvptx64"))]
        F16(f16_bits_rne(x))
    }

    /// The exact `f32` value.
    #[inline(always)]
    pub fn to_f32(self) -> f32 {
        #[cfg(target_arch = "nvptx64")]
        {
            let x: f32;
            // SAFETY: a register-only conversion.
            unsafe { core::arch::asm!("cvt.f32.f16 {x}, {b};", x = out(reg32) x, b = in(reg16) self.0, options(pure, nomem, nostack)) };
            x
        }
        #[cfg(not(target_arch = "nvptx64"))]
        f16_bits_to_f32(self.0)
    }

    /// The raw bits.
    #[inline(always)]
    pub const fn to_bits(self) -> u16 {
        self.0
    }

    /// From raw bits.
    #[inline(always)]
    pub const fn from_bits(bits: u16) -> F16 {
        F16(bits)
    }
}

#[cfg(not(target_arch = "nvptx64"))]
fn f16_bits_to_f32(h: u16) -> f32 {
    let sign = ((h as u32) & 0x8000) << 16;
    let exp = ((h >> 10) & 0x1f) as i32;
    let man = (h & 0x3ff) as u32;
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, _) => {
            // Subnormal: value = man * 2^-24.
            let value = man as f32 * f32::from_bits(0x3380_0000);
            return if sign != 0 { -value } else { value };
        }
        (31, 0) => sign | 0x7f80_0000,
        (31, _) => sign | 0x7fc0_0000 | (man << 13),
        _ => sign | (((exp - 15 + 127) as u32) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

#[cfg(not(target_arch = "nvptx64"))]
fn f16_bits_rne(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let abs = bits & 0x7fff_ffff;
    if abs > 0x7f80_0000 {
        return sign | 0x7e00;
    }
    if abs >= 0x4780_0000 {
        // >= 65536 (after rounding anything >= 65520 overflows): infinity.
        return sign | 0x7c00;
    }
    let exp = (abs >> 23) as i32 - 127;
    if exp < -25 {
        return sign;
    }
    let (man, shift) = if exp < -14 { ((abs & 0x7f_ffff) | 0x80_0000, (-1 - exp) as u32) } else { (abs & 0x7f_ffff, 13) };
    let base = if exp < -14 { 0 } else { (((exp + 15) as u32) << 10) as u16 };
    let half = 1u32 << (shift - 1);
    let rest = man & ((1 << shift) - 1);
    let mut out = base as u32 + (man >> shift);
    if rest > half || (rest == half && (out & 1) == 1) {
        out += 1;
    }
    if abs >= 0x477f_f000 {
        return sign | 0x7c00;
    }
    sign | out as u16
}

/// Two `f32` rounded to bf16 and packed as `lo | hi << 16` (`cvt.rn.bf16x2.f32`): the
/// register layout of a bf16 pair in `mma`/`wgmma` fragments and 32-bit stores.
#[inline(always)]
pub fn pack_bf16x2(lo: f32, hi: f32) -> u32 {
    #[cfg(all(target_arch = "nvptx64", ferrocuda_sm = "80"))]
    {
        let packed: u32;
        // SAFETY: a register-only conversion; PTX takes the high element first.
        unsafe {
            core::arch::asm!("cvt.rn.bf16x2.f32 {p}, {h}, {l};", p = out(reg32) packed, h = in(reg32) hi, l = in(reg32) lo, options(pure, nomem, nostack))
        };
        packed
    }
    #[cfg(not(all(target_arch = "nvptx64", ferrocuda_sm = "80")))]
    {
        bf16_bits_rne(lo) as u32 | ((bf16_bits_rne(hi) as u32) << 16)
    }
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;

    #[test]
    fn bf16_rounds_to_nearest_even() {
        assert_eq!(Bf16::from_f32(1.0), Bf16::ONE);
        assert_eq!(Bf16::from_f32(-2.5).to_f32(), -2.5);
        // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0).
        assert_eq!(Bf16::from_f32(1.0 + 1.0 / 256.0), Bf16::ONE);
        // 1 + 3·2^-8 is halfway between 1+2^-7 and 1+2^-6: ties to even (1 + 2^-6).
        assert_eq!(Bf16::from_f32(1.0 + 3.0 / 256.0).to_f32(), 1.0 + 1.0 / 64.0);
        assert!(Bf16::from_f32(f32::NAN).to_f32().is_nan());
        assert_eq!(Bf16::from_f32(f32::INFINITY).to_f32(), f32::INFINITY);
        assert_eq!(pack_bf16x2(1.0, -2.0), 0xc000_3f80);
    }

    #[test]
    fn f16_round_trips_and_rounds() {
        for x in [0.0f32, 1.0, -1.5, 65504.0, 6.1035156e-5, 5.9604645e-8, -0.33325195] {
            assert_eq!(F16::from_f32(x).to_f32(), x, "{x}");
        }
        assert_eq!(F16::from_f32(1.0), F16::ONE);
        assert_eq!(F16::from_f32(70000.0).to_f32(), f32::INFINITY);
        assert_eq!(F16::from_f32(1.0 + 1.0 / 2048.0), F16::ONE); // tie to even
        assert!(F16::from_f32(f32::NAN).to_f32().is_nan());
    }
}
