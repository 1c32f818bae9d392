//! The ports of bench/ports7 on the CPU executor against CPU references written from the
//! public sources (no GPU needed). Small shapes of the sources' launches, with every thread's
//! work checked.

use std::num::NonZeroU32;

use ferrocuda::LaunchConfig;
use ferrocuda::cpu::CpuExecutor;
use ferrocuda_ports7::*;
use ferrocuda_ports7_llmc as llmc;
use ferrocuda_ports7_vllm as vllm;

fn nz(v: u32) -> NonZeroU32 {
    NonZeroU32::new(v).unwrap()
}

fn bits(v: &[bf16]) -> Vec<u16> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn residual_forward_kernel_adds_in_f32_and_rounds_once() {
    let n = 256 * 8 * 3;
    let (a, b) = (random_bf16(n, 1, 4.0), random_bf16(n, 2, 4.0));
    let a8: Vec<llmc::X128> = pack(&a);
    let b8: Vec<llmc::X128> = pack(&b);
    let mut out = vec![llmc::X128::default(); n / 8];
    llmc::residual_forward_kernel::launch_cpu(&CpuExecutor::new(), LaunchConfig::new((n / 8 / 256) as u32, 256), &mut out, &a8, &b8).unwrap();
    let got: &[bf16] = bytemuck::cast_slice(&out);
    assert_eq!(bits(got), bits(&residual_forward(&a, &b)));
}

#[test]
fn unpermute_kernel_backward_gathers_every_element() {
    let (b, n, nh, d) = (2usize, 5usize, 3usize, 8usize);
    let total = b * n * nh * d;
    let dout = random_bf16(total, 3, 1.0);
    let mut dinp = vec![bf16::ZERO; total];
    let config = LaunchConfig::new((total as u32).div_ceil(64), 64);
    llmc::unpermute_kernel_backward::launch_cpu(&CpuExecutor::new(), config, &mut dinp, &dout, nz(n as u32), nz(nh as u32), nz(d as u32)).unwrap();
    assert_eq!(bits(&dinp), bits(&unpermute_backward(&dout, b, n, nh, d)));
}

#[test]
fn permute_kernel_backward_scatters_q_k_and_v() {
    let (b, n, nh, d) = (2usize, 5usize, 3usize, 8usize);
    let total = b * n * nh * d;
    let (dq, dk, dv) = (random_bf16(total, 4, 1.0), random_bf16(total, 5, 1.0), random_bf16(total, 6, 1.0));
    let mut dinp = vec![bf16::from_f32(99.0); 3 * total];
    let config = LaunchConfig::new((total as u32).div_ceil(64), 64);
    llmc::permute_kernel_backward::launch_cpu(&CpuExecutor::new(), config, &mut dinp, &dq, &dk, &dv, nz(n as u32), nz(nh as u32), nz(d as u32)).unwrap();
    assert_eq!(bits(&dinp), bits(&permute_backward(&dq, &dk, &dv, b, n, nh, d)));
}

#[test]
fn reduce_add_sum_kernel_adds_the_rows_in_place() {
    let (n, m) = (1024 * 3, 5usize);
    let src = random_f32(n * m, 7);
    let src4: Vec<llmc::F128> = pack(&src);
    let mut dst = random_bf16(n, 8, 2.0);
    let mut want = dst.clone();
    reduce_add_sum(&mut want, &src, m);
    let config = LaunchConfig::new((n as u32).div_ceil(256 * 4), 256);
    llmc::reduce_add_sum_kernel::launch_cpu(&CpuExecutor::new(), config, &mut dst, &src4, n as u32, m as u32).unwrap();
    assert_eq!(bits(&dst), bits(&want));
}

#[test]
fn fused_residual_forward_kernel5_matches_the_reference() {
    let (rows, c, block_y) = (24usize, 768usize, 8usize);
    let (a, b) = (random_bf16(rows * c, 9, 2.0), random_bf16(rows * c, 10, 2.0));
    let (w, bias) = (random_bf16(c, 11, 1.0), random_bf16(c, 12, 0.5));
    let v8 = |x: &[bf16]| -> Vec<llmc::X128> { pack(x) };
    let (mut res, mut normed) = (vec![llmc::X128::default(); rows * c / 8], vec![llmc::X128::default(); rows * c / 8]);
    let (mut mean, mut rstd) = (vec![0.0f32; rows], vec![0.0f32; rows]);
    let config = LaunchConfig::new((rows / block_y) as u32, (32 * block_y) as u32).with_shared_bytes(((2 + block_y) * c * 2) as u32);
    llmc::fused_residual_forward_kernel5::launch_cpu(
        &CpuExecutor::new(),
        config,
        &mut res,
        &mut normed,
        &mut mean,
        &mut rstd,
        &v8(&a),
        &v8(&b),
        &v8(&w),
        &v8(&bias),
        (c / 8) as u32,
    )
    .unwrap();
    let want = fused_residual_forward(&a, &b, &w, &bias, rows, c);
    assert_eq!(bits(bytemuck::cast_slice(&res)), bits(&want.residual));
    assert!(max_rel_err(&mean, &want.mean, 1e-3) < 1e-4, "mean");
    assert!(max_rel_err(&rstd, &want.rstd, 1e-3) < 1e-4, "rstd");
    let got: Vec<f32> = bytemuck::cast_slice::<_, bf16>(&normed).iter().map(|x| x.to_f32()).collect();
    let wantn: Vec<f32> = want.normed.iter().map(|x| x.to_f32()).collect();
    // bf16 outputs: one rounding step (2^-8 relative) apart at most.
    assert!(max_rel_err(&got, &wantn, 1e-2) <= 1.0 / 128.0, "normed: {}", max_rel_err(&got, &wantn, 1e-2));
}

#[test]
fn act_and_mul_kernel_with_param_is_fatrelu_times_the_gate() {
    let (tokens, d) = (6usize, 1000usize);
    let input = random_bf16(tokens * 2 * d, 13, 3.0);
    let mut out = vec![bf16::ZERO; tokens * d];
    vllm::act_and_mul_kernel_with_param::launch_cpu(&CpuExecutor::new(), LaunchConfig::new(tokens as u32, 256), &mut out, &input, d as u32, 0.25).unwrap();
    assert_eq!(bits(&out), bits(&fatrelu_and_mul(&input, tokens, d, 0.25)));
}

#[test]
fn static_scaled_int8_quant_kernel_divides_and_saturates() {
    let (tokens, hidden) = (5usize, 2048usize);
    let input = random_bf16(tokens * hidden, 14, 3.0);
    let in8: Vec<vllm::Bf16x8> = pack(&input);
    let mut out = vec![vllm::I8x16::default(); tokens * hidden / 16];
    let scale = [0.02f32];
    vllm::static_scaled_int8_quant_kernel::launch_cpu(
        &CpuExecutor::new(),
        LaunchConfig::new(tokens as u32, 1024),
        &in8,
        &mut out,
        &scale,
        (hidden / 16) as u32,
    )
    .unwrap();
    let got: &[i8] = bytemuck::cast_slice(&out);
    assert_eq!(got, &static_scaled_int8_quant(&input, 0.02)[..]);
}

#[test]
fn dynamic_scaled_int8_quant_kernel_scales_each_token_by_its_absmax() {
    let (tokens, hidden) = (5usize, 8192usize);
    let input = random_bf16(tokens * hidden, 15, 3.0);
    let in8: Vec<vllm::Bf16x8> = pack(&input);
    let mut out = vec![vllm::I8x16::default(); tokens * hidden / 16];
    let mut scales = vec![0.0f32; tokens];
    vllm::dynamic_scaled_int8_quant_kernel::launch_cpu(
        &CpuExecutor::new(),
        LaunchConfig::new(tokens as u32, 1024),
        &in8,
        &mut out,
        &mut scales,
        (hidden / 16) as u32,
    )
    .unwrap();
    let (want, want_scales) = dynamic_scaled_int8_quant(&input, tokens, hidden);
    assert_eq!(bytemuck::cast_slice::<_, i8>(&out), &want[..]);
    assert_eq!(scales, want_scales);
}

#[test]
fn reduce_add_sum_kernel_fixed_gives_the_first_trys_bits() {
    // m = 7: the four-row steps and the one-row tail both run.
    let (n, m) = (1024 * 3, 7usize);
    let src = random_f32(n * m, 17);
    let src4: Vec<llmc::F128> = pack(&src);
    let mut dst = random_bf16(n, 18, 2.0);
    let mut want = dst.clone();
    reduce_add_sum(&mut want, &src, m);
    let config = LaunchConfig::new((n as u32).div_ceil(256 * 4), 256);
    llmc::reduce_add_sum_kernel_fixed::launch_cpu(&CpuExecutor::new(), config, &mut dst, &src4, n as u32, m as u32).unwrap();
    assert_eq!(bits(&dst), bits(&want));
}

#[test]
fn fused_residual_forward_kernel5_fixed_gives_the_first_trys_bits() {
    let (rows, c, block_y) = (24usize, 768usize, 8usize);
    let (a, b) = (random_bf16(rows * c, 19, 2.0), random_bf16(rows * c, 20, 2.0));
    let (w, bias) = (random_bf16(c, 21, 1.0), random_bf16(c, 22, 0.5));
    let config = LaunchConfig::new((rows / block_y) as u32, (32 * block_y) as u32).with_shared_bytes(((2 + block_y) * c * 2) as u32);
    let run = |fixed: bool| {
        let (mut res, mut normed) = (vec![llmc::X128::default(); rows * c / 8], vec![llmc::X128::default(); rows * c / 8]);
        let (mut mean, mut rstd) = (vec![0.0f32; rows], vec![0.0f32; rows]);
        let args = (pack::<_, llmc::X128>(&a), pack::<_, llmc::X128>(&b), pack::<_, llmc::X128>(&w), pack::<_, llmc::X128>(&bias));
        let e = CpuExecutor::new();
        if fixed {
            llmc::fused_residual_forward_kernel5_fixed::launch_cpu(
                &e,
                config,
                &mut res,
                &mut normed,
                &mut mean,
                &mut rstd,
                &args.0,
                &args.1,
                &args.2,
                &args.3,
                (c / 8) as u32,
            )
            .unwrap();
        } else {
            llmc::fused_residual_forward_kernel5::launch_cpu(
                &e,
                config,
                &mut res,
                &mut normed,
                &mut mean,
                &mut rstd,
                &args.0,
                &args.1,
                &args.2,
                &args.3,
                (c / 8) as u32,
            )
            .unwrap();
        }
        let r: Vec<u32> = bytemuck::cast_slice(&res).to_vec();
        let n: Vec<u32> = bytemuck::cast_slice(&normed).to_vec();
        (r, n, mean, rstd)
    };
    let (first, fixed) = (run(false), run(true));
    assert_eq!(first.0, fixed.0);
    assert_eq!(first.1, fixed.1);
    assert_eq!(first.2, fixed.2);
    assert_eq!(first.3, fixed.3);
    // And the reference's residual, so the pair is not equal by being wrong together.
    let want = fused_residual_forward(&a, &b, &w, &bias, rows, c);
    assert_eq!(bits(bytemuck::cast_slice(&fixed.0)), bits(&want.residual));
}

#[test]
fn dynamic_scaled_int8_quant_kernel_fixed_matches_the_reference() {
    let (tokens, hidden) = (5usize, 4096usize);
    let input = random_bf16(tokens * hidden, 23, 3.0);
    let in8: Vec<vllm::Bf16x8> = pack(&input);
    let mut out = vec![vllm::I8x16::default(); tokens * hidden / 16];
    let mut scales = vec![0.0f32; tokens];
    vllm::dynamic_scaled_int8_quant_kernel_fixed::launch_cpu(
        &CpuExecutor::new(),
        LaunchConfig::new(tokens as u32, 1024),
        &in8,
        &mut out,
        &mut scales,
        (hidden / 16) as u32,
    )
    .unwrap();
    let (want, want_scales) = dynamic_scaled_int8_quant(&input, tokens, hidden);
    assert_eq!(bytemuck::cast_slice::<_, i8>(&out), &want[..]);
    assert_eq!(scales, want_scales);
}

#[test]
fn static_scaled_int8_quant_kernel_fixed_matches_the_reference() {
    let (tokens, hidden) = (5usize, 2048usize);
    let input = random_bf16(tokens * hidden, 24, 3.0);
    let in8: Vec<vllm::Bf16x8> = pack(&input);
    let mut out = vec![vllm::I8x16::default(); tokens * hidden / 16];
    let scale = [0.015f32];
    vllm::static_scaled_int8_quant_kernel_fixed::launch_cpu(
        &CpuExecutor::new(),
        LaunchConfig::new(tokens as u32, 1024),
        &in8,
        &mut out,
        &scale,
        (hidden / 16) as u32,
    )
    .unwrap();
    let got: &[i8] = bytemuck::cast_slice(&out);
    assert_eq!(got, &static_scaled_int8_quant(&input, 0.015)[..]);
}

/// Session 20, gap 2: the `BlockRowsX16` port quantises rows of any width (vLLM's vectorised
/// loop and scalar remainder): widths that are not multiples of 16 or 8 (rows start at every
/// byte alignment), buffers whose first row is misaligned, and the first try's width, against
/// the CPU reference; every byte written once by its owner (the race detector).
#[test]
fn p30_s20_static_scaled_int8_quant_x16_handles_any_hidden() {
    for (tokens, hidden, skip) in [(5usize, 2048usize, 0usize), (6, 2050, 0), (7, 1001, 3), (4, 8190, 0), (3, 16, 9), (3, 15, 1), (2, 1, 0)] {
        let input = random_bf16(tokens * hidden, 30 + hidden as u64, 3.0);
        let mut buffer = vec![0i8; tokens * hidden + skip];
        let scale = [0.02f32];
        vllm::static_scaled_int8_quant_kernel_x16::launch_cpu(
            &CpuExecutor::new(),
            LaunchConfig::new(tokens as u32, hidden.min(1024) as u32),
            &input,
            &mut buffer[skip..],
            &scale,
            hidden as u32,
        )
        .unwrap();
        assert_eq!(&buffer[skip..], &static_scaled_int8_quant(&input, 0.02)[..], "hidden {hidden}, skip {skip}");
    }
}

/// Session 21: the `_x16_idle` variant (threads that own nothing in the row return first,
/// `RowX16::has_work`) writes every byte as the reference at every width and byte alignment,
/// with blocks wider than the row's work (1024 threads for 7 vectors) and narrower ones (32
/// threads for 512), under the race detector.
#[test]
fn p30_s21_static_scaled_int8_quant_x16_idle_threads_return_and_rows_stay_whole() {
    for (tokens, hidden, skip, block) in [
        (5usize, 2048usize, 0usize, 1024u32),
        (6, 2050, 0, 1024),
        (7, 1001, 3, 256),
        (4, 8190, 0, 1024),
        (3, 16, 9, 1024),
        (3, 15, 1, 64),
        (2, 1, 0, 1024),
        (3, 8192, 5, 32),
        (3, 113, 7, 1024),
    ] {
        let input = random_bf16(tokens * hidden, 40 + hidden as u64, 3.0);
        let mut buffer = vec![0i8; tokens * hidden + skip];
        vllm::static_scaled_int8_quant_kernel_x16_idle::launch_cpu(
            &CpuExecutor::new(),
            LaunchConfig::new(tokens as u32, block),
            &input,
            &mut buffer[skip..],
            &[0.02f32],
            hidden as u32,
        )
        .unwrap();
        assert_eq!(&buffer[skip..], &static_scaled_int8_quant(&input, 0.02)[..], "hidden {hidden}, skip {skip}, block {block}");
    }
}

/// Session 20, gap 2: `BlockRowsX16` needs a 1-D launch; a 2-D block or grid is refused before
/// anything runs, and the refusal says why.
#[test]
fn p30_s20_block_rows_x16_refuses_launches_that_are_not_1d() {
    let (tokens, hidden) = (4usize, 100usize);
    let input = random_bf16(tokens * hidden, 7, 3.0);
    for config in [
        LaunchConfig::new(ferrocuda::Dim3::new(4, 1, 1), ferrocuda::Dim3::new(32, 2, 1)),
        LaunchConfig::new(ferrocuda::Dim3::new(2, 2, 1), ferrocuda::Dim3::new(32, 1, 1)),
    ] {
        let mut out = vec![0i8; tokens * hidden];
        let error = vllm::static_scaled_int8_quant_kernel_x16::launch_cpu(&CpuExecutor::new(), config, &input, &mut out, &[0.02f32], hidden as u32)
            .expect_err("a BlockRowsX16 output needs a 1-D launch");
        assert!(error.to_string().contains("1-D"), "{error}");
        assert!(out.iter().all(|&v| v == 0), "nothing ran");
    }
}
