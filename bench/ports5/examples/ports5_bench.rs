//! Issue 30's fifth held-out port on a GPU: each port (first try, and the fixed variant where
//! there is one) checked against its nvcc-built CUDA C++ twin on the same inputs, then timed
//! beside it (CUDA events, one launch per event pair, the variants interleaved, after warm-up
//! runs; the median of `PORTS5_RUNS`, default 20).
//!
//! `cargo run --release -p ferrocuda-ports5 --example ports5_bench -- TWINS_DIR`, where
//! TWINS_DIR holds `ports5_llmc.cubin` (`nvcc -cubin -O3 -arch=sm_90 -DPORTS5_LLMC
//! --use_fast_math bench/ports5/cuda/ports5.cu`) and `ports5_vllm.cubin` (`-DPORTS5_VLLM`):
//! scripts/gpu-run/stage-ports5.sh builds both. Without a GPU it says so and exits 0 (1 under
//! `REQUIRE_GPU=1`). Prints one table: kernel, correct (y/n), first-try ratio and fixed ratio
//! (nvcc's time over ours: above 1, ours is faster), unsafe needed (y/n).

use ferrocuda::half::bf16;
use ferrocuda::{Context, DeviceBuffer, DevicePtr, Error, Event, JitOptions, LaunchConfig, Module, Stream};
use ferrocuda_ports5::reference as r;
use ferrocuda_ports5_llmc as llmc;
use ferrocuda_ports5_vllm as vllm;
use llmc::twin_abi as lt;
use std::num::NonZeroU32;
use vllm::twin_abi as vt;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

struct Gpu {
    context: Context,
    stream: Stream,
    llmc: Module,
    vllm: Module,
    runs: usize,
    start: Event,
    end: Event,
}

/// One row of the table.
struct Row {
    kernel: &'static str,
    shape: String,
    correct: bool,
    note: String,
    twin_ms: f32,
    first_ms: f32,
    fixed_ms: Option<f32>,
    unsafe_needed: bool,
}

/// The raw address of a buffer as a pointer to another element type (for the twins' `T*`).
fn ptr<T: bytemuck::Pod, U>(buffer: &DeviceBuffer<T>) -> DevicePtr<U> {
    DevicePtr::from_address(buffer.as_device_ptr().address())
}

/// A deterministic pseudo-random value in `[0, 1)` for index `i` and stream `seed` (cheap
/// enough for 200 M values).
fn noise(seed: u64, i: usize) -> f32 {
    let mut x = (i as u64 ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 31;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 29;
    (x >> 40) as f32 / (1u64 << 24) as f32
}

fn noise_vec(seed: u64, n: usize, lo: f32, hi: f32) -> Vec<f32> {
    (0..n).map(|i| lo + (hi - lo) * noise(seed, i)).collect()
}

fn median(mut v: Vec<f32>) -> f32 {
    v.sort_by(f32::total_cmp);
    v[v.len() / 2]
}

impl Gpu {
    /// Times one launch of `f` with the pair of events.
    fn time(&self, f: &mut dyn FnMut() -> Result<(), Error>) -> Result<f32, Error> {
        self.start.record(&self.stream)?;
        f()?;
        self.end.record(&self.stream)?;
        self.stream.synchronize()?;
        self.start.elapsed_ms(&self.end)
    }

    /// Warm-up (3 each), then `runs` rounds of one timed launch of each variant; the medians.
    fn bench(&self, variants: &mut [&mut dyn FnMut() -> Result<(), Error>]) -> Result<Vec<f32>, Error> {
        for f in variants.iter_mut() {
            for _ in 0..3 {
                f()?;
            }
        }
        self.stream.synchronize()?;
        let mut times = vec![Vec::new(); variants.len()];
        for _ in 0..self.runs {
            for (f, t) in variants.iter_mut().zip(&mut times) {
                t.push(self.time(*f)?);
            }
        }
        Ok(times.into_iter().map(median).collect())
    }
}

fn bits_equal<T: bytemuck::Pod>(a: &[T], b: &[T]) -> usize {
    let (a, b): (&[u8], &[u8]) = (bytemuck::cast_slice(a), bytemuck::cast_slice(b));
    let size = std::mem::size_of::<T>();
    a.chunks_exact(size).zip(b.chunks_exact(size)).filter(|(x, y)| x == y).count()
}

fn bf16_ulps(a: bf16, b: bf16) -> u16 {
    (a.to_bits() as i16).abs_diff(b.to_bits() as i16)
}

fn residual_forward(g: &Gpu) -> Res<Row> {
    let n = 8 * 1024 * 768; // B T C of GPT-2 124M at B = 8
    let a: Vec<bf16> = noise_vec(1, n, -4.0, 4.0).into_iter().map(bf16::from_f32).collect();
    let b: Vec<bf16> = noise_vec(2, n, -4.0, 4.0).into_iter().map(bf16::from_f32).collect();
    let pack = |v: &[bf16]| -> Vec<llmc::X128> { v.chunks_exact(8).map(|c| llmc::X128 { v: c.try_into().unwrap() }).collect() };
    let (da, db) = (DeviceBuffer::from_slice(&g.context, &pack(&a))?, DeviceBuffer::from_slice(&g.context, &pack(&b))?);
    let twin = DeviceBuffer::<bf16>::zeroed(&g.context, n)?;
    let mut first = DeviceBuffer::<llmc::X128>::zeroed(&g.context, n / 8)?;
    let config = LaunchConfig::for_elements(n / 8, 256);
    let (tp, ap, bp) = (ptr::<bf16, bf16>(&twin), ptr::<llmc::X128, bf16>(&da), ptr::<llmc::X128, bf16>(&db));
    // SAFETY: every pointer holds `n` bf16 (the twin's contract).
    let mut run_twin = || unsafe { lt::twin_residual_forward_kernel2::launch_in(&g.llmc, &g.stream, config, tp, ap, bp, n as i32) };
    run_twin()?;
    llmc::residual_forward_kernel2::launch(&g.stream, config, &mut first, &da, &db)?;
    g.stream.synchronize()?;
    let (t, f) = (twin.to_vec()?, first.to_vec()?);
    let f: Vec<bf16> = f.iter().flat_map(|x| x.v).collect();
    let want = r::residual_forward(&a[..4096], &b[..4096]);
    let same = bits_equal(&t, &f);
    let correct = same == n && t[..4096] == want[..];
    let times = g.bench(&mut [&mut run_twin, &mut || llmc::residual_forward_kernel2::launch(&g.stream, config, &mut first, &da, &db)])?;
    Ok(Row {
        kernel: "residual_forward_kernel2",
        shape: format!("{n} bf16"),
        correct,
        note: format!("{same}/{n} bits equal"),
        twin_ms: times[0],
        first_ms: times[1],
        fixed_ms: None,
        unsafe_needed: false,
    })
}

/// `B T` rows of `V` probabilities (about `2 / V` each) and targets.
fn probs_and_targets(bt: usize, v: usize) -> (Vec<f32>, Vec<i32>) {
    let scale = 2.0 / v as f32;
    let probs: Vec<f32> = (0..bt * v).map(|i| (noise(3, i) + 0.01) * scale).collect();
    let targets: Vec<i32> = (0..bt).map(|i| (noise(4, i) * v as f32) as i32).collect();
    (probs, targets)
}

const B: usize = 4;
const T: usize = 1024;
const V: usize = 50257;

fn crossentropy(g: &Gpu, probs_host: &[f32], targets_host: &[i32]) -> Res<(Row, Row)> {
    let bt = B * T;
    let probs = DeviceBuffer::from_slice(&g.context, probs_host)?;
    let targets = DeviceBuffer::from_slice(&g.context, targets_host)?;
    // Forward.
    let twin = DeviceBuffer::<f32>::zeroed(&g.context, bt)?;
    let mut first = DeviceBuffer::<f32>::zeroed(&g.context, bt)?;
    let config = LaunchConfig::for_elements(bt, 128);
    let (tp, pp, xp) = (ptr::<f32, f32>(&twin), ptr::<f32, f32>(&probs), ptr::<i32, i32>(&targets));
    // SAFETY: `losses`/`targets` hold B T, `probs` B T V, targets in 0..V.
    let mut run_twin = || unsafe { lt::twin_crossentropy_forward_kernel1::launch_in(&g.llmc, &g.stream, config, tp, pp, xp, B as i32, T as i32, V as i32) };
    run_twin()?;
    llmc::crossentropy_forward_kernel1::launch(&g.stream, config, &mut first, &probs, &targets, V as u32)?;
    g.stream.synchronize()?;
    let (t, f) = (twin.to_vec()?, first.to_vec()?);
    let want = r::crossentropy_forward(probs_host, targets_host, V);
    let same = bits_equal(&t, &f);
    let near = t.iter().zip(&want).all(|(a, b)| (a - b).abs() <= 1e-5 * b.abs() + 1e-6);
    let times = g.bench(&mut [&mut run_twin, &mut || llmc::crossentropy_forward_kernel1::launch(&g.stream, config, &mut first, &probs, &targets, V as u32)])?;
    let forward = Row {
        kernel: "crossentropy_forward_kernel1",
        shape: format!("B {B} T {T} V {V} f32"),
        correct: same == bt && near,
        note: format!("{same}/{bt} bits equal to nvcc; nvcc within 1e-5 of the host: {near}"),
        twin_ms: times[0],
        first_ms: times[1],
        fixed_ms: None,
        unsafe_needed: false,
    };
    // Backward, in place on dlogits (zero at first: the check; the timing runs accumulate).
    let n = bt * V;
    let dlosses_host: Vec<f32> = noise_vec(5, bt, 0.0, 1.0 / bt as f32);
    let dlosses = DeviceBuffer::from_slice(&g.context, &dlosses_host)?;
    let twin = DeviceBuffer::<f32>::zeroed(&g.context, n)?;
    let mut first = DeviceBuffer::<f32>::zeroed(&g.context, n)?;
    let config = LaunchConfig::for_elements(n, 256);
    let (tn, vn) = (NonZeroU32::new(T as u32).unwrap(), NonZeroU32::new(V as u32).unwrap());
    let (tp, dp) = (ptr::<f32, f32>(&twin), ptr::<f32, f32>(&dlosses));
    // SAFETY: `dlogits`/`probs` hold B T V, `dlosses`/`targets` B T.
    let mut run_twin =
        || unsafe { lt::twin_crossentropy_softmax_backward_kernel1::launch_in(&g.llmc, &g.stream, config, tp, dp, pp, xp, B as i32, T as i32, V as i32) };
    run_twin()?;
    llmc::crossentropy_softmax_backward_kernel1::launch(&g.stream, config, &mut first, &dlosses, &probs, &targets, tn, vn)?;
    g.stream.synchronize()?;
    let (t, f) = (twin.to_vec()?, first.to_vec()?);
    let same = bits_equal(&t, &f);
    let mut want = vec![0.0f32; 2 * V];
    r::crossentropy_softmax_backward(&mut want, &dlosses_host[..2], &probs_host[..2 * V], &targets_host[..2], V);
    let near = t[..2 * V].iter().zip(&want).all(|(a, b)| (a - b).abs() <= 1e-6 * b.abs() + 1e-12);
    let times = g.bench(&mut [&mut run_twin, &mut || {
        llmc::crossentropy_softmax_backward_kernel1::launch(&g.stream, config, &mut first, &dlosses, &probs, &targets, tn, vn)
    }])?;
    let backward = Row {
        kernel: "crossentropy_softmax_backward_kernel1",
        shape: format!("B {B} T {T} V {V} f32"),
        correct: same == n && near,
        note: format!("{same}/{n} bits equal to nvcc; nvcc's first rows match the host: {near}"),
        twin_ms: times[0],
        first_ms: times[1],
        fixed_ms: None,
        unsafe_needed: false,
    };
    Ok((forward, backward))
}

fn copy_and_cast(g: &Gpu) -> Res<Row> {
    let (n, layers) = (768 * 3072, 12); // GPT-2 124M's MLP weight per layer, 12 layers
    let src_host = noise_vec(7, n * layers, -1.0, 1.0);
    let src = DeviceBuffer::from_slice(&g.context, &src_host)?;
    let twin = DeviceBuffer::<bf16>::zeroed(&g.context, n * layers)?;
    let mut first = DeviceBuffer::<bf16>::zeroed(&g.context, n * layers)?;
    let config = LaunchConfig::new((n.div_ceil(512) as u32, layers as u32, 1), (512u32, 1, 1));
    let (tp, sp) = (ptr::<bf16, bf16>(&twin), ptr::<f32, f32>(&src));
    // SAFETY: `layers` slices of `n` at stride `n` in both buffers.
    let mut run_twin = || unsafe { lt::twin_copy_and_cast_kernel::launch_in(&g.llmc, &g.stream, config, tp, sp, n, n as isize, n as isize) };
    run_twin()?;
    llmc::copy_and_cast_kernel::launch(&g.stream, config, &mut first, &src, n as u32, n as u32, n as u32)?;
    g.stream.synchronize()?;
    let (t, f) = (twin.to_vec()?, first.to_vec()?);
    let same = bits_equal(&t, &f);
    let host_ok = t.iter().zip(&src_host).take(4096).all(|(a, &b)| *a == bf16::from_f32(b));
    // After the port (issue 30, session 16): `GridSlices`, llm.c's own partition (the "fixed"
    // column of this row).
    let mut slices = DeviceBuffer::<bf16>::zeroed(&g.context, n * layers)?;
    llmc::copy_and_cast_kernel_slices::launch(&g.stream, config, &mut slices, &src, n as u32, n as u32, n as u32)?;
    g.stream.synchronize()?;
    let same_slices = bits_equal(&t, &slices.to_vec()?);
    let times = g.bench(&mut [
        &mut run_twin,
        &mut || llmc::copy_and_cast_kernel::launch(&g.stream, config, &mut first, &src, n as u32, n as u32, n as u32),
        &mut || llmc::copy_and_cast_kernel_slices::launch(&g.stream, config, &mut slices, &src, n as u32, n as u32, n as u32),
    ])?;
    Ok(Row {
        kernel: "copy_and_cast_kernel",
        shape: format!("{layers} x {n} f32 -> bf16"),
        correct: same == n * layers && same_slices == n * layers && host_ok,
        note: format!("{same}/{} bits equal; GridSlices (fixed column, after the port): {same_slices}", n * layers),
        twin_ms: times[0],
        first_ms: times[1],
        fixed_ms: Some(times[2]),
        unsafe_needed: false,
    })
}

fn gelu_tanh_and_mul(g: &Gpu) -> Res<Row> {
    let (tokens, d) = (2048usize, 11008usize); // Llama-7B's MLP width
    let input_host: Vec<bf16> = noise_vec(8, tokens * 2 * d, -5.0, 5.0).into_iter().map(bf16::from_f32).collect();
    let input = DeviceBuffer::from_slice(&g.context, &input_host)?;
    let twin = DeviceBuffer::<bf16>::zeroed(&g.context, tokens * d)?;
    let mut first = DeviceBuffer::<bf16>::zeroed(&g.context, tokens * d)?;
    let mut fixed = DeviceBuffer::<bf16>::zeroed(&g.context, tokens * d)?;
    let config = LaunchConfig::new((tokens as u32, 1, 1), (d.min(1024) as u32, 1, 1));
    let (tp, ip) = (ptr::<bf16, bf16>(&twin), ptr::<bf16, bf16>(&input));
    // SAFETY: `input` holds 2 d per token, `out` d.
    let mut run_twin = || unsafe { vt::twin_gelu_tanh_and_mul_kernel::launch_in(&g.vllm, &g.stream, config, tp, ip, d as i32) };
    run_twin()?;
    vllm::gelu_tanh_and_mul_kernel::launch(&g.stream, config, &mut first, &input, d as u32)?;
    vllm::gelu_tanh_and_mul_kernel_fixed::launch(&g.stream, config, &mut fixed, &input, d as u32)?;
    g.stream.synchronize()?;
    let (t, f, x) = (twin.to_vec()?, first.to_vec()?, fixed.to_vec()?);
    let worst = |o: &[bf16]| t.iter().zip(o).map(|(&a, &b)| bf16_ulps(a, b)).max().unwrap_or(0);
    let (wf, wx) = (worst(&f), worst(&x));
    let want = r::gelu_tanh_and_mul(&input_host[..2 * d * 4], d);
    let host_ok = t.iter().zip(&want).all(|(&a, &b)| bf16_ulps(a, b) <= 1);
    let times = g.bench(&mut [&mut run_twin, &mut || vllm::gelu_tanh_and_mul_kernel::launch(&g.stream, config, &mut first, &input, d as u32), &mut || {
        vllm::gelu_tanh_and_mul_kernel_fixed::launch(&g.stream, config, &mut fixed, &input, d as u32)
    }])?;
    Ok(Row {
        kernel: "gelu_tanh_and_mul (vLLM act_and_mul)",
        shape: format!("{tokens} x {d} bf16"),
        correct: wf <= 1 && wx <= 1 && host_ok,
        note: format!("max bf16 ulps vs nvcc: first {wf}, fixed {wx} (fixed bits equal: {}/{})", bits_equal(&t, &x), t.len()),
        twin_ms: times[0],
        first_ms: times[1],
        fixed_ms: Some(times[2]),
        unsafe_needed: false,
    })
}

fn rms_norm_fp8(g: &Gpu) -> Res<Row> {
    let (tokens, hidden) = (4096usize, 4096usize);
    let input_host: Vec<bf16> = noise_vec(9, tokens * hidden, -2.0, 2.0).into_iter().map(bf16::from_f32).collect();
    let weight_host: Vec<bf16> = noise_vec(10, hidden, 0.5, 1.5).into_iter().map(bf16::from_f32).collect();
    let (scale_v, eps) = (0.01f32, 1e-6f32);
    let input = DeviceBuffer::from_slice(&g.context, &input_host)?;
    let weight = DeviceBuffer::from_slice(&g.context, &weight_host)?;
    let scale = DeviceBuffer::from_slice(&g.context, &[scale_v])?;
    let twin = DeviceBuffer::<u8>::zeroed(&g.context, tokens * hidden)?;
    let mut first = DeviceBuffer::<u8>::zeroed(&g.context, tokens * hidden)?;
    let config = LaunchConfig::new((tokens as u32, 1, 1), (hidden.min(1024) as u32, 1, 1));
    let (tp, ip, wp, sp) = (ptr::<u8, u8>(&twin), ptr::<bf16, bf16>(&input), ptr::<bf16, bf16>(&weight), ptr::<f32, f32>(&scale));
    let (h, tk) = (hidden as i32, tokens as i32);
    // SAFETY: rows of `hidden` in every buffer, one scale, 1024 threads.
    let mut run_twin = || unsafe { vt::twin_rms_norm_static_fp8_quant_kernel::launch_in(&g.vllm, &g.stream, config, tp, ip, h, wp, sp, eps, tk, h) };
    let mut run_first = || {
        vllm::rms_norm_static_fp8_quant_kernel::launch(&g.stream, config, &mut first, &input, hidden as u32, &weight, &scale, eps, tokens as u32, hidden as u32)
    };
    run_twin()?;
    run_first()?;
    g.stream.synchronize()?;
    let times = g.bench(&mut [&mut run_twin, &mut run_first])?;
    let (t, f) = (twin.to_vec()?, first.to_vec()?);
    let same = bits_equal(&t, &f);
    let want = r::rms_norm_static_fp8_quant(&input_host[..4 * hidden], &weight_host, scale_v, eps, hidden);
    let host_same = bits_equal(&t[..4 * hidden], &want);
    // The block sums differ in order (cub's tree vs ours): a value on a rounding boundary may
    // take the next FP8 step; allow 0.1% of the elements to differ.
    let correct = same * 1000 >= t.len() * 999 && host_same * 1000 >= want.len() * 999;
    Ok(Row {
        kernel: "rms_norm_static_fp8_quant",
        shape: format!("{tokens} x {hidden} bf16 -> fp8"),
        correct,
        note: format!("{same}/{} bits equal to nvcc; nvcc vs host {host_same}/{}", t.len(), want.len()),
        twin_ms: times[0],
        first_ms: times[1],
        fixed_ms: None,
        unsafe_needed: false,
    })
}

fn repetition_penalties(g: &Gpu) -> Res<Vec<Row>> {
    let (seqs, vocab) = (64usize, 128_256usize); // Llama 3's vocabulary, a batch of 64
    let logits_host = noise_vec(11, seqs * vocab, -10.0, 10.0);
    let prompt_host: Vec<u8> = (0..seqs * vocab).map(|i| (noise(12, i) < 0.05) as u8).collect();
    let output_host: Vec<u8> = (0..seqs * vocab).map(|i| (noise(13, i) < 0.02) as u8).collect();
    let pen_host: Vec<f32> = (0..seqs).map(|s| 1.0 + 0.01 * s as f32).collect();
    let prompt = DeviceBuffer::from_slice(&g.context, &prompt_host)?;
    let output = DeviceBuffer::from_slice(&g.context, &output_host)?;
    let pen = DeviceBuffer::from_slice(&g.context, &pen_host)?;
    let twin = DeviceBuffer::from_slice(&g.context, &logits_host)?;
    let mut first = DeviceBuffer::from_slice(&g.context, &logits_host)?;
    let mut tiles = DeviceBuffer::from_slice(&g.context, &logits_host)?;
    let mut unchecked = DeviceBuffer::from_slice(&g.context, &logits_host)?;
    let mut rowtiles = DeviceBuffer::from_slice(&g.context, &logits_host)?;
    // vLLM's launcher: tile_num = min(vocab, max(1, ceil(SMs / seqs))) on the device's SMs
    // (132 on an H100 SXM and an H200).
    let sms = 132usize;
    let tile_num = vocab.min(1.max(sms.div_ceil(seqs)));
    let tile_size = vocab.div_ceil(tile_num);
    let twin_config = LaunchConfig::new((seqs as u32, tile_num as u32, 1), (tile_size.min(1024) as u32, 1, 1));
    let first_config = LaunchConfig::new((vocab.div_ceil(256) as u32, seqs as u32, 1), (256u32, 1, 1));
    let tiles_config = LaunchConfig::new((seqs as u32, (vocab as u32).div_ceil(vllm::PENALTY_TILE), 1), (vllm::PENALTY_THREADS, 1, 1));
    let (tp, pp, op, qp) = (ptr::<f32, f32>(&twin), ptr::<u8, u8>(&prompt), ptr::<u8, u8>(&output), ptr::<f32, f32>(&pen));
    // SAFETY: `seqs` rows of `vocab` in the logits and masks, `seqs` penalties.
    let mut run_twin = || unsafe {
        vt::twin_apply_repetition_penalties_kernel::launch_in(&g.vllm, &g.stream, twin_config, tp, pp, op, qp, seqs as i32, vocab as i32, tile_size as i32)
    };
    let v = vocab as u32;
    run_twin()?;
    vllm::apply_repetition_penalties_kernel::launch(&g.stream, first_config, &mut first, &prompt, &output, &pen, v)?;
    vllm::apply_repetition_penalties_kernel_tiles::launch(&g.stream, tiles_config, &mut tiles, &prompt, &output, &pen, v)?;
    vllm::apply_repetition_penalties_kernel_unchecked::launch(&g.stream, twin_config, &mut unchecked, &prompt, &output, &pen, v, tile_size as u32)?;
    vllm::apply_repetition_penalties_kernel_rowtiles::launch(&g.stream, twin_config, &mut rowtiles, &prompt, &output, &pen, v, tile_size as u32)?;
    g.stream.synchronize()?;
    let mut want = logits_host.clone();
    r::apply_repetition_penalties(&mut want, &prompt_host, &output_host, &pen_host, vocab);
    let t = twin.to_vec()?;
    let host_same = bits_equal(&t, &want);
    let mut outs = Vec::new();
    for buffer in [&first, &tiles, &unchecked, &rowtiles] {
        outs.push(bits_equal(&t, &buffer.to_vec()?));
    }
    // The timing runs keep applying the penalty (each run divides or multiplies again; signs
    // and so the work stay the same).
    let mut run_first = || vllm::apply_repetition_penalties_kernel::launch(&g.stream, first_config, &mut first, &prompt, &output, &pen, v);
    let mut run_tiles = || vllm::apply_repetition_penalties_kernel_tiles::launch(&g.stream, tiles_config, &mut tiles, &prompt, &output, &pen, v);
    let mut run_unchecked =
        || vllm::apply_repetition_penalties_kernel_unchecked::launch(&g.stream, twin_config, &mut unchecked, &prompt, &output, &pen, v, tile_size as u32);
    let mut run_rowtiles =
        || vllm::apply_repetition_penalties_kernel_rowtiles::launch(&g.stream, twin_config, &mut rowtiles, &prompt, &output, &pen, v, tile_size as u32);
    let times = g.bench(&mut [&mut run_twin, &mut run_first, &mut run_tiles, &mut run_unchecked, &mut run_rowtiles])?;
    let n = t.len();
    let row = |kernel, shape: String, same: usize, ms, unsafe_needed| Row {
        kernel,
        shape,
        correct: same == n && host_same == n,
        note: format!("{same}/{n} bits equal to nvcc; nvcc vs host {host_same}"),
        twin_ms: times[0],
        first_ms: ms,
        fixed_ms: None,
        unsafe_needed,
    };
    Ok(vec![
        row("apply_repetition_penalties", format!("{seqs} x {vocab} f32"), outs[0], times[1], false),
        row("  same, PerBlockTile (seq, 8192-tile) grid", format!("grid ({seqs}, {})", vocab.div_ceil(8192)), outs[1], times[2], false),
        row("  same, vLLM's grid, UncheckedSlice", format!("grid ({seqs}, {tile_num}) x {}", tile_size.min(1024)), outs[2], times[3], true),
        row("  same, vLLM's grid, RowTiles (safe)", format!("grid ({seqs}, {tile_num}) x {}", tile_size.min(1024)), outs[3], times[4], false),
    ])
}

fn topk_softmax(g: &Gpu) -> Res<Vec<Row>> {
    let (rows, k) = (32_768usize, 6usize); // tokens; 64 experts, top 6 (DeepSeek-MoE-like)
    let input_host = noise_vec(14, rows * 64, -4.0, 4.0);
    let f4: Vec<vllm::F4> = input_host.chunks_exact(4).map(|c| vllm::F4 { v: c.try_into().unwrap() }).collect();
    let input = DeviceBuffer::from_slice(&g.context, &f4)?;
    let tw = DeviceBuffer::<f32>::zeroed(&g.context, rows * k)?;
    let ti = DeviceBuffer::<i32>::zeroed(&g.context, rows * k)?;
    let ts = DeviceBuffer::<i32>::zeroed(&g.context, rows * k)?;
    let mut fw = DeviceBuffer::<f32>::zeroed(&g.context, rows * k)?;
    let mut fi = DeviceBuffer::<i32>::zeroed(&g.context, rows * k)?;
    let mut fs = DeviceBuffer::<i32>::zeroed(&g.context, rows * k)?;
    let grid = (rows as u32).div_ceil(vllm::ROWS_PER_CTA);
    let twin_config = LaunchConfig::new((grid, 1, 1), (32u32, vllm::WARPS_PER_CTA, 1));
    let config = LaunchConfig::new((grid, 1, 1), (32 * vllm::WARPS_PER_CTA, 1, 1));
    let (ip, wp, xp, sp) = (ptr::<vllm::F4, f32>(&input), ptr::<f32, f32>(&tw), ptr::<i32, i32>(&ti), ptr::<i32, i32>(&ts));
    let null = DevicePtr::<u8>::from_address(0); // vLLM passes `finished = nullptr`
    // SAFETY: 64 rows' floats per row, k outputs per row, a (32, 4) block.
    let mut run_twin =
        || unsafe { vt::twin_topk_gating_softmax_64::launch_in(&g.vllm, &g.stream, twin_config, ip, null, wp, rows as i32, xp, sp, k as i32, 0, 64) };
    run_twin()?;
    vllm::topk_gating_softmax_64::launch(&g.stream, config, &input, &mut fw, rows as u32, &mut fi, &mut fs, k as u32, 0, 64)?;
    g.stream.synchronize()?;
    let (a, b, c) = (tw.to_vec()?, ti.to_vec()?, ts.to_vec()?);
    let (x, y, z) = (fw.to_vec()?, fi.to_vec()?, fs.to_vec()?);
    let same = bits_equal(&a, &x) + bits_equal(&b, &y) + bits_equal(&c, &z);
    // Expected bit-equal (`exp` is nvcc's sequence, the shuffles fold in nvcc's order); the
    // check allows 1e-6 on the weights (at most 1) and needs the experts and rows exactly.
    let weights_near = a.iter().zip(&x).all(|(p, q)| (p - q).abs() <= 1e-6);
    let (ww, wi, _) = r::topk_gating_softmax(&input_host[..64 * 64], 64, k, 0, 64);
    let host_ok = b[..64 * k] == wi[..] && a.iter().zip(&ww).all(|(p, q)| (p - q).abs() <= 1e-6);
    let times = g.bench(&mut [&mut run_twin, &mut || {
        vllm::topk_gating_softmax_64::launch(&g.stream, config, &input, &mut fw, rows as u32, &mut fi, &mut fs, k as u32, 0, 64)
    }])?;
    let first = Row {
        kernel: "topkGatingSoftmax<64 experts>",
        shape: format!("{rows} tokens, 64 experts, k {k}"),
        correct: b == y && c == z && weights_near && host_ok,
        note: format!("{same}/{} output values bit-equal to nvcc; nvcc vs host: {host_ok}", 3 * rows * k),
        twin_ms: times[0],
        first_ms: times[1],
        fixed_ms: None,
        unsafe_needed: false,
    };
    // After the port (issue 30): vLLM's `finished` as `Option<&[u8]>`, beside the twin given
    // the same argument: `nullptr` / `None`, then a third of the rows finished.
    let flags_host: Vec<u8> = (0..rows).map(|r| (r % 3 == 1) as u8).collect();
    let flags = DeviceBuffer::from_slice(&g.context, &flags_host)?;
    let fp = ptr::<u8, u8>(&flags);
    let mut rows_out = vec![first];
    for (given, label) in [(false, "  same, `finished: Option<&[u8]>`, None"), (true, "  same, `finished` given (1/3 finished)")] {
        let twin_finished = if given { fp } else { null };
        let ours_finished: Option<&dyn ferrocuda::DeviceRead<u8>> = if given { Some(&flags) } else { None };
        // SAFETY: as above; `finished` is null or holds `rows` bytes.
        let mut run_twin = || unsafe {
            vt::twin_topk_gating_softmax_64::launch_in(&g.vllm, &g.stream, twin_config, ip, twin_finished, wp, rows as i32, xp, sp, k as i32, 0, 64)
        };
        let launch_ours = |fw: &mut DeviceBuffer<f32>, fi: &mut DeviceBuffer<i32>, fs: &mut DeviceBuffer<i32>| {
            vllm::topk_gating_softmax_64_finished::launch(&g.stream, config, &input, ours_finished, fw, rows as u32, fi, fs, k as u32, 0, 64)
        };
        run_twin()?;
        launch_ours(&mut fw, &mut fi, &mut fs)?;
        g.stream.synchronize()?;
        let (a, b, c) = (tw.to_vec()?, ti.to_vec()?, ts.to_vec()?);
        let (x, y, z) = (fw.to_vec()?, fi.to_vec()?, fs.to_vec()?);
        let same = bits_equal(&a, &x) + bits_equal(&b, &y) + bits_equal(&c, &z);
        let weights_near = a.iter().zip(&x).all(|(p, q)| (p - q).abs() <= 1e-6);
        let host_flags = given.then_some(&flags_host[..64]);
        let (ww, wi, _) = r::topk_gating_softmax_finished(&input_host[..64 * 64], host_flags, 64, k, 0, 64);
        let host_ok = b[..64 * k] == wi[..] && a.iter().zip(&ww).all(|(p, q)| (p - q).abs() <= 1e-6);
        let times = g.bench(&mut [&mut run_twin, &mut || launch_ours(&mut fw, &mut fi, &mut fs)])?;
        rows_out.push(Row {
            kernel: label,
            shape: format!("{rows} tokens, 64 experts, k {k}"),
            correct: b == y && c == z && weights_near && host_ok,
            note: format!("{same}/{} output values bit-equal to nvcc; nvcc vs host: {host_ok}", 3 * rows * k),
            twin_ms: times[0],
            first_ms: times[1],
            fixed_ms: None,
            unsafe_needed: false,
        });
    }
    Ok(rows_out)
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ports5_bench: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let twins = std::env::args().nth(1).unwrap_or_else(|| "twins".into());
    let context = match Context::primary(0) {
        Ok(c) => c,
        Err(e @ (Error::NoDriver | Error::NoDevice { .. })) => {
            if ferrocuda_test_support::gpu_required() {
                return Err(format!("REQUIRE_GPU=1 but no GPU: {e}").into());
            }
            println!("SKIPPED ports5_bench: no GPU ({e})");
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    let load = |name: &str| -> Res<Module> {
        let path = format!("{twins}/{name}.cubin");
        let image = std::fs::read(&path).map_err(|e| format!("{path}: {e} (scripts/gpu-run/stage-ports5.sh builds the twins)"))?;
        // SAFETY: the cubin is nvcc's compilation of bench/ports5/cuda/ports5.cu (the stage script).
        Ok(unsafe { Module::load_binary(&context, name, &image, &JitOptions::new()) }?)
    };
    let runs = std::env::var("PORTS5_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
    let g = Gpu {
        stream: Stream::new(&context)?,
        llmc: load("ports5_llmc")?,
        vllm: load("ports5_vllm")?,
        runs,
        start: Event::new(&context)?,
        end: Event::new(&context)?,
        context: context.clone(),
    };
    println!("Each time: median of {runs} launches (CUDA events), interleaved, after 3 warm-up launches each.");
    let mut rows = Vec::new();
    let mut step = |name: &str, r: Res<Row>| match r {
        Ok(row) => {
            println!("check {}: {} ({})", row.kernel, if row.correct { "ok" } else { "MISMATCH" }, row.note);
            rows.push(row);
        }
        Err(e) => println!("FAILED {name}: {e}"),
    };
    step("residual_forward_kernel2", residual_forward(&g));
    {
        let (probs, targets) = probs_and_targets(B * T, V);
        match crossentropy(&g, &probs, &targets) {
            Ok((f, b)) => {
                step("crossentropy_forward_kernel1", Ok(f));
                step("crossentropy_softmax_backward_kernel1", Ok(b));
            }
            Err(e) => println!("FAILED crossentropy: {e}"),
        }
    }
    step("copy_and_cast_kernel", copy_and_cast(&g));
    step("gelu_tanh_and_mul", gelu_tanh_and_mul(&g));
    step("rms_norm_static_fp8_quant", rms_norm_fp8(&g));
    match repetition_penalties(&g) {
        Ok(rs) => rs.into_iter().for_each(|r| step("apply_repetition_penalties", Ok(r))),
        Err(e) => step("apply_repetition_penalties", Err(e)),
    }
    match topk_softmax(&g) {
        Ok(rs) => rs.into_iter().for_each(|r| step("topk_gating_softmax", Ok(r))),
        Err(e) => step("topk_gating_softmax", Err(e)),
    }
    println!();
    println!(
        "{:<40} {:<32} {:>7} {:>10} {:>10} {:>10} {:>11} {:>11} {:>7}",
        "kernel", "shape", "correct", "nvcc ms", "first ms", "fixed ms", "first ratio", "fixed ratio", "unsafe"
    );
    for r in &rows {
        let fixed = r.fixed_ms.map_or("-".to_string(), |t| format!("{t:.4}"));
        let fixed_ratio = r.fixed_ms.map_or("-".to_string(), |t| format!("{:.3}", r.twin_ms / t));
        println!(
            "{:<40} {:<32} {:>7} {:>10.4} {:>10.4} {:>10} {:>11.3} {:>11} {:>7}",
            r.kernel,
            r.shape,
            if r.correct { "y" } else { "n" },
            r.twin_ms,
            r.first_ms,
            fixed,
            r.twin_ms / r.first_ms,
            fixed_ratio,
            if r.unsafe_needed { "y" } else { "n" }
        );
    }
    println!(
        "ratio: nvcc's time over ours (above 1: ours is faster). 'unsafe': whether the port needed `unsafe` (the twins' launches are unsafe: raw pointers)."
    );
    // Eight ports, the three measurement variants of the penalties kernel (`_rowtiles`: the
    // row-tile partition added after the port) and the top-k's two `finished` rows (issue 30,
    // `Option<&[u8]>`, after the port).
    let expected = 13;
    let failed = expected - rows.len().min(expected) + rows.iter().filter(|r| !r.correct).count();
    if failed > 0 {
        return Err(format!("{failed} of {expected} rows failed or did not match").into());
    }
    println!("PASS: every port matches its twin");
    Ok(())
}
