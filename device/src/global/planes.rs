//! [`DisjointPlanes`]: a structure-of-arrays output, `P` planes with one element per thread
//! index in each.

use bytemuck::Pod;

use super::slice::{DisjointSlice, Partition};
use super::{LaunchRequirements, ThreadIndex};

/// A kernel output of `P` planes of equal length (structure of arrays: results `0..P` of
/// input `i` at `i`, `i + plane_len`, `i + 2 * plane_len`, ...), each thread writing only the
/// elements of its own indices. The plane length is the buffer's length divided by `P`,
/// fixed for the launch, so every thread maps `(index, plane)` to elements the same way and
/// distinct indices never meet (audit finding N1: a stride chosen at each access let
/// `get_strided_mut(0, 1, 1)` reach another thread's element 1).
///
/// ```ignore
/// #[kernel]
/// pub fn sin_cos(x: &[f32], mut out: DisjointPlanes<f32, 2>) {
///     let i = unique_index();
///     if let (Some(&v), Some([s, c])) = (x.get(i.get()), out.get_all_mut(i)) {
///         (*s, *c) = (v.sin(), v.cos());
///     }
/// }
/// ```
///
/// The last `len % P` elements belong to no plane.
pub type DisjointPlanes<'a, T, const P: usize> = DisjointSlice<'a, T, Planes<P>>;

/// The partition of [`DisjointPlanes<T, P>`]: witness [`ThreadIndex`] `i` -> elements `plane *
/// plane_len + i` for `plane < P`, with `plane_len = len / P` fixed for the launch. Disjoint:
/// the map is one-to-one for `i < plane_len` and the witnesses are unique under
/// `LINEAR_THREADS`.
pub struct Planes<const P: usize>;

// SAFETY: `(i, plane) -> plane * plane_len + i` is one-to-one for `i < plane_len` and
// `plane < P`, inside the buffer; every access goes through a `ThreadIndex`, unique under
// `LINEAR_THREADS`.
unsafe impl<const P: usize> Partition for Planes<P> {
    const KEY: u64 = super::slice::partition_key("Planes", &[P as u64]);
    const REQUIREMENTS: LaunchRequirements = LaunchRequirements::LINEAR_THREADS;
    type Shape = ();
    const VALID: () = assert!(P > 0, "DisjointPlanes<T, P> needs at least one plane (P > 0)");
}

impl<T: Pod, const P: usize> DisjointSlice<'_, T, Planes<P>> {
    /// Elements per plane (the buffer's length divided by `P`).
    #[inline(always)]
    pub fn plane_len(&self) -> usize {
        self.len / P
    }

    /// This thread's element `index` of plane `plane`, or `None` if `index` is past the plane
    /// length or `plane >= P`.
    #[inline(always)]
    #[track_caller]
    pub fn get_mut(&mut self, index: ThreadIndex, plane: usize) -> Option<&mut T> {
        let i = index.owned();
        let plane_len = self.plane_len();
        if i < plane_len && plane < P {
            // SAFETY: `plane * plane_len + i < P * plane_len <= len`; the element belongs to
            // `index` alone (see the impl of `Partition`), which no other thread holds.
            let pointer = self.note(plane * plane_len + i, 1, true);
            Some(unsafe { &mut *pointer.add(plane * plane_len + i) })
        } else {
            None
        }
    }

    /// This thread's element `index` of every plane, or `None` past the plane length.
    #[inline(always)]
    #[track_caller]
    pub fn get_all_mut(&mut self, index: ThreadIndex) -> Option<[&mut T; P]> {
        let i = index.owned();
        let plane_len = self.plane_len();
        if i < plane_len {
            let mut pointer = self.pointer;
            for plane in 0..P {
                pointer = self.note(plane * plane_len + i, 1, true);
            }
            // SAFETY: as in `get_mut`; the `P` elements are distinct (one per plane).
            Some(core::array::from_fn(|plane| unsafe { &mut *pointer.add(plane * plane_len + i) }))
        } else {
            None
        }
    }
}
