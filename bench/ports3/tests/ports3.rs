//! The eight first-try ports of issue 30's third held-out port on the CPU executor, each
//! against its CPU reference (tests/common). No GPU needed.

mod common;

use common::*;
use ferrocuda::LaunchConfig;
use ferrocuda::cpu::CpuExecutor;
use ferrocuda_ports3 as vllm;
use ferrocuda_ports3_llmc as llmc;
use half::bf16;
use std::num::NonZeroU32;

fn x128(v: &[bf16]) -> Vec<llmc::X128> {
    v.chunks(8).map(|c| llmc::X128 { v: c.try_into().unwrap() }).collect()
}
fn v128(v: &[bf16]) -> Vec<vllm::X128> {
    v.chunks(8).map(|c| vllm::X128 { v: c.try_into().unwrap() }).collect()
}
fn flat(v: &[llmc::X128]) -> Vec<bf16> {
    v.iter().flat_map(|x| x.v).collect()
}

#[test]
fn encoder_forward_kernel3_matches_the_reference() {
    let (b, t, c, vocab) = (2usize, 8usize, 64usize, 16usize);
    let mut rng = Rng::new(1);
    let inp: Vec<i32> = (0..b * t).map(|_| (rng.next_u32() % vocab as u32) as i32).collect();
    let wte = rng.bf16s(vocab * c, 1.0);
    let wpe = rng.bf16s(t * c, 1.0);
    let mut out = vec![llmc::X128::default(); b * t * c / 8];
    let n = b * t * c;
    let config = LaunchConfig::new((n as u32).div_ceil(256 * 8), 256);
    llmc::encoder_forward_kernel3::launch_cpu(
        &CpuExecutor::new(),
        config,
        &mut out,
        &inp,
        &x128(&wte),
        &x128(&wpe),
        NonZeroU32::new(t as u32).unwrap(),
        NonZeroU32::new(c as u32 / 8).unwrap(),
    )
    .unwrap();
    assert_eq!(flat(&out), encoder_forward(&inp, &wte, &wpe, t, c));
}

#[test]
fn global_norm_squared_kernel_matches_the_reference() {
    let (count, stride, slices, gx) = (5000usize, 5008usize, 2usize, 3u32);
    let mut rng = Rng::new(2);
    let data = rng.bf16s(stride * slices, 1.0);
    let mut out = vec![1.0f32; gx as usize * slices];
    let config = LaunchConfig::new((gx, slices as u32), 512);
    llmc::global_norm_squared_kernel::launch_cpu(&CpuExecutor::new(), config, &mut out, &data, count as u64, stride as u64).unwrap();
    let mut fixed = vec![1.0f32; gx as usize * slices];
    llmc::global_norm_squared_kernel_fixed::launch_cpu(&CpuExecutor::new(), config, &mut fixed, &data, count as u64, stride as u64).unwrap();
    assert_eq!(fixed, out, "the fixed variant sums the same values in the same order");
    let want = norm_squared(&data, count, stride, slices);
    for y in 0..slices {
        let got: f64 = out[y * gx as usize..(y + 1) * gx as usize].iter().map(|&v| v as f64 - 1.0).sum();
        assert!((got - want[y]).abs() <= 1e-5 * want[y], "slice {y}: {got} vs {}", want[y]);
    }
}

#[test]
fn softmax_forward_kernel5_matches_the_reference() {
    let (n, t) = (3usize, 64usize);
    let mut rng = Rng::new(3);
    let inp = rng.bf16s(n * t * t, 4.0);
    let inp4: Vec<llmc::X4> = inp.chunks(4).map(|c| llmc::X4 { v: c.try_into().unwrap() }).collect();
    let sentinel = bf16::from_f32(-7.0);
    let mut out = vec![sentinel; n * t * t];
    let inv_temperature = 0.125;
    let config = LaunchConfig::new(((n * t * 32) as u32).div_ceil(256), 256);
    llmc::softmax_forward_kernel5::launch_cpu(&CpuExecutor::new(), config, &mut out, inv_temperature, &inp4, t as u32).unwrap();
    let mut fixed = vec![sentinel; n * t * t];
    llmc::softmax_forward_kernel5_fixed::launch_cpu(&CpuExecutor::new(), config, &mut fixed, inv_temperature, &inp4, t as u32).unwrap();
    assert_eq!(fixed, out, "the fixed variant computes the same values in the same order");
    let mut prefix = vec![sentinel; n * t * t];
    llmc::softmax_forward_kernel5_prefix::launch_cpu(&CpuExecutor::new(), config, &mut prefix, inv_temperature, &inp4, t as u32).unwrap();
    assert_eq!(prefix, out, "session 14's prefix variant: the same values, the columns past the diagonal untouched");
    let mut want = vec![sentinel; n * t * t];
    causal_softmax(&inp, &mut want, inv_temperature, t);
    let (err, at) = max_rel(out.iter().map(|&v| f(v)), want.iter().map(|&v| f(v)), 1e-3);
    assert!(err <= 1.0 / 128.0, "max rel err {err} at {at}: {} vs {}", out[at], want[at]);
}

fn classifier(v: usize, p: usize) {
    let rows = 4usize;
    let mut rng = Rng::new(4);
    let logits = rng.bf16s(rows * p, 6.0);
    let targets: Vec<i32> = (0..rows).map(|_| (rng.next_u32() % v as u32) as i32).collect();
    let sentinel = bf16::from_f32(-9.0);
    let mut dlogits = vec![llmc::X128 { v: [sentinel; 8] }; rows * p / 8];
    let mut losses = vec![0.5f32; rows];
    let dloss = 1.0 / rows as f32;
    let config = LaunchConfig::new(rows as u32, 1024);
    llmc::fused_classifier_kernel5::launch_cpu(&CpuExecutor::new(), config, &x128(&logits), &mut dlogits, &mut losses, dloss, &targets, v as u32, p as u32 / 8)
        .unwrap();
    let mut want_losses = vec![0.5f32; rows];
    let mut want = vec![sentinel; rows * p];
    fused_classifier(&logits, &mut want_losses, &mut want, dloss, &targets, v, p);
    let got = flat(&dlogits);
    let (err, at) = max_rel(got.iter().map(|&v| f(v)), want.iter().map(|&v| f(v)), 1e-4);
    assert!(err <= 1.0 / 64.0, "dlogits: max rel err {err} at {at}: {} vs {}", got[at], want[at]);
    let (err, at) = max_rel(losses.iter().copied(), want_losses.iter().copied(), 1e-3);
    assert!(err <= 1e-3, "losses: max rel err {err} at {at}");
    // The fixed variant (in place over the logits, `InPlaceRows<Reversed>`; rows in reverse
    // block order) computes every row as the first try does:
    // the same bits where the first try writes, the logits untouched past them.
    let mut fixed = x128(&logits);
    let mut fixed_losses = vec![0.5f32; rows];
    llmc::fused_classifier_kernel5_fixed::launch_cpu(&CpuExecutor::new(), config, &mut fixed, &mut fixed_losses, dloss, &targets, v as u32, p as u32 / 8)
        .unwrap();
    let fixed = flat(&fixed);
    let written = v.next_multiple_of(8).min(p);
    for row in 0..rows {
        assert_eq!(fixed[row * p..row * p + written], got[row * p..row * p + written], "fixed: the same gradient (row {row})");
        assert_eq!(fixed[row * p + written..(row + 1) * p], logits[row * p + written..(row + 1) * p], "fixed: the padding untouched (row {row})");
    }
    assert_eq!(fixed_losses, losses, "fixed: the same losses");
    // Session 14's paired variant (`max_then_sum_all`, 2 barriers for the two reductions): the
    // same folds in the same order, so the same bits as the fixed variant.
    let mut paired = x128(&logits);
    let mut paired_losses = vec![0.5f32; rows];
    llmc::fused_classifier_kernel5_paired::launch_cpu(&CpuExecutor::new(), config, &mut paired, &mut paired_losses, dloss, &targets, v as u32, p as u32 / 8)
        .unwrap();
    assert_eq!(flat(&paired), fixed, "paired: the fixed variant's gradient and padding");
    assert_eq!(paired_losses, losses, "paired: the same losses");
}

#[test]
fn fused_classifier_kernel5_matches_the_reference() {
    classifier(1000, 1000);
}

#[test]
fn fused_classifier_kernel5_handles_a_vocabulary_that_is_not_a_multiple_of_8() {
    classifier(1003, 1024);
}

/// The benchmark's small size (`PORTS3_SMALL=1`: V 1003 padded to 1008) on the CPU executor.
#[test]
fn fused_classifier_kernel5_at_the_benchmarks_small_size() {
    classifier(1003, 1008);
}

/// Which `layernorm_backward_kernel10` to run: the first try, the fix rounds' variant, or
/// session 15's variant over `f128` shared regions.
#[derive(Clone, Copy, PartialEq)]
enum Ln {
    FirstTry,
    Fixed,
    Regions,
}

/// Runs one variant, checks it against the reference and returns `(dinp, dbias, dweight)`'s
/// bits.
fn run_layernorm_backward(variant: Ln, grid: u32) -> (Vec<u16>, Vec<u16>, Vec<u16>) {
    run_layernorm_backward_in(variant, grid, 512)
}

/// [`run_layernorm_backward`] in blocks of `block` threads (llm.c launches 512; the kernels'
/// launch bounds allow up to 512).
fn run_layernorm_backward_in(variant: Ln, grid: u32, block: u32) -> (Vec<u16>, Vec<u16>, Vec<u16>) {
    let c = 320usize;
    let rows = (grid * block / 32) as usize * 2; // every warp takes two rows
    let mut rng = Rng::new(5);
    let dout = rng.bf16s(rows * c, 1.0);
    let inp = rng.bf16s(rows * c, 2.0);
    let weight = rng.bf16s(c, 1.0);
    let dinp = rng.bf16s(rows * c, 0.5);
    let dbias = rng.bf16s(c, 0.5);
    let dweight = rng.bf16s(c, 0.5);
    let mean: Vec<f32> = (0..rows).map(|_| rng.uniform() * 0.1).collect();
    let rstd: Vec<f32> = (0..rows).map(|_| 1.0 + rng.uniform() * 0.2).collect();
    let rounded_c = c.div_ceil(256) * 256;
    let shared = ((2 * rounded_c + 2 * (block as usize - 32) * 4) * 4) as u32;
    let mut dinp_k = x128(&dinp);
    let mut scratch = vec![llmc::Partial::default(); grid as usize * c / 4];
    let mut counter = vec![0u32];
    let config = LaunchConfig::new(grid, block).with_shared_bytes(shared);
    let (got_dbias, got_dweight): (Vec<bf16>, Vec<bf16>) = if variant != Ln::FirstTry {
        // The fixed variants' dbias/dweight are `x128`s that the last block writes
        // (`DisjointSlice<X128, ByLastBlock>`).
        let (mut dbias_k, mut dweight_k) = (x128(&dbias), x128(&dweight));
        let launch =
            if variant == Ln::Fixed { llmc::layernorm_backward_kernel10_fixed::launch_cpu } else { llmc::layernorm_backward_kernel10_regions::launch_cpu };
        launch(
            &CpuExecutor::new(),
            config,
            &mut dinp_k,
            &mut dweight_k,
            &mut dbias_k,
            &mut scratch,
            &mut counter,
            &x128(&dout),
            &x128(&inp),
            &x128(&weight),
            &mean,
            &rstd,
            rows as u32,
            c as u32 / 8,
            c as u32 / 4,
        )
        .unwrap();
        (flat(&dbias_k), flat(&dweight_k))
    } else {
        let mut dbias_k: Vec<u32> = dbias.chunks(2).map(|p| p[0].to_bits() as u32 | (p[1].to_bits() as u32) << 16).collect();
        let mut dweight_k: Vec<u32> = dweight.chunks(2).map(|p| p[0].to_bits() as u32 | (p[1].to_bits() as u32) << 16).collect();
        llmc::layernorm_backward_kernel10::launch_cpu(
            &CpuExecutor::new(),
            config,
            &mut dinp_k,
            &mut dweight_k,
            &mut dbias_k,
            &mut scratch,
            &mut counter,
            &x128(&dout),
            &x128(&inp),
            &x128(&weight),
            &mean,
            &rstd,
            rows as u32,
            c as u32 / 8,
            c as u32 / 4,
        )
        .unwrap();
        let unpair = |v: &[u32]| -> Vec<bf16> { v.iter().flat_map(|&w| [bf16::from_bits(w as u16), bf16::from_bits((w >> 16) as u16)]).collect() };
        (unpair(&dbias_k), unpair(&dweight_k))
    };
    assert_eq!(counter[0], 0, "the last block resets the counter");
    let want = layernorm_backward(&dinp, &dbias, &dweight, &dout, &inp, &weight, &mean, &rstd, c);
    let (err, at) = max_rel(flat(&dinp_k).iter().map(|&v| f(v)), want.dinp.iter().copied(), 0.1);
    assert!(err <= 1.0 / 64.0, "dinp: max rel err {err} at {at}");
    let (err, at) = max_rel(got_dbias.iter().map(|&v| f(v)), want.dbias.iter().copied(), 1.0);
    assert!(err <= 1.0 / 64.0, "dbias: max rel err {err} at {at}");
    let (err, at) = max_rel(got_dweight.iter().map(|&v| f(v)), want.dweight.iter().copied(), 1.0);
    assert!(err <= 1.0 / 64.0, "dweight: max rel err {err} at {at}");
    let bits = |v: &[bf16]| v.iter().map(|x| x.to_bits()).collect::<Vec<u16>>();
    (bits(&flat(&dinp_k)), bits(&got_dbias), bits(&got_dweight))
}

#[test]
fn layernorm_backward_kernel10_matches_the_reference() {
    run_layernorm_backward(Ln::FirstTry, 2);
}

/// Six blocks: the last block's `fold_column` takes four rows at once, then the remaining two.
#[test]
fn layernorm_backward_kernel10_with_six_blocks_matches_the_reference() {
    run_layernorm_backward(Ln::FirstTry, 6);
}

#[test]
fn layernorm_backward_kernel10_fixed_matches_the_reference() {
    run_layernorm_backward(Ln::Fixed, 6);
}

/// Session 15's variant over `f128` shared regions (`dynamic_shared_x4().carve`) is the fixed
/// variant's algorithm with other shared-memory handles: the same sums in the same order, so
/// the same bits, at several grid and block sizes (the last block's fold of four rows and of
/// the rest; warp 0's loop over 15, 7 and 2 other warps' slots).
#[test]
fn layernorm_backward_kernel10_regions_gives_the_fixed_variants_bits() {
    for (grid, block) in [(2, 512), (6, 512), (3, 256), (2, 96)] {
        let fixed = run_layernorm_backward_in(Ln::Fixed, grid, block);
        let regions = run_layernorm_backward_in(Ln::Regions, grid, block);
        assert!(fixed == regions, "grid {grid} x {block}: the regions variant's dinp/dbias/dweight differ from the fixed variant's");
    }
}

#[test]
fn merge_attn_states_kernel_matches_the_reference() {
    let (n, h, d) = (5usize, 3usize, 64usize);
    let mut rng = Rng::new(6);
    let p_out = rng.bf16s(n * h * d, 1.0);
    let s_out = rng.bf16s(n * h * d, 1.0);
    let mut p_lse: Vec<f32> = (0..h * n).map(|_| rng.uniform() * 5.0).collect();
    let s_lse: Vec<f32> = (0..h * n).map(|_| rng.uniform() * 5.0).collect();
    p_lse[4] = f32::INFINITY; // an empty prefix, written as +inf
    let mut out = vec![vllm::X128::default(); n * h * d / 8];
    let mut out_lse = vec![0.0f32; h * n];
    let threads = (n * h * d / 8) as u32;
    let config = LaunchConfig::new(threads.div_ceil(128), 128);
    vllm::merge_attn_states_kernel::launch_cpu(
        &CpuExecutor::new(),
        config,
        &mut out,
        &mut out_lse,
        &v128(&p_out),
        &p_lse,
        &v128(&s_out),
        &s_lse,
        n as u32,
        h as u32,
        d as u32,
    )
    .unwrap();
    let (want, want_lse) = merge_attn_states(&p_out, &p_lse, &s_out, &s_lse, n, h, d);
    let got: Vec<f32> = out.iter().flat_map(|x| x.v).map(f).collect();
    let (err, at) = max_rel(got, want, 0.05);
    assert!(err <= 1.0 / 128.0, "output: max rel err {err} at {at}");
    let (err, at) = max_rel(out_lse, want_lse, 1e-3);
    assert!(err <= 1e-5, "lse: max rel err {err} at {at}");
}

#[test]
fn reshape_and_cache_flash_kernel_matches_the_reference() {
    let (tokens, heads, head_size, block_size, blocks) = (6usize, 4usize, 16usize, 4usize, 3usize);
    let n = heads * head_size;
    let mut rng = Rng::new(7);
    let key = rng.bf16s(tokens * n, 1.0);
    let value = rng.bf16s(tokens * n, 1.0);
    let slots: Vec<i64> = vec![5, 0, -1, 11, 2, 7];
    let cache_len = blocks * block_size * n;
    let zero = bf16::from_f32(-3.0);
    let pairs = |v: &[bf16]| -> Vec<u32> { v.chunks(2).map(|p| p[0].to_bits() as u32 | (p[1].to_bits() as u32) << 16).collect() };
    let mut kc = pairs(&vec![zero; cache_len]);
    let mut vc = pairs(&vec![zero; cache_len]);
    let config = LaunchConfig::new(tokens as u32, n.min(512) as u32);
    vllm::reshape_and_cache_flash_kernel::launch_cpu(
        &CpuExecutor::new(),
        config,
        &pairs(&key),
        &pairs(&value),
        &mut kc,
        &mut vc,
        &slots,
        (block_size * n) as u32,
        n as u32,
        n as u32,
        heads as u32,
        NonZeroU32::new(head_size as u32).unwrap(),
        NonZeroU32::new(block_size as u32).unwrap(),
    )
    .unwrap();
    let mut wk = vec![zero; cache_len];
    let mut wv = vec![zero; cache_len];
    reshape_and_cache_flash(&key, &value, &mut wk, &mut wv, &slots, n);
    assert_eq!(kc, pairs(&wk));
    assert_eq!(vc, pairs(&wv));
}

fn quant(tokens: usize, hidden: usize) {
    let mut rng = Rng::new(8 + hidden as u64);
    let mut input = rng.bf16s(tokens * hidden, 3.0);
    input[hidden..2 * hidden].fill(bf16::ZERO); // an all-zero token: the minimum scale
    let mut out = vec![vllm::Fp8x16::default(); tokens * hidden / 16];
    let mut scales = vec![0.0f32; tokens];
    let config = LaunchConfig::new(tokens as u32, hidden.min(256) as u32);
    vllm::dynamic_per_token_scaled_fp8_quant_kernel::launch_cpu(&CpuExecutor::new(), config, &mut out, &mut scales, &v128(&input), &[], hidden as u32 / 16)
        .unwrap();
    let mut fixed = vec![vllm::Fp8x16::default(); tokens * hidden / 16];
    let mut fixed_scales = vec![0.0f32; tokens];
    vllm::dynamic_per_token_scaled_fp8_quant_kernel_fixed::launch_cpu(
        &CpuExecutor::new(),
        config,
        &mut fixed,
        &mut fixed_scales,
        &v128(&input),
        &[],
        hidden as u32 / 16,
    )
    .unwrap();
    assert_eq!(fixed, out, "the fixed variant's conversion gives c10's bits");
    assert_eq!(fixed_scales, scales);
    let (want_scales, want_q) = fp8_quant(&input, hidden);
    assert_eq!(scales, want_scales);
    let got: Vec<f32> = out.iter().flat_map(|q| q.v).map(fp8e4m3fn_to_f32).collect();
    for (i, (g, w)) in got.iter().zip(&want_q).enumerate() {
        assert_eq!(g, w, "value {i}: input {}", input[i]);
    }
}

#[test]
fn dynamic_per_token_scaled_fp8_quant_kernel_matches_the_reference() {
    quant(3, 512);
}

#[test]
fn dynamic_per_token_scaled_fp8_quant_kernel_with_a_small_block() {
    quant(3, 64);
}
