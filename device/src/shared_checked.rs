//! Checked shared-memory accesses at an index taken from data (issue 30, tenth port, gap 7):
//! `SharedSlice::get_checked(i)` / `SharedArray::get_checked(i)` give `Some(element)` or
//! `None`, `set_checked(i, v)` writes and says whether it did, where `get`/`set` panic and
//! `get_unchecked`/`set_unchecked` are `unsafe`.
//!
//! vLLM's `preprocessTopkIdKernel` reads `smem[topk_id]` with the id read from global memory:
//! nothing bounds it but the data. The port wrote `if (id as usize) < smem.len() { smem.get(id) }
//! else { -1 }`, whose compare the `get`'s own check folds into; these methods are that form
//! with a name, as [`AtomicSlice::get`](crate::global::AtomicSlice::get) is for global memory:
//! one compare of the index with the length (a launch parameter for a dynamic slice, a constant
//! for an array), then a bare `ld.shared`/`st.shared`, and no panic path.
//!
//! They live beside `shared.rs` (as `shared_threads` and `shared_vector` do) and are built on its
//! public `len` and `get_unchecked`/`set_unchecked`.

use crate::shared::{SharedArray, SharedElement, SharedSlice};

/// `get_checked`/`set_checked` for [`SharedArray`] and [`SharedSlice`], over `len()` and the
/// unchecked accesses.
macro_rules! checked_methods {
    () => {
        /// Element `index` (one `ld.shared` after one compare), or `None` when `index` is out of
        /// bounds: for an index read from data (a table lookup `smem[id]`), where
        /// [`get`](Self::get) would give the kernel a panic path.
        #[inline(always)]
        pub fn get_checked(&self, index: usize) -> Option<T> {
            if index < self.len() {
                // SAFETY: `index < self.len()`, just tested.
                Some(unsafe { self.get_unchecked(index) })
            } else {
                None
            }
        }

        /// Writes element `index` (one `st.shared` after one compare) and returns `true`, or
        /// writes nothing and returns `false` when `index` is out of bounds.
        #[inline(always)]
        pub fn set_checked(&self, index: usize, value: T) -> bool {
            if index < self.len() {
                // SAFETY: `index < self.len()`, just tested.
                unsafe { self.set_unchecked(index, value) };
                true
            } else {
                false
            }
        }
    };
}

impl<T: SharedElement> SharedSlice<T> {
    checked_methods!();
}

impl<T: SharedElement, const N: usize> SharedArray<T, N> {
    checked_methods!();
}
