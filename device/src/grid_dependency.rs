//! Programmatic dependent launch (sm_90): a kernel lets the next kernel on its stream start
//! early ([`launch_dependents`]), and that next kernel waits for its predecessor's memory
//! before reading it ([`wait_for_prerequisites`]). Both are no-ops unless the dependent kernel
//! was launched with the programmatic-stream-serialization launch attribute
//! (`CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`; host side not wired up yet).
//!
//! PTX: `griddepcontrol.launch_dependents`, `griddepcontrol.wait`. Cost: one instruction; the
//! wait blocks until the prerequisite grids have completed and their memory is visible.
//! On the host (the CPU executor, which runs launches one after another) both do nothing.

/// Signals that the dependent grid may be scheduled (`griddepcontrol.launch_dependents`).
#[inline(always)]
pub fn launch_dependents() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a scheduling hint.
    unsafe {
        core::arch::asm!("griddepcontrol.launch_dependents;", options(nostack))
    };
}

/// Waits until the prerequisite grids have completed and their writes are visible
/// (`griddepcontrol.wait`).
#[inline(always)]
pub fn wait_for_prerequisites() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a wait; it orders memory like the end of the prerequisite grid.
    unsafe {
        core::arch::asm!("griddepcontrol.wait;", options(nostack))
    };
}
