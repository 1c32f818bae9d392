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
//!   worker per core); [`CpuExecutor::deterministic`] runs them in order on the calling thread.
//!   The blocks of a thread-block cluster run together on one worker, so `cluster::sync` and
//!   distributed shared memory (`cluster::peer_get`) work as on sm_90.
//! - Inside a block, each GPU thread is a stackful coroutine; threads take turns in rank order
//!   and switch only at block barriers and warp operations, so a block of 1024 threads needs one
//!   OS thread, not 1024. Warps are 32 consecutive ranks: a warp operation completes when all
//!   live lanes of the warp have arrived (shuffles follow PTX's clamping rules), and
//!   `active_mask` names the lanes that reached it together (those a GPU would have converged).
//! - Each block gets its shared memory filled with [`SHARED_POISON_BYTE`], so reading shared
//!   memory before writing it shows (NaN, `u32::MAX`), and nothing leaks from one block to the
//!   next.
//! - Errors instead of hangs or silent corruption: a panic is reported with its kernel, file,
//!   line, column, block and thread ([`KernelPanic`]); a barrier that exited threads never
//!   reach ([`BarrierDivergence`]) or a warp operation that lanes never join ([`WarpDeadlock`])
//!   ends the launch; two threads touching the same shared word between two barriers, one of
//!   them writing, is a [`SharedMemoryRace`] (the last writer and reader of each word are kept,
//!   so most missing-barrier bugs are caught, not every one).
//! - Atomics are the host's atomics; `println!` prints through `std::print!`.
//!
//! What differs from a GPU: floating-point results may differ in the last bits (no fused
//! multiply-add unless the kernel asks for `mul_add`, libm's functions rather than CUDA's), and
//! the order in which threads run is one fixed interleaving among those a GPU allows.
//! Kernel parameters `&mut [T]` are, as on the GPU, given to every thread at once: threads must
//! write disjoint elements (or use atomics), as any correct CUDA kernel does.

pub(crate) mod block;
mod error;
mod panic_capture;
mod shared_memory;

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

pub use error::{BarrierDivergence, CpuError, RaceKind, SharedMemoryRace, WarpDeadlock};
/// The same report type as a GPU panic's (`ferrocuda_host::KernelPanic`).
pub use ferrocuda_host::KernelPanic;
pub use ferrocuda_host::LaunchConfig;
pub use shared_memory::{SHARED_POISON_BYTE, STATIC_SHARED_LIMIT};

use block::{BlockContext, StackPool};
use shared_memory::SharedMemory;

use crate::thread::Dim3;

/// The limits the CPU executor checks a launch against: those of a recent NVIDIA GPU (sm_90),
/// so that a configuration accepted here is accepted there.
pub const CPU_LIMITS: ferrocuda_host::DeviceLimits = ferrocuda_host::DeviceLimits {
    max_threads_per_block: 1024,
    max_block: [1024, 1024, 64],
    max_grid: [i32::MAX as u32, 65535, 65535],
    max_shared_per_block: 227 * 1024,
    cluster_launch: true,
    cooperative_launch: true,
};

/// Default size of each GPU thread's coroutine stack (mapped lazily: only touched pages cost).
pub const DEFAULT_STACK_SIZE: usize = 256 * 1024;

/// Runs kernels on the CPU. Cheap to create; reuse one to keep its coroutine stacks.
pub struct CpuExecutor {
    workers: usize,
    stack_size: usize,
    race_detection: bool,
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
        f.debug_struct("CpuExecutor").field("workers", &self.workers).field("stack_size", &self.stack_size).field("race_detection", &self.race_detection).finish()
    }
}

impl CpuExecutor {
    /// An executor running blocks in parallel on one worker per available core, with
    /// shared-memory race detection.
    pub fn new() -> Self {
        let workers = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        CpuExecutor { workers, stack_size: DEFAULT_STACK_SIZE, race_detection: true, pools: Mutex::new(Vec::new()) }
    }

    /// The debugging mode: blocks run one after the other, in order (x fastest), on the calling
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

    /// The same executor with `bytes` of stack per GPU thread (default [`DEFAULT_STACK_SIZE`]);
    /// raise it for kernels with large local arrays or deep recursion.
    #[must_use]
    pub fn with_stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = bytes;
        self.pools.get_mut().unwrap_or_else(|e| e.into_inner()).clear();
        self
    }

    /// The same executor with shared-memory race detection on or off (on by default; off saves
    /// a shadow-word update per shared access).
    #[must_use]
    pub fn with_race_detection(mut self, on: bool) -> Self {
        self.race_detection = on;
        self
    }

    /// Worker threads that run blocks.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// Runs `kernel_body` as every thread of a grid: what the generated `name::launch_cpu`
    /// calls. `kernel` names the kernel in errors. Returns when every block has finished, or
    /// with the error of the lowest-numbered failing block.
    pub fn run(&self, kernel: &str, config: LaunchConfig, kernel_body: &(dyn Fn() + Sync)) -> Result<(), CpuError> {
        config.validate(&CPU_LIMITS).map_err(|problem| CpuError::InvalidConfig { kernel: kernel.to_owned(), problem })?;
        panic_capture::install();
        let clusters = config.grid.volume() / config.cluster.map_or(1, |c| c.volume());
        let launch = Launch { kernel, config, body: kernel_body, next_cluster: AtomicU64::new(0), abort: AtomicBool::new(false), first_error: Mutex::new(None) };
        let workers = (self.workers as u64).min(clusters) as usize;
        if workers <= 1 {
            self.work(&launch);
        } else {
            std::thread::scope(|scope| {
                for _ in 0..workers {
                    scope.spawn(|| self.work(&launch));
                }
            });
        }
        match launch.first_error.into_inner().unwrap_or_else(|e| e.into_inner()) {
            Some((_, error)) => Err(error),
            None => Ok(()),
        }
    }

    /// One worker: takes clusters (single blocks when the launch has none) in order until
    /// none are left or one failed.
    fn work(&self, launch: &Launch<'_>) {
        let mut stacks = self.pools.lock().unwrap_or_else(|e| e.into_inner()).pop().unwrap_or_else(|| StackPool::new(self.stack_size));
        let config = &launch.config;
        let (grid, block_dim) = (device_dim(config.grid), device_dim(config.block));
        let cluster = device_dim(config.cluster.unwrap_or(ferrocuda_host::Dim3 { x: 1, y: 1, z: 1 }));
        let clusters = Dim3 { x: grid.x / cluster.x, y: grid.y / cluster.y, z: grid.z / cluster.z };
        let cluster_blocks = (cluster.x * cluster.y * cluster.z) as usize;
        let count = clusters.x as u64 * clusters.y as u64 * clusters.z as u64;
        let shared = SharedMemory::group(cluster_blocks, config.shared_bytes, self.race_detection);
        while !launch.abort.load(Ordering::Relaxed) {
            let linear = launch.next_cluster.fetch_add(1, Ordering::Relaxed);
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
                    let block_idx = Dim3 {
                        x: origin.x + rank % cluster.x,
                        y: origin.y + rank / cluster.x % cluster.y,
                        z: origin.z + rank / (cluster.x * cluster.y),
                    };
                    shared[rank as usize].begin_block();
                    BlockContext::new(launch.kernel, block_idx, block_dim, grid, &shared, rank)
                })
                .collect();
            if let Err(error) = block::run_cluster(&blocks, launch.body, &mut stacks) {
                let mut first = launch.first_error.lock().unwrap_or_else(|e| e.into_inner());
                if first.as_ref().is_none_or(|(c, _)| linear < *c) {
                    *first = Some((linear, error));
                }
                launch.abort.store(true, Ordering::Relaxed);
            }
        }
        self.pools.lock().unwrap_or_else(|e| e.into_inner()).push(stacks);
    }
}

/// One launch, shared by its workers.
struct Launch<'a> {
    kernel: &'a str,
    config: LaunchConfig,
    body: &'a (dyn Fn() + Sync),
    /// The next cluster (or block) to run, numbered x fastest.
    next_cluster: AtomicU64,
    abort: AtomicBool,
    /// The error of the lowest-numbered failing cluster (they are taken in order, so every
    /// lower one has run to the end when a worker stops).
    first_error: Mutex<Option<(u64, CpuError)>>,
}

fn device_dim(d: ferrocuda_host::Dim3) -> Dim3 {
    Dim3 { x: d.x, y: d.y, z: d.z }
}

/// Used by the code `#[kernel]` generates; not part of the public API.
#[doc(hidden)]
pub mod __private {
    /// A host slice handed to every GPU thread of a CPU launch.
    pub struct SliceParts<T> {
        pointer: *const T,
        len: usize,
    }

    // SAFETY: only shared references are made from it, and `T: Sync`.
    unsafe impl<T: Sync> Sync for SliceParts<T> {}
    // SAFETY: as above.
    unsafe impl<T: Sync> Send for SliceParts<T> {}

    impl<T> SliceParts<T> {
        /// Keeps `slice`'s pointer and length.
        pub fn new(slice: &[T]) -> Self {
            SliceParts { pointer: slice.as_ptr(), len: slice.len() }
        }

        /// The slice again.
        ///
        /// # Safety
        /// The slice this was made from is still borrowed (the launch has not returned).
        pub unsafe fn get<'a>(&self) -> &'a [T] {
            // SAFETY: as the caller guarantees.
            unsafe { core::slice::from_raw_parts(self.pointer, self.len) }
        }
    }

    /// A mutable host slice handed to every GPU thread of a CPU launch, as a device pointer
    /// is on a GPU: the kernel's threads write disjoint elements (or use atomics).
    pub struct SlicePartsMut<T> {
        pointer: *mut T,
        len: usize,
    }

    // SAFETY: the threads of a kernel write disjoint elements or use atomics (the kernel's
    // contract on a GPU as well); `T: Send + Sync` so elements may cross threads.
    unsafe impl<T: Send + Sync> Sync for SlicePartsMut<T> {}
    // SAFETY: as above.
    unsafe impl<T: Send + Sync> Send for SlicePartsMut<T> {}

    impl<T> SlicePartsMut<T> {
        /// Keeps `slice`'s pointer and length; the slice stays borrowed by the caller's launch.
        pub fn new(slice: &mut [T]) -> Self {
            SlicePartsMut { pointer: slice.as_mut_ptr(), len: slice.len() }
        }

        /// The slice again, for one GPU thread.
        ///
        /// # Safety
        /// The slice this was made from is still exclusively borrowed by the launch, and the
        /// threads given it do not write the same element without atomics.
        #[allow(clippy::mut_from_ref)]
        pub unsafe fn get<'a>(&self) -> &'a mut [T] {
            // SAFETY: as the caller guarantees.
            unsafe { core::slice::from_raw_parts_mut(self.pointer, self.len) }
        }
    }

    /// A raw pointer argument of an `unsafe` kernel, handed to every thread of a CPU launch.
    pub struct RawPointer<P>(P);

    // SAFETY: the launcher is an `unsafe fn` whose caller vouches for the pointer's use.
    unsafe impl<P> Sync for RawPointer<P> {}
    // SAFETY: as above.
    unsafe impl<P> Send for RawPointer<P> {}

    impl<P: Copy> RawPointer<P> {
        /// Wraps `pointer`.
        pub fn new(pointer: P) -> Self {
            RawPointer(pointer)
        }

        /// The pointer.
        pub fn get(&self) -> P {
            self.0
        }
    }
}
