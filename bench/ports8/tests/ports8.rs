//! The eighth port's kernels against host references: on the CPU executor always, and on GPU 0
//! when there is one (`REQUIRE_GPU=1` turns a missing GPU into a failure). Shapes are small but
//! ragged (partial blocks, several slices, padding tokens, negative values).

use ferrocuda::cpu::CpuExecutor;
use ferrocuda::{Context, DeviceBuffer, Error, LaunchConfig, Stream};
use ferrocuda_device::half::fp8;
use ferrocuda_device::pack16::Bf16x8;
use half::bf16;
use ports8_llmc::{
    AGGREGATE_BLOCK, INIT_BLOCK, LN_BLOCK, WPE_BLOCK, global_norm_aggregate_kernel, global_norm_aggregate_kernel_fixed, init_from_master_kernel,
    layernorm_forward_kernel6, layernorm_forward_kernel6_docs, layernorm_forward_kernel6_fixed, stochastic_round_at, wpe_backward_kernel,
    wpe_backward_kernel_fixed, wpe_backward_kernel_x4, wpe_sum_first_try_shape, wpe_sum_strided_shape,
};
use ports8_vllm::{
    Bf16x4, FP8_E4M3_MAX, Fp8x4, Fp8x8, QUANT_BLOCK, fused_add_rms_norm_static_fp8_quant_kernel, reshape_and_cache_kernel, reshape_and_cache_kernel_fixed,
    scaled_fp8_quant_kernel, segmented_max_reduction, segmented_max_reduction_static,
};
use std::num::NonZeroU32;

/// GPU 0's context and a stream, or `None` (printed) without a driver or device; a failure
/// under `REQUIRE_GPU=1`.
fn gpu(test: &str) -> Option<(Context, Stream)> {
    match Context::primary(0) {
        Ok(context) => {
            let stream = Stream::new(&context).expect("stream");
            Some((context, stream))
        }
        Err(error @ (Error::NoDriver | Error::NoDevice { .. })) => {
            assert!(!ferrocuda_test_support::gpu_required(), "REQUIRE_GPU=1 but no GPU: {error}");
            println!("SKIPPED gpu part of {test}: {error}");
            None
        }
        Err(error) => panic!("{error}"),
    }
}

/// A deterministic pseudo-random value in [-1, 1).
fn noise(i: usize, salt: u32) -> f32 {
    let h = ports8_llmc::squirrel_noise5(i as u32, salt);
    (h >> 8) as f32 / (1u32 << 23) as f32 - 1.0
}

fn bf16s(n: usize, salt: u32, scale: f32) -> Vec<bf16> {
    (0..n).map(|i| bf16::from_f32(noise(i, salt) * scale)).collect()
}

// ------------------------------------------------------------------------ init_from_master

fn init_reference(master: &[f32], n: usize, slices: usize, w_stride: usize, s_stride: usize, seed: u32, params: &mut [bf16]) {
    for s in 0..slices {
        for i in 0..n {
            let (bx, tx) = ((i / INIT_BLOCK as usize) as u32, (i % INIT_BLOCK as usize) as u32);
            let block_y = bx.wrapping_mul(INIT_BLOCK).wrapping_add(s as u32);
            params[s * w_stride + i] = stochastic_round_at(master[s * s_stride + i], tx, block_y, seed);
        }
    }
}

#[test]
fn init_from_master_rounds_each_slice_stochastically_as_the_reference() {
    let (n, slices, w_stride, s_stride, seed) = (1300usize, 3usize, 1400usize, 1333usize, 0x1234_5678u32);
    let master: Vec<f32> = (0..(slices - 1) * s_stride + n).map(|i| noise(i, 7) * 3.0).collect();
    let sentinel = bf16::from_f32(-77.0);
    let mut want = vec![sentinel; (slices - 1) * w_stride + n + 5];
    init_reference(&master, n, slices, w_stride, s_stride, seed, &mut want);
    // The rounding really is stochastic: some values round up, some down.
    let ups = (0..n).filter(|&i| want[i].to_f32().abs() > master[i].abs()).count();
    assert!(ups > n / 10 && ups < n * 9 / 10, "{ups} of {n} rounded away from zero");
    let config = LaunchConfig::new(((n as u32).div_ceil(INIT_BLOCK), slices as u32), INIT_BLOCK);
    let mut got = vec![sentinel; want.len()];
    init_from_master_kernel::launch_cpu(&CpuExecutor::new(), config, &mut got, &master, n as u32, w_stride as u32, s_stride as u32, seed).unwrap();
    assert_eq!(got, want, "CPU executor");
    if let Some((context, stream)) = gpu("init_from_master") {
        let master_d = DeviceBuffer::from_slice(&context, &master).unwrap();
        let mut params_d = DeviceBuffer::from_slice(&context, &vec![sentinel; want.len()]).unwrap();
        init_from_master_kernel::launch(&stream, config, &mut params_d, &master_d, n as u32, w_stride as u32, s_stride as u32, seed).unwrap();
        assert_eq!(params_d.to_vec().unwrap(), want, "GPU");
    }
}

// ------------------------------------------------------------------------ wpe_backward

fn wpe_reference(dwpe: &[bf16], dout: &[bf16], b: usize, seed: u32) -> Vec<bf16> {
    let tc = dwpe.len();
    (0..tc)
        .map(|e| {
            let mut acc = 0.0f32;
            for batch in 0..b {
                acc += dout[batch * tc + e].to_f32();
            }
            let i = e / 8;
            let (tx, bx) = ((i % WPE_BLOCK as usize) as u32, (i / WPE_BLOCK as usize) as u32);
            stochastic_round_at(acc + dwpe[e].to_f32(), tx, bx.wrapping_mul(WPE_BLOCK), seed.wrapping_add(e as u32))
        })
        .collect()
}

#[test]
fn wpe_backward_sums_the_batch_into_the_old_gradient_as_the_reference() {
    let (b, t, c, seed) = (3usize, 37usize, 96usize, 42u32);
    let dwpe = bf16s(t * c, 3, 0.5);
    let dout = bf16s(b * t * c, 4, 1.0);
    let want = wpe_reference(&dwpe, &dout, b, seed);
    let packs = (t * c / 8) as u32;
    let config = LaunchConfig::new(packs.div_ceil(WPE_BLOCK), WPE_BLOCK);
    let dout_p = Bf16x8::collect(&dout).unwrap();
    let mut got = Bf16x8::collect(&dwpe).unwrap();
    wpe_backward_kernel::launch_cpu(&CpuExecutor::new(), config, &mut got, &dout_p, b as u32, seed).unwrap();
    assert_eq!(Bf16x8::elements(&got), &want[..], "CPU executor");
    let mut got = Bf16x8::collect(&dwpe).unwrap();
    wpe_backward_kernel_fixed::launch_cpu(&CpuExecutor::new(), config, &mut got, &dout_p, b as u32, seed).unwrap();
    assert_eq!(Bf16x8::elements(&got), &want[..], "CPU executor, fix round");
    if let Some((context, stream)) = gpu("wpe_backward") {
        let dout_d = DeviceBuffer::from_slice(&context, &dout_p).unwrap();
        let mut dwpe_d = DeviceBuffer::from_slice(&context, &Bf16x8::collect(&dwpe).unwrap()).unwrap();
        wpe_backward_kernel::launch(&stream, config, &mut dwpe_d, &dout_d, b as u32, seed).unwrap();
        assert_eq!(Bf16x8::elements(&dwpe_d.to_vec().unwrap()), &want[..], "GPU");
        let mut dwpe_d = DeviceBuffer::from_slice(&context, &Bf16x8::collect(&dwpe).unwrap()).unwrap();
        wpe_backward_kernel_fixed::launch(&stream, config, &mut dwpe_d, &dout_d, b as u32, seed).unwrap();
        assert_eq!(Bf16x8::elements(&dwpe_d.to_vec().unwrap()), &want[..], "GPU, fix round");
    }
}

/// Session 21: the builder unrolls run-time-count loops by 4 (`KernelBuilder::runtime_unroll`)
/// and `_x4` walks the batch with `unroll::strided_x4`: every variant sums batch counts that
/// take the unrolled steps, the remainder, both or neither (0 to 9) as the reference, on the
/// CPU executor and on the GPU.
#[test]
fn p30_s21_wpe_backward_variants_sum_every_batch_count_as_the_reference() {
    let (t, c, seed) = (19usize, 64usize, 7u32);
    let dwpe = bf16s(t * c, 5, 0.5);
    let packs = (t * c / 8) as u32;
    let config = LaunchConfig::new(packs.div_ceil(WPE_BLOCK), WPE_BLOCK);
    let gpu = gpu("wpe_backward variants");
    for b in 0..10usize {
        let dout = bf16s(b * t * c, 6 + b as u32, 1.0);
        let want = wpe_reference(&dwpe, &dout, b, seed);
        let dout_p = Bf16x8::collect(&dout).unwrap();
        for variant in 0..3 {
            let mut got = Bf16x8::collect(&dwpe).unwrap();
            let cpu = CpuExecutor::new();
            match variant {
                0 => wpe_backward_kernel::launch_cpu(&cpu, config, &mut got, &dout_p, b as u32, seed).unwrap(),
                1 => wpe_backward_kernel_fixed::launch_cpu(&cpu, config, &mut got, &dout_p, b as u32, seed).unwrap(),
                _ => wpe_backward_kernel_x4::launch_cpu(&cpu, config, &mut got, &dout_p, b as u32, seed).unwrap(),
            };
            assert_eq!(Bf16x8::elements(&got), &want[..], "CPU executor, variant {variant}, b {b}");
        }
        if let Some((context, stream)) = &gpu {
            // A batch of 0 still needs a buffer to pass: one pack that is never read.
            let one = [Bf16x8::default()];
            let dout_d = DeviceBuffer::from_slice(context, if dout_p.is_empty() { &one[..] } else { &dout_p }).unwrap();
            for variant in 0..3 {
                let mut dwpe_d = DeviceBuffer::from_slice(context, &Bf16x8::collect(&dwpe).unwrap()).unwrap();
                match variant {
                    0 => wpe_backward_kernel::launch(stream, config, &mut dwpe_d, &dout_d, b as u32, seed).unwrap(),
                    1 => wpe_backward_kernel_fixed::launch(stream, config, &mut dwpe_d, &dout_d, b as u32, seed).unwrap(),
                    _ => wpe_backward_kernel_x4::launch(stream, config, &mut dwpe_d, &dout_d, b as u32, seed).unwrap(),
                }
                assert_eq!(Bf16x8::elements(&dwpe_d.to_vec().unwrap()), &want[..], "GPU, variant {variant}, b {b}");
            }
        }
    }
}

/// Session 22 (issue 30, the first-try loop shape): the batch loop of `wpe_backward_kernel`'s
/// first try (counted, `get` in the loop) and the same loop with the bound hoisted
/// (`strided_range` over `dout[..b packs]`) sum each pack over the batch as the reference, for
/// batch counts 0-9 (through a run-time-unrolled loop's four-step body and its remainder, where
/// `runtime_unroll(4)` unrolls it), and a `dout` one pack short makes the first-try shape leave
/// every pack it cannot finish unwritten while the hoisted one writes nothing.
#[test]
fn p30_s22_wpe_sum_loop_shapes_sum_every_batch_count_as_the_reference() {
    let (t, c) = (19usize, 64usize);
    let tc = t * c;
    let packs = (tc / 8) as u32;
    let config = LaunchConfig::new(packs.div_ceil(WPE_BLOCK), WPE_BLOCK);
    let gpu = gpu("wpe_sum loop shapes");
    let before = bf16s(tc, 5, 0.5);
    for b in 0..10usize {
        let dout = bf16s(b * tc, 16 + b as u32, 1.0);
        let want: Vec<bf16> = (0..tc).map(|e| bf16::from_f32((0..b).map(|batch| dout[batch * tc + e].to_f32()).sum::<f32>())).collect();
        let dout_p = Bf16x8::collect(&dout).unwrap();
        for variant in 0..2 {
            let mut got = Bf16x8::collect(&before).unwrap();
            let cpu = CpuExecutor::new();
            match variant {
                0 => wpe_sum_first_try_shape::launch_cpu(&cpu, config, &mut got, &dout_p, b as u32).unwrap(),
                _ => wpe_sum_strided_shape::launch_cpu(&cpu, config, &mut got, &dout_p, b as u32).unwrap(),
            };
            assert_eq!(Bf16x8::elements(&got), &want[..], "CPU executor, variant {variant}, b {b}");
        }
        if let Some((context, stream)) = &gpu {
            let one = [Bf16x8::default()];
            let dout_d = DeviceBuffer::from_slice(context, if dout_p.is_empty() { &one[..] } else { &dout_p }).unwrap();
            for variant in 0..2 {
                let mut dwpe_d = DeviceBuffer::from_slice(context, &Bf16x8::collect(&before).unwrap()).unwrap();
                match variant {
                    0 => wpe_sum_first_try_shape::launch(stream, config, &mut dwpe_d, &dout_d, b as u32).unwrap(),
                    _ => wpe_sum_strided_shape::launch(stream, config, &mut dwpe_d, &dout_d, b as u32).unwrap(),
                }
                assert_eq!(Bf16x8::elements(&dwpe_d.to_vec().unwrap()), &want[..], "GPU, variant {variant}, b {b}");
            }
        }
    }
    // `dout` one pack short of 3 batch rows: the last pack's third read fails.
    let b = 3usize;
    let dout = bf16s(b * tc - 8, 40, 1.0);
    let dout_p = Bf16x8::collect(&dout).unwrap();
    let cpu = CpuExecutor::new();
    let mut got = Bf16x8::collect(&before).unwrap();
    wpe_sum_first_try_shape::launch_cpu(&cpu, config, &mut got, &dout_p, b as u32).unwrap();
    let got = Bf16x8::elements(&got);
    let last = tc - 8;
    assert_eq!(got[last..], before[last..], "the pack whose third row is missing is left as it was");
    let summed = |e: usize| bf16::from_f32((0..b).map(|batch| dout[batch * tc + e].to_f32()).sum::<f32>());
    assert!((0..last).all(|e| got[e] == summed(e)), "every other pack is summed");
    let mut got = Bf16x8::collect(&before).unwrap();
    wpe_sum_strided_shape::launch_cpu(&cpu, config, &mut got, &dout_p, b as u32).unwrap();
    assert_eq!(Bf16x8::elements(&got), &before[..], "the hoisted bound refuses the whole short buffer");
}

// ------------------------------------------------------------------------ global_norm_aggregate

#[test]
fn global_norm_aggregate_sums_the_partials_into_element_zero() {
    for grid_size in [1usize, 31, 32, 333, 1024] {
        let partials: Vec<f32> = (0..grid_size + 3).map(|i| noise(i, 9).abs() * 10.0).collect();
        let want: f64 = partials[..grid_size].iter().map(|&v| v as f64).sum();
        let check = |got: &[f32], what: &str| {
            assert!(((got[0] as f64) - want).abs() <= 1e-5 * want.max(1.0), "{what}, grid_size {grid_size}: {} vs {want}", got[0]);
            assert_eq!(got[1..], partials[1..], "{what}: only element 0 changes");
        };
        let config = LaunchConfig::new(1, AGGREGATE_BLOCK);
        let mut got = partials.clone();
        global_norm_aggregate_kernel::launch_cpu(&CpuExecutor::new(), config, &mut got, grid_size as u32).unwrap();
        check(&got, "CPU executor");
        let mut got = partials.clone();
        global_norm_aggregate_kernel_fixed::launch_cpu(&CpuExecutor::new(), config, &mut got, grid_size as u32).unwrap();
        check(&got, "CPU executor, fix round");
        if let Some((context, stream)) = gpu("global_norm_aggregate") {
            let mut out_d = DeviceBuffer::from_slice(&context, &partials).unwrap();
            global_norm_aggregate_kernel::launch(&stream, config, &mut out_d, grid_size as u32).unwrap();
            check(&out_d.to_vec().unwrap(), "GPU");
            let mut out_d = DeviceBuffer::from_slice(&context, &partials).unwrap();
            global_norm_aggregate_kernel_fixed::launch(&stream, config, &mut out_d, grid_size as u32).unwrap();
            check(&out_d.to_vec().unwrap(), "GPU, fix round");
        }
    }
}

// ------------------------------------------------------------------------ layernorm_forward_kernel6

#[test]
fn layernorm_forward_kernel6_normalises_each_row() {
    let (n, c) = (21usize, 320usize); // 21 rows: the last block has 5 of its 8 warps' rows
    let inp = bf16s(n * c, 11, 2.0);
    let weight = bf16s(c, 12, 1.0);
    let bias = bf16s(c, 13, 0.3);
    let c8 = (c / 8) as u32;
    let config = LaunchConfig::new((n as u32).div_ceil(LN_BLOCK / 32), LN_BLOCK).with_shared_bytes(((2 + LN_BLOCK / 32) * c as u32) * 2);
    let (inp_p, w_p, b_p) = (Bf16x8::collect(&inp).unwrap(), Bf16x8::collect(&weight).unwrap(), Bf16x8::collect(&bias).unwrap());
    let check = |out: &[Bf16x8], mean: &[f32], rstd: &[f32], what: &str| {
        let out = Bf16x8::elements(out);
        for r in 0..n {
            let row = &inp[r * c..][..c];
            let m = row.iter().map(|v| v.to_f32() as f64).sum::<f64>() / c as f64;
            let var = row.iter().map(|v| (v.to_f32() as f64 - m).powi(2)).sum::<f64>() / c as f64;
            let s = 1.0 / (var + 1e-5).sqrt();
            assert!((mean[r] as f64 - m).abs() <= 1e-5, "{what}: mean[{r}] {} vs {m}", mean[r]);
            assert!((rstd[r] as f64 - s).abs() <= 1e-4 * s, "{what}: rstd[{r}] {} vs {s}", rstd[r]);
            for j in 0..c {
                let want = (row[j].to_f32() as f64 - m) * s * weight[j].to_f32() as f64 + bias[j].to_f32() as f64;
                let got = out[r * c + j].to_f32() as f64;
                assert!((got - want).abs() <= want.abs() / 128.0 + 1e-3, "{what}: out[{r}][{j}] {got} vs {want}");
            }
        }
    };
    let mut out = vec![Bf16x8::default(); n * c / 8];
    let (mut mean, mut rstd) = (vec![0.0f32; n], vec![0.0f32; n]);
    layernorm_forward_kernel6::launch_cpu(&CpuExecutor::new(), config, &mut out, &mut mean, &mut rstd, &inp_p, &w_p, &b_p, n as u32, c8).unwrap();
    check(&out, &mean, &rstd, "CPU executor");
    let mut out = vec![Bf16x8::default(); n * c / 8];
    let (mut mean, mut rstd) = (vec![0.0f32; n], vec![0.0f32; n]);
    layernorm_forward_kernel6_fixed::launch_cpu(&CpuExecutor::new(), config, &mut out, &mut mean, &mut rstd, &inp_p, &w_p, &b_p, n as u32, c8).unwrap();
    check(&out, &mean, &rstd, "CPU executor, fix round");
    let mut out = vec![Bf16x8::default(); n * c / 8];
    let (mut mean, mut rstd) = (vec![0.0f32; n], vec![0.0f32; n]);
    layernorm_forward_kernel6_docs::launch_cpu(&CpuExecutor::new(), config, &mut out, &mut mean, &mut rstd, &inp_p, &w_p, &b_p, n as u32, c8).unwrap();
    check(&out, &mean, &rstd, "CPU executor, as the docs teach (session 20)");
    // llm.c's `mean`/`rstd` may be `nullptr` (gap 6): an empty output buffer is how a caller
    // says so; `row_mut` is `None` for every row, the stores are skipped, `out` is written.
    let mut out = vec![Bf16x8::default(); n * c / 8];
    let (mut no_mean, mut no_rstd) = (Vec::<f32>::new(), Vec::<f32>::new());
    layernorm_forward_kernel6_docs::launch_cpu(&CpuExecutor::new(), config, &mut out, &mut no_mean, &mut no_rstd, &inp_p, &w_p, &b_p, n as u32, c8).unwrap();
    let want = out.clone();
    layernorm_forward_kernel6_docs::launch_cpu(&CpuExecutor::new(), config, &mut out, &mut mean, &mut rstd, &inp_p, &w_p, &b_p, n as u32, c8).unwrap();
    assert!(Bf16x8::elements(&want) == Bf16x8::elements(&out), "the same output without mean and rstd");
    // Too little dynamic shared memory: `carve_checked` is `None`, every thread returns, the
    // launch succeeds and writes nothing (the first try's `carve` panics there).
    let short = LaunchConfig::new((n as u32).div_ceil(LN_BLOCK / 32), LN_BLOCK).with_shared_bytes(2 * c as u32 * 2 - 16);
    let mut out = vec![Bf16x8::default(); n * c / 8];
    let (mut mean, mut rstd) = (vec![0.0f32; n], vec![0.0f32; n]);
    layernorm_forward_kernel6_docs::launch_cpu(&CpuExecutor::new(), short, &mut out, &mut mean, &mut rstd, &inp_p, &w_p, &b_p, n as u32, c8).unwrap();
    assert!(mean.iter().chain(&rstd).all(|&v| v == 0.0), "nothing written with too little shared memory");
    assert!(
        layernorm_forward_kernel6::launch_cpu(&CpuExecutor::new(), short, &mut out, &mut mean, &mut rstd, &inp_p, &w_p, &b_p, n as u32, c8).is_err(),
        "the first try's carve panics with too little shared memory"
    );
    if let Some((context, stream)) = gpu("layernorm_forward_kernel6") {
        let (i_d, w_d, b_d) = (
            DeviceBuffer::from_slice(&context, &inp_p).unwrap(),
            DeviceBuffer::from_slice(&context, &w_p).unwrap(),
            DeviceBuffer::from_slice(&context, &b_p).unwrap(),
        );
        let mut o_d = DeviceBuffer::<Bf16x8>::zeroed(&context, n * c / 8).unwrap();
        let mut m_d = DeviceBuffer::<f32>::zeroed(&context, n).unwrap();
        let mut r_d = DeviceBuffer::<f32>::zeroed(&context, n).unwrap();
        layernorm_forward_kernel6::launch(&stream, config, &mut o_d, &mut m_d, &mut r_d, &i_d, &w_d, &b_d, n as u32, c8).unwrap();
        check(&o_d.to_vec().unwrap(), &m_d.to_vec().unwrap(), &r_d.to_vec().unwrap(), "GPU");
        let mut o_d = DeviceBuffer::<Bf16x8>::zeroed(&context, n * c / 8).unwrap();
        let mut m_d = DeviceBuffer::<f32>::zeroed(&context, n).unwrap();
        let mut r_d = DeviceBuffer::<f32>::zeroed(&context, n).unwrap();
        layernorm_forward_kernel6_fixed::launch(&stream, config, &mut o_d, &mut m_d, &mut r_d, &i_d, &w_d, &b_d, n as u32, c8).unwrap();
        check(&o_d.to_vec().unwrap(), &m_d.to_vec().unwrap(), &r_d.to_vec().unwrap(), "GPU, fix round");
        let mut o_d = DeviceBuffer::<Bf16x8>::zeroed(&context, n * c / 8).unwrap();
        let mut m_d = DeviceBuffer::<f32>::zeroed(&context, n).unwrap();
        let mut r_d = DeviceBuffer::<f32>::zeroed(&context, n).unwrap();
        layernorm_forward_kernel6_docs::launch(&stream, config, &mut o_d, &mut m_d, &mut r_d, &i_d, &w_d, &b_d, n as u32, c8).unwrap();
        check(&o_d.to_vec().unwrap(), &m_d.to_vec().unwrap(), &r_d.to_vec().unwrap(), "GPU, as the docs teach");
    }
}

// ------------------------------------------------------------------------ reshape_and_cache

struct CacheShape {
    tokens: usize,
    heads: usize,
    head_size: usize,
    block_size: usize,
    x: usize,
    blocks: usize,
    key_stride: usize,
}

fn cache_reference(s: &CacheShape, key: &[bf16], value: &[bf16], slots: &[i64], kc: &mut [bf16], vc: &mut [bf16]) {
    for t in 0..s.tokens {
        if slots[t] < 0 {
            continue;
        }
        let (b, o) = (slots[t] as usize / s.block_size, slots[t] as usize % s.block_size);
        for h in 0..s.heads {
            for d in 0..s.head_size {
                let i = h * s.head_size + d;
                let k_idx = (((b * s.heads + h) * (s.head_size / s.x) + d / s.x) * s.block_size + o) * s.x + d % s.x;
                let v_idx = ((b * s.heads + h) * s.head_size + d) * s.block_size + o;
                kc[k_idx] = key[t * s.key_stride + i];
                vc[v_idx] = value[t * s.key_stride + i];
            }
        }
    }
}

#[test]
fn reshape_and_cache_scatters_tokens_to_their_slots_and_skips_padding() {
    let s = CacheShape { tokens: 13, heads: 3, head_size: 64, block_size: 16, x: 8, blocks: 4, key_stride: 3 * 64 + 8 };
    let key = bf16s(s.tokens * s.key_stride, 21, 1.0);
    let value = bf16s(s.tokens * s.key_stride, 22, 1.0);
    // Distinct slots in several blocks, two padding tokens.
    let slots: Vec<i64> = (0..s.tokens as i64).map(|t| if t % 6 == 5 { -1 } else { (t * 5 + 3) % 64 }).collect();
    let cache_len = s.blocks * s.heads * s.head_size * s.block_size;
    let sentinel = bf16::from_f32(-9.0);
    let (mut kw, mut vw) = (vec![sentinel; cache_len], vec![sentinel; cache_len]);
    cache_reference(&s, &key, &value, &slots, &mut kw, &mut vw);
    let nz = |v: usize| NonZeroU32::new(v as u32).unwrap();
    let config = LaunchConfig::new(s.tokens as u32, (s.heads * s.head_size).min(512) as u32);
    macro_rules! run {
        ($kernel:ident, $what:literal) => {{
            let (mut kc, mut vc) = (vec![sentinel; cache_len], vec![sentinel; cache_len]);
            let stride = s.key_stride as u32;
            $kernel::launch_cpu(
                &CpuExecutor::new(),
                config,
                &key,
                &value,
                &mut kc,
                &mut vc,
                &slots,
                stride,
                stride,
                s.heads as u32,
                nz(s.head_size),
                nz(s.block_size),
                nz(s.x),
                1.0,
                1.0,
            )
            .unwrap();
            assert_eq!(kc, kw, concat!("CPU executor, key cache, ", $what));
            assert_eq!(vc, vw, concat!("CPU executor, value cache, ", $what));
            if let Some((context, stream)) = gpu("reshape_and_cache") {
                let (k_d, v_d, s_d) = (
                    DeviceBuffer::from_slice(&context, &key).unwrap(),
                    DeviceBuffer::from_slice(&context, &value).unwrap(),
                    DeviceBuffer::from_slice(&context, &slots).unwrap(),
                );
                let mut kc_d = DeviceBuffer::from_slice(&context, &vec![sentinel; cache_len]).unwrap();
                let mut vc_d = DeviceBuffer::from_slice(&context, &vec![sentinel; cache_len]).unwrap();
                $kernel::launch(
                    &stream,
                    config,
                    &k_d,
                    &v_d,
                    &mut kc_d,
                    &mut vc_d,
                    &s_d,
                    stride,
                    stride,
                    s.heads as u32,
                    nz(s.head_size),
                    nz(s.block_size),
                    nz(s.x),
                    1.0,
                    1.0,
                )
                .unwrap();
                assert_eq!(kc_d.to_vec().unwrap(), kw, concat!("GPU, key cache, ", $what));
                assert_eq!(vc_d.to_vec().unwrap(), vw, concat!("GPU, value cache, ", $what));
            }
        }};
    }
    run!(reshape_and_cache_kernel, "first try");
    run!(reshape_and_cache_kernel_fixed, "fix round");
}

// ------------------------------------------------------------------------ FP8 quantisation

#[test]
fn segmented_max_reduction_finds_the_absolute_maximum_over_448() {
    let (tokens, hidden) = (5usize, 1000usize);
    let mut input = bf16s(tokens * hidden, 31, 3.0);
    input[2 * hidden + 17] = bf16::from_f32(-7.5); // the maximum, negative
    let want = 7.5f32 / FP8_E4M3_MAX;
    let config = LaunchConfig::new(tokens as u32, QUANT_BLOCK).with_shared_bytes(QUANT_BLOCK * 4);
    let mut scale = vec![0.0f32];
    segmented_max_reduction::launch_cpu(&CpuExecutor::new(), config, &mut scale, &input).unwrap();
    assert_eq!(scale[0], want, "CPU executor");
    // The static array's form (session 20): vLLM's launch, no dynamic shared bytes.
    let vllm_launch = LaunchConfig::new(tokens as u32, QUANT_BLOCK);
    let mut scale = vec![0.0f32];
    segmented_max_reduction_static::launch_cpu(&CpuExecutor::new(), vllm_launch, &mut scale, &input).unwrap();
    assert_eq!(scale[0], want, "CPU executor, static shared array");
    if let Some((context, stream)) = gpu("segmented_max_reduction") {
        let i_d = DeviceBuffer::from_slice(&context, &input).unwrap();
        let mut s_d = DeviceBuffer::<f32>::zeroed(&context, 1).unwrap();
        segmented_max_reduction::launch(&stream, config, &mut s_d, &i_d).unwrap();
        assert_eq!(s_d.to_vec().unwrap()[0], want, "GPU");
        let mut s_d = DeviceBuffer::<f32>::zeroed(&context, 1).unwrap();
        segmented_max_reduction_static::launch(&stream, vllm_launch, &mut s_d, &i_d).unwrap();
        assert_eq!(s_d.to_vec().unwrap()[0], want, "GPU, static shared array");
    }
}

#[test]
fn scaled_fp8_quant_clamps_and_rounds_to_e4m3() {
    // Known E4M3 bits first (independent of the library's converter).
    let e = |v: f32| fp8::e4m3x2(v, 0.0)[0];
    assert_eq!([e(1.0), e(448.0), e(-448.0), e(0.0), e(0.5)], [0x38, 0x7e, 0xfe, 0x00, 0x30]);
    let (tokens, hidden) = (7usize, 1024usize);
    let input = bf16s(tokens * hidden, 41, 4.0);
    let scale = [4.0f32 / 600.0]; // so that some values pass 448 and are clamped
    let inv = 1.0 / scale[0];
    let want: Vec<u8> = input.iter().map(|v| e((v.to_f32() * inv).clamp(-448.0, 448.0))).collect();
    assert!(want.iter().filter(|&&b| b & 0x7f == 0x7e).count() > 10, "some values saturate");
    let in_p: Vec<Bf16x4> = input.chunks_exact(4).map(|c| Bf16x4([c[0], c[1], c[2], c[3]])).collect();
    let config = LaunchConfig::new(tokens as u32, QUANT_BLOCK);
    let mut out = vec![Fp8x4::default(); in_p.len()];
    scaled_fp8_quant_kernel::launch_cpu(&CpuExecutor::new(), config, &mut out, &in_p, &scale).unwrap();
    let bytes: Vec<u8> = out.iter().flat_map(|o| o.0).collect();
    assert_eq!(bytes, want, "CPU executor");
    if let Some((context, stream)) = gpu("scaled_fp8_quant") {
        let i_d = DeviceBuffer::from_slice(&context, &in_p).unwrap();
        let s_d = DeviceBuffer::from_slice(&context, &scale).unwrap();
        let mut o_d = DeviceBuffer::<Fp8x4>::zeroed(&context, in_p.len()).unwrap();
        scaled_fp8_quant_kernel::launch(&stream, config, &mut o_d, &i_d, &s_d).unwrap();
        let bytes: Vec<u8> = o_d.to_vec().unwrap().iter().flat_map(|o| o.0).collect();
        assert_eq!(bytes, want, "GPU");
    }
}

// ------------------------------------------------------------------------ fused add RMS norm, FP8

/// E4M3 bits as a signed magnitude, so that neighbouring codes differ by 1.
fn fp8_rank(b: u8) -> i32 {
    if b & 0x80 != 0 { -((b & 0x7f) as i32) } else { b as i32 }
}

#[test]
fn fused_add_rms_norm_static_fp8_quant_adds_in_place_and_quantises() {
    let (tokens, hidden, stride) = (6usize, 1024usize, 1024usize + 64);
    let input = bf16s(tokens * stride, 51, 1.0);
    let residual = bf16s(tokens * hidden, 52, 1.0);
    let weight = bf16s(hidden, 53, 2.0);
    let (eps, scale) = (1e-6f32, [0.01f32]);
    // Reference: the new residual exactly (one bf16 rounding of each sum), the output within one
    // FP8 code (the reduction's order and rsqrt.approx may move a bf16 rounding).
    let mut want_res = residual.clone();
    let mut want_out = vec![0u8; tokens * hidden];
    for t in 0..tokens {
        for j in 0..hidden {
            want_res[t * hidden + j] = bf16::from_f32(input[t * stride + j].to_f32() + residual[t * hidden + j].to_f32());
        }
        let row = &want_res[t * hidden..][..hidden];
        let ms = row.iter().map(|v| (v.to_f32() as f64).powi(2)).sum::<f64>() / hidden as f64;
        let s = (1.0 / (ms + eps as f64).sqrt()) as f32;
        for j in 0..hidden {
            let v = bf16::from_f32(bf16::from_f32(row[j].to_f32() * s).to_f32() * weight[j].to_f32()).to_f32();
            want_out[t * hidden + j] = fp8::e4m3x2((v / scale[0]).clamp(-448.0, 448.0), 0.0)[0];
        }
    }
    let check = |res: &[Bf16x8], out: &[Fp8x8], what: &str| {
        assert_eq!(Bf16x8::elements(res), &want_res[..], "{what}: residual");
        let bytes: Vec<u8> = out.iter().flat_map(|o| o.0).collect();
        let off = bytes.iter().zip(&want_out).filter(|(a, b)| (fp8_rank(**a) - fp8_rank(**b)).abs() > 1).count();
        let near = bytes.iter().zip(&want_out).filter(|(a, b)| a != b).count();
        assert_eq!(off, 0, "{what}: outputs more than one FP8 code away");
        assert!(near < bytes.len() / 50, "{what}: {near} outputs one code away");
    };
    let (in_p, w_p) = (Bf16x8::collect(&input).unwrap(), Bf16x8::collect(&weight).unwrap());
    let vec_hidden = (hidden / 8) as u32;
    let config = LaunchConfig::new(tokens as u32, hidden.min(1024) as u32 / 4); // 256 threads: 2 packs each
    let mut res = Bf16x8::collect(&residual).unwrap();
    let mut out = vec![Fp8x8::default(); tokens * hidden / 8];
    fused_add_rms_norm_static_fp8_quant_kernel::launch_cpu(
        &CpuExecutor::new(),
        config,
        &mut out,
        &in_p,
        (stride / 8) as u32,
        &mut res,
        &w_p,
        &scale,
        eps,
        tokens as u32,
        vec_hidden,
    )
    .unwrap();
    check(&res, &out, "CPU executor");
    if let Some((context, stream)) = gpu("fused_add_rms_norm_static_fp8_quant") {
        let (i_d, w_d, s_d) = (
            DeviceBuffer::from_slice(&context, &in_p).unwrap(),
            DeviceBuffer::from_slice(&context, &w_p).unwrap(),
            DeviceBuffer::from_slice(&context, &scale).unwrap(),
        );
        let mut r_d = DeviceBuffer::from_slice(&context, &Bf16x8::collect(&residual).unwrap()).unwrap();
        let mut o_d = DeviceBuffer::<Fp8x8>::zeroed(&context, tokens * hidden / 8).unwrap();
        fused_add_rms_norm_static_fp8_quant_kernel::launch(
            &stream,
            config,
            &mut o_d,
            &i_d,
            (stride / 8) as u32,
            &mut r_d,
            &w_d,
            &s_d,
            eps,
            tokens as u32,
            vec_hidden,
        )
        .unwrap();
        check(&r_d.to_vec().unwrap(), &o_d.to_vec().unwrap(), "GPU");
    }
}
