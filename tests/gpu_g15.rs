//! Audit 2026-11-28c (held-out review of session 15), the GPU half of G15-3: the precise
//! `f32::tanh` (nvcc's branch-free `tanhf`) on a GPU, over a dense sweep of the `f32` range
//! with the special values, against the host's `f64::tanh`.
//!
//! - `gpu_g15_3_...` skips without a GPU and fails under `REQUIRE_GPU=1`; it prints the worst
//!   ulp error and where (run by `scripts/gpu-run/review15.sh`).
//! - `cpu_g15_3_...` runs the same check on the CPU executor on the special values (the host's
//!   `tanh` is `std`'s there, so the two back ends agree on the signs of zero only if the GPU's
//!   does; the CPU figure is `std`'s error).
//!
//! The sign of `tanh(-0)` is compared by bits: the ulp measure of `tests/cpu_device_lib.rs`
//! (`a == b` first) counts `+0` and `-0` as equal, which is how G15-3 went unseen.

#[path = "common/backend.rs"]
#[allow(unused_macros, unused_imports, reason = "one backend per test here: `on_both_backends!` is not used")]
mod backend;
mod common;

use backend::{Backend, launch_on};
use ferrocuda::LaunchConfig;
use test_kernels::device_lib::{self, MATH_FUNCTIONS};

/// `|y - t|` in units of the last place of `f32` at `t`.
fn ulps(y: f32, t: f64) -> f64 {
    let binade = ((t as f32).abs().to_bits() >> 23) as i32;
    let ulp = if binade == 0 { f64::from(f32::from_bits(1)) } else { 2f64.powi(binade - 127 - 23) };
    (f64::from(y) - t).abs() / ulp
}

/// The special values: both zeros, subnormals of both signs, the thresholds 0.6 and 9.0109
/// with their neighbours, the largest finite values and the infinities.
fn specials() -> Vec<f32> {
    let mut x = Vec::new();
    for bits in
        [0u32, 1, 0x0040_0000, 0x007f_ffff, 0x0080_0000, 0x3f19_9999, 0x3f19_999a, 0x3f19_999b, 0x4110_2cb3, 0x4110_2cb4, 0x4110_2cb5, 0x7f7f_ffff, 0x7f80_0000]
    {
        x.push(f32::from_bits(bits));
        x.push(-f32::from_bits(bits));
    }
    x
}

/// Runs `math_f32` on `x` and checks its `tanh` plane: NaN for NaN, the sign of every zero
/// result is the input's, and the error against `f64::tanh` is at most 4 ulp (the module
/// table's bound); returns the worst error and where.
fn check_tanh(backend: &Backend, x: &[f32]) -> (f64, f32) {
    let plane = MATH_FUNCTIONS.iter().position(|&f| f == "tanh").expect("tanh is one of the math functions");
    let input = backend.upload(x);
    let mut out = backend.zeroed::<f32>(x.len() * MATH_FUNCTIONS.len());
    launch_on!(backend, device_lib::math_f32, LaunchConfig::for_elements(x.len(), 256), &input, &mut out).unwrap();
    let out = backend.download(&out);
    let got = &out[plane * x.len()..][..x.len()];
    let mut worst = (0.0f64, 0.0f32);
    let mut wrong_sign = Vec::new();
    for (&x, &y) in x.iter().zip(got) {
        if x.is_nan() {
            assert!(y.is_nan(), "{}: tanh(NaN) = {y:e}", backend.name());
            continue;
        }
        if y.is_sign_negative() != x.is_sign_negative() {
            wrong_sign.push(format!("tanh({x:e}) = {y:e} ({:#010x})", y.to_bits()));
        }
        let e = ulps(y, f64::from(x).tanh());
        if e > worst.0 {
            worst = (e, x);
        }
    }
    assert!(wrong_sign.is_empty(), "{}: the result's sign is not the input's (G15-3): {}", backend.name(), wrong_sign.join(", "));
    assert!(worst.0 <= 4.0, "{}: tanh({:e}) is {:.3} ulp from the exact value (documented: 4)", backend.name(), worst.1, worst.0);
    worst
}

/// G15-3 on the CPU executor (CI): the special values.
#[test]
fn cpu_g15_3_tanh_keeps_the_sign_of_zero_and_stays_within_4_ulp() {
    let (worst, at) = check_tanh(&Backend::cpu(), &specials());
    println!("cpu: tanh worst {worst:.3} ulp at {at:e} over the special values");
}

/// G15-3 on a GPU: the special values and every 1024th `f32` of each sign (4.2 million inputs),
/// plus every `f32` within 2^12 ulps of the two thresholds.
#[test]
fn gpu_g15_3_tanh_keeps_the_sign_of_zero_and_stays_within_4_ulp() {
    let Some(backend) = Backend::gpu_or_skip("gpu_g15_3_tanh_keeps_the_sign_of_zero_and_stays_within_4_ulp") else { return };
    let mut x = specials();
    let mut bits: Vec<u32> = (0..0x7f80_0000u32).step_by(1024).collect();
    for threshold in [0x3f19_999au32, 0x4110_2cb4] {
        bits.extend(threshold - (1 << 12)..threshold + (1 << 12));
    }
    for b in bits {
        x.push(f32::from_bits(b));
        x.push(-f32::from_bits(b));
    }
    let (worst, at) = check_tanh(&backend, &x);
    println!("G15-3 gpu: tanh worst {worst:.3} ulp at {at:e} ({:#010x}) over {} inputs; tanh(-0) keeps its sign", at.to_bits(), x.len());
}
