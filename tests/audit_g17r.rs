//! Audit 2026-11-28e, held-out review (`audit/2026-11-28e/FINDINGS-review.md`), G17R-1: a
//! `cols(..)` width given by a **parameter** was in no table the first launch compares between
//! the host and the device build. A constant width is part of the layout (Q2), a `same_len`
//! group part of its members' type keys (G13R-5), an output's partition part of its type key
//! (G13R-4); a width parameter counted 0 in the layout whichever parameter it was. So
//! `#[cfg_attr(target_arch = "nvptx64", kernel(cols(dst = (stride, n))))]` beside
//! `#[cfg_attr(not(target_arch = "nvptx64"), kernel(cols(dst = (n, stride))))]` passed every
//! check: the launcher checked `GridSlices`' launch-time bound (`n <= stride`, every slice of the
//! grid inside the buffer) with the host's `(n, stride)`, and the device entry built the output
//! with the other order, whose accesses check `i < n` alone, trusting that bound: with one
//! slice, `n = 1`, `stride = 1 << 20` and a one-element buffer, the device's `n` is `1 << 20`
//! and threads `1..2^20` write past the buffer from safe code. (`Cells3d`'s row index, 32-bit
//! under its own launch-time bound, aliases threads the same way when its `rows` parameter
//! differs.) Now each width parameter's position and parameter number are mixed into the
//! output's type key in both builds, so the first launch refuses such a pair
//! (`KernelSignatureMismatch`).
//!
//! The two builds are played by two modules of one crate, as in `tests/audit_g13r.rs`.

use ferrocuda::{Dim3, LaunchConfig};
use ferrocuda_device::global::partition::{GridSlices, Partition};

/// The module the launchers would load from (no images: nothing is launched here).
pub static KERNELS: ferrocuda::EmbeddedModule = ferrocuda::EmbeddedModule::without_images("g17r");

/// What the host build sees: `cols(dst = (n, stride))`.
mod host_build {
    use ferrocuda_device::global::{DisjointSlice, partition::GridSlices, unique_slice_cell};
    use ferrocuda_device::kernel;

    #[kernel(name = "g17r_1_host", cols(dst = (n, stride)))]
    pub fn k(mut dst: DisjointSlice<u32, GridSlices>, n: u32, stride: u32) {
        if let Some(o) = dst.get_mut(unique_slice_cell()) {
            *o = 1;
        }
    }
}

/// What the device build sees with the attribute behind `cfg_attr(target_arch = "nvptx64")`:
/// the same parameters, the other order.
mod device_build {
    use ferrocuda_device::global::{DisjointSlice, partition::GridSlices, unique_slice_cell};
    use ferrocuda_device::kernel;

    #[kernel(name = "g17r_1_device", cols(dst = (stride, n)))]
    pub fn k(mut dst: DisjointSlice<u32, GridSlices>, n: u32, stride: u32) {
        if let Some(o) = dst.get_mut(unique_slice_cell()) {
            *o = 1;
        }
    }
}

/// The same kernel as the host build's, written again: a build pair that agrees.
mod device_build_agreeing {
    use ferrocuda_device::global::{DisjointSlice, partition::GridSlices, unique_slice_cell};
    use ferrocuda_device::kernel;

    #[kernel(name = "g17r_1_agreeing", cols(dst = (n, stride)))]
    pub fn k(mut dst: DisjointSlice<u32, GridSlices>, n: u32, stride: u32) {
        if let Some(o) = dst.get_mut(unique_slice_cell()) {
            *o = 1;
        }
    }
}

/// A constant width of 0 beside a width parameter (both used to count 0 in the layout).
mod const_zero_build {
    use ferrocuda_device::global::{DisjointSlice, partition::GridSlices, unique_slice_cell};
    use ferrocuda_device::kernel;

    #[kernel(name = "g17r_1_const", cols(dst = (n, 0)))]
    pub fn k(mut dst: DisjointSlice<u32, GridSlices>, n: u32, stride: u32) {
        let _ = stride;
        if let Some(o) = dst.get_mut(unique_slice_cell()) {
            *o = 1;
        }
    }
}

/// Everything the first launch compares, with the PTX name taken out of the signature text.
fn compared(signature: &ferrocuda::KernelSignature) -> (String, Vec<u64>, Vec<Option<u64>>) {
    let canonical = signature.canonical.replacen(signature.symbol, "<name>", 1);
    let keys = signature.type_keys.iter().map(|key| key.map(|f| f())).collect();
    (canonical, signature.layout.to_vec(), keys)
}

#[test]
fn g17r_1_a_width_parameter_of_one_build_is_told_apart_by_the_first_launch_check() {
    let host = compared(&host_build::k::SIGNATURE);
    let device = compared(&device_build::k::SIGNATURE);
    // Signature text and layout agree (the same parameter tokens; widths from parameters) ...
    assert_eq!((&host.0, &host.1), (&device.0, &device.1));
    // ... so only the type keys can tell the builds apart.
    assert_ne!(host.2, device.2, "the first launch cannot tell `cols(dst = (n, stride))` from `cols(dst = (stride, n))`");
    // A pair that agrees still passes, and a constant width is told from a parameter one.
    assert_eq!(host, compared(&device_build_agreeing::k::SIGNATURE));
    assert_ne!(host, compared(&const_zero_build::k::SIGNATURE));
    // What was at stake: a launch the host's bound accepts, which the device's shape breaks
    // (one slice of `1 << 20` elements in a one-element buffer, written with no other check).
    let config = LaunchConfig::new(Dim3 { x: 4096, y: 1, z: 1 }, Dim3 { x: 256, y: 1, z: 1 });
    let (n, stride) = (1u32, 1u32 << 20);
    assert_eq!(<GridSlices as Partition>::check_launch("dst", &config, 1, (n, stride)), Ok(()));
    assert!(<GridSlices as Partition>::check_launch("dst", &config, 1, (stride, n)).is_err());
}

/// G17R-3: a kernel that is an `unsafe fn` in one build and a safe `fn` of the same signature
/// in the other (two `cfg`-gated functions; a tensor map kernel, whose TMA copies rely on a box
/// and swizzle it cannot see, is `unsafe fn` with a `# Safety` naming them, and its tokens are
/// the same as a safe one's). The host build's launcher is safe, and the device entry calls the
/// `unsafe fn`, trusting that its launchers are `unsafe`: the contract was never asked of anyone.
/// Now the canonical signature (and so the fingerprint, which the first launch compares) starts
/// with `unsafe ` for an `unsafe fn` kernel.
mod safe_build {
    use ferrocuda_device::global::{DisjointSlice, unique_index};
    use ferrocuda_device::kernel;
    use ferrocuda_device::tma::TensorMap;

    #[kernel(name = "g17r_3_safe")]
    pub fn k(map: &TensorMap, mut out: DisjointSlice<u32>) {
        let _ = map;
        if let Some(o) = out.get_mut(unique_index()) {
            *o = 1;
        }
    }
}

mod unsafe_build {
    use ferrocuda_device::global::{DisjointSlice, unique_index};
    use ferrocuda_device::kernel;
    use ferrocuda_device::tma::TensorMap;

    /// # Safety
    /// `map` copies boxes of 64 x 64 elements (what its TMA copies would rely on).
    #[kernel(name = "g17r_3_unsafe")]
    pub unsafe fn k(map: &TensorMap, mut out: DisjointSlice<u32>) {
        let _ = map;
        if let Some(o) = out.get_mut(unique_index()) {
            *o = 1;
        }
    }
}

#[test]
fn g17r_3_an_unsafe_kernel_of_one_build_is_told_apart_by_the_first_launch_check() {
    let (safe, unsafe_) = (compared(&safe_build::k::SIGNATURE), compared(&unsafe_build::k::SIGNATURE));
    assert_eq!((&safe.1, &safe.2), (&unsafe_.1, &unsafe_.2), "layout and type keys agree");
    assert_ne!(safe.0, unsafe_.0, "the canonical signature must tell an `unsafe fn` kernel from a safe one");
    assert!(unsafe_.0.starts_with("unsafe "), "{}", unsafe_.0);
    assert!(!safe.0.starts_with("unsafe "), "{}", safe.0);
}
