//! The Hopper attention kernel run by the CPU executor, with the Hopper instructions emulated
//! (`ferrocuda_device::hopper::emu`: TMA into the 128-byte swizzle, mbarrier phases, `wgmma`
//! with A from shared memory and from registers, B K-major and N-major): the pipeline, the
//! descriptors, the accumulator-to-operand conversion, the masks of the last key tile and of
//! the causal diagonal, the online softmax and the epilogue's indexing, checked against an f64
//! reference on every output without a GPU.

use ferrocuda_device::cpu::CpuExecutor;
use ferrocuda_device::half::bf16;
use ferrocuda_device::tma::TensorMap as DeviceMap;
use ferrocuda_host::{LaunchConfig, TensorDataType, TensorMap, TensorSwizzle, TiledLayout};
use hopper_kernels::attention::{
    BM, BOX, THREADS, attention_body, attention_body_persistent, attention_body_persistent_chain, attention_body_persistent_q2,
    attention_body_persistent_staged, attention_body_persistent_with, attention_body_with, reference_row, shared_bytes, shared_bytes_ostage, shared_bytes_q2,
    within_bound,
};

fn random_bf16(len: usize, mut seed: u64) -> Vec<bf16> {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            bf16::from_f32(((seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0)
        })
        .collect()
}

/// A 3-D map `[D, seq_len, heads]` of a packed bf16 array, as the host launcher builds it.
fn map(data: &[bf16], d: u32, seq_len: u32, heads: u32) -> Box<DeviceMap> {
    let dims = [d as u64, seq_len as u64, heads as u64];
    let strides = [d as u64 * 2, d as u64 * seq_len as u64 * 2];
    let layout = TiledLayout { data_type: TensorDataType::Bf16, dims: &dims, strides_bytes: &strides, box_dims: &BOX, swizzle: TensorSwizzle::B128 };
    Box::new(DeviceMap(TensorMap::emulated(data.as_ptr() as u64, &layout).unwrap().words()))
}

/// How the consumers schedule their tensor-core work (the kernel's `OVERLAP`, `PINGPONG`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Schedule {
    overlap: bool,
    pingpong: bool,
    stages: u32,
}

const SCHEDULES: [Schedule; 5] = [
    Schedule { overlap: false, pingpong: false, stages: 2 },
    Schedule { overlap: true, pingpong: false, stages: 2 },
    Schedule { overlap: true, pingpong: true, stages: 2 },
    Schedule { overlap: true, pingpong: false, stages: 3 },
    Schedule { overlap: true, pingpong: true, stages: 3 },
];

/// Runs one variant on the CPU executor and checks every O element and LSE against the f64
/// reference (bounds in `within_bound`); returns the worst error / bound.
fn check(d: u32, causal: bool, schedule: Schedule, seq_len: u32, heads: u32) -> f64 {
    check_on(d, causal, schedule, seq_len, heads, None)
}

/// [`check`], or with `Some(blocks)` the persistent form of the schedule (`overlap` only) on
/// that many blocks, each taking query tiles from the shared counter until all are done.
fn check_on(d: u32, causal: bool, schedule: Schedule, seq_len: u32, heads: u32, persistent: Option<u32>) -> f64 {
    check_poly(d, causal, schedule, seq_len, heads, persistent, 0)
}

/// [`check_on`] with `poly` of the 16 column pairs of each score row through `exp2_poly` (the
/// `_poly` kernels' bodies: `attention_body_with`, `attention_body_persistent_with`).
fn check_poly(d: u32, causal: bool, schedule: Schedule, seq_len: u32, heads: u32, persistent: Option<u32>, poly: u32) -> f64 {
    check_all(d, causal, schedule, seq_len, heads, persistent, poly, false)
}

/// [`check_poly`], or with `q2` (persistent, `poly` 0) the persistent kernels with two Q
/// buffers (`attention_body_persistent_q2`).
#[allow(clippy::too_many_arguments)]
fn check_all(d: u32, causal: bool, schedule: Schedule, seq_len: u32, heads: u32, persistent: Option<u32>, poly: u32, q2: bool) -> f64 {
    check_chain(d, causal, schedule, seq_len, heads, persistent, poly, q2, false)
}

/// [`check_all`], or with `chain` (persistent, `poly` 0) the chained persistent kernels
/// (`attention_body_persistent_chain`, one or two Q buffers as `q2` says).
#[allow(clippy::too_many_arguments)]
fn check_chain(d: u32, causal: bool, schedule: Schedule, seq_len: u32, heads: u32, persistent: Option<u32>, poly: u32, q2: bool, chain: bool) -> f64 {
    check_staged(d, causal, schedule, seq_len, heads, persistent, poly, q2, chain, None, 0)
}

/// 16 bytes, 16-byte aligned: O's storage in [`check_staged`].
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct Words4([u32; 4]);

/// [`check_chain`], or with `staged` (`chain`, one Q buffer) the chained kernels writing O
/// through shared memory (`attention_body_persistent_staged`: `Some(false)` the `_ostg`
/// body, `Some(true)` the `_obulk` one), O starting `o_shift` words (4 bytes each) past a
/// 16-byte boundary (0: the staged stores; 1-3: the 4-byte stores they fall back to).
#[allow(clippy::too_many_arguments)]
fn check_staged(
    d: u32,
    causal: bool,
    schedule: Schedule,
    seq_len: u32,
    heads: u32,
    persistent: Option<u32>,
    poly: u32,
    q2: bool,
    chain: bool,
    staged: Option<bool>,
    o_shift: usize,
) -> f64 {
    assert!(!q2 || (persistent.is_some() && poly == 0), "q2: the persistent MUFU kernels only");
    assert!(!chain || (persistent.is_some() && poly == 0), "chain: the persistent MUFU kernels only");
    assert!(staged.is_none() || (persistent.is_some() && poly == 0 && !q2), "staged: the persistent MUFU kernels with one Q buffer only");
    let len = (heads * seq_len * d) as usize;
    let seed = 0x1000 * d as u64 + 10 * seq_len as u64 + causal as u64;
    let (q, k, v) = (random_bf16(len, seed + 1), random_bf16(len, seed + 2), random_bf16(len, seed + 3));
    let mut storage = vec![Words4([0x7fc1_7fc1u32; 4]); (len / 2 + o_shift).div_ceil(4)];
    // SAFETY: `storage` is `Words4`s of 4 `u32`s each, contiguous (`repr(C)`, no padding): as
    // `u32`s they are `4 x` as many, of which the view takes `len / 2` from `o_shift` (inside).
    let o = unsafe { std::slice::from_raw_parts_mut(storage.as_mut_ptr().cast::<u32>().add(o_shift), len / 2) };
    let mut lse = vec![f32::NAN; (heads * seq_len) as usize];
    let (qm, km, vm) = (map(&q, d, seq_len, heads), map(&k, d, seq_len, heads), map(&v, d, seq_len, heads));
    let pointers = [
        &*qm as *const DeviceMap as usize,
        &*km as *const DeviceMap as usize,
        &*vm as *const DeviceMap as usize,
        o.as_mut_ptr() as usize,
        lse.as_mut_ptr() as usize,
    ];
    let scale_log2 = (1.0 / (d as f32).sqrt()) * std::f32::consts::LOG2_E;
    let grid = persistent.map_or((seq_len.div_ceil(BM), heads), |blocks| (blocks, 1));
    let shared = if q2 {
        shared_bytes_q2(d, schedule.stages)
    } else if staged.is_some() {
        shared_bytes_ostage(d, schedule.stages)
    } else {
        shared_bytes(d, schedule.stages)
    };
    let config = LaunchConfig::new(grid, THREADS).with_shared_bytes(shared);
    // The persistent kernels' work counter (0 at the launch).
    let mut counter = Box::new(0u32);
    let next = &mut *counter as *mut u32 as usize;
    let body = || {
        let [qm, km, vm, o, lse] = pointers;
        let (qm, km, vm, o, lse) = (qm as *const DeviceMap, km as *const DeviceMap, vm as *const DeviceMap, o as *mut u32, lse as *mut f32);
        // SAFETY: the maps describe q, k, v ([heads, seq_len, d] bf16, box [64, 128, 1], 128-byte
        // swizzle), `o` and `lse` hold heads·seq_len·d bf16 and heads·seq_len f32; all live until
        // `run` returns; the grid and shared memory are the kernel's.
        unsafe {
            if poly != 0 {
                let next = next as *mut u32;
                let (two, pingpong) = (Schedule { overlap: true, pingpong: false, stages: 2 }, Schedule { overlap: true, pingpong: true, stages: 2 });
                return match (d, causal, schedule, persistent.is_some(), poly) {
                    (64, false, s, false, 4) if s == two => attention_body_with::<64, false, true, false, 2, 4>(qm, km, vm, o, lse, seq_len, scale_log2),
                    (64, false, s, false, 6) if s == two => attention_body_with::<64, false, true, false, 2, 6>(qm, km, vm, o, lse, seq_len, scale_log2),
                    (64, true, s, false, 4) if s == pingpong => attention_body_with::<64, true, true, true, 2, 4>(qm, km, vm, o, lse, seq_len, scale_log2),
                    (64, true, s, false, 6) if s == pingpong => attention_body_with::<64, true, true, true, 2, 6>(qm, km, vm, o, lse, seq_len, scale_log2),
                    (64, true, s, true, 4) if s == pingpong => {
                        attention_body_persistent_with::<64, true, true, 2, 4>(qm, km, vm, o, lse, seq_len, scale_log2, heads, next)
                    }
                    (64, true, s, true, 6) if s == pingpong => {
                        attention_body_persistent_with::<64, true, true, 2, 6>(qm, km, vm, o, lse, seq_len, scale_log2, heads, next)
                    }
                    (128, false, s, false, 16) if s == two => attention_body_with::<128, false, true, false, 2, 16>(qm, km, vm, o, lse, seq_len, scale_log2),
                    _ => unreachable!("no such poly variant"),
                };
            }
            if let Some(bulk) = staged {
                let next = next as *mut u32;
                macro_rules! pick_staged {
                    ($($d:literal $c:literal $p:literal $s:literal $chain:literal $bulk:literal),*) => {
                        match (d, causal, schedule, chain, bulk) {
                            $(($d, $c, Schedule { overlap: true, pingpong: $p, stages: $s }, $chain, $bulk) => {
                                attention_body_persistent_staged::<$d, $c, $p, $s, $chain, $bulk>(qm, km, vm, o, lse, seq_len, scale_log2, heads, next)
                            })*
                            _ => unreachable!("no such staged variant"),
                        }
                    };
                }
                // The library's staged instances (and the chained ones at D 64, the body's other
                // head dimension).
                return pick_staged!(128 false true 2 true false, 128 false true 2 true true, 64 false true 2 true false, 64 false true 2 true true,
                    128 true false 2 false false, 64 false false 2 false false, 64 true true 2 false false);
            }
            if chain {
                let next = next as *mut u32;
                macro_rules! pick_chain {
                    ($($d:literal $c:literal $p:literal $s:literal),*) => {
                        match (d, causal, schedule, q2) {
                            $(($d, $c, Schedule { overlap: true, pingpong: $p, stages: $s }, false) => {
                                attention_body_persistent_chain::<$d, $c, $p, $s, 1>(qm, km, vm, o, lse, seq_len, scale_log2, heads, next)
                            })*
                            $(($d, $c, Schedule { overlap: true, pingpong: $p, stages: $s }, true) => {
                                attention_body_persistent_chain::<$d, $c, $p, $s, 2>(qm, km, vm, o, lse, seq_len, scale_log2, heads, next)
                            })*
                            _ => unreachable!("no such chain variant"),
                        }
                    };
                }
                return pick_chain!(128 false true 2, 128 false true 3, 128 true true 2);
            }
            if q2 {
                let next = next as *mut u32;
                macro_rules! pick_q2 {
                    ($($d:literal $c:literal $p:literal $s:literal),*) => {
                        match (d, causal, schedule) {
                            $(($d, $c, Schedule { overlap: true, pingpong: $p, stages: $s }) => {
                                attention_body_persistent_q2::<$d, $c, $p, $s>(qm, km, vm, o, lse, seq_len, scale_log2, heads, next)
                            })*
                            _ => unreachable!("no such q2 variant"),
                        }
                    };
                }
                return pick_q2!(64 false false 2, 64 true true 2, 128 false true 2, 128 true true 2, 128 false false 2, 128 true false 2);
            }
            if persistent.is_some() {
                let next = next as *mut u32;
                macro_rules! pick_persistent {
                    ($($d:literal $c:literal $p:literal $s:literal),*) => {
                        match (d, causal, schedule) {
                            $(($d, $c, Schedule { overlap: true, pingpong: $p, stages: $s }) => {
                                attention_body_persistent::<$d, $c, $p, $s>(qm, km, vm, o, lse, seq_len, scale_log2, heads, next)
                            })*
                            _ => unreachable!("no such persistent variant"),
                        }
                    };
                }
                return pick_persistent!(64 false false 2, 64 false true 2, 64 true true 2, 64 true false 2, 128 false true 2, 128 true true 2,
                    128 false true 3, 128 true true 3, 128 false false 2, 128 true false 2);
            }
            macro_rules! pick {
                ($($d:literal $c:literal $o:literal $p:literal $s:literal),*) => {
                    match (d, causal, schedule) {
                        $(($d, $c, Schedule { overlap: $o, pingpong: $p, stages: $s }) => attention_body::<$d, $c, $o, $p, $s>(qm, km, vm, o, lse, seq_len, scale_log2),)*
                        _ => unreachable!("no such variant"),
                    }
                };
            }
            pick!(64 false false false 2, 64 false true false 2, 64 false true true 2, 64 true false false 2, 64 true true false 2, 64 true true true 2,
                128 false false false 2, 128 false true false 2, 128 false true true 2, 128 true false false 2, 128 true true false 2, 128 true true true 2,
                64 false true false 3, 64 false true true 3, 64 true true false 3, 64 true true true 3,
                128 false true false 3, 128 false true true 3, 128 true true false 3, 128 true true true 3)
        }
    };
    CpuExecutor::new().with_race_detection(false).run("attention", config, &body).unwrap();
    let what = format!(
        "d {d}, causal {causal}, {schedule:?}, seq_len {seq_len}, heads {heads}, persistent on {persistent:?} blocks, poly {poly}, q2 {q2}, chain {chain}, \
         staged {staged:?}, O shifted by {o_shift} words"
    );
    if let Some(blocks) = persistent {
        // Each block's producer takes one number from the counter per tile it loaded.
        let _ = blocks;
        assert_eq!(*counter, seq_len.div_ceil(BM) * heads, "{what}: the counter after the launch");
    }
    let mut worst = 0.0f64;
    for head in 0..heads as usize {
        for row in 0..seq_len as usize {
            let at = (head * seq_len as usize + row) * d as usize;
            let reference = reference_row(&q, &k, &v, d as usize, seq_len as usize, head, row, causal);
            let got: Vec<f32> = (0..d as usize).map(|c| bf16::from_bits((o[(at + c) / 2] >> (16 * ((at + c) % 2))) as u16).to_f32()).collect();
            let ratio = within_bound(&reference, &got, lse[head * seq_len as usize + row]).unwrap_or_else(|why| panic!("{what}: head {head} row {row}: {why}"));
            worst = worst.max(ratio);
        }
    }
    eprintln!("{what}: every O element and LSE within the bound, worst error/bound {worst:.3}");
    worst
}

/// 200 keys: two query tiles and two key tiles, the second key tile masked past the sequence
/// (and the second query tile's rows past it not stored); the K/V rings wrap (2 stages).
#[test]
fn cpu_attention_d64_matches_the_f64_reference() {
    for causal in [false, true] {
        for schedule in SCHEDULES {
            check(64, causal, schedule, 200, 1);
        }
    }
}

#[test]
fn cpu_attention_d128_matches_the_f64_reference() {
    for causal in [false, true] {
        for schedule in SCHEDULES {
            check(128, causal, schedule, 200, 1);
        }
    }
}

/// Three key tiles (the rings' slots reused with the other parity) and two heads (the third
/// map coordinate): 300 keys. With 3 stages, 4 key tiles (452 keys) wrap the ring.
#[test]
fn cpu_attention_three_key_tiles_two_heads() {
    check(128, false, SCHEDULES[2], 300, 2);
    check(64, true, SCHEDULES[1], 300, 2);
    check(128, true, SCHEDULES[4], 452, 1);
    check(64, false, SCHEDULES[3], 452, 1);
}

/// The persistent kernels (`attention_body_persistent`): fewer blocks than query tiles, so each
/// block takes several, one after the other, with the K/V rings running on across tiles (round
/// numbers counting on), Q's buffer refilled after the consumers release it, the ping-pong turns
/// alternating across tiles, and (causal) each head's tiles last first. 3 heads of 300 keys
/// (3 query tiles each: 9 work items) on 2 blocks, and on 1 block (every item in one block);
/// D 64 and 128, causal or not, 2- and 3-deep rings.
#[test]
fn cpu_attention_persistent_blocks_take_several_tiles() {
    let pingpong = |stages| Schedule { overlap: true, pingpong: true, stages };
    for causal in [false, true] {
        check_on(64, causal, pingpong(2), 300, 3, Some(2));
        check_on(128, causal, pingpong(2), 300, 3, Some(2));
    }
    check_on(128, true, pingpong(3), 300, 3, Some(1));
    check_on(128, false, pingpong(3), 200, 2, Some(3));
    check_on(64, false, Schedule { overlap: true, pingpong: false, stages: 2 }, 452, 2, Some(2));
}

/// Issue 31's `_poly` kernels (a share of the softmax's exponentials through `exp2_poly`, the
/// FMA pipe): the instances the library offers (D 64, 4 or 6 of the 16 column pairs: the
/// one-tile-per-block overlap kernel, the causal ping-pong one and its persistent twin), and
/// every exponential through the polynomial (16 of 16, D 128), each within the f64 bounds of
/// the MUFU kernels; 300 keys (a masked last key tile: `-inf` scores through the polynomial),
/// two heads.
#[test]
fn s15_cpu_attention_poly_exponentials_match_the_f64_reference() {
    let (two, pingpong) = (Schedule { overlap: true, pingpong: false, stages: 2 }, Schedule { overlap: true, pingpong: true, stages: 2 });
    for poly in [4, 6] {
        check_poly(64, false, two, 300, 2, None, poly);
        check_poly(64, true, pingpong, 300, 2, None, poly);
        check_poly(64, true, pingpong, 300, 3, Some(2), poly);
    }
    check_poly(128, false, two, 300, 2, None, 16);
}

/// Issue 31, session 16: the persistent kernels with two Q buffers (`_q2`: the producer loads
/// the next work item's Q into the other buffer as soon as it has issued this item's K and V,
/// four work-item slots), the instances the library offers: several items a block (Q's two
/// buffers and the four slots each reused, with both barrier parities: 9 items on 1 block, 12
/// on 2, with one key tile an item too), every output against f64.
#[test]
fn s16_cpu_attention_persistent_two_q_buffers() {
    let (two, pingpong) = (Schedule { overlap: true, pingpong: false, stages: 2 }, Schedule { overlap: true, pingpong: true, stages: 2 });
    check_all(64, false, two, 300, 3, Some(1), 0, true);
    check_all(64, true, pingpong, 300, 3, Some(2), 0, true);
    check_all(128, false, pingpong, 300, 3, Some(1), 0, true);
    check_all(128, true, pingpong, 300, 3, Some(2), 0, true);
    check_all(128, false, pingpong, 100, 12, Some(2), 0, true);
    check_all(64, true, pingpong, 100, 9, Some(1), 0, true);
    // D 128 without the ping-pong turns (session 16's instances), one and two Q buffers.
    check_on(128, true, two, 300, 3, Some(2));
    check_all(128, false, two, 300, 3, Some(1), 0, true);
    check_all(128, true, two, 300, 3, Some(2), 0, true);
}

/// Issue 31, session 23: the chained persistent kernels (`attention_body_persistent_chain`:
/// each consumer issues the next work item's first scores in its last turn of this item and
/// stores this item's O while they run), with the ping-pong turns as the library's instances
/// (2- and 3-deep rings, causal or not; one Q buffer, and two: the body takes either): several
/// items a block (9 items on 1 block and on 2, 12 one-key-tile items on 2, 5 on 3 blocks, the
/// last item of a block reaching the end of the work), every output against f64.
#[test]
fn s23_cpu_attention_persistent_chained_items() {
    let pingpong = |stages| Schedule { overlap: true, pingpong: true, stages };
    for q2 in [false, true] {
        check_chain(128, false, pingpong(2), 300, 3, Some(1), 0, q2, true);
        check_chain(128, false, pingpong(2), 100, 12, Some(2), 0, q2, true);
        check_chain(128, true, pingpong(2), 300, 3, Some(2), 0, q2, true);
    }
    check_chain(128, false, pingpong(2), 300, 3, Some(2), 0, false, true);
    check_chain(128, true, pingpong(2), 452, 2, Some(1), 0, false, true);
    check_chain(128, false, pingpong(3), 452, 2, Some(1), 0, false, true);
    check_chain(128, false, pingpong(3), 200, 5, Some(3), 0, false, true);
}

/// Issue 31, session 24: the persistent kernels writing O through shared memory
/// (`attention_body_persistent_staged`: `stmatrix` into a padded staging buffer, then
/// whole rows, 16 bytes a lane or one bulk copy a row), chained at D 128 (the library's
/// instances) and D 64, and not chained as the other persistent picks: several items a block,
/// ragged last tiles (the rows past S not stored), every output against f64; and O 4 but not
/// 16 bytes aligned, where the body falls back to the 4-byte stores.
#[test]
fn s24_cpu_attention_chained_items_through_shared_memory() {
    let pingpong = Schedule { overlap: true, pingpong: true, stages: 2 };
    for bulk in [false, true] {
        check_staged(128, false, pingpong, 300, 3, Some(2), 0, false, true, Some(bulk), 0);
        check_staged(128, false, pingpong, 100, 12, Some(3), 0, false, true, Some(bulk), 0);
        check_staged(64, false, pingpong, 200, 3, Some(1), 0, false, true, Some(bulk), 0);
        check_staged(128, false, pingpong, 200, 2, Some(2), 0, false, true, Some(bulk), 1);
    }
    // The persistent picks without the chain (`_ostg`, the final call's trials): D 128 causal
    // without the turns, D 64 without the mask, D 64 causal with the turns.
    let two = Schedule { overlap: true, pingpong: false, stages: 2 };
    check_staged(128, true, two, 300, 3, Some(2), 0, false, false, Some(false), 0);
    check_staged(64, false, two, 300, 3, Some(2), 0, false, false, Some(false), 0);
    check_staged(64, true, pingpong, 452, 2, Some(1), 0, false, false, Some(false), 0);
    check_staged(64, true, pingpong, 200, 2, Some(2), 0, false, false, Some(false), 3);
}
