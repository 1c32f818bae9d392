//! Build-script helper that compiles a Rust kernel crate to PTX with rustc's own NVPTX backend.
//!
//! ```no_run
//! // build.rs of a kernel crate
//! fn main() {
//!     ferrocuda_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR"))
//!         .cubin_arch("sm_90".parse().unwrap())
//!         .run();
//! }
//! ```
//!
//! The crate is built for `nvptx64-nvidia-cuda` by a second cargo in its own target directory,
//! with `-Zbuild-std=core`, fat LTO and `--emit=asm=<path>`, which yields one self-contained PTX
//! module per requested architecture at a path the builder chooses. The module's `.version` is
//! the builder's choice, not rustc's ([`pinned_ptx_isa`]: 7.8 below sm_90, 8.3 for sm_90), so
//! every instruction the device library offers for the architecture assembles;
//! [`KernelBuilder::fast_math`] is nvcc's `--use_fast_math`. When `ptxas` is found,
//! cubins are compiled too, and `ptxas -v`'s registers, spills and shared memory are recorded
//! per kernel. A Rust file listing the artifacts is written to `OUT_DIR`;
//! `ferrocuda_device::embed_kernels!()` includes it. The builder also declares the cfgs it sets
//! (`ferrocuda_sm`, `ferrocuda_device`) to cargo, so kernel crates need no check-cfg list.
#![deny(unsafe_code)]
// The example above is a whole build script, so it shows its `fn main`.
#![allow(clippy::needless_doctest_main)]

mod arch;
mod artifacts;
mod call_graph;
mod dep_info;
mod env;
mod error;
mod fast_math;
mod inner_build;
mod kernel_names;
mod kernel_tag;
mod launch_bounds;
mod local_memory;
mod manifest;
mod nounroll;
mod occupancy;
mod ptx_isa;
mod ptx_text;
mod ptxas;
mod same_name;
mod toolchain;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

pub use arch::{ARCH_GATED_MODULES, Arch, DEFAULT_CUBIN_ARCHS, DEFAULT_PTX_ARCH, FmaContraction, KNOWN_ARCHS, check_cfg_lines, gated_module_notes};
pub use artifacts::{Artifacts, Cubin, clean_debug_ptx, clean_ptx};
pub use call_graph::{IndirectCall, Recursion, indirect_call_kernels, recursive_kernels};
pub use env::BuildEnv;
pub use error::BuildError;
pub use fast_math::flush_approximate_divisions;
pub use fast_math::{FTZ_COMMENT, flush_denormals, flush_denormals_in_marked_kernels};
pub use inner_build::{KERNEL_CRATE_FEATURES, strip_ansi};
pub use kernel_names::{fill_kernel_names, kernel_names_table};
pub use kernel_tag::remove_dead_kernel_tags;
pub use launch_bounds::apply_launch_bounds;
pub use manifest::lib_crate_name;
pub use ptx_isa::{declare_ptx_isa, pinned_ptx_isa};
pub use ptxas::{DeviceDebug, KernelResources, compile_cubin, compile_cubin_with, find_ptxas, parse_resources};
pub use toolchain::{DeviceToolchain, ToolchainSource};

use inner_build::InnerBuild;

/// The rustc target of every device build.
pub const TARGET: &str = "nvptx64-nvidia-cuda";

/// Compiles one kernel crate to PTX (and cubins). See the crate docs.
#[must_use]
#[derive(Debug, Clone)]
pub struct KernelBuilder {
    crate_dir: PathBuf,
    ptx_archs: Vec<Arch>,
    cubin_archs: Vec<Arch>,
    release: bool,
    line_info: bool,
    debug_info: bool,
    fma: FmaContraction,
    fast_math: bool,
    /// nvcc's `-ftz=true` for every kernel ([`KernelBuilder::ftz`]).
    ftz: bool,
    ptx_isa: Option<(u32, u32)>,
    panic_messages: Option<bool>,
    cfgs: Vec<String>,
    target_dir: Option<PathBuf>,
    out_dir: Option<PathBuf>,
    env: BuildEnv,
    /// Kernels allowed to recurse ([`KernelBuilder::allow_recursion`]).
    recursive: Vec<String>,
    local_memory_expected: Vec<String>,
    /// Kernels whose occupancy cliff is intended ([`KernelBuilder::occupancy_expected`]).
    occupancy_expected: Vec<String>,
    /// The block size checked for kernels that declare none ([`KernelBuilder::launch_block_threads`]).
    launch_block_threads: Option<u32>,
    /// Integer overflow checks in the device build ([`KernelBuilder::overflow_checks`]).
    overflow_checks: Option<bool>,
    /// LLVM's full-unroll cost threshold ([`KernelBuilder::unroll_threshold`]).
    unroll_threshold: u32,
    /// Unroll factor for loops with a run-time trip count ([`KernelBuilder::runtime_unroll`]).
    runtime_unroll: u32,
}

/// The builder's default LLVM full-unroll threshold ([`KernelBuilder::unroll_threshold`]):
/// nvcc-like unrolling of short constant-count loops, barriers and all.
pub const DEFAULT_UNROLL_THRESHOLD: u32 = 400;

/// LLVM's size limit for a partially or run-time unrolled loop body (`-unroll-partial-threshold`)
/// when [`KernelBuilder::runtime_unroll`] is on: NVPTX's own is 75 (a quarter of the full-unroll
/// threshold at `-O3`), which leaves a loop of one 16-byte load and eight `f32` adds rolled.
const RUNTIME_UNROLL_PARTIAL_THRESHOLD: u32 = 200;

impl KernelBuilder {
    /// A builder for the kernel crate in `crate_dir` (the directory with its `Cargo.toml`).
    pub fn new(crate_dir: impl Into<PathBuf>) -> Self {
        Self {
            crate_dir: crate_dir.into(),
            ptx_archs: Vec::new(),
            cubin_archs: Vec::new(),
            release: true,
            line_info: true,
            debug_info: false,
            fma: FmaContraction::Fast,
            fast_math: false,
            ftz: false,
            ptx_isa: None,
            panic_messages: None,
            cfgs: Vec::new(),
            target_dir: None,
            out_dir: None,
            env: BuildEnv::process(),
            recursive: Vec::new(),
            local_memory_expected: Vec::new(),
            occupancy_expected: Vec::new(),
            launch_block_threads: None,
            overflow_checks: None,
            unroll_threshold: DEFAULT_UNROLL_THRESHOLD,
            runtime_unroll: 0,
        }
    }

    /// LLVM's cost limit for unrolling a loop completely (`-unroll-threshold`; default
    /// [`DEFAULT_UNROLL_THRESHOLD`], LLVM's own is 300 at `-O3`; 0 leaves LLVM's).
    ///
    /// Why the builder raises it: nvcc unrolls a short loop with a constant trip count even
    /// when its body is long and holds barriers, such as llm.c's `for (o = 0; o < 2; ++o) {
    /// .. __syncthreads() .. }` over `dout128[o * 4 + i]`. LLVM counts the whole body against
    /// 300 and, for a loop that holds another loop, leaves out the savings of unrolling (the
    /// register arrays it indexes becoming registers), so it kept that loop rolled and its
    /// four `[f32; 8]` arrays went to local memory: a 128-byte stack frame and `LDL`/`STL` in
    /// the hot loop, 0.33x nvcc (issue 30's third held-out port). Only complete unrolling
    /// changes here: partial and run-time unrolling are [`runtime_unroll`](Self::runtime_unroll)'s. Why 400 and not more:
    /// 400 unrolls that loop; at 1000 LLVM also unrolled the panic handler's byte copy in
    /// every kernel with a panic path (190-890 more SASS instructions, `tests/panic_cost.rs`'s
    /// bound), and hiding its bound from LLVM made it grow the same way.
    pub fn unroll_threshold(mut self, threshold: u32) -> Self {
        self.unroll_threshold = threshold;
        self
    }

    /// How many iterations of a loop with a run-time trip count LLVM may put in one: 4 is
    /// nvcc's; the default, 0 (or 1), leaves LLVM's NVPTX limits, which keep such a loop rolled
    /// unless its body is a few instructions.
    ///
    /// Why: a memory-bound loop over a run-time count, such as llm.c's `wpe_backward_kernel`
    /// summing a 16-byte pack over the batch (`for (b = 0; b < B; b++)
    /// load128cs(dout + b T C + ..)`), runs at the speed of the loads in flight per thread. nvcc unrolls it by 4 (four
    /// `LDG.E.EF.128` back to back); LLVM's NVPTX limit (75 cost units for the unrolled body)
    /// kept it rolled, one load in flight: 0.80x nvcc on an H200, 1.01x with
    /// `runtime_unroll(4)` (issue 30's eighth held-out port, bench/results/s21-gaps). LLVM also
    /// refuses loops with a second exit, which every bounds-checked `let Some(x) =
    /// input.get(i) else { return }` in a loop adds; with `-unroll-runtime-multi-exit` the four
    /// checks come first and the four loads follow them. The flags: `-unroll-max-count=N`
    /// (partial and run-time unrolling only; complete unrolling is
    /// [`unroll_threshold`](Self::unroll_threshold)'s), `-unroll-partial-threshold=200`,
    /// `-unroll-runtime-multi-exit=true`.
    ///
    /// Why not the default: in the kernel library it also unrolls the block-strided row loops
    /// of the norms (89 of 326 kernels change, up to +4 registers, some past 32, SASS +100 to
    /// +450; bench/results/s21-gaps/corpus-regs-sass.txt), which no GPU run has measured yet;
    /// on bench/ports6's changed kernels it measured the same as without.
    pub fn runtime_unroll(mut self, factor: u32) -> Self {
        self.runtime_unroll = factor;
        self
    }

    /// Whether the device build checks integer overflow (`x + 1` at the type's maximum
    /// panics, as in a host build with `overflow-checks`) or wraps (audit 2026-11-27b, Q11).
    ///
    /// Default: as cargo's default for the profile that runs the build script (`PROFILE`:
    /// `debug`, checks on; `release`, off), so that a kernel crate's host build, which the CPU
    /// executor runs, and its device build agree; outside a build script, on for
    /// [`release(false)`](Self::release) builds. A profile that sets `overflow-checks` itself
    /// (for example `[profile.release.package.my-kernels] overflow-checks = true`) is not
    /// visible to a build script: say the same here. The CPU executor refuses to run a kernel
    /// whose two builds disagree (`CpuError::OverflowChecksDiffer`), naming this setting.
    pub fn overflow_checks(mut self, checks: bool) -> Self {
        self.overflow_checks = Some(checks);
        self
    }

    /// Whether the device build will check integer overflow (see
    /// [`overflow_checks`](Self::overflow_checks)).
    pub fn checks_overflow(&self) -> bool {
        self.overflow_checks.unwrap_or_else(|| match self.env.var("PROFILE").as_deref() {
            Some(profile) if self.env.var("OUT_DIR").is_some() => profile == "debug",
            _ => !self.release,
        })
    }

    /// Lets the kernel `kernel` (its PTX symbol) reach a recursive function or call through a
    /// function pointer or `dyn` method, which the build otherwise refuses
    /// ([`BuildError::RecursiveKernel`], audit P10; [`BuildError::IndirectCall`], audit
    /// 2026-11-27b Q4): the depth of a recursion is known only while it runs, ptxas leaves
    /// indirectly called frames out of the kernel's stack size, and a GPU thread's stack is
    /// fixed per context, so a deep chain runs off it and faults (`CUDA_ERROR_ILLEGAL_ADDRESS`).
    /// A fault of a context where such a kernel ran names the kernel and the stack limit.
    ///
    /// # Safety
    /// Every launch of `kernel` must recurse no deeper than the stack the context gives each
    /// thread: the host sets it with `Context::set_limit(Limit::StackSize, bytes)` before the
    /// launches (1 KiB by default), with room for the deepest chain of frames a launch makes
    /// (`ptxas -v` prints each function's frame). A deeper recursion writes past the thread's
    /// stack. The CPU executor's stacks are another size (16 MiB by default) and its frames are
    /// the host's, so it does not check this.
    #[allow(unsafe_code, reason = "the contract is the caller's: nothing here is unsafe to run")]
    pub unsafe fn allow_recursion(mut self, kernel: impl Into<String>) -> Self {
        self.recursive.push(kernel.into());
        self
    }

    /// Marks `kernel`'s local memory (a stack frame or spills in `ptxas -v`) as intended, so the
    /// build does not warn about it: every other kernel with local memory gets a `cargo:warning`
    /// naming it, its bytes and the likely cause (an array indexed in a loop the compiler left
    /// rolled, or register pressure; docs/performance.md). For kernels that keep a buffer on
    /// the stack on purpose (printing, a deliberately large frame).
    /// A name ending in `*` is a prefix: `local_memory_expected("attention_*")` vouches for
    /// every kernel whose name starts with `attention_`. Builds with overflow checks (a debug
    /// profile's) do not warn: their register allocation is not the release build's.
    pub fn local_memory_expected(mut self, kernel: impl Into<String>) -> Self {
        self.local_memory_expected.push(kernel.into());
        self
    }

    /// Marks `kernel`'s register count as intended where it leaves one block per SM.
    ///
    /// The build warns when a kernel's registers (`ptxas -v`, newest cubin) leave **one**
    /// resident block per SM where 8 fewer registers would fit two: at the block size the
    /// kernel declares with `launch_bounds`, or, without one, at 1024, 512 or 256 threads
    /// (more than 32, 64 or 128 registers). The fix is fewer live values (16-bit packs kept
    /// packed) or `launch_bounds(threads, 2)`. To have it check the one size you launch, name
    /// the size with [`launch_block_threads`](Self::launch_block_threads), which caps nothing:
    /// a bare `launch_bounds(threads)` (`.maxntid` without `.minnctapersm`) lets ptxas cap the
    /// registers for full occupancy, with spills (issue 30's ninth port: 39 -> 32 registers
    /// and a 16-byte spill); where a bound is wanted, give the block count that keeps the
    /// register count you want, `launch_bounds(threads, 65536 / (threads x registers))`. For a kernel that needs the registers (one block per SM on purpose), name it
    /// here; a name ending in `*` is a prefix. Builds with overflow checks do not warn.
    pub fn occupancy_expected(mut self, kernel: impl Into<String>) -> Self {
        self.occupancy_expected.push(kernel.into());
        self
    }

    /// The block size this crate launches its kernels with, where a kernel declares none:
    /// the occupancy warning ([`occupancy_expected`](Self::occupancy_expected)) checks that
    /// size instead of 1024, 512 and 256 threads. A kernel's own `launch_bounds` still wins.
    pub fn launch_block_threads(mut self, threads: u32) -> Self {
        self.launch_block_threads = Some(threads);
        self
    }

    /// Adds a PTX target architecture (default: [`DEFAULT_PTX_ARCH`] alone). Each one is a device build of
    /// its own; the host loads the newest one the GPU can run. One PTX architecture plus
    /// [`cubin_arch`](Self::cubin_arch) for the GPUs you run on builds fastest.
    pub fn arch(mut self, arch: Arch) -> Self {
        self.ptx_archs.push(arch);
        self
    }

    /// Adds a cubin architecture, compiled by `ptxas` from the newest PTX not newer than it
    /// (default: one cubin per PTX architecture given with [`arch`](Self::arch), or
    /// [`DEFAULT_CUBIN_ARCHS`] when none was given). Ignored when `ptxas` is not found.
    pub fn cubin_arch(mut self, arch: Arch) -> Self {
        self.cubin_archs.push(arch);
        self
    }

    /// Optimised (`true`, the default) or unoptimised device code.
    pub fn release(mut self, release: bool) -> Self {
        self.release = release;
        self
    }

    /// Source line information in the PTX and cubins, for profilers and the sanitizer
    /// (default on; it does not change the generated code).
    pub fn line_info(mut self, line_info: bool) -> Self {
        self.line_info = line_info;
        self
    }

    /// Full device debug information (default off): rustc's `-Cdebuginfo=2` and `ptxas -g`
    /// (`--device-debug`), for cuda-gdb and for compute-sanitizer reports with inlined frames.
    /// `ptxas -g` also turns off ptxas's optimisations, so the cubins are much slower; the
    /// PTX itself stays optimised (set [`KernelBuilder::release`] to `false` for that too).
    /// Line information ([`KernelBuilder::line_info`]) is enough for file:line in
    /// compute-sanitizer and in Nsight Compute's source view, at no cost.
    pub fn debug_info(mut self, debug_info: bool) -> Self {
        self.debug_info = debug_info;
        self
    }

    /// The `ptxas` debug level the options ask for.
    pub fn device_debug(&self) -> DeviceDebug {
        match (self.debug_info, self.line_info) {
            (true, _) => DeviceDebug::Full,
            (false, true) => DeviceDebug::LineInfo,
            (false, false) => DeviceDebug::None,
        }
    }

    /// The detailed panic handler (`true`) or the cheap one (`false`; the default for optimised
    /// builds, while [`release(false)`](Self::release) builds default to the detailed one).
    ///
    /// The cheap handler records the kernel, file, line, column, block and thread of the first
    /// panicking thread, and the message of `kernel_panic!`, with no stack frame and a few
    /// registers at most (see docs/performance.md, "Panic paths"). The detailed one also keeps
    /// the messages of core's panics that have no arguments ("attempt to divide by zero") and
    /// prints the report from the device through `vprintf`, for a ~600-byte stack frame, 30-50
    /// registers and ~1,500 SASS instructions in every kernel with a panic path. It sets the
    /// cfg `ferrocuda_panic_messages` in the device build.
    pub fn panic_messages(mut self, detailed: bool) -> Self {
        self.panic_messages = Some(detailed);
        self
    }

    /// Whether the device build uses the detailed panic handler (see
    /// [`panic_messages`](Self::panic_messages)).
    pub fn keeps_panic_messages(&self) -> bool {
        self.panic_messages.unwrap_or(!self.release)
    }

    /// Floating-point contraction policy (default [`FmaContraction::Fast`], as nvcc).
    pub fn fma(mut self, fma: FmaContraction) -> Self {
        self.fma = fma;
        self
    }

    /// The PTX ISA version the modules declare (`.version`), for every architecture built
    /// (default: [`pinned_ptx_isa`] of each, under which everything `ferrocuda-device` offers
    /// for that architecture assembles). Lower it only to load the PTX on an older driver
    /// (ISA 7.8 needs CUDA 11.8, 8.3 needs CUDA 12.3); a module never declares less than
    /// rustc wrote for the architecture.
    pub fn ptx_isa(mut self, major: u32, minor: u32) -> Self {
        self.ptx_isa = Some((major, minor));
        self
    }

    /// The PTX ISA the module for `arch` declares (at least; rustc may have written newer).
    pub fn ptx_isa_for(&self, arch: Arch) -> (u32, u32) {
        self.ptx_isa.unwrap_or_else(|| pinned_ptx_isa(arch))
    }

    /// nvcc's `--use_fast_math` (default off): sets `--cfg ferrocuda_fast_math` on the device
    /// build, under which `ferrocuda_device::math`'s `DeviceFloat` methods on `f32` use the
    /// hardware approximations (`sqrt`/`rsqrt`/`exp`/`exp2`/`ln`/`log2`/`sin`/`cos`/`tanh`
    /// become `*.approx.ftz.f32`, denormal inputs and results flush to zero) and
    /// `f32` `/` compiles to `div.approx.ftz.f32` and `1.0 / x` to `rcp.approx.ftz.f32` (nvcc's
    /// `-prec-div=false` with the `-ftz=true` that `--use_fast_math` implies; the builder adds
    /// the `.ftz` LLVM leaves out). `f64` is unchanged, as under nvcc; plain `f32` `+ - *` do
    /// not flush denormals (rustc cannot ask for `.ftz` arithmetic). Accuracy: see the `math` module's table. The CPU executor runs the
    /// precise functions either way.
    pub fn fast_math(mut self, fast_math: bool) -> Self {
        self.fast_math = fast_math;
        self
    }

    /// nvcc's `-ftz=true` (default off: IEEE subnormals, as nvcc without it): every `f32`
    /// instruction of the crate's kernels that takes PTX's `.ftz` gets it (`add`, `sub`, `mul`,
    /// `fma`, `div`, `rcp`, `sqrt`, `rsqrt`, `min`, `max`, `abs`, `neg`, `setp`, the SFU
    /// approximations): subnormal inputs and results become zero of the same sign. nvcc's
    /// `--use_fast_math` implies it; with [`fast_math`](Self::fast_math) this is that pair. For
    /// one kernel of a crate, `#[kernel(ftz)]` does the same to that kernel alone.
    ///
    /// Why a port wants it: ptxas fuses a multiply and an add only when both flush alike, so
    /// nvcc's fast-math `x / c - y` (`MUFU.RCP`, then `FFMA.FTZ x, rcp, -y`) comes out of ours
    /// only when the subtraction is `.ftz` too (issue 30, eleventh port's L1: `rstd`'s last bit
    /// in 1150 of 8192 rows without it, bit for bit with it). The CPU executor keeps IEEE
    /// arithmetic (Rust defines a changed floating-point environment as undefined behaviour), so
    /// on it a subnormal operand or result is not flushed (docs/performance.md, fast-math table).
    pub fn ftz(mut self, ftz: bool) -> Self {
        self.ftz = ftz;
        self
    }

    /// Adds `--cfg <cfg>` to the device build (for example `my_feature` or `mode="fast"`).
    /// Anything else (a flag, a control character) makes [`KernelBuilder::build`] fail with
    /// [`BuildError::BadCfg`].
    pub fn cfg(mut self, cfg: impl Into<String>) -> Self {
        self.cfgs.push(cfg.into());
        self
    }

    /// The inner cargo's target directory, with one subdirectory per architecture (default:
    /// `ferrocuda-device/` in the outer build's target directory, shared by every kernel crate
    /// of the build so that `core` is compiled once per architecture; `cargo clean` removes it).
    pub fn target_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.target_dir = Some(dir.into());
        self
    }

    /// Where artifacts go (default: `OUT_DIR`).
    pub fn out_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.out_dir = Some(dir.into());
        self
    }

    /// Reads variables from `env` instead of the process environment.
    pub fn env(mut self, env: BuildEnv) -> Self {
        self.env = env;
        self
    }

    /// The PTX architectures that will be built.
    pub fn ptx_archs(&self) -> Vec<Arch> {
        if self.ptx_archs.is_empty() { vec![DEFAULT_PTX_ARCH] } else { sorted(&self.ptx_archs) }
    }

    /// The cubin architectures that will be compiled when `ptxas` is found.
    pub fn cubin_archs(&self) -> Vec<Arch> {
        match (self.cubin_archs.is_empty(), self.ptx_archs.is_empty()) {
            (false, _) => sorted(&self.cubin_archs),
            (true, false) => self.ptx_archs(),
            (true, true) => DEFAULT_CUBIN_ARCHS.to_vec(),
        }
    }

    /// The `RUSTFLAGS` of the device build for `arch` (they reach `core` too).
    pub fn rustflags(&self, arch: Arch) -> Vec<String> {
        let mut flags = vec![format!("-Ctarget-cpu={arch}")];
        // The template and README have every kernel crate declare `asm_experimental_arch`
        // (`shared_array!` expands to inline PTX in the user's crate); a crate that does not
        // use it would get `unused_features` on every build, a warning with nothing to do.
        flags.push("-Aunused_features".into());
        if self.fma == FmaContraction::Fast {
            flags.push("-Cllvm-args=-nvptx-fma-level=1".into());
        }
        if self.unroll_threshold > 0 {
            // nvcc-like complete unrolling (see `unroll_threshold`).
            flags.push(format!("-Cllvm-args=-unroll-threshold={}", self.unroll_threshold));
        }
        if self.runtime_unroll > 1 {
            // nvcc-like unrolling of run-time-count loops (see `runtime_unroll`).
            flags.push(format!("-Cllvm-args=-unroll-max-count={}", self.runtime_unroll));
            flags.push(format!("-Cllvm-args=-unroll-partial-threshold={RUNTIME_UNROLL_PARTIAL_THRESHOLD}"));
            flags.push("-Cllvm-args=-unroll-runtime-multi-exit=true".into());
        }
        if self.debug_info {
            flags.push("-Cdebuginfo=2".into());
        } else if self.line_info {
            flags.push("-Cdebuginfo=line-tables-only".into());
        }
        for n in arch.cfg_values() {
            flags.push("--cfg".into());
            flags.push(format!("ferrocuda_sm=\"{n}\""));
        }
        if arch.is_arch_specific() {
            // `ferrocuda_sm = "90a"` gates wgmma/setmaxnreg; PTX ISA 8.3 (rustc's default for
            // sm_90a is 8.0) adds `fence.proxy.tensormap` for tensor maps in global memory.
            flags.push("--cfg".into());
            flags.push(format!("ferrocuda_sm=\"{}a\"", arch.number()));
            flags.push("-Ctarget-feature=+ptx83".into());
        }
        if self.fast_math {
            // nvcc's `-prec-div=false -prec-sqrt=false`: `f32` `/` and `sqrt` approximate.
            flags.push("-Cllvm-args=-nvptx-prec-divf32=0".into());
            flags.push("-Cllvm-args=-nvptx-prec-sqrtf32=0".into());
            flags.push("--cfg".into());
            flags.push("ferrocuda_fast_math".into());
        }
        if self.keeps_panic_messages() {
            flags.push("--cfg".into());
            flags.push("ferrocuda_panic_messages".into());
        }
        for cfg in &self.cfgs {
            flags.push("--cfg".into());
            flags.push(cfg.clone());
        }
        flags
    }

    /// Runs the build from a build script: on error prints the message (not a panic
    /// backtrace) and exits with status 1.
    pub fn run(self) -> Artifacts {
        match self.build() {
            Ok(artifacts) => artifacts,
            Err(error) => {
                eprintln!("error: {error}");
                std::process::exit(1);
            }
        }
    }

    /// Builds the PTX modules, the cubins when `ptxas` is available, and the artifact list.
    ///
    /// The device build's warnings, each whole as rustc rendered it and once however many
    /// architectures reported it, are in [`Artifacts::warnings`]; from a build script they are
    /// also printed as `cargo:warning` lines (at most 30 diagnostics, then a count).
    ///
    /// Inside the device build itself (a build script run for `nvptx64`), only declares the
    /// cfgs.
    ///
    /// # Errors
    /// See [`BuildError`]; each variant says what to do.
    pub fn build(self) -> Result<Artifacts, BuildError> {
        if let Some(bad) = self.cfgs.iter().find(|cfg| !is_plain_cfg(cfg)) {
            return Err(BuildError::BadCfg { given: bad.clone() });
        }
        let in_build_script = self.env.var("OUT_DIR").is_some();
        if in_build_script {
            for line in check_cfg_lines(&self.ptx_archs()) {
                println!("{line}");
            }
        }
        if self.env.var("CARGO_CFG_TARGET_ARCH").as_deref() == Some("nvptx64") {
            return Ok(Artifacts::default());
        }
        let out_dir = match (&self.out_dir, self.env.var("OUT_DIR")) {
            (Some(dir), _) => dir.clone(),
            (None, Some(dir)) => PathBuf::from(dir),
            (None, None) => return Err(BuildError::NoOutDir),
        };
        let out_dir = std::path::absolute(&out_dir).unwrap_or(out_dir);
        if let (true, Some(running)) = (in_build_script, self.env.var("CARGO_MANIFEST_DIR")) {
            same_name::check_build_script_crate(&self.crate_dir, Path::new(&running))?;
        }
        let manifest = self.crate_dir.join("Cargo.toml");
        let crate_name = manifest::lib_crate_name(&manifest)?;
        manifest::check_generated_paths(&manifest, &crate_name)?;
        if self.env.var("DOCS_RS").is_some() {
            // docs.rs has no device toolchain; the docs need only the host build, which
            // compiles against an artifact list without kernels.
            let list = out_dir.join("ferrocuda_artifacts.rs");
            artifacts::write(&list, artifacts::empty_artifact_list(&crate_name).as_bytes())?;
            return Ok(Artifacts { manifest: Some(list), ..Default::default() });
        }
        let toolchain = DeviceToolchain::find(&self.env)?;
        let target_dir = self.target_dir.clone().unwrap_or_else(|| default_target_dir(&out_dir));
        let inner =
            InnerBuild { toolchain: &toolchain, manifest: &manifest, crate_name: &crate_name, release: self.release, overflow_checks: self.checks_overflow() };
        let cargo_home = self.env.var("CARGO_HOME").map(PathBuf::from).or_else(|| self.env.var("HOME").map(|home| PathBuf::from(home).join(".cargo")));

        let mut artifacts = Artifacts { toolchain: Some(toolchain.version.clone()), overflow_checks: inner.overflow_checks, ..Default::default() };
        let mut sources = BTreeSet::new();
        // One device build per architecture, side by side: each ends in a single-threaded fat
        // LTO step, so running them together uses the machine's cores better than in turn.
        let builds = in_parallel(self.ptx_archs(), |arch| {
            let arch_dir = target_dir.join(arch.to_string());
            let asm = out_dir.join(format!("{crate_name}.{arch}.s"));
            let (raw, warnings) = inner.run(arch, &arch_dir, &self.rustflags(arch), &asm)?;
            let read = dep_info::read_dep_info(
                &inner.dep_info_file(&arch_dir),
                &self.crate_dir,
                &toolchain.library_sources(),
                &toolchain.sysroot,
                cargo_home.as_deref(),
            )?;
            Ok((arch, raw, read, warnings))
        });
        for build in builds {
            let (arch, raw, read, warnings) = build?;
            // The same warning from several architectures' builds is shown once.
            for warning in warnings {
                if !artifacts.warnings.contains(&warning) {
                    artifacts.warnings.push(warning);
                }
            }
            match read {
                Some(arch_sources) => sources.extend(arch_sources),
                None => {
                    // Without cargo's dep-info, watch the whole crate directory (cargo scans it).
                    if in_build_script {
                        println!("cargo:warning=no dep-info from the device build for {arch}; watching {} as a whole", self.crate_dir.display());
                    }
                    sources.insert(self.crate_dir.clone());
                }
            }
            let ptx = if self.debug_info { clean_debug_ptx(&raw) } else { clean_ptx(&raw) };
            // `nounroll` pragmas (the device library's rolled loops) as the first statement of
            // their loop's header, where ptxas reads them (rustc's debug labels came between).
            let ptx = nounroll::hoist_nounroll_pragmas(&ptx);
            // A kernel whose stack depth nobody can bound (recursion, P10, or an indirect call
            // whose frames ptxas does not count, Q4) is refused.
            if let Some(found) = recursive_kernels(&ptx).into_iter().find(|r| !self.recursive.contains(&r.kernel)) {
                let Recursion { kernel, chain, cycle_start, through_indirect_call } = found;
                return Err(BuildError::RecursiveKernel { arch, kernel, chain, cycle_start, through_indirect_call });
            }
            let indirect = indirect_call_kernels(&ptx);
            if let Some(found) = indirect.iter().find(|r| !self.recursive.contains(&r.kernel)) {
                let IndirectCall { kernel, chain, targets } = found.clone();
                return Err(BuildError::IndirectCall { arch, kernel, chain, targets });
            }
            // The kernels vouched for are marked, so that a fault after their launch names the
            // stack limit (Q4).
            let unbounded: Vec<String> = recursive_kernels(&ptx).into_iter().map(|r| r.kernel).chain(indirect.into_iter().map(|r| r.kernel)).collect();
            let ptx = mark_unbounded_stacks(ptx, unbounded.into_iter());
            // `#[kernel(launch_bounds(..))]` markers become `.maxntid`/`.minnctapersm`/`.reqntid`.
            let ptx = apply_launch_bounds(&ptx);
            // Kernels that cannot panic lose the kernel-name tag store (a dead STS.128).
            let ptx = remove_dead_kernel_tags(&ptx);
            // The panic report's table of the module's kernel names (G22R-1: the kernel tag
            // holds an id into it, never an address).
            let ptx = fill_kernel_names(&ptx);
            // rustc declares the oldest ISA its LLVM knows for the target; declare the one
            // under which the device library's instructions for this architecture assemble.
            let ptx = declare_ptx_isa(&ptx, self.ptx_isa_for(arch));
            // Fast math's `/` and `1 / x` flush denormals, as nvcc's `--use_fast_math` does.
            let ptx = if self.fast_math { flush_approximate_divisions(&ptx) } else { ptx };
            // nvcc's `-ftz=true`: the whole crate (`ftz(true)`) or the kernels declared
            // `#[kernel(ftz)]` (and the `.func`s only they call).
            let ptx = if self.ftz { flush_denormals(&ptx) } else { flush_denormals_in_marked_kernels(&ptx) };
            let path = out_dir.join(format!("{crate_name}.{arch}.ptx"));
            artifacts::write(&path, ptx.as_bytes())?;
            artifacts.ptx.push((arch, path));
        }

        if let Some(ptxas) = find_ptxas(&self.env) {
            let defaults = self.cubin_archs.is_empty();
            let wanted = self.cubin_archs();
            let cubins = in_parallel(wanted, |arch| {
                let Some((_, ptx)) = artifacts.ptx.iter().rev().find(|(ptx_arch, _)| *ptx_arch <= arch) else {
                    return Err(BuildError::CubinWithoutPtx { arch });
                };
                let path = out_dir.join(format!("{crate_name}.{arch}.cubin"));
                let resources = compile_cubin_with(&ptxas, ptx, arch, self.device_debug(), &path)?;
                Ok(Cubin { arch, path, resources })
            });
            for cubin in cubins {
                match cubin {
                    Ok(cubin) => artifacts.cubins.push(cubin),
                    // A default cubin this ptxas cannot make (CUDA 13 and sm_70) is skipped: the
                    // PTX still runs there through the driver's JIT.
                    Err(error @ BuildError::Ptxas { .. }) if defaults && error.is_unsupported_arch() => {
                        if in_build_script {
                            println!("cargo:warning=no cubin: {error}");
                        }
                    }
                    Err(error) => return Err(error),
                }
            }
        }

        if in_build_script {
            // Local memory (a stack frame or spills) in a kernel: said once, from the newest
            // cubin, with the usual cause and its fix (issue 30's third held-out port). Not for
            // a build with overflow checks (a debug profile's): its extra checks change the
            // register allocation, so its frames say nothing about the release build's, and
            // every user's debug build would warn about the library's kernels.
            if let Some(cubin) = artifacts.cubins.iter().max_by_key(|c| c.arch).filter(|_| !self.checks_overflow()) {
                let expected: Vec<String> = self.recursive.iter().chain(&self.local_memory_expected).cloned().collect();
                for line in local_memory::warnings(&cubin.resources, &expected, self.keeps_panic_messages()) {
                    println!("cargo:warning={line}");
                }
                // Registers just over an occupancy cliff (one block per SM where 8 fewer fit
                // two): the seventh port's static int8 quantiser ran at 0.62x nvcc with 38
                // registers at 1024-thread blocks and no spill to warn about.
                let ptx = artifacts.ptx.iter().rev().find(|(arch, _)| *arch <= cubin.arch).and_then(|(_, path)| std::fs::read_to_string(path).ok());
                let declared = ptx.as_deref().map(occupancy::declared_blocks).unwrap_or_default();
                let expected: Vec<String> = self.occupancy_expected.clone();
                for line in occupancy::warnings(cubin.arch.number(), &cubin.resources, &declared, self.launch_block_threads, &expected) {
                    println!("cargo:warning={line}");
                }
            }
            // Every diagnostic of the device build, as rustc rendered it (P1: only lines that
            // began with `warning:` used to be forwarded, so `warning[E0133]` never showed).
            for line in inner_build::cargo_warning_lines(&artifacts.warnings) {
                println!("{line}");
            }
            for source in &sources {
                println!("cargo:rerun-if-changed={}", source.display());
            }
            println!("cargo:rerun-if-changed={}", manifest.display());
        }
        artifacts.sources = sources.into_iter().collect();
        let list = out_dir.join("ferrocuda_artifacts.rs");
        artifacts::write(&list, artifacts::artifact_list(&crate_name, &toolchain.version, &artifacts).as_bytes())?;
        artifacts.manifest = Some(list);
        Ok(artifacts)
    }
}

/// `ptx` with a global `__ferrocuda_unbounded_stack_<kernel>` (one `u32`) for each of
/// `kernels` (those whose stack the build could not bound and `allow_recursion` let through):
/// the host notes them at their first launch and names them, with the stack limit, when a
/// fault follows (audit 2026-11-27b, Q4).
fn mark_unbounded_stacks(mut ptx: String, kernels: impl Iterator<Item = String>) -> String {
    let kernels: BTreeSet<String> = kernels.collect();
    for kernel in kernels {
        ptx.push_str(&format!("\n.visible .global .align 4 .u32 __ferrocuda_unbounded_stack_{kernel} = 1;\n"));
    }
    ptx
}

/// `<target>/ferrocuda-device`, where `<target>` is the outer build's target (or build)
/// directory: the nearest ancestor of `out_dir` holding cargo's `CACHEDIR.TAG`. Without one,
/// `<out_dir>/ferrocuda-device`.
fn default_target_dir(out_dir: &Path) -> PathBuf {
    let target = out_dir.ancestors().find(|dir| dir.join("CACHEDIR.TAG").is_file()).unwrap_or(out_dir);
    target.join("ferrocuda-device")
}

fn sorted(archs: &[Arch]) -> Vec<Arch> {
    let mut archs = archs.to_vec();
    archs.sort();
    archs.dedup();
    archs
}

/// Runs `work` for each architecture on its own thread and returns the results in order.
fn in_parallel<R: Send>(archs: Vec<Arch>, work: impl Fn(Arch) -> Result<R, BuildError> + Sync) -> Vec<Result<R, BuildError>> {
    std::thread::scope(|scope| {
        let work = &work;
        let handles: Vec<_> = archs.into_iter().map(|arch| scope.spawn(move || work(arch))).collect();
        handles.into_iter().map(|handle| handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
    })
}

/// Whether `cfg` is a plain `--cfg` value: `name` or `name="value"`, the name an identifier and
/// the value free of quotes, backslashes and control characters. The device build's flags reach
/// rustc through `CARGO_ENCODED_RUSTFLAGS`, separated by `\x1f`, after the builder's own
/// (`-Zallow-features` among them): a cfg holding a separator would add a flag that overrides
/// them (G22S-1).
fn is_plain_cfg(cfg: &str) -> bool {
    let (name, value) = match cfg.split_once('=') {
        Some((name, value)) => (name, Some(value)),
        None => (cfg, None),
    };
    let name_ok = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_') && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    let value_ok = value
        .is_none_or(|v| v.len() >= 2 && v.starts_with('"') && v.ends_with('"') && v[1..v.len() - 1].chars().all(|c| !c.is_control() && c != '"' && c != '\\'));
    name_ok && value_ok
}

#[cfg(test)]
mod tests {
    #[test]
    fn g22s_1_a_cfg_cannot_carry_a_flag() {
        for good in ["my_feature", "mode=\"fast\"", "_x1=\"a b\"", "k=\"\""] {
            assert!(is_plain_cfg(good), "{good:?}");
        }
        for bad in [
            "x\u{1f}-Zallow-features=abi_ptx,asm_experimental_arch,never_type",
            "x=\"a\u{1f}b\"",
            "-Zallow-features=never_type",
            "",
            "1x",
            "x=fast",
            "x=\"a\"b\"",
            "x=\"a\\\"",
            "x y",
        ] {
            assert!(!is_plain_cfg(bad), "{bad:?}");
        }
        let error = KernelBuilder::new(".").cfg("x\u{1f}-Zallow-features=never_type").build().unwrap_err();
        assert!(matches!(error, BuildError::BadCfg { .. }), "{error}");
        assert!(error.to_string().contains("is not a cfg"), "{error}");
    }

    use super::*;

    #[test]
    fn arch_specific_targets_set_their_cfg_and_ptx_isa() {
        let specific = KernelBuilder::new("x").rustflags(Arch::SM_90A);
        assert_eq!(specific[0], "-Ctarget-cpu=sm_90a");
        assert!(specific.windows(2).any(|w| w == ["--cfg", "ferrocuda_sm=\"90a\""]));
        assert!(specific.windows(2).any(|w| w == ["--cfg", "ferrocuda_sm=\"90\""]));
        assert!(specific.contains(&"-Ctarget-feature=+ptx83".to_string()));
    }

    #[test]
    fn debug_info_asks_rustc_and_ptxas_for_full_debug_information() {
        let builder = KernelBuilder::new("x").debug_info(true);
        let flags = builder.rustflags(Arch::SM_80);
        assert!(flags.contains(&"-Cdebuginfo=2".to_string()) && !flags.iter().any(|f| f.contains("line-tables-only")));
        assert_eq!(builder.device_debug(), DeviceDebug::Full);
        assert_eq!(KernelBuilder::new("x").device_debug(), DeviceDebug::LineInfo);
        assert_eq!(KernelBuilder::new("x").line_info(false).device_debug(), DeviceDebug::None);
    }

    /// Regression guard for docs.rs: without a device toolchain a documentation build
    /// (`DOCS_RS` set) still gets an artifact list, with no kernels.
    #[test]
    fn docs_rs_builds_get_an_empty_artifact_list() {
        let dir = std::env::temp_dir().join(format!("ferrocuda-docsrs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("Cargo.toml"), "[package]\nname = \"my-kernels\"\n").unwrap();
        let env = BuildEnv::fixed([("DOCS_RS", "1"), ("FERROCUDA_DEVICE_RUSTC", "/nonexistent/rustc")]);
        let artifacts = KernelBuilder::new(&dir).out_dir(&dir).env(env).build().unwrap();
        let list = std::fs::read_to_string(artifacts.manifest.unwrap()).unwrap();
        assert!(list.contains("pub const CRATE_NAME: &str = \"my_kernels\";"), "{list}");
        assert!(list.contains("pub const PTX: &[(u32, &str)] = &[") && list.contains("RESOURCES"), "{list}");
        assert!(artifacts.ptx.is_empty() && artifacts.toolchain.is_none());
    }

    /// Issue 20: the cheap panic handler is the default of optimised builds; the detailed one
    /// is one option (or an unoptimised build) away.
    #[test]
    fn panic_messages_select_the_detailed_handler() {
        let detailed = |b: KernelBuilder| b.rustflags(Arch::SM_90).windows(2).any(|w| w == ["--cfg", "ferrocuda_panic_messages"]);
        assert!(!detailed(KernelBuilder::new("x")));
        assert!(detailed(KernelBuilder::new("x").panic_messages(true)));
        assert!(detailed(KernelBuilder::new("x").release(false)));
        assert!(!detailed(KernelBuilder::new("x").release(false).panic_messages(false)));
        assert!(check_cfg_lines(&[]).iter().any(|l| l == "cargo::rustc-check-cfg=cfg(ferrocuda_panic_messages)"));
    }

    /// Q11 (audit 2026-11-27b): the device build's overflow checks follow cargo's default for
    /// the profile that runs the build script (so that the CPU executor, which runs the host
    /// build, and the GPU agree), unless set.
    #[test]
    fn q11_overflow_checks_follow_the_build_scripts_profile() {
        let env = |profile: &str| BuildEnv::fixed([("OUT_DIR", "/o"), ("PROFILE", profile)]);
        assert!(KernelBuilder::new("x").env(env("debug")).checks_overflow());
        assert!(!KernelBuilder::new("x").env(env("release")).checks_overflow());
        assert!(!KernelBuilder::new("x").env(env("debug")).overflow_checks(false).checks_overflow());
        assert!(KernelBuilder::new("x").env(env("release")).overflow_checks(true).checks_overflow());
        // Outside a build script: as cargo's default for the device build's own profile.
        assert!(!KernelBuilder::new("x").env(BuildEnv::fixed([("PROFILE", "debug")])).checks_overflow());
        assert!(KernelBuilder::new("x").env(BuildEnv::fixed::<[(&str, &str); 0], _, _>([])).release(false).checks_overflow());
    }

    #[test]
    fn rustflags_follow_options() {
        let builder = KernelBuilder::new("x").cfg("fast_math").fma(FmaContraction::Off).line_info(false);
        let flags = builder.rustflags(Arch::SM_90);
        assert_eq!(flags[0], "-Ctarget-cpu=sm_90");
        assert!(!flags.iter().any(|f| f.contains("fma-level")));
        assert!(!flags.iter().any(|f| f.contains("debuginfo")));
        assert!(flags.windows(2).any(|w| w == ["--cfg", "fast_math"]));
        assert!(flags.windows(2).any(|w| w == ["--cfg", "ferrocuda_sm=\"90\""]));
        assert!(!flags.iter().any(|f| f.contains("emit")), "--emit must not reach core through RUSTFLAGS");
        assert!(!flags.iter().any(|f| f.contains("ferrocuda_fast_math") || f.contains("prec-divf32")));
        let fast = KernelBuilder::new("x").fast_math(true).rustflags(Arch::SM_80);
        assert!(fast.windows(2).any(|w| w == ["--cfg", "ferrocuda_fast_math"]), "{fast:?}");
        assert!(fast.contains(&"-Cllvm-args=-nvptx-prec-divf32=0".to_string()), "{fast:?}");
        let default = KernelBuilder::new("x").rustflags(Arch::SM_70);
        assert!(default.contains(&"-Cllvm-args=-nvptx-fma-level=1".to_string()));
        assert!(default.contains(&"-Cdebuginfo=line-tables-only".to_string()));
        // Issue 30's third port: nvcc-like complete unrolling by default, LLVM's own with 0.
        assert!(default.contains(&format!("-Cllvm-args=-unroll-threshold={DEFAULT_UNROLL_THRESHOLD}")), "{default:?}");
        let llvms = KernelBuilder::new("x").unroll_threshold(0).rustflags(Arch::SM_70);
        assert!(!llvms.iter().any(|f| f.contains("unroll-threshold")), "{llvms:?}");
        // Issue 30's eighth port (s21): run-time-count loops unrolled by 4 as nvcc's on request,
        // LLVM's own limits by default (and with 0 or 1).
        let four = KernelBuilder::new("x").runtime_unroll(4).rustflags(Arch::SM_70);
        assert!(four.contains(&"-Cllvm-args=-unroll-max-count=4".to_string()), "{four:?}");
        assert!(four.contains(&"-Cllvm-args=-unroll-runtime-multi-exit=true".to_string()), "{four:?}");
        assert!(!default.iter().any(|f| f.contains("unroll-max-count")), "{default:?}");
        for off in [0, 1] {
            let rolled = KernelBuilder::new("x").runtime_unroll(off).rustflags(Arch::SM_70);
            assert!(!rolled.iter().any(|f| f.contains("unroll-max-count") || f.contains("unroll-partial") || f.contains("multi-exit")), "{rolled:?}");
        }
    }

    #[test]
    fn default_and_requested_archs() {
        assert_eq!(KernelBuilder::new("x").ptx_isa_for(Arch::SM_75), (7, 8));
        assert_eq!(KernelBuilder::new("x").ptx_isa(8, 0).ptx_isa_for(Arch::SM_75), (8, 0));
        assert_eq!(KernelBuilder::new("x").ptx_archs(), vec![Arch::SM_75]);
        assert_eq!(KernelBuilder::new("x").cubin_archs(), vec![Arch::SM_80, Arch::SM_90]);
        assert_eq!(KernelBuilder::new("x").cubin_arch(Arch::SM_90).cubin_archs(), vec![Arch::SM_90]);
        let b = KernelBuilder::new("x").arch(Arch::SM_90).arch(Arch::SM_70).arch(Arch::SM_90);
        assert_eq!(b.ptx_archs(), vec![Arch::SM_70, Arch::SM_90]);
    }

    /// Regression (issue 11): the default inner target directory was `OUT_DIR`'s fourth
    /// ancestor, an assumption about cargo's layout that its build-directory change broke.
    #[test]
    fn default_target_dir_is_found_by_cargos_cachedir_tag_in_either_layout() {
        let root = std::env::temp_dir().join(format!("ferrocuda-targetdir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let old = root.join("target/release/build/gpu-kernels-1234/out");
        let new = root.join("target/release/build/gpu-kernels/5678/out");
        std::fs::create_dir_all(&old).unwrap();
        std::fs::create_dir_all(&new).unwrap();
        std::fs::write(root.join("target/CACHEDIR.TAG"), "Signature: 8a477f597d28d172789f06886806bc55").unwrap();
        assert_eq!(default_target_dir(&old), root.join("target/ferrocuda-device"));
        assert_eq!(default_target_dir(&new), root.join("target/ferrocuda-device"));
        let untagged = root.join("elsewhere/out");
        assert_eq!(default_target_dir(&untagged), untagged.join("ferrocuda-device"));
    }
}
