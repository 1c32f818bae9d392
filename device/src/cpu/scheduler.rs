//! Running the blocks of a cluster: the GPU threads of a block (or of the blocks of a
//! thread-block cluster) as stackful coroutines on one OS thread, scheduled round-robin and
//! switching only at barriers and warp operations.
//!
//! A pass resumes every runnable thread of each block once, in rank order; each runs until it
//! exits or waits (at a barrier or a warp operation). After the pass, warp operations whose
//! lanes have all arrived complete; when nothing in a block is runnable and every thread waits
//! at the block barrier, it opens; when nothing in the cluster is runnable and every thread
//! waits at the cluster barrier, that opens. When nothing is runnable and nothing can
//! complete, the cluster is stuck, which on a GPU is a hang or undefined behaviour, and here an
//! error naming the threads.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::Ordering;

use corosensei::{Coroutine, CoroutineResult};

use super::block::{BlockContext, Cancelled, ThreadState, ThreadYielder};
use super::error::{CpuError, StuckThread, ThreadActivity};
use super::panic_capture;
use super::stack::{self, StackPool, ThreadStack};
use ferrocuda_types::KernelPanic;

type ThreadCoroutine = Coroutine<(), (), (), ThreadStack>;

impl BlockContext<'_> {
    /// Resumes (or starts) thread `rank` until it waits or exits.
    fn resume(&self, rank: u32, coroutines: &mut [Option<ThreadCoroutine>], kernel: &(dyn Fn() + Sync), stacks: &mut StackPool) {
        self.current.set(rank);
        let slot = &self.threads[rank as usize];
        slot.state.set(ThreadState::Runnable);
        slot.polling.set(false);
        let coroutine = coroutines[rank as usize].get_or_insert_with(|| self.spawn(rank, kernel, stacks.take()));
        let _capturing = panic_capture::Capturing::begin();
        stack::set_running(Some(stack::Running {
            guard: slot.guard.get(),
            stack_size: self.link.stack_size,
            kernel: (self.kernel().as_ptr(), self.kernel().len()),
            block: self.block_idx.axes(),
            thread: slot.index.axes(),
        }));
        self.link.status.enter_thread(slot.index);
        let finished = matches!(coroutine.resume(()), CoroutineResult::Return(()));
        self.link.status.leave_thread();
        stack::set_running(None);
        if finished {
            slot.state.set(ThreadState::Exited);
            slot.exit_epoch.set(Some(self.shared.epochs().0));
            self.exited.set(self.exited.get() + 1);
            if self.exited.get() as usize == self.threads.len() {
                self.block_exited();
            }
            let done = coroutines[rank as usize].take().expect("the coroutine just ran");
            stacks.give(done.into_stack());
        }
    }

    fn spawn(&self, rank: u32, kernel: &(dyn Fn() + Sync), stack: ThreadStack) -> ThreadCoroutine {
        self.threads[rank as usize].guard.set(stack::guard_of(&stack));
        let body = move |yielder: &ThreadYielder, ()| {
            self.threads[rank as usize].yielder.set(yielder);
            match catch_unwind(AssertUnwindSafe(kernel)) {
                Ok(()) => self.flush_raw_views(),
                Err(payload) if !payload.is::<Cancelled>() => {
                    self.record_panic(rank, &*payload);
                    // The payload's `Drop` is the kernel's code and may panic again: caught,
                    // and that second payload leaked, so nothing unwinds out of the
                    // coroutine (E7, audit 2026-11-27e).
                    if let Err(second) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
                        std::mem::forget(second);
                    }
                }
                Err(_) => {}
            }
        };
        // SAFETY: the coroutine borrows `self` and `kernel`; `run_cluster` drives every
        // coroutine it starts to completion (a failed block's are unwound: `end_waiting`)
        // before it returns, so the borrows outlive every use the coroutine makes of them.
        unsafe { Coroutine::with_stack_unchecked(stack, body) }
    }

    fn record_panic(&self, rank: u32, payload: &(dyn std::any::Any + Send)) {
        let captured = panic_capture::take();
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| captured.as_ref().map(|c| c.message.clone()).unwrap_or_else(|| "(a panic with a non-string payload)".into()));
        let (file, line, column) = captured.map(|c| (c.file, c.line, c.column)).unwrap_or_else(|| ("<unknown>".into(), 0, 0));
        self.fail(CpuError::KernelPanic(KernelPanic {
            kernel: self.kernel().to_owned(),
            file,
            line,
            column,
            message,
            block: self.block_idx.axes(),
            thread: self.threads[rank as usize].index.axes(),
        }));
    }

    /// The threads that have not finished, and where each is (for the watchdog's report).
    fn unfinished(&self) -> Vec<StuckThread> {
        self.threads
            .iter()
            .filter_map(|t| {
                let activity = match t.state.get() {
                    ThreadState::Exited => return None,
                    _ if t.polling.get() => ThreadActivity::Polling,
                    ThreadState::Runnable => ThreadActivity::Runnable,
                    ThreadState::AtBarrier { .. } => ThreadActivity::BlockBarrier,
                    ThreadState::AtWarp { .. } => ThreadActivity::WarpOperation,
                    ThreadState::AtClusterBarrier => ThreadActivity::ClusterBarrier,
                };
                Some(StuckThread { block: self.block_idx, thread: t.index, activity })
            })
            .collect()
    }
}

/// Ends a thread of a failed block: one that never started only drops its start closure (its
/// stack goes back to the pool); a started one is returned, to be unwound from where it waits
/// (its next switch raises `Cancelled`).
///
/// A started thread used to be abandoned without unwinding (`force_reset`, its stack leaked),
/// so that a destructor that panics during the unwinding could not abort the process (audit
/// N13). That is a `longjmp` over the thread's frames, which corosensei allows only when
/// nothing on the stack needs its `Drop`, and safe code relies on frames completing:
/// a `std::thread::scope` that the thread waited in never joined its threads, which went on
/// using what they borrowed after the launch returned and its caller freed it (audit
/// 2026-11-28b G14-4: a write into freed memory from safe code). Unwinding is the only sound
/// end; a destructor that panics during it aborts the process, and the panic hook says the
/// launch's error first (`panic_capture::Ending`).
fn end_waiting(mut coroutine: ThreadCoroutine, stacks: &mut StackPool) -> Option<ThreadCoroutine> {
    if !coroutine.started() {
        // Not started: this only drops the start closure (a few references).
        coroutine.force_unwind();
        stacks.give(coroutine.into_stack());
        return None;
    }
    Some(coroutine)
}

/// How many times a thread of a failed block is resumed to unwind before the executor gives up
/// on it (it caught the cancellation each time) and aborts the process.
const CANCELLATION_RESUMES: u32 = 1000;

/// How a cluster's run ended without finishing.
pub(crate) enum Stopped {
    /// A thread failed (panic, stuck barrier, data race, ...).
    Failed(CpuError),
    /// The watchdog stopped it; these threads had not finished.
    Watchdog(Vec<StuckThread>),
}

/// Runs `blocks` to completion together: the blocks of one cluster (one block when the
/// launch has no clusters), or every block of a cooperative launch, in clusters of
/// `cluster_blocks` consecutive blocks (each cluster's barrier opens when all its blocks wait
/// there). The first error (panic, stuck barrier, data race) ends them all, and the error of
/// the lowest block that failed is returned. When every thread the next pass would resume
/// spins on atomics nothing changes (F2), the run ends with a `CrossBlockWait`. When the
/// watchdog's stop flag is set, the threads are stopped at their next switch.
pub(crate) fn run_cluster(blocks: &[BlockContext<'_>], cluster_blocks: usize, kernel: &(dyn Fn() + Sync), stacks: &mut StackPool) -> Result<(), Stopped> {
    let mut coroutines: Vec<Vec<Option<ThreadCoroutine>>> = blocks.iter().map(|b| (0..b.threads.len()).map(|_| None).collect()).collect();
    let mut runnable: Vec<Vec<u32>> = blocks.iter().map(|b| (0..b.threads.len() as u32).collect()).collect();
    let cancelled = || blocks.iter().any(|b| b.cancelled.get());
    let stop = blocks.first().map(|b| b.link.stop);
    let stopped = || stop.is_some_and(|s| s.load(Ordering::Relaxed));
    let mut watchdog_stuck = None;
    'passes: loop {
        let mut progress = false;
        for (b, block) in blocks.iter().enumerate() {
            let _current = block.enter();
            for &rank in &runnable[b] {
                block.resume(rank, &mut coroutines[b], kernel, stacks);
                if block.cancelled.get() {
                    break 'passes;
                }
                if stopped() {
                    watchdog_stuck = Some(blocks.iter().flat_map(BlockContext::unfinished).collect());
                    break 'passes;
                }
            }
            runnable[b].clear();
            block.complete_warp_ops(&mut runnable[b]);
            if block.cancelled.get() {
                break 'passes;
            }
            if runnable[b].is_empty() {
                block.open_barrier(&mut runnable[b]);
            }
            progress |= !runnable[b].is_empty();
        }
        if progress {
            // Every thread the next pass would resume spins on values nothing changes: no
            // thread of the run can end the wait (F2).
            if blocks.iter().zip(&runnable).all(|(block, ranks)| block.only_spinners(ranks)) {
                let (block, ranks) = blocks.iter().zip(&runnable).find(|(_, ranks)| !ranks.is_empty()).expect("some thread is runnable");
                block.report_spin(ranks);
                break;
            }
            continue;
        }
        if blocks.iter().all(BlockContext::finished) {
            break;
        }
        let mut opened = false;
        for (c, cluster) in blocks.chunks(cluster_blocks.max(1)).enumerate() {
            // Released when every thread of the cluster that has not exited waits there (PTX
            // `exit`, E4): exited threads, and blocks that have finished, do not hold it up.
            if !cluster.iter().all(BlockContext::clear_of_cluster_barrier) || cluster.iter().all(BlockContext::finished) {
                continue;
            }
            if let Some(first) = cluster.first() {
                first.shared.next_cluster_epoch();
            }
            for (i, block) in cluster.iter().enumerate() {
                block.threads.iter().for_each(|t| t.reply.set(0));
                block.shared.next_epoch();
                let waiting = (0..block.threads.len() as u32).filter(|&rank| matches!(block.threads[rank as usize].state.get(), ThreadState::AtClusterBarrier));
                runnable[c * cluster_blocks.max(1) + i].extend(waiting);
            }
            opened = true;
        }
        if opened {
            continue;
        }
        // Stuck: blame the first block whose live threads do not all wait at the cluster
        // barrier (or the first unfinished one).
        let culprit = blocks
            .iter()
            .find(|b| !b.finished() && !b.clear_of_cluster_barrier())
            .or_else(|| blocks.iter().find(|b| !b.finished()))
            .expect("some block is unfinished");
        culprit.report_stuck();
        break;
    }
    if cancelled() || watchdog_stuck.is_some() {
        for block in blocks {
            block.cancelled.set(true);
        }
    }
    // Threads still suspended (after an error, or stopped by the watchdog) are ended: those
    // that never started are dropped, the others unwound from where they wait (`Cancelled`),
    // so that every frame of theirs completes before the launch returns (G14-4).
    // The errors that ended the run are the launch's: kept aside while the threads unwind, so
    // that what the unwinding finds (a block's last thread exiting reports a pending read of
    // unwritten shared memory, Q6) does not replace them.
    let errors: Vec<Option<CpuError>> = blocks.iter().map(|b| b.error.borrow_mut().take()).collect();
    let first = errors.iter().flatten().next().map(ToString::to_string).unwrap_or_else(|| "stopped by the watchdog".into());
    for (b, block) in blocks.iter().enumerate() {
        let _current = block.enter();
        for rank in 0..block.threads.len() {
            if let Some(coroutine) = coroutines[b][rank].take()
                && let Some(unwind) = end_waiting(coroutine, stacks)
            {
                coroutines[b][rank] = Some(unwind);
                // Each resume raises `Cancelled` at the thread's next switch; a body that
                // catches it and waits again is resumed again, until its frames are gone. One
                // that keeps catching it can be neither ended nor left (its frames must
                // complete, G14-4): the process is aborted, with the launch's error, rather
                // than hang where the watchdog would have stopped it.
                let _ending = panic_capture::Ending::begin(first.clone());
                let mut resumes = 0u32;
                while coroutines[b][rank].is_some() {
                    resumes += 1;
                    if resumes > CANCELLATION_RESUMES {
                        eprintln!(
                            "ferrocuda CPU executor: thread {:?} of block {:?} of `{}` caught the cancellation of its failed block {CANCELLATION_RESUMES} times \
                             (a `catch_unwind` around a barrier or warp operation) and cannot be ended; aborting. The launch's error: {first}",
                            block.threads[rank].index.axes(),
                            block.block_idx.axes(),
                            block.kernel()
                        );
                        std::process::abort();
                    }
                    block.resume(rank as u32, &mut coroutines[b], kernel, stacks);
                }
            }
        }
    }
    if let Some(error) = errors.into_iter().flatten().next() {
        return Err(Stopped::Failed(error));
    }
    match watchdog_stuck {
        Some(stuck) => Err(Stopped::Watchdog(stuck)),
        None => Ok(()),
    }
}
