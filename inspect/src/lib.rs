//! `ferrocuda-inspect`: what a ferrocuda kernel crate's kernels cost on the GPU.
//!
//! For each kernel: registers, spills, static shared memory, local memory (stack frame),
//! whether it uses dynamic shared memory, launch bounds from the PTX and the theoretical
//! occupancy at a block size on a given architecture; a kernel's PTX (its `.entry` and the
//! functions it calls) or SASS; and the difference between two builds. See `docs/inspect.md`.
//!
//! ```text
//! cargo run --release -p ferrocuda-inspect -- gpu-kernels --arch sm_90 --block 256
//! cargo run --release -p ferrocuda-inspect -- sass saxpy gpu-kernels
//! ```
//!
//! The modules are usable on their own: [`ptx`] reads a PTX module, [`occupancy`] computes
//! occupancy from documented per-SM limits, [`artifacts`] reads or makes a build, [`sass`]
//! finds and runs a disassembler, [`report`] formats tables and diffs.
#![deny(unsafe_code)]

pub mod artifacts;
pub mod cli;
pub mod occupancy;
pub mod ptx;
pub mod report;
pub mod sass;
