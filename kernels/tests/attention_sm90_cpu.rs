//! The sm_90 attention backward (`ferrocuda-kernels-hopper`: TMA, mbarrier ring, `wgmma` with
//! K-major, N-major and MN-major operands, `dSᵀ` through shared memory, dQ by atomic adds) run
//! on the CPU executor with the Hopper instructions emulated, against an `f64` reference:
//! both layouts, causal or not, grouped-query heads, ragged and unequal lengths, head dims 64
//! and 128, bf16 and f16. Tiny shapes: every `wgmma` is computed element by element here.

mod common;

use common::*;
use ferrocuda_device::cpu::CpuExecutor;
use ferrocuda_kernels::attention::{
    Attention, Layout, hopper_backward_kernel, hopper_backward_kernels, hopper_backward_trial_kernel, hopper_backward_trial_kernels,
};
use ferrocuda_kernels::{Element, bf16, cpu, f16};

fn check<T: Element>(shape: Attention, tol: f64) {
    let e = CpuExecutor::new();
    let (q, qf) = input::<T>(shape.q_len(), 41, 1.0);
    let (k, kf) = input::<T>(shape.kv_len(), 42, 1.0);
    let (v, vf) = input::<T>(shape.kv_len(), 43, 1.0);
    let (dout, doutf) = input::<T>(shape.q_len(), 44, 1.0);
    let (mut out, mut lse) = (vec![T::default(); shape.q_len()], vec![0.0f32; shape.q_rows()]);
    cpu::attention_forward(&e, &q, &k, &v, &mut out, &mut lse, shape).unwrap();
    let dims = (shape.batch, shape.heads_q, shape.heads_kv, shape.seq_q, shape.seq_kv, shape.head_dim);
    let scale = shape.scale.map_or(1.0 / (shape.head_dim as f64).sqrt(), f64::from);
    let want = attention_ref_scaled(&qf, &kf, &vf, &doutf, dims, shape.layout == Layout::Bshd, shape.causal, scale);
    // Every instance: the default (dQ added by the copy engine), `_red` and `_late`, and the
    // trial ones where the shape has them (`_late_lpt`, or `_persistent` and `_persistent_dyn`
    // for bf16 without the mask).
    for kernel in hopper_backward_kernels::<T>(&shape, 90).unwrap().into_iter().chain(hopper_backward_trial_kernels::<T>(&shape, 90)) {
        let nan = T::from_f32(f32::NAN);
        // 16-byte aligned outputs, so that the `_ostg` / `_obulk` trials (session 24) take their
        // staged epilogue (they fall back to 4-byte stores otherwise).
        let (mut dq_at, mut dk_at, mut dv_at) = (aligned(shape.q_len(), nan), aligned(shape.kv_len(), nan), aligned(shape.kv_len(), nan));
        let (dq, dk, dv) = (dq_at.as_mut_slice(), dk_at.as_mut_slice(), dv_at.as_mut_slice());
        let start = std::time::Instant::now();
        // The `_dyn` instances hand each work unit from the producer's thread to the others
        // through a shared word published by an mbarrier phase, an order the executor's race
        // detector does not model (it orders block, warp and named barriers): run without it,
        // as the persistent forward's CPU tests do.
        let quiet = CpuExecutor::new().with_race_detection(false);
        cpu::attention_backward_sm90_kernel(
            if kernel.ends_with("_dyn") { &quiet } else { &e },
            kernel,
            cpu::Backward { q: &q, k: &k, v: &v, out: &out, dout: &dout, lse: &lse, dq, dk, dv },
            shape,
        )
        .unwrap();
        let (dq, dk, dv) = (dq_at.as_mut_slice().to_vec(), dk_at.as_mut_slice().to_vec(), dv_at.as_mut_slice().to_vec());
        let what = format!("{kernel} {shape:?}");
        eprintln!("{what}: {:.1} s", start.elapsed().as_secs_f64());
        assert_close(&format!("dq {what}"), &widen(&dq), &want.dq, tol);
        assert_close(&format!("dk {what}"), &widen(&dk), &want.dk, tol);
        assert_close(&format!("dv {what}"), &widen(&dv), &want.dv, tol);
    }
}

/// `len` copies of `value` from a 16-byte aligned start.
struct Aligned<T> {
    storage: Vec<u128>,
    len: usize,
    _element: std::marker::PhantomData<T>,
}

impl<T: Copy> Aligned<T> {
    fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: `storage` holds at least `len` `T`s (`aligned`), 16-byte aligned (so aligned
        // for the 2- and 4-byte element types), initialised by `aligned`; borrowed mutably.
        unsafe { std::slice::from_raw_parts_mut(self.storage.as_mut_ptr().cast::<T>(), self.len) }
    }
}

fn aligned<T: Copy>(len: usize, value: T) -> Aligned<T> {
    assert!(16usize.is_multiple_of(std::mem::size_of::<T>()) && std::mem::align_of::<T>() <= 16);
    let mut a = Aligned { storage: vec![0u128; (len * std::mem::size_of::<T>()).div_ceil(16)], len, _element: std::marker::PhantomData };
    a.as_mut_slice().fill(value);
    a
}

#[allow(clippy::too_many_arguments)] // the shape, spelled out
fn shape(batch: usize, heads_q: usize, heads_kv: usize, seq_q: usize, seq_kv: usize, head_dim: usize, layout: Layout, causal: bool) -> Attention {
    Attention { batch, heads_q, heads_kv, seq_q, seq_kv, head_dim, layout, causal, scale: None }
}

/// D 64, bf16, `[B, H, S, D]`, two query heads over one key/value head, 100 positions (the
/// key block's last 28 keys and the second query tile's last 28 rows past the end).
#[test]
fn sm90_backward_d64_bf16_grouped_ragged_matches_f64() {
    check::<bf16>(shape(1, 2, 1, 100, 100, 64, Layout::Bhsd, false), 2e-2);
}

/// Session 13's prep (a warp reads its 32 rows of O and dO together, `head_dim / 8` lanes a
/// row, then reduce-scatters the partial sums) at D 64 and D 128 with padded rows: D 64 at 96
/// positions (the second tile's rows 32-63 past the end: a whole warp of padding) and D 128,
/// causal, at 80 positions (a warp with 16 real rows and 16 padded), two heads.
#[test]
fn s13_warp_prep_matches_f64_with_padded_rows() {
    check::<bf16>(shape(1, 2, 2, 96, 96, 64, Layout::Bhsd, false), 2e-2);
    check::<bf16>(shape(1, 2, 1, 80, 80, 128, Layout::Bhsd, true), 2e-2);
}

/// D 128, bf16, `[B, S, H, D]`, causal, 150 positions: two key blocks, three query tiles (the
/// two-stage ring wraps), the causal diagonal inside both consumers' keys.
#[test]
fn sm90_backward_d128_bf16_bshd_causal_matches_f64() {
    check::<bf16>(shape(2, 2, 2, 150, 150, 128, Layout::Bshd, true), 2e-2);
}

/// Causal blocks take two key blocks each (`x` and the last but `x`, one after the other,
/// K and V reloaded between them): three key blocks (the middle block alone), two query heads
/// over one key/value head, 300 queries (five tiles, the ring wrapping across the units).
#[test]
fn sm90_backward_causal_pairs_of_key_blocks_match_f64() {
    check::<bf16>(shape(1, 2, 1, 300, 300, 64, Layout::Bhsd, true), 2e-2);
}

/// Session 17's persistent instances (the trial instances of bf16 without the mask:
/// `attention_backward_d128_bf16_persistent`, `attention_backward_d64_bf16_red_persistent`, and
/// their `_dyn` forms, which take the units from a counter): the CPU executor runs them on three
/// blocks, so each block takes several key blocks in turn and crosses heads (its K, V and head row change between units while the Q/dO ring and the dQ
/// hand-offs run on; the next unit's first tiles load before its K and V). D 128 `[B, H, S, D]`,
/// 300 positions over two heads (6 key blocks: block 0 takes head 0's first and head 1's first);
/// D 64 `[B, S, H, D]`, four query heads over two key/value heads, 130 queries and 260 keys (the
/// third key block ragged, 4 keys). Skipped or repeated units leave dK/dV rows at 0 or doubled.
#[test]
fn s17_persistent_backward_blocks_take_several_key_blocks_across_heads() {
    let d128 = shape(1, 2, 2, 300, 300, 128, Layout::Bhsd, false);
    let d64 = shape(1, 4, 2, 130, 260, 64, Layout::Bshd, false);
    // Session 24: the pick is the bulk schedule's `_obulk` form, so the bulk one is the first
    // trial, then the persistent ones.
    assert_eq!(hopper_backward_kernel::<bf16>(&d128, 90), Some("attention_backward_d128_bf16_obulk"));
    assert_eq!(hopper_backward_trial_kernel::<bf16>(&d128, 90), Some("attention_backward_d128_bf16"));
    assert_eq!(hopper_backward_trial_kernels::<bf16>(&d128, 90)[1], "attention_backward_d128_bf16_persistent");
    // D 64 at 3 query steps a key block: the persistent `_red` schedule is the pick (session 17),
    // its one-block-per-key-block form the first trial.
    assert_eq!(hopper_backward_kernel::<bf16>(&d64, 90), Some("attention_backward_d64_bf16_red_persistent"));
    assert_eq!(hopper_backward_trial_kernel::<bf16>(&d64, 90), Some("attention_backward_d64_bf16_red"));
    assert_eq!(hopper_backward_kernels::<bf16>(&d64, 90).unwrap()[1..], ["attention_backward_d64_bf16", "attention_backward_d64_bf16_late"]);
    assert_eq!(hopper_backward_kernel::<bf16>(&shape(1, 4, 2, 1000, 1000, 64, Layout::Bshd, false), 90), Some("attention_backward_d64_bf16_red"));
    assert_eq!(hopper_backward_trial_kernels::<bf16>(&d128, 90)[2], "attention_backward_d128_bf16_persistent_dyn");
    check::<bf16>(d128, 2e-2);
    check::<bf16>(d64, 2e-2);
}

/// f16, causal, unequal lengths (70 queries, 140 keys: the second key block sees no query)
/// and a custom scale; D 128 not causal in `[B, H, S, D]`.
#[test]
fn sm90_backward_f16_unequal_lengths_and_d128_match_f64() {
    let mut s = shape(1, 2, 1, 70, 140, 64, Layout::Bshd, true);
    s.scale = Some(0.2);
    check::<f16>(s, 4e-3);
    check::<f16>(shape(1, 1, 1, 64, 64, 128, Layout::Bhsd, false), 4e-3);
}

/// Which shapes take the sm_90 backward: bf16/f16, D 64/128, either layout, grouped heads, on
/// sm_90 only; f32, other head dims, empty sides and other GPUs take the other paths.
#[test]
fn the_sm90_backward_takes_16_bit_d64_d128_on_sm_90_only() {
    let base = shape(2, 4, 2, 100, 90, 128, Layout::Bshd, true);
    // Session 24: the `_late` schedule storing dK and dV through shared memory.
    assert_eq!(hopper_backward_kernel::<bf16>(&base, 90), Some("attention_backward_d128_causal_bf16_late_obulk"));
    assert_eq!(hopper_backward_kernel::<f16>(&Attention { head_dim: 64, causal: false, ..base }, 90), Some("attention_backward_d64_f16_red"));
    assert_eq!(hopper_backward_kernel::<bf16>(&base, 80), None);
    assert_eq!(hopper_backward_kernel::<f32>(&base, 90), None);
    for s in [Attention { head_dim: 256, ..base }, Attention { head_dim: 32, ..base }, Attention { seq_q: 0, ..base }, Attention { seq_kv: 0, ..base }] {
        assert_eq!(hopper_backward_kernel::<bf16>(&s, 90), None, "{s:?}");
    }
    let e = CpuExecutor::new();
    let s = Attention { head_dim: 256, ..base };
    let x = vec![bf16::ZERO; s.q_len()];
    let kv = vec![bf16::ZERO; s.kv_len()];
    let (mut dq, mut dk, mut dv) = (x.clone(), kv.clone(), kv.clone());
    let err = cpu::attention_backward_sm90(
        &e,
        cpu::Backward { q: &x, k: &kv, v: &kv, out: &x, dout: &x, lse: &vec![0.0; s.q_rows()], dq: &mut dq, dk: &mut dk, dv: &mut dv },
        s,
    )
    .unwrap_err();
    assert!(err.to_string().contains("hopper_backward_kernel"), "{err}");
    let (x, kv) = (vec![bf16::ZERO; base.q_len()], vec![bf16::ZERO; base.kv_len()]);
    let (mut dq, mut dk, mut dv) = (x.clone(), kv.clone(), kv.clone());
    let lse = vec![0.0; base.q_rows()];
    let err = cpu::attention_backward_sm90_kernel(
        &e,
        "attention_backward_d64_bf16_red",
        cpu::Backward { q: &x, k: &kv, v: &kv, out: &x, dout: &x, lse: &lse, dq: &mut dq, dk: &mut dk, dv: &mut dv },
        base,
    )
    .unwrap_err();
    assert!(err.to_string().contains("attention_backward_d128_causal_bf16_red"), "another shape's instance is refused: {err}");
    let names = ["attention_backward_d128_causal_bf16_late_obulk", "attention_backward_d128_causal_bf16", "attention_backward_d128_causal_bf16_red"];
    assert_eq!(hopper_backward_kernels::<bf16>(&base, 90), Some(names));
}

/// The sm_90 kernel's `dQ` accumulator order (`dq_acc_index`, where its consumers write) and the
/// conversion kernel's copy of it (`hopper_dq_acc_index`, where it reads) agree, and each maps
/// the `B·Hq·seq_pad·D` (query, head column) pairs one to one onto the accumulator.
#[test]
fn the_dq_accumulator_order_is_one_to_one_and_shared_by_kernel_and_conversion() {
    use ferrocuda_kernels_device::attention_backward::hopper_dq_acc_index;
    use ferrocuda_kernels_hopper::attention_backward::dq_acc_index;
    for head_dim in [64u32, 128] {
        let (heads, tiles) = (3u32, 2u32);
        let len = (heads * tiles * 64 * head_dim) as usize;
        let mut seen = vec![false; len];
        for bhq in 0..heads {
            for tile in 0..tiles {
                for q in 0..64 {
                    for d in 0..head_dim {
                        let at = dq_acc_index(head_dim, tiles, bhq, tile, q, d);
                        assert_eq!(at, hopper_dq_acc_index(head_dim, tiles, bhq, tile, q, d), "D {head_dim} ({bhq}, {tile}, {q}, {d})");
                        assert!(at < len && !seen[at], "D {head_dim}: ({bhq}, {tile}, {q}, {d}) -> {at} outside or twice");
                        seen[at] = true;
                    }
                }
            }
        }
    }
}

/// The order in which the causal `_late` backward's blocks (and the causal persistent forward's
/// tiles) take their work (`longest_first`): one to one onto (rank, head), every group of heads
/// in rank order, and the last unit of the grid a shortest one (the largest rank).
#[test]
fn longest_first_is_one_to_one_and_ends_with_the_shortest_units() {
    use ferrocuda_kernels_hopper::attention::{WAVE, longest_first};
    for (per_head, heads) in [(1u32, 1u32), (8, 256), (8, 3), (16, 17), (64, 32), (3, 100), (200, 5), (WAVE + 1, 2)] {
        let mut seen = vec![false; (per_head * heads) as usize];
        let mut last = (0, 0);
        for unit in 0..per_head * heads {
            let (rank, head) = longest_first(unit, per_head, heads);
            assert!(rank < per_head && head < heads, "({per_head}, {heads}): unit {unit} -> ({rank}, {head})");
            let at = (head * per_head + rank) as usize;
            assert!(!seen[at], "({per_head}, {heads}): ({rank}, {head}) twice");
            seen[at] = true;
            // Within a group the ranks do not go down; a new group starts at rank 0.
            assert!(rank >= last.0 || rank == 0, "({per_head}, {heads}): unit {unit} rank {rank} after {}", last.0);
            last = (rank, head);
        }
        assert_eq!(last.0, per_head - 1, "({per_head}, {heads}): the grid's last unit is not a shortest one");
    }
}

/// Session 18 (issue 31): the sm_90 kernels are `#[kernel]`s launched through typed launchers
/// that the host finds by name (`forward_kernel`, `backward_kernel`). Every instance the library
/// may run by name, for every head dim, mask, element type and length class, has a launcher
/// under exactly that name (a missing one would turn a pick into an error on the GPU only).
#[test]
fn s18_every_sm90_instance_the_library_names_has_a_typed_launcher() {
    use ferrocuda_kernels_hopper::attention::forward_kernel;
    use ferrocuda_kernels_hopper::attention_backward::backward_kernel;
    let mut forward = 0;
    let mut backward = 0;
    for head_dim in [64, 128, 256] {
        for causal in [false, true] {
            for seq in [100, 512, 768, 1024, 2048, 4096, 8192] {
                let shape = Attention { head_dim, causal, ..shape(2, 4, 4, seq, seq, head_dim, Layout::Bhsd, causal) };
                for name in ferrocuda_kernels::attention::hopper_forward_instances::<bf16>(&shape, 90) {
                    let kernel = forward_kernel(name).unwrap_or_else(|| panic!("no launcher for forward {name}"));
                    assert_eq!(kernel.name, name);
                    forward += 1;
                }
                for grouped in [shape, Attention { heads_kv: 2, ..shape }, Attention { layout: Layout::Bshd, ..shape }] {
                    let names = [hopper_backward_kernels::<bf16>(&grouped, 90), hopper_backward_kernels::<f16>(&grouped, 90)];
                    let trials = [hopper_backward_trial_kernels::<bf16>(&grouped, 90), hopper_backward_trial_kernels::<f16>(&grouped, 90)];
                    for name in names.into_iter().flatten().flatten().chain(trials.into_iter().flatten()) {
                        let kernel = backward_kernel(name).unwrap_or_else(|| panic!("no launcher for backward {name}"));
                        assert_eq!(kernel.name, name);
                        backward += 1;
                    }
                }
            }
        }
    }
    assert!(forward > 100 && backward > 100, "{forward} forward, {backward} backward names checked");
    assert!(forward_kernel("attention_d96").is_none() && backward_kernel("attention_backward_d96_bf16").is_none());
}

/// One launch of `attention_backward_d64_bf16_red` on the CPU executor for B 1, H 1, S 64
/// with the given grid and dK length (dK and dV poisoned with NaN bits first); returns
/// whether any element of dK or dV was written.
fn s19_backward_writes(grid: (u32, u32), dk_len: usize) -> bool {
    let (written, dq, _) = red_launch("attention_backward_d64_bf16_red", 64, grid, dk_len, 0).expect("the CPU executor runs the launch");
    written || dq.iter().any(|&x| x != 0x7fc1)
}

/// One launch of instance `name` (bf16, D 64, no mask) on the CPU executor for B 1, H 1, S `s`
/// (`s` keys and queries), the given grid and dK length, every dQ arrival counter starting at
/// `count` (dK, dV and dQ poisoned with NaN bits first): whether any element of dK or dV was
/// written, dQ's bits and the counters after the launch, or the executor's error.
fn red_launch(name: &str, s: usize, grid: (u32, u32), dk_len: usize, count: u32) -> Result<(bool, Vec<u16>, Vec<u32>), ferrocuda_device::cpu::CpuError> {
    use ferrocuda_host::{LaunchConfig, TensorDataType, TensorMap, TensorSwizzle, TiledLayout};
    use ferrocuda_kernels_hopper::attention_backward::{
        BOX_BHSD, CpuBackwardArgs, MAP_WORDS, Problem, STATS_BOX, THREADS, backward_kernel, dq_count_len, shared_bytes,
    };
    let d = 64usize;
    let operand = |seed| -> Vec<u16> { input::<bf16>(s * d, seed, 1.0).0.iter().map(|x| x.to_bits()).collect() };
    let (q, k, v, dout) = (operand(1), operand(2), operand(3), operand(4));
    let (lse2, delta) = (vec![0.0f32; s], vec![0.0f32; s]);
    let mut maps_raw = vec![0u64; MAP_WORDS + 7];
    let skip = maps_raw.as_ptr().align_offset(64);
    let maps = &mut maps_raw[skip..skip + MAP_WORDS];
    let (dims, strides) = ([d as u64, s as u64, 1, 1], [2 * d as u64, 2 * (d * s) as u64, 2 * (d * s) as u64]);
    let layout = TiledLayout { data_type: TensorDataType::Bf16, dims: &dims, strides_bytes: &strides, box_dims: &BOX_BHSD, swizzle: TensorSwizzle::B128 };
    for (i, x) in [&q, &k, &v, &dout].into_iter().enumerate() {
        maps[16 * i..16 * i + 16].copy_from_slice(&TensorMap::emulated(x.as_ptr() as u64, &layout).unwrap().words());
    }
    let stats_dims = [s as u64];
    let stats = TiledLayout { data_type: TensorDataType::F32, dims: &stats_dims, strides_bytes: &[], box_dims: &STATS_BOX, swizzle: TensorSwizzle::None };
    for (i, x) in [&lse2, &delta].into_iter().enumerate() {
        maps[64 + 16 * i..80 + 16 * i].copy_from_slice(&TensorMap::emulated(x.as_ptr() as u64, &stats).unwrap().words());
    }
    let mut dq_raw = vec![0.0f32; s * d + 3];
    let at = dq_raw.as_ptr().align_offset(16);
    let (mut dk_words, mut dv_words) = (vec![0x7fc1_7fc1u32; dk_len / 2], vec![0x7fc1_7fc1u32; s * d / 2]);
    let mut counter = [0u32];
    let (mut dq, mut dq_count) = (vec![0x7fc1u16; s * d], vec![count; dq_count_len(s.div_ceil(64) * 64)]);
    let args = CpuBackwardArgs {
        maps: maps.as_ptr().cast(),
        map_words: maps,
        q: &q,
        k: &k,
        v: &v,
        dout: &dout,
        lse2: &lse2,
        delta: &delta,
        dq_acc: &mut dq_raw[at..at + s * d],
        dk: bytemuck::cast_slice_mut(&mut dk_words),
        dv: bytemuck::cast_slice_mut(&mut dv_words),
        problem: Problem { seq_q: s as u32, seq_kv: s as u32, heads_q: 1, heads_kv: 1, bshd: 0, scale: 0.125, batch: 1 },
        next: &mut counter,
        dq: &mut dq,
        dq_count: &mut dq_count,
    };
    let kernel = backward_kernel(name).unwrap();
    let config = LaunchConfig::new(grid, THREADS).with_shared_bytes(shared_bytes(64));
    // SAFETY: the emulated maps describe q, k, v, dout (`[64, 64, 1, 1]` bf16, box `BOX_BHSD`,
    // 128-byte swizzle) and lse2, delta (64 f32, box `STATS_BOX`), alive until it returns.
    unsafe { (kernel.launch_cpu)(&CpuExecutor::new(), config, args) }?;
    Ok((dk_words.iter().chain(&dv_words).any(|&w| w != 0x7fc1_7fc1), dq, dq_count))
}

/// Session 19: the sm_90 backward entries take dK and dV as `UncheckedSlice`s, whose
/// ownership argument (block `(x, y)`: key block `x` of head row `y`) needs the launch the
/// instance was built for; as G18R-1's fix does for the portable kernels, each entry refuses
/// every other grid, and operands shorter than the problem, uniformly before its first write
/// or barrier. Positive control first: the right launch writes dK and dV.
#[test]
fn s19_sm90_backward_entries_refuse_other_grids_and_short_outputs() {
    assert!(s19_backward_writes((1, 1), 64 * 64), "the launch the instance was built for writes dK and dV");
    assert!(!s19_backward_writes((1, 2), 64 * 64), "a second row of blocks (two blocks on one key block) writes nothing");
    assert!(!s19_backward_writes((2, 1), 64 * 64), "a second block along x (a key block past the end) writes nothing");
    assert!(!s19_backward_writes((1, 1), 64 * 64 - 2), "a dK shorter than the problem writes nothing");
}

/// Session 20: the `_red_cvt` instances convert dQ themselves, the last warp to add to its rows of
/// a tile converting them (per-warp arrival counters, `atom.inc` with the key blocks' count as
/// its wrap). Each element of dQ must have one writer per launch whatever the counters hold
/// (they live in the caller's scratch): with S 256 (two key blocks, so two arrivals per
/// counter), counters starting at 0 give every dQ element and leave the counters at 0 (the
/// reset protocol); starting at 1 (one short of the wrap) a warp converts early, once; far past
/// it, none converts. The executor's race detector (on by default) reports two writers of one
/// element in a launch as an error, so `Ok` is the single-writer check.
#[test]
fn s20_red_dq_conversion_has_one_writer_whatever_the_counters_hold() {
    const CVT: &str = "attention_backward_d64_bf16_red_cvt";
    let (s, grid) = (256usize, (2u32, 1u32));
    let (written, dq, counters) = red_launch(CVT, s, grid, s * 64, 0).expect("counters at 0: a clean launch");
    assert!(written, "dK and dV are written (positive control)");
    assert!(dq.iter().all(|&x| x != 0x7fc1), "counters at 0: every dQ element converted in the kernel");
    assert!(counters.iter().all(|&c| c == 0), "counters at 0: left at 0 for the next launch (the reset protocol)");
    let (_, early, _) = red_launch(CVT, s, grid, s * 64, 1).expect("counters one short of the wrap: no race");
    assert!(early.iter().all(|&x| x != 0x7fc1), "counters at 1: the first arrival converts (early), once");
    let (_, none, _) = red_launch(CVT, s, grid, s * 64, 7).expect("counters past the wrap: no race");
    assert!(none.iter().all(|&x| x == 0x7fc1), "counters past the wrap: no warp converts");
}

/// Session 21: the `_cvt` instances (the bulk schedule converting dQ in the kernel) arrive on a
/// counter per consumer share of a tile from the adding warp, a step after its bulk reductions,
/// and the last arrival converts the share. As for `_red_cvt` above, each element of dQ must
/// have one writer per launch whatever the counters hold: with S 256 (two key blocks, two
/// arrivals per counter) counters at 0 give every element and are left at 0 (the reset
/// protocol: the shares are zeroed too, which `cpu::attention_backward_sm90_kernel` asserts
/// after every `_cvt` run in `check`), at 1 the first arrival converts, once; past the wrap
/// none does. `Ok` is the race detector's single-writer check.
#[test]
fn s21_bulk_dq_conversion_has_one_writer_whatever_the_counters_hold() {
    const CVT: &str = "attention_backward_d64_bf16_cvt2";
    let (s, grid) = (256usize, (2u32, 1u32));
    let (written, dq, counters) = red_launch(CVT, s, grid, s * 64, 0).expect("counters at 0: a clean launch");
    assert!(written, "dK and dV are written (positive control)");
    assert!(dq.iter().all(|&x| x != 0x7fc1), "counters at 0: every dQ element converted in the kernel");
    assert!(counters.iter().all(|&c| c == 0), "counters at 0: left at 0 for the next launch (the reset protocol)");
    let (_, early, _) = red_launch(CVT, s, grid, s * 64, 1).expect("counters one short of the wrap: no race");
    assert!(early.iter().all(|&x| x != 0x7fc1), "counters at 1: the first arrival converts (early), once");
    let (_, none, _) = red_launch(CVT, s, grid, s * 64, 7).expect("counters past the wrap: no race");
    assert!(none.iter().all(|&x| x == 0x7fc1), "counters past the wrap: no warp converts");
}

/// Session 22 (issue 31: D 256): the sm_90 forward at D 256 (`attention_body_d256`, the body
/// of `attention_d256`, `attention_d256_causal` and their `_serial` forms: 64-key tiles, every
/// map's box 64 rows) run
/// on the CPU executor with the Hopper instructions emulated (TMA into the 128-byte swizzle,
/// `wgmma` m64n64k16 from shared memory and m64n256k16 with A from registers and V N-major),
/// every O element and LSE against f64 (`reference_row`, `within_bound`). S 200: four key tiles,
/// the last ragged, the second query tile's second 64-row Q box partly past S; S 300: five key
/// tiles (both ring slots reused with both parities), the third query tile's second Q box
/// wholly past S (zeros), and causal blocks whose first consumer skips the key tiles wholly
/// after its rows; two heads; S 40: one ragged key tile.
#[test]
fn s22_d256_sm90_forward_matches_f64_on_the_cpu_executor() {
    use ferrocuda_device::tma::TensorMap as DeviceMap;
    use ferrocuda_host::{LaunchConfig, TensorDataType, TensorMap, TensorSwizzle, TiledLayout};
    use ferrocuda_kernels_hopper::attention::{BM, BOX_D256, THREADS, attention_body_d256, reference_row, shared_bytes_d256, within_bound};
    let map = |data: &[bf16], seq_len: u32, heads: u32| {
        let dims = [256, seq_len as u64, heads as u64];
        let strides = [512, 512 * seq_len as u64];
        let layout = TiledLayout { data_type: TensorDataType::Bf16, dims: &dims, strides_bytes: &strides, box_dims: &BOX_D256, swizzle: TensorSwizzle::B128 };
        Box::new(DeviceMap(TensorMap::emulated(data.as_ptr() as u64, &layout).unwrap().words()))
    };
    for (seq_len, heads, overlap) in [(200u32, 2u32, true), (300, 2, true), (40, 1, true), (200, 2, false), (300, 1, false)] {
        for causal in [false, true] {
            let len = (heads * seq_len * 256) as usize;
            let seed = 10 * seq_len as u64 + causal as u64;
            let (q, _) = input::<bf16>(len, seed + 1, 1.0);
            let (k, _) = input::<bf16>(len, seed + 2, 1.0);
            let (v, _) = input::<bf16>(len, seed + 3, 1.0);
            let mut o = vec![0x7fc1_7fc1u32; len / 2];
            let mut lse = vec![f32::NAN; (heads * seq_len) as usize];
            let (qm, km, vm) = (map(&q, seq_len, heads), map(&k, seq_len, heads), map(&v, seq_len, heads));
            let pointers = [
                &*qm as *const DeviceMap as usize,
                &*km as *const DeviceMap as usize,
                &*vm as *const DeviceMap as usize,
                o.as_mut_ptr() as usize,
                lse.as_mut_ptr() as usize,
            ];
            let scale_log2 = (1.0 / 16.0) * std::f32::consts::LOG2_E;
            let config = LaunchConfig::new((seq_len.div_ceil(BM), heads), THREADS).with_shared_bytes(shared_bytes_d256());
            let body = || {
                let [qm, km, vm, o, lse] = pointers;
                let (qm, km, vm, o, lse) = (qm as *const DeviceMap, km as *const DeviceMap, vm as *const DeviceMap, o as *mut u32, lse as *mut f32);
                // SAFETY: the maps describe q, k, v ([heads, seq_len, 256] bf16, box [64, 64, 1],
                // 128-byte swizzle), `o` and `lse` hold heads·seq_len·256 bf16 and heads·seq_len
                // f32; all live until `run` returns; the grid and shared memory are the kernel's.
                unsafe {
                    match (causal, overlap) {
                        (false, true) => attention_body_d256::<false, true>(qm, km, vm, o, lse, seq_len, scale_log2),
                        (true, true) => attention_body_d256::<true, true>(qm, km, vm, o, lse, seq_len, scale_log2),
                        (false, false) => attention_body_d256::<false, false>(qm, km, vm, o, lse, seq_len, scale_log2),
                        (true, false) => attention_body_d256::<true, false>(qm, km, vm, o, lse, seq_len, scale_log2),
                    }
                }
            };
            // Without the race detector, as the other forward bodies' CPU tests: it does not
            // order the tiles the copy engine publishes through an mbarrier phase.
            CpuExecutor::new().with_race_detection(false).run("attention_d256", config, &body).unwrap();
            let mut worst = 0.0f64;
            for head in 0..heads as usize {
                for row in 0..seq_len as usize {
                    let at = (head * seq_len as usize + row) * 256;
                    let reference = reference_row(&q, &k, &v, 256, seq_len as usize, head, row, causal);
                    let got: Vec<f32> = (0..256).map(|c| bf16::from_bits((o[(at + c) / 2] >> (16 * ((at + c) % 2))) as u16).to_f32()).collect();
                    let ratio = within_bound(&reference, &got, lse[head * seq_len as usize + row])
                        .unwrap_or_else(|why| panic!("S {seq_len}, causal {causal}, overlap {overlap}: head {head} row {row}: {why}"));
                    worst = worst.max(ratio);
                }
            }
            eprintln!(
                "D 256, S {seq_len}, {heads} heads, causal {causal}, overlap {overlap}: every O element and LSE within the bound, worst error/bound {worst:.3}"
            );
        }
    }
}
