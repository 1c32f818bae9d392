//! The CPU body of the tensor-core intrinsics (the `mma` module of the device library): a warp's `mma.sync` computed
//! by each lane from the fragments of the whole warp, gathered with shuffles.

use std::cell::RefCell;
use std::collections::HashMap;

use super::hooks;

/// One warp's A and B fragments: six registers per lane.
type Fragments = [[u32; 6]; 32];

thread_local! {
    /// Per (block, warp) on this OS thread: the fragments of the `mma` in progress.
    static SLOTS: RefCell<HashMap<(usize, u32), Box<Fragments>>> = RefCell::new(HashMap::new());
}

/// `mma.sync.m16n8k16` on the host, with two warp collectives per call: each lane writes its
/// six fragment registers into a per-warp slot of a thread-local table, the warp
/// synchronises, every lane copies the table, and the warp synchronises again before any lane
/// can overwrite its slot in a later `mma`. (Gathering with one shuffle per register and
/// source lane took 192 collectives per `mma`; this scheme is hopper's, from its branch.) The
/// blocks of a cluster run interleaved on one OS thread, so slots are keyed by the block and
/// the warp. `element` converts a 16-bit input (f16 or bf16 bits) to f32, exactly.
#[track_caller]
pub(crate) fn mma_m16n8k16(a: [u32; 4], b: [u32; 2], c: [f32; 4], element: fn(u16) -> f32) -> [f32; 4] {
    let key = (hooks::block_identity(), hooks::rank() / 32);
    let lane = hooks::lane_id() as usize;
    SLOTS.with(|slots| slots.borrow_mut().entry(key).or_insert_with(|| Box::new([[0; 6]; 32]))[lane] = [a[0], a[1], a[2], a[3], b[0], b[1]]);
    hooks::warp_sync(u32::MAX);
    let all: Fragments = SLOTS.with(|slots| *slots.borrow()[&key]);
    hooks::warp_sync(u32::MAX);

    // Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16"), see the device library's `mma` module.
    let half = |word: u32, k: usize| element(if k.is_multiple_of(2) { word as u16 } else { (word >> 16) as u16 });
    let a_at = |row: usize, k: usize| half(all[(row % 8) * 4 + (k % 8) / 2][(row / 8) + 2 * (k / 8)], k);
    let b_at = |k: usize, col: usize| half(all[col * 4 + (k % 8) / 2][4 + k / 8], k);
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
