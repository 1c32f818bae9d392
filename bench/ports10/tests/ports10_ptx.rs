//! Issue 30's tenth port, gap 3 (session 22, gaps2), pinned on the PTX the build embeds (no GPU
//! needed): a `for` loop over core's `zip` of three slice iterators reads the three rows with
//! plain `ld.global` (the trap, pinned so that a rustc that removes it is noticed), and the same
//! zip run by `for_each` reads them `ld.global.nc`, unrolled (docs/performance.md's trap table).

#[path = "../../../tests/common/ptx.rs"]
mod ptx_text;
use ptx_text::{entry_body, opcodes};

fn count(kernel: &str, op: &str) -> usize {
    let ptx = ferrocuda_ports10_kernels::KERNELS.ptx_for(90).expect("the ports are built for sm_90");
    opcodes(entry_body(ptx, kernel)).into_iter().filter(|o| *o == op).count()
}

#[test]
fn p30_ports10_gap3_a_for_loop_over_a_three_way_zip_of_slices_loses_nc_and_for_each_keeps_it() {
    let (first, fixed) = ("layernorm_backward_kernel1", "layernorm_backward_kernel1_zip_fix");
    // The kernels differ only in the first loop. Its three rows (x, dout, weight) are plain
    // loads in the `for` loop: `Zip::next`'s `Option` joins the pointers with `None`'s null.
    let plain = (count(first, "ld.global.b32"), count(fixed, "ld.global.b32"));
    assert_eq!(plain.0, plain.1 + 3, "the first try's `for` loop reads its three rows without .nc (the trap): {plain:?}");
    // `for_each` (core's `fold` of a zip of slice iterators: a counted index loop) reads them
    // `.nc`, unrolled by 4 (12 loads a step) plus the remainder's 3.
    let nc = (count(first, "ld.global.nc.b32"), count(fixed, "ld.global.nc.b32"));
    assert!(nc.1 >= nc.0 + 12, "for_each: the three rows .nc and unrolled: {nc:?}");
}
