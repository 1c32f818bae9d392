//! The `half` crate's `bf16`/`f16` in kernels (tests/kernels/src/half_floats.rs), on both back
//! ends: `cpu::name` on the CPU executor (always), `gpu::name` on the GPU (skipped without
//! one, a failure under `REQUIRE_GPU=1`). Each output is compared bit for bit with a host
//! reference: `half`'s own arithmetic where it is correctly rounded (sums and products of two
//! 16-bit values, conversions), the software fused multiply-add twin (`half::soft`, itself
//! checked against an exact oracle in the device crate) for `fma`. NaN results must be NaNs;
//! their payloads may differ between the GPU and the twins.

#[path = "common/backend.rs"]
mod backend;
mod common;
#[path = "common/rng.rs"]
mod rng;

use backend::{Backend, launch_on, on_both_backends};
use ferrocuda::LaunchConfig;
use ferrocuda_device::half::{Bf16x2, F16x2, bf16, f16, soft};
use rng::Rng;
use test_kernels::half_floats;

on_both_backends!(
    bf16_slices_in_and_out_with_a_bf16_by_value,
    conversions_round_like_the_gpu,
    packed_pairs_round_like_the_gpu,
    shared_memory_and_shuffles_move_16_bit_floats,
    atomic_adds_of_16_bit_floats_sum_exactly,
    scalar_arithmetic_rounds_like_cudas_operators,
);

/// Random half floats from the shared generator (tests/common/rng.rs).
trait HalfFloats {
    fn bf16(&mut self, exponents: std::ops::RangeInclusive<u16>) -> bf16;
    fn f16(&mut self, exponents: std::ops::RangeInclusive<u16>) -> f16;
}

impl HalfFloats for Rng {
    /// A bf16 with a random sign and mantissa and a biased exponent in `exponents`.
    fn bf16(&mut self, exponents: std::ops::RangeInclusive<u16>) -> bf16 {
        let r = self.next();
        let span = (exponents.end() - exponents.start() + 1) as u64;
        let exponent = exponents.start() + ((r >> 40) % span) as u16;
        bf16::from_bits((r as u16 & 0x807f) | (exponent << 7))
    }
    /// An f16 likewise (exponent field 0..=30; 0 gives subnormals).
    fn f16(&mut self, exponents: std::ops::RangeInclusive<u16>) -> f16 {
        let r = self.next();
        let span = (exponents.end() - exponents.start() + 1) as u64;
        let exponent = exponents.start() + ((r >> 40) % span) as u16;
        f16::from_bits((r as u16 & 0x83ff) | (exponent << 10))
    }
}

/// One thread per element, blocks of 128.
fn config(threads: usize) -> LaunchConfig {
    LaunchConfig::for_elements(threads, 128)
}

/// Bits equal, or both NaN.
fn same_bf16(got: bf16, want: bf16) -> bool {
    got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan())
}

fn same_f16(got: f16, want: f16) -> bool {
    got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan())
}

fn bf16_slices_in_and_out_with_a_bf16_by_value(backend: &Backend) {
    let mut rng = Rng(0x1234_5678);
    let n = 1000; // not a whole number of blocks: the kernel's bounds check matters
    let x: Vec<bf16> = (0..n).map(|_| rng.bf16(110..=140)).collect();
    let bias: Vec<bf16> = (0..n).map(|_| rng.bf16(110..=140)).collect();
    let scale = bf16::from_f32(-1.5);
    let (x_buf, bias_buf) = (backend.upload(&x), backend.upload(&bias));
    let mut out = backend.zeroed::<bf16>(n + 24);
    launch_on!(backend, half_floats::scale_bf16, config(n + 24), &x_buf, scale, &bias_buf, &mut out).unwrap();
    let out = backend.download(&out);
    for i in 0..n {
        // One f32 fma (correctly rounded on the host and as `fma.rn.f32`), then one rounding.
        let want = bf16::from_f32(x[i].to_f32().mul_add(scale.to_f32(), bias[i].to_f32()));
        assert_eq!(out[i].to_bits(), want.to_bits(), "{}: element {i}: {} * {scale} + {}", backend.name(), x[i], bias[i]);
    }
    assert!(out[n..].iter().all(|v| v.to_bits() == 0), "{}: wrote past the input", backend.name());
}

fn conversions_round_like_the_gpu(backend: &Backend) {
    let mut rng = Rng(0xfeed_beef);
    // Hard cases first: ties (1 + 2^-8 for bf16, 1 + 2^-11 for f16, and the odd-below ones),
    // subnormals of both formats, the edges of f16's range, zeros, infinities and NaN.
    let mut x: Vec<f32> = vec![
        1.0 + 2f32.powi(-8),
        1.0 + 3.0 * 2f32.powi(-8),
        1.0 + 2f32.powi(-11),
        1.0 + 3.0 * 2f32.powi(-11),
        -(1.0 + 2f32.powi(-8)),
        2f32.powi(-130),
        -3.0 * 2f32.powi(-140),
        f32::from_bits(1),
        2f32.powi(-24),
        2f32.powi(-25),
        3.0 * 2f32.powi(-26),
        65504.0,
        65519.996,
        65520.0,
        f32::MAX,
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ];
    while x.len() < 4096 {
        let bits = rng.next() as u32;
        // Most inputs within f16's range, the rest anywhere.
        x.push(if x.len().is_multiple_of(4) { f32::from_bits(bits) } else { f32::from_bits((bits & 0x87ff_ffff) | 0x3000_0000) });
    }
    let n = x.len();
    let x_buf = backend.upload(&x);
    let (mut to_bf16, mut to_f16, mut widened) = (backend.zeroed::<bf16>(n), backend.zeroed::<f16>(n), backend.zeroed::<f32>(n));
    launch_on!(backend, half_floats::round_and_widen, config(n), &x_buf, &mut to_bf16, &mut to_f16, &mut widened).unwrap();
    let (to_bf16, to_f16, widened) = (backend.download(&to_bf16), backend.download(&to_f16), backend.download(&widened));
    for i in 0..n {
        let (want_b, want_h) = (soft::bf16_from_f32(x[i]), soft::f16_from_f32(x[i]));
        assert!(same_bf16(to_bf16[i], want_b), "{}: {:e} to bf16: {:#06x}, want {:#06x}", backend.name(), x[i], to_bf16[i].to_bits(), want_b.to_bits());
        assert!(same_f16(to_f16[i], want_h), "{}: {:e} to f16: {:#06x}, want {:#06x}", backend.name(), x[i], to_f16[i].to_bits(), want_h.to_bits());
        // Widening is exact; bf16's is the top half of an f32 (computed here without `half`).
        let want = if i % 2 == 0 { f32::from_bits((want_b.to_bits() as u32) << 16) } else { want_h.to_f32() };
        assert!(
            widened[i].to_bits() == want.to_bits() || (widened[i].is_nan() && want.is_nan()),
            "{}: {:e} widened: {:e}, want {:e}",
            backend.name(),
            x[i],
            widened[i],
            want
        );
    }
}

fn packed_pairs_round_like_the_gpu(backend: &Backend) {
    let mut rng = Rng(0x0bad_cafe);
    let n = 2048;
    // Thirds: near 1 (ties and cancellation), wide exponents, results among subnormals.
    let mut pick_bf16 = |i: usize, role: usize| match (i % 3, role) {
        (0, _) => rng.bf16(124..=130),
        (1, _) => rng.bf16(60..=190),
        (_, 2) => rng.bf16(0..=2),
        _ => rng.bf16(60..=66),
    };
    let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..n {
        a.push(Bf16x2::new(pick_bf16(i, 0), pick_bf16(i, 0)));
        b.push(Bf16x2::new(pick_bf16(i, 1), pick_bf16(i, 1)));
        c.push(Bf16x2::new(pick_bf16(i, 2), pick_bf16(i, 2)));
    }
    let mut pick_f16 = |i: usize, role: usize| match (i % 3, role) {
        (0, _) => rng.f16(13..=17),
        (1, _) => rng.f16(1..=30),
        (_, 2) => rng.f16(0..=1),
        _ => rng.f16(3..=8),
    };
    let (mut ha, mut hb, mut hc) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..n {
        ha.push(F16x2::new(pick_f16(i, 0), pick_f16(i, 0)));
        hb.push(F16x2::new(pick_f16(i, 1), pick_f16(i, 1)));
        hc.push(F16x2::new(pick_f16(i, 2), pick_f16(i, 2)));
    }
    let xy: Vec<f32> = (0..2 * n).map(|_| f32::from_bits((rng.next() as u32 & 0x87ff_ffff) | 0x3000_0000)).collect();
    let xy_buf = backend.upload(&xy);
    let (a_buf, b_buf, c_buf) = (backend.upload(&a), backend.upload(&b), backend.upload(&c));
    let mut bf = backend.zeroed::<Bf16x2>(4 * n);
    launch_on!(backend, half_floats::packed_bf16, config(n), &xy_buf, &a_buf, &b_buf, &c_buf, &mut bf).unwrap();
    let (a_buf, b_buf, c_buf) = (backend.upload(&ha), backend.upload(&hb), backend.upload(&hc));
    let mut hf = backend.zeroed::<F16x2>(4 * n);
    launch_on!(backend, half_floats::packed_f16, config(n), &xy_buf, &a_buf, &b_buf, &c_buf, &mut hf).unwrap();
    let (bf, hf) = (backend.download(&bf), backend.download(&hf));
    let lanes_bf16 = |p: Bf16x2| [p.lo(), p.hi()];
    let lanes_f16 = |p: F16x2| [p.lo(), p.hi()];
    for i in 0..n {
        let (x, y) = (xy[2 * i], xy[2 * i + 1]);
        let got = &bf[4 * i..4 * i + 4];
        for lane in 0..2 {
            let (ea, eb, ec) = (lanes_bf16(a[i])[lane], lanes_bf16(b[i])[lane], lanes_bf16(c[i])[lane]);
            // `half`'s + and * round the exact f32 sum and product once: correctly rounded.
            let want = [bf16::from_f32([x, y][lane]), soft::fma_bf16(ea, eb, ec), ea + eb, ea * eb];
            for (k, what) in ["from_f32s", "fma", "+", "*"].iter().enumerate() {
                let g = lanes_bf16(got[k])[lane];
                assert!(
                    same_bf16(g, want[k]),
                    "{}: bf16 pair {i} lane {lane} {what} of {ea:e}, {eb:e}, {ec:e}: {:#06x}, want {:#06x}",
                    backend.name(),
                    g.to_bits(),
                    want[k].to_bits()
                );
            }
            let (ea, eb, ec) = (lanes_f16(ha[i])[lane], lanes_f16(hb[i])[lane], lanes_f16(hc[i])[lane]);
            let want = [f16::from_f32([x, y][lane]), soft::fma_f16(ea, eb, ec), ea + eb, ea * eb];
            let got = &hf[4 * i..4 * i + 4];
            for (k, what) in ["from_f32s", "fma", "+", "*"].iter().enumerate() {
                let g = lanes_f16(got[k])[lane];
                assert!(
                    same_f16(g, want[k]),
                    "{}: f16 pair {i} lane {lane} {what} of {ea:e}, {eb:e}, {ec:e}: {:#06x}, want {:#06x}",
                    backend.name(),
                    g.to_bits(),
                    want[k].to_bits()
                );
            }
        }
    }
}

/// The larger (`max`) or smaller of two 16-bit values as `max.bf16`/`min.bf16` give it: a
/// NaN loses to a number; `None` where both are zeros (either sign may come back).
fn pick_num(a: f32, b: f32, max: bool) -> Option<f32> {
    if a.is_nan() {
        return Some(b);
    }
    if b.is_nan() {
        return Some(a);
    }
    if a == 0.0 && b == 0.0 {
        return None;
    }
    Some(if (b > a) == max { b } else { a })
}

fn scalar_arithmetic_rounds_like_cudas_operators(backend: &Backend) {
    let mut rng = Rng(0x5ca1_ab1e);
    let n = 1500;
    // Thirds as for the pairs: near 1, wide exponents, subnormal results; element 0 has a NaN.
    let mut a: Vec<bf16> = (0..n).map(|i| rng.bf16(if i % 3 == 2 { 60..=66 } else { 110..=140 })).collect();
    let b: Vec<bf16> = (0..n).map(|i| rng.bf16(if i % 3 == 1 { 60..=190 } else { 110..=140 })).collect();
    let c: Vec<bf16> = (0..n).map(|i| rng.bf16(if i % 3 == 2 { 0..=2 } else { 110..=140 })).collect();
    a[0] = bf16::NAN;
    let mut ha: Vec<f16> = (0..n).map(|i| rng.f16(if i % 3 == 2 { 3..=8 } else { 10..=20 })).collect();
    let hb: Vec<f16> = (0..n).map(|i| rng.f16(if i % 3 == 1 { 1..=30 } else { 10..=20 })).collect();
    let hc: Vec<f16> = (0..n).map(|i| rng.f16(if i % 3 == 2 { 0..=1 } else { 10..=20 })).collect();
    ha[0] = f16::NAN;
    let (a_buf, b_buf, c_buf) = (backend.upload(&a), backend.upload(&b), backend.upload(&c));
    let (mut out, mut pairs) = (backend.zeroed::<bf16>(6 * n), backend.zeroed::<Bf16x2>(2 * n));
    launch_on!(backend, half_floats::scalar_bf16, config(n), &a_buf, &b_buf, &c_buf, &mut out, &mut pairs).unwrap();
    let (out, pairs) = (backend.download(&out), backend.download(&pairs));
    for i in 0..n {
        let (x, y, z) = (a[i], b[i], c[i]);
        // `half`'s +, -, * round the exact f32 result once: correctly rounded.
        let want = [x + y, x - y, x * y, soft::fma_bf16(x, y, z)];
        for (k, what) in ["+", "-", "*", "fma"].iter().enumerate() {
            assert!(
                same_bf16(out[6 * i + k], want[k]),
                "{}: bf16 {i} {what} of {x:e}, {y:e}, {z:e}: {:#06x}, want {:#06x}",
                backend.name(),
                out[6 * i + k].to_bits(),
                want[k].to_bits()
            );
        }
        let picks = [
            (out[6 * i + 4], x, y, true),
            (out[6 * i + 5], x, y, false),
            (pairs[2 * i].lo(), x, y, true),
            (pairs[2 * i].hi(), y, z, true),
            (pairs[2 * i + 1].lo(), x, y, false),
            (pairs[2 * i + 1].hi(), y, z, false),
        ];
        for (k, (got, p, q, max)) in picks.into_iter().enumerate() {
            if let Some(want) = pick_num(p.to_f32(), q.to_f32(), max) {
                assert_eq!(got.to_f32().to_bits(), want.to_bits(), "{}: bf16 {i} max/min #{k} of {p:e}, {q:e}", backend.name());
            }
        }
    }
    let (a_buf, b_buf, c_buf) = (backend.upload(&ha), backend.upload(&hb), backend.upload(&hc));
    let (mut out, mut pairs) = (backend.zeroed::<f16>(6 * n), backend.zeroed::<F16x2>(2 * n));
    launch_on!(backend, half_floats::scalar_f16, config(n), &a_buf, &b_buf, &c_buf, &mut out, &mut pairs).unwrap();
    let (out, pairs) = (backend.download(&out), backend.download(&pairs));
    for i in 0..n {
        let (x, y, z) = (ha[i], hb[i], hc[i]);
        let want = [x + y, x - y, x * y, soft::fma_f16(x, y, z)];
        for (k, what) in ["+", "-", "*", "fma"].iter().enumerate() {
            assert!(
                same_f16(out[6 * i + k], want[k]),
                "{}: f16 {i} {what} of {x:e}, {y:e}, {z:e}: {:#06x}, want {:#06x}",
                backend.name(),
                out[6 * i + k].to_bits(),
                want[k].to_bits()
            );
        }
        let picks = [
            (out[6 * i + 4], x, y, true),
            (out[6 * i + 5], x, y, false),
            (pairs[2 * i].lo(), x, y, true),
            (pairs[2 * i].hi(), y, z, true),
            (pairs[2 * i + 1].lo(), x, y, false),
            (pairs[2 * i + 1].hi(), y, z, false),
        ];
        for (k, (got, p, q, max)) in picks.into_iter().enumerate() {
            if let Some(want) = pick_num(p.to_f32(), q.to_f32(), max) {
                assert_eq!(got.to_f32().to_bits(), want.to_bits(), "{}: f16 {i} max/min #{k} of {p:e}, {q:e}", backend.name());
            }
        }
    }
}

fn shared_memory_and_shuffles_move_16_bit_floats(backend: &Backend) {
    let mut rng = Rng(0x5eed);
    let n = 256; // 4 blocks of 64
    let x: Vec<bf16> = (0..n).map(|_| rng.bf16(120..=134)).collect();
    let h: Vec<f16> = (0..n).map(|_| rng.f16(12..=18)).collect();
    let (x_buf, h_buf) = (backend.upload(&x), backend.upload(&h));
    let (mut out_bf16, mut out_f16) = (backend.zeroed::<bf16>(n), backend.zeroed::<f16>(n));
    let (mut pairs, mut sums) = (backend.zeroed::<Bf16x2>(n), backend.zeroed::<F16x2>(n));
    launch_on!(backend, half_floats::shared_and_shuffled, (4u32, 64u32), &x_buf, &h_buf, &mut out_bf16, &mut out_f16, &mut pairs, &mut sums).unwrap();
    let (out_bf16, out_f16, pairs, sums) = (backend.download(&out_bf16), backend.download(&out_f16), backend.download(&pairs), backend.download(&sums));
    for i in 0..n {
        let reversed = i / 64 * 64 + 63 - i % 64;
        assert_eq!(out_bf16[i].to_bits(), x[reversed].to_bits(), "{}: shared bf16 at {i}", backend.name());
        assert_eq!(out_f16[i].to_bits(), h[reversed].to_bits(), "{}: shared f16 at {i}", backend.name());
        let j = i ^ 1;
        assert_eq!(pairs[i].to_bits(), Bf16x2::new(x[j], x[j ^ 2]).to_bits(), "{}: shuffled pair at {i}", backend.name());
    }
    // The butterfly sum, step by step as the GPU adds (each f16 sum correctly rounded).
    for warp in 0..n / 32 {
        let mut v: Vec<(f16, f16)> = (0..32).map(|l| (h[32 * warp + l], f16::ONE)).collect();
        for mask in [16, 8, 4, 2, 1] {
            v = (0..32).map(|l| (v[l].0 + v[l ^ mask].0, v[l].1 + v[l ^ mask].1)).collect();
        }
        for l in 0..32 {
            let got = sums[32 * warp + l];
            assert_eq!((got.lo().to_bits(), got.hi().to_f32()), (v[l].0.to_bits(), 32.0), "{}: warp sum at lane {l} of warp {warp}", backend.name());
        }
    }
}

fn atomic_adds_of_16_bit_floats_sum_exactly(backend: &Backend) {
    // Multiples of 1/2 (f16) or whole numbers (bf16) whose every partial sum is exact in the
    // format, so the sums do not depend on the order the atomics land in.
    let n = 512;
    let x: Vec<f16> = (0..n).map(|i| f16::from_f32((i % 5) as f32 * 0.5)).collect();
    let pairs: Vec<F16x2> = (0..n).map(|i| F16x2::new(f16::ONE, f16::from_f32(-((i % 3) as f32)))).collect();
    let (x_buf, pairs_buf) = (backend.upload(&x), backend.upload(&pairs));
    let (mut sums, mut pair_sums) = (backend.zeroed::<f16>(4), backend.zeroed::<F16x2>(4));
    launch_on!(backend, half_floats::atomic_f16_sums, config(n), &x_buf, &pairs_buf, &mut sums, &mut pair_sums).unwrap();
    let (sums, pair_sums) = (backend.download(&sums), backend.download(&pair_sums));
    for bin in 0..4 {
        let members = (bin..n).step_by(4);
        let want: f32 = members.clone().map(|i| x[i].to_f32()).sum();
        let want_hi: f32 = members.clone().map(|i| pairs[i].hi().to_f32()).sum();
        assert_eq!(sums[bin].to_f32(), want, "{}: f16 sum {bin}", backend.name());
        assert_eq!(pair_sums[bin].to_f32s(), (128.0, want_hi), "{}: f16 pair sum {bin}", backend.name());
    }
    if let Backend::Gpu { context, .. } = backend
        && context.device().arch().expect("the device's architecture") < 90
    {
        println!("bf16 atomics need sm_90: checked on the CPU executor only");
        return;
    }
    let x: Vec<bf16> = (0..n).map(|i| bf16::from_f32((i % 3) as f32)).collect();
    let pairs: Vec<Bf16x2> = (0..n).map(|i| Bf16x2::new(bf16::ONE, bf16::from_f32(-((i % 2) as f32)))).collect();
    let (x_buf, pairs_buf) = (backend.upload(&x), backend.upload(&pairs));
    let (mut sums, mut pair_sums) = (backend.zeroed::<bf16>(4), backend.zeroed::<Bf16x2>(4));
    launch_on!(backend, half_floats::sm90::atomic_bf16_sums, config(n), &x_buf, &pairs_buf, &mut sums, &mut pair_sums).unwrap();
    let (sums, pair_sums) = (backend.download(&sums), backend.download(&pair_sums));
    for bin in 0..4 {
        let members = (bin..n).step_by(4);
        let want: f32 = members.clone().map(|i| x[i].to_f32()).sum();
        let want_hi: f32 = members.clone().map(|i| pairs[i].hi().to_f32()).sum();
        assert_eq!(sums[bin].to_f32(), want, "{}: bf16 sum {bin}", backend.name());
        assert_eq!(pair_sums[bin].to_f32s(), (128.0, want_hi), "{}: bf16 pair sum {bin}", backend.name());
    }
}

/// Regression: the CPU executor's race detector kept one shadow entry per 4 bytes, so two
/// threads writing neighbouring 16-bit elements of one word (no race on a GPU) were reported
/// as a race. Each 2-byte element is now its own entry; a real race on one is still found.
#[test]
fn cpu_race_detector_tells_neighbouring_16_bit_elements_apart() {
    let executor = ferrocuda_device::cpu::CpuExecutor::new();
    let mut out = vec![f16::ZERO; 64];
    half_floats::neighbouring_halves::launch_cpu(&executor, (1u32, 64u32), false, &mut out).expect("neighbouring elements are no race");
    assert!(out.iter().enumerate().all(|(t, v)| v.to_f32() == t as f32), "{out:?}");
    let error =
        half_floats::neighbouring_halves::launch_cpu(&executor, (1u32, 64u32), true, &mut out).expect_err("one element written by every thread is a race");
    let message = error.to_string();
    assert!(message.contains("data race on shared memory at address 0x0"), "{message}");
}

/// The PTX of the kernels above (no GPU needed): each conversion and packed operation is the
/// one hardware instruction the module docs of `ferrocuda_device::half` promise, on sm_80 (the
/// examples' architecture) and sm_90, and none falls back to the software twin (whose fused
/// multiply-add works in f64).
mod ptx {
    /// The text of `.entry name` in the `arch` PTX of the test kernels.
    fn body(arch: u32, name: &str) -> &'static str {
        let ptx = test_kernels::KERNELS.ptx_for(arch).unwrap_or_else(|| panic!("test-kernels is built for sm_{arch}"));
        let start = ptx.find(&format!(".entry {name}(")).unwrap_or_else(|| panic!("no .entry {name} in the sm_{arch} PTX"));
        &ptx[start..start + ptx[start..].find("\n}").expect("an entry ends with a closing brace")]
    }

    /// The opcodes of `.entry name` in the `arch` PTX of the test kernels.
    fn opcodes(arch: u32, name: &str) -> Vec<&'static str> {
        body(arch, name)
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty() && !line.starts_with("//") && !line.starts_with('.') && !line.ends_with(':') && !line.starts_with(['{', '}']))
            .map(|line| line.split_whitespace().find(|word| !word.starts_with('@')).unwrap_or("").trim_end_matches(';'))
            .collect()
    }

    fn count(ops: &[&str], op: &str) -> usize {
        ops.iter().filter(|&&o| o == op).count()
    }

    /// No f64 arithmetic (the software fma) and no bf16 integer rounding (`and`/`add` on the
    /// bits, then a 16-bit shift) in a kernel that should use the hardware instructions.
    fn assert_no_software_twin(ops: &[&str], what: &str) {
        assert!(!ops.iter().any(|o| o.ends_with(".f64")), "{what}: f64 arithmetic (the software twin): {ops:?}");
        assert_eq!(count(ops, "shr.u32") + count(ops, "shr.b32"), 0, "{what}: integer rounding (the software twin): {ops:?}");
    }

    #[test]
    fn conversions_are_single_cvt_instructions() {
        for arch in [80, 90] {
            let ops = opcodes(arch, "round_and_widen");
            assert_eq!(count(&ops, "cvt.rn.bf16.f32"), 1, "sm_{arch}: {ops:?}");
            assert_eq!(count(&ops, "cvt.rn.f16.f32"), 1, "sm_{arch}: {ops:?}");
            assert_eq!(count(&ops, "cvt.f32.f16"), 1, "sm_{arch}: {ops:?}");
            assert_no_software_twin(&ops, "round_and_widen");
            // The bf16 epilogue: one f32 fma, one cvt.rn.bf16.f32, bf16 loads and a store.
            let ops = opcodes(arch, "scale_bf16");
            assert_eq!((count(&ops, "fma.rn.f32"), count(&ops, "cvt.rn.bf16.f32")), (1, 1), "sm_{arch}: {ops:?}");
            assert_eq!(ops.iter().filter(|o| o.starts_with("ld.global.nc.") && o.ends_with("16")).count(), 2, "sm_{arch}: two bf16 loads: {ops:?}");
            assert_eq!(count(&ops, "st.global.b16"), 1, "sm_{arch}: {ops:?}");
            assert_no_software_twin(&ops, "scale_bf16");
        }
    }

    #[test]
    fn packed_pairs_are_single_packed_instructions() {
        // sm_80 has the packed conversion and fma; sums and products are fmas by 1 and -0.
        let ops = opcodes(80, "packed_bf16");
        assert_eq!((count(&ops, "cvt.rn.bf16x2.f32"), count(&ops, "fma.rn.bf16x2")), (1, 3), "{ops:?}");
        assert_no_software_twin(&ops, "packed_bf16 sm_80");
        // sm_90 adds add.rn.bf16x2 and mul.rn.bf16x2.
        let ops = opcodes(90, "packed_bf16");
        for op in ["cvt.rn.bf16x2.f32", "fma.rn.bf16x2", "add.rn.bf16x2", "mul.rn.bf16x2"] {
            assert_eq!(count(&ops, op), 1, "sm_90 {op}: {ops:?}");
        }
        assert_no_software_twin(&ops, "packed_bf16 sm_90");
        for arch in [80, 90] {
            let ops = opcodes(arch, "packed_f16");
            for op in ["cvt.rn.f16x2.f32", "fma.rn.f16x2", "add.rn.f16x2", "mul.rn.f16x2"] {
                assert_eq!(count(&ops, op), 1, "sm_{arch} {op}: {ops:?}");
            }
            assert_no_software_twin(&ops, "packed_f16");
        }
    }

    /// The scalar operators are one instruction each: on sm_90 `add/sub/mul.rn.bf16` (the
    /// SASS `HADD2.BF16`/`HMUL2.BF16` nvcc emits for `__nv_bfloat16`'s `+`/`*`), on sm_80 fmas
    /// by 1, -1 and -0; `max/min.bf16` and the packed `max/min.bf16x2` on both; f16 likewise.
    #[test]
    fn scalar_operators_are_single_instructions() {
        let ops = opcodes(90, "scalar_bf16");
        for op in ["add.rn.bf16", "sub.rn.bf16", "mul.rn.bf16", "fma.rn.bf16", "max.bf16", "min.bf16", "max.bf16x2", "min.bf16x2"] {
            assert_eq!(count(&ops, op), 1, "sm_90 {op}: {ops:?}");
        }
        assert_no_software_twin(&ops, "scalar_bf16 sm_90");
        let ops = opcodes(80, "scalar_bf16");
        assert_eq!(count(&ops, "fma.rn.bf16"), 4, "sm_80: +, -, * and fma are fmas: {ops:?}");
        for op in ["max.bf16", "min.bf16", "max.bf16x2", "min.bf16x2"] {
            assert_eq!(count(&ops, op), 1, "sm_80 {op}: {ops:?}");
        }
        assert_no_software_twin(&ops, "scalar_bf16 sm_80");
        for arch in [80, 90] {
            let ops = opcodes(arch, "scalar_f16");
            for op in ["add.rn.f16", "sub.rn.f16", "mul.rn.f16", "fma.rn.f16", "max.f16", "min.f16", "max.f16x2", "min.f16x2"] {
                assert_eq!(count(&ops, op), 1, "sm_{arch} {op}: {ops:?}");
            }
            assert!(!ops.iter().any(|o| o.ends_with(".f64") || o.ends_with(".f32")), "sm_{arch}: no widening: {ops:?}");
        }
    }

    #[test]
    fn atomic_adds_are_single_atom_instructions() {
        // The atomics sit in `{ .reg .u64 g; cvta.to.global.u64 g, ..; atom.. }` blocks.
        let count_in = |arch: u32, name: &str, op: &str| body(arch, name).matches(&format!("{op} ")).count();
        for arch in [80, 90] {
            assert_eq!(count_in(arch, "atomic_f16_sums", "atom.relaxed.gpu.global.add.noftz.f16"), 1, "sm_{arch}");
            assert_eq!(count_in(arch, "atomic_f16_sums", "atom.relaxed.gpu.global.add.noftz.f16x2"), 1, "sm_{arch}");
        }
        assert_eq!(count_in(90, "atomic_bf16_sums", "atom.relaxed.gpu.global.add.noftz.bf16"), 1);
        assert_eq!(count_in(90, "atomic_bf16_sums", "atom.relaxed.gpu.global.add.noftz.bf16x2"), 1);
        let sm80 = test_kernels::KERNELS.ptx_for(80).expect("sm_80 PTX");
        assert!(!sm80.contains(".entry atomic_bf16_sums("), "bf16 atomics need sm_90: the sm_80 PTX must leave them out");
    }

    #[test]
    fn shared_memory_and_shuffles_are_16_and_32_bit_accesses() {
        let ops = opcodes(80, "shared_and_shuffled");
        assert_eq!((count(&ops, "st.shared.b16"), count(&ops, "ld.shared.b16")), (2, 2), "{ops:?}");
        assert!(
            !ops.iter().any(|o| o.starts_with("ld.u16") || o.starts_with("st.u16") || o.starts_with("ld.b16") || o.starts_with("st.b16")),
            "generic 16-bit accesses: {ops:?}"
        );
        // One shuffle for the pair's partner, one for the pair, five for the sum.
        assert_eq!(ops.iter().filter(|o| o.starts_with("shfl.sync.bfly.b32")).count(), 7, "{ops:?}");
        assert_eq!(count(&ops, "add.rn.f16x2"), 5, "{ops:?}");
    }
}
