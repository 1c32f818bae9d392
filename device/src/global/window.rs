//! [`Window`]: a read-only `R x C` window of a row-major matrix held in an input slice, bounds-
//! checked once when it is made, so that a stencil's reads have no check left.

use core::marker::PhantomData;

/// `R x C` elements of a row-major matrix of `cols` columns stored in a slice: rows `row ..
/// row + R`, columns `col .. col + C`, all checked inside the slice (and the columns inside the
/// row) by [`window`], once. [`read(r, c)`](Self::read) with constant `r < R`, `c < C` then
/// compiles to a bare load (`ld.global.nc` for a kernel's `&[T]` input): the safe way to read a
/// stencil's neighbourhood as fast as unchecked code.
///
/// ```ignore
/// if let Some(w) = window::<f32, 3, 3>(input, cols, row - 1, col - 1) {
///     let sum = w.read(0, 1).unwrap_or(0.0) + w.read(2, 1).unwrap_or(0.0);
/// }
/// ```
///
/// Prefer [`read`](Self::read) to `get(r, c).copied()` for `Copy` elements: an `Option<&T>`
/// is a pointer whose `None` is null, and some rustc versions (nightly 1.97's LLVM) keep a
/// null test before each load once the pointer is in the global address space, a branch per
/// read that `read` never has.
///
/// It only reads, through a shared borrow of the slice: any number of threads may hold
/// overlapping windows.
#[derive(Debug, Clone, Copy)]
pub struct Window<'a, T, const R: usize, const C: usize> {
    /// Element (0, 0).
    start: *const T,
    cols: usize,
    _slice: PhantomData<&'a [T]>,
}

/// The `R x C` window of `slice` (a row-major matrix of `cols` columns) whose element (0, 0)
/// is at (`row`, `col`), if every element of it lies in the slice and every column below
/// `cols`; `None` otherwise (at the matrix's edges).
#[inline(always)]
pub fn window<T, const R: usize, const C: usize>(slice: &[T], cols: u32, row: u32, col: u32) -> Option<Window<'_, T, R, C>> {
    const {
        assert!(R > 0 && C > 0, "a window has at least one row and one column");
        assert!(R <= 1 << 16 && C <= 1 << 16, "a window has at most 65536 rows and columns");
    };
    let cols64 = cols as u64;
    // `col + C <= cols`: the window's columns are inside each row.
    if col as u64 + C as u64 > cols64 {
        return None;
    }
    // The last element, `(row + R - 1) * cols + col + C - 1`, is inside the slice. The last row
    // is a `u32` (checked: one add with carry), so the product is below `2^64 - 2^33` and the
    // sum cannot overflow.
    let last_row = row.checked_add(R as u32 - 1)?;
    let end = last_row as u64 * cols64 + col as u64 + C as u64;
    if end > slice.len() as u64 {
        return None;
    }
    let offset = row as usize * cols as usize + col as usize;
    // SAFETY: `offset < end <= slice.len()`.
    Some(Window { start: unsafe { slice.as_ptr().add(offset) }, cols: cols as usize, _slice: PhantomData })
}

impl<'a, T, const R: usize, const C: usize> Window<'a, T, R, C> {
    /// Element (`r`, `c`) of the window, or `None` if `r >= R` or `c >= C` (a check that
    /// folds away for constant indices).
    #[inline(always)]
    pub fn get(&self, r: usize, c: usize) -> Option<&'a T> {
        if r < R && c < C {
            // SAFETY: `r * cols + c` is inside the window, which `window` checked lies inside
            // the slice (borrowed for `'a`).
            Some(unsafe { &*self.start.add(r * self.cols + c) })
        } else {
            None
        }
    }

    /// The value of element (`r`, `c`), or `None` if `r >= R` or `c >= C` (a check that
    /// folds away for constant indices, leaving one load and no branch).
    #[inline(always)]
    pub fn read(&self, r: usize, c: usize) -> Option<T>
    where
        T: Copy,
    {
        if r < R && c < C {
            // SAFETY: as in `get`: the element lies inside the window, inside the borrowed
            // slice, and the slice's elements are initialised `T`s.
            Some(unsafe { self.start.add(r * self.cols + c).read() })
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::window;

    #[test]
    fn read_gives_the_windows_values_and_none_past_its_shape() {
        // A 4 x 5 matrix holding 10 * row + col.
        let m: Vec<u32> = (0..4).flat_map(|r| (0..5).map(move |c| 10 * r + c)).collect();
        let w = window::<u32, 2, 3>(&m, 5, 1, 2).expect("inside");
        assert_eq!((w.read(0, 0), w.read(1, 2)), (Some(12), Some(24)));
        assert_eq!(w.read(1, 2), w.get(1, 2).copied());
        assert_eq!((w.read(2, 0), w.read(0, 3)), (None, None));
        assert!(window::<u32, 2, 3>(&m, 5, 3, 0).is_none(), "rows past the end");
        assert!(window::<u32, 2, 3>(&m, 5, 0, 3).is_none(), "columns past the row");
    }
}
