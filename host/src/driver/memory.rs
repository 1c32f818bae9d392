//! Device, host and stream-ordered memory: allocation, copies, memsets, pools.
//!
//! Reference: <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MEM.html>, <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MALLOC__ASYNC.html>.

use super::entries;
#[allow(unused_imports)]
use super::prelude::*;

entries! {
    alloc_async = cuMemAllocAsync(dptr: *mut sys::CUdeviceptr, bytesize: usize, h_stream: sys::CUstream);
    alloc = cuMemAlloc_v2(dptr: *mut sys::CUdeviceptr, bytesize: usize);
    free_async = cuMemFreeAsync(dptr: sys::CUdeviceptr, h_stream: sys::CUstream);
    free_host = cuMemFreeHost(p: *mut c_void);
    free = cuMemFree_v2(dptr: sys::CUdeviceptr);
    get_info = cuMemGetInfo_v2(free: *mut usize, total: *mut usize);
    host_alloc = cuMemHostAlloc(pp: *mut *mut c_void, bytesize: usize, flags: c_uint);
    host_get_device_pointer = cuMemHostGetDevicePointer_v2(pdptr: *mut sys::CUdeviceptr, p: *mut c_void, flags: c_uint);
    pointer_get_attribute = cuPointerGetAttribute(data: *mut c_void, attribute: sys::CUpointer_attribute, ptr: sys::CUdeviceptr);
    pool_set_access = cuMemPoolSetAccess(pool: sys::CUmemoryPool, map: *const sys::CUmemAccessDesc, count: usize);
    memcpy_dtod_async = cuMemcpyDtoDAsync_v2(dst_device: sys::CUdeviceptr, src_device: sys::CUdeviceptr, byte_count: usize, h_stream: sys::CUstream);
    memcpy_dtod = cuMemcpyDtoD_v2(dst_device: sys::CUdeviceptr, src_device: sys::CUdeviceptr, byte_count: usize);
    memcpy_dtoh_async = cuMemcpyDtoHAsync_v2(dst_host: *mut c_void, src_device: sys::CUdeviceptr, byte_count: usize, h_stream: sys::CUstream);
    memcpy_dtoh = cuMemcpyDtoH_v2(dst_host: *mut c_void, src_device: sys::CUdeviceptr, byte_count: usize);
    memcpy_htod_async = cuMemcpyHtoDAsync_v2(dst_device: sys::CUdeviceptr, src_host: *const c_void, byte_count: usize, h_stream: sys::CUstream);
    memcpy_htod = cuMemcpyHtoD_v2(dst_device: sys::CUdeviceptr, src_host: *const c_void, byte_count: usize);
    memcpy_peer = cuMemcpyPeer(dst_device: sys::CUdeviceptr, dst_context: sys::CUcontext, src_device: sys::CUdeviceptr, src_context: sys::CUcontext, byte_count: usize);
    memcpy_peer_async = cuMemcpyPeerAsync(dst_device: sys::CUdeviceptr, dst_context: sys::CUcontext, src_device: sys::CUdeviceptr, src_context: sys::CUcontext, byte_count: usize, h_stream: sys::CUstream);
    memset_d16_async = cuMemsetD16Async(dst_device: sys::CUdeviceptr, us: c_ushort, n: usize, h_stream: sys::CUstream);
    memset_d16 = cuMemsetD16_v2(dst_device: sys::CUdeviceptr, us: c_ushort, n: usize);
    memset_d32_async = cuMemsetD32Async(dst_device: sys::CUdeviceptr, ui: c_uint, n: usize, h_stream: sys::CUstream);
    memset_d2d32_async = cuMemsetD2D32Async(dst_device: sys::CUdeviceptr, dst_pitch: usize, ui: c_uint, width: usize, height: usize, h_stream: sys::CUstream);
    memset_d32 = cuMemsetD32_v2(dst_device: sys::CUdeviceptr, ui: c_uint, n: usize);
    memset_d8_async = cuMemsetD8Async(dst_device: sys::CUdeviceptr, uc: c_uchar, n: usize, h_stream: sys::CUstream);
    memset_d8 = cuMemsetD8_v2(dst_device: sys::CUdeviceptr, uc: c_uchar, n: usize);
}
