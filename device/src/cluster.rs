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
/// # Panics
/// When `index` is out of bounds or `rank` is not a block of this cluster.
#[inline(always)]
#[track_caller]
pub fn peer_get<const N: usize>(array: &SharedArray<u32, N>, rank: u32, index: usize) -> u32 {
    assert!(index < N, "shared memory index out of bounds: the len is {N} but the index is {index}");
    // Mapping to a rank outside the cluster is undefined in PTX.
    assert!(rank < size(), "cluster rank out of range");
    #[cfg(target_arch = "nvptx64")]
    {
        let local = array.shared_address() + (index * core::mem::size_of::<u32>()) as u32;
        let value: u32;
        // SAFETY: maps an in-bounds address of our own array to the same array in block
        // `rank` of the cluster and loads it; the caller synchronised the cluster before.
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
