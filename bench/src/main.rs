//! `ferrocuda-bench`: ferrocuda's example kernels against the same kernels in CUDA C++
//! (compiled by NVRTC, launched through the same typed launchers with the same
//! configuration) and cuBLAS, on one GPU, in one run. Prints a table and writes JSON.
//!
//! ```text
//! ferrocuda-bench [--json FILE] [--runs N] [--only CASE,CASE..] [--runtime-launch-overhead FILE] [--dump-cubins DIR]
//! ```
//! `--only` runs just the named cases (`gpu_kernels::twins::CASES`, e.g. `--only gelu_bf16,adamw`).
//! `bench/run-on-gpu.sh` builds the runtime-API launch program with nvcc, runs everything and
//! collects the SASS of both implementations. See BENCHMARKS.md for what each figure means.

// `ferrocuda_host::Error` is large (it carries launch details); the benchmark passes it through
// as the host API returns it.
#![allow(clippy::result_large_err)]

mod overhead;
mod report;

use std::process::ExitCode;

use ferrocuda_bench::nvrtc;
use ferrocuda_host::{Context, Error, Stream};

use gpu_kernels::twins::timing::{self, Runs};
use gpu_kernels::twins::{BenchResult, Env, Sizes};

use crate::report::Report;

/// Command-line options.
struct Options {
    json: String,
    runs: usize,
    runtime_launch_overhead: Option<String>,
    dump_cubins: Option<String>,
    only: Option<Vec<String>>,
}

const USAGE: &str = "usage: ferrocuda-bench [--json FILE] [--runs N] [--only CASE,CASE..] [--runtime-launch-overhead FILE] [--dump-cubins DIR]";

fn parse_options() -> Result<Options, String> {
    let mut options = Options { json: "ferrocuda-bench.json".into(), runs: 20, runtime_launch_overhead: None, dump_cubins: None, only: None };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value\n{USAGE}"));
        match arg.as_str() {
            "--json" => options.json = value()?,
            "--runs" => options.runs = value()?.parse().map_err(|_| format!("--runs takes a positive number\n{USAGE}"))?,
            "--runtime-launch-overhead" => options.runtime_launch_overhead = Some(value()?),
            "--dump-cubins" => options.dump_cubins = Some(value()?),
            "--only" => {
                let names: Vec<String> = value()?.split(',').map(str::to_string).collect();
                if let Some(unknown) = names.iter().find(|n| !gpu_kernels::twins::CASES.contains(&n.as_str())) {
                    return Err(format!("--only: no case `{unknown}`; the cases are {}\n{USAGE}", gpu_kernels::twins::CASES.join(", ")));
                }
                options.only = Some(names);
            }
            "-h" | "--help" => return Err(USAGE.to_string()),
            other => return Err(format!("unknown argument `{other}`\n{USAGE}")),
        }
    }
    if options.runs == 0 {
        return Err(format!("--runs takes a positive number\n{USAGE}"));
    }
    Ok(options)
}

fn main() -> ExitCode {
    let options = match parse_options() {
        Ok(options) => options,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    let context = match Context::primary(0) {
        Ok(context) => context,
        Err(error @ (Error::NoDriver | Error::NoDevice { .. })) => {
            eprintln!("ferrocuda-bench needs an NVIDIA GPU: {error}");
            return ExitCode::from(2);
        }
        Err(error) => {
            eprintln!("could not open GPU 0: {error}");
            return ExitCode::FAILURE;
        }
    };
    match run(&options, context) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("ferrocuda-bench failed: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run(options: &Options, context: Context) -> BenchResult<()> {
    let device = context.device();
    let arch = device.arch()?;
    let (major, minor) = ferrocuda_host::driver_version()?;
    let sm_count = device.multiprocessor_count()?;
    let mut header = vec![
        ("device".to_string(), format!("{} (sm_{arch}, {sm_count} SMs, {:.1} GiB)", device.name()?, device.total_memory()? as f64 / (1u64 << 30) as f64)),
        ("driver".to_string(), format!("CUDA {major}.{minor}")),
        ("date".to_string(), utc_now()),
        ("rust kernels".to_string(), format!("built by {}, running {:?}", gpu_kernels::KERNELS.toolchain, gpu_kernels::KERNELS.pick_image(arch))),
    ];
    let mut skipped = Vec::new();
    let compiled = match nvrtc::compile_reference(&context, arch) {
        Ok(compiled) => {
            header.push(("CUDA C++ kernels".to_string(), format!("NVRTC {} -> cubin sm_{arch} in {:.0} ms", compiled.version, compiled.compile_ms)));
            Some(compiled)
        }
        Err(why) => {
            skipped.push(format!("CUDA C++ comparisons: {why}"));
            None
        }
    };
    if let Some(dir) = &options.dump_cubins {
        std::fs::create_dir_all(dir)?;
        if let Some(&(_, image)) = gpu_kernels::KERNELS.cubins.iter().find(|(a, _)| *a == arch) {
            std::fs::write(format!("{dir}/rust.cubin"), image)?;
        }
        if let Some(compiled) = &compiled {
            std::fs::write(format!("{dir}/cuda.cubin"), &compiled.cubin)?;
        }
    }
    let runs = Runs { warmup: 3, timed: options.runs };
    header.push(("timing".to_string(), format!("CUDA events around each launch, {} warm-up + {} timed runs per kernel, median", runs.warmup, runs.timed)));
    let stream = Stream::non_blocking(&context)?;
    let (copy_gbps, _) = timing::copy_bandwidth_gbps(&stream, 256 << 20, runs)?;
    let env = Env { context: context.clone(), stream, runs, cuda: compiled.as_ref().map(|c| &c.module), sm_count, sizes: Sizes::BENCH };

    // A failed case (a result that disagrees with the CPU) is reported and the others still
    // run; the exit status says that something failed.
    let selected = |name: &str| options.only.as_ref().is_none_or(|only| only.iter().any(|o| o == name));
    let outcome = gpu_kernels::twins::run_cases(&env, selected, |name| eprintln!("running {name} ..."));
    let (rows, failures) = (outcome.rows, outcome.failures);
    skipped.extend(outcome.skipped);

    eprintln!("measuring launch overhead and module loads ...");
    let mut launch_overhead = overhead::launch_overhead(&context)?;
    if let Some(path) = &options.runtime_launch_overhead {
        match read_runtime_overhead(path) {
            Ok(us) => launch_overhead.push(("runtime API <<<>>> (nvcc)".to_string(), us)),
            Err(why) => skipped.push(format!("runtime-API launch overhead: {why}")),
        }
    } else {
        skipped.push("runtime-API launch overhead: not measured (bench/run-on-gpu.sh builds bench/cuda/launch_overhead.cu with nvcc and passes --runtime-launch-overhead)".into());
    }
    let module_load = overhead::module_load(&context, arch)?;
    header.push((
        "CUDA_MODULE_LOADING / CUDA_CACHE_DISABLE".to_string(),
        format!("{:?} / {:?}", std::env::var("CUDA_MODULE_LOADING").ok(), std::env::var("CUDA_CACHE_DISABLE").ok()),
    ));

    let report = Report { header, copy_gbps, rows, launch_overhead, module_load, skipped, failures };
    print!("{}", report.table());
    std::fs::write(&options.json, serde_json::to_string_pretty(&report.json())?)?;
    println!("\nJSON written to {}", options.json);
    if report.failures.is_empty() { Ok(()) } else { Err(format!("{} case(s) failed: {}", report.failures.len(), report.failures.join("; ")).into()) }
}

/// The `us_per_launch` of the JSON line `bench/cuda/launch_overhead.cu` prints.
fn read_runtime_overhead(path: &str) -> Result<f64, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let value: serde_json::Value = serde_json::from_str(text.trim()).map_err(|e| format!("{path} is not the program's JSON line: {e}"))?;
    value["us_per_launch"].as_f64().ok_or_else(|| format!("{path} has no us_per_launch"))
}

/// The current UTC time as `YYYY-MM-DD HH:MM UTC` (civil-from-days, no time-zone data needed).
fn utc_now() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02} UTC", rem / 3600, (rem % 3600) / 60)
}
