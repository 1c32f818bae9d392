//! Block barriers on the CPU: a barrier opens when every thread of the block waits at it;
//! when nothing can run and nothing can open, the block is stuck (a hang or undefined
//! behaviour on a GPU), and the error names the threads.

use super::block::{BlockContext, ThreadState};
use super::error::{BarrierDivergence, CpuError, MixedBarriers, WarpDeadlock};
use super::hooks::BarrierKind;
use super::warp_ops::same_collective;

/// What a block's barrier check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BarrierOutcome {
    /// Every thread waited at the block barrier; all are runnable again.
    Opened,
    /// Every thread has exited.
    Finished,
    /// Threads wait for something that only the cluster (or nothing) can complete.
    Blocked,
}

impl BlockContext<'_> {
    /// Opens the block barrier when every thread that has not exited waits at it (their
    /// ranks go to `runnable`).
    ///
    /// Exited threads do not hold up a block barrier (PTX ISA 9.0, `exit`: "As threads exit,
    /// barriers waiting on all threads are checked to see if the exiting threads are the only
    /// threads that have not yet made it to a barrier{.cta} for all threads in the CTA [...].
    /// If the exiting threads are holding up the barrier, the barrier is released"; `barrier`
    /// waits for the "non-exited threads"; audit P9: an H100 ran 32 threads past a
    /// `sync_threads()` whose other 32 had returned). A reducing barrier reduces over the
    /// threads that arrived: `sync_threads_count(true)` in 32 threads whose 32 block-mates
    /// had returned gave 32 on the H100, and gives 32 here.
    pub(crate) fn open_barrier(&self, runnable: &mut Vec<u32>) -> BarrierOutcome {
        let (mut at_barrier, mut exited, mut count, mut all, mut any) = (0usize, 0usize, 0u32, true, false);
        let mut kinds = None;
        for thread in self.threads.iter() {
            match thread.state.get() {
                ThreadState::AtBarrier { kind: k, predicate } => {
                    at_barrier += 1;
                    kinds.get_or_insert(k);
                    count += predicate as u32;
                    all &= predicate;
                    any |= predicate;
                }
                ThreadState::Exited => exited += 1,
                _ => {}
            }
        }
        let total = self.threads.len();
        if exited == total {
            return BarrierOutcome::Finished;
        }
        let Some(kind) = kinds else { return BarrierOutcome::Blocked };
        if at_barrier + exited < total {
            return BarrierOutcome::Blocked;
        }
        // Every waiting thread waits at the same kind of barrier, or (each kind being its own
        // hardware barrier) they wait for each other forever.
        let kind_of = |t: &super::block::ThreadSlot| match t.state.get() {
            ThreadState::AtBarrier { kind, .. } => Some(kind),
            _ => None,
        };
        if let Some(other) = self.threads.iter().filter_map(kind_of).find(|&k| k != kind) {
            let at = |k: BarrierKind| self.threads.iter().filter(|t| kind_of(t) == Some(k)).map(|t| t.index).collect();
            self.fail(CpuError::MixedBarriers(MixedBarriers {
                kernel: self.kernel().to_owned(),
                block: self.block_idx,
                first_kind: kind.function(),
                first: at(kind),
                second_kind: other.function(),
                second: at(other),
            }));
            return BarrierOutcome::Blocked;
        }
        let reply = match kind {
            BarrierKind::Plain | BarrierKind::RowPhase => 0,
            BarrierKind::Count => count,
            BarrierKind::Partials(_) => at_barrier as u32,
            BarrierKind::And => all as u32,
            BarrierKind::Or => any as u32,
        };
        for thread in self.threads.iter() {
            thread.reply.set(reply as u64);
        }
        self.shared.next_epoch();
        runnable.extend((0..total as u32).filter(|&rank| !matches!(self.threads[rank as usize].state.get(), ThreadState::Exited)));
        BarrierOutcome::Opened
    }

    /// Records why this block cannot go on: lanes stuck in a warp operation, or threads
    /// waiting at a barrier (block or cluster) that others, having exited or waiting elsewhere,
    /// never reach.
    pub(crate) fn report_stuck(&self) {
        let kernel = self.kernel().to_owned();
        let block = self.block_idx;
        let stuck_warp = (0..self.warps).find(|&w| {
            let (base, lanes) = self.warp_range(w);
            (0..lanes).any(|l| matches!(self.threads[base + l as usize].state.get(), ThreadState::AtWarp { .. }))
        });
        let error = match stuck_warp {
            Some(warp) => {
                let (base, lanes) = self.warp_range(warp);
                let lanes_where = |f: &dyn Fn(ThreadState) -> bool| {
                    (0..lanes).filter(|&l| f(self.threads[base + l as usize].state.get())).map(|l| self.threads[base + l as usize].index).collect()
                };
                // The first waiting lane's operation and mask; lanes waiting in another one
                // (or with another mask) are listed apart.
                let first = (0..lanes).find_map(|l| match self.threads[base + l as usize].state.get() {
                    ThreadState::AtWarp { op, mask, .. } => Some((op, mask)),
                    _ => None,
                });
                let first_op =
                    |s: ThreadState| matches!((s, first), (ThreadState::AtWarp { op, mask, .. }, Some((o, m))) if same_collective(op, o) && mask == m);
                CpuError::WarpDeadlock(WarpDeadlock {
                    kernel,
                    block,
                    warp,
                    waiting: lanes_where(&first_op),
                    at_barrier: lanes_where(&|s| matches!(s, ThreadState::AtBarrier { .. } | ThreadState::AtClusterBarrier)),
                    other_operation: lanes_where(&|s| matches!(s, ThreadState::AtWarp { .. }) && !first_op(s)),
                })
            }
            None => CpuError::BarrierDivergence(BarrierDivergence {
                kernel,
                block,
                waiting: self.threads_where(|s| matches!(s, ThreadState::AtBarrier { .. } | ThreadState::AtClusterBarrier)),
                exited: self.threads_where(|s| matches!(s, ThreadState::Exited)),
            }),
        };
        self.fail(error);
    }
}
