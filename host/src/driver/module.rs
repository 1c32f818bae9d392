//! Modules: loading images, looking up kernels and globals, unloading.
//!
//! Reference: <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MODULE.html>.

use super::entries;
#[allow(unused_imports)]
use super::prelude::*;

entries! {
    enumerate_functions = cuModuleEnumerateFunctions(functions: *mut sys::CUfunction, num_functions: c_uint, hmod: sys::CUmodule);
    function_count = cuModuleGetFunctionCount(count: *mut c_uint, hmod: sys::CUmodule);
    get_function = cuModuleGetFunction(hfunc: *mut sys::CUfunction, hmod: sys::CUmodule, name: *const c_char);
    get_global = cuModuleGetGlobal_v2(dptr: *mut sys::CUdeviceptr, bytes: *mut usize, hmod: sys::CUmodule, name: *const c_char);
    load_data_ex = cuModuleLoadDataEx(module: *mut sys::CUmodule, image: *const c_void, num_options: c_uint, options: *mut sys::CUjit_option, option_values: *mut *mut c_void);
    unload = cuModuleUnload(hmod: sys::CUmodule);
}
