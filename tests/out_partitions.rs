//! The partitions of `DisjointSlice<T, P>` added for ported kernels (issue 30) on both back
//! ends (CPU executor always, GPU when present; `REQUIRE_GPU=1` makes a missing GPU a
//! failure): each map writes every element it owns exactly once and nothing else, in-place
//! updates see their own element, the last-block handoff sums every block's partials and
//! leaves its counter at 0, every launcher refuses a launch of the wrong shape before
//! anything runs, and on the CPU executor a witness smuggled between threads and a barrier
//! inside `arrive` skipped by some threads are caught. Kernels:
//! tests/kernels/src/out_partitions.rs.

#[path = "common/backend.rs"]
mod backend;
mod common;

use backend::{Backend, launch_on, on_both_backends};
use ferrocuda::{Dim3, LaunchConfig};
use gpu_kernels::examples::Float4;
use gpu_kernels::partitions as ported;
use test_kernels::out_partitions::{self as k, mark, mark3};

on_both_backends!(
    block_rows_cover_each_row_once_grid_strided,
    block_rows_update_in_place,
    block_rows_read_then_write_their_own_elements,
    warp_rows_grid_strided_cover_each_row_once,
    cells_3d_cover_the_tensor_once,
    handoff_sums_every_block_and_leaves_the_counter_at_0,
    handoff_rows_of_channels_sum_per_channel,
    wrong_launch_shapes_are_refused_and_write_nothing,
    rotary_pairs_rotate_each_head_in_place,
    ported_fused_add_rms_norm_matches_the_host,
    ported_rms_norm_warp_rows_matches_the_host,
    ported_unpermute_3d_matches_the_host,
    ported_sum_last_block_matches_the_host,
    p30_reversed_block_rows_cover_each_row_once_from_the_last_block,
    p30_reversed_warp_rows_cover_each_row_once_from_the_last_block,
    p30_last_block_writes_its_threads_elements_of_a_by_last_block_output,
    p30_in_place_rows_read_the_whole_row_then_write_their_own_columns,
    p30_two_byte_elements_scatter_to_computed_indices,
    p30_row_tiles_cover_each_tile_of_each_row_once,
    p30_grid_slices_cover_each_slice_once_and_refuse_what_the_buffer_cannot_hold,
    p30_s16_handoff_fold_column_reads_every_row_for_each_remainder_and_a_short_buffer,
    p30_s18_segment_rows_grid_strided_cover_each_row_once,
    p30_s18_segment_rows_of_bytes_and_one_value_per_segment,
    p30_s18_transposed_cells_cover_the_matrix_once,
    p30_s18_segment_rows_and_transposed_cells_refuse_wrong_launches,
    p30_s18_per_thread_shared_tree_reduces_each_block_in_any_block_shape,
);

fn p30_s18_per_thread_shared_tree_reduces_each_block_in_any_block_shape(backend: &Backend) {
    // 3 blocks of 64 (1-D), of (8, 4, 2) (3-D: the linear thread number) and of 1; then 4
    // bytes short of the two planes: every block reports `u32::MAX`, nothing else written.
    for (block, short) in [(dim(64, 1, 1), 0u32), (dim(8, 4, 2), 0), (dim(1, 1, 1), 0), (dim(64, 1, 1), 4)] {
        let threads = block.x * block.y * block.z;
        let x: Vec<u32> = (0..3 * threads).map(|i| (i * 7919) % 1009).collect();
        let input = backend.upload(&x);
        let mut out = backend.zeroed::<u32>(6);
        let config = LaunchConfig::new(3u32, block).with_shared_bytes(2 * threads * 4 - short);
        launch_on!(backend, k::per_thread_shared_tree, config, &input, &mut out, true).unwrap();
        let got = backend.download(&out);
        for b in 0..3usize {
            let part = &x[b * threads as usize..][..threads as usize];
            let want = if short == 0 { [*part.iter().max().unwrap(), part.iter().sum::<u32>()] } else { [u32::MAX, 0] };
            assert_eq!(got[2 * b..2 * b + 2], want, "{}: block {b} of {block:?}, {short} bytes short", backend.name());
        }
    }
}

fn p30_s18_segment_rows_grid_strided_cover_each_row_once(backend: &Backend) {
    // 2 blocks of 12 threads: 6 segments of 4 lanes over 17 rows of 13 (segments own 3 or 2
    // rows; lanes 3 or 4 columns; `+=` would show a second visit). Then a buffer 5 short: the
    // last row is not whole and is not handed out.
    for short in [0usize, 5] {
        let (rows, cols) = (17u32, 13u32);
        let mut out = backend.zeroed::<u32>((rows * cols) as usize - short);
        launch_on!(backend, k::segment_rows_mark4, LaunchConfig::new(2u32, 12u32), &mut out, rows, cols).unwrap();
        for (i, &v) in backend.download(&out).iter().enumerate() {
            let (r, c) = ((i / cols as usize) as u32, (i % cols as usize) as u32);
            let want = if r < rows - 1 || short == 0 { mark(r, c) } else { 0 };
            assert_eq!(v, want, "{}: element {i}, short by {short}", backend.name());
        }
    }
}

fn p30_s18_segment_rows_of_bytes_and_one_value_per_segment(backend: &Backend) {
    // Byte rows of 37, 64 and 100 (a group size that is no multiple of 16 or 8), 3 blocks of
    // 48 threads: 9 segments of 16 lanes, one row each, 8 rows in the buffer (the ninth
    // segment owns nothing); one value per segment, lane 0's.
    for cols in [37u32, 64, 100] {
        let rows = 8u32;
        let mut out = backend.zeroed::<u8>((rows * cols) as usize);
        let mut first = backend.zeroed::<u32>(rows as usize);
        launch_on!(backend, k::segment_rows_bytes16, LaunchConfig::new(3u32, 48u32), &mut out, &mut first, cols).unwrap();
        for (i, &v) in backend.download(&out).iter().enumerate() {
            let (r, c) = ((i / cols as usize) as u32, (i % cols as usize) as u32);
            assert_eq!(v as u32, (r + c) % 251 + 1, "{}: byte {i} of rows of {cols}", backend.name());
        }
        assert_eq!(backend.download(&first), (1..=rows).collect::<Vec<u32>>(), "{}: one value per segment, {cols}", backend.name());
    }
}

fn p30_s18_transposed_cells_cover_the_matrix_once(backend: &Backend) {
    // 21 rows (from x) of 10 columns (from y) by 3 x 2 blocks of (8, 8): threads past either
    // edge own nothing; `+=` would show a second visit.
    let (rows, cols) = (21u32, 10u32);
    let mut out = backend.zeroed::<u32>((rows * cols) as usize);
    launch_on!(backend, k::cells_transposed_mark, LaunchConfig::new(dim(3, 2, 1), dim(8, 8, 1)), &mut out, cols).unwrap();
    for (i, &v) in backend.download(&out).iter().enumerate() {
        let (r, c) = ((i / cols as usize) as u32, (i % cols as usize) as u32);
        assert_eq!(v, mark(r, c), "{}: element {i}", backend.name());
    }
}

fn p30_s18_segment_rows_and_transposed_cells_refuse_wrong_launches(backend: &Backend) {
    let refused = |result: Result<(), String>, what: &str, names: &str| {
        let error = result.expect_err(what);
        assert!(error.contains(names), "{}: {what}: {error}", backend.name());
    };
    let mut out = backend.zeroed::<u32>(64 * 64);
    // SegmentRows<4>: blocks must be multiples of 4 lanes, and 1-D.
    refused(launch_on!(backend, k::segment_rows_mark4, LaunchConfig::new(2u32, 10u32), &mut out, 8u32, 8u32), "blocks of 10", "multiple of WIDTH");
    refused(launch_on!(backend, k::segment_rows_mark4, LaunchConfig::new(dim(2, 2, 1), dim(8, 1, 1)), &mut out, 8u32, 8u32), "2-D grid", "1-D");
    let mut bytes = backend.zeroed::<u8>(64 * 64);
    let mut first = backend.zeroed::<u32>(64);
    refused(launch_on!(backend, k::segment_rows_bytes16, LaunchConfig::new(2u32, 24u32), &mut bytes, &mut first, 64u32), "blocks of 24", "multiple of WIDTH");
    // The transposed cells: a 2-D launch (z = 1), as DisjointMatrix.
    refused(launch_on!(backend, k::cells_transposed_mark, LaunchConfig::new(dim(2, 2, 2), dim(8, 8, 1)), &mut out, 64u32), "3-D grid", "2-D");
    assert!(backend.download(&out).iter().all(|&v| v == 0), "{}: a refused launch wrote", backend.name());
    assert!(backend.download(&bytes).iter().all(|&v| v == 0), "{}: a refused launch wrote", backend.name());
}

fn dim(x: u32, y: u32, z: u32) -> Dim3 {
    Dim3 { x, y, z }
}

fn block_rows_cover_each_row_once_grid_strided(backend: &Backend) {
    // 3 blocks of 32 threads over 7 rows of 50 (blocks own 3, 2, 2 rows; threads 1 or 2
    // columns; `+=` would show a second visit). A buffer 10 short: the last row is not whole,
    // so it is not handed out.
    for (short, last_row_written) in [(0usize, true), (10, false)] {
        let (rows, cols) = (7u32, 50u32);
        let mut out = backend.zeroed::<u32>((rows * cols) as usize - short);
        launch_on!(backend, k::block_rows_mark, LaunchConfig::new(3u32, 32u32), &mut out, rows, cols).unwrap();
        for (i, &v) in backend.download(&out).iter().enumerate() {
            let (r, c) = ((i / cols as usize) as u32, (i % cols as usize) as u32);
            let want = if r < 6 || last_row_written { mark(r, c) } else { 0 };
            assert_eq!(v, want, "{}: element {i} (row {r}, col {c}), short by {short}", backend.name());
        }
    }
}

fn block_rows_update_in_place(backend: &Backend) {
    // 5 rows of 300 (more columns than the block's 128 threads): x = 2 x + bias.
    let (rows, cols) = (5usize, 300usize);
    let x0: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
    let bias: Vec<f32> = (0..cols).map(|c| c as f32 * 0.5).collect();
    let mut x = backend.upload(&x0);
    launch_on!(backend, k::block_rows_in_place, LaunchConfig::new(rows as u32, 128u32), &mut x, &backend.upload(&bias), cols as u32).unwrap();
    let got = backend.download(&x);
    for (i, (&g, &v)) in got.iter().zip(&x0).enumerate() {
        assert_eq!(g, 2.0 * v + bias[i % cols], "{}: element {i}", backend.name());
    }
}

fn block_rows_read_then_write_their_own_elements(backend: &Backend) {
    let (rows, cols) = (4usize, 70usize);
    let x0: Vec<u32> = (0..rows * cols).map(|i| (i % 13) as u32 + 1).collect();
    let mut x = backend.upload(&x0);
    let mut sums = backend.zeroed::<u32>(rows);
    launch_on!(backend, k::block_rows_two_passes, LaunchConfig::new(rows as u32, 64u32), &mut x, &mut sums, cols as u32).unwrap();
    let got = backend.download(&x);
    for r in 0..rows {
        let total: u32 = x0[r * cols..(r + 1) * cols].iter().sum();
        for c in 0..cols {
            assert_eq!(got[r * cols + c], x0[r * cols + c] * 1000 / total, "{}: ({r}, {c})", backend.name());
        }
    }
}

fn rotary_pairs_rotate_each_head_in_place(backend: &Backend) {
    // 3 tokens of 37 floats: 4 heads of 8 (pairs (k, k + 3), k < 3: 12 units, 3 per thread of
    // 4) and 5 floats of no whole head; elements 6, 7 of each head and the tail stay as they are.
    let (tokens, width) = (3usize, 37usize);
    let q0: Vec<f32> = (0..tokens * width).map(|i| i as f32 * 0.5 - 7.0).collect();
    let cos_sin: Vec<f32> = (0..tokens * 6).map(|i| ((i * 7 % 11) as f32 - 5.0) * 0.1).collect();
    let mut q = backend.upload(&q0);
    launch_on!(backend, k::rotary_neox, LaunchConfig::new(tokens as u32, 4u32), &mut q, &backend.upload(&cos_sin), width as u32).unwrap();
    let mut want = q0.clone();
    for t in 0..tokens {
        for h in 0..4 {
            for kk in 0..3 {
                let (xi, yi) = (t * width + h * 8 + kk, t * width + h * 8 + kk + 3);
                let (c, s) = (cos_sin[t * 6 + kk], cos_sin[t * 6 + 3 + kk]);
                let (x, y) = (q0[xi], q0[yi]);
                (want[xi], want[yi]) = (x * c - y * s, y * c + x * s);
            }
        }
    }
    // The device may fuse `x c - y s` into an FMA: a rounding apart, not more.
    close("rotary", backend, &backend.download(&q), &want.iter().map(|&v| v as f64).collect::<Vec<_>>(), 1e-6);
}

fn warp_rows_grid_strided_cover_each_row_once(backend: &Backend) {
    // 2 blocks of 64 threads: 4 warps over 11 rows of 45 (warps own 3, 3, 3, 2 rows).
    let (rows, cols) = (11u32, 45u32);
    let mut out = backend.zeroed::<u32>((rows * cols) as usize);
    launch_on!(backend, k::warp_rows_strided, LaunchConfig::new(2u32, 64u32), &mut out, rows, cols).unwrap();
    for (i, &v) in backend.download(&out).iter().enumerate() {
        let (r, c) = ((i / cols as usize) as u32, (i % cols as usize) as u32);
        assert_eq!(v, mark(r, c), "{}: element {i}", backend.name());
    }
}

fn cells_3d_cover_the_tensor_once(backend: &Backend) {
    // A 3 x 5 x 7 tensor by 2 x 3 x 2 blocks of (4, 2, 2) threads: 8 x 6 x 4 threads, the
    // extra ones past the edges. Then a buffer of 2 whole planes and part of a third.
    for len in [3 * 5 * 7, 2 * 5 * 7 + 9] {
        let (rows, cols) = (5u32, 7u32);
        let mut out = backend.zeroed::<u32>(len);
        launch_on!(backend, k::cells_3d, LaunchConfig::new(dim(2, 3, 2), dim(4, 2, 2)), &mut out, rows, cols).unwrap();
        for (i, &v) in backend.download(&out).iter().enumerate() {
            let (z, y, x) = ((i / 35) as u32, (i / 7 % 5) as u32, (i % 7) as u32);
            assert_eq!(v, mark3(z, y, x), "{}: element {i} of {len}", backend.name());
        }
    }
}

fn handoff_sums_every_block_and_leaves_the_counter_at_0(backend: &Backend) {
    // 37 blocks of 64: 37 partials (9 whole 16-byte pieces and a tail of 1). Twice on the same
    // counter: the first launch leaves it at 0.
    let n = 37 * 64 - 5;
    let x: Vec<u32> = (0..n as u32).map(|i| i % 1000).collect();
    let want: u32 = x.iter().sum();
    let input = backend.upload(&x);
    let mut partials = backend.zeroed::<u32>(37);
    let mut counter = backend.zeroed::<u32>(1);
    for launch in 0..2 {
        let mut total = backend.zeroed::<u32>(1);
        launch_on!(backend, k::handoff_sum, LaunchConfig::new(37u32, 64u32), &input, &mut partials, &mut counter, &mut total).unwrap();
        assert_eq!(backend.download(&total), [want], "{}: launch {launch}", backend.name());
        assert_eq!(backend.download(&counter), [0], "{}: the last block resets the counter", backend.name());
    }
    let sums = backend.download(&partials);
    assert_eq!(sums[3], x[3 * 64..4 * 64].iter().sum::<u32>(), "{}: block 3's partial", backend.name());
}

fn handoff_rows_of_channels_sum_per_channel(backend: &Backend) {
    // 9 blocks of 32 threads, 70 channels of [u32; 4] each (threads publish 2 or 3).
    let (blocks, cols) = (9u32, 70u32);
    let mut partials = backend.zeroed::<[u32; 4]>((blocks * cols) as usize);
    let mut counter = backend.zeroed::<u32>(1);
    let mut sums = backend.zeroed::<u32>(cols as usize);
    launch_on!(backend, k::handoff_channels, LaunchConfig::new(blocks, 32u32), &mut partials, &mut counter, &mut sums, cols).unwrap();
    let want: Vec<u32> = (0..cols).map(|c| (0..blocks).map(|b| mark(b, c)).sum()).collect();
    assert_eq!(backend.download(&sums), want, "{}", backend.name());
    assert_eq!(backend.download(&counter), [0], "{}", backend.name());
}

/// Session 16: `LastBlock::fold_column` walks a running pointer over the rows with a 32-bit
/// count, four rows at a time then one at a time, and `arrive` finds the rows without a 64-bit
/// division when the buffer holds a row per block: every block count from 1 to 9 (no group of
/// four, one and two groups, each remainder) sums every block's row, and a buffer short of the
/// grid's rows (6 whole rows and 5 columns of a seventh for 9 blocks: the division's path)
/// sums its whole rows only.
fn p30_s16_handoff_fold_column_reads_every_row_for_each_remainder_and_a_short_buffer(backend: &Backend) {
    let cols = 70u32;
    for (blocks, len) in (1..=9u32).map(|b| (b, b * cols)).chain([(9, 6 * cols + 5)]) {
        let rows = (len / cols).min(blocks);
        let mut partials = backend.zeroed::<[u32; 4]>(len as usize);
        let mut counter = backend.zeroed::<u32>(1);
        let mut sums = backend.zeroed::<u32>(cols as usize);
        launch_on!(backend, k::handoff_channels, LaunchConfig::new(blocks, 32u32), &mut partials, &mut counter, &mut sums, cols).unwrap();
        let want: Vec<u32> = (0..cols).map(|c| (0..rows).map(|b| mark(b, c)).sum()).collect();
        assert_eq!(backend.download(&sums), want, "{}: {blocks} blocks, {len} partials", backend.name());
        assert_eq!(backend.download(&counter), [0], "{}: {blocks} blocks", backend.name());
    }
}

fn wrong_launch_shapes_are_refused_and_write_nothing(backend: &Backend) {
    let refused = |result: Result<(), String>, what: &str, names: &str| {
        let error = result.expect_err(what);
        assert!(error.contains(names), "{}: {what}: {error}", backend.name());
    };
    let mut out = backend.zeroed::<u32>(64 * 64);
    // BlockRows and Handoff: 1-D launches only.
    refused(launch_on!(backend, k::block_rows_mark, LaunchConfig::new(dim(2, 2, 1), dim(32, 1, 1)), &mut out, 64u32, 64u32), "2-D grid", "1-D");
    refused(launch_on!(backend, k::block_rows_mark, LaunchConfig::new(dim(2, 1, 1), dim(32, 2, 1)), &mut out, 64u32, 64u32), "2-D block", "1-D");
    let (mut counter, mut total) = (backend.zeroed::<u32>(1), backend.zeroed::<u32>(1));
    refused(
        launch_on!(backend, k::handoff_sum, LaunchConfig::new(dim(2, 2, 1), dim(32, 1, 1)), &backend.upload(&[1u32; 8]), &mut out, &mut counter, &mut total),
        "2-D handoff",
        "1-D",
    );
    // Cells3d: more than u32::MAX threads along x.
    refused(
        launch_on!(backend, k::cells_3d, LaunchConfig::new(dim(i32::MAX as u32, 1, 1), dim(4, 1, 1)), &mut out, 8u32, 8u32),
        "2^33 threads along x",
        "along x",
    );
    // Cells3d's launch-time bound (issue 30): gridDim.z * blockDim.z * rows above 2^32.
    refused(launch_on!(backend, k::cells_3d, LaunchConfig::new(dim(1, 1, 65_535), dim(1, 1, 64)), &mut out, 1u32 << 12, 8u32), "2^34 plane rows", "Cells3d");
    // RowTiles: 1-D blocks in a grid with z = 1.
    refused(launch_on!(backend, k::row_tiles_mark, LaunchConfig::new(dim(2, 2, 1), dim(32, 2, 1)), &mut out, 64u32, 16u32), "2-D block", "RowTiles");
    refused(launch_on!(backend, k::row_tiles_mark, LaunchConfig::new(dim(2, 2, 2), dim(32, 1, 1)), &mut out, 64u32, 16u32), "3-D grid", "RowTiles");
    // PerWarpRow's grid stride: whole warps still required.
    refused(launch_on!(backend, k::warp_rows_strided, LaunchConfig::new(2u32, 48u32), &mut out, 4u32, 64u32), "48 threads", "multiple of 32");
    assert!(backend.download(&out).iter().all(|&v| v == 0), "{}: a refused launch wrote", backend.name());
    assert_eq!(backend.download(&counter), [0], "{}", backend.name());
}

fn p30_row_tiles_cover_each_tile_of_each_row_once(backend: &Backend) {
    // 5 rows of 100 in tiles of 30 (the last 10 wide) by a grid of (5, 6): two spare tiles per
    // row own nothing; blocks of 16 threads take 2 columns of a tile each (`+=` would show a
    // second visit). Then a buffer 10 short (the last row is not whole: not handed out), and
    // blocks wider than a tile (threads past its end own nothing).
    for (short, threads, last_row_written) in [(0usize, 16u32, true), (10, 16, false), (0, 64, true)] {
        let (rows, cols, tile) = (5u32, 100u32, 30u32);
        let mut out = backend.zeroed::<u32>((rows * cols) as usize - short);
        launch_on!(backend, k::row_tiles_mark, LaunchConfig::new(dim(rows, 6, 1), dim(threads, 1, 1)), &mut out, cols, tile).unwrap();
        for (i, &v) in backend.download(&out).iter().enumerate() {
            let (r, c) = ((i / cols as usize) as u32, (i % cols as usize) as u32);
            let want = if r < 4 || last_row_written { mark(r, c) } else { 0 };
            assert_eq!(v, want, "{}: element {i} (row {r}, col {c}), short by {short}, {threads} threads", backend.name());
        }
    }
}

fn float4s(values: &[f32]) -> Vec<Float4> {
    values.chunks_exact(4).map(|v| Float4 { x: v[0], y: v[1], z: v[2], w: v[3] }).collect()
}

fn flat(values: &[Float4]) -> Vec<f32> {
    values.iter().flat_map(|v| [v.x, v.y, v.z, v.w]).collect()
}

fn ramp(n: usize, scale: f32) -> Vec<f32> {
    (0..n).map(|i| ((i * 37 % 101) as f32 - 50.0) * scale).collect()
}

fn rms_norm(x: &[f32], w: &[f32], cols: usize, epsilon: f64) -> Vec<f64> {
    x.chunks_exact(cols)
        .flat_map(|row| {
            let s = 1.0 / (row.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / cols as f64 + epsilon).sqrt();
            row.iter().zip(w).map(move |(&v, &w)| v as f64 * s * w as f64)
        })
        .collect()
}

fn close(what: &str, backend: &Backend, got: &[f32], want: &[f64], tolerance: f64) {
    assert_eq!(got.len(), want.len(), "{}: {what}", backend.name());
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!((g as f64 - w).abs() <= tolerance * w.abs().max(1.0), "{}: {what}: element {i}: {g} vs {w}", backend.name());
    }
}

fn ported_fused_add_rms_norm_matches_the_host(backend: &Backend) {
    // 3 tokens of 1000 floats (250 float4s: some threads of 64 own 3, some 4).
    let (tokens, hidden) = (3usize, 1000usize);
    let (x, r, w) = (ramp(tokens * hidden, 0.01), ramp(tokens * hidden, -0.02), ramp(hidden, 0.003));
    let summed: Vec<f32> = x.iter().zip(&r).map(|(a, b)| a + b).collect();
    let (mut xs, mut rs) = (backend.upload(&float4s(&x)), backend.upload(&float4s(&r)));
    launch_on!(
        backend,
        ported::fused_add_rms_norm,
        LaunchConfig::new(tokens as u32, 64u32),
        &mut xs,
        &mut rs,
        &backend.upload(&float4s(&w)),
        1e-6f32,
        (hidden / 4) as u32
    )
    .unwrap();
    close("residual", backend, &flat(&backend.download(&rs)), &summed.iter().map(|&v| v as f64).collect::<Vec<_>>(), 1e-6);
    close("normed", backend, &flat(&backend.download(&xs)), &rms_norm(&summed, &w, hidden, 1e-6), 2e-5);
}

fn ported_rms_norm_warp_rows_matches_the_host(backend: &Backend) {
    // 13 rows of 160 floats by 2 blocks of 64 threads (4 warps, grid-strided).
    let (rows, cols) = (13usize, 160usize);
    let (x, w) = (ramp(rows * cols, 0.05), ramp(cols, 0.01));
    let mut out = backend.zeroed::<Float4>(rows * cols / 4);
    launch_on!(
        backend,
        ported::rms_norm_warp_rows,
        LaunchConfig::new(2u32, 64u32),
        &backend.upload(&float4s(&x)),
        &backend.upload(&float4s(&w)),
        &mut out,
        1e-5f32,
        rows as u32,
        (cols / 4) as u32
    )
    .unwrap();
    close("rms norm", backend, &flat(&backend.download(&out)), &rms_norm(&x, &w, cols, 1e-5), 2e-5);
}

fn ported_unpermute_3d_matches_the_host(backend: &Backend) {
    let (b, nh, t, hs) = (2usize, 3usize, 5usize, 8usize);
    let inp: Vec<f32> = (0..b * nh * t * hs).map(|i| i as f32).collect();
    let mut out = backend.zeroed::<f32>(inp.len());
    let config = LaunchConfig::new(dim(1, 2, 5), dim(8, 2, 2));
    launch_on!(backend, ported::unpermute_3d, config, &backend.upload(&inp), &mut out, core::num::NonZeroU32::new(t as u32).unwrap(), nh as u32, hs as u32)
        .unwrap();
    let got = backend.download(&out);
    for (bb, h, tt, x) in (0..b).flat_map(|bb| (0..nh).flat_map(move |h| (0..t).flat_map(move |tt| (0..hs).map(move |x| (bb, h, tt, x))))) {
        assert_eq!(got[((bb * t + tt) * nh + h) * hs + x], inp[((bb * nh + h) * t + tt) * hs + x], "{}", backend.name());
    }
}

fn ported_sum_last_block_matches_the_host(backend: &Backend) {
    // 23 blocks of 64 over 5000 float4s; twice on one counter.
    let x = ramp(20_000, 0.25);
    let want: f64 = x.iter().map(|&v| v as f64).sum();
    let xs = backend.upload(&float4s(&x));
    let (mut partials, mut counter) = (backend.zeroed::<f32>(23), backend.zeroed::<u32>(1));
    for _ in 0..2 {
        let mut total = backend.zeroed::<f32>(1);
        launch_on!(backend, ported::sum_last_block, LaunchConfig::new(23u32, 64u32), &xs, &mut partials, &mut counter, &mut total).unwrap();
        let got = backend.download(&total)[0] as f64;
        assert!((got - want).abs() <= 1e-3 * want.abs().max(1.0), "{}: {got} vs {want}", backend.name());
        assert_eq!(backend.download(&counter), [0], "{}", backend.name());
    }
}

/// `BlockRows<Reversed>`: block `b` takes rows `G - 1 - b, 2 G - 1 - b, ...` (llm.c's fused
/// classifier order), each element written once.
fn p30_reversed_block_rows_cover_each_row_once_from_the_last_block(backend: &Backend) {
    let (blocks, rows, cols) = (5u32, 13u32, 70u32);
    let mut out = backend.zeroed::<u32>((rows * cols) as usize);
    let mut who = backend.upload(&vec![u32::MAX; rows as usize]);
    launch_on!(backend, k::block_rows_reversed_mark, LaunchConfig::new(blocks, 32u32), &mut out, &mut who, rows, cols).unwrap();
    for (i, &v) in backend.download(&out).iter().enumerate() {
        assert_eq!(v, mark(i as u32 / cols, i as u32 % cols), "{}: element {i}", backend.name());
    }
    let want: Vec<u32> = (0..rows).map(|r| blocks - 1 - r % blocks).collect();
    assert_eq!(backend.download(&who), want, "{}: row r taken by block G - 1 - r % G", backend.name());
}

/// `PerWarpRow<T, Reversed>`: warp `w` of block `b` takes rows `(G - 1 - b) W + w + k G W`
/// (llm.c's softmax order), each element written once.
fn p30_reversed_warp_rows_cover_each_row_once_from_the_last_block(backend: &Backend) {
    let (blocks, warps, rows, cols) = (3u32, 2u32, 17u32, 40u32);
    let mut out = backend.zeroed::<u32>((rows * cols) as usize);
    let mut who = backend.upload(&vec![u32::MAX; rows as usize]);
    launch_on!(backend, k::warp_rows_reversed_mark, LaunchConfig::new(blocks, 32 * warps), &mut out, &mut who, rows, cols).unwrap();
    for (i, &v) in backend.download(&out).iter().enumerate() {
        assert_eq!(v, mark(i as u32 / cols, i as u32 % cols), "{}: element {i}", backend.name());
    }
    let total = blocks * warps;
    let want: Vec<u32> = (0..rows)
        .map(|r| {
            let slot = r % total;
            let (b, w) = (blocks - 1 - slot / warps, slot % warps);
            b * warps + w
        })
        .collect();
    assert_eq!(backend.download(&who), want, "{}: the warp that took each row", backend.name());
}

/// `ByLastBlock`: the last block of a handoff writes each of its threads' elements once
/// (`[old + total, index, 7, 9]`), 16-byte relaxed accesses; the counter is left at 0.
fn p30_last_block_writes_its_threads_elements_of_a_by_last_block_output(backend: &Backend) {
    let (blocks, threads, n_out) = (11u32, 64u32, 150usize);
    let x: Vec<u32> = (0..blocks * threads - 3).map(|i| i % 97).collect();
    let total: u32 = x.iter().sum();
    let input = backend.upload(&x);
    let mut partials = backend.zeroed::<u32>(blocks as usize);
    let mut counter = backend.zeroed::<u32>(1);
    let start: Vec<k::Quad> = (0..n_out as u32).map(|i| k::Quad([i, 0, 0, 0])).collect();
    let mut out = backend.upload(&start);
    launch_on!(backend, k::last_block_finish, LaunchConfig::new(blocks, threads), &input, &mut partials, &mut counter, &mut out).unwrap();
    let want: Vec<k::Quad> = (0..n_out as u32).map(|i| k::Quad([i + total, i, 7, 9])).collect();
    assert_eq!(backend.download(&out), want, "{}", backend.name());
    assert_eq!(backend.download(&counter), [0], "{}", backend.name());
}

/// `InPlaceRows<Reversed>`: every thread reads the whole row (its sum, and each column's
/// right-hand neighbour, another thread's), then after the phase barrier rewrites its own
/// columns; the values read are the row before any write.
fn p30_in_place_rows_read_the_whole_row_then_write_their_own_columns(backend: &Backend) {
    let (rows, cols) = (6u32, 77u32);
    let x: Vec<u32> = (0..rows * cols).map(|i| 1 + (i * 7) % 31).collect();
    let mut data = backend.upload(&x);
    let mut right = backend.zeroed::<u32>((rows * cols) as usize);
    launch_on!(backend, k::in_place_rows_normalize, LaunchConfig::new(rows, 32u32), &mut data, &mut right, cols).unwrap();
    let (data, right) = (backend.download(&data), backend.download(&right));
    for r in 0..rows as usize {
        let row = &x[r * cols as usize..(r + 1) * cols as usize];
        let sum: u32 = row.iter().sum();
        for c in 0..cols as usize {
            assert_eq!(data[r * cols as usize + c], row[c] * 1000 / sum, "{}: row {r}, column {c}", backend.name());
            assert_eq!(right[r * cols as usize + c], row[(c + 1) % cols as usize], "{}: row {r}, column {c}'s neighbour", backend.name());
        }
    }
}

/// `AtomicSlice<u16>` / `AtomicSlice<bf16>`: one relaxed 2-byte store per thread at an index
/// read from memory (a permutation, so each slot once).
fn p30_two_byte_elements_scatter_to_computed_indices(backend: &Backend) {
    let n = 1000usize;
    let x: Vec<u16> = (0..n as u16).map(|i| i.wrapping_mul(40_503)).collect();
    let slots: Vec<u32> = (0..n as u32).map(|i| (i * 7 + 3) % n as u32).collect();
    let mut out = backend.zeroed::<u16>(n);
    let mut out_bf16 = backend.zeroed::<ferrocuda_device::half::bf16>(n);
    launch_on!(backend, k::scatter_u16, LaunchConfig::for_elements(n, 128), &backend.upload(&x), &backend.upload(&slots), &mut out, &mut out_bf16).unwrap();
    let mut want = vec![0u16; n];
    for (i, &s) in slots.iter().enumerate() {
        want[s as usize] = x[i];
    }
    assert_eq!(backend.download(&out), want, "{}", backend.name());
    assert_eq!(backend.download(&out_bf16).iter().map(|b| b.to_bits()).collect::<Vec<_>>(), want, "{}", backend.name());
}

mod cpu_only {
    use super::*;
    use ferrocuda_device::cpu::{CpuError, CpuExecutor};

    #[test]
    fn a_block_row_used_by_another_thread_panics_on_the_cpu_executor() {
        let executor = CpuExecutor::deterministic();
        let mut out = vec![0u32; 64];
        let message = match k::smuggled_block_row::launch_cpu(&executor, LaunchConfig::new(4u32, 4u32), &mut out) {
            Err(CpuError::KernelPanic(panic)) => panic.message,
            other => panic!("expected a kernel panic, got {other:?}"),
        };
        assert!(message.contains("BlockRow") && message.contains("another GPU thread"), "{message}");
        assert!(out.iter().all(|&v| v == 0), "{out:?}");
    }

    #[test]
    fn p30_s18_a_segment_row_used_by_another_thread_panics_on_the_cpu_executor() {
        let executor = CpuExecutor::deterministic();
        let mut out = vec![0u32; 64];
        let message = match k::smuggled_segment_row::launch_cpu(&executor, LaunchConfig::new(2u32, 32u32), &mut out) {
            Err(CpuError::KernelPanic(panic)) => panic.message,
            other => panic!("expected a kernel panic, got {other:?}"),
        };
        assert!(message.contains("SegmentRow") && message.contains("another GPU thread"), "{message}");
        assert!(out.iter().all(|&v| v == 0), "{out:?}");
    }

    /// A lane that writes its neighbour's column through the `unsafe` escape hatch is a race
    /// the sanitizer reports (both threads write one element); the partition's own accesses in
    /// the same kernel are not.
    #[test]
    fn p30_s18_a_write_to_another_lanes_column_of_a_segment_row_is_a_race() {
        let executor = CpuExecutor::deterministic();
        let mut out = vec![0u32; 4 * 8];
        match k::segment_rows_neighbour_write::launch_cpu(&executor, LaunchConfig::new(1u32, 32u32), &mut out, 8) {
            Err(CpuError::GlobalMemoryRace(race)) => assert_eq!(race.element_bytes, 4, "{race:?}"),
            other => panic!("expected a GlobalMemoryRace, got {other:?}"),
        }
    }

    /// A tree reduction over a per-thread shared region without its barriers: the CPU
    /// executor reports the read of a partner's slot that races with its write.
    #[test]
    fn p30_s18_a_per_thread_shared_tree_without_barriers_is_a_shared_memory_race() {
        let executor = CpuExecutor::deterministic();
        let input: Vec<u32> = (0..64).collect();
        let mut out = vec![0u32; 2];
        let config = LaunchConfig::new(1u32, 64u32).with_shared_bytes(2 * 64 * 4);
        match k::per_thread_shared_tree::launch_cpu(&executor, config, &input, &mut out, false) {
            Err(CpuError::SharedMemoryRace(_)) => {}
            other => panic!("expected a SharedMemoryRace, got {other:?}"),
        }
    }

    /// The phase barrier of an in-place row is its own hardware barrier: a thread that ends the
    /// read phase while the others wait at `sync_threads()` never meets them (a hang on a GPU),
    /// and no write happens before every thread has finished reading. The CPU executor reports
    /// the two barriers by name.
    #[test]
    fn p30_in_place_rows_phase_barrier_mixed_with_sync_threads_is_reported() {
        let executor = CpuExecutor::deterministic();
        let mut x = vec![5u32; 64];
        let error = k::in_place_rows_mixed_barriers::launch_cpu(&executor, LaunchConfig::new(2u32, 32u32), &mut x).expect_err("mixed barriers");
        let CpuError::MixedBarriers(mixed) = error else { panic!("expected MixedBarriers, got {error:?}") };
        let names = format!("{} / {}", mixed.first_kind, mixed.second_kind);
        assert!(names.contains("write_own") && names.contains("sync_threads"), "{names}");
        assert_eq!(x[0], 5, "no write before every thread passed the phase barrier");
    }

    /// Half of each block returns without arriving. PTX releases a barrier that only exited
    /// threads hold up (issue 29, P9: 32 of 32 past the barrier on an H100), so the executor
    /// runs it as the GPU does: every block's arriving threads pass, one ticket per block, and
    /// the last block resets the counter.
    #[test]
    fn a_handoff_arrival_skipped_by_exited_threads_completes_as_on_the_gpu() {
        let executor = CpuExecutor::deterministic();
        let (mut partials, mut counter) = (vec![0u32; 4], vec![0u32; 1]);
        k::handoff_half_arrive::launch_cpu(&executor, LaunchConfig::new(4u32, 8u32), &mut partials, &mut counter)
            .expect("threads that exit release the barrier (PTX `exit`), as on the GPU");
        // The block that took the last ticket reset the counter: 0 only if all four arrived.
        assert_eq!(counter[0], 0, "every block arrived, and the last one reset the counter");
    }
}

/// Issue 30: `GridSlices` (llm.c's `copy_and_cast` grid): slice `blockIdx.y` at a run-time
/// stride, the first `n` elements of each written once, the gaps untouched; the launchers
/// refuse (writing nothing) a slice longer than the stride, a grid with more slices than the
/// buffer holds, and 2-D blocks.
fn p30_grid_slices_cover_each_slice_once_and_refuse_what_the_buffer_cannot_hold(backend: &Backend) {
    let (n, stride, slices) = (300u32, 320u32, 4u32);
    let len = (stride * (slices - 1) + n) as usize; // ends right after the last slice
    let mut out = backend.zeroed::<u32>(len);
    launch_on!(backend, k::p30_grid_slices_mark, LaunchConfig::new(dim(3, slices, 1), dim(128, 1, 1)), &mut out, n, stride).unwrap();
    for (e, &v) in backend.download(&out).iter().enumerate() {
        let (s, i) = (e as u32 / stride, e as u32 % stride);
        let want = if i < n { mark(s, i) } else { 0 };
        assert_eq!(v, want, "{}: element {e}", backend.name());
    }
    let mut short = backend.zeroed::<u32>(len - 1);
    let error = launch_on!(backend, k::p30_grid_slices_mark, LaunchConfig::new(dim(3, slices, 1), dim(128, 1, 1)), &mut short, n, stride).unwrap_err();
    assert!(error.contains("GridSlices") && error.contains("every slice"), "{}: {error}", backend.name());
    let error = launch_on!(backend, k::p30_grid_slices_mark, LaunchConfig::new(dim(3, slices, 1), dim(128, 1, 1)), &mut short, stride + 1, stride).unwrap_err();
    assert!(error.contains("at most `stride`"), "{}: {error}", backend.name());
    let error = launch_on!(backend, k::p30_grid_slices_mark, LaunchConfig::new(dim(3, 2, 1), dim(64, 2, 1)), &mut short, n, stride).unwrap_err();
    assert!(error.contains("1-D"), "{}: {error}", backend.name());
    assert!(backend.download(&short).iter().all(|&v| v == 0), "{}: a refused launch wrote", backend.name());
}
