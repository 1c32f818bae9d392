//! CPU-executor timings: saxpy on 1M elements and a 256 x 256 tiled matrix product, each run
//! on the parallel executor (one worker per core) and the deterministic one, checked against a
//! plain CPU reference. `cargo run --release --example cpu_executor_bench`.

use std::time::{Duration, Instant};

use ferrocuda_device::cpu::{CpuExecutor, LaunchConfig};
use gpu_kernels::saxpy;
use test_kernels::cpu_examples::{TILE, matmul_tiled};

/// Best of `runs` timings of `body` (after one warm-up run).
fn best_of(runs: usize, mut body: impl FnMut()) -> Duration {
    body();
    (0..runs)
        .map(|_| {
            let start = Instant::now();
            body();
            start.elapsed()
        })
        .min()
        .expect("at least one run")
}

fn saxpy_case(executor: &CpuExecutor) -> Duration {
    const N: usize = 1 << 20;
    let x: Vec<f32> = (0..N).map(|i| (i % 1000) as f32 * 0.5).collect();
    let y0: Vec<f32> = (0..N).map(|i| (i % 7) as f32 - 3.0).collect();
    let mut y = y0.clone();
    let time = best_of(3, || {
        y.copy_from_slice(&y0);
        saxpy::launch_cpu(executor, LaunchConfig::for_elements(N, 256), 2.5, &x, &mut y).expect("saxpy on the CPU executor");
    });
    let wrong = (0..N).filter(|&i| y[i] != 2.5 * x[i] + y0[i]).count();
    assert_eq!(wrong, 0, "saxpy: {wrong} wrong elements");
    time
}

fn matmul_case(executor: &CpuExecutor) -> Duration {
    const N: usize = 256;
    let a: Vec<f32> = (0..N * N).map(|i| ((i * 7) % 13) as f32 * 0.25 - 1.5).collect();
    let b: Vec<f32> = (0..N * N).map(|i| ((i * 5) % 11) as f32 * 0.5 - 2.0).collect();
    let mut c = vec![0.0f32; N * N];
    let grid = (N.div_ceil(TILE) as u32, N.div_ceil(TILE) as u32);
    let time = best_of(3, || {
        matmul_tiled::launch_cpu(executor, (grid, (TILE as u32, TILE as u32)), N as u32, &a, &b, &mut c).expect("matmul on the CPU executor");
    });
    for row in 0..N {
        for col in 0..N {
            let expected: f32 = (0..N).map(|k| a[row * N + k] * b[k * N + col]).sum();
            assert!((c[row * N + col] - expected).abs() <= 1e-3 * expected.abs().max(1.0), "matmul ({row}, {col}): {} vs {expected}", c[row * N + col]);
        }
    }
    time
}

fn main() {
    let parallel = CpuExecutor::new();
    let deterministic = CpuExecutor::deterministic();
    let no_races = CpuExecutor::new().with_race_detection(false);
    println!("CPU executor, {} cores available", parallel.workers());
    println!("{:<28} {:>12} {:>16} {:>22}", "case", "parallel", "deterministic", "parallel, no race check");
    let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1e3);
    println!("{:<28} {:>12} {:>16} {:>22}", "saxpy, 1M elements", ms(saxpy_case(&parallel)), ms(saxpy_case(&deterministic)), ms(saxpy_case(&no_races)));
    println!(
        "{:<28} {:>12} {:>16} {:>22}",
        "matmul 256x256, 16x16 tiles",
        ms(matmul_case(&parallel)),
        ms(matmul_case(&deterministic)),
        ms(matmul_case(&no_races))
    );
}
