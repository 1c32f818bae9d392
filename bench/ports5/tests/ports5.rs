//! Issue 30's fifth held-out port on the CPU executor: every port (first try and fixed) against
//! the plain Rust reference of `ferrocuda_ports5::reference`, at small shapes with ragged
//! edges (a few seconds on two cores). The GPU side (ports against their nvcc twins) is
//! examples/ports5_bench.rs.

use ferrocuda::LaunchConfig;
use ferrocuda::cpu::CpuExecutor;
use ferrocuda::half::bf16;
use ferrocuda_ports5::reference as r;
use ferrocuda_ports5_llmc as llmc;
use ferrocuda_ports5_vllm as vllm;
use std::num::NonZeroU32;

/// A deterministic pseudo-random sequence in `[0, 1)` (an LCG: the tests need no crate).
fn noise(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (s >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect()
}

fn bf(v: &[f32]) -> Vec<bf16> {
    v.iter().map(|&x| bf16::from_f32(x)).collect()
}

fn ulps_bf16(a: bf16, b: bf16) -> u16 {
    (a.to_bits() as i16).abs_diff(b.to_bits() as i16)
}

fn x128s(v: &[bf16]) -> Vec<llmc::X128> {
    v.chunks_exact(8).map(|c| llmc::X128 { v: c.try_into().unwrap() }).collect()
}

#[test]
fn residual_forward_kernel2_adds_in_f32_and_rounds_once() {
    let n = 8 * 1000;
    let a = bf(&noise(1, n).iter().map(|x| x * 8.0 - 4.0).collect::<Vec<_>>());
    let b = bf(&noise(2, n).iter().map(|x| x * 8.0 - 4.0).collect::<Vec<_>>());
    let want = r::residual_forward(&a, &b);
    let (xa, xb) = (x128s(&a), x128s(&b));
    let mut out = vec![llmc::X128::default(); n / 8];
    llmc::residual_forward_kernel2::launch_cpu(&CpuExecutor::new(), LaunchConfig::for_elements(n / 8, 256), &mut out, &xa, &xb).unwrap();
    let got: Vec<bf16> = out.iter().flat_map(|x| x.v).collect();
    assert_eq!(got, want);
}

/// Probabilities (rows summing to about 1) and targets for `bt` rows of `v`.
fn probs_and_targets(bt: usize, v: usize) -> (Vec<f32>, Vec<i32>) {
    let probs: Vec<f32> = noise(3, bt * v).iter().map(|x| (x + 0.01) * 2.0 / v as f32).collect();
    let targets: Vec<i32> = noise(4, bt).iter().map(|x| (x * v as f32) as i32).collect();
    (probs, targets)
}

#[test]
fn crossentropy_forward_kernel1_is_minus_log_of_the_target_probability() {
    let (bt, v) = (333, 257);
    let (probs, targets) = probs_and_targets(bt, v);
    let want = r::crossentropy_forward(&probs, &targets, v);
    let mut losses = vec![0.0f32; bt];
    llmc::crossentropy_forward_kernel1::launch_cpu(&CpuExecutor::new(), LaunchConfig::for_elements(bt, 128), &mut losses, &probs, &targets, v as u32).unwrap();
    for (i, (g, w)) in losses.iter().zip(&want).enumerate() {
        assert!((g - w).abs() <= 1e-5 * w.abs(), "loss {i}: {g} vs {w}");
    }
}

#[test]
fn crossentropy_softmax_backward_kernel1_accumulates_in_place() {
    let (b, t, v) = (3, 37, 101);
    let (probs, targets) = probs_and_targets(b * t, v);
    let dlosses: Vec<f32> = noise(5, b * t);
    let start: Vec<f32> = noise(6, b * t * v);
    let mut want = start.clone();
    r::crossentropy_softmax_backward(&mut want, &dlosses, &probs, &targets, v);
    let mut got = start;
    let (tn, vn) = (NonZeroU32::new(t as u32).unwrap(), NonZeroU32::new(v as u32).unwrap());
    llmc::crossentropy_softmax_backward_kernel1::launch_cpu(
        &CpuExecutor::new(),
        LaunchConfig::for_elements(b * t * v, 256),
        &mut got,
        &dlosses,
        &probs,
        &targets,
        tn,
        vn,
    )
    .unwrap();
    assert_eq!(got, want);
}

#[test]
fn copy_and_cast_kernel_casts_each_slice_and_leaves_the_padding() {
    let (n, slices, sd, ss) = (1000usize, 3usize, 1024usize, 1010usize);
    let src: Vec<f32> = noise(7, ss * slices).iter().map(|x| x * 100.0 - 50.0).collect();
    let pad = bf16::from_f32(-7.0);
    let mut want = vec![pad; sd * slices];
    r::copy_and_cast(&mut want, &src, n, slices, sd, ss);
    let mut got = vec![pad; sd * slices];
    let config = LaunchConfig::new((n.div_ceil(512) as u32, slices as u32, 1), (512u32, 1, 1));
    llmc::copy_and_cast_kernel::launch_cpu(&CpuExecutor::new(), config, &mut got, &src, n as u32, sd as u32, ss as u32).unwrap();
    assert_eq!(got, want);
}

/// After the port (issue 30): the same copy through `GridSlices`; the launchers refuse a slice
/// longer than the stride and a grid with more slices than the buffer holds, writing nothing.
#[test]
fn p30_copy_and_cast_kernel_slices_casts_each_slice_and_checks_the_slices_at_launch() {
    let (n, slices, sd, ss) = (1000usize, 3usize, 1024usize, 1010usize);
    let src: Vec<f32> = noise(7, ss * slices).iter().map(|x| x * 100.0 - 50.0).collect();
    let pad = bf16::from_f32(-7.0);
    let mut want = vec![pad; sd * slices];
    r::copy_and_cast(&mut want, &src, n, slices, sd, ss);
    let config = LaunchConfig::new((n.div_ceil(512) as u32, slices as u32, 1), (512u32, 1, 1));
    // The buffer may end right after the last slice's `n` elements.
    let mut got = vec![pad; sd * (slices - 1) + n];
    llmc::copy_and_cast_kernel_slices::launch_cpu(&CpuExecutor::new(), config, &mut got, &src, n as u32, sd as u32, ss as u32).unwrap();
    assert_eq!(got[..], want[..got.len()]);
    let mut short = vec![pad; sd * (slices - 1) + n - 1];
    let error = llmc::copy_and_cast_kernel_slices::launch_cpu(&CpuExecutor::new(), config, &mut short, &src, n as u32, sd as u32, ss as u32).unwrap_err();
    assert!(error.to_string().contains("GridSlices"), "{error}");
    let error = llmc::copy_and_cast_kernel_slices::launch_cpu(&CpuExecutor::new(), config, &mut got, &src, sd as u32 + 1, sd as u32, ss as u32).unwrap_err();
    assert!(error.to_string().contains("at most `stride`"), "{error}");
    assert!(short.iter().all(|&v| v == pad), "a refused launch wrote");
    // 2-D blocks: refused (the slice is blockIdx.y).
    let error = llmc::copy_and_cast_kernel_slices::launch_cpu(
        &CpuExecutor::new(),
        LaunchConfig::new((2u32, 1, 1), (256u32, 2, 1)),
        &mut got,
        &src,
        n as u32,
        sd as u32,
        ss as u32,
    )
    .unwrap_err();
    assert!(error.to_string().contains("1-D"), "{error}");
}

#[test]
fn gelu_tanh_and_mul_kernel_is_within_one_bf16_ulp() {
    let (tokens, d) = (5, 300);
    let input = bf(&noise(8, tokens * 2 * d).iter().map(|x| x * 10.0 - 5.0).collect::<Vec<_>>());
    let want = r::gelu_tanh_and_mul(&input, d);
    let mut got = vec![bf16::ZERO; tokens * d];
    vllm::gelu_tanh_and_mul_kernel::launch_cpu(&CpuExecutor::new(), (tokens as u32, 128u32), &mut got, &input, d as u32).unwrap();
    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
        assert!(ulps_bf16(g, w) <= 1, "out[{i}]: {g} vs {w}");
    }
    let mut fixed = vec![bf16::ZERO; tokens * d];
    vllm::gelu_tanh_and_mul_kernel_fixed::launch_cpu(&CpuExecutor::new(), (tokens as u32, 128u32), &mut fixed, &input, d as u32).unwrap();
    for (i, (&g, &w)) in fixed.iter().zip(&want).enumerate() {
        assert!(ulps_bf16(g, w) <= 1, "fixed out[{i}]: {g} vs {w}");
    }
}

/// FP8 E4M3 bits as a value (for tolerances).
fn e4m3_value(bits: u8) -> f32 {
    let s = if bits & 0x80 != 0 { -1.0 } else { 1.0 };
    let (e, m) = (((bits >> 3) & 15) as i32, (bits & 7) as f32);
    s * if e == 0 { m / 8.0 * 2f32.powi(-6) } else { (1.0 + m / 8.0) * 2f32.powi(e - 7) }
}

#[test]
fn rms_norm_static_fp8_quant_kernel_matches_c10s_rounding() {
    let (tokens, hidden) = (6, 1000);
    let input = bf(&noise(9, tokens * hidden).iter().map(|x| x * 4.0 - 2.0).collect::<Vec<_>>());
    let weight = bf(&noise(10, hidden).iter().map(|x| x + 0.5).collect::<Vec<_>>());
    let (scale, eps) = (0.01f32, 1e-6f32);
    let want = r::rms_norm_static_fp8_quant(&input, &weight, scale, eps, hidden);
    let mut got = vec![0u8; tokens * hidden];
    vllm::rms_norm_static_fp8_quant_kernel::launch_cpu(
        &CpuExecutor::new(),
        (tokens as u32, 256u32),
        &mut got,
        &input,
        hidden as u32,
        &weight,
        &[scale],
        eps,
        tokens as u32,
        hidden as u32,
    )
    .unwrap();
    let mut exact = 0;
    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
        // The block sum's order differs from the reference's: one FP8 step at most.
        assert!((e4m3_value(g) - e4m3_value(w)).abs() <= e4m3_value(w).abs() / 8.0 + 1e-3, "out[{i}]: {g:#x} vs {w:#x}");
        exact += (g == w) as usize;
    }
    assert!(exact * 100 >= got.len() * 99, "only {exact} of {} bits equal", got.len());
}

#[test]
fn apply_repetition_penalties_kernel_divides_positive_and_multiplies_the_rest() {
    let (seqs, vocab) = (5usize, 1000usize);
    let logits: Vec<f32> = noise(11, seqs * vocab).iter().map(|x| x * 20.0 - 10.0).collect();
    let prompt: Vec<u8> = noise(12, seqs * vocab).iter().map(|&x| (x < 0.1) as u8).collect();
    let output: Vec<u8> = noise(13, seqs * vocab).iter().map(|&x| (x < 0.05) as u8).collect();
    let penalties: Vec<f32> = (0..seqs).map(|s| 1.0 + 0.25 * s as f32).collect();
    let mut want = logits.clone();
    r::apply_repetition_penalties(&mut want, &prompt, &output, &penalties, vocab);
    let mut got = logits;
    let config = LaunchConfig::new((vocab.div_ceil(256) as u32, seqs as u32, 1), (256u32, 1, 1));
    vllm::apply_repetition_penalties_kernel::launch_cpu(&CpuExecutor::new(), config, &mut got, &prompt, &output, &penalties, vocab as u32).unwrap();
    assert_eq!(got, want);
}

#[test]
fn apply_repetition_penalties_on_the_sources_grid_tiles_and_unchecked() {
    // Two tiles of 8192 per row and a ragged last one; the unchecked variant as vLLM launches it.
    let (seqs, vocab) = (3usize, 2 * vllm::PENALTY_TILE as usize + 1000);
    let logits: Vec<f32> = noise(15, seqs * vocab).iter().map(|x| x * 20.0 - 10.0).collect();
    let prompt: Vec<u8> = noise(16, seqs * vocab).iter().map(|&x| (x < 0.1) as u8).collect();
    let output: Vec<u8> = noise(17, seqs * vocab).iter().map(|&x| (x < 0.05) as u8).collect();
    let penalties: Vec<f32> = (0..seqs).map(|s| 1.5 + 0.25 * s as f32).collect();
    let mut want = logits.clone();
    r::apply_repetition_penalties(&mut want, &prompt, &output, &penalties, vocab);
    let mut tiles = logits.clone();
    let grid = (seqs as u32, (vocab as u32).div_ceil(vllm::PENALTY_TILE), 1);
    let config = LaunchConfig::new(grid, (vllm::PENALTY_THREADS, 1, 1));
    vllm::apply_repetition_penalties_kernel_tiles::launch_cpu(&CpuExecutor::new(), config, &mut tiles, &prompt, &output, &penalties, vocab as u32).unwrap();
    assert_eq!(tiles, want);
    let (tile_num, mut unchecked) = (4usize, logits);
    let tile_size = vocab.div_ceil(tile_num);
    let config = LaunchConfig::new((seqs as u32, tile_num as u32, 1), (256u32, 1, 1));
    vllm::apply_repetition_penalties_kernel_unchecked::launch_cpu(
        &CpuExecutor::new(),
        config,
        &mut unchecked,
        &prompt,
        &output,
        &penalties,
        vocab as u32,
        tile_size as u32,
    )
    .unwrap();
    assert_eq!(unchecked, want);
}

/// The row-tile variant (`DisjointSlice<f32, RowTiles>`, issue 30's ports5 finding 3) on
/// vLLM's own launch: run-time tiles that do not divide the row, more tiles than the row needs
/// (the last blocks own nothing), more threads than a tile, a tile of one column; and the
/// launches the partition refuses (a 2-D block, a 3-D grid), with the error that names it.
#[test]
fn p30_apply_repetition_penalties_rowtiles_on_vllms_grid() {
    let (seqs, vocab) = (3usize, 2 * 8192 + 1000);
    let logits: Vec<f32> = noise(15, seqs * vocab).iter().map(|x| x * 20.0 - 10.0).collect();
    let prompt: Vec<u8> = noise(16, seqs * vocab).iter().map(|&x| (x < 0.1) as u8).collect();
    let output: Vec<u8> = noise(17, seqs * vocab).iter().map(|&x| (x < 0.05) as u8).collect();
    let penalties: Vec<f32> = (0..seqs).map(|s| 1.5 + 0.25 * s as f32).collect();
    let mut want = logits.clone();
    r::apply_repetition_penalties(&mut want, &prompt, &output, &penalties, vocab);
    // (tiles in the grid, tile size, threads): vLLM's (ceil(vocab / tile), tile, min(tile, 1024)),
    // a grid with spare tiles, a block wider than its tile, one column per tile.
    for (tile_num, tile_size, threads) in [(4usize, vocab.div_ceil(4), 1024u32), (7, vocab.div_ceil(5), 256), (3, vocab.div_ceil(3), 8192), (vocab, 1, 32)] {
        let mut got = logits.clone();
        let config = LaunchConfig::new((seqs as u32, tile_num as u32, 1), (threads.min(1024), 1, 1));
        vllm::apply_repetition_penalties_kernel_rowtiles::launch_cpu(
            &CpuExecutor::new(),
            config,
            &mut got,
            &prompt,
            &output,
            &penalties,
            vocab as u32,
            tile_size as u32,
        )
        .unwrap();
        assert_eq!(got, want, "{tile_num} tiles of {tile_size}, {threads} threads");
    }
    // A tile of 0 columns: every block owns nothing, nothing changes.
    let mut got = logits.clone();
    let config = LaunchConfig::new((seqs as u32, 2, 1), (64u32, 1, 1));
    vllm::apply_repetition_penalties_kernel_rowtiles::launch_cpu(&CpuExecutor::new(), config, &mut got, &prompt, &output, &penalties, vocab as u32, 0).unwrap();
    assert_eq!(got, logits);
    // A 2-D block would give threads (t, 0) and (t, 1) one column; a 3-D grid, blocks (x, y, 0)
    // and (x, y, 1) one tile: refused before any thread runs.
    for (grid, block) in [((3u32, 4u32, 1u32), (32u32, 2u32, 1u32)), ((3, 4, 2), (32, 1, 1))] {
        let mut got = logits.clone();
        let error = vllm::apply_repetition_penalties_kernel_rowtiles::launch_cpu(
            &CpuExecutor::new(),
            LaunchConfig::new(grid, block),
            &mut got,
            &prompt,
            &output,
            &penalties,
            vocab as u32,
            8192,
        )
        .unwrap_err();
        assert!(error.to_string().contains("RowTiles"), "{error}");
        assert_eq!(got, logits);
    }
}

#[test]
fn topk_gating_softmax_64_picks_the_top_k_of_each_row() {
    let (rows, k) = (40usize, 6usize);
    let input: Vec<f32> = noise(14, rows * 64).iter().map(|x| x * 8.0 - 4.0).collect();
    let (ww, wi, ws) = r::topk_gating_softmax(&input, 64, k, 0, 48);
    let f4: Vec<vllm::F4> = input.chunks_exact(4).map(|c| vllm::F4 { v: c.try_into().unwrap() }).collect();
    let (mut w, mut ix, mut src) = (vec![0.0f32; rows * k], vec![0i32; rows * k], vec![0i32; rows * k]);
    let grid = (rows as u32).div_ceil(vllm::ROWS_PER_CTA);
    vllm::topk_gating_softmax_64::launch_cpu(&CpuExecutor::new(), (grid, 128u32), &f4, &mut w, rows as u32, &mut ix, &mut src, k as u32, 0, 48).unwrap();
    assert_eq!(ix, wi);
    assert_eq!(src, ws);
    for (i, (g, r)) in w.iter().zip(&ww).enumerate() {
        assert!((g - r).abs() <= 1e-6, "weight {i}: {g} vs {r}");
    }
}

/// After the port (issue 30): vLLM's `finished` as `Option<&[u8]>`. `None` is the first try's
/// every-row-active result; given flags, a finished row's experts are `EXPERTS` (not routed),
/// its weights and source rows unchanged; a `finished` shorter than the rows counts as none.
#[test]
fn p30_topk_gating_softmax_64_reads_vllms_optional_finished() {
    let (rows, k) = (40usize, 6usize);
    let input: Vec<f32> = noise(15, rows * 64).iter().map(|x| x * 8.0 - 4.0).collect();
    let f4: Vec<vllm::F4> = input.chunks_exact(4).map(|c| vllm::F4 { v: c.try_into().unwrap() }).collect();
    let flags: Vec<u8> = (0..rows).map(|r| (r % 3 == 1) as u8).collect();
    let grid = (rows as u32).div_ceil(vllm::ROWS_PER_CTA);
    for (given, host) in [(None, None), (Some(&flags[..]), Some(&flags[..])), (Some(&flags[..rows - 1]), None)] {
        let (ww, wi, ws) = r::topk_gating_softmax_finished(&input, host, 64, k, 0, 48);
        let (mut w, mut ix, mut src) = (vec![0.0f32; rows * k], vec![0i32; rows * k], vec![0i32; rows * k]);
        vllm::topk_gating_softmax_64_finished::launch_cpu(
            &CpuExecutor::new(),
            (grid, 128u32),
            &f4,
            given,
            &mut w,
            rows as u32,
            &mut ix,
            &mut src,
            k as u32,
            0,
            48,
        )
        .unwrap();
        let label = given.map(<[u8]>::len);
        assert_eq!(ix, wi, "finished {label:?}");
        assert_eq!(src, ws, "finished {label:?}");
        for (i, (g, r)) in w.iter().zip(&ww).enumerate() {
            assert!((g - r).abs() <= 1e-6, "finished {label:?}: weight {i}: {g} vs {r}");
        }
    }
    // The flags changed something: a finished row reads 64 everywhere.
    let (_, with, _) = r::topk_gating_softmax_finished(&input, Some(&flags), 64, k, 0, 64);
    assert!(with[k..2 * k].iter().all(|&e| e == 64) && with[..k].iter().all(|&e| e < 64));
}

#[test]
fn tanh_nvcc_is_within_a_few_ulps_of_the_hosts_tanh() {
    for i in -40_000..=40_000 {
        let x = i as f32 / 2000.0;
        let (got, want) = (vllm::tanh_nvcc(x), x.tanh());
        assert!((got - want).abs() <= 4.0 * f32::EPSILON * want.abs().max(f32::MIN_POSITIVE), "tanh({x}) = {got}, want {want}");
    }
}
