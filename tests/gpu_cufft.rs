//! cuFFT on our context, buffers and streams (`ferrocuda::cufft`): batched 1-D complex, 2-D
//! real-to-complex and back, 3-D double precision, each against a direct DFT on the host; and
//! the checks that refuse short buffers and other contexts' streams.
//!
//! Skips with a printed reason without a driver or without cuFFT; fails under `REQUIRE_GPU=1`.

mod common;

use ferrocuda::cufft::{C2C, C2R, Complex, FftError, Plan, R2C, Z2Z, cufft_present, cufft_version};
use ferrocuda::{Context, DeviceBuffer, Stream};

/// The GPU and cuFFT, or `None` with the skip printed.
fn gpu_with_cufft(test: &str) -> Option<(Context, Stream)> {
    let context = common::gpu_or_skip(test)?;
    if !cufft_present() {
        assert!(!ferrocuda_test_support::gpu_required(), "REQUIRE_GPU=1 but cuFFT could not be loaded: {}", cufft_version().unwrap_err());
        eprintln!("SKIPPED {test}: {}", cufft_version().unwrap_err());
        return None;
    }
    let stream = Stream::new(&context).expect("a stream");
    Some((context, stream))
}

/// Direct DFT over the dimensions `shape` (last contiguous) of each of `batch` transforms;
/// `sign` -1 forward, +1 inverse; f64 throughout.
fn host_dft(input: &[(f64, f64)], shape: &[usize], batch: usize, sign: f64) -> Vec<(f64, f64)> {
    let points: usize = shape.iter().product();
    let coords = |mut i: usize| -> Vec<usize> {
        let mut c = vec![0; shape.len()];
        for d in (0..shape.len()).rev() {
            c[d] = i % shape[d];
            i /= shape[d];
        }
        c
    };
    let mut out = vec![(0.0, 0.0); points * batch];
    for b in 0..batch {
        for k in 0..points {
            let kc = coords(k);
            let (mut re, mut im) = (0.0, 0.0);
            for n in 0..points {
                let nc = coords(n);
                let phase: f64 = (0..shape.len()).map(|d| (kc[d] * nc[d]) as f64 / shape[d] as f64).sum::<f64>() * 2.0 * std::f64::consts::PI * sign;
                let (x, y) = input[b * points + n];
                re += x * phase.cos() - y * phase.sin();
                im += x * phase.sin() + y * phase.cos();
            }
            out[b * points + k] = (re, im);
        }
    }
    out
}

fn signal(len: usize, seed: u64) -> Vec<(f64, f64)> {
    // A small deterministic pseudo-random signal in [-1, 1).
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((state >> 40) as f64 / (1u64 << 24) as f64) * 2.0 - 1.0
    };
    (0..len).map(|_| (next(), next())).collect()
}

fn max_error(got: impl Iterator<Item = (f64, f64)>, want: impl Iterator<Item = (f64, f64)>) -> f64 {
    got.zip(want).map(|(g, w)| (g.0 - w.0).abs().max((g.1 - w.1).abs())).fold(0.0, f64::max)
}

#[test]
fn batched_1d_complex_forward_and_inverse_match_a_host_dft() {
    let Some((context, stream)) = gpu_with_cufft("batched_1d_complex_forward_and_inverse_match_a_host_dft") else { return };
    let (n, batch) = (96, 5); // not a power of two
    let x = signal(n * batch, 1);
    let input: Vec<Complex<f32>> = x.iter().map(|&(re, im)| Complex::new(re as f32, im as f32)).collect();
    let device_in = DeviceBuffer::from_slice(&context, &input).unwrap();
    let mut spectrum = DeviceBuffer::<Complex<f32>>::zeroed(&context, n * batch).unwrap();
    let mut back = DeviceBuffer::<Complex<f32>>::zeroed(&context, n * batch).unwrap();
    let plan = Plan::<C2C>::new(&context, &[n], batch).unwrap();
    plan.forward(&stream, &device_in, &mut spectrum).unwrap();
    plan.inverse(&stream, &spectrum, &mut back).unwrap();
    stream.synchronize().unwrap();

    let want = host_dft(&x, &[n], batch, -1.0);
    let got = spectrum.to_vec().unwrap();
    let error = max_error(got.iter().map(|c| (c.re as f64, c.im as f64)), want.iter().copied());
    assert!(error < 1e-4 * n as f64, "forward: max error {error}");
    // Unnormalised: inverse(forward(x)) = n * x.
    let back = back.to_vec().unwrap();
    let error = max_error(back.iter().map(|c| (c.re as f64 / n as f64, c.im as f64 / n as f64)), x.iter().copied());
    assert!(error < 1e-5, "round trip: max error {error}");
    println!("cuFFT {} C2C n={n} batch={batch}: forward error within {:.1e}", cufft_version().unwrap(), 1e-4 * n as f64);
}

#[test]
fn real_2d_to_half_spectrum_and_back() {
    let Some((context, stream)) = gpu_with_cufft("real_2d_to_half_spectrum_and_back") else { return };
    let (shape, batch) = ([12usize, 10usize], 2);
    let points = shape[0] * shape[1];
    let half = shape[0] * (shape[1] / 2 + 1);
    let x: Vec<f64> = signal(points * batch, 2).iter().map(|&(re, _)| re).collect();
    let device_in = DeviceBuffer::from_slice(&context, &x.iter().map(|&v| v as f32).collect::<Vec<_>>()).unwrap();
    let mut spectrum = DeviceBuffer::<Complex<f32>>::zeroed(&context, half * batch).unwrap();
    let r2c = Plan::<R2C>::new(&context, &shape, batch).unwrap();
    assert_eq!((r2c.input_len(), r2c.output_len()), (points * batch, half * batch));
    r2c.forward(&stream, &device_in, &mut spectrum).unwrap();
    stream.synchronize().unwrap();

    let full = host_dft(&x.iter().map(|&v| (v, 0.0)).collect::<Vec<_>>(), &shape, batch, -1.0);
    let got = spectrum.to_vec().unwrap();
    let mut error: f64 = 0.0;
    for b in 0..batch {
        for row in 0..shape[0] {
            for col in 0..=shape[1] / 2 {
                let g = got[b * half + row * (shape[1] / 2 + 1) + col];
                let w = full[b * points + row * shape[1] + col];
                error = error.max((g.re as f64 - w.0).abs()).max((g.im as f64 - w.1).abs());
            }
        }
    }
    assert!(error < 1e-3, "R2C: max error {error}");

    let mut real = DeviceBuffer::<f32>::zeroed(&context, points * batch).unwrap();
    let c2r = Plan::<C2R>::new(&context, &shape, batch).unwrap();
    c2r.inverse(&stream, &mut spectrum, &mut real).unwrap();
    stream.synchronize().unwrap();
    let real = real.to_vec().unwrap();
    let error = real.iter().zip(&x).map(|(&g, &w)| (g as f64 / points as f64 - w).abs()).fold(0.0, f64::max);
    assert!(error < 1e-5, "C2R round trip: max error {error}");
}

#[test]
fn double_precision_3d_matches_a_host_dft() {
    let Some((context, stream)) = gpu_with_cufft("double_precision_3d_matches_a_host_dft") else { return };
    let shape = [4usize, 6, 5];
    let x = signal(120, 3);
    let input: Vec<Complex<f64>> = x.iter().map(|&(re, im)| Complex::new(re, im)).collect();
    let device_in = DeviceBuffer::from_slice(&context, &input).unwrap();
    let mut spectrum = DeviceBuffer::<Complex<f64>>::zeroed(&context, 120).unwrap();
    Plan::<Z2Z>::new(&context, &shape, 1).unwrap().forward(&stream, &device_in, &mut spectrum).unwrap();
    stream.synchronize().unwrap();
    let want = host_dft(&x, &shape, 1, -1.0);
    let error = max_error(spectrum.to_vec().unwrap().iter().map(|c| (c.re, c.im)), want.iter().copied());
    assert!(error < 1e-10, "Z2Z 3-D: max error {error}");
}

#[test]
fn short_buffers_other_contexts_and_bad_shapes_are_refused() {
    let Some((context, stream)) = gpu_with_cufft("short_buffers_other_contexts_and_bad_shapes_are_refused") else { return };
    let plan = Plan::<C2C>::new(&context, &[64], 4).unwrap();
    let input = DeviceBuffer::<Complex<f32>>::zeroed(&context, 256).unwrap();
    let mut short = DeviceBuffer::<Complex<f32>>::zeroed(&context, 255).unwrap();
    match plan.forward(&stream, &input, &mut short) {
        Err(FftError::BufferTooShort { which: "output", len: 255, needed: 256 }) => {}
        other => panic!("expected BufferTooShort, got {other:?}"),
    }
    assert!(matches!(Plan::<C2C>::new(&context, &[8, 8, 8, 8], 1), Err(FftError::BadShape { .. })));
    assert!(matches!(Plan::<C2C>::new(&context, &[0], 1), Err(FftError::BadShape { .. })));
    // A stream of a second context of the same device.
    let other = Context::create(0, Default::default()).unwrap();
    let other_stream = Stream::new(&other).unwrap();
    let mut output = DeviceBuffer::<Complex<f32>>::zeroed(&context, 256).unwrap();
    match plan.forward(&other_stream, &input, &mut output) {
        Err(FftError::OtherContext { what: "stream" }) => {}
        other => panic!("expected OtherContext, got {other:?}"),
    }
}
