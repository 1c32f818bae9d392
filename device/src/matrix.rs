//! Row-major 2-D views of slices whose bounds checks the compiler can remove: two `u32`
//! compares against the view's shape instead of a multiply-then-compare against the slice
//! length, and index arithmetic in `u32`.
//!
//! Why: `data[row * cols + col]` on a slice checks `row * cols + col < len`, which LLVM cannot
//! derive from the kernel's `if row < rows && col < cols` guard, so every access keeps its
//! check (a transpose ran 2.3x slower than the unchecked one, docs/performance.md); and
//! `usize` index math costs registers (64-bit multiplies and adds). A [`Matrix`] checks
//! `rows * cols <= len` and `rows * cols <= u32::MAX` once, in [`Matrix::new`]; then `at(row,
//! col)` checks `row < rows && col < cols`, which the guard already proves, so the check
//! disappears, and computes `row * cols + col` in `u32` (exact, by the second condition).
//! Pinned by `bench/hopper/tests/ptx.rs` (`probe_matrix_transpose`: no bounds-check panic).

/// A read-only `rows x cols` row-major view of a slice.
#[derive(Clone, Copy, Debug)]
pub struct Matrix<'a, T> {
    data: &'a [T],
    rows: u32,
    cols: u32,
}

/// A writable `rows x cols` row-major view of a slice.
#[derive(Debug)]
pub struct MatrixMut<'a, T> {
    data: &'a mut [T],
    rows: u32,
    cols: u32,
}

/// Whether `rows x cols` fits both the slice and 32-bit indices.
#[inline(always)]
fn fits(len: usize, rows: u32, cols: u32) -> bool {
    let elements = rows as u64 * cols as u64;
    elements <= len as u64 && elements <= u32::MAX as u64
}

#[cold]
#[inline(never)]
#[track_caller]
fn out_of_bounds(row: u32, col: u32, rows: u32, cols: u32) -> ! {
    // `kernel_panic!` on the GPU keeps the four numbers in the cheap panic report, without
    // `core::fmt` (see `global::out_of_bounds`).
    #[cfg(target_arch = "nvptx64")]
    crate::kernel_panic!("index ({}, {}) outside a {}x{} matrix", row, col, rows, cols);
    #[cfg(not(target_arch = "nvptx64"))]
    panic!("index ({row}, {col}) outside a {rows}x{cols} matrix")
}

impl<'a, T: Copy> Matrix<'a, T> {
    /// The view, or `None` when `data` is shorter than `rows * cols` or that exceeds `u32::MAX`.
    #[inline(always)]
    pub fn new(data: &'a [T], rows: u32, cols: u32) -> Option<Self> {
        fits(data.len(), rows, cols).then_some(Matrix { data, rows, cols })
    }

    /// Rows.
    #[inline(always)]
    pub fn rows(&self) -> u32 {
        self.rows
    }

    /// Columns.
    #[inline(always)]
    pub fn cols(&self) -> u32 {
        self.cols
    }

    /// The element at (`row`, `col`); panics outside the shape.
    #[inline(always)]
    #[track_caller]
    pub fn at(&self, row: u32, col: u32) -> T {
        if row >= self.rows || col >= self.cols {
            out_of_bounds(row, col, self.rows, self.cols);
        }
        // SAFETY: row < rows and col < cols, so row * cols + col < rows * cols <= len, and
        // rows * cols <= u32::MAX keeps the u32 arithmetic exact (checked in `new`).
        unsafe { *self.data.get_unchecked((row * self.cols + col) as usize) }
    }

    /// The element at (`row`, `col`), or `None` outside the shape.
    #[inline(always)]
    pub fn get(&self, row: u32, col: u32) -> Option<T> {
        (row < self.rows && col < self.cols).then(|| self.at(row, col))
    }
}

impl<'a, T: Copy> MatrixMut<'a, T> {
    /// The view, or `None` when `data` is shorter than `rows * cols` or that exceeds `u32::MAX`.
    #[inline(always)]
    pub fn new(data: &'a mut [T], rows: u32, cols: u32) -> Option<Self> {
        if fits(data.len(), rows, cols) { Some(MatrixMut { data, rows, cols }) } else { None }
    }

    /// Rows.
    #[inline(always)]
    pub fn rows(&self) -> u32 {
        self.rows
    }

    /// Columns.
    #[inline(always)]
    pub fn cols(&self) -> u32 {
        self.cols
    }

    /// The element at (`row`, `col`); panics outside the shape.
    #[inline(always)]
    #[track_caller]
    pub fn at(&self, row: u32, col: u32) -> T {
        if row >= self.rows || col >= self.cols {
            out_of_bounds(row, col, self.rows, self.cols);
        }
        // SAFETY: as in `Matrix::at`.
        unsafe { *self.data.get_unchecked((row * self.cols + col) as usize) }
    }

    /// Writes the element at (`row`, `col`); panics outside the shape.
    #[inline(always)]
    #[track_caller]
    pub fn set(&mut self, row: u32, col: u32, value: T) {
        if row >= self.rows || col >= self.cols {
            out_of_bounds(row, col, self.rows, self.cols);
        }
        // SAFETY: as in `Matrix::at`.
        unsafe { *self.data.get_unchecked_mut((row * self.cols + col) as usize) = value };
    }
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;

    #[test]
    fn matrix_views_check_shape_once_and_index_row_major() {
        let data: Vec<u32> = (0..12).collect();
        assert!(Matrix::new(&data, 4, 4).is_none(), "16 elements do not fit in 12");
        let m = Matrix::new(&data, 3, 4).unwrap();
        assert_eq!((m.at(2, 1), m.get(1, 3), m.get(3, 0), m.get(0, 4)), (9, Some(7), None, None));
        let mut out = vec![0u32; 12];
        let mut t = MatrixMut::new(&mut out, 4, 3).unwrap();
        for r in 0..3 {
            for c in 0..4 {
                t.set(c, r, m.at(r, c));
            }
        }
        assert_eq!(out, [0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]);
        assert!(std::panic::catch_unwind(|| m.at(3, 0)).is_err());
        let big = [0u8; 1];
        assert!(Matrix::new(&big[..0], 1 << 16, 1 << 16).is_none(), "2^32 elements exceed u32 indices");
    }
}
