//! Peer access between contexts (usually on two GPUs): kernels of one using memory of the other.

use cudarc::driver::sys;

use std::sync::{Arc, Weak};

use super::{Context, lock};
use crate::driver;
use crate::error::{Error, Result};

impl Context {
    /// True when kernels of this context may use memory of `other` (the same context, or a
    /// peer after [`Context::enable_peer_access`]).
    pub(crate) fn can_use_memory_of(&self, other: sys::CUcontext) -> bool {
        other == self.inner.raw || lock(&self.inner.peers).iter().any(|peer| is_live_peer(peer, other))
    }

    /// True when kernels in this context can read and write memory of `peer`'s device
    /// directly (over NVLink or PCIe), once [`Context::enable_peer_access`] was called.
    pub fn can_access_peer(&self, peer: &Context) -> Result<bool> {
        self.inner.device.can_access_peer(&peer.inner.device)
    }

    /// Lets this context access memory allocated in `peer` (kernels dereferencing peer
    /// pointers, faster peer copies). Enabling it twice is not an error. Fails with
    /// [`Error::PeerAccessUnsupported`] when the devices cannot reach each other.
    pub fn enable_peer_access(&self, peer: &Context) -> Result<()> {
        if !self.can_access_peer(peer)? {
            return Err(Error::PeerAccessUnsupported { from: self.inner.device.ordinal(), to: peer.inner.device.ordinal() });
        }
        let _bound = self.bind()?;
        // SAFETY: both contexts are alive; flags must be 0.
        match unsafe { driver::context::enable_peer_access(peer.inner.raw, 0) } {
            Err(e) if e.code == sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {}
            other => other?,
        }
        if peer.inner.memory_pools {
            // Buffers of `peer` come from its device's default pool, whose access is granted
            // per device (peer access between contexts does not cover pools).
            let mut pool = std::ptr::null_mut();
            // SAFETY: writes one pool handle of a valid device.
            unsafe { driver::device::get_default_mem_pool(&mut pool, peer.inner.device.raw()) }?;
            let access = sys::CUmemAccessDesc {
                location: sys::CUmemLocation { type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE, id: self.inner.device.ordinal() as i32 },
                flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
            };
            // SAFETY: one valid descriptor for a live pool.
            unsafe { driver::memory::pool_set_access(pool, &access, 1) }?;
        }
        let mut peers = lock(&self.inner.peers);
        // Entries of released peers go (their access ended with them); this one once.
        peers.retain(|(p, _)| p.strong_count() > 0);
        if !peers.iter().any(|(p, _)| std::ptr::eq(p.as_ptr(), Arc::as_ptr(&peer.inner))) {
            peers.push((Arc::downgrade(&peer.inner), peer.inner.raw as usize));
        }
        Ok(())
    }
}

/// True when `peer` (an entry of a context's peer list: the peer and its raw handle) is still
/// alive and is the context `raw`. A peer whose last handle dropped was released, and its
/// access with it: a context made later may have the same raw handle (the device's primary
/// context always does) without any peer access (G14-2). Checked without upgrading (which
/// could make this thread the one that tears the peer down, inside the door): memory whose
/// context is `raw` keeps that context alive while it is checked, so an entry that is `raw`'s
/// own has a live strong count.
fn is_live_peer<T>(peer: &(Weak<T>, usize), raw: sys::CUcontext) -> bool {
    peer.0.strong_count() > 0 && peer.1 == raw as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    /// G14-2 (audit 2026-11-28b): an entry names its peer only while the peer lives; a later
    /// context with the same raw handle (a primary context retained again) is not a peer.
    #[test]
    fn g14_2_a_released_peers_handle_is_no_longer_a_peer() {
        let raw = 0x1000usize as sys::CUcontext;
        let peer = Arc::new(());
        let entry = (Arc::downgrade(&peer), raw as usize);
        assert!(is_live_peer(&entry, raw));
        assert!(!is_live_peer(&entry, 0x2000usize as sys::CUcontext));
        drop(peer);
        // The same handle again, now another context's: no access was enabled for it.
        assert!(!is_live_peer(&entry, raw));
    }
}
