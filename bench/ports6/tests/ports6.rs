//! Each port of bench/ports6 on the CPU executor, on the source's launch shape at a small size,
//! against the CPU references of `ferrocuda_ports6` (written from the public sources, not from
//! the ports). The CPU executor's math is the host's (libm, no implicit FMA), so the float
//! kernels are compared within a tolerance and the integer and FP8 results exactly.

use ferrocuda::LaunchConfig;
use ferrocuda::cpu::CpuExecutor;
use ferrocuda_ports6::*;
use ferrocuda_ports6_llmc as llmc;
use ferrocuda_ports6_vllm as vllm;
use half::bf16;
use std::num::NonZeroU32;

fn nz(v: u32) -> NonZeroU32 {
    NonZeroU32::new(v).unwrap()
}

#[test]
fn rope_forward_kernel1_matches_llm_cs_cpu_reference() {
    let (b, t, nh, hd) = (2, 8, 4, 16);
    let inp = random_f32(b * t * nh * hd, 1);
    let freqs = random_f32(t * hd, 2);
    let mut out = vec![0.0f32; inp.len()];
    let threads = (b * t * nh * hd / 2) as u32;
    // llm.c's launch: ceil_div(total_threads, block_size) blocks of 128.
    let config = LaunchConfig::new(threads.div_ceil(128), 128);
    llmc::rope_forward_kernel1::launch_cpu(&CpuExecutor::new(), config, &mut out, &inp, &freqs, nz(t as u32), nz(nh as u32), hd as u32).unwrap();
    let want = rope_forward(&inp, &freqs, b, t, nh, hd);
    let err = max_rel_err(&out, &want, 1e-3);
    assert!(err < 1e-5, "max rel err {err}");
}

#[test]
fn repkv_backward_kernel1_sums_each_kv_heads_replicas() {
    let (b, n, nh, nh_kv, hd) = (2, 4, 8, 2, 16);
    let rep = nh / nh_kv;
    let dout = random_f32(b * n * 3 * nh * hd, 3);
    let mut dinp = vec![f32::NAN; b * n * (nh + 2 * nh_kv) * hd];
    let threads = dout.len() as u32;
    let config = LaunchConfig::new(threads.div_ceil(128), 128);
    llmc::repkv_backward_kernel1::launch_cpu(&CpuExecutor::new(), config, &mut dinp, &dout, nz(n as u32), nz(nh as u32), nz(rep as u32), nz(hd as u32))
        .unwrap();
    let want = repkv_backward(&dout, b, n, nh, rep, hd);
    // NaN left anywhere (an element nobody wrote) fails the comparison.
    let err = max_rel_err(&dinp, &want, 1e-3);
    assert!(err < 1e-5, "max rel err {err}");
}

#[test]
fn matmul_forward_kernel1_matches_the_reference_on_a_ragged_2d_grid() {
    // BT and OC not multiples of the 16 x 16 block: the edge threads write nothing.
    let (bt, c, oc) = (37, 48, 29);
    let inp = random_f32(bt * c, 4);
    let weight = random_f32(oc * c, 5);
    let bias = random_f32(oc, 6);
    let sqrt_block = 16u32;
    let config = LaunchConfig::new(((bt as u32).div_ceil(sqrt_block), (oc as u32).div_ceil(sqrt_block)), (sqrt_block, sqrt_block));
    for with_bias in [true, false] {
        let mut out = vec![f32::NAN; bt * oc];
        let b = with_bias.then_some(&bias[..]);
        llmc::matmul_forward_kernel1::launch_cpu(&CpuExecutor::new(), config, &mut out, &inp, &weight, b, bt as u32, c as u32, oc as u32).unwrap();
        // The same f32 operations in the same order (the host fuses nothing): the same bits;
        // NaN left in an element nobody wrote fails too.
        let want = matmul_forward(&inp, &weight, b, bt, c, oc);
        let differ = out.iter().zip(&want).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
        assert_eq!(differ, 0, "bias {with_bias}: {differ} elements differ");
    }
}

#[test]
fn softmax_forward_kernel2_matches_the_reference_at_llm_cs_block_sizes() {
    let (n, c) = (6, 1000);
    let inp: Vec<f32> = random_f32(n * c, 7).into_iter().map(|x| x * 8.0).collect();
    let want = softmax_forward(&inp, n, c);
    for block in [32u32, 128, 256, 1024] {
        let mut out = vec![0.0f32; n * c];
        let config = LaunchConfig::new(n as u32, block).with_shared_bytes(block * 4);
        llmc::softmax_forward_kernel2::launch_cpu(&CpuExecutor::new(), config, &mut out, &inp, c as u32).unwrap();
        let err = max_rel_err(&out, &want, 1e-6);
        assert!(err < 1e-4, "block {block}: max rel err {err}");
    }
}

#[test]
fn softmax_forward_kernel2_reqntid512_matches_the_reference_and_refuses_other_blocks() {
    let (n, c) = (3, 2000);
    let inp: Vec<f32> = random_f32(n * c, 12).into_iter().map(|x| x * 8.0).collect();
    let want = softmax_forward(&inp, n, c);
    let mut out = vec![0.0f32; n * c];
    let config = LaunchConfig::new(n as u32, 512).with_shared_bytes(512 * 4);
    llmc::softmax_forward_kernel2_reqntid512::launch_cpu(&CpuExecutor::new(), config, &mut out, &inp, c as u32).unwrap();
    let err = max_rel_err(&out, &want, 1e-6);
    assert!(err < 1e-4, "max rel err {err}");
    let other = LaunchConfig::new(n as u32, 256).with_shared_bytes(256 * 4);
    let refused = llmc::softmax_forward_kernel2_reqntid512::launch_cpu(&CpuExecutor::new(), other, &mut out, &inp, c as u32);
    assert!(refused.is_err(), "a 256-thread block was accepted by a reqntid(512) kernel");
}

#[test]
fn attention_query_key_kernel1_masks_and_scales_like_the_reference() {
    let (b, t, c, nh) = (2, 12, 32, 4);
    let inp = random_f32(b * t * 3 * c, 8);
    let mut preatt = vec![0.0f32; b * nh * t * t];
    let threads = preatt.len() as u32;
    let config = LaunchConfig::new(threads.div_ceil(256), 256);
    llmc::attention_query_key_kernel1::launch_cpu(&CpuExecutor::new(), config, &mut preatt, &inp, nz(t as u32), c as u32, nz(nh as u32)).unwrap();
    let want = attention_query_key(&inp, b, t, c, nh);
    let err = max_rel_err(&preatt, &want, 1e-2);
    assert!(err < 1e-5, "max rel err {err}");
}

#[test]
fn activation_kernel_gelu_new_rounds_like_c10_bf16() {
    let (tokens, d) = (5, 1500);
    let input = random_bf16(tokens * d, 9, 4.0);
    let mut out = vec![bf16::ZERO; input.len()];
    // vLLM's launch: grid num_tokens, block min(d, 1024).
    let config = LaunchConfig::new(tokens as u32, d.min(1024) as u32);
    vllm::activation_kernel_gelu_new::launch_cpu(&CpuExecutor::new(), config, &mut out, &input, d as u32).unwrap();
    // tanhf may differ by an ulp of f32 between libm and the reference's host: allow one bf16
    // ulp of difference where that rounding flips, and count them.
    let mut off = 0;
    for (i, (o, x)) in out.iter().zip(&input).enumerate() {
        let want = gelu_new(*x);
        let ulps = (o.to_bits() as i32 - want.to_bits() as i32).abs();
        assert!(ulps <= 1, "element {i}: x {x}, got {o}, want {want}");
        off += (ulps != 0) as usize;
    }
    assert!(off * 1000 < out.len(), "{off} of {} one ulp off", out.len());
    // The reqntid(1024) candidate computes the same bits.
    let mut fixed = vec![bf16::ZERO; input.len()];
    vllm::activation_kernel_gelu_new_reqntid1024::launch_cpu(&CpuExecutor::new(), config, &mut fixed, &input, d as u32).unwrap();
    assert!(fixed == out, "the reqntid(1024) variant differs from the first try");
}

#[test]
fn dynamic_scaled_int8_azp_quant_kernel_is_exact() {
    let (tokens, hidden) = (4, 3000);
    let input = random_bf16(tokens * hidden, 10, 3.0);
    let mut out = vec![0i8; input.len()];
    let mut scale = vec![0.0f32; tokens];
    let mut azp = vec![0i32; tokens];
    for block in [hidden.min(1024) as u32, 1000, 96, 32] {
        let config = LaunchConfig::new(tokens as u32, block);
        vllm::dynamic_scaled_int8_azp_quant_kernel::launch_cpu(&CpuExecutor::new(), config, &input, &mut out, &mut scale, &mut azp, hidden as u32).unwrap();
        let (want_out, want_scale, want_azp) = int8_azp_quant(&input, hidden);
        assert_eq!(scale, want_scale, "block {block}");
        assert_eq!(azp, want_azp, "block {block}");
        assert_eq!(out, want_out, "block {block}");
    }
}

#[test]
fn per_token_group_quant_8bit_kernel_gives_c10s_fp8_bits() {
    let (tokens, hidden, groups_per_block) = (8usize, 1024usize, 16u32);
    let group = vllm::GROUP_SIZE as usize;
    let mut input = random_bf16(tokens * hidden, 11, 2.0);
    input[5] = bf16::from_f32(1e-6); // a subnormal FP8 after scaling
    input[200] = bf16::ZERO;
    let num_groups = (tokens * hidden / group) as u32;
    let input8: &[vllm::Bf16x8] = bytemuck::cast_slice(&input);
    let mut q = vec![vllm::Fp8x8::default(); input.len() / 8];
    let mut scales = vec![0.0f32; num_groups as usize];
    let threads = groups_per_block * vllm::THREADS_PER_GROUP;
    let shared = groups_per_block * vllm::GROUP_SIZE * 2;
    let config = LaunchConfig::new(num_groups / groups_per_block, threads).with_shared_bytes(shared);
    vllm::per_token_group_quant_8bit_kernel::launch_cpu(&CpuExecutor::new(), config, input8, &mut q, &mut scales, groups_per_block, 1e-10, -448.0, 448.0)
        .unwrap();
    let (want_q, want_scales) = per_token_group_quant_fp8(&input, group, 1e-10, -448.0, 448.0);
    assert_eq!(scales, want_scales);
    let got: &[u8] = bytemuck::cast_slice(&q);
    assert_eq!(got, &want_q[..]);
}

/// Session 18 (issue 30, gap 3): the transposed cell map (`DisjointMatrix<f32, true>`) gives
/// the same bits as the `AtomicSlice` port and the reference, on the same ragged grid.
#[test]
fn s18_matmul_forward_kernel1_cells_matches_the_reference_on_a_ragged_2d_grid() {
    let (bt, c, oc) = (37, 48, 29);
    let inp = random_f32(bt * c, 4);
    let weight = random_f32(oc * c, 5);
    let bias = random_f32(oc, 6);
    let config = LaunchConfig::new(((bt as u32).div_ceil(16), (oc as u32).div_ceil(16)), (16u32, 16u32));
    for with_bias in [true, false] {
        let mut out = vec![f32::NAN; bt * oc];
        let b = with_bias.then_some(&bias[..]);
        llmc::matmul_forward_kernel1_cells::launch_cpu(&CpuExecutor::new(), config, &mut out, &inp, &weight, b, bt as u32, c as u32, oc as u32).unwrap();
        let want = matmul_forward(&inp, &weight, b, bt, c, oc);
        let differ = out.iter().zip(&want).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
        assert_eq!(differ, 0, "bias {with_bias}: {differ} elements differ");
    }
}

/// Session 18 (issue 30, gap 4): the `SegmentRows<16>` port for group sizes 64, 128 and 256
/// (vectorised path) and 8 .. 1024 groups per launch, exact against c10's FP8 bits.
#[test]
fn s18_per_token_group_quant_8bit_segments_gives_c10s_fp8_bits_for_any_group_size() {
    let (tokens, hidden) = (4usize, 1024usize);
    let mut input = random_bf16(tokens * hidden, 11, 2.0);
    input[5] = bf16::from_f32(1e-6);
    input[200] = bf16::ZERO;
    let input8: &[vllm::Bf16x8] = bytemuck::cast_slice(&input);
    for (group, groups_per_block) in [(64usize, 16u32), (128, 8), (256, 4), (128, 1)] {
        let num_groups = (tokens * hidden / group) as u32;
        let mut q = vec![vllm::Fp8x8::default(); input.len() / 8];
        let mut scales = vec![0.0f32; num_groups as usize];
        let config = LaunchConfig::new(num_groups / groups_per_block, groups_per_block * 16).with_shared_bytes(groups_per_block * group as u32 * 2);
        vllm::per_token_group_quant_8bit_segments::launch_cpu(&CpuExecutor::new(), config, input8, &mut q, &mut scales, group as u32 / 8, 1e-10, -448.0, 448.0)
            .unwrap();
        let (want_q, want_scales) = per_token_group_quant_fp8(&input, group, 1e-10, -448.0, 448.0);
        assert_eq!(scales, want_scales, "group {group}");
        let got: &[u8] = bytemuck::cast_slice(&q);
        assert_eq!(got, &want_q[..], "group {group}");
    }
}

/// Session 18: the byte form (`DisjointSlice<u8, SegmentRows<16>>`) for group sizes that are
/// no multiple of 8 (vLLM's scalar path) and one that is.
#[test]
fn s18_per_token_group_quant_8bit_bytes_gives_c10s_fp8_bits_for_odd_group_sizes() {
    for (group, groups_per_block) in [(100usize, 4u32), (36, 2), (64, 16)] {
        let num_groups = 32usize;
        let input = random_bf16(num_groups * group, 12, 3.0);
        let mut q = vec![0u8; input.len()];
        let mut scales = vec![0.0f32; num_groups];
        let config = LaunchConfig::new(num_groups as u32 / groups_per_block, groups_per_block * 16).with_shared_bytes(groups_per_block * group as u32 * 2);
        vllm::per_token_group_quant_8bit_bytes::launch_cpu(&CpuExecutor::new(), config, &input, &mut q, &mut scales, group as u32, 1e-10, -448.0, 448.0)
            .unwrap();
        let (want_q, want_scales) = per_token_group_quant_fp8(&input, group, 1e-10, -448.0, 448.0);
        assert_eq!(scales, want_scales, "group {group}");
        assert_eq!(q, want_q, "group {group}");
    }
}

/// Session 18: a block that is not whole 16-lane segments is refused before anything runs.
#[test]
fn s18_per_token_group_quant_8bit_segments_refuses_blocks_of_partial_segments() {
    let input = vec![vllm::Bf16x8::default(); 64];
    let mut q = vec![vllm::Fp8x8::default(); 64];
    let mut scales = vec![0.0f32; 4];
    let config = LaunchConfig::new(1u32, 40u32).with_shared_bytes(4096);
    let error = vllm::per_token_group_quant_8bit_segments::launch_cpu(&CpuExecutor::new(), config, &input, &mut q, &mut scales, 16, 1e-10, -448.0, 448.0)
        .expect_err("blocks of 40 threads");
    assert!(error.to_string().contains("multiple of WIDTH"), "{error}");
    assert!(scales.iter().all(|&s| s == 0.0));
}

/// Session 18 (issue 30, gap 6): the per-thread shared region port of softmax 2 matches the
/// reference at llm.c's block sizes; with too little shared memory it writes nothing (the
/// region is `None` in every thread).
#[test]
fn s18_softmax_forward_kernel2_slots_matches_the_reference_and_needs_its_shared_bytes() {
    let (n, c) = (6, 1000);
    let inp: Vec<f32> = random_f32(n * c, 7).into_iter().map(|x| x * 8.0).collect();
    let want = softmax_forward(&inp, n, c);
    for block in [32u32, 128, 256, 1024] {
        let mut out = vec![0.0f32; n * c];
        let config = LaunchConfig::new(n as u32, block).with_shared_bytes(block * 4);
        llmc::softmax_forward_kernel2_slots::launch_cpu(&CpuExecutor::new(), config, &mut out, &inp, c as u32).unwrap();
        let err = max_rel_err(&out, &want, 1e-6);
        assert!(err < 1e-4, "block {block}: max rel err {err}");
    }
    let mut out = vec![0.0f32; n * c];
    let short = LaunchConfig::new(n as u32, 256).with_shared_bytes(255 * 4);
    llmc::softmax_forward_kernel2_slots::launch_cpu(&CpuExecutor::new(), short, &mut out, &inp, c as u32).unwrap();
    assert!(out.iter().all(|&v| v == 0.0), "a block without its shared bytes wrote");
}

/// Session 18 (gap 2 experiment): the x4-unrolled softmax 2 matches the reference at llm.c's
/// block sizes and at rows whose length leaves every remainder of 4 strides.
#[test]
fn s18_softmax_forward_kernel2_x4_matches_the_reference() {
    for c in [1000usize, 129, 37, 1] {
        let n = 5;
        let inp: Vec<f32> = random_f32(n * c, 7).into_iter().map(|x| x * 8.0).collect();
        let want = softmax_forward(&inp, n, c);
        for block in [32u32, 128, 1024] {
            let mut out = vec![0.0f32; n * c];
            let config = LaunchConfig::new(n as u32, block).with_shared_bytes(block * 4);
            llmc::softmax_forward_kernel2_x4::launch_cpu(&CpuExecutor::new(), config, &mut out, &inp, c as u32).unwrap();
            let err = max_rel_err(&out, &want, 1e-6);
            assert!(err < 1e-4, "c {c}, block {block}: max rel err {err}");
        }
    }
}

/// Session 18 (gap 2 experiment): the x4-unrolled gelu_new gives the first try's bits.
#[test]
fn s18_activation_kernel_gelu_new_x4_gives_the_first_trys_bits() {
    let (tokens, d) = (3usize, 1000usize);
    let input = random_bf16(tokens * d, 9, 4.0);
    for block in [1000u32, 96, 32] {
        let (mut a, mut b) = (vec![bf16::ZERO; tokens * d], vec![bf16::ZERO; tokens * d]);
        let config = LaunchConfig::new(tokens as u32, block);
        vllm::activation_kernel_gelu_new::launch_cpu(&CpuExecutor::new(), config, &mut a, &input, d as u32).unwrap();
        vllm::activation_kernel_gelu_new_x4::launch_cpu(&CpuExecutor::new(), config, &mut b, &input, d as u32).unwrap();
        assert_eq!(a, b, "block {block}");
    }
}
