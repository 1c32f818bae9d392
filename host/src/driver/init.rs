//! Loading the driver, its version, and the names of its result codes.

use super::entries;
#[allow(unused_imports)]
use super::prelude::*;

entries! {
    driver_get_version = cuDriverGetVersion(driver_version: *mut c_int);
    get_error_name = cuGetErrorName(error: sys::CUresult, p_str: *mut *const c_char);
    get_error_string = cuGetErrorString(error: sys::CUresult, p_str: *mut *const c_char);
    init = cuInit(flags: c_uint);
}
