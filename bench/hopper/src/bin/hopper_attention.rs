//! `hopper-attention`: the Rust Hopper attention forward (`hopper_kernels::attention`) on a GPU:
//! checks against an f64 host reference, timings (isolated and steady state), and files for
//! the comparison with PyTorch's SDPA (`bench/hopper/scripts/sdpa.py`, run after it in the same
//! job).
//!
//! ```text
//! hopper-attention [--seq 512,1024,2048,4096,8192,16384] [--check-seq 1000,3000] [--runs 10]
//!                  [--json FILE] [--dump DIR]
//! ```
//! Shapes as in the FlashAttention papers: batch·seq = 16384, heads·D = 2048, D = 64 and 128,
//! causal and not; Q, K, V, O `[B, H, S, D]` bf16, LSE `[B, H, S]` f32; scale `1/sqrt(D)`.
//! Per configuration: fresh random inputs in [-1, 1); O poisoned (NaN) and LSE poisoned before
//! the checked launch; 48 sampled rows (the first and the last included) compared with the f64
//! reference (bound: `attention::within_bound`); then CUDA-event timings, median: isolated (one
//! launch per event pair, synchronised after each) and steady state (20 launches back to back
//! per event pair). FLOPs `4·B·H·S²·D`, halved when causal. `--check-seq`: sequence lengths
//! that are no multiple of the tile (the last key tile masked), checked only. `--dump DIR`:
//! Q, K, V, O of a small problem (B 1, H 4, S 1000) per variant, for the SDPA comparison.
//! Exit status 1 when a check fails.
#![allow(clippy::result_large_err)]

use std::process::ExitCode;

use ferrocuda_host::{Context, DeviceBuffer, Event, Stream};
use hopper_kernels::attention::ForwardKernel;
use hopper_kernels::attention_host::{self, Problem, Res};

fn err<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> String + '_ {
    move |e| format!("{what}: {e}")
}

fn median(times: &mut [f64]) -> f64 {
    times.sort_by(f64::total_cmp);
    let mid = times.len() / 2;
    if times.len().is_multiple_of(2) { (times[mid - 1] + times[mid]) / 2.0 } else { times[mid] }
}

/// Median time of one launch: isolated (`runs` launches, each between its own events and
/// synchronised) and steady state (`max(runs/2, 5)` batches of 20 back-to-back launches).
fn time(problem: &mut Problem, kernel: &ForwardKernel, stream: &Stream, context: &Context, runs: usize) -> Res<(f64, f64)> {
    const BATCH: usize = 20;
    let (start, end) = (Event::new(context).map_err(err("event"))?, Event::new(context).map_err(err("event"))?);
    // The persistent instances' work counter (zeroed before each of their launches).
    let mut counter = DeviceBuffer::<u32>::zeroed(context, 1).map_err(err("alloc the counter"))?;
    let mut isolated = Vec::new();
    for round in 0..runs + 2 {
        start.record(stream).map_err(err("record"))?;
        problem.launch(kernel, stream, &mut counter)?;
        end.record(stream).map_err(err("record"))?;
        end.synchronize().map_err(err(kernel.name))?;
        if round >= 2 {
            isolated.push(start.elapsed_ms(&end).map_err(err("elapsed"))? as f64);
        }
    }
    let mut steady = Vec::new();
    for round in 0..(runs / 2).max(5) + 1 {
        start.record(stream).map_err(err("record"))?;
        for _ in 0..BATCH {
            problem.launch(kernel, stream, &mut counter)?;
        }
        end.record(stream).map_err(err("record"))?;
        end.synchronize().map_err(err(kernel.name))?;
        if round >= 1 {
            steady.push(start.elapsed_ms(&end).map_err(err("elapsed"))? as f64 / BATCH as f64);
        }
    }
    Ok((median(&mut isolated), median(&mut steady)))
}

/// Writes `bytes` to `dir/name`.
fn dump(dir: &str, name: &str, bytes: &[u8]) -> Res<()> {
    std::fs::write(format!("{dir}/{name}"), bytes).map_err(err("dump"))
}

fn run() -> Res<bool> {
    let mut seqs = vec![512u32, 1024, 2048, 4096, 8192, 16384];
    let mut check_seqs = vec![1000u32, 3000];
    let mut runs = 10usize;
    let mut json_path = "hopper-attention.json".to_string();
    let mut dump_dir: Option<String> = None;
    let mut args = std::env::args().skip(1);
    let list = |v: &str| -> Res<Vec<u32>> { v.split(',').filter(|s| !s.is_empty()).map(|s| s.trim().parse().map_err(|_| format!("bad number {s}"))).collect() };
    while let Some(arg) = args.next() {
        let value = args.next().ok_or_else(|| format!("{arg} needs a value"))?;
        match arg.as_str() {
            "--seq" => seqs = list(&value)?,
            "--check-seq" => check_seqs = list(&value)?,
            "--runs" => runs = value.parse().map_err(|_| "--runs takes a number".to_string())?,
            "--json" => json_path = value,
            "--dump" => dump_dir = Some(value),
            other => {
                return Err(format!(
                    "unknown argument {other}; usage: hopper-attention [--seq 512,..] [--check-seq 1000,..] [--runs 10] [--json FILE] [--dump DIR]"
                ));
            }
        }
    }
    if seqs.iter().any(|&s| s == 0 || 16384 % s != 0) || check_seqs.contains(&0) {
        return Err("--seq takes divisors of 16384 (batch = 16384 / seq); other lengths go to --check-seq".into());
    }
    let context = Context::primary(0).map_err(err("opening GPU 0"))?;
    let device = context.device();
    let arch = device.arch().map_err(err("arch"))?;
    println!("device: {} (sm_{arch}, {} SMs)", device.name().map_err(err("name"))?, device.multiprocessor_count().map_err(err("SMs"))?);
    if arch != 90 {
        return Err(format!("these kernels are built for sm_90a (H100/H200); this GPU is sm_{arch}"));
    }
    for r in ferrocuda_kernels_hopper::KERNELS.resources.iter().filter(|r| r.kernel.starts_with("attention")) {
        println!(
            "ptxas (sm_{}a): {}: {} registers at entry, {} B spill stores, {} B spill loads, {} B stack",
            r.arch, r.kernel, r.registers, r.spill_stores, r.spill_loads, r.stack_frame
        );
    }
    let stream = Stream::non_blocking(&context).map_err(err("stream"))?;
    let mut ok = true;
    let mut json = Vec::new();
    // (causal, schedule): the kernel name's suffixes.
    // Kernel name suffixes: the default schedule (`OVERLAP`: the next scores issued before P·V),
    // `_serial` (each product waited for), `_pingpong` (the two consumer warpgroups take turns
    // through named barriers), `_s3` (3-deep K/V rings instead of 2).
    let variants = [
        (false, ""),
        (false, "_serial"),
        (false, "_pingpong"),
        (false, "_s3"),
        (false, "_pingpong_s3"),
        (true, ""),
        (true, "_serial"),
        (true, "_pingpong"),
        (true, "_s3"),
        (true, "_pingpong_s3"),
    ];
    let kernel = |d: u32, causal: bool, schedule: &str| -> Res<&'static ForwardKernel> {
        attention_host::kernel(&context, &format!("attention_d{d}{}{schedule}", if causal { "_causal" } else { "" }))
    };
    for d in [64u32, 128] {
        // Correctness-only lengths (no multiple of the tile: the last key tile masked), B·H = 4.
        for &s in &check_seqs {
            let mut problem = Problem::new(&context, d, 4, s, 0xabc ^ s as u64 ^ (d as u64) << 20)?;
            for (causal, schedule) in variants {
                let kernel = kernel(d, causal, schedule)?;
                match problem.check(kernel, &stream, causal, 48) {
                    Ok(line) => println!("PASS {} B·H 4 S {s}: {line}", kernel.name),
                    Err(why) => {
                        ok = false;
                        println!("FAIL {} B·H 4 S {s}: {why}", kernel.name);
                    }
                }
            }
        }
        if let Some(dir) = &dump_dir {
            let mut problem = Problem::new(&context, d, 4, 1000, 0xd00d ^ d as u64)?;
            let tag = format!("d{d}");
            for (name, x) in ["q", "k", "v"].into_iter().zip(problem.inputs()) {
                dump(dir, &format!("{tag}.{name}"), bytemuck::cast_slice(&x.iter().map(|x| x.to_bits()).collect::<Vec<u16>>()))?;
            }
            for causal in [false, true] {
                let kernel = kernel(d, causal, "")?;
                problem.check(kernel, &stream, causal, 8)?;
                let o = problem.output()?;
                dump(
                    dir,
                    &format!("{tag}{}.o", if causal { "_causal" } else { "" }),
                    bytemuck::cast_slice(&o.iter().map(|x| x.to_bits()).collect::<Vec<u16>>()),
                )?;
            }
        }
        for &s in &seqs {
            let (batch, heads) = ((16384 / s).max(1), 2048 / d);
            let mut problem = Problem::new(&context, d, batch * heads, s, 0x1234 ^ (s as u64) << 4 ^ (d as u64) << 24)?;
            for (causal, schedule) in variants {
                let kernel = kernel(d, causal, schedule)?;
                let name = kernel.name;
                let check = problem.check(kernel, &stream, causal, if s <= 4096 { 48 } else { 16 });
                let passed = check.is_ok();
                ok &= passed;
                let (isolated, steady) = time(&mut problem, kernel, &stream, &context, runs)?;
                let flop = 4.0 * (batch * heads) as f64 * s as f64 * s as f64 * d as f64 / if causal { 2.0 } else { 1.0 };
                let (tf_isolated, tf_steady) = (flop / (isolated * 1e9), flop / (steady * 1e9));
                println!(
                    "{} {name} B {batch} H {heads} S {s}: isolated {isolated:.3} ms {tf_isolated:.1} TFLOP/s, steady {steady:.3} ms {tf_steady:.1} TFLOP/s; {}",
                    if passed { "PASS" } else { "FAIL" },
                    check.unwrap_or_else(|why| why)
                );
                json.push(format!(
                    "{{\"kernel\": \"{name}\", \"d\": {d}, \"causal\": {causal}, \"schedule\": \"{}\", \"batch\": {batch}, \"heads\": {heads}, \"seq\": {s}, \"isolated_ms\": {isolated:.4}, \"steady_ms\": {steady:.4}, \"isolated_tflops\": {tf_isolated:.1}, \"steady_tflops\": {tf_steady:.1}, \"ok\": {passed}}}",
                    if schedule.is_empty() { "overlap" } else { &schedule[1..] }
                ));
            }
        }
    }
    std::fs::write(&json_path, format!("[\n{}\n]\n", json.join(",\n"))).map_err(err("writing JSON"))?;
    println!("JSON written to {json_path}");
    Ok(ok)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            println!("hopper-attention: a check FAILED");
            ExitCode::FAILURE
        }
        Err(why) => {
            eprintln!("hopper-attention failed: {why}");
            ExitCode::FAILURE
        }
    }
}
