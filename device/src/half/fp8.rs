//! FP8 E4M3 (OCP `e4m3fn`: 4 exponent bits, 3 mantissa bits, no infinities, one NaN per sign)
//! from `f32`: CUDA's `__nv_cvt_float2_to_fp8x2(v, __NV_SATFINITE, __NV_E4M3)`, and the value
//! `static_cast<c10::Float8_e4m3fn>(x)` gives for a clamped `x` (vLLM's FP8 quantisers clamp
//! to `±448` first).
//!
//! Why (issue 30's third held-out port): without it, a porter writes c10's bit-twiddling
//! conversion by hand; in vLLM's `dynamic_per_token_scaled_fp8_quant_kernel` that took 54
//! registers (nvcc: 32), half the occupancy, 0.84x nvcc. On sm_89+ a pair is one
//! `cvt.rn.satfinite.e4m3x2.f32` (`F2FP.SATFINITE.E4M3.F32.PACK_AB`); elsewhere (and on the
//! CPU executor) the same rounding in software.
//!
//! **Which one a kernel gets is the device build's architecture, not the GPU's**, as with
//! nvcc (`cuda_fp8.hpp` picks the instruction under `__CUDA_ARCH__ >= 890`): the kernel-crate
//! template builds sm_75 PTX by default, which the driver JIT-compiles for an H100 or H200
//! with the software rounding in it (the same bits, a branchy integer sequence a value instead
//! of one instruction a pair), and the build says nothing. For the instruction, build for
//! Hopper: `.arch(Arch::SM_90)` in the crate's `build.rs` (issue 30's eighth port found
//! `scaled_fp8_quant_kernel` software-rounded on an H200 under the default).
//!
//! | input | result |
//! |---|---|
//! | finite, `|x| <= 448` | nearest E4M3 value, ties to even (c10's `fp8e4m3fn_from_fp32_value`, bit for bit) |
//! | finite, `|x| > 448` | `±448` (`0x7e`, saturated: c10 gives NaN from 464 up, since it does not saturate) |
//! | `±inf` | `±448` |
//! | NaN | `0x7f` (NaN) |

/// `x` as FP8 E4M3 (bits), rounded to nearest even, saturated to `±448` (see the module
/// docs). One `cvt.rn.satfinite.e4m3x2.f32` on sm_89+ (for a pair, use [`e4m3x2`]).
#[inline(always)]
pub fn e4m3(x: f32) -> u8 {
    e4m3x2(x, 0.0)[0]
}

/// `[lo, hi]` as FP8 E4M3 (bits, `lo` at the lower address), each rounded to nearest even and
/// saturated to `±448`: one `cvt.rn.satfinite.e4m3x2.f32` when the device build targets sm_89+
/// (`.arch(Arch::SM_90)`; the template's default sm_75 build gets the software
/// rounding even on an H200: module docs), CUDA's
/// `__nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3)`.
#[inline(always)]
pub fn e4m3x2(lo: f32, hi: f32) -> [u8; 2] {
    #[cfg(all(target_arch = "nvptx64", ferrocuda_sm = "89"))]
    {
        let d: u16;
        // SAFETY: a register-only conversion. PTX packs its first source into the upper byte.
        unsafe {
            core::arch::asm!(
                "cvt.rn.satfinite.e4m3x2.f32 {d}, {a}, {b};",
                d = out(reg16) d, a = in(reg32) hi, b = in(reg32) lo, options(pure, nomem, nostack, preserves_flags)
            )
        };
        d.to_le_bytes()
    }
    #[cfg(not(all(target_arch = "nvptx64", ferrocuda_sm = "89")))]
    [e4m3_soft(lo), e4m3_soft(hi)]
}

/// The software conversion: c10's rounding (round to nearest even through the float adder for
/// subnormals, an integer bias for normals), saturating instead of giving NaN above 448.
#[inline(always)]
pub fn e4m3_soft(x: f32) -> u8 {
    let bits = x.to_bits();
    let sign = ((bits >> 24) & 0x80) as u8;
    let abs = bits & 0x7fff_ffff;
    if abs > 0x7f80_0000 {
        return 0x7f | sign; // NaN
    }
    if abs > 448.0f32.to_bits() {
        return 0x7e | sign; // saturated (inf too)
    }
    let magnitude = if abs < (121 << 23) {
        // Below 2^-6, the smallest normal: add 2^-(6+3-1)·(1 + ..) to round at the subnormal
        // step through the float adder, as c10 does (denorm_mask: (127 - 7 + 23 - 3 + 1) << 23).
        let denorm_mask: u32 = 141 << 23;
        (f32::from_bits(abs) + f32::from_bits(denorm_mask)).to_bits().wrapping_sub(denorm_mask) as u8
    } else {
        let mant_odd = (abs >> 20) & 1;
        (abs.wrapping_add((7u32.wrapping_sub(127) << 23).wrapping_add(0x7ffff)).wrapping_add(mant_odd) >> 20) as u8
    };
    magnitude | sign
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(b: u8) -> f32 {
        let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
        let (e, m) = (((b >> 3) & 0xf) as i32, (b & 7) as f32);
        if e == 0 { sign * m / 8.0 * 2f32.powi(-6) } else { sign * (1.0 + m / 8.0) * 2f32.powi(e - 7) }
    }

    /// Against a brute-force nearest-even search over every finite E4M3 value.
    #[test]
    fn p30_fp8_e4m3_rounds_to_nearest_even_and_saturates() {
        let finite: Vec<u8> = (0..=0xffu8).filter(|b| b & 0x7f != 0x7f).collect();
        let nearest = |x: f32| -> u8 {
            let x = x.clamp(-448.0, 448.0);
            let mut best = (f32::INFINITY, 0u8);
            for &b in &finite {
                let d = (value(b) - x).abs();
                if d < best.0 || (d == best.0 && b & 1 == 0 && best.1 & 1 == 1) {
                    best = (d, b);
                }
            }
            // ±0: keep the sign of the input.
            if value(best.1) == 0.0 { if x.is_sign_negative() { 0x80 } else { 0 } } else { best.1 }
        };
        let mut x = 1e-5f32;
        while x < 1000.0 {
            for v in [x, -x, x * 1.0001, x * 0.9999] {
                assert_eq!(e4m3_soft(v), nearest(v), "{v}");
            }
            x *= 1.013;
        }
        for b in finite {
            assert_eq!(e4m3_soft(value(b)), b, "exact value {}", value(b));
        }
        assert_eq!(e4m3_soft(f32::NAN) & 0x7f, 0x7f);
        assert_eq!(e4m3_soft(f32::INFINITY), 0x7e);
        assert_eq!(e4m3_soft(f32::NEG_INFINITY), 0xfe);
        assert_eq!(e4m3_soft(500.0), 0x7e);
        assert_eq!(e4m3x2(1.0, -2.0), [e4m3_soft(1.0), e4m3_soft(-2.0)]);
    }
}
