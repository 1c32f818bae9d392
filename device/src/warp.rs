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

/// A 32-bit lane value moved by one `shfl.sync` (the building block of every shuffle).
#[inline(always)]
fn shuffle_b32(value: u32, mode: ShuffleMode, lane_or_delta: u32) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let out: u32;
        // `c` is 31 (clamp) for idx/down/bfly and 0 for up, as CUDA's __shfl_*_sync use.
        // SAFETY: a full-warp shuffle; the caller keeps all 32 lanes converged, as in CUDA.
        unsafe {
            match mode {
                ShuffleMode::Index => {
                    core::arch::asm!("shfl.sync.idx.b32 {o}, {v}, {l}, 31, -1;", o = out(reg32) out, v = in(reg32) value, l = in(reg32) lane_or_delta)
                }
                ShuffleMode::Up => {
                    core::arch::asm!("shfl.sync.up.b32 {o}, {v}, {l}, 0, -1;", o = out(reg32) out, v = in(reg32) value, l = in(reg32) lane_or_delta)
                }
                ShuffleMode::Down => {
                    core::arch::asm!("shfl.sync.down.b32 {o}, {v}, {l}, 31, -1;", o = out(reg32) out, v = in(reg32) value, l = in(reg32) lane_or_delta)
                }
                ShuffleMode::Xor => {
                    core::arch::asm!("shfl.sync.bfly.b32 {o}, {v}, {l}, 31, -1;", o = out(reg32) out, v = in(reg32) value, l = in(reg32) lane_or_delta)
                }
            }
        }
        out
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::cpu::hooks::warp_shuffle(value, shuffle_source(crate::cpu::hooks::lane_id(), mode, lane_or_delta))
}

/// The lane a shuffle reads, by PTX's rules for `shfl.sync` with the clamp values CUDA's
/// `__shfl_*_sync` use (31 for idx/down/bfly, 0 for up): an out-of-range source means the
/// lane's own value. Only the low 5 bits of the lane or delta count. (The CPU executor's
/// shuffle; on a GPU `shfl.sync` does this.)
#[cfg(not(target_arch = "nvptx64"))]
fn shuffle_source(lane: u32, mode: ShuffleMode, lane_or_delta: u32) -> u32 {
    let b = lane_or_delta & 31;
    match mode {
        ShuffleMode::Index => b,
        ShuffleMode::Up => lane.checked_sub(b).unwrap_or(lane),
        ShuffleMode::Down => {
            if lane + b <= 31 {
                lane + b
            } else {
                lane
            }
        }
        ShuffleMode::Xor => lane ^ b,
    }
}

/// Values a shuffle can move: 32-bit (one `shfl.sync`) or 64-bit (two); the 16-bit floats and
/// their pairs ([`crate::half`]) take one.
pub trait ShuffleValue: Copy + sealed::Sealed {
    #[doc(hidden)]
    fn shuffle_with(self, mode: ShuffleMode, lane_or_delta: u32) -> Self;
}

macro_rules! shuffle_32 {
    ($($t:ty: $to:expr, $from:expr;)*) => {$(
        impl ShuffleValue for $t {
            #[inline(always)]
            fn shuffle_with(self, mode: ShuffleMode, lane_or_delta: u32) -> Self {
                let to: fn($t) -> u32 = $to;
                let from: fn(u32) -> $t = $from;
                from(shuffle_b32(to(self), mode, lane_or_delta))
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
            fn shuffle_with(self, mode: ShuffleMode, lane_or_delta: u32) -> Self {
                let to: fn($t) -> u64 = $to;
                let from: fn(u64) -> $t = $from;
                let bits = to(self);
                let low = shuffle_b32(bits as u32, mode, lane_or_delta);
                let high = shuffle_b32((bits >> 32) as u32, mode, lane_or_delta);
                from(((high as u64) << 32) | low as u64)
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
    value.shuffle_with(ShuffleMode::Index, src_lane)
}

/// `__shfl_up_sync(FULL, value, delta)`: the value of lane `lane - delta`; lanes below `delta`
/// keep their own.
#[inline(always)]
pub fn shuffle_up<T: ShuffleValue>(value: T, delta: u32) -> T {
    value.shuffle_with(ShuffleMode::Up, delta)
}

/// `__shfl_down_sync(FULL, value, delta)`: the value of lane `lane + delta`; lanes above
/// `31 - delta` keep their own.
#[inline(always)]
pub fn shuffle_down<T: ShuffleValue>(value: T, delta: u32) -> T {
    value.shuffle_with(ShuffleMode::Down, delta)
}

/// `__shfl_xor_sync(FULL, value, mask)`: the value of lane `lane ^ mask` (butterfly).
#[inline(always)]
pub fn shuffle_xor<T: ShuffleValue>(value: T, lane_mask: u32) -> T {
    value.shuffle_with(ShuffleMode::Xor, lane_mask)
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

/// Minimum over the warp, in every lane (`PartialOrd`: for floats, a NaN in a lane may or may
/// not win, as with `fminf` chains in CUDA).
#[inline(always)]
pub fn reduce_min<T: ShuffleValue + PartialOrd>(value: T) -> T {
    reduce(value, |a, b| if b < a { b } else { a })
}

/// Maximum over the warp, in every lane.
#[inline(always)]
pub fn reduce_max<T: ShuffleValue + PartialOrd>(value: T) -> T {
    reduce(value, |a, b| if b > a { b } else { a })
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

    #[test]
    fn shuffle_sources_follow_ptx_clamping() {
        assert_eq!(shuffle_source(5, ShuffleMode::Index, 37), 5, "idx uses the low 5 bits");
        assert_eq!(shuffle_source(2, ShuffleMode::Up, 3), 2, "up below delta keeps its own");
        assert_eq!(shuffle_source(7, ShuffleMode::Up, 3), 4);
        assert_eq!(shuffle_source(29, ShuffleMode::Down, 5), 29, "down past 31 keeps its own");
        assert_eq!(shuffle_source(20, ShuffleMode::Down, 5), 25);
        assert_eq!(shuffle_source(6, ShuffleMode::Xor, 1), 7);
    }
}
