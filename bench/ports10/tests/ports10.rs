//! bench/ports10's ports on the CPU executor against CPU references (every run), and on the GPU
//! against the CPU executor's results (skipped without a driver unless `REQUIRE_GPU=1`).

use std::num::NonZeroU32;

use ferrocuda::cpu::CpuExecutor;
use ferrocuda::pack16::Bf16x8;
use ferrocuda::{Context, DeviceBuffer, Error, LaunchConfig, Stream};
use ferrocuda_ports10::*;
use ferrocuda_ports10_kernels::{llmc, vllm};
use ferrocuda_test_support::gpu_required;
use half::bf16;

fn nz(v: u32) -> NonZeroU32 {
    NonZeroU32::new(v).unwrap()
}

// ---- the inputs of each case (one shape each, small enough for the CPU executor) ----

struct Softmax {
    n: usize,
    c: usize,
    inp: Vec<f32>,
}
fn softmax_case() -> Softmax {
    let (n, c) = (6, 1000); // not a multiple of the block: the strided loops' tails matter
    Softmax { n, c, inp: Lcg::new(1).vec(n * c, -8.0, 8.0) }
}

struct LnBack {
    rows: usize,
    c: usize,
    dinp0: Vec<f32>,
    dout: Vec<f32>,
    inp: Vec<f32>,
    weight: Vec<f32>,
    mean: Vec<f32>,
    rstd: Vec<f32>,
}
fn ln_back_case() -> LnBack {
    let (rows, c) = (2 * 5, 100);
    let mut g = Lcg::new(2);
    let inp = g.vec(rows * c, -2.0, 2.0);
    let mean: Vec<f32> = inp.chunks(c).map(|r| r.iter().sum::<f32>() / c as f32).collect();
    let rstd: Vec<f32> = inp.chunks(c).zip(&mean).map(|(r, m)| 1.0 / (r.iter().map(|x| (x - m) * (x - m)).sum::<f32>() / c as f32 + 1e-5).sqrt()).collect();
    LnBack { rows, c, dinp0: g.vec(rows * c, -1.0, 1.0), dout: g.vec(rows * c, -1.0, 1.0), inp, weight: g.vec(c, 0.5, 1.5), mean, rstd }
}

struct Bias {
    rows: usize,
    oc: usize,
    dbias0: Vec<bf16>,
    dout: Vec<bf16>,
}
fn bias_case() -> Bias {
    let (rows, oc) = (2 * 33, 40);
    let mut g = Lcg::new(3);
    Bias { rows, oc, dbias0: g.vec_bf16(oc, -1.0, 1.0), dout: g.vec_bf16(rows * oc, -1.0, 1.0) }
}

struct Encoder {
    b: usize,
    t: usize,
    c: usize,
    inp: Vec<i32>,
    wte: Vec<bf16>,
    wpe: Vec<bf16>,
}
fn encoder_case() -> Encoder {
    let (b, t, c, v) = (2, 5, 24, 11);
    let mut g = Lcg::new(4);
    let inp = (0..b * t).map(|_| (g.next_u32() % v as u32) as i32).collect();
    Encoder { b, t, c, inp, wte: g.vec_bf16(v * c, -1.0, 1.0), wpe: g.vec_bf16(t * c, -1.0, 1.0) }
}

struct Finalize {
    tokens: usize,
    k: usize,
    cols: usize,
    rows: Vec<bf16>,
    scales: Vec<f32>,
    source_to_dest: Vec<i32>,
}
fn finalize_case() -> Finalize {
    let (tokens, k, cols) = (6, 3, 64);
    let mut g = Lcg::new(5);
    Finalize { tokens, k, cols, rows: g.vec_bf16(tokens * k * cols, -2.0, 2.0), scales: g.vec(tokens * k, 0.0, 1.0), source_to_dest: g.permutation(tokens * k) }
}

struct Expand {
    tokens: usize,
    k: usize,
    cols: usize,
    input: Vec<bf16>,
    dest_to_source: Vec<i32>,
}
fn expand_case() -> Expand {
    let (tokens, k, cols) = (5, 2, 32);
    let mut g = Lcg::new(6);
    Expand { tokens, k, cols, input: g.vec_bf16(tokens * cols, -2.0, 2.0), dest_to_source: g.permutation(tokens * k) }
}

struct Topk {
    topk: Vec<i32>,
    map: Vec<i32>,
}
fn topk_case() -> Topk {
    let (size, experts) = (1000, 16);
    let mut g = Lcg::new(7);
    // Half the experts local (mapped to a permutation of 0..8), half not (-1).
    let local = g.permutation(experts / 2);
    let map: Vec<i32> = (0..experts).map(|e| if e % 2 == 0 { local[e / 2] } else { -1 }).collect();
    Topk { topk: (0..size).map(|_| (g.next_u32() % experts as u32) as i32).collect(), map }
}

// ---- CPU executor against the references ----

#[test]
fn l1_softmax_forward_kernel4_matches_f64_on_the_cpu_executor() {
    let s = softmax_case();
    for block in [32u32, 128] {
        let mut out = vec![0.0f32; s.n * s.c];
        let config = LaunchConfig::new(s.n as u32, block);
        llmc::softmax_forward_kernel4::launch_cpu(&CpuExecutor::new(), config, &mut out, &s.inp, s.n as u32, s.c as u32).unwrap();
        let want = softmax_ref(&s.inp, s.c);
        // __expf (ex2.approx after a multiply) and div.approx: a few ulp, far below 1e-5.
        let err = max_rel_err_f64(out.iter().map(|&v| v as f64), &want, 1e-30);
        assert!(err < 1e-5, "block {block}: max rel err {err:e}");
    }
}

#[test]
fn l2_layernorm_backward_kernel1_matches_f64_on_the_cpu_executor() {
    let s = ln_back_case();
    let mut dinp = s.dinp0.clone();
    let (mut dw, mut db) = (vec![0.0f32; s.c], vec![0.0f32; s.c]);
    // More threads than rows: the rows past the end return.
    let config = LaunchConfig::new(1, 64);
    llmc::layernorm_backward_kernel1::launch_cpu(
        &CpuExecutor::new(),
        config,
        &mut dinp,
        &mut dw,
        &mut db,
        &s.dout,
        &s.inp,
        &s.weight,
        &s.mean,
        &s.rstd,
        2,
        5,
        s.c as u32,
    )
    .unwrap();
    let (want_dinp, want_dw, want_db) = layernorm_backward_ref(&s.dinp0, &s.dout, &s.inp, &s.weight, &s.mean, &s.rstd, s.c);
    let e1 = max_rel_err_f64(dinp.iter().map(|&v| v as f64), &want_dinp, 1e-2);
    let e2 = max_rel_err_f64(dw.iter().map(|&v| v as f64), &want_dw, 1e-2);
    let e3 = max_rel_err_f64(db.iter().map(|&v| v as f64), &want_db, 1e-2);
    assert!(e1 < 1e-4 && e2 < 1e-4 && e3 < 1e-4, "dinp {e1:e}, dweight {e2:e}, dbias {e3:e} (rows {})", s.rows);
}

#[test]
fn l3_matmul_backward_bias_kernel1_matches_f64_on_the_cpu_executor() {
    let s = bias_case();
    let block = 64u32;
    let mut dbias = s.dbias0.clone();
    let config = LaunchConfig::new(s.oc as u32, block).with_shared_bytes(block * 4);
    llmc::matmul_backward_bias_kernel1::launch_cpu(&CpuExecutor::new(), config, &mut dbias, &s.dout, 2, (s.rows / 2) as u32, s.oc as u32).unwrap();
    let want = matmul_backward_bias_ref(&s.dbias0, &s.dout, s.oc);
    for (o, (got, want)) in dbias.iter().zip(&want).enumerate() {
        // One bf16 rounding of a sum of at most 67 values of at most 1.
        assert!((got.to_f64() - want).abs() <= want.abs() / 256.0 + 1e-4, "dbias[{o}] = {got}, want {want}");
    }
}

#[test]
fn l4_encoder_forward_kernel2_is_exact_on_the_cpu_executor() {
    let s = encoder_case();
    let n = s.b * s.t * s.c;
    let mut out = vec![bf16::ZERO; n];
    let config = LaunchConfig::for_elements(n, 128);
    llmc::encoder_forward_kernel2::launch_cpu(&CpuExecutor::new(), config, &mut out, &s.inp, &s.wte, &s.wpe, s.b as u32, nz(s.t as u32), nz(s.c as u32))
        .unwrap();
    assert_eq!(out, encoder_forward_ref(&s.inp, &s.wte, &s.wpe, s.t, s.c));
}

#[test]
fn l5_global_sum_single_block_kernel_matches_f64_on_the_cpu_executor() {
    let values = Lcg::new(8).vec(5000, -1.0, 1.0);
    let mut result = [0.0f32];
    llmc::global_sum_single_block_kernel::launch_cpu(&CpuExecutor::new(), LaunchConfig::new(1, 1024), &mut result, &values, values.len() as u64).unwrap();
    let want: f64 = values.iter().map(|&v| v as f64).sum();
    assert!((result[0] as f64 - want).abs() < 1e-3, "sum {} want {want}", result[0]);
}

#[test]
fn v1_finalize_moe_routing_kernel_matches_f64_on_the_cpu_executor() {
    let s = finalize_case();
    let rows = Bf16x8::collect(&s.rows).unwrap();
    let mut out = vec![Bf16x8::default(); s.tokens * s.cols / 8];
    let config = LaunchConfig::new(s.tokens as u32, 256);
    vllm::finalize_moe_routing_kernel::launch_cpu(&CpuExecutor::new(), config, &rows, &mut out, &s.scales, &s.source_to_dest, (s.cols / 8) as u32, s.k as u32)
        .unwrap();
    let want = finalize_ref(&s.rows, &s.scales, &s.source_to_dest, s.cols, s.k);
    for (i, (got, want)) in Bf16x8::elements(&out).iter().zip(&want).enumerate() {
        assert!((got.to_f64() - want).abs() <= want.abs() / 256.0 + 1e-5, "out[{i}] = {got}, want {want}");
    }
}

#[test]
fn v2_expand_input_rows_kernel_is_exact_on_the_cpu_executor() {
    let s = expand_case();
    let n = s.tokens * s.k;
    let input = Bf16x8::collect(&s.input).unwrap();
    let mut out = vec![Bf16x8::default(); n * s.cols / 8];
    let (mut source_to_dest, mut permuted_idx) = (vec![-1i32; n], vec![-1i32; n]);
    let config = LaunchConfig::new(n as u32, 256);
    vllm::expand_input_rows_kernel::launch_cpu(
        &CpuExecutor::new(),
        config,
        &input,
        &mut out,
        &s.dest_to_source,
        &mut source_to_dest,
        &mut permuted_idx,
        (s.cols / 8) as u32,
        nz(s.k as u32),
    )
    .unwrap();
    let (want_out, want_s2d, want_idx) = expand_ref(&s.input, &s.dest_to_source, s.cols, s.k);
    assert_eq!(Bf16x8::elements(&out), &want_out[..]);
    assert_eq!(source_to_dest, want_s2d);
    assert_eq!(permuted_idx, want_idx);
}

#[test]
fn v3_preprocess_topk_id_kernel_is_exact_on_the_cpu_executor() {
    let s = topk_case();
    let mut topk = s.topk.clone();
    let e = s.map.len() as u32;
    let config = LaunchConfig::for_elements(topk.len(), 256).with_shared_bytes(e * 4);
    vllm::preprocess_topk_id_kernel::launch_cpu(&CpuExecutor::new(), config, &mut topk, s.topk.len() as u32, &s.map, e).unwrap();
    assert_eq!(topk, preprocess_ref(&s.topk, &s.map));
}

// ---- the GPU against the CPU executor ----

fn gpu() -> Option<(Context, Stream)> {
    match Context::primary(0) {
        Ok(context) => {
            let stream = Stream::new(&context).unwrap();
            Some((context, stream))
        }
        Err(error @ (Error::NoDriver | Error::NoDevice { .. })) if !gpu_required() => {
            println!("SKIPPED ports10 GPU test: {error}");
            None
        }
        Err(error) => panic!("no GPU under REQUIRE_GPU=1: {error}"),
    }
}

#[test]
fn ports10_on_the_gpu_match_the_cpu_executor() {
    let Some((cx, st)) = gpu() else { return };
    let cpu = CpuExecutor::new();

    // L1
    let s = softmax_case();
    let config = LaunchConfig::new(s.n as u32, 128);
    let mut want = vec![0.0f32; s.n * s.c];
    llmc::softmax_forward_kernel4::launch_cpu(&cpu, config, &mut want, &s.inp, s.n as u32, s.c as u32).unwrap();
    let inp = DeviceBuffer::from_slice(&cx, &s.inp).unwrap();
    let mut out = DeviceBuffer::<f32>::zeroed(&cx, s.n * s.c).unwrap();
    llmc::softmax_forward_kernel4::launch(&st, config, &mut out, &inp, s.n as u32, s.c as u32).unwrap();
    let got = out.to_vec().unwrap();
    let err = max_rel_err_f64(got.iter().map(|&v| v as f64), &want.iter().map(|&v| v as f64).collect::<Vec<_>>(), 1e-30);
    assert!(err < 1e-5, "L1 GPU vs CPU: {err:e}");

    // L2
    let s = ln_back_case();
    let config = LaunchConfig::new(1, 64);
    let (mut d_cpu, mut dw_cpu, mut db_cpu) = (s.dinp0.clone(), vec![0.0f32; s.c], vec![0.0f32; s.c]);
    llmc::layernorm_backward_kernel1::launch_cpu(
        &cpu,
        config,
        &mut d_cpu,
        &mut dw_cpu,
        &mut db_cpu,
        &s.dout,
        &s.inp,
        &s.weight,
        &s.mean,
        &s.rstd,
        2,
        5,
        s.c as u32,
    )
    .unwrap();
    let buf = |v: &[f32]| DeviceBuffer::from_slice(&cx, v).unwrap();
    let (mut d, mut dw, mut db) = (buf(&s.dinp0), buf(&vec![0.0; s.c]), buf(&vec![0.0; s.c]));
    let (dout, inp, w, m, r) = (buf(&s.dout), buf(&s.inp), buf(&s.weight), buf(&s.mean), buf(&s.rstd));
    llmc::layernorm_backward_kernel1::launch(&st, config, &mut d, &mut dw, &mut db, &dout, &inp, &w, &m, &r, 2, 5, s.c as u32).unwrap();
    for (what, g, c) in [("dinp", d.to_vec().unwrap(), d_cpu), ("dweight", dw.to_vec().unwrap(), dw_cpu), ("dbias", db.to_vec().unwrap(), db_cpu)] {
        let err = max_rel_err_f64(g.iter().map(|&v| v as f64), &c.iter().map(|&v| v as f64).collect::<Vec<_>>(), 1e-2);
        assert!(err < 1e-5, "L2 {what} GPU vs CPU: {err:e}");
    }

    // L3
    let s = bias_case();
    let config = LaunchConfig::new(s.oc as u32, 64).with_shared_bytes(64 * 4);
    let mut want = s.dbias0.clone();
    llmc::matmul_backward_bias_kernel1::launch_cpu(&cpu, config, &mut want, &s.dout, 2, (s.rows / 2) as u32, s.oc as u32).unwrap();
    let mut dbias = DeviceBuffer::from_slice(&cx, &s.dbias0).unwrap();
    let dout = DeviceBuffer::from_slice(&cx, &s.dout).unwrap();
    llmc::matmul_backward_bias_kernel1::launch(&st, config, &mut dbias, &dout, 2, (s.rows / 2) as u32, s.oc as u32).unwrap();
    assert_eq!(dbias.to_vec().unwrap(), want, "L3: the same sums in the same order");

    // L4
    let s = encoder_case();
    let n = s.b * s.t * s.c;
    let config = LaunchConfig::for_elements(n, 128);
    let mut out = DeviceBuffer::<bf16>::zeroed(&cx, n).unwrap();
    let (inp, wte, wpe) =
        (DeviceBuffer::from_slice(&cx, &s.inp).unwrap(), DeviceBuffer::from_slice(&cx, &s.wte).unwrap(), DeviceBuffer::from_slice(&cx, &s.wpe).unwrap());
    llmc::encoder_forward_kernel2::launch(&st, config, &mut out, &inp, &wte, &wpe, s.b as u32, nz(s.t as u32), nz(s.c as u32)).unwrap();
    assert_eq!(out.to_vec().unwrap(), encoder_forward_ref(&s.inp, &s.wte, &s.wpe, s.t, s.c), "L4");

    // L5
    let values = Lcg::new(8).vec(5000, -1.0, 1.0);
    let mut want = [0.0f32];
    llmc::global_sum_single_block_kernel::launch_cpu(&cpu, LaunchConfig::new(1, 1024), &mut want, &values, values.len() as u64).unwrap();
    let v = DeviceBuffer::from_slice(&cx, &values).unwrap();
    let mut result = DeviceBuffer::<f32>::zeroed(&cx, 1).unwrap();
    llmc::global_sum_single_block_kernel::launch(&st, LaunchConfig::new(1, 1024), &mut result, &v, values.len() as u64).unwrap();
    let got = result.to_vec().unwrap()[0];
    // The same order of adds where the executor's warp reductions follow the GPU's butterflies.
    assert!((got - want[0]).abs() <= want[0].abs() * 1e-6, "L5: GPU {got}, CPU {}", want[0]);

    // V1
    let s = finalize_case();
    let rows = Bf16x8::collect(&s.rows).unwrap();
    let config = LaunchConfig::new(s.tokens as u32, 256);
    let mut want = vec![Bf16x8::default(); s.tokens * s.cols / 8];
    vllm::finalize_moe_routing_kernel::launch_cpu(&cpu, config, &rows, &mut want, &s.scales, &s.source_to_dest, (s.cols / 8) as u32, s.k as u32).unwrap();
    let rows_d = DeviceBuffer::from_slice(&cx, &rows).unwrap();
    let (sc, map) = (DeviceBuffer::from_slice(&cx, &s.scales).unwrap(), DeviceBuffer::from_slice(&cx, &s.source_to_dest).unwrap());
    let mut out = DeviceBuffer::<Bf16x8>::zeroed(&cx, want.len()).unwrap();
    vllm::finalize_moe_routing_kernel::launch(&st, config, &rows_d, &mut out, &sc, &map, (s.cols / 8) as u32, s.k as u32).unwrap();
    // The GPU fuses `acc + s * x` into one FMA (the builder's contraction), the host build of the
    // CPU executor does not: one bf16 ulp apart at most.
    for (i, (g, c)) in Bf16x8::elements(&out.to_vec().unwrap()).iter().zip(Bf16x8::elements(&want)).enumerate() {
        assert!((g.to_f64() - c.to_f64()).abs() <= c.to_f64().abs() / 128.0 + 1e-6, "V1 out[{i}]: GPU {g}, CPU {c}");
    }

    // V2
    let s = expand_case();
    let n = s.tokens * s.k;
    let input = Bf16x8::collect(&s.input).unwrap();
    let config = LaunchConfig::new(n as u32, 256);
    let input_d = DeviceBuffer::from_slice(&cx, &input).unwrap();
    let d2s = DeviceBuffer::from_slice(&cx, &s.dest_to_source).unwrap();
    let mut out = DeviceBuffer::<Bf16x8>::zeroed(&cx, n * s.cols / 8).unwrap();
    let mut s2d = DeviceBuffer::from_slice(&cx, &vec![-1i32; n]).unwrap();
    let mut idx = DeviceBuffer::from_slice(&cx, &vec![-1i32; n]).unwrap();
    vllm::expand_input_rows_kernel::launch(&st, config, &input_d, &mut out, &d2s, &mut s2d, &mut idx, (s.cols / 8) as u32, nz(s.k as u32)).unwrap();
    let (want_out, want_s2d, want_idx) = expand_ref(&s.input, &s.dest_to_source, s.cols, s.k);
    assert_eq!(Bf16x8::elements(&out.to_vec().unwrap()), &want_out[..], "V2 rows");
    assert_eq!(s2d.to_vec().unwrap(), want_s2d, "V2 source_to_dest");
    assert_eq!(idx.to_vec().unwrap(), want_idx, "V2 permuted_idx");

    // V3
    let s = topk_case();
    let e = s.map.len() as u32;
    let config = LaunchConfig::for_elements(s.topk.len(), 256).with_shared_bytes(e * 4);
    let mut topk = DeviceBuffer::from_slice(&cx, &s.topk).unwrap();
    let map = DeviceBuffer::from_slice(&cx, &s.map).unwrap();
    vllm::preprocess_topk_id_kernel::launch(&st, config, &mut topk, s.topk.len() as u32, &map, e).unwrap();
    assert_eq!(topk.to_vec().unwrap(), preprocess_ref(&s.topk, &s.map), "V3");
}

// ---- the fix round (written from the SASS, before any GPU run) ----

#[test]
fn fix_round_kernels_give_their_first_tries_bits_with_tails() {
    let cpu = CpuExecutor::new();
    // L2: 102 columns (two past the last whole chunk of four).
    let mut g = Lcg::new(21);
    let (rows, c) = (7usize, 102usize);
    let (dinp0, dout, inp, weight) = (g.vec(rows * c, -1.0, 1.0), g.vec(rows * c, -1.0, 1.0), g.vec(rows * c, -2.0, 2.0), g.vec(c, 0.5, 1.5));
    let (mean, rstd) = (g.vec(rows, -0.1, 0.1), g.vec(rows, 0.8, 1.2));
    let config = LaunchConfig::new(1, 32);
    // 0: the first try, 1: `_x4`, 2: `_zip_fix` (session 22, gaps2).
    let run = |variant: u32| {
        let (mut d, mut dw, mut db) = (dinp0.clone(), vec![0.0f32; c], vec![0.0f32; c]);
        let args = (&dout[..], &inp[..], &weight[..], &mean[..], &rstd[..]);
        if variant == 2 {
            ferrocuda_ports10_kernels::fixes::layernorm_backward_kernel1_zip_fix::launch_cpu(
                &cpu,
                config,
                &mut d,
                &mut dw,
                &mut db,
                args.0,
                args.1,
                args.2,
                args.3,
                args.4,
                1,
                rows as u32,
                c as u32,
            )
        } else if variant == 1 {
            ferrocuda_ports10_kernels::fixes::layernorm_backward_kernel1_x4::launch_cpu(
                &cpu,
                config,
                &mut d,
                &mut dw,
                &mut db,
                args.0,
                args.1,
                args.2,
                args.3,
                args.4,
                1,
                rows as u32,
                c as u32,
            )
        } else {
            llmc::layernorm_backward_kernel1::launch_cpu(
                &cpu,
                config,
                &mut d,
                &mut dw,
                &mut db,
                args.0,
                args.1,
                args.2,
                args.3,
                args.4,
                1,
                rows as u32,
                c as u32,
            )
        }
        .unwrap();
        (d, dw, db)
    };
    let (first, fixed, zip_fix) = (run(0), run(1), run(2));
    assert_eq!(first.0, fixed.0, "L2 dinp: the same arithmetic in the same order");
    assert_eq!(first.0, zip_fix.0, "L2 zip_fix dinp: the same arithmetic in the same order");
    assert!(max_rel_err_f64(zip_fix.1.iter().map(|&v| v as f64), &first.1.iter().map(|&v| v as f64).collect::<Vec<_>>(), 1e-2) < 1e-5, "L2 zip_fix dweight");
    assert!(max_rel_err_f64(zip_fix.2.iter().map(|&v| v as f64), &first.2.iter().map(|&v| v as f64).collect::<Vec<_>>(), 1e-2) < 1e-5, "L2 zip_fix dbias");
    let (want_d, want_dw, want_db) = layernorm_backward_ref(&dinp0, &dout, &inp, &weight, &mean, &rstd, c);
    assert!(max_rel_err_f64(fixed.0.iter().map(|&v| v as f64), &want_d, 1e-2) < 1e-4);
    assert!(max_rel_err_f64(fixed.1.iter().map(|&v| v as f64), &want_dw, 1e-2) < 1e-4, "L2 x4 dweight");
    assert!(max_rel_err_f64(fixed.2.iter().map(|&v| v as f64), &want_db, 1e-2) < 1e-4, "L2 x4 dbias");

    // V1: top-6 (two experts past the last group of four).
    let (tokens, k, cols) = (5usize, 6usize, 48usize);
    let rows_host = g.vec_bf16(tokens * k * cols, -2.0, 2.0);
    let packs = Bf16x8::collect(&rows_host).unwrap();
    let (scales, map) = (g.vec(tokens * k, 0.0, 1.0), g.permutation(tokens * k));
    let config = LaunchConfig::new(tokens as u32, 32);
    let (mut first, mut fixed) = (vec![Bf16x8::default(); tokens * cols / 8], vec![Bf16x8::default(); tokens * cols / 8]);
    vllm::finalize_moe_routing_kernel::launch_cpu(&cpu, config, &packs, &mut first, &scales, &map, (cols / 8) as u32, k as u32).unwrap();
    ferrocuda_ports10_kernels::fixes::finalize_moe_routing_kernel_x4::launch_cpu(&cpu, config, &packs, &mut fixed, &scales, &map, (cols / 8) as u32, k as u32)
        .unwrap();
    assert_eq!(Bf16x8::elements(&first), Bf16x8::elements(&fixed), "V1: the same FMAs in the same order");
    let want = finalize_ref(&rows_host, &scales, &map, cols, k);
    for (i, (got, want)) in Bf16x8::elements(&fixed).iter().zip(&want).enumerate() {
        assert!((got.to_f64() - want).abs() <= want.abs() / 256.0 + 1e-5, "V1 x4 out[{i}] = {got}, want {want}");
    }
}

/// Session 23 (gaps, issue 30 tenth port's gap 4): the first tries rebuilt with the per-loop
/// unroll of a run-time count (`unroll::counted::<4>`, `unroll::counted_loads_first::<4, _>`)
/// give the first tries' bits at every count around the rounds of four: L2 at `c` 1 to 9 and
/// 102 (`dinp` bit for bit; the atomics' sums within 1e-5), V1 at `k` 0 to 9 (every pack bit for
/// bit, zero experts included).
#[test]
fn p30_s23_counted_unroll_gives_the_first_tries_bits_at_every_count() {
    let cpu = CpuExecutor::new();
    let mut g = Lcg::new(23);
    for c in (1usize..=9).chain([102]) {
        let rows = 7usize;
        let (dinp0, dout, inp, weight) = (g.vec(rows * c, -1.0, 1.0), g.vec(rows * c, -1.0, 1.0), g.vec(rows * c, -2.0, 2.0), g.vec(c, 0.5, 1.5));
        let (mean, rstd) = (g.vec(rows, -0.1, 0.1), g.vec(rows, 0.8, 1.2));
        let config = LaunchConfig::new(1, 32);
        // 0: the first try, 1: `_counted`, 2: `_counted_first`.
        let run = |variant: u32| {
            let (mut d, mut dw, mut db) = (dinp0.clone(), vec![0.0f32; c], vec![0.0f32; c]);
            let (dt, it, rt) = (1, rows as u32, c as u32);
            let launched = match variant {
                1 => ferrocuda_ports10_kernels::fixes::layernorm_backward_kernel1_counted::launch_cpu(
                    &cpu, config, &mut d, &mut dw, &mut db, &dout, &inp, &weight, &mean, &rstd, dt, it, rt,
                ),
                2 => ferrocuda_ports10_kernels::fixes::layernorm_backward_kernel1_counted_first::launch_cpu(
                    &cpu, config, &mut d, &mut dw, &mut db, &dout, &inp, &weight, &mean, &rstd, dt, it, rt,
                ),
                _ => llmc::layernorm_backward_kernel1::launch_cpu(&cpu, config, &mut d, &mut dw, &mut db, &dout, &inp, &weight, &mean, &rstd, dt, it, rt),
            };
            launched.unwrap();
            (d, dw, db)
        };
        let first = run(0);
        for variant in [1, 2] {
            let got = run(variant);
            assert_eq!(got.0, first.0, "L2 c {c} variant {variant}: dinp, the same arithmetic in the same order");
            let close = |a: &[f32], b: &[f32]| max_rel_err_f64(a.iter().map(|&v| v as f64), &b.iter().map(|&v| v as f64).collect::<Vec<_>>(), 1e-2) < 1e-5;
            assert!(close(&got.1, &first.1), "L2 c {c} variant {variant}: dweight");
            assert!(close(&got.2, &first.2), "L2 c {c} variant {variant}: dbias");
        }
    }
    let (tokens, cols) = (5usize, 48usize);
    for k in 0usize..=9 {
        let rows_host = g.vec_bf16((tokens * k).max(1) * cols, -2.0, 2.0);
        let packs = Bf16x8::collect(&rows_host).unwrap();
        let (scales, map) = (g.vec(tokens * k, 0.0, 1.0), g.permutation(tokens * k));
        let config = LaunchConfig::new(tokens as u32, 32);
        let run = |variant: u32| {
            let mut out = vec![Bf16x8::default(); tokens * cols / 8];
            let (cv, kk) = ((cols / 8) as u32, k as u32);
            let launched = match variant {
                1 => ferrocuda_ports10_kernels::fixes::finalize_moe_routing_kernel_counted::launch_cpu(&cpu, config, &packs, &mut out, &scales, &map, cv, kk),
                2 => ferrocuda_ports10_kernels::fixes::finalize_moe_routing_kernel_counted_plain::launch_cpu(
                    &cpu, config, &packs, &mut out, &scales, &map, cv, kk,
                ),
                3 => ferrocuda_ports10_kernels::fixes::finalize_moe_routing_kernel_gather::launch_cpu(&cpu, config, &packs, &mut out, &scales, &map, cv, kk),
                _ => vllm::finalize_moe_routing_kernel::launch_cpu(&cpu, config, &packs, &mut out, &scales, &map, cv, kk),
            };
            launched.unwrap();
            out
        };
        let first = run(0);
        for variant in [1, 2, 3] {
            assert_eq!(Bf16x8::elements(&run(variant)), Bf16x8::elements(&first), "V1 k {k} variant {variant}: the same FMAs in the same order");
        }
        if k > 0 {
            let want = finalize_ref(&rows_host, &scales, &map, cols, k);
            for (i, (got, want)) in Bf16x8::elements(&first).iter().zip(&want).enumerate() {
                assert!((got.to_f64() - want).abs() <= want.abs() / 256.0 + 1e-5, "V1 k {k} out[{i}] = {got}, want {want}");
            }
        }
    }
}

/// Session 23 (gaps, issue 30 item 2): `pack8::Bf16x4`, vLLM's 8-byte packs of four `bf16`, as
/// kernel input and output elements: `out = x * s + y` per pack on the CPU executor, against
/// the same arithmetic in `f32` rounded to nearest even, and a grid with more threads than packs
/// (the spare threads write nothing).
#[test]
fn p30_s23_pack8_bf16x4_moves_and_rounds_four_values_a_thread() {
    use ferrocuda::pack8::Bf16x4;
    let mut g = Lcg::new(31);
    let n = 37usize;
    let (xs, ys) = (g.vec_bf16(4 * n, -3.0, 3.0), g.vec_bf16(4 * n, -3.0, 3.0));
    let (x, y) = (Bf16x4::collect(&xs).unwrap(), Bf16x4::collect(&ys).unwrap());
    let mut out = vec![Bf16x4::splat(bf16::from_f32(-7.0)); n];
    ferrocuda_ports10_kernels::s23::s23_scale_add_bf16x4::launch_cpu(&CpuExecutor::new(), LaunchConfig::new(2, 32), &mut out, &x, &y, 0.75).unwrap();
    let got = Bf16x4::elements(&out);
    for i in 0..4 * n {
        let want = bf16::from_f32(xs[i].to_f32() * 0.75 + ys[i].to_f32());
        assert_eq!(got[i], want, "element {i}");
    }
}
