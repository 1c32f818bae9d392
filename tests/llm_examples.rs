//! The LLM-training example kernels (gpu-kernels/src/llm.rs, issue 23's benchmark rows) on
//! both back ends, against f64 host references: each body runs on the CPU executor
//! (`cpu::name`) and on the GPU (`gpu::name`, skipped without one; a failure under
//! `REQUIRE_GPU=1`).

#[path = "common/backend.rs"]
mod backend;
mod common;
#[path = "common/ptx.rs"]
mod ptx_text;
#[path = "common/rng.rs"]
mod rng;

use backend::{Backend, launch_on, on_both_backends};
use gpu_kernels::examples::Float4;
use gpu_kernels::llm::{self, AdamW, Bf16x8, LAYERNORM_C};
use rng::Rng;

on_both_backends!(layernorm_matches_the_host, online_softmax_matches_the_host_for_short_and_long_rows, adamw_step_matches_the_host, gelu_bf16_matches_the_host);

/// The hyperparameters travel by value to both launchers.
impl backend::KernelArg for AdamW {
    type Gpu = AdamW;
    type Cpu = AdamW;
    fn gpu(self) -> AdamW {
        self
    }
    fn cpu(self) -> AdamW {
        self
    }
}

fn floats(seed: u64, n: usize, low: f32, high: f32) -> Vec<f32> {
    let mut rng = Rng(seed);
    (0..n).map(|_| rng.uniform_f32(low, high)).collect()
}

fn float4s(values: &[f32]) -> Vec<Float4> {
    values.chunks_exact(4).map(|v| Float4 { x: v[0], y: v[1], z: v[2], w: v[3] }).collect()
}

fn flat(values: &[Float4]) -> Vec<f32> {
    values.iter().flat_map(|v| [v.x, v.y, v.z, v.w]).collect()
}

fn layernorm_matches_the_host(backend: &Backend) {
    let rows = 21u32; // not a multiple of the 8 rows of a block
    let n = rows as usize * LAYERNORM_C;
    let (x, w, b) = (floats(1, n, -4.0, 4.0), floats(2, LAYERNORM_C, 0.5, 1.5), floats(3, LAYERNORM_C, -0.5, 0.5));
    let (xs, ws, bs) = (backend.upload(&float4s(&x)), backend.upload(&float4s(&w)), backend.upload(&float4s(&b)));
    let mut out = backend.zeroed::<Float4>(n / 4);
    let (mut mean, mut rstd) = (backend.zeroed::<f32>(rows as usize), backend.zeroed::<f32>(rows as usize));
    launch_on!(backend, llm::layernorm_768, (rows.div_ceil(8), 256u32), &xs, &ws, &bs, &mut out, &mut mean, &mut rstd, rows).unwrap();
    let (out, mean, rstd) = (flat(&backend.download(&out)), backend.download(&mean), backend.download(&rstd));
    for r in 0..rows as usize {
        let row = &x[r * LAYERNORM_C..][..LAYERNORM_C];
        let m = row.iter().map(|&v| v as f64).sum::<f64>() / LAYERNORM_C as f64;
        let s = 1.0 / (row.iter().map(|&v| (v as f64 - m).powi(2)).sum::<f64>() / LAYERNORM_C as f64 + 1e-5).sqrt();
        assert!((mean[r] as f64 - m).abs() < 1e-5, "{}: row {r}: mean {} vs {m}", backend.name(), mean[r]);
        assert!((rstd[r] as f64 - s).abs() < 1e-5 * s, "{}: row {r}: rstd {} vs {s}", backend.name(), rstd[r]);
        for c in 0..LAYERNORM_C {
            let want = (row[c] as f64 - m) * s * w[c] as f64 + b[c] as f64;
            let got = out[r * LAYERNORM_C + c] as f64;
            assert!((got - want).abs() < 2e-5 * (1.0 + want.abs()), "{}: row {r} column {c}: {got} vs {want}", backend.name());
        }
    }
}

fn online_softmax_matches_the_host_for_short_and_long_rows(backend: &Backend) {
    // 16 columns: most lanes see no element; 2052: lanes see 16 or 17 vectors.
    for (rows, cols) in [(11u32, 16usize), (9, 2052)] {
        let n = rows as usize * cols;
        let x = floats(4 + cols as u64, n, -8.0, 8.0);
        let xs = backend.upload(&float4s(&x));
        let mut out = backend.zeroed::<Float4>(n / 4);
        launch_on!(backend, llm::softmax_online, (rows.div_ceil(8), 256u32), &xs, &mut out, rows, (cols / 4) as u32).unwrap();
        let out = flat(&backend.download(&out));
        for (r, row) in x.chunks_exact(cols).enumerate() {
            let max = row.iter().fold(f32::MIN, |m, &v| m.max(v)) as f64;
            let total: f64 = row.iter().map(|&v| (v as f64 - max).exp()).sum();
            for c in 0..cols {
                let want = (row[c] as f64 - max).exp() / total;
                let got = out[r * cols + c] as f64;
                assert!((got - want).abs() <= 1e-5 * want + 1e-12, "{}: {cols} columns, row {r} column {c}: {got} vs {want}", backend.name());
            }
        }
    }
}

fn adamw_step_matches_the_host(backend: &Backend) {
    let n = 3000usize;
    let (p, g, m, v) = (floats(5, n, -1.0, 1.0), floats(6, n, -0.1, 0.1), floats(7, n, -0.01, 0.01), floats(8, n, 0.0, 1e-4));
    let hp = AdamW {
        learning_rate: 1e-3,
        beta1: 0.9,
        beta2: 0.999,
        beta1_correction: 1.0 - 0.9f32.powi(3),
        beta2_correction: 1.0 - 0.999f32.powi(3),
        eps: 1e-8,
        weight_decay: 0.01,
    };
    let gs = backend.upload(&g);
    let (mut ps, mut ms, mut vs) = (backend.upload(&p), backend.upload(&m), backend.upload(&v));
    launch_on!(backend, llm::adamw_step, (n.div_ceil(256) as u32, 256u32), &mut ps, &gs, &mut ms, &mut vs, hp).unwrap();
    let (ps, ms, vs) = (backend.download(&ps), backend.download(&ms), backend.download(&vs));
    for i in 0..n {
        let mean = hp.beta1 as f64 * m[i] as f64 + (1.0 - hp.beta1 as f64) * g[i] as f64;
        let var = hp.beta2 as f64 * v[i] as f64 + (1.0 - hp.beta2 as f64) * (g[i] as f64).powi(2);
        let (mh, vh) = (mean / hp.beta1_correction as f64, var / hp.beta2_correction as f64);
        let want = p[i] as f64 - hp.learning_rate as f64 * (mh / (vh.sqrt() + hp.eps as f64) + hp.weight_decay as f64 * p[i] as f64);
        // Relative to the terms (their sum may cancel).
        let scale = (hp.beta1 as f64 * m[i] as f64).abs() + ((1.0 - hp.beta1 as f64) * g[i] as f64).abs();
        assert!((ms[i] as f64 - mean).abs() <= 1e-6 * scale, "{}: m[{i}] {} vs {mean}", backend.name(), ms[i]);
        assert!((vs[i] as f64 - var).abs() <= 1e-6 * var + 1e-15, "{}: v[{i}] {} vs {var}", backend.name(), vs[i]);
        assert!((ps[i] as f64 - want).abs() <= 1e-6 * (1.0 + want.abs()), "{}: params[{i}] {} vs {want}", backend.name(), ps[i]);
    }
}

/// GPT-2's GELU in f64 (the tanh approximation), the reference of `gelu_bf16`.
fn gelu_reference(x: f64) -> f64 {
    0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
}

fn gelu_bf16_matches_the_host(backend: &Backend) {
    use ferrocuda_device::half::{Bf16x2, bf16};
    // 8 * 1000 values over [-8, 8], a launch with a partial last block.
    let values: Vec<bf16> = floats(9, 8000, -8.0, 8.0).into_iter().map(bf16::from_f32).collect();
    let packed: Vec<Bf16x8> = values.chunks_exact(8).map(|v| Bf16x8 { pairs: core::array::from_fn(|k| Bf16x2::new(v[2 * k], v[2 * k + 1])) }).collect();
    let input = backend.upload(&packed);
    let mut out = backend.upload(&vec![Bf16x8::default(); packed.len()]);
    launch_on!(backend, llm::gelu_bf16, (packed.len().div_ceil(256) as u32, 256u32), &input, &mut out).unwrap();
    let got: Vec<f32> = backend.download(&out).iter().flat_map(|v| v.pairs.iter().flat_map(|p| [p.lo().to_f32(), p.hi().to_f32()])).collect();
    let mut worst = 0.0f64;
    for (i, (&g, x)) in got.iter().zip(&values).enumerate() {
        let want = gelu_reference(x.to_f64());
        // bf16's rounding (2^-9 relative) and tanh.approx's 2^-11 relative error, which
        // 1 + tanh amplifies where tanh is near -1 (large negative x, tiny results): floor 0.1.
        let error = (g as f64 - want).abs() / want.abs().max(0.1);
        assert!(error <= 1.2e-2, "{}: gelu({x}) = {g}, want {want} (element {i})", backend.name());
        worst = worst.max(error);
    }
    assert!(worst > 0.0, "bf16 results equal to f64 everywhere: the check compares nothing");
}

/// The body of `.entry name` in the sm_80 PTX of the example kernels.
fn entry_body(name: &str) -> &'static str {
    ptx_text::entry_body(gpu_kernels::KERNELS.ptx_for(80).expect("gpu_kernels is built for sm_80"), name)
}

/// What made the CUDA C++ twins fast, present in the Rust PTX: 16-byte streaming accesses
/// (`__ldcs`/`__stcs`), the row in registers (no local memory), `rsqrt.approx`/`ex2.approx`.
#[test]
fn the_llm_kernels_compile_to_the_instructions_of_their_cuda_twins() {
    let layernorm = entry_body("layernorm_768");
    assert_eq!(layernorm.matches("ld.global.cs.v4.b32").count(), 6, "six streaming float4 loads per lane:\n{layernorm}");
    assert_eq!(layernorm.matches("st.global.cs.v4.b32").count(), 6, "six streaming float4 stores:\n{layernorm}");
    assert_eq!(layernorm.matches("st.global.cs.b32").count(), 2, "mean and rstd:\n{layernorm}");
    assert_eq!(layernorm.matches("rsqrt.approx.ftz.f32").count(), 1);
    assert!(!layernorm.contains(".local"), "the row must stay in registers:\n{layernorm}");
    let softmax = entry_body("softmax_online");
    // The second pass streams (LLVM may unroll it: one or more copies), and every store does.
    assert!(softmax.matches("ld.global.cs.v4.b32").count() >= 1, "the second pass streams:\n{softmax}");
    assert_eq!(softmax.matches("st.global.cs.v4.b32").count(), softmax.matches("ld.global.cs.v4.b32").count(), "{softmax}");
    assert!(!softmax.contains("st.global.v4"), "a store without the streaming hint:\n{softmax}");
    assert!(!softmax.contains(".local"), "{softmax}");
    assert_eq!(softmax.matches("rcp.rn.f32").count(), 1, "one reciprocal, 1 / sum, as nvcc compiles the twin:\n{softmax}");
    let gelu = entry_body("gelu_bf16");
    assert_eq!(gelu.matches("ld.global.cs.v4").count(), 1, "one streaming 16-byte load (llm.c's load128cs):\n{gelu}");
    assert_eq!(gelu.matches("st.global.v4").count(), 1, "one 16-byte store:\n{gelu}");
    assert_eq!(gelu.matches("tanh.approx.f32").count(), 8, "{gelu}");
    assert_eq!(gelu.matches("cvt.rn.bf16x2.f32").count(), 4, "{gelu}");
    assert!(!gelu.contains(".local") && !gelu.contains("trap"), "no stack, no panic path:\n{gelu}");
    let adamw = entry_body("adamw_step");
    assert_eq!(adamw.matches("sqrt.rn.f32").count(), 1, "{adamw}");
    assert!(!adamw.contains(".local"), "{adamw}");
}
