//! Thread-block clusters and distributed shared memory (Hopper, sm_90 and newer).
//!
//! This module exists only in device builds for sm_90 or newer (and on the host): code for
//! older GPUs that uses it does not compile, rather than failing at run time. A kernel that
//! needs it says so, so that it is left out of older PTX:
//! ```ignore
//! #[kernel]
//! #[cfg_attr(target_arch = "nvptx64", cfg(ferrocuda_sm = "90"))]
//! pub fn exchange(out: DisjointSlice<u32>) { /* uses ferrocuda_device::cluster */ }
//! ```
//! Launch such a kernel with cluster dimensions (`LaunchConfig::with_cluster`).

use crate::shared::SharedArray;

/// This block's rank within its cluster (`%cluster_ctarank`).
#[inline(always)]
pub fn block_rank() -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: reads a special register.
        unsafe { core::arch::asm!("mov.u32 {r}, %cluster_ctarank;", r = out(reg32) r, options(pure, nomem, nostack)) };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::cpu::hooks::cluster_block_rank()
}

/// Blocks in this cluster (`%cluster_nctarank`).
#[inline(always)]
pub fn size() -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: reads a special register.
        unsafe { core::arch::asm!("mov.u32 {r}, %cluster_nctarank;", r = out(reg32) r, options(pure, nomem, nostack)) };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::cpu::hooks::cluster_size()
}

/// Cluster-wide barrier (`barrier.cluster.arrive` + `barrier.cluster.wait`, which release and acquire by default):
/// every thread of every block of the cluster must reach it; shared-memory writes before it
/// are visible to the cluster's other blocks after it. Not the `.aligned` forms, for the reason
/// given in [`crate::sync`]'s module docs.
#[inline(always)]
pub fn sync() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a barrier; every thread of the cluster reaches it, as in CUDA's cluster.sync().
    unsafe {
        core::arch::asm!("barrier.cluster.arrive;", "barrier.cluster.wait;", options(nostack));
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::cpu::hooks::cluster_sync()
}

/// Element `index` of the same `shared_array!` in block `rank` of this cluster (distributed
/// shared memory: `mapa.shared::cluster` then `ld.shared::cluster`).
///
/// It is `unsafe` because the peer block's shared memory exists only while that block runs:
/// a read from a block that has exited faults the kernel (audit finding N6), and no safe
/// shape can rule that out, since a thread that exits *releases* the cluster barrier its
/// peers wait at (PTX `exit`), so even "read only between two `sync()`s" reaches an exited
/// block when that block returned early.
///
/// ```ignore
/// cluster::sync(); // every block has written `values`
/// // SAFETY: every thread of every block of the cluster passes both `sync()`s (no early
/// // return above or between them), so block `next` is running and has written `values`.
/// let v = unsafe { cluster::peer_get(&values, next, t) };
/// cluster::sync(); // no block exits before every peer has read
/// ```
///
/// # Safety
/// - Block `rank` has not exited and does not exit before this read completes: every thread
///   of that block reaches a [`sync`] after this call (a barrier that this thread also
///   reaches after the read), and none of them has exited before it.
/// - No thread writes element `index` of `array` in block `rank` between the last [`sync`]
///   before this read and the first one after it (the barrier orders the write before the
///   read; a concurrent write is a data race).
///
/// # Panics
/// When `index` is out of bounds or `rank` is not a block of this cluster.
#[inline(always)]
#[track_caller]
pub unsafe fn peer_get<const N: usize>(array: &SharedArray<u32, N>, rank: u32, index: usize) -> u32 {
    assert!(index < N, "shared memory index out of bounds: the len is {N} but the index is {index}");
    // Mapping to a rank outside the cluster is undefined in PTX.
    assert!(rank < size(), "cluster rank out of range");
    #[cfg(target_arch = "nvptx64")]
    {
        let local = array.shared_address() + (index * core::mem::size_of::<u32>()) as u32;
        let value: u32;
        // SAFETY: maps an in-bounds address of our own array to the same array in block
        // `rank` (< size, checked) of the cluster and loads it; the caller guarantees that the
        // block is running and that the element is not written concurrently.
        unsafe {
            core::arch::asm!(
                "{{ .reg .u32 remote; mapa.shared::cluster.u32 remote, {a}, {r}; ld.shared::cluster.u32 {v}, [remote]; }}",
                a = in(reg32) local, r = in(reg32) rank, v = out(reg32) value, options(nostack, readonly),
            );
        }
        value
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        crate::cpu::hooks::cluster_peer_load_u32(array.shared_address() + (index * core::mem::size_of::<u32>()) as u32, rank)
    }
}
