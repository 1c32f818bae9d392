//! The trainer's own kernels on the CPU executor: the packed head permutes (8 elements per
//! thread, 16-byte accesses) move the same elements as the definition, also on views that
//! start mid-vector (the element path of the same kernels); the bias-gradient partials are
//! the in-order column sums, and the warp-per-4-columns second step matches the
//! one-thread-a-column one.

use ferrocuda_device::cpu::CpuExecutor;
use gpt2::own::{OwnKernels, grid, packed_heads, sum_split_grid};
use gpt2_kernels::{Heads, ROWS_PER_CHUNK};

/// Distinct, exactly representable values (in `bf16` too: small integers).
fn ramp<T: gpt2_kernels::Elem>(n: usize) -> Vec<T> {
    (0..n).map(|i| T::narrow((i % 251) as f32 - 125.0)).collect()
}

fn heads(row_stride: u32, offset: u32) -> Heads {
    Heads { seq: 5, heads: 3, head_dim: 16, row_stride, offset }
}

/// `[B, H, T, D]` of one tensor out of rows, by definition.
fn split_reference<T: Copy>(src: &[T], shape: Heads, batch: usize) -> Vec<T> {
    let (t_, h_, d_) = (shape.seq as usize, shape.heads as usize, shape.head_dim as usize);
    let mut out = Vec::with_capacity(batch * h_ * t_ * d_);
    for b in 0..batch {
        for h in 0..h_ {
            for t in 0..t_ {
                for d in 0..d_ {
                    out.push(src[(b * t_ + t) * shape.row_stride as usize + shape.offset as usize + h * d_ + d]);
                }
            }
        }
    }
    out
}

fn check_permutes<T: OwnKernels + gpt2_kernels::Elem + PartialEq + std::fmt::Debug>() {
    let executor = CpuExecutor::new();
    let batch = 2;
    let width = 3 * 16;
    // Fused QKV rows (row stride 3 H D), each tensor split out, then the three merged back.
    let qkv = ramp::<T>(batch * 5 * 3 * width + 1);
    for start in [0usize, 1] {
        let src = &qkv[start..start + batch * 5 * 3 * width];
        let mut parts = Vec::new();
        for p in 0..3u32 {
            let shape = heads(3 * width as u32, p * width as u32);
            assert!(packed_heads(shape));
            let mut dst = vec![T::default(); batch * 5 * width];
            T::split_heads_cpu(&executor, src, &mut dst, shape).unwrap();
            assert_eq!(dst, split_reference(src, shape, batch), "split part {p}, view at {start}");
            parts.push(dst);
        }
        let mut merged = vec![T::default(); src.len()];
        T::merge_heads_cpu(&executor, &parts[0], &parts[1], &parts[2], &mut merged, heads(0, 0), 3).unwrap();
        assert_eq!(merged, src, "merge of three, view at {start}");
        let mut one = vec![T::default(); batch * 5 * width];
        T::merge_heads_cpu(&executor, &parts[1], &parts[1], &parts[1], &mut one, heads(0, 0), 1).unwrap();
        let rows: Vec<T> = src.chunks(3 * width).flat_map(|r| r[width..2 * width].to_vec()).collect();
        assert_eq!(one, rows, "merge of one, view at {start}");
    }
}

#[test]
fn packed_head_permutes_move_the_same_elements_f32_and_bf16() {
    check_permutes::<f32>();
    check_permutes::<half::bf16>();
}

/// A head dimension that is not a multiple of 8 takes the element-wise kernels (same results).
#[test]
fn unpacked_head_shapes_take_the_element_wise_kernels() {
    let shape = Heads { seq: 3, heads: 2, head_dim: 12, row_stride: 24, offset: 0 };
    assert!(!packed_heads(shape));
    let src = ramp::<f32>(2 * 3 * 24);
    let mut dst = vec![0.0f32; src.len()];
    f32::split_heads_cpu(&CpuExecutor::new(), &src, &mut dst, shape).unwrap();
    assert_eq!(dst, split_reference(&src, shape, 2));
}

fn check_bias_partials<T: OwnKernels + gpt2_kernels::Elem>() {
    let executor = CpuExecutor::new();
    // More rows than one chunk, a ragged last chunk, and a row count not a multiple of 4.
    let (rows, cols) = (ROWS_PER_CHUNK as usize + 37, 40usize);
    let chunks = rows.div_ceil(ROWS_PER_CHUNK as usize);
    let data: Vec<T> = (0..rows * cols + 1).map(|i| T::narrow(((i * 7919) % 1000) as f32 / 997.0 - 0.5)).collect();
    for start in [0usize, 1] {
        let dout = &data[start..start + rows * cols];
        let mut packed = vec![0.0f32; chunks * cols];
        T::column_partials_cpu(&executor, dout, &mut packed, rows as u32, cols as u32).unwrap();
        let mut reference = vec![0.0f32; chunks * cols];
        for (k, chunk) in reference.chunks_mut(cols).enumerate() {
            for (c, value) in chunk.iter_mut().enumerate() {
                let first = k * ROWS_PER_CHUNK as usize;
                for r in first..(first + ROWS_PER_CHUNK as usize).min(rows) {
                    *value += dout[r * cols + c].widen();
                }
            }
        }
        assert_eq!(packed, reference, "partials, view at {start} (in-order sums: the same bits)");
        let config = sum_split_grid(cols).expect("40 columns take the warp-per-4-columns sum");
        let mut split = vec![0.0f32; cols];
        gpt2_kernels::sum_partials_split::launch_cpu(&executor, config, &packed, &mut split, chunks as u32).unwrap();
        let mut plain = vec![0.0f32; cols];
        gpt2_kernels::sum_partials::launch_cpu(&executor, grid(cols), &packed, &mut plain, chunks as u32).unwrap();
        for (c, (a, b)) in split.iter().zip(&plain).enumerate() {
            assert!((a - b).abs() <= 1e-5 * b.abs().max(1.0), "column {c}: split {a} vs plain {b}");
        }
    }
}

#[test]
fn bias_partials_are_in_order_sums_and_the_split_sum_agrees() {
    check_bias_partials::<f32>();
    check_bias_partials::<half::bf16>();
}
