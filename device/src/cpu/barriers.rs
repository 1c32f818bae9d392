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
    /// Opens the block barrier when every thread waits at it (their ranks go to `runnable`).
    pub(crate) fn open_barrier(&self, runnable: &mut Vec<u32>) -> BarrierOutcome {
        let (mut at_barrier, mut exited, mut count, mut all, mut any) = (0usize, 0usize, 0u32, true, false);
        let mut kind = BarrierKind::Plain;
        for thread in self.threads.iter() {
            match thread.state.get() {
                ThreadState::AtBarrier { kind: k, predicate } => {
                    at_barrier += 1;
                    kind = k;
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
        if at_barrier < total {
            return BarrierOutcome::Blocked;
        }
        // Every thread waits at the same kind of barrier, or the outcome is unpredictable.
        let kind_of = |t: &super::block::ThreadSlot| match t.state.get() {
            ThreadState::AtBarrier { kind, .. } => kind,
            _ => unreachable!("every thread waits at the barrier"),
        };
        let first_kind = kind_of(&self.threads[0]);
        if let Some(other) = self.threads.iter().map(kind_of).find(|&k| k != first_kind) {
            let at = |k: BarrierKind| self.threads.iter().filter(|t| kind_of(t) == k).map(|t| t.index).collect();
            self.fail(CpuError::MixedBarriers(MixedBarriers {
                kernel: self.kernel().to_owned(),
                block: self.block_idx,
                first_kind: first_kind.function(),
                first: at(first_kind),
                second_kind: other.function(),
                second: at(other),
            }));
            return BarrierOutcome::Blocked;
        }
        let reply = match kind {
            BarrierKind::Plain => 0,
            BarrierKind::Count => count,
            BarrierKind::And => all as u32,
            BarrierKind::Or => any as u32,
        };
        for thread in self.threads.iter() {
            thread.reply.set(reply as u64);
        }
        self.shared.next_epoch();
        runnable.extend(0..total as u32);
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
