//! Thread, block and grid indices and sizes (`threadIdx`, `blockIdx`, `blockDim`, `gridDim`).
//!
//! Each axis function compiles to one `mov.u32 %r, %tid.x`-style special-register read; the
//! 3-D forms read three. On the host they read the CPU executor's current thread.

/// A 3-D index or size, as CUDA's `dim3`/`uint3` (the one type the host, the device library
/// and the CPU executor share).
pub use ferrocuda_types::Dim3;

macro_rules! special_registers {
    ($($(#[$doc:meta])* $name:ident => $intrinsic:ident, $which:ident [$axis:literal];)*) => {$(
        $(#[$doc])*
        #[inline(always)]
        pub fn $name() -> u32 {
            #[cfg(target_arch = "nvptx64")]
            // SAFETY: reading a special register has no preconditions inside a kernel.
            unsafe { core::arch::nvptx::$intrinsic() as u32 }
            #[cfg(not(target_arch = "nvptx64"))]
            crate::cpu::hooks::$which()[$axis]
        }
    )*};
}

special_registers! {
    /// `threadIdx.x`
    thread_idx_x => _thread_idx_x, thread_idx[0];
    /// `threadIdx.y`
    thread_idx_y => _thread_idx_y, thread_idx[1];
    /// `threadIdx.z`
    thread_idx_z => _thread_idx_z, thread_idx[2];
    /// `blockIdx.x`
    block_idx_x => _block_idx_x, block_idx[0];
    /// `blockIdx.y`
    block_idx_y => _block_idx_y, block_idx[1];
    /// `blockIdx.z`
    block_idx_z => _block_idx_z, block_idx[2];
    /// `blockDim.x`
    block_dim_x => _block_dim_x, block_dim[0];
    /// `blockDim.y`
    block_dim_y => _block_dim_y, block_dim[1];
    /// `blockDim.z`
    block_dim_z => _block_dim_z, block_dim[2];
    /// `gridDim.x`
    grid_dim_x => _grid_dim_x, grid_dim[0];
    /// `gridDim.y`
    grid_dim_y => _grid_dim_y, grid_dim[1];
    /// `gridDim.z`
    grid_dim_z => _grid_dim_z, grid_dim[2];
}

/// `threadIdx`: this thread's index in its block.
#[inline(always)]
pub fn thread_idx() -> Dim3 {
    Dim3 { x: thread_idx_x(), y: thread_idx_y(), z: thread_idx_z() }
}

/// `blockIdx`: this block's index in the grid.
#[inline(always)]
pub fn block_idx() -> Dim3 {
    Dim3 { x: block_idx_x(), y: block_idx_y(), z: block_idx_z() }
}

/// `blockDim`: threads per block along each axis.
#[inline(always)]
pub fn block_dim() -> Dim3 {
    Dim3 { x: block_dim_x(), y: block_dim_y(), z: block_dim_z() }
}

/// `gridDim`: blocks per grid along each axis.
#[inline(always)]
pub fn grid_dim() -> Dim3 {
    Dim3 { x: grid_dim_x(), y: grid_dim_y(), z: grid_dim_z() }
}

/// `blockIdx.x * blockDim.x + threadIdx.x` as `usize`: the 1-D global index.
#[inline(always)]
pub fn index_1d() -> usize {
    block_idx_x() as usize * block_dim_x() as usize + thread_idx_x() as usize
}

/// The global `(x, y)` index of a 2-D launch: `(blockIdx.x * blockDim.x + threadIdx.x,
/// blockIdx.y * blockDim.y + threadIdx.y)`. Use `x` for the column, so that consecutive
/// threads touch consecutive addresses.
#[inline(always)]
pub fn index_2d() -> (usize, usize) {
    (index_1d(), block_idx_y() as usize * block_dim_y() as usize + thread_idx_y() as usize)
}

/// The global `(x, y, z)` index of a 3-D launch.
#[inline(always)]
pub fn index_3d() -> (usize, usize, usize) {
    let (x, y) = index_2d();
    (x, y, block_idx_z() as usize * block_dim_z() as usize + thread_idx_z() as usize)
}

/// This thread's rank in its block, `x` fastest: `threadIdx.x + blockDim.x * (threadIdx.y +
/// blockDim.y * threadIdx.z)`. Warps are formed from consecutive ranks.
#[inline(always)]
pub fn rank_in_block() -> u32 {
    // A 1-D block (the common case; `blockDim.y` and `.z` are constant-bank reads) needs no
    // `threadIdx.y` and `.z`: each is an `S2R`, a special-register read of variable latency
    // that sat on a block reduction's critical path (issue 31).
    // The reads of `threadIdx.y` and `.z` are inline PTX inside the branch: LLVM would hoist
    // its own (speculatable) intrinsics out of it and select, reading them in every block.
    if block_dim_y() == 1 && block_dim_z() == 1 {
        thread_idx_x()
    } else {
        thread_idx_x() + block_dim_x() * (unhoisted_tid(1) + block_dim_y() * unhoisted_tid(2))
    }
}

/// `threadIdx.y` (`axis` 1) or `.z` (2), read where it is written: on the GPU an inline-PTX
/// `mov` from the special register, which the optimiser does not move into a path that did not
/// ask for it.
#[inline(always)]
fn unhoisted_tid(axis: usize) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: reading a special register has no preconditions inside a kernel.
        unsafe {
            if axis == 1 {
                core::arch::asm!("mov.u32 {r}, %tid.y;", r = out(reg32) r, options(nomem, nostack, preserves_flags));
            } else {
                core::arch::asm!("mov.u32 {r}, %tid.z;", r = out(reg32) r, options(nomem, nostack, preserves_flags));
            }
        }
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        crate::cpu::hooks::thread_idx()[axis]
    }
}

/// Tells the compiler the block's shape, `(N, 1, 1)`, and asks for the PTX directive that makes
/// it true: emitted by `#[kernel(reqntid(n))]` at the top of the entry point, so that
/// `block_dim_x()` is the constant `n` in the kernel (a `BlockRows` row's stride,
/// `block_size()` in the block reductions): loops striding by it get a trip count the compiler
/// can compute, and unroll as nvcc's do over a `constexpr` block size (llm.c's
/// `BlockSize = 256`).
///
/// The assumption and the directive come from this one call (session 21): it writes the PTX
/// comment `// ferrocuda.reqntid N` into the entry's body (an `asm!` that emits no instruction),
/// and ferrocuda-builder gives every entry whose body holds it `.reqntid N, 1, 1`, with which a
/// GPU refuses any other block. Before, the directive came only from a separate marker
/// (`launch_bounds!`), named like this function through a path the kernel's crate can rename:
/// a crate that made the marker a no-op kept the assumption with nothing to enforce it. Now a
/// crate that drops or replaces this call drops the assumption with it (making one of its own
/// takes its own `unsafe`). A run-time check instead (a trap on another shape) was measured:
/// ptxas does not fold it under `.reqntid`, 7 more instructions per entry.
///
/// # Safety
/// The block has that shape: true in an entry point built by ferrocuda-builder, which gives the
/// entry `.reqntid N, 1, 1` from this call's comment (a GPU refuses to launch it in any other
/// block; the launchers refuse it first, naming `reqntid`).
#[doc(hidden)]
#[inline(always)]
pub unsafe fn __assume_reqntid<const N: u32>() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a PTX comment: no instruction, no operand.
    unsafe {
        core::arch::asm!("// ferrocuda.reqntid {n}", n = const N, options(nomem, nostack, preserves_flags))
    };
    // SAFETY: the caller's contract (the directive the comment above asks for).
    unsafe { core::hint::assert_unchecked(block_dim_x() == N && block_dim_y() == 1 && block_dim_z() == 1) }
}

/// `#[kernel(ftz)]`'s entries call it first: the PTX comment `// ferrocuda.ftz` (an `asm!` that
/// emits no instruction), from which ferrocuda-builder gives the entry's `f32` instructions (and
/// those of the `.func`s only such entries call) PTX's `.ftz`, nvcc's `-ftz=true`: subnormal
/// inputs and results become zero of the same sign. Nothing else: safe, since which finite
/// value an `f32` operation yields is no part of any safety contract here. On the CPU executor
/// it does nothing (IEEE arithmetic: Rust defines running its code under a changed
/// floating-point environment, MXCSR's flush-to-zero, as undefined behaviour).
#[doc(hidden)]
#[inline(always)]
pub fn __flush_denormals() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a PTX comment: no instruction, no operand.
    unsafe {
        core::arch::asm!("// ferrocuda.ftz", options(nomem, nostack, preserves_flags))
    };
}

/// The launch satisfies `requirements`, the kernel's outputs' [`LaunchRequirements`](ferrocuda_types::LaunchRequirements)
/// (`#[kernel]` entries call it first): every launcher checks them before the kernel runs
/// (`LaunchConfig::check_requirements`), so the entry tells the compiler, and a 1-D kernel's
/// `blockDim.y`/`.z` and `gridDim.y`/`.z` are the constant 1, its `threadIdx.y`/`.z` and
/// `blockIdx.y`/`.z` 0: the run-time tests of the block's shape in `rank_in_block`,
/// `block_size` and the block collectives (`RuntimeBlockReduce`'s 3-D rank, its partial-warp
/// branch under `whole_warps`) fold away (issue 30, session 16: vLLM's RMS norm, 421 -> 401
/// SASS instructions; nvcc's 372).
///
/// # Safety
/// The launch satisfies `requirements` (checked by the caller's launcher).
#[doc(hidden)]
#[inline(always)]
pub unsafe fn __assume_launch(requirements: ferrocuda_types::LaunchRequirements) {
    // SAFETY (every `assert_unchecked` below): what `check_requirements` refused otherwise.
    if requirements.linear_threads {
        unsafe { core::hint::assert_unchecked(block_dim_y() == 1 && block_dim_z() == 1 && grid_dim_y() == 1 && grid_dim_z() == 1) };
    }
    if requirements.linear_blocks {
        unsafe { core::hint::assert_unchecked(block_dim_y() == 1 && block_dim_z() == 1 && grid_dim_z() == 1) };
    }
    if requirements.planar_threads {
        unsafe { core::hint::assert_unchecked(block_dim_z() == 1 && grid_dim_z() == 1) };
    }
    if requirements.whole_warps {
        unsafe { core::hint::assert_unchecked(block_dim_x().is_multiple_of(32)) };
    }
    let (x, y) = requirements.block_shape;
    if (x, y) != (0, 0) && !requirements.conflicting_block_shapes {
        unsafe { core::hint::assert_unchecked(block_dim_x() == x && block_dim_y() == y && block_dim_z() == 1 && grid_dim_z() == 1) };
    }
    // Indices below their dimensions (the hardware's; said for the ones just fixed to 1).
    if block_dim_y() == 1 {
        unsafe { core::hint::assert_unchecked(thread_idx_y() == 0) };
    }
    if block_dim_z() == 1 {
        unsafe { core::hint::assert_unchecked(thread_idx_z() == 0) };
    }
    if grid_dim_y() == 1 {
        unsafe { core::hint::assert_unchecked(block_idx_y() == 0) };
    }
    if grid_dim_z() == 1 {
        unsafe { core::hint::assert_unchecked(block_idx_z() == 0) };
    }
}

/// Threads in a block (`blockDim.x * blockDim.y * blockDim.z`).
#[inline(always)]
pub fn block_size() -> u32 {
    block_dim_x() * block_dim_y() * block_dim_z()
}

/// `gridDim.x * blockDim.x` as `usize`: the stride of a 1-D grid-stride loop.
#[inline(always)]
pub fn grid_stride_1d() -> usize {
    grid_dim_x() as usize * block_dim_x() as usize
}

/// The indices `index_1d(), index_1d() + stride, ...` below `len`: a grid-stride loop,
/// CUDA's `for (i = blockIdx.x * blockDim.x + threadIdx.x; i < len; i += blockDim.x *
/// gridDim.x)`.
///
/// The loop is that compare and that add, so `x[i]` on a slice of length `len` has no bounds
/// check left (`i < len` is the loop's own test) and reads through `ld.global.nc`. (It was
/// core's `(index..len).step_by(stride)`, whose remaining-count arithmetic hid the test:
/// llm.c's `global_norm_squared_kernel` kept a bounds check and the panic path per element,
/// 679 SASS instructions against nvcc's 83, 0.94x; issue 30's third port.)
#[inline(always)]
pub fn grid_stride_range(len: usize) -> GridStrideRange {
    GridStrideRange::new(index_1d(), grid_stride_1d(), len)
}

/// The indices `start, start + step, ...` below `end`: CUDA's `for (i = start; i < end; i +=
/// step)`, the loop of a lane (`step` 32) or a thread (`step` `blockDim.x`) striding over a
/// row it only reads (a reduction pass: llm.c's `for (i = lane_id; i < pos_by_4; i +=
/// WARP_SIZE)`). One exit (the compare), so LLVM can unroll it, and `x[i]` on a slice
/// of length `end` has no bounds check; a `while` loop with `x.get(i)` and a `break` kept
/// one load in flight per lane (llm.c's `softmax_forward_kernel5`, 0.93x; issue 30's third
/// port). `step` 0 counts as 1. The step's add cannot wrap (indices stop below `isize::MAX`,
/// past which no slice has elements), so with a step the compiler knows (a constant, or
/// `block_dim_x()` under `#[kernel(reqntid(n))]`) the trip count is a shift and LLVM unrolls
/// the loop (several loads in flight, as nvcc's over a `constexpr` stride).
///
/// **`usize` or `u32`** ([`StrideIndex`]): with `u32` arguments the loop counts in 32 bits,
/// CUDA's `int` counter, where `usize` takes a register pair and four instructions a step (a
/// 64-bit add and compare). Use `u32` where the bound is a `u32` or a shared-memory length
/// ([`SharedSliceX4::len_u32`](crate::shared_vector::SharedSliceX4::len_u32): shared memory is
/// addressed in 32 bits, so every length fits): `for k in strided_range(lane, tmp.len_u32(), 32) { tmp.get(k as
/// usize) }` indexes `tmp` unchecked (the loop's test is `get`'s). In 32 bits the indices stop
/// below `i32::MAX` (the add's no-wrap bound). llm.c's layernorm backward, warp 0's fold over
/// the other warps' slots: a 32-bit counter and the twin's two `LDS.128` in flight (issue 30,
/// session 19).
///
/// **Not for a loop that counts.** With a run-time `step` the trip count is a division, and
/// the loop stays rolled (one load in flight), as nvcc 13 keeps its own `for (j = i; j < n; j
/// += stride)`. A source loop that counts to a run-time bound and computes its index (llm.c's
/// `for (b = 0; b < B; b++) load128cs(dout + b * T * C + i)`) is ported as a counted loop,
/// `for b in 0..n { let Some(p) = dout.get(b * stride + i) else { return }; .. }`, which
/// `KernelBuilder::runtime_unroll(4)` turns into nvcc's four checks and four loads; hoisting its
/// bound into a `strided_range` over `dout[..n * stride]` keeps it rolled under every flag
/// (issue 30, session 22: bench/results/s22-gaps/loop-shapes.md).
///
/// **A global slice's length as the `u32` bound: `u32::try_from`, not `as u32`.** `let len =
/// all.len() as u32` truncates, so the compiler no longer knows `i < all.len()` from `i < len`
/// and `all[i as usize]` keeps its bounds check and the kernel its whole panic path (llm.c's
/// `matmul_backward_bias_kernel4`, issue 30's ninth port: 5 panic `CALL`s, 0.98x nvcc). Convert
/// with a test, which keeps the bound:
///
/// ```ignore
/// if let Some(all) = dout.get(..n) && let Ok(len) = u32::try_from(all.len()) {
///     for i in strided_range(start, len, step) {
///         sum += all[i as usize].widen();     // no bounds check: `i < len == all.len()`
///     }
/// }
/// ```
#[inline(always)]
pub fn strided_range<I: StrideIndex>(start: I, end: I, step: I) -> GridStrideRange<I> {
    GridStrideRange::new(start, step, end)
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for usize {}
    impl Sealed for u32 {}
}

/// An index type [`strided_range`] counts in: `usize` (slices' lengths) or `u32` (32-bit
/// counters, for bounds that are `u32`s or shared-memory lengths). Sealed.
pub trait StrideIndex: sealed::Sealed + Copy + Ord + core::fmt::Debug {
    /// The largest bound and step: `isize::MAX` or `i32::MAX`, so that `i + step` with `i`
    /// below the bound cannot wrap.
    #[doc(hidden)]
    const MAX: Self;
    #[doc(hidden)]
    const ONE: Self;
    /// `self + step`.
    ///
    /// # Safety
    /// The sum does not wrap.
    #[doc(hidden)]
    unsafe fn add_unchecked(self, step: Self) -> Self;
    /// `(end - self).div_ceil(step)` as a count (`self < end`, `step >= 1`).
    #[doc(hidden)]
    fn steps_to(self, end: Self, step: Self) -> usize;
}

impl StrideIndex for usize {
    const MAX: usize = isize::MAX as usize;
    const ONE: usize = 1;
    #[inline(always)]
    unsafe fn add_unchecked(self, step: usize) -> usize {
        // SAFETY: the caller's.
        unsafe { self.unchecked_add(step) }
    }
    #[inline(always)]
    fn steps_to(self, end: usize, step: usize) -> usize {
        (end - self).div_ceil(step)
    }
}

impl StrideIndex for u32 {
    const MAX: u32 = i32::MAX as u32;
    const ONE: u32 = 1;
    #[inline(always)]
    unsafe fn add_unchecked(self, step: u32) -> u32 {
        // SAFETY: the caller's.
        unsafe { self.unchecked_add(step) }
    }
    #[inline(always)]
    fn steps_to(self, end: u32, step: u32) -> usize {
        (end - self).div_ceil(step) as usize
    }
}

/// The iterator of [`grid_stride_range`] and [`strided_range`]: `next`, `next + stride`, ...
/// below `len`, counting in `I` (`usize` unless the range was made from `u32`s).
#[derive(Clone, Debug)]
pub struct GridStrideRange<I: StrideIndex = usize> {
    next: I,
    /// 1 to `I::MAX`.
    stride: I,
    /// At most `I::MAX`: `next + stride` never wraps while `next < len`.
    len: I,
}

impl<I: StrideIndex> GridStrideRange<I> {
    /// `start, start + step, ..` below `end`, with `step` in `1..=I::MAX` and `end` at most
    /// `I::MAX` (no slice has an element at or past `isize::MAX`; no shared memory at or past
    /// `i32::MAX`), so that the step's add cannot wrap: LLVM then computes the loop's trip
    /// count (a `saturating_add` hid it, and the loop stayed rolled even with a constant step).
    #[inline(always)]
    fn new(start: I, step: I, end: I) -> Self {
        GridStrideRange { next: start, stride: step.clamp(I::ONE, I::MAX), len: end.min(I::MAX) }
    }

    /// The index after `i`.
    ///
    /// # Safety
    /// `i < self.len`.
    #[inline(always)]
    unsafe fn after(&self, i: I) -> I {
        // SAFETY: `i < len <= I::MAX` (caller, `new`) and `stride <= I::MAX`: the sum is at
        // most `2 I::MAX`, below the type's maximum.
        unsafe { i.add_unchecked(self.stride) }
    }
}

impl<I: StrideIndex> Iterator for GridStrideRange<I> {
    type Item = I;

    #[inline(always)]
    fn next(&mut self) -> Option<I> {
        if self.next < self.len {
            let i = self.next;
            // SAFETY: `i < len`.
            self.next = unsafe { self.after(i) };
            Some(i)
        } else {
            None
        }
    }

    #[inline(always)]
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = if self.next < self.len { self.next.steps_to(self.len, self.stride) } else { 0 };
        (n, Some(n))
    }

    /// CUDA's loop itself (`for_each`, `sum`, ..), without an `Option` per step.
    #[inline(always)]
    fn fold<B, F: FnMut(B, I) -> B>(self, init: B, mut f: F) -> B {
        let mut acc = init;
        let mut i = self.next;
        while i < self.len {
            acc = f(acc, i);
            // SAFETY: `i < len`.
            i = unsafe { self.after(i) };
        }
        acc
    }
}

pub use crate::sync::sync_threads;
