//! `KernelBuilder::fast_math(true)` is nvcc's `--use_fast_math`, function by function (issue 30):
//! each `f32` function of `DeviceFloat` in its own kernel, built with fast math for sm_80, must
//! use the same special-function instructions (`*.approx`) as nvcc 13's PTX for the CUDA function
//! under `--use_fast_math` (recorded in [`NVCC`]; the table of docs/performance.md and
//! `ferrocuda_device::math`). The default build keeps the precise functions, except `rsqrt`,
//! which is CUDA's `rsqrtf` (`rsqrt.approx.f32`) in both modes, as under nvcc.
//!
//! How [`NVCC`] was made: `nvcc -arch=sm_90 [--use_fast_math] -ptx` of one kernel per function
//! (`o[i] = tanhf(x[i])`, ...), the `*.approx`/`div`/`sqrt` instructions of each listed
//! (bench/results/fast-math-nvcc.txt has the listing and the command).

#[path = "common/ptx.rs"]
mod ptx_text;
#[path = "common/scratch_crate.rs"]
mod scratch_crate;
use ptx_text::{entry_body, opcodes};

use std::path::PathBuf;

use ferrocuda_builder::{Arch, KernelBuilder};

/// One row: our method, the CUDA function, nvcc's approximate instructions under
/// `--use_fast_math` (sorted, deduplicated; empty: software only), and ours where they differ
/// on purpose (`None`: the same).
struct Row {
    method: &'static str,
    cuda: &'static str,
    nvcc_fast: &'static [&'static str],
    ours_fast: Option<&'static [&'static str]>,
}

const fn row(method: &'static str, cuda: &'static str, nvcc_fast: &'static [&'static str]) -> Row {
    Row { method, cuda, nvcc_fast, ours_fast: None }
}

const EX2: &str = "ex2.approx.ftz.f32";
const LG2: &str = "lg2.approx.ftz.f32";
const DIV: &str = "div.approx.ftz.f32";

/// nvcc 13 (`-arch=sm_90 --use_fast_math -ptx`), per function.
const NVCC: &[Row] = &[
    row("sqrt", "sqrtf", &["sqrt.approx.ftz.f32"]),
    row("rsqrt", "rsqrtf", &["rsqrt.approx.ftz.f32"]),
    row("exp", "expf", &[EX2]),
    row("exp2", "exp2f", &[EX2]),
    row("ln", "logf", &[LG2]),
    row("log2", "log2f", &[LG2]),
    row("log10", "log10f", &[LG2]),
    row("sin", "sinf", &["sin.approx.ftz.f32"]),
    row("cos", "cosf", &["cos.approx.ftz.f32"]),
    row("tan", "tanf", &["cos.approx.ftz.f32", DIV, "sin.approx.ftz.f32"]),
    row("tanh", "tanhf", &["tanh.approx.f32"]),
    row("cosh", "coshf", &[DIV, EX2]),
    row("sinh", "sinhf", &[DIV, EX2]),
    row("powf", "powf", &[EX2, LG2]),
    // Software in both; nvcc's use SFU instructions inside (cbrtf: ex2/lg2; asinf/acosf: rsqrt;
    // atanf: rcp; erff/erfcf: ex2), ours are musl's polynomials (libm), whose divisions fast
    // math makes `div.approx.ftz` (as nvcc's `/`; the builder adds the `.ftz`, issue 30).
    Row { method: "cbrt", cuda: "cbrtf", nvcc_fast: &[EX2, LG2], ours_fast: Some(&[]) },
    Row { method: "exp_m1", cuda: "expm1f", nvcc_fast: &[], ours_fast: Some(&[DIV]) },
    Row { method: "ln_1p", cuda: "log1pf", nvcc_fast: &[], ours_fast: Some(&[DIV]) },
    Row { method: "asin", cuda: "asinf", nvcc_fast: &["rsqrt.approx.ftz.f32"], ours_fast: Some(&[DIV]) },
    Row { method: "atan", cuda: "atanf", nvcc_fast: &["rcp.approx.ftz.f32"], ours_fast: Some(&[DIV]) },
    Row { method: "erf", cuda: "erff", nvcc_fast: &[EX2], ours_fast: Some(&[DIV, "rcp.approx.ftz.f32"]) },
    // `/` is `div.approx.ftz` in both: LLVM writes `div.approx.f32` (rustc cannot ask it for
    // `.ftz`), and the builder's fast-math pass adds the `.ftz` (issue 30's second port: without
    // it ptxas wraps each division in a denormal check, llm.c's GELU backward ran at 0.85x).
    row("div", "x / y", &[DIV]),
];

fn expression(method: &str) -> String {
    match method {
        "powf" => "v.powf(w)".into(),
        "div" => "v / w".into(),
        "asin" => "(v * 0.1).asin()".into(),
        m => format!("v.{m}()"),
    }
}

fn kernel_source() -> String {
    let mut source = String::from(
        "#![cfg_attr(target_arch = \"nvptx64\", no_std, feature(abi_ptx, asm_experimental_arch))]\n\
         use ferrocuda_device::global::{DisjointSlice, unique_index};\n\
         use ferrocuda_device::math::DeviceFloat;\n",
    );
    for row in NVCC {
        source += &format!(
            "#[ferrocuda_device::kernel]\npub fn f_{m}(x: &[f32], z: &[f32], mut y: DisjointSlice<f32>) {{\n\
             \x20   let i = unique_index();\n\
             \x20   if let (Some(out), Some(&v), Some(&w)) = (y.get_mut(i), x.get(i.get()), z.get(i.get())) {{ let _ = w; *out = {e}; }}\n}}\n",
            m = row.method,
            e = expression(row.method)
        );
    }
    source
}

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The PTX of the kernel crate built for sm_80, with or without fast math.
fn build(fast: bool) -> String {
    let name = if fast { "p30-fast-math" } else { "p30-precise-math" };
    let dir = scratch_crate::kernel_crate(name, &kernel_source(), "");
    let target = workspace().join("target/ferrocuda-test-device");
    let artifacts = KernelBuilder::new(&dir).arch(Arch::SM_80).fast_math(fast).out_dir(&dir).target_dir(&target).build().unwrap_or_else(|e| panic!("{e}"));
    std::fs::read_to_string(&artifacts.ptx[0].1).unwrap()
}

/// The approximate (special-function) instructions of a kernel body, sorted, deduplicated.
fn approximations(body: &str) -> Vec<&str> {
    let mut ops: Vec<&str> = opcodes(body).into_iter().filter(|op| op.contains(".approx")).collect();
    ops.sort_unstable();
    ops.dedup();
    ops
}

/// Regression p30_4: under `fast_math(true)`, `tanh` and `cosh` were libm's software (0.15-0.21x
/// nvcc on a GELU backward); nvcc emits `tanh.approx.f32` and an `ex2.approx`. Every function
/// now uses nvcc's special-function instructions, and the whole table is printed.
#[test]
fn p30_4_fast_math_uses_nvccs_instructions_function_by_function() {
    let ptx = build(true);
    let mut failures = Vec::new();
    println!("| ours | CUDA | nvcc --use_fast_math | ours under fast_math(true) | our instructions |");
    for row in NVCC {
        let body = entry_body(&ptx, &format!("f_{}", row.method));
        let ours = approximations(body);
        let expected = row.ours_fast.unwrap_or(row.nvcc_fast);
        // Instructions of the function alone: the kernel's own loads, stores and index math
        // are the same in every kernel (the `exp2` kernel's body minus one instruction).
        let count = opcodes(body).len();
        println!("| `{}` | `{}` | {:?} | {:?} | {count} |", row.method, row.cuda, row.nvcc_fast, ours);
        if ours != expected {
            failures.push(format!("{} ({}): expected {expected:?}, ours {ours:?}", row.method, row.cuda));
        }
        assert!(!body.contains("call"), "{}: a call left in the kernel:\n{body}", row.method);
    }
    assert!(failures.is_empty(), "{failures:#?}");
    // tanh, cosh and sinh are no longer than nvcc's: the PTX instructions of the function alone
    // (the kernel's minus the `exp2` kernel's, whose function is one instruction) against nvcc's
    // function alone (1, 24 and 37 instructions).
    let skeleton = opcodes(entry_body(&ptx, "f_exp2")).len() - 1;
    for (method, nvcc) in [("tanh", 1), ("cosh", 24), ("sinh", 37)] {
        let ours = opcodes(entry_body(&ptx, &format!("f_{method}"))).len() - skeleton;
        println!("{method}: {ours} PTX instructions (nvcc: {nvcc})");
        assert!(ours <= nvcc, "{method}: {ours} instructions, nvcc's has {nvcc}");
    }
}

/// Without fast math the functions stay precise (no approximate instruction), except where
/// nvcc's precise functions are built on one too: `rsqrt` is CUDA's `rsqrtf` there as well
/// (`rsqrt.approx.f32`; before issue 30 it was `1 / sqrt.rn`, two roundings and two slow
/// instructions), `cosh` and `sinh` use one `ex2.approx.ftz` and an approximate division, as
/// nvcc's `coshf`/`sinhf` do, `tanh` one `ex2.approx.ftz` and one `rcp.approx.ftz` and no
/// division, as nvcc's `tanhf` (the p30 held-out port: `div.rn` before, 226 SASS instructions
/// in a GELU-and-mul against nvcc's 65) (they were libm's software `expf`/`expm1f`:
/// a GELU backward at 0.74x nvcc's), and `exp`, `erf` one `ex2.approx.ftz` each, as nvcc's
/// `expf`/`erff`.
#[test]
fn p30_4_precise_math_keeps_precise_functions_and_rsqrt_is_cudas_rsqrtf() {
    let ptx = build(false);
    for row in NVCC {
        let body = entry_body(&ptx, &format!("f_{}", row.method));
        let ours = approximations(body);
        let expected: &[&str] = match row.method {
            "rsqrt" => &["rsqrt.approx.f32"],
            "cosh" | "sinh" => &[DIV, EX2],
            // nvcc's branch-free `tanhf`: `1 - 2 rcp(e^(2|x|) + 1)` beside an odd polynomial
            // (issue 30's held-out port, session 15: a correctly rounded division before).
            "tanh" => &[EX2, "rcp.approx.ftz.f32"],
            // nvcc's precise `expf`/`erff` (issue 30's ports: libm's software ones ran vLLM's
            // moeSoftmax at 0.57x and gelu_and_mul at 0.31x nvcc's).
            "exp" | "erf" => &[EX2],
            _ => &[],
        };
        assert_eq!(ours, expected, "{} without fast math", row.method);
        assert!(!body.contains("call"), "{}: a call left in the kernel:\n{body}", row.method);
    }
}
