//! `probe_tma_store` on the CPU executor: a 64x64 box written to shared memory with the
//! 128-byte swizzle and stored by one TMA store at a corner of an 80x96 array, so the store
//! must undo the swizzle and clip the part outside the array (the GPU check is `hopper-gemm`'s
//! `tma_store_check`).

use ferrocuda_device::cpu::CpuExecutor;
use ferrocuda_device::tma::TensorMap as DeviceMap;
use ferrocuda_host::{LaunchConfig, TensorDataType, TensorMap, TensorSwizzle, TiledLayout};
use hopper_kernels::probes::{TMA_STORE_AT, TMA_STORE_BOX, TMA_STORE_COLS, TMA_STORE_ROWS, TMA_STORE_SHARED_BYTES, tma_store_body, tma_store_value};

const UNTOUCHED: u16 = 0xffff;

/// What the array must hold after the store: the box's values where it overlaps the array,
/// `UNTOUCHED` elsewhere.
fn expected() -> Vec<u16> {
    let (x, y) = (TMA_STORE_AT.0 as u32, TMA_STORE_AT.1 as u32);
    (0..TMA_STORE_ROWS * TMA_STORE_COLS)
        .map(|i| {
            let (row, col) = (i / TMA_STORE_COLS, i % TMA_STORE_COLS);
            let inside = (y..y + TMA_STORE_BOX).contains(&row) && (x..x + TMA_STORE_BOX).contains(&col);
            if inside { tma_store_value(row - y, col - x) } else { UNTOUCHED }
        })
        .collect()
}

#[test]
fn cpu_tma_store_unswizzles_the_box_and_clips_it_at_the_array_edge() {
    let mut array = vec![UNTOUCHED; (TMA_STORE_ROWS * TMA_STORE_COLS) as usize];
    let layout = TiledLayout {
        data_type: TensorDataType::Bf16,
        dims: &[TMA_STORE_COLS as u64, TMA_STORE_ROWS as u64],
        strides_bytes: &[2 * TMA_STORE_COLS as u64],
        box_dims: &[TMA_STORE_BOX, TMA_STORE_BOX],
        swizzle: TensorSwizzle::B128,
    };
    let map = Box::new(DeviceMap(TensorMap::emulated(array.as_mut_ptr() as u64, &layout).unwrap().words()));
    let pm = &*map as *const DeviceMap as usize;
    let body = || {
        // SAFETY: the map describes `array` (alive until `run` returns, touched by nothing
        // else meanwhile) with a 64x64 box and the 128-byte swizzle.
        unsafe { tma_store_body(pm as *const DeviceMap, TMA_STORE_AT.0, TMA_STORE_AT.1) }
    };
    CpuExecutor::new().run("probe_tma_store", LaunchConfig::new(1u32, 128u32).with_shared_bytes(TMA_STORE_SHARED_BYTES), &body).unwrap();
    let want = expected();
    let wrong: Vec<usize> = (0..want.len()).filter(|&i| array[i] != want[i]).collect();
    assert!(
        wrong.is_empty(),
        "{} of {} elements differ; first at row {}, column {}: got {:#06x}, want {:#06x}",
        wrong.len(),
        want.len(),
        wrong[0] / TMA_STORE_COLS as usize,
        wrong[0] % TMA_STORE_COLS as usize,
        array[wrong[0]],
        want[wrong[0]]
    );
    // The store wrote something and clipped something: the check above could fail both ways.
    assert!(array.iter().any(|&v| v != UNTOUCHED) && array.contains(&UNTOUCHED));
}
