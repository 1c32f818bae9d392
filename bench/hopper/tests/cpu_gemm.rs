//! The Hopper GEMM and the TMA round trip run by the CPU executor, with the Hopper
//! instructions emulated (`ferrocuda_device::hopper::emu`): the pipeline's phases, stage
//! indices, descriptors' K steps through the 128-byte swizzle, the fragment layout and the
//! epilogue's indexing, checked against a host reference without a GPU.

use ferrocuda_device::cpu::CpuExecutor;
use ferrocuda_device::half::bf16;
use ferrocuda_device::tma::TensorMap as DeviceMap;
use ferrocuda_host::{LaunchConfig, TensorDataType, TensorMap, TensorSwizzle, TiledLayout};
use hopper_kernels::gemm::{BK, BM, BN, COPY_TILE, SHARED_BYTES, THREADS, gemm_body, tma_copy_body};

fn random_bf16(len: usize, mut seed: u64) -> Vec<bf16> {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            bf16::from_f32(((seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0)
        })
        .collect()
}

/// A tensor map the executor understands, 64-byte aligned as on the GPU.
fn map(address: u64, rows: u64, cols: u64, box_rows: u32, box_cols: u32, swizzle: TensorSwizzle) -> Box<DeviceMap> {
    let layout = TiledLayout { data_type: TensorDataType::Bf16, dims: &[cols, rows], strides_bytes: &[cols * 2], box_dims: &[box_cols, box_rows], swizzle };
    Box::new(DeviceMap(TensorMap::emulated(address, &layout).unwrap().words()))
}

/// Asserts every element of `c` (M x N bf16, two per `u32`) against the f64 reference
/// `A · Bᵀ` within `|ref| / 2^8 + Σ|a·b| / 2^16` (bf16 output rounding plus f32
/// accumulation); returns the worst error / bound.
fn assert_c_matches(a: &[bf16], b: &[bf16], c: &[u32], m: u32, n: u32, k: u32, what: &str) -> f64 {
    let mut worst = 0.0f64;
    for i in 0..m as usize {
        for j in 0..n as usize {
            let (mut exact, mut magnitude) = (0.0f64, 0.0f64);
            for kk in 0..k as usize {
                let p = a[i * k as usize + kk].to_f32() as f64 * b[j * k as usize + kk].to_f32() as f64;
                exact += p;
                magnitude += p.abs();
            }
            let pair = c[(i * n as usize + j) / 2];
            let got = bf16::from_bits(if j % 2 == 0 { pair as u16 } else { (pair >> 16) as u16 }).to_f32() as f64;
            let bound = exact.abs() / 256.0 + magnitude / 65536.0;
            assert!((got - exact).abs() <= bound, "C[{i}][{j}] = {got}, expected {exact} (bound {bound}); {what}");
            worst = worst.max((got - exact).abs() / bound);
        }
    }
    worst
}

fn check_gemm(overlap: bool, m: u32, n: u32, k: u32, grid: u32) {
    let a = random_bf16((m * k) as usize, 0x1234 + m as u64);
    let b = random_bf16((n * k) as usize, 0x9876 + n as u64);
    let mut c = vec![0x7fc1_7fc1u32; (m * n / 2) as usize];
    let a_map = map(a.as_ptr() as u64, m as u64, k as u64, BM, BK, TensorSwizzle::B128);
    let b_map = map(b.as_ptr() as u64, n as u64, k as u64, BN, BK, TensorSwizzle::B128);
    let (pa, pb, pc) = (&*a_map as *const DeviceMap as usize, &*b_map as *const DeviceMap as usize, c.as_mut_ptr() as usize);
    let config = LaunchConfig::new(grid, THREADS).with_shared_bytes(SHARED_BYTES);
    let body = || {
        // SAFETY: the maps describe `a` and `b` with the kernel's boxes and swizzle, `c` holds
        // m*n bf16, the shape is a multiple of the tile; all live until `run` returns.
        unsafe {
            if overlap {
                gemm_body::<true, true>(pa as *const DeviceMap, pb as *const DeviceMap, pc as *mut u32, m, n, k)
            } else {
                gemm_body::<false, true>(pa as *const DeviceMap, pb as *const DeviceMap, pc as *mut u32, m, n, k)
            }
        }
    };
    CpuExecutor::new().with_race_detection(false).run("gemm_bf16_tn", config, &body).unwrap();
    let worst = assert_c_matches(&a, &b, &c, m, n, k, &format!("overlap {overlap}"));
    eprintln!("{m}x{n}x{k} on {grid} blocks (overlap {overlap}): every element within the bound, worst error/bound {worst:.3}");
}

/// 4 tiles on 3 persistent blocks (block 0 takes two), 3 K steps per tile so the 4-stage
/// ring wraps across tiles: both variants.
#[test]
fn cpu_gemm_matches_the_host_reference() {
    check_gemm(true, 2 * BM, 2 * BN, 3 * BK, 3);
    check_gemm(false, 2 * BM, 2 * BN, 3 * BK, 3);
}

#[test]
fn cpu_tma_round_trip_is_exact() {
    let (rows, cols) = (128u32, 192u32);
    let input = random_bf16((rows * cols) as usize, 42);
    let mut out = vec![0xffff_ffffu32; (rows * cols / 2) as usize];
    let map = map(input.as_ptr() as u64, rows as u64, cols as u64, COPY_TILE, COPY_TILE, TensorSwizzle::None);
    let (pm, po) = (&*map as *const DeviceMap as usize, out.as_mut_ptr() as usize);
    let config = LaunchConfig::new((cols / COPY_TILE, rows / COPY_TILE), 128).with_shared_bytes(COPY_TILE * COPY_TILE * 2 + 8 + 1024);
    // SAFETY: the map describes `input`; `out` holds the whole array; the grid covers it.
    let body = || unsafe { tma_copy_body(pm as *const DeviceMap, po as *mut u32, cols) };
    CpuExecutor::new().run("tma_copy_tile", config, &body).unwrap();
    let got: Vec<u16> = out.iter().flat_map(|w| [*w as u16, (*w >> 16) as u16]).collect();
    let want: Vec<u16> = input.iter().map(|x| x.to_bits()).collect();
    assert!(got == want, "the round trip changed {} elements", got.iter().zip(&want).filter(|(a, b)| a != b).count());
}

/// One warpgroup, one `wgmma` m64n64k16 with A from shared memory and one with A from
/// registers, operands stored by the threads at `Descriptor::swizzled_128b_address`: both
/// equal the exact product (quarter-integer inputs: every sum is exact in f32).
#[test]
fn cpu_wgmma_tile_ss_and_rs_are_exact() {
    use hopper_kernels::probes::{WGMMA_TILE_SHARED_BYTES, wgmma_tile_body};
    let mut seed = 99u64;
    let mut next = || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        bf16::from_f32(((seed >> 60) as f32 - 8.0) / 4.0).to_bits()
    };
    let a: Vec<u16> = (0..64 * 16).map(|_| next()).collect();
    let b: Vec<u16> = (0..64 * 16).map(|_| next()).collect();
    let mut ss = vec![f32::NAN; 64 * 64];
    let mut rs = vec![f32::NAN; 64 * 64];
    let (pa, pb, pss, prs) = (a.as_ptr() as usize, b.as_ptr() as usize, ss.as_mut_ptr() as usize, rs.as_mut_ptr() as usize);
    // SAFETY: the vectors have the sizes the body needs and outlive `run`.
    let body = || unsafe { wgmma_tile_body(pa as *const u16, pb as *const u16, pss as *mut f32, prs as *mut f32) };
    CpuExecutor::new().run("probe_wgmma_tile", LaunchConfig::new(1u32, 128u32).with_shared_bytes(WGMMA_TILE_SHARED_BYTES), &body).unwrap();
    let f = |bits: u16| bf16::from_bits(bits).to_f32();
    for i in 0..64 {
        for j in 0..64 {
            let expected: f32 = (0..16).map(|k| f(a[i * 16 + k]) * f(b[j * 16 + k])).sum();
            assert_eq!(ss[i * 64 + j], expected, "SS C[{i}][{j}]");
            assert_eq!(rs[i * 64 + j], expected, "RS C[{i}][{j}]");
        }
    }
}

/// The cluster variant: clusters of 2 blocks sharing B through multicast TMA loads, remote
/// arrivals on the peer's "empty" barriers, a final cluster barrier. 4 tile pairs on 2
/// persistent clusters (each takes two), 3 K steps per tile.
#[test]
fn cpu_cluster_gemm_matches_the_host_reference() {
    use hopper_kernels::gemm::gemm_cluster_body;
    let (m, n, k) = (4 * BM, 2 * BN, 3 * BK);
    let a = random_bf16((m * k) as usize, 0x5555);
    let b = random_bf16((n * k) as usize, 0x7777);
    let mut c = vec![0x7fc1_7fc1u32; (m * n / 2) as usize];
    let a_map = map(a.as_ptr() as u64, m as u64, k as u64, BM, BK, TensorSwizzle::B128);
    let b_map = map(b.as_ptr() as u64, n as u64, k as u64, BN / 2, BK, TensorSwizzle::B128);
    let (pa, pb, pc) = (&*a_map as *const DeviceMap as usize, &*b_map as *const DeviceMap as usize, c.as_mut_ptr() as usize);
    let config = LaunchConfig::new(4u32, THREADS).with_shared_bytes(SHARED_BYTES).with_cluster(2u32);
    // SAFETY: as in `check_gemm`, with the half-height B box the cluster variant needs.
    let body = || unsafe { gemm_cluster_body::<true>(pa as *const DeviceMap, pb as *const DeviceMap, pc as *mut u32, m, n, k) };
    CpuExecutor::new().with_race_detection(false).run("gemm_bf16_tn_cluster", config, &body).unwrap();
    assert_c_matches(&a, &b, &c, m, n, k, "cluster");
}

/// `probe_ldmatrix`'s body: `stmatrix` then `ldmatrix` (x4) at the same row addresses give
/// every lane its registers back.
#[test]
fn cpu_ldmatrix_probe_round_trips_the_fragments() {
    use hopper_kernels::probes::ldmatrix_body;
    let mut out = vec![u32::MAX; 128];
    let po = out.as_mut_ptr() as usize;
    // SAFETY: one warp, 512 bytes of shared memory, `out` holds 128 `u32` and outlives `run`.
    let body = || unsafe { ldmatrix_body(po as *mut u32) };
    CpuExecutor::new().run("probe_ldmatrix", LaunchConfig::new(1u32, 32u32).with_shared_bytes(512), &body).unwrap();
    for lane in 0..32u32 {
        for j in 0..4u32 {
            assert_eq!(out[(4 * lane + j) as usize], lane + 32 * j, "lane {lane} register {j}");
        }
    }
}
