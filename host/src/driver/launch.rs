//! Kernel launches.
//!
//! Reference: <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__EXEC.html>.

use super::entries;
#[allow(unused_imports)]
use super::prelude::*;

entries! {
    launch_kernel = cuLaunchKernel(f: sys::CUfunction, grid_dim_x: c_uint, grid_dim_y: c_uint, grid_dim_z: c_uint, block_dim_x: c_uint, block_dim_y: c_uint, block_dim_z: c_uint, shared_mem_bytes: c_uint, h_stream: sys::CUstream, kernel_params: *mut *mut c_void, extra: *mut *mut c_void);
    launch_kernel_ex = cuLaunchKernelEx(config: *const sys::CUlaunchConfig, f: sys::CUfunction, kernel_params: *mut *mut c_void, extra: *mut *mut c_void);
}
