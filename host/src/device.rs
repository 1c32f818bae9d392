//! Devices: enumeration, names, compute capability, memory and limits.

use std::ffi::CStr;

use cudarc::driver::sys;

use crate::driver;
use crate::error::{Error, Result};
use crate::loader::init;

/// One CUDA device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Device {
    ordinal: usize,
    raw: sys::CUdevice,
}

impl Device {
    /// How many devices the driver sees.
    pub fn count() -> Result<usize> {
        init()?;
        let mut count = 0;
        // SAFETY: writes one int.
        unsafe { driver::device::get_count(&mut count) }?;
        Ok(count as usize)
    }

    /// Device `ordinal` (0 is the first).
    pub fn get(ordinal: usize) -> Result<Self> {
        let count = Self::count()?;
        if ordinal >= count {
            return Err(Error::NoDevice { ordinal, count });
        }
        let mut raw = 0;
        // SAFETY: writes one device handle; the ordinal was checked.
        unsafe { driver::device::get(&mut raw, ordinal as i32) }?;
        Ok(Self { ordinal, raw })
    }

    /// Every device the driver sees, in ordinal order.
    pub fn all() -> Result<Vec<Self>> {
        (0..Self::count()?).map(Self::get).collect()
    }

    /// True when this device can access memory on `peer` directly (`cuDeviceCanAccessPeer`);
    /// always false for the device itself.
    pub fn can_access_peer(&self, peer: &Device) -> Result<bool> {
        if self == peer {
            return Ok(false);
        }
        let mut can = 0;
        // SAFETY: writes one int.
        unsafe { driver::device::can_access_peer(&mut can, self.raw, peer.raw) }?;
        Ok(can != 0)
    }

    /// True when the device supports stream-ordered allocation (`cuMemAllocAsync`).
    pub fn supports_memory_pools(&self) -> Result<bool> {
        Ok(self.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)? != 0)
    }

    /// The ordinal this device was opened with.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// The raw `CUdevice`.
    pub fn raw(&self) -> sys::CUdevice {
        self.raw
    }

    /// The product name, e.g. "NVIDIA H100 80GB HBM3".
    pub fn name(&self) -> Result<String> {
        let mut buffer = [0 as std::ffi::c_char; 256];
        // SAFETY: the driver writes a NUL-terminated string of at most `len` bytes.
        unsafe { driver::device::get_name(buffer.as_mut_ptr(), buffer.len() as i32, self.raw) }?;
        // SAFETY: NUL-terminated by the driver (and the buffer was zeroed).
        Ok(unsafe { CStr::from_ptr(buffer.as_ptr()) }.to_string_lossy().into_owned())
    }

    /// An attribute of the device.
    pub fn attribute(&self, attribute: sys::CUdevice_attribute) -> Result<i32> {
        let mut value = 0;
        // SAFETY: writes one int.
        unsafe { driver::device::get_attribute(&mut value, attribute, self.raw) }?;
        Ok(value)
    }

    /// Compute capability as (major, minor), e.g. (9, 0).
    pub fn compute_capability(&self) -> Result<(u32, u32)> {
        use sys::CUdevice_attribute::*;
        Ok((self.attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)? as u32, self.attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)? as u32))
    }

    /// The architecture number, e.g. 90 for sm_90.
    pub fn arch(&self) -> Result<u32> {
        let (major, minor) = self.compute_capability()?;
        Ok(major * 10 + minor)
    }

    /// Total device memory in bytes.
    pub fn total_memory(&self) -> Result<usize> {
        let mut bytes = 0;
        // SAFETY: writes one size.
        unsafe { driver::device::total_mem(&mut bytes, self.raw) }?;
        Ok(bytes)
    }

    /// Number of streaming multiprocessors.
    pub fn multiprocessor_count(&self) -> Result<u32> {
        Ok(self.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32)
    }

    /// The limits a launch configuration is checked against.
    pub fn launch_limits(&self) -> Result<crate::DeviceLimits> {
        use sys::CUdevice_attribute::*;
        let get = |a| self.attribute(a).map(|v| v as u32);
        Ok(crate::DeviceLimits {
            max_threads_per_block: get(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            max_block: [get(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?, get(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?, get(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?],
            max_grid: [get(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?, get(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?, get(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?],
            max_shared_per_block: get(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
            cluster_launch: get(CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH)? != 0,
            cooperative_launch: get(CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH)? != 0,
        })
    }
}
