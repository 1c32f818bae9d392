//! Borrowed views of device memory, and the traits through which launchers accept device
//! memory for `&[T]` and `DisjointSlice<T>` / `AtomicSlice<T>` kernel parameters.
//!
//! A view borrows the buffer it was cut from, so the buffer outlives it and, for a mutable
//! view, no other host-side value touches that buffer while the view lives: the same
//! exclusivity a `&mut [T]` has. That exclusivity ends when a launch returns, while the kernel
//! runs on; the ordering of work on the GPU (other streams, host copies, the free) comes from
//! the buffer's use tracking instead, which a view shares with its buffer
//! ([`BufferUsage`], see `memory::usage`).

use std::fmt;
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};

use bytemuck::Pod;

use crate::memory::usage::{Access, BufferAccess, BufferUsage};
use crate::memory::{DeviceBuffer, DeviceSlice};

/// Device memory holding `T`s that a kernel may read: what a `&[T]` kernel parameter takes.
///
/// Implemented by [`DeviceBuffer`], [`DeviceSlice`], [`DeviceView`] and [`DeviceViewMut`].
///
/// # Safety
/// `kernel_arg` must return the address and length of device memory that holds `len` valid
/// `T`s and stays allocated while `self` is borrowed, with the use tracking of that memory
/// (or none, for memory whose ordering the implementer guarantees otherwise).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not device memory of `{T}`",
    label = "a `&[{T}]` kernel parameter takes device memory of `{T}`",
    note = "pass `&buffer` for a `DeviceBuffer<{T}>`, or a view `&buffer.slice(a..b)`; host data must be copied first with `DeviceBuffer::from_slice`"
)]
pub unsafe trait DeviceRead<T> {
    /// The pointer and length the kernel receives, and the memory's use tracking.
    fn kernel_arg(&self) -> SliceArg<'_>;
}

/// Device memory a kernel may write: what a `DisjointSlice<T>` or `AtomicSlice<T>` kernel
/// parameter takes (through a `&mut` borrow, so one output cannot be passed twice).
///
/// # Safety
/// As for [`DeviceRead`]; besides, while `self` is mutably borrowed no other live value may
/// give access to the same memory.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not writable device memory of `{T}`",
    label = "a `&mut [{T}]` kernel parameter takes writable device memory of `{T}`",
    note = "pass `&mut buffer` for a `DeviceBuffer<{T}>`, or a view `&mut buffer.slice_mut(a..b)`"
)]
pub unsafe trait DeviceWrite<T>: DeviceRead<T> {
    /// The pointer and length the kernel receives, and the memory's use tracking.
    fn kernel_arg_mut(&mut self) -> SliceArg<'_>;
}

impl<'a> BufferAccess<'a> {
    /// Work that reads `buffer`.
    pub fn read<T>(buffer: &'a (impl DeviceRead<T> + ?Sized)) -> Self {
        buffer.kernel_arg().read("buffer")
    }

    /// Work that writes (or reads and writes) `buffer`.
    pub fn write<T>(buffer: &'a mut (impl DeviceWrite<T> + ?Sized)) -> Self {
        buffer.kernel_arg_mut().write("buffer")
    }
}

/// A slice as a kernel receives it: device pointer and length, and the use tracking of the
/// memory (see `memory::usage`).
///
/// An empty slice, or one of zero-sized elements, gets a dangling but non-null, aligned
/// pointer, as Rust's references require (W4); the kernel never reads through it.
#[derive(Debug, Clone, Copy)]
#[doc(hidden)]
pub struct SliceArg<'a> {
    /// Device address. Not public: a `SliceArg` is what the real launch trusts to be memory the
    /// launch was lent, so only this crate's constructors (from a real `DeviceRead`/`DeviceWrite`,
    /// or the `unsafe` [`SliceArg::from_parts`]) set it (audit 2026-11-28g, G19R-3: public fields
    /// let a renamed `ferrocuda_host` forge one in safe code). Read it with [`SliceArg::ptr`].
    pub(crate) ptr: u64,
    /// Number of elements ([`SliceArg::len`]).
    pub(crate) len: usize,
    usage: Option<&'a BufferUsage>,
    /// Made by a `DeviceWrite::kernel_arg_mut` (through `&mut`): [`SliceArg::write`] may
    /// declare a write of it. One made through `&` (`DeviceRead::kernel_arg`, `SliceArg::new`)
    /// may not (audit 2026-11-28d review, G16R-12: a write declared through a shared reference
    /// erased another thread's declared work from the record, and the memory was freed under it).
    writable: bool,
}

/// The argument of an optional input (`Option<&[T]>` kernel parameter): a [`SliceArg`] or
/// absent (the null address, length 0, no memory to track; the device entry rebuilds it as
/// `None`).
///
/// Its own type, with its own `KernelParam` constructors
/// ([`KernelParam::optional_slice_address`](crate::launch::KernelParam::optional_slice_address)),
/// so that no [`SliceArg`] is ever null: a plain `&[T]` parameter's address comes from a
/// `SliceArg`, and the device entry rebuilds a reference from it, for which null is UB even at
/// length 0. Before (session 20's item 3), `SliceArg::absent()` made a null `SliceArg`, and a
/// crate that renames `ferrocuda_host` could pass it for a plain slice.
#[derive(Debug, Clone, Copy)]
#[doc(hidden)]
pub struct OptionalSliceArg<'a>(Option<SliceArg<'a>>);

impl<'a> OptionalSliceArg<'a> {
    /// A present optional input: the memory's argument.
    #[inline(always)]
    pub fn present(arg: SliceArg<'a>) -> Self {
        OptionalSliceArg(Some(arg))
    }

    /// An absent optional input (`None`).
    #[inline(always)]
    pub fn absent() -> Self {
        OptionalSliceArg(None)
    }

    /// The kernel reads this argument when present; `name` is the parameter's, for errors.
    /// Absent, it has no memory: an untracked no-op.
    #[inline]
    pub fn read(&self, name: &'static str) -> BufferAccess<'a> {
        match &self.0 {
            Some(arg) => arg.read(name),
            None => BufferAccess::new(None, Access::Read, name),
        }
    }

    /// The address the entry gets: the slice's, or 0 (the entry's `None`).
    #[inline(always)]
    pub(crate) fn address(&self) -> &u64 {
        const NULL: u64 = 0;
        match &self.0 {
            Some(arg) => &arg.ptr,
            None => &NULL,
        }
    }

    /// The length the entry gets: the slice's, or 0.
    #[inline(always)]
    pub(crate) fn len_ref(&self) -> &usize {
        const ZERO: usize = 0;
        match &self.0 {
            Some(arg) => &arg.len,
            None => &ZERO,
        }
    }
}

impl<'a> SliceArg<'a> {
    /// The argument of an input (`&[T]`) kernel parameter, from the memory itself: the
    /// generated launchers call this, so that a real [`DeviceRead`] impl (an `unsafe` promise)
    /// makes every slice the launch passes, whatever path the launcher named it by (G17R-2's
    /// residual, session 18).
    #[doc(hidden)]
    #[inline(always)]
    pub fn input<T, B: DeviceRead<T> + ?Sized>(memory: &'a B) -> Self {
        memory.kernel_arg()
    }

    /// The argument of an output (`DisjointSlice<T>`, `AtomicSlice<T>`, ..) kernel parameter,
    /// from the memory itself, borrowed exclusively: as [`SliceArg::input`], with
    /// [`DeviceWrite`].
    #[doc(hidden)]
    #[inline(always)]
    pub fn output<T, B: DeviceWrite<T> + ?Sized>(memory: &'a mut B) -> Self {
        memory.kernel_arg_mut()
    }

    /// The kernel argument for `slice`.
    #[inline]
    pub fn new<T>(slice: &'a DeviceSlice<T>) -> Self {
        Self::tracked::<T>(slice.device_ptr(), slice.len(), slice.usage())
    }

    /// [`SliceArg::tracked`] for a `DeviceWrite::kernel_arg_mut` (the memory borrowed
    /// exclusively): [`SliceArg::write`] may declare a write of it.
    #[inline]
    pub(crate) fn tracked_mut<T>(ptr: u64, len: usize, usage: &'a BufferUsage) -> Self {
        SliceArg { writable: true, ..Self::tracked::<T>(ptr, len, usage) }
    }

    /// The kernel argument for `len` elements of `T` at device address `ptr`, with no use
    /// tracking (the caller orders the memory's uses itself).
    ///
    /// # Safety
    /// `ptr .. ptr + len * size_of::<T>()` is device memory of the launch's context holding
    /// `T`s, which the kernel may read and write until it has finished, and nothing else
    /// accesses it meanwhile (the real launch trusts a `SliceArg` to be such memory: G19R-3).
    #[inline]
    pub unsafe fn from_parts<T>(ptr: u64, len: usize) -> SliceArg<'static> {
        SliceArg { ptr: Self::valid_ptr::<T>(ptr, len), len, usage: None, writable: true }
    }

    /// The device address.
    #[inline]
    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    /// The number of elements.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// No elements.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Elements `start .. start + len` of this argument (made for `W`s) as `U`s, with its use
    /// tracking: `None` unless they lie inside it, are whole `U`s and are aligned for `U`.
    ///
    /// # Safety
    /// This argument was made for a slice of `W`s (its length counts `W`s), and any bits are a
    /// valid `U` (the kernel reads and writes the memory as `U`s).
    #[inline]
    pub unsafe fn part_as<W, U>(self, start: usize, len: usize) -> Option<Self> {
        let end = start.checked_add(len)?;
        if end > self.len {
            return None;
        }
        let ptr = self.ptr + (std::mem::size_of::<W>() * start) as u64;
        let bytes = std::mem::size_of::<W>() * len;
        let unit = std::mem::size_of::<U>().max(1);
        if !bytes.is_multiple_of(unit) || !ptr.is_multiple_of(std::mem::align_of::<U>() as u64) {
            return None;
        }
        let len = bytes / unit;
        Some(SliceArg { ptr: Self::valid_ptr::<U>(ptr, len), len, ..self })
    }

    /// The kernel argument for memory tracked by `usage`.
    #[inline]
    pub(crate) fn tracked<T>(ptr: u64, len: usize, usage: &'a BufferUsage) -> Self {
        SliceArg { ptr: Self::valid_ptr::<T>(ptr, len), len, usage: Some(usage), writable: false }
    }

    /// `ptr`, or the dangling aligned address when the slice has no bytes.
    #[inline]
    fn valid_ptr<T>(ptr: u64, len: usize) -> u64 {
        if len == 0 || std::mem::size_of::<T>() == 0 { std::mem::align_of::<T>() as u64 } else { ptr }
    }

    /// The use tracking of the memory (`None` for memory its owner orders itself).
    #[inline]
    pub(crate) fn usage(&self) -> Option<&'a BufferUsage> {
        self.usage
    }

    /// The kernel reads this argument (`&[T]`); `name` is the parameter's, for errors.
    #[inline]
    pub fn read(&self, name: &'static str) -> BufferAccess<'a> {
        BufferAccess::new(self.usage, Access::Read, name)
    }

    /// The kernel writes this argument (`DisjointSlice<T>`, `AtomicSlice<T>`); `name` is the
    /// parameter's, for errors.
    ///
    /// # Panics
    /// For tracked memory whose argument was made through a shared reference
    /// (`DeviceRead::kernel_arg`, `SliceArg::new`) rather than `DeviceWrite::kernel_arg_mut`:
    /// a write declared through `&` could come between another thread's declaration on the
    /// same memory and its queuing and erase that work from the record (G16R-12).
    #[inline]
    pub fn write(&self, name: &'static str) -> BufferAccess<'a> {
        assert!(
            self.writable || self.usage.is_none(),
            "SliceArg::write of `{name}`: the argument was made through a shared reference (`DeviceRead::kernel_arg`); a write \
             is declared through `DeviceWrite::kernel_arg_mut` (`&mut`), as `BufferAccess::write(&mut buffer)` does"
        );
        BufferAccess::new(self.usage, Access::Write, name)
    }

    /// [`SliceArg::write`] for an argument made through a shared reference.
    ///
    /// # Safety
    /// No other code declares work on this memory, on any thread, from this declaration until
    /// the work it declares has been queued (the memory's owner is held exclusively in effect,
    /// as a `CublasLt` holds its workspace: `Send`, not `Sync`).
    #[doc(hidden)]
    #[inline]
    pub unsafe fn write_shared(&self, name: &'static str) -> BufferAccess<'a> {
        BufferAccess::new(self.usage, Access::Write, name)
    }
}

/// A read-only view of part of a device buffer (`buffer.slice(a..b)`).
pub struct DeviceView<'a, T> {
    ptr: u64,
    len: usize,
    usage: &'a BufferUsage,
    _borrow: PhantomData<&'a [T]>,
}

/// A writable view of part of a device buffer (`buffer.slice_mut(a..b)`).
pub struct DeviceViewMut<'a, T> {
    ptr: u64,
    len: usize,
    usage: &'a BufferUsage,
    _borrow: PhantomData<&'a mut [T]>,
}

impl<T> Clone for DeviceView<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for DeviceView<'_, T> {}

/// Resolves `range` against `len`, panicking like slice indexing does when it is out of bounds
/// (a programming error, as for host slices).
fn resolve(range: impl RangeBounds<usize>, len: usize) -> (usize, usize) {
    let start = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s.checked_add(1).expect("range start overflows usize"),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.checked_add(1).expect("range end overflows usize"),
        Bound::Excluded(&e) => e,
        Bound::Unbounded => len,
    };
    assert!(start <= end, "device slice index starts at {start} but ends at {end}");
    assert!(end <= len, "range end index {end} out of range for a device slice of length {len}");
    (start, end)
}

fn offset<T>(ptr: u64, start: usize) -> u64 {
    ptr + (start * std::mem::size_of::<T>()) as u64
}

impl<T> DeviceSlice<T> {
    /// A read-only view of `range` (like `&slice[range]`); panics when out of bounds.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> DeviceView<'_, T> {
        let (start, end) = resolve(range, self.len());
        DeviceView { ptr: offset::<T>(self.device_ptr(), start), len: end - start, usage: self.usage(), _borrow: PhantomData }
    }

    /// A writable view of `range` (like `&mut slice[range]`); panics when out of bounds.
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> DeviceViewMut<'_, T> {
        let (start, end) = resolve(range, self.len());
        DeviceViewMut { ptr: offset::<T>(self.device_ptr(), start), len: end - start, usage: self.usage(), _borrow: PhantomData }
    }

    /// The device address as a typed pointer, for kernels with raw pointer parameters.
    pub fn as_device_ptr(&self) -> DevicePtr<T> {
        DevicePtr::from_address(self.device_ptr())
    }
}

/// The length in `U`s of `len` `T`s at `address`, or why they cannot be viewed as `U`s.
fn cast_len<T, U>(address: u64, len: usize) -> crate::Result<usize> {
    let bytes = len * std::mem::size_of::<T>();
    let (to_size, to_align) = (std::mem::size_of::<U>(), std::mem::align_of::<U>());
    let problem = if to_size == 0 {
        Some("the type has no size")
    } else if !bytes.is_multiple_of(to_size) {
        Some("the length is not a whole number of elements of that type")
    } else if !address.is_multiple_of(to_align as u64) {
        Some("the address is not aligned for that type (the GPU faults on a misaligned access)")
    } else {
        None
    };
    match problem {
        None => Ok(bytes / to_size),
        Some(problem) => {
            Err(crate::Error::ElementCast { from: std::any::type_name::<T>(), to: std::any::type_name::<U>(), bytes, address, to_size, to_align, problem })
        }
    }
}

impl<T: Pod> DeviceSlice<T> {
    /// The same device memory as `U`s (CUDA's `reinterpret_cast<const float4*>(x)`), read-only:
    /// safe, as every bit pattern of a `Pod` type is valid. An error unless the bytes are a
    /// whole number of `U`s and the address is aligned for `U` ([`Error::ElementCast`](crate::Error::ElementCast)).
    pub fn cast<U: Pod>(&self) -> crate::Result<DeviceView<'_, U>> {
        let len = cast_len::<T, U>(self.device_ptr(), self.len())?;
        Ok(DeviceView { ptr: self.device_ptr(), len, usage: self.usage(), _borrow: PhantomData })
    }
}

impl<'a, T: Pod> DeviceView<'a, T> {
    /// This view's memory as `U`s; as [`DeviceSlice::cast`].
    pub fn cast<U: Pod>(&self) -> crate::Result<DeviceView<'a, U>> {
        let len = cast_len::<T, U>(self.ptr, self.len)?;
        Ok(DeviceView { ptr: self.ptr, len, usage: self.usage, _borrow: PhantomData })
    }
}

impl<T: Pod> DeviceViewMut<'_, T> {
    /// This view's memory as `U`s, writable; as [`DeviceSlice::cast`].
    pub fn cast_mut<U: Pod>(&mut self) -> crate::Result<DeviceViewMut<'_, U>> {
        let len = cast_len::<T, U>(self.ptr, self.len)?;
        Ok(DeviceViewMut { ptr: self.ptr, len, usage: self.usage, _borrow: PhantomData })
    }
}

impl<T: bytemuck::Pod> crate::DeviceBuffer<T> {
    /// The whole buffer as `U`s, writable (a `DeviceBuffer<f32>` as `float4`s); as
    /// [`DeviceSlice::cast`]. Allocations are 256-byte aligned, so only the length can refuse.
    pub fn cast_mut<U: Pod>(&mut self) -> crate::Result<DeviceViewMut<'_, U>> {
        let len = cast_len::<T, U>(self.device_ptr(), self.len())?;
        Ok(DeviceViewMut { ptr: self.device_ptr(), len, usage: self.usage(), _borrow: PhantomData })
    }

    /// A writable view of `range` (like `&mut buffer[range]`); panics when out of bounds.
    /// (A buffer gives `&DeviceSlice` through `Deref` but no `&mut DeviceSlice`: swapping two
    /// buffers' slices would free each allocation the other's way.)
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> DeviceViewMut<'_, T> {
        let (start, end) = resolve(range, self.len());
        DeviceViewMut { ptr: offset::<T>(self.device_ptr(), start), len: end - start, usage: self.usage(), _borrow: PhantomData }
    }

    /// Splits the whole buffer into two writable views at `mid`; panics if `mid > len`.
    ///
    /// The two views share the buffer's use record and may go to two threads: while they
    /// may exist, work on this buffer is ordered and queued under the record's lock (D2; an
    /// uncontended lock per use instead of the one-load fast path), and
    /// [`Stream::will_use`](crate::Stream::will_use) refuses them (use
    /// [`Stream::will_use_for`](crate::Stream::will_use_for)). The buffer's next use of its
    /// own (a launch, copy or view through the buffer, which the views' borrow excludes until
    /// they are gone) returns it to the fast path.
    pub fn split_at_mut(&mut self, mid: usize) -> (DeviceViewMut<'_, T>, DeviceViewMut<'_, T>) {
        let len = self.len();
        assert!(mid <= len, "split index {mid} out of range for a device buffer of length {len}");
        let (ptr, usage) = (self.device_ptr(), self.usage());
        usage.mark_shared();
        (
            DeviceViewMut { ptr, len: mid, usage, _borrow: PhantomData },
            DeviceViewMut { ptr: offset::<T>(ptr, mid), len: len - mid, usage, _borrow: PhantomData },
        )
    }
}

impl<'a, T> DeviceView<'a, T> {
    /// A view of `len` elements at `ptr`, tracked by `usage` (memory borrowed from another
    /// library, `crate::borrowed`: the caller vouches for the range).
    pub(crate) fn from_tracked(ptr: u64, len: usize, usage: &'a BufferUsage) -> Self {
        DeviceView { ptr, len, usage, _borrow: PhantomData }
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when it holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// A narrower view of `range` within this one; panics when out of bounds.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> DeviceView<'a, T> {
        let (start, end) = resolve(range, self.len);
        DeviceView { ptr: offset::<T>(self.ptr, start), len: end - start, usage: self.usage, _borrow: PhantomData }
    }
    /// The first element's device address as a typed pointer.
    pub fn as_device_ptr(&self) -> DevicePtr<T> {
        DevicePtr::from_address(self.ptr)
    }
}

impl<'a, T> DeviceViewMut<'a, T> {
    /// As [`DeviceView::from_tracked`], writable: the caller also vouches that nothing else
    /// gives access to the range while the view lives.
    pub(crate) fn from_tracked(ptr: u64, len: usize, usage: &'a BufferUsage) -> Self {
        DeviceViewMut { ptr, len, usage, _borrow: PhantomData }
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when it holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// A narrower read-only view of `range` within this one; panics when out of bounds.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> DeviceView<'_, T> {
        let (start, end) = resolve(range, self.len);
        DeviceView { ptr: offset::<T>(self.ptr, start), len: end - start, usage: self.usage, _borrow: PhantomData }
    }
    /// A narrower writable view of `range` within this one; panics when out of bounds.
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> DeviceViewMut<'_, T> {
        let (start, end) = resolve(range, self.len);
        DeviceViewMut { ptr: offset::<T>(self.ptr, start), len: end - start, usage: self.usage, _borrow: PhantomData }
    }
    /// Splits into two writable views at `mid`, like `split_at_mut`; panics if `mid > len`.
    /// As [`DeviceBuffer::split_at_mut`](crate::DeviceBuffer::split_at_mut), the record is
    /// marked shared (D2) until the buffer itself is used again.
    pub fn split_at_mut(&mut self, mid: usize) -> (DeviceViewMut<'_, T>, DeviceViewMut<'_, T>) {
        assert!(mid <= self.len, "split index {mid} out of range for a device slice of length {}", self.len);
        self.usage.mark_shared();
        (
            DeviceViewMut { ptr: self.ptr, len: mid, usage: self.usage, _borrow: PhantomData },
            DeviceViewMut { ptr: offset::<T>(self.ptr, mid), len: self.len - mid, usage: self.usage, _borrow: PhantomData },
        )
    }
    /// The first element's device address as a typed pointer.
    pub fn as_device_ptr(&self) -> DevicePtr<T> {
        DevicePtr::from_address(self.ptr)
    }
}

impl<T> fmt::Debug for DeviceView<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceView").field("ptr", &format_args!("{:#x}", self.ptr)).field("len", &self.len).finish()
    }
}

impl<T> fmt::Debug for DeviceViewMut<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceViewMut").field("ptr", &format_args!("{:#x}", self.ptr)).field("len", &self.len).finish()
    }
}

// SAFETY (all impls below): the pointer/length come from a live allocation (a buffer, or a
// view that borrows one), in bounds by construction of the views, with that allocation's
// use tracking.
unsafe impl<T> DeviceRead<T> for DeviceSlice<T> {
    #[inline]
    fn kernel_arg(&self) -> SliceArg<'_> {
        SliceArg::tracked::<T>(self.device_ptr(), self.len(), self.usage())
    }
}
unsafe impl<T> DeviceWrite<T> for DeviceSlice<T> {
    #[inline]
    fn kernel_arg_mut(&mut self) -> SliceArg<'_> {
        SliceArg::tracked_mut::<T>(self.device_ptr(), self.len(), self.usage())
    }
}
unsafe impl<T: Pod> DeviceRead<T> for DeviceBuffer<T> {
    #[inline]
    fn kernel_arg(&self) -> SliceArg<'_> {
        (**self).kernel_arg()
    }
}
unsafe impl<T: Pod> DeviceWrite<T> for DeviceBuffer<T> {
    #[inline]
    fn kernel_arg_mut(&mut self) -> SliceArg<'_> {
        self.slice.kernel_arg_mut()
    }
}
unsafe impl<T> DeviceRead<T> for DeviceView<'_, T> {
    #[inline]
    fn kernel_arg(&self) -> SliceArg<'_> {
        SliceArg::tracked::<T>(self.ptr, self.len, self.usage)
    }
}
unsafe impl<T> DeviceRead<T> for DeviceViewMut<'_, T> {
    #[inline]
    fn kernel_arg(&self) -> SliceArg<'_> {
        SliceArg::tracked::<T>(self.ptr, self.len, self.usage)
    }
}
unsafe impl<T> DeviceWrite<T> for DeviceViewMut<'_, T> {
    #[inline]
    fn kernel_arg_mut(&mut self) -> SliceArg<'_> {
        SliceArg::tracked_mut::<T>(self.ptr, self.len, self.usage)
    }
}

/// A raw device address of `T`s, for kernels with `*const T` / `*mut T` parameters (whose
/// launchers are `unsafe`: nothing ties the address to a live allocation).
#[repr(transparent)]
pub struct DevicePtr<T> {
    address: u64,
    _element: PhantomData<*mut T>,
}

impl<T> DevicePtr<T> {
    /// A pointer from a raw device address (e.g. from another library).
    pub fn from_address(address: u64) -> Self {
        DevicePtr { address, _element: PhantomData }
    }
    /// The address where this value keeps it (a launch parameter's value).
    #[inline(always)]
    pub(crate) fn address_ref(&self) -> &u64 {
        &self.address
    }

    /// The raw device address.
    pub fn address(self) -> u64 {
        self.address
    }
    /// The address `count` elements further on (no bounds check: it is a raw pointer).
    pub fn advance(self, count: usize) -> Self {
        DevicePtr::from_address(offset::<T>(self.address, count))
    }
}

impl<T> Clone for DevicePtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for DevicePtr<T> {}
impl<T> fmt::Debug for DevicePtr<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DevicePtr({:#x})", self.address)
    }
}
// SAFETY: a device address is a number on the host; using it needs `unsafe` anyway.
unsafe impl<T> Send for DevicePtr<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for DevicePtr<T> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_resolve_like_slices() {
        assert_eq!(resolve(.., 10), (0, 10));
        assert_eq!(resolve(2..5, 10), (2, 5));
        assert_eq!(resolve(2..=5, 10), (2, 6));
        assert_eq!(resolve(..3, 10), (0, 3));
        assert_eq!(resolve(10.., 10), (10, 10));
        assert_eq!(offset::<f64>(0x1000, 3), 0x1018);
    }

    #[test]
    #[should_panic(expected = "range end index 11 out of range for a device slice of length 10")]
    fn out_of_bounds_ranges_panic_with_the_lengths() {
        resolve(5..11, 10);
    }

    #[test]
    #[should_panic(expected = "starts at 6 but ends at 5")]
    #[allow(clippy::reversed_empty_ranges)] // the point of the test
    fn reversed_ranges_panic() {
        resolve(6..5, 10);
    }

    /// W4: a buffer of zero-sized elements has address 0; the kernel must still get a
    /// non-null, aligned pointer (it used to get null when `len > 0`).
    #[test]
    fn zero_sized_elements_get_a_dangling_aligned_pointer() {
        // SAFETY: the arguments are only inspected, never launched.
        unsafe {
            assert_eq!(SliceArg::from_parts::<()>(0, 5).ptr, 1);
            assert_eq!(SliceArg::from_parts::<[u64; 0]>(0, 5).ptr, 8);
            assert_eq!(SliceArg::from_parts::<f64>(0, 0).ptr, 8);
            assert_eq!(SliceArg::from_parts::<f64>(0x1000, 3).ptr, 0x1000);
        }
    }
}

#[cfg(test)]
mod cast_tests {
    use super::cast_len;

    /// p30_6: a view as another element type keeps the bytes whole and the address aligned.
    #[test]
    fn p30_6_casts_check_length_and_alignment() {
        #[derive(Clone, Copy)]
        #[repr(C, align(16))]
        struct F4([f32; 4]);
        assert_eq!(cast_len::<f32, F4>(0x1000, 8).unwrap(), 2);
        assert_eq!(cast_len::<F4, f32>(0x1000, 2).unwrap(), 8);
        assert_eq!(cast_len::<f32, u8>(0x1004, 3).unwrap(), 12);
        let short = cast_len::<f32, F4>(0x1000, 6).unwrap_err().to_string();
        assert!(short.contains("not a whole number") && short.contains("24 bytes"), "{short}");
        let misaligned = cast_len::<f32, F4>(0x1004, 8).unwrap_err().to_string();
        assert!(misaligned.contains("not aligned") && misaligned.contains("0x1004") && misaligned.contains("aligned to 16"), "{misaligned}");
        assert!(cast_len::<f32, ()>(0x1000, 4).is_err());
    }
}
