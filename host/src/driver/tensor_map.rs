//! Tensor maps for the TMA copy engine (sm_90).
//!
//! Reference: <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TENSOR__MEMORY.html>.

use super::entries;
#[allow(unused_imports)]
use super::prelude::*;

entries! {
    encode_tiled = cuTensorMapEncodeTiled(
        tensor_map: *mut sys::CUtensorMap,
        data_type: sys::CUtensorMapDataType,
        rank: c_uint,
        global_address: *mut c_void,
        global_dim: *const u64,
        global_strides: *const u64,
        box_dim: *const u32,
        element_strides: *const u32,
        interleave: sys::CUtensorMapInterleave,
        swizzle: sys::CUtensorMapSwizzle,
        l2_promotion: sys::CUtensorMapL2promotion,
        oob_fill: sys::CUtensorMapFloatOOBfill,
    );
}
