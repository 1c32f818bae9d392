//! The CPU executor: the same `#[kernel]` functions, run on the CPU with CUDA's semantics, so
//! kernels can be tested on machines without a GPU.
//!
//! ```ignore
//! use ferrocuda_device::cpu::CpuExecutor;
//! let executor = CpuExecutor::new();                 // blocks in parallel on every core
//! gpu_kernels::saxpy::launch_cpu(&executor, (grid, 256), 2.0, &x, &mut y)?;
//! ```
//!
//! Every `#[kernel]` gets `name::launch_cpu(&executor, config, args..)` beside its GPU
//! launchers: the same configuration type, with host slices (`&[T]`, `&mut [T]`) where the GPU
//! launcher takes device buffers.
//!
//! How it runs:
//! - Blocks run in parallel, one at a time per worker OS thread ([`CpuExecutor::new`]: one
//!   worker per core); [`CpuExecutor::deterministic`] runs them in order on one worker. Workers
//!   are threads of the launch's own, never the calling thread, and end before the launch
//!   returns, so nothing a kernel body leaves in a `std` thread-local reaches the caller or a
//!   later launch (audit 2026-11-28, G13-1).
//!   The blocks of a thread-block cluster run together on one worker, so `cluster::sync` and
//!   distributed shared memory (`cluster::peer_get`) work as on sm_90. A cooperative launch
//!   (`LaunchConfig::cooperative`) runs every block together on one worker, as a GPU
//!   keeps every block of one resident, so grid-wide waits complete (F2; at most
//!   [`COOPERATIVE_BLOCK_LIMIT`] blocks and [`COOPERATIVE_THREAD_LIMIT`] threads).
//! - Threads that spin on atomic values no running thread changes end the launch with a
//!   [`CrossBlockWait`]: in an ordinary launch the block waits for another block, which CUDA
//!   does not promise will run beside it (docs/kernel-model.md, "Waits between blocks").
//! - Launches run one after another, each to its end: a programmatic dependent launch
//!   (`LaunchConfig::with_programmatic_dependent_launch`) runs like any other, and
//!   `grid_dependency::launch_dependents`/`wait_for_prerequisites` do nothing.
//! - Inside a block, each GPU thread is a stackful coroutine; threads take turns in rank order
//!   and switch only at block barriers, warp operations, named-barrier and mbarrier waits, and
//!   after a run of 64 atomic accesses with no other switch (so that
//!   a spin-wait on a flag that another warp sets completes, as on a GPU: audit P8), so a block
//!   of 1024 threads needs one OS thread, not 1024. Warps are 32 consecutive ranks: a warp operation completes when all
//!   live lanes of the warp have arrived (shuffles follow PTX's clamping rules), and
//!   `active_mask` names the lanes that reached it together (those a GPU would have converged).
//! - Each block gets its shared memory filled with [`SHARED_POISON_BYTE`], so reading shared
//!   memory before writing it shows (NaN, `u32::MAX`), and nothing leaks from one block to the
//!   next; with race detection, such a read is an [`UninitialisedSharedRead`] error (a GPU
//!   returns what an earlier kernel left there: audit 2026-11-27b, Q6).
//! - Before it runs a kernel, `launch_cpu` refuses one whose host build (run here) and device
//!   build differ about integer overflow ([`CpuError::OverflowChecksDiffer`], Q11) or whose
//!   `ptxas` stack no GPU thread gets (Q7).
//! - Errors instead of hangs or silent corruption (the executor is a sanitizer; what each
//!   check guarantees and its limits: docs/kernel-model.md, "The CPU executor as a
//!   sanitizer"): a panic is reported with its kernel, file, line, column, block and thread
//!   ([`KernelPanic`]); threads at a block barrier while others wait at the cluster barrier
//!   ([`BarrierDivergence`]; exited threads release a block barrier and the cluster
//!   barrier, as PTX's `exit` defines), threads at different kinds of barrier ([`MixedBarriers`]), or a warp operation that lanes
//!   of its mask never join, because they wait elsewhere or in another collective or with
//!   another mask ([`WarpDeadlock`]), ends the launch.
//! - Data races ([`with_race_detection`](CpuExecutor::with_race_detection), on by default):
//!   two threads taking one element of an output (a `DisjointSlice`, through its safe or its
//!   `unsafe` element methods), one of them to write, at any time in the launch, barriers or
//!   not, is a [`GlobalMemoryRace`]; two accesses of one shared-memory word, one a write, that
//!   no block barrier, common `sync_warp` group, completed named-barrier phase (arrival before
//!   the waiters' later accesses) or (for a peer block's `cluster::peer_get`) cluster barrier
//!   orders, is a [`SharedMemoryRace`] (FastTrack: the last write and every
//!   unordered read are kept).
//! - A shuffle that reads a lane which has exited is an [`ExitedLaneShuffle`] error (CUDA
//!   leaves the value undefined); exited lanes named in a mask are fine, as in CUDA. So is a
//!   shuffle in a partial last warp (a block size that is not a multiple of 32) reading a lane
//!   past the block's end, which does not exist: a [`MissingLaneShuffle`] (D5). Reading
//!   the shared memory of a cluster block that has exited panics, and a block exiting after a
//!   peer read it with no cluster barrier between is an [`ExitedPeerAccess`].
//! - When a thread fails, the other threads of its block (and cluster) are ended where they
//!   wait: unwound (their destructors run, and a `std::thread::scope` they wait in joins its
//!   threads) before the launch returns. They were abandoned unwound (audit N13), which let
//!   such a scope's threads outlive the launch and write memory its caller had freed (audit
//!   2026-11-28b G14-4). A destructor that panics during that unwinding aborts the process;
//!   the launch's error is printed first.
//! - A `shared_array!` site is one array per expansion of the macro; reaching one with another
//!   size or alignment (a generic helper's array) panics.
//! - Each GPU thread has a lazily mapped stack of [`DEFAULT_STACK_SIZE`] (16 MiB) with a guard
//!   region below it; an overflow prints the kernel, block and thread and how to raise the
//!   stack ([`CpuExecutor::with_stack_size`]), then aborts the process (a signal handler
//!   cannot return an error).
//! - [`CpuExecutor::with_watchdog`] stops a launch that runs too long and names the threads
//!   that never finished ([`Watchdog`]); a launch from inside a kernel is refused
//!   ([`CpuError::NestedLaunch`]).
//! - Atomics are the host's atomics; `println!` prints through `std::print!`.
//!
//! Layout: the intrinsics reach the executor only through [`hooks`] (a trait the running
//! block implements, registered per OS thread); `launch.rs` runs workers over the grid,
//! `scheduler.rs` runs one cluster's threads as coroutines, `block.rs` holds a block's
//! state, `warp_ops.rs` and `barriers.rs` complete collectives, `shared_memory.rs` is the
//! arena and its race detector, `global_memory.rs` the race detector of output elements, `stack.rs` the stacks and the overflow handler, `watchdog.rs` the
//! watchdog, `error.rs` the reports.
//!
//! What differs from a GPU: floating-point results may differ in the last bits (no fused
//! multiply-add unless the kernel asks for `mul_add`, libm's functions rather than CUDA's), and
//! the order in which threads run is one fixed interleaving among those a GPU allows.
//! Output parameters are, as on the GPU, given to every thread at once, as `DisjointSlice`s
//! (each thread writes the elements its `ThreadIndex` names) or `AtomicSlice`s (atomic
//! accesses): see `ferrocuda_device::global`.

mod args;
mod barriers;
mod block;
mod error;
mod global_memory;
#[doc(hidden)]
pub mod hooks;
mod launch;
pub(crate) mod ldmatrix;
pub(crate) mod mma;
mod module_checks;
mod panic_capture;
mod raw_views;
mod scheduler;
mod shared_memory;
mod spin;
mod stack;
mod warp_ops;
mod watchdog;

use std::sync::Mutex;
use std::time::Duration;

pub use error::{
    BarrierDivergence, CpuError, CrossBlockWait, ExitedLaneShuffle, ExitedPeerAccess, GlobalMemoryRace, MissingLaneShuffle, MixedBarriers, RaceKind,
    SharedMemoryRace, StuckThread, ThreadActivity, UninitialisedSharedRead, WarpDeadlock, Watchdog,
};
/// The same report type as a GPU panic's (`ferrocuda_types::KernelPanic`).
pub use ferrocuda_types::KernelPanic;
pub use ferrocuda_types::LaunchConfig;
pub use raw_views::MIRROR_BUDGET;
pub use shared_memory::{SHARED_POISON_BYTE, STATIC_SHARED_LIMIT};
pub use stack::DEFAULT_STACK_SIZE;

/// How many raw views of outputs (`as_mut_slice`, `as_mut_ptr`) this process's launches handed
/// out **unchecked** by the race detector, because the launch had already copied
/// [`MIRROR_BUDGET`] bytes into the private mirrors through which the executor sees the writes
/// of raw views (0 means every raw view was checked). A test can assert it stays 0.
pub fn unchecked_raw_views() -> u64 {
    raw_views::UNCHECKED_VIEWS.load(std::sync::atomic::Ordering::Relaxed)
}

use stack::StackPool;

/// `config` for the kernel `symbol` compiled with the cluster shape `compiled`
/// (`LaunchConfig::for_compiled_cluster`), or the error that names the mismatch: the CPU
/// executor forms the same clusters as the GPU. The `#[kernel]` CPU launchers call it first.
#[doc(hidden)]
pub fn compiled_cluster(symbol: &str, config: LaunchConfig, compiled: Option<ferrocuda_types::Dim3>) -> Result<LaunchConfig, CpuError> {
    config.for_compiled_cluster(compiled).map_err(|problem| CpuError::InvalidConfig { kernel: symbol.to_string(), problem })
}

/// The limits the CPU executor checks a launch against: those of a recent NVIDIA GPU (sm_90),
/// so that a configuration accepted here is accepted there.
pub const CPU_LIMITS: ferrocuda_types::DeviceLimits = ferrocuda_types::DeviceLimits {
    max_threads_per_block: 1024,
    max_block: [1024, 1024, 64],
    max_grid: [i32::MAX as u32, 65535, 65535],
    max_shared_per_block: 227 * 1024,
    cluster_launch: true,
    cooperative_launch: true,
};

/// The most blocks a cooperative launch may have on the CPU executor, which runs them all at
/// once (F2): each has its own shared memory (and race-detection shadow) for the whole launch.
/// A GPU's limit is its co-resident blocks (the driver refuses more); a larger grid is refused
/// here with [`LaunchProblem::CooperativeGridTooLarge`](ferrocuda_types::LaunchProblem).
pub const COOPERATIVE_BLOCK_LIMIT: u64 = 64;

/// The most GPU threads a cooperative launch may have on the CPU executor (each is a coroutine
/// with its own stack mapping for the whole launch).
pub const COOPERATIVE_THREAD_LIMIT: u64 = 16 * 1024;

/// Runs kernels on the CPU. Cheap to create; reuse one to keep its coroutine stacks.
pub struct CpuExecutor {
    workers: usize,
    stack_size: usize,
    race_detection: bool,
    watchdog: Option<Duration>,
    /// Stack pools of finished workers, reused by the next launch.
    pools: Mutex<Vec<StackPool>>,
}

impl Default for CpuExecutor {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for CpuExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuExecutor")
            .field("workers", &self.workers)
            .field("stack_size", &self.stack_size)
            .field("race_detection", &self.race_detection)
            .field("watchdog", &self.watchdog)
            .finish()
    }
}

impl CpuExecutor {
    /// An executor running blocks in parallel on one worker per available core, with race
    /// detection.
    pub fn new() -> Self {
        let workers = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        CpuExecutor { workers, stack_size: DEFAULT_STACK_SIZE, race_detection: true, watchdog: None, pools: Mutex::new(Vec::new()) }
    }

    /// The debugging mode: blocks run one after the other, in order (x fastest), on one worker
    /// thread, so every run interleaves the same way and the first failing block is reported.
    pub fn deterministic() -> Self {
        Self::new().with_workers(1)
    }

    /// The same executor with `workers` worker threads (at least 1; 1 is [`deterministic`](Self::deterministic)).
    #[must_use]
    pub fn with_workers(mut self, workers: usize) -> Self {
        self.workers = workers.max(1);
        self
    }

    /// The same executor with `bytes` of stack per GPU thread (default [`DEFAULT_STACK_SIZE`],
    /// rounded up to whole pages); raise it for kernels with large local arrays or deep
    /// recursion. Stacks are mapped lazily, so only the pages a thread touches cost memory.
    ///
    /// A thread that overflows its stack hits a guard region below it: the executor prints
    /// the kernel, block and thread and this method's name, then **aborts the process** (a
    /// stack overflow is caught by a signal handler, which cannot unwind the kernel to return
    /// an error). Platforms other than Unix get no such message.
    #[must_use]
    pub fn with_stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = bytes;
        self.pools.get_mut().unwrap_or_else(|e| e.into_inner()).clear();
        self
    }

    /// The same executor with race detection on or off (on by default): of shared memory
    /// ([`SharedMemoryRace`]) and of output elements ([`GlobalMemoryRace`]), and the check of
    /// shared memory read before the block wrote it ([`UninitialisedSharedRead`]), which uses
    /// the same shadow. Off saves a shadow update per shared access and per output element
    /// handed out.
    #[must_use]
    pub fn with_race_detection(mut self, on: bool) -> Self {
        self.race_detection = on;
        self
    }

    /// The same executor with a watchdog: a launch that runs longer than `limit` is stopped
    /// and reported as [`CpuError::Watchdog`], naming the threads that had not finished and
    /// where each was (none by default).
    ///
    /// GPU threads cannot be pre-empted: they are stopped at their next barrier or warp
    /// operation (a thread polling an atomic yields now and then, so a spin-wait on an
    /// `AtomicSlice` flag is stopped too). A thread that reaches none (a loop on plain memory
    /// or on host atomics, a long computation) cannot be stopped, and the launch cannot return while it runs (it borrows the launch's
    /// arguments); if a worker is still inside the same thread a grace period after the limit
    /// (the limit again, between 50 ms and 1 s), the executor prints the report, naming that
    /// thread, and **aborts the process**, so that a test or CI job fails with the report
    /// instead of hanging.
    #[must_use]
    pub fn with_watchdog(mut self, limit: Duration) -> Self {
        self.watchdog = Some(limit);
        self
    }

    /// Worker threads that run blocks.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// Bytes of stack per GPU thread.
    pub fn stack_size(&self) -> usize {
        self.stack_size
    }

    /// Runs `kernel_body` as every thread of a grid: what the generated `name::launch_cpu`
    /// calls. `kernel` names the kernel in errors. Returns when every block has finished, or
    /// with the error of the lowest-numbered failing block.
    ///
    /// Called from inside a kernel (a launch from device code), it returns
    /// [`CpuError::NestedLaunch`] without running anything.
    pub fn run(&self, kernel: &str, config: LaunchConfig, kernel_body: &(dyn Fn() + Sync)) -> Result<(), CpuError> {
        if hooks::inside_kernel() {
            return Err(CpuError::NestedLaunch { kernel: kernel.to_owned() });
        }
        config.validate(&CPU_LIMITS).map_err(|problem| CpuError::InvalidConfig { kernel: kernel.to_owned(), problem })?;
        if config.cooperative {
            let max_blocks = (COOPERATIVE_THREAD_LIMIT / config.block.volume()).min(COOPERATIVE_BLOCK_LIMIT);
            if config.grid.volume() > max_blocks {
                // The executor holds them like one SM of `max_blocks` blocks.
                let problem = ferrocuda_types::LaunchProblem::CooperativeGridTooLarge {
                    blocks: config.grid.volume(),
                    max: max_blocks,
                    per_sm: max_blocks as u32,
                    sms: 1,
                };
                return Err(CpuError::InvalidConfig { kernel: kernel.to_owned(), problem });
            }
        }
        panic_capture::install();
        stack::install_overflow_handler();
        launch::Launch::new(kernel, config, kernel_body, self.watchdog).run(self)
    }

    /// A stack pool for a worker: one a finished worker left, or a new one.
    fn take_pool(&self) -> StackPool {
        self.pools.lock().unwrap_or_else(|e| e.into_inner()).pop().unwrap_or_else(|| StackPool::new(self.stack_size))
    }

    /// Keeps a worker's stacks for the next launch.
    fn give_pool(&self, pool: StackPool) {
        self.pools.lock().unwrap_or_else(|e| e.into_inner()).push(pool);
    }
}

/// Used by the code `#[kernel]` generates; not part of the public API.
#[doc(hidden)]
pub mod __private {
    pub use super::args::{RawPointer, SliceParts, SlicePartsMut};
    pub use super::module_checks::check_module;
}
