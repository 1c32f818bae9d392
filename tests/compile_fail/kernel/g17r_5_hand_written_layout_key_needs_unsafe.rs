// G17R-5 (audit 2026-11-28e review): `LayoutKey` was a safe trait ("a wrong hand-written key
// only weakens the check"), yet the first launch's key comparison is what refuses a kernel whose
// host and device builds disagree, and the keys carry more than the element: an output's
// partition (G13R-4), a `same_len` group (G13R-5), which parameter gives a `cols(..)` width
// (G17R-1). Here the element type's key is chosen per build (in one crate it would be
// `if cfg!(target_arch = "nvptx64") { .. } else { .. }`) so that the device build's
// `same_len(x, y)` member keys, the group's mark mixed in, equal the host build's keys without
// a group: the first launch passed, the host launcher compared no lengths, and the device entry
// rebuilt `y` with `x`'s length and wrote past it. `LayoutKey` is now an `unsafe trait` (the
// derive writes the `unsafe impl`): a hand-written key is a promise.
use ferrocuda_device::LayoutKey;

pub static KERNELS: ferrocuda::EmbeddedModule = ferrocuda::EmbeddedModule::without_images("t");

/// FNV-1a's step in `layout_key::mix`, undone: the key that `mix(key, word)` turns into `target`.
const fn unmix(target: u64, word: u64) -> u64 {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    // The inverse of PRIME modulo 2^64 (Newton's iteration from PRIME, which is its own inverse
    // modulo 8).
    let mut inverse = PRIME;
    let mut step = 0;
    while step < 6 {
        inverse = inverse.wrapping_mul(2u64.wrapping_sub(PRIME.wrapping_mul(inverse)));
        step += 1;
    }
    let mut hash = target;
    let mut i = 8;
    while i > 0 {
        i -= 1;
        hash = hash.wrapping_mul(inverse);
        hash ^= (word >> (8 * i)) & 0xff;
    }
    hash
}

/// The first `same_len` group's mark (`same_len_mark` in the macro).
const GROUP_1: u64 = 0x5a3e_1e40_0000_0001;

/// The host build's elements: their keys are `u32`'s.
mod host_types {
    #[repr(transparent)]
    #[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
    pub struct In(pub u32);
    impl ferrocuda_device::LayoutKey for In {
        const LAYOUT_KEY: u64 = <u32 as ferrocuda_device::LayoutKey>::LAYOUT_KEY;
    }
    #[repr(transparent)]
    #[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
    pub struct Out(pub u32);
    impl ferrocuda_device::LayoutKey for Out {
        const LAYOUT_KEY: u64 = <u32 as ferrocuda_device::LayoutKey>::LAYOUT_KEY;
    }
}

/// The device build's elements: the keys whose mix with the group's mark (and, for the output,
/// its partition's key) are the host's keys.
mod device_types {
    use ferrocuda_device::global::partition::{Partition, Threads};
    use ferrocuda_device::layout_key::mix;
    const U32: u64 = <u32 as ferrocuda_device::LayoutKey>::LAYOUT_KEY;
    #[repr(transparent)]
    #[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
    pub struct In(pub u32);
    impl ferrocuda_device::LayoutKey for In {
        const LAYOUT_KEY: u64 = super::unmix(U32, super::GROUP_1);
    }
    #[repr(transparent)]
    #[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
    pub struct Out(pub u32);
    impl ferrocuda_device::LayoutKey for Out {
        const LAYOUT_KEY: u64 = super::unmix(super::unmix(mix(U32, <Threads as Partition>::KEY), super::GROUP_1), <Threads as Partition>::KEY);
    }
}

mod host_build {
    use super::host_types::{In, Out};
    use ferrocuda_device::global::{DisjointSlice, unique_index};
    use ferrocuda_device::kernel;

    #[kernel(name = "g17r_5_host")]
    pub fn k(x: &[In], mut y: DisjointSlice<Out>) {
        let i = unique_index();
        if let (Some(o), Some(v)) = (y.get_mut(i), x.get(i.get())) {
            *o = Out(v.0);
        }
    }
}

mod device_build {
    use super::device_types::{In, Out};
    use ferrocuda_device::global::{DisjointSlice, unique_index};
    use ferrocuda_device::kernel;

    #[kernel(name = "g17r_5_device", same_len(x, y))]
    pub fn k(x: &[In], mut y: DisjointSlice<Out>) {
        let i = unique_index();
        if let (Some(o), Some(v)) = (y.get_mut(i), x.get(i.get())) {
            *o = Out(v.0);
        }
    }
}

fn main() {
    let keys = |s: &ferrocuda::KernelSignature| s.type_keys.iter().map(|k| k.map(|f| f())).collect::<Vec<_>>();
    // Before the fix this held: the first launch could not tell the builds apart.
    assert_eq!(keys(&host_build::k::SIGNATURE), keys(&device_build::k::SIGNATURE));
    let _ = <u32 as LayoutKey>::LAYOUT_KEY;
}
