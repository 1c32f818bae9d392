//! cuBLAS and cuBLASLt on ferrocuda buffers: SGEMM, the typed `Gemm` (`cublasGemmEx`) for every
//! supported element-type pairing and every transpose pair with padded leading dimensions,
//! strided batches, each cuBLASLt epilogue, and the ordering promises (another stream reading
//! `c` sees the GEMM's result; `c` dropped right after the call is not freed under it). Each
//! result is checked element by element against a host f64 reference with a stated bound.
//!
//! cuBLAS is a runtime-API library: it uses whatever context is current on the thread, which
//! is the primary context that `Context::primary` retained and bound. That sharing is why the
//! primary context is ferrocuda's default. Skips (printed) without a GPU or libcublas; fails
//! instead under `REQUIRE_GPU=1`.

mod common;

use std::io::Write;

use ferrocuda::cublas::{EpilogueKind, GemmElement, GemmOutput};
use ferrocuda::half::{bf16, f16};
use ferrocuda::{Batch, Context, Cublas, CublasLt, DeviceBuffer, Epilogue, Error, Gemm, MatrixLayout, Pod, Stream};
use test_kernels::launch_kinds::spin_for;

/// The context, when a GPU, libcublas and libcublasLt are present.
fn gpu_with_cublas(test: &str) -> Option<Context> {
    let context = common::gpu_or_skip(test)?;
    if !Cublas::is_available() || !CublasLt::is_available() {
        assert!(
            !ferrocuda_test_support::gpu_required(),
            "REQUIRE_GPU=1 but libcublas/libcublasLt could not be loaded (add its directory, e.g. /usr/local/cuda/lib64, to LD_LIBRARY_PATH)"
        );
        let _ = writeln!(std::io::stderr(), "SKIPPED {test}: libcublas or libcublasLt not found (add its directory to LD_LIBRARY_PATH)");
        return None;
    }
    Some(context)
}

/// A test element type with its conversions and the relative rounding of one stored value.
trait Num: Pod + GemmElement + std::fmt::Debug {
    fn from_f64(x: f64) -> Self;
    fn to_f64(self) -> f64;
    /// Unit roundoff of the type (half an ulp at 1): the relative error of storing a result.
    const ROUNDING: f64;
}
impl Num for f32 {
    fn from_f64(x: f64) -> Self {
        x as f32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    const ROUNDING: f64 = 1.0 / (1u64 << 24) as f64;
}
impl Num for f16 {
    fn from_f64(x: f64) -> Self {
        f16::from_f64(x)
    }
    fn to_f64(self) -> f64 {
        f16::to_f64(self)
    }
    const ROUNDING: f64 = 1.0 / 2048.0;
}
impl Num for bf16 {
    fn from_f64(x: f64) -> Self {
        bf16::from_f64(x)
    }
    fn to_f64(self) -> f64 {
        bf16::to_f64(self)
    }
    const ROUNDING: f64 = 1.0 / 256.0;
}

/// Deterministic values in [-1, 1) (multiples of 1/64, exact in every type).
fn values<T: Num>(len: usize, seed: u64) -> Vec<T> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            T::from_f64(((state >> 40) % 128) as f64 / 64.0 - 1.0)
        })
        .collect()
}

/// `(exact, magnitude)` of `alpha · op(a) · op(b) + beta · c0` at `(row, col)` of one batch,
/// in f64 (magnitude: the sum of the absolute values of the terms, which bounds rounding).
#[allow(clippy::too_many_arguments)]
fn reference<I: Num, O: Num>(
    [la, lb, lc]: [MatrixLayout; 3],
    k: usize,
    (alpha, beta): (f64, f64),
    (a, b, c0): (&[I], &[I], &[O]),
    (off_a, off_b, off_c): (usize, usize, usize),
    row: usize,
    col: usize,
) -> (f64, f64) {
    let at = |l: MatrixLayout, r: usize, c: usize| if l.transpose { c + r * l.ld } else { r + c * l.ld };
    let (mut exact, mut magnitude) = (0.0, 0.0);
    for p in 0..k {
        let product = a[off_a + at(la, row, p)].to_f64() * b[off_b + at(lb, p, col)].to_f64();
        exact += product;
        magnitude += product.abs();
    }
    let old = c0[off_c + row + col * lc.ld].to_f64();
    (alpha * exact + beta * old, alpha.abs() * magnitude + (beta * old).abs())
}

/// The host GELU cuBLASLt documents (tanh approximation).
fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
}

/// Runs one `Cublas::gemm` case (optionally batched) and compares every element of `c`
/// (including the padding rows and the gaps between batches, which must be untouched) with
/// the host. The bound: `accumulation * magnitude + O::ROUNDING * |exact| + 1e-6`.
#[allow(clippy::too_many_arguments)]
fn check_gemm<I: Num, O: Num + GemmOutput<I>>(context: &Context, blas: &Cublas, gemm: Gemm<I, O>, accumulation: f64, label: &str) -> f64 {
    let (m, n, k) = gemm.shape();
    let [la, lb, lc] = gemm.layouts();
    let [len_a, len_b, len_c] = gemm.min_lengths();
    let batch = gemm.batch().unwrap_or(Batch { count: 1, stride_a: 0, stride_b: 0, stride_c: 0 });
    let a = values::<I>(len_a, 1);
    let b = values::<I>(len_b, 2);
    let c0 = values::<O>(len_c + 3, 3); // 3 more: the elements past the end stay untouched too
    let (alpha, beta) = (0.75f32, -0.5f32);
    let a_dev = DeviceBuffer::from_slice(context, &a).unwrap();
    let b_dev = DeviceBuffer::from_slice(context, &b).unwrap();
    let mut c_dev = DeviceBuffer::from_slice(context, &c0).unwrap();
    blas.gemm(&gemm, alpha, &a_dev, &b_dev, beta, &mut c_dev).unwrap();
    let got = c_dev.to_vec().unwrap();
    let mut written = vec![false; got.len()];
    let mut worst: f64 = 0.0;
    for i in 0..batch.count {
        let offsets = (i * batch.stride_a, i * batch.stride_b, i * batch.stride_c);
        for col in 0..n {
            for row in 0..m {
                let (exact, magnitude) = reference([la, lb, lc], k, (alpha as f64, beta as f64), (&a, &b, &c0), offsets, row, col);
                let index = offsets.2 + row + col * lc.ld;
                written[index] = true;
                let value = got[index].to_f64();
                let bound = accumulation * magnitude + O::ROUNDING * exact.abs() + 1e-6;
                let error = (value - exact).abs();
                worst = worst.max(error / bound);
                assert!(error <= bound, "{label}: batch {i} c[{row}, {col}] = {value} but the host says {exact} (bound {bound:e})");
            }
        }
    }
    let touched = got.iter().zip(&c0).zip(&written).filter(|((g, c), w)| !**w && g.to_f64().to_bits() != c.to_f64().to_bits()).count();
    assert_eq!(touched, 0, "{label}: {touched} elements outside the layout were changed");
    worst
}

#[test]
fn cublas_sgemm_on_our_buffers_matches_the_cpu() {
    let Some(context) = gpu_with_cublas("cublas_sgemm_on_our_buffers_matches_the_cpu") else { return };
    // Column-major, as BLAS wants: A is m x k, B is k x n, C is m x n.
    let (m, n, k) = (123usize, 77usize, 64usize);
    let a: Vec<f32> = (0..m * k).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
    let b: Vec<f32> = (0..k * n).map(|i| ((i * 3) % 13) as f32 * 0.5 - 3.0).collect();
    let c0: Vec<f32> = (0..m * n).map(|i| (i % 5) as f32).collect();
    let (alpha, beta) = (1.5f32, 0.5f32);

    let stream = Stream::new(&context).unwrap();
    let a_dev = DeviceBuffer::from_slice(&context, &a).unwrap();
    let b_dev = DeviceBuffer::from_slice(&context, &b).unwrap();
    let mut c_dev = DeviceBuffer::from_slice(&context, &c0).unwrap();
    let cublas = Cublas::new(&stream).unwrap();
    cublas.sgemm((m, n, k), alpha, &a_dev, &b_dev, beta, &mut c_dev).unwrap();
    stream.synchronize().unwrap();

    let got = c_dev.to_vec().unwrap();
    let mut worst = 0.0f64;
    for col in 0..n {
        for row in 0..m {
            let dot: f64 = (0..k).map(|p| a[row + p * m] as f64 * b[p + col * k] as f64).sum();
            let expected = alpha as f64 * dot + beta as f64 * c0[row + col * m] as f64;
            let error = (got[row + col * m] as f64 - expected).abs();
            worst = worst.max(error);
            assert!(error <= 1e-3 * expected.abs().max(1.0), "C[{row}, {col}] = {} but the CPU says {expected}", got[row + col * m]);
        }
    }
    eprintln!("cuBLAS SGEMM {m}x{n}x{k} on ferrocuda buffers: worst error {worst:e}");
}

/// Every supported type pairing x every transpose pair, padded leading dimensions.
/// Accumulation bounds (relative to the sum of |products|): f32 1e-5; TF32 inputs rounded to
/// 10 mantissa bits: 2e-3; f16/bf16 inputs (products exact in f32, f32 sums): 1e-5; plus the
/// output type's rounding of the result.
#[test]
fn gemm_ex_matches_the_host_for_every_type_pairing_and_transpose() {
    let Some(context) = gpu_with_cublas("gemm_ex_matches_the_host_for_every_type_pairing_and_transpose") else { return };
    let stream = Stream::new(&context).unwrap();
    let blas = Cublas::new(&stream).unwrap();
    let (m, n, k) = (67usize, 45usize, 96usize);
    for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
        let stored = |rows: usize, cols: usize, t: bool| {
            let (r, c) = if t { (cols, rows) } else { (rows, cols) };
            MatrixLayout { rows: r, cols: c, ld: r + 3, transpose: t }
        };
        let (la, lb, lc) = (stored(m, k, ta), stored(k, n, tb), MatrixLayout::col_major(m, n).with_ld(m + 5));
        let ops = format!("{}{}", if ta { 'T' } else { 'N' }, if tb { 'T' } else { 'N' });
        let mut line = format!("GemmEx {m}x{n}x{k} {ops}, ld +3/+5, alpha 0.75 beta -0.5, worst error/bound:");
        let w = check_gemm(&context, &blas, Gemm::<f32, f32>::new(la, lb, lc).unwrap(), 1e-5, &format!("f32 {ops}"));
        line += &format!(" f32 {w:.3}");
        let w = check_gemm(&context, &blas, Gemm::<f32, f32>::new(la, lb, lc).unwrap().tf32(), 2e-3, &format!("tf32 {ops}"));
        line += &format!(", tf32 {w:.3}");
        let w = check_gemm(&context, &blas, Gemm::<f16, f16>::new(la, lb, lc).unwrap(), 1e-5, &format!("f16->f16 {ops}"));
        line += &format!(", f16->f16 {w:.3}");
        let w = check_gemm(&context, &blas, Gemm::<f16, f32>::new(la, lb, lc).unwrap(), 1e-5, &format!("f16->f32 {ops}"));
        line += &format!(", f16->f32 {w:.3}");
        let w = check_gemm(&context, &blas, Gemm::<bf16, bf16>::new(la, lb, lc).unwrap(), 1e-5, &format!("bf16->bf16 {ops}"));
        line += &format!(", bf16->bf16 {w:.3}");
        let w = check_gemm(&context, &blas, Gemm::<bf16, f32>::new(la, lb, lc).unwrap(), 1e-5, &format!("bf16->f32 {ops}"));
        line += &format!(", bf16->f32 {w:.3}");
        eprintln!("{line}");
    }
}

/// Strided batches: a shared `a` (stride 0), a transposed `b`, gaps between the batches of
/// `c` (which must stay untouched), for bf16 -> f32 and f32.
#[test]
fn strided_batched_gemm_matches_the_host_and_leaves_the_gaps_alone() {
    let Some(context) = gpu_with_cublas("strided_batched_gemm_matches_the_host_and_leaves_the_gaps_alone") else { return };
    let stream = Stream::new(&context).unwrap();
    let blas = Cublas::new(&stream).unwrap();
    let (m, n, k) = (40usize, 24usize, 72usize);
    let (la, lb, lc) = (MatrixLayout::col_major(m, k), MatrixLayout::col_major(n, k).transposed(), MatrixLayout::col_major(m, n));
    let batch = Batch { count: 5, stride_a: 0, stride_b: n * k + 8, stride_c: m * n + 13 };
    let w1 = check_gemm(&context, &blas, Gemm::<bf16, f32>::new(la, lb, lc).unwrap().batched(batch).unwrap(), 1e-5, "batched bf16->f32");
    let w2 = check_gemm(&context, &blas, Gemm::<f32, f32>::new(la, lb, lc).unwrap().batched(batch).unwrap(), 1e-5, "batched f32");
    let w3 = check_gemm(&context, &blas, Gemm::<f16, f16>::new(la, lb, lc).unwrap().batched(batch).unwrap(), 1e-5, "batched f16");
    eprintln!("strided batch of 5 ({m}x{n}x{k}, shared a, b transposed, gaps in c): worst error/bound bf16->f32 {w1:.3}, f32 {w2:.3}, f16 {w3:.3}");
}

/// The host checks reach the GPU call: a short buffer is refused before anything is queued.
#[test]
fn gemm_with_a_short_buffer_is_refused_before_queuing() {
    let Some(context) = gpu_with_cublas("gemm_with_a_short_buffer_is_refused_before_queuing") else { return };
    let stream = Stream::new(&context).unwrap();
    let blas = Cublas::new(&stream).unwrap();
    let a = DeviceBuffer::<bf16>::zeroed(&context, 64 * 64).unwrap();
    let mut c = DeviceBuffer::<f32>::zeroed(&context, 64 * 64 - 1).unwrap();
    let e = blas.gemm(&Gemm::<bf16, f32>::dense(64, 64, 64).unwrap(), 1.0, &a, &a, 0.0, &mut c).unwrap_err();
    assert!(matches!(&e, Error::InvalidGemm { problem } if problem.contains("buffer c holds 4095")), "{e}");
    let lt = CublasLt::new(&stream).unwrap();
    let bias = DeviceBuffer::<f32>::zeroed(&context, 63).unwrap();
    let mut c = DeviceBuffer::<f32>::zeroed(&context, 64 * 64).unwrap();
    let e = lt.matmul(&Gemm::<bf16, f32>::dense(64, 64, 64).unwrap(), Epilogue::bias(&bias), 1.0, &a, &a, 0.0, &mut c).unwrap_err();
    assert!(matches!(&e, Error::InvalidGemm { problem } if problem.contains("the bias holds 63 values but c has 64 rows")), "{e}");
    // A view of the bias that does not start 16-byte aligned.
    let bias = DeviceBuffer::<f32>::zeroed(&context, 80).unwrap();
    let e = lt.matmul(&Gemm::<bf16, f32>::dense(64, 64, 64).unwrap(), Epilogue::bias(&bias.slice(1..)), 1.0, &a, &a, 0.0, &mut c).unwrap_err();
    assert!(matches!(&e, Error::InvalidGemm { problem } if problem.contains("not 16-byte aligned")), "{e}");
}

/// Runs one cuBLASLt case and checks every element. The bound: `1e-5 * magnitude` for the f32
/// accumulation, plus `2e-3 * (1 + |x|)` for the activation (cuBLASLt's GELU may use a fast
/// tanh), plus the output type's rounding of the result.
fn check_lt<I: Num, O: Num + GemmOutput<I>>(context: &Context, lt: &CublasLt, gemm: Gemm<I, O>, kind: EpilogueKind) -> f64 {
    let (m, n, k) = gemm.shape();
    let [len_a, len_b, len_c] = gemm.min_lengths();
    let a = values::<I>(len_a, 11);
    let b = values::<I>(len_b, 12);
    let c0 = values::<O>(len_c, 13);
    let bias = values::<O>(m, 14);
    let (alpha, beta) = (0.5f32, 0.25f32);
    let a_dev = DeviceBuffer::from_slice(context, &a).unwrap();
    let b_dev = DeviceBuffer::from_slice(context, &b).unwrap();
    let bias_dev = DeviceBuffer::from_slice(context, &bias).unwrap();
    let mut c_dev = DeviceBuffer::from_slice(context, &c0).unwrap();
    let epilogue = match kind {
        EpilogueKind::None => Epilogue::none(),
        EpilogueKind::Relu => Epilogue::relu(),
        EpilogueKind::Gelu => Epilogue::gelu(),
        EpilogueKind::Bias => Epilogue::bias(&bias_dev),
        EpilogueKind::BiasRelu => Epilogue::bias_relu(&bias_dev),
        EpilogueKind::BiasGelu => Epilogue::bias_gelu(&bias_dev),
    };
    lt.matmul(&gemm, epilogue, alpha, &a_dev, &b_dev, beta, &mut c_dev).unwrap();
    let got = c_dev.to_vec().unwrap();
    let mut worst: f64 = 0.0;
    for col in 0..n {
        for row in 0..m {
            let (mut x, magnitude) = reference(gemm.layouts(), k, (alpha as f64, beta as f64), (&a, &b, &c0), (0, 0, 0), row, col);
            if kind.has_bias() {
                x += bias[row].to_f64();
            }
            let exact = match kind {
                EpilogueKind::Relu | EpilogueKind::BiasRelu => x.max(0.0),
                EpilogueKind::Gelu | EpilogueKind::BiasGelu => gelu(x),
                EpilogueKind::None | EpilogueKind::Bias => x,
            };
            let value = got[row + col * gemm.layouts()[2].ld].to_f64();
            let activation = if matches!(kind, EpilogueKind::Gelu | EpilogueKind::BiasGelu) { 2e-3 * (1.0 + x.abs()) } else { 0.0 };
            let bound = 1e-5 * (magnitude + 1.0) + activation + O::ROUNDING * exact.abs() + 1e-6;
            let error = (value - exact).abs();
            worst = worst.max(error / bound);
            assert!(error <= bound, "Lt {kind:?}: c[{row}, {col}] = {value} but the host says {exact} (pre-activation {x}, bound {bound:e})");
        }
    }
    worst
}

/// Each epilogue (none, bias, ReLU, bias+ReLU, GELU, bias+GELU) for bf16 -> bf16 (`TN`, as
/// transformer layers use it), f16 -> f16 and f32 -> f32; the plan cache holds one plan per
/// shape and epilogue, and a repeated call reuses it.
#[test]
fn cublaslt_epilogues_match_the_host() {
    let Some(context) = gpu_with_cublas("cublaslt_epilogues_match_the_host") else { return };
    let stream = Stream::new(&context).unwrap();
    let lt = CublasLt::new(&stream).unwrap();
    let (m, n, k) = (96usize, 80usize, 128usize);
    let tn = [MatrixLayout::col_major(k, m).transposed(), MatrixLayout::col_major(k, n), MatrixLayout::col_major(m, n)];
    let kinds = [EpilogueKind::None, EpilogueKind::Bias, EpilogueKind::Relu, EpilogueKind::BiasRelu, EpilogueKind::Gelu, EpilogueKind::BiasGelu];
    let mut line = format!("cuBLASLt {m}x{n}x{k} alpha 0.5 beta 0.25, worst error/bound:");
    for kind in kinds {
        let w1 = check_lt(&context, &lt, Gemm::<bf16, bf16>::new(tn[0], tn[1], tn[2]).unwrap(), kind);
        let w2 = check_lt(&context, &lt, Gemm::<f16, f16>::dense(m, n, k).unwrap(), kind);
        let w3 = check_lt(&context, &lt, Gemm::<f32, f32>::dense(m, n, k).unwrap(), kind);
        line += &format!(" {kind:?} bf16 TN {w1:.3} f16 {w2:.3} f32 {w3:.3};");
    }
    assert_eq!(lt.cached_plans(), 3 * kinds.len(), "one plan per types/layouts/epilogue");
    check_lt(&context, &lt, Gemm::<bf16, bf16>::new(tn[0], tn[1], tn[2]).unwrap(), EpilogueKind::BiasGelu);
    assert_eq!(lt.cached_plans(), 3 * kinds.len(), "a repeated matmul reuses its plan");
    // bf16 -> f32 with bias + GELU.
    let w = check_lt(&context, &lt, Gemm::<bf16, f32>::new(tn[0], tn[1], tn[2]).unwrap(), EpilogueKind::BiasGelu);
    eprintln!("{line} BiasGelu bf16->f32 TN {w:.3}; {} plans cached", lt.cached_plans());
}

/// Ordering: `c` written by a GEMM on stream 1 (behind a 300 ms kernel) and read by a GEMM on
/// a second, non-blocking stream right after: the second sees the first's result, because
/// the door made stream 2 wait for the writer of its input. Then `c` is dropped right after a
/// GEMM writing it behind a slow kernel: a buffer allocated next is not overwritten by it.
#[test]
fn gemm_output_read_on_another_stream_sees_the_result_and_is_not_freed_early() {
    let Some(context) = gpu_with_cublas("gemm_output_read_on_another_stream_sees_the_result_and_is_not_freed_early") else { return };
    let (s1, s2) = (Stream::non_blocking(&context).unwrap(), Stream::non_blocking(&context).unwrap());
    let (blas1, lt2) = (Cublas::new(&s1).unwrap(), CublasLt::new(&s2).unwrap());
    let n = 256usize;
    let ones = DeviceBuffer::from_slice(&context, &vec![bf16::ONE; n * n]).unwrap();
    let mut identity = vec![bf16::ZERO; n * n];
    for i in 0..n {
        identity[i + i * n] = bf16::ONE;
    }
    let identity = DeviceBuffer::from_slice(&context, &identity).unwrap();
    let mut c = DeviceBuffer::<bf16>::zeroed(&context, n * n).unwrap();
    let mut d = DeviceBuffer::<bf16>::zeroed(&context, n * n).unwrap();
    let gemm = Gemm::<bf16, bf16>::dense(n, n, n).unwrap();
    spin_for::launch(&s1, (1u32, 1u32), 300_000_000).unwrap();
    blas1.gemm(&gemm, 1.0, &ones, &ones, 0.0, &mut c).unwrap(); // every element n = 256
    lt2.matmul(&gemm, Epilogue::none(), 1.0, &c, &identity, 0.0, &mut d).unwrap(); // d = c · I on s2
    let got = d.to_vec().unwrap();
    let stale = got.iter().filter(|&&x| x.to_f32() != n as f32).count();
    assert_eq!(stale, 0, "the matmul on stream 2 read c before the GEMM on stream 1 wrote it");

    let big = 2048usize;
    let a = DeviceBuffer::from_slice(&context, &vec![bf16::ONE; big * big]).unwrap();
    let mut out = DeviceBuffer::<f32>::zeroed(&context, big * big).unwrap();
    spin_for::launch(&s1, (1u32, 1u32), 300_000_000).unwrap();
    blas1.gemm(&Gemm::<bf16, f32>::dense(big, big, big).unwrap(), 1.0, &a, &a, 0.0, &mut out).unwrap();
    drop(out);
    let fresh = DeviceBuffer::from_slice(&context, &vec![5.0f32; big * big]).unwrap();
    s1.synchronize().unwrap();
    let overwritten = fresh.to_vec().unwrap().iter().filter(|&&v| v != 5.0).count();
    assert_eq!(overwritten, 0, "the GEMM's output was freed and reused while the GEMM was queued");
    eprintln!("ordering: a matmul on stream 2 saw stream 1's GEMM result behind a 300 ms kernel; c dropped after its GEMM was not reused under it");
}

/// cuBLASLt on views that start 2 bytes past a 256-byte boundary: the heuristic is asked for
/// algorithms that work at that alignment (the plan records it), so the matmul is right or is
/// refused with a clear error, never a misaligned access. Also a view as `c`: the elements
/// around it stay untouched.
#[test]
fn cublaslt_on_misaligned_views_is_right_or_refused() {
    let Some(context) = gpu_with_cublas("cublaslt_on_misaligned_views_is_right_or_refused") else { return };
    let stream = Stream::new(&context).unwrap();
    let lt = CublasLt::new(&stream).unwrap();
    let (m, n, k) = (64usize, 48usize, 96usize);
    let a = values::<bf16>(m * k + 1, 21);
    let b = values::<bf16>(k * n + 1, 22);
    let (a_dev, b_dev) = (DeviceBuffer::from_slice(&context, &a).unwrap(), DeviceBuffer::from_slice(&context, &b).unwrap());
    let mut c_dev = DeviceBuffer::from_slice(&context, &vec![bf16::from_f32(7.0); m * n + 2]).unwrap();
    let gemm = Gemm::<bf16, bf16>::dense(m, n, k).unwrap();
    let outcome = lt.matmul(&gemm, Epilogue::relu(), 1.0, &a_dev.slice(1..), &b_dev.slice(1..), 0.0, &mut c_dev.slice_mut(1..1 + m * n));
    match outcome {
        Ok(()) => {
            let got = c_dev.to_vec().unwrap();
            assert_eq!((got[0].to_f32(), got[m * n + 1].to_f32()), (7.0, 7.0), "elements outside the view of c were written");
            for col in 0..n {
                for row in 0..m {
                    let exact: f64 = (0..k).map(|p| a[1 + row + p * m].to_f64() * b[1 + p + col * k].to_f64()).sum::<f64>().max(0.0);
                    let value = got[1 + row + col * m].to_f64();
                    assert!((value - exact).abs() <= 1e-5 * k as f64 + exact.abs() / 256.0, "c[{row}, {col}] = {value}, host {exact}");
                }
            }
            eprintln!("cuBLASLt on 2-byte-aligned views: verified");
        }
        Err(Error::InvalidGemm { problem }) => {
            assert!(problem.contains("no algorithm") && problem.contains("alignments [2, 2, 2]"), "{problem}");
            eprintln!("cuBLASLt on 2-byte-aligned views: refused ({problem})");
        }
        Err(other) => panic!("unexpected error: {other}"),
    }
}
