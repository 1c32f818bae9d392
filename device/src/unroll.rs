//! Guaranteed full unrolling: [`unroll`]`::<N>(|i| ..)` calls the closure with `i = 0, 1, ..,
//! N - 1` as compile-time constants, expanded at compile time (a chain of `#[inline(always)]`
//! calls, one per index), whatever LLVM's unroll heuristics would have done.
//!
//! Why: LLVM unrolls loops by a factor of 0-4 at its discretion (nvcc: `#pragma unroll`), and
//! a register array (`[f32; 32]` of accumulators) indexed by a loop counter that is not
//! unrolled is moved to local memory (stack-frame bytes in `ptxas -v`, `LDL`/`STL` in SASS).
//! With `unroll`, each index is a constant, so the array stays in registers:
//! ```ignore
//! let mut acc = [0.0f32; 8];  // see docs/performance.md for large arrays
//! ferrocuda_device::unroll::unroll::<8>(|i| acc[i] += a[i] * b);
//! ```
//! Cost: code size grows N-fold; N is at most 128.

/// A count known at compile time (`Const<N>`), the type that [`Unrolled`] is implemented for.
pub struct Const<const N: usize>;

/// Counts from 0 to `N - 1` by expansion (implemented for `Const<0>` to `Const<128>`).
pub trait Unrolled {
    /// Calls `f(0)`, `f(1)`, .. in order.
    fn each<F: FnMut(usize)>(f: &mut F);
}

impl Unrolled for Const<0> {
    #[inline(always)]
    fn each<F: FnMut(usize)>(_f: &mut F) {}
}

macro_rules! unrolled {
    ($($n:literal => $previous:literal),*) => {$(
        impl Unrolled for Const<$n> {
            #[inline(always)]
            fn each<F: FnMut(usize)>(f: &mut F) {
                <Const<$previous> as Unrolled>::each(f);
                f($previous);
            }
        }
    )*};
}

unrolled!(1 => 0, 2 => 1, 3 => 2, 4 => 3, 5 => 4, 6 => 5, 7 => 6, 8 => 7, 9 => 8, 10 => 9, 11 => 10, 12 => 11, 13 => 12, 14 => 13, 15 => 14, 16 => 15, 17 => 16, 18 => 17, 19 => 18, 20 => 19, 21 => 20, 22 => 21, 23 => 22, 24 => 23, 25 => 24, 26 => 25, 27 => 26, 28 => 27, 29 => 28, 30 => 29, 31 => 30, 32 => 31, 33 => 32, 34 => 33, 35 => 34, 36 => 35, 37 => 36, 38 => 37, 39 => 38, 40 => 39, 41 => 40, 42 => 41, 43 => 42, 44 => 43, 45 => 44, 46 => 45, 47 => 46, 48 => 47, 49 => 48, 50 => 49, 51 => 50, 52 => 51, 53 => 52, 54 => 53, 55 => 54, 56 => 55, 57 => 56, 58 => 57, 59 => 58, 60 => 59, 61 => 60, 62 => 61, 63 => 62, 64 => 63, 65 => 64, 66 => 65, 67 => 66, 68 => 67, 69 => 68, 70 => 69, 71 => 70, 72 => 71, 73 => 72, 74 => 73, 75 => 74, 76 => 75, 77 => 76, 78 => 77, 79 => 78, 80 => 79, 81 => 80, 82 => 81, 83 => 82, 84 => 83, 85 => 84, 86 => 85, 87 => 86, 88 => 87, 89 => 88, 90 => 89, 91 => 90, 92 => 91, 93 => 92, 94 => 93, 95 => 94, 96 => 95, 97 => 96, 98 => 97, 99 => 98, 100 => 99, 101 => 100, 102 => 101, 103 => 102, 104 => 103, 105 => 104, 106 => 105, 107 => 106, 108 => 107, 109 => 108, 110 => 109, 111 => 110, 112 => 111, 113 => 112, 114 => 113, 115 => 114, 116 => 115, 117 => 116, 118 => 117, 119 => 118, 120 => 119, 121 => 120, 122 => 121, 123 => 122, 124 => 123, 125 => 124, 126 => 125, 127 => 126, 128 => 127);

/// Calls `f(i)` for `i` in `0..N`, fully unrolled at compile time (`N <= 128`).
#[inline(always)]
pub fn unroll<const N: usize>(mut f: impl FnMut(usize))
where
    Const<N>: Unrolled,
{
    <Const<N> as Unrolled>::each(&mut f);
}

/// Calls `f(i)` for `i` in `0..n` in order, each call's work apart from the others': the
/// opposite of [`unroll`], for a cold path (an element-by-element fallback beside a 16-byte
/// fast path) that must not need more registers than the hot path it sits beside.
///
/// Why: a kernel's register count is that of its hungriest path. Unrolled, an element
/// fallback reading 8 elements of 4 arrays has ptxas issue all 32 loads together (a register
/// each), and even as a loop LLVM turns each array access into a pointer of its own, advanced
/// every iteration and live across the loop: issue 31's rotary embedding held 56 registers
/// (its 16-byte path needs 32) and ran at 0.82x its CUDA C++ twin; as a plain loop, 40. Here
/// the count and each index pass through an empty `mov` the optimiser cannot see through, so
/// every access is computed from `i` afresh (an add and a shift) and nothing but `i` is
/// carried from one call to the next; a `.pragma "nounroll"` asks ptxas to keep the loop (it
/// does for a loop of one block; where it unrolls anyway, the calls still do not share
/// registers). On the host, a plain loop.
///
/// Do not index a register array with `i` (that array would move to local memory, as with
/// any loop); index memory (a slice, an output chunk) instead.
#[inline(always)]
pub fn rolled(n: usize, mut f: impl FnMut(usize)) {
    let n = opaque(n);
    let mut i = 0;
    while i < n {
        keep_rolled();
        f(opaque(i));
        i += 1;
    }
}

/// On the GPU, PTX's `.pragma "nounroll"` (ptxas sees through [`opaque`]'s `mov`): at the top
/// of the loop body, the loop's header block, where the PTX ISA requires it.
#[inline(always)]
fn keep_rolled() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a compiler directive; no instruction.
    unsafe {
        core::arch::asm!(".pragma \"nounroll\";", options(nomem, nostack, preserves_flags))
    };
}

/// `n`, through an instruction LLVM cannot evaluate (`mov.b64` in inline PTX): a loop bounded
/// by it has no trip count known to LLVM, and an address computed from it is no induction
/// variable.
#[inline(always)]
fn opaque(n: usize) -> usize {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: usize;
        // SAFETY: a register move; no memory, no side effects.
        unsafe { core::arch::asm!("mov.b64 {r}, {n};", r = out(reg64) r, n = in(reg64) n, options(pure, nomem, nostack)) };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        n
    }
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    #[test]
    fn unroll_visits_each_index_in_order() {
        let mut seen = Vec::new();
        super::unroll::<37>(|i| seen.push(i));
        assert_eq!(seen, (0..37).collect::<Vec<_>>());
        super::unroll::<0>(|_| panic!("no index in 0..0"));
    }

    #[test]
    fn rolled_visits_each_index_in_order() {
        let mut seen = Vec::new();
        super::rolled(11, |i| seen.push(i));
        assert_eq!(seen, (0..11).collect::<Vec<_>>());
        super::rolled(0, |_| panic!("no index in 0..0"));
    }
}

/// `f(&items[i])` for `i = start, start + stride, ...` below `items.len()`, four per step of
/// the main loop while the fourth is in range, then one by one: nvcc's unroll by 4 of a
/// `for (i = tid; i < n; i += blockDim.x)` loop with a run-time stride, without its trip-count
/// division, so that four loads are in flight (session 18, an opt-in experiment for issue 30's
/// gap 2; `thread::strided_range` keeps one: see docs/performance.md). A `stride` of 0 calls
/// nothing.
#[inline(always)]
pub fn strided_x4<T>(items: &[T], start: usize, stride: usize, mut f: impl FnMut(&T)) {
    let len = items.len();
    if stride == 0 || start >= len {
        return;
    }
    let p = items.as_ptr();
    let mut i = start;
    // `i < len`, so `len - i` does not underflow; `3 stride < len - i` without overflow
    // (checked), then `i + 3 stride < len` and every sum below is in range.
    while stride.checked_mul(3).is_some_and(|s3| s3 < len - i) {
        for k in 0..4 {
            // SAFETY: `i + k stride <= i + 3 stride < len`.
            f(unsafe { &*p.add(i + k * stride) });
        }
        i += 4 * stride;
        if i >= len {
            return;
        }
    }
    loop {
        // SAFETY: `i < len` (checked before the loop and at each step).
        f(unsafe { &*p.add(i) });
        match i.checked_add(stride) {
            Some(next) if next < len => i = next,
            _ => return,
        }
    }
}
