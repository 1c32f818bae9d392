//! Held-out review of session 19 (audit/2026-11-28g/FINDINGS-review.md): G19R-2, on the GPU.
//!
//! `attention_backward_dkv_mma` (and `attention_backward_dq_mma`) are safe `#[kernel]`s of the
//! public crate `ferrocuda-kernels-device` whose `UncheckedSlice` writes rest on "block (tile,
//! b, h) owns rows `tile * 64 ..` of head (b, h)". The element index of a row is
//! `shape.row(b, h, s, ..) * d`, computed in `u64` from the `u32` fields of `AttentionShape`
//! without an overflow check (release device builds wrap), and `supported()` checks the launch's
//! shape but not that these products fit. With `[B, S, H, D]`, `heads = 2^31`, `d = 128`, row
//! `s = 2^26` of head 0 is element `2^26 * 2^31 * 128 = 2^64 = 0`: the first row of block 0's
//! tile, written by block `2^20` too (a write-write race between two blocks from safe code).
//! The host API (`attention_backward`) refuses such shapes (`Attention::check`: fewer than 2^26
//! rows); the device launchers take any `AttentionShape` the caller builds.
//!
//! Fixed: `supported()` also requires `batch * heads * seq * d` to fit in a `u64` for queries and
//! for keys, so such a shape does nothing (the test now checks that block 0's elements are the
//! same with and without block 2^20, and says whether the kernel wrote anything).
//!
//! Run: `REQUIRE_GPU=1 cargo test --release -p ferrocuda-kernels --test audit_g19r -- --include-ignored --nocapture`.

mod common;

use common::gpu;
use ferrocuda_host::{DeviceBuffer, LaunchConfig};
use ferrocuda_kernels_device::attention::{AttentionShape, LAYOUT_BSHD};

const D: u32 = 128;
/// Elements of every tensor buffer (only the first rows are in range: the others wrap or not).
const LEN: usize = 4096;

/// `[B, S, H, D]` with `2^31` heads: row `s` of head 0 starts at element `s * 2^38` (mod 2^64),
/// so row `2^26 + j` starts where row `j` does. `seq_kv = 2^26 + 64`: `2^20 + 1` key tiles.
fn shape() -> AttentionShape {
    AttentionShape { batch: 1, heads_q: 1 << 31, heads_kv: 1 << 31, seq_q: 16, seq_kv: (1 << 26) + 64, layout: LAYOUT_BSHD, causal: 1, scale: 0.125 }
}

/// dK and dV after one launch of `blocks` blocks of 128 threads (`None`: refused).
fn dkv(blocks: u32, context: &ferrocuda_host::Context, stream: &ferrocuda_host::Stream) -> Option<(Vec<f32>, Vec<f32>)> {
    let x: Vec<f32> = common::values(LEN, 19, 1.0).iter().map(|&v| v as f32).collect();
    let up = |v: &[f32]| DeviceBuffer::from_slice(context, v).unwrap();
    let (q, k, v, dout) = (up(&x), up(&x[1..].iter().chain(&x[..1]).copied().collect::<Vec<_>>()), up(&x), up(&x));
    let (lse, delta) = (up(&[0.0f32; 64]), up(&[0.0f32; 64]));
    let (mut dk, mut dv) = (up(&[0.0f32; LEN]), up(&[0.0f32; LEN]));
    let launched = ferrocuda_kernels_device::for_f32::attention_backward_dkv_mma::launch(
        stream,
        LaunchConfig::new(blocks, 128u32),
        &q,
        &k,
        &v,
        &dout,
        &lse,
        &delta,
        &mut dk,
        &mut dv,
        D,
        shape(),
    );
    stream.synchronize().unwrap();
    println!("{blocks} blocks: launch {launched:?}");
    launched.ok()?;
    Some((dk.to_vec().unwrap(), dv.to_vec().unwrap()))
}

/// Block `2^20` (keys `2^26 ..` of head 0) writes the elements of block 0's first key row. Sound:
/// the launch refused, or the extra block changes nothing that block 0 owns (the result of
/// `2^20 + 1` blocks equals that of `2^20` blocks, where block 0 alone owns those elements).
#[test]
fn g19r_2_attention_backward_dkv_mma_row_index_wrap_gives_two_blocks_one_element() {
    let Some((context, stream)) = gpu("g19r_2_attention_backward_dkv_mma_row_index_wrap_gives_two_blocks_one_element") else { return };
    let alone = dkv(1 << 20, &context, &stream);
    let with_alias = dkv((1 << 20) + 1, &context, &stream);
    let (Some((dk0, dv0)), Some((dk1, dv1))) = (&alone, &with_alias) else {
        println!("refused: sound ({:?} / {:?})", alone.is_some(), with_alias.is_some());
        return;
    };
    let nonzero = |x: &[f32]| x[..D as usize].iter().filter(|v| **v != 0.0).count();
    println!("block 0 alone: dK[0..4] = {:?}, dV[0..4] = {:?} ({} and {} of the row nonzero)", &dk0[..4], &dv0[..4], nonzero(dk0), nonzero(dv0));
    println!("with block 2^20: dK[0..4] = {:?}, dV[0..4] = {:?} ({} and {} nonzero)", &dk1[..4], &dv1[..4], nonzero(dk1), nonzero(dv1));
    if nonzero(dk0) + nonzero(dv0) == 0 {
        println!("the kernel wrote nothing for this shape (its product of sizes passes 2^64: refused inside, the fix)");
    }
    assert!(dk0 == dk1 && dv0 == dv1, "G19R-2: block 2^20 overwrote dK/dV row 0, which block 0 owns (row 2^26 * 2^31 heads * 128 wraps to element 0)");
}
