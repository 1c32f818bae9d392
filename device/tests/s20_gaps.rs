//! Session 20's gap fixes from issue 30's seventh port (bench/ports7/RESULTS.md, gap 2): the
//! `BlockRowsX16` partition, a row per block written as a scalar head, 16-byte vectors and a
//! scalar tail, on the CPU executor (whose race detector claims every output element each
//! access reaches, so two threads reaching one byte fail the launch).

use ferrocuda_device::cpu::{CpuExecutor, LaunchConfig};
use ferrocuda_device::global::partition::BlockRowsX16;
use ferrocuda_device::global::{DisjointSlice, X16Element, block_row, block_rows};
use ferrocuda_device::half::bf16;

/// The value the kernels below write at (row, column), distinct for nearby elements.
trait Mark: X16Element + PartialEq + core::fmt::Debug {
    fn mark(r: u32, c: u32) -> Self;
    const UNTOUCHED: Self;
}
impl Mark for i8 {
    fn mark(r: u32, c: u32) -> i8 {
        ((r * 37 + c) % 120) as i8 + 1
    }
    const UNTOUCHED: i8 = -7;
}
impl Mark for bf16 {
    fn mark(r: u32, c: u32) -> bf16 {
        bf16::from_f32((r * 100 + c + 1) as f32)
    }
    const UNTOUCHED: bf16 = bf16::from_bits(0xC040); // -3.0
}
impl Mark for f32 {
    fn mark(r: u32, c: u32) -> f32 {
        (r * 1000 + c + 1) as f32
    }
    const UNTOUCHED: f32 = -1.0;
}

/// Runs a grid-strided `BlockRowsX16` kernel over `rows` rows of `cols` elements that start
/// `misalign` elements past a 16-byte boundary, checks every element of every row is written
/// with its mark (by the thread that owns it: the race detector fails the launch otherwise),
/// nothing outside the rows is touched, and the split is the documented one.
fn cover<T: Mark + Send + Sync>(executor: &CpuExecutor, rows: u32, cols: u32, misalign: usize, blocks: u32, threads: u32) {
    let size = core::mem::size_of::<T>();
    let n = (rows * cols) as usize;
    let mut buffer = vec![T::UNTOUCHED; n + 2 * 16];
    let base = buffer.as_ptr() as usize;
    // First element index whose address is `misalign` elements past a 16-byte boundary.
    let skip = (0..16).find(|k| (base + k * size) % 16 == misalign * size % 16).expect("one of 16 addresses");
    let pointer = buffer[skip..].as_mut_ptr() as usize;
    let config = LaunchConfig::new(blocks, threads);
    let (lanes, vector_bytes) = (T::LANES, 16usize);
    executor
        .run("s20_block_rows_x16", config, &|| {
            // SAFETY: the buffer outlives the launch (joined before it is read), the launch is
            // 1-D as `BlockRowsX16` needs, and every thread passes the same width.
            let mut out: DisjointSlice<T, BlockRowsX16> =
                unsafe { ferrocuda_device::global::__private::output(&*(pointer as *const core::cell::UnsafeCell<[T; 0]>), n, cols) };
            for me in block_rows(rows) {
                let r = me.row();
                let Some(mut row) = out.row_mut(me) else { panic!("row {r} of {rows} fits") };
                let (head, vectors, tail) = (row.head(), row.vectors(), row.tail_start());
                let first = pointer + (r * cols) as usize * size;
                let expect_head = (((16 - first % 16) % 16) / size).min(cols as usize) as u32;
                assert_eq!(head, expect_head, "head of row {r}");
                assert_eq!(vectors, (cols - head) / lanes);
                assert!(cols - tail < lanes, "tail shorter than a vector");
                row.vectors_mut(|c, v| {
                    assert_eq!((first + c as usize * size) % vector_bytes, 0, "vector at column {c} aligned");
                    let values: &mut [T] = bytemuck::cast_slice_mut(core::slice::from_mut(v));
                    for (j, o) in values.iter_mut().enumerate() {
                        *o = T::mark(r, c + j as u32);
                    }
                });
                // Session 21: `has_work` is exactly "this thread owns something in the row".
                let busy = row.has_work();
                let mut owned = 0u32;
                row.vectors_mut(|_, _| owned += 1);
                row.elements_mut(|c, o| {
                    assert!(c < head || c >= tail, "column {c} is a head or tail column");
                    *o = T::mark(r, c);
                    owned += 1;
                });
                assert_eq!(busy, owned > 0, "has_work of row {r}, cols {cols}: {owned} units owned");
            }
        })
        .unwrap_or_else(|e| panic!("rows {rows} cols {cols} misalign {misalign}: {e}"));
    for (i, v) in buffer.iter().enumerate() {
        let expected = if i >= skip && i < skip + n { T::mark(((i - skip) / cols as usize) as u32, ((i - skip) % cols as usize) as u32) } else { T::UNTOUCHED };
        assert_eq!(*v, expected, "element {i} (rows start at {skip}), cols {cols}, misalign {misalign}");
    }
}

/// Every width 1..=64 at every alignment 0..15 bytes: each element of each row written once,
/// by its owner, through the head, the 16-byte body or the tail (issue 30, seventh port, gap
/// 2: vLLM's quantisers for `hidden % 16 != 0`).
#[test]
fn p30_ports7_gap2_block_rows_x16_cover_every_width_and_alignment_once() {
    let executor = CpuExecutor::new();
    for cols in 1..=64 {
        for misalign in 0..16 {
            cover::<i8>(&executor, 3, cols, misalign, 2, 3);
        }
        for misalign in 0..8 {
            cover::<bf16>(&executor, 2, cols, misalign, 2, 4);
        }
        for misalign in 0..4 {
            cover::<f32>(&executor, 2, cols, misalign, 1, 2);
        }
    }
    // Blocks wider than a row's units, and one thread a block.
    cover::<i8>(&executor, 4, 200, 5, 3, 64);
    cover::<i8>(&executor, 2, 77, 9, 2, 1);
}

/// The zips bound the output's runs by the input's length (one bound each), and read the input
/// at the output's columns.
#[test]
fn p30_ports7_gap2_block_rows_x16_zips_read_the_same_columns_below_the_inputs_length() {
    const COLS: u32 = 45;
    for short in [0usize, 3, 20, 44, 45, 60] {
        let mut out = vec![0u8; COLS as usize + 16];
        let base = out.as_ptr() as usize;
        let skip = (16 - base % 16) % 16 + 3; // rows start 3 bytes past a boundary
        let pointer = out[skip..].as_mut_ptr() as usize;
        let input: Vec<u32> = (0..short as u32).map(|c| c * 2 + 1).collect();
        CpuExecutor::new()
            .run("s20_zips", LaunchConfig::new(1u32, 4u32), &|| {
                // SAFETY: as in `cover`.
                let mut out: DisjointSlice<u8, BlockRowsX16> =
                    unsafe { ferrocuda_device::global::__private::output(&*(pointer as *const core::cell::UnsafeCell<[u8; 0]>), COLS as usize, COLS) };
                let Some(mut row) = out.row_mut(block_row()) else { panic!("one row fits") };
                assert_eq!((row.head(), row.vectors(), row.tail_start()), (13, 2, 45));
                row.zip_vectors(&input, |x, v| {
                    assert_eq!(x.len(), 16);
                    for (o, &x) in v.0.iter_mut().zip(x) {
                        *o = x as u8;
                    }
                });
                row.zip_elements(&input, |&x, o| *o = x as u8);
            })
            .unwrap();
        for c in 0..COLS as usize {
            // A vector is written only when all 16 of its inputs exist.
            let vector_in = (13..45).contains(&c) && (13 + (c - 13) / 16 * 16 + 16) <= short;
            let scalar_in = c < 13 && c < short;
            let expected = if vector_in || scalar_in { (c * 2 + 1) as u8 } else { 0 };
            assert_eq!(out[skip + c], expected, "input of {short}, column {c}");
        }
    }
}

/// A row outside the buffer gives `None` (one check per row); the rows that fit are written,
/// nothing past them.
#[test]
fn p30_ports7_gap2_block_rows_x16_refuses_rows_past_the_buffer() {
    let mut out = vec![0i8; 40];
    let pointer = out.as_mut_ptr() as usize;
    CpuExecutor::new()
        .run("s20_short", LaunchConfig::new(3u32, 2u32), &|| {
            // SAFETY: as in `cover`; a buffer of 40 holds two rows of 17, not three.
            let mut out: DisjointSlice<i8, BlockRowsX16> =
                unsafe { ferrocuda_device::global::__private::output(&*(pointer as *const core::cell::UnsafeCell<[i8; 0]>), 40, 17) };
            let me = block_row();
            match out.row_mut(me) {
                Some(mut row) => {
                    assert!(me.row() < 2);
                    row.elements_mut(|_, o| *o = 1);
                    row.vectors_mut(|_, v| v.0 = [1; 16]);
                }
                None => assert_eq!(me.row(), 2),
            }
        })
        .unwrap();
    assert!(out[..34].iter().all(|&v| v == 1) && out[34..].iter().all(|&v| v == 0));
}
