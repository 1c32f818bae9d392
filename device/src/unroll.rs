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
//!
//! For a loop whose count is known only at run time, [`counted`]`::<4>(n, |i| ..)` is nvcc's
//! `#pragma unroll 4` for that loop alone (rounds of four, then the rest), and
//! [`counted_loads_first`] the same with each round's loads issued before their uses;
//! [`counted_gather`] for gathers through loaded indices (indices, then gathers, then uses).

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

/// nvcc's `#pragma unroll N` on `for (int i = 0; i < n; i++) f(i)` with a run-time `n`: `f(i)`
/// for `i` in `0..n` in order, `N` calls a round (expanded as [`unroll`] expands them, the
/// round loop marked `nounroll` for ptxas as nvcc marks its own) while `N` remain, then the
/// last `n % N` one by one (a rolled loop, as nvcc's remainder; ptxas may unroll it). Whatever LLVM's run-time unroll
/// heuristics say (with the builder's default flags they leave a counted loop with a load in it
/// rolled: docs/performance.md, "a loop whose trip count is known only at run time"), and for
/// this loop only, where `KernelBuilder::runtime_unroll(4)` changes every loop of the crate.
///
/// For a body whose loads are each behind their own test (`if let Some(p) = rows.get(j)`), the
/// rounds' tests still stand between the loads and ptxas issues them one at a time; use
/// [`counted_loads_first`], which issues the round's `N` loads before any use.
///
/// ```ignore
/// // vLLM's `for (int k_idx = 0; k_idx < k; ++k_idx) { .. }`, four experts a round:
/// ferrocuda_device::unroll::counted::<4>(k, |e| acc += scales[e] * x[e]);
/// ```
/// `N` is 1 to 128 (`N = 0` does not compile).
#[inline(always)]
pub fn counted<const N: usize>(n: usize, mut f: impl FnMut(usize))
where
    Const<N>: Unrolled,
{
    const { assert!(N > 0, "unroll::counted::<0>: a round of 0 calls never ends") };
    // `i <= n` throughout, so `n - i` does not wrap, and a round's indices `i + j < i + N <= n`
    // follow from the loop's own test (what lets LLVM drop the bounds checks of `x[i + j]`
    // where `n` is `x.len()`). Each loop is marked `nounroll` for ptxas, as nvcc marks the
    // loops it unrolled: without it ptxas unrolls the round loop again, by 4 (16 steps a
    // round, four times the code).
    let mut i = 0;
    while n - i >= N {
        keep_rolled();
        unroll::<N>(|j| f(below(i + j, n)));
        i += N;
    }
    // The tail, `n - i < N` steps, a rolled loop as nvcc's remainder. Its step passes through
    // `opaque`, so LLVM's NVPTX run-time unrolling of small loops (on by default, blind to the
    // `nounroll` string) finds no trip count to unroll by; ptxas may still unroll it (it keeps
    // `nounroll` only for a loop of one block). Written out instead (`N - 1` guarded calls), the
    // tail made ptxas schedule the rounds worse: vLLM's MoE finalize issued one gather before
    // its first FMA where `_x4` issues three (session 23, bench/results/s23-gaps).
    while i < n {
        keep_rolled();
        f(below(i, n));
        i = opaque(i + 1);
    }
}

/// [`counted`] with each step cut in two, `load(i)` (the step's reads: a gather through an
/// index, a 16-byte pack) then `apply(i, value)` (the arithmetic that uses them): a round
/// calls `load` for its `N` steps first, then `apply` for each in order, so the round's `N`
/// loads are in flight together, as nvcc's `#pragma unroll 4` schedules them when no test
/// stands between them. The last `n % N` steps load and apply one by one.
///
/// Make `load` branch-free where it can read out of bounds: `rows.get(j).map(Bf16x8::load)
/// .unwrap_or_default()` (a predicated load), not an early return or `continue` per step,
/// which would put a test back between the loads. `apply` sees the steps in order `0..n`, so a
/// sum keeps the bits of the plain loop's.
///
/// ```ignore
/// // vLLM's finalizeMoeRoutingKernel: over the token's `k` experts, gather a pack of each, then
/// // add it scaled: four gathers in flight a thread.
/// counted_loads_first::<4, _>(
///     k,
///     |e| rows.get(map[e] as usize * cols + col).map(Bf16x8::load).unwrap_or_default(),
///     |e, pack| { let x = pack.to_f32s(); for j in 0..8 { acc[j] += scales[e] * x[j] } },
/// );
/// ```
/// Cost: the round's `N` values live at once (registers: `N` times one value's).
#[inline(always)]
pub fn counted_loads_first<const N: usize, T: Copy>(n: usize, mut load: impl FnMut(usize) -> T, mut apply: impl FnMut(usize, T))
where
    Const<N>: Unrolled,
{
    const { assert!(N > 0, "unroll::counted_loads_first::<0>: a round of 0 steps never ends") };
    // As in `counted`: `n - i >= N` bounds the round's indices; `nounroll` for ptxas.
    let mut i = 0;
    while n - i >= N {
        keep_rolled();
        // The first value fills the array so that no `Default` is needed; the index of each
        // later store is a constant once expanded, so no test is left.
        let first = load(below(i, n));
        let mut values = [first; N];
        unroll::<N>(|j| {
            if j > 0 {
                values[j] = load(below(i + j, n));
            }
        });
        unroll::<N>(|j| apply(below(i + j, n), values[j]));
        i += N;
    }
    // The tail, rolled (see `counted`).
    while i < n {
        keep_rolled();
        let value = load(below(i, n));
        apply(below(i, n), value);
        i = opaque(i + 1);
    }
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

/// [`counted_loads_first`] for a gather through an index that is itself loaded (vLLM's
/// `rows[map[row * k + e] * cols + i]`): a round reads its `N` indices first (`index(i)`), then
/// issues the `N` gathers (`load(i, index)`), then applies them in order (`apply(i, value)`);
/// the tail likewise. Why three phases: with `counted_loads_first` and a `load` that reads the
/// index and then the row, ptxas (13.0, sm_90) may schedule each step's gather right behind
/// its own index load, the previous step's FMAs in between (session 23: vLLM's
/// `finalizeMoeRoutingKernel` with `k` = 8 measured 0.922x nvcc that way, with the tail then
/// written out; the first try's rolled loop 1.022x, the hand-written form with the four map
/// entries read first 1.051x).
///
/// ```ignore
/// counted_gather::<4, _, _>(
///     k,
///     |e| map[e] as usize,
///     |_, dest| rows.get(dest * cols + i).map(Bf16x8::load).unwrap_or_default(),
///     |e, pack| { let x = pack.to_f32s(); for j in 0..8 { acc[j] += scales[e] * x[j] } },
/// );
/// ```
/// Cost: the round's `N` indices and `N` values live at once.
#[inline(always)]
pub fn counted_gather<const N: usize, I: Copy, T: Copy>(
    n: usize,
    mut index: impl FnMut(usize) -> I,
    mut load: impl FnMut(usize, I) -> T,
    mut apply: impl FnMut(usize, T),
) where
    Const<N>: Unrolled,
{
    const { assert!(N > 0, "unroll::counted_gather::<0>: a round of 0 steps never ends") };
    let mut i = 0;
    while n - i >= N {
        keep_rolled();
        let first = index(below(i, n));
        let mut indices = [first; N];
        unroll::<N>(|j| {
            if j > 0 {
                indices[j] = index(below(i + j, n));
            }
        });
        let first = load(below(i, n), indices[0]);
        let mut values = [first; N];
        unroll::<N>(|j| {
            if j > 0 {
                values[j] = load(below(i + j, n), indices[j]);
            }
        });
        unroll::<N>(|j| apply(below(i + j, n), values[j]));
        i += N;
    }
    // The tail, rolled (see `counted`).
    while i < n {
        keep_rolled();
        let at = index(below(i, n));
        let value = load(below(i, n), at);
        apply(below(i, n), value);
        i = opaque(i + 1);
    }
}

/// `i`, with LLVM told that it is below `n`, so that `x[i]` on a slice of length `n` needs no
/// check: the rounds of [`counted`] and [`counted_loads_first`] count so that it holds (LLVM
/// does not prove it once the loop is rotated onto a down-counter).
#[inline(always)]
fn below(i: usize, n: usize) -> usize {
    debug_assert!(i < n);
    // SAFETY: every caller passes an index of a round that the loop's test `n - i >= N`
    // admitted (`i + j < i + N <= n`), or a tail index below `n` by its loop's test.
    unsafe { core::hint::assert_unchecked(i < n) };
    i
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

    /// Every count from 0 to 3 rounds and a tail, for rounds of 1, 3 and 4: each index once, in
    /// order (the tail after the whole rounds).
    #[test]
    fn counted_visits_each_index_once_in_order() {
        fn check<const N: usize>()
        where
            super::Const<N>: super::Unrolled,
        {
            for n in 0..3 * N + N {
                let mut seen = Vec::new();
                super::counted::<N>(n, |i| seen.push(i));
                assert_eq!(seen, (0..n).collect::<Vec<_>>(), "counted::<{N}>({n})");
            }
        }
        check::<1>();
        check::<3>();
        check::<4>();
    }

    /// A round: every index, then every gather, then every use, in order; the tail step by step.
    #[test]
    fn counted_gather_reads_indices_then_gathers_then_applies() {
        for n in 0..11usize {
            let log = core::cell::RefCell::new(Vec::new());
            super::counted_gather::<4, _, _>(
                n,
                |i| {
                    log.borrow_mut().push(('I', i));
                    i + 100
                },
                |i, at| {
                    assert_eq!(at, i + 100, "step {i} got another step's index");
                    log.borrow_mut().push(('L', i));
                    i * 10
                },
                |i, v| {
                    assert_eq!(v, i * 10, "step {i} got another step's value");
                    log.borrow_mut().push(('A', i));
                },
            );
            let mut want = Vec::new();
            let whole = n / 4 * 4;
            for r in (0..whole).step_by(4) {
                for phase in ['I', 'L', 'A'] {
                    want.extend((r..r + 4).map(|i| (phase, i)));
                }
            }
            for i in whole..n {
                want.extend([('I', i), ('L', i), ('A', i)]);
            }
            assert_eq!(log.into_inner(), want, "n {n}");
        }
    }

    /// Within a round every load comes before every use; each step's value reaches its own
    /// `apply`; the steps' uses are in order `0..n`; the tail loads and applies one by one.
    #[test]
    fn counted_loads_first_loads_a_round_before_its_uses() {
        for n in 0..14usize {
            let log = core::cell::RefCell::new(Vec::new());
            super::counted_loads_first::<4, _>(
                n,
                |i| {
                    log.borrow_mut().push(('L', i));
                    i * 10 + 1
                },
                |i, v| {
                    assert_eq!(v, i * 10 + 1, "step {i} got another step's value");
                    log.borrow_mut().push(('A', i));
                },
            );
            let mut want = Vec::new();
            let whole = n / 4 * 4;
            for r in (0..whole).step_by(4) {
                want.extend((r..r + 4).map(|i| ('L', i)));
                want.extend((r..r + 4).map(|i| ('A', i)));
            }
            for i in whole..n {
                want.extend([('L', i), ('A', i)]);
            }
            assert_eq!(log.into_inner(), want, "n {n}");
        }
    }
}

/// `f(&items[i])` for `i = start, start + stride, ...` below `items.len()`, four per step of
/// the main loop while the fourth is in range, then one by one: nvcc's unroll by 4 of a
/// `for (int i = tid; i < n; i += block_size)` loop with a run-time `int` stride, without its
/// trip-count division, so that four loads are in flight (session 18, an opt-in experiment for
/// issue 30's gap 2; `thread::strided_range` keeps one: see docs/performance.md). A `stride` of
/// 0 calls nothing.
///
/// Read the twin's SASS before using it (`scripts/sass.py`): nvcc 13 keeps
/// `i += blockDim.x` (an `unsigned` add), `int64_t` counters and bodies with inline `asm`
/// (`__ldg`, `__ldcs`, cuda_bf16.h's conversions) rolled, one load in flight, and there this form costs registers (64-bit
/// indices) and instructions for nothing: issue 30's eleventh port, 0.77x and 0.91x nvcc
/// (bench/results/s23-gaps2/strided-unroll.md). Its four-at-a-time step runs only for threads
/// with at least four elements.
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
