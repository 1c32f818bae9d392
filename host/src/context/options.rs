//! Per-context settings: how host threads wait ([`SchedulePolicy`]) and resource limits ([`Limit`]).

use cudarc::driver::sys;

/// How a host thread waits for the GPU in a context (`CU_CTX_SCHED_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SchedulePolicy {
    /// The driver's choice: spin when there are fewer busy contexts than CPUs, else yield.
    #[default]
    Auto,
    /// Busy-wait: lowest latency, one CPU core spent per waiting thread.
    Spin,
    /// Yield the CPU while waiting: more latency, CPU left to other threads.
    Yield,
    /// Block on a synchronisation primitive: least CPU, most latency.
    BlockingSync,
}

impl SchedulePolicy {
    pub(crate) fn flags(self) -> u32 {
        use sys::CUctx_flags::*;
        (match self {
            SchedulePolicy::Auto => CU_CTX_SCHED_AUTO,
            SchedulePolicy::Spin => CU_CTX_SCHED_SPIN,
            SchedulePolicy::Yield => CU_CTX_SCHED_YIELD,
            SchedulePolicy::BlockingSync => CU_CTX_SCHED_BLOCKING_SYNC,
        }) as u32
    }

    pub(crate) fn from_flags(flags: u32) -> Self {
        use sys::CUctx_flags::*;
        match flags & CU_CTX_SCHED_MASK as u32 {
            f if f == CU_CTX_SCHED_SPIN as u32 => SchedulePolicy::Spin,
            f if f == CU_CTX_SCHED_YIELD as u32 => SchedulePolicy::Yield,
            f if f == CU_CTX_SCHED_BLOCKING_SYNC as u32 => SchedulePolicy::BlockingSync,
            _ => SchedulePolicy::Auto,
        }
    }
}

/// A per-context resource limit (`CUlimit`), read with [`Context::limit`](crate::Context::limit) and changed with
/// [`Context::set_limit`](crate::Context::set_limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// Stack bytes per GPU thread (deep call chains, large local arrays).
    StackSize,
    /// Bytes of the FIFO that device-side `printf` (and kernel panic messages) write into;
    /// output beyond it is lost.
    PrintfFifoSize,
    /// Bytes of the heap behind device-side `malloc`.
    MallocHeapSize,
}

impl Limit {
    pub(crate) fn raw(self) -> sys::CUlimit {
        match self {
            Limit::StackSize => sys::CUlimit::CU_LIMIT_STACK_SIZE,
            Limit::PrintfFifoSize => sys::CUlimit::CU_LIMIT_PRINTF_FIFO_SIZE,
            Limit::MallocHeapSize => sys::CUlimit::CU_LIMIT_MALLOC_HEAP_SIZE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_policies_round_trip_through_the_driver_flags() {
        for policy in [SchedulePolicy::Auto, SchedulePolicy::Spin, SchedulePolicy::Yield, SchedulePolicy::BlockingSync] {
            // Other flag bits (here CU_CTX_MAP_HOST) must not disturb the policy.
            let flags = policy.flags() | sys::CUctx_flags::CU_CTX_MAP_HOST as u32;
            assert_eq!(SchedulePolicy::from_flags(flags), policy);
        }
    }
}
