//! The code the example kernels (`gpu_kernels::examples`) compile to, checked on the PTX
//! without a GPU: multiply-adds are `fma.rn.f32`, read-only slices load through the
//! non-coherent cache (`ld.global.nc`, 16 bytes at a time where the source reads `Float4`),
//! shared tiles are accessed with `ld.shared`/`st.shared` (never generic loads), and no
//! kernel keeps a panic path (`trap`), a local-memory stack or spills.
//!
//! These are the properties that made the Rust kernels match their CUDA C++ twins in
//! `ferrocuda-bench` (BENCHMARKS.md); each test guards one of them.

#[path = "common/ptx.rs"]
mod ptx_text;
use ptx_text::opcodes;

const EXAMPLES: [&str; 8] = ["saxpy_x4", "sum_x4", "transpose_32", "matmul_128x128", "sgemm_pipelined", "softmax_rows_1024", "histogram_bytes", "stencil_5pt"];

fn ptx() -> &'static str {
    gpu_kernels::KERNELS.ptx_for(80).expect("gpu-kernels is built for sm_80")
}

/// The body of `.entry name` up to its closing brace.
fn entry_body(name: &str) -> &'static str {
    ptx_text::entry_body(ptx(), name)
}

/// How many instructions of `name` have exactly the opcode `op`.
fn count(name: &str, op: &str) -> usize {
    opcodes(entry_body(name)).iter().filter(|&&o| o == op).count()
}

/// How many instructions of `name` have an opcode starting with `prefix`.
fn count_prefix(name: &str, prefix: &str) -> usize {
    opcodes(entry_body(name)).iter().filter(|o| o.starts_with(prefix)).count()
}

#[test]
fn multiply_adds_are_fused() {
    // saxpy_x4: a * x + y on four lanes.
    assert_eq!(count("saxpy_x4", "fma.rn.f32"), 4, "{}", entry_body("saxpy_x4"));
    // matmul: 8 depth steps x 8 x 8 accumulators, unrolled, every one an fma.
    assert_eq!(count("matmul_128x128", "fma.rn.f32"), 512);
    // stencil: 0.5 * centre + 0.125 * (...) is one mul and one fma per row (8 rows).
    assert_eq!(count("stencil_5pt", "fma.rn.f32"), 8, "{}", entry_body("stencil_5pt"));
    assert_eq!(count("sgemm_pipelined", "fma.rn.f32"), 512);
    for kernel in ["saxpy_x4", "matmul_128x128", "sgemm_pipelined"] {
        let unfused = count_prefix(kernel, "mul.rn.f32") + count_prefix(kernel, "add.rn.f32") + count(kernel, "mul.f32") + count(kernel, "add.f32");
        assert_eq!(unfused, 0, "{kernel} has a multiply or add that is not part of an fma");
    }
}

#[test]
fn read_only_slices_load_through_the_non_coherent_cache_16_bytes_at_a_time() {
    // (kernel, 16-byte nc loads, scalar nc loads): every load of a `&[T]` parameter.
    let expected = [
        ("saxpy_x4", 1, 0),
        ("sum_x4", 1, 0),
        ("transpose_32", 0, 4),
        ("matmul_128x128", 2, 0),
        // The first tile before the loop, the next one in it.
        ("sgemm_pipelined", 4, 0),
        ("softmax_rows_1024", 8, 0),
        ("histogram_bytes", 1, 0),
        // 26 through the checked-once window inside the grid, 26 checked one by one at its
        // edges (two paths, each thread takes one).
        ("stencil_5pt", 0, 52),
    ];
    for (kernel, vector_loads, scalar_loads) in expected {
        let nc = count_prefix(kernel, "ld.global.nc.");
        let nc_vector = count_prefix(kernel, "ld.global.nc.v4.");
        assert_eq!((nc_vector, nc - nc_vector), (vector_loads, scalar_loads), "{kernel}: (16-byte, scalar) ld.global.nc\n{}", entry_body(kernel));
    }
    // The only coherent global load is saxpy's y, which it writes back.
    for kernel in EXAMPLES {
        let coherent = opcodes(entry_body(kernel)).iter().filter(|o| o.starts_with("ld.global.") && !o.starts_with("ld.global.nc.")).count();
        assert_eq!(coherent, usize::from(kernel == "saxpy_x4"), "{kernel}: plain ld.global");
    }
    // Float4 stores are one 16-byte store.
    assert_eq!(count_prefix("saxpy_x4", "st.global.v4."), 1);
    assert_eq!(count_prefix("softmax_rows_1024", "st.global.v4."), 8);
    assert_eq!(count_prefix("matmul_128x128", "st.global.v4."), 16);
    assert_eq!(count_prefix("sgemm_pipelined", "st.global.v4."), 16);
}

#[test]
fn shared_tiles_use_shared_state_space_instructions() {
    // (kernel, ld.shared, st.shared, atom.shared) in the PTX.
    assert_eq!(count_prefix("transpose_32", "ld.shared.f32"), 4, "tile reads");
    assert_eq!(count_prefix("transpose_32", "st.shared.f32"), 4, "tile writes");
    // matmul: four 16-byte tile reads per depth step, A stored transposed (4 scalars), B as one vector.
    assert_eq!(count_prefix("matmul_128x128", "ld.shared.v4.f32"), 32);
    assert_eq!(count_prefix("matmul_128x128", "st.shared.f32"), 4);
    assert_eq!(count_prefix("matmul_128x128", "st.shared.v4.f32"), 1);
    // histogram: 16 bytes per loop trip, one shared atomic each.
    assert_eq!(count_prefix("histogram_bytes", "atom.shared.add.u32"), 16);
    assert!(count_prefix("sum_x4", "st.shared.f32") == 1 && count_prefix("sum_x4", "ld.shared.f32") == 1);
    // No example loads or stores through a generic address (Rust has no address spaces; the
    // device library's shared handles must keep these accesses in the shared window). The
    // one global atomic per block of sum_x4 and histogram_bytes is generic (`atom.relaxed.gpu`
    // on a global pointer), which costs nothing measurable at that rate.
    for kernel in EXAMPLES {
        let generic = opcodes(entry_body(kernel))
            .into_iter()
            .filter(|o| (o.starts_with("ld.") || o.starts_with("st.")) && !o.contains(".global") && !o.contains(".shared") && !o.contains(".param"))
            .collect::<Vec<_>>();
        assert!(generic.is_empty(), "{kernel} uses generic memory instructions: {generic:?}");
    }
}

#[test]
fn warp_reductions_are_shuffles() {
    // Five butterfly steps per reduction: sum_x4 reduces twice (threads, then warps), softmax
    // twice (max and sum).
    assert_eq!(count_prefix("sum_x4", "shfl.sync.bfly.b32"), 10);
    assert_eq!(count_prefix("softmax_rows_1024", "shfl.sync.bfly.b32"), 10);
    // __expf: one ex2.approx per element of the row slice (8 float4 per lane).
    assert_eq!(count_prefix("softmax_rows_1024", "ex2.approx"), 32);
}

#[test]
fn no_panic_path_no_stack_and_no_spills() {
    for kernel in EXAMPLES {
        let body = entry_body(kernel);
        assert!(!body.contains("trap;"), "{kernel} keeps a panic path (a bounds check LLVM could not remove)");
        assert!(!body.contains(".local"), "{kernel} uses local memory (an array that did not stay in registers)");
    }
    let resources = gpu_kernels::KERNELS.resources;
    if resources.is_empty() {
        eprintln!("SKIPPED register checks: the build found no ptxas, so there is no resource table");
        return;
    }
    for kernel in EXAMPLES {
        for r in resources.iter().filter(|r| r.kernel == kernel) {
            let (arch, registers, spill_stores, spill_loads, stack) = (r.arch, r.registers, r.spill_stores, r.spill_loads, r.stack_frame);
            assert_eq!((spill_stores, spill_loads, stack), (0, 0, 0), "{kernel} on sm_{arch}: spills or a stack frame");
            // 256-thread matmul blocks: <= 128 registers keeps two blocks per SM; the
            // memory-bound kernels must stay far below the ~50 a panic path costs.
            let limit = if kernel == "matmul_128x128" || kernel == "sgemm_pipelined" { 128 } else { 64 };
            assert!(registers <= limit, "{kernel} on sm_{arch}: {registers} registers (limit {limit})");
        }
    }
}

/// The kernel model's outputs (`DisjointSlice`) compile to what `&mut [T]` did: saxpy has one
/// non-coherent load of `x`, one plain load and one store of `y`, one fused multiply-add, and
/// one conditional branch (the bounds guard); the thread's unique index adds no branch.
#[test]
fn migrated_saxpy_keeps_its_loads_stores_and_single_guard() {
    let body = entry_body("saxpy");
    let ops = opcodes(body);
    let n = |op: &str| ops.iter().filter(|o| **o == op).count();
    assert_eq!((n("ld.global.nc.b32") + n("ld.global.nc.f32"), n("ld.global.b32") + n("ld.global.f32")), (1, 1), "{body}");
    assert_eq!(n("st.global.b32") + n("st.global.f32"), 1, "{body}");
    assert_eq!(n("fma.rn.f32"), 1, "{body}");
    let conditional_branches = body.lines().filter(|l| l.trim_start().starts_with('@') && l.contains(" bra")).count();
    assert_eq!(conditional_branches, 1, "one bounds guard, no other branch:\n{body}");
    assert!(!body.contains("trap;"), "no panic path:\n{body}");
    // The output parameter keeps the element alignment, like the `&mut [f32; 0]` it replaces.
    assert!(body.contains(".param .u64 .ptr .align 4 saxpy_param_3"), "{body}");
}

/// U2 in the PTX: `stale_read` (its `AtomicSlice` form) loads the flag again after the second
/// barrier; the `&mut [u32]` form had one load before the first barrier and none after.
#[test]
fn stale_read_loads_the_flag_again_after_each_barrier() {
    // The accesses are inline-assembly blocks (`{ .reg .u64 g; cvta.to.global..; ld.relaxed.. }`),
    // which `opcodes` skips: count the text.
    // `stale_read` is a test fixture (test-kernels), not an example kernel.
    let body = ptx_text::entry_body(test_kernels::KERNELS.ptx_for(80).expect("test-kernels is built for sm_80"), "stale_read");
    let barriers: Vec<usize> = body.match_indices("barrier.sync 0").map(|(at, _)| at).collect();
    assert_eq!(barriers.len(), 2, "{body}");
    let (before, between, after) = (&body[..barriers[0]], &body[barriers[0]..barriers[1]], &body[barriers[1]..]);
    assert_eq!(before.matches("ld.relaxed.gpu.global").count(), 1, "{body}");
    assert_eq!(between.matches("st.relaxed.gpu.global").count(), 1, "{body}");
    assert_eq!(after.matches("ld.relaxed.gpu.global").count(), 1, "the load after the last barrier:\n{body}");
}

/// Issue 13: what makes `sgemm_pipelined` faster than `matmul_128x128`, on the PTX. One K step
/// (the loop body: everything after the first barrier, with the C stores) has 32 `ld.shared.v4.f32` and 512 FMAs in
/// straight-line code, the next tile's two 16-byte global loads, its stores to the other
/// stage, and one barrier; the only other barrier follows the first tile's stores.
#[test]
fn pipelined_sgemm_has_one_barrier_per_step_and_only_vector_shared_loads() {
    let kernel = "sgemm_pipelined";
    let body = entry_body(kernel);
    let ops = opcodes(body);
    // This base spells the block barrier `bar.sync 0`; newer ones `barrier.sync 0`.
    let is_barrier = |op: &str| op == "bar.sync" || op == "barrier.sync" || op == "barrier.sync.aligned";
    // The prologue ends with the first barrier; the K loop and the C stores follow.
    let first_barrier = ops.iter().position(|op| is_barrier(op)).expect("a barrier");
    let (prologue, step) = ops.split_at(first_barrier + 1);
    let count_in = |ops: &[&str], prefix: &str| ops.iter().filter(|op| op.starts_with(prefix)).count();
    assert_eq!(
        (prologue.iter().filter(|op| is_barrier(op)).count(), step.iter().filter(|op| is_barrier(op)).count()),
        (1, 1),
        "barriers (before, in) the loop\n{body}"
    );
    // Both operands are read 16 bytes at a time: no scalar shared load at all.
    assert_eq!(count_in(&ops, "ld.shared.v4.f32"), 32, "8 depths x 4 float4 per step");
    assert_eq!(count_in(&ops, "ld.shared."), 32, "no scalar shared loads");
    assert_eq!(count_in(step, "ld.shared.v4.f32"), 32);
    assert_eq!(count_in(step, "fma.rn.f32"), 512);
    // The prefetch: two 16-byte loads per step, A stored transposed (4 scalars) and B as one
    // vector to the other stage, in the loop and once before it.
    assert_eq!(count_in(step, "ld.global.nc.v4."), 2, "the next tile's loads are in the loop");
    assert_eq!((count_in(prologue, "st.shared.f32"), count_in(step, "st.shared.f32")), (4, 4));
    assert_eq!((count_in(prologue, "st.shared.v4.f32"), count_in(step, "st.shared.v4.f32")), (1, 1));
    // Launch bounds (256 threads, 2 blocks per SM) reach the PTX, so ptxas keeps <= 128 registers.
    assert!(body.contains(".maxntid 256, 1, 1") && body.contains(".minnctapersm 2"), "launch bounds\n{body}");
    // u32 index arithmetic: 64-bit products appear only in the size guard (`m k`-style
    // checks) and once in the epilogue (C's row offset, `row * cols` of a `PerThreadTile`),
    // not per load: none in the loop (up to its barrier).
    let in_loop = &step[..=step.iter().position(|op| is_barrier(op)).expect("the loop's barrier")];
    assert!(count_in(in_loop, "mul.lo.s64") + count_in(in_loop, "mul.lo.u64") == 0, "64-bit index products in the loop\n{body}");
    let after_loop = &step[in_loop.len()..];
    assert!(count_in(after_loop, "mul.lo.s64") + count_in(after_loop, "mul.lo.u64") <= 1, "64-bit products in the epilogue\n{body}");
    assert!(!body.contains(".local"), "no local memory");
}
