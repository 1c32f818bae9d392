//! The kernels of `my-kernels` on the CPU executor: no GPU needed, so these run everywhere.

use ferrocuda::LaunchConfig;
use ferrocuda::cpu::CpuExecutor;
use my_kernels::{Affine, BLOCK, affine, block_sums};

#[test]
fn affine_scales_and_offsets_every_element() {
    let n = 1000; // not a multiple of the block: the bounds check matters
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let mut y = vec![-1.0f32; n];
    let p = Affine { scale: 2.0, offset: 1.0 };
    affine::launch_cpu(&CpuExecutor::new(), LaunchConfig::for_elements(n, BLOCK), p, &x, &mut y).unwrap();
    for (i, &v) in y.iter().enumerate() {
        assert_eq!(v, 2.0 * i as f32 + 1.0, "y[{i}]");
    }
}

#[test]
fn block_sums_reduce_each_block_through_shared_memory() {
    let n = 1000;
    let x: Vec<f32> = (0..n).map(|i| (i % 10) as f32).collect();
    let grid = (n as u32).div_ceil(BLOCK);
    let mut sums = vec![0.0f32; grid as usize];
    block_sums::launch_cpu(&CpuExecutor::new(), (grid, BLOCK), &x, &mut sums).unwrap();
    for (b, &sum) in sums.iter().enumerate() {
        let want: f32 = x.iter().skip(b * BLOCK as usize).take(BLOCK as usize).sum();
        assert_eq!(sum, want, "block {b}");
    }
}
