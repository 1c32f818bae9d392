//! Attention forward and backward on the CPU executor against an `f64` reference: both
//! layouts, causal or not, grouped-query heads, unequal and odd sequence lengths, head dims
//! 64 and 128 (tiny shapes: every GPU thread is a coroutine here).

#![allow(clippy::needless_range_loop)] // the references index several arrays by one position

mod common;

use common::*;
use ferrocuda_device::cpu::CpuExecutor;
use ferrocuda_kernels::attention::{Attention, Layout};
use ferrocuda_kernels::{Element, KernelsError, bf16, cpu, f16};

fn check<T: Element>(shape: Attention, tol: f64) {
    let e = CpuExecutor::new();
    let (q, qf) = input::<T>(shape.q_len(), 21, 1.0);
    let (k, kf) = input::<T>(shape.kv_len(), 22, 1.0);
    let (v, vf) = input::<T>(shape.kv_len(), 23, 1.0);
    let (dout, doutf) = input::<T>(shape.q_len(), 24, 1.0);
    let (mut out, mut lse) = (vec![T::default(); shape.q_len()], vec![0.0f32; shape.q_rows()]);
    cpu::attention_forward(&e, &q, &k, &v, &mut out, &mut lse, shape).unwrap();
    let dims = (shape.batch, shape.heads_q, shape.heads_kv, shape.seq_q, shape.seq_kv, shape.head_dim);
    let scale = shape.scale.map_or(1.0 / (shape.head_dim as f64).sqrt(), f64::from);
    let want = attention_ref_scaled(&qf, &kf, &vf, &doutf, dims, shape.layout == Layout::Bshd, shape.causal, scale);
    let what = format!("{shape:?}");
    assert_close(&format!("out {what}"), &widen(&out), &want.out, tol);
    assert_close(&format!("lse {what}"), &lse.iter().map(|&x| x as f64).collect::<Vec<_>>(), &want.lse, 1e-4);

    let (mut dq, mut dk, mut dv) = (vec![T::default(); shape.q_len()], vec![T::default(); shape.kv_len()], vec![T::default(); shape.kv_len()]);
    cpu::attention_backward(&e, cpu::Backward { q: &q, k: &k, v: &v, out: &out, dout: &dout, lse: &lse, dq: &mut dq, dk: &mut dk, dv: &mut dv }, shape)
        .unwrap();
    // The backward reads the stored (rounded) O; the reference uses the exact one, so allow
    // a little more for 16-bit types.
    assert_close(&format!("dq {what}"), &widen(&dq), &want.dq, tol * 2.0);
    assert_close(&format!("dk {what}"), &widen(&dk), &want.dk, tol * 2.0);
    assert_close(&format!("dv {what}"), &widen(&dv), &want.dv, tol * 2.0);
}

fn shape(heads_q: usize, heads_kv: usize, seq_q: usize, seq_kv: usize, head_dim: usize, layout: Layout, causal: bool) -> Attention {
    Attention { batch: 2, heads_q, heads_kv, seq_q, seq_kv, head_dim, layout, causal, scale: None }
}

#[test]
fn attention_f32_matches_f64_in_both_layouts_causal_or_not_with_grouped_heads() {
    for layout in [Layout::Bhsd, Layout::Bshd] {
        for causal in [false, true] {
            check::<f32>(shape(4, 2, 5, 7, 64, layout, causal), 1e-4);
        }
    }
    check::<f32>(shape(2, 2, 6, 3, 128, Layout::Bhsd, true), 1e-4);
    check::<f32>(shape(3, 1, 1, 9, 64, Layout::Bshd, false), 1e-4);
}

/// Issue 31 asks D 64, 128 and 256: D 256 through the portable forward and backward (the
/// paths D 256 takes off sm_90, and the backward everywhere), every element type, both
/// layouts, causal, grouped-query heads, `seq_q != seq_kv`, against f64 (session 22).
#[test]
fn s22_d256_forward_and_backward_match_f64_in_both_layouts() {
    check::<f32>(shape(4, 2, 5, 7, 256, Layout::Bhsd, true), 1e-4);
    check::<f32>(shape(2, 1, 6, 3, 256, Layout::Bshd, false), 1e-4);
    check::<bf16>(shape(2, 2, 9, 9, 256, Layout::Bhsd, true), 2e-2);
    check::<f16>(shape(4, 2, 4, 6, 256, Layout::Bshd, false), 4e-3);
}

#[test]
fn attention_bf16_and_f16_match_f64() {
    check::<bf16>(shape(4, 2, 5, 6, 64, Layout::Bshd, true), 2e-2);
    check::<f16>(shape(2, 1, 4, 4, 128, Layout::Bhsd, false), 4e-3);
}

#[test]
fn the_tensor_core_forward_matches_f64_and_the_backward_reads_its_output() {
    use ferrocuda_kernels::attention::uses_tensor_cores;
    let cases = [
        (shape(4, 2, 32, 40, 64, Layout::Bhsd, false), true),
        (shape(4, 2, 32, 40, 64, Layout::Bhsd, true), true),
        (shape(2, 1, 16, 16, 128, Layout::Bhsd, true), true),
        (shape(2, 2, 16, 9, 32, Layout::Bhsd, false), true),
    ];
    for (s, bf) in cases {
        assert!(uses_tensor_cores::<bf16>(&s) && uses_tensor_cores::<f16>(&s), "{s:?} should take the tensor cores");
        if bf {
            check::<bf16>(s, 2e-2);
        }
        check::<f16>(s, 4e-3);
    }
    assert!(!uses_tensor_cores::<f32>(&cases[0].0));
    assert!(!uses_tensor_cores::<bf16>(&shape(4, 2, 30, 40, 64, Layout::Bhsd, false)));
    assert!(!uses_tensor_cores::<bf16>(&shape(4, 2, 32, 40, 64, Layout::Bshd, false)));
    assert!(!uses_tensor_cores::<bf16>(&shape(4, 2, 32, 40, 256, Layout::Bhsd, false)));
}

/// A custom `scale` reaches the kernels (tensor-core and portable paths) and the reference:
/// the H100 run of the sm_90 path failed at `scale: Some(0.05)` because the reference used
/// `1/sqrt(d)` while the kernel (rightly) used 0.05.
#[test]
fn a_custom_scale_is_applied_by_every_path_and_by_the_reference() {
    let s = Attention { scale: Some(0.05), ..shape(2, 2, 32, 32, 64, Layout::Bhsd, false) };
    check::<bf16>(s, 2e-2);
    check::<f16>(Attention { layout: Layout::Bshd, ..s }, 4e-3);
}

#[test]
fn attention_refuses_unsupported_shapes_and_short_buffers() {
    let e = CpuExecutor::new();
    let s = shape(4, 2, 3, 3, 64, Layout::Bhsd, false);
    let q = vec![0.0f32; s.q_len()];
    let kv = vec![0.0f32; s.kv_len()];
    let (mut out, mut lse) = (vec![0.0f32; s.q_len()], vec![0.0f32; s.q_rows()]);
    let err = cpu::attention_forward(&e, &q, &kv[1..], &kv, &mut out, &mut lse, s).unwrap_err();
    assert!(matches!(err, KernelsError::Shape { operand: "k", .. }), "{err}");
    assert!(err.to_string().contains("heads_kv 2"), "{err}");
    let err = cpu::attention_forward(&e, &q, &kv, &kv, &mut out, &mut lse[1..], s).unwrap_err();
    assert!(matches!(err, KernelsError::Shape { operand: "lse", .. }), "{err}");
    let err = cpu::attention_forward(&e, &q, &kv, &kv, &mut out, &mut lse, Attention { heads_kv: 3, ..s }).unwrap_err();
    assert!(matches!(err, KernelsError::Unsupported { parameter: "heads_kv", .. }), "{err}");
    let err = cpu::attention_forward(&e, &q, &kv, &kv, &mut out, &mut lse, Attention { head_dim: 80, ..s }).unwrap_err();
    assert!(matches!(err, KernelsError::Unsupported { parameter: "head_dim", .. }), "{err}");
}

/// The sm_90 forward's schedules offered for a shape (`hopper_forward_instances`, which
/// `attention_forward_sm90` accepts and `bench_attention` times with `BENCH_FWD_ALL=1`): the
/// pick first, then only instances of the same head dimension and mask, never a `_serial`
/// one, the pick's twin among them; none for a shape the sm_90 path refuses.
#[test]
fn s14_forward_instances_are_the_shapes_schedules() {
    use ferrocuda_kernels::attention::{hopper_forward_instances, hopper_kernel, hopper_kernels};
    for (head_dim, causal) in [(64, false), (64, true), (128, false), (128, true)] {
        for seq in [512, 1000, 2048, 4096, 8192] {
            let a = shape(2, 2, seq, seq, head_dim, Layout::Bhsd, causal);
            let names = hopper_forward_instances::<bf16>(&a, 90);
            assert_eq!(names.first().copied(), hopper_kernel::<bf16>(&a, 90), "{a:?}");
            assert!(names.len() >= 5, "{a:?}: {names:?}");
            assert!(names.contains(&hopper_kernels::<bf16>(&a, 90).unwrap()[1]), "{a:?}: {names:?}");
            let prefix = format!("attention_d{head_dim}_");
            for name in &names {
                let rest = name.strip_prefix("attention_").unwrap();
                assert!(name.starts_with(&prefix) || *name == format!("attention_d{head_dim}"), "{a:?}: {name}");
                assert_eq!(rest.contains("causal"), causal, "{a:?}: {name}");
                assert!(!name.ends_with("_serial"), "{a:?}: {name}");
            }
            let mut unique = names.clone();
            unique.sort();
            unique.dedup();
            assert_eq!(unique.len(), names.len(), "{a:?}: {names:?}");
        }
    }
    // D 256 (session 22): the overlapped schedule and its serial form a mask, no twin.
    for causal in [false, true] {
        let a = shape(2, 2, 512, 512, 256, Layout::Bhsd, causal);
        let want = if causal { ["attention_d256_causal", "attention_d256_causal_serial"] } else { ["attention_d256", "attention_d256_serial"] };
        assert_eq!(hopper_forward_instances::<bf16>(&a, 90), want, "{a:?}");
        assert_eq!(hopper_kernels::<bf16>(&a, 90), None, "{a:?}");
    }
    assert!(hopper_forward_instances::<bf16>(&shape(2, 2, 512, 512, 96, Layout::Bhsd, false), 90).is_empty());
    assert!(hopper_forward_instances::<bf16>(&shape(2, 2, 512, 512, 128, Layout::Bhsd, false), 80).is_empty());
}

/// Which shapes the sm_90 kernels take (no GPU needed: the choice is the shape's and the
/// architecture's); everything else goes to the tensor-core or portable path.
#[test]
fn the_hopper_kernels_take_bf16_bhsd_d64_d128_self_attention_on_sm_90_only() {
    use ferrocuda_kernels::attention::hopper_kernel;
    let base = shape(4, 4, 1000, 1000, 128, Layout::Bhsd, false);
    assert_eq!(hopper_kernel::<bf16>(&base, 90), Some("attention_d128_pingpong_persistent_chain_ostg"));
    assert_eq!(hopper_kernel::<bf16>(&Attention { seq_q: 1100, seq_kv: 1100, ..base }, 90), Some("attention_d128_pingpong"));
    assert_eq!(hopper_kernel::<bf16>(&Attention { causal: true, seq_q: 4096, seq_kv: 4096, ..base }, 90), Some("attention_d128_causal_pingpong_s3"));
    // D 256 (session 22): one schedule whatever the length.
    for seq in [1, 100, 1000, 4096, 16384] {
        let d256 = Attention { head_dim: 256, seq_q: seq, seq_kv: seq, ..base };
        assert_eq!(hopper_kernel::<bf16>(&d256, 90), Some("attention_d256"));
        assert_eq!(hopper_kernel::<bf16>(&Attention { causal: true, ..d256 }, 90), Some("attention_d256_causal"));
    }
    let refused = [
        Attention { layout: Layout::Bshd, ..base },
        Attention { heads_kv: 2, ..base },
        Attention { seq_kv: 999, ..base },
        Attention { head_dim: 96, ..base },
        Attention { head_dim: 256, layout: Layout::Bshd, ..base },
        Attention { head_dim: 256, heads_kv: 2, ..base },
        Attention { batch: 70_000, ..base },
    ];
    for s in refused {
        assert_eq!(hopper_kernel::<bf16>(&s, 90), None, "{s:?}");
    }
    assert_eq!(hopper_kernel::<bf16>(&base, 80), None);
    assert_eq!(hopper_kernel::<bf16>(&base, 100), None);
    assert_eq!(hopper_kernel::<f16>(&base, 90), None);
    assert_eq!(hopper_kernel::<f32>(&base, 90), None);
}

/// The tensor-core backward (`mma.sync`, three launches) against f64: both layouts, causal or
/// not, grouped-query heads, sequence lengths that are not multiples of the 64-row blocks or
/// the 16-row warp tiles, unequal `seq_q` / `seq_kv`, head dims 64 and 128, bf16 and f16.
#[test]
fn the_tensor_core_backward_matches_f64_in_both_layouts_causal_or_not_with_grouped_heads_and_ragged_lengths() {
    use ferrocuda_kernels::attention::backward_uses_tensor_cores;
    let cases = [
        shape(4, 2, 70, 70, 64, Layout::Bhsd, true),
        shape(4, 2, 70, 70, 64, Layout::Bshd, false),
        shape(2, 1, 33, 81, 64, Layout::Bshd, true),
        shape(2, 2, 81, 33, 128, Layout::Bhsd, true),
        shape(2, 2, 17, 65, 128, Layout::Bshd, false),
    ];
    for s in cases {
        assert!(backward_uses_tensor_cores::<bf16>(&s) && backward_uses_tensor_cores::<f16>(&s), "{s:?} should take the tensor cores");
        check::<bf16>(s, 2e-2);
        check::<f16>(s, 4e-3);
    }
    assert!(!backward_uses_tensor_cores::<f32>(&cases[0]));
    assert!(!backward_uses_tensor_cores::<bf16>(&shape(2, 2, 16, 16, 32, Layout::Bhsd, false)));
    assert!(!backward_uses_tensor_cores::<bf16>(&shape(2, 2, 16, 16, 256, Layout::Bhsd, false)));
}

/// No queries: the tensor-core backward writes zero dK and dV (its dK/dV blocks see no query
/// rows); no keys: zero dQ.
#[test]
fn the_tensor_core_backward_writes_zero_gradients_when_a_side_is_empty() {
    let e = CpuExecutor::new();
    for (seq_q, seq_kv) in [(0, 20), (20, 0)] {
        let s = shape(2, 1, seq_q, seq_kv, 64, Layout::Bhsd, false);
        let (q, _) = input::<bf16>(s.q_len(), 1, 1.0);
        let (kv, _) = input::<bf16>(s.kv_len(), 2, 1.0);
        let lse = vec![0.0f32; s.q_rows()];
        let nan = bf16::from_f32(f32::NAN);
        let (mut dq, mut dk, mut dv) = (vec![nan; s.q_len()], vec![nan; s.kv_len()], vec![nan; s.kv_len()]);
        cpu::attention_backward(&e, cpu::Backward { q: &q, k: &kv, v: &kv, out: &q, dout: &q, lse: &lse, dq: &mut dq, dk: &mut dk, dv: &mut dv }, s).unwrap();
        assert!(dq.iter().chain(&dk).chain(&dv).all(|x| x.to_f32() == 0.0), "{s:?}");
    }
}

/// The tensor-core backward stages rows with 16-byte `cp.async` copies only where a row chunk
/// is 16-byte aligned; views that start one element in take the element-wise path and must
/// give the same gradients, bit for bit.
#[test]
fn the_tensor_core_backward_gives_the_same_gradients_on_misaligned_views() {
    let e = CpuExecutor::new();
    let s = shape(2, 1, 40, 37, 64, Layout::Bshd, true);
    let (q, _) = input::<bf16>(s.q_len(), 31, 1.0);
    let (k, _) = input::<bf16>(s.kv_len(), 32, 1.0);
    let (v, _) = input::<bf16>(s.kv_len(), 33, 1.0);
    let (dout, _) = input::<bf16>(s.q_len(), 34, 1.0);
    let (mut out, mut lse) = (vec![bf16::ZERO; s.q_len()], vec![0.0f32; s.q_rows()]);
    cpu::attention_forward(&e, &q, &k, &v, &mut out, &mut lse, s).unwrap();
    let run = |q: &[bf16], k: &[bf16], v: &[bf16], out: &[bf16], dout: &[bf16]| {
        let (mut dq, mut dk, mut dv) = (vec![bf16::ZERO; s.q_len()], vec![bf16::ZERO; s.kv_len()], vec![bf16::ZERO; s.kv_len()]);
        cpu::attention_backward(&e, cpu::Backward { q, k, v, out, dout, lse: &lse, dq: &mut dq, dk: &mut dk, dv: &mut dv }, s).unwrap();
        (dq, dk, dv)
    };
    let shifted = |x: &[bf16]| [&[bf16::ONE][..], x].concat();
    let aligned = run(&q, &k, &v, &out, &dout);
    let (q1, k1, v1, out1, dout1) = (shifted(&q), shifted(&k), shifted(&v), shifted(&out), shifted(&dout));
    let misaligned = run(&q1[1..], &k1[1..], &v1[1..], &out1[1..], &dout1[1..]);
    assert!(aligned.0.iter().any(|x| x.to_f32() != 0.0), "dq should not be all zeros");
    assert_eq!(aligned, misaligned);
}

/// The worst relative error of `exp2_poly::<DEGREE>` against `2^x` in f64 over the softmax's
/// range where `2^x` is a normal f32 (`-126 <= x <= 0`): every f32 in `[-1, 0]` whose bits
/// are a multiple of 64 (about 265k values, the polynomial's whole reduced range twice over),
/// then 4M points spread evenly over `[-126, 0]`.
fn exp2_poly_worst<const DEGREE: usize>() -> f64 {
    use ferrocuda_kernels_hopper::attention::exp2_poly;
    let mut worst = 0.0f64;
    let mut check = |x: f32| {
        let want = (x as f64).exp2();
        let got = exp2_poly::<DEGREE>(x) as f64;
        worst = worst.max(((got - want) / want).abs());
    };
    let mut bits = (-1.0f32).to_bits();
    while bits >= 0x8000_0000 {
        check(f32::from_bits(bits));
        bits = bits.wrapping_sub(64);
    }
    check(0.0);
    let n = 1 << 22;
    for i in 0..=n {
        check(-126.0 * i as f32 / n as f32);
    }
    worst
}

/// Issue 31's polynomial `2^x` (the `_poly` attention kernels' FMA-pipe exponentials):
/// relative error within the documented bound for degrees 3, 4 and 5 over `[-126, 0]`; `+0.0`
/// exactly for `x <= -127`, `-inf` (a masked score) and NaN; between `-127` and `-126` (where
/// `ex2.approx.ftz` flushes to 0) non-negative and below `2^-126`; and the pairs it takes are
/// `poly` of the 16, spread over the row.
#[test]
fn s15_exp2_poly_is_within_its_bound_and_zero_below_the_range() {
    use ferrocuda_kernels_hopper::attention::{EXP2_POLY_DEGREE, exp2_poly, exp2_poly_pair};
    let worst = [exp2_poly_worst::<3>(), exp2_poly_worst::<4>(), exp2_poly_worst::<5>()];
    eprintln!("exp2_poly worst relative error on [-126, 0], degree 3 / 4 / 5: {:.3e} / {:.3e} / {:.3e}", worst[0], worst[1], worst[2]);
    assert!(worst[0] < 1.1e-4, "degree 3: {:.3e}", worst[0]);
    assert!(worst[1] < 4e-6, "degree 4: {:.3e}", worst[1]);
    assert!(worst[2] < 5e-7, "degree 5: {:.3e}", worst[2]);
    assert_eq!(EXP2_POLY_DEGREE, 3, "the bound above the kernels rely on");
    for x in [-127.0f32, -127.5, -128.0, -150.0, -1e30, f32::MIN, f32::NEG_INFINITY, f32::NAN] {
        assert_eq!(exp2_poly::<EXP2_POLY_DEGREE>(x).to_bits(), 0, "exp2_poly({x}) must be +0.0");
    }
    let n = 100_000;
    for i in 0..=n {
        let x = -127.0 + i as f32 / n as f32;
        let got = exp2_poly::<EXP2_POLY_DEGREE>(x);
        assert!((0.0..=f32::MIN_POSITIVE).contains(&got) || x >= -126.0, "exp2_poly({x}) = {got:e}");
    }
    assert_eq!(exp2_poly::<EXP2_POLY_DEGREE>(0.0), 1.0);
    for poly in 0..=16u32 {
        let taken: Vec<u32> = (0..16).filter(|&i| exp2_poly_pair(i, poly)).collect();
        assert_eq!(taken.len() as u32, poly, "poly {poly}: {taken:?}");
    }
    assert_eq!((0..16).filter(|&i| exp2_poly_pair(i, 4)).collect::<Vec<_>>(), [3, 7, 11, 15]);
}
