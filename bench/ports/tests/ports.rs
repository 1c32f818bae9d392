//! The ported kernels (src/lib.rs) on the CPU executor, against the CPU references of
//! src/cases.rs, at shapes with partial blocks and rows wider and narrower than a block. The
//! GPU check (and the comparison with the nvcc-built twins) is `examples/ports_bench.rs`.

use ferrocuda::LaunchConfig;
use ferrocuda::cpu::CpuExecutor;
use ferrocuda_device::half::bf16;
use ports::cases::{self, Random};
use ports::{I8x16, X128};

fn executor() -> CpuExecutor {
    CpuExecutor::new()
}

#[test]
fn gelu_and_mul_matches_the_reference() {
    for (tokens, d, threads) in [(5usize, 40usize, 32u32), (3, 1100, 1024), (4, 96, 64)] {
        let input = Random::new(1).bf16s(tokens * 2 * d, -4.0, 4.0);
        let mut out = vec![bf16::ZERO; tokens * d];
        ports::gelu_and_mul::launch_cpu(&executor(), LaunchConfig::new(tokens as u32, threads), &input, d as u32, &mut out).unwrap();
        cases::check_gelu_and_mul(&out, &cases::gelu_and_mul(&input, d)).unwrap();
    }
}

#[test]
fn encoder_forward_matches_the_reference_bit_for_bit() {
    let (b, t, c, vocab) = (2usize, 7usize, 48usize, 11usize);
    let mut random = Random::new(2);
    let inp: Vec<i32> = (0..b * t).map(|_| (random.uniform(0.0, vocab as f32) as i32).min(vocab as i32 - 1)).collect();
    let wte = random.bf16s(vocab * c, -1.0, 1.0);
    let wpe = random.bf16s(t * c, -1.0, 1.0);
    let packs = b * t * c / 8;
    let mut out = vec![X128::default(); packs];
    let config = LaunchConfig::for_elements(packs, 32);
    ports::encoder_forward::launch_cpu(&executor(), config, &inp, &cases::pack(&wte), &cases::pack(&wpe), t as u32, c as u32, &mut out).unwrap();
    cases::check_exact("encoder_forward", &cases::unpack(&out), &cases::encoder_forward(&inp, &wte, &wpe, t, c)).unwrap();
}

#[test]
fn global_norm_squared_adds_each_blocks_sum_to_its_partial() {
    let data = Random::new(3).bf16s(10_000, -2.0, 2.0);
    for (blocks, threads) in [(4u32, 512u32), (7, 96), (1, 1024)] {
        let before: Vec<f32> = (0..blocks).map(|b| b as f32 * 0.25).collect();
        let mut partials = before.clone();
        ports::global_norm_squared::launch_cpu(&executor(), LaunchConfig::new(blocks, threads), &data, &mut partials).unwrap();
        let prior: f64 = before.iter().map(|&p| p as f64).sum();
        cases::check_norm_partials(&partials, prior, cases::sum_of_squares(&data)).unwrap();
    }
}

#[test]
fn moe_softmax_matches_the_reference_and_skips_finished_rows() {
    let (rows, cols) = (9usize, 300usize);
    let input = Random::new(4).f32s(rows * cols, -8.0, 8.0);
    let finished: Vec<u8> = (0..rows).map(|r| u8::from(r % 4 == 1)).collect();
    let sentinel = -7.5f32;
    let mut out = vec![sentinel; rows * cols];
    ports::moe_softmax::launch_cpu(&executor(), LaunchConfig::new(rows as u32, 256), &input, &finished, cols as u32, &mut out).unwrap();
    cases::check_moe_softmax(&out, &cases::moe_softmax(&input, &finished, cols), sentinel).unwrap();
}

#[test]
fn dynamic_int8_quant_matches_the_reference_bit_for_bit() {
    for (tokens, hidden, threads) in [(3usize, 64usize, 32u32), (4, 2048, 128), (2, 32, 1024)] {
        let mut input = Random::new(5).bf16s(tokens * hidden, -3.0, 3.0);
        // A tie: 63.5 * (127 / 127) rounds to 64 (even), not 63 or 64.5 away.
        input[0] = bf16::from_f32(127.0);
        input[1] = bf16::from_f32(63.5);
        let mut out = vec![I8x16::default(); tokens * hidden / 16];
        let mut scales = vec![0.0f32; tokens];
        let packed = cases::pack(&input);
        ports::dynamic_scaled_int8_quant::launch_cpu(
            &executor(),
            LaunchConfig::new(tokens as u32, threads),
            &packed,
            (hidden / 16) as u32,
            &mut out,
            &mut scales,
        )
        .unwrap();
        let (q, s) = cases::int8_quant(&input, hidden);
        assert_eq!(q[1], 64, "the reference rounds ties to even");
        cases::check_exact("int8 values", &cases::unpack_i8(&out), &q).unwrap();
        cases::check_exact("int8 scales", &scales, &s).unwrap();
    }
}

#[test]
fn causal_softmax_matches_the_reference_and_leaves_the_upper_triangle() {
    let (n, t) = (3usize, 72usize);
    let inp = Random::new(6).bf16s(n * t * t, -6.0, 6.0);
    let sentinel = bf16::from_f32(-3.0);
    let mut out = vec![sentinel; n * t * t];
    let rows = n * t;
    let config = LaunchConfig::new((rows * 32).div_ceil(256) as u32, 256);
    ports::softmax_forward::launch_cpu(&executor(), config, &inp, 0.125, t as u32, &mut out).unwrap();
    cases::check_causal_softmax(&out, &cases::causal_softmax(&inp, 0.125, t), sentinel).unwrap();
}

#[test]
fn moe_sum_matches_the_reference() {
    for (tokens, d, threads) in [(6usize, 200usize, 64u32), (2, 2100, 1024)] {
        let input = Random::new(7).bf16s(tokens * ports::MOE_TOPK * d, -2.0, 2.0);
        let mut out = vec![bf16::ZERO; tokens * d];
        ports::moe_sum::launch_cpu(&executor(), LaunchConfig::new(tokens as u32, threads), &input, d as u32, &mut out).unwrap();
        cases::check_exact("moe_sum", &out, &cases::moe_sum(&input, d)).unwrap();
    }
}
