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

use std::ffi::c_void;
use std::process::ExitCode;

use ferrocuda_device::half::Bf16;
use ferrocuda_host::{Context, DeviceBuffer, Event, Function, JitOptions, Module, Stream, TensorDataType, TensorMap, TensorSwizzle, sys};
use hopper_kernels::attention::{BM, BOX, STAGES, STAGES_DEEP, THREADS, reference_row, shared_bytes, within_bound};

type Res<T> = Result<T, String>;

fn err<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// xorshift64*, uniform bf16 in [-1, 1).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Two values from one draw (24 bits each).
    fn bf16_pair(&mut self) -> [Bf16; 2] {
        let bits = self.next();
        let unit = |x: u64| 2.0 * ((x & 0xff_ffff) as f32 / (1u64 << 24) as f32) - 1.0;
        [Bf16::from_f32(unit(bits >> 40)), Bf16::from_f32(unit(bits >> 16))]
    }
}

fn median(times: &mut [f64]) -> f64 {
    times.sort_by(f64::total_cmp);
    let mid = times.len() / 2;
    if times.len().is_multiple_of(2) { (times[mid - 1] + times[mid]) / 2.0 } else { times[mid] }
}

/// Polls until `stream` is idle, at most `seconds` (a hang is reported, not waited out).
fn wait_idle(stream: &Stream, what: &str, seconds: f64) -> Res<()> {
    let start = std::time::Instant::now();
    while !stream.is_idle().map_err(err(what))? {
        if start.elapsed().as_secs_f64() > seconds {
            return Err(format!("HANG: {what} did not finish within {seconds} s"));
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    stream.synchronize().map_err(err(what))
}

/// One problem's device data: Q, K, V, O, LSE and the three tensor maps.
struct Problem {
    d: u32,
    heads: u32,
    seq_len: u32,
    q: Vec<Bf16>,
    k: Vec<Bf16>,
    v: Vec<Bf16>,
    // Kept alive while the maps point into them.
    _buffers: [DeviceBuffer<Bf16>; 3],
    o: DeviceBuffer<Bf16>,
    lse: DeviceBuffer<f32>,
    maps: [DeviceBuffer<[u64; 16]>; 3],
}

impl Problem {
    fn new(context: &Context, d: u32, batch_heads: u32, seq_len: u32, seed: u64) -> Res<Problem> {
        let len = (batch_heads * seq_len * d) as usize;
        let mut rng = Rng(seed);
        let mut random = || -> Vec<Bf16> { (0..len.div_ceil(2)).flat_map(|_| rng.bf16_pair()).take(len).collect() };
        let (q, k, v) = (random(), random(), random());
        let upload = |x: &[Bf16]| DeviceBuffer::from_slice(context, x).map_err(err("upload"));
        let buffers = [upload(&q)?, upload(&k)?, upload(&v)?];
        let dims = [d as u64, seq_len as u64, batch_heads as u64];
        let map = |b: &DeviceBuffer<Bf16>| -> Res<DeviceBuffer<[u64; 16]>> {
            TensorMap::tiled(b, TensorDataType::Bf16, &dims, &BOX, TensorSwizzle::B128)
                .map_err(err("cuTensorMapEncodeTiled"))?
                .to_device(context)
                .map_err(err("map upload"))
        };
        let maps = [map(&buffers[0])?, map(&buffers[1])?, map(&buffers[2])?];
        let o = DeviceBuffer::<Bf16>::zeroed(context, len).map_err(err("alloc O"))?;
        let lse = DeviceBuffer::<f32>::zeroed(context, (batch_heads * seq_len) as usize).map_err(err("alloc LSE"))?;
        Ok(Problem { d, heads: batch_heads, seq_len, q, k, v, _buffers: buffers, o, lse, maps })
    }

    /// Launches `function` (one of this problem's head dimension) once.
    fn launch(&self, function: &Function, stream: &Stream) -> Res<()> {
        let [mut pq, mut pk, mut pv] = [self.maps[0].device_ptr(), self.maps[1].device_ptr(), self.maps[2].device_ptr()];
        let (mut po, mut pl, mut ps) = (self.o.device_ptr(), self.lse.device_ptr(), self.seq_len);
        let mut scale_log2 = (1.0 / (self.d as f32).sqrt()) * std::f32::consts::LOG2_E;
        let mut params: [*mut c_void; 7] = [
            (&mut pq as *mut u64).cast(),
            (&mut pk as *mut u64).cast(),
            (&mut pv as *mut u64).cast(),
            (&mut po as *mut u64).cast(),
            (&mut pl as *mut u64).cast(),
            (&mut ps as *mut u32).cast(),
            (&mut scale_log2 as *mut f32).cast(),
        ];
        let shared = shared_bytes(self.d, stages(function.name()));
        // SAFETY: the kernel's seven parameters in order: the maps describe Q, K, V ([B·H, S, D]
        // bf16, box [64, 128, 1], 128-byte swizzle; the buffers live in `self`), O and LSE hold
        // B·H·S·D bf16 and B·H·S f32; the grid, block and shared memory are the kernel's; the
        // function was built for this head dimension (the caller picks it by name).
        let code = unsafe {
            sys::cuLaunchKernel(
                function.raw(),
                self.seq_len.div_ceil(BM),
                self.heads,
                1,
                THREADS,
                1,
                1,
                shared,
                stream.raw(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        if code != sys::CUresult::CUDA_SUCCESS {
            return Err(format!("cuLaunchKernel({}) failed: {code:?}", function.name()));
        }
        Ok(())
    }

    /// Poisons O and LSE, runs once, compares `rows` sampled rows (first and last included)
    /// with the f64 reference. Returns a report line; Err when a row is off.
    fn check(&mut self, function: &Function, stream: &Stream, causal: bool, rows: usize) -> Res<String> {
        self.o.fill_async(Bf16(0x7fc1), stream).map_err(err("poison O"))?;
        self.lse.fill_async(f32::NAN, stream).map_err(err("poison LSE"))?;
        self.launch(function, stream)?;
        wait_idle(stream, function.name(), 30.0)?;
        let (o, lse) = (self.o.to_vec().map_err(err("download O"))?, self.lse.to_vec().map_err(err("download LSE"))?);
        let (d, s) = (self.d as usize, self.seq_len as usize);
        let mut pick = Rng(0x5eed ^ (s as u64) << 8 ^ d as u64);
        let mut worst = 0.0f64;
        for i in 0..rows {
            let (head, row) = match i {
                0 => (0, 0),
                1 => (self.heads as usize - 1, s - 1),
                _ => ((pick.next() % self.heads as u64) as usize, (pick.next() % s as u64) as usize),
            };
            let reference = reference_row(&self.q, &self.k, &self.v, d, s, head, row, causal);
            let at = (head * s + row) * d;
            let got: Vec<f32> = o[at..at + d].iter().map(|x| x.to_f32()).collect();
            match within_bound(&reference, &got, lse[head * s + row]) {
                Ok(ratio) => worst = worst.max(ratio),
                Err(why) => return Err(format!("{}: head {head} row {row}: {why}", function.name())),
            }
        }
        Ok(format!("{rows} sampled rows within the bound vs f64 (worst error/bound {worst:.3})"))
    }
}

/// Median time of one launch: isolated (`runs` launches, each between its own events and
/// synchronised) and steady state (`max(runs/2, 5)` batches of 20 back-to-back launches).
fn time(problem: &Problem, function: &Function, stream: &Stream, context: &Context, runs: usize) -> Res<(f64, f64)> {
    const BATCH: usize = 20;
    let (start, end) = (Event::new(context).map_err(err("event"))?, Event::new(context).map_err(err("event"))?);
    let mut isolated = Vec::new();
    for round in 0..runs + 2 {
        start.record(stream).map_err(err("record"))?;
        problem.launch(function, stream)?;
        end.record(stream).map_err(err("record"))?;
        end.synchronize().map_err(err(function.name()))?;
        if round >= 2 {
            isolated.push(start.elapsed_ms(&end).map_err(err("elapsed"))? as f64);
        }
    }
    let mut steady = Vec::new();
    for round in 0..(runs / 2).max(5) + 1 {
        start.record(stream).map_err(err("record"))?;
        for _ in 0..BATCH {
            problem.launch(function, stream)?;
        }
        end.record(stream).map_err(err("record"))?;
        end.synchronize().map_err(err(function.name()))?;
        if round >= 1 {
            steady.push(start.elapsed_ms(&end).map_err(err("elapsed"))? as f64 / BATCH as f64);
        }
    }
    Ok((median(&mut isolated), median(&mut steady)))
}

/// The ring depth of kernel `name` (the `_s3` kernels: 3).
fn stages(name: &str) -> u32 {
    if name.ends_with("_s3") { STAGES_DEEP } else { STAGES }
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
    for r in hopper_kernels::KERNELS.resources.iter().filter(|r| r.kernel.starts_with("attention")) {
        println!(
            "ptxas (sm_{}a): {}: {} registers at entry, {} B spill stores, {} B spill loads, {} B stack",
            r.arch, r.kernel, r.registers, r.spill_stores, r.spill_loads, r.stack_frame
        );
    }
    // SAFETY: the image is this crate's own build; its attention kernels are launched only
    // through `Problem::launch` with the parameter list they declare.
    #[allow(unused_unsafe)]
    let module = unsafe {
        match hopper_kernels::KERNELS.cubins.iter().find(|(a, _)| *a == 90) {
            Some((_, image)) => Module::load_binary(&context, "hopper_kernels", image, &JitOptions::new()),
            None => Module::load_ptx(&context, "hopper_kernels", hopper_kernels::KERNELS.ptx[0].1, &JitOptions::new()),
        }
    }
    .map_err(err("loading the kernels"))?;
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
    let kernel = |d: u32, causal: bool, schedule: &str| -> Res<Function> {
        let name = format!("attention_d{d}{}{schedule}", if causal { "_causal" } else { "" });
        let function = module.function(&name).map_err(err("kernel lookup"))?;
        function.set_max_dynamic_shared_bytes(shared_bytes(d, stages(&name))).map_err(err("smem attribute"))?;
        Ok(function)
    };
    for d in [64u32, 128] {
        // Correctness-only lengths (no multiple of the tile: the last key tile masked), B·H = 4.
        for &s in &check_seqs {
            let mut problem = Problem::new(&context, d, 4, s, 0xabc ^ s as u64 ^ (d as u64) << 20)?;
            for (causal, schedule) in variants {
                let function = kernel(d, causal, schedule)?;
                match problem.check(&function, &stream, causal, 48) {
                    Ok(line) => println!("PASS {} B·H 4 S {s}: {line}", function.name()),
                    Err(why) => {
                        ok = false;
                        println!("FAIL {} B·H 4 S {s}: {why}", function.name());
                    }
                }
            }
        }
        if let Some(dir) = &dump_dir {
            let mut problem = Problem::new(&context, d, 4, 1000, 0xd00d ^ d as u64)?;
            let tag = format!("d{d}");
            for (name, x) in [("q", &problem.q), ("k", &problem.k), ("v", &problem.v)] {
                dump(dir, &format!("{tag}.{name}"), bytemuck::cast_slice(&x.iter().map(|x| x.0).collect::<Vec<u16>>()))?;
            }
            for causal in [false, true] {
                let function = kernel(d, causal, "")?;
                problem.check(&function, &stream, causal, 8)?;
                let o = problem.o.to_vec().map_err(err("download"))?;
                dump(dir, &format!("{tag}{}.o", if causal { "_causal" } else { "" }), bytemuck::cast_slice(&o.iter().map(|x| x.0).collect::<Vec<u16>>()))?;
            }
        }
        for &s in &seqs {
            let (batch, heads) = ((16384 / s).max(1), 2048 / d);
            let mut problem = Problem::new(&context, d, batch * heads, s, 0x1234 ^ (s as u64) << 4 ^ (d as u64) << 24)?;
            for (causal, schedule) in variants {
                let function = kernel(d, causal, schedule)?;
                let name = function.name().to_string();
                let check = problem.check(&function, &stream, causal, if s <= 4096 { 48 } else { 16 });
                let passed = check.is_ok();
                ok &= passed;
                let (isolated, steady) = time(&problem, &function, &stream, &context, runs)?;
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
