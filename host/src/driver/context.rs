//! Contexts: primary contexts, created contexts, the per-thread current context, limits, peer access.
//!
//! Reference: <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__CTX.html>, <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__PRIMARY__CTX.html>.

use super::entries;
#[allow(unused_imports)]
use super::prelude::*;

entries! {
    create = cuCtxCreate_v4(pctx: *mut sys::CUcontext, ctx_create_params: *mut sys::CUctxCreateParams, flags: c_uint, dev: sys::CUdevice);
    destroy = cuCtxDestroy_v2(ctx: sys::CUcontext);
    enable_peer_access = cuCtxEnablePeerAccess(peer_context: sys::CUcontext, flags: c_uint);
    get_current = cuCtxGetCurrent(pctx: *mut sys::CUcontext);
    get_device = cuCtxGetDevice(device: *mut sys::CUdevice);
    get_flags = cuCtxGetFlags(flags: *mut c_uint);
    get_limit = cuCtxGetLimit(pvalue: *mut usize, limit: sys::CUlimit);
    get_stream_priority_range = cuCtxGetStreamPriorityRange(least_priority: *mut c_int, greatest_priority: *mut c_int);
    pop_current = cuCtxPopCurrent_v2(pctx: *mut sys::CUcontext);
    push_current = cuCtxPushCurrent_v2(ctx: sys::CUcontext);
    set_current = cuCtxSetCurrent(ctx: sys::CUcontext);
    set_limit = cuCtxSetLimit(limit: sys::CUlimit, value: usize);
    synchronize = cuCtxSynchronize();
    primary_get_state = cuDevicePrimaryCtxGetState(dev: sys::CUdevice, flags: *mut c_uint, active: *mut c_int);
    primary_release = cuDevicePrimaryCtxRelease_v2(dev: sys::CUdevice);
    primary_reset = cuDevicePrimaryCtxReset_v2(dev: sys::CUdevice);
    primary_retain = cuDevicePrimaryCtxRetain(pctx: *mut sys::CUcontext, dev: sys::CUdevice);
}
