//! `mma.sync.m16n8k16` on the CPU executor, with two warp collectives per call.
//!
//! Each lane needs the whole warp's A and B fragments. Gathering them with one shuffle per
//! register and source lane took 192 collectives (each a pass of the executor's scheduler)
//! per `mma`, so a 256³ GEMM checked in 14-33 s. Here each lane writes its 6 registers into a
//! per-warp slot of a thread-local table, the warp synchronises, every lane copies the table,
//! and the warp synchronises again before any lane can overwrite its slot in a later `mma`.
//! The blocks of a cluster run interleaved on one OS thread, so slots are keyed by the block
//! (its executor context's address) and the warp.

use std::cell::RefCell;
use std::collections::HashMap;

use crate::cpu::block::BlockContext;

type Fragments = [[u32; 6]; 32];

thread_local! {
    static SLOTS: RefCell<HashMap<(usize, u32), Box<Fragments>>> = RefCell::new(HashMap::new());
}

/// The calling lane's D fragment of `D = A·B + C` (layouts in `crate::mma`); `element` widens
/// a 16-bit input (f16 or bf16 bits) to f32 exactly.
#[track_caller]
pub(crate) fn mma_m16n8k16(a: [u32; 4], b: [u32; 2], c: [f32; 4], element: fn(u16) -> f32) -> [f32; 4] {
    let Some(block) = BlockContext::current() else {
        panic!("`mma` only has a value inside a kernel (on a GPU, or run by the CPU executor)");
    };
    let key = (block as *const BlockContext<'_> as usize, block.current_rank() / 32);
    let lane = crate::emu::lane_id() as usize;
    SLOTS.with(|slots| slots.borrow_mut().entry(key).or_insert_with(|| Box::new([[0; 6]; 32]))[lane] = [a[0], a[1], a[2], a[3], b[0], b[1]]);
    crate::emu::warp_sync(crate::warp::FULL_MASK);
    let all: Fragments = SLOTS.with(|slots| *slots.borrow()[&key]);
    crate::emu::warp_sync(crate::warp::FULL_MASK);

    // Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16"), see `crate::mma`.
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
