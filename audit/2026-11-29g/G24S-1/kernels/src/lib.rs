//! G24S-1: `DisjointSlice<T, PermutedRows>::row_mut` computes a row's first element as
//! `row * cols` in `u64`, assuming `row < 2^32` ("no overflow in u64"). But `row` reaches
//! almost `2^33` (`q a b + y a + x` with `q a b <= i` and `y a + x < a b`), so with `cols`
//! near `2^31..2^32` the product wraps (release device builds have no overflow checks), the
//! wrapped start passes the bounds check, and a thread near index `2^32` gets a `&mut [u8]`
//! over thread 0's row. Safe code only.

#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]

use ferrocuda_device::global::{DisjointSlice, PermutedRows, unique_index};
use ferrocuda_device::prelude::*;

ferrocuda_device::embed_kernels!();

/// Thread 0 (row 0) writes 1 at element `probe` of its row; the thread whose row wrapped
/// writes 2 at element 0 of its row and 3 at element 1: if its row is thread 0's memory, the
/// host reads 2 or 1 at `probe` (a write-write race) and 3 at `probe + 1`, inside row 0.
#[kernel(cols(att = (cols, a, b)))]
pub fn g24s1_wrapped_row(mut att: DisjointSlice<u8, PermutedRows>, cols: u32, a: u32, b: u32, probe: u32) {
    let _ = (cols, a, b);
    let Some((at, row)) = att.row_mut(unique_index()) else { return };
    if at.row == 0 {
        row[probe as usize] = 1;
    } else {
        row[0] = 2;
        row[1] = 3;
    }
}

/// G24S-2: the layout word the host checks against the device's holds a `cols(..)` triple's
/// constant widths as `cols | a << 32 | b.rotate_left(16)`, an OR that two triples share:
/// `(4, 1, 65536)` and `(4, 0, 65536)` are both `4 | 1 << 32`. A `cfg`-chosen radix then gives
/// the host build `a = 1` (its launch check passes) and the device build `a = 0`, which
/// `permuted` assumes away (`assert_unchecked(group != 0)`): undefined behaviour from safe code.
pub const RADIX_A: u32 = if cfg!(target_arch = "nvptx64") { 0 } else { 1 };

/// Every thread takes its row and writes its index's low byte at element 0.
#[kernel(cols(att = (4, RADIX_A, 65536)))]
pub fn g24s2_radix_by_cfg(mut att: DisjointSlice<u8, PermutedRows>) {
    let Some((at, row)) = att.row_mut(unique_index()) else { return };
    row[0] = at.row as u8 | 1;
}
