//! Programmatic dependent launch (sm_90): a kernel lets the next kernel on its stream start
//! early ([`launch_dependents`]), and that next kernel waits for its predecessor's memory
//! before reading it ([`wait_for_prerequisites`]). Both are no-ops unless the dependent kernel
//! was launched with the programmatic-stream-serialization launch attribute
//! (`CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`), which the host sets with the
//! `unsafe` `LaunchConfig::with_programmatic_dependent_launch`:
//!
//! ```ignore
//! // Device: the primary signals early, the secondary waits before it touches memory.
//! #[kernel]
//! pub fn primary(x: &[f32], mut y: DisjointSlice<f32>) {
//!     grid_dependency::launch_dependents(); // the next kernel may be scheduled now
//!     // ... compute and write `y` ...
//! }
//! #[kernel]
//! pub fn secondary(y: &[f32], mut z: DisjointSlice<f32>) {
//!     grid_dependency::wait_for_prerequisites(); // `primary` has finished, `y` is visible
//!     // ... read `y`, write `z` ...
//! }
//!
//! // Host: the second launch may start while the first is still running.
//! primary::launch(&stream, config, &x, &mut y)?;
//! // SAFETY: `secondary` calls `wait_for_prerequisites()` before it touches memory.
//! let dependent = unsafe { config.with_programmatic_dependent_launch() };
//! secondary::launch(&stream, dependent, &y, &mut z)?;
//! ```
//!
//! The `unsafe` is the secondary's promise: every thread calls [`wait_for_prerequisites`]
//! before it reads or writes memory that earlier work on the stream writes or reads, and
//! before it returns (the full contract is on `with_programmatic_dependent_launch`). What
//! overlaps with the primary is the secondary's launch latency and whatever it does before
//! the wait (address arithmetic, shared-memory setup). [`launch_dependents`] is only a hint:
//! without it the dependent may start once the primary's blocks have exited.
//!
//! PTX: `griddepcontrol.launch_dependents`, `griddepcontrol.wait` (sm_90, so a kernel that
//! calls these is built for sm_90 or newer, e.g. behind
//! `#[cfg_attr(target_arch = "nvptx64", cfg(ferrocuda_sm = "90"))]`). Cost: one instruction;
//! the wait blocks until the prerequisite grids have completed and their memory is visible.
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
