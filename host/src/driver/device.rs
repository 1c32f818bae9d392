//! Devices: enumeration, attributes, peer capability, default memory pools.
//!
//! Reference: <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__DEVICE.html>.

use super::entries;
#[allow(unused_imports)]
use super::prelude::*;

entries! {
    can_access_peer = cuDeviceCanAccessPeer(can_access_peer: *mut c_int, dev: sys::CUdevice, peer_dev: sys::CUdevice);
    get = cuDeviceGet(device: *mut sys::CUdevice, ordinal: c_int);
    get_attribute = cuDeviceGetAttribute(pi: *mut c_int, attrib: sys::CUdevice_attribute, dev: sys::CUdevice);
    get_count = cuDeviceGetCount(count: *mut c_int);
    get_default_mem_pool = cuDeviceGetDefaultMemPool(pool_out: *mut sys::CUmemoryPool, dev: sys::CUdevice);
    get_name = cuDeviceGetName(name: *mut c_char, len: c_int, dev: sys::CUdevice);
    total_mem = cuDeviceTotalMem_v2(bytes: *mut usize, dev: sys::CUdevice);
}
