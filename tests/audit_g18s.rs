//! G18S-1 (audit/2026-11-28e/FINDINGS-review.md, session 18's addendum), the CPU executor's
//! half: the CPU launcher checked an output's `REQUIREMENTS` and launch-time bound through
//! paths the kernel's crate can rename (`::ferrocuda_device::__private::args`, `<T as
//! ..::KernelOutput>::REQUIREMENTS`), then made each thread's output in a generated
//! `unsafe { parts.output(shape) }` that trusted those checks: replaced by no-ops (a crate's
//! own `args` module re-exporting the real `OutputParts`), a 2-D launch of a per-thread output
//! gave two threads one element. `OutputParts::output` now checks, in each thread, the running
//! launch against the output's own facts, one launch and one shape for all threads. Played here
//! by calling the real parts the way the generated code does, with a launch its checks would
//! have refused.

use ferrocuda::LaunchConfig;
use ferrocuda::cpu::CpuExecutor;
use ferrocuda_device::__private::args::OutputParts;
use ferrocuda_device::global::{DisjointMatrix, DisjointSlice, unique_cell, unique_index};

#[test]
fn g18s_1_a_cpu_output_refuses_a_launch_its_partition_does_not_allow() {
    let executor = CpuExecutor::new();
    let mut data = vec![0u32; 64];
    {
        let parts = OutputParts::new(&mut data);
        let body = || {
            // SAFETY: the launch below joins every thread before `parts` ends, and each thread
            // takes the output once (what the generated launcher's call promises).
            let mut out: DisjointSlice<u32> = unsafe { parts.output(()) };
            if let Some(o) = out.get_mut(unique_index()) {
                *o += 1;
            }
        };
        // (32, 2) threads in one block: two threads per index of a per-thread output.
        let refused = executor.run("g18s_1_per_thread", LaunchConfig::new(1u32, (32u32, 2u32)), &body);
        let text = format!("{refused:?}");
        assert!(text.contains("does not meet what an output of the kernel requires"), "refused in the threads: {text}");
    }
    assert!(data.iter().all(|&v| v == 0), "no thread got the output");
    {
        let parts = OutputParts::new(&mut data);
        let body = || {
            // SAFETY: as above.
            let mut out: DisjointSlice<u32> = unsafe { parts.output(()) };
            if let Some(o) = out.get_mut(unique_index()) {
                *o += 1;
            }
        };
        executor.run("g18s_1_per_thread", LaunchConfig::new(2u32, 32u32), &body).expect("a 1-D launch meets it");
    }
    assert!(data.iter().all(|&v| v == 1), "each element written once");
}

#[test]
fn g18s_1_a_cpu_output_refuses_two_shapes_in_one_launch() {
    let executor = CpuExecutor::new();
    let mut data = vec![0u32; 64];
    let parts = OutputParts::new(&mut data);
    let body = || {
        // A width that differs between threads (a renamed `copy_param` could hand each thread
        // another value): rows of 8 for some threads, of 4 for others would overlap.
        let cols = if ferrocuda_device::thread::index_1d().is_multiple_of(2) { 8 } else { 4 };
        // SAFETY: as in the test above.
        let mut out: DisjointMatrix<u32> = unsafe { parts.output(cols) };
        if let Some(o) = out.get_mut(unique_cell()) {
            *o = 1;
        }
    };
    let refused = executor.run("g18s_1_two_shapes", LaunchConfig::new(1u32, (4u32, 4u32)), &body);
    let text = format!("{refused:?}");
    assert!(text.contains("gave an output two shapes"), "refused in the threads: {text}");
}
