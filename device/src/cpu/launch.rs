//! One launch on the CPU executor: workers take clusters (single blocks when the launch has
//! none) in order until none are left or one failed, and an optional watchdog stops a launch
//! that runs too long.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::block::{BlockContext, LaunchLink};
use super::error::{CpuError, StuckThread, Watchdog};
use super::global_memory::OutputShadow;
use super::scheduler::{self, Stopped};
use super::shared_memory::SharedMemory;
use super::watchdog::{self, Finished, WorkerStatus};
use super::{CpuExecutor, LaunchConfig, stack};
use ferrocuda_types::Dim3;

/// One launch, shared by its workers.
pub(crate) struct Launch<'a> {
    kernel: &'a str,
    config: LaunchConfig,
    body: &'a (dyn Fn() + Sync),
    watchdog: Option<Duration>,
    /// The next cluster (or block) to run, numbered x fastest.
    next_cluster: AtomicU64,
    abort: AtomicBool,
    /// Set by the watchdog: workers stop at the next switch.
    stop: AtomicBool,
    /// The error of the lowest-numbered failing cluster (they are taken in order, so every
    /// lower one has run to the end when a worker stops).
    first_error: Mutex<Option<(u64, CpuError)>>,
    /// Threads stopped by the watchdog, from every worker.
    stopped: Mutex<Vec<StuckThread>>,
    /// Who took which output element, for the race detector.
    outputs: OutputShadow,
}

impl<'a> Launch<'a> {
    pub(crate) fn new(kernel: &'a str, config: LaunchConfig, body: &'a (dyn Fn() + Sync), watchdog: Option<Duration>) -> Self {
        Launch {
            kernel,
            config,
            body,
            watchdog,
            next_cluster: AtomicU64::new(0),
            abort: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            first_error: Mutex::new(None),
            stopped: Mutex::new(Vec::new()),
            outputs: OutputShadow::new(),
        }
    }

    /// Runs the launch on `executor`'s workers: threads of the launch's own, never the calling
    /// thread, each joined (thread-locals and all) before this returns.
    ///
    /// Why never the calling thread (audit 2026-11-28, G13-1): a kernel body is host code on
    /// the CPU executor, and what it leaves in a `std` thread-local outlives the launch on the
    /// OS thread that ran it. On the calling thread (one worker, a grid of one block, a
    /// cooperative launch) that was the caller's own: an output handle kept there was used
    /// after the launch, after its buffer was freed, and a witness kept there reached the next
    /// launch, whose owner check (the thread's coordinates, which every launch repeats) let it
    /// through. A worker's thread-locals end with the worker, inside the launch.
    pub(crate) fn run(self, executor: &CpuExecutor) -> Result<(), CpuError> {
        let config = &self.config;
        let clusters = config.grid.volume() / config.cluster.map_or(1, |c| c.volume());
        // A cooperative launch runs all its blocks together on one worker (F2).
        let workers = if config.cooperative { 1 } else { (executor.workers as u64).min(clusters) as usize };
        let statuses: Vec<WorkerStatus> = (0..workers.max(1)).map(|_| WorkerStatus::default()).collect();
        let finished = Finished::default();
        let start = Instant::now();
        let mut fired = false;
        std::thread::scope(|scope| {
            let watcher = self.watchdog.map(|limit| {
                let (launch, statuses, finished) = (&self, &statuses, &finished);
                scope.spawn(move || watchdog::watch(launch.kernel, start, limit, finished, &launch.stop, statuses))
            });
            // Tells the watcher, also when a worker panics (the scope then joins the watcher).
            let finishing = SetOnDrop(&finished);
            let handles: Vec<_> = if config.cooperative {
                vec![scope.spawn(|| self.work_co_resident(executor, &statuses[0]))]
            } else {
                statuses.iter().map(|status| scope.spawn(|| self.work(executor, status))).collect()
            };
            // Every worker is joined (its thread-locals destroyed) before a panic of one goes
            // on: nothing a kernel body left on a worker outlives the launch.
            let mut first_panic = None;
            for handle in handles {
                if let Err(panic) = handle.join() {
                    first_panic.get_or_insert(panic);
                }
            }
            if let Some(panic) = first_panic {
                std::panic::resume_unwind(panic);
            }
            drop(finishing);
            fired = watcher.is_some_and(|w| w.join().unwrap_or(false));
        });
        if let Some((_, error)) = self.first_error.into_inner().unwrap_or_else(|e| e.into_inner()) {
            return Err(error);
        }
        let stuck = self.stopped.into_inner().unwrap_or_else(|e| e.into_inner());
        if fired || !stuck.is_empty() {
            return Err(CpuError::Watchdog(Watchdog {
                kernel: self.kernel.to_owned(),
                limit: self.watchdog.unwrap_or_default(),
                elapsed: start.elapsed(),
                stuck,
            }));
        }
        Ok(())
    }

    /// One worker: takes clusters in order until none are left, one failed, or the watchdog
    /// stopped the launch.
    fn work(&self, executor: &CpuExecutor, status: &WorkerStatus) {
        stack::ensure_signal_stack();
        let mut stacks = executor.take_pool();
        let config = &self.config;
        let (grid, block_dim) = (config.grid, config.block);
        let cluster = config.cluster.unwrap_or(Dim3::ONE);
        let clusters = Dim3 { x: grid.x / cluster.x, y: grid.y / cluster.y, z: grid.z / cluster.z };
        let cluster_blocks = (cluster.x * cluster.y * cluster.z) as usize;
        let count = clusters.x as u64 * clusters.y as u64 * clusters.z as u64;
        let shared = SharedMemory::group(cluster_blocks, config.shared_bytes, executor.race_detection);
        let outputs = executor.race_detection.then_some(&self.outputs);
        let link = LaunchLink { kernel: self.kernel, stop: &self.stop, status, stack_size: executor.stack_size, outputs, co_resident: false };
        while !self.abort.load(Ordering::Relaxed) && !self.stop.load(Ordering::Relaxed) {
            let linear = self.next_cluster.fetch_add(1, Ordering::Relaxed);
            if linear >= count {
                break;
            }
            let origin = Dim3 {
                x: (linear % clusters.x as u64) as u32 * cluster.x,
                y: (linear / clusters.x as u64 % clusters.y as u64) as u32 * cluster.y,
                z: (linear / (clusters.x as u64 * clusters.y as u64)) as u32 * cluster.z,
            };
            // Cluster ranks go x fastest, as `%cluster_ctarank` does.
            let blocks: Vec<BlockContext<'_>> = (0..cluster_blocks as u32)
                .map(|rank| {
                    let block_idx =
                        Dim3 { x: origin.x + rank % cluster.x, y: origin.y + rank / cluster.x % cluster.y, z: origin.z + rank / (cluster.x * cluster.y) };
                    shared[rank as usize].begin_block();
                    BlockContext::new(link, block_idx, block_dim, grid, &shared, rank, cluster)
                })
                .collect();
            let outcome = scheduler::run_cluster(&blocks, cluster_blocks, self.body, &mut stacks);
            self.note(linear, outcome);
        }
        executor.give_pool(stacks);
    }

    /// A cooperative launch (F2): every block resident at once, as the GPU promises for one,
    /// so a grid-wide wait (a grid barrier, a flag another block sets) completes. All blocks
    /// (in their clusters) run as one set of coroutines on one worker thread.
    fn work_co_resident(&self, executor: &CpuExecutor, status: &WorkerStatus) {
        stack::ensure_signal_stack();
        let mut stacks = executor.take_pool();
        let config = &self.config;
        let (grid, block_dim) = (config.grid, config.block);
        let cluster = config.cluster.unwrap_or(Dim3::ONE);
        let cluster_blocks = (cluster.x * cluster.y * cluster.z) as usize;
        let clusters = Dim3 { x: grid.x / cluster.x, y: grid.y / cluster.y, z: grid.z / cluster.z };
        let count = clusters.x as u64 * clusters.y as u64 * clusters.z as u64;
        let groups: Vec<Vec<SharedMemory>> = (0..count).map(|_| SharedMemory::group(cluster_blocks, config.shared_bytes, executor.race_detection)).collect();
        let outputs = executor.race_detection.then_some(&self.outputs);
        let link = LaunchLink { kernel: self.kernel, stop: &self.stop, status, stack_size: executor.stack_size, outputs, co_resident: true };
        let mut blocks = Vec::with_capacity(grid.volume() as usize);
        for (linear, shared) in groups.iter().enumerate() {
            let linear = linear as u64;
            let origin = Dim3 {
                x: (linear % clusters.x as u64) as u32 * cluster.x,
                y: (linear / clusters.x as u64 % clusters.y as u64) as u32 * cluster.y,
                z: (linear / (clusters.x as u64 * clusters.y as u64)) as u32 * cluster.z,
            };
            for rank in 0..cluster_blocks as u32 {
                let block_idx =
                    Dim3 { x: origin.x + rank % cluster.x, y: origin.y + rank / cluster.x % cluster.y, z: origin.z + rank / (cluster.x * cluster.y) };
                shared[rank as usize].begin_block();
                blocks.push(BlockContext::new(link, block_idx, block_dim, grid, shared, rank, cluster));
            }
        }
        let outcome = scheduler::run_cluster(&blocks, cluster_blocks, self.body, &mut stacks);
        self.note(0, outcome);
        drop(blocks);
        executor.give_pool(stacks);
    }

    /// Keeps the outcome of the run of cluster `linear`: its error if it is the lowest one
    /// so far, or the threads the watchdog stopped.
    fn note(&self, linear: u64, outcome: Result<(), Stopped>) {
        match outcome {
            Ok(()) => {}
            Err(Stopped::Failed(error)) => {
                let mut first = self.first_error.lock().unwrap_or_else(|e| e.into_inner());
                if first.as_ref().is_none_or(|(c, _)| linear < *c) {
                    *first = Some((linear, error));
                }
                self.abort.store(true, Ordering::Relaxed);
            }
            Err(Stopped::Watchdog(stuck)) => {
                let mut stopped = self.stopped.lock().unwrap_or_else(|e| e.into_inner());
                stopped.extend(stuck);
                stopped.sort_by_key(|t| (t.block.z, t.block.y, t.block.x, t.thread.z, t.thread.y, t.thread.x));
            }
        }
    }
}

/// Sets a [`Finished`] when dropped.
struct SetOnDrop<'a>(&'a Finished);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.set();
    }
}
