//! The eight ports of bench/ports9 against their CPU references: on the CPU executor always
//! (`cpu_*`), and on GPU 0 when there is one (`gpu_*`: skipped with a printed reason without
//! a driver, failing under `REQUIRE_GPU=1`). The port's outputs must equal the reference bit
//! for bit where the reference follows the kernel's order of operations, else lie within the
//! stated tolerance.

use ferrocuda::cpu::CpuExecutor;
use ferrocuda::half::bf16;
use ferrocuda::{Context, DeviceBuffer, Error, LaunchConfig, Stream};
use ferrocuda_ports9::*;
use ferrocuda_ports9_llmc as llmc;
use ferrocuda_ports9_vllm as vllm;

/// Where a test runs its kernel.
enum Backend {
    Cpu(CpuExecutor),
    Gpu(Context, Stream),
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// The GPU backend, or `None` (with the reason printed) where there is no GPU and
/// `REQUIRE_GPU=1` is not set.
fn gpu(test: &str) -> Option<Backend> {
    match Context::primary(0).and_then(|c| Stream::new(&c).map(|s| (c, s))) {
        Ok((c, s)) => Some(Backend::Gpu(c, s)),
        Err(e @ (Error::NoDriver | Error::NoDevice { .. })) if !ferrocuda_test_support::gpu_required() => {
            println!("SKIPPED {test}: {e}");
            None
        }
        Err(e) => panic!("{test}: no GPU under REQUIRE_GPU=1: {e}"),
    }
}

fn cpu() -> Backend {
    Backend::Cpu(CpuExecutor::new())
}

/// Runs `cpu` or `gpu` on host copies: `outs` are the outputs (read and written), `ins` the
/// inputs; returns the outputs after the launch.
fn l1(be: &Backend, dout: &[bf16], b: u32, n: u32, nh: u32, d: u32) -> Res<Vec<bf16>> {
    let total = (b * n * nh * d) as usize;
    let config = LaunchConfig::for_elements(total, 256);
    let mut dinp = vec![bf16::from_f32(-7.0); total];
    match be {
        Backend::Cpu(x) => llmc::unpermute_kernel_backward::launch_cpu(x, config, &mut dinp, dout, b, n, nh, d)?,
        Backend::Gpu(c, s) => {
            let mut o = DeviceBuffer::from_slice(c, &dinp)?;
            let i = DeviceBuffer::from_slice(c, dout)?;
            llmc::unpermute_kernel_backward::launch(s, config, &mut o, &i, b, n, nh, d)?;
            dinp = o.to_vec()?;
        }
    }
    Ok(dinp)
}

#[allow(clippy::too_many_arguments)]
fn l2(be: &Backend, dq: &[bf16], dk: &[bf16], dv: &[bf16], b: u32, n: u32, nh: u32, d: u32) -> Res<Vec<bf16>> {
    let total = 3 * (b * n * nh * d) as usize;
    let config = LaunchConfig::for_elements(total, 256);
    let mut dinp = vec![bf16::from_f32(-7.0); total];
    match be {
        Backend::Cpu(x) => llmc::permute_kernel_backward::launch_cpu(x, config, &mut dinp, dq, dk, dv, b, n, nh, d)?,
        Backend::Gpu(c, s) => {
            let mut o = DeviceBuffer::from_slice(c, &dinp)?;
            let (q, k, v) = (DeviceBuffer::from_slice(c, dq)?, DeviceBuffer::from_slice(c, dk)?, DeviceBuffer::from_slice(c, dv)?);
            llmc::permute_kernel_backward::launch(s, config, &mut o, &q, &k, &v, b, n, nh, d)?;
            dinp = o.to_vec()?;
        }
    }
    Ok(dinp)
}

struct Ln {
    dinp: Vec<bf16>,
    dout: Vec<bf16>,
    inp: Vec<bf16>,
    weight: Vec<bf16>,
    mean: Vec<bf16>,
    rstd: Vec<bf16>,
}

fn ln_inputs(rows: usize, c: usize) -> Ln {
    Ln {
        dinp: bf16_noise(1, rows * c, 0.5),
        dout: bf16_noise(2, rows * c, 1.0),
        inp: bf16_noise(3, rows * c, 2.0),
        weight: bf16_noise(4, c, 1.0),
        mean: bf16_noise(5, rows, 0.2),
        rstd: (0..rows).map(|r| bf16::from_f32(1.0 + 0.5 * noise(6, r))).collect(),
    }
}

#[allow(clippy::too_many_arguments)]
/// `fixed`: the `launch_bounds(256, 8)` round (`_fixed8`); else the `(256, 6)` round (the first
/// try, first-try/layernorm_backward_kernel2.rs, is no longer built: its spill warning printed
/// in every workspace build).
fn l3(be: &Backend, x: &Ln, b: u32, t: u32, c: u32, block: u32, fixed: bool) -> Res<(Vec<bf16>, Vec<f32>, Vec<f32>)> {
    let rows = b * t;
    let config = LaunchConfig::new((32 * rows).div_ceil(block), block).with_shared_bytes(2 * c * 4);
    let mut dinp = x.dinp.clone();
    let (mut dw, mut db) = (vec![0.0f32; c as usize], vec![0.0f32; c as usize]);
    match be {
        Backend::Cpu(e) if fixed => {
            llmc::layernorm_backward_kernel2_fixed8::launch_cpu(e, config, &mut dinp, &x.dout, &x.inp, &x.weight, &x.mean, &x.rstd, b, t, c, &mut dw, &mut db)?
        }
        Backend::Cpu(e) => {
            llmc::layernorm_backward_kernel2_fixed::launch_cpu(e, config, &mut dinp, &x.dout, &x.inp, &x.weight, &x.mean, &x.rstd, b, t, c, &mut dw, &mut db)?
        }
        Backend::Gpu(ctx, s) => {
            let d = |v: &[bf16]| DeviceBuffer::from_slice(ctx, v);
            let mut o = d(&x.dinp)?;
            let (g, i, w, m, r) = (d(&x.dout)?, d(&x.inp)?, d(&x.weight)?, d(&x.mean)?, d(&x.rstd)?);
            let mut gw = DeviceBuffer::<f32>::zeroed(ctx, c as usize)?;
            let mut gb = DeviceBuffer::<f32>::zeroed(ctx, c as usize)?;
            if fixed {
                llmc::layernorm_backward_kernel2_fixed8::launch(s, config, &mut o, &g, &i, &w, &m, &r, b, t, c, &mut gw, &mut gb)?;
            } else {
                llmc::layernorm_backward_kernel2_fixed::launch(s, config, &mut o, &g, &i, &w, &m, &r, b, t, c, &mut gw, &mut gb)?;
            }
            dinp = o.to_vec()?;
            dw = gw.to_vec()?;
            db = gb.to_vec()?;
        }
    }
    Ok((dinp, dw, db))
}

#[allow(clippy::too_many_arguments)]
fn l4(be: &Backend, dbias: &[bf16], dout: &[bf16], b: u32, t: u32, oc: u32, block: u32, fixed: bool) -> Res<Vec<bf16>> {
    let config = LaunchConfig::new(oc / 32, block).with_shared_bytes(block * 4);
    let mut out = dbias.to_vec();
    match be {
        Backend::Cpu(e) if fixed => llmc::matmul_backward_bias_kernel4_fixed::launch_cpu(e, config, &mut out, dout, b, t, oc)?,
        Backend::Cpu(e) => llmc::matmul_backward_bias_kernel4::launch_cpu(e, config, &mut out, dout, b, t, oc)?,
        Backend::Gpu(c, s) => {
            let mut o = DeviceBuffer::from_slice(c, dbias)?;
            let g = DeviceBuffer::from_slice(c, dout)?;
            if fixed {
                llmc::matmul_backward_bias_kernel4_fixed::launch(s, config, &mut o, &g, b, t, oc)?;
            } else {
                llmc::matmul_backward_bias_kernel4::launch(s, config, &mut o, &g, b, t, oc)?;
            }
            out = o.to_vec()?;
        }
    }
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn l5(be: &Backend, dwte: &[f32], dwpe: &[f32], dout: &[f32], inp: &[i32], b: u32, t: u32, c: u32) -> Res<(Vec<f32>, Vec<f32>)> {
    let config = LaunchConfig::for_elements(c as usize, 256);
    let (mut wte, mut wpe) = (dwte.to_vec(), dwpe.to_vec());
    match be {
        Backend::Cpu(e) => llmc::encoder_backward_kernel2::launch_cpu(e, config, &mut wte, &mut wpe, dout, inp, b, t, c)?,
        Backend::Gpu(ctx, s) => {
            let (mut a, mut p) = (DeviceBuffer::from_slice(ctx, dwte)?, DeviceBuffer::from_slice(ctx, dwpe)?);
            let (g, i) = (DeviceBuffer::from_slice(ctx, dout)?, DeviceBuffer::from_slice(ctx, inp)?);
            llmc::encoder_backward_kernel2::launch(s, config, &mut a, &mut p, &g, &i, b, t, c)?;
            wte = a.to_vec()?;
            wpe = p.to_vec()?;
        }
    }
    Ok((wte, wpe))
}

fn v1(be: &Backend, keys: &[bf16], values: &[bf16], pairs: &[i64], layers: u32, numel: u32, layer_numel: u64) -> Res<(Vec<bf16>, Vec<bf16>)> {
    let config = LaunchConfig::new((layers, pairs.len() as u32 / 2), numel.min(1024));
    let (mut k, mut v) = (keys.to_vec(), values.to_vec());
    match be {
        Backend::Cpu(e) => vllm::copy_blocks_kernel::launch_cpu(e, config, &mut k, &mut v, pairs, numel, layer_numel)?,
        Backend::Gpu(c, s) => {
            let (mut kb, mut vb) = (DeviceBuffer::from_slice(c, keys)?, DeviceBuffer::from_slice(c, values)?);
            let m = DeviceBuffer::from_slice(c, pairs)?;
            vllm::copy_blocks_kernel::launch(s, config, &mut kb, &mut vb, &m, numel, layer_numel)?;
            k = kb.to_vec()?;
            v = vb.to_vec()?;
        }
    }
    Ok((k, v))
}

/// `variant`: 0 the first try, 1 the fix round, 2 `MultiBlockReduce` (session 21's gaps round).
fn v2(be: &Backend, input: &[bf16], weight: &[bf16], bias: &[bf16], eps: f32, hidden: u32, variant: u8) -> Res<Vec<bf16>> {
    let tokens = input.len() / hidden as usize;
    let config = LaunchConfig::new(tokens as u32, hidden.min(1024));
    let mut out = vec![bf16::from_f32(-7.0); input.len()];
    match be {
        Backend::Cpu(e) if variant == 1 => vllm::poly_norm_kernel_fixed::launch_cpu(e, config, &mut out, input, weight, bias, eps, hidden)?,
        Backend::Cpu(e) if variant == 2 => vllm::poly_norm_kernel_multi::launch_cpu(e, config, &mut out, input, weight, bias, eps, hidden)?,
        Backend::Cpu(e) => vllm::poly_norm_kernel::launch_cpu(e, config, &mut out, input, weight, bias, eps, hidden)?,
        Backend::Gpu(c, s) => {
            let mut o = DeviceBuffer::from_slice(c, &out)?;
            let (i, w, b) = (DeviceBuffer::from_slice(c, input)?, DeviceBuffer::from_slice(c, weight)?, DeviceBuffer::from_slice(c, bias)?);
            match variant {
                1 => vllm::poly_norm_kernel_fixed::launch(s, config, &mut o, &i, &w, &b, eps, hidden)?,
                2 => vllm::poly_norm_kernel_multi::launch(s, config, &mut o, &i, &w, &b, eps, hidden)?,
                _ => vllm::poly_norm_kernel::launch(s, config, &mut o, &i, &w, &b, eps, hidden)?,
            }
            out = o.to_vec()?;
        }
    }
    Ok(out)
}

fn v3(be: &Backend, input: &[bf16], d: u32, alpha: f32, limit: f32) -> Res<Vec<bf16>> {
    let tokens = input.len() / (2 * d as usize);
    let config = LaunchConfig::new(tokens as u32, d.min(1024));
    let packs = vllm::InputPack::collect(input).expect("2 d a multiple of 8");
    let vecs = d / 4;
    let mut out = vec![vllm::Bf16x4([bf16::from_f32(-7.0); 4]); tokens * vecs as usize];
    match be {
        Backend::Cpu(e) => vllm::swigluoai_and_mul_kernel::launch_cpu(e, config, &mut out, &packs, vecs, alpha, limit)?,
        Backend::Gpu(c, s) => {
            let mut o = DeviceBuffer::from_slice(c, &out)?;
            let i = DeviceBuffer::from_slice(c, &packs)?;
            vllm::swigluoai_and_mul_kernel::launch(s, config, &mut o, &i, vecs, alpha, limit)?;
            out = o.to_vec()?;
        }
    }
    Ok(out.iter().flat_map(|p| p.0).collect())
}

// ---- the checks, one per kernel, each on a backend ---------------------------------------

fn check_l1(be: &Backend) {
    for (b, n, nh, d) in [(2, 8, 3, 16), (1, 5, 2, 7)] {
        let dout = bf16_noise(11, (b * n * nh * d) as usize, 1.0);
        let got = l1(be, &dout, b, n, nh, d).unwrap();
        assert_eq!(got, unpermute_backward_ref(&dout, b as usize, n as usize, nh as usize, d as usize), "L1 {b}x{n}x{nh}x{d}");
    }
}

/// L2's fix round: the tile launch, grid `(ceil(NH d / 256), B N)`, 256 threads.
#[allow(clippy::too_many_arguments)]
fn l2_fixed(be: &Backend, dq: &[bf16], dk: &[bf16], dv: &[bf16], b: u32, n: u32, nh: u32, d: u32) -> Res<Vec<bf16>> {
    let total = 3 * (b * n * nh * d) as usize;
    let config = LaunchConfig::new(((nh * d).div_ceil(256), b * n), 256);
    let mut dinp = vec![bf16::from_f32(-7.0); total];
    match be {
        Backend::Cpu(x) => llmc::permute_kernel_backward_fixed::launch_cpu(x, config, &mut dinp, dq, dk, dv, b, n, nh, d, nh * d)?,
        Backend::Gpu(c, s) => {
            let mut o = DeviceBuffer::from_slice(c, &dinp)?;
            let (q, k, v) = (DeviceBuffer::from_slice(c, dq)?, DeviceBuffer::from_slice(c, dk)?, DeviceBuffer::from_slice(c, dv)?);
            llmc::permute_kernel_backward_fixed::launch(s, config, &mut o, &q, &k, &v, b, n, nh, d, nh * d)?;
            dinp = o.to_vec()?;
        }
    }
    Ok(dinp)
}

fn check_l2_fixed(be: &Backend) {
    // 300 columns: a tile the edge cuts; 768: GPT-2's, whole tiles.
    for (b, n, nh, d) in [(2, 8, 3, 100), (1, 5, 12, 64), (1, 3, 2, 7)] {
        let len = (b * n * nh * d) as usize;
        let (dq, dk, dv) = (bf16_noise(12, len, 1.0), bf16_noise(13, len, 1.0), bf16_noise(14, len, 1.0));
        let got = l2_fixed(be, &dq, &dk, &dv, b, n, nh, d).unwrap();
        let want = permute_backward_ref(&dq, &dk, &dv, b as usize, n as usize, nh as usize, d as usize);
        assert_eq!(got, want, "L2 fixed {b}x{n}x{nh}x{d}");
    }
}

fn check_l2(be: &Backend) {
    for (b, n, nh, d) in [(2, 8, 3, 16), (1, 5, 2, 7)] {
        let len = (b * n * nh * d) as usize;
        let (dq, dk, dv) = (bf16_noise(12, len, 1.0), bf16_noise(13, len, 1.0), bf16_noise(14, len, 1.0));
        let got = l2(be, &dq, &dk, &dv, b, n, nh, d).unwrap();
        let want = permute_backward_ref(&dq, &dk, &dv, b as usize, n as usize, nh as usize, d as usize);
        assert_eq!(got, want, "L2 {b}x{n}x{nh}x{d}");
    }
}

fn check_l3(be: &Backend) {
    check_l3_variant(be, false);
}

fn check_l3_fixed(be: &Backend) {
    check_l3_variant(be, true);
}

fn check_l3_variant(be: &Backend, fixed: bool) {
    // C not a multiple of 32; rows not a multiple of the block's warps (a partial last block).
    for (b, t, c, block) in [(2, 8, 100, 256), (1, 5, 64, 128)] {
        let x = ln_inputs((b * t) as usize, c as usize);
        let (dinp, dw, db) = l3(be, &x, b, t, c, block, fixed).unwrap();
        let (want, want_dw, want_db) = layernorm_backward_ref(&x.dinp, &x.dout, &x.inp, &x.weight, &x.mean, &x.rstd, (b * t) as usize, c as usize);
        // bf16 output: 1 unit in the last place (2^-8 relative) for the order of the warp sums.
        let e = rel_err(&widen(&dinp), &widen(&want), 1e-2);
        assert!(e <= 1.0 / 128.0, "L3 dinp rel err {e}");
        let (ew, eb) = (rel_err(&dw, &want_dw, 1e-3), rel_err(&db, &want_db, 1e-3));
        assert!(ew <= 1e-4 && eb <= 1e-4, "L3 dweight {ew}, dbias {eb}");
        assert_ne!(dinp, x.dinp, "L3 left dinp as it was");
    }
}

fn check_l4(be: &Backend) {
    check_l4_variant(be, false);
}

fn check_l4_fixed(be: &Backend) {
    check_l4_variant(be, true);
}

fn check_l4_variant(be: &Backend, fixed: bool) {
    for (b, t, oc, block) in [(2, 20, 64, 128), (3, 7, 96, 256)] {
        let dbias = bf16_noise(21, oc as usize, 1.0);
        let dout = bf16_noise(22, (b * t * oc) as usize, 1.0);
        let got = l4(be, &dbias, &dout, b, t, oc, block, fixed).unwrap();
        assert_eq!(got, matmul_backward_bias_ref(&dbias, &dout, (b * t) as usize, oc as usize, block as usize), "L4 {b}x{t}x{oc}");
    }
}

fn check_l5(be: &Backend) {
    for (b, t, c, vocab) in [(2, 4, 70, 10), (1, 9, 300, 3)] {
        let bt = (b * t) as usize;
        let inp: Vec<i32> = (0..bt).map(|i| ((noise(31, i) + 1.0) * vocab as f32 / 2.0) as i32 % vocab).collect();
        let dout = f32_noise(32, bt * c as usize, 1.0);
        let dwte = f32_noise(33, vocab as usize * c as usize, 0.1);
        let dwpe = f32_noise(34, (t * c) as usize, 0.1);
        let (wte, wpe) = l5(be, &dwte, &dwpe, &dout, &inp, b, t, c).unwrap();
        let (want_wte, want_wpe) = encoder_backward_ref(&dwte, &dwpe, &dout, &inp, bt, t as usize, c as usize);
        assert_eq!((wte, wpe), (want_wte, want_wpe), "L5 {b}x{t}x{c}");
    }
}

fn check_v1(be: &Backend) {
    let (layers, blocks, numel) = (2u32, 8usize, 100u32);
    let layer_numel = blocks * numel as usize;
    let keys = bf16_noise(41, layers as usize * layer_numel, 1.0);
    let values = bf16_noise(42, layers as usize * layer_numel, 1.0);
    let pairs = [0i64, 5, 1, 6, 2, 7];
    let (k, v) = v1(be, &keys, &values, &pairs, layers, numel, layer_numel as u64).unwrap();
    assert_eq!(k, copy_blocks_ref(&keys, &pairs, layers as usize, layer_numel, numel as usize), "V1 keys");
    assert_eq!(v, copy_blocks_ref(&values, &pairs, layers as usize, layer_numel, numel as usize), "V1 values");
}

fn check_v2(be: &Backend) {
    check_v2_variant(be, 0);
}

fn check_v2_fixed(be: &Backend) {
    check_v2_variant(be, 1);
}

fn check_v2_multi(be: &Backend) {
    check_v2_variant(be, 2);
}

fn check_v2_variant(be: &Backend, variant: u8) {
    // 100: a partial last warp; 300 and 2048: several warps, 2048 a strided row (1024 threads).
    for hidden in [100u32, 300, 2048] {
        let input = bf16_noise(51, 3 * hidden as usize, 2.0);
        let weight = vec![bf16::from_f32(0.5), bf16::from_f32(-1.25), bf16::from_f32(2.0)];
        let bias = [bf16::from_f32(0.125)];
        let got = v2(be, &input, &weight, &bias, 1e-6, hidden, variant).unwrap();
        let want = poly_norm_ref(&input, &weight, bias[0], 1e-6, hidden as usize);
        // rsqrt.approx (2 ulp) and f32 sums against f64: one bf16 unit (2^-8 relative).
        let e = rel_err(&widen(&got), &widen(&want), 1e-2);
        assert!(e <= 1.0 / 128.0, "V2 hidden {hidden}: rel err {e}");
    }
}

fn check_v3(be: &Backend) {
    for d in [64u32, 1100] {
        let input = bf16_noise(61, 3 * 2 * d as usize, 6.0);
        let got = v3(be, &input, d, 1.702, 7.0).unwrap();
        let want = swigluoai_ref(&input, 1.702, 7.0);
        // expf's few ulp against the host's exp: at most one bf16 unit.
        let e = rel_err(&widen(&got), &widen(&want), 1e-2);
        assert!(e <= 1.0 / 128.0, "V3 d {d}: rel err {e}");
    }
}

macro_rules! both {
    ($($cpu:ident, $gpu:ident => $check:ident;)*) => {$(
        #[test]
        fn $cpu() {
            $check(&cpu());
        }
        #[test]
        fn $gpu() {
            if let Some(be) = gpu(stringify!($gpu)) {
                $check(&be);
            }
        }
    )*};
}

both! {
    cpu_l1_unpermute_kernel_backward, gpu_l1_unpermute_kernel_backward => check_l1;
    cpu_l2_permute_kernel_backward, gpu_l2_permute_kernel_backward => check_l2;
    cpu_l3_layernorm_backward_kernel2, gpu_l3_layernorm_backward_kernel2 => check_l3;
    cpu_l4_matmul_backward_bias_kernel4, gpu_l4_matmul_backward_bias_kernel4 => check_l4;
    cpu_l5_encoder_backward_kernel2, gpu_l5_encoder_backward_kernel2 => check_l5;
    cpu_v1_copy_blocks_kernel, gpu_v1_copy_blocks_kernel => check_v1;
    cpu_v2_poly_norm_kernel, gpu_v2_poly_norm_kernel => check_v2;
    cpu_v3_swigluoai_and_mul_kernel, gpu_v3_swigluoai_and_mul_kernel => check_v3;
    cpu_l3_layernorm_backward_kernel2_fixed, gpu_l3_layernorm_backward_kernel2_fixed => check_l3_fixed;
    cpu_l4_matmul_backward_bias_kernel4_fixed, gpu_l4_matmul_backward_bias_kernel4_fixed => check_l4_fixed;
    cpu_v2_poly_norm_kernel_fixed, gpu_v2_poly_norm_kernel_fixed => check_v2_fixed;
    cpu_l2_permute_kernel_backward_fixed, gpu_l2_permute_kernel_backward_fixed => check_l2_fixed;
    cpu_v2_poly_norm_kernel_multi_block_reduce, gpu_v2_poly_norm_kernel_multi_block_reduce => check_v2_multi;
}
