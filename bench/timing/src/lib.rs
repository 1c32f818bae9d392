//! The timing harness of the held-out ports' GPU benches (bench/ports6, bench/ports7 and the
//! ports after them): each Rust port beside its CUDA C++ twin, on the same grid and the same
//! inputs, in one process, timed with CUDA events; then the two outputs compared.
//!
//! What a bench measures ([`time_pair`]): [`WARMUP`] warm-up launches of each kernel, then
//! [`PASSES`] passes that each time `reps` back-to-back launches of one and then of the other
//! (which goes first alternates per pass), with a CUDA event before and after each run of
//! launches. Each figure is the median over the passes of the time per launch. `reps` comes
//! from [`reps_for`]: about [`PASS_MS`] milliseconds of the port per pass. What a bench prints
//! ([`Table`]): one line per kernel, `ours` and `twin` in ms per launch and `twin/ours` (above 1:
//! the port is faster), then the verdict of the output check ([`check_f32`], [`check_bits`]).
//! A bench is a report, not a test: nothing is asserted.
//!
//! # How a new port's bench uses it
//!
//! The port's crate (say bench/ports8, package `ferrocuda-ports8`) depends on this crate
//! (`ferrocuda-bench-timing = { path = "../timing" }`) and has a binary
//! `src/bin/ports8_bench.rs` that takes the nvcc-built cubins of its twins as arguments. For
//! every kernel it makes the inputs once, an output buffer for the port and one for the twin,
//! and two closures that each launch one kernel once (the port through its typed launcher, the
//! twin through the raw-pointer stub's `launch_in` with [`ptr`] for each buffer). Then
//! [`reps_for`] on the port's closure, [`time_pair`] on both, a `synchronize`, the check of the
//! outputs, and [`Table::row`]. Each kernel runs inside [`case`], so one failure (a refused
//! launch, a kernel missing from a cubin) prints and the next kernel still runs, and
//! `PORTS8_ONLY=L1,V2` runs a subset:
//!
//! ```no_run
//! use ferrocuda::{Context, DeviceBuffer, LaunchConfig, Stream};
//! use ferrocuda_bench_timing::{self as timing, PASSES, Result, Table, WARMUP, case, check_bits, ptr, reps_for, time_pair};
//!
//! fn main() -> Result<()> {
//!     let args: Vec<String> = std::env::args().collect();
//!     let [_, llmc_cubin] = &args[..] else {
//!         return Err("usage: ports8_bench LLMC_CUBIN (the nvcc-built twins of bench/ports8/cuda/ports8.cu)".into());
//!     };
//!     let context = Context::primary(0)?;
//!     let stream = Stream::new(&context)?;
//!     timing::print_device(&context)?;
//!     // SAFETY: the cubin is nvcc's output for ports8.cu (the job script builds it there).
//!     let lm = unsafe { timing::load_cubin(&context, "ports8_llmc", llmc_cubin)? };
//!     println!("twins: {llmc_cubin}; each time the median of {PASSES} passes (ms per launch), after {WARMUP} warm-ups");
//!     // Column widths: the longest kernel name and size string of this bench.
//!     let table = Table::new(44, 30);
//!     println!("{}", table.header());
//!
//!     // L1: one kernel at one shape.
//!     case("PORTS8_ONLY", "L1", || -> Result<()> {
//!         let n = 1 << 24;
//!         let input = DeviceBuffer::from_slice(&context, &vec![1.0f32; n])?;
//!         let ours = DeviceBuffer::<f32>::zeroed(&context, n)?;
//!         let twin_out = DeviceBuffer::<f32>::zeroed(&context, n)?;
//!         let config = LaunchConfig::new((n as u32).div_ceil(256), 256);
//!         let mut run_ours = || -> Result<()> {
//!             // The port's typed launcher: `llmc::kernel::launch(&stream, config, &mut ours, &input)?;`
//!             Ok(())
//!         };
//!         let run_twin = || -> Result<()> {
//!             // The twin's stub, on raw pointers (unsafe: nothing ties them to the buffers):
//!             // `unsafe { twins::twin_kernel::launch_in(&lm, &stream, config, ptr(&twin_out), ptr(&input))? };`
//!             let _ = (&lm, config, ptr::<f32>(&twin_out), ptr::<f32>(&input));
//!             Ok(())
//!         };
//!         let reps = reps_for(&context, &stream, &mut run_ours)?;
//!         let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
//!         stream.synchronize()?;
//!         let check = check_bits("f32", &ours.to_vec()?, &twin_out.to_vec()?);
//!         table.row("llm.c kernel", &format!("{n} f32, block 256"), times, &check);
//!         Ok(())
//!     });
//!     Ok(())
//! }
//! ```
//!
//! The port's GPU job (its `scripts/gpu-job.sh`, run by `run` with the staged binary) builds the
//! twins with nvcc as their public sources build them and runs the binary on the cubins; the
//! SASS beside the twin's, without a GPU: `scripts/sass.py` at the repository's root.
//! In-place kernels (a port that reads what it writes) time on the same buffer over and over;
//! check them on one more launch of each on fresh copies of the input (bench/ports7's L4).
//!
//! # Twins whose source includes third-party headers
//!
//! The GPU machine has nvcc and CUDA's own headers, nothing else (no network: no cutlass, no
//! PyTorch C++ headers, no flashinfer). A twin whose source includes such a header (vLLM's MoE
//! kernels use `cutlass::Array<T, N>`) gets, in its `.cu` file, a **stand-in** for the few
//! types it uses, written for the bench (not copied from the library), that keeps the
//! library's *memory layout*, because the layout decides the twin's speed: issue 30's tenth
//! port (bench/ports10/cuda/ports10.cu) first wrote `Array<bf16, 8>` as `T storage[N]` (eight
//! 2-byte loads a pack); cutlass's `Array<T, N, false>` for a 16-bit `T` stores 32-bit words
//! (four 4-byte loads a pack, alignment 4), and that is what vLLM's kernel runs. So:
//!
//! - Read the library's definition of each type the kernel touches (storage type, element
//!   count, alignment, which operator the kernel calls) and give the stand-in the same; say in
//!   a comment which library version it follows and what it leaves out.
//! - Put the stand-ins behind the twin's own `#define` (`-DPORTS10_VLLM`) so the other twins
//!   of the file build without them.
//! - Build with the project's own flags where its source needs one: vLLM's kernels call
//!   `std::min` inside a `constexpr` expression, which nvcc accepts only with
//!   `--expt-relaxed-constexpr` (vLLM's CMake passes it); llm.c's `--use_fast_math`. Put the
//!   same flags in the job script's nvcc line and in `scripts/sass.py --nvcc-flags`, or the
//!   SASS compared is not the one timed.
//! - Say in the port's RESULTS.md that the ratio is against the stand-in, and what its layout
//!   does (bench/ports10: cutlass's 4-byte words where the source's comment asks for 128-bit
//!   loads).
//! - `extern "C"` wrappers are not needed: give a template's mangled name to the stub's
//!   `#[kernel(name = "..")]` (`nvdisasm -c twin.cubin | grep '.type.*@function'` lists them).

use std::error::Error;
use std::num::NonZeroU32;
use std::path::Path;

use ferrocuda::{Context, DeviceBuffer, DevicePtr, Event, JitOptions, Module, Stream};

/// The benches' error type: any error, printed by [`case`] or returned from `main`.
pub type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// Timed passes per kernel pair; each figure is the median over them (odd, so one value).
pub const PASSES: usize = 7;
/// Untimed launches of each kernel before the first pass (module load, caches, clocks).
pub const WARMUP: usize = 3;
/// The length of one pass of the port that [`reps_for`] aims at, in milliseconds: long enough
/// that the events' resolution (about 0.5 us) and the launch gaps do not show.
pub const PASS_MS: f64 = 20.0;
/// The floor under `|twin|` that [`check_f32`] hands the port's relative-error function, so
/// values near zero compare by their absolute error.
pub const REL_ERR_FLOOR: f32 = 1e-3;

/// Times `ours` and `twin` (each one launch, enqueued on `stream`): [`WARMUP`] launches of
/// each, then [`PASSES`] passes of `reps` launches of one and then `reps` of the other, the
/// order alternating per pass. Returns `(ours, twin)`, each the median over the passes of the
/// milliseconds per launch.
pub fn time_pair(
    context: &Context,
    stream: &Stream,
    reps: usize,
    mut ours: impl FnMut() -> Result<()>,
    mut twin: impl FnMut() -> Result<()>,
) -> Result<(f64, f64)> {
    for _ in 0..WARMUP {
        ours()?;
        twin()?;
    }
    stream.synchronize()?;
    let (start, end) = (Event::new(context)?, Event::new(context)?);
    let run = |f: &mut dyn FnMut() -> Result<()>| -> Result<f64> {
        start.record(stream)?;
        for _ in 0..reps {
            f()?;
        }
        end.record(stream)?;
        end.synchronize()?;
        Ok(start.elapsed_ms(&end)? as f64 / reps as f64)
    };
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for pass in 0..PASSES {
        if pass % 2 == 0 {
            a.push(run(&mut ours)?);
            b.push(run(&mut twin)?);
        } else {
            b.push(run(&mut twin)?);
            a.push(run(&mut ours)?);
        }
    }
    Ok((median(a), median(b)))
}

/// The median of `v` (its upper middle value when the length is even); `v` is not empty.
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|x, y| x.total_cmp(y));
    v[v.len() / 2]
}

/// The `reps` for [`time_pair`]: launches of `once` (one launch, enqueued on `stream`) that
/// take about [`PASS_MS`] milliseconds, from one timed launch after one untimed one; at least
/// 3, at most 2000.
pub fn reps_for(context: &Context, stream: &Stream, mut once: impl FnMut() -> Result<()>) -> Result<usize> {
    let (start, end) = (Event::new(context)?, Event::new(context)?);
    once()?;
    start.record(stream)?;
    once()?;
    end.record(stream)?;
    end.synchronize()?;
    let ms = start.elapsed_ms(&end)? as f64;
    Ok(reps_for_ms(ms))
}

/// [`reps_for`]'s arithmetic: `ms` is one launch's time.
fn reps_for_ms(ms: f64) -> usize {
    ((PASS_MS / ms.max(1e-3)) as usize).clamp(3, 2000)
}

/// The report's columns: the kernel's name and its size, left-aligned in the widths given
/// (each bench picks its own, so its lines stay aligned), then `ours`, `twin`, `twin/ours` and
/// the check.
#[derive(Clone, Copy, Debug)]
pub struct Table {
    name_width: usize,
    size_width: usize,
}

impl Table {
    /// A table whose name column is `name_width` characters wide and size column `size_width`
    /// (longer text widens its line only).
    pub const fn new(name_width: usize, size_width: usize) -> Self {
        Table { name_width, size_width }
    }

    /// The header line (`kernel`, `size`, `ours`, `twin`, `twin/ours`, `check`).
    pub fn header(&self) -> String {
        let (nw, sw) = (self.name_width, self.size_width);
        format!("{:<nw$} {:<sw$} {:>9} {:>9} {:>9}  check", "kernel", "size", "ours", "twin", "twin/ours")
    }

    /// One report line: `times` is [`time_pair`]'s `(ours, twin)` in ms per launch, `check`
    /// the verdict of the output comparison.
    pub fn line(&self, name: &str, size: &str, times: (f64, f64), check: &str) -> String {
        let (nw, sw) = (self.name_width, self.size_width);
        let (ours, twin) = times;
        format!("{name:<nw$} {size:<sw$} {ours:>9.4} {twin:>9.4} {:>9.3}  {check}", twin / ours)
    }

    /// Prints [`line`](Self::line).
    pub fn row(&self, name: &str, size: &str, times: (f64, f64), check: &str) {
        println!("{}", self.line(name, size, times, check));
    }
}

/// A buffer's device address, as [`ptr`] takes it: the buffer itself (`&DeviceBuffer<T>`), or a
/// pointer taken from it before (`DevicePtr<T>`), for a twin whose buffer the bench writes
/// between launches (a closure holding `&buffer` would keep it from being written).
pub trait DeviceAddress {
    /// The device address.
    fn device_address(&self) -> u64;
}

impl<T: bytemuck::Pod> DeviceAddress for &DeviceBuffer<T> {
    fn device_address(&self) -> u64 {
        self.as_device_ptr().address()
    }
}

impl<T> DeviceAddress for DevicePtr<T> {
    fn device_address(&self) -> u64 {
        (*self).address()
    }
}

/// A buffer's device address (`&buffer`, or a `DevicePtr` taken from it) as a raw pointer of any
/// element type, for the twins' launch stubs (`*const T` / `*mut T` parameters; a port's packed
/// `Bf16x8` buffer handed to a twin's `__nv_bfloat16*`). Making the pointer is safe; the stubs'
/// `launch_in` is `unsafe`, and its caller keeps the buffer alive and large enough until the
/// launch completes.
pub fn ptr<U>(at: impl DeviceAddress) -> DevicePtr<U> {
    DevicePtr::from_address(at.device_address())
}

/// `v` as a [`NonZeroU32`], for the ports' size parameters that divide.
///
/// # Panics
/// If `v` is 0 (a bench's shapes are constants).
pub fn nz(v: u32) -> NonZeroU32 {
    NonZeroU32::new(v).expect("a nonzero size")
}

/// The largest `|ours - twin| / max(|twin|, floor)` over the pairs: the relative error
/// [`check_f32`] takes, for a port without one of its own.
pub fn max_rel_err(ours: &[f32], twin: &[f32], floor: f32) -> f32 {
    ours.iter().zip(twin).map(|(x, y)| (x - y).abs() / y.abs().max(floor)).fold(0.0, f32::max)
}

/// Compares two `f32` outputs: `OK` when `rel_err(ours, twin, REL_ERR_FLOOR)` (the port's own
/// relative-error function, as its CPU tests use it) is at most `tolerance`, else `MISMATCH`;
/// then the error and how many values differ in their bits. `what` names the output (empty: no
/// name).
pub fn check_f32(what: &str, ours: &[f32], twin: &[f32], tolerance: f32, rel_err: fn(&[f32], &[f32], f32) -> f32) -> String {
    let err = rel_err(ours, twin, REL_ERR_FLOOR);
    let differ = ours.iter().zip(twin).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
    let verdict = if err <= tolerance { "OK" } else { "MISMATCH" };
    format!("{}{verdict} vs twin: max rel err {err:.1e}, {differ} of {} bits differ", named(what), ours.len())
}

/// Compares two outputs bit for bit: `OK` when every value is the same, else `MISMATCH`, and
/// how many values differ. `what` names the output (empty: no name).
pub fn check_bits<T: bytemuck::Pod>(what: &str, ours: &[T], twin: &[T]) -> String {
    let a: &[u8] = bytemuck::cast_slice(ours);
    let b: &[u8] = bytemuck::cast_slice(twin);
    let size = std::mem::size_of::<T>();
    let differ = a.chunks(size).zip(b.chunks(size)).filter(|(x, y)| x != y).count();
    let verdict = if differ == 0 { "OK" } else { "MISMATCH" };
    format!("{}{verdict} vs twin: {differ} of {} differ", named(what), ours.len())
}

/// `what` and a space, or nothing for an unnamed output.
fn named(what: &str) -> String {
    if what.is_empty() { String::new() } else { format!("{what} ") }
}

/// Whether the case `label` runs: always, unless the environment variable `only_var` (the
/// bench's `PORTSn_ONLY`) lists label prefixes separated by commas and none starts `label`.
pub fn selected(only_var: &str, label: &str) -> bool {
    match std::env::var(only_var) {
        Ok(only) => selected_by(&only, label),
        Err(_) => true,
    }
}

/// [`selected`] for the variable's value `only`.
fn selected_by(only: &str, label: &str) -> bool {
    only.split(',').any(|prefix| label.starts_with(prefix))
}

/// Runs the case `label` if [`selected`] by `only_var`; its error (a refused launch, a kernel
/// missing from a cubin) is printed as `ERROR in <label>: <error>` and the bench goes on.
pub fn case(only_var: &str, label: &str, f: impl FnOnce() -> Result<()>) {
    if !selected(only_var, label) {
        return;
    }
    if let Err(error) = f() {
        println!("ERROR in {label}: {error}");
    }
}

/// Prints the report's first line: `device: <name> (sm_<major><minor>)`.
pub fn print_device(context: &Context) -> Result<()> {
    let device = context.device();
    let (major, minor) = device.compute_capability()?;
    println!("device: {} (sm_{major}{minor})", device.name()?);
    Ok(())
}

/// Loads the cubin at `path` (the twins as nvcc built them) as the module `name`.
///
/// # Safety
/// As [`Module::load_binary`]: the file is a cubin whose kernels are launched only with the
/// parameter lists they were compiled with (the twins' stubs), which nothing here can check.
pub unsafe fn load_cubin(context: &Context, name: &str, path: impl AsRef<Path>) -> Result<Module> {
    let image = std::fs::read(path)?;
    // SAFETY: the caller's contract is `load_binary`'s.
    Ok(unsafe { Module::load_binary(context, name, &image, &JitOptions::new())? })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_lines_keep_the_benches_columns() {
        // bench/ports6's widths: the header and a row as session 17-19's bench.txt show them.
        let t = Table::new(38, 34);
        assert_eq!(t.header(), "kernel                                 size                                    ours      twin twin/ours  check");
        let line = t.line("llm.c rope_forward_kernel1", "B8 T1024 NH32 HD128 f32", (0.5, 0.55), "OK");
        assert_eq!(line, "llm.c rope_forward_kernel1             B8 T1024 NH32 HD128 f32               0.5000    0.5500     1.100  OK");
        // A name longer than its column widens the line and keeps one space.
        assert!(Table::new(4, 4).line("longer", "s", (1.0, 1.0), "").starts_with("longer s    "));
    }

    #[test]
    fn check_bits_counts_values_not_bytes() {
        assert_eq!(check_bits("q", &[1u16, 2, 3], &[1u16, 2, 3]), "q OK vs twin: 0 of 3 differ");
        // One u32 differs in two of its bytes: one value.
        assert_eq!(check_bits("", &[0u32, 0x0101], &[0u32, 0]), "MISMATCH vs twin: 1 of 2 differ");
    }

    fn abs_err(a: &[f32], b: &[f32], floor: f32) -> f32 {
        assert_eq!(floor, REL_ERR_FLOOR);
        a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
    }

    #[test]
    fn check_f32_uses_the_ports_metric_and_tolerance() {
        let (a, b) = ([1.0f32, 2.0], [1.0f32, 2.5]);
        assert_eq!(check_f32("", &a, &b, 0.5, abs_err), "OK vs twin: max rel err 5.0e-1, 1 of 2 bits differ");
        assert_eq!(check_f32("mean", &a, &b, 0.4, abs_err), "mean MISMATCH vs twin: max rel err 5.0e-1, 1 of 2 bits differ");
    }

    #[test]
    fn max_rel_err_has_a_floor_under_the_twin() {
        assert_eq!(max_rel_err(&[1.0, 2.0], &[1.0, 2.0], REL_ERR_FLOOR), 0.0);
        assert_eq!(max_rel_err(&[1.5, 2.0], &[1.0, 2.0], REL_ERR_FLOOR), 0.5);
        // Near zero the error is absolute, over the floor.
        assert_eq!(max_rel_err(&[1e-3], &[0.0], 1e-3), 1.0);
    }

    #[test]
    fn ptr_takes_a_buffer_or_a_pointer_taken_from_one() {
        let p = DevicePtr::<u16>::from_address(0x1000);
        let q: DevicePtr<u64> = ptr(p);
        assert_eq!(q.address(), 0x1000);
    }

    #[test]
    fn reps_aim_at_one_pass_length() {
        assert_eq!(reps_for_ms(0.1), 200);
        assert_eq!(reps_for_ms(100.0), 3);
        assert_eq!(reps_for_ms(0.0), 2000);
    }

    #[test]
    fn median_is_the_middle_pass() {
        assert_eq!(median(vec![3.0, 1.0, 2.0, 9.0, 0.5, 4.0, 5.0]), 3.0);
    }

    #[test]
    fn only_lists_label_prefixes() {
        assert!(selected_by("L3,V3", "L3-cells"));
        assert!(selected_by("L3,V3", "V3-seg64"));
        assert!(!selected_by("L3,V3", "L1"));
        assert!(selected("FERROCUDA_BENCH_TIMING_UNSET_VARIABLE", "L1"));
    }
}
