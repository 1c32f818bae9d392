// G22R-1 (audit 2026-11-29b): `shared_array!` sized the declared array in a generated module
// (`use super::*`, which cannot see a function's local items) and the handle in the caller's
// block. A local `const` shadowing a module-level one gave a handle of 256 elements over an
// array of 1, so in-bounds `set`/`get` and the library's reducers wrote past it on the GPU,
// while the CPU executor (sized in the caller's scope) saw nothing. The two readings must now
// agree or it does not compile, through every macro that declares shared storage.
use ferrocuda_device::{multi_block_reduce, shared_array};

const LEN: usize = 1;
const WIDTH: usize = 1;

pub fn kernel_body() {
    const LEN: usize = 256;
    let big = shared_array![u32; LEN];
    big.set(255, 7);

    const WIDTH: usize = 8;
    let reduce = multi_block_reduce!(f32; WIDTH);
    let _ = reduce.sum_all([1.0; WIDTH]);
}

fn main() {}
