//! The Tensor Memory Accelerator (TMA, sm_90): bulk copies of tiles between global and shared
//! memory described by a tensor map (`cp.async.bulk.tensor`).
//!
//! A [`TensorMap`] (128 bytes, built on the host by `cuTensorMapEncodeTiled`, see
//! `ferrocuda_host::TensorMap`) describes a 1-5-D array in global memory, the box (tile) shape
//! and the shared-memory swizzle. **How it reaches the kernel**: rustc cannot pass a 64-byte
//! aligned struct by value to a kernel (rustc 1.96 ICEs: "Align is given as power of 2 no larger
//! than 16 bytes"), so the map lives in global memory (written by the host before the launch)
//! and the kernel gets a pointer. Before the first use, one thread that will issue copies calls
//! [`TensorMap::acquire`] (`fence.proxy.tensormap::generic.acquire.gpu`), which orders the
//! generic-proxy writes of the map before the tensor-map proxy's reads, as the PTX memory model
//! requires for tensor maps in global memory.
//!
//! **As a `#[kernel]` parameter**, write `map: &TensorMap` for loads and `dst: &StoreMap` for
//! stores: the host launcher then takes a `ferrocuda_host::DeviceTensorMap` (from
//! `TensorMap::tiled(&buffer, ..)?.to_device(..)`; for a `&StoreMap`, `&mut` of one made by
//! `tiled_mut(&mut buffer, ..)`, other maps refused), which borrows the buffer behind the map
//! and declares the launch's read (or write) of it, so the map is valid and its memory
//! allocated and ordered with other streams for as long as the kernel runs: the pointer meets
//! the contract of [`TensorMap::acquire`] and of the loads (and, for a `&StoreMap`, of the
//! stores). Never store through a `&TensorMap` parameter: its memory may be read elsewhere at
//! the same time. The box coordinates, shared destinations and barriers remain the kernel's
//! `unsafe` business.
//!
//! A load ([`TensorMap::load_2d`]) is issued by one thread, runs in the background and signals
//! an [`MBarrier`](crate::mbarrier::MBarrier) with the bytes it delivered (`complete_tx`).
//! Cost: one instruction to issue; the copy engine moves ~the full L2 bandwidth with few
//! instructions. Shared destinations must be 128-byte aligned (1024 for the 128-byte swizzle).
//!
//! On the host (the CPU executor) loads are emulated (`hopper::emu`): tensor maps made by
//! `ferrocuda_host::TensorMap::emulated`, copy done at issue; stores are device only.
//!
//! PTX: `cp.async.bulk.tensor.{1..5}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes`,
//! `prefetch.tensormap`, `fence.proxy.tensormap::generic.acquire.gpu` (PTX ISA 8.3),
//! `fence.proxy.async.shared::cta`.

/// A CUDA tensor map (`CUtensorMap`): 128 opaque bytes, 64-byte aligned.
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug)]
pub struct TensorMap(pub [u64; 16]);

/// A tensor map that a kernel may store through: what a `#[kernel]` parameter `dst: &StoreMap`
/// receives. Its host launcher takes `&mut DeviceTensorMap` of a map made with
/// `TensorMap::tiled_mut` (refused otherwise), so the memory behind it is borrowed
/// exclusively on the host and each launch declares a write of it: nothing else touches it
/// while the kernel runs, as the TMA stores' contract asks. A `&TensorMap` parameter is for
/// loads only (its memory may be read by other work at the same time): never store through it.
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
pub struct StoreMap(pub TensorMap);

// SAFETY (both): the key of the type's own name, size and alignment, as for a primitive: the
// types of `&TensorMap` / `&StoreMap` kernel parameters, compared between the host and the
// device build like any element type (audit 2026-11-28e, G17R-4: a tensor map parameter's type
// was compared by nothing, and a `cfg`-chosen `use Wide as TensorMap` passed).
unsafe impl crate::LayoutKey for TensorMap {
    const LAYOUT_KEY: u64 = crate::layout_key::start("ferrocuda_device::tma::TensorMap", core::mem::size_of::<TensorMap>(), core::mem::align_of::<TensorMap>());
}
// SAFETY: as above.
unsafe impl crate::LayoutKey for StoreMap {
    const LAYOUT_KEY: u64 = crate::layout_key::start("ferrocuda_device::tma::StoreMap", core::mem::size_of::<StoreMap>(), core::mem::align_of::<StoreMap>());
}

impl StoreMap {
    /// The map's address, for the copies of [`TensorMap`] (loads and stores).
    #[inline(always)]
    pub fn as_ptr(&self) -> *const TensorMap {
        &self.0
    }
}

impl TensorMap {
    /// Orders the host's (generic-proxy) writes of the map at `map` before this thread's copies
    /// that read it (`fence.proxy.tensormap::generic.acquire.gpu [map], 128`).
    ///
    /// # Safety
    /// `map` points to a valid tensor map in global memory that stays unchanged while in use.
    #[inline(always)]
    pub unsafe fn acquire(map: *const TensorMap) {
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: the caller's contract; a fence reading nothing but the map's address.
        unsafe {
            core::arch::asm!("fence.proxy.tensormap::generic.acquire.gpu [{m}], 128;", m = in(reg64) map, options(nostack))
        };
        #[cfg(not(target_arch = "nvptx64"))]
        let _ = map;
    }

    /// Brings the map into the descriptor cache ahead of the first copy (`prefetch.tensormap`).
    ///
    /// # Safety
    /// As for [`TensorMap::acquire`].
    #[inline(always)]
    pub unsafe fn prefetch(map: *const TensorMap) {
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: a prefetch; the caller vouches for the address.
        unsafe {
            core::arch::asm!("prefetch.tensormap [{m}];", m = in(reg64) map, options(nostack))
        };
        #[cfg(not(target_arch = "nvptx64"))]
        let _ = map;
    }

    /// Starts copying the box at element coordinates `(x, y)` (`x` innermost) of the 2-D map
    /// at `map` into shared memory at `dst`; its bytes complete on the barrier `bar`.
    ///
    /// # Safety
    /// `map` as in [`TensorMap::acquire`] (acquired by this thread), a 2-D map; `dst` is a
    /// shared-window address aligned as the map's swizzle requires, with room for the box, not
    /// read or written by anyone else until `bar`'s phase completes; `bar` is an initialised
    /// barrier that expects these bytes.
    #[inline(always)]
    pub unsafe fn load_2d(map: *const TensorMap, dst: u32, bar: crate::mbarrier::MBarrier, x: i32, y: i32) {
        #[cfg(not(target_arch = "nvptx64"))]
        crate::hopper::emu::tma_load(map.cast(), dst, bar.address(), &[x, y]);
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: the caller's contract.
        unsafe {
            core::arch::asm!(
                "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{d}], [{m}, {{{x}, {y}}}], [{b}];",
                d = in(reg32) dst, m = in(reg64) map, x = in(reg32) x, y = in(reg32) y, b = in(reg32) bar.address(), options(nostack)
            )
        };
    }

    /// As [`TensorMap::load_2d`], delivering the box to the same shared-memory offset `dst` in
    /// every block of the cluster whose bit is set in `mask`, each completing its bytes on its
    /// own barrier at `bar`'s offset (`.multicast::cluster`, sm_90a for best performance).
    ///
    /// # Safety
    /// As for [`TensorMap::load_2d`], in every destination block (launched in a cluster that
    /// contains them; each destination's barrier expects these bytes).
    #[inline(always)]
    pub unsafe fn load_2d_multicast(map: *const TensorMap, dst: u32, bar: crate::mbarrier::MBarrier, x: i32, y: i32, mask: u16) {
        #[cfg(not(target_arch = "nvptx64"))]
        crate::hopper::emu::tma_load_multicast(map.cast(), dst, bar.address(), &[x, y], mask);
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: the caller's contract.
        unsafe {
            core::arch::asm!(
                "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [{d}], [{m}, {{{x}, {y}}}], [{b}], {k};",
                d = in(reg32) dst, m = in(reg64) map, x = in(reg32) x, y = in(reg32) y, b = in(reg32) bar.address(), k = in(reg16) mask, options(nostack)
            )
        };
    }

    /// As [`TensorMap::load_2d`] for a 3-D map (`x` innermost).
    ///
    /// # Safety
    /// As for [`TensorMap::load_2d`], with a 3-D map.
    #[inline(always)]
    pub unsafe fn load_3d(map: *const TensorMap, dst: u32, bar: crate::mbarrier::MBarrier, x: i32, y: i32, z: i32) {
        #[cfg(not(target_arch = "nvptx64"))]
        crate::hopper::emu::tma_load(map.cast(), dst, bar.address(), &[x, y, z]);
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: the caller's contract.
        unsafe {
            core::arch::asm!(
                "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{d}], [{m}, {{{x}, {y}, {z}}}], [{b}];",
                d = in(reg32) dst, m = in(reg64) map, x = in(reg32) x, y = in(reg32) y, z = in(reg32) z, b = in(reg32) bar.address(), options(nostack)
            )
        };
    }

    /// As [`TensorMap::load_2d`] for a 1-D map.
    ///
    /// # Safety
    /// As for [`TensorMap::load_2d`], with a 1-D map.
    #[inline(always)]
    pub unsafe fn load_1d(map: *const TensorMap, dst: u32, bar: crate::mbarrier::MBarrier, x: i32) {
        #[cfg(not(target_arch = "nvptx64"))]
        crate::hopper::emu::tma_load(map.cast(), dst, bar.address(), &[x]);
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: the caller's contract.
        unsafe {
            core::arch::asm!(
                "cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{d}], [{m}, {{{x}}}], [{b}];",
                d = in(reg32) dst, m = in(reg64) map, x = in(reg32) x, b = in(reg32) bar.address(), options(nostack)
            )
        };
    }

    /// As [`TensorMap::load_2d`] for a 4-D map (`c[0]` innermost).
    ///
    /// # Safety
    /// As for [`TensorMap::load_2d`], with a 4-D map.
    #[inline(always)]
    pub unsafe fn load_4d(map: *const TensorMap, dst: u32, bar: crate::mbarrier::MBarrier, c: [i32; 4]) {
        #[cfg(not(target_arch = "nvptx64"))]
        crate::hopper::emu::tma_load(map.cast(), dst, bar.address(), &c);
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: the caller's contract.
        unsafe {
            core::arch::asm!(
                "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{d}], [{m}, {{{c0}, {c1}, {c2}, {c3}}}], [{b}];",
                d = in(reg32) dst, m = in(reg64) map, c0 = in(reg32) c[0], c1 = in(reg32) c[1], c2 = in(reg32) c[2], c3 = in(reg32) c[3],
                b = in(reg32) bar.address(), options(nostack)
            )
        };
    }

    /// As [`TensorMap::load_2d`] for a 5-D map (`c[0]` innermost).
    ///
    /// # Safety
    /// As for [`TensorMap::load_2d`], with a 5-D map.
    #[inline(always)]
    pub unsafe fn load_5d(map: *const TensorMap, dst: u32, bar: crate::mbarrier::MBarrier, c: [i32; 5]) {
        #[cfg(not(target_arch = "nvptx64"))]
        crate::hopper::emu::tma_load(map.cast(), dst, bar.address(), &c);
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: the caller's contract.
        unsafe {
            core::arch::asm!(
                "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{d}], [{m}, {{{c0}, {c1}, {c2}, {c3}, {c4}}}], [{b}];",
                d = in(reg32) dst, m = in(reg64) map, c0 = in(reg32) c[0], c1 = in(reg32) c[1], c2 = in(reg32) c[2], c3 = in(reg32) c[3], c4 = in(reg32) c[4],
                b = in(reg32) bar.address(), options(nostack)
            )
        };
    }

    /// Starts storing the box in shared memory at `src` to coordinates `(x, y)` of the 2-D map
    /// (`cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group`); finish with
    /// [`store_commit`] and [`store_wait_read`] / [`store_wait`]. Box elements outside the
    /// array are not written. Cost: one instruction from one thread; the copy engine moves the
    /// box while the thread goes on.
    ///
    /// # Safety
    /// `map` as in [`TensorMap::load_2d`]; `src` is aligned as the map's swizzle requires
    /// (1024 bytes for the 128-byte swizzle) and holds the box, written before a
    /// [`fence_proxy_async_shared`] by each writing thread and a block barrier, and stays
    /// unchanged until [`store_wait_read`] returns; no other thread or kernel reads or writes
    /// the box's part of the array until [`store_wait`] returns (the store is a write by this
    /// thread that lasts until then).
    ///
    /// On the CPU executor the store happens at once.
    #[inline(always)]
    pub unsafe fn store_2d(map: *const TensorMap, src: u32, x: i32, y: i32) {
        #[cfg(not(target_arch = "nvptx64"))]
        crate::hopper::emu::tma_store(map.cast(), src, &[x, y]);
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: the caller's contract.
        unsafe {
            core::arch::asm!(
                "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [{m}, {{{x}, {y}}}], [{s}];",
                m = in(reg64) map, x = in(reg32) x, y = in(reg32) y, s = in(reg32) src, options(nostack)
            )
        };
    }

    /// As [`TensorMap::store_2d`] for a 1-D map.
    ///
    /// # Safety
    /// As for [`TensorMap::store_2d`], with a 1-D map.
    #[inline(always)]
    pub unsafe fn store_1d(map: *const TensorMap, src: u32, x: i32) {
        #[cfg(not(target_arch = "nvptx64"))]
        crate::hopper::emu::tma_store(map.cast(), src, &[x]);
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: the caller's contract.
        unsafe {
            core::arch::asm!(
                "cp.async.bulk.tensor.1d.global.shared::cta.tile.bulk_group [{m}, {{{x}}}], [{s}];",
                m = in(reg64) map, x = in(reg32) x, s = in(reg32) src, options(nostack)
            )
        };
    }

    /// As [`TensorMap::store_2d`] for a 3-D map (`x` innermost).
    ///
    /// # Safety
    /// As for [`TensorMap::store_2d`], with a 3-D map.
    #[inline(always)]
    pub unsafe fn store_3d(map: *const TensorMap, src: u32, x: i32, y: i32, z: i32) {
        #[cfg(not(target_arch = "nvptx64"))]
        crate::hopper::emu::tma_store(map.cast(), src, &[x, y, z]);
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: the caller's contract.
        unsafe {
            core::arch::asm!(
                "cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [{m}, {{{x}, {y}, {z}}}], [{s}];",
                m = in(reg64) map, x = in(reg32) x, y = in(reg32) y, z = in(reg32) z, s = in(reg32) src, options(nostack)
            )
        };
    }

    /// As [`TensorMap::store_2d`] for a 4-D map (`c[0]` innermost).
    ///
    /// # Safety
    /// As for [`TensorMap::store_2d`], with a 4-D map.
    #[inline(always)]
    pub unsafe fn store_4d(map: *const TensorMap, src: u32, c: [i32; 4]) {
        #[cfg(not(target_arch = "nvptx64"))]
        crate::hopper::emu::tma_store(map.cast(), src, &c);
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: the caller's contract.
        unsafe {
            core::arch::asm!(
                "cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [{m}, {{{c0}, {c1}, {c2}, {c3}}}], [{s}];",
                m = in(reg64) map, c0 = in(reg32) c[0], c1 = in(reg32) c[1], c2 = in(reg32) c[2], c3 = in(reg32) c[3], s = in(reg32) src,
                options(nostack)
            )
        };
    }

    /// As [`TensorMap::store_2d`] for a 5-D map (`c[0]` innermost).
    ///
    /// # Safety
    /// As for [`TensorMap::store_2d`], with a 5-D map.
    #[inline(always)]
    pub unsafe fn store_5d(map: *const TensorMap, src: u32, c: [i32; 5]) {
        #[cfg(not(target_arch = "nvptx64"))]
        crate::hopper::emu::tma_store(map.cast(), src, &c);
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: the caller's contract.
        unsafe {
            core::arch::asm!(
                "cp.async.bulk.tensor.5d.global.shared::cta.tile.bulk_group [{m}, {{{c0}, {c1}, {c2}, {c3}, {c4}}}], [{s}];",
                m = in(reg64) map, c0 = in(reg32) c[0], c1 = in(reg32) c[1], c2 = in(reg32) c[2], c3 = in(reg32) c[3], c4 = in(reg32) c[4],
                s = in(reg32) src, options(nostack)
            )
        };
    }
}

/// Adds `bytes / 4` consecutive f32 of shared memory at `src` to the f32 at `dst` in global
/// memory, element by element, through the copy engine
/// (`cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32`): one thread issues it, the
/// adds are atomic per element (other adds to the same elements, from any block, may run at the
/// same time), and it joins this thread's bulk group like a TMA store ([`store_commit`],
/// [`store_wait_read`] before `src` is rewritten, [`store_wait`] before the block exits).
///
/// # Safety
/// `dst` is 16-byte aligned global memory holding `bytes / 4` f32 that only atomic adds touch
/// while the kernel runs; `src` is 16-byte aligned, inside this block's shared memory, and
/// holds the values, written before a [`fence_proxy_async_shared`] by each writing thread and
/// a barrier with this thread, unchanged until [`store_wait_read`] returns; `bytes` is a
/// positive multiple of 16.
///
/// On the CPU executor the adds happen at once (the executor's atomics).
#[inline(always)]
pub unsafe fn bulk_reduce_add_f32(dst: *mut f32, src: u32, bytes: u32) {
    #[cfg(not(target_arch = "nvptx64"))]
    crate::hopper::emu::bulk_reduce_add_f32(dst, src, bytes);
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the caller's contract.
    unsafe {
        core::arch::asm!(
            "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [{d}], [{s}], {n};",
            d = in(reg64) dst, s = in(reg32) src, n = in(reg32) bytes, options(nostack)
        )
    };
}

/// Copies `bytes` consecutive bytes of shared memory at `src` to global memory at `dst` through
/// the copy engine (`cp.async.bulk.global.shared::cta.bulk_group`): one thread issues it and goes
/// on; it joins this thread's bulk group like a TMA store ([`store_commit`], [`store_wait_read`]
/// before `src` is rewritten, [`store_wait`] before the block exits). Unlike a tensor store it
/// needs no map: for a tile whose rows are contiguous in global memory (one copy a row, or one
/// for the whole tile when shared memory holds it unpadded).
///
/// # Safety
/// `dst` is 16-byte aligned global memory of `bytes` writable bytes that no other thread or
/// kernel reads or writes until [`store_wait`] returns (the copy is a write by this thread that
/// lasts until then); `src` is 16-byte aligned, inside this block's shared memory, and holds the
/// bytes, written before a [`fence_proxy_async_shared`] by each writing thread and a barrier
/// with this thread, unchanged until [`store_wait_read`] returns; `bytes` is a positive multiple
/// of 16.
///
/// On the CPU executor the copy happens at once.
#[inline(always)]
pub unsafe fn bulk_store(dst: *mut u8, src: u32, bytes: u32) {
    #[cfg(not(target_arch = "nvptx64"))]
    crate::hopper::emu::bulk_store(dst, src, bytes);
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the caller's contract.
    unsafe {
        core::arch::asm!(
            "cp.async.bulk.global.shared::cta.bulk_group [{d}], [{s}], {n};",
            d = in(reg64) dst, s = in(reg32) src, n = in(reg32) bytes, options(nostack)
        )
    };
}

/// Closes the group of bulk stores issued so far by this thread (`cp.async.bulk.commit_group`).
/// Nothing to do on the CPU executor (its stores are done when issued).
#[inline(always)]
pub fn store_commit() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: bookkeeping of this thread's bulk copies.
    unsafe {
        core::arch::asm!("cp.async.bulk.commit_group;", options(nostack))
    };
}

/// Waits until the shared-memory sources of all but the newest `N` store groups may be reused
/// (`cp.async.bulk.wait_group.read N`).
#[inline(always)]
pub fn store_wait_read<const N: u32>() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a wait.
    unsafe {
        core::arch::asm!("cp.async.bulk.wait_group.read {n};", n = const N, options(nostack))
    };
}

/// Waits until all but the newest `N` store groups have completed (`cp.async.bulk.wait_group N`):
/// their writes to global memory are done (visible to this thread; to the rest of the grid
/// after the usual fences or the kernel's end).
#[inline(always)]
pub fn store_wait<const N: u32>() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a wait.
    unsafe {
        core::arch::asm!("cp.async.bulk.wait_group {n};", n = const N, options(nostack))
    };
}

/// Orders this thread's ordinary shared-memory accesses before later accesses by the async
/// proxy (TMA stores, `wgmma` operand reads) (`fence.proxy.async.shared::cta`).
#[inline(always)]
pub fn fence_proxy_async_shared() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a fence.
    unsafe {
        core::arch::asm!("fence.proxy.async.shared::cta;", options(nostack))
    };
}

/// The shared-window address where this block's dynamic shared memory starts (16-byte
/// aligned; round it up for 128- or 1024-byte aligned TMA destinations, and ask for that much
/// more at launch).
#[inline(always)]
pub fn dynamic_shared_address() -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let base: u32;
        // SAFETY: reads the address of the extern shared array that `crate::shared` declares.
        unsafe { core::arch::asm!("mov.u32 {b}, __ferrocuda_dynamic_shared;", b = out(reg32) base, options(pure, nomem, nostack)) };
        base
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::emu::dynamic_shared().0
}
