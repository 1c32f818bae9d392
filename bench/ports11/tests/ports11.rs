//! bench/ports11's tests: each port on the CPU executor against its reference (plain Rust,
//! `f64` where the kernel sums), and the same on the GPU when there is one (skipped with a
//! printed reason otherwise; a failure under `REQUIRE_GPU=1`).

use std::num::NonZeroU32;

use ferrocuda::cpu::CpuExecutor;
use ferrocuda::{Context, DeviceBuffer, Error, LaunchConfig, Stream};
use ferrocuda_ports11::*;
use ferrocuda_test_support::gpu_required;
use half::bf16;
use ports11_kernels::*;

/// The GPU's context and a stream, or `None` after printing why (no driver, no device), unless
/// `REQUIRE_GPU=1`.
fn gpu(test: &str) -> Option<(Context, Stream)> {
    match Context::primary(0) {
        Ok(context) => {
            let stream = Stream::new(&context).expect("a stream");
            Some((context, stream))
        }
        Err(error @ (Error::NoDriver | Error::NoDevice { .. })) if !gpu_required() => {
            println!("SKIPPED {test}: {error}");
            None
        }
        Err(error) => panic!("{test}: no GPU ({error}) and REQUIRE_GPU=1"),
    }
}

fn nz(v: u32) -> NonZeroU32 {
    NonZeroU32::new(v).unwrap()
}

fn assert_close(what: &str, got: &[f32], want: &[f64], rel: f64, abs: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!((g as f64 - w).abs() <= rel * w.abs() + abs, "{what}[{i}] = {g}, want {w}");
    }
}

// ---- L1: layernorm_forward_kernel5 ----

const L1_N: usize = 37;
const L1_C: usize = 300; // not a multiple of the block: partial strides

fn l1_check(out: &[f32], mean: &[f32], rstd: &[f32], inp: &[f32], weight: &[f32], bias: &[f32]) {
    let (o, m, s) = layernorm_reference(inp, weight, bias, L1_N, L1_C);
    assert_close("mean", mean, &m, 1e-5, 1e-6);
    assert_close("rstd", rstd, &s, 1e-5, 1e-6);
    assert_close("out", out, &o, 1e-5, 2e-5);
}

fn l1_inputs() -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let inp: Vec<f32> = uniform(L1_N * L1_C, 1).iter().map(|v| 3.0 * v + 0.5).collect();
    (inp, uniform(L1_C, 2), uniform(L1_C, 3))
}

#[test]
fn l1_layernorm_forward_kernel5_cpu() {
    let (inp, weight, bias) = l1_inputs();
    for block in [32u32, 96, 256, 1024] {
        let (mut out, mut mean, mut rstd) = (vec![0.0; L1_N * L1_C], vec![0.0; L1_N], vec![0.0; L1_N]);
        layernorm_forward_kernel5::launch_cpu(
            &CpuExecutor::new(),
            (L1_N as u32, block),
            &mut out,
            &mut mean,
            &mut rstd,
            &inp,
            &weight,
            &bias,
            L1_N as u32,
            L1_C as u32,
        )
        .unwrap();
        l1_check(&out, &mean, &rstd, &inp, &weight, &bias);
    }
}

#[test]
fn l1_layernorm_forward_kernel5_gpu() {
    let Some((context, stream)) = gpu("l1_layernorm_forward_kernel5_gpu") else { return };
    let (inp, weight, bias) = l1_inputs();
    let (x, w, b) = (
        DeviceBuffer::from_slice(&context, &inp).unwrap(),
        DeviceBuffer::from_slice(&context, &weight).unwrap(),
        DeviceBuffer::from_slice(&context, &bias).unwrap(),
    );
    for block in [32u32, 256, 1024] {
        let mut out = DeviceBuffer::<f32>::zeroed(&context, L1_N * L1_C).unwrap();
        let mut mean = DeviceBuffer::<f32>::zeroed(&context, L1_N).unwrap();
        let mut rstd = DeviceBuffer::<f32>::zeroed(&context, L1_N).unwrap();
        layernorm_forward_kernel5::launch(&stream, (L1_N as u32, block), &mut out, &mut mean, &mut rstd, &x, &w, &b, L1_N as u32, L1_C as u32).unwrap();
        stream.synchronize().unwrap();
        l1_check(&out.to_vec().unwrap(), &mean.to_vec().unwrap(), &rstd.to_vec().unwrap(), &inp, &weight, &bias);
    }
}

#[test]
fn l1_layernorm_forward_kernel5_fix_cpu_and_gpu() {
    let (inp, weight, bias) = l1_inputs();
    for block in [32u32, 96, 256, 1024] {
        let (mut out, mut mean, mut rstd) = (vec![0.0; L1_N * L1_C], vec![0.0; L1_N], vec![0.0; L1_N]);
        layernorm_forward_kernel5_fix::launch_cpu(
            &CpuExecutor::new(),
            (L1_N as u32, block),
            &mut out,
            &mut mean,
            &mut rstd,
            &inp,
            &weight,
            &bias,
            L1_N as u32,
            L1_C as u32,
        )
        .unwrap();
        l1_check(&out, &mean, &rstd, &inp, &weight, &bias);
    }
    let Some((context, stream)) = gpu("l1_layernorm_forward_kernel5_fix_cpu_and_gpu (its GPU half)") else { return };
    let (x, w, b) = (
        DeviceBuffer::from_slice(&context, &inp).unwrap(),
        DeviceBuffer::from_slice(&context, &weight).unwrap(),
        DeviceBuffer::from_slice(&context, &bias).unwrap(),
    );
    for block in [32u32, 256, 1024] {
        let mut out = DeviceBuffer::<f32>::zeroed(&context, L1_N * L1_C).unwrap();
        let mut mean = DeviceBuffer::<f32>::zeroed(&context, L1_N).unwrap();
        let mut rstd = DeviceBuffer::<f32>::zeroed(&context, L1_N).unwrap();
        layernorm_forward_kernel5_fix::launch(&stream, (L1_N as u32, block), &mut out, &mut mean, &mut rstd, &x, &w, &b, L1_N as u32, L1_C as u32).unwrap();
        stream.synchronize().unwrap();
        l1_check(&out.to_vec().unwrap(), &mean.to_vec().unwrap(), &rstd.to_vec().unwrap(), &inp, &weight, &bias);
    }
}

// ---- L2: matmul_backward_bias_kernel3 ----

const L2_BT: usize = 2 * 77;
const L2_OC: usize = 96;

fn l2_check(got: &[bf16], dbias: &[bf16], dout: &[bf16]) {
    let want = bias_grad_reference(dbias, dout, L2_BT, L2_OC);
    for (o, (&g, &w)) in got.iter().zip(&want).enumerate() {
        // f32 sums in another order, then one rounding to bf16: at most one bf16 step apart.
        assert!((g.to_f64() - w).abs() <= bf16_ulp(w), "dbias[{o}] = {g}, want {w}");
    }
}

#[test]
fn l2_matmul_backward_bias_kernel3_cpu() {
    let dout = uniform_bf16(L2_BT * L2_OC, 4, 1.0);
    let dbias0 = uniform_bf16(L2_OC, 5, 4.0);
    for block in [32u32, 64, 512, 1024] {
        let mut dbias = dbias0.clone();
        matmul_backward_bias_kernel3::launch_cpu(&CpuExecutor::new(), (L2_OC as u32, block), &mut dbias, &dout, 2, 77, L2_OC as u32).unwrap();
        l2_check(&dbias, &dbias0, &dout);
    }
}

#[test]
fn l2_matmul_backward_bias_kernel3_gpu() {
    let Some((context, stream)) = gpu("l2_matmul_backward_bias_kernel3_gpu") else { return };
    let dout = uniform_bf16(L2_BT * L2_OC, 4, 1.0);
    let dbias0 = uniform_bf16(L2_OC, 5, 4.0);
    let d = DeviceBuffer::from_slice(&context, &dout).unwrap();
    for block in [32u32, 512, 1024] {
        let mut dbias = DeviceBuffer::from_slice(&context, &dbias0).unwrap();
        matmul_backward_bias_kernel3::launch(&stream, (L2_OC as u32, block), &mut dbias, &d, 2, 77, L2_OC as u32).unwrap();
        stream.synchronize().unwrap();
        l2_check(&dbias.to_vec().unwrap(), &dbias0, &dout);
    }
}

#[test]
fn l2_matmul_backward_bias_kernel3_fix_cpu_and_gpu() {
    let dout = uniform_bf16(L2_BT * L2_OC, 4, 1.0);
    let dbias0 = uniform_bf16(L2_OC, 5, 4.0);
    for block in [32u32, 64, 512, 1024] {
        let mut dbias = dbias0.clone();
        matmul_backward_bias_kernel3_fix::launch_cpu(&CpuExecutor::new(), (L2_OC as u32, block), &mut dbias, &dout, 2, 77, L2_OC as u32).unwrap();
        l2_check(&dbias, &dbias0, &dout);
    }
    let Some((context, stream)) = gpu("l2_matmul_backward_bias_kernel3_fix_cpu_and_gpu (its GPU half)") else { return };
    let d = DeviceBuffer::from_slice(&context, &dout).unwrap();
    for block in [32u32, 512, 1024] {
        let mut dbias = DeviceBuffer::from_slice(&context, &dbias0).unwrap();
        matmul_backward_bias_kernel3_fix::launch(&stream, (L2_OC as u32, block), &mut dbias, &d, 2, 77, L2_OC as u32).unwrap();
        stream.synchronize().unwrap();
        l2_check(&dbias.to_vec().unwrap(), &dbias0, &dout);
    }
}

// ---- L3: softmax_forward_online_kernel8 ----

const L3_N: usize = 45;
const L3_C: usize = 333;

fn l3_inputs() -> Vec<f32> {
    uniform(L3_N * L3_C, 6).iter().map(|v| 8.0 * v).collect()
}

#[test]
fn l3_softmax_forward_online_kernel8_cpu() {
    let inp = l3_inputs();
    let want = softmax_reference(&inp, L3_N, L3_C);
    for block in [32u32, 128, 256] {
        let mut out = vec![0.0f32; L3_N * L3_C];
        let grid = (L3_N as u32).div_ceil(block / 32);
        softmax_forward_online_kernel8::launch_cpu(&CpuExecutor::new(), (grid, block), &mut out, &inp, L3_N as u32, L3_C as u32).unwrap();
        assert_close("softmax", &out, &want, 2e-5, 1e-9);
    }
}

#[test]
fn l3_softmax_forward_online_kernel8_gpu() {
    let Some((context, stream)) = gpu("l3_softmax_forward_online_kernel8_gpu") else { return };
    let inp = l3_inputs();
    let want = softmax_reference(&inp, L3_N, L3_C);
    let x = DeviceBuffer::from_slice(&context, &inp).unwrap();
    for block in [32u32, 256] {
        let mut out = DeviceBuffer::<f32>::zeroed(&context, L3_N * L3_C).unwrap();
        let grid = (L3_N as u32).div_ceil(block / 32);
        softmax_forward_online_kernel8::launch(&stream, (grid, block), &mut out, &x, L3_N as u32, L3_C as u32).unwrap();
        stream.synchronize().unwrap();
        assert_close("softmax", &out.to_vec().unwrap(), &want, 2e-5, 1e-9);
    }
}

// ---- L4: norm_kernel2<bf16> ----

const L4_COUNT: usize = 100_003;

#[test]
fn l4_norm_kernel2_cpu() {
    let data = uniform_bf16(L4_COUNT, 7, 2.0);
    let want = sum_of_squares_reference(&data);
    for (grid, block) in [(1u32, 32u32), (7, 256), (40, 512)] {
        let mut out = vec![0.0f32];
        norm_kernel2::launch_cpu(&CpuExecutor::new(), (grid, block), &mut out, &data).unwrap();
        assert!((out[0] as f64 - want).abs() <= 1e-5 * want, "grid {grid} x {block}: {} want {want}", out[0]);
    }
}

#[test]
fn l4_norm_kernel2_gpu() {
    let Some((context, stream)) = gpu("l4_norm_kernel2_gpu") else { return };
    let data = uniform_bf16(L4_COUNT, 7, 2.0);
    let want = sum_of_squares_reference(&data);
    let d = DeviceBuffer::from_slice(&context, &data).unwrap();
    for (grid, block) in [(1u32, 32u32), (40, 512)] {
        let mut out = DeviceBuffer::<f32>::zeroed(&context, 1).unwrap();
        norm_kernel2::launch(&stream, (grid, block), &mut out, &d).unwrap();
        stream.synchronize().unwrap();
        let got = out.to_vec().unwrap()[0];
        assert!((got as f64 - want).abs() <= 1e-5 * want, "grid {grid} x {block}: {got} want {want}");
    }
}

// ---- L5: attention_softmax_kernel1 ----

const L5: (usize, usize, usize) = (2, 3, 37); // b, nh, t

fn l5_inputs() -> Vec<f32> {
    let (b, nh, t) = L5;
    uniform(b * nh * t * t, 8).iter().map(|v| 6.0 * v).collect()
}

#[test]
fn l5_attention_softmax_kernel1_cpu() {
    let (b, nh, t) = L5;
    let preatt = l5_inputs();
    let want = causal_softmax_reference(&preatt, b, nh, t);
    for block in [32u32, 64] {
        let mut att = vec![f32::NAN; b * nh * t * t];
        let grid = ((b * nh * t) as u32).div_ceil(block);
        attention_softmax_kernel1::launch_cpu(&CpuExecutor::new(), (grid, block), &mut att, &preatt, b as u32, nz(t as u32), nz(nh as u32)).unwrap();
        assert_close("att", &att, &want, 2e-5, 1e-9);
    }
}

#[test]
fn l5_attention_softmax_kernel1_gpu() {
    let Some((context, stream)) = gpu("l5_attention_softmax_kernel1_gpu") else { return };
    let (b, nh, t) = L5;
    let preatt = l5_inputs();
    let want = causal_softmax_reference(&preatt, b, nh, t);
    let p = DeviceBuffer::from_slice(&context, &preatt).unwrap();
    let mut att = DeviceBuffer::from_slice(&context, &vec![f32::NAN; b * nh * t * t]).unwrap();
    let grid = ((b * nh * t) as u32).div_ceil(64);
    attention_softmax_kernel1::launch(&stream, (grid, 64), &mut att, &p, b as u32, nz(t as u32), nz(nh as u32)).unwrap();
    stream.synchronize().unwrap();
    assert_close("att", &att.to_vec().unwrap(), &want, 2e-5, 1e-9);
}

// ---- L6: scale_kernel ----

#[test]
fn l6_scale_kernel_cpu_and_gpu() {
    let (b, nh, t) = L5;
    let n = b * nh * t * t;
    let inp = uniform(n, 9);
    let want = scale_reference(&inp, 0.125, t);
    let config = LaunchConfig::for_elements(n, 256);
    let mut x = inp.clone();
    scale_kernel::launch_cpu(&CpuExecutor::new(), config, &mut x, 0.125, b as u32, nh as u32, nz(t as u32)).unwrap();
    assert_eq!(x.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), "cpu");
    let Some((context, stream)) = gpu("l6_scale_kernel_cpu_and_gpu (its GPU half)") else { return };
    let mut d = DeviceBuffer::from_slice(&context, &inp).unwrap();
    scale_kernel::launch(&stream, config, &mut d, 0.125, b as u32, nh as u32, nz(t as u32)).unwrap();
    stream.synchronize().unwrap();
    let got = d.to_vec().unwrap();
    assert_eq!(got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), "gpu");
}

// ---- V1: convert_fp8_kernel ----

const V1_BLOCKS: usize = 9;
const V1_STRIDE: usize = 1000;

fn v1_inputs() -> Vec<bf16> {
    // Past ±448 (saturation), subnormals and zeros included.
    let mut src = uniform_bf16(V1_BLOCKS * V1_STRIDE, 10, 600.0);
    src[0] = bf16::from_f32(0.0);
    src[1] = bf16::from_f32(-0.0);
    src[2] = bf16::from_f32(0.0009);
    src[3] = bf16::from_f32(-1e4);
    src
}

fn v1_check(got: &[u8], src: &[bf16], scale: f32) {
    for (i, (&g, &x)) in got.iter().zip(src).enumerate() {
        let want = e4m3_reference(x.to_f32() / scale);
        assert_eq!(g, want, "dst[{i}] from {x} / {scale}: {g:#04x}, want {want:#04x}");
    }
}

#[test]
fn v1_convert_fp8_kernel_cpu() {
    let src = v1_inputs();
    for block in [64u32, 512] {
        let mut dst = vec![0xaau8; src.len()];
        convert_fp8_kernel::launch_cpu(&CpuExecutor::new(), (V1_BLOCKS as u32, block), &src, &mut dst, 1.5, V1_STRIDE as u32).unwrap();
        v1_check(&dst, &src, 1.5);
    }
}

#[test]
fn v1_convert_fp8_kernel_gpu() {
    let Some((context, stream)) = gpu("v1_convert_fp8_kernel_gpu") else { return };
    let src = v1_inputs();
    let s = DeviceBuffer::from_slice(&context, &src).unwrap();
    let mut dst = DeviceBuffer::<u8>::zeroed(&context, src.len()).unwrap();
    convert_fp8_kernel::launch(&stream, (V1_BLOCKS as u32, 512), &s, &mut dst, 1.5, V1_STRIDE as u32).unwrap();
    stream.synchronize().unwrap();
    v1_check(&dst.to_vec().unwrap(), &src, 1.5);
}

// ---- V2: advance_step_kernel ----

const V2_SEQS: usize = 1000;
const V2_STRIDE: usize = 40;

fn v2_inputs() -> (Vec<i32>, Vec<i32>) {
    let seq_lens = (0..V2_SEQS).map(|s| ((s * 37) % (V2_STRIDE * 16 - 1)) as i32).collect();
    (seq_lens, block_tables(V2_SEQS, V2_STRIDE))
}

#[test]
fn v2_advance_step_kernel_cpu() {
    let (lens0, tables) = v2_inputs();
    let mut want_lens = lens0.clone();
    let (want_pos, want_slots) = advance_step_reference(&mut want_lens, &tables, V2_STRIDE, 16);
    let mut lens = lens0.clone();
    let (mut pos, mut slots) = (vec![-1i64; V2_SEQS], vec![-1i32; V2_SEQS]);
    let grid = (V2_SEQS as u32).div_ceil(ADVANCE_STEP_THREADS);
    let sampled = vec![0i64; V2_SEQS];
    advance_step_kernel::launch_cpu(
        &CpuExecutor::new(),
        (grid, ADVANCE_STEP_THREADS),
        nz(16),
        &sampled,
        &mut pos,
        &mut lens,
        &mut slots,
        &tables,
        V2_STRIDE as u32,
    )
    .unwrap();
    assert_eq!(lens, want_lens);
    assert_eq!(pos, want_pos);
    assert_eq!(slots, want_slots);
}

#[test]
fn v2_advance_step_kernel_gpu() {
    let Some((context, stream)) = gpu("v2_advance_step_kernel_gpu") else { return };
    let (lens0, tables) = v2_inputs();
    let mut want_lens = lens0.clone();
    let (want_pos, want_slots) = advance_step_reference(&mut want_lens, &tables, V2_STRIDE, 16);
    let mut lens = DeviceBuffer::from_slice(&context, &lens0).unwrap();
    let mut pos = DeviceBuffer::<i64>::zeroed(&context, V2_SEQS).unwrap();
    let mut slots = DeviceBuffer::<i32>::zeroed(&context, V2_SEQS).unwrap();
    let t = DeviceBuffer::from_slice(&context, &tables).unwrap();
    let sampled = DeviceBuffer::<i64>::zeroed(&context, V2_SEQS).unwrap();
    let grid = (V2_SEQS as u32).div_ceil(ADVANCE_STEP_THREADS);
    advance_step_kernel::launch(&stream, (grid, ADVANCE_STEP_THREADS), nz(16), &sampled, &mut pos, &mut lens, &mut slots, &t, V2_STRIDE as u32).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(lens.to_vec().unwrap(), want_lens);
    assert_eq!(pos.to_vec().unwrap(), want_pos);
    assert_eq!(slots.to_vec().unwrap(), want_slots);
}

// ---- docs probe: llm.c's unguarded same-value store to a shared slot ----

#[test]
fn probe_all_lanes_storing_one_value_to_a_shared_slot_is_reported_as_a_race() {
    let mut out = vec![0.0f32; 128];
    let result = probe_all_lanes_store_one_slot::launch_cpu(&CpuExecutor::new(), (1u32, 128u32), &mut out);
    // What the CPU executor says about llm.c's `shared_sum[warp_id] = warp_sum` from all 32
    // lanes (the same value): the ports guard the store with `lane_id == 0` because of this.
    println!("probe: {result:?}");
    assert!(result.is_err(), "the race detector accepted 32 lanes storing one value to one word: {out:?}");
}

// ---- Session 24 (bench/results/s24-gaps/): `#[kernel(ftz)]` and `PermutedRows` ----

/// L1 under `#[kernel(ftz)]` (first try and fix bodies): right on the CPU executor (IEEE there)
/// at every block size, race detector on; on the GPU right and, with inputs far from
/// subnormal, the first try's `mean` bit for bit (`ftz` changes no normal value's sum).
#[test]
fn s24_l1_layernorm_ftz_cpu_and_gpu() {
    let (inp, weight, bias) = l1_inputs();
    for block in [32u32, 96, 256, 1024] {
        for fix in [false, true] {
            let (mut out, mut mean, mut rstd) = (vec![0.0; L1_N * L1_C], vec![0.0; L1_N], vec![0.0; L1_N]);
            let (n, c, executor) = (L1_N as u32, L1_C as u32, CpuExecutor::new());
            if fix {
                s24::layernorm_forward_kernel5_fix_ftz::launch_cpu(&executor, (n, block), &mut out, &mut mean, &mut rstd, &inp, &weight, &bias, n, c)
            } else {
                s24::layernorm_forward_kernel5_ftz::launch_cpu(&executor, (n, block), &mut out, &mut mean, &mut rstd, &inp, &weight, &bias, n, c)
            }
            .unwrap();
            l1_check(&out, &mean, &rstd, &inp, &weight, &bias);
        }
    }
    let Some((context, stream)) = gpu("s24_l1_layernorm_ftz_cpu_and_gpu (its GPU half)") else { return };
    let (x, w, b) = (
        DeviceBuffer::from_slice(&context, &inp).unwrap(),
        DeviceBuffer::from_slice(&context, &weight).unwrap(),
        DeviceBuffer::from_slice(&context, &bias).unwrap(),
    );
    let (n, c) = (L1_N as u32, L1_C as u32);
    for block in [32u32, 256, 1024] {
        let mut out = DeviceBuffer::<f32>::zeroed(&context, L1_N * L1_C).unwrap();
        let mut mean = DeviceBuffer::<f32>::zeroed(&context, L1_N).unwrap();
        let mut rstd = DeviceBuffer::<f32>::zeroed(&context, L1_N).unwrap();
        layernorm_forward_kernel5::launch(&stream, (n, block), &mut out, &mut mean, &mut rstd, &x, &w, &b, n, c).unwrap();
        let ieee_mean = mean.to_vec().unwrap();
        for fix in [false, true] {
            if fix {
                s24::layernorm_forward_kernel5_fix_ftz::launch(&stream, (n, block), &mut out, &mut mean, &mut rstd, &x, &w, &b, n, c).unwrap();
            } else {
                s24::layernorm_forward_kernel5_ftz::launch(&stream, (n, block), &mut out, &mut mean, &mut rstd, &x, &w, &b, n, c).unwrap();
            }
            stream.synchronize().unwrap();
            l1_check(&out.to_vec().unwrap(), &mean.to_vec().unwrap(), &rstd.to_vec().unwrap(), &inp, &weight, &bias);
            if !fix {
                assert_eq!(mean.to_vec().unwrap(), ieee_mean, "block {block}: the first try's mean, ftz or not");
            }
        }
    }
}

/// `#[kernel(ftz)]` flushes on the GPU and nowhere else: a subnormal product (1e-20 x 1e-20) and
/// a subnormal operand (1e-40 x 1) are zero (of the operands' sign) under `ftz`, the IEEE
/// subnormal without it; the CPU executor gives the IEEE value for both kernels (it cannot
/// flush: Rust defines a changed floating-point environment as undefined behaviour).
#[test]
fn s24_ftz_flushes_subnormals_on_the_gpu_and_the_cpu_executor_keeps_ieee() {
    let x = [1e-20f32, -1e-20, 1e-40, -1e-40, 1.5, 1.0e-19];
    let y = [1e-20f32, 1e-20, 1.0, 1.0, 2.0, 1.0e-19];
    let ieee: Vec<f32> = x.iter().zip(&y).map(|(a, b)| a * b).collect();
    assert!(ieee[..4].iter().all(|v| v.is_subnormal()) && ieee[5].is_subnormal(), "{ieee:?}");
    let flushed: Vec<u32> = ieee.iter().map(|v| if v.is_subnormal() { v.to_bits() & 0x8000_0000 } else { v.to_bits() }).collect();
    for executor in [CpuExecutor::new(), CpuExecutor::deterministic()] {
        let mut out = vec![0.0f32; x.len()];
        s24::s24_mul_ftz::launch_cpu(&executor, (1u32, 32u32), &mut out, &x, &y).unwrap();
        assert_eq!(out.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), ieee.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    }
    let Some((context, stream)) = gpu("s24_ftz_flushes_subnormals_on_the_gpu_and_the_cpu_executor_keeps_ieee (its GPU half)") else { return };
    let (dx, dy) = (DeviceBuffer::from_slice(&context, &x).unwrap(), DeviceBuffer::from_slice(&context, &y).unwrap());
    let mut out = DeviceBuffer::<f32>::zeroed(&context, x.len()).unwrap();
    s24::s24_mul_ftz::launch(&stream, (1u32, 32u32), &mut out, &dx, &dy).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(out.to_vec().unwrap().iter().map(|v| v.to_bits()).collect::<Vec<_>>(), flushed, "under ftz");
    s24::s24_mul_ieee::launch(&stream, (1u32, 32u32), &mut out, &dx, &dy).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(out.to_vec().unwrap().iter().map(|v| v.to_bits()).collect::<Vec<_>>(), ieee.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), "IEEE");
}

/// L5 with `PermutedRows`: the source's three passes (stores, then loads of the thread's own
/// row) right on the CPU executor (race detector on: each thread claims its whole row) and bit
/// for bit the first try's (`AtomicSlice`, `exp` recomputed: the same values) on the CPU and
/// the GPU; a zero radix is refused at launch.
#[test]
fn s24_l5_attention_softmax_permuted_rows_cpu_and_gpu() {
    let (b, nh, t) = L5;
    let preatt = l5_inputs();
    let want = causal_softmax_reference(&preatt, b, nh, t);
    for block in [32u32, 64, 96] {
        let grid = ((b * nh * t) as u32).div_ceil(block);
        for executor in [CpuExecutor::new(), CpuExecutor::deterministic()] {
            let mut att = vec![f32::NAN; b * nh * t * t];
            s24::attention_softmax_kernel1_perm::launch_cpu(&executor, (grid, block), &mut att, &preatt, t as u32, nh as u32).unwrap();
            assert_close("att", &att, &want, 2e-5, 1e-9);
            let mut first = vec![f32::NAN; b * nh * t * t];
            attention_softmax_kernel1::launch_cpu(&executor, (grid, block), &mut first, &preatt, b as u32, nz(t as u32), nz(nh as u32)).unwrap();
            assert!(att.iter().zip(&first).all(|(a, f)| a.to_bits() == f.to_bits()), "block {block}: not the first try's bits");
        }
    }
    let mut att = vec![0.0f32; b * nh * t * t];
    let refused = s24::attention_softmax_kernel1_perm::launch_cpu(&CpuExecutor::new(), (4u32, 64u32), &mut att, &preatt, t as u32, 0).unwrap_err();
    assert!(refused.to_string().contains("PermutedRows"), "{refused}");
    let Some((context, stream)) = gpu("s24_l5_attention_softmax_permuted_rows_cpu_and_gpu (its GPU half)") else { return };
    let p = DeviceBuffer::from_slice(&context, &preatt).unwrap();
    for block in [32u32, 64] {
        let grid = ((b * nh * t) as u32).div_ceil(block);
        let mut att = DeviceBuffer::from_slice(&context, &vec![f32::NAN; b * nh * t * t]).unwrap();
        s24::attention_softmax_kernel1_perm::launch(&stream, (grid, block), &mut att, &p, t as u32, nh as u32).unwrap();
        let mut first = DeviceBuffer::from_slice(&context, &vec![f32::NAN; b * nh * t * t]).unwrap();
        attention_softmax_kernel1::launch(&stream, (grid, block), &mut first, &p, b as u32, nz(t as u32), nz(nh as u32)).unwrap();
        stream.synchronize().unwrap();
        let (att, first) = (att.to_vec().unwrap(), first.to_vec().unwrap());
        assert_close("att", &att, &want, 2e-5, 1e-9);
        assert!(att.iter().zip(&first).all(|(a, f)| a.to_bits() == f.to_bits()), "block {block}: not the first try's bits on the GPU");
    }
}
