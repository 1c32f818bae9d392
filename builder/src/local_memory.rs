//! Warnings for kernels that keep data in local memory (issue 30, third held-out port).
//!
//! A register array that a loop indexes with its counter stays in registers only if the loop
//! is unrolled; LLVM leaves loops rolled at its discretion (llm.c's layernorm backward: a
//! two-step loop holding two barriers, over four `[f32; 8]` arrays), and the arrays then live
//! in local memory: a stack frame in `ptxas -v`, `LDL`/`STL` in the hot loop, 0.33x nvcc on
//! the first try, with nothing in the build to say so. nvcc users see the same figure in
//! `-Xptxas -v`; here the builder says it, once per kernel, with the fix.

use std::collections::BTreeMap;

use crate::ptxas::KernelResources;

/// The `cargo:warning` lines for the kernels among `resources` (one cubin's `ptxas -v`
/// figures) that have a stack frame or spill, except those in `expected` (kernels vouched
/// for with `allow_recursion`, whose frames are their calls'). `detailed_panics`: the
/// detailed panic handler's ~600-byte frame is expected in every kernel that can panic, so
/// nothing is said then.
/// Whether `kernel` is among `expected`: a name, or a prefix ending in `*` (`attention_*`).
fn is_expected(kernel: &str, expected: &[String]) -> bool {
    expected.iter().any(|e| match e.strip_suffix('*') {
        Some(prefix) => kernel.starts_with(prefix),
        None => e == kernel,
    })
}

pub fn warnings(resources: &[KernelResources], expected: &[String], detailed_panics: bool) -> Vec<String> {
    if detailed_panics {
        return Vec::new();
    }
    let mut by_kernel: BTreeMap<&str, &KernelResources> = BTreeMap::new();
    for r in resources {
        by_kernel.insert(&r.kernel, r);
    }
    by_kernel
        .into_values()
        .filter(|r| (r.stack_frame > 0 || r.spill_stores > 0) && !is_expected(&r.kernel, expected))
        .map(|r| {
            // ptxas rounds the spill area up (12 bytes spilled, a 16-byte frame).
            let array = r.stack_frame > r.spill_stores.next_multiple_of(16);
            let cause = match (array, r.spill_stores > 0) {
                (true, false) => "an array indexed by a loop counter in a loop the compiler left rolled? Write that loop with `ferrocuda_device::unroll::unroll::<N>`",
                (true, true) => "an array indexed by a loop counter in a loop the compiler left rolled (write it with `ferrocuda_device::unroll::unroll::<N>`), and register pressure above the launch bounds' cap",
                _ => "register pressure above the register cap (its launch bounds, or 255): fewer values live at once (keep packed 16-bit values packed until used), or a looser `launch_bounds`",
            };
            format!(
                "kernel `{}` keeps data in local memory ({} bytes of stack frame, {} bytes spilled per thread, ptxas -v): {cause} (docs/performance.md, \"register arrays in local memory\")",
                r.kernel, r.stack_frame, r.spill_stores
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(name: &str, stack_frame: u32, spill_stores: u32) -> KernelResources {
        KernelResources { kernel: name.to_string(), registers: 64, spill_stores, spill_loads: spill_stores, stack_frame, shared_bytes: 0 }
    }

    #[test]
    fn p30_local_memory_a_kernel_with_a_stack_frame_is_named_with_the_fix() {
        let lines = warnings(&[kernel("layernorm_backward_kernel10", 128, 0), kernel("saxpy", 0, 0)], &[], false);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("`layernorm_backward_kernel10`") && lines[0].contains("128 bytes of stack frame"), "{}", lines[0]);
        assert!(lines[0].contains("unroll::<N>"), "the warning names the fix: {}", lines[0]);
    }

    #[test]
    fn p30_local_memory_spills_are_named_too() {
        let lines = warnings(&[kernel("k", 12, 12)], &[], false);
        assert_eq!(lines.len(), 1);
        assert!(lines[0].contains("12 bytes spilled") && lines[0].contains("register pressure"), "{}", lines[0]);
        assert!(!lines[0].contains("unroll"), "spills alone are not a rolled loop: {}", lines[0]);
    }

    #[test]
    fn p30_local_memory_vouched_for_kernels_and_the_detailed_panic_handler_are_quiet() {
        assert!(warnings(&[kernel("recurse", 64, 0)], &["recurse".to_string()], false).is_empty());
        assert!(warnings(&[kernel("k", 600, 0)], &[], true).is_empty());
    }

    /// A name ending in `*` vouches for every kernel it prefixes, and for no other.
    #[test]
    fn p30_local_memory_a_prefix_vouches_for_the_kernels_it_starts() {
        let expected = ["attention_*".to_string()];
        let lines = warnings(&[kernel("attention_d128", 48, 48), kernel("attention_backward_d64", 96, 92), kernel("gemm", 16, 16)], &expected, false);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("`gemm`"), "{}", lines[0]);
    }
}
