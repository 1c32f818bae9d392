//! Warp-level operations: shuffles, votes, match and reductions.
//!
//! All take the full-warp mask (`0xffffffff`) as CUDA code mostly does: every lane of the warp
//! must call them together (keep the call in warp-uniform control flow). Each shuffle is one
//! `shfl.sync` for 32-bit values and two for 64-bit values; votes are one `vote.sync`.

/// Threads in a warp.
pub const WARP_SIZE: u32 = 32;

/// The mask naming every lane of a warp.
pub const FULL_MASK: u32 = 0xffff_ffff;

mod sealed {
    pub trait Sealed {}
    macro_rules! sealed { ($($t:ty),*) => { $(impl Sealed for $t {})* }; }
    sealed!(u32, i32, f32, u64, i64, f64);
    sealed!(::half::bf16, ::half::f16, crate::half::Bf16x2, crate::half::F16x2);
}

/// The four shuffle modes (`shfl.sync.idx/up/down/bfly`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[doc(hidden)]
pub enum ShuffleMode {
    Index,
    Up,
    Down,
    Xor,
}

/// The `c` operand of `shfl.sync` for segments of `width` lanes (a power of two from 1 to 32):
/// the segment mask `32 - width` in bits 8..13 and the clamp (31 for idx/down/bfly, 0 for up),
/// as CUDA's `__shfl_*_sync(mask, v, x, width)` compute it.
#[inline(always)]
const fn shuffle_c(mode: ShuffleMode, width: u32) -> u32 {
    let segment_mask = (WARP_SIZE - width) << 8;
    match mode {
        ShuffleMode::Up => segment_mask,
        _ => segment_mask | 31,
    }
}

/// A 32-bit lane value moved by one `shfl.sync` (the building block of every shuffle), with the
/// `c` operand `c` (segment mask and clamp; [`shuffle_c`] for CUDA's width argument).
#[inline(always)]
fn shuffle_b32(value: u32, mode: ShuffleMode, lane_or_delta: u32, c: u32) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let out: u32;
        // SAFETY: a full-warp shuffle; the caller keeps all 32 lanes converged, as in CUDA.
        unsafe {
            match mode {
                ShuffleMode::Index => {
                    core::arch::asm!("shfl.sync.idx.b32 {o}, {v}, {l}, {c}, -1;", o = out(reg32) out, v = in(reg32) value, l = in(reg32) lane_or_delta, c = in(reg32) c)
                }
                ShuffleMode::Up => {
                    core::arch::asm!("shfl.sync.up.b32 {o}, {v}, {l}, {c}, -1;", o = out(reg32) out, v = in(reg32) value, l = in(reg32) lane_or_delta, c = in(reg32) c)
                }
                ShuffleMode::Down => {
                    core::arch::asm!("shfl.sync.down.b32 {o}, {v}, {l}, {c}, -1;", o = out(reg32) out, v = in(reg32) value, l = in(reg32) lane_or_delta, c = in(reg32) c)
                }
                ShuffleMode::Xor => {
                    core::arch::asm!("shfl.sync.bfly.b32 {o}, {v}, {l}, {c}, -1;", o = out(reg32) out, v = in(reg32) value, l = in(reg32) lane_or_delta, c = in(reg32) c)
                }
            }
        }
        out
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::cpu::hooks::warp_shuffle(value, shuffle_source(crate::cpu::hooks::lane_id(), mode, lane_or_delta, c))
}

/// The lane a shuffle reads, by PTX's rules for `shfl.sync` (the ISA's pseudocode, with `c`
/// from [`shuffle_c`]): an out-of-range source means the lane's own value. Only the low 5 bits
/// of the lane or delta count. (The CPU executor's shuffle; on a GPU `shfl.sync` does this.)
#[cfg(not(target_arch = "nvptx64"))]
fn shuffle_source(lane: u32, mode: ShuffleMode, lane_or_delta: u32, c: u32) -> u32 {
    let b = lane_or_delta & 31;
    let clamp = c & 31;
    let segment_mask = (c >> 8) & 31;
    let max_lane = (lane & segment_mask) | (clamp & !segment_mask);
    let min_lane = lane & segment_mask;
    let (j, in_range) = match mode {
        ShuffleMode::Index => {
            let j = min_lane | (b & !segment_mask);
            (j, j <= max_lane)
        }
        ShuffleMode::Up => {
            let j = lane as i32 - b as i32;
            (j.max(0) as u32, j >= max_lane as i32)
        }
        ShuffleMode::Down => {
            let j = lane + b;
            (j, j <= max_lane)
        }
        ShuffleMode::Xor => {
            let j = lane ^ b;
            (j, j <= max_lane)
        }
    };
    if in_range { j } else { lane }
}

/// Values a shuffle can move: 32-bit (one `shfl.sync`) or 64-bit (two); the 16-bit floats and
/// their pairs ([`crate::half`]) take one.
pub trait ShuffleValue: Copy + sealed::Sealed {
    /// One shuffle of `self` with `shfl.sync`'s `c` operand `c` (segment mask and clamp).
    #[doc(hidden)]
    fn shuffle_with(self, mode: ShuffleMode, lane_or_delta: u32, c: u32) -> Self;

    /// The larger of the two, with the GPU's one `max` instruction (the reductions' `max`):
    /// `max.s32`/`max.u32`/... for integers, `max.f32`/`max.f64` for floats (a NaN loses to a
    /// number, as `fmaxf`), `max.bf16`/`max.f16` (and `x2`) on sm_80+.
    #[doc(hidden)]
    fn max_of(self, other: Self) -> Self;

    /// The smaller of the two, as [`max_of`](Self::max_of).
    #[doc(hidden)]
    fn min_of(self, other: Self) -> Self;
}

/// `max_of`/`min_of`: one instruction each (`Ord`'s `max` on integers and `f32::max` on floats
/// are LLVM's `smax`/`maxnum`, PTX's `max`), where a compare and a select took two.
macro_rules! min_max {
    ($($t:ty: $max:expr, $min:expr;)*) => {$(
        impl MinMaxOf for $t {
            #[inline(always)]
            fn max_of_(self, other: $t) -> $t {
                let f: fn($t, $t) -> $t = $max;
                f(self, other)
            }
            #[inline(always)]
            fn min_of_(self, other: $t) -> $t {
                let f: fn($t, $t) -> $t = $min;
                f(self, other)
            }
        }
    )*};
}

/// The per-type `max`/`min` behind [`ShuffleValue::max_of`].
trait MinMaxOf: Copy {
    fn max_of_(self, other: Self) -> Self;
    fn min_of_(self, other: Self) -> Self;
}

min_max! {
    u32: Ord::max, Ord::min;
    i32: Ord::max, Ord::min;
    u64: Ord::max, Ord::min;
    i64: Ord::max, Ord::min;
    f32: f32::max, f32::min;
    f64: f64::max, f64::min;
    ::half::bf16: crate::half::HalfFloat::max_num, crate::half::HalfFloat::min_num;
    ::half::f16: crate::half::HalfFloat::max_num, crate::half::HalfFloat::min_num;
    crate::half::Bf16x2: crate::half::Bf16x2::max_num, crate::half::Bf16x2::min_num;
    crate::half::F16x2: crate::half::F16x2::max_num, crate::half::F16x2::min_num;
}

macro_rules! shuffle_32 {
    ($($t:ty: $to:expr, $from:expr;)*) => {$(
        impl ShuffleValue for $t {
            #[inline(always)]
            fn shuffle_with(self, mode: ShuffleMode, lane_or_delta: u32, c: u32) -> Self {
                let to: fn($t) -> u32 = $to;
                let from: fn(u32) -> $t = $from;
                from(shuffle_b32(to(self), mode, lane_or_delta, c))
            }
            #[inline(always)]
            fn max_of(self, other: $t) -> $t {
                MinMaxOf::max_of_(self, other)
            }
            #[inline(always)]
            fn min_of(self, other: $t) -> $t {
                MinMaxOf::min_of_(self, other)
            }
        }
    )*};
}
shuffle_32! {
    u32: |v| v, |b| b;
    i32: |v| v as u32, |b| b as i32;
    f32: f32::to_bits, f32::from_bits;
    // The 16-bit floats travel as their bits in one 32-bit shuffle; a pair fills it.
    ::half::bf16: |v| v.to_bits() as u32, |b| ::half::bf16::from_bits(b as u16);
    ::half::f16: |v| v.to_bits() as u32, |b| ::half::f16::from_bits(b as u16);
    crate::half::Bf16x2: crate::half::Bf16x2::to_bits, crate::half::Bf16x2::from_bits;
    crate::half::F16x2: crate::half::F16x2::to_bits, crate::half::F16x2::from_bits;
}

macro_rules! shuffle_64 {
    ($($t:ty: $to:expr, $from:expr;)*) => {$(
        impl ShuffleValue for $t {
            #[inline(always)]
            fn shuffle_with(self, mode: ShuffleMode, lane_or_delta: u32, c: u32) -> Self {
                let to: fn($t) -> u64 = $to;
                let from: fn(u64) -> $t = $from;
                let bits = to(self);
                let low = shuffle_b32(bits as u32, mode, lane_or_delta, c);
                let high = shuffle_b32((bits >> 32) as u32, mode, lane_or_delta, c);
                from(((high as u64) << 32) | low as u64)
            }
            #[inline(always)]
            fn max_of(self, other: $t) -> $t {
                MinMaxOf::max_of_(self, other)
            }
            #[inline(always)]
            fn min_of(self, other: $t) -> $t {
                MinMaxOf::min_of_(self, other)
            }
        }
    )*};
}
shuffle_64! {
    u64: |v| v, |b| b;
    i64: |v| v as u64, |b| b as i64;
    f64: f64::to_bits, f64::from_bits;
}

/// `__shfl_sync(FULL, value, src_lane)`: the `value` of lane `src_lane` (mod 32).
#[inline(always)]
pub fn shuffle<T: ShuffleValue>(value: T, src_lane: u32) -> T {
    value.shuffle_with(ShuffleMode::Index, src_lane, const { shuffle_c(ShuffleMode::Index, WARP_SIZE) })
}

/// `__shfl_up_sync(FULL, value, delta)`: the value of lane `lane - delta`; lanes below `delta`
/// keep their own.
#[inline(always)]
pub fn shuffle_up<T: ShuffleValue>(value: T, delta: u32) -> T {
    value.shuffle_with(ShuffleMode::Up, delta, const { shuffle_c(ShuffleMode::Up, WARP_SIZE) })
}

/// `__shfl_down_sync(FULL, value, delta)`: the value of lane `lane + delta`; lanes above
/// `31 - delta` keep their own.
#[inline(always)]
pub fn shuffle_down<T: ShuffleValue>(value: T, delta: u32) -> T {
    value.shuffle_with(ShuffleMode::Down, delta, const { shuffle_c(ShuffleMode::Down, WARP_SIZE) })
}

/// `__shfl_xor_sync(FULL, value, mask)`: the value of lane `lane ^ mask` (butterfly).
#[inline(always)]
pub fn shuffle_xor<T: ShuffleValue>(value: T, lane_mask: u32) -> T {
    value.shuffle_with(ShuffleMode::Xor, lane_mask, const { shuffle_c(ShuffleMode::Xor, WARP_SIZE) })
}

/// `shfl.sync.down` clamped at lane `last` (PTX's `c` operand with no segment): the value of
/// lane `lane + delta` when that is at most `last`, else the lane's own. In a partial last
/// warp (a block size that is not a multiple of 32) with `last` its last lane, no lane reads
/// past the block's end: such a lane does not exist, a GPU gives an undefined value for it,
/// and the CPU executor reports the read (`MissingLaneShuffle`, audit 2026-11-27d D5).
#[inline(always)]
pub fn shuffle_down_clamped<T: ShuffleValue>(value: T, delta: u32, last: u32) -> T {
    value.shuffle_with(ShuffleMode::Down, delta, last & 31)
}

/// Checks at compile time that `WIDTH` is a shuffle segment width.
const fn segment_width(width: u32) -> u32 {
    assert!(width.is_power_of_two() && width <= WARP_SIZE, "a shuffle's WIDTH is a power of two from 1 to 32, as CUDA's width argument");
    width
}

/// `__shfl_sync(FULL, value, src_lane, WIDTH)`: the value of lane `src_lane % WIDTH` of this
/// lane's segment of `WIDTH` lanes (a power of two up to 32; checked at compile time).
#[inline(always)]
pub fn shuffle_within<const WIDTH: u32, T: ShuffleValue>(value: T, src_lane: u32) -> T {
    value.shuffle_with(ShuffleMode::Index, src_lane, const { shuffle_c(ShuffleMode::Index, segment_width(WIDTH)) })
}

/// `__shfl_up_sync(FULL, value, delta, WIDTH)`: the value of lane `lane - delta` when it lies
/// in this lane's segment of `WIDTH` lanes, else the lane's own.
#[inline(always)]
pub fn shuffle_up_within<const WIDTH: u32, T: ShuffleValue>(value: T, delta: u32) -> T {
    value.shuffle_with(ShuffleMode::Up, delta, const { shuffle_c(ShuffleMode::Up, segment_width(WIDTH)) })
}

/// `__shfl_down_sync(FULL, value, delta, WIDTH)`: the value of lane `lane + delta` when it lies
/// in this lane's segment of `WIDTH` lanes, else the lane's own.
#[inline(always)]
pub fn shuffle_down_within<const WIDTH: u32, T: ShuffleValue>(value: T, delta: u32) -> T {
    value.shuffle_with(ShuffleMode::Down, delta, const { shuffle_c(ShuffleMode::Down, segment_width(WIDTH)) })
}

/// `__shfl_xor_sync(FULL, value, lane_mask, WIDTH)`: the value of lane `lane ^ lane_mask` when it
/// lies in this lane's segment of `WIDTH` lanes, else the lane's own.
#[inline(always)]
pub fn shuffle_xor_within<const WIDTH: u32, T: ShuffleValue>(value: T, lane_mask: u32) -> T {
    value.shuffle_with(ShuffleMode::Xor, lane_mask, const { shuffle_c(ShuffleMode::Xor, segment_width(WIDTH)) })
}

/// Butterfly reduction within segments of `WIDTH` lanes: every lane ends with `op` folded over
/// its segment's values (`log2 WIDTH` steps; `WIDTH = 4`: four independent 4-lane groups, as a
/// kernel that gives each row to 4 lanes writes it with `__shfl_xor_sync(mask, v, m, 4)`).
#[inline(always)]
pub fn reduce_within<const WIDTH: u32, T: ShuffleValue>(mut value: T, op: impl Fn(T, T) -> T) -> T {
    let mut mask = const { segment_width(WIDTH) } / 2;
    while mask > 0 {
        value = op(value, shuffle_xor_within::<WIDTH, T>(value, mask));
        mask /= 2;
    }
    value
}

/// `__shfl_down_sync` on `f32` (kept for kernels written against the first API).
#[inline(always)]
pub fn shuffle_down_f32(value: f32, delta: u32) -> f32 {
    shuffle_down(value, delta)
}

/// Butterfly reduction: every lane ends with `op` folded over all 32 lanes' values
/// (five `shfl.sync.bfly` steps for 32-bit values).
#[inline(always)]
pub fn reduce<T: ShuffleValue>(mut value: T, op: impl Fn(T, T) -> T) -> T {
    let mut mask = WARP_SIZE / 2;
    while mask > 0 {
        value = op(value, shuffle_xor(value, mask));
        mask /= 2;
    }
    value
}

/// Sum over the warp, in every lane.
#[inline(always)]
pub fn reduce_sum<T: ShuffleValue + core::ops::Add<Output = T>>(value: T) -> T {
    reduce(value, |a, b| a + b)
}

/// Minimum over the warp, in every lane: one `min` instruction per step (`min.f32` for floats,
/// where a NaN loses to a number, as `fminf`; a lane's NaN wins only when every lane has one).
#[inline(always)]
pub fn reduce_min<T: ShuffleValue + PartialOrd>(value: T) -> T {
    reduce(value, T::min_of)
}

/// Maximum over the warp, in every lane: one `max` instruction per step (`max.f32`: a NaN
/// loses to a number, as `fmaxf`).
#[inline(always)]
pub fn reduce_max<T: ShuffleValue + PartialOrd>(value: T) -> T {
    reduce(value, T::max_of)
}

/// Sum of `value` over the 32 lanes of a full warp (kept for the first API; every lane gets it).
#[inline(always)]
pub fn reduce_sum_f32(value: f32) -> f32 {
    reduce_sum(value)
}

/// `__all_sync(FULL, predicate)`: true when `predicate` is true in every lane.
#[inline(always)]
pub fn all(predicate: bool) -> bool {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: a full-warp vote; all lanes converged, as in CUDA.
        unsafe {
            core::arch::asm!("{{ .reg .pred p, q; setp.ne.u32 p, {v}, 0; vote.sync.all.pred q, p, -1; selp.u32 {r}, 1, 0, q; }}",
                v = in(reg32) predicate as u32, r = out(reg32) r);
        }
        r != 0
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        crate::cpu::hooks::warp_ballot(predicate) == crate::cpu::hooks::warp_active_mask()
    }
}

/// `__any_sync(FULL, predicate)`: true when `predicate` is true in some lane.
#[inline(always)]
pub fn any(predicate: bool) -> bool {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: a full-warp vote; all lanes converged, as in CUDA.
        unsafe {
            core::arch::asm!("{{ .reg .pred p, q; setp.ne.u32 p, {v}, 0; vote.sync.any.pred q, p, -1; selp.u32 {r}, 1, 0, q; }}",
                v = in(reg32) predicate as u32, r = out(reg32) r);
        }
        r != 0
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        crate::cpu::hooks::warp_ballot(predicate) != 0
    }
}

/// `__ballot_sync(FULL, predicate)`: bit `i` is set when `predicate` is true in lane `i`.
#[inline(always)]
pub fn ballot(predicate: bool) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: a full-warp vote; all lanes converged, as in CUDA.
        unsafe {
            core::arch::asm!("{{ .reg .pred p; setp.ne.u32 p, {v}, 0; vote.sync.ballot.b32 {r}, p, -1; }}",
                v = in(reg32) predicate as u32, r = out(reg32) r);
        }
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::cpu::hooks::warp_ballot(predicate)
}

/// `__activemask()`: the lanes executing this call together (`activemask.b32`).
#[inline(always)]
pub fn active_mask() -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: reads the active-lane mask.
        unsafe { core::arch::asm!("activemask.b32 {r};", r = out(reg32) r) };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::cpu::hooks::warp_active_mask()
}

/// `__match_any_sync(FULL, value)`: the lanes whose `value` equals this lane's
/// (`match.any.sync.b32`, sm_70+).
#[inline(always)]
pub fn match_any(value: u32) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: a full-warp match; all lanes converged, as in CUDA.
        unsafe { core::arch::asm!("match.any.sync.b32 {r}, {v}, -1;", r = out(reg32) r, v = in(reg32) value) };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::cpu::hooks::warp_match_any(value as u64)
}

/// `__match_all_sync(FULL, value, &pred)`: `Some(mask of all lanes)` when every lane has the
/// same `value`, else `None` (`match.all.sync.b32`, sm_70+).
#[inline(always)]
pub fn match_all(value: u32) -> Option<u32> {
    #[cfg(target_arch = "nvptx64")]
    {
        let (mask, same): (u32, u32);
        // SAFETY: a full-warp match; all lanes converged, as in CUDA.
        unsafe {
            core::arch::asm!("{{ .reg .pred p; match.all.sync.b32 {m}|p, {v}, -1; selp.u32 {s}, 1, 0, p; }}",
                m = out(reg32) mask, s = out(reg32) same, v = in(reg32) value);
        }
        if same != 0 { Some(mask) } else { None }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let mask = crate::cpu::hooks::warp_match_any(value as u64);
        if mask == crate::cpu::hooks::warp_active_mask() { Some(mask) } else { None }
    }
}

/// This thread's lane within its warp (`%laneid`).
#[inline(always)]
pub fn lane_id() -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let lane: u32;
        // SAFETY: reads a special register.
        unsafe { core::arch::asm!("mov.u32 {l}, %laneid;", l = out(reg32) lane, options(pure, nomem, nostack)) };
        lane
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::cpu::hooks::lane_id()
}

/// This warp's index within its block (`rank_in_block() / 32`).
#[inline(always)]
pub fn warp_id() -> u32 {
    crate::thread::rank_in_block() / WARP_SIZE
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;

    fn source(lane: u32, mode: ShuffleMode, b: u32) -> u32 {
        shuffle_source(lane, mode, b, shuffle_c(mode, WARP_SIZE))
    }

    #[test]
    fn shuffle_sources_follow_ptx_clamping() {
        assert_eq!(source(5, ShuffleMode::Index, 37), 5, "idx uses the low 5 bits");
        assert_eq!(source(2, ShuffleMode::Up, 3), 2, "up below delta keeps its own");
        assert_eq!(source(7, ShuffleMode::Up, 3), 4);
        assert_eq!(source(29, ShuffleMode::Down, 5), 29, "down past 31 keeps its own");
        assert_eq!(source(20, ShuffleMode::Down, 5), 25);
        assert_eq!(source(6, ShuffleMode::Xor, 1), 7);
    }

    /// Regression p30_6: CUDA's width argument (`__shfl_down_sync(mask, v, d, 4)`): sources stay
    /// inside the lane's segment, as PTX's pseudocode for `shfl.sync` gives.
    #[test]
    fn p30_6_shuffle_sources_stay_in_their_segment() {
        let within = |lane, mode, b, width| shuffle_source(lane, mode, b, shuffle_c(mode, width));
        assert_eq!(within(5, ShuffleMode::Down, 1, 4), 6);
        assert_eq!(within(7, ShuffleMode::Down, 1, 4), 7, "down past the segment's end keeps its own");
        assert_eq!(within(6, ShuffleMode::Down, 2, 4), 6);
        assert_eq!(within(4, ShuffleMode::Up, 1, 4), 4, "up below the segment's start keeps its own");
        assert_eq!(within(6, ShuffleMode::Up, 2, 4), 4);
        assert_eq!(within(13, ShuffleMode::Index, 2, 4), 14, "idx: lane 2 of the segment 12..16");
        assert_eq!(within(13, ShuffleMode::Index, 6, 4), 14, "idx: the source modulo the width");
        assert_eq!(within(9, ShuffleMode::Xor, 2, 4), 11);
        assert_eq!(within(9, ShuffleMode::Xor, 4, 4), 9, "xor leaving the segment keeps its own");
        assert_eq!(within(17, ShuffleMode::Down, 3, 16), 20);
        assert_eq!(within(30, ShuffleMode::Down, 3, 16), 30);
        assert_eq!(shuffle_c(ShuffleMode::Down, 4), 0x1c1f, "CUDA's c for width 4");
        assert_eq!(shuffle_c(ShuffleMode::Up, 4), 0x1c00);
        assert_eq!(shuffle_c(ShuffleMode::Xor, 32), 31);
    }
}
