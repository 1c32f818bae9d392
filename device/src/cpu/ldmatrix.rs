//! The CPU body of `ldmatrix`/`stmatrix` (the `ldmatrix` module of the device library): the
//! warp's row addresses gathered through a per-warp slot, then each lane moves its own
//! fragment registers through the block's shared memory.

use std::cell::RefCell;
use std::collections::HashMap;

use super::hooks;

thread_local! {
    /// Per (block, warp) on this OS thread: the row addresses of the collective in progress.
    static ROWS: RefCell<HashMap<(usize, u32), [u32; 32]>> = RefCell::new(HashMap::new());
}

/// Which of the three instructions runs.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// `ldmatrix.sync.aligned.m8n8.x4.shared.b16`.
    Load,
    /// `ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16`.
    LoadTrans,
    /// `stmatrix.sync.aligned.m8n8.x4.shared.b16` of these registers.
    Store([u32; 4]),
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Load => "ldmatrix.x4",
            Op::LoadTrans => "ldmatrix.x4.trans",
            Op::Store(_) => "stmatrix.x4",
        }
    }
}

/// One lane's part of an `x4` `ldmatrix`/`stmatrix` (PTX ISA, "Warp-level matrix load
/// instruction: ldmatrix"): lanes `8i..8i+7` give the row addresses of matrix `i`; register
/// `r` of lane `l` is row `l / 4`, elements `2(l % 4)` (low half) and `+1` (high half) of
/// matrix `r` (of the transposed matrix for `.trans`). Two warp collectives: a ballot after
/// each lane wrote its row address into its warp's slot (every one of the 32 lanes must be
/// there, or this panics saying which were), and a `sync_warp` after the lane's shared-memory
/// accesses, before any lane can overwrite its slot in a later call. The accesses are the
/// lane's own ordinary loads and stores, so the race detector sees them.
#[track_caller]
pub(crate) fn matrix_x4(row: u32, op: Op) -> [u32; 4] {
    let key = (hooks::block_identity(), hooks::rank() / 32);
    let lane = hooks::lane_id();
    let name = op.name();
    assert!(row.is_multiple_of(16), "{name}: lane {lane} of warp {} passed row address {row:#x}, which is not 16-byte aligned", key.1);
    ROWS.with(|rows| rows.borrow_mut().entry(key).or_insert([0; 32])[lane as usize] = row);
    let present = hooks::warp_ballot(true);
    assert!(
        present == u32::MAX,
        "{name} is a collective of all 32 lanes of a warp, but only lanes {present:#010x} of warp {} took part (the others have exited, or the block's last warp is partial); \
         have every lane of the warp execute it",
        key.1
    );
    let rows = ROWS.with(|rows| rows.borrow()[&key]);
    let (group, pair) = (lane / 4, lane % 4);
    let mut out = [0u32; 4];
    for (r, reg) in out.iter_mut().enumerate() {
        let matrix = &rows[8 * r..8 * r + 8];
        // SAFETY: `u16`/`u32` are valid for every bit pattern; the address is checked by the hook.
        unsafe {
            match op {
                Op::Load => *reg = hooks::shared_load::<u32>(matrix[group as usize] + 4 * pair),
                Op::LoadTrans => {
                    let low = hooks::shared_load::<u16>(matrix[2 * pair as usize] + 2 * group);
                    let high = hooks::shared_load::<u16>(matrix[2 * pair as usize + 1] + 2 * group);
                    *reg = low as u32 | (high as u32) << 16;
                }
                Op::Store(value) => hooks::shared_store::<u32>(matrix[group as usize] + 4 * pair, value[r]),
            }
        }
    }
    hooks::warp_sync(u32::MAX);
    out
}
