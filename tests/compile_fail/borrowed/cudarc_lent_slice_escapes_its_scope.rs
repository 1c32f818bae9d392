// P3: a slice lent by `borrowed::cudarc::scope` cannot outlive the scope, which orders cudarc's
// later work after ferrocuda's when it ends: keeping the lent slice would let ferrocuda work be
// queued on the cudarc slice after that ordering.
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};
use ferrocuda::borrowed::{self, BorrowedSlice};

fn keep<'a>(x: &'a CudaSlice<f32>, on: &'a Arc<CudaStream>) -> Option<BorrowedSlice<'a, f32>> {
    let mut kept = None;
    borrowed::cudarc::scope(|scope| {
        kept = scope.slice(x, on).ok();
    });
    kept
}

fn main() {}
