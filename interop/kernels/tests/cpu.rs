//! The interop kernels on the CPU executor (the same Rust source the GPU runs), against plain
//! host references.

use ferrocuda_device::cpu::CpuExecutor;
use interop_kernels::{rms_norm, rows_config, saxpy, softmax};

/// Deterministic values in [-2, 2).
fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n).map(|i| (((i as u32).wrapping_mul(2654435761).wrapping_add(seed) >> 8) % 4096) as f32 / 1024.0 - 2.0).collect()
}

fn close(a: f32, b: f32, tolerance: f32) -> bool {
    (a - b).abs() <= tolerance * (1.0 + b.abs())
}

#[test]
fn saxpy_matches_the_reference() {
    let (x, y0) = (values(1000, 1), values(1000, 2));
    let mut y = y0.clone();
    saxpy::launch_cpu(&CpuExecutor::new(), ferrocuda_host::LaunchConfig::for_elements(1000, 128), 1.5, &x, &mut y).unwrap();
    for i in 0..1000 {
        assert!(close(y[i], 1.5f32.mul_add(x[i], y0[i]), 0.0), "y[{i}] = {}", y[i]);
    }
}

/// Widths below, at and above a warp, and not multiples of 32; more rows than one block has.
#[test]
fn rms_norm_and_softmax_match_the_references_for_odd_widths() {
    let executor = CpuExecutor::new();
    for (rows, cols) in [(1, 1), (3, 31), (9, 32), (17, 100), (2, 1000), (3, 2053)] {
        let x = values(rows * cols, cols as u32);
        let weight = values(cols, 7);
        let mut out = vec![f32::NAN; rows * cols];
        rms_norm::launch_cpu(&executor, rows_config(rows), &x, &weight, &mut out, rows as u32, 1e-6).unwrap();
        for r in 0..rows {
            let row = &x[r * cols..(r + 1) * cols];
            let scale = 1.0 / (row.iter().map(|v| v * v).sum::<f32>() / cols as f32 + 1e-6).sqrt();
            for c in 0..cols {
                let expected = row[c] * scale * weight[c];
                assert!(close(out[r * cols + c], expected, 1e-5), "rms_norm {rows}x{cols} [{r}][{c}]: {} vs {expected}", out[r * cols + c]);
            }
        }
        let mut out = vec![f32::NAN; rows * cols];
        softmax::launch_cpu(&executor, rows_config(rows), &x, &mut out, rows as u32, cols as u32).unwrap();
        for r in 0..rows {
            let row = &x[r * cols..(r + 1) * cols];
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let sum: f32 = row.iter().map(|v| (v - max).exp()).sum();
            for c in 0..cols {
                let expected = (row[c] - max).exp() / sum;
                assert!(close(out[r * cols + c], expected, 1e-5), "softmax {rows}x{cols} [{r}][{c}]: {} vs {expected}", out[r * cols + c]);
            }
        }
    }
}

/// A row count larger than the buffers hold writes nothing past them (the kernels check the
/// extent of every row before touching it).
#[test]
fn rows_past_the_buffers_are_left_alone() {
    let (rows, cols) = (4, 40);
    let x = values(rows * cols, 3);
    let mut out = vec![-7.0f32; (rows - 1) * cols];
    softmax::launch_cpu(&CpuExecutor::new(), rows_config(rows), &x, &mut out, rows as u32, cols as u32).unwrap();
    let sums: Vec<f32> = out.chunks(cols).map(|row| row.iter().sum()).collect();
    assert!(sums.iter().all(|s| close(*s, 1.0, 1e-5)), "{sums:?}");
}
