//! The device library's kernels (tests/kernels/src/device_lib.rs) on both back ends: each test
//! body below runs once on the CPU executor (`cpu::name`, always) and once on the GPU
//! (`gpu::name`, skipped without one, a failure under `REQUIRE_GPU=1`), with the same
//! inputs and the same element-by-element checks against a host reference.
//!
//! Every kernel of the device library is here except `print_lines` (whose output is read back
//! from a child process: `cpu_println_prints_the_gpu_lines` and `gpu_println_reaches_stdout`
//! below) and `panic_formatted` (tests/cpu_executor.rs, tests/gpu_fault.rs).

#[path = "common/backend.rs"]
mod backend;
mod common;
#[path = "common/rng.rs"]
mod rng;

use backend::{Backend, launch_on, on_both_backends};
use ferrocuda::LaunchConfig;
use rng::Rng;
use test_kernels::device_lib::{self, INDEX_WORDS, MATH_FUNCTIONS, WARP_WORDS};

on_both_backends!(
    indices_in_a_3d_launch,
    two_static_shared_arrays_do_not_alias_and_the_barrier_holds,
    dynamic_shared_memory_is_sized_at_launch_and_split_without_overlap,
    barriers_count_and_vote_across_the_block,
    warp_shuffles_votes_matches_and_reductions,
    atomics_from_every_thread,
    p30_d5_float_atomic_max_and_min_take_the_extremes_of_either_sign,
    histogram_with_shared_memory_atomics,
    math_f32_matches_the_host_within_its_documented_ulps,
    math_f64_matches_the_host_within_its_documented_ulps,
    fast_math_is_close_to_the_precise_functions,
    tensor_core_mma_matches_a_host_matrix_product,
    cluster_blocks_read_each_others_shared_memory,
    a_kernel_compiled_for_clusters_runs_in_them_without_asking,
    tensor_core_mma_bf16_matches_a_host_matrix_product,
    active_masks_match_all_and_block_scope_atomics,
);

fn indices_in_a_3d_launch(backend: &Backend) {
    let (grid, block) = ((2u32, 3u32, 2u32), (4u32, 2u32, 3u32));
    let threads = 2 * 3 * 2 * 4 * 2 * 3;
    let mut out = backend.zeroed::<u32>(threads * INDEX_WORDS);
    launch_on!(backend, device_lib::indices_3d, (grid, block), &mut out).unwrap();
    let out = backend.download(&out);
    let mut seen = 0;
    for bz in 0..2 {
        for by in 0..3 {
            for bx in 0..2 {
                for tz in 0..3 {
                    for ty in 0..2 {
                        for tx in 0..4 {
                            let (x, y, z) = (bx * 4 + tx, by * 2 + ty, bz * 3 + tz);
                            let linear = x + 8 * (y + 6 * z);
                            let rank = tx + 4 * (ty + 2 * tz);
                            let words = &out[linear as usize * INDEX_WORDS..][..INDEX_WORDS];
                            assert_eq!(words, [tx, ty, tz, bx, by, bz, rank, linear], "{}: thread ({tx},{ty},{tz}) of block ({bx},{by},{bz})", backend.name());
                            seen += 1;
                        }
                    }
                }
            }
        }
    }
    assert_eq!(seen, threads);
}

fn two_static_shared_arrays_do_not_alias_and_the_barrier_holds(backend: &Backend) {
    let blocks = 64;
    let x: Vec<f32> = (0..blocks * 256).map(|i| (i % 997) as f32 * 0.5).collect();
    let input = backend.upload(&x);
    let mut out = backend.zeroed::<f32>(x.len());
    launch_on!(backend, device_lib::shared_two_arrays, (blocks as u32, 256u32), &input, &mut out).unwrap();
    let out = backend.download(&out);
    for b in 0..blocks {
        for t in 0..256 {
            let expected = x[b * 256 + 255 - t] + 1000.0 * 2.0 * x[b * 256 + (t + 1) % 256];
            assert_eq!(out[b * 256 + t], expected, "{}: block {b} thread {t}", backend.name());
        }
    }
}

fn dynamic_shared_memory_is_sized_at_launch_and_split_without_overlap(backend: &Backend) {
    let mut rng = Rng(7);
    for block in [64u32, 256, 1024] {
        let blocks = 37usize;
        let x: Vec<u32> = (0..blocks * block as usize).map(|_| rng.below(1000)).collect();
        let input = backend.upload(&x);
        let mut out = backend.zeroed::<u32>(2 * blocks);
        // Two arrays of `block` u32 each: sums and marks.
        let config = LaunchConfig::new(blocks as u32, block).with_shared_bytes(2 * block * 4);
        launch_on!(backend, device_lib::dynamic_shared_sum, config, &input, &mut out).unwrap();
        let out = backend.download(&out);
        for b in 0..blocks {
            let expected: u32 = x[b * block as usize..][..block as usize].iter().sum();
            assert_eq!(out[2 * b], expected, "{}: block size {block}, block {b}: sum", backend.name());
            assert_eq!(out[2 * b + 1], 0, "{}: block size {block}, block {b}: the two halves overlapped", backend.name());
        }
    }
}

fn barriers_count_and_vote_across_the_block(backend: &Backend) {
    let mut rng = Rng(11);
    let blocks = 40usize;
    let mut x: Vec<u32> = (0..blocks * 256).map(|_| rng.below(100)).collect();
    // Block 1: all odd; block 2: none odd; block 3: exactly one odd.
    x[256..512].iter_mut().for_each(|v| *v = 2 * *v + 1);
    x[512..768].iter_mut().for_each(|v| *v *= 2);
    x[768..1024].iter_mut().enumerate().for_each(|(i, v)| *v = if i == 200 { 5 } else { 2 * *v });
    let input = backend.upload(&x);
    let mut out = backend.zeroed::<[u32; 3]>(blocks);
    launch_on!(backend, device_lib::barrier_votes, (blocks as u32, 256u32), &input, &mut out).unwrap();
    let out = backend.download(&out).concat();
    for b in 0..blocks {
        let odd = x[b * 256..][..256].iter().filter(|v| *v % 2 == 1).count() as u32;
        assert_eq!(out[3 * b..3 * b + 3], [odd, (odd == 256) as u32, (odd > 0) as u32], "{}: block {b}", backend.name());
    }
    assert_eq!(out[3..6], [256, 1, 1]);
    assert_eq!(out[6..9], [0, 0, 0]);
    assert_eq!(out[9..12], [1, 0, 1]);
}

fn warp_shuffles_votes_matches_and_reductions(backend: &Backend) {
    let mut rng = Rng(13);
    let warps = 48usize;
    let mut x: Vec<u32> = (0..warps * 32).map(|_| rng.below(900)).collect();
    x[5 * 32 + 9] = 7; // warp 5 has a 7, for `any`
    x[6 * 32 + 3] = 5000; // warp 6 fails `all(v < 1000)`
    let input = backend.upload(&x);
    let mut out = backend.zeroed::<u32>(x.len() * WARP_WORDS);
    launch_on!(backend, device_lib::warp_ops, ((warps / 4) as u32, 128u32), &input, &mut out).unwrap();
    let out = backend.download(&out);
    for w in 0..warps {
        let v = &x[w * 32..][..32];
        let ballot = (0..32).filter(|&l| v[l].is_multiple_of(3)).fold(0u32, |m, l| m | 1 << l);
        for lane in 0..32usize {
            let wide = |l: usize| ((v[l] as u64) << 32) | (v[l] as u64 ^ 0xdead_beef);
            let matching = (0..32).filter(|&l| v[l] % 4 == v[lane] % 4).fold(0u32, |m, l| m | 1 << l);
            let expected = [
                lane as u32,
                v[31 - lane],
                if lane >= 3 { v[lane - 3] } else { v[lane] },
                if lane + 5 < 32 { v[lane + 5] } else { v[lane] },
                v[lane ^ 1],
                (wide(lane ^ 2) >> 32) as u32,
                wide(lane ^ 2) as u32,
                ballot,
                v.iter().all(|&e| e < 1000) as u32,
                v.contains(&7) as u32,
                matching,
                v.iter().sum(),
                *v.iter().max().unwrap(),
                v.iter().map(|&e| e as f32 * 0.5).sum::<f32>() as u32,
            ];
            let got = &out[(w * 32 + lane) * WARP_WORDS..][..WARP_WORDS];
            assert_eq!(got[..13], expected[..13], "{}: warp {w} lane {lane}", backend.name());
            // The f32 sum's order differs between the butterfly and the host: allow 1.
            assert!(got[13].abs_diff(expected[13]) <= 1, "{}: warp {w} lane {lane}: f32 sum {} vs {}", backend.name(), got[13], expected[13]);
        }
    }
    assert_eq!(out[(5 * 32) * WARP_WORDS + 9], 1, "any() saw the 7 in warp 5");
    assert_eq!(out[(6 * 32) * WARP_WORDS + 8], 0, "all() saw the 5000 in warp 6");
}

fn atomics_from_every_thread(backend: &Backend) {
    let mut rng = Rng(17);
    let n = 1 << 20;
    let x: Vec<u32> = (0..n).map(|_| rng.below(1 << 12) + 3).collect();
    let input = backend.upload(&x);
    let mut counters = backend.upload(&[0u32, 0, 0, u32::MAX, 0, 0, 0, 0]);
    let mut sums_f32 = backend.zeroed::<f32>(1);
    let mut sums_f64 = backend.zeroed::<f64>(1);
    launch_on!(backend, device_lib::atomics, ((n / 256) as u32, 256u32), &input, &mut counters, &mut sums_f32, &mut sums_f64).unwrap();
    let counters = backend.download(&counters);
    let sum: u64 = x.iter().map(|&v| v as u64).sum();
    assert_eq!(counters[0], n as u32, "device-scope add");
    assert_eq!(counters[1], n as u32, "system-scope add");
    assert_eq!(counters[2], *x.iter().max().unwrap(), "max");
    assert_eq!(counters[3], *x.iter().min().unwrap(), "min");
    assert_eq!(counters[4], sum as u32, "sum by compare-and-swap loop");
    assert_eq!(counters[5], n as u32, "core::sync::atomic fetch_add");
    assert_eq!(counters[6], 1, "exchange");
    assert_eq!(counters[7], 1, "exactly one thread saw the exchange's old 0");
    let f64_sum = backend.download(&sums_f64)[0];
    assert_eq!(f64_sum, sum as f64, "f64 adds of integers below 2^53 are exact in any order");
    let f32_sum = backend.download(&sums_f32)[0] as f64;
    assert!((f32_sum - sum as f64).abs() / (sum as f64) < 1e-3, "f32 sum {f32_sum} vs {sum}");
}

/// Issue 30 (fourth port, D5): `fetch_max`/`fetch_min` on `f32`/`f64` (vLLM's
/// `atomicMaxFloat`), over values of both signs and both zeros, starting from slots that hold
/// the opposite extreme of either sign.
fn p30_d5_float_atomic_max_and_min_take_the_extremes_of_either_sign(backend: &Backend) {
    let mut rng = Rng(23);
    let n = 1 << 16;
    let mut x: Vec<f32> = (0..n).map(|_| (rng.below(1 << 20) as f32 - (1 << 19) as f32) * 0.37).collect();
    x[5] = -0.0;
    x[6] = 0.0;
    let input = backend.upload(&x);
    let (max, min) = (x.iter().copied().fold(f32::MIN, f32::max), x.iter().copied().fold(f32::MAX, f32::min));
    assert!(max > 0.0 && min < 0.0, "both signs in the input");
    // Slots start at the other end: a negative maximum-so-far and a positive minimum-so-far,
    // then the reverse, so each of the two integer paths meets both signs.
    for (start_max, start_min) in [(-1.0e30f32, 1.0e30f32), (-0.0, 0.0)] {
        let mut extrema_f32 = backend.upload(&[start_max, start_min]);
        let mut extrema_f64 = backend.upload(&[start_max as f64, start_min as f64]);
        launch_on!(backend, device_lib::atomic_float_extrema, ((n / 256) as u32, 256u32), &input, &mut extrema_f32, &mut extrema_f64).unwrap();
        assert_eq!(backend.download(&extrema_f32), vec![max, min], "{}: f32 from {start_max}, {start_min}", backend.name());
        assert_eq!(backend.download(&extrema_f64), vec![max as f64, min as f64], "{}: f64 from {start_max}, {start_min}", backend.name());
    }
    // All negative values: the maximum is the one closest to zero (the unsigned-min path).
    let negative: Vec<f32> = x.iter().map(|v| -v.abs() - 1.0).collect();
    let input = backend.upload(&negative);
    let mut extrema_f32 = backend.upload(&[f32::NEG_INFINITY, f32::INFINITY]);
    let mut extrema_f64 = backend.upload(&[f64::NEG_INFINITY, f64::INFINITY]);
    launch_on!(backend, device_lib::atomic_float_extrema, ((n / 256) as u32, 256u32), &input, &mut extrema_f32, &mut extrema_f64).unwrap();
    let (max, min) = (negative.iter().copied().fold(f32::MIN, f32::max), negative.iter().copied().fold(f32::MAX, f32::min));
    assert_eq!(backend.download(&extrema_f32), vec![max, min], "{}: all negative", backend.name());
    assert_eq!(backend.download(&extrema_f64), vec![max as f64, min as f64], "{}: all negative (f64)", backend.name());
}

fn histogram_with_shared_memory_atomics(backend: &Backend) {
    let mut rng = Rng(19);
    let n = 3_000_001usize;
    let x: Vec<u32> = (0..n).map(|_| (rng.next() >> 20) as u32).collect();
    let input = backend.upload(&x);
    let mut bins = backend.zeroed::<u32>(256);
    launch_on!(backend, device_lib::histogram_256, (264u32, 256u32), &input, &mut bins).unwrap();
    let mut expected = [0u32; 256];
    x.iter().for_each(|&v| expected[(v & 0xff) as usize] += 1);
    assert_eq!(backend.download(&bins), expected.to_vec(), "{}", backend.name());
}

/// Units in the last place between two floats (0 when both are NaN or equal infinities).
fn ulps_f32(a: f32, b: f32) -> u64 {
    if a.is_nan() && b.is_nan() || a == b {
        return 0;
    }
    let key = |v: f32| {
        let bits = v.to_bits() as i64;
        if bits < 0x8000_0000 { bits } else { 0x8000_0000 - bits }
    };
    key(a).abs_diff(key(b))
}

fn ulps_f64(a: f64, b: f64) -> u64 {
    if a.is_nan() && b.is_nan() || a == b {
        return 0;
    }
    let key = |v: f64| {
        let bits = v.to_bits() as i128;
        if bits < 1 << 63 { bits } else { (1 << 63) - bits }
    };
    key(a).abs_diff(key(b)) as u64
}

/// The accuracy bound asserted per function, in ulps (see ferrocuda_device::math's table).
fn bound(function: &str) -> u64 {
    match function {
        "sqrt" | "floor" | "ceil" | "round" => 0,
        // f32: CUDA's `rsqrtf` (`rsqrt.approx.f32`, 2 ulp, issue 30); f64: `1 / sqrt`, 1 ulp.
        "rsqrt" => 2,
        _ => 4,
    }
}

fn inputs(count: usize, seed: u64) -> Vec<f64> {
    let mut rng = Rng(seed);
    let mut x: Vec<f64> = (0..count).map(|_| rng.uniform_f64(-10.0, 10.0)).collect();
    // Edges: zero, halves (rounding), tiny values, and the integers.
    x.extend([0.0, -0.0, 0.5, -0.5, 1.5, -2.5, 1e-3, -1e-3, 1.0, 2.0, 3.0, 1e-30]);
    x
}

/// `host_math_f64` / `host_math_f32`: the host's value of `MATH_FUNCTIONS[f]` at `v` (std,
/// and libm for erf/erfc, which std lacks), one definition for both float types.
macro_rules! host_math {
    ($name:ident, $t:ty, $erf:path, $erfc:path) => {
        fn $name(f: &str, v: $t) -> $t {
            match f {
                "sqrt" => v.sqrt(),
                "rsqrt" => 1.0 / v.sqrt(),
                "cbrt" => v.cbrt(),
                "exp" => v.exp(),
                "exp2" => v.exp2(),
                "exp_m1" => v.exp_m1(),
                "ln" => v.ln(),
                "log2" => v.log2(),
                "log10" => v.log10(),
                "ln_1p" => v.ln_1p(),
                "sin" => v.sin(),
                "cos" => v.cos(),
                "tan" => v.tan(),
                "asin" => (v * 0.1).asin(),
                "atan" => v.atan(),
                "sinh" => v.sinh(),
                "tanh" => v.tanh(),
                "erf" => $erf(v),
                "erfc" => $erfc(v),
                "floor" => v.floor(),
                "ceil" => v.ceil(),
                "round" => v.round(),
                "powf(x, 1.7)" => v.powf(1.7),
                "powi(x, 5)" => v.powi(5),
                other => unreachable!("{other}"),
            }
        }
    };
}
host_math!(host_math_f64, f64, libm::erf, libm::erfc);
host_math!(host_math_f32, f32, libm::erff, libm::erfcf);

fn math_f32_matches_the_host_within_its_documented_ulps(backend: &Backend) {
    let x: Vec<f32> = inputs(100_000, 23).into_iter().map(|v| v as f32).collect();
    let input = backend.upload(&x);
    let mut out = backend.zeroed::<f32>(x.len() * MATH_FUNCTIONS.len());
    launch_on!(backend, device_lib::math_f32, LaunchConfig::for_elements(x.len(), 256), &input, &mut out).unwrap();
    let out = backend.download(&out);
    let mut report = Vec::new();
    for (f, name) in MATH_FUNCTIONS.iter().enumerate() {
        let (worst, i) = (0..x.len()).map(|i| (ulps_f32(out[f * x.len() + i], host_math_f32(name, x[i])), i)).max_by_key(|p| p.0).unwrap();
        report.push(format!("{name} {worst}"));
        assert!(
            worst <= bound(name),
            "{}: f32 {name}: {worst} ulps at x = {:e} (kernel {}, host {})",
            backend.name(),
            x[i],
            out[f * x.len() + i],
            host_math_f32(name, x[i])
        );
    }
    println!("{}: f32 worst ulps over {} inputs: {}", backend.name(), x.len(), report.join(", "));
}

fn math_f64_matches_the_host_within_its_documented_ulps(backend: &Backend) {
    let x = inputs(100_000, 29);
    let input = backend.upload(&x);
    let mut out = backend.zeroed::<f64>(x.len() * MATH_FUNCTIONS.len());
    launch_on!(backend, device_lib::math_f64, LaunchConfig::for_elements(x.len(), 256), &input, &mut out).unwrap();
    let out = backend.download(&out);
    let mut report = Vec::new();
    for (f, name) in MATH_FUNCTIONS.iter().enumerate() {
        let (worst, i) = (0..x.len()).map(|i| (ulps_f64(out[f * x.len() + i], host_math_f64(name, x[i])), i)).max_by_key(|p| p.0).unwrap();
        report.push(format!("{name} {worst}"));
        assert!(worst <= bound(name), "{}: f64 {name}: {worst} ulps at x = {:e}", backend.name(), x[i]);
    }
    println!("{}: f64 worst ulps over {} inputs: {}", backend.name(), x.len(), report.join(", "));
}

fn fast_math_is_close_to_the_precise_functions(backend: &Backend) {
    let mut rng = Rng(31);
    let x: Vec<f32> = (0..100_000).map(|_| rng.uniform_f64(0.5, 3.0) as f32).collect();
    let input = backend.upload(&x);
    let mut out = backend.zeroed::<f32>(x.len() * 10);
    launch_on!(backend, device_lib::fast_math, LaunchConfig::for_elements(x.len(), 256), &input, &mut out).unwrap();
    let out = backend.download(&out);
    // (name, precise, relative bound, absolute bound)
    type Check = (&'static str, fn(f64) -> f64, f64, f64);
    let checks: [Check; 10] = [
        ("fast_exp", f64::exp, 2e-6, 0.0),
        ("fast_exp2", f64::exp2, 1e-6, 0.0),
        ("fast_ln", f64::ln, 0.0, 1e-6),
        ("fast_log2", f64::log2, 0.0, 1e-6),
        ("fast_sin", f64::sin, 0.0, 2e-6),
        ("fast_cos", f64::cos, 0.0, 2e-6),
        ("fast_rsqrt", |v| 1.0 / v.sqrt(), 1e-6, 0.0),
        ("fast_recip", |v| 1.0 / v, 1e-6, 0.0),
        ("fast_tanh", f64::tanh, 0.0, 1e-3),
        ("fast_div(x, 3)", |v| v / 3.0, 1e-6, 0.0),
    ];
    let mut report = Vec::new();
    for (f, (name, precise, relative, absolute)) in checks.iter().enumerate() {
        let mut worst = 0.0f64;
        for (i, &v) in x.iter().enumerate() {
            let (got, want) = (out[f * x.len() + i] as f64, precise(v as f64));
            let error = if *relative > 0.0 { ((got - want) / want).abs() } else { (got - want).abs() };
            worst = worst.max(error);
            assert!(error <= relative.max(*absolute), "{}: {name}({v}) = {got}, precise {want}", backend.name());
        }
        report.push(format!("{name} {worst:.1e}"));
    }
    println!("{}: fast math worst error on [0.5, 3]: {}", backend.name(), report.join(", "));
}

fn tensor_core_mma_matches_a_host_matrix_product(backend: &Backend) {
    let mut rng = Rng(37);
    // Small integers and halves: exact in f16 and in every f32 partial sum.
    let a: Vec<f32> = (0..256).map(|_| rng.below(9) as f32 * 0.5 - 2.0).collect();
    let b: Vec<f32> = (0..128).map(|_| rng.below(9) as f32 * 0.5 - 2.0).collect();
    let a_bits = backend.upload(&a.iter().map(|&v| f16_bits(v)).collect::<Vec<_>>());
    let b_bits = backend.upload(&b.iter().map(|&v| f16_bits(v)).collect::<Vec<_>>());
    let mut c = backend.zeroed::<f32>(128);
    launch_on!(backend, device_lib::mma_m16n8k16_f16, (1u32, 32u32), &a_bits, &b_bits, &mut c).unwrap();
    let c = backend.download(&c);
    for row in 0..16 {
        for col in 0..8 {
            let expected: f32 = (0..16).map(|k| a[row * 16 + k] * b[k * 8 + col]).sum();
            assert_eq!(c[row * 8 + col], expected, "{}: C[{row}][{col}]", backend.name());
        }
    }
}

/// False (after printing why) on a GPU older than sm_90, which cannot launch clusters; the
/// CPU executor always can.
fn clusters_supported(backend: &Backend, test: &str) -> bool {
    if let Backend::Gpu { context, .. } = backend {
        let (major, _) = context.device().compute_capability().unwrap();
        if major < 9 {
            println!("SKIPPED {test}: the device is sm_{major}x; clusters need sm_90");
            return false;
        }
    }
    true
}

fn cluster_blocks_read_each_others_shared_memory(backend: &Backend) {
    if !clusters_supported(backend, "cluster test") {
        return;
    }
    let (blocks, cluster) = (16u32, 4u32);
    let mut out = backend.zeroed::<u32>((blocks * 128) as usize);
    launch_on!(backend, device_lib::cluster_ring_exchange, LaunchConfig::new(blocks, 128u32).with_cluster(cluster), &mut out).unwrap();
    let out = backend.download(&out);
    for b in 0..blocks {
        let next = (b % cluster + 1) % cluster;
        for t in 0..128 {
            assert_eq!(out[(b * 128 + t) as usize], 1000 * next + t, "{}: block {b} thread {t}", backend.name());
        }
    }
}

/// `#[kernel(cluster_dims(2))]`: a configuration without a cluster runs in pairs (the launcher
/// fills in the compiled shape, and on the GPU `.reqnctapercluster` would impose it anyway), the
/// same cluster is accepted, another is refused by name, and a grid the pairs do not divide is
/// refused as for any cluster.
fn a_kernel_compiled_for_clusters_runs_in_them_without_asking(backend: &Backend) {
    if !clusters_supported(backend, "compiled cluster test") {
        return;
    }
    assert_eq!(device_lib::compiled_cluster_shape::CLUSTER_DIMS, Some(ferrocuda::Dim3 { x: 2, y: 1, z: 1 }));
    let blocks = 8u32;
    for config in [LaunchConfig::new(blocks, 64u32), LaunchConfig::new(blocks, 64u32).with_cluster(2u32)] {
        let mut out = backend.zeroed::<u32>((blocks * 64) as usize);
        launch_on!(backend, device_lib::compiled_cluster_shape, config, &mut out).unwrap();
        let out = backend.download(&out);
        for b in 0..blocks {
            for t in 0..64 {
                assert_eq!(out[(b * 64 + t) as usize], 2000 + b % 2, "{}: {config:?}, block {b} thread {t}", backend.name());
            }
        }
    }
    let mut out = backend.zeroed::<u32>((blocks * 64) as usize);
    let refused = launch_on!(backend, device_lib::compiled_cluster_shape, LaunchConfig::new(blocks, 64u32).with_cluster(4u32), &mut out).unwrap_err();
    assert!(refused.contains("compiled for clusters of (2, 1, 1) blocks") && refused.contains("asks for (4, 1, 1)"), "{}: {refused}", backend.name());
    let odd = launch_on!(backend, device_lib::compiled_cluster_shape, LaunchConfig::new(7u32, 64u32), &mut out).unwrap_err();
    assert!(odd.contains("cluster dimension x = 2 does not divide grid dimension x = 7"), "{}: {odd}", backend.name());
}

fn tensor_core_mma_bf16_matches_a_host_matrix_product(backend: &Backend) {
    let mut rng = Rng(41);
    let a: Vec<f32> = (0..256).map(|_| rng.below(9) as f32 * 0.5 - 2.0).collect();
    let b: Vec<f32> = (0..128).map(|_| rng.below(9) as f32 * 0.5 - 2.0).collect();
    // bf16 is the top half of an f32: exact for these values.
    let bf16 = |v: &f32| (v.to_bits() >> 16) as u16;
    let a_bits = backend.upload(&a.iter().map(bf16).collect::<Vec<_>>());
    let b_bits = backend.upload(&b.iter().map(bf16).collect::<Vec<_>>());
    let mut c = backend.zeroed::<f32>(128);
    launch_on!(backend, device_lib::mma_m16n8k16_bf16, (1u32, 32u32), &a_bits, &b_bits, &mut c).unwrap();
    let c = backend.download(&c);
    for row in 0..16 {
        for col in 0..8 {
            let expected: f32 = (0..16).map(|k| a[row * 16 + k] * b[k * 8 + col]).sum();
            assert_eq!(c[row * 8 + col], expected, "{}: C[{row}][{col}]", backend.name());
        }
    }
}

fn active_masks_match_all_and_block_scope_atomics(backend: &Backend) {
    let (blocks, threads) = (12usize, 128usize);
    let mut out = backend.zeroed::<u32>(3 * blocks * threads);
    let mut counts = backend.zeroed::<u32>(blocks);
    launch_on!(backend, device_lib::warp_masks_and_block_atomics, (blocks as u32, threads as u32), &mut out, &mut counts).unwrap();
    let out = backend.download(&out);
    for i in 0..blocks * threads {
        let lane = i % 32;
        let expected_branch = if lane % 2 == 0 { 0x5555_5555 } else { 0 };
        assert_eq!(out[3 * i..3 * i + 3], [expected_branch, u32::MAX, 0], "{}: thread {i}", backend.name());
    }
    assert_eq!(backend.download(&counts), vec![threads as u32; blocks]);
}

/// IEEE half bits of a value exactly representable in f16 (small multiples of 1/2 here).
fn f16_bits(value: f32) -> u16 {
    if value == 0.0 {
        return 0;
    }
    let bits = value.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exponent = ((bits >> 23) & 0xff) as i32 - 127 + 15;
    let mantissa = ((bits >> 13) & 0x3ff) as u16;
    assert!((1..31).contains(&exponent) && bits & 0x1fff == 0, "{value} is not exact in f16");
    sign | (exponent as u16) << 10 | mantissa
}

/// `println!` from a kernel, read back from a child process's stdout (a child's output is not
/// captured by the test harness): the same lines on both back ends.
const PRINT_CHILD: &str = "FERROCUDA_PRINT_CHILD";

/// In the child (this binary re-run for `test`), true; in the parent, false.
fn is_print_child(test: &str) -> bool {
    std::env::var(PRINT_CHILD).is_ok_and(|t| t == test)
}

/// Runs `test` in a child process and checks the lines `print_lines` printed there.
fn check_printed_lines(test: &str) {
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(PRINT_CHILD, test)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "child failed:\n{text}\n{}", String::from_utf8_lossy(&output.stderr));
    // (The harness prints the test's name without a newline, so the first kernel line may
    // share its line: count occurrences, not whole lines.)
    let blocks = (0..3).map(|b| format!("block {b} of 3 says 1.235 tag=beef ok=true"));
    let warps = (1..4).map(|w| format!("warp  {w} checking in, 100% ready"));
    for line in blocks.chain(warps) {
        assert_eq!(text.matches(&format!("{line}\n")).count(), 1, "expected once: {line:?} in:\n{text}");
    }
    println!("{test}:\n{}", text.lines().filter(|l| l.starts_with("block") || l.starts_with("warp")).collect::<Vec<_>>().join("\n"));
}

#[test]
fn cpu_println_prints_the_gpu_lines() {
    const NAME: &str = "cpu_println_prints_the_gpu_lines";
    if is_print_child(NAME) {
        let executor = ferrocuda_device::cpu::CpuExecutor::deterministic();
        device_lib::print_lines::launch_cpu(&executor, (3u32, 128u32), 1.23456f32, 0xbeefu32).unwrap();
        return;
    }
    check_printed_lines(NAME);
}

#[test]
fn gpu_println_reaches_stdout() {
    const NAME: &str = "gpu_println_reaches_stdout";
    if is_print_child(NAME) {
        let context = ferrocuda::Context::primary(0).unwrap();
        let stream = ferrocuda::Stream::new(&context).unwrap();
        device_lib::print_lines::launch(&stream, (3u32, 128u32), 1.23456f32, 0xbeefu32).unwrap();
        stream.synchronize().unwrap();
        return;
    }
    if common::gpu_or_skip(NAME).is_none() {
        return;
    }
    check_printed_lines(NAME);
}
