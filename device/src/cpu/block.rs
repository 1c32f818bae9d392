//! Thread blocks on the CPU: the GPU threads of a block (or of the blocks of a thread-block
//! cluster) as stackful coroutines on one OS thread, scheduled round-robin and switching only
//! at barriers and warp operations.
//!
//! A pass resumes every runnable thread of each block once, in rank order; each runs until it
//! exits or waits (at a barrier or a warp operation). After the pass, warp operations whose
//! lanes have all arrived complete; when nothing in a block is runnable and every thread waits
//! at the block barrier, it opens; when nothing in the cluster is runnable and every thread
//! waits at the cluster barrier, that opens. When nothing is runnable and nothing can
//! complete, the cluster is stuck, which on a GPU is a hang or undefined behaviour, and here an
//! error naming the threads.

use std::cell::{Cell, RefCell};
use std::panic::{AssertUnwindSafe, catch_unwind};

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};

use super::error::{BarrierDivergence, CpuError, WarpDeadlock};
use ferrocuda_host::KernelPanic;
use super::panic_capture;
use super::shared_memory::{RaceCheck, SharedMemory};
use crate::emu::BarrierKind;
use crate::thread::Dim3;
use crate::warp::{ShuffleMode, WARP_SIZE};

type ThreadYielder = Yielder<(), ()>;
type ThreadCoroutine = Coroutine<(), (), (), DefaultStack>;

/// A warp collective a lane waits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WarpOp {
    /// `shfl.sync` of the lane's 32-bit value.
    Shuffle { mode: ShuffleMode, lane_or_delta: u32 },
    /// `vote.sync.ballot` of the lane's predicate (0 or 1).
    Ballot,
    /// `match.any.sync` of the lane's value.
    MatchAny,
    /// `bar.warp.sync`.
    Sync,
    /// `activemask`: which lanes are here together. Not a barrier: it completes for the lanes
    /// that reached it in the same pass (the lanes a GPU would have converged there), without
    /// waiting for the others.
    ActiveMask,
}

#[derive(Debug, Clone, Copy)]
enum ThreadState {
    Runnable,
    AtBarrier { kind: BarrierKind, predicate: bool },
    AtWarp { op: WarpOp, mask: u32, value: u64 },
    AtClusterBarrier,
    Exited,
}

/// What a block's barrier check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BarrierOutcome {
    /// Every thread waited at the block barrier; all are runnable again.
    Opened,
    /// Every thread has exited.
    Finished,
    /// Threads wait for something that only the cluster (or nothing) can complete.
    Blocked,
}

/// One GPU thread of the block.
pub(crate) struct ThreadSlot {
    /// `threadIdx`.
    pub(crate) index: Dim3,
    state: Cell<ThreadState>,
    /// The result of the collective the thread last waited in.
    reply: Cell<u64>,
    /// The yielder of the thread's coroutine, set when it starts.
    yielder: Cell<*const ThreadYielder>,
}

/// Payload of the unwinding that ends the threads of a block that has failed.
struct Cancelled;

/// A stack pool: coroutine stacks are reused across threads and blocks (each is an `mmap`).
pub(crate) struct StackPool {
    stacks: Vec<DefaultStack>,
    stack_size: usize,
}

impl StackPool {
    pub(crate) fn new(stack_size: usize) -> Self {
        StackPool { stacks: Vec::new(), stack_size }
    }

    fn take(&mut self) -> DefaultStack {
        self.stacks.pop().unwrap_or_else(|| {
            DefaultStack::new(self.stack_size)
                .unwrap_or_else(|e| panic!("the CPU executor could not map a {} KiB coroutine stack: {e}", self.stack_size / 1024))
        })
    }

    fn give(&mut self, stack: DefaultStack) {
        self.stacks.push(stack);
    }
}

thread_local! {
    /// The block being run on this OS thread (null outside the executor).
    static CURRENT: Cell<*const BlockContext<'static>> = const { Cell::new(core::ptr::null()) };
}

/// Everything the intrinsics of one running block read and write.
pub(crate) struct BlockContext<'a> {
    kernel: &'a str,
    pub(crate) block_idx: Dim3,
    pub(crate) block_dim: Dim3,
    pub(crate) grid_dim: Dim3,
    pub(crate) shared: &'a SharedMemory,
    /// The shared memory of every block of the cluster, by cluster rank (this block's too).
    cluster_shared: &'a [SharedMemory],
    /// This block's rank in its cluster.
    pub(crate) cluster_rank: u32,
    threads: Box<[ThreadSlot]>,
    /// Rank of the thread now running.
    current: Cell<u32>,
    /// Per warp: how many `sync_warp`s it has completed (orders shared accesses within a warp).
    warp_syncs: Box<[Cell<u32>]>,
    /// Set by the first error: the remaining threads are unwound, the block ends.
    cancelled: Cell<bool>,
    error: RefCell<Option<CpuError>>,
}

/// Clears the current block of this OS thread when dropped (it borrows the block, so it
/// cannot outlive it).
pub(crate) struct CurrentGuard<'b>(core::marker::PhantomData<&'b ()>);

impl Drop for CurrentGuard<'_> {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(core::ptr::null()));
    }
}

impl<'a> BlockContext<'a> {
    /// Block `block_idx` of a launch, rank `cluster_rank` of a cluster whose blocks' shared
    /// memories are `cluster_shared`.
    pub(crate) fn new(kernel: &'a str, block_idx: Dim3, block_dim: Dim3, grid_dim: Dim3, cluster_shared: &'a [SharedMemory], cluster_rank: u32) -> Self {
        let mut threads = Vec::with_capacity((block_dim.x * block_dim.y * block_dim.z) as usize);
        for z in 0..block_dim.z {
            for y in 0..block_dim.y {
                for x in 0..block_dim.x {
                    threads.push(ThreadSlot {
                        index: Dim3 { x, y, z },
                        state: Cell::new(ThreadState::Runnable),
                        reply: Cell::new(0),
                        yielder: Cell::new(core::ptr::null()),
                    });
                }
            }
        }
        let warps = threads.len().div_ceil(WARP_SIZE as usize);
        BlockContext {
            kernel,
            block_idx,
            block_dim,
            grid_dim,
            shared: &cluster_shared[cluster_rank as usize],
            cluster_shared,
            cluster_rank,
            threads: threads.into_boxed_slice(),
            current: Cell::new(0),
            warp_syncs: (0..warps).map(|_| Cell::new(0)).collect(),
            cancelled: Cell::new(false),
            error: RefCell::new(None),
        }
    }

    /// Makes this the block the intrinsics of this OS thread see, until the guard drops.
    pub(crate) fn enter(&self) -> CurrentGuard<'_> {
        // The lifetime is erased for the thread-local; the guard, which borrows `self`, clears
        // it before `self` ends.
        CURRENT.with(|c| c.set((self as *const BlockContext<'a>).cast()));
        CurrentGuard(core::marker::PhantomData)
    }

    /// The block running on this OS thread, if any.
    #[inline(always)]
    pub(crate) fn current() -> Option<&'static BlockContext<'static>> {
        let pointer = CURRENT.with(|c| c.get());
        // SAFETY: a non-null pointer was set by `enter` on this OS thread and is cleared by its
        // guard before the block is dropped; the hooks use the reference only while their GPU
        // thread runs, which is inside that window.
        unsafe { pointer.as_ref() }
    }

    /// The rank of the running GPU thread in its block.
    #[inline(always)]
    pub(crate) fn current_rank(&self) -> u32 {
        self.current.get()
    }

    /// The running GPU thread.
    #[inline(always)]
    pub(crate) fn thread(&self) -> &ThreadSlot {
        &self.threads[self.current.get() as usize]
    }

    /// Waits in `state` until the scheduler completes it; returns the collective's result.
    fn wait(&self, state: ThreadState) -> u64 {
        let slot = self.thread();
        slot.state.set(state);
        let yielder = slot.yielder.get();
        // SAFETY: set when this thread's coroutine started; the coroutine (and so its yielder)
        // is running right now, since this code runs on it.
        unsafe { (*yielder).suspend(()) };
        if self.cancelled.get() {
            // Another thread failed: end this one by unwinding its stack (no panic hook runs).
            std::panic::resume_unwind(Box::new(Cancelled));
        }
        slot.reply.get()
    }

    pub(crate) fn barrier(&self, kind: BarrierKind, predicate: bool) -> u32 {
        self.wait(ThreadState::AtBarrier { kind, predicate }) as u32
    }

    pub(crate) fn warp_op(&self, op: WarpOp, mask: u32, value: u64) -> u64 {
        self.wait(ThreadState::AtWarp { op, mask, value })
    }

    /// `barrier.cluster`: waits until every thread of every block of the cluster arrives.
    pub(crate) fn cluster_barrier(&self) {
        self.wait(ThreadState::AtClusterBarrier);
    }

    /// Blocks in the cluster.
    pub(crate) fn cluster_size(&self) -> u32 {
        self.cluster_shared.len() as u32
    }

    /// The shared memory of the block of rank `rank` in this cluster.
    #[track_caller]
    pub(crate) fn cluster_peer(&self, rank: u32) -> &SharedMemory {
        match self.cluster_shared.get(rank as usize) {
            Some(shared) => shared,
            None => panic!("cluster block rank {rank} out of range: the cluster has {} blocks", self.cluster_shared.len()),
        }
    }

    /// First rank and number of lanes of warp `warp`.
    fn warp_range(&self, warp: u32) -> (usize, u32) {
        let base = (warp * WARP_SIZE) as usize;
        (base, (self.threads.len() - base).min(WARP_SIZE as usize) as u32)
    }

    /// Records a shared-memory access by the running thread; a data race fails the block.
    pub(crate) fn note_shared_access(&self, address: u32, bytes: usize, write: bool) {
        let rank = self.current.get();
        let check = RaceCheck { rank, warp_syncs: &self.warp_syncs };
        if let Some(race) = self.shared.record_access(address, bytes, write, &check) {
            let (first, second) = (self.threads[race.first as usize].index, self.threads[race.second as usize].index);
            self.fail(CpuError::SharedMemoryRace(super::error::SharedMemoryRace {
                kernel: self.kernel.to_owned(),
                block: host_dim(self.block_idx),
                address: race.address,
                kind: race.kind,
                first: host_dim(first),
                second: host_dim(second),
            }));
        }
    }

    /// Keeps the block's first error and stops the block.
    fn fail(&self, error: CpuError) {
        let mut slot = self.error.borrow_mut();
        if slot.is_none() {
            *slot = Some(error);
        }
        self.cancelled.set(true);
    }

    fn threads_where(&self, f: impl Fn(ThreadState) -> bool) -> Vec<ferrocuda_host::Dim3> {
        self.threads.iter().filter(|t| f(t.state.get())).map(|t| host_dim(t.index)).collect()
    }

    /// Resumes (or starts) thread `rank` until it waits or exits.
    fn resume(&self, rank: u32, coroutines: &mut [Option<ThreadCoroutine>], kernel: &(dyn Fn() + Sync), stacks: &mut StackPool) {
        self.current.set(rank);
        let slot = &self.threads[rank as usize];
        slot.state.set(ThreadState::Runnable);
        let coroutine = coroutines[rank as usize].get_or_insert_with(|| self.spawn(rank, kernel, stacks.take()));
        let _capturing = panic_capture::Capturing::begin();
        let finished = matches!(coroutine.resume(()), CoroutineResult::Return(()));
        if finished {
            slot.state.set(ThreadState::Exited);
            let done = coroutines[rank as usize].take().expect("the coroutine just ran");
            stacks.give(done.into_stack());
        }
    }

    fn spawn(&self, rank: u32, kernel: &(dyn Fn() + Sync), stack: DefaultStack) -> ThreadCoroutine {
        let body = move |yielder: &ThreadYielder, ()| {
            self.threads[rank as usize].yielder.set(yielder);
            if let Err(payload) = catch_unwind(AssertUnwindSafe(kernel))
                && !payload.is::<Cancelled>()
            {
                self.record_panic(rank, &*payload);
            }
        };
        // SAFETY: the coroutine borrows `self` and `kernel`; `run` drives every coroutine it
        // starts to completion (the final unwinding loop) before it returns, so the borrows
        // outlive the coroutine.
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
            kernel: self.kernel.to_owned(),
            file,
            line,
            column,
            message,
            block: axes(host_dim(self.block_idx)),
            thread: axes(host_dim(self.threads[rank as usize].index)),
        }));
    }

    /// Completes every warp operation whose lanes have all arrived; their ranks go to
    /// `runnable` in rank order.
    fn complete_warp_ops(&self, runnable: &mut Vec<u32>) {
        for warp in 0..self.warp_syncs.len() as u32 {
            let (base, lanes) = self.warp_range(warp);
            let lane = |l: u32| &self.threads[base + l as usize];
            // `waiting`: lanes in a collective; `asking`: lanes at `activemask`.
            let (mut waiting, mut asking, mut live) = (0u32, 0u32, 0u32);
            for l in 0..lanes {
                match lane(l).state.get() {
                    ThreadState::AtWarp { op: WarpOp::ActiveMask, .. } => {
                        asking |= 1 << l;
                        live |= 1 << l;
                    }
                    ThreadState::AtWarp { .. } => {
                        waiting |= 1 << l;
                        live |= 1 << l;
                    }
                    ThreadState::Exited => {}
                    _ => live |= 1 << l,
                }
            }
            if waiting | asking == 0 {
                continue;
            }
            let mut done = 0u32;
            for l in 0..lanes {
                if waiting & (1 << l) == 0 || done & (1 << l) != 0 {
                    continue;
                }
                let ThreadState::AtWarp { mask, .. } = lane(l).state.get() else { continue };
                // The lanes this operation waits for: those of its mask that have not exited.
                let group = (mask | 1 << l) & live;
                if group & !waiting == 0 && group & done == 0 {
                    self.complete_group(warp, base, lanes, group);
                    done |= group;
                }
            }
            for l in 0..lanes {
                if asking & (1 << l) != 0 {
                    lane(l).reply.set(asking as u64);
                }
            }
            done |= asking;
            runnable.extend((0..lanes).filter(|l| done & (1 << l) != 0).map(|l| base as u32 + l));
        }
    }

    /// Computes each lane's result of the warp operation of the lanes in `group`.
    fn complete_group(&self, warp: u32, base: usize, lanes: u32, group: u32) {
        let state = |l: u32| match self.threads[base + l as usize].state.get() {
            ThreadState::AtWarp { op, value, .. } => (op, value),
            _ => unreachable!("every lane of a completing group waits at a warp operation"),
        };
        let members = || (0..lanes).filter(move |l| group & (1 << l) != 0);
        let mut synced = false;
        for l in members() {
            let (op, value) = state(l);
            let reply = match op {
                WarpOp::Shuffle { mode, lane_or_delta } => {
                    let source = shuffle_source(l, mode, lane_or_delta);
                    // A source lane outside the group (exited, or past the block's end) has no
                    // value: CUDA leaves the result undefined; here the lane keeps its own.
                    if source < lanes && group & (1 << source) != 0 { state(source).1 as u32 as u64 } else { value as u32 as u64 }
                }
                WarpOp::Ballot => members().filter(|&m| state(m).1 != 0).fold(0u64, |b, m| b | 1 << m),
                WarpOp::MatchAny => members().filter(|&m| state(m).1 == value).fold(0u64, |b, m| b | 1 << m),
                WarpOp::Sync => {
                    synced = true;
                    0
                }
                WarpOp::ActiveMask => unreachable!("`activemask` completes on its own"),
            };
            self.threads[base + l as usize].reply.set(reply);
        }
        if synced {
            let counter = &self.warp_syncs[warp as usize];
            counter.set(counter.get() + 1);
        }
    }

    /// Opens the block barrier when every thread waits at it (their ranks go to `runnable`).
    fn open_barrier(&self, runnable: &mut Vec<u32>) -> BarrierOutcome {
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

    fn all_at_cluster_barrier(&self) -> bool {
        self.threads.iter().all(|t| matches!(t.state.get(), ThreadState::AtClusterBarrier))
    }

    fn finished(&self) -> bool {
        self.threads.iter().all(|t| matches!(t.state.get(), ThreadState::Exited))
    }

    /// Records why this block cannot go on: lanes stuck in a warp operation, or threads
    /// waiting at a barrier (block or cluster) that others, having exited or waiting elsewhere,
    /// never reach.
    fn report_stuck(&self) {
        let kernel = self.kernel.to_owned();
        let block = host_dim(self.block_idx);
        let stuck_warp = (0..self.warp_syncs.len() as u32).find(|&w| {
            let (base, lanes) = self.warp_range(w);
            (0..lanes).any(|l| matches!(self.threads[base + l as usize].state.get(), ThreadState::AtWarp { .. }))
        });
        let error = match stuck_warp {
            Some(warp) => {
                let (base, lanes) = self.warp_range(warp);
                let lanes_where = |f: &dyn Fn(ThreadState) -> bool| {
                    (0..lanes).filter(|&l| f(self.threads[base + l as usize].state.get())).map(|l| host_dim(self.threads[base + l as usize].index)).collect()
                };
                CpuError::WarpDeadlock(WarpDeadlock {
                    kernel,
                    block,
                    warp,
                    waiting: lanes_where(&|s| matches!(s, ThreadState::AtWarp { .. })),
                    at_barrier: lanes_where(&|s| matches!(s, ThreadState::AtBarrier { .. } | ThreadState::AtClusterBarrier)),
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

/// Runs the blocks of one cluster (one block when the launch has no clusters) to completion;
/// the first error (panic, stuck barrier, data race) ends them all, and the error of the
/// lowest cluster rank that failed is returned.
pub(crate) fn run_cluster(blocks: &[BlockContext<'_>], kernel: &(dyn Fn() + Sync), stacks: &mut StackPool) -> Result<(), CpuError> {
    let mut coroutines: Vec<Vec<Option<ThreadCoroutine>>> = blocks.iter().map(|b| (0..b.threads.len()).map(|_| None).collect()).collect();
    let mut runnable: Vec<Vec<u32>> = blocks.iter().map(|b| (0..b.threads.len() as u32).collect()).collect();
    let cancelled = || blocks.iter().any(|b| b.cancelled.get());
    'passes: loop {
        let mut progress = false;
        for (b, block) in blocks.iter().enumerate() {
            let _current = block.enter();
            for &rank in &runnable[b] {
                block.resume(rank, &mut coroutines[b], kernel, stacks);
                if block.cancelled.get() {
                    break 'passes;
                }
            }
            runnable[b].clear();
            block.complete_warp_ops(&mut runnable[b]);
            if runnable[b].is_empty() {
                block.open_barrier(&mut runnable[b]);
            }
            progress |= !runnable[b].is_empty();
        }
        if progress {
            continue;
        }
        if blocks.iter().all(BlockContext::finished) {
            break;
        }
        if blocks.iter().all(BlockContext::all_at_cluster_barrier) {
            for (b, block) in blocks.iter().enumerate() {
                block.threads.iter().for_each(|t| t.reply.set(0));
                block.shared.next_epoch();
                runnable[b].extend(0..block.threads.len() as u32);
            }
            continue;
        }
        // Stuck: blame the first block that is neither finished nor waiting at the cluster
        // barrier (or, if every unfinished block waits there, the first unfinished one: its
        // peers exited without reaching the cluster barrier).
        let culprit = blocks
            .iter()
            .find(|b| !b.finished() && !b.all_at_cluster_barrier())
            .or_else(|| blocks.iter().find(|b| !b.finished()))
            .expect("some block is unfinished");
        culprit.report_stuck();
        break;
    }
    if cancelled() {
        for block in blocks {
            block.cancelled.set(true);
        }
    }
    // Unwind the threads that are still suspended (after an error), so that every coroutine
    // has finished before the borrows it holds end.
    for (b, block) in blocks.iter().enumerate() {
        let _current = block.enter();
        for rank in 0..block.threads.len() {
            if coroutines[b][rank].is_some() {
                block.resume(rank as u32, &mut coroutines[b], kernel, stacks);
            }
        }
    }
    match blocks.iter().find_map(|b| b.error.borrow_mut().take()) {
        Some(error) => Err(error),
        None => Ok(()),
    }
}

/// The lane a shuffle reads, by PTX's rules for `shfl.sync` with the clamp values CUDA's
/// `__shfl_*_sync` use (31 for idx/down/bfly, 0 for up): an out-of-range source means the
/// lane's own value. Only the low 5 bits of the lane or delta count.
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

/// The device library's `Dim3` as the host crate's (what errors and configurations use).
pub(crate) fn host_dim(d: Dim3) -> ferrocuda_host::Dim3 {
    ferrocuda_host::Dim3 { x: d.x, y: d.y, z: d.z }
}

#[cfg(test)]
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

/// `[x, y, z]` of a host `Dim3` (how panic reports give block and thread, on both back ends).
fn axes(d: ferrocuda_host::Dim3) -> [u32; 3] {
    [d.x, d.y, d.z]
}
