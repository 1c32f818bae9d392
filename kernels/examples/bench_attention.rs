//! Times `attention_forward` and `attention_backward` on GPU 0 (bf16, `[B, H, S, D]`) over the
//! shapes of the attention table: `B · S = 16k`, `H · D = 2048`, D 64 and 128, S 512 to 8k,
//! causal or not. Each figure is the mean of back-to-back calls between two events after
//! warm-up calls (20 calls, fewer for calls over 15 ms, at least 3). FLOPs: forward
//! `4 B H S² D` (half when causal), backward 2.5 times that (FlashAttention's convention).
//! `BENCH_MMA=1` also times the deterministic backward (`attention_backward_deterministic`),
//! `BENCH_WG=1` the sm_90 backward's `_red` and `_late` instances (`attention_backward_sm90`)
//! and its trial instances where the shape has them (`_late_lpt`, or `_persistent` and `_persistent_dyn`,
//! `hopper_backward_trial_kernels`; `BENCH_TRIAL=1`: the trial instances only, JSON `bwd_trial_*`
//! for the first and `bwd_trials` for all; `BENCH_TRIAL_FILTER=_o,bf16$`: only the trials whose
//! name contains one of the comma-separated patterns, or ends with one written with a final `$`);
//! the forward's other sm_90 instance (`attention_forward_sm90`: the persistent twin, or the
//! one-tile-per-block one) is always timed beside the one the call picks; `BENCH_FWD_ALL=1`
//! times every other sm_90 forward schedule of the shape too (`hopper_forward_instances`; up to
//! `BENCH_FWD_ALL_MAX_S`; `BENCH_FWD_FILTER=poly`: only those whose name contains `poly`),
//! printed as `[fwd name TFLOP/s]` and in the JSON's `fwd_all`. `BENCH_D=64` times one head
//! dimension, `BENCH_FWD_ONLY=1` the forward only (no backward, no GPT-2 line).
//! `BENCH_MAX_S=16384` adds S 16k (by default the lengths stop at 8k); `BENCH_D256=1` adds head
//! dim 256 (forward only, up to `BENCH_D256_MAX_S`, default 1k: on sm_90 the `attention_d256`
//! kernels since session 22, `BENCH_FWD_ALL=1` times their `_serial` forms too; elsewhere the
//! portable path).
//! Prints a line per shape, and JSON lines (one per shape) to the file named by the first
//! argument, for `kernels/bench/attention_table.py`, which puts them beside PyTorch's
//! (`kernels/bench/attention_sdpa.py`). `BENCH_TOKENS=n` makes `B · S = n` (default 16k).
//! `BENCH_ONLY=D,S,causal` times one shape, `BENCH_MIN_S=n`
//! skips shorter sequences, `BENCH_MAX_S=n` longer ones, `BENCH_REPEAT=n` reports the median of n timings; `--check DIR`
//! writes one call's inputs and gradients for `kernels/bench/attention_check.py`. A benchmark,
//! not a test.

use std::io::Write;

use ferrocuda_host::{Context, DeviceBuffer, Event, Stream};
use ferrocuda_kernels::attention::{self, Attention, Layout};
use ferrocuda_kernels::{KernelsError, bf16};

/// Mean milliseconds per call; with `BENCH_REPEAT=n` (n > 1) the median of `n` such means
/// (the spread printed to stderr).
fn time(context: &Context, stream: &Stream, mut f: impl FnMut() -> Result<(), KernelsError>) -> Result<f64, KernelsError> {
    for _ in 0..2 {
        f()?;
    }
    let (start, end) = (Event::new(context)?, Event::new(context)?);
    start.record(stream)?;
    f()?;
    end.record(stream)?;
    end.synchronize()?;
    let once = start.elapsed_ms(&end)? as f64;
    let iters = ((300.0 / once.max(1e-3)) as usize).clamp(3, 20);
    let repeat = std::env::var("BENCH_REPEAT").ok().and_then(|v| v.parse::<usize>().ok()).unwrap_or(1).max(1);
    let mut means = Vec::with_capacity(repeat);
    for _ in 0..repeat {
        start.record(stream)?;
        for _ in 0..iters {
            f()?;
        }
        end.record(stream)?;
        end.synchronize()?;
        means.push(start.elapsed_ms(&end)? as f64 / iters as f64);
    }
    means.sort_by(f64::total_cmp);
    if repeat > 1 {
        eprintln!("  spread of {repeat} means (ms): {:.4} .. {:.4}", means[0], means[repeat - 1]);
    }
    Ok(means[repeat / 2])
}

fn buf(context: &Context, n: usize, seed: u32) -> Result<DeviceBuffer<bf16>, KernelsError> {
    let v: Vec<bf16> = (0..n).map(|i| bf16::from_f32((((i as u32).wrapping_mul(2654435761).wrapping_add(seed) >> 16) as f32 / 65536.0) * 2.0 - 1.0)).collect();
    Ok(DeviceBuffer::from_slice(context, &v)?)
}

/// `--check DIR`: one grouped-query causal call (B 2, H 8 over 2 key/value heads, S 1000,
/// D 128, bf16), its inputs and gradients written to DIR as raw `bf16` (`q.bin`, `k.bin`,
/// `v.bin`, `do.bin`, `dq.bin`, `dk.bin`, `dv.bin`) for `kernels/bench/attention_check.py`,
/// which compares them and PyTorch's cuDNN gradients with an `f64` reference.
fn check(context: &Context, stream: &Stream, dir: &str) -> Result<(), KernelsError> {
    let a = Attention { batch: 2, heads_q: 8, heads_kv: 2, seq_q: 1000, seq_kv: 1000, head_dim: 128, layout: Layout::Bhsd, causal: true, scale: None };
    let (q, k, v, dout) = (buf(context, a.q_len(), 21)?, buf(context, a.kv_len(), 22)?, buf(context, a.kv_len(), 23)?, buf(context, a.q_len(), 24)?);
    let mut o = DeviceBuffer::<bf16>::zeroed(context, a.q_len())?;
    let mut lse = DeviceBuffer::<f32>::zeroed(context, a.q_rows())?;
    let (mut dq, mut dk, mut dv) = (
        DeviceBuffer::<bf16>::zeroed(context, a.q_len())?,
        DeviceBuffer::<bf16>::zeroed(context, a.kv_len())?,
        DeviceBuffer::<bf16>::zeroed(context, a.kv_len())?,
    );
    attention::attention_forward(stream, &q, &k, &v, &mut o, &mut lse, a)?;
    attention::attention_backward(
        stream,
        attention::Backward { q: &q, k: &k, v: &v, out: &o, dout: &dout, lse: &lse, dq: &mut dq, dk: &mut dk, dv: &mut dv },
        a,
    )?;
    stream.synchronize()?;
    for (name, x) in [("q", &q), ("k", &k), ("v", &v), ("do", &dout), ("dq", &dq), ("dk", &dk), ("dv", &dv)] {
        let bits: Vec<u8> = x.to_vec()?.iter().flat_map(|e| e.to_bits().to_le_bytes()).collect();
        std::fs::write(format!("{dir}/{name}.bin"), bits).expect("cannot write the check files");
    }
    println!("check: wrote {a:?} to {dir}");
    Ok(())
}

fn main() -> Result<(), KernelsError> {
    let context = Context::primary(0)?;
    let stream = Stream::new(&context)?;
    let args: Vec<String> = std::env::args().collect();
    if args.len() == 3 && args[1] == "--check" {
        return check(&context, &stream, &args[2]);
    }
    let arch = context.device().arch()?;
    let mut json = std::env::args().nth(1).map(|path| std::fs::File::create(path).expect("cannot create the JSON file"));
    println!("{:<34} {:>10} {:>10} {:>12} {:>12}", "ours (bf16, [B,H,S,D])", "fwd ms", "bwd ms", "fwd TFLOP/s", "bwd TFLOP/s");
    // `BENCH_ONLY=D,S,causal` (e.g. `128,4096,0`) times one shape (for a profiler).
    let only: Option<(usize, usize, bool)> = std::env::var("BENCH_ONLY").ok().and_then(|v| {
        let f: Vec<usize> = v.split(',').filter_map(|x| x.trim().parse().ok()).collect();
        (f.len() == 3).then(|| (f[0], f[1], f[2] != 0))
    });
    // `BENCH_MIN_S=1024` skips the shorter sequences, `BENCH_MAX_S=2048` the longer ones.
    let min_seq = std::env::var("BENCH_MIN_S").ok().and_then(|v| v.parse::<usize>().ok()).unwrap_or(0);
    let max_seq = std::env::var("BENCH_MAX_S").ok().and_then(|v| v.parse::<usize>().ok()).unwrap_or(usize::MAX);
    // `BENCH_D256=1`: also head dim 256 (forward only, S up to `BENCH_D256_MAX_S`, default 1024;
    // the backward is the portable path's), for the table's D 256 rows beside cuDNN and FA2.
    let d256 = std::env::var("BENCH_D256").is_ok_and(|v| v == "1");
    let d256_max = std::env::var("BENCH_D256_MAX_S").ok().and_then(|v| v.parse::<usize>().ok()).unwrap_or(1024);
    // `BENCH_FWD_ALL=1`: every sm_90 forward schedule of the shape (`hopper_forward_instances`).
    // (`BENCH_FWD_ALL_MAX_S=n`: only up to S = n.)
    let fwd_all = std::env::var("BENCH_FWD_ALL").is_ok_and(|v| v == "1");
    let fwd_all_max = std::env::var("BENCH_FWD_ALL_MAX_S").ok().and_then(|v| v.parse::<usize>().ok()).unwrap_or(usize::MAX);
    // `BENCH_FWD_FILTER=poly`: of those, only the names containing `poly` (issue 31's
    // polynomial-exponential kernels beside the pick and its twin).
    let fwd_filter = std::env::var("BENCH_FWD_FILTER").unwrap_or_default();
    // `BENCH_D=64`: that head dimension only. `BENCH_FWD_ONLY=1`: no backward (its columns NaN)
    // and no GPT-2 backward line, for a short forward-only run.
    let only_d = std::env::var("BENCH_D").ok().and_then(|v| v.parse::<usize>().ok());
    let fwd_only = std::env::var("BENCH_FWD_ONLY").is_ok_and(|v| v == "1");
    let head_dims: &[usize] = if d256 { &[128, 64, 256] } else { &[128, 64] };
    // `BENCH_TOKENS=n`: `B · S = n` (at least one sequence) instead of 16k, e.g. a grid of
    // fewer query tiles than SMs, where a call's fixed costs show (issue 31, session 23).
    let tokens = std::env::var("BENCH_TOKENS").ok().and_then(|v| v.parse::<usize>().ok()).unwrap_or(16384);
    for &head_dim in head_dims.iter().filter(|&&d| only_d.is_none_or(|only| only == d)) {
        // S 16k only when `BENCH_MAX_S` asks for it.
        for s in [512usize, 1024, 2048, 4096, 8192, 16384] {
            for causal in [false, true] {
                let max = if head_dim == 256 {
                    max_seq.min(d256_max)
                } else if s == 16384 {
                    max_seq
                } else {
                    max_seq.min(8192)
                };
                if only.is_some_and(|o| o != (head_dim, s, causal)) || s < min_seq || s > max {
                    continue;
                }
                let (batch, heads) = ((tokens / s).max(1), 2048 / head_dim);
                let a = Attention { batch, heads_q: heads, heads_kv: heads, seq_q: s, seq_kv: s, head_dim, layout: Layout::Bhsd, causal, scale: None };
                let (q, k, v, dout) =
                    (buf(&context, a.q_len(), 9)?, buf(&context, a.kv_len(), 10)?, buf(&context, a.kv_len(), 11)?, buf(&context, a.q_len(), 12)?);
                let mut o = DeviceBuffer::<bf16>::zeroed(&context, a.q_len())?;
                let mut lse = DeviceBuffer::<f32>::zeroed(&context, a.q_rows())?;
                let (mut dq, mut dk, mut dv) = (
                    DeviceBuffer::<bf16>::zeroed(&context, a.q_len())?,
                    DeviceBuffer::<bf16>::zeroed(&context, a.kv_len())?,
                    DeviceBuffer::<bf16>::zeroed(&context, a.kv_len())?,
                );
                let flops = 4.0 * (batch * heads) as f64 * (s * s) as f64 * head_dim as f64 * if causal { 0.5 } else { 1.0 };
                let fwd = time(&context, &stream, || attention::attention_forward(&stream, &q, &k, &v, &mut o, &mut lse, a))?;
                let bwd = if head_dim == 256 || fwd_only {
                    f64::NAN
                } else {
                    time(&context, &stream, || {
                        attention::attention_backward(
                            &stream,
                            attention::Backward { q: &q, k: &k, v: &v, out: &o, dout: &dout, lse: &lse, dq: &mut dq, dk: &mut dk, dv: &mut dv },
                            a,
                        )
                    })?
                };
                // `BENCH_FWD_ALL=1`: every other sm_90 forward schedule of this shape.
                let mut all = Vec::new();
                if fwd_all && s <= fwd_all_max {
                    let twin = attention::hopper_kernels::<bf16>(&a, arch).map(|pair| pair[1]);
                    for name in attention::hopper_forward_instances::<bf16>(&a, arch).into_iter().skip(1) {
                        if Some(name) == twin || !name.contains(fwd_filter.as_str()) {
                            continue;
                        }
                        let ms = time(&context, &stream, || attention::attention_forward_sm90(&stream, name, &q, &k, &v, &mut o, &mut lse, a))?;
                        all.push((name, ms, flops / (ms * 1e-3) / 1e12));
                    }
                }
                let (fwd_tf, bwd_tf) = (flops / (fwd * 1e-3) / 1e12, 2.5 * flops / (bwd * 1e-3) / 1e12);
                // The forward's other sm_90 instance (the persistent twin of a one-tile-per-block
                // kernel, or the other way round), for comparison.
                let fwd_twin = match attention::hopper_kernels::<bf16>(&a, arch) {
                    Some([_, twin]) => {
                        let ms = time(&context, &stream, || attention::attention_forward_sm90(&stream, twin, &q, &k, &v, &mut o, &mut lse, a))?;
                        Some((twin, ms, flops / (ms * 1e-3) / 1e12))
                    }
                    None => None,
                };
                let path = attention::hopper_kernel::<bf16>(&a, arch).unwrap_or(if attention::uses_tensor_cores::<bf16>(&a) { "mma.sync" } else { "portable" });
                let bwd_path = attention::hopper_backward_kernel::<bf16>(&a, arch).unwrap_or("mma.sync");
                // `BENCH_MMA=1`: also the deterministic backward (`mma.sync`), for comparison.
                let mma = if !fwd_only && std::env::var("BENCH_MMA").is_ok_and(|v| v == "1") {
                    let ms = time(&context, &stream, || {
                        attention::attention_backward_deterministic(
                            &stream,
                            attention::Backward { q: &q, k: &k, v: &v, out: &o, dout: &dout, lse: &lse, dq: &mut dq, dk: &mut dk, dv: &mut dv },
                            a,
                        )
                    })?;
                    Some((ms, 2.5 * flops / (ms * 1e-3) / 1e12))
                } else {
                    None
                };
                // `BENCH_WG=1`: also the sm_90 backward's `_red` and `_late` instances.
                let mut twin = |which: usize| -> Result<Option<(f64, f64)>, KernelsError> {
                    match attention::hopper_backward_kernels::<bf16>(&a, arch) {
                        Some(names) if !fwd_only && std::env::var("BENCH_WG").is_ok_and(|v| v == "1") => {
                            let ms = time(&context, &stream, || {
                                attention::attention_backward_sm90(
                                    &stream,
                                    names[which],
                                    attention::Backward { q: &q, k: &k, v: &v, out: &o, dout: &dout, lse: &lse, dq: &mut dq, dk: &mut dk, dv: &mut dv },
                                    a,
                                )
                            })?;
                            Ok(Some((ms, 2.5 * flops / (ms * 1e-3) / 1e12)))
                        }
                        _ => Ok(None),
                    }
                };
                let (wg, ov) = (twin(1)?, twin(2)?);
                // `BENCH_WG=1` or `BENCH_TRIAL=1`: also the backward's trial instances (`_late_lpt`,
                // or `_persistent` and `_persistent_dyn`), where it has them.
                let trial_wanted = ["BENCH_WG", "BENCH_TRIAL"].iter().any(|k| std::env::var(k).is_ok_and(|v| v == "1"));
                // `BENCH_TRIAL_FILTER=_o,bf16$`: only the trials whose name contains one of the
                // comma-separated patterns (`$` at the end: ends with it; session 24).
                let trial_filter = std::env::var("BENCH_TRIAL_FILTER").unwrap_or_default();
                let wanted = |name: &str| {
                    trial_filter.is_empty() || trial_filter.split(',').any(|p| p.strip_suffix('$').map_or_else(|| name.contains(p), |end| name.ends_with(end)))
                };
                let mut trials = Vec::new();
                for name in attention::hopper_backward_trial_kernels::<bf16>(&a, arch) {
                    if fwd_only || !trial_wanted {
                        break;
                    }
                    if !wanted(name) {
                        continue;
                    }
                    let ms = time(&context, &stream, || {
                        attention::attention_backward_sm90(
                            &stream,
                            name,
                            attention::Backward { q: &q, k: &k, v: &v, out: &o, dout: &dout, lse: &lse, dq: &mut dq, dk: &mut dk, dv: &mut dv },
                            a,
                        )
                    })?;
                    trials.push((name, ms, 2.5 * flops / (ms * 1e-3) / 1e12));
                }
                let trial = trials.first().copied();
                let name = format!("D{head_dim} S{s} B{batch} H{heads}{}", if causal { " causal" } else { "" });
                // Each twin by its schedule: `_red`, `_late`, or the bulk one (no suffix).
                let names = attention::hopper_backward_kernels::<bf16>(&a, arch);
                let tag = |which: usize| {
                    names.map_or("", |n| {
                        if n[which].contains("_red") {
                            "red"
                        } else if n[which].ends_with("_late") {
                            "late"
                        } else {
                            "bulk"
                        }
                    })
                };
                let wg_text = wg.map_or(String::new(), |(_, tf)| format!(" [_{} bwd {tf:.1}]", tag(1)))
                    + &ov.map_or(String::new(), |(_, tf)| format!(" [_{} bwd {tf:.1}]", tag(2)))
                    + &trials.iter().map(|(trial, _, tf)| format!(" [{} bwd {tf:.1}]", trial.trim_start_matches("attention_backward"))).collect::<String>();
                let mma_text = mma.map_or(String::new(), |(_, tf)| format!(" [deterministic bwd {tf:.1}]"));
                let twin_text = fwd_twin.map_or(String::new(), |(twin, _, tf)| format!(" [fwd {twin} {tf:.1}]"))
                    + &all.iter().map(|(name, _, tf)| format!(" [fwd {name} {tf:.1}]")).collect::<String>();
                println!("{name:<34} {fwd:>10.3} {bwd:>10.3} {fwd_tf:>12.1} {bwd_tf:>12.1}  [fwd {path}]{twin_text} [bwd {bwd_path}]{wg_text}{mma_text}");
                if let Some(file) = json.as_mut() {
                    let mut mma_json = mma.map_or(String::new(), |(ms, tf)| format!(r#","bwd_det_ms":{ms:.5},"bwd_det_tflops":{tf:.2}"#));
                    mma_json += &fwd_twin
                        .map_or(String::new(), |(twin, ms, tf)| format!(r#","fwd_twin_path":"{twin}","fwd_twin_ms":{ms:.5},"fwd_twin_tflops":{tf:.2}"#));
                    mma_json += &wg.map_or(String::new(), |(ms, tf)| format!(r#","bwd_{}_ms":{ms:.5},"bwd_{}_tflops":{tf:.2}"#, tag(1), tag(1)));
                    mma_json += &ov.map_or(String::new(), |(ms, tf)| format!(r#","bwd_{}_ms":{ms:.5},"bwd_{}_tflops":{tf:.2}"#, tag(2), tag(2)));
                    mma_json += &trial
                        .map_or(String::new(), |(trial, ms, tf)| format!(r#","bwd_trial_path":"{trial}","bwd_trial_ms":{ms:.5},"bwd_trial_tflops":{tf:.2}"#));
                    if !trials.is_empty() {
                        let items: Vec<String> = trials.iter().map(|(name, ms, tf)| format!(r#""{name}":[{ms:.5},{tf:.2}]"#)).collect();
                        mma_json += &format!(r#","bwd_trials":{{{}}}"#, items.join(","));
                    }
                    if !all.is_empty() {
                        let items: Vec<String> = all.iter().map(|(name, ms, tf)| format!(r#""{name}":[{ms:.5},{tf:.2}]"#)).collect();
                        mma_json += &format!(r#","fwd_all":{{{}}}"#, items.join(","));
                    }
                    writeln!(
                        file,
                        r#"{{"impl":"ours","head_dim":{head_dim},"seq":{s},"batch":{batch},"heads":{heads},"causal":{causal},"fwd_ms":{fwd:.5},"bwd_ms":{bwd:.5},"fwd_tflops":{fwd_tf:.2},"bwd_tflops":{bwd_tf:.2},"fwd_path":"{path}","bwd_path":"{bwd_path}"{mma_json}}}"#
                    )
                    .expect("cannot write the JSON file");
                }
            }
        }
    }
    // GPT-2 small's attention (`[B, S, H, D]`, 12 heads of 64, causal, S 1024, B 8): the
    // backward of each path (text only; the table's rows are `[B, H, S, D]`).
    if only.is_none() && !fwd_only {
        let a = Attention { batch: 8, heads_q: 12, heads_kv: 12, seq_q: 1024, seq_kv: 1024, head_dim: 64, layout: Layout::Bshd, causal: true, scale: None };
        let (q, k, v, dout) = (buf(&context, a.q_len(), 9)?, buf(&context, a.kv_len(), 10)?, buf(&context, a.kv_len(), 11)?, buf(&context, a.q_len(), 12)?);
        let mut o = DeviceBuffer::<bf16>::zeroed(&context, a.q_len())?;
        let mut lse = DeviceBuffer::<f32>::zeroed(&context, a.q_rows())?;
        let (mut dq, mut dk, mut dv) = (
            DeviceBuffer::<bf16>::zeroed(&context, a.q_len())?,
            DeviceBuffer::<bf16>::zeroed(&context, a.kv_len())?,
            DeviceBuffer::<bf16>::zeroed(&context, a.kv_len())?,
        );
        let flops = 2.5 * 4.0 * (8 * 12) as f64 * (1024.0 * 1024.0) * 64.0 * 0.5;
        attention::attention_forward(&stream, &q, &k, &v, &mut o, &mut lse, a)?;
        let picked = time(&context, &stream, || {
            attention::attention_backward(
                &stream,
                attention::Backward { q: &q, k: &k, v: &v, out: &o, dout: &dout, lse: &lse, dq: &mut dq, dk: &mut dk, dv: &mut dv },
                a,
            )
        })?;
        let det = time(&context, &stream, || {
            attention::attention_backward_deterministic(
                &stream,
                attention::Backward { q: &q, k: &k, v: &v, out: &o, dout: &dout, lse: &lse, dq: &mut dq, dk: &mut dk, dv: &mut dv },
                a,
            )
        })?;
        let tf = |ms: f64| flops / (ms * 1e-3) / 1e12;
        print!(
            "GPT-2 [B,S,H,D] B8 S1024 H12 D64 causal backward: picked {picked:.3} ms ({:.1} TFLOP/s), deterministic {det:.3} ms ({:.1})",
            tf(picked),
            tf(det)
        );
        for name in attention::hopper_backward_kernels::<bf16>(&a, arch).into_iter().flatten() {
            let ms = time(&context, &stream, || {
                attention::attention_backward_sm90(
                    &stream,
                    name,
                    attention::Backward { q: &q, k: &k, v: &v, out: &o, dout: &dout, lse: &lse, dq: &mut dq, dk: &mut dk, dv: &mut dv },
                    a,
                )
            })?;
            print!(", {name} {ms:.3} ms ({:.1})", tf(ms));
        }
        println!();
    }
    Ok(())
}
