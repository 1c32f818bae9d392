//! What a typed launcher hands to the launch: each argument's `void*`, slices as (pointer,
//! length) with their buffers' use tracking, and the by-value check.

use std::ffi::c_void;

use crate::memory::DeviceSlice;
use crate::memory::usage::{Access, BufferAccess, BufferUsage};

/// A slice as a kernel receives it: device pointer and length, and the use tracking of the
/// memory (see `memory::usage`).
///
/// An empty slice, or one of zero-sized elements, gets a dangling but non-null, aligned
/// pointer, as Rust's references require (W4); the kernel never reads through it.
#[derive(Debug, Clone, Copy)]
#[doc(hidden)]
pub struct SliceArg<'a> {
    /// Device address.
    pub ptr: u64,
    /// Number of elements.
    pub len: usize,
    usage: Option<&'a BufferUsage>,
}

impl<'a> SliceArg<'a> {
    /// The kernel argument for `slice`.
    #[inline]
    pub fn new<T>(slice: &'a DeviceSlice<T>) -> Self {
        Self::tracked::<T>(slice.device_ptr(), slice.len(), slice.usage())
    }

    /// The kernel argument for `len` elements of `T` at device address `ptr`, with no use
    /// tracking (the caller orders the memory's uses itself).
    #[inline]
    pub fn from_parts<T>(ptr: u64, len: usize) -> SliceArg<'static> {
        SliceArg { ptr: Self::valid_ptr::<T>(ptr, len), len, usage: None }
    }

    /// The kernel argument for memory tracked by `usage`.
    #[inline]
    pub(crate) fn tracked<T>(ptr: u64, len: usize, usage: &'a BufferUsage) -> Self {
        SliceArg { ptr: Self::valid_ptr::<T>(ptr, len), len, usage: Some(usage) }
    }

    /// `ptr`, or the dangling aligned address when the slice has no bytes.
    #[inline]
    fn valid_ptr<T>(ptr: u64, len: usize) -> u64 {
        if len == 0 || std::mem::size_of::<T>() == 0 { std::mem::align_of::<T>() as u64 } else { ptr }
    }

    /// The kernel reads this argument (`&[T]`); `name` is the parameter's, for errors.
    #[inline]
    pub fn read(&self, name: &'static str) -> BufferAccess<'a> {
        BufferAccess::new(self.usage, Access::Read, name)
    }

    /// The kernel writes this argument (`&mut [T]`); `name` is the parameter's, for errors.
    #[inline]
    pub fn write(&self, name: &'static str) -> BufferAccess<'a> {
        BufferAccess::new(self.usage, Access::Write, name)
    }
}

/// A type that can be passed to a kernel by value: plain data with no pointers to host
/// memory. Every `bytemuck::Pod` type is one (derive `Pod` on a `#[repr(C)]` struct).
///
/// # Safety
/// Every bit pattern of the type's bytes must be valid on the device, and it must hold no
/// host pointers (what `Pod` promises).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be passed to a kernel by value",
    label = "not plain data",
    note = "kernel parameters by value must be integers, floats, bool, or `#[repr(C)]` structs that derive `bytemuck::Pod` and `bytemuck::Zeroable`"
)]
pub unsafe trait KernelValue: Copy {}
// SAFETY: `Pod` is exactly the promise above.
unsafe impl<T: bytemuck::Pod> KernelValue for T {}

/// Compile-time check used by generated launchers: `T` may be passed by value.
#[doc(hidden)]
#[inline(always)]
pub fn require_kernel_value<T: KernelValue>() {}

/// The `void*` that `cuLaunchKernel` wants for one argument.
#[doc(hidden)]
#[inline(always)]
pub fn param_ptr<T>(value: &T) -> *mut c_void {
    value as *const T as *mut c_void
}


#[cfg(test)]
mod tests {
    use super::*;

    /// W4: a buffer of zero-sized elements has address 0; the kernel must still get a
    /// non-null, aligned pointer (it used to get null when `len > 0`).
    #[test]
    fn zero_sized_elements_get_a_dangling_aligned_pointer() {
        assert_eq!(SliceArg::from_parts::<()>(0, 5).ptr, 1);
        assert_eq!(SliceArg::from_parts::<[u64; 0]>(0, 5).ptr, 8);
        assert_eq!(SliceArg::from_parts::<f64>(0, 0).ptr, 8);
        assert_eq!(SliceArg::from_parts::<f64>(0x1000, 3).ptr, 0x1000);
    }
}
