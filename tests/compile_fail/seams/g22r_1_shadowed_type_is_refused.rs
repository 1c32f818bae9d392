// G22R-1 (audit 2026-11-29b): a local `type` alias shadowing a module-level one gave the
// declared array the module's element type (4 bytes each) and the handle the local one (8
// bytes each): half the bytes the handle indexes. Now a compile error through `shared_array!`,
// `multi_block_reduce!` and `block_scratch!`.
use ferrocuda_device::{block_scratch, multi_block_reduce, shared_array};

type E = u32;

pub fn kernel_body() {
    type E = u64;
    let tile = shared_array![E; 32];
    tile.set(31, 1);
    let reduce = multi_block_reduce!(E; 2);
    let _ = reduce;
    let scratch = block_scratch!(E);
    let _ = scratch;
}

fn main() {}
