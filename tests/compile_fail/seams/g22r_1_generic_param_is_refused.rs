// G22R-1 (audit 2026-11-29b) and N9: an array whose element type or length depends on a generic
// parameter is one site for every instance. The device build always refused it; the CPU build
// compiled it and the executor stopped at the second size (or, with a module-level namesake of
// the parameter, took another size silently). Now a compile error on both builds.
use ferrocuda_device::shared::{SharedArray, SharedElement};
use ferrocuda_device::shared_array;

pub fn tile_of<T: SharedElement>() -> SharedArray<T, 8> {
    shared_array![T; 8]
}

const N: usize = 1;

pub fn sized<const N: usize>() -> SharedArray<u32, N> {
    shared_array![u32; N]
}

fn main() {}
