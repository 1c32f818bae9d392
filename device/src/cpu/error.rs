//! What can go wrong when a kernel runs on the CPU executor: the mistakes that fail or hang a
//! GPU launch (a panic, a barrier some threads never reach) and those that silently corrupt
//! one (a data race on shared memory), each with the threads involved.

use std::fmt;
use std::time::Duration;

use ferrocuda_types::{Dim3, KernelPanic, LaunchProblem};

/// An error of a CPU-executor launch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CpuError {
    /// The launch configuration breaks a limit that a GPU would refuse too.
    #[error("cannot launch `{kernel}` on the CPU executor: {problem}")]
    InvalidConfig {
        /// The kernel.
        kernel: String,
        /// The limit broken.
        problem: LaunchProblem,
    },
    /// A thread of the kernel panicked.
    #[error(transparent)]
    KernelPanic(#[from] KernelPanic),
    /// Some threads of a block wait at a barrier that the others, having exited, never reach.
    #[error(transparent)]
    BarrierDivergence(#[from] BarrierDivergence),
    /// Lanes of a warp wait in a warp operation (shuffle, vote, `sync_warp`) that other live
    /// lanes never join.
    #[error(transparent)]
    WarpDeadlock(#[from] WarpDeadlock),
    /// A block of a cluster exited while a peer block's thread had accessed its shared
    /// memory with no cluster barrier between.
    #[error(transparent)]
    ExitedPeerAccess(#[from] ExitedPeerAccess),
    /// Threads of a block wait at block barriers of different kinds.
    #[error(transparent)]
    MixedBarriers(#[from] MixedBarriers),
    /// Two threads accessed the same shared-memory word, at least one writing, with no
    /// barrier between.
    #[error(transparent)]
    SharedMemoryRace(#[from] SharedMemoryRace),
    /// A thread read shared memory that no thread of its block had written in this launch
    /// (audit 2026-11-27b, Q6: a GPU returns what an earlier kernel left there).
    #[error(transparent)]
    UninitialisedSharedRead(#[from] UninitialisedSharedRead),
    /// Two threads of a launch took the same element of an output, one of them to write it.
    #[error(transparent)]
    GlobalMemoryRace(#[from] GlobalMemoryRace),
    /// Lanes of a warp shuffled from lanes that had exited (CUDA leaves the result undefined).
    #[error(transparent)]
    ExitedLaneShuffle(#[from] ExitedLaneShuffle),
    /// Threads spin on atomics whose values no running thread changes: in an ordinary launch
    /// a block waiting for another block, which CUDA does not promise will run (audit
    /// 2026-11-27c, F2); in a cooperative launch, with every block running, a wait nothing ends.
    #[error(transparent)]
    CrossBlockWait(#[from] CrossBlockWait),
    /// Lanes of a partial last warp shuffled from lanes past the block's end, which do not
    /// exist (CUDA leaves the result undefined; audit 2026-11-27d, D5).
    #[error(transparent)]
    MissingLaneShuffle(#[from] MissingLaneShuffle),
    /// The launch ran longer than the executor's watchdog allows
    /// ([`CpuExecutor::with_watchdog`](super::CpuExecutor::with_watchdog)).
    #[error(transparent)]
    Watchdog(#[from] Watchdog),
    /// The kernel crate's host build (which the CPU executor runs) and its device build (which
    /// a GPU runs) differ about integer overflow: one panics where the other wraps (audit
    /// 2026-11-27b, Q11).
    #[error(
        "cannot run `{kernel}` on the CPU executor: its crate's host build {} integer overflow but its device build {}, so the CPU \
         and a GPU would give different results for the same arithmetic. Make them agree: in the kernel crate's build script, \
         `KernelBuilder::overflow_checks({host})` (the default follows cargo's default for the build profile, `debug`: on, \
         `release`: off, and cannot see a profile that sets `overflow-checks` itself), or set `overflow-checks = {device}` in the \
         kernel crate's profile",
        if *host { "checks (panics on)" } else { "wraps on" },
        if *device { "checks it (panics)" } else { "wraps" }
    )]
    OverflowChecksDiffer {
        /// The kernel.
        kernel: String,
        /// Whether the host build checks overflow.
        host: bool,
        /// Whether the device build does.
        device: bool,
    },
    /// A kernel launched a kernel (CUDA's dynamic parallelism), which the CPU executor does
    /// not support.
    #[error(
        "cannot launch `{kernel}` from inside a kernel running on the CPU executor: launches from device code (dynamic parallelism) \
         are not supported; launch it from the host after the running launch returns"
    )]
    NestedLaunch {
        /// The kernel whose launch was refused.
        kernel: String,
    },
}

/// A shuffle that read lanes which had already exited.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "kernel `{kernel}`, block {block}, warp {warp}: lanes {readers:?} shuffled from lanes {exited:?}, which had exited; \
     CUDA leaves such a value undefined (a GPU gave 0). Keep the lanes a shuffle reads alive until it (return after the \
     shuffle, not before), or read only lanes that take part"
)]
pub struct ExitedLaneShuffle {
    /// The kernel's symbol.
    pub kernel: String,
    /// The block.
    pub block: Dim3,
    /// The warp's index in the block.
    pub warp: u32,
    /// The lanes (0..32) whose shuffle read an exited lane.
    pub readers: Vec<u32>,
    /// The exited lanes they read.
    pub exited: Vec<u32>,
}

/// Threads of a block that spin on atomic values nothing in the running blocks changes (F2).
///
/// In an ordinary launch the executor runs a block (or cluster) with no other block promised
/// to run beside it, as CUDA's execution model promises nothing more: once a thread runs, the
/// threads of its block (or thread-block cluster, or cooperative grid) eventually run, "threads
/// in other thread-block clusters are not guaranteed to eventually make progress" (CUDA C++
/// execution model, "Device threads"). So a block that waits for what another block does relies
/// on the two being resident together, which a GPU does when the grid fits at once and not
/// otherwise. In a cooperative launch every block runs; then nothing will change the values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "kernel `{kernel}`, block {block}: thread(s) {} spin on atomic values that no thread of {} changes ({}){}",
    DimList(threads),
    if *cooperative { "the launch" } else { "the block" },
    SpunList(spun),
    WaitAdvice(*cooperative)
)]
pub struct CrossBlockWait {
    /// The kernel's symbol.
    pub kernel: String,
    /// The block (the first of its cluster) whose threads spin.
    pub block: Dim3,
    /// `threadIdx` of the spinning threads.
    pub threads: Vec<Dim3>,
    /// What they poll: `(address, value)` of the atomic accesses they repeat (the first
    /// spinning thread's, at most eight).
    pub spun: Vec<(usize, u64)>,
    /// The launch is cooperative (every block was running): nothing will change the values.
    pub cooperative: bool,
}

/// A list of `threadIdx`, cut after a few.
struct DimList<'a>(&'a [Dim3]);

impl fmt::Display for DimList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().take(4).enumerate() {
            write!(f, "{}{d}", if i > 0 { ", " } else { "" })?;
        }
        if self.0.len() > 4 {
            write!(f, " and {} more", self.0.len() - 4)?;
        }
        Ok(())
    }
}

/// The polled `(address, value)` pairs.
struct SpunList<'a>(&'a [(usize, u64)]);

impl fmt::Display for SpunList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (address, value)) in self.0.iter().enumerate() {
            write!(f, "{}{value} at {address:#x}", if i > 0 { ", " } else { "" })?;
        }
        Ok(())
    }
}

/// What a [`CrossBlockWait`] says to do.
struct WaitAdvice(bool);

impl fmt::Display for WaitAdvice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 {
            f.write_str(
                ". Every block of this cooperative launch was running, so no thread will change them: this hangs a GPU too \
                 (a flag nobody sets, a grid barrier some block never reaches)",
            )
        } else {
            f.write_str(
                ": the block waits for another block of the launch (or for nothing). An ordinary launch does not promise that \
                 the block it waits for runs beside it: CUDA promises a running thread's progress only to the threads of its \
                 own block or cluster (\"threads in other thread-block clusters are not guaranteed to eventually make \
                 progress\", CUDA C++ execution model), and a GPU runs the other block only if the grid fits at once. Launch \
                 it cooperatively (`LaunchConfig::cooperative()`: every block resident, grid-wide waits allowed, the executor \
                 runs them all together), or hand work between blocks without waiting (`global::Handoff`: the last block to \
                 arrive finishes). If no block sets these values, it hangs a GPU too",
            )
        }
    }
}

/// A shuffle in a partial last warp (a block size that is not a multiple of 32) that read
/// lanes past the block's end (D5).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "kernel `{kernel}`, block {block}, warp {warp}: lanes {readers:?} shuffled from lanes {missing:?}, which do not exist: \
     this warp is the block's partial last warp and has only lanes 0..{lanes}. CUDA leaves such a value undefined (a GPU \
     gave 0). Make the block size a multiple of 32, or keep the shuffle within the warp's lanes (a `width`/segment that \
     fits, or a guard on the lane index)"
)]
pub struct MissingLaneShuffle {
    /// The kernel's symbol.
    pub kernel: String,
    /// The block.
    pub block: Dim3,
    /// The warp's index in the block.
    pub warp: u32,
    /// How many lanes the warp has (fewer than 32).
    pub lanes: u32,
    /// The lanes whose shuffle read a lane that does not exist.
    pub readers: Vec<u32>,
    /// The lanes (`lanes..32`) they read.
    pub missing: Vec<u32>,
}

/// A launch stopped by the watchdog.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "kernel `{kernel}` ran for {elapsed:.2?}, past the watchdog's limit of {limit:.2?}; unfinished threads ({}): {}. \
     A thread that waits for what no thread of the launch will do any more (a flag nobody sets, a barrier phase nobody \
     completes) hangs a GPU too; one \"polling atomics\" that waits for another block relies on that block running beside \
     it, which only a cooperative launch promises (see `CpuError::CrossBlockWait`). One \"running, never yielded\" reached no barrier, warp operation or atomic access for the \
     whole grace period: a long computation, or a loop on plain memory (which need not see another thread's write on a \
     GPU either: poll an AtomicSlice). Raise the limit with `CpuExecutor::with_watchdog` if the launch is just slow",
    stuck.len(), StuckList(stuck)
)]
pub struct Watchdog {
    /// The kernel's symbol.
    pub kernel: String,
    /// The limit.
    pub limit: Duration,
    /// How long the launch had run when it was reported.
    pub elapsed: Duration,
    /// The threads that had not finished (in block order), each with where it was.
    pub stuck: Vec<StuckThread>,
}

/// A list of stuck threads, cut after a few.
struct StuckList<'a>(&'a [StuckThread]);

impl fmt::Display for StuckList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 6;
        if self.0.is_empty() {
            return f.write_str("none found");
        }
        for (i, t) in self.0.iter().take(SHOWN).enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{t}")?;
        }
        if self.0.len() > SHOWN {
            write!(f, " and {} more", self.0.len() - SHOWN)?;
        }
        Ok(())
    }
}

/// Barriers that can never open: threads of the block wait at a block barrier while other
/// threads of the block (or its cluster) wait at the cluster barrier, so neither is reached by
/// every thread that has not exited. (Exited threads release both a block barrier and the
/// cluster barrier, as PTX's `exit` defines: audit P9, and E4 of audit 2026-11-27e.)
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "kernel `{kernel}`, block {block}: {} threads wait at barriers that can never open (waiting at a block barrier or at the \
     cluster barrier: {}; exited: {}): some wait at `sync_threads()` while others of the block or cluster wait at \
     `cluster::sync()`, so neither barrier is reached by every thread that has not exited; a GPU hangs here. Threads that \
     return release both barriers (PTX `exit`): make every thread that has not returned reach the same barrier",
    waiting.len(), ThreadList(waiting), ThreadList(exited)
)]
pub struct BarrierDivergence {
    /// The kernel's symbol.
    pub kernel: String,
    /// The block.
    pub block: Dim3,
    /// `threadIdx` of the threads waiting at the barrier.
    pub waiting: Vec<Dim3>,
    /// `threadIdx` of the threads that exited without reaching it.
    pub exited: Vec<Dim3>,
}

/// A warp operation that some lanes wait in while other live lanes it names never join it:
/// they wait at a block barrier, or in another warp operation (a different collective, or the
/// same with another mask: audit N7). A GPU hangs there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "kernel `{kernel}`, block {block}, warp {warp}: lanes {} wait in a warp operation (shuffle, vote, match, elect_one or sync_warp) that lanes {} never join{}; \
     a GPU hangs here: call each warp operation from all the lanes its mask names, together, with the same mask",
    ThreadList(waiting),
    if other_operation.is_empty() { ThreadList(at_barrier) } else { ThreadList(other_operation) },
    if other_operation.is_empty() { " (they wait at a block barrier)" } else { " (they wait in a different warp operation, or in the same one with another mask)" },
)]
pub struct WarpDeadlock {
    /// The kernel's symbol.
    pub kernel: String,
    /// The block.
    pub block: Dim3,
    /// The warp's index in the block.
    pub warp: u32,
    /// `threadIdx` of the lanes waiting in the (first) warp operation.
    pub waiting: Vec<Dim3>,
    /// `threadIdx` of the lanes waiting at a block barrier instead.
    pub at_barrier: Vec<Dim3>,
    /// `threadIdx` of the lanes waiting in another warp operation, or in the same with
    /// another mask, than the lanes of `waiting`.
    pub other_operation: Vec<Dim3>,
}

/// A block of a cluster whose threads all exited while a thread of a peer block had accessed
/// its shared memory (`cluster::peer_get`) since the last cluster barrier: nothing kept the
/// block alive until that access, so on a GPU it may come after the exit, and the kernel
/// faults (audit N6).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "kernel `{kernel}`: block {block} exited while thread {reader} of block {reader_block} used its shared memory with no cluster \
     barrier between: a block's shared memory is gone once all its threads return (a GPU faults). Put a cluster::sync() after the \
     last peer access, before any block of the cluster returns"
)]
pub struct ExitedPeerAccess {
    /// The kernel's symbol.
    pub kernel: String,
    /// `blockIdx` of the block that exited.
    pub block: Dim3,
    /// `blockIdx` of the block whose thread accessed its memory.
    pub reader_block: Dim3,
    /// `threadIdx` of that thread.
    pub reader: Dim3,
}

/// Threads of a block that wait at block barriers of different kinds (`sync_threads` and
/// `sync_threads_count`, `_and` or `_or`). Each kind is its own hardware barrier (0, 1, 2,
/// 3: audit P4), and each waits for every thread of the block, so a GPU hangs there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "kernel `{kernel}`, block {block}: threads {} wait at `{first_kind}` while threads {} wait at `{second_kind}`; \
     each kind of block barrier is its own hardware barrier that waits for every thread of the block, so a GPU hangs here: \
     make every thread of the block call the same barrier function",
    ThreadList(first),
    ThreadList(second)
)]
pub struct MixedBarriers {
    /// The kernel's symbol.
    pub kernel: String,
    /// The block.
    pub block: Dim3,
    /// The barrier function the first thread waits at.
    pub first_kind: &'static str,
    /// `threadIdx` of the threads waiting there.
    pub first: Vec<Dim3>,
    /// Another barrier function other threads wait at.
    pub second_kind: &'static str,
    /// `threadIdx` of the threads waiting there.
    pub second: Vec<Dim3>,
}

/// The order of the two accesses of a data race.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RaceKind {
    /// One thread wrote, another read.
    ReadAfterWrite,
    /// Two threads wrote.
    WriteAfterWrite,
    /// One thread read, another then wrote.
    WriteAfterRead,
    /// One thread wrote with a plain store, another then updated it atomically (shared memory:
    /// an atomic races with a plain access that nothing orders, F3).
    AtomicAfterWrite,
    /// One thread updated it atomically, another then wrote it with a plain store.
    WriteAfterAtomic,
    /// One thread updated it atomically, another then read it with a plain load.
    ReadAfterAtomic,
    /// One thread read it with a plain load, another then updated it atomically.
    AtomicAfterRead,
}

impl RaceKind {
    /// What the second thread did.
    fn second(self) -> &'static str {
        match self {
            RaceKind::ReadAfterWrite | RaceKind::ReadAfterAtomic => "read",
            RaceKind::WriteAfterWrite | RaceKind::WriteAfterRead | RaceKind::WriteAfterAtomic => "wrote",
            RaceKind::AtomicAfterWrite | RaceKind::AtomicAfterRead => "updated atomically",
        }
    }

    /// Whether one of the two accesses is atomic (and the other plain).
    fn mixed(self) -> bool {
        matches!(self, RaceKind::AtomicAfterWrite | RaceKind::WriteAfterAtomic | RaceKind::ReadAfterAtomic | RaceKind::AtomicAfterRead)
    }
}

impl fmt::Display for RaceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RaceKind::ReadAfterWrite | RaceKind::WriteAfterWrite | RaceKind::AtomicAfterWrite => "wrote it and then",
            RaceKind::WriteAfterRead | RaceKind::AtomicAfterRead => "read it and then",
            RaceKind::WriteAfterAtomic | RaceKind::ReadAfterAtomic => "updated it atomically and then",
        })
    }
}

/// The note a race between a plain and an atomic access adds (F3).
struct MixedNote(RaceKind);

impl fmt::Display for MixedNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.mixed() {
            f.write_str(
                " (atomics do not race with each other, but an atomic and a plain load or store of the same word do: PTX's memory \
                 model orders only accesses that are both atomic; make both atomic, or order them)",
            )?;
        }
        Ok(())
    }
}

/// Two unsynchronised accesses to one shared-memory word (of a block, by its own threads or,
/// through distributed shared memory, by threads of another block of its cluster).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "kernel `{kernel}`, block {block}: data race on shared memory at address {address:#x}: thread {first}{} {kind} thread {second}{} {} it \
     with no barrier between{}; put a sync_threads (or sync_warp, within one warp; cluster::sync between blocks of a cluster) between the two accesses",
    PeerBlock(*first_block, *block),
    PeerBlock(*second_block, *block),
    kind.second(),
    MixedNote(*kind)
)]
pub struct SharedMemoryRace {
    /// The kernel's symbol.
    pub kernel: String,
    /// The block whose shared memory it is.
    pub block: Dim3,
    /// The shared-memory address (of the 4-byte word) both threads accessed.
    pub address: u32,
    /// Which accesses conflict.
    pub kind: RaceKind,
    /// `threadIdx` of the thread that accessed it first.
    pub first: Dim3,
    /// `blockIdx` of that thread (`block`, unless it reached the memory from a peer block).
    pub first_block: Dim3,
    /// `threadIdx` of the thread whose access revealed the race.
    pub second: Dim3,
    /// `blockIdx` of that thread.
    pub second_block: Dim3,
}

/// A read of shared memory that no thread of the block had written in this launch: shared
/// memory starts with whatever the previous kernel on that SM left there, so on a GPU the read
/// returns a stale value (audit 2026-11-27b, Q6: `0xab00`, the last kernel's data, on an
/// H100), silently. Reported like compute-sanitizer's `initcheck` does for global memory; with
/// race detection on (the default), once the block has finished with no other error (a data
/// race of the same access is reported instead).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "kernel `{kernel}`, block {block}, thread {thread}{}: read {bytes} bytes of shared memory at offset {address:#x} ({}) that no thread \
     of block {block} had written in this launch; on a GPU shared memory starts with whatever an earlier kernel left there, so the \
     read returns a stale value. Write the memory before reading it (and put a `sync_threads()` between one thread's write and \
     another's read), or fill it first (for example every thread zeroes its elements, then `sync_threads()`)",
    PeerBlock(*reader_block, *block),
    Region(*dynamic, *offset, *array_bytes)
)]
pub struct UninitialisedSharedRead {
    /// The kernel's symbol.
    pub kernel: String,
    /// The block whose shared memory was read.
    pub block: Dim3,
    /// `threadIdx` of the reading thread.
    pub thread: Dim3,
    /// `blockIdx` of the reading thread (`block`, unless it read a peer block's memory).
    pub reader_block: Dim3,
    /// The shared-memory address (offset in the block's shared window) of the first unwritten
    /// 2-byte granule read.
    pub address: u32,
    /// The size of the read.
    pub bytes: usize,
    /// Whether the address is in the dynamic shared memory (else a `shared_array!`).
    pub dynamic: bool,
    /// The byte offset of the address in the dynamic shared memory or in its `shared_array!`.
    pub offset: u32,
    /// The size of that region in bytes (0 if unknown).
    pub array_bytes: usize,
}

/// "byte N of a `shared_array!` of M bytes" or "byte N of the dynamic shared memory".
struct Region(bool, u32, usize);

impl fmt::Display for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Region(true, offset, bytes) => write!(f, "byte {offset} of the dynamic shared memory of {bytes} bytes"),
            Region(false, offset, 0) => write!(f, "byte {offset} of the shared window"),
            Region(false, offset, bytes) => write!(f, "byte {offset} of a `shared_array!` of {bytes} bytes"),
        }
    }
}

/// " of block B" when a thread's block is not the memory's.
struct PeerBlock(Dim3, Dim3);

impl fmt::Display for PeerBlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 != self.1 { write!(f, " of block {}", self.0) } else { Ok(()) }
    }
}

/// Two threads of one launch that took the same element of a kernel output (a
/// `DisjointSlice` or another output type), one of them to write it. An output element
/// belongs to one thread for the whole launch: barriers do not make a second thread's access
/// valid, since the element is handed out as a `&mut` (the compiler may keep its value in a
/// register across them).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "kernel `{kernel}`: data race on an output element: block {first_block} thread {first_thread} {kind} block {second_block} thread \
     {second_thread} {} it (the {element_bytes}-byte element at {address:#x}, element {index} of the output it was reached through); \
     an output element belongs to one thread for the whole launch, even across barriers: give each thread its own elements \
     (`unique_index`, `grid_stride`), or hand values between threads through an `AtomicSlice` or shared memory",
    kind.second()
)]
pub struct GlobalMemoryRace {
    /// The kernel's symbol.
    pub kernel: String,
    /// The host address of the element.
    pub address: usize,
    /// The element's index in the output (the view) whose method the second access used.
    pub index: usize,
    /// Bytes of one element.
    pub element_bytes: usize,
    /// Which accesses conflict.
    pub kind: RaceKind,
    /// `blockIdx` of the thread that took the element first.
    pub first_block: Dim3,
    /// `threadIdx` of the thread that took the element first.
    pub first_thread: Dim3,
    /// `blockIdx` of the thread whose access revealed the race.
    pub second_block: Dim3,
    /// `threadIdx` of the thread whose access revealed the race.
    pub second_thread: Dim3,
}

/// A list of thread indices, cut after a few.
struct ThreadList<'a>(&'a [Dim3]);

impl fmt::Display for ThreadList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 6;
        if self.0.is_empty() {
            return f.write_str("none");
        }
        for (i, d) in self.0.iter().take(SHOWN).enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{d}")?;
        }
        if self.0.len() > SHOWN {
            write!(f, " and {} more", self.0.len() - SHOWN)?;
        }
        Ok(())
    }
}

/// Where an unfinished GPU thread was when the watchdog stopped the launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ThreadActivity {
    /// It was running and never yielded (no barrier, warp operation or run of atomic
    /// accesses) within the grace period after the limit: a loop on plain memory, or a very
    /// long computation.
    NeverYielded,
    /// It was ready to run (it had yielded, or had not started yet).
    Runnable,
    /// It waited at a block barrier.
    BlockBarrier,
    /// It waited in a warp operation.
    WarpOperation,
    /// It waited at the cluster barrier.
    ClusterBarrier,
    /// It had yielded after a run of atomic accesses (a spin-wait's poll, F2).
    Polling,
}

impl fmt::Display for ThreadActivity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ThreadActivity::NeverYielded => "running, never yielded",
            ThreadActivity::Runnable => "ready to run",
            ThreadActivity::BlockBarrier => "at a block barrier",
            ThreadActivity::WarpOperation => "in a warp operation",
            ThreadActivity::ClusterBarrier => "at the cluster barrier",
            ThreadActivity::Polling => "polling atomics",
        })
    }
}

/// A GPU thread that had not finished when the watchdog stopped its launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StuckThread {
    /// `blockIdx`.
    pub block: Dim3,
    /// `threadIdx`.
    pub thread: Dim3,
    /// Where it was.
    pub activity: ThreadActivity,
}

impl fmt::Display for StuckThread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "block {} thread {} ({})", self.block, self.thread, self.activity)
    }
}
