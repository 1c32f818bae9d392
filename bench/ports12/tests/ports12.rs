//! bench/ports12's ports against their references: on the CPU executor (every machine), and
//! on the GPU (`*_gpu`: skipped with a printed reason without a driver, failed under
//! `REQUIRE_GPU=1`).

use core::num::NonZeroU32;

use ferrocuda::cpu::CpuExecutor;
use ferrocuda::{Context, DeviceBuffer, Error, LaunchConfig, Stream};
use ferrocuda_ports12::kernels::{llmc, vllm};
use ferrocuda_ports12::*;
use half::{bf16, f16};

fn nz(v: usize) -> NonZeroU32 {
    NonZeroU32::new(v as u32).unwrap()
}

/// The GPU's context, or `None` (printed) where there is none and `REQUIRE_GPU` is not `1`.
fn gpu(test: &str) -> Option<(Context, Stream)> {
    match Context::primary(0) {
        Ok(context) => {
            let stream = Stream::new(&context).unwrap();
            Some((context, stream))
        }
        Err(error @ (Error::NoDriver | Error::NoDevice { .. })) if !ferrocuda_test_support::gpu_required() => {
            println!("SKIPPED {test}: {error}");
            None
        }
        Err(error) => panic!("{test}: no GPU under REQUIRE_GPU=1: {error}"),
    }
}

// ---------------------------------------------------------------- L1

const L1: (usize, usize, usize, usize) = (2, 9, 48, 4); // B, T, C, NH (hs 12)

fn l1_inputs() -> (Vec<f32>, Vec<f32>) {
    let (b, t, c, nh) = L1;
    (values(b * nh * t * t, 1, 0.0, 1.0), values(b * t * 3 * c, 2, -1.0, 1.0))
}

#[test]
fn p30_s24_l1_attention_value_kernel1_matches_the_reference_on_the_cpu() {
    let (b, t, c, nh) = L1;
    let (att, inp) = l1_inputs();
    let mut out = vec![f32::NAN; b * t * c];
    let config = attention_value_config(b, t, nh, 32);
    llmc::attention_value_kernel1::launch_cpu(&CpuExecutor::new(), config, &mut out, &att, &inp, b as u32, nz(t), c as u32, nz(nh), (c / nh) as u32).unwrap();
    let (want, scale) = attention_value_ref(&att, &inp, b, t, c, nh);
    // f32 sums of up to 9 products: a few ulp of the sum of magnitudes.
    let err = max_scaled_err(&out, &want, &scale);
    assert!(err < 1e-6, "max err {err} of the sums' magnitudes");
}

#[test]
fn p30_s24_l1_attention_value_kernel1_matches_the_reference_on_the_gpu() {
    let Some((context, stream)) = gpu("p30_s24_l1_attention_value_kernel1_matches_the_reference_on_the_gpu") else { return };
    let (b, t, c, nh) = L1;
    let (att, inp) = l1_inputs();
    let (att_d, inp_d) = (DeviceBuffer::from_slice(&context, &att).unwrap(), DeviceBuffer::from_slice(&context, &inp).unwrap());
    let mut out = DeviceBuffer::<f32>::zeroed(&context, b * t * c).unwrap();
    let config = attention_value_config(b, t, nh, 32);
    llmc::attention_value_kernel1::launch(&stream, config, &mut out, &att_d, &inp_d, b as u32, nz(t), c as u32, nz(nh), (c / nh) as u32).unwrap();
    stream.synchronize().unwrap();
    let (want, scale) = attention_value_ref(&att, &inp, b, t, c, nh);
    let err = max_scaled_err(&out.to_vec().unwrap(), &want, &scale);
    assert!(err < 1e-6, "max err {err} of the sums' magnitudes");
}

// ---------------------------------------------------------------- L2 / L5

/// Widths around the source's unroll (8 per thread a step) and warp sizes, with rows shorter
/// than the block (threads past C).
const SOFTMAX_SHAPES: [(usize, usize, u32); 4] = [(3, 40, 32), (2, 1000, 64), (2, 257, 128), (1, 4099, 256)];

#[test]
fn p30_s24_l2_softmax_forward_kernel7_matches_the_reference_on_the_cpu() {
    for (n, c, block) in SOFTMAX_SHAPES {
        let inp = values(n * c, 3, -4.0, 4.0);
        let mut out = vec![f32::NAN; n * c];
        llmc::softmax_forward_kernel7::launch_cpu(&CpuExecutor::new(), softmax7_config(n, block), &mut out, &inp, n as u32, c as u32).unwrap();
        let err = max_rel_err(&out, &softmax_ref(&inp, n, c), 1e-30);
        assert!(err < 1e-5, "n {n} c {c} block {block}: max rel err {err}");
    }
}

#[test]
fn p30_s24_l2_softmax_forward_kernel7_matches_the_reference_on_the_gpu() {
    let Some((context, stream)) = gpu("p30_s24_l2_softmax_forward_kernel7_matches_the_reference_on_the_gpu") else { return };
    for (n, c, block) in SOFTMAX_SHAPES {
        let inp = values(n * c, 3, -4.0, 4.0);
        let inp_d = DeviceBuffer::from_slice(&context, &inp).unwrap();
        let mut out = DeviceBuffer::<f32>::zeroed(&context, n * c).unwrap();
        llmc::softmax_forward_kernel7::launch(&stream, softmax7_config(n, block), &mut out, &inp_d, n as u32, c as u32).unwrap();
        stream.synchronize().unwrap();
        // __expf and the approximate division: a few ulp.
        let err = max_rel_err(&out.to_vec().unwrap(), &softmax_ref(&inp, n, c), 1e-30);
        assert!(err < 2e-5, "n {n} c {c} block {block}: max rel err {err}");
    }
}

#[test]
fn p30_s24_l5_softmax_forward_online_kernel2_matches_the_reference_on_the_cpu() {
    for (n, c, block) in SOFTMAX_SHAPES {
        let inp = values(n * c, 4, -4.0, 4.0);
        let mut out = vec![f32::NAN; n * c];
        llmc::softmax_forward_online_kernel2::launch_cpu(&CpuExecutor::new(), softmax_online2_config(n, block), &mut out, &inp, n as u32, c as u32).unwrap();
        let err = max_rel_err(&out, &softmax_ref(&inp, n, c), 1e-30);
        assert!(err < 1e-5, "n {n} c {c} block {block}: max rel err {err}");
    }
}

#[test]
fn p30_s24_l5_softmax_forward_online_kernel2_matches_the_reference_on_the_gpu() {
    let Some((context, stream)) = gpu("p30_s24_l5_softmax_forward_online_kernel2_matches_the_reference_on_the_gpu") else { return };
    for (n, c, block) in SOFTMAX_SHAPES {
        let inp = values(n * c, 4, -4.0, 4.0);
        let inp_d = DeviceBuffer::from_slice(&context, &inp).unwrap();
        let mut out = DeviceBuffer::<f32>::zeroed(&context, n * c).unwrap();
        llmc::softmax_forward_online_kernel2::launch(&stream, softmax_online2_config(n, block), &mut out, &inp_d, n as u32, c as u32).unwrap();
        stream.synchronize().unwrap();
        let err = max_rel_err(&out.to_vec().unwrap(), &softmax_ref(&inp, n, c), 1e-30);
        assert!(err < 2e-5, "n {n} c {c} block {block}: max rel err {err}");
    }
}

// ---------------------------------------------------------------- L3

#[test]
fn p30_s24_l3_mean_kernel_matches_the_reference_on_the_cpu() {
    for (n, c, block) in [(5, 768, 64), (3, 100, 128), (2, 7, 32)] {
        let inp = values(n * c, 5, -1.0, 3.0);
        let mut mean = vec![f32::NAN; n];
        llmc::mean_kernel::launch_cpu(&CpuExecutor::new(), mean_config(n, block), &mut mean, &inp, n as u32, c as u32, block).unwrap();
        let err = max_rel_err(&mean, &mean_ref(&inp, n, c), 1e-3);
        assert!(err < 1e-5, "n {n} c {c} block {block}: max rel err {err}");
    }
}

#[test]
fn p30_s24_l3_mean_kernel_matches_the_reference_on_the_gpu() {
    let Some((context, stream)) = gpu("p30_s24_l3_mean_kernel_matches_the_reference_on_the_gpu") else { return };
    for (n, c, block) in [(5, 768, 64), (3, 100, 128), (2, 7, 32)] {
        let inp = values(n * c, 5, -1.0, 3.0);
        let inp_d = DeviceBuffer::from_slice(&context, &inp).unwrap();
        let mut mean = DeviceBuffer::<f32>::zeroed(&context, n).unwrap();
        llmc::mean_kernel::launch(&stream, mean_config(n, block), &mut mean, &inp_d, n as u32, c as u32, block).unwrap();
        stream.synchronize().unwrap();
        let err = max_rel_err(&mean.to_vec().unwrap(), &mean_ref(&inp, n, c), 1e-3);
        assert!(err < 1e-5, "n {n} c {c} block {block}: max rel err {err}");
    }
}

// ---------------------------------------------------------------- L4

fn l4_check(got: &[bf16], want: &[bf16]) {
    for (o, (g, w)) in got.iter().zip(want).enumerate() {
        // The f32 sum's order differs from the f64 reference: at most one bf16 step apart.
        let (g, w) = (g.to_f32(), w.to_f32());
        assert!((g - w).abs() <= w.abs() / 128.0 + 1e-6, "dbias[{o}] = {g}, want {w}");
    }
}

#[test]
fn p30_s24_l4_matmul_backward_bias_kernel2_matches_the_reference_on_the_cpu() {
    let (b, t, oc) = (2, 37, 70);
    let dout = values_bf16(b * t * oc, 6, -1.0, 1.0);
    let dbias0 = values_bf16(oc, 7, -1.0, 1.0);
    let mut dbias = dbias0.clone();
    llmc::matmul_backward_bias_kernel2::launch_cpu(&CpuExecutor::new(), bias2_config(oc, 128), &mut dbias, &dout, b as u32, t as u32, oc as u32).unwrap();
    l4_check(&dbias, &bias_ref(&dbias0, &dout, b * t, oc));
}

#[test]
fn p30_s24_l4_matmul_backward_bias_kernel2_matches_the_reference_on_the_gpu() {
    let Some((context, stream)) = gpu("p30_s24_l4_matmul_backward_bias_kernel2_matches_the_reference_on_the_gpu") else { return };
    let (b, t, oc) = (2, 37, 70);
    let dout = values_bf16(b * t * oc, 6, -1.0, 1.0);
    let dbias0 = values_bf16(oc, 7, -1.0, 1.0);
    let dout_d = DeviceBuffer::from_slice(&context, &dout).unwrap();
    let mut dbias = DeviceBuffer::from_slice(&context, &dbias0).unwrap();
    llmc::matmul_backward_bias_kernel2::launch(&stream, bias2_config(oc, 128), &mut dbias, &dout_d, b as u32, t as u32, oc as u32).unwrap();
    stream.synchronize().unwrap();
    l4_check(&dbias.to_vec().unwrap(), &bias_ref(&dbias0, &dout, b * t, oc));
}

// ---------------------------------------------------------------- V1

/// Token counts that take 4, 2 and 1 tiles a token; widths with a ragged last tile.
const V1_SHAPES: [(usize, usize); 3] = [(3, 200), (20, 64), (40, 24)];

fn v1_check(got: &[u64], input: &[bf16], scale: f32, tokens: usize, d: usize) {
    let bytes: Vec<u8> = got.iter().flat_map(|w| w.to_le_bytes()).collect();
    let pre = act_quant_prefp8(input, scale, tokens, d);
    let (bad, not_nearest) = check_fp8(&bytes, &pre);
    assert_eq!(bad, 0, "tokens {tokens} d {d}: {bad} bytes more than one FP8 step off");
    assert!(not_nearest <= bytes.len() / 100, "tokens {tokens} d {d}: {not_nearest} bytes not the nearest");
}

#[test]
fn p30_s24_v1_act_and_mul_quant_kernel_matches_the_reference_on_the_cpu() {
    for (tokens, d) in V1_SHAPES {
        let input = values_bf16(tokens * 2 * d, 8, -6.0, 6.0);
        let scale = [0.05f32];
        let (config, dv, tile) = act_quant_shape(tokens, d);
        let mut out = vec![u64::MAX; tokens * d / 8];
        let packs = packs(&input);
        vllm::act_and_mul_quant_kernel::launch_cpu(&CpuExecutor::new(), config, &mut out, &packs, &scale, dv, tile).unwrap();
        v1_check(&out, &input, scale[0], tokens, d);
    }
}

#[test]
fn p30_s24_v1_act_and_mul_quant_kernel_matches_the_reference_on_the_gpu() {
    let Some((context, stream)) = gpu("p30_s24_v1_act_and_mul_quant_kernel_matches_the_reference_on_the_gpu") else { return };
    for (tokens, d) in V1_SHAPES {
        let input = values_bf16(tokens * 2 * d, 8, -6.0, 6.0);
        let scale = [0.05f32];
        let (config, dv, tile) = act_quant_shape(tokens, d);
        let packs = DeviceBuffer::from_slice(&context, &packs(&input)).unwrap();
        let scale_d = DeviceBuffer::from_slice(&context, &scale).unwrap();
        let mut out = DeviceBuffer::<u64>::zeroed(&context, tokens * d / 8).unwrap();
        vllm::act_and_mul_quant_kernel::launch(&stream, config, &mut out, &packs, &scale_d, dv, tile).unwrap();
        stream.synchronize().unwrap();
        v1_check(&out.to_vec().unwrap(), &input, scale[0], tokens, d);
    }
}

// ---------------------------------------------------------------- V2

const V2_SHAPES: [(usize, usize); 3] = [(40, 3), (512, 1), (700, 2)];

#[test]
fn p30_s24_v2_quantize_q8_1_matches_the_reference_on_the_cpu() {
    for (kx, ky) in V2_SHAPES {
        let x = values_bf16(kx * ky, 9, -3.0, 3.0);
        let mut y = vec![u32::MAX; ky * q8_1_padded(kx) / 32 * 9];
        vllm::quantize_q8_1::launch_cpu(&CpuExecutor::new(), q8_1_config(kx, ky), &x, &mut y, kx as u32, nz(q8_1_padded(kx))).unwrap();
        assert_eq!(y, quantize_q8_1_ref(&x, kx, ky), "kx {kx} ky {ky}");
    }
}

#[test]
fn p30_s24_v2_quantize_q8_1_matches_the_reference_on_the_gpu() {
    let Some((context, stream)) = gpu("p30_s24_v2_quantize_q8_1_matches_the_reference_on_the_gpu") else { return };
    for (kx, ky) in V2_SHAPES {
        let x = values_bf16(kx * ky, 9, -3.0, 3.0);
        let x_d = DeviceBuffer::from_slice(&context, &x).unwrap();
        let mut y = DeviceBuffer::<u32>::zeroed(&context, ky * q8_1_padded(kx) / 32 * 9).unwrap();
        vllm::quantize_q8_1::launch(&stream, q8_1_config(kx, ky), &x_d, &mut y, kx as u32, nz(q8_1_padded(kx))).unwrap();
        stream.synchronize().unwrap();
        assert_eq!(y.to_vec().unwrap(), quantize_q8_1_ref(&x, kx, ky), "kx {kx} ky {ky}");
    }
}

// ---------------------------------------------------------------- V3

#[test]
fn p30_s24_v3_dequantize_block_q4_0_matches_the_reference_on_the_cpu() {
    for k in [512, 2048] {
        let blocks = q4_0_blocks(k / 32, 10);
        let mut y = vec![f16::NAN; k];
        vllm::dequantize_block_q4_0::launch_cpu(&CpuExecutor::new(), dequant_config(k), &blocks, &mut y).unwrap();
        let want = dequant_q4_0_ref(&blocks);
        assert!(y.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "k {k}");
    }
}

#[test]
fn p30_s24_v3_dequantize_block_q4_0_matches_the_reference_on_the_gpu() {
    let Some((context, stream)) = gpu("p30_s24_v3_dequantize_block_q4_0_matches_the_reference_on_the_gpu") else { return };
    for k in [512, 2048] {
        let blocks = q4_0_blocks(k / 32, 10);
        let blocks_d = DeviceBuffer::from_slice(&context, &blocks).unwrap();
        let mut y = DeviceBuffer::<f16>::zeroed(&context, k).unwrap();
        vllm::dequantize_block_q4_0::launch(&stream, dequant_config(k), &blocks_d, &mut y).unwrap();
        stream.synchronize().unwrap();
        let want = dequant_q4_0_ref(&blocks);
        assert!(y.to_vec().unwrap().iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "k {k}");
    }
}

/// A launch of the dequantizer's grid that the output's partition refuses is an error, not a
/// partial write (the source's 2-D or y-extended grids do not apply).
#[test]
fn p30_s24_v3_dequantize_block_q4_0_refuses_a_2d_launch_on_the_cpu() {
    let blocks = q4_0_blocks(16, 11);
    let mut y = vec![f16::ZERO; 512];
    let result = vllm::dequantize_block_q4_0::launch_cpu(&CpuExecutor::new(), LaunchConfig::new((1, 2), 256), &blocks, &mut y);
    assert!(result.is_err(), "a 2-D grid was accepted");
}

// ---------------------------------------------------------------- fix rounds

#[test]
fn p30_s24_l2_fix_softmax_forward_kernel7_fix_matches_the_reference_on_the_cpu() {
    for (n, c, block) in SOFTMAX_SHAPES {
        let inp = values(n * c, 3, -4.0, 4.0);
        let mut out = vec![f32::NAN; n * c];
        llmc::softmax_forward_kernel7_fix::launch_cpu(&CpuExecutor::new(), softmax7_config(n, block), &mut out, &inp, n as u32, c as u32).unwrap();
        let err = max_rel_err(&out, &softmax_ref(&inp, n, c), 1e-30);
        assert!(err < 1e-5, "n {n} c {c} block {block}: max rel err {err}");
    }
}

#[test]
fn p30_s24_l2_fix_softmax_forward_kernel7_fix_matches_the_reference_on_the_gpu() {
    let Some((context, stream)) = gpu("p30_s24_l2_fix_softmax_forward_kernel7_fix_matches_the_reference_on_the_gpu") else { return };
    for (n, c, block) in SOFTMAX_SHAPES {
        let inp = values(n * c, 3, -4.0, 4.0);
        let inp_d = DeviceBuffer::from_slice(&context, &inp).unwrap();
        let mut out = DeviceBuffer::<f32>::zeroed(&context, n * c).unwrap();
        llmc::softmax_forward_kernel7_fix::launch(&stream, softmax7_config(n, block), &mut out, &inp_d, n as u32, c as u32).unwrap();
        stream.synchronize().unwrap();
        let err = max_rel_err(&out.to_vec().unwrap(), &softmax_ref(&inp, n, c), 1e-30);
        assert!(err < 2e-5, "n {n} c {c} block {block}: max rel err {err}");
    }
}

#[test]
fn p30_s24_l3_fix_mean_kernel_fix_matches_the_reference_on_the_cpu() {
    for (n, c, block) in [(5, 768, 64), (3, 100, 128), (2, 7, 32)] {
        let inp = values(n * c, 5, -1.0, 3.0);
        let mut mean = vec![f32::NAN; n];
        llmc::mean_kernel_fix::launch_cpu(&CpuExecutor::new(), mean_config(n, block), &mut mean, &inp, n as u32, c as u32, block).unwrap();
        let err = max_rel_err(&mean, &mean_ref(&inp, n, c), 1e-3);
        assert!(err < 1e-5, "n {n} c {c} block {block}: max rel err {err}");
    }
}

#[test]
fn p30_s24_l3_fix_mean_kernel_fix_matches_the_reference_on_the_gpu() {
    let Some((context, stream)) = gpu("p30_s24_l3_fix_mean_kernel_fix_matches_the_reference_on_the_gpu") else { return };
    for (n, c, block) in [(5, 768, 64), (3, 100, 128), (2, 7, 32)] {
        let inp = values(n * c, 5, -1.0, 3.0);
        let inp_d = DeviceBuffer::from_slice(&context, &inp).unwrap();
        let mut mean = DeviceBuffer::<f32>::zeroed(&context, n).unwrap();
        llmc::mean_kernel_fix::launch(&stream, mean_config(n, block), &mut mean, &inp_d, n as u32, c as u32, block).unwrap();
        stream.synchronize().unwrap();
        let err = max_rel_err(&mean.to_vec().unwrap(), &mean_ref(&inp, n, c), 1e-3);
        assert!(err < 1e-5, "n {n} c {c} block {block}: max rel err {err}");
    }
}

#[test]
fn p30_s24_l1_fix_attention_value_kernel1_fix_matches_the_reference_on_the_cpu() {
    let (b, t, c, nh) = L1;
    let (att, inp) = l1_inputs();
    let mut out = vec![f32::NAN; b * t * c];
    let config = attention_value_config(b, t, nh, 32);
    llmc::attention_value_kernel1_fix::launch_cpu(&CpuExecutor::new(), config, &mut out, &att, &inp, b as u32, nz(t), c as u32, nz(nh), (c / nh) as u32)
        .unwrap();
    let (want, scale) = attention_value_ref(&att, &inp, b, t, c, nh);
    let err = max_scaled_err(&out, &want, &scale);
    assert!(err < 1e-6, "max err {err} of the sums' magnitudes");
}

#[test]
fn p30_s24_l1_fix_attention_value_kernel1_fix_matches_the_reference_on_the_gpu() {
    let Some((context, stream)) = gpu("p30_s24_l1_fix_attention_value_kernel1_fix_matches_the_reference_on_the_gpu") else { return };
    let (b, t, c, nh) = L1;
    let (att, inp) = l1_inputs();
    let (att_d, inp_d) = (DeviceBuffer::from_slice(&context, &att).unwrap(), DeviceBuffer::from_slice(&context, &inp).unwrap());
    let mut out = DeviceBuffer::<f32>::zeroed(&context, b * t * c).unwrap();
    let config = attention_value_config(b, t, nh, 32);
    llmc::attention_value_kernel1_fix::launch(&stream, config, &mut out, &att_d, &inp_d, b as u32, nz(t), c as u32, nz(nh), (c / nh) as u32).unwrap();
    stream.synchronize().unwrap();
    let (want, scale) = attention_value_ref(&att, &inp, b, t, c, nh);
    let err = max_scaled_err(&out.to_vec().unwrap(), &want, &scale);
    assert!(err < 1e-6, "max err {err} of the sums' magnitudes");
}

#[test]
fn p30_s24_v2_fix_quantize_q8_1_fix_matches_the_reference_on_the_cpu() {
    for (kx, ky) in V2_SHAPES {
        let x = values_bf16(kx * ky, 9, -3.0, 3.0);
        let mut y = vec![u32::MAX; ky * q8_1_padded(kx) / 32 * 9];
        vllm::quantize_q8_1_fix::launch_cpu(&CpuExecutor::new(), q8_1_config(kx, ky), &x, &mut y, kx as u32, nz(q8_1_padded(kx) / 256)).unwrap();
        assert_eq!(y, quantize_q8_1_ref(&x, kx, ky), "kx {kx} ky {ky}");
    }
}

#[test]
fn p30_s24_v2_fix_quantize_q8_1_fix_matches_the_reference_on_the_gpu() {
    let Some((context, stream)) = gpu("p30_s24_v2_fix_quantize_q8_1_fix_matches_the_reference_on_the_gpu") else { return };
    for (kx, ky) in V2_SHAPES {
        let x = values_bf16(kx * ky, 9, -3.0, 3.0);
        let x_d = DeviceBuffer::from_slice(&context, &x).unwrap();
        let mut y = DeviceBuffer::<u32>::zeroed(&context, ky * q8_1_padded(kx) / 32 * 9).unwrap();
        vllm::quantize_q8_1_fix::launch(&stream, q8_1_config(kx, ky), &x_d, &mut y, kx as u32, nz(q8_1_padded(kx) / 256)).unwrap();
        stream.synchronize().unwrap();
        assert_eq!(y.to_vec().unwrap(), quantize_q8_1_ref(&x, kx, ky), "kx {kx} ky {ky}");
    }
}

#[test]
fn p30_s24_v3_fix_dequantize_block_q4_0_fix_matches_the_reference_on_the_cpu() {
    for k in [512, 2048] {
        let blocks = q4_0_blocks(k / 32, 10);
        let mut y = vec![f16::NAN; k];
        vllm::dequantize_block_q4_0_fix::launch_cpu(&CpuExecutor::new(), dequant_config(k), &blocks, &mut y).unwrap();
        let want = dequant_q4_0_ref(&blocks);
        assert!(y.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "k {k}");
    }
}

#[test]
fn p30_s24_v3_fix_dequantize_block_q4_0_fix_matches_the_reference_on_the_gpu() {
    let Some((context, stream)) = gpu("p30_s24_v3_fix_dequantize_block_q4_0_fix_matches_the_reference_on_the_gpu") else { return };
    for k in [512, 2048] {
        let blocks = q4_0_blocks(k / 32, 10);
        let blocks_d = DeviceBuffer::from_slice(&context, &blocks).unwrap();
        let mut y = DeviceBuffer::<f16>::zeroed(&context, k).unwrap();
        vllm::dequantize_block_q4_0_fix::launch(&stream, dequant_config(k), &blocks_d, &mut y).unwrap();
        stream.synchronize().unwrap();
        let want = dequant_q4_0_ref(&blocks);
        assert!(y.to_vec().unwrap().iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "k {k}");
    }
}
