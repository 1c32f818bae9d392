//! The software twins of the GPU's 16-bit float instructions: what the host and the CPU
//! executor run, and what GPUs without an instruction run instead. Host code can call them
//! for a reference that matches the GPU bit for bit (NaN payloads aside).
//!
//! Single conversions are `half`'s (round to nearest, ties to even). The fused multiply-add
//! `a * b + c` must round once: the product of two 16-bit floats is exact in `f64`, the sum is
//! made exact-or-odd ("round to odd", one ulp step from `f64`'s rounding, told by the exact
//! error of the addition) and narrowed to `f32` the same way, and only then rounded to nearest
//! into 16 bits. Rounding to odd at 2 or more bits beyond the target precision and then to
//! nearest gives the correctly rounded result (Boldo and Melquiond, "When double rounding is
//! odd", 2005); `f64` and `f32` carry 53 and 24 bits against bf16's 8 and f16's 11, in the
//! subnormal ranges too.

use ::half::{bf16, f16};

/// `value` rounded to the nearest bf16, ties to even (`cvt.rn.bf16.f32`).
#[inline]
pub fn bf16_from_f32(value: f32) -> bf16 {
    bf16::from_f32(value)
}

/// `value` rounded to the nearest f16, ties to even; overflow gives infinity
/// (`cvt.rn.f16.f32`).
#[inline]
pub fn f16_from_f32(value: f32) -> f16 {
    f16::from_f32(value)
}

/// The exact `f32` value of `value` (`cvt.f32.f16`).
#[inline]
pub fn f16_to_f32(value: f16) -> f32 {
    value.to_f32()
}

/// `a * b + c` rounded once to the nearest bf16 (`fma.rn.bf16`).
pub fn fma_bf16(a: bf16, b: bf16, c: bf16) -> bf16 {
    bf16::from_f32(fma_round_to_odd(a.to_f32(), b.to_f32(), c.to_f32()))
}

/// `a * b + c` rounded once to the nearest f16 (`fma.rn.f16`).
pub fn fma_f16(a: f16, b: f16, c: f16) -> f16 {
    f16::from_f32(fma_round_to_odd(a.to_f32(), b.to_f32(), c.to_f32()))
}

/// `a * b + c` rounded to `f32` by rounding to odd, for operands whose significands have at
/// most 11 bits (the widened 16-bit floats): their product is exact in `f64`.
fn fma_round_to_odd(a: f32, b: f32, c: f32) -> f32 {
    let product = a as f64 * b as f64;
    let c = c as f64;
    let sum = product + c;
    if !sum.is_finite() {
        // An infinite or NaN operand (finite ones stay below 2^257): no rounding happens.
        return sum as f32;
    }
    // Knuth's TwoSum: `product + c == sum + error` exactly (no overflow at these magnitudes).
    let virtual_c = sum - product;
    let error = (product - (sum - virtual_c)) + (c - virtual_c);
    let sum_odd = if error == 0.0 || sum.to_bits() & 1 == 1 { sum } else { step_f64(sum, (sum > 0.0) == (error > 0.0)) };
    let narrow = sum_odd as f32;
    if narrow as f64 == sum_odd || narrow.to_bits() & 1 == 1 {
        return narrow;
    }
    if narrow.is_infinite() {
        // Past f32's range: the largest finite f32 (odd) still rounds to infinity in 16 bits.
        return f32::MAX.copysign(narrow);
    }
    step_f32(narrow, sum_odd.abs() > (narrow as f64).abs())
}

/// The neighbour of `x` one ulp away from zero (`away`) or towards it (never crossing zero:
/// `x` is not zero when `away` is false).
fn step_f64(x: f64, away: bool) -> f64 {
    f64::from_bits(if away { x.to_bits() + 1 } else { x.to_bits() - 1 })
}

/// As [`step_f64`] for `f32` (a zero steps to the smallest subnormal of its sign).
fn step_f32(x: f32, away: bool) -> f32 {
    f32::from_bits(if away { x.to_bits() + 1 } else { x.to_bits() - 1 })
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    //! An oracle that shares no code with the twins: a result is correct when it is at least
    //! as near the exact value as both its neighbours, the even one winning a tie.

    use super::*;

    /// `m * 2^e`, exactly.
    #[derive(Clone, Copy, Debug)]
    struct Exact(i128, i32);

    impl Exact {
        /// A finite `f64`, with trailing zero bits dropped so that products stay small.
        fn of(x: f64) -> Exact {
            if x == 0.0 {
                return Exact(0, 0);
            }
            let bits = x.to_bits();
            let exponent = ((bits >> 52) & 0x7ff) as i32;
            let (mut m, mut e) =
                if exponent == 0 { ((bits & ((1 << 52) - 1)) as i128, -1074) } else { (((bits & ((1 << 52) - 1)) | (1 << 52)) as i128, exponent - 1075) };
            while m & 1 == 0 {
                m >>= 1;
                e += 1;
            }
            Exact(if x < 0.0 { -m } else { m }, e)
        }
        fn at(self, e: i32) -> i128 {
            self.0 << (self.1 - e)
        }
        fn add(self, other: Exact) -> Exact {
            let e = self.1.min(other.1);
            Exact(self.at(e) + other.at(e), e)
        }
        fn mul(self, other: Exact) -> Exact {
            Exact(self.0 * other.0, self.1 + other.1)
        }
        fn distance(self, other: Exact) -> Exact {
            let e = self.1.min(other.1);
            Exact((self.at(e) - other.at(e)).abs(), e)
        }
        fn cmp(self, other: Exact) -> core::cmp::Ordering {
            let e = self.1.min(other.1);
            self.at(e).cmp(&other.at(e))
        }
    }

    /// Checks that the 16-bit `got` is the nearest finite value to `exact`, ties to even.
    fn assert_nearest(got: u16, exact: Exact, value: impl Fn(u16) -> f64, max_finite: u16, what: &str) {
        let key = |bits: u16| if bits & 0x8000 != 0 { -((bits & 0x7fff) as i32) } else { (bits & 0x7fff) as i32 };
        let bits_of = |key: i32| if key < 0 { 0x8000 | (-key) as u16 } else { key as u16 };
        assert!(got & 0x7fff <= max_finite, "{what}: {got:#06x} is not finite");
        let mine = Exact::of(value(got)).distance(exact);
        for neighbour in [key(got) - 1, key(got) + 1] {
            if neighbour.unsigned_abs() > max_finite as u32 {
                continue;
            }
            let theirs = Exact::of(value(bits_of(neighbour))).distance(exact);
            let order = mine.cmp(theirs);
            assert!(order.is_lt() || (order.is_eq() && got & 1 == 0), "{what}: {got:#06x} is not the nearest ({:#06x} is as near)", bits_of(neighbour));
        }
    }

    /// xorshift64: reproducible inputs.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    #[test]
    fn f16_fma_is_correctly_rounded_over_the_whole_range() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let f16_value = |bits: u16| f16::from_bits(bits).to_f64();
        let mut checked = 0;
        while checked < 20_000 {
            let r = rng.next();
            let (a, b, c) = (f16::from_bits(r as u16), f16::from_bits((r >> 16) as u16), f16::from_bits((r >> 32) as u16));
            if !(a.is_finite() && b.is_finite() && c.is_finite()) {
                continue;
            }
            let exact = Exact::of(a.to_f64()).mul(Exact::of(b.to_f64())).add(Exact::of(c.to_f64()));
            let got = fma_f16(a, b, c);
            if got.is_infinite() {
                // Overflow: the exact value is at least the largest finite plus half an ulp.
                assert!(Exact(exact.0.abs(), exact.1).cmp(Exact::of(65520.0)).is_ge(), "{a} * {b} + {c} overflowed");
            } else if got.to_f64() == 0.0 {
                assert!(Exact(exact.0.abs(), exact.1).cmp(Exact::of(2f64.powi(-25))).is_le(), "{a} * {b} + {c} gave zero");
            } else {
                assert_nearest(got.to_bits(), exact, f16_value, 0x7bff, &format!("{a} * {b} + {c}"));
            }
            checked += 1;
        }
    }

    #[test]
    fn bf16_fma_is_correctly_rounded_near_one_and_among_subnormals() {
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        let bf16_value = |bits: u16| bf16::from_bits(bits).to_f64();
        // A bf16 with a random sign and mantissa and an exponent within `spread` of `center`.
        let mut pick = |center: i32, spread: u64| {
            let r = rng.next();
            let exponent = (center + (r % (2 * spread + 1)) as i32 - spread as i32).clamp(0, 254) as u16;
            bf16::from_bits(((r >> 16) as u16 & 0x807f) | (exponent << 7))
        };
        for case in 0..20_000 {
            // Half the cases near 1, half with a product in the subnormal range (2^-126 and
            // below) and an addend there too.
            let (a, b, c) = if case % 2 == 0 { (pick(127, 12), pick(127, 12), pick(127, 24)) } else { (pick(127 - 63, 4), pick(127 - 64, 4), pick(0, 3)) };
            let exact = Exact::of(a.to_f64()).mul(Exact::of(b.to_f64())).add(Exact::of(c.to_f64()));
            let got = fma_bf16(a, b, c);
            if got.to_f64() == 0.0 {
                assert!(Exact(exact.0.abs(), exact.1).cmp(Exact::of(2f64.powi(-134))).is_le(), "{a:e} * {b:e} + {c:e} gave zero");
            } else {
                assert_nearest(got.to_bits(), exact, bf16_value, 0x7f7f, &format!("{a:e} * {b:e} + {c:e}"));
            }
        }
    }

    #[test]
    fn fma_edge_cases() {
        let h = f16::from_f32;
        // Ties: 1 + 2^-11 is halfway between 1 and 1 + 2^-10; even wins.
        assert_eq!(fma_f16(h(1.0), h(1.0), h(2f32.powi(-11))), h(1.0));
        // One rounding, not two: (1 + 2^-10)^2 = 1 + 2^-9 + 2^-20. Rounding the product first
        // loses the 2^-20, so minus (1 + 2^-9) would give 0; fused, it gives 2^-20.
        let x = h(1.0 + 2f32.powi(-10));
        assert_eq!(fma_f16(x, x, h(-(1.0 + 2f32.powi(-9)))).to_f32(), 2f32.powi(-20));
        // A tie plus a tiny addend must round up: 1.5 * 683 = 1024.5 is halfway between 1024
        // and 1025, and 2^-24 (below f32's precision there) breaks the tie. Rounding the sum
        // to f32 first would drop it and round to even (1024).
        assert_eq!(fma_f16(h(1.5), h(683.0), h(2f32.powi(-24))).to_f32(), 1025.0);
        assert_eq!(fma_f16(h(1.5), h(683.0), h(0.0)).to_f32(), 1024.0);
        // Signed zeros, as IEEE round-to-nearest: x - x is +0, (-0) * 1 + (-0) is -0.
        assert_eq!(fma_f16(h(1.0), h(1.0), h(-1.0)).to_bits(), 0x0000);
        assert_eq!(fma_f16(h(-0.0), h(1.0), h(-0.0)).to_bits(), 0x8000);
        // Overflow and the infinities.
        assert_eq!(fma_f16(h(256.0), h(256.0), h(0.0)), f16::INFINITY);
        assert_eq!(fma_f16(h(65504.0), h(1.0), h(-65504.0)).to_bits(), 0);
        assert!(fma_f16(f16::INFINITY, h(0.0), h(1.0)).is_nan());
        assert!(fma_f16(f16::INFINITY, h(1.0), f16::NEG_INFINITY).is_nan());
        assert_eq!(fma_bf16(bf16::INFINITY, bf16::ONE, bf16::ONE), bf16::INFINITY);
        // bf16's range is f32's: a product past f32's largest value overflows to infinity
        // (the round-to-odd step must not wrap to NaN).
        let big = bf16::from_f32(2f32.powi(100));
        assert_eq!(fma_bf16(big, big, bf16::ONE), bf16::INFINITY);
        assert_eq!(fma_bf16(big, -big, bf16::ONE), bf16::NEG_INFINITY);
        // Tiny: 2^-100 * 2^-100 is below half the smallest subnormal (2^-134): +0 / -0.
        let tiny = bf16::from_f32(2f32.powi(-100));
        assert_eq!(fma_bf16(tiny, tiny, bf16::ZERO).to_bits(), 0x0000);
        assert_eq!(fma_bf16(tiny, -tiny, bf16::NEG_ZERO).to_bits(), 0x8000);
    }

    #[test]
    fn conversions_round_to_nearest_even() {
        let mut rng = Rng(0x1234_5678_9abc_def1);
        for _ in 0..100_000 {
            let x = f32::from_bits(rng.next() as u32);
            if !x.is_finite() {
                continue;
            }
            // An f32 and a nearby 16-bit value differ by an amount exact in f64.
            let bf = bf16_from_f32(x);
            if bf.is_finite() {
                let d = |b: bf16| (b.to_f64() - x as f64).abs();
                let (down, up) = (bf16::from_bits(bf.to_bits().wrapping_sub(1)), bf16::from_bits(bf.to_bits() + 1));
                for n in [down, up] {
                    if n.is_finite() && n.to_bits() & 0x7fff != 0x7fff {
                        assert!(d(bf) < d(n) || (d(bf) == d(n) && bf.to_bits() & 1 == 0), "{x:e} -> {bf:e}, but {n:e}");
                    }
                }
            } else {
                assert!(x.abs() >= bf16::MAX.to_f32() + 2f32.powi(127 - 8), "{x:e} overflowed");
            }
            let h = f16_from_f32(x);
            if h.is_finite() && x.abs() < 65504.0 {
                let d = |b: f16| (b.to_f64() - x as f64).abs();
                let (down, up) = (f16::from_bits(h.to_bits().wrapping_sub(1)), f16::from_bits(h.to_bits() + 1));
                for n in [down, up] {
                    if n.is_finite() && n.to_bits() & 0x8000 == h.to_bits() & 0x8000 && h.to_bits() & 0x7fff != 0 {
                        assert!(d(h) < d(n) || (d(h) == d(n) && h.to_bits() & 1 == 0), "{x:e} -> {h:e}, but {n:e}");
                    }
                }
            }
            assert_eq!(f16_to_f32(h) as f64, h.to_f64());
        }
        assert_eq!(f16_from_f32(65520.0), f16::INFINITY, "the first f32 past f16's range rounds up");
        assert_eq!(f16_from_f32(65519.996), f16::MAX);
        assert!(bf16_from_f32(f32::NAN).is_nan() && f16_from_f32(f32::NAN).is_nan());
    }
}
