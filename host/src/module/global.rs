//! Typed access to a module's global and `__constant__` variables.

use std::marker::PhantomData;

use bytemuck::Pod;
use cudarc::driver::sys;

use crate::driver;
use crate::error::{Error, Result};
use crate::memory::usage::Access;
use crate::module::Module;
use crate::stream::Stream;

/// A typed global variable of a [`Module`]; reads and writes are synchronous copies on the
/// legacy default stream, tracked like a [`DeviceBuffer`](crate::DeviceBuffer)'s: every launch
/// of the module's kernels (on any stream) reads the module's globals, a write waits for
/// those queued before it and those queued after wait for it (S1). Kernels must not write
/// globals that the host reads concurrently (device code needs `unsafe` to write a global).
pub struct Global<'m, T> {
    pub(crate) address: sys::CUdeviceptr,
    pub(crate) module: &'m Module,
    /// A global the loader named host-writable (see [`Module::global`]).
    pub(crate) writable: bool,
    /// `.const` data (for the refusal's message).
    pub(crate) constant: bool,
    pub(crate) name: Box<str>,
    pub(crate) _value: PhantomData<T>,
}

impl<T> std::fmt::Debug for Global<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Global").field("address", &format_args!("{:#x}", self.address)).field("type", &std::any::type_name::<T>()).finish()
    }
}

impl<T: Pod> Global<'_, T> {
    /// The current value, once the writes queued before have landed.
    pub fn read(&self) -> Result<T> {
        let (address, mut value) = (self.address, T::zeroed());
        let legacy = Stream::default_of(self.module.context());
        self.module.with_globals(Access::Read, "Global::read", |globals| {
            // SAFETY: the global holds size_of::<T>() bytes (checked at creation); T accepts
            // any bytes; the door ordered the legacy stream after the last write.
            legacy.enqueue("Global::read", &[globals], |_| {
                Ok::<_, Error>(unsafe { driver::memory::memcpy_dtoh((&mut value as *mut T).cast(), address, std::mem::size_of::<T>()) }?)
            })
        })?;
        Ok(value)
    }

    /// Sets the value: after the module's kernels queued before (on any stream) have run, so
    /// none of them sees the new value, and before those queued after, which all see it (S1).
    ///
    /// # Errors
    /// [`Error::GlobalReadOnly`] for a global (`.global` or `.const`) the loader did not name in
    /// [`JitOptions::host_writable_globals`](crate::JitOptions::host_writable_globals): it may
    /// be an immutable `static` or a `const` `__constant__`, whose code assumed its value (see
    /// [`Module::global`]).
    pub fn write(&self, value: &T) -> Result<()> {
        if !self.writable {
            return Err(Error::GlobalReadOnly { name: self.name.to_string(), module: self.module.name().to_string(), constant: self.constant });
        }
        let address = self.address;
        let legacy = Stream::default_of(self.module.context());
        self.module.with_globals(Access::Write, "Global::write", |globals| {
            // SAFETY: the global holds size_of::<T>() bytes (checked at creation); the door
            // ordered the legacy stream after every launch of the module's kernels so far.
            legacy.enqueue("Global::write", &[globals], |_| {
                Ok::<_, Error>(unsafe { driver::memory::memcpy_htod(address, (value as *const T).cast(), std::mem::size_of::<T>()) }?)
            })
        })
    }

    /// Whether [`Global::write`] may change it (the loader named it host-writable).
    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// The device address.
    pub fn device_ptr(&self) -> u64 {
        self.address
    }
}
