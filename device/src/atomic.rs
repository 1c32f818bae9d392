//! Atomic read-modify-write on device memory.

/// Atomically adds `value` to `*target` at device scope, returning nothing
/// (`red.add.f32`: CUDA's `atomicAdd` with the result unused).
///
/// Many threads may add to the same element; `&mut` here is per thread, as with every output
/// slice of a kernel, and this is the one way to update an element they share.
#[inline(always)]
pub fn add_f32(target: &mut f32, value: f32) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: `target` is a valid, aligned f32; the reduction is atomic at device scope.
    unsafe {
        core::arch::asm!("red.add.f32 [{p}], {v};", p = in(reg64) target as *mut f32, v = in(reg32) value);
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let _ = (target, value);
        crate::not_on_host("atomic::add_f32")
    }
}
