//! `probe_tma_rank_loads` and `probe_tma_rank_stores` on the CPU executor: TMA loads of ranks
//! 1, 3, 4 and 5 from packed u16 arrays, compared element by element with boxes computed here
//! from the coordinates, and the stores of the same ranks that put each box back into another
//! array (the GPU checks are `hopper-gemm`'s `tma_rank_loads` and `tma_rank_stores`).

use ferrocuda_device::cpu::CpuExecutor;
use ferrocuda_device::tma::TensorMap as DeviceMap;
use ferrocuda_host::{LaunchConfig, TensorDataType, TensorMap, TensorSwizzle, TiledLayout};
use hopper_kernels::probes::{TMA_RANK_LOADS, TMA_RANK_SHARED_BYTES, TMA_RANK_TOTAL_BYTES, tma_rank_loads_body, tma_rank_stores_body, tma_rank_value as value};

/// The four source arrays: array `k` holds `value(k, i)` at linear index `i`.
fn source_arrays() -> Vec<Vec<u16>> {
    TMA_RANK_LOADS.iter().enumerate().map(|(k, load)| (0..load.array_len()).map(|i| value(k, i)).collect()).collect()
}

/// Emulated tensor maps of `TMA_RANK_LOADS` over `arrays` (their addresses are passed, so the
/// vector is not changed afterwards).
/// The arrays are borrowed mutably: a store writes through its map's address.
fn maps_over(arrays: &mut [Vec<u16>]) -> Vec<DeviceMap> {
    TMA_RANK_LOADS
        .iter()
        .zip(arrays)
        .map(|(load, array)| {
            let strides: Vec<u64> = (1..load.dims.len()).map(|d| 2 * load.dims[..d].iter().product::<u64>()).collect();
            let layout =
                TiledLayout { data_type: TensorDataType::U16, dims: load.dims, strides_bytes: &strides, box_dims: load.box_dims, swizzle: TensorSwizzle::None };
            DeviceMap(TensorMap::emulated(array.as_mut_ptr() as u64, &layout).unwrap().words())
        })
        .collect()
}

#[test]
fn cpu_tma_stores_of_rank_1_3_4_5_write_the_box_and_nothing_else() {
    const UNTOUCHED: u16 = 0xffff;
    let mut sources = source_arrays();
    let mut destinations: Vec<Vec<u16>> = sources.iter().map(|a| vec![UNTOUCHED; a.len()]).collect();
    let loads = maps_over(&mut sources);
    let stores = maps_over(&mut destinations);
    let address = |maps: &[DeviceMap]| -> [usize; 4] { [0, 1, 2, 3].map(|k| &maps[k] as *const DeviceMap as usize) };
    let (pl, ps) = (address(&loads), address(&stores));
    let body = || {
        // SAFETY: load map `k` describes `sources[k]`, store map `k` `destinations[k]` (touched
        // by nothing else during `run`), both with load `k`'s shape and box; all outlive `run`.
        unsafe { tma_rank_stores_body(pl.map(|p| p as *const DeviceMap), ps.map(|p| p as *const DeviceMap)) }
    };
    CpuExecutor::new().run("probe_tma_rank_stores", LaunchConfig::new(1u32, 128u32).with_shared_bytes(TMA_RANK_SHARED_BYTES), &body).unwrap();
    for (k, load) in TMA_RANK_LOADS.iter().enumerate() {
        let want: Vec<u16> = (0..sources[k].len()).map(|i| if load.contains(i) { value(k, i) } else { UNTOUCHED }).collect();
        let wrong = destinations[k].iter().zip(&want).filter(|(a, b)| a != b).count();
        assert_eq!(wrong, 0, "rank {}: {wrong} of {} elements differ", load.dims.len(), want.len());
        assert!(destinations[k].iter().any(|&v| v != UNTOUCHED), "rank {}: nothing stored", load.dims.len());
    }
}

#[test]
fn cpu_tma_loads_of_rank_1_3_4_5_are_exact() {
    let mut arrays = source_arrays();
    let maps = maps_over(&mut arrays);
    let mut out = vec![0xffff_ffffu32; TMA_RANK_TOTAL_BYTES as usize / 4];
    let pm: Vec<usize> = maps.iter().map(|m| m as *const DeviceMap as usize).collect();
    let po = out.as_mut_ptr() as usize;
    let body = || {
        let maps = [pm[0], pm[1], pm[2], pm[3]].map(|p| p as *const DeviceMap);
        // SAFETY: map `k` describes `arrays[k]` with load `k`'s shape and box; `out` holds
        // every box; all outlive `run`.
        unsafe { tma_rank_loads_body(maps, po as *mut u32) }
    };
    CpuExecutor::new().run("probe_tma_rank_loads", LaunchConfig::new(1u32, 128u32).with_shared_bytes(TMA_RANK_SHARED_BYTES), &body).unwrap();
    let got: Vec<u16> = out.iter().flat_map(|w| [*w as u16, (*w >> 16) as u16]).collect();
    let mut at = 0;
    for (k, load) in TMA_RANK_LOADS.iter().enumerate() {
        // Element `e` of the box, innermost first.
        let want: Vec<u16> = (0..load.box_len()).map(|e| value(k, load.box_element(e))).collect();
        let have = &got[at..at + want.len()];
        let wrong = have.iter().zip(&want).filter(|(a, b)| a != b).count();
        assert_eq!(wrong, 0, "rank {}: {wrong} of {} elements differ\n got {have:?}\nwant {want:?}", load.dims.len(), want.len());
        at += want.len();
    }
    assert_eq!(at, got.len());
}
