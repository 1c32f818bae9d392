//! Issue 23's device-library additions on both back ends (the fixture kernels of
//! tests/kernels/src/port_gaps.rs): each body runs on the CPU executor (`cpu::name`, always)
//! and on the GPU (`gpu::name`, skipped without one, a failure under `REQUIRE_GPU=1`), with
//! the same inputs and the same element-by-element checks against a host reference.

#[path = "common/backend.rs"]
mod backend;
mod common;
#[path = "common/rng.rs"]
mod rng;

use backend::{Backend, launch_on, on_both_backends};
use rng::Rng;
use test_kernels::port_gaps::{self, BLOCK_WORDS, F4, FAST_WORDS, SMALL_WORDS};

on_both_backends!(
    shared_x4_and_x2_accesses_move_whole_vectors,
    four_scalar_shared_stores_read_back_as_one_vector,
    every_cache_hint_loads_and_stores_the_right_values,
    streaming_float4_and_l2_policy_accesses_copy_exactly,
    fast_math_is_within_its_documented_error_and_flushes_denormals,
    block_reduce_and_scan_match_the_host_for_256_threads,
    block_reduce_and_scan_match_the_host_for_one_and_two_warps,
    a_cache_hint_on_a_local_array_reads_the_local_value,
);

fn f4s(rng: &mut Rng, n: usize) -> Vec<F4> {
    (0..n)
        .map(|_| F4 {
            x: rng.uniform_f32(-100.0, 100.0),
            y: rng.uniform_f32(-100.0, 100.0),
            z: rng.uniform_f32(-100.0, 100.0),
            w: rng.uniform_f32(-100.0, 100.0),
        })
        .collect()
}

fn shared_x4_and_x2_accesses_move_whole_vectors(backend: &Backend) {
    let blocks = 16usize;
    let x = f4s(&mut Rng(3), blocks * 256);
    let input = backend.upload(&x);
    let mut out = backend.zeroed::<F4>(x.len());
    let mut wide = backend.zeroed::<[f64; 2]>(x.len());
    launch_on!(backend, port_gaps::shared_x4_rotate, (blocks as u32, 256u32), &input, &mut out, &mut wide).unwrap();
    let (out, wide) = (backend.download(&out), backend.download(&wide));
    for b in 0..blocks {
        for t in 0..256 {
            let i = b * 256 + t;
            assert_eq!(out[i], x[b * 256 + (t + 1) % 256], "{}: block {b} thread {t}: x4", backend.name());
            let from = x[b * 256 + 255 - t];
            assert_eq!(wide[i], [from.x as f64 * 0.5, from.w as f64 * 0.25], "{}: block {b} thread {t}: x2 of f64", backend.name());
        }
    }
}

fn four_scalar_shared_stores_read_back_as_one_vector(backend: &Backend) {
    let blocks = 8usize;
    let x = f4s(&mut Rng(5), blocks * 256);
    let input = backend.upload(&x);
    let mut out = backend.zeroed::<F4>(x.len());
    launch_on!(backend, port_gaps::shared_four_scalar_stores, (blocks as u32, 256u32), &input, &mut out).unwrap();
    let out = backend.download(&out);
    for b in 0..blocks {
        for t in 0..256 {
            assert_eq!(out[b * 256 + t], x[b * 256 + 255 - t], "{}: block {b} thread {t}", backend.name());
        }
    }
}

fn every_cache_hint_loads_and_stores_the_right_values(backend: &Backend) {
    let n = 5000usize; // not a multiple of the block: the tail threads return early
    let mut rng = Rng(7);
    let x: Vec<f32> = (0..n).map(|_| rng.uniform_f32(-1e3, 1e3)).collect();
    let input = backend.upload(&x);
    for load in 0..7u32 {
        for store in 0..6u32 {
            let mut out = backend.upload(&vec![f32::NAN; n]);
            launch_on!(backend, port_gaps::cache_hint_copy, (n.div_ceil(256) as u32, 256u32), &input, load, store, &mut out).unwrap();
            let out = backend.download(&out);
            for i in 0..n {
                assert_eq!(out[i], x[i] + 1.0, "{}: load hint {load}, store hint {store}, element {i}", backend.name());
            }
        }
    }
}

fn streaming_float4_and_l2_policy_accesses_copy_exactly(backend: &Backend) {
    let n = 3000usize;
    let mut rng = Rng(9);
    let x = f4s(&mut rng, n);
    let y: Vec<f64> = (0..n).map(|_| rng.uniform_f32(-5.0, 5.0) as f64 / 3.0).collect();
    let (xs, ys) = (backend.upload(&x), backend.upload(&y));
    let mut out = backend.zeroed::<F4>(n);
    let mut wide = backend.zeroed::<f64>(n);
    launch_on!(backend, port_gaps::cache_hint_wide, (n.div_ceil(128) as u32, 128u32), &xs, &ys, &mut out, &mut wide).unwrap();
    let (out, wide) = (backend.download(&out), backend.download(&wide));
    for i in 0..n {
        let v = x[i];
        assert_eq!(out[i], F4 { x: 2.0 * v.x, y: 2.0 * v.y, z: 2.0 * v.z, w: 2.0 * v.w }, "{}: element {i}", backend.name());
        assert_eq!(wide[i], y[i] + 1.0, "{}: f64 element {i}", backend.name());
    }
}

/// `|got - want| <= abs + rel·|want|`, with a message.
fn close(got: f32, want: f64, abs: f64, rel: f64) -> bool {
    (got as f64 - want).abs() <= abs + rel * want.abs()
}

fn fast_math_is_within_its_documented_error_and_flushes_denormals(backend: &Backend) {
    let n = 4096usize;
    let mut rng = Rng(11);
    // x in [0.01, 100] (sqrt, rsqrt, log10, powf base), y in [-1.4, 1.4] (tan away from its poles).
    let x: Vec<f32> = (0..n).map(|_| rng.uniform_f32(0.01, 100.0)).collect();
    let y: Vec<f32> = (0..n).map(|_| rng.uniform_f32(-1.4, 1.4)).collect();
    let (xs, ys) = (backend.upload(&x), backend.upload(&y));
    let mut out = backend.zeroed::<f32>(n * FAST_WORDS);
    launch_on!(backend, port_gaps::fast_math_ops, ((n / 128) as u32, 128u32), &xs, &ys, &mut out).unwrap();
    let out = backend.download(&out);
    // Relative errors a few times the documented ~2 ulp (2^-22 relative); tanh's ~2^-11 relative.
    let ulp4 = 4.0 * f32::EPSILON as f64;
    for i in 0..n {
        let (a, b) = (x[i] as f64, y[i] as f64);
        let w = &out[i * FAST_WORDS..][..FAST_WORDS];
        let name = backend.name();
        assert!(close(w[0], a.sqrt(), 0.0, ulp4), "{name}: fast_sqrt({a}) = {}", w[0]);
        assert!(close(w[1], a / b, 0.0, ulp4), "{name}: fast_div({a}, {b}) = {}", w[1]);
        assert!(close(w[2], b.exp2(), 0.0, ulp4), "{name}: fast_exp2({b}) = {}", w[2]);
        assert!(close(w[3], 1.0 / a.sqrt(), 0.0, ulp4), "{name}: fast_rsqrt({a}) = {}", w[3]);
        // tanh.approx: relative error up to 2^-10.987 (PTX ISA); 2^-10 leaves a margin.
        assert!(close(w[4], b.tanh(), 1e-30, 1.0 / 1024.0), "{name}: fast_tanh({b}) = {}", w[4]);
        // exp10 and powf scale the argument first: error grows with |y·log2 x|.
        assert!(close(w[5], 10f64.powf(b), 0.0, 16.0 * ulp4), "{name}: fast_exp10({b}) = {}", w[5]);
        assert!(close(w[6], a.log10(), 2.0f64.powi(-21), ulp4), "{name}: fast_log10({a}) = {}", w[6]);
        assert!(close(w[7], b.tan(), 2.0f64.powi(-20), 64.0 * ulp4), "{name}: fast_tan({b}) = {}", w[7]);
        assert!(close(w[8], a.powf(b), 0.0, 32.0 * ulp4), "{name}: fast_powf({a}, {b}) = {}", w[8]);
        assert_eq!(w[9], 0.0, "{name}: fast_div of a denormal ({} * 1e-40) must flush to zero", a);
    }
}

/// Host references for one block of `block_collectives_256`.
fn expected_256(x: &[f32], v: &[u32]) -> Vec<[u32; BLOCK_WORDS]> {
    let sum: f32 = x.iter().sum();
    let max = x.iter().copied().fold(f32::MIN, f32::max);
    let min = *v.iter().min().unwrap();
    let total: u32 = v.iter().sum();
    let any = v.contains(&7) as u32;
    let all = v.iter().all(|&e| e < 1000) as u32;
    let mut running = 0u32;
    v.iter()
        .map(|&e| {
            let exclusive = running;
            running += e;
            [sum.to_bits(), sum.to_bits(), max.to_bits(), min, running, exclusive, total, any, all, 256]
        })
        .collect()
}

fn block_reduce_and_scan_match_the_host_for_256_threads(backend: &Backend) {
    let blocks = 24usize;
    let mut rng = Rng(13);
    let x: Vec<f32> = (0..blocks * 256).map(|_| rng.uniform_f32(-10.0, 10.0)).collect();
    let mut v: Vec<u32> = (0..blocks * 256).map(|_| rng.below(900) + 8).collect();
    v[3 * 256 + 77] = 7; // block 3 has a 7 (any)
    v[4 * 256 + 5] = 5000; // block 4 fails all(v < 1000)
    let (xs, vs) = (backend.upload(&x), backend.upload(&v));
    let mut out = backend.zeroed::<u32>(blocks * 256 * BLOCK_WORDS);
    launch_on!(backend, port_gaps::block_collectives_256, (blocks as u32, 256u32), &xs, &vs, &mut out).unwrap();
    let out = backend.download(&out);
    for b in 0..blocks {
        let expected = expected_256(&x[b * 256..][..256], &v[b * 256..][..256]);
        let block_sum = f32::from_bits(out[b * 256 * BLOCK_WORDS]);
        for t in 0..256 {
            let got = &out[(b * 256 + t) * BLOCK_WORDS..][..BLOCK_WORDS];
            let want = &expected[t];
            // The float sum's order differs from the host's: close, and bit-identical in every thread.
            let host_sum = f32::from_bits(want[0]);
            assert!(
                (f32::from_bits(got[0]) - host_sum).abs() <= 1e-3 * (1.0 + host_sum.abs()),
                "{}: block {b} thread {t}: sum {} vs {host_sum}",
                backend.name(),
                f32::from_bits(got[0])
            );
            assert_eq!(got[0], block_sum.to_bits(), "{}: block {b} thread {t}: every thread gets the same bits", backend.name());
            assert!((f32::from_bits(got[1]) - host_sum).abs() <= 1e-3 * (1.0 + host_sum.abs()), "{}: block {b} thread {t}: sum_x4", backend.name());
            assert_eq!(got[2..], want[2..], "{}: block {b} thread {t}: [max, min, inclusive, exclusive, total, any, all, reuse]", backend.name());
        }
    }
    assert_eq!(out[3 * 256 * BLOCK_WORDS + 7], 1, "any() saw block 3's 7");
    assert_eq!(out[4 * 256 * BLOCK_WORDS + 8], 0, "all() saw block 4's 5000");
}

fn block_reduce_and_scan_match_the_host_for_one_and_two_warps(backend: &Backend) {
    let mut rng = Rng(17);
    for (threads, one_warp) in [(32usize, true), (64, false)] {
        let blocks = 40usize;
        let v: Vec<u32> = (0..blocks * threads).map(|_| rng.below(1 << 20)).collect();
        let vs = backend.upload(&v);
        let mut out = backend.zeroed::<u32>(v.len() * SMALL_WORDS);
        launch_on!(backend, port_gaps::block_collectives_small, (blocks as u32, threads as u32), &vs, one_warp, &mut out).unwrap();
        let out = backend.download(&out);
        for b in 0..blocks {
            let block = &v[b * threads..][..threads];
            let (sum, max) = (block.iter().sum::<u32>(), *block.iter().max().unwrap());
            let (mut inclusive, mut exclusive) = (0u32, 0u32);
            for (t, &e) in block.iter().enumerate() {
                inclusive = inclusive.max(e);
                let got = &out[(b * threads + t) * SMALL_WORDS..][..SMALL_WORDS];
                assert_eq!(got, [sum, max, inclusive, exclusive], "{}: {threads} threads, block {b} thread {t}", backend.name());
                exclusive = inclusive;
            }
        }
    }
}

/// CPU executor only: on a GPU the panic ends the context (tests/gpu_fault.rs covers how a
/// device panic is reported); the message is the same.
#[test]
fn cpu_a_block_collective_launched_with_the_wrong_block_size_panics_naming_both() {
    let backend = &Backend::cpu();
    let v = vec![1u32; 128];
    let vs = backend.upload(&v);
    let mut out = backend.zeroed::<u32>(v.len() * SMALL_WORDS);
    let error = launch_on!(backend, port_gaps::block_collectives_small, (1u32, 128u32), &vs, false, &mut out).unwrap_err();
    assert!(error.contains("a block collective for 64 threads ran in a block of 128"), "{error}");
}

fn a_cache_hint_on_a_local_array_reads_the_local_value(backend: &Backend) {
    let n = 1000usize;
    let mut rng = Rng(19);
    let x: Vec<u32> = (0..n).map(|_| rng.below(1000)).collect();
    let xs = backend.upload(&x);
    let mut out = backend.zeroed::<u32>(n);
    launch_on!(backend, port_gaps::cache_hint_local, (n.div_ceil(128) as u32, 128u32), &xs, &mut out).unwrap();
    let out = backend.download(&out);
    for i in 0..n {
        assert_eq!(out[i], 10 * (x[i] % 8) + i as u32, "{}: element {i}", backend.name());
    }
}

/// CPU executor only (on a GPU a panic ends the context): the checked vector accesses refuse
/// an index past the end and a misaligned slice, naming what was wrong.
#[test]
fn cpu_checked_shared_vector_accesses_refuse_out_of_bounds_and_misaligned_slices() {
    use ferrocuda::LaunchConfig;
    let backend = &Backend::cpu();
    let mut out = backend.zeroed::<f32>(4);
    launch_on!(backend, port_gaps::shared_x4_checks, (1u32, 4u32), 3u32, 0u32, &mut out).unwrap();
    assert_eq!(backend.download(&out), [1.0; 4], "index 3 is the last in-bounds vector");
    let error = launch_on!(backend, port_gaps::shared_x4_checks, (1u32, 4u32), 4u32, 0u32, &mut out).unwrap_err();
    assert!(error.contains("shared memory vector index out of bounds: elements 16..20 of 16"), "{error}");
    let config = LaunchConfig::new(1u32, 4u32).with_shared_bytes(64);
    launch_on!(backend, port_gaps::shared_x4_checks, config, 0u32, 4u32, &mut out).unwrap();
    assert_eq!(backend.download(&out), [6.0; 4], "a split at 4 floats keeps 16-byte alignment");
    let error = launch_on!(backend, port_gaps::shared_x4_checks, config, 0u32, 2u32, &mut out).unwrap_err();
    assert!(error.contains("not 16-byte aligned"), "{error}");
}
