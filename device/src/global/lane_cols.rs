//! [`LaneRow::iter_cols_mut`]: a thread's elements of its row with their column numbers, to
//! index a second array in step (a shared region of the row's width, llm.c's
//! `s_res[c] = ..` beside `out[c] = ..`) without a running counter beside the iterator.

use bytemuck::Pod;

use super::warp_rows::LaneRow;

impl<'a, T: Pod> LaneRow<'a, T> {
    /// `(c, &mut row[c])` for the thread's columns `c = lane, lane + stride, ...` below the
    /// row's width, in order: [`iter_mut`](Self::iter_mut) with the column. Index a shared
    /// region of the row's width with `c` (`s_res.set(c, ..)`, one compare against its `len()`
    /// each, or none where the compiler sees `c` below it); the column is the view's (a
    /// [`RowTiles`](super::partition::RowTiles) tile counts from the tile's first column).
    #[inline(always)]
    pub fn iter_cols_mut(self) -> impl Iterator<Item = (usize, &'a mut T)> {
        let (lane, stride) = (self.lane() as usize, self.stride().max(1) as usize);
        (lane..).step_by(stride).zip(self.iter_mut())
    }
}
