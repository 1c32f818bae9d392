//! Issue 30's patterns on both back ends (the fixture kernels of
//! tests/kernels/src/port_patterns.rs): each body runs on the CPU executor (`cpu::name`, always)
//! and on the GPU (`gpu::name`, skipped without one, a failure under `REQUIRE_GPU=1`), with the
//! same inputs and the same checks against a host reference. Tests only the CPU executor can
//! run (a misaligned access that would fault a GPU) are plain `#[test]`s.

#[path = "common/backend.rs"]
mod backend;
mod common;

use backend::{Backend, Buf, launch_on, on_both_backends};
use test_kernels::port_gaps::F4;
use test_kernels::port_patterns;

on_both_backends!(
    p30_1_a_kernel_that_can_panic_runs_with_a_4_byte_shared_array_first,
    p30_4_fast_cosh_sinh_and_tanh_are_within_their_documented_error,
    p30_5_16_byte_loads_and_stores_copy_exactly,
    p30_3_runtime_block_reduce_sums_rows_at_any_block_size,
    p30_3_runtime_block_reduce_broadcasts_and_reuses_its_scratch,
    p30_3_paired_max_then_sum_is_a_softmax_at_any_block_size,
    p30_reqntid_strided_sum_is_right,
    p30_one_barrier_row_sum_is_right,
    p30_6_shuffles_with_a_width_stay_in_their_segment,
    p30_6_atomic_inc_and_dec_wrap_at_their_limit,
    p30_4_gelu_backward_matches_the_host_in_both_modes,
);

/// Regression p30_1: the kernel tag (16 bytes, one `st.shared.v2.u64`) was `.align 8` and
/// faulted every launch on a GPU when a 4-byte `shared_array!` came first.
fn p30_1_a_kernel_that_can_panic_runs_with_a_4_byte_shared_array_first(backend: &Backend) {
    let (blocks, threads) = (4usize, 128usize);
    let x: Vec<f32> = (0..blocks * threads).map(|i| i as f32 * 0.5).collect();
    let input = backend.upload(&x);
    let mut out = backend.zeroed::<f32>(x.len());
    launch_on!(backend, port_patterns::p30_small_shared_first_can_panic, (blocks as u32, threads as u32), &input, &mut out).unwrap();
    let out = backend.download(&out);
    for (i, &o) in out.iter().enumerate() {
        assert_eq!(o, x[i] + x[i / threads * threads], "{}: element {i}", backend.name());
    }
}

/// The word offset into `words` (a CPU buffer) at which a 16-byte access lands on a 16-byte
/// boundary, plus `shift` words.
fn offset_for(words: &Buf<u32>, shift: u32) -> u32 {
    let Buf::Cpu(v) = words else { unreachable!("a CPU buffer") };
    let address = v.as_ptr() as usize;
    assert!(address.is_multiple_of(4));
    ((16 - address % 16) % 16 / 4) as u32 + shift
}

/// Regression p30_1 (the CPU half): the GPU faults on a vector access whose address is not a
/// multiple of its width, whatever the Rust type's alignment (`[u32; 4]` is 4-byte aligned);
/// the CPU executor ran such kernels. It now refuses them with a named error, and still runs
/// the aligned access.
#[test]
fn p30_1_the_cpu_executor_refuses_a_misaligned_16_byte_global_load() {
    let backend = Backend::cpu();
    let words: Vec<u32> = (1..=64).collect();
    let input = backend.upload(&words);

    let aligned = offset_for(&input, 0);
    let mut out = backend.zeroed::<u32>(1);
    launch_on!(&backend, port_patterns::p30_vector_load_at, (1u32, 1u32), &input, aligned, &mut out).unwrap();
    let a = aligned as usize;
    assert_eq!(backend.download(&out)[0], words[a..a + 4].iter().sum::<u32>(), "the aligned load reads its four words");

    for shift in 1..4 {
        let mut out = backend.zeroed::<u32>(1);
        let error = launch_on!(&backend, port_patterns::p30_vector_load_at, (1u32, 1u32), &input, aligned + shift, &mut out).unwrap_err();
        println!("refused: {error}");
        assert!(error.contains("misaligned global memory access"), "{error}");
        assert!(error.contains("ld.global.nc.v4.u32") && error.contains("CUDA_ERROR_MISALIGNED_ADDRESS"), "{error}");
        assert!(error.contains("p30_vector_load_at"), "the report names the kernel: {error}");
    }
}

/// The fast hyperbolics (what `fast_math(true)` makes of `cosh`, `sinh`, `tanh`) against the
/// host's `f64` functions: `cosh`/`sinh` within 8 ulp (relative 2^-21) everywhere they are
/// finite, infinite where `f32` overflows, NaN for NaN; `tanh` within `tanh.approx`'s 2^-10.987.
fn p30_4_fast_cosh_sinh_and_tanh_are_within_their_documented_error(backend: &Backend) {
    let mut x: Vec<f32> = (0..20_000).map(|i| (i as f32 - 10_000.0) * 0.009).collect();
    x.extend([0.0, -0.0, 0.5, 0.999, 1.0, 1.001, -1.0, 1e-3, -1e-30, 88.0, 89.0, 89.4, -89.4, 89.5, 90.0, 200.0, f32::INFINITY, -f32::INFINITY, f32::NAN]);
    let input = backend.upload(&x);
    let mut out = backend.zeroed::<f32>(3 * x.len());
    launch_on!(backend, port_patterns::p30_fast_hyperbolic, ferrocuda::LaunchConfig::for_elements(x.len(), 256), &input, &mut out).unwrap();
    let out = backend.download(&out);
    let (mut worst_cosh, mut worst_sinh, mut worst_tanh) = (0f64, 0f64, 0f64);
    for (i, &v) in x.iter().enumerate() {
        let (c, s, t) = (out[3 * i], out[3 * i + 1], out[3 * i + 2]);
        if v.is_nan() {
            assert!(c.is_nan() && s.is_nan() && t.is_nan(), "{}: NaN in, {:?} out", backend.name(), (c, s, t));
            continue;
        }
        let v64 = v as f64;
        for (name, got, exact, worst) in [("cosh", c, v64.cosh(), &mut worst_cosh), ("sinh", s, v64.sinh(), &mut worst_sinh)] {
            let expected = exact as f32;
            if expected.is_infinite() {
                assert_eq!(got, expected, "{}: {name}({v:e}) overflows", backend.name());
                continue;
            }
            // A denormal or zero input flushes (`.ftz`): sinh(tiny) may be 0.
            if name == "sinh" && v.abs() < 1e-30 {
                assert!(got.abs() <= v.abs(), "{}: sinh({v:e}) = {got:e}", backend.name());
                continue;
            }
            let error = ((got as f64 - exact) / exact).abs();
            *worst = worst.max(error);
            assert!(error <= 2f64.powi(-21), "{}: {name}({v:e}) = {got:e}, exact {exact:e} (relative error {error:e})", backend.name());
        }
        let exact = v64.tanh();
        let error = if exact == 0.0 { t.abs() as f64 } else { ((t as f64 - exact) / exact).abs() };
        worst_tanh = worst_tanh.max(error);
        assert!(error <= 2f64.powf(-10.987), "{}: tanh({v:e}) = {t:e}, exact {exact:e}", backend.name());
    }
    println!("{}: worst relative error cosh {worst_cosh:e}, sinh {worst_sinh:e}, tanh {worst_tanh:e}", backend.name());
}

/// `vector::load16`/`store16` on an input, in place, and every cache operator on 16-byte
/// elements: exact copies (the instructions are checked by tests/port_patterns_ptx.rs).
fn p30_5_16_byte_loads_and_stores_copy_exactly(backend: &Backend) {
    let n = 4096usize;
    let x: Vec<F4> = (0..n).map(|i| F4 { x: i as f32, y: -(i as f32), z: 0.5 * i as f32, w: 1.0 / (i as f32 + 1.0) }).collect();
    let input = backend.upload(&x);
    let config = ferrocuda::LaunchConfig::for_elements(n, 256);
    let mut out = backend.zeroed::<F4>(n);
    launch_on!(backend, port_patterns::p30_load16_input, config, &input, &mut out).unwrap();
    let doubled = backend.download(&out);
    for (i, v) in x.iter().enumerate() {
        assert_eq!(doubled[i], F4 { x: v.x * 2.0, y: v.y * 2.0, z: v.z * 2.0, w: v.w * 2.0 }, "{}: load16 at {i}", backend.name());
    }
    let mut in_place = backend.upload(&x);
    launch_on!(backend, port_patterns::p30_load16_in_place, config, &mut in_place).unwrap();
    launch_on!(backend, port_patterns::p30_load16_in_place, config, &mut in_place).unwrap();
    for (i, (got, v)) in backend.download(&in_place).iter().zip(&x).enumerate() {
        assert_eq!(*got, F4 { x: v.x + 1.0 + 1.0, y: v.y + 1.0 + 1.0, z: v.z + 1.0 + 1.0, w: v.w + 1.0 + 1.0 }, "{}: in place at {i}", backend.name());
    }
    for hint in 0..5u32 {
        let mut out = backend.zeroed::<F4>(n);
        launch_on!(backend, port_patterns::p30_wide_load_hints, config, &input, hint, &mut out).unwrap();
        assert_eq!(backend.download(&out), x, "{}: hint {hint}", backend.name());
    }
}

/// Row sums at block sizes chosen at launch (partial last warps, one warp, a lone thread, the
/// maximum), one kernel for all: exact for integer-valued floats.
fn p30_3_runtime_block_reduce_sums_rows_at_any_block_size(backend: &Backend) {
    let (rows, cols) = (6usize, 3000usize);
    let x: Vec<f32> = (0..rows * cols).map(|i| ((i * 7919) % 97) as f32).collect();
    let expected: Vec<f32> = x.chunks(cols).map(|row| row.iter().sum()).collect();
    let input = backend.upload(&x);
    for threads in [1u32, 7, 32, 33, 64, 100, 256, 992, 1000, 1024] {
        for kernel in 0..3 {
            let mut sums = backend.zeroed::<f32>(rows);
            match kernel {
                0 => launch_on!(backend, port_patterns::p30_row_sum, (rows as u32, threads), &input, cols as u32, &mut sums),
                1 => launch_on!(backend, port_patterns::p30_row_sum_unchecked, (rows as u32, threads), &input, cols as u32, &mut sums),
                _ => launch_on!(backend, port_patterns::p30_row_sum_slice, (rows as u32, threads), &input, cols as u32, &mut sums),
            }
            .unwrap();
            assert_eq!(backend.download(&sums), expected, "{}: kernel {kernel}, {threads} threads", backend.name());
        }
    }
}

/// `sum_all` in every thread, then `max` and `min` on another scratch back to back: rows as
/// wide as the block.
fn p30_3_runtime_block_reduce_broadcasts_and_reuses_its_scratch(backend: &Backend) {
    for cols in [1usize, 20, 32, 33, 100, 512, 1024] {
        let rows = 5usize;
        let x: Vec<f32> = (0..rows * cols).map(|i| (1 + (i * 31) % 13) as f32).collect();
        let keys: Vec<u32> = (0..rows * cols).map(|i| ((i as u32).wrapping_mul(2_654_435_761)) >> 7).collect();
        let (input, key_input) = (backend.upload(&x), backend.upload(&keys));
        let mut y = backend.zeroed::<f32>(rows * cols);
        let mut extremes = backend.zeroed::<[u32; 2]>(rows);
        launch_on!(backend, port_patterns::p30_row_normalize, (rows as u32, cols as u32), &input, &key_input, cols as u32, &mut y, &mut extremes).unwrap();
        let (y, extremes) = (backend.download(&y), backend.download(&extremes));
        for r in 0..rows {
            let row = &x[r * cols..(r + 1) * cols];
            let inverse = 1.0 / row.iter().sum::<f32>();
            for c in 0..cols {
                assert_eq!(y[r * cols + c], row[c] * inverse, "{}: cols {cols}, row {r}, column {c}", backend.name());
            }
            let k = &keys[r * cols..(r + 1) * cols];
            assert_eq!(extremes[r], [*k.iter().max().unwrap(), *k.iter().min().unwrap()], "{}: cols {cols}, row {r}", backend.name());
        }
    }
}

/// `max_then_sum_all` and `sum_then_sum_all` (2 barriers each where the block is whole warps;
/// `max_all` + `sum_all` for a partial last warp): a softmax and a row's moments at every block
/// size shape (1 warp, partial warps, 3 warps, 32 warps), against the host.
fn p30_3_paired_max_then_sum_is_a_softmax_at_any_block_size(backend: &Backend) {
    for cols in [1usize, 20, 32, 33, 96, 100, 256, 1024] {
        let rows = 4usize;
        let x: Vec<f32> = (0..rows * cols).map(|i| ((i * 37) % 11) as f32 * 0.25 - 1.0).collect();
        let input = backend.upload(&x);
        let mut y = backend.zeroed::<f32>(rows * cols);
        let mut moments = backend.zeroed::<[f32; 2]>(rows);
        launch_on!(backend, port_patterns::p30_row_softmax_paired, (rows as u32, cols as u32), &input, cols as u32, &mut y, &mut moments).unwrap();
        let (y, moments) = (backend.download(&y), backend.download(&moments));
        for r in 0..rows {
            let row = &x[r * cols..(r + 1) * cols];
            let max = row.iter().copied().fold(f32::MIN, f32::max);
            let sum: f64 = row.iter().map(|&v| ((v - max) as f64).exp()).sum();
            for c in 0..cols {
                let want = ((row[c] - max) as f64).exp() / sum;
                let got = y[r * cols + c] as f64;
                assert!((got - want).abs() <= 1e-5 * want.max(1e-3), "{}: cols {cols}, row {r}, column {c}: {got} vs {want}", backend.name());
            }
            let total: f64 = row.iter().map(|&v| v as f64).sum();
            let mean = total / cols as f64;
            let squares: f64 = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum();
            let [t, s] = moments[r];
            assert!((t as f64 - total).abs() <= 1e-4, "{}: cols {cols}, row {r}: sum {t} vs {total}", backend.name());
            assert!((s as f64 - squares).abs() <= 1e-4 * squares.max(1.0), "{}: cols {cols}, row {r}: squares {s} vs {squares}", backend.name());
        }
    }
}

/// `reqntid(256)` (the block shape assumed in the entry): each block's strided sum of `x` is
/// the host's, at lengths that leave every remainder of the unrolled loop.
fn p30_reqntid_strided_sum_is_right(backend: &Backend) {
    for n in [1usize, 255, 256, 1000, 1024, 1025, 4099] {
        let x: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
        let input = backend.upload(&x);
        let mut sums = backend.zeroed::<f32>(2);
        launch_on!(backend, port_patterns::p30_strided_sum_reqntid, (2u32, 256u32), &input, &mut sums).unwrap();
        let want: f32 = x.iter().sum();
        assert_eq!(backend.download(&sums), vec![want; 2], "{}: n {n}", backend.name());
    }
}

/// The hand-written one-barrier row sum (the bench's measurement of the trailing barrier) sums
/// rows like `RuntimeBlockReduce` at whole-warp block sizes.
fn p30_one_barrier_row_sum_is_right(backend: &Backend) {
    let (rows, cols) = (3usize, 1000usize);
    let x: Vec<f32> = (0..rows * cols).map(|i| (i % 17) as f32).collect();
    let input = backend.upload(&x);
    for threads in [32u32, 256, 1024] {
        let mut sums = backend.zeroed::<f32>(rows);
        launch_on!(backend, port_patterns::p30_row_sum_one_barrier, (rows as u32, threads), &input, cols as u32, &mut sums).unwrap();
        let want: Vec<f32> = x.chunks(cols).map(|r| r.iter().sum()).collect();
        assert_eq!(backend.download(&sums), want, "{}: {threads} threads", backend.name());
    }
}

/// `__shfl_*_sync(mask, v, x, 4)` and `16`: each lane sees only its segment, as on a GPU.
fn p30_6_shuffles_with_a_width_stay_in_their_segment(backend: &Backend) {
    let n = 1000usize;
    let x: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(2_654_435_761) >> 8).collect();
    let input = backend.upload(&x);
    let mut out = backend.zeroed::<u32>(6 * n);
    launch_on!(backend, port_patterns::p30_shuffle_width, ferrocuda::LaunchConfig::for_elements(n, 128), &input, &mut out).unwrap();
    let out = backend.download(&out);
    let at = |i: usize| x.get(i).copied().unwrap_or(0);
    for i in 0..n {
        let group = i / 4 * 4;
        let sixteen = i / 16 * 16;
        let expected = [
            (group..group + 4).map(at).fold(0u32, u32::wrapping_add),
            if i % 4 < 3 { at(i + 1) } else { at(i) },
            if i % 4 > 0 { at(i - 1) } else { at(i) },
            at(group + 2),
            at(i ^ 1),
            (sixteen..sixteen + 16).map(at).fold(0u32, u32::wrapping_add),
        ];
        assert_eq!(out[6 * i..6 * i + 6], expected, "{}: thread {i}", backend.name());
    }
}

/// `atomicInc` wraps to 0 after its limit, `atomicDec` to its limit after 0: whatever order the
/// threads take, the old values seen are the sequence 0, 1, .., limit, 0, .. (and limit, ..,
/// 0, limit, .. for dec), as a multiset.
fn p30_6_atomic_inc_and_dec_wrap_at_their_limit(backend: &Backend) {
    let (n, limit) = (1000usize, 6u32);
    let mut counters = backend.zeroed::<u32>(2);
    let mut seen = backend.zeroed::<u32>(2 * n);
    launch_on!(backend, port_patterns::p30_atomic_inc_dec, ferrocuda::LaunchConfig::for_elements(n, 128), limit, &mut counters, &mut seen).unwrap();
    let seen = backend.download(&seen);
    let counters = backend.download(&counters);
    let mut inc: Vec<u32> = seen.iter().step_by(2).copied().collect();
    let mut dec: Vec<u32> = seen.iter().skip(1).step_by(2).copied().collect();
    inc.sort_unstable();
    dec.sort_unstable();
    let mut expected_inc: Vec<u32> = (0..n as u32).map(|k| k % (limit + 1)).collect();
    let mut expected_dec: Vec<u32> = (0..n as u32).map(|k| (limit + 1 - k % (limit + 1)) % (limit + 1)).collect();
    expected_inc.sort_unstable();
    expected_dec.sort_unstable();
    assert_eq!(inc, expected_inc, "{}: atomicInc's old values", backend.name());
    assert_eq!(dec, expected_dec, "{}: atomicDec's old values", backend.name());
    let wraps = n as u32 % (limit + 1);
    assert_eq!(counters, [wraps, (limit + 1 - wraps) % (limit + 1)], "{}: the counters after {n} updates", backend.name());
}

/// p30_6: a buffer of `f32` viewed as `float4`s (CUDA's `reinterpret_cast<float4*>`) on the
/// host, safely: the kernel reads and writes the same bytes; a view whose length or address
/// does not fit is refused with `Error::ElementCast`, naming what does not fit.
#[test]
fn p30_6_a_buffer_of_floats_is_viewed_as_16_byte_elements() {
    use ferrocuda::{DeviceBuffer, Error, Stream};
    let Some(context) = common::gpu_or_skip("p30_6_a_buffer_of_floats_is_viewed_as_16_byte_elements") else { return };
    let stream = Stream::new(&context).unwrap();
    let x: Vec<f32> = (0..4096).map(|i| i as f32 - 7.25).collect();
    let input = DeviceBuffer::from_slice(&context, &x).unwrap();
    let mut out = DeviceBuffer::<f32>::zeroed(&context, x.len()).unwrap();
    let quads = input.cast::<F4>().unwrap();
    assert_eq!(quads.len(), 1024);
    let mut out_quads = out.cast_mut::<F4>().unwrap();
    port_patterns::p30_load16_input::launch(&stream, ferrocuda::LaunchConfig::for_elements(1024, 256), &quads, &mut out_quads).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(out.to_vec().unwrap(), x.iter().map(|v| v * 2.0).collect::<Vec<_>>());
    let misaligned = input.slice(1..5).cast::<F4>().unwrap_err();
    assert!(matches!(misaligned, Error::ElementCast { .. }) && misaligned.to_string().contains("not aligned"), "{misaligned}");
    let short = input.slice(0..6).cast::<F4>().unwrap_err();
    assert!(short.to_string().contains("not a whole number"), "{short}");
    println!("refused: {misaligned}\nrefused: {short}");
}

/// Regression p30_6: a 2-D launch of a kernel with a 1-D per-thread output was refused with a
/// message that named no output made for 2-D launches; it names them now.
#[test]
fn p30_6_a_2d_launch_of_a_1d_output_names_the_outputs_that_fit() {
    let backend = Backend::cpu();
    let mut out = backend.zeroed::<F4>(64);
    let config = ferrocuda::LaunchConfig::new(ferrocuda::Dim3 { x: 2, y: 2, z: 1 }, ferrocuda::Dim3 { x: 4, y: 4, z: 1 });
    let error = launch_on!(&backend, port_patterns::p30_load16_in_place, config, &mut out).unwrap_err();
    println!("refused: {error}");
    for name in ["not both 1-D", "DisjointMatrix", "PerBlockTile", "PerBlock", "AtomicSlice", "UncheckedSlice"] {
        assert!(error.contains(name), "{name}: {error}");
    }
}

/// llm.c's GELU backward, precise and as fast math compiles it, against the host in `f64`.
fn p30_4_gelu_backward_matches_the_host_in_both_modes(backend: &Backend) {
    let n = 10_000usize;
    let inp: Vec<f32> = (0..n).map(|i| (i as f32 - 5000.0) * 0.002).collect();
    let dout: Vec<f32> = (0..n).map(|i| 1.0 + (i % 7) as f32 * 0.25).collect();
    let (x_dev, d_dev) = (backend.upload(&inp), backend.upload(&dout));
    let config = ferrocuda::LaunchConfig::for_elements(n, 256);
    for fast in [false, true] {
        let mut out = backend.zeroed::<f32>(n);
        if fast {
            launch_on!(backend, port_patterns::p30_gelu_backward_fast, config, &x_dev, &d_dev, &mut out).unwrap();
        } else {
            launch_on!(backend, port_patterns::p30_gelu_backward, config, &x_dev, &d_dev, &mut out).unwrap();
        }
        let out = backend.download(&out);
        let s = (2.0 / std::f64::consts::PI).sqrt();
        for i in 0..n {
            let x = inp[i] as f64;
            let arg = s * (x + 0.044715 * x * x * x);
            let grad = 0.5 * (1.0 + arg.tanh()) + x * 0.5 / arg.cosh().powi(2) * s * (1.0 + 3.0 * 0.044715 * x * x);
            let expected = grad * dout[i] as f64;
            // tanh.approx's 2^-11 relative error, on a gradient of order 1.
            let tolerance = if fast { 2e-3 } else { 1e-5 };
            assert!(
                (out[i] as f64 - expected).abs() <= tolerance * expected.abs().max(1.0),
                "{}: fast {fast}, x = {x}: {} vs {expected}",
                backend.name(),
                out[i]
            );
        }
    }
}
