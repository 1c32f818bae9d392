//! `tma_copy_boxes` (a `#[kernel]` with `&TensorMap` parameters) on the CPU executor, with
//! emulated maps over host arrays: the generated CPU launcher passes the maps through (it is
//! `unsafe`: an emulated map holds a raw host address), and the kernel copies every box.

use ferrocuda_device::cpu::CpuExecutor;
use ferrocuda_device::tma::{StoreMap, TensorMap as DeviceMap};
use ferrocuda_host::{LaunchConfig, TensorDataType, TensorMap, TensorSwizzle, TiledLayout};
use hopper_kernels::tracked::{TRACKED_BOX, TRACKED_SHARED_BYTES, tma_copy_boxes};

fn map_of(array: &mut [u32]) -> Box<DeviceMap> {
    let layout =
        TiledLayout { data_type: TensorDataType::U32, dims: &[array.len() as u64], strides_bytes: &[], box_dims: &[TRACKED_BOX], swizzle: TensorSwizzle::None };
    Box::new(DeviceMap(TensorMap::emulated(array.as_mut_ptr() as u64, &layout).unwrap().words()))
}

#[test]
fn cpu_tma_copy_boxes_copies_every_box_through_tensor_map_parameters() {
    let boxes = 4u32;
    let mut src: Vec<u32> = (0..boxes * TRACKED_BOX).map(|i| i * 3 + 1).collect();
    let mut dst = vec![0u32; src.len()];
    let (src_map, dst_map) = (map_of(&mut src), map_of(&mut dst));
    let config = LaunchConfig::new(boxes, 128u32).with_shared_bytes(TRACKED_SHARED_BYTES);
    // SAFETY: the maps describe `src` and `dst` (alive until the launch returns; `dst` is
    // touched by nothing else meanwhile), each with a box of TRACKED_BOX u32s.
    unsafe { tma_copy_boxes::launch_cpu(&CpuExecutor::new(), config, &src_map, &StoreMap(*dst_map), 0) }.unwrap();
    drop((src_map, dst_map));
    assert_eq!(dst, src);
}
