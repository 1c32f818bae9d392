// G22R-1 (audit 2026-11-29b), its most ordinary trigger: a function-local `use` naming another
// item than the module-level one of the same name. The generated module saw `small::TILE` (and
// `small::Elem`), the caller's block `sizes::TILE` (and `sizes::Elem`): a 4-byte declaration
// under a 1024-byte handle. Now a compile error through `shared_array!`, `multi_block_reduce!`
// and `block_scratch!`.
#![allow(unused_imports)]
use ferrocuda_device::{block_scratch, multi_block_reduce, shared_array};

mod small {
    pub const TILE: usize = 1;
    pub type Elem = u32;
}
mod sizes {
    pub const TILE: usize = 256;
    pub type Elem = u64;
}
use small::{Elem, TILE};

pub fn kernel_body() {
    use sizes::TILE;
    let tile = shared_array![f32; TILE];
    tile.set(255, 1.0);
    let reduce = multi_block_reduce!(f32; TILE / 64);
    let _ = reduce;
}

pub fn reducer_body() {
    use sizes::Elem;
    let scratch = block_scratch!(Elem);
    let _ = scratch;
}

fn main() {}
