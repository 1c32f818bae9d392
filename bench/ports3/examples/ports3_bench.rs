//! Issue 30's third held-out port on a GPU: each of the eight ported kernels is checked
//! against its CPU reference (tests/common), its CUDA C++ twin (bench/ports3/cuda/ports3.cu,
//! built by nvcc into `<twins>/ports3_llmc.cubin` and `<twins>/ports3_vllm.cubin`) likewise,
//! then both are timed in this process with CUDA events: 2 warm-ups each, then `PORTS3_RUNS`
//! (7) interleaved samples of `PORTS3_REPS` (10) launches, median per side.
//!
//! `cargo run --release -p ferrocuda-ports3 --example ports3_bench -- <twins> [kernel ..]`
//! (kernel names select a subset, for compute-sanitizer); `PORTS3_SMALL=1` shrinks every
//! problem and `PORTS3_RUNS=0` skips the timing (sanitizer runs). Prints "check <kernel> ours|twin: ok ..." (or FAILED) and one
//! table row per kernel with "twin/Rust" (above 1: the Rust port is faster).
//! scripts/gpu-run/ports3.sh runs it.

#[path = "../tests/common/mod.rs"]
mod common;

use common::*;
use cudarc::driver::sys;
use ferrocuda::{Context, DeviceBuffer, Event, Function, JitOptions, LaunchConfig, Module, Stream};
use ferrocuda_ports3 as vllm;
use ferrocuda_ports3_llmc as llmc;
use half::bf16;
use std::ffi::c_void;
use std::num::NonZeroU32;

type R<T> = Result<T, Box<dyn std::error::Error>>;

/// The first `_Z…` symbol of the cubin that names `kernel` (the twins are C++ templates).
fn symbol(image: &[u8], kernel: &str) -> R<String> {
    for s in image.split(|&b| b == 0) {
        if s.starts_with(b"_Z")
            && let Ok(text) = std::str::from_utf8(s)
            && text.contains(kernel)
            && !text.starts_with("_Z_")
        {
            return Ok(text.to_string());
        }
    }
    Err(format!("no symbol for {kernel} in the twin cubin").into())
}

struct Twin {
    module: Module,
    image: Vec<u8>,
}

impl Twin {
    fn load(context: &Context, path: &str) -> R<Twin> {
        let image = std::fs::read(path).map_err(|e| format!("{path}: {e} (build the twins with scripts/gpu-run/ports3.sh)"))?;
        // SAFETY: a cubin nvcc built for this GPU from bench/ports3/cuda/ports3.cu.
        let module = unsafe { Module::load_binary(context, path, &image, &JitOptions::new()) }?;
        Ok(Twin { module, image })
    }
    fn function(&self, kernel: &str) -> R<Function> {
        Ok(self.module.function(&symbol(&self.image, kernel)?)?)
    }
}

/// Launches a twin with raw parameters (each a pointer to the value, as `cuLaunchKernel` wants).
fn launch_twin(stream: &Stream, f: &Function, grid: (u32, u32), block: u32, shared: u32, params: &mut [*mut c_void]) {
    stream
        .enqueue("twin", &[], |raw| {
            // SAFETY: the parameters match the twin's signature (written beside each call) and
            // the buffers they point into outlive the stream's work (the benchmark synchronises).
            let r = unsafe { sys::cuLaunchKernel(f.raw(), grid.0, grid.1, 1, block, 1, 1, shared, raw.get(), params.as_mut_ptr(), std::ptr::null_mut()) };
            assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "twin launch failed: {r:?}");
            Ok::<(), ferrocuda::Error>(())
        })
        .unwrap();
}

macro_rules! p {
    ($($v:expr),* $(,)?) => { [$( &$v as *const _ as *mut c_void ),*] };
}

struct Timer {
    runs: usize,
    reps: usize,
}

impl Timer {
    /// Milliseconds per launch of `f`: `reps` launches between two events (or, with `pre`, one
    /// event pair per launch and `pre` outside them).
    fn sample(&self, context: &Context, stream: &Stream, f: &mut dyn FnMut(), pre: &mut dyn FnMut(), per_launch: bool) -> R<f32> {
        let (a, b) = (Event::new(context)?, Event::new(context)?);
        match per_launch {
            false => {
                a.record(stream)?;
                for _ in 0..self.reps {
                    f();
                }
                b.record(stream)?;
                b.synchronize()?;
                Ok(a.elapsed_ms(&b)? / self.reps as f32)
            }
            true => {
                let mut total = 0.0;
                for _ in 0..self.reps {
                    pre();
                    a.record(stream)?;
                    f();
                    b.record(stream)?;
                    b.synchronize()?;
                    total += a.elapsed_ms(&b)?;
                }
                Ok(total / self.reps as f32)
            }
        }
    }

    fn pair(
        &self,
        context: &Context,
        stream: &Stream,
        ours: &mut dyn FnMut(),
        twin: &mut dyn FnMut(),
        twin_pre: &mut dyn FnMut(),
        per_launch: bool,
    ) -> R<(f32, f32)> {
        let mut no_pre = || {};
        for _ in 0..2 {
            ours();
            twin_pre();
            twin();
        }
        stream.synchronize()?;
        // `PORTS3_RUNS=0` (the sanitizer runs): the warm-ups above ran both kernels; nothing is
        // timed. (Before, the median of no samples panicked after the first kernel, so the
        // sanitizers saw only `encoder_forward_kernel3`.)
        if self.runs == 0 {
            return Ok((f32::NAN, f32::NAN));
        }
        let (mut o, mut t) = (vec![], vec![]);
        for r in 0..self.runs {
            let ours_first = r % 2 == 0;
            for side in 0..2 {
                if (side == 0) == ours_first {
                    o.push(self.sample(context, stream, ours, &mut no_pre, per_launch)?);
                } else {
                    t.push(self.sample(context, stream, twin, twin_pre, per_launch)?);
                }
            }
        }
        let median = |v: &mut Vec<f32>| {
            v.sort_by(f32::total_cmp);
            v[v.len() / 2]
        };
        Ok((median(&mut o), median(&mut t)))
    }
}

fn report(name: &str, size: &str, (ours, twin): (f32, f32)) {
    println!("{name:<44} {size:<28} Rust {:>9.4} ms   twin {:>9.4} ms   twin/Rust {:>6.3}", ours, twin, twin / ours);
}

fn check(name: &str, side: &str, (err, at): (f32, usize), limit: f32) -> bool {
    let ok = err <= limit;
    println!("check {name} {side}: {} (max rel err {err:.2e} at {at}, limit {limit:.1e})", if ok { "ok" } else { "FAILED" });
    ok
}

fn x128(v: &[bf16]) -> Vec<llmc::X128> {
    v.chunks(8).map(|c| llmc::X128 { v: c.try_into().unwrap() }).collect()
}
fn v128(v: &[bf16]) -> Vec<vllm::X128> {
    v.chunks(8).map(|c| vllm::X128 { v: c.try_into().unwrap() }).collect()
}
fn pairs(v: &[bf16]) -> Vec<u32> {
    v.chunks(2).map(|p| p[0].to_bits() as u32 | (p[1].to_bits() as u32) << 16).collect()
}
fn unpair(v: &[u32]) -> Vec<f32> {
    v.iter().flat_map(|&w| [bf16::from_bits(w as u16).to_f32(), bf16::from_bits((w >> 16) as u16).to_f32()]).collect()
}
fn fl<T: Copy>(v: &[T], g: impl Fn(T) -> f32) -> Vec<f32> {
    v.iter().map(|&x| g(x)).collect()
}

fn main() {
    if let Err(e) = run() {
        eprintln!("ports3_bench: {e}");
        std::process::exit(1);
    }
}

fn run() -> R<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(twins) = args.first() else { return Err("usage: ports3_bench <twins folder> [kernel ..]".into()) };
    let only: Vec<&str> = args[1..].iter().map(|s| s.as_str()).collect();
    let want = |k: &str| only.is_empty() || only.iter().any(|o| k.contains(o));
    let small = std::env::var("PORTS3_SMALL").is_ok();
    let env = |k: &str, d: usize| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    let timer = Timer { runs: env("PORTS3_RUNS", 7), reps: env("PORTS3_REPS", 10) };

    let context = Context::primary(0)?;
    let stream = Stream::new(&context)?;
    let sms = context.device().multiprocessor_count()?;
    println!("device: {} SMs; small sizes: {small}; {} runs of {} launches, median", sms, timer.runs, timer.reps);
    let tl = Twin::load(&context, &format!("{twins}/ports3_llmc.cubin"))?;
    let tv = Twin::load(&context, &format!("{twins}/ports3_vllm.cubin"))?;
    let mut failed = 0;
    let mut rng = Rng::new(42);

    // ---- encoder_forward_kernel3
    if want("encoder_forward_kernel3") {
        let (b, t, c, vocab) = if small { (2, 64, 768, 1000) } else { (8, 1024, 768, 50257) };
        let inp: Vec<i32> = (0..b * t).map(|_| (rng.next_u32() % vocab as u32) as i32).collect();
        let wte = rng.bf16s(vocab * c, 1.0);
        let wpe = rng.bf16s(t * c, 1.0);
        let want_out = encoder_forward(&inp, &wte, &wpe, t, c);
        let d_inp = DeviceBuffer::from_slice(&context, &inp)?;
        let d_wte = DeviceBuffer::from_slice(&context, &x128(&wte))?;
        let d_wpe = DeviceBuffer::from_slice(&context, &x128(&wpe))?;
        let mut ours = DeviceBuffer::<llmc::X128>::zeroed(&context, b * t * c / 8)?;
        let twin_out = DeviceBuffer::<bf16>::zeroed(&context, b * t * c)?;
        let n = (b * t * c) as u32;
        let config = LaunchConfig::new(n.div_ceil(256 * 8), 256);
        let (tn, c8) = (NonZeroU32::new(t as u32).unwrap(), NonZeroU32::new(c as u32 / 8).unwrap());
        let f = tl.function("encoder_forward_kernel3")?;
        let (po, pi, pw, pp) = (twin_out.device_ptr(), d_inp.device_ptr(), d_wte.device_ptr(), d_wpe.device_ptr());
        let (bb, tt, cc) = (b as i32, t as i32, c as i32);
        {
            llmc::encoder_forward_kernel3::launch(&stream, config, &mut ours, &d_inp, &d_wte, &d_wpe, tn, c8).unwrap();
        }
        {
            launch_twin(&stream, &f, (n.div_ceil(256 * 8), 1), 256, 0, &mut p![po, pi, pw, pp, bb, tt, cc]);
        }
        stream.synchronize()?;
        let w = fl(&want_out, bf16::to_f32);
        let got: Vec<f32> = ours.to_vec()?.iter().flat_map(|x| x.v).map(bf16::to_f32).collect();
        failed += !check("encoder_forward_kernel3", "ours", max_rel(got, w.clone(), 1e-3), 0.0) as i32;
        failed += !check("encoder_forward_kernel3", "twin", max_rel(fl(&twin_out.to_vec()?, bf16::to_f32), w, 1e-3), 0.0) as i32;
        let mut run_ours = || llmc::encoder_forward_kernel3::launch(&stream, config, &mut ours, &d_inp, &d_wte, &d_wpe, tn, c8).unwrap();
        let mut run_twin = || launch_twin(&stream, &f, (n.div_ceil(256 * 8), 1), 256, 0, &mut p![po, pi, pw, pp, bb, tt, cc]);
        report("encoder_forward_kernel3", &format!("B{b} T{t} C{c}"), timer.pair(&context, &stream, &mut run_ours, &mut run_twin, &mut || {}, false)?);
    }

    // ---- global_norm_squared_kernel
    if want("global_norm_squared_kernel") {
        let (count, slices) = if small { (100_000usize, 2usize) } else { (8 << 20, 2) };
        let stride = count + 64;
        let data = rng.bf16s(stride * slices, 1.0);
        let grid_size = 2048 * sms / 512;
        let (gx, gy) = (grid_size.div_ceil(slices as u32), slices as u32);
        let d_data = DeviceBuffer::from_slice(&context, &data)?;
        let mut ours = DeviceBuffer::<f32>::zeroed(&context, (gx * gy) as usize)?;
        let twin_out = DeviceBuffer::<f32>::zeroed(&context, (gx * gy) as usize)?;
        let config = LaunchConfig::new((gx, gy), 512);
        let f = tl.function("global_norm_squared_kernel")?;
        let (po, pd, pc, ps) = (twin_out.device_ptr(), d_data.device_ptr(), count as u64, stride as i64);
        {
            llmc::global_norm_squared_kernel::launch(&stream, config, &mut ours, &d_data, count as u64, stride as u64).unwrap();
        }
        {
            launch_twin(&stream, &f, (gx, gy), 512, 0, &mut p![po, pd, pc, ps]);
        }
        stream.synchronize()?;
        let want_n = norm_squared(&data, count, stride, slices);
        let per_slice = |v: Vec<f32>| -> Vec<f32> {
            (0..slices).map(|y| v[y * gx as usize..(y + 1) * gx as usize].iter().map(|&a| a as f64).sum::<f64>() as f32).collect()
        };
        let w: Vec<f32> = want_n.iter().map(|&v| v as f32).collect();
        failed += !check("global_norm_squared_kernel", "ours", max_rel(per_slice(ours.to_vec()?), w.clone(), 0.0), 1e-4) as i32;
        failed += !check("global_norm_squared_kernel", "twin", max_rel(per_slice(twin_out.to_vec()?), w.clone(), 0.0), 1e-4) as i32;
        let mut run_ours = || llmc::global_norm_squared_kernel::launch(&stream, config, &mut ours, &d_data, count as u64, stride as u64).unwrap();
        let mut run_twin = || launch_twin(&stream, &f, (gx, gy), 512, 0, &mut p![po, pd, pc, ps]);
        report(
            "global_norm_squared_kernel",
            &format!("{slices} x {count} bf16"),
            timer.pair(&context, &stream, &mut run_ours, &mut run_twin, &mut || {}, false)?,
        );
        // The fix round's variant against the same twin.
        let mut fixed = DeviceBuffer::<f32>::zeroed(&context, (gx * gy) as usize)?;
        llmc::global_norm_squared_kernel_fixed::launch(&stream, config, &mut fixed, &d_data, count as u64, stride as u64)?;
        stream.synchronize()?;
        failed += !check("global_norm_squared_kernel (fixed)", "ours", max_rel(per_slice(fixed.to_vec()?), w, 0.0), 1e-4) as i32;
        let mut run_fixed = || llmc::global_norm_squared_kernel_fixed::launch(&stream, config, &mut fixed, &d_data, count as u64, stride as u64).unwrap();
        report(
            "global_norm_squared_kernel (fixed)",
            &format!("{slices} x {count} bf16"),
            timer.pair(&context, &stream, &mut run_fixed, &mut run_twin, &mut || {}, false)?,
        );
    }

    // ---- softmax_forward_kernel5
    if want("softmax_forward_kernel5") {
        let (n, t) = if small { (2usize, 256usize) } else { (48, 1024) };
        let inp = rng.bf16s(n * t * t, 4.0);
        let inv_temperature = 1.0 / 8.0f32;
        let mut want_out = vec![bf16::ZERO; n * t * t];
        causal_softmax(&inp, &mut want_out, inv_temperature, t);
        let inp4: Vec<llmc::X4> = inp.chunks(4).map(|c| llmc::X4 { v: c.try_into().unwrap() }).collect();
        let d_inp4 = DeviceBuffer::from_slice(&context, &inp4)?;
        let mut ours = DeviceBuffer::<bf16>::zeroed(&context, n * t * t)?;
        let twin_out = DeviceBuffer::<bf16>::zeroed(&context, n * t * t)?;
        let grid = ((n * t * 32) as u32).div_ceil(256);
        let config = LaunchConfig::new(grid, 256);
        let f = tl.function("softmax_forward_kernel5")?;
        let (po, pi, nn, tt) = (twin_out.device_ptr(), d_inp4.device_ptr(), n as i32, t as i32);
        {
            llmc::softmax_forward_kernel5::launch(&stream, config, &mut ours, inv_temperature, &d_inp4, t as u32).unwrap();
        }
        {
            launch_twin(&stream, &f, (grid, 1), 256, 0, &mut p![po, inv_temperature, pi, nn, tt]);
        }
        stream.synchronize()?;
        let w = fl(&want_out, bf16::to_f32);
        failed += !check("softmax_forward_kernel5", "ours", max_rel(fl(&ours.to_vec()?, bf16::to_f32), w.clone(), 1e-3), 1.0 / 64.0) as i32;
        failed += !check("softmax_forward_kernel5", "twin", max_rel(fl(&twin_out.to_vec()?, bf16::to_f32), w.clone(), 1e-3), 1.0 / 64.0) as i32;
        let mut run_ours = || llmc::softmax_forward_kernel5::launch(&stream, config, &mut ours, inv_temperature, &d_inp4, t as u32).unwrap();
        let mut run_twin = || launch_twin(&stream, &f, (grid, 1), 256, 0, &mut p![po, inv_temperature, pi, nn, tt]);
        report("softmax_forward_kernel5", &format!("N{n} T{t}"), timer.pair(&context, &stream, &mut run_ours, &mut run_twin, &mut || {}, false)?);
        let mut fixed = DeviceBuffer::<bf16>::zeroed(&context, n * t * t)?;
        llmc::softmax_forward_kernel5_fixed::launch(&stream, config, &mut fixed, inv_temperature, &d_inp4, t as u32)?;
        stream.synchronize()?;
        failed += !check("softmax_forward_kernel5 (fixed)", "ours", max_rel(fl(&fixed.to_vec()?, bf16::to_f32), w.clone(), 1e-3), 1.0 / 64.0) as i32;
        let mut run_fixed = || llmc::softmax_forward_kernel5_fixed::launch(&stream, config, &mut fixed, inv_temperature, &d_inp4, t as u32).unwrap();
        report("softmax_forward_kernel5 (fixed)", &format!("N{n} T{t}"), timer.pair(&context, &stream, &mut run_fixed, &mut run_twin, &mut || {}, false)?);
        // Session 14: the write pass as `zip_input` over the causal prefix (one exit, unrolled).
        let mut prefix = DeviceBuffer::<bf16>::zeroed(&context, n * t * t)?;
        llmc::softmax_forward_kernel5_prefix::launch(&stream, config, &mut prefix, inv_temperature, &d_inp4, t as u32)?;
        stream.synchronize()?;
        failed += !check("softmax_forward_kernel5 (prefix)", "ours", max_rel(fl(&prefix.to_vec()?, bf16::to_f32), w, 1e-3), 1.0 / 64.0) as i32;
        let mut run_prefix = || llmc::softmax_forward_kernel5_prefix::launch(&stream, config, &mut prefix, inv_temperature, &d_inp4, t as u32).unwrap();
        report("softmax_forward_kernel5 (prefix)", &format!("N{n} T{t}"), timer.pair(&context, &stream, &mut run_prefix, &mut run_twin, &mut || {}, false)?);
    }

    // ---- fused_classifier_kernel5
    if want("fused_classifier_kernel5") {
        // Small: V 8191, P 8192. llm.c's `prepare_softmax_blockwide3` assumes `V >= 8 blockDim.x
        // - 7` (its real V, 50257, is far above): it starts thread `t` at `i = ceil(V / 8) + t -
        // blockDim.x`, and its `while ((i + 1) * x128::size > V)` multiplies by a `size_t`, so a
        // negative `i` (V 1003 at 1024 threads) is a huge unsigned product and the loop only
        // ends if `i`, stepping down by 1024 through the wrap of `int`, lands in -1..=V/8
        // (residue classes that never do spin forever). So the nvcc twin never returned at V
        // 1003 (session 13: P 1008, and P 1024 under compute-sanitizer). 8191 keeps an
        // unaligned tail of 7 and every thread's first `i` at or above 0.
        let (rows, v, p) = if small { (8usize, 8191usize, 8192usize) } else { (1024, 50257, 50304) };
        assert!(v + 7 >= 8 * 1024, "llm.c's prepare_softmax_blockwide3 loops forever unless V >= 8 blockDim.x - 7");
        let logits = rng.bf16s(rows * p, 6.0);
        let targets: Vec<i32> = (0..rows).map(|_| (rng.next_u32() % v as u32) as i32).collect();
        let dloss = 1.0 / rows as f32;
        let mut want_losses = vec![0.0f32; rows];
        let mut want_d = vec![bf16::ZERO; rows * p];
        fused_classifier(&logits, &mut want_losses, &mut want_d, dloss, &targets, v, p);
        let d_logits = DeviceBuffer::from_slice(&context, &x128(&logits))?;
        let d_targets = DeviceBuffer::from_slice(&context, &targets)?;
        let mut ours = DeviceBuffer::<llmc::X128>::zeroed(&context, rows * p / 8)?;
        let mut losses = DeviceBuffer::<f32>::zeroed(&context, rows)?;
        let twin_logits = DeviceBuffer::from_slice(&context, &logits)?;
        let twin_losses = DeviceBuffer::<f32>::zeroed(&context, rows)?;
        let config = LaunchConfig::new(rows as u32, 1024);
        let f = tl.function("fused_classifier_kernel5")?;
        let (pl, pls, probs, pt) = (twin_logits.device_ptr(), twin_losses.device_ptr(), 0u64, d_targets.device_ptr());
        let (bb, tt, vv, pp, flag) = (1i32, rows as i32, v as i32, p as i32, 0u8);
        // Each side waited for on its own, with a line before and after (at session 13's small
        // size, V 1003, the twin did not return; the lines say which kernel to look at).
        eprintln!("fused_classifier_kernel5: ours launched (rows {rows}, V {v}, P {p})");
        llmc::fused_classifier_kernel5::launch(&stream, config, &d_logits, &mut ours, &mut losses, dloss, &d_targets, v as u32, p as u32 / 8).unwrap();
        stream.synchronize()?;
        eprintln!("fused_classifier_kernel5: ours done; twin launched");
        launch_twin(&stream, &f, (rows as u32, 1), 1024, 0, &mut p![pl, pls, probs, dloss, pt, bb, tt, vv, pp, flag]);
        stream.synchronize()?;
        eprintln!("fused_classifier_kernel5: twin done");
        let mask = |d: Vec<f32>| -> Vec<f32> { d.chunks(p).flat_map(|r| r[..v].to_vec()).collect() };
        let w = mask(fl(&want_d, bf16::to_f32));
        let got: Vec<f32> = ours.to_vec()?.iter().flat_map(|x| x.v).map(bf16::to_f32).collect();
        failed += !check("fused_classifier_kernel5", "ours", max_rel(mask(got), w.clone(), 1e-5), 1.0 / 32.0) as i32;
        failed += !check("fused_classifier_kernel5", "twin", max_rel(mask(fl(&twin_logits.to_vec()?, bf16::to_f32)), w.clone(), 1e-5), 1.0 / 32.0) as i32;
        failed += !check("fused_classifier_kernel5 losses", "ours", max_rel(losses.to_vec()?, want_losses.clone(), 1e-3), 1e-3) as i32;
        failed += !check("fused_classifier_kernel5 losses", "twin", max_rel(twin_losses.to_vec()?, want_losses.clone(), 1e-3), 1e-3) as i32;
        let mut run_ours =
            || llmc::fused_classifier_kernel5::launch(&stream, config, &d_logits, &mut ours, &mut losses, dloss, &d_targets, v as u32, p as u32 / 8).unwrap();
        let mut run_twin = || launch_twin(&stream, &f, (rows as u32, 1), 1024, 0, &mut p![pl, pls, probs, dloss, pt, bb, tt, vv, pp, flag]);
        report("fused_classifier_kernel5", &format!("BT{rows} V{v} P{p}"), timer.pair(&context, &stream, &mut run_ours, &mut run_twin, &mut || {}, false)?);
        // The fix round's variant: in place (the logits row read whole, then overwritten with
        // the gradient), rows in reverse block order.
        let mut f_logits = DeviceBuffer::from_slice(&context, &x128(&logits))?;
        let mut f_losses = DeviceBuffer::<f32>::zeroed(&context, rows)?;
        llmc::fused_classifier_kernel5_fixed::launch(&stream, config, &mut f_logits, &mut f_losses, dloss, &d_targets, v as u32, p as u32 / 8)?;
        stream.synchronize()?;
        let got: Vec<f32> = f_logits.to_vec()?.iter().flat_map(|x| x.v).map(bf16::to_f32).collect();
        failed += !check("fused_classifier_kernel5 (fixed)", "ours", max_rel(mask(got), w.clone(), 1e-5), 1.0 / 32.0) as i32;
        failed += !check("fused_classifier_kernel5 (fixed) losses", "ours", max_rel(f_losses.to_vec()?, want_losses.clone(), 1e-3), 1e-3) as i32;
        let mut run_fixed =
            || llmc::fused_classifier_kernel5_fixed::launch(&stream, config, &mut f_logits, &mut f_losses, dloss, &d_targets, v as u32, p as u32 / 8).unwrap();
        report(
            "fused_classifier_kernel5 (fixed)",
            &format!("BT{rows} V{v} P{p}"),
            timer.pair(&context, &stream, &mut run_fixed, &mut run_twin, &mut || {}, false)?,
        );
        // Session 14: the fixed variant with its two block reductions as one paired call
        // (`max_then_sum_all`: llm.c's 2 barriers).
        let mut p_logits = DeviceBuffer::from_slice(&context, &x128(&logits))?;
        let mut p_losses = DeviceBuffer::<f32>::zeroed(&context, rows)?;
        llmc::fused_classifier_kernel5_paired::launch(&stream, config, &mut p_logits, &mut p_losses, dloss, &d_targets, v as u32, p as u32 / 8)?;
        stream.synchronize()?;
        let got: Vec<f32> = p_logits.to_vec()?.iter().flat_map(|x| x.v).map(bf16::to_f32).collect();
        failed += !check("fused_classifier_kernel5 (paired)", "ours", max_rel(mask(got), w, 1e-5), 1.0 / 32.0) as i32;
        failed += !check("fused_classifier_kernel5 (paired) losses", "ours", max_rel(p_losses.to_vec()?, want_losses, 1e-3), 1e-3) as i32;
        let mut run_paired =
            || llmc::fused_classifier_kernel5_paired::launch(&stream, config, &mut p_logits, &mut p_losses, dloss, &d_targets, v as u32, p as u32 / 8).unwrap();
        report(
            "fused_classifier_kernel5 (paired)",
            &format!("BT{rows} V{v} P{p}"),
            timer.pair(&context, &stream, &mut run_paired, &mut run_twin, &mut || {}, false)?,
        );
    }

    // ---- layernorm_backward_kernel10
    if want("layernorm_backward_kernel10") {
        let c = 768usize;
        let (grid, block) = (if small { 2 } else { 2 * sms }, 512u32);
        let rows = (grid * block / 32) as usize * 2;
        let dout = rng.bf16s(rows * c, 1.0);
        let inp = rng.bf16s(rows * c, 2.0);
        let weight = rng.bf16s(c, 1.0);
        let dinp = rng.bf16s(rows * c, 0.5);
        let dbias = rng.bf16s(c, 0.5);
        let dweight = rng.bf16s(c, 0.5);
        let mean: Vec<f32> = (0..rows).map(|_| rng.uniform() * 0.1).collect();
        let rstd: Vec<f32> = (0..rows).map(|_| 1.0 + rng.uniform() * 0.2).collect();
        let want_ln = layernorm_backward(&dinp, &dbias, &dweight, &dout, &inp, &weight, &mean, &rstd, c);
        let rounded_c = c.div_ceil(256) * 256;
        let shared = ((2 * rounded_c + 2 * (block as usize - 32) * 4) * 4) as u32;
        let (d_dout, d_inp, d_weight) = (
            DeviceBuffer::from_slice(&context, &x128(&dout))?,
            DeviceBuffer::from_slice(&context, &x128(&inp))?,
            DeviceBuffer::from_slice(&context, &x128(&weight))?,
        );
        let (d_mean, d_rstd) = (DeviceBuffer::from_slice(&context, &mean)?, DeviceBuffer::from_slice(&context, &rstd)?);
        let mut o_dinp = DeviceBuffer::from_slice(&context, &x128(&dinp))?;
        let mut o_dbias = DeviceBuffer::from_slice(&context, &pairs(&dbias))?;
        let mut o_dweight = DeviceBuffer::from_slice(&context, &pairs(&dweight))?;
        let mut o_scratch = DeviceBuffer::<llmc::Partial>::zeroed(&context, grid as usize * c / 4)?;
        let mut o_counter = DeviceBuffer::<u32>::zeroed(&context, 1)?;
        let t_dinp = DeviceBuffer::from_slice(&context, &dinp)?;
        let t_dbias = DeviceBuffer::from_slice(&context, &dbias)?;
        let t_dweight = DeviceBuffer::from_slice(&context, &dweight)?;
        let mut t_scratch = DeviceBuffer::<f32>::zeroed(&context, 32 + 2 * c * grid as usize)?;
        let config = LaunchConfig::new(grid, block).with_shared_bytes(shared);
        let f = tl.function("layernorm_backward_kernel10")?;
        let ps = (t_dinp.device_ptr(), t_dweight.device_ptr(), t_dbias.device_ptr(), t_scratch.device_ptr());
        let pi = (d_dout.device_ptr(), d_inp.device_ptr(), d_weight.device_ptr(), d_mean.device_ptr(), d_rstd.device_ptr());
        let (bb, tt, cc) = (1i32, rows as i32, c as i32);
        llmc::layernorm_backward_kernel10::launch(
            &stream,
            config,
            &mut o_dinp,
            &mut o_dweight,
            &mut o_dbias,
            &mut o_scratch,
            &mut o_counter,
            &d_dout,
            &d_inp,
            &d_weight,
            &d_mean,
            &d_rstd,
            rows as u32,
            c as u32 / 8,
            c as u32 / 4,
        )
        .unwrap();
        t_scratch.fill(0.0)?;
        {
            launch_twin(&stream, &f, (grid, 1), block, shared, &mut p![ps.0, ps.1, ps.2, ps.3, pi.0, pi.1, pi.2, pi.3, pi.4, bb, tt, cc]);
        }
        stream.synchronize()?;
        let got_dinp: Vec<f32> = o_dinp.to_vec()?.iter().flat_map(|x| x.v).map(bf16::to_f32).collect();
        failed += !check("layernorm_backward_kernel10 dinp", "ours", max_rel(got_dinp, want_ln.dinp.clone(), 0.1), 1.0 / 64.0) as i32;
        failed +=
            !check("layernorm_backward_kernel10 dinp", "twin", max_rel(fl(&t_dinp.to_vec()?, bf16::to_f32), want_ln.dinp.clone(), 0.1), 1.0 / 64.0) as i32;
        let db_floor = rows as f32 / 8.0;
        failed += !check("layernorm_backward_kernel10 dbias", "ours", max_rel(unpair(&o_dbias.to_vec()?), want_ln.dbias.clone(), db_floor), 1.0 / 64.0) as i32;
        failed +=
            !check("layernorm_backward_kernel10 dbias", "twin", max_rel(fl(&t_dbias.to_vec()?, bf16::to_f32), want_ln.dbias.clone(), db_floor), 1.0 / 64.0)
                as i32;
        failed +=
            !check("layernorm_backward_kernel10 dweight", "ours", max_rel(unpair(&o_dweight.to_vec()?), want_ln.dweight.clone(), db_floor), 1.0 / 64.0) as i32;
        failed += !check(
            "layernorm_backward_kernel10 dweight",
            "twin",
            max_rel(fl(&t_dweight.to_vec()?, bf16::to_f32), want_ln.dweight.clone(), db_floor),
            1.0 / 64.0,
        ) as i32;
        let mut run_ours = || {
            llmc::layernorm_backward_kernel10::launch(
                &stream,
                config,
                &mut o_dinp,
                &mut o_dweight,
                &mut o_dbias,
                &mut o_scratch,
                &mut o_counter,
                &d_dout,
                &d_inp,
                &d_weight,
                &d_mean,
                &d_rstd,
                rows as u32,
                c as u32 / 8,
                c as u32 / 4,
            )
            .unwrap()
        };
        let mut run_twin = || launch_twin(&stream, &f, (grid, 1), block, shared, &mut p![ps.0, ps.1, ps.2, ps.3, pi.0, pi.1, pi.2, pi.3, pi.4, bb, tt, cc]);
        let mut reset_flag = || t_scratch.fill(0.0).unwrap(); // llm.c's launcher: cudaMemsetAsync(scratch, 0, 4)
        report(
            "layernorm_backward_kernel10 (1 event pair per launch)",
            &format!("BT{rows} C{c}"),
            timer.pair(&context, &stream, &mut run_ours, &mut run_twin, &mut reset_flag, true)?,
        );
        let mut f_dinp = DeviceBuffer::from_slice(&context, &x128(&dinp))?;
        // The fix round's variant writes dbias/dweight as `x128`s (the last block's write view).
        let mut f_dbias = DeviceBuffer::from_slice(&context, &x128(&dbias))?;
        let mut f_dweight = DeviceBuffer::from_slice(&context, &x128(&dweight))?;
        let mut run_fixed = || {
            llmc::layernorm_backward_kernel10_fixed::launch(
                &stream,
                config,
                &mut f_dinp,
                &mut f_dweight,
                &mut f_dbias,
                &mut o_scratch,
                &mut o_counter,
                &d_dout,
                &d_inp,
                &d_weight,
                &d_mean,
                &d_rstd,
                rows as u32,
                c as u32 / 8,
                c as u32 / 4,
            )
            .unwrap()
        };
        run_fixed();
        stream.synchronize()?;
        let got: Vec<f32> = f_dinp.to_vec()?.iter().flat_map(|x| x.v).map(bf16::to_f32).collect();
        failed += !check("layernorm_backward_kernel10 (fixed) dinp", "ours", max_rel(got, want_ln.dinp.clone(), 0.1), 1.0 / 64.0) as i32;
        let unpack = |v: Vec<llmc::X128>| -> Vec<f32> { v.iter().flat_map(|x| x.v).map(bf16::to_f32).collect() };
        failed +=
            !check("layernorm_backward_kernel10 (fixed) dbias", "ours", max_rel(unpack(f_dbias.to_vec()?), want_ln.dbias.clone(), db_floor), 1.0 / 64.0) as i32;
        failed +=
            !check("layernorm_backward_kernel10 (fixed) dweight", "ours", max_rel(unpack(f_dweight.to_vec()?), want_ln.dweight.clone(), db_floor), 1.0 / 64.0)
                as i32;
        let mut run_fixed = || {
            llmc::layernorm_backward_kernel10_fixed::launch(
                &stream,
                config,
                &mut f_dinp,
                &mut f_dweight,
                &mut f_dbias,
                &mut o_scratch,
                &mut o_counter,
                &d_dout,
                &d_inp,
                &d_weight,
                &d_mean,
                &d_rstd,
                rows as u32,
                c as u32 / 8,
                c as u32 / 4,
            )
            .unwrap()
        };
        report(
            "layernorm_backward_kernel10 (fixed) (1 event pair per launch)",
            &format!("BT{rows} C{c}"),
            timer.pair(&context, &stream, &mut run_fixed, &mut run_twin, &mut reset_flag, true)?,
        );
        // Session 15: the fixed variant over `f128` shared regions (`dynamic_shared_x4().carve`).
        let mut r_dinp = DeviceBuffer::from_slice(&context, &x128(&dinp))?;
        let mut r_dbias = DeviceBuffer::from_slice(&context, &x128(&dbias))?;
        let mut r_dweight = DeviceBuffer::from_slice(&context, &x128(&dweight))?;
        // The same call as `run_regions` below (a closure holding the buffers would keep them
        // borrowed through the checks).
        llmc::layernorm_backward_kernel10_regions::launch(
            &stream,
            config,
            &mut r_dinp,
            &mut r_dweight,
            &mut r_dbias,
            &mut o_scratch,
            &mut o_counter,
            &d_dout,
            &d_inp,
            &d_weight,
            &d_mean,
            &d_rstd,
            rows as u32,
            c as u32 / 8,
            c as u32 / 4,
        )
        .unwrap();
        stream.synchronize()?;
        let got: Vec<f32> = r_dinp.to_vec()?.iter().flat_map(|x| x.v).map(bf16::to_f32).collect();
        failed += !check("layernorm_backward_kernel10 (regions) dinp", "ours", max_rel(got, want_ln.dinp.clone(), 0.1), 1.0 / 64.0) as i32;
        failed += !check("layernorm_backward_kernel10 (regions) dbias", "ours", max_rel(unpack(r_dbias.to_vec()?), want_ln.dbias.clone(), db_floor), 1.0 / 64.0)
            as i32;
        failed += !check(
            "layernorm_backward_kernel10 (regions) dweight",
            "ours",
            max_rel(unpack(r_dweight.to_vec()?), want_ln.dweight.clone(), db_floor),
            1.0 / 64.0,
        ) as i32;
        let mut run_regions = || {
            llmc::layernorm_backward_kernel10_regions::launch(
                &stream,
                config,
                &mut r_dinp,
                &mut r_dweight,
                &mut r_dbias,
                &mut o_scratch,
                &mut o_counter,
                &d_dout,
                &d_inp,
                &d_weight,
                &d_mean,
                &d_rstd,
                rows as u32,
                c as u32 / 8,
                c as u32 / 4,
            )
            .unwrap()
        };
        report(
            "layernorm_backward_kernel10 (regions) (1 event pair per launch)",
            &format!("BT{rows} C{c}"),
            timer.pair(&context, &stream, &mut run_regions, &mut run_twin, &mut reset_flag, true)?,
        );
    }

    // ---- merge_attn_states_kernel
    if want("merge_attn_states_kernel") {
        let (n, h, d) = if small { (64usize, 8usize, 128usize) } else { (4096, 32, 128) };
        let p_out = rng.bf16s(n * h * d, 1.0);
        let s_out = rng.bf16s(n * h * d, 1.0);
        let mut p_lse: Vec<f32> = (0..h * n).map(|_| rng.uniform() * 5.0).collect();
        let s_lse: Vec<f32> = (0..h * n).map(|_| rng.uniform() * 5.0).collect();
        p_lse[3] = f32::INFINITY;
        let (want_o, want_lse) = merge_attn_states(&p_out, &p_lse, &s_out, &s_lse, n, h, d);
        let (d_po, d_so) = (DeviceBuffer::from_slice(&context, &v128(&p_out))?, DeviceBuffer::from_slice(&context, &v128(&s_out))?);
        let (d_pl, d_sl) = (DeviceBuffer::from_slice(&context, &p_lse)?, DeviceBuffer::from_slice(&context, &s_lse)?);
        let mut ours = DeviceBuffer::<vllm::X128>::zeroed(&context, n * h * d / 8)?;
        let mut ours_lse = DeviceBuffer::<f32>::zeroed(&context, h * n)?;
        let twin_out = DeviceBuffer::<bf16>::zeroed(&context, n * h * d)?;
        let twin_lse = DeviceBuffer::<f32>::zeroed(&context, h * n)?;
        let threads = (n * h * d / 8) as u32;
        let config = LaunchConfig::new(threads.div_ceil(128), 128);
        let f = tv.function("merge_attn_states_kernel")?;
        let pp = (twin_out.device_ptr(), twin_lse.device_ptr(), d_po.device_ptr(), d_pl.device_ptr(), d_so.device_ptr(), d_sl.device_ptr());
        let (nn, hh, dd) = (n as u32, h as u32, d as u32);
        {
            vllm::merge_attn_states_kernel::launch(&stream, config, &mut ours, &mut ours_lse, &d_po, &d_pl, &d_so, &d_sl, nn, hh, dd).unwrap();
        }
        {
            launch_twin(&stream, &f, (threads.div_ceil(128), 1), 128, 0, &mut p![pp.0, pp.1, pp.2, pp.3, pp.4, pp.5, nn, hh, dd]);
        }
        stream.synchronize()?;
        let got: Vec<f32> = ours.to_vec()?.iter().flat_map(|x| x.v).map(bf16::to_f32).collect();
        failed += !check("merge_attn_states_kernel", "ours", max_rel(got, want_o.clone(), 0.05), 1.0 / 64.0) as i32;
        failed += !check("merge_attn_states_kernel", "twin", max_rel(fl(&twin_out.to_vec()?, bf16::to_f32), want_o, 0.05), 1.0 / 64.0) as i32;
        failed += !check("merge_attn_states_kernel lse", "ours", max_rel(ours_lse.to_vec()?, want_lse.clone(), 1e-3), 1e-4) as i32;
        failed += !check("merge_attn_states_kernel lse", "twin", max_rel(twin_lse.to_vec()?, want_lse, 1e-3), 1e-4) as i32;
        let mut run_ours =
            || vllm::merge_attn_states_kernel::launch(&stream, config, &mut ours, &mut ours_lse, &d_po, &d_pl, &d_so, &d_sl, nn, hh, dd).unwrap();
        let mut run_twin = || launch_twin(&stream, &f, (threads.div_ceil(128), 1), 128, 0, &mut p![pp.0, pp.1, pp.2, pp.3, pp.4, pp.5, nn, hh, dd]);
        report("merge_attn_states_kernel", &format!("n{n} h{h} d{d}"), timer.pair(&context, &stream, &mut run_ours, &mut run_twin, &mut || {}, false)?);
    }

    // ---- reshape_and_cache_flash_kernel
    if want("reshape_and_cache_flash_kernel") {
        let (tokens, heads, head_size, block_size) = if small { (64usize, 8usize, 128usize, 16usize) } else { (4096, 8, 128, 16) };
        let blocks = 2 * tokens / block_size;
        let n = heads * head_size;
        let key = rng.bf16s(tokens * n, 1.0);
        let value = rng.bf16s(tokens * n, 1.0);
        let mut free: Vec<i64> = (0..(blocks * block_size) as i64).collect();
        let slots: Vec<i64> = (0..tokens).map(|i| if i % 97 == 5 { -1 } else { free.swap_remove(rng.next_u32() as usize % free.len()) }).collect();
        let cache_len = blocks * block_size * n;
        let mut wk = vec![bf16::ZERO; cache_len];
        let mut wv = vec![bf16::ZERO; cache_len];
        reshape_and_cache_flash(&key, &value, &mut wk, &mut wv, &slots, n);
        let d_key = DeviceBuffer::from_slice(&context, &key)?;
        let d_value = DeviceBuffer::from_slice(&context, &value)?;
        let d_slots = DeviceBuffer::from_slice(&context, &slots)?;
        let mut ok_c = DeviceBuffer::<u32>::zeroed(&context, cache_len / 2)?;
        let mut ov_c = DeviceBuffer::<u32>::zeroed(&context, cache_len / 2)?;
        let tk_c = DeviceBuffer::<bf16>::zeroed(&context, cache_len)?;
        let tv_c = DeviceBuffer::<bf16>::zeroed(&context, cache_len)?;
        let block = n.min(512) as u32;
        let config = LaunchConfig::new(tokens as u32, block);
        let f = tv.function("reshape_and_cache_flash_kernel")?;
        let pp = (d_key.device_ptr(), d_value.device_ptr(), tk_c.device_ptr(), tv_c.device_ptr(), d_slots.device_ptr());
        let ints = ((block_size * n) as i32, n as i32, n as i32, heads as i32, head_size as i32, block_size as i32, 1.0f32, 1.0f32);
        let (hs, bs) = (NonZeroU32::new(head_size as u32).unwrap(), NonZeroU32::new(block_size as u32).unwrap());
        let key_u32 = d_key.cast::<u32>()?;
        let value_u32 = d_value.cast::<u32>()?;
        vllm::reshape_and_cache_flash_kernel::launch(
            &stream,
            config,
            &key_u32,
            &value_u32,
            &mut ok_c,
            &mut ov_c,
            &d_slots,
            (block_size * n) as u32,
            n as u32,
            n as u32,
            heads as u32,
            hs,
            bs,
        )
        .unwrap();
        {
            launch_twin(
                &stream,
                &f,
                (tokens as u32, 1),
                block,
                0,
                &mut p![pp.0, pp.1, pp.2, pp.3, pp.4, ints.0, ints.1, ints.2, ints.3, ints.4, ints.5, ints.6, ints.7],
            );
        }
        stream.synchronize()?;
        let same = |a: Vec<f32>, b: Vec<f32>| max_rel(a, b, 1.0);
        failed += !check("reshape_and_cache_flash_kernel key", "ours", same(unpair(&ok_c.to_vec()?), fl(&wk, bf16::to_f32)), 0.0) as i32;
        failed += !check("reshape_and_cache_flash_kernel value", "ours", same(unpair(&ov_c.to_vec()?), fl(&wv, bf16::to_f32)), 0.0) as i32;
        failed += !check("reshape_and_cache_flash_kernel key", "twin", same(fl(&tk_c.to_vec()?, bf16::to_f32), fl(&wk, bf16::to_f32)), 0.0) as i32;
        failed += !check("reshape_and_cache_flash_kernel value", "twin", same(fl(&tv_c.to_vec()?, bf16::to_f32), fl(&wv, bf16::to_f32)), 0.0) as i32;
        let mut run_ours = || {
            vllm::reshape_and_cache_flash_kernel::launch(
                &stream,
                config,
                &key_u32,
                &value_u32,
                &mut ok_c,
                &mut ov_c,
                &d_slots,
                (block_size * n) as u32,
                n as u32,
                n as u32,
                heads as u32,
                hs,
                bs,
            )
            .unwrap()
        };
        let mut run_twin = || {
            launch_twin(
                &stream,
                &f,
                (tokens as u32, 1),
                block,
                0,
                &mut p![pp.0, pp.1, pp.2, pp.3, pp.4, ints.0, ints.1, ints.2, ints.3, ints.4, ints.5, ints.6, ints.7],
            )
        };
        report(
            "reshape_and_cache_flash_kernel",
            &format!("tokens{tokens} h{heads} d{head_size}"),
            timer.pair(&context, &stream, &mut run_ours, &mut run_twin, &mut || {}, false)?,
        );
    }

    // ---- dynamic_per_token_scaled_fp8_quant_kernel
    if want("dynamic_per_token_scaled_fp8_quant_kernel") {
        let (tokens, hidden) = if small { (16usize, 4096usize) } else { (4096, 4096) };
        let input = rng.bf16s(tokens * hidden, 3.0);
        let (want_s, want_q) = fp8_quant_fast(&input, hidden);
        let d_in = DeviceBuffer::from_slice(&context, &v128(&input))?;
        let mut ours = DeviceBuffer::<vllm::Fp8x16>::zeroed(&context, tokens * hidden / 16)?;
        let mut ours_s = DeviceBuffer::<f32>::zeroed(&context, tokens)?;
        let twin_q = DeviceBuffer::<u8>::zeroed(&context, tokens * hidden)?;
        let twin_s = DeviceBuffer::<f32>::zeroed(&context, tokens)?;
        let no_ub = DeviceBuffer::<f32>::zeroed(&context, 0)?;
        let block = hidden.min(256) as u32;
        let config = LaunchConfig::new(tokens as u32, block);
        let f = tv.function("dynamic_per_token_scaled_fp8_quant_kernel")?;
        let pp = (twin_q.device_ptr(), twin_s.device_ptr(), d_in.device_ptr(), 0u64, hidden as i32);
        {
            vllm::dynamic_per_token_scaled_fp8_quant_kernel::launch(&stream, config, &mut ours, &mut ours_s, &d_in, &no_ub, hidden as u32 / 16).unwrap();
        }
        {
            launch_twin(&stream, &f, (tokens as u32, 1), block, 0, &mut p![pp.0, pp.1, pp.2, pp.3, pp.4]);
        }
        stream.synchronize()?;
        let q_ours: Vec<f32> = ours.to_vec()?.iter().flat_map(|q| q.v).map(fp8e4m3fn_to_f32).collect();
        failed += !check("dynamic_per_token_scaled_fp8_quant_kernel scale", "ours", max_rel(ours_s.to_vec()?, want_s.clone(), 0.0), 0.0) as i32;
        failed += !check("dynamic_per_token_scaled_fp8_quant_kernel scale", "twin", max_rel(twin_s.to_vec()?, want_s, 0.0), 0.0) as i32;
        failed += !check("dynamic_per_token_scaled_fp8_quant_kernel out", "ours", max_rel(q_ours, want_q.clone(), 1.0), 0.0) as i32;
        failed +=
            !check("dynamic_per_token_scaled_fp8_quant_kernel out", "twin", max_rel(fl(&twin_q.to_vec()?, fp8e4m3fn_to_f32), want_q.clone(), 1.0), 0.0) as i32;
        let mut run_ours =
            || vllm::dynamic_per_token_scaled_fp8_quant_kernel::launch(&stream, config, &mut ours, &mut ours_s, &d_in, &no_ub, hidden as u32 / 16).unwrap();
        let mut run_twin = || launch_twin(&stream, &f, (tokens as u32, 1), block, 0, &mut p![pp.0, pp.1, pp.2, pp.3, pp.4]);
        report(
            "dynamic_per_token_scaled_fp8_quant_kernel",
            &format!("tokens{tokens} hidden{hidden}"),
            timer.pair(&context, &stream, &mut run_ours, &mut run_twin, &mut || {}, false)?,
        );
        let mut fixed = DeviceBuffer::<vllm::Fp8x16>::zeroed(&context, tokens * hidden / 16)?;
        let mut fixed_s = DeviceBuffer::<f32>::zeroed(&context, tokens)?;
        vllm::dynamic_per_token_scaled_fp8_quant_kernel_fixed::launch(&stream, config, &mut fixed, &mut fixed_s, &d_in, &no_ub, hidden as u32 / 16)?;
        stream.synchronize()?;
        let q_fixed: Vec<f32> = fixed.to_vec()?.iter().flat_map(|q| q.v).map(fp8e4m3fn_to_f32).collect();
        failed += !check("dynamic_per_token_scaled_fp8_quant_kernel (fixed) out", "ours", max_rel(q_fixed, want_q, 1.0), 0.0) as i32;
        let mut run_fixed = || {
            vllm::dynamic_per_token_scaled_fp8_quant_kernel_fixed::launch(&stream, config, &mut fixed, &mut fixed_s, &d_in, &no_ub, hidden as u32 / 16).unwrap()
        };
        report(
            "dynamic_per_token_scaled_fp8_quant_kernel (fixed)",
            &format!("tokens{tokens} hidden{hidden}"),
            timer.pair(&context, &stream, &mut run_fixed, &mut run_twin, &mut || {}, false)?,
        );
    }

    println!("twin/Rust: the CUDA C++ twin's time over the Rust port's (above 1: Rust is faster)");
    if failed > 0 {
        return Err(format!("{failed} checks FAILED").into());
    }
    Ok(())
}
