//! The 2-D output types on both back ends (CPU executor always, GPU when present): each map
//! writes every element it owns exactly once (`row * 1000 + col + 1`), nothing else; every
//! launcher refuses a launch of the wrong shape, before anything runs; witnesses smuggled
//! between threads are caught on the CPU executor. Kernels: tests/kernels/src/matrix_outputs.rs.

#[path = "common/backend.rs"]
mod backend;
mod common;

use backend::{Backend, launch_on, on_both_backends};
use ferrocuda::{Dim3, LaunchConfig};
use test_kernels::matrix_outputs::{self as k, mark};

on_both_backends!(
    one_element_per_thread_covers_the_matrix_once,
    a_2d_grid_stride_loop_covers_any_matrix_once,
    tiles_cover_whole_tiles_once,
    transposed_tiles_cover_whole_tiles_once,
    clipped_tiles_cover_the_edges_and_nothing_past_them,
    warp_rows_cover_each_row_once_and_lane_0_alone_writes_a_one_column_row,
    wrong_launch_shapes_are_refused_and_write_nothing,
    audit_a_width_changed_in_the_body_does_not_change_the_map,
    audit_two_outputs_of_different_widths_keep_their_own_maps,
    audit_a_row_times_cols_past_u32_does_not_wrap_onto_another_cell,
    audit_a_tile_origin_past_u32_does_not_wrap_onto_another_tile,
    audit_clusters_do_not_change_the_tiles,
    audit_a_generic_kernel_builds_its_matrix_with_the_width,
    micro_tiles_cover_whole_tiles_once,
    split_micro_tiles_cover_whole_tiles_once_in_16_byte_stores,
    micro_tiles_refuse_wrong_launch_shapes_and_write_nothing,
    audit_a_micro_tile_origin_past_u32_does_not_wrap_onto_another_tile,
);

fn dim(x: u32, y: u32, z: u32) -> Dim3 {
    Dim3 { x, y, z }
}

/// `got[i]` is `mark(row, col)` for the elements `owned(row, col)` and 0 for the others.
fn check(backend: &Backend, what: &str, got: &[u32], cols: u32, owned: impl Fn(u32, u32) -> bool) {
    for (i, &value) in got.iter().enumerate() {
        let (row, col) = ((i / cols as usize) as u32, (i % cols as usize) as u32);
        let want = if owned(row, col) { mark(row, col) } else { 0 };
        assert_eq!(value, want, "{}: {what}: element {i} (row {row}, col {col})", backend.name());
    }
}

fn one_element_per_thread_covers_the_matrix_once(backend: &Backend) {
    // 37 x 45 threads over a 30 x 40 matrix: the extra threads' cells are past the end.
    let (rows, cols) = (30u32, 40u32);
    let mut out = backend.zeroed::<u32>((rows * cols) as usize);
    launch_on!(backend, k::matrix_one_per_thread, LaunchConfig::new(dim(5, 4, 1), dim(9, 10, 1)), &mut out, cols).unwrap();
    check(backend, "unique_cell", &backend.download(&out), cols, |_, _| true);
}

fn a_2d_grid_stride_loop_covers_any_matrix_once(backend: &Backend) {
    // 2 x 3 blocks of 8 x 4 threads (16 x 12 threads) striding over 50 x 70: `+=` would show
    // an element visited twice.
    let (rows, cols) = (50u32, 70u32);
    let mut out = backend.zeroed::<u32>((rows * cols) as usize);
    launch_on!(backend, k::matrix_grid_stride, LaunchConfig::new(dim(2, 3, 1), dim(8, 4, 1)), &mut out, rows, cols).unwrap();
    check(backend, "grid_stride_2d", &backend.download(&out), cols, |_, _| true);
    // A buffer shorter than rows x cols: the cells past its end are `None`, not written.
    let mut short = backend.zeroed::<u32>((rows * cols - 35) as usize);
    launch_on!(backend, k::matrix_grid_stride, LaunchConfig::new(dim(2, 3, 1), dim(8, 4, 1)), &mut short, rows, cols).unwrap();
    let got = backend.download(&short);
    check(backend, "grid_stride_2d, short buffer", &got, cols, |row, col| (row * cols + col) < rows * cols - 35);
}

fn tiles_cover_whole_tiles_once(backend: &Backend) {
    // A 12 x 24 matrix is 3 x 3 tiles of 4 x 8; a grid of 4 x 4 blocks has blocks past it.
    let (rows, cols) = (12u32, 24u32);
    let mut out = backend.zeroed::<u32>((rows * cols) as usize);
    launch_on!(backend, k::tiles_direct, LaunchConfig::new(dim(4, 4, 1), dim(4, 2, 1)), &mut out, cols).unwrap();
    check(backend, "direct tiles", &backend.download(&out), cols, |_, _| true);
    // 14 x 26: the cut tiles at the right and bottom are left to `tile_clipped_mut`.
    let (rows, cols) = (14u32, 26u32);
    let mut out = backend.zeroed::<u32>((rows * cols) as usize);
    launch_on!(backend, k::tiles_direct, LaunchConfig::new(dim(4, 4, 1), dim(4, 2, 1)), &mut out, cols).unwrap();
    check(backend, "direct tiles, ragged", &backend.download(&out), cols, |row, col| row < 12 && col < 24);
}

fn transposed_tiles_cover_whole_tiles_once(backend: &Backend) {
    // Block (x, y) owns tile row x, tile column y: a 3 x 2 grid covers 3 tile rows (12 rows)
    // and 2 tile columns (16 columns).
    let (rows, cols) = (12u32, 16u32);
    let mut out = backend.zeroed::<u32>((rows * cols) as usize);
    launch_on!(backend, k::tiles_transposed, LaunchConfig::new(dim(3, 2, 1), dim(4, 2, 1)), &mut out, cols).unwrap();
    check(backend, "transposed tiles", &backend.download(&out), cols, |_, _| true);
    // A 2 x 3 grid on the same matrix: tile rows 0..2, tile columns 0..3 (the third past the
    // 16 columns): rows 8.. stay 0.
    let mut out = backend.zeroed::<u32>((rows * cols) as usize);
    launch_on!(backend, k::tiles_transposed, LaunchConfig::new(dim(2, 3, 1), dim(4, 2, 1)), &mut out, cols).unwrap();
    check(backend, "transposed tiles, 2 x 3 grid", &backend.download(&out), cols, |row, _| row < 8);
}

fn clipped_tiles_cover_the_edges_and_nothing_past_them(backend: &Backend) {
    let (rows, cols) = (14u32, 26u32);
    let mut out = backend.zeroed::<u32>((rows * cols) as usize);
    launch_on!(backend, k::tiles_clipped, LaunchConfig::new(dim(5, 5, 1), dim(4, 2, 1)), &mut out, cols).unwrap();
    check(backend, "clipped tiles", &backend.download(&out), cols, |_, _| true);
    // A buffer that ends inside a row: the partial last row is left alone.
    let mut short = backend.zeroed::<u32>((rows * cols - 5) as usize);
    launch_on!(backend, k::tiles_clipped, LaunchConfig::new(dim(5, 5, 1), dim(4, 2, 1)), &mut short, cols).unwrap();
    check(backend, "clipped tiles, short buffer", &backend.download(&short), cols, |row, _| row < rows - 1);
}

fn warp_rows_cover_each_row_once_and_lane_0_alone_writes_a_one_column_row(backend: &Backend) {
    // 3 blocks of 64 threads: 6 warps, 5 rows of 70 columns (lanes own 2 or 3 columns); the
    // sixth warp's row is past the end.
    let (rows, cols) = (5u32, 70u32);
    let mut out = backend.zeroed::<u32>((rows * cols) as usize);
    let mut firsts = backend.zeroed::<u32>(rows as usize);
    launch_on!(backend, k::warp_rows, LaunchConfig::new(3u32, 64u32), &mut out, &mut firsts, cols).unwrap();
    check(backend, "warp rows", &backend.download(&out), cols, |_, _| true);
    assert_eq!(backend.download(&firsts), (0..rows).map(|r| mark(r, 0)).collect::<Vec<_>>(), "{}: lane 0 of each warp", backend.name());
}

fn wrong_launch_shapes_are_refused_and_write_nothing(backend: &Backend) {
    let mut out = backend.zeroed::<u32>(64 * 64);
    let refused = |result: Result<(), String>, what: &str, names: &str| {
        let error = result.expect_err(what);
        assert!(error.contains(names), "{}: {what}: {error}", backend.name());
    };
    // DisjointMatrix: z > 1 in the grid or the block.
    refused(launch_on!(backend, k::matrix_one_per_thread, LaunchConfig::new(dim(2, 2, 2), dim(8, 8, 1)), &mut out, 64u32), "3-D grid", "z > 1");
    refused(launch_on!(backend, k::matrix_one_per_thread, LaunchConfig::new(dim(2, 2, 1), dim(8, 4, 2)), &mut out, 64u32), "3-D block", "z > 1");
    // PerBlockTile: a block of another shape, a transposed one, a 1-D one, a 3-D grid.
    for (grid, block) in [(dim(4, 4, 1), dim(2, 4, 1)), (dim(4, 4, 1), dim(8, 1, 1)), (dim(4, 4, 2), dim(4, 2, 1)), (dim(4, 4, 1), dim(4, 2, 2))] {
        refused(launch_on!(backend, k::tiles_direct, LaunchConfig::new(grid, block), &mut out, 64u32), "tile block shape", "blocks of exactly");
    }
    refused(
        launch_on!(backend, k::two_tile_shapes, LaunchConfig::new(dim(1, 1, 1), dim(8, 8, 1)), &mut out, &mut backend.zeroed::<u32>(64), 8u32),
        "two shapes",
        "different block shapes",
    );
    // PerWarpRow: blocks that are not whole warps, a 2-D launch.
    let mut firsts = backend.zeroed::<u32>(64);
    refused(launch_on!(backend, k::warp_rows, LaunchConfig::new(2u32, 48u32), &mut out, &mut firsts, 64u32), "48 threads", "multiple of 32");
    refused(launch_on!(backend, k::warp_rows, LaunchConfig::new(dim(2, 2, 1), dim(32, 1, 1)), &mut out, &mut firsts, 64u32), "2-D grid", "not both 1-D");
    assert!(backend.download(&out).iter().all(|&v| v == 0), "{}: a refused launch wrote", backend.name());
    assert!(backend.download(&firsts).iter().all(|&v| v == 0), "{}: a refused launch wrote", backend.name());
}

fn audit_a_width_changed_in_the_body_does_not_change_the_map(backend: &Backend) {
    let (rows, cols) = (6u32, 10u32);
    let mut out = backend.zeroed::<u32>((rows * cols) as usize);
    launch_on!(backend, k::width_changed_in_the_body, LaunchConfig::new(dim(2, 2, 1), dim(5, 3, 1)), &mut out, cols).unwrap();
    check(backend, "width reassigned in the body", &backend.download(&out), cols, |_, _| true);
}

fn audit_two_outputs_of_different_widths_keep_their_own_maps(backend: &Backend) {
    // 8 x 8 threads; `a` is 4 wide (columns 4.. are `None`), `b` 8 wide.
    let (mut a, mut b) = (backend.zeroed::<u32>(8 * 4), backend.zeroed::<u32>(8 * 8));
    launch_on!(backend, k::two_widths, LaunchConfig::new(dim(1, 1, 1), dim(8, 8, 1)), &mut a, &mut b, 8u32).unwrap();
    check(backend, "4 wide", &backend.download(&a), 4, |_, _| true);
    check(backend, "8 wide", &backend.download(&b), 8, |_, _| true);
}

fn audit_a_row_times_cols_past_u32_does_not_wrap_onto_another_cell(backend: &Backend) {
    let mut out = backend.zeroed::<u32>(16);
    launch_on!(backend, k::huge_width, LaunchConfig::new(dim(1, 2, 1), dim(2, 1, 1)), &mut out, u32::MAX).unwrap();
    let got = backend.download(&out);
    assert_eq!(&got[..3], &[1, 1, 0], "{}: cells (0, 0) and (0, 1) once each, rows 1.. past the end", backend.name());
}

fn audit_a_tile_origin_past_u32_does_not_wrap_onto_another_tile(backend: &Backend) {
    // One tile column of 2^20: only block 0's tile lies in the matrix.
    let mut out = backend.zeroed::<u32>(1 << 20);
    launch_on!(backend, k::huge_tiles, LaunchConfig::new(dim(4097, 1, 1), dim(1, 1, 1)), &mut out, 1u32 << 20).unwrap();
    let got = backend.download(&out);
    assert_eq!(got[0], 1, "{}: element 0 is block 0's alone", backend.name());
    assert!(got[1..].iter().all(|&v| v == 0), "{}", backend.name());
}

fn audit_clusters_do_not_change_the_tiles(backend: &Backend) {
    // Clusters group blocks; block and thread indices, and so the tiles, stay as they were.
    if let Backend::Gpu { context, .. } = backend
        && context.device().compute_capability().is_ok_and(|(major, _)| major < 9)
    {
        return;
    }
    let (rows, cols) = (16u32, 32u32);
    let mut out = backend.zeroed::<u32>((rows * cols) as usize);
    launch_on!(backend, k::tiles_direct, LaunchConfig::new(dim(4, 4, 1), dim(4, 2, 1)).with_cluster(dim(2, 2, 1)), &mut out, cols).unwrap();
    check(backend, "tiles in clusters of 2 x 2", &backend.download(&out), cols, |_, _| true);
}

fn audit_a_generic_kernel_builds_its_matrix_with_the_width(backend: &Backend) {
    let mut out = backend.zeroed::<u32>(3 * 5);
    launch_on!(backend, k::fill_matrix_u32, LaunchConfig::new(dim(1, 1, 1), dim(8, 8, 1)), &mut out, 5u32, 7u32).unwrap();
    assert_eq!(backend.download(&out), vec![7; 15], "{}", backend.name());
    let mut floats = backend.zeroed::<f32>(4 * 2);
    launch_on!(backend, k::fill_matrix_f32, LaunchConfig::new(dim(1, 1, 1), dim(2, 4, 1)), &mut floats, 2u32, 0.5f32).unwrap();
    assert_eq!(backend.download(&floats), vec![0.5; 8], "{}", backend.name());
}

fn micro_tiles_cover_whole_tiles_once(backend: &Backend) {
    // 16 x 32 is 2 x 2 tiles of 8 x 16; a 3 x 3 grid has blocks past it.
    let (rows, cols) = (16u32, 32u32);
    let mut out = backend.zeroed::<u32>((rows * cols) as usize);
    launch_on!(backend, k::micro_tiles, LaunchConfig::new(dim(3, 3, 1), dim(16, 1, 1)), &mut out, cols).unwrap();
    check(backend, "micro-tiles", &backend.download(&out), cols, |_, _| true);
    // 20 x 40 and a buffer 3 elements short: only whole tiles inside the buffer are written
    // (rows 0..16, columns 0..32); the ragged edges are someone else's business.
    let (rows, cols) = (20u32, 40u32);
    let mut out = backend.zeroed::<u32>((rows * cols - 3) as usize);
    launch_on!(backend, k::micro_tiles, LaunchConfig::new(dim(3, 3, 1), dim(16, 1, 1)), &mut out, cols).unwrap();
    check(backend, "micro-tiles, ragged", &backend.download(&out), cols, |row, col| row < 16 && col < 32);
}

fn split_micro_tiles_cover_whole_tiles_once_in_16_byte_stores(backend: &Backend) {
    let (rows, cols) = (16u32, 32u32);
    let mut out = backend.zeroed::<u32>((rows * cols) as usize);
    launch_on!(backend, k::micro_tiles_split, LaunchConfig::new(dim(2, 2, 1), dim(4, 1, 1)), &mut out, cols).unwrap();
    check(backend, "split micro-tiles", &backend.download(&out), cols, |_, _| true);
    // Rows of 18 u32 (72 bytes) are not 16-byte multiples: no aligned tile, nothing written.
    let cols = 18u32;
    let mut out = backend.zeroed::<u32>((rows * cols) as usize);
    launch_on!(backend, k::micro_tiles_split, LaunchConfig::new(dim(1, 2, 1), dim(4, 1, 1)), &mut out, cols).unwrap();
    check(backend, "split micro-tiles, rows not 16-byte multiples", &backend.download(&out), cols, |_, _| false);
}

fn micro_tiles_refuse_wrong_launch_shapes_and_write_nothing(backend: &Backend) {
    let mut out = backend.zeroed::<u32>(64 * 64);
    for (grid, block) in [
        (dim(2, 2, 1), dim(8, 2, 1)),
        (dim(2, 2, 1), dim(15, 1, 1)),
        (dim(2, 2, 1), dim(32, 1, 1)),
        (dim(2, 2, 2), dim(16, 1, 1)),
        (dim(2, 2, 1), dim(16, 1, 2)),
    ] {
        let error = launch_on!(backend, k::micro_tiles, LaunchConfig::new(grid, block), &mut out, 64u32).expect_err("a wrong micro-tile block shape");
        assert!(error.contains("blocks of exactly"), "{}: {grid} {block}: {error}", backend.name());
    }
    let error = launch_on!(backend, k::micro_tiles_split, LaunchConfig::new(dim(1, 1, 1), dim(16, 1, 1)), &mut out, 64u32).expect_err("16 threads for 4");
    assert!(error.contains("blocks of exactly"), "{}: {error}", backend.name());
    assert!(backend.download(&out).iter().all(|&v| v == 0), "{}: a refused launch wrote", backend.name());
}

fn audit_a_micro_tile_origin_past_u32_does_not_wrap_onto_another_tile(backend: &Backend) {
    let mut out = backend.zeroed::<u32>(1 << 20);
    launch_on!(backend, k::huge_micro_tiles, LaunchConfig::new(dim(4097, 1, 1), dim(1, 1, 1)), &mut out, 1u32 << 20).unwrap();
    let got = backend.download(&out);
    assert_eq!(got[0], 1, "{}: element 0 is block 0's alone", backend.name());
    assert!(got[1..].iter().all(|&v| v == 0), "{}", backend.name());
}

mod cpu_only {
    use super::*;
    use ferrocuda_device::cpu::{CpuError, CpuExecutor};

    fn panic_message(result: Result<(), CpuError>) -> String {
        match result {
            Err(CpuError::KernelPanic(panic)) => panic.message,
            other => panic!("expected a kernel panic, got {other:?}"),
        }
    }

    #[test]
    fn a_thread_cell_used_by_another_thread_panics_on_the_cpu_executor() {
        let executor = CpuExecutor::deterministic();
        let mut out = vec![0u32; 16];
        let message = panic_message(k::smuggled_cell::launch_cpu(&executor, LaunchConfig::new(dim(1, 1, 1), dim(4, 4, 1)), &mut out, 4));
        assert!(message.contains("ThreadCell") && message.contains("another GPU thread"), "{message}");
        assert!(out.iter().all(|&v| v == 0), "{out:?}");
    }

    #[test]
    fn a_warp_row_used_by_another_thread_panics_on_the_cpu_executor() {
        let executor = CpuExecutor::deterministic();
        let mut out = vec![0u32; 64];
        let message = panic_message(k::smuggled_warp_row::launch_cpu(&executor, LaunchConfig::new(1u32, 64u32), &mut out));
        assert!(message.contains("WarpRow") && message.contains("another GPU thread"), "{message}");
        assert!(out.iter().all(|&v| v == 0), "{out:?}");
    }
}
