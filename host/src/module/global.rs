//! Typed access to a module's global and `__constant__` variables.

use std::marker::PhantomData;

use bytemuck::Pod;
use cudarc::driver::sys;

use crate::driver;
use crate::error::Result;
use crate::module::Module;

/// A typed global variable of a [`Module`]; reads and writes are synchronous copies ordered
/// on the legacy default stream, like [`DeviceBuffer`](crate::DeviceBuffer)'s.
pub struct Global<'m, T> {
    pub(crate) address: sys::CUdeviceptr,
    pub(crate) module: &'m Module,
    pub(crate) _value: PhantomData<T>,
}

impl<T> std::fmt::Debug for Global<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Global").field("address", &format_args!("{:#x}", self.address)).field("type", &std::any::type_name::<T>()).finish()
    }
}

impl<T: Pod> Global<'_, T> {
    /// The current value.
    pub fn read(&self) -> Result<T> {
        self.module.context().bind_to_thread()?;
        let mut value = T::zeroed();
        // SAFETY: the global holds size_of::<T>() bytes (checked at creation); T accepts any bytes.
        unsafe { driver::memory::memcpy_dtoh((&mut value as *mut T).cast(), self.address, std::mem::size_of::<T>()) }?;
        Ok(value)
    }

    /// Sets the value; launches queued after this see it.
    pub fn write(&self, value: &T) -> Result<()> {
        self.module.context().bind_to_thread()?;
        // SAFETY: the global holds size_of::<T>() bytes (checked at creation).
        unsafe { driver::memory::memcpy_htod(self.address, (value as *const T).cast(), std::mem::size_of::<T>()) }?;
        Ok(())
    }

    /// The device address.
    pub fn device_ptr(&self) -> u64 {
        self.address
    }
}
