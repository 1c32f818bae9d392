//! The kernels of `my-kernels` on the CPU executor: no GPU needed, so these run everywhere.

use ferrocuda::LaunchConfig;
use ferrocuda::cpu::CpuExecutor;
use my_kernels::{Affine, BLOCK, affine, block_sums, gelu};

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

#[test]
fn gelu_matches_the_tanh_formula() {
    let n = 1000;
    let x: Vec<f32> = (0..n).map(|i| (i as f32 - 500.0) / 100.0).collect();
    let mut y = vec![0.0f32; n];
    gelu::launch_cpu(&CpuExecutor::new(), LaunchConfig::for_elements(n, BLOCK), &x, &mut y).unwrap();
    for (i, (&v, &got)) in x.iter().zip(&y).enumerate() {
        let want = 0.5 * v * (1.0 + (0.797_884_6 * (v + 0.044_715 * v * v * v)).tanh());
        // tanh.approx's absolute error (~2^-11) scaled by 0.5·|x| on the GPU; exact on the CPU.
        assert!((got - want).abs() <= 0.5 * v.abs() / 1024.0 + 1e-6, "y[{i}] = {got}, want {want}");
    }
}
