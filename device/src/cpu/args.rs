//! The argument types of generated CPU launchers (`name::launch_cpu`): host slices and
//! pointers handed to every GPU thread of a launch. Reached through
//! `ferrocuda_device::cpu::__private`; not part of the public API.

/// A host slice handed to every GPU thread of a CPU launch.
pub struct SliceParts<T> {
    pointer: *const T,
    len: usize,
}

// SAFETY: only shared references are made from it, and `T: Sync`.
unsafe impl<T: Sync> Sync for SliceParts<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Send for SliceParts<T> {}

impl<T> SliceParts<T> {
    /// Keeps `slice`'s pointer and length.
    pub fn new(slice: &[T]) -> Self {
        SliceParts { pointer: slice.as_ptr(), len: slice.len() }
    }

    /// The slice again.
    ///
    /// # Safety
    /// The slice this was made from is still borrowed (the launch has not returned).
    pub unsafe fn get<'a>(&self) -> &'a [T] {
        // SAFETY: as the caller guarantees.
        unsafe { core::slice::from_raw_parts(self.pointer, self.len) }
    }
}

/// A mutable host slice handed to every GPU thread of a CPU launch, as a device pointer
/// is on a GPU: the kernel's threads write disjoint elements (or use atomics).
pub struct SlicePartsMut<T> {
    pointer: *mut T,
    len: usize,
}

// SAFETY: the threads of a kernel write disjoint elements or use atomics (the kernel's
// contract on a GPU as well); `T: Send + Sync` so elements may cross threads.
unsafe impl<T: Send + Sync> Sync for SlicePartsMut<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Send for SlicePartsMut<T> {}

impl<T> SlicePartsMut<T> {
    /// Keeps `slice`'s pointer and length; the slice stays borrowed by the caller's launch.
    pub fn new(slice: &mut [T]) -> Self {
        SlicePartsMut { pointer: slice.as_mut_ptr(), len: slice.len() }
    }

    /// The slice again, for one GPU thread.
    ///
    /// # Safety
    /// The slice this was made from is still exclusively borrowed by the launch, and the
    /// threads given it do not write the same element without atomics.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn get<'a>(&self) -> &'a mut [T] {
        // SAFETY: as the caller guarantees.
        unsafe { core::slice::from_raw_parts_mut(self.pointer, self.len) }
    }
}

/// A raw pointer argument of an `unsafe` kernel, handed to every thread of a CPU launch.
pub struct RawPointer<P>(P);

// SAFETY: the launcher is an `unsafe fn` whose caller vouches for the pointer's use.
unsafe impl<P> Sync for RawPointer<P> {}
// SAFETY: as above.
unsafe impl<P> Send for RawPointer<P> {}

impl<P: Copy> RawPointer<P> {
    /// Wraps `pointer`.
    pub fn new(pointer: P) -> Self {
        RawPointer(pointer)
    }

    /// The pointer.
    pub fn get(&self) -> P {
        self.0
    }
}
