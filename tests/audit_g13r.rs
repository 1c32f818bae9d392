//! Audit 2026-11-28, second held-out review (`audit/2026-11-28/FINDINGS-review2.md`), G13R-4:
//! an output's **partition** was not part of what the first launch compares between the host
//! and the device build (fixed: an output's type key mixes its partition's key into its
//! element's). Two builds that name the partition through a `cfg`-chosen alias
//! (`type Part = Atomics` on the host, `type Part = Threads` on the device) produce the same
//! signature text (the alias's tokens) and the same layout (element size and alignment,
//! widths); the type table held only the element's `LayoutKey`, so the launch was accepted,
//! checked against the host partition's `REQUIREMENTS` only, and ran the device partition's
//! map. Now the tables differ, and the first launch refuses it (`KernelSignatureMismatch`).
//!
//! The two builds are played here by two modules of one crate, each with the alias one build
//! would see (their PTX names differ, which the comparison strips). The same alias on a second
//! output (`BlockRows` on the host, `InPlaceRows` on the device) gives the device two phase
//! barriers per thread: the one-`InPlaceRows` rule lives in the `REQUIREMENTS` constant, which
//! only the host build evaluates (it cannot be shown in one crate, whose host build refuses the
//! device's signature: that refusal is the rule working where it is evaluated).

/// The module the launchers would load from (no images: nothing is launched here).
pub static KERNELS: ferrocuda::EmbeddedModule = ferrocuda::EmbeddedModule::without_images("g13r");

/// What the host build sees: an `AtomicSlice`-like output (no launch requirement).
mod host_build {
    use ferrocuda_device::global::{DisjointSlice, partition};
    use ferrocuda_device::kernel;

    /// The host build's alias.
    pub type Part = partition::Atomics;

    #[kernel(name = "g13r_4_host")]
    pub fn k(y: DisjointSlice<u32, Part>) {
        let _ = y;
    }
}

/// What the device build sees with `#[cfg(target_arch = "nvptx64")]` on the aliases.
mod device_build {
    use ferrocuda_device::global::{DisjointSlice, partition};
    use ferrocuda_device::kernel;

    /// The device build's alias: a per-thread output (`LINEAR_THREADS`).
    pub type Part = partition::Threads;

    #[kernel(name = "g13r_4_device")]
    pub fn k(y: DisjointSlice<u32, Part>) {
        let _ = y;
    }
}

/// Everything the first launch compares, with the PTX name taken out of the signature text.
fn compared(signature: &ferrocuda::KernelSignature) -> (String, Vec<u64>, Vec<Option<u64>>) {
    let canonical = signature.canonical.replacen(signature.symbol, "<name>", 1);
    let keys = signature.type_keys.iter().map(|key| key.map(|f| f())).collect();
    (canonical, signature.layout.to_vec(), keys)
}

#[test]
fn g13r_4_a_cfg_chosen_partition_is_told_apart_by_the_first_launch_check() {
    let (host, device) = (compared(&host_build::k::SIGNATURE), compared(&device_build::k::SIGNATURE));
    // Signature text and layout agree (the alias's tokens, the element's size) ...
    assert_eq!((&host.0, &host.1), (&device.0, &device.1));
    // ... and the type keys, which the device module holds too, now differ (before the fix
    // they were the element's key alone, equal).
    assert_ne!(host.2, device.2, "the first launch cannot tell the two builds apart");
    // What was at stake: the launch is checked against the host's requirements only (a 2-D
    // launch passes them), and the device's per-thread map gives threads (x, 0) and (x, 1) one
    // element.
    const { assert!(!host_build::k::REQUIREMENTS.linear_threads && device_build::k::REQUIREMENTS.linear_threads) };
}

/// G13R-5: `same_len(x, y)` given to the device build alone
/// (`#[cfg_attr(target_arch = "nvptx64", kernel(same_len(x, y)))]`,
/// `#[cfg_attr(not(target_arch = "nvptx64"), kernel)]`): the device entry rebuilds `y` with
/// `x`'s length, trusting a comparison the host launcher, built without the group, never makes,
/// so a shorter `y` is written past its end from safe code. The group was in no compared
/// table; now each member's type key has its group's number mixed in (both builds), so the
/// first launch refuses it.
mod same_len_host_build {
    use ferrocuda_device::global::DisjointSlice;
    use ferrocuda_device::kernel;

    #[kernel(name = "g13r_5_host")]
    pub fn k(x: &[u32], y: DisjointSlice<u32>) {
        let _ = (x, y);
    }
}

mod same_len_device_build {
    use ferrocuda_device::global::DisjointSlice;
    use ferrocuda_device::kernel;

    #[kernel(name = "g13r_5_device", same_len(x, y))]
    pub fn k(x: &[u32], y: DisjointSlice<u32>) {
        let _ = (x, y);
    }
}

#[test]
fn g13r_5_a_same_len_group_of_one_build_is_told_apart_by_the_first_launch_check() {
    let (host, device) = (compared(&same_len_host_build::k::SIGNATURE), compared(&same_len_device_build::k::SIGNATURE));
    assert_eq!(host.1, device.1, "the layouts agree");
    assert_ne!(host.2, device.2, "the type keys must tell a same_len group from none");
}
