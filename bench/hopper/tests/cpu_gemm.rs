//! `hopper-gemm`'s probes run by the CPU executor, with the Hopper instructions emulated
//! (`ferrocuda_device::hopper::emu`): the TMA round trip, one `wgmma` tile with A from shared
//! memory and from registers, the `ldmatrix` round trip. The GEMM itself is the library's
//! (`ferrocuda_kernels_hopper::gemm`), tested on the executor in
//! `kernels/tests/gemm_sm90_cpu.rs`.

use ferrocuda_device::cpu::CpuExecutor;
use ferrocuda_device::half::bf16;
use ferrocuda_device::tma::TensorMap as DeviceMap;
use ferrocuda_host::{LaunchConfig, TensorDataType, TensorMap, TensorSwizzle, TiledLayout};
use hopper_kernels::tma_probes::{COPY_TILE, tma_copy_body};

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
