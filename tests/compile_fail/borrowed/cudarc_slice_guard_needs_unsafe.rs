// P3: the guard form of the cudarc adapter orders cudarc after ferrocuda in its `Drop`, which
// safe code may skip (`mem::forget`): it needs `unsafe`, with "drop the guard" as its contract.
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};
use ferrocuda::borrowed;

fn read(x: &CudaSlice<f32>, on: &Arc<CudaStream>) {
    let guard = borrowed::cudarc::slice::<f32, _>(x, on).unwrap();
    std::mem::forget(guard);
}

fn main() {}
