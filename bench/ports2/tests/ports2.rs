//! The eight ports of issue 30's second held-out port on the CPU executor, each against its CPU
//! reference (`ports2::cases`), with the launch configuration of the public source (smaller
//! shapes). The GPU runs and the nvcc twins are in `examples/ports2_bench.rs`.

use std::num::NonZeroU32;

use ferrocuda::LaunchConfig;
use ferrocuda::cpu::CpuExecutor;
use ferrocuda_device::half::bf16;
use ports2::cases::{self, AdamW, Random};
use ports2::{KEY_COLS, NUM_HEADS, NUM_KV_HEADS, QUERY_COLS, Vec8};
use ports2_llmc::X128;

fn executor() -> CpuExecutor {
    CpuExecutor::new()
}

/// The first try and the fixed port have one signature: one check, given the kernel's module.
macro_rules! gelu_backward_inplace_case {
    ($kernel:path, $n:expr) => {{
        use $kernel as kernel;
        let n = $n;
        let mut random = Random::new(1);
        let inp = random.bf16s(n, -4.0, 4.0);
        let dout = random.bf16s(n, -1.0, 1.0);
        let expected = cases::gelu_backward(&inp, &dout);
        let mut d: Vec<X128> = cases::pack(&dout);
        let config = LaunchConfig::new((n / (128 * 8)) as u32, 128);
        kernel::launch_cpu(&executor(), config, &mut d, &cases::pack::<X128>(&inp)).unwrap();
        cases::check_close_bf16(stringify!($kernel), &cases::unpack(&d), &expected, 1e-3, 1e-2).unwrap();
    }};
}

#[test]
fn gelu_backward_inplace_matches_the_host() {
    gelu_backward_inplace_case!(ports2_llmc::gelu_backward_inplace_kernel, 128 * 8 * 4 + 128 * 8); // 5 blocks of 128 threads, 8 values each
}

#[test]
fn adamw_matches_the_host_including_the_stochastic_rounding() {
    let n = 3000; // not a multiple of 512: the guard
    let mut random = Random::new(2);
    let master = random.f32s(n, -1.0, 1.0);
    let params: Vec<bf16> = master.iter().map(|&x| bf16::from_f32(x)).collect();
    let grads = random.bf16s(n, -0.1, 0.1);
    let m = random.f32s(n, -0.01, 0.01);
    let v = random.f32s(n, 0.0, 1e-4);
    let h = AdamW::step3();
    let expected = cases::adamw(&master, &grads, &m, &v, h, 512);
    let (mut p, mut ms, mut mm, mut vv) = (params, master, m, v);
    let config = LaunchConfig::new(n.div_ceil(512) as u32, 512);
    ports2_llmc::adamw_kernel3::launch_cpu(
        &executor(),
        config,
        &mut p,
        &mut ms,
        &grads,
        &mut mm,
        &mut vv,
        h.lr,
        h.beta1,
        h.beta2,
        h.beta1_correction,
        h.beta2_correction,
        h.eps,
        h.weight_decay,
        h.grad_scale,
        h.seed,
    )
    .unwrap();
    cases::check_adamw(&p, &ms, &mm, &vv, &expected).unwrap();
}

/// One layernorm check of either port (same signature), at `n` rows of `c` columns.
macro_rules! layernorm_forward_case {
    ($kernel:path, $n:expr, $c:expr, $seed:expr) => {{
        use $kernel as kernel;
        let (n, c): (usize, usize) = ($n, $c);
        let mut random = Random::new($seed);
        let inp = random.bf16s(n * c, -3.0, 3.0);
        let weight = random.bf16s(c, 0.5, 1.5);
        let bias = random.bf16s(c, -0.5, 0.5);
        let (out_e, mean_e, rstd_e) = cases::layernorm(&inp, &weight, &bias, n, c);
        let mut out = vec![bf16::ZERO; n * c];
        let (mut mean, mut rstd) = (vec![0.0f32; n], vec![0.0f32; n]);
        let config = LaunchConfig::new((n * 32).div_ceil(256) as u32, 256);
        kernel::launch_cpu(&executor(), config, &mut out, &mut mean, &mut rstd, &inp, &weight, &bias, n as u32, c as u32).unwrap();
        cases::check_close("mean", &mean, &mean_e, 1e-5, 1e-4).unwrap();
        cases::check_close("rstd", &rstd, &rstd_e, 1e-5, 1e-4).unwrap();
        cases::check_close_bf16("out", &out, &out_e, 1e-2, 1e-2).unwrap();
    }};
}

#[test]
fn layernorm_forward_kernel3_matches_the_host() {
    layernorm_forward_case!(ports2_llmc::layernorm_forward_kernel3, 37, 768, 3);
}

#[test]
fn matmul_backward_bias_kernel9_partials_sum_to_the_column_sums() {
    let (b, t, oc) = (2usize, 64usize, 136usize); // 136: the last block of 64 columns is cut
    let grid_y = 2u32;
    let mut random = Random::new(4);
    let dout = random.bf16s(b * t * oc, -1.0, 1.0);
    let (sums, abs) = cases::column_sums(&dout, oc);
    let mut partials = vec![0.0f32; oc * grid_y as usize];
    let config = LaunchConfig::new((oc.div_ceil(64) as u32, grid_y), (4, 8, 32));
    ports2_llmc::matmul_backward_bias_kernel9::launch_cpu(&executor(), config, &mut partials, &cases::pack::<X128>(&dout), b as u32, t as u32, oc as u32)
        .unwrap();
    cases::check_bias_partials(&partials, oc, &sums, &abs).unwrap();
}

/// One permute check of either port (same signature).
macro_rules! permute_case {
    ($kernel:path) => {{
        use $kernel as kernel;
        let (b, n, nh, d) = (2usize, 5usize, 3usize, 16usize);
        let inp = Random::new(5).bf16s(b * n * 3 * nh * d, -1.0, 1.0);
        let [qe, ke, ve] = cases::permute(&inp, b, n, nh, d);
        let total = b * nh * n * d;
        let (mut q, mut k, mut v) = (vec![bf16::ZERO; total], vec![bf16::ZERO; total], vec![bf16::ZERO; total]);
        let nz = |x: usize| NonZeroU32::new(x as u32).unwrap();
        let config = LaunchConfig::new(total.div_ceil(256) as u32, 256);
        kernel::launch_cpu(&executor(), config, &mut q, &mut k, &mut v, &inp, b as u32, nz(n), nz(nh), nz(d)).unwrap();
        cases::check_exact("q", &q, &qe).unwrap();
        cases::check_exact("k", &k, &ke).unwrap();
        cases::check_exact("v", &v, &ve).unwrap();
    }};
}

#[test]
fn permute_kernel_matches_the_host() {
    permute_case!(ports2_llmc::permute_kernel);
}

fn fused_add_rms_norm_case(tokens: usize, hidden: usize, block: u32) {
    let mut random = Random::new(6 + hidden as u64);
    let input = random.bf16s(tokens * hidden, -2.0, 2.0);
    let residual = random.bf16s(tokens * hidden, -2.0, 2.0);
    let weight = random.bf16s(hidden, 0.5, 1.5);
    let eps = 1e-6f32;
    let (in_e, res_e) = cases::fused_add_rms_norm(&input, &residual, &weight, hidden, eps);
    let mut x: Vec<Vec8> = cases::pack(&input);
    let mut r: Vec<Vec8> = cases::pack(&residual);
    let config = LaunchConfig::new(tokens as u32, block);
    ports2::fused_add_rms_norm_kernel::launch_cpu(
        &executor(),
        config,
        &mut x,
        hidden as i64,
        &mut r,
        &cases::pack::<Vec8>(&weight),
        eps,
        tokens as i32,
        (hidden / 8) as u32,
    )
    .unwrap();
    cases::check_exact("residual", &cases::unpack(&r), &res_e).unwrap();
    cases::check_close_bf16("input", &cases::unpack(&x), &in_e, 1e-3, 1.6e-2).unwrap();
}

#[test]
fn fused_add_rms_norm_matches_the_host_with_vllms_block_sizes() {
    fused_add_rms_norm_case(3, 4096, 1024); // under 256 tokens: min(hidden, 1024)
    fused_add_rms_norm_case(5, 1000, 1000); // a partial last warp, 125 packs per row
    fused_add_rms_norm_case(4, 4096, 256); // 256 tokens or more: min(hidden, 256)
}

#[test]
fn rotary_embedding_neox_matches_the_host() {
    let tokens = 6usize;
    let head = 128usize;
    let mut random = Random::new(7);
    let positions: Vec<i64> = (0..tokens).map(|_| (random.next_u64() % 64) as i64).collect();
    let cache = cases::cos_sin_cache(64, head, 10000.0);
    let query = random.bf16s(tokens * QUERY_COLS as usize, -2.0, 2.0);
    let key = random.bf16s(tokens * KEY_COLS as usize, -2.0, 2.0);
    let q_e = cases::rotary_neox(&query, &positions, &cache, NUM_HEADS as usize, head);
    let k_e = cases::rotary_neox(&key, &positions, &cache, NUM_KV_HEADS as usize, head);
    let (mut q, mut k) = (query, key);
    let block = (NUM_HEADS * 64).min(512);
    ports2::rotary_embedding_kernel::launch_cpu(
        &executor(),
        LaunchConfig::new(tokens as u32, block),
        &positions,
        &mut q,
        &mut k,
        &cache,
        head as i32,
        QUERY_COLS as i64,
        KEY_COLS as i64,
        head as i64,
        NUM_HEADS as i32,
        NUM_KV_HEADS as i32,
        head as i32,
        0,
        false,
    )
    .unwrap();
    cases::check_close_bf16("query", &q, &q_e, 1e-2, 8e-3).unwrap();
    cases::check_close_bf16("key", &k, &k_e, 1e-2, 8e-3).unwrap();
}

fn count_and_sort_case(numel: usize, experts: usize, blocks: u32) {
    let mut random = Random::new(8 + numel as u64);
    let topk_ids: Vec<i32> = (0..numel).map(|_| (random.next_u64() % experts as u64) as i32).collect();
    let offsets = cases::expert_offsets(&topk_ids, experts, 16);
    let padding = numel as i32;
    let mut sorted = vec![padding; *offsets.last().unwrap() as usize];
    let mut cumsum = offsets.clone();
    ports2::count_and_sort_expert_tokens_kernel::launch_cpu(&executor(), LaunchConfig::new(blocks, 256), &topk_ids, &mut sorted, &mut cumsum, numel as u64)
        .unwrap();
    cases::check_sorted(&sorted, &cumsum, &topk_ids, &offsets, padding).unwrap();
}

#[test]
fn count_and_sort_expert_tokens_matches_the_host() {
    count_and_sort_case(3000, 16, 3000usize.div_ceil(256) as u32); // vLLM's grid
    count_and_sort_case(3000, 16, 3); // fewer blocks: the grid-stride loop
}

// ---- The fix round's variants (RESULTS.md), against the same references --------------------

#[test]
fn gelu_backward_inplace_fixed_matches_the_host() {
    gelu_backward_inplace_case!(ports2_llmc::gelu_backward_inplace_fixed, 128 * 8 * 5);
}

#[test]
fn layernorm_forward_fixed_matches_the_host() {
    for (n, c) in [(37usize, 768usize), (9, 100)] {
        layernorm_forward_case!(ports2_llmc::layernorm_forward_fixed, n, c, 3 + c as u64);
    }
}

#[test]
fn permute_fixed_matches_the_host() {
    permute_case!(ports2_llmc::permute_fixed);
}

// ---- The ninth port: the CUDA samples' threadFenceReduction (last-block handoff) ------------

fn reduce_single_pass_case(n: usize) {
    let x = Random::new(9 + n as u64).f32s(n, -1.0, 1.0);
    let blocks = (n as u32).div_ceil(2 * ports2::REDUCE_THREADS).clamp(1, ports2::REDUCE_MAX_BLOCKS);
    let mut partials = vec![0.0f32; blocks as usize];
    let mut counter = vec![0u32; 1];
    let mut total = vec![f32::NAN; 1];
    let config = LaunchConfig::new(blocks, ports2::REDUCE_THREADS);
    ports2::reduce_single_pass::launch_cpu(&executor(), config, &x, &mut partials, &mut counter, &mut total).unwrap();
    cases::check_sum("reduce_single_pass", total[0], &x).unwrap();
    assert_eq!(counter, [0], "the last block resets the retirement counter");
    // The same buffers again: the counter was left at 0, so the handoff works launch after launch.
    total[0] = f32::NAN;
    ports2::reduce_single_pass::launch_cpu(&executor(), config, &x, &mut partials, &mut counter, &mut total).unwrap();
    cases::check_sum("reduce_single_pass (second launch)", total[0], &x).unwrap();
    total[0] = f32::NAN;
    ports2::reduce_single_pass_fixed::launch_cpu(&executor(), config, &x, &mut partials, &mut counter, &mut total).unwrap();
    cases::check_sum("reduce_single_pass_fixed", total[0], &x).unwrap();
    assert_eq!(counter, [0], "the fixed port resets the counter too");
}

#[test]
fn reduce_single_pass_matches_the_host() {
    reduce_single_pass_case(1000); // 2 blocks, the last one partial
    reduce_single_pass_case(300); // 1 block: it is its own last block
    reduce_single_pass_case(64 * 512 * 2 + 77); // 64 blocks, two grid-stride steps and a tail
}
