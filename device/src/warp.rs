//! Warp-level operations.

/// Threads in a warp.
pub const WARP_SIZE: u32 = 32;

/// `__shfl_down_sync(0xffffffff, value, delta)`: the value of lane `lane + delta`
/// (`shfl.sync.down.b32`, full warp). Every lane of the warp must call it.
#[inline(always)]
pub fn shuffle_down_f32(value: f32, delta: u32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let out: f32;
        // SAFETY: a full-warp shuffle; the caller keeps all 32 lanes converged, as in CUDA.
        unsafe {
            core::arch::asm!(
                "shfl.sync.down.b32 {out}, {v}, {d}, 31, -1;",
                out = out(reg32) out, v = in(reg32) value, d = in(reg32) delta,
            );
        }
        out
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let _ = (value, delta);
        crate::not_on_host("shuffle_down_f32")
    }
}

/// Sum of `value` over the 32 lanes of a full warp, in lane 0 (other lanes get partial sums).
/// Five `shfl.sync.down` + `add` steps.
#[inline(always)]
pub fn reduce_sum_f32(mut value: f32) -> f32 {
    let mut delta = WARP_SIZE / 2;
    while delta > 0 {
        value += shuffle_down_f32(value, delta);
        delta /= 2;
    }
    value
}

/// This thread's lane within its warp (`%laneid`).
#[inline(always)]
pub fn lane_id() -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let lane: u32;
        // SAFETY: reads a special register.
        unsafe { core::arch::asm!("mov.u32 {l}, %laneid;", l = out(reg32) lane) };
        lane
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::not_on_host("lane_id")
}
