//! Kernels as functions: attributes, parameter info, occupancy.
//!
//! Reference: <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__EXEC.html>, <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__OCCUPANCY.html>.

use super::entries;
#[allow(unused_imports)]
use super::prelude::*;

entries! {
    get_attribute = cuFuncGetAttribute(pi: *mut c_int, attrib: sys::CUfunction_attribute, hfunc: sys::CUfunction);
    get_name = cuFuncGetName(name: *mut *const c_char, hfunc: sys::CUfunction);
    load = cuFuncLoad(function: sys::CUfunction);
    get_param_info = cuFuncGetParamInfo(func: sys::CUfunction, param_index: usize, param_offset: *mut usize, param_size: *mut usize);
    set_attribute = cuFuncSetAttribute(hfunc: sys::CUfunction, attrib: sys::CUfunction_attribute, value: c_int);
    set_cache_config = cuFuncSetCacheConfig(hfunc: sys::CUfunction, config: sys::CUfunc_cache);
    occupancy_max_active_blocks_per_multiprocessor = cuOccupancyMaxActiveBlocksPerMultiprocessor(num_blocks: *mut c_int, func: sys::CUfunction, block_size: c_int, dynamic_smem_size: usize);
    occupancy_max_potential_block_size = cuOccupancyMaxPotentialBlockSize(min_grid_size: *mut c_int, block_size: *mut c_int, func: sys::CUfunction, block_size_to_dynamic_smem_size: sys::CUoccupancyB2DSize, dynamic_smem_size: usize, block_size_limit: c_int);
}
