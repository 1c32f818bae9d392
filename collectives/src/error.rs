//! One error type for every backend and the rendezvous.

use std::time::Duration;

/// What went wrong in a collective, a communicator's setup, or a rendezvous.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// libnccl could not be opened.
    #[error(
        "could not load NCCL (tried {tried:?}): {reason}; install NCCL 2.x (e.g. the libnccl2 package) or set FERROCUDA_NCCL_LIB to the path of libnccl.so.2"
    )]
    NcclNotFound {
        /// The names and paths tried, in order.
        tried: Vec<String>,
        /// The loader's message for the last one.
        reason: String,
    },
    /// libnccl lacks a function this crate needs (NCCL older than 2.19?).
    #[error("libnccl has no `{symbol}` ({reason}); use NCCL 2.19 or newer")]
    NcclSymbol {
        /// The missing function.
        symbol: &'static str,
        /// The loader's message.
        reason: String,
    },
    /// An NCCL call failed; `text` is `ncclGetErrorString`, `detail` `ncclGetLastError`.
    #[error("{call} failed: {name} ({text}){}", if detail.is_empty() { String::new() } else { format!(": {detail}") })]
    Nccl {
        /// The NCCL function.
        call: &'static str,
        /// The `ncclResult_t` value.
        code: i32,
        /// Its name (`ncclInvalidArgument`, ...).
        name: &'static str,
        /// NCCL's description of the code.
        text: String,
        /// NCCL's last error message (what went wrong in detail), possibly empty.
        detail: String,
    },
    /// The CUDA driver reported an error (boxed: the host crate's error is large).
    #[error(transparent)]
    Driver(Box<ferrocuda_host::Error>),
    /// Buffer lengths do not fit the operation.
    #[error("{operation}: {what} holds {got} elements, but {expected} are needed")]
    Length {
        /// The collective.
        operation: &'static str,
        /// Which buffer.
        what: &'static str,
        /// What the operation needs.
        expected: usize,
        /// What was passed.
        got: usize,
    },
    /// A rank number outside `0..world_size`.
    #[error("{operation}: rank {rank} is not in 0..{world_size}")]
    BadRank {
        /// The collective or setup step.
        operation: &'static str,
        /// The rank given.
        rank: usize,
        /// The number of ranks.
        world_size: usize,
    },
    /// A buffer or stream belongs to another GPU than the communicator.
    #[error("{operation}: the {what} is on device {got}, but this rank's communicator is on device {expected}")]
    WrongDevice {
        /// The collective.
        operation: &'static str,
        /// `stream` or a buffer.
        what: &'static str,
        /// The communicator's device.
        expected: usize,
        /// The device of what was passed.
        got: usize,
    },
    /// A buffer's address is not aligned as the operation needs.
    #[error(
        "{operation}: the {what} starts at {address:#x}, which is not a multiple of {alignment} bytes; pass a buffer (or a view starting at a multiple of {alignment} bytes)"
    )]
    Misaligned {
        /// The operation.
        operation: &'static str,
        /// Which buffer.
        what: &'static str,
        /// Its device address.
        address: u64,
        /// The alignment needed, in bytes.
        alignment: u64,
    },
    /// A peer did not answer in time; the communicator was aborted and cannot be used again.
    #[error("{operation} did not complete within {after:?} (a peer is hung or gone); the communicator was aborted: make a new one")]
    Timeout {
        /// What was waited for.
        operation: &'static str,
        /// The timeout.
        after: Duration,
    },
    /// A peer all-reduce group ([`crate::peer::PeerGroup`]) is over: a rank's kernel gave up waiting
    /// for a peer ([`crate::peer::PeerRank::spin_limit`]), which ends the group for every rank (audit
    /// 2026-11-28h G20R-1: a rank that went on after a give-up ran ahead of a late peer). The
    /// outputs of this rank's calls since the give-up are NaN, not sums, and every later call
    /// fails the same way. Not a communicator timeout: nothing was aborted that a retry could
    /// reach, and the group cannot be repaired.
    #[error(
        "{operation}: the peer all-reduce group is over on rank {rank}: {cause}. The outputs of this rank's calls since then are NaN, not sums, and every later call fails: drop every rank of the group, synchronise, and make a new group with PeerGroup::new (raise PeerRank::spin_limit, or leave it at 0 to wait for ever, if a rank was merely late)"
    )]
    GroupPoisoned {
        /// The refused or reporting operation (`PeerRank::check`, `PeerRank::all_reduce`).
        operation: &'static str,
        /// The rank that reports it.
        rank: usize,
        /// Who gave up, as far as this rank can tell.
        cause: &'static str,
    },
    /// An NCCL operation issued while this thread's NCCL group is open, other than through a
    /// [`crate::Grouped`] member of the outermost [`crate::group`], or a [`crate::group`]
    /// begun inside another: NCCL would only record it until the outermost group ends, after
    /// the buffers' ordering (and possibly their release) was settled as if it were queued
    /// (audit 2026-11-27f F12-1: a receive wrote a buffer freed and reallocated meanwhile).
    #[error("{operation}: {problem}")]
    GroupMisuse {
        /// The refused call.
        operation: &'static str,
        /// What is wrong and what to do instead.
        problem: &'static str,
    },
    /// The communicator was aborted earlier (after a timeout or an asynchronous error).
    #[error("{operation}: the communicator was aborted; make a new one")]
    Aborted {
        /// The refused operation.
        operation: &'static str,
    },
    /// Another rank of a [`ThreadGroup`](crate::ThreadGroup) failed (returned an error or
    /// panicked) or left, so the collective cannot complete.
    #[error("{operation}: rank {rank} failed or left the group, so this collective cannot complete")]
    PeerFailed {
        /// The collective.
        operation: &'static str,
        /// The rank that failed (the first one seen).
        rank: usize,
    },
    /// The rendezvous that shares the communicator's id failed.
    #[error("rendezvous ({method}): {message}")]
    Rendezvous {
        /// `file` or `tcp` and its address.
        method: String,
        /// What went wrong and what to do.
        message: String,
    },
    /// An environment variable is missing or malformed.
    #[error("environment variable {name}: {problem}")]
    Env {
        /// The variable.
        name: &'static str,
        /// What is wrong with it.
        problem: String,
    },
}

impl From<ferrocuda_host::Error> for Error {
    fn from(error: ferrocuda_host::Error) -> Self {
        Error::Driver(Box::new(error))
    }
}

/// `Result<T, Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Checks that a buffer holds exactly `expected` elements.
pub(crate) fn check_len(operation: &'static str, what: &'static str, expected: usize, got: usize) -> Result<()> {
    if expected == got { Ok(()) } else { Err(Error::Length { operation, what, expected, got }) }
}

/// Checks that `rank` is a rank of a group of `world_size`.
pub(crate) fn check_rank(operation: &'static str, rank: usize, world_size: usize) -> Result<()> {
    if rank < world_size { Ok(()) } else { Err(Error::BadRank { operation, rank, world_size }) }
}
