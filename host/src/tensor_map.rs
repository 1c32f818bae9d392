//! Tensor maps for the TMA copy engine (sm_90): `cuTensorMapEncodeTiled` made safe.
//!
//! A [`TensorMap`] describes a 1-5-D array in device memory, the box (tile) a copy moves and
//! how it is laid out in shared memory (swizzle). Kernels read it from global memory: copy it
//! there with [`TensorMap::to_device`] and pass the [`DeviceTensorMap`] to a `#[kernel]` whose
//! parameter is `map: &TensorMap` (the device side, `ferrocuda_device::tma`, explains why not
//! by value and which fence makes it sound).
//! ([driver API](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TENSOR__MEMORY.html))
//!
//! **The memory behind a map is tracked like a buffer** (issue 21). A map made by
//! [`TensorMap::tiled`] borrows its buffer (`TensorMap<'buf>`), so the buffer cannot be
//! dropped, nor written through another value, while the map (or its device copy) lives; a
//! map made by [`TensorMap::tiled_mut`] for TMA stores borrows it exclusively. A launch that
//! passes a [`DeviceTensorMap`] declares, through the stream's door, a read of the map's own
//! device copy and a read (or, for a `tiled_mut` map, a write) of the memory behind it, so
//! other streams' work, host copies and the buffer's drop are ordered with the kernel's TMA
//! copies exactly as with a slice argument.
//!
//! Why a borrow rather than a shared tracked handle: a borrow costs nothing at run time, makes
//! "dropped while a map exists" a compile error instead of a wait, and gives a store map the
//! same exclusivity as `&mut buffer` (which the door's no-wait path relies on); the record of
//! the kernels that used the memory already outlives the borrow (the buffer's drop waits for
//! them). A [`DeviceTensorMap`] is not `Sync`: two threads cannot declare work through one map
//! at once (a store map's write would race the other's declaration, as `&mut` prevents for
//! buffers); make one map per thread.

use std::cell::Cell;
use std::marker::PhantomData;

use cudarc::driver::sys;

use crate::driver::check;
use crate::memory::usage::{Access, BufferAccess, BufferUsage};
use crate::{Context, DeviceBuffer, Result};

/// Element type of a tensor map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TensorDataType {
    /// 8-bit unsigned integers.
    U8,
    /// 16-bit unsigned integers.
    U16,
    /// 32-bit unsigned integers.
    U32,
    /// IEEE half precision.
    F16,
    /// bfloat16.
    Bf16,
    /// f32.
    F32,
    /// f64.
    F64,
}

impl TensorDataType {
    /// Bytes per element.
    pub fn size(self) -> u64 {
        match self {
            TensorDataType::U8 => 1,
            TensorDataType::U16 | TensorDataType::F16 | TensorDataType::Bf16 => 2,
            TensorDataType::U32 | TensorDataType::F32 => 4,
            TensorDataType::F64 => 8,
        }
    }

    fn raw(self) -> sys::CUtensorMapDataType {
        use sys::CUtensorMapDataType::*;
        match self {
            TensorDataType::U8 => CU_TENSOR_MAP_DATA_TYPE_UINT8,
            TensorDataType::U16 => CU_TENSOR_MAP_DATA_TYPE_UINT16,
            TensorDataType::U32 => CU_TENSOR_MAP_DATA_TYPE_UINT32,
            TensorDataType::F16 => CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
            TensorDataType::Bf16 => CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
            TensorDataType::F32 => CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
            TensorDataType::F64 => CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
        }
    }
}

/// Shared-memory swizzle of the box (the `wgmma` operand layouts use 128 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorSwizzle {
    /// Row-major box, no swizzle.
    None,
    /// 32-byte swizzle (inner box dimension at most 32 bytes).
    B32,
    /// 64-byte swizzle (at most 64 bytes).
    B64,
    /// 128-byte swizzle (at most 128 bytes): 16-byte chunks of row `r` XOR-permuted by `r % 8`.
    B128,
}

/// A `CUtensorMap` (128 bytes) for tiled copies of one array, borrowing that array's buffer
/// for `'buf` (shared for a map made by [`TensorMap::tiled`], exclusive for
/// [`TensorMap::tiled_mut`]): see the module docs.
#[derive(Debug)]
pub struct TensorMap<'buf> {
    raw: sys::CUtensorMap,
    memory: Memory<'buf>,
}

/// The memory behind a map, as its launches declare it.
#[derive(Clone, Copy, Debug)]
enum Memory<'buf> {
    /// A tracked buffer, read (`tiled`) or written (`tiled_mut`) by the kernels.
    Tracked(&'buf BufferUsage, Access),
    /// A raw address ([`TensorMap::encode_tiled`]): kept alive and ordered by its caller.
    Untracked,
    /// A map for the CPU executor ([`TensorMap::emulated`]), never put on a GPU.
    Emulated,
}

/// What describes a tiled tensor map: dimensions innermost first.
#[derive(Clone, Debug)]
pub struct TiledLayout<'a> {
    /// Element type.
    pub data_type: TensorDataType,
    /// Elements per dimension (1 to 5 dimensions), innermost first.
    pub dims: &'a [u64],
    /// Byte stride of dimensions 1.. (multiples of 16; dimension 0 is contiguous).
    pub strides_bytes: &'a [u64],
    /// Box (tile) size per dimension, each at most 256; the innermost box times the element
    /// size is a multiple of 16 bytes and, when swizzled, at most the swizzle span.
    pub box_dims: &'a [u32],
    /// Shared-memory swizzle.
    pub swizzle: TensorSwizzle,
}

impl TensorMap<'static> {
    /// Encodes a tiled map of the array at device address `address`.
    ///
    /// # Safety
    /// `address` is 16-byte aligned (128 for interleaved maps); the memory the layout
    /// describes is device memory of the context the map's launches run in, stays allocated as
    /// long as kernels copy through the map, and its uses are ordered with those kernels by
    /// the caller: the map holds a raw address, no borrow, and its launches declare nothing
    /// for it. [`TensorMap::tiled`] and [`TensorMap::tiled_mut`] check and track a buffer.
    ///
    /// # Errors
    /// `CUDA_ERROR_INVALID_VALUE` from the driver when the layout breaks a rule above.
    pub unsafe fn encode_tiled(address: u64, layout: &TiledLayout<'_>) -> Result<TensorMap<'static>> {
        // SAFETY: forwarded.
        unsafe { Self::encode(address, layout, Memory::Untracked) }
    }
}

impl<'buf> TensorMap<'buf> {
    /// `cuTensorMapEncodeTiled` of `layout` at `address`, behind which is `memory`.
    ///
    /// # Safety
    /// As for [`TensorMap::encode_tiled`], or `memory` tracks the buffer at `address`, which
    /// holds the whole array.
    unsafe fn encode(address: u64, layout: &TiledLayout<'_>, memory: Memory<'buf>) -> Result<TensorMap<'buf>> {
        let rank = layout.dims.len();
        let element_strides = [1u32; 5];
        if !(1..=5).contains(&rank) || layout.strides_bytes.len() + 1 != rank || layout.box_dims.len() != rank {
            // The driver would read past the slices: refuse before calling it.
            check("cuTensorMapEncodeTiled", sys::CUresult::CUDA_ERROR_INVALID_VALUE)?;
        }
        let swizzle = match layout.swizzle {
            TensorSwizzle::None => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE,
            TensorSwizzle::B32 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_32B,
            TensorSwizzle::B64 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_64B,
            TensorSwizzle::B128 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
        };
        let mut raw = sys::CUtensorMap { opaque: [0; 16] };
        // SAFETY: the slices have the lengths the rank demands (checked above); the driver
        // only writes `raw`. The address's validity is the caller's contract.
        unsafe {
            crate::driver::tensor_map::encode_tiled(
                &mut raw,
                layout.data_type.raw(),
                rank as u32,
                address as *mut core::ffi::c_void,
                layout.dims.as_ptr(),
                layout.strides_bytes.as_ptr(),
                layout.box_dims.as_ptr(),
                element_strides.as_ptr(),
                sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
                swizzle,
                sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
            )
        }?;
        Ok(TensorMap { raw, memory })
    }

    /// A map of the packed row-major array in `buffer` with dimensions `dims` (1 to 5,
    /// innermost first, as `cuTensorMapEncodeTiled` takes them: `dims[0]` is contiguous, the
    /// stride of dimension `d` is the product of `dims[..d]` elements), copied in boxes of
    /// `box_dims` (innermost first, each at most 256).
    ///
    /// # Errors
    /// `CUDA_ERROR_INVALID_VALUE` when the rank is not 1..=5, `box_dims` has another length,
    /// or `buffer` is smaller than the product of `dims` elements of `data_type`; the
    /// driver's error when it rejects the layout (strides not multiples of 16 bytes, a box
    /// too large, ...).
    ///
    /// The map borrows `buffer` (it cannot be dropped or written through another value while
    /// the map lives), and every launch that passes it declares a read of the buffer: for
    /// TMA loads. For TMA stores, make the map with [`TensorMap::tiled_mut`].
    pub fn tiled<T: bytemuck::Pod>(
        buffer: &'buf DeviceBuffer<T>,
        data_type: TensorDataType,
        dims: &[u64],
        box_dims: &[u32],
        swizzle: TensorSwizzle,
    ) -> Result<TensorMap<'buf>> {
        Self::tiled_tracked(buffer, Access::Read, data_type, dims, box_dims, swizzle)
    }

    /// [`TensorMap::tiled`] for kernels that write the array (TMA stores, or loads and stores):
    /// the map borrows `buffer` exclusively, and every launch that passes it declares a write
    /// of the buffer (it waits for all earlier work on it on other streams, and later work
    /// waits for it).
    ///
    /// # Errors
    /// As for [`TensorMap::tiled`].
    pub fn tiled_mut<T: bytemuck::Pod>(
        buffer: &'buf mut DeviceBuffer<T>,
        data_type: TensorDataType,
        dims: &[u64],
        box_dims: &[u32],
        swizzle: TensorSwizzle,
    ) -> Result<TensorMap<'buf>> {
        let buffer: &'buf DeviceBuffer<T> = buffer;
        Self::tiled_tracked(buffer, Access::Write, data_type, dims, box_dims, swizzle)
    }

    fn tiled_tracked<T: bytemuck::Pod>(
        buffer: &'buf DeviceBuffer<T>,
        access: Access,
        data_type: TensorDataType,
        dims: &[u64],
        box_dims: &[u32],
        swizzle: TensorSwizzle,
    ) -> Result<TensorMap<'buf>> {
        let strides = packed_strides(data_type, dims, box_dims, buffer.size_bytes() as u64)?;
        let layout = TiledLayout { data_type, dims, strides_bytes: &strides[..dims.len() - 1], box_dims, swizzle };
        let _bound = buffer.context().bind()?;
        // SAFETY: the buffer holds the whole array (checked) and allocations are 256-byte
        // aligned; the map borrows it for `'buf` and its launches declare `access` to it.
        unsafe { TensorMap::encode(buffer.device_ptr(), &layout, Memory::Tracked(buffer.usage(), access)) }
    }

    /// [`TensorMap::tiled`] of any device memory a kernel may read (a buffer, a view of one,
    /// a borrowed slice): a map of the packed row-major array of `dims` (innermost first) at
    /// the start of `source`, borrowing `source` for `'buf`; every launch that passes it
    /// declares a read of that memory, as for a `&[T]` argument (nothing for a borrowed
    /// slice, whose owner orders it).
    ///
    /// # Errors
    /// As for [`TensorMap::tiled`]; `CUDA_ERROR_INVALID_VALUE` also when `source` does not
    /// start 16-byte aligned (TMA's rule: a view that starts inside a buffer may not).
    pub fn tiled_view<T: bytemuck::Pod>(
        source: &'buf (impl crate::DeviceRead<T> + ?Sized),
        data_type: TensorDataType,
        dims: &[u64],
        box_dims: &[u32],
        swizzle: TensorSwizzle,
    ) -> Result<TensorMap<'buf>> {
        let arg = source.kernel_arg();
        let bytes = (arg.len as u64).saturating_mul(std::mem::size_of::<T>() as u64);
        let strides = packed_strides(data_type, dims, box_dims, bytes)?;
        if !arg.ptr.is_multiple_of(16) {
            check("TensorMap::tiled_view (the memory must start 16-byte aligned)", sys::CUresult::CUDA_ERROR_INVALID_VALUE)?;
        }
        let layout = TiledLayout { data_type, dims, strides_bytes: &strides[..dims.len() - 1], box_dims, swizzle };
        let memory = match arg.usage() {
            Some(usage) => Memory::Tracked(usage, Access::Read),
            None => Memory::Untracked,
        };
        // SAFETY: `source` holds the whole array (checked against its length) from a 16-byte
        // aligned address (checked); it is device memory of the context its launches run in
        // (the door refuses a launch on another context's stream); the map borrows it for
        // `'buf`, and its launches declare a read of it (tracked memory) or leave its ordering
        // to its owner, exactly as a `&[T]` argument of the same memory would.
        unsafe { TensorMap::encode(arg.ptr, &layout, memory) }
    }

    /// A 2-D row-major map of `rows x cols` elements of `buffer` (row stride `cols`), copied in
    /// boxes of `box_rows x box_cols`: [`TensorMap::tiled`] with `dims = [cols, rows]`.
    ///
    /// # Errors
    /// As for [`TensorMap::tiled`].
    pub fn tiled_2d<T: bytemuck::Pod>(
        buffer: &'buf DeviceBuffer<T>,
        data_type: TensorDataType,
        rows: u64,
        cols: u64,
        box_rows: u32,
        box_cols: u32,
        swizzle: TensorSwizzle,
    ) -> Result<TensorMap<'buf>> {
        TensorMap::tiled(buffer, data_type, &[cols, rows], &[box_cols, box_rows], swizzle)
    }

    /// [`TensorMap::tiled_2d`] for kernels that write the array: see [`TensorMap::tiled_mut`].
    ///
    /// # Errors
    /// As for [`TensorMap::tiled`].
    #[allow(clippy::too_many_arguments)] // the 2-D shape and box spelled out, as in `tiled_2d`
    pub fn tiled_2d_mut<T: bytemuck::Pod>(
        buffer: &'buf mut DeviceBuffer<T>,
        data_type: TensorDataType,
        rows: u64,
        cols: u64,
        box_rows: u32,
        box_cols: u32,
        swizzle: TensorSwizzle,
    ) -> Result<TensorMap<'buf>> {
        TensorMap::tiled_mut(buffer, data_type, &[cols, rows], &[box_cols, box_rows], swizzle)
    }

    /// A map for the CPU executor, which cannot read the driver's opaque encoding: the layout
    /// in plain fields (`ferrocuda_device::hopper::emu::EmulatedMap`: magic "ferroTMA",
    /// address, rank, element size, swizzle 0/1/2/3, dims, box, strides). It never reaches a
    /// GPU through ferrocuda: [`TensorMap::to_device`] refuses it (its raw words, from
    /// [`TensorMap::words`], are for `unsafe` code).
    ///
    /// # Errors
    /// `CUDA_ERROR_INVALID_VALUE` when the rank is not 1..=5 or the slices disagree with it.
    pub fn emulated(address: u64, layout: &TiledLayout<'_>) -> Result<TensorMap<'static>> {
        let rank = layout.dims.len();
        if !(1..=5).contains(&rank) || layout.strides_bytes.len() + 1 != rank || layout.box_dims.len() != rank {
            check("TensorMap::emulated", sys::CUresult::CUDA_ERROR_INVALID_VALUE)?;
        }
        let mut bytes = [0u8; 128];
        let mut put = |at: usize, value: &[u8]| bytes[at..at + value.len()].copy_from_slice(value);
        put(0, &0x6665_7272_6f54_4d41u64.to_le_bytes());
        put(8, &address.to_le_bytes());
        put(16, &(rank as u32).to_le_bytes());
        put(20, &(layout.data_type.size() as u32).to_le_bytes());
        let swizzle: u32 = match layout.swizzle {
            TensorSwizzle::None => 0,
            TensorSwizzle::B32 => 1,
            TensorSwizzle::B64 => 2,
            TensorSwizzle::B128 => 3,
        };
        put(24, &swizzle.to_le_bytes());
        for d in 0..rank {
            put(32 + 4 * d, &(layout.dims[d] as u32).to_le_bytes());
            put(52 + 4 * d, &layout.box_dims[d].to_le_bytes());
        }
        for (d, stride) in layout.strides_bytes.iter().enumerate() {
            put(72 + 8 * d, &stride.to_le_bytes());
        }
        let mut opaque = [0u64; 16];
        for (word, chunk) in opaque.iter_mut().zip(bytes.chunks_exact(8)) {
            *word = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        }
        Ok(TensorMap { raw: sys::CUtensorMap { opaque }, memory: Memory::Emulated })
    }

    /// The 128 bytes, as the device's `ferrocuda_device::tma::TensorMap` holds them. Using
    /// them as a map on the GPU (a raw pointer kernel parameter) is `unsafe` code's business:
    /// it must keep the memory behind the map alive and ordered itself.
    pub fn words(&self) -> [u64; 16] {
        self.raw.opaque
    }

    /// A copy of the map in device memory (64-byte aligned) for a `#[kernel]` parameter
    /// `map: &TensorMap`, keeping the map's borrow of its buffer: each launch that passes it
    /// declares the map's copy (read) and the memory behind the map (read, or written for a
    /// [`TensorMap::tiled_mut`] map).
    ///
    /// # Errors
    /// Allocation or copy failures; `CUDA_ERROR_INVALID_VALUE` for an
    /// [`emulated`](TensorMap::emulated) map (its layout is not the driver's: a GPU would
    /// misread it).
    pub fn to_device(self, context: &Context) -> Result<DeviceTensorMap<'buf>> {
        let (usage, access) = match self.memory {
            Memory::Tracked(usage, access) => (Some(usage), access),
            Memory::Untracked => (None, Access::Read),
            Memory::Emulated => {
                // Refused: the call name says why.
                let call = "TensorMap::to_device (an emulated map is for the CPU executor)";
                return Err(crate::DriverError { call, code: sys::CUresult::CUDA_ERROR_INVALID_VALUE }.into());
            }
        };
        let words = DeviceBuffer::from_slice(context, &[self.raw.opaque])?;
        Ok(DeviceTensorMap { words, usage, access, _not_sync: PhantomData })
    }

    /// [`TensorMap::to_device`] queued on `stream`: the copy's memory is allocated on the
    /// stream (`cuMemAllocAsync`) and the 128 bytes copied in stream order, so nothing blocks
    /// the host, as a library call that makes its maps per call needs. The copy is declared
    /// like any write, so launches on other streams wait for it.
    ///
    /// # Errors
    /// As for [`TensorMap::to_device`]; [`Error::AllocationInCapture`](crate::Error) while
    /// `stream` is being captured into a graph, and [`Error::CallMemoryInCapture`](crate::Error)
    /// if another thread began capturing it during the call (the copy reads this call's
    /// stack, which a replay of the graph would read again; audit 2026-11-28, S1): make the
    /// map before the capture.
    pub fn to_device_async(self, stream: &crate::Stream) -> Result<DeviceTensorMap<'buf>> {
        let (usage, access) = match self.memory {
            Memory::Tracked(usage, access) => (Some(usage), access),
            Memory::Untracked => (None, Access::Read),
            Memory::Emulated => {
                let call = "TensorMap::to_device_async (an emulated map is for the CPU executor)";
                return Err(crate::DriverError { call, code: sys::CUresult::CUDA_ERROR_INVALID_VALUE }.into());
            }
        };
        // Refused inside a capture (`AllocationInCapture`).
        let mut words = DeviceBuffer::<[u64; 16]>::zeroed_async(stream, 1)?;
        // The copy reads this stack frame: no capture may record it (S1). Until the copy is
        // queued no capture can start on `stream`; one that started since the allocation
        // refuses the call here.
        let stretch = stream.hold_off_capture("TensorMap::to_device_async")?;
        let (destination, source) = (words.device_ptr(), self.raw.opaque);
        stream.enqueue("TensorMap::to_device_async", &[BufferAccess::write(&mut words)], |raw| {
            // SAFETY: `destination` is the 128 bytes of device memory just allocated in the
            // stream's context, declared written above; the source is `source` on this stack
            // frame: a copy from pageable host memory has staged it when the call returns, and
            // the stretch above keeps the copy out of any graph (which would read it again).
            check("cuMemcpyHtoDAsync", unsafe { sys::cuMemcpyHtoDAsync_v2(destination, source.as_ptr().cast(), 128, raw.get()) }).map_err(crate::Error::from)
        })?;
        drop(stretch);
        Ok(DeviceTensorMap { words, usage, access, _not_sync: PhantomData })
    }

    /// A copy of the map's words in device memory with no borrow, for kernels that take the
    /// map as a raw pointer (`*const TensorMap`, an `unsafe` launch): the caller keeps the
    /// memory behind the map alive and orders its uses (e.g. with
    /// [`Stream::will_use`](crate::Stream::will_use)).
    ///
    /// # Errors
    /// Allocation or copy failures.
    pub fn to_device_untracked(&self, context: &Context) -> Result<DeviceBuffer<[u64; 16]>> {
        DeviceBuffer::from_slice(context, &[self.raw.opaque])
    }

    /// How launches use the memory behind the map: `Some(Read)` for [`TensorMap::tiled`],
    /// `Some(Write)` for [`TensorMap::tiled_mut`], `None` for a map of a raw address.
    pub fn access(&self) -> Option<Access> {
        match self.memory {
            Memory::Tracked(_, access) => Some(access),
            Memory::Untracked | Memory::Emulated => None,
        }
    }
}

/// A tensor map in device memory, as a `#[kernel]` parameter `map: &TensorMap` takes it
/// (made by [`TensorMap::to_device`]). It keeps the map's borrow of its buffer for `'buf`.
/// Each launch that passes it declares, through the stream's door, a read of this copy and
/// the map's access to the memory behind it ([`TensorMap::access`]). Not `Sync` (see the
/// module docs): one thread at a time launches with it.
pub struct DeviceTensorMap<'buf> {
    words: DeviceBuffer<[u64; 16]>,
    usage: Option<&'buf BufferUsage>,
    access: Access,
    _not_sync: PhantomData<Cell<()>>,
}

impl DeviceTensorMap<'_> {
    /// The device address of the map (64-byte aligned), what the kernel receives.
    pub fn device_ptr(&self) -> u64 {
        self.words.device_ptr()
    }

    /// How launches use the memory behind the map (see [`TensorMap::access`]).
    pub fn access(&self) -> Option<Access> {
        self.usage.map(|_| self.access)
    }

    /// The address the generated launcher passes (see `device_ptr`).
    #[doc(hidden)]
    #[inline(always)]
    pub fn kernel_arg(&self) -> u64 {
        self.words.device_ptr()
    }

    /// The address the generated launcher passes for a `&StoreMap` parameter `parameter` of
    /// `kernel`: refused unless the map was made for writes ([`TensorMap::tiled_mut`]) or of a
    /// raw address ([`TensorMap::encode_tiled`], whose caller vouches for its memory).
    #[doc(hidden)]
    #[inline]
    pub fn store_arg(&mut self, kernel: &'static str, parameter: &'static str) -> Result<u64> {
        if self.usage.is_some() && self.access != Access::Write {
            return Err(crate::Error::TensorMapNotForStores { kernel, parameter });
        }
        Ok(self.words.device_ptr())
    }

    /// The launch reads the map's own device copy (written by the upload on the legacy
    /// stream: a launch on another stream waits for it).
    #[doc(hidden)]
    #[inline(always)]
    pub fn map_access(&self, name: &'static str) -> BufferAccess<'_> {
        BufferAccess::new(Some(self.words.usage()), Access::Read, name)
    }

    /// The launch's access to the memory behind the map (none declared for a raw-address map:
    /// `encode_tiled`'s caller orders it).
    #[doc(hidden)]
    #[inline(always)]
    pub fn memory_access(&self, name: &'static str) -> BufferAccess<'_> {
        BufferAccess::new(self.usage, self.access, name)
    }
}

/// A tensor map parameter of one launch: the map's device copy, its address and the two
/// accesses the launch declares, made from the map itself ([`MapArg::load`], or
/// [`MapArg::store`] through `&mut`), so that the address a launch passes and the memory it
/// declares come from one real map whatever path the generated launcher named them by
/// (session 18, G17R-2's residual: `DeviceTensorMap::kernel_arg` gave a bare `u64`).
#[doc(hidden)]
#[derive(Debug)]
pub struct MapArg<'a> {
    map: &'a DeviceTensorMap<'a>,
    address: u64,
}

impl<'a> MapArg<'a> {
    /// A `&TensorMap` parameter's argument.
    #[inline(always)]
    pub fn load(map: &'a DeviceTensorMap<'_>) -> Self {
        MapArg { address: map.kernel_arg(), map }
    }

    /// A `&StoreMap` parameter `parameter` of `kernel`: refused unless the map was made for
    /// writes ([`DeviceTensorMap::store_arg`]).
    ///
    /// # Errors
    /// [`crate::Error::TensorMapNotForStores`].
    #[inline(always)]
    pub fn store(map: &'a mut DeviceTensorMap<'_>, kernel: &'static str, parameter: &'static str) -> Result<Self> {
        let address = map.store_arg(kernel, parameter)?;
        Ok(MapArg { address, map })
    }

    /// The launch reads the map's device copy.
    #[inline(always)]
    pub fn map_access(&self, name: &'static str) -> BufferAccess<'a> {
        self.map.map_access(name)
    }

    /// The launch's access to the memory behind the map.
    #[inline(always)]
    pub fn memory_access(&self, name: &'static str) -> BufferAccess<'a> {
        self.map.memory_access(name)
    }

    /// Where the address is kept (the launch parameter's value).
    #[inline(always)]
    pub(crate) fn address_ref(&self) -> &u64 {
        &self.address
    }
}

impl std::fmt::Debug for DeviceTensorMap<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceTensorMap").field("ptr", &format_args!("{:#x}", self.device_ptr())).field("access", &self.access()).finish()
    }
}

/// The byte strides of dimensions 1.. of a packed row-major array (`dims` innermost first),
/// after checking the rank, the box's rank and that `buffer_bytes` hold the whole array.
fn packed_strides(data_type: TensorDataType, dims: &[u64], box_dims: &[u32], buffer_bytes: u64) -> Result<[u64; 4]> {
    let invalid = || check("TensorMap::tiled", sys::CUresult::CUDA_ERROR_INVALID_VALUE);
    if !(1..=5).contains(&dims.len()) || box_dims.len() != dims.len() {
        invalid()?;
    }
    // `None` when the product overflows: no buffer can hold such an array.
    let bytes = dims.iter().try_fold(data_type.size(), |bytes, &extent| bytes.checked_mul(extent));
    if bytes.is_none_or(|bytes| bytes > buffer_bytes) {
        invalid()?;
    }
    let mut strides = [0u64; 4];
    let mut stride = data_type.size();
    for (d, &extent) in dims.iter().enumerate().take(dims.len() - 1) {
        stride *= extent;
        strides[d] = stride;
    }
    Ok(strides)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_strides_are_products_of_the_inner_dimensions() {
        let strides = packed_strides(TensorDataType::U16, &[16, 3, 4, 2, 5], &[16, 2, 2, 2, 3], 1920 * 2).unwrap();
        assert_eq!(strides, [32, 96, 384, 768]);
        assert_eq!(packed_strides(TensorDataType::F32, &[256], &[64], 1024).unwrap(), [0; 4]);
    }

    #[test]
    fn a_buffer_smaller_than_the_array_is_refused() {
        assert!(packed_strides(TensorDataType::U16, &[16, 8, 4], &[16, 4, 2], 16 * 8 * 4 * 2 - 1).is_err());
        assert!(packed_strides(TensorDataType::U16, &[16, 8, 4], &[16, 4, 2], 16 * 8 * 4 * 2).is_ok());
        assert!(packed_strides(TensorDataType::U8, &[1 << 40, 1 << 30], &[16, 1], u64::MAX).is_err());
    }

    #[test]
    fn ranks_outside_one_to_five_and_mismatched_boxes_are_refused() {
        assert!(packed_strides(TensorDataType::U16, &[], &[], 1 << 20).is_err());
        assert!(packed_strides(TensorDataType::U16, &[2, 2, 2, 2, 2, 2], &[2, 2, 2, 2, 2, 2], 1 << 20).is_err());
        assert!(packed_strides(TensorDataType::U16, &[16, 8], &[16], 1 << 20).is_err());
    }
}
