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

/// Issue 30's tenth port, gap 4 (session 23, gaps): `unroll::counted_loads_first::<4, _>` over
/// vLLM's run-time `k` experts. Pinned on the PTX: the round's four 16-byte gathers and the
/// rolled tail's one (nvcc's `#pragma unroll 4` on the same loop: 4 + 3 `LDG.E.128` in SASS), no panic path
/// (the rounds' indices are proven in bounds: no `trap`, no call), and every `nounroll` pragma
/// as the first statement of its block, where ptxas reads it (the builder moves it past rustc's
/// debug labels; before that, ptxas unrolled the round loop a second time).
#[test]
fn p30_ports10_gap4_counted_loads_first_gathers_four_a_round_and_ptxas_sees_nounroll() {
    let ptx = ferrocuda_ports10_kernels::KERNELS.ptx_for(90).expect("the ports are built for sm_90");
    let body = entry_body(ptx, "finalize_moe_routing_kernel_counted");
    let ops = opcodes(body);
    let packs = ops.iter().filter(|o| **o == "ld.global.nc.v2.b64").count();
    assert_eq!(packs, 5, "four gathers a round, one in the rolled tail: {packs}");
    assert!(!ops.iter().any(|o| *o == "trap" || o.starts_with("call")), "no panic path");
    let lines: Vec<&str> = body.lines().map(str::trim).collect();
    let pragmas: Vec<usize> = lines.iter().enumerate().filter(|(_, l)| **l == ".pragma \"nounroll\";").map(|(i, _)| i).collect();
    assert!(!pragmas.is_empty(), "the round loop is marked nounroll");
    for i in pragmas {
        assert!(i > 0 && lines[i - 1].starts_with("$L__BB") && lines[i - 1].ends_with(':'), "a nounroll pragma after {:?}, not its block label", lines[i - 1]);
    }
}
