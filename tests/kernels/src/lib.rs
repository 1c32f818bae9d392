//! Kernels for the tests only (fixtures): deliberately panicking kernels, every launch and
//! parameter kind, checks of the device library, and kernels for the CPU executor's tests.
//! Built like any user's kernel crate (its own `build.rs`), and never shipped in the example
//! module that the main job loads.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]

use ferrocuda_device::global::{DisjointSlice, unique_index};
use ferrocuda_device::kernel;

ferrocuda_device::embed_kernels!();

/// `out[i] = x[i] * x[i]` on integers, panicking (on purpose) when the output is shorter than
/// the input: a kernel to show how a device panic reaches the host.
#[kernel]
pub fn square_checked(x: &[u32], mut out: DisjointSlice<u32>) {
    let i = unique_index();
    if i.get() < x.len() {
        out[i] = x[i].wrapping_mul(x[i]);
    }
}

/// Panics through `kernel_panic!` in every thread whose element is over `limit`: with the
/// cheap panic handler (the default) the message keeps its arguments, and when several threads
/// panic at once the record is one thread's, whole (tests/gpu_fault.rs).
#[kernel]
pub fn check_limit(x: &[u32], limit: u32) {
    let i = ferrocuda_device::thread::index_1d();
    if let Some(&value) = x.get(i)
        && value > limit
    {
        ferrocuda_device::kernel_panic!("value {} at {} is over the limit {}", value, i, limit);
    }
}

pub mod audit_g13;
pub mod cpu_examples;
pub mod device_lib;
pub mod g22r;
// `griddepcontrol` needs sm_90: the sm_80 PTX leaves the whole module out.
pub mod gpu_rules;
#[cfg_attr(target_arch = "nvptx64", cfg(ferrocuda_sm = "90"))]
pub mod grid_dependency;
pub mod half_floats;
pub mod host_device_layout;
pub mod kernel_model;
pub mod launch_kinds;
pub mod matrix_outputs;
pub mod optional_inputs;
pub mod out_partitions;
pub mod port_gaps;
pub mod port_patterns;
pub mod sanitizer;
// `elect.sync` and clusters need sm_90: the sm_80 PTX leaves the whole module out.
#[cfg_attr(target_arch = "nvptx64", cfg(ferrocuda_sm = "90"))]
pub mod seams_e;
