//! The example kernels beside their CUDA C++ twins (`bench/cuda/reference_kernels.cu`,
//! compiled at run time by NVRTC): inputs, CPU references, checked runs and timings. The main
//! job (`cargo run --release`) shows them at [`Sizes::QUICK`], `ferrocuda-bench` measures them
//! at [`Sizes::BENCH`] and writes the figures of BENCHMARKS.md. Host-only.

pub mod cases;
pub mod cpu;
pub mod cublas;
pub mod harness;
pub mod nvrtc;
pub mod timing;

pub use cases::{BenchResult, Env, Sizes};

/// One measured kernel in one implementation.
#[derive(Debug, Clone)]
pub struct Row {
    /// Kernel name (the symbol in both implementations).
    pub kernel: &'static str,
    /// "Rust (ferrocuda)", "CUDA C++ (NVRTC)" or "cuBLAS".
    pub implementation: String,
    /// Problem size in words.
    pub size: String,
    /// Median GPU time of the timed runs, in milliseconds.
    pub median_ms: f64,
    /// Fastest timed run, in milliseconds.
    pub min_ms: f64,
    /// Bytes the kernel must read and write at least (memory-bound kernels).
    pub bytes: Option<f64>,
    /// Floating-point operations (compute-bound kernels).
    pub flops: Option<f64>,
    /// Registers per thread, as the driver reports for the loaded kernel.
    pub registers: Option<u32>,
    /// What the check against the CPU found ("exact", "max rel err ...").
    pub check: String,
}

impl Row {
    /// Achieved bandwidth in GB/s (10^9 bytes per second).
    pub fn gbps(&self) -> Option<f64> {
        self.bytes.map(|b| b / (self.median_ms * 1e-3) / 1e9)
    }

    /// Achieved TFLOP/s.
    pub fn tflops(&self) -> Option<f64> {
        self.flops.map(|f| f / (self.median_ms * 1e-3) / 1e12)
    }
}

/// What [`run_all`] produced: rows of the cases that passed their checks, comparisons that
/// could not run (and why), and cases that failed (no time reported for them).
#[derive(Debug, Default)]
pub struct Outcome {
    /// Kernel rows, each implementation of a kernel one row.
    pub rows: Vec<Row>,
    /// Comparisons that could not run, and why (cuBLAS missing, ...).
    pub skipped: Vec<String>,
    /// `case: error` for each case whose result disagreed with the CPU or failed otherwise.
    pub failures: Vec<String>,
}

/// Runs every example kernel's case (and cuBLAS beside the matmuls), calling `progress` with
/// each case's name before it runs. A failed case is reported and the others still run.
pub fn run_all(env: &Env, progress: impl FnMut(&str)) -> Outcome {
    run_cases(env, |_| true, progress)
}

/// The names of the cases [`run_all`] runs, in order ("matmul" last).
pub const CASES: [&str; 12] =
    ["saxpy", "sum", "transpose", "softmax", "histogram", "stencil", "layernorm", "softmax_online", "adamw", "gelu_bf16", "partitions", "matmul"];

/// [`run_all`] for the cases whose name `selected` accepts (see [`CASES`]).
pub fn run_cases(env: &Env, selected: impl Fn(&str) -> bool, mut progress: impl FnMut(&str)) -> Outcome {
    let mut outcome = Outcome::default();
    type Case = fn(&Env) -> BenchResult<Vec<Row>>;
    let cases: [(&str, Case); 11] = [
        ("saxpy", cases::saxpy),
        ("sum", cases::sum),
        ("transpose", cases::transpose),
        ("softmax", cases::softmax),
        ("histogram", cases::histogram),
        ("stencil", cases::stencil),
        ("layernorm", cases::layernorm),
        ("softmax_online", cases::softmax_online),
        ("adamw", cases::adamw),
        ("gelu_bf16", cases::gelu_bf16),
        ("partitions", cases::partitions),
    ];
    for (name, case) in cases {
        if !selected(name) {
            continue;
        }
        progress(name);
        match case(env) {
            Ok(rows) => outcome.rows.extend(rows),
            Err(error) => outcome.failures.push(format!("{name}: {error}")),
        }
    }
    if !selected("matmul") {
        return outcome;
    }
    progress("matmul");
    match cases::matmul(env) {
        Ok((rows, cublas_skipped)) => {
            outcome.rows.extend(rows);
            outcome.skipped.extend(cublas_skipped);
        }
        Err(error) => outcome.failures.push(format!("matmul: {error}")),
    }
    outcome
}
