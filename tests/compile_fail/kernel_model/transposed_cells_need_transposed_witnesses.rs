// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Issue 30 (session 18's `DisjointMatrix<T, true>`): a plain `ThreadCell` (row y, column x)
// on a transposed output (row x, column y) would name another thread's cell, and the
// reverse too: the flag is a type parameter of the witness, so neither compiles.
use ferrocuda_device::global::{DisjointMatrix, unique_cell, unique_cell_transposed};

#[kernel(cols(plain = 16, transposed = 16))]
pub fn crossed(mut plain: DisjointMatrix<u32>, mut transposed: DisjointMatrix<u32, true>) {
    let _ = transposed.get_mut(unique_cell());
    let _ = plain.get_mut(unique_cell_transposed());
}

fn main() {}
