//! One thread block on the CPU: its GPU threads' states and everything the intrinsics read
//! and write while one of them runs (the executor's side of [`hooks::Hooks`]).
//!
//! The scheduler (`scheduler.rs`) resumes the threads; warp operations complete in
//! `warp_ops.rs`, barriers open (or are found stuck) in `barriers.rs`.

use std::cell::{Cell, OnceCell, RefCell};
use std::sync::atomic::AtomicBool;

use super::error::{CpuError, CrossBlockWait, ExitedPeerAccess, GlobalMemoryRace, SharedMemoryRace, UninitialisedSharedRead};
use super::global_memory::{LaunchThread, OutputShadow};
use super::hooks::{self, BarrierKind, Hooks, SharedFault, WarpOp};
use super::raw_views::Mirror;
use super::shared_memory::{AccessKind, RaceCheck, SharedMemory};
use super::spin::Spin;
use super::watchdog::WorkerStatus;
use ferrocuda_types::Dim3;
use ferrocuda_types::WARP_SIZE;

/// Where a GPU thread is.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ThreadState {
    Runnable,
    AtBarrier { kind: BarrierKind, predicate: bool },
    AtWarp { op: WarpOp, mask: u32, value: u64 },
    AtClusterBarrier,
    Exited,
}

/// The yielder of a GPU thread's coroutine.
pub(crate) type ThreadYielder = corosensei::Yielder<(), ()>;

/// One GPU thread of the block.
pub(crate) struct ThreadSlot {
    /// `threadIdx`.
    pub(crate) index: Dim3,
    pub(crate) state: Cell<ThreadState>,
    /// The result of the collective the thread last waited in.
    pub(crate) reply: Cell<u64>,
    /// The yielder of the thread's coroutine, set when it starts.
    pub(crate) yielder: Cell<*const ThreadYielder>,
    /// `[start, end)` of its stack's guard region (for the overflow report).
    pub(crate) guard: Cell<(usize, usize)>,
    /// Its private mirrors of the outputs it took raw views of (`raw_views`).
    pub(crate) mirrors: RefCell<Vec<Mirror>>,
    /// Atomic accesses since it last waited (it yields after [`POLLS_BEFORE_YIELD`]).
    pub(crate) polls: Cell<u32>,
    /// The block's barrier epoch in which it exited (`None` while it runs): its accesses of
    /// that epoch are ordered by no later barrier, since it never arrived at one.
    pub(crate) exit_epoch: Cell<Option<u32>>,
    /// How many named-barrier arrivals (`NamedBarrier::arrive`/`sync`) it has made.
    pub(crate) named_arrivals: Cell<u32>,
    /// Its last wait was a poll (a yield after a run of atomic accesses), not a collective.
    pub(crate) polling: Cell<bool>,
    /// Whether its atomic accesses since its last other wait look like a spin (F2).
    pub(crate) spin: RefCell<Spin>,
}

/// Consecutive atomic accesses (loads, read-modify-writes) after which a GPU thread that has
/// not waited otherwise yields to the other threads of its block, so that a spin-wait on an
/// atomic flag that another warp sets completes, as it does on a GPU (audit P8).
pub(crate) const POLLS_BEFORE_YIELD: u32 = 64;

/// One open phase of a named barrier of the block.
///
/// Arrivals count by warp, as on a GPU: PTX `barrier` "causes executing thread to wait for all
/// non-exited threads from its warp and marks warps' arrival at barrier", and the count is "in
/// multiple of warp size". A warp counts 32 once every one of its lanes has arrived or exited
/// (at least one arrived), a partial last warp included (audit 2026-11-27f F12-3: a warp with
/// exited lanes and a 48-thread block completed on an H200 and were reported as deadlocks here).
#[derive(Default)]
struct NamedPhase {
    /// Per warp of the block, the lanes that have arrived in this phase.
    lanes: Vec<u32>,
    /// The thread count the phase's first arrival gave (all must give the same: F12-3).
    count: Option<u32>,
    /// Phases completed so far.
    completed: u64,
    /// The ranks that wait (`sync`) for this phase.
    waiters: Vec<u32>,
    /// With race detection: per thread of the block, how many of its named-barrier arrivals
    /// this phase orders before the waiters' later accesses (the join of what each arriving
    /// thread had seen and its own arrival).
    join: Vec<u32>,
}

/// Payload of the unwinding that ends a thread of a failed block (`scheduler::end_waiting`).
pub(crate) struct Cancelled;

/// What a block shares with the rest of its launch.
#[derive(Clone, Copy)]
pub(crate) struct LaunchLink<'a> {
    /// The kernel's symbol.
    pub(crate) kernel: &'a str,
    /// Set by the watchdog: stop at the next switch.
    pub(crate) stop: &'a AtomicBool,
    /// What this worker runs, for the watchdog.
    pub(crate) status: &'a WorkerStatus,
    /// Bytes of each GPU thread's stack (for the overflow report).
    pub(crate) stack_size: usize,
    /// Who took which output element (`None` without race detection).
    pub(crate) outputs: Option<&'a OutputShadow>,
    /// Every block of the launch runs in one run (a cooperative launch, F2).
    pub(crate) co_resident: bool,
}

/// Everything the intrinsics of one running block read and write.
pub(crate) struct BlockContext<'a> {
    pub(crate) link: LaunchLink<'a>,
    pub(crate) block_idx: Dim3,
    pub(crate) block_dim: Dim3,
    pub(crate) grid_dim: Dim3,
    pub(crate) shared: &'a SharedMemory,
    /// The shared memory of every block of the cluster, by cluster rank (this block's too).
    pub(crate) cluster_shared: &'a [SharedMemory],
    /// This block's rank in its cluster.
    pub(crate) cluster_rank: u32,
    /// The cluster's shape in blocks (1, 1, 1 without clusters).
    pub(crate) cluster_dim: Dim3,
    /// Threads that have exited.
    pub(crate) exited: Cell<u32>,
    pub(crate) threads: Box<[ThreadSlot]>,
    /// Rank of the thread now running.
    pub(crate) current: Cell<u32>,
    /// Warps in the block (the last may be partial).
    pub(crate) warps: u32,
    /// Per thread, its warp clock (32 entries, by lane): what completed `sync_warp`s order
    /// before its next shared access (see `shared_memory::RaceCheck`).
    pub(crate) warp_clocks: Box<[Cell<u32>]>,
    /// Set by the first error: the remaining threads are unwound from where they wait, the
    /// block ends.
    pub(crate) cancelled: Cell<bool>,
    pub(crate) error: RefCell<Option<CpuError>>,
    /// The first read of shared memory that the block had not written (Q6), reported when the
    /// block ends with no other error (a race of the same access is the better report).
    uninitialised: RefCell<Option<UninitialisedSharedRead>>,
    /// The named barriers (`NamedBarrier`) of the block, by id: fresh for every block, as on a
    /// GPU.
    named: RefCell<Vec<NamedPhase>>,
    /// With race detection, once a named barrier is used: per thread (row) and thread of the
    /// block (column), how many of the column thread's named-barrier arrivals are ordered
    /// before the row thread's next access (a vector clock over named-barrier arrivals).
    named_seen: OnceCell<Box<[Cell<u32>]>>,
}

impl<'a> BlockContext<'a> {
    /// Block `block_idx` of a launch, rank `cluster_rank` of a cluster whose blocks' shared
    /// memories are `cluster_shared`.
    pub(crate) fn new(
        link: LaunchLink<'a>,
        block_idx: Dim3,
        block_dim: Dim3,
        grid_dim: Dim3,
        cluster_shared: &'a [SharedMemory],
        cluster_rank: u32,
        cluster_dim: Dim3,
    ) -> Self {
        let mut threads = Vec::with_capacity((block_dim.x * block_dim.y * block_dim.z) as usize);
        for z in 0..block_dim.z {
            for y in 0..block_dim.y {
                for x in 0..block_dim.x {
                    threads.push(ThreadSlot {
                        index: Dim3 { x, y, z },
                        state: Cell::new(ThreadState::Runnable),
                        reply: Cell::new(0),
                        yielder: Cell::new(core::ptr::null()),
                        guard: Cell::new((0, 0)),
                        mirrors: RefCell::new(Vec::new()),
                        polls: Cell::new(0),
                        exit_epoch: Cell::new(None),
                        named_arrivals: Cell::new(0),
                        polling: Cell::new(false),
                        spin: RefCell::new(Spin::default()),
                    });
                }
            }
        }
        let warps = threads.len().div_ceil(WARP_SIZE as usize);
        let clock_entries = threads.len() * WARP_SIZE as usize;
        BlockContext {
            link,
            block_idx,
            block_dim,
            grid_dim,
            shared: &cluster_shared[cluster_rank as usize],
            cluster_shared,
            cluster_rank,
            cluster_dim,
            exited: Cell::new(0),
            threads: threads.into_boxed_slice(),
            current: Cell::new(0),
            warps: warps as u32,
            // Each thread's own entry starts at 1, the others at 0: nothing ordered yet.
            warp_clocks: (0..clock_entries).map(|i| Cell::new((i / WARP_SIZE as usize % WARP_SIZE as usize == i % WARP_SIZE as usize) as u32)).collect(),
            cancelled: Cell::new(false),
            error: RefCell::new(None),
            uninitialised: RefCell::new(None),
            named: RefCell::new(Vec::new()),
            named_seen: OnceCell::new(),
        }
    }

    /// The kernel's symbol.
    pub(crate) fn kernel(&self) -> &'a str {
        self.link.kernel
    }

    /// Makes this the block the intrinsics of this OS thread see, until the guard drops.
    pub(crate) fn enter(&self) -> hooks::Entered<'_> {
        self.link.status.enter_block(self.block_idx);
        // SAFETY: the guard is a local of the caller's scope, which `self` (and the shared
        // memory it borrows, whose window this is) outlives; it is never leaked.
        unsafe { hooks::enter(self, self.shared.window()) }
    }

    /// The running GPU thread.
    #[inline(always)]
    pub(crate) fn thread(&self) -> &ThreadSlot {
        &self.threads[self.current.get() as usize]
    }

    /// Waits in `state` (a collective: not a spin's poll) until the scheduler completes it;
    /// returns the collective's result.
    fn wait(&self, state: ThreadState) -> u64 {
        self.thread().spin.borrow_mut().reset();
        self.suspend(state)
    }

    /// Suspends the running thread in `state` until the scheduler resumes it.
    fn suspend(&self, state: ThreadState) -> u64 {
        let slot = self.thread();
        slot.state.set(state);
        slot.polls.set(0);
        let yielder = slot.yielder.get();
        // SAFETY: set when this thread's coroutine started; the coroutine (and so its yielder)
        // is running right now, since this code runs on it.
        unsafe { (*yielder).suspend(()) };
        if self.cancelled.get() {
            // Another thread failed, and this one is unwound (`scheduler::end_waiting`, G14-4).
            // No panic hook runs.
            std::panic::resume_unwind(Box::new(Cancelled));
        }
        slot.reply.get()
    }

    /// First rank and number of lanes of warp `warp`.
    pub(crate) fn warp_range(&self, warp: u32) -> (usize, u32) {
        let base = (warp * WARP_SIZE) as usize;
        (base, (self.threads.len() - base).min(WARP_SIZE as usize) as u32)
    }

    /// Keeps the block's first error and stops the block.
    pub(crate) fn fail(&self, error: CpuError) {
        let mut slot = self.error.borrow_mut();
        if slot.is_none() {
            *slot = Some(error);
        }
        self.cancelled.set(true);
    }

    /// `threadIdx` of the threads whose state passes `f`.
    pub(crate) fn threads_where(&self, f: impl Fn(ThreadState) -> bool) -> Vec<Dim3> {
        self.threads.iter().filter(|t| f(t.state.get())).map(|t| t.index).collect()
    }

    /// Records an access by the running thread of the shared memory of cluster block `rank`
    /// (this block's, or a peer's), failing the block on a race.
    pub(crate) fn record_shared(&self, rank: u32, address: u32, bytes: usize, kind: AccessKind) {
        let me = self.current.get();
        let exited_in = |rank: u32| self.threads[rank as usize].exit_epoch.get();
        let seen = |rank: u32| self.named_seen(me, rank);
        let check = RaceCheck {
            block: self.cluster_rank,
            rank: me,
            epochs: self.shared.epochs(),
            clock: self.warp_clock(me),
            named: self.threads[me as usize].named_arrivals.get(),
            exited_in: &exited_in,
            named_seen: &seen,
        };
        let memory = &self.cluster_shared[rank as usize];
        if kind != AccessKind::Write {
            self.check_written(rank, address, bytes);
        }
        if let Some(race) = memory.record_access(address, bytes, kind, &check) {
            let thread = |(block, rank): (u32, u32)| (self.cluster_block_idx(block), self.thread_index(rank));
            let ((first_block, first), (second_block, second)) = (thread(race.first), thread(race.second));
            self.fail(CpuError::SharedMemoryRace(SharedMemoryRace {
                kernel: self.kernel().to_owned(),
                block: self.cluster_block_idx(rank),
                address: race.address,
                kind: race.kind,
                first,
                first_block,
                second,
                second_block,
            }));
        }
    }

    /// Notes the first read by the running thread of shared memory of cluster block `rank`
    /// that its block has not written (Q6), to report when the block ends.
    fn check_written(&self, rank: u32, address: u32, bytes: usize) {
        let memory = &self.cluster_shared[rank as usize];
        let Some(unwritten) = memory.unwritten(address, bytes) else { return };
        let mut first = self.uninitialised.borrow_mut();
        if first.is_none() {
            let (dynamic, offset, array_bytes) = memory.describe(unwritten);
            *first = Some(UninitialisedSharedRead {
                kernel: self.kernel().to_owned(),
                block: self.cluster_block_idx(rank),
                thread: self.thread_index(self.current.get()),
                reader_block: self.block_idx,
                address: unwritten,
                bytes,
                dynamic,
                offset,
                array_bytes,
            });
        }
    }

    /// Every thread of this block has exited: its shared memory is gone. A peer's access of
    /// it since the last cluster barrier is an error (nothing kept this block alive for it).
    /// A read of shared memory the block had not written is reported now (Q6).
    pub(crate) fn block_exited(&self) {
        if let Some(read) = self.uninitialised.borrow_mut().take() {
            self.fail(CpuError::UninitialisedSharedRead(read));
        }
        if let Some((block, rank)) = self.shared.mark_exited() {
            self.fail(CpuError::ExitedPeerAccess(ExitedPeerAccess {
                kernel: self.kernel().to_owned(),
                block: self.block_idx,
                reader_block: self.cluster_block_idx(block),
                reader: self.thread_index(rank),
            }));
        }
    }

    /// `blockIdx` of the cluster's block `rank` (ranks go x fastest).
    fn cluster_block_idx(&self, rank: u32) -> Dim3 {
        let c = self.cluster_dim;
        let offset = |r: u32| Dim3 { x: r % c.x, y: r / c.x % c.y, z: r / (c.x * c.y) };
        let (mine, theirs) = (offset(self.cluster_rank), offset(rank));
        Dim3 { x: self.block_idx.x - mine.x + theirs.x, y: self.block_idx.y - mine.y + theirs.y, z: self.block_idx.z - mine.z + theirs.z }
    }

    /// `threadIdx` of rank `rank` (of any block of the launch: they have one shape).
    fn thread_index(&self, rank: u32) -> Dim3 {
        self.threads[rank as usize].index
    }

    /// Thread `rank`'s warp clock (32 entries, by lane).
    pub(crate) fn warp_clock(&self, rank: u32) -> &[Cell<u32>] {
        let start = rank as usize * WARP_SIZE as usize;
        &self.warp_clocks[start..start + WARP_SIZE as usize]
    }

    /// Thread `rank` of this block as a thread of the launch.
    fn launch_thread(&self, rank: u32) -> LaunchThread {
        let (b, g) = (self.block_idx, self.grid_dim);
        let block = b.x as u64 + g.x as u64 * (b.y as u64 + g.y as u64 * b.z as u64);
        block * self.threads.len() as u64 + rank as u64
    }

    /// `(blockIdx, threadIdx)` of a thread of the launch.
    fn locate(&self, thread: LaunchThread) -> (Dim3, Dim3) {
        let (g, d) = (self.grid_dim, self.block_dim);
        let (block, rank) = (thread / self.threads.len() as u64, thread % self.threads.len() as u64);
        let (gx, gy) = (g.x as u64, g.y as u64);
        let block_idx = Dim3 { x: (block % gx) as u32, y: (block / gx % gy) as u32, z: (block / (gx * gy)) as u32 };
        let (dx, dy) = (d.x as u64, d.y as u64);
        (block_idx, Dim3 { x: (rank % dx) as u32, y: (rank / dx % dy) as u32, z: (rank / (dx * dy)) as u32 })
    }

    /// Records an access by thread `me` (the running one) of element `index` of the output
    /// view of `elements` elements at `base`; on a race, fails the block and returns false.
    #[allow(clippy::too_many_arguments, reason = "one access, spelled out")]
    fn record_output(&self, outputs: &OutputShadow, me: LaunchThread, base: usize, elements: usize, element_bytes: usize, index: usize, write: bool) -> bool {
        let Some(conflict) = outputs.record(base, elements, element_bytes, index, me, write) else { return true };
        let (first_block, first_thread) = self.locate(conflict.other);
        self.fail(CpuError::GlobalMemoryRace(GlobalMemoryRace {
            kernel: self.kernel().to_owned(),
            address: base.wrapping_add(index.wrapping_mul(element_bytes)),
            index,
            element_bytes,
            kind: conflict.kind,
            first_block,
            first_thread,
            second_block: self.block_idx,
            second_thread: self.thread().index,
        }));
        false
    }

    /// When the running thread returns: records the elements it changed through raw views
    /// as its writes and copies them to the outputs (`raw_views`).
    pub(crate) fn flush_raw_views(&self) {
        let mirrors = std::mem::take(&mut *self.thread().mirrors.borrow_mut());
        let Some(outputs) = self.link.outputs else { return };
        let me = self.launch_thread(self.current.get());
        for mut mirror in mirrors {
            let (start, elements, element_bytes) = (mirror.start, mirror.bytes / mirror.element_bytes.max(1), mirror.element_bytes);
            // SAFETY: the output stays valid for the launch; the elements written back are
            // this thread's (each claim is recorded without a conflict first).
            unsafe { mirror.flush(|i| self.record_output(outputs, me, start, elements, element_bytes, i, true)) };
        }
    }

    /// How many of thread `of`'s named-barrier arrivals are ordered before thread `me`'s next
    /// access.
    fn named_seen(&self, me: u32, of: u32) -> u32 {
        let n = self.threads.len();
        self.named_seen.get().map_or(0, |seen| seen[me as usize * n + of as usize].get())
    }

    /// The running thread arrives at named barrier `id` (`threads` per phase); returns the
    /// number of the phase it arrived in. With `wait`, the thread is a waiter of that phase:
    /// when the phase completes, it sees every access the arriving threads made before their
    /// arrivals (PTX ISA 9.0, 9.7.15.1: "prior memory accesses requested by this thread are
    /// performed relative to all threads participating in the barrier"; audit P7).
    pub(crate) fn named_arrive(&self, id: u32, threads: u32, wait: bool) -> u64 {
        let me = self.current.get();
        let n = self.threads.len();
        let tracked = self.shared.race_detection();
        let seen = tracked.then(|| self.named_seen.get_or_init(|| (0..n * n).map(|_| Cell::new(0)).collect()));
        let mut named = self.named.borrow_mut();
        if named.len() <= id as usize {
            named.resize_with(id as usize + 1, NamedPhase::default);
        }
        let phase = &mut named[id as usize];
        let slot = &self.threads[me as usize];
        let arrival = slot.named_arrivals.get();
        slot.named_arrivals.set(arrival + 1);
        if let Some(seen) = seen {
            if phase.join.len() != n {
                phase.join = vec![0; n];
            }
            // What this thread has seen, and its own accesses up to this arrival.
            for (j, known) in phase.join.iter_mut().zip(&seen[me as usize * n..(me as usize + 1) * n]) {
                *j = (*j).max(known.get());
            }
            phase.join[me as usize] = phase.join[me as usize].max(arrival + 1);
        }
        if wait {
            phase.waiters.push(me);
        }
        // Two thread counts for one phase of one barrier: an H200 raised
        // CUDA_ERROR_ILLEGAL_INSTRUCTION for it (F12-3), so it is a fault here too.
        if let Some(count) = phase.count.filter(|&count| count != threads) {
            drop(named);
            panic!(
                "named barrier {id}: one phase was given two thread counts ({count} and {threads}); a GPU faults on it \
                 (CUDA_ERROR_ILLEGAL_INSTRUCTION, the context is lost): give every `NamedBarrier` of one id the same count"
            );
        }
        phase.count = Some(threads);
        let warps = n.div_ceil(WARP_SIZE as usize);
        if phase.lanes.len() != warps {
            phase.lanes = vec![0; warps];
        }
        phase.lanes[(me / WARP_SIZE) as usize] |= 1 << (me % WARP_SIZE);
        let number = phase.completed;
        self.settle(phase, seen.map(|s| &**s));
        number
    }

    /// Completes `phase` when the warps whose lanes have all arrived or exited (at least one
    /// arrived) reach its thread count, 32 a warp; then orders the waiters' later accesses after
    /// the arrivals (race detection) and opens the next phase. Called at each arrival and at
    /// each poll of a waiting thread, so that lanes exiting after their warp-mates arrived
    /// release the phase, as on a GPU.
    fn settle(&self, phase: &mut NamedPhase, seen: Option<&[Cell<u32>]>) {
        let Some(threads) = phase.count else { return };
        let n = self.threads.len();
        let warp = WARP_SIZE as usize;
        let full = |w: usize, arrived: u32| {
            arrived != 0
                && (w * warp..((w + 1) * warp).min(n)).all(|r| arrived & (1 << (r % warp)) != 0 || matches!(self.threads[r].state.get(), ThreadState::Exited))
        };
        let warps = phase.lanes.iter().enumerate().filter(|&(w, &arrived)| full(w, arrived)).count() as u32;
        if warps * WARP_SIZE < threads {
            return;
        }
        if let Some(seen) = seen {
            for &waiter in &phase.waiters {
                let row = &seen[waiter as usize * n..(waiter as usize + 1) * n];
                for (known, &j) in row.iter().zip(&phase.join) {
                    known.set(known.get().max(j));
                }
            }
        }
        phase.lanes.iter_mut().for_each(|l| *l = 0);
        phase.count = None;
        phase.completed += 1;
        phase.waiters.clear();
        phase.join.iter_mut().for_each(|j| *j = 0);
    }

    /// Phases of named barrier `id` completed so far (the open phase settled first: lanes that
    /// exited since the last arrival may complete it).
    pub(crate) fn named_completed(&self, id: u32) -> u64 {
        let seen = self.named_seen.get().map(|s| &**s);
        let mut named = self.named.borrow_mut();
        match named.get_mut(id as usize) {
            Some(phase) => {
                self.settle(phase, seen);
                phase.completed
            }
            None => 0,
        }
    }

    /// Whether every thread of `runnable` (the ranks the next pass resumes) yielded to poll
    /// and spins (F2): then nothing this block does can end their wait.
    pub(crate) fn only_spinners(&self, runnable: &[u32]) -> bool {
        runnable.iter().all(|&rank| {
            let slot = &self.threads[rank as usize];
            slot.polling.get() && slot.spin.borrow().spinning()
        })
    }

    /// Ends the block (and its launch) with a [`CrossBlockWait`] naming the spinning threads of
    /// `runnable`.
    pub(crate) fn report_spin(&self, runnable: &[u32]) {
        let spun = runnable.first().map(|&rank| self.threads[rank as usize].spin.borrow().polled()).unwrap_or_default();
        self.fail(CpuError::CrossBlockWait(CrossBlockWait {
            kernel: self.kernel().to_owned(),
            block: self.block_idx,
            threads: runnable.iter().map(|&rank| self.threads[rank as usize].index).collect(),
            spun,
            cooperative: self.link.co_resident,
        }));
    }

    /// Every thread has exited.
    pub(crate) fn finished(&self) -> bool {
        self.threads.iter().all(|t| matches!(t.state.get(), ThreadState::Exited))
    }

    /// Every thread that has not exited waits at the cluster barrier: this block does not
    /// hold the barrier up. PTX `exit`: "barriers waiting on all threads are checked to see if
    /// the exiting threads are the only threads that have not yet made it to [...] a
    /// barrier.cluster for all threads in the cluster. If the exiting threads are holding up
    /// the barrier, the barrier is released" (E4, audit 2026-11-27e; the cluster twin of P9).
    pub(crate) fn clear_of_cluster_barrier(&self) -> bool {
        self.threads.iter().all(|t| matches!(t.state.get(), ThreadState::AtClusterBarrier | ThreadState::Exited))
    }
}

impl Hooks for BlockContext<'_> {
    fn thread_idx(&self) -> [u32; 3] {
        let d = self.thread().index;
        [d.x, d.y, d.z]
    }
    fn block_idx(&self) -> [u32; 3] {
        let d = self.block_idx;
        [d.x, d.y, d.z]
    }
    fn block_dim(&self) -> [u32; 3] {
        let d = self.block_dim;
        [d.x, d.y, d.z]
    }
    fn grid_dim(&self) -> [u32; 3] {
        let d = self.grid_dim;
        [d.x, d.y, d.z]
    }
    fn launch_id(&self) -> usize {
        self.link.stop as *const core::sync::atomic::AtomicBool as usize
    }
    fn rank(&self) -> u32 {
        self.current.get()
    }
    fn barrier(&self, kind: BarrierKind, predicate: bool) -> u32 {
        self.wait(ThreadState::AtBarrier { kind, predicate }) as u32
    }
    fn warp_op(&self, op: WarpOp, mask: u32, value: u64) -> u64 {
        self.wait(ThreadState::AtWarp { op, mask, value })
    }
    fn static_shared(&self, site: u64, bytes: usize, align: usize) -> Result<u32, SharedFault> {
        let address = self.shared.static_array(site, bytes, align);
        if let Err(SharedFault::TotalLimit { static_bytes, dynamic_bytes, max }) = address {
            // The launch's error, as a GPU's launch gives it (F7); the hook's panic that follows
            // ends the thread, and the block keeps this first error.
            let problem = ferrocuda_types::LaunchProblem::SharedMemoryTotalTooLarge { static_bytes, dynamic_bytes, max };
            self.fail(CpuError::InvalidConfig { kernel: self.kernel().to_owned(), problem });
        }
        address
    }
    fn dynamic_shared_bytes(&self) -> u32 {
        self.shared.dynamic_bytes()
    }
    fn peer_shared_pointer(&self, rank: u32, address: u32, bytes: usize, align: usize) -> Result<*mut u8, SharedFault> {
        let shared = self.cluster_shared.get(rank as usize).ok_or(SharedFault::NoSuchBlock { size: self.cluster_shared.len() as u32 })?;
        if shared.has_exited() {
            return Err(SharedFault::ExitedBlock { rank });
        }
        shared.pointer(address, bytes, align)
    }
    fn note_peer_access(&self, rank: u32, address: u32, bytes: usize, write: bool) {
        if rank != self.cluster_rank {
            self.cluster_shared[rank as usize].note_peer_access(self.cluster_rank, self.current.get());
        }
        self.record_shared(rank, address, bytes, if write { AccessKind::Write } else { AccessKind::Read });
    }
    fn note_shared_access(&self, address: u32, bytes: usize, write: bool) {
        self.record_shared(self.cluster_rank, address, bytes, if write { AccessKind::Write } else { AccessKind::Read });
    }
    fn note_unrecorded_shared(&self, rank: u32, address: u32, bytes: usize) {
        if let Some(memory) = self.cluster_shared.get(rank as usize) {
            memory.mark_written(address, bytes);
        }
    }
    fn note_shared_atomic(&self, address: u32, bytes: usize) {
        // Checked as a read of memory the block wrote (Q6), then for races with plain
        // accesses (F3); it counts as written.
        self.record_shared(self.cluster_rank, address, bytes, AccessKind::Atomic);
    }
    fn note_output_access(&self, base: usize, elements: usize, element_bytes: usize, index: usize, count: usize, write: bool) -> usize {
        let Some(outputs) = self.link.outputs else { return base };
        let me = self.launch_thread(self.current.get());
        for i in index..index.saturating_add(count) {
            if !self.record_output(outputs, me, base, elements, element_bytes, i, write) {
                break;
            }
        }
        let mut mirrors = self.thread().mirrors.borrow_mut();
        let bytes = elements.saturating_mul(element_bytes);
        mirrors.iter_mut().find_map(|m| m.translate(base, bytes)).unwrap_or(base)
    }
    fn raw_output_view(&self, base: usize, elements: usize, element_bytes: usize, atomic_word: usize) -> usize {
        let Some(outputs) = self.link.outputs else { return base };
        let bytes = elements.saturating_mul(element_bytes);
        let mut mirrors = self.thread().mirrors.borrow_mut();
        if let Some(at) = mirrors.iter_mut().find_map(|m| m.translate(base, bytes)) {
            return at;
        }
        if bytes == 0 {
            return base;
        }
        // Past the budget: the output itself, once no copy reads it any more (G13R-3).
        let Some(ticket) = outputs.mirrors.start_copy(self.kernel(), bytes) else { return base };
        let me = self.launch_thread(self.current.get());
        let mut mirror = Mirror::new(base, bytes, element_bytes, |into| {
            if atomic_word == 0 {
                // SAFETY: the output parameter is valid for its `elements` for the whole launch.
                unsafe { outputs.copy_for_mirror(base, elements, element_bytes, me, into) }
            } else {
                // SAFETY: as above; the partition's other threads access it only atomically, in
                // words of `atomic_word` bytes (`Partition::ATOMIC_WORD`), aligned (an array of
                // elements made of such words).
                unsafe { super::raw_views::copy_atomic_words(base, atomic_word, into) }
            }
        });
        drop(ticket);
        let at = mirror.translate(base, bytes).expect("a mirror covers its output");
        mirrors.push(mirror);
        at
    }
    fn cluster_rank(&self) -> u32 {
        self.cluster_rank
    }
    fn cluster_size(&self) -> u32 {
        self.cluster_shared.len() as u32
    }
    fn cluster_barrier(&self) {
        self.wait(ThreadState::AtClusterBarrier);
    }
    fn atomic_access(&self, address: usize, value: u64, changed: bool) {
        let slot = self.thread();
        slot.spin.borrow_mut().record(address, value, changed);
        let polls = slot.polls.get() + 1;
        slot.polls.set(polls);
        if polls >= POLLS_BEFORE_YIELD {
            // Let the block's other threads run (the writer this thread may wait for among
            // them); `suspend` resets the count, and the spin's window ends here.
            slot.spin.borrow_mut().end_window();
            slot.polling.set(true);
            self.suspend(ThreadState::AtWarp { op: WarpOp::ActiveMask, mask: u32::MAX, value: 0 });
        }
    }
    fn named_barrier(&self, id: u32, threads: u32, wait: bool) -> u64 {
        self.named_arrive(id, threads, wait)
    }
    fn named_barrier_completed(&self, id: u32) -> u64 {
        self.named_completed(id)
    }
}
