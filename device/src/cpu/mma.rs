//! The CPU body of the tensor-core intrinsics (the `mma` module of the device library): a warp's `mma.sync` computed
//! by each lane from the fragments of the whole warp, gathered with shuffles.

use super::hooks;

/// `mma.sync.m16n8k16` on the host: each lane gathers the whole A and B tiles from the warp's
/// fragments (one shuffle per register and source lane), then computes its own D fragment.
/// `element` converts a 16-bit input (f16 or bf16 bits) to f32, exactly.
#[track_caller]
pub(crate) fn mma_m16n8k16(a: [u32; 4], b: [u32; 2], c: [f32; 4], element: fn(u16) -> f32) -> [f32; 4] {
    let mut a_all = [[0u32; 4]; 32];
    let mut b_all = [[0u32; 2]; 32];
    for source in 0..32 {
        for (r, value) in a.iter().enumerate() {
            a_all[source as usize][r] = hooks::warp_shuffle(*value, source);
        }
        for (r, value) in b.iter().enumerate() {
            b_all[source as usize][r] = hooks::warp_shuffle(*value, source);
        }
    }
    // Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16"), see the device library's `mma` module.
    let half = |word: u32, k: usize| element(if k.is_multiple_of(2) { word as u16 } else { (word >> 16) as u16 });
    let a_at = |row: usize, k: usize| half(a_all[(row % 8) * 4 + (k % 8) / 2][(row / 8) + 2 * (k / 8)], k);
    let b_at = |k: usize, col: usize| half(b_all[col * 4 + (k % 8) / 2][k / 8], k);
    let lane = hooks::lane_id() as usize;
    let (group, pair) = (lane / 4, lane % 4);
    let places = [(group, 2 * pair), (group, 2 * pair + 1), (group + 8, 2 * pair), (group + 8, 2 * pair + 1)];
    let mut d = c;
    for (out, (row, col)) in d.iter_mut().zip(places) {
        for k in 0..16 {
            *out += a_at(row, k) * b_at(k, col);
        }
    }
    d
}

/// IEEE binary16 bits to f32 (exact).
pub(crate) fn f16_to_f32(bits: u16) -> f32 {
    let sign = if bits & 0x8000 != 0 { -1.0f32 } else { 1.0 };
    let exponent = ((bits >> 10) & 0x1f) as i32;
    let mantissa = (bits & 0x3ff) as f32;
    sign * match exponent {
        0 => mantissa * 2f32.powi(-24),
        31 if mantissa == 0.0 => f32::INFINITY,
        31 => f32::NAN,
        e => (1.0 + mantissa / 1024.0) * 2f32.powi(e - 15),
    }
}

/// bfloat16 bits to f32 (exact: bf16 is the top half of an f32).
pub(crate) fn bf16_to_f32(bits: u16) -> f32 {
    f32::from_bits((bits as u32) << 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sixteen_bit_floats_widen_exactly() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc100), -2.5);
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24), "smallest subnormal");
        assert_eq!(f16_to_f32(0x7bff), 65504.0, "largest finite");
        assert_eq!(f16_to_f32(0xfc00), f32::NEG_INFINITY);
        assert!(f16_to_f32(0x7e00).is_nan());
        assert_eq!(bf16_to_f32(0x3fc0), 1.5);
    }
}
