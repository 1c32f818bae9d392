//! [`PermutedRows`]: a thread per row of a row-major output, the row a permutation of the
//! thread's 1-D index (llm.c's `attention_softmax_kernel1`: thread `(b, t, h)` owns row
//! `(b, h, t)`), witnessed by the thread's [`ThreadIndex`](super::ThreadIndex).

use bytemuck::Pod;

use super::slice::{DisjointSlice, Partition};
use super::{LaunchRequirements, ThreadIndex};

/// The partition of `DisjointSlice<T, PermutedRows>`: rows of `cols` elements, thread index
/// `i = (q a + x) b + y` (`x < a`, `y < b`) owning row `(q b + y) a + x`: the two inner digits
/// of `i`'s mixed radix swapped. `(cols, a, b)` come from `#[kernel(cols(name = (cols, a,
/// b)))]`, run-time `u32` values the same in every thread. llm.c's attention softmax, thread
/// `idx = (b T + t) NH + h` writing row `(b NH + h) T + t` of `att[B][NH][T][T]`, is
/// `cols(att = (t, t, nh))`:
///
/// ```ignore
/// #[kernel(cols(att = (t, t, nh)))]
/// pub fn softmax(mut att: DisjointSlice<f32, PermutedRows>, preatt: &[f32], t: u32, nh: u32) {
///     let Some((at, att_row)) = att.row_mut(unique_index()) else { return };
///     // `at.row` = (b NH + h) T + t; `at.x` = t, the query position
///     let Some(pre) = preatt.get(at.row * t as usize..at.row * t as usize + at.x as usize + 1) else { return };
///     // plain stores into `att_row`, and plain reads of what this thread stored there
/// }
/// ```
///
/// Map: witness `i` -> row `perm(i)`, elements `perm(i) cols .. (perm(i) + 1) cols`, for rows
/// inside the buffer. Disjoint: `perm` is a bijection of the naturals (within each group of
/// `a b` consecutive indices it swaps the digits `x` and `y`: `x' = r % a`, `y' = r / a` undo
/// it), and a [`ThreadIndex`](super::ThreadIndex) names one thread (`LINEAR_THREADS`, as
/// `DisjointSlice<T>`), so two threads' rows differ; rows of `cols` elements at distinct
/// row indices do not overlap. Launch-time bound (`OutputShapeOutOfRange` otherwise): `a, b
/// >= 1` and `a b <= u32::MAX`, so the digits are 32-bit divisions by nonzero values (no
/// panic path) and `perm(i)` is computed in 64 bits without overflow. An index past `u32` or a
/// row past the buffer's end gives `None`: the source's `if (idx < total_threads)`.
///
/// Each thread gets its row as a `&mut [T]`: plain stores, and plain reads of what it stored
/// (the source's third pass re-reads `att` before scaling it), where `AtomicSlice` gave strong
/// stores (`STG.E.STRONG.GPU`) and no cheap read-back (issue 30, eleventh port's gap 2).
pub struct PermutedRows;

/// Checks the radices: at least 1 and a product within `u32`.
fn check_radices(output: &'static str, a: u32, b: u32) -> Result<(), ferrocuda_types::LaunchProblem> {
    use ferrocuda_types::LaunchProblem::OutputShapeOutOfRange;
    if a == 0 || b == 0 {
        return Err(OutputShapeOutOfRange {
            output,
            rule: "a `PermutedRows` output's radices `a` and `b` (the second and third values of `cols(name = (cols, a, b))`) must be \
                   at least 1: a thread's index is split into digits modulo them (write the sizes of the two swapped dimensions)",
            value: 0,
            limit: 1,
        });
    }
    let group = u64::from(a) * u64::from(b);
    if group > u64::from(u32::MAX) {
        return Err(OutputShapeOutOfRange {
            output,
            rule: "a `PermutedRows` output's radices `a` and `b` must have a product within u32 (its digits are 32-bit divisions)",
            value: group,
            limit: u64::from(u32::MAX),
        });
    }
    Ok(())
}

// SAFETY: as the doc above: `row_mut` checks that the thread's index fits `u32` and that its
// row lies inside the buffer; `check_launch` that the divisions are by nonzero radices whose
// product fits `u32`; `perm` is a bijection, and `ThreadIndex` names one thread.
unsafe impl Partition for PermutedRows {
    const KEY: u64 = super::slice::partition_key("PermutedRows", &[]);
    const REQUIREMENTS: LaunchRequirements = LaunchRequirements::LINEAR_THREADS;
    type Shape = (u32, u32, u32);

    fn check_launch(
        output: &'static str,
        _config: &ferrocuda_types::LaunchConfig,
        _len: usize,
        (_cols, a, b): (u32, u32, u32),
    ) -> Result<(), ferrocuda_types::LaunchProblem> {
        check_radices(output, a, b)
    }
}

/// Where a thread's row of a `DisjointSlice<T, PermutedRows>` is: the row and the digits of the
/// thread's index `i = (q a + x) b + y` (llm.c's attention softmax: `q = b`, `x = t`, `y = h`),
/// to index inputs with. Plain numbers, not a witness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PermutedRowIndex {
    /// The row, `(q b + y) a + x`.
    pub row: usize,
    /// The outer digit, `i / (a b)`.
    pub q: u32,
    /// The middle digit, `(i / b) % a` (the row's last digit).
    pub x: u32,
    /// The inner digit, `i % b`.
    pub y: u32,
}

/// `i`'s row under the digit swap of radices `a`, `b`: `i = (q a + x) b + y` ->
/// `(q b + y) a + x`; `None` unless `a, b >= 1` and `a b <= u32::MAX`.
///
/// The host's `check_launch` refuses other radices before the launch, but the device checks
/// them again here rather than assume them (audit 2026-11-29g, G24S-2: a `cols(..)` constant
/// chosen by `cfg` differently in the two builds met a layout word that did not tell the two
/// triples apart, and the device then divided by a zero radix it had assumed away). The check
/// is a 64-bit product and a compare, the same in every thread.
#[inline(always)]
fn permuted(i: u32, a: u32, b: u32) -> Option<PermutedRowIndex> {
    let group = u64::from(a) * u64::from(b);
    if a == 0 || b == 0 || group > u64::from(u32::MAX) {
        return None;
    }
    let group = group as u32;
    // SAFETY: checked just above; said one fact at a time (LLVM does not split a conjunction),
    // so that the divisions below have no panic path.
    unsafe {
        core::hint::assert_unchecked(b != 0);
        core::hint::assert_unchecked(group != 0);
        core::hint::assert_unchecked(group / b == a);
    }
    let (q, r) = (i / group, i % group);
    let (x, y) = (r / b, r % b);
    let row = u64::from(q) * u64::from(group) + u64::from(y * a + x);
    Some(PermutedRowIndex { row: row as usize, q, x, y })
}

/// Where row `row` of width `cols` starts, if the whole row lies within `len` elements.
///
/// The row reaches almost 2^33 (`q` up to `u32::MAX / group`, times `group`, plus a digit), so
/// `row * cols` can pass 2^64 with `cols` near 2^31: checked. A wrapped start had handed a late
/// thread thread 0's row (audit 2026-11-29g, G24S-1).
#[inline(always)]
fn row_start(row: usize, cols: u32, len: usize) -> Option<usize> {
    let start = (row as u64).checked_mul(u64::from(cols))?;
    (start.checked_add(u64::from(cols))? <= len as u64).then_some(start as usize)
}

impl<T: Pod> DisjointSlice<'_, T, PermutedRows> {
    /// The output's `(cols, a, b)`: the row width and the radices of the swapped digits.
    #[inline(always)]
    pub fn permuted_shape(&self) -> (u32, u32, u32) {
        self.shape
    }

    /// Where thread index `i`'s row is ([`PermutedRowIndex`]), or `None` past `u32`.
    #[inline(always)]
    pub fn row_of(&self, i: ThreadIndex) -> Option<PermutedRowIndex> {
        let (_, a, b) = self.shape;
        permuted(u32::try_from(i.get()).ok()?, a, b)
    }

    /// This thread's row: where it is ([`PermutedRowIndex`]) and its `cols` elements, read and
    /// written with plain accesses; `None` when the row is not inside the buffer (or the index
    /// is past `u32`).
    #[inline(always)]
    #[track_caller]
    pub fn row_mut(&mut self, me: ThreadIndex) -> Option<(PermutedRowIndex, &mut [T])> {
        let i = me.owned();
        let (cols, a, b) = self.shape;
        let at = permuted(u32::try_from(i).ok()?, a, b)?;
        let start = row_start(at.row, cols, self.len)?;
        let cols = cols as usize;
        let pointer = self.note(start, cols, true);
        // SAFETY: `start + cols <= len` (above); the row belongs to this thread alone (see
        // `PermutedRows`), and the borrow of `self` keeps this thread from a second reference.
        Some((at, unsafe { core::slice::from_raw_parts_mut(pointer.add(start), cols) }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrocuda_types::{LaunchConfig, LaunchProblem};

    /// The map is a bijection on every range of whole groups (and so disjoint): llm.c's
    /// `(b, t, h) -> (b, h, t)` for a few shapes, against the source's own arithmetic.
    #[test]
    fn s24_permuted_rows_map_is_the_sources_and_a_bijection() {
        for (bs, t, nh) in [(2u32, 5u32, 3u32), (1, 1, 7), (3, 4, 1), (2, 64, 12)] {
            let total = bs * t * nh;
            let mut seen = vec![false; total as usize];
            for idx in 0..total {
                let (h, tt, bb) = (idx % nh, (idx / nh) % t, idx / (nh * t));
                let want = (bb * nh * t + h * t + tt) as usize;
                let got = permuted(idx, t, nh).unwrap();
                assert_eq!((got.row, got.q, got.x, got.y), (want, bb, tt, h), "idx {idx} of ({bs}, {t}, {nh})");
                assert!(!std::mem::replace(&mut seen[got.row], true), "row {} twice", got.row);
            }
        }
        // Near the top of u32 the row is computed in 64 bits.
        assert_eq!(permuted(u32::MAX, 1, u32::MAX).unwrap().row, u32::MAX as usize);
        let i = u32::MAX - 1;
        let (a, b) = (3u32, 5u32);
        let (q, r) = (u64::from(i / 15), i % 15);
        assert_eq!(permuted(i, a, b).unwrap().row as u64, q * 15 + u64::from((r % b) * a + r / b));
    }

    /// G24S-1 (audit 2026-11-29g): the review's values. Thread 4 294 964 491 under radices
    /// (198, 21 582 744) has row 8 546 456 754; with `cols` 2 158 408 403 its start wrapped past
    /// 2^64 to 152 246, inside thread 0's row, and passed the bound. Now it has no row.
    #[test]
    fn g24s1_a_row_whose_start_wraps_past_u64_gets_none() {
        let at = permuted(4_294_964_491, 198, 21_582_744).unwrap();
        assert_eq!(at.row, 8_546_456_754);
        let (cols, len) = (2_158_408_403u32, 2_158_560_649usize);
        assert_eq!((at.row as u64).wrapping_mul(u64::from(cols)), 152_246, "the review's wrap");
        assert_eq!(row_start(at.row, cols, len), None);
        assert_eq!(row_start(0, cols, len), Some(0));
        assert_eq!(row_start(1, cols, len), None, "past the buffer");
        assert_eq!(row_start(usize::MAX >> 1, u32::MAX, usize::MAX), None, "the end wraps");
    }

    /// G24S-2 (audit 2026-11-29g): the device no longer assumes the host checked the radices
    /// (a `cfg`-chosen `cols(..)` constant could differ between the builds): radices the launch
    /// check refuses give no row.
    #[test]
    fn g24s2_radices_the_launch_refuses_give_no_row_on_the_device_side() {
        for (a, b) in [(0, 65_536), (5, 0), (0, 0), (1 << 16, 1 << 16), (u32::MAX, 2)] {
            assert_eq!(permuted(7, a, b), None, "{a} {b}");
        }
        assert!(permuted(7, 1, 65_536).is_some());
    }

    /// The launch-time bound: radices of at least 1 with a product within u32.
    #[test]
    fn s24_permuted_rows_launch_bound() {
        let config = LaunchConfig::new(4u32, 256u32);
        let check = |a: u32, b: u32| <PermutedRows as Partition>::check_launch("att", &config, 1 << 20, (16, a, b));
        assert_eq!(check(16, 12), Ok(()));
        assert_eq!(check(1, u32::MAX), Ok(()));
        for (a, b) in [(0, 5), (5, 0), (0, 0)] {
            assert!(matches!(check(a, b), Err(LaunchProblem::OutputShapeOutOfRange { output: "att", value: 0, limit: 1, .. })), "{a} {b}");
        }
        assert!(matches!(check(1 << 16, 1 << 16), Err(LaunchProblem::OutputShapeOutOfRange { value, .. }) if value == 1 << 32));
    }
}
