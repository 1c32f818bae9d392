//! A 256³ bf16 GEMM on `mma.sync.m16n8k16` run by the CPU executor: the check that used to take
//! 14-33 s with 192 warp shuffles per emulated `mma` (issue 13); now two warp syncs per `mma`.

use std::time::Instant;

use ferrocuda_device::cpu::CpuExecutor;
use ferrocuda_device::half::bf16;
use ferrocuda_device::mma;
use ferrocuda_device::thread::{block_idx_x, block_idx_y, thread_idx_x};
use ferrocuda_host::LaunchConfig;

/// One warp per 16x8 tile of C: `C = A·B`, A row-major n x n, B row-major n x n.
fn tile_kernel(a: &[u16], b: &[u16], c: &mut [f32], n: usize) {
    let lane = thread_idx_x();
    let (row0, col0) = (16 * block_idx_y() as usize, 8 * block_idx_x() as usize);
    let mut acc = [0.0f32; 4];
    for k0 in (0..n).step_by(16) {
        let fa = mma::load_a(&a[row0 * n + k0..], n, lane);
        let fb = mma::load_b(&b[k0 * n + col0..], n, lane);
        // SAFETY: every lane of the warp (the block is one warp) runs this loop together.
        acc = unsafe { mma::m16n8k16_bf16(fa, fb, acc) };
    }
    mma::store_d(&mut c[row0 * n + col0..], n, lane, acc);
}

#[test]
fn cpu_mma_gemm_256_checks_in_seconds() {
    let n = 256usize;
    let mut seed = 7u64;
    let mut next = || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        // Small multiples of 1/4: exact in bf16 and in every f32 partial sum.
        bf16::from_f32(((seed >> 59) as f32 - 16.0) / 4.0).to_bits()
    };
    let a: Vec<u16> = (0..n * n).map(|_| next()).collect();
    let b: Vec<u16> = (0..n * n).map(|_| next()).collect();
    let mut c = vec![f32::NAN; n * n];
    let (pa, pb, pc) = (a.as_ptr() as usize, b.as_ptr() as usize, c.as_mut_ptr() as usize);
    let body = || {
        // SAFETY: the three vectors outlive `run`; each warp writes only its own C tile, and the
        // executor runs a block's threads one at a time.
        let (a, b, c) = unsafe {
            (
                std::slice::from_raw_parts(pa as *const u16, n * n),
                std::slice::from_raw_parts(pb as *const u16, n * n),
                std::slice::from_raw_parts_mut(pc as *mut f32, n * n),
            )
        };
        tile_kernel(a, b, c, n);
    };
    let start = Instant::now();
    CpuExecutor::new().run("mma_gemm_256", LaunchConfig::new(((n / 8) as u32, (n / 16) as u32), 32u32), &body).unwrap();
    let seconds = start.elapsed().as_secs_f64();
    let f = |bits: u16| bf16::from_bits(bits).to_f32();
    for i in 0..n {
        for j in 0..n {
            let expected: f32 = (0..n).map(|k| f(a[i * n + k]) * f(b[k * n + j])).sum();
            assert_eq!(c[i * n + j], expected, "C[{i}][{j}]");
        }
    }
    eprintln!("256^3 mma.sync GEMM on the CPU executor: {seconds:.2} s");
    assert!(seconds < 60.0, "{seconds:.1} s: the mma emulation regressed");
}
