//! A primary and a secondary kernel for programmatic dependent launch (sm_90): the primary lets
//! its dependent start at once and then computes for a long time before it writes; the
//! secondary, launched with `LaunchConfig::with_programmatic_dependent_launch`, waits for it
//! before reading. Both record `%globaltimer` so the test can report whether they overlapped.
//! sm_90 builds only (`lib.rs` gates the module).

use ferrocuda_device::global::{DisjointSlice, unique_index};
use ferrocuda_device::grid_dependency::{launch_dependents, wait_for_prerequisites};
use ferrocuda_device::kernel;

/// One step of the primary's hash chain (also the host's reference): not foldable into a
/// closed form, so `rounds` steps take `rounds` times as long.
#[inline(always)]
pub fn mix(x: u32) -> u32 {
    let x = (x ^ (x >> 16)).wrapping_mul(0x7feb_352d);
    let x = (x ^ (x >> 15)).wrapping_mul(0x846c_a68b);
    x ^ (x >> 16)
}

/// What [`pdl_secondary`] writes for a primary output `p`.
#[inline(always)]
pub fn secondary_of(p: u32) -> u32 {
    p.rotate_left(7) ^ 0x5bd1_e995
}

/// `%globaltimer` in nanoseconds on the GPU, 0 on the host (the CPU executor).
#[inline(always)]
fn global_timer_ns() -> u64 {
    #[cfg(target_arch = "nvptx64")]
    {
        let t: u64;
        // SAFETY: reads a special register; touches no memory.
        unsafe { core::arch::asm!("mov.u64 {t}, %globaltimer;", t = out(reg64) t, options(nomem, nostack)) };
        t
    }
    #[cfg(not(target_arch = "nvptx64"))]
    0
}

/// `out[i]` = `rounds` steps of [`mix`] from `i`; `finished_ns[i]` = when this thread wrote it.
/// Every block first signals `launch_dependents()`, so a dependent launched with programmatic
/// dependent launch may run all the while: one that read `out` without waiting would see the
/// values from before this kernel.
#[kernel]
pub fn pdl_primary(rounds: u32, mut out: DisjointSlice<u32>, mut finished_ns: DisjointSlice<u64>) {
    launch_dependents();
    let i = unique_index();
    if let (Some(o), Some(t)) = (out.get_mut(i), finished_ns.get_mut(i)) {
        let mut x = i.get() as u32;
        for _ in 0..rounds {
            x = mix(x);
        }
        *o = x;
        *t = global_timer_ns();
    }
}

/// `out[i] = secondary_of(primary[i])` after `wait_for_prerequisites()`; `started_ns[i]` = when
/// this thread started (read before the wait: a register, not memory). Launched with
/// programmatic dependent launch after [`pdl_primary`].
#[kernel]
pub fn pdl_secondary(primary: &[u32], mut out: DisjointSlice<u32>, mut started_ns: DisjointSlice<u64>) {
    let started = global_timer_ns();
    // The contract of a programmatic dependent launch: nothing touches memory before this.
    wait_for_prerequisites();
    let i = unique_index();
    if let (Some(o), Some(t)) = (out.get_mut(i), started_ns.get_mut(i))
        && i.get() < primary.len()
    {
        *o = secondary_of(primary[i]);
        *t = started;
    }
}
