//! NCCL communicators on ferrocuda contexts, and their operations on ferrocuda streams.

use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::time::{Duration, Instant};

use ferrocuda_host::{BufferAccess, BufferUsage, Context, DeviceView, DeviceViewMut, Stream};

use super::exit_guard::InFlight;
use super::ffi::{self, IN_PROGRESS, Nccl, RawComm, RawConfig, RawStream, RawUniqueId, SUCCESS};
use crate::api::Collectives;
use crate::element::{Element, ReduceOp};
use crate::error::{Error, Result, check_len, check_rank};
use crate::rendezvous::{Launch, Rendezvous};

/// NCCL's version as `(major, minor, patch)` (loads libnccl).
pub fn version() -> Result<(u32, u32, u32)> {
    let nccl = ffi::nccl()?;
    let mut code = 0;
    // SAFETY: writes one int.
    ffi::check(nccl, "ncclGetVersion", unsafe { (nccl.ncclGetVersion)(&mut code) }, std::ptr::null_mut())?;
    let code = code as u32;
    Ok((code / 10000, code % 10000 / 100, code % 100))
}

/// True when libnccl can be loaded (see [`crate::Error::NcclNotFound`] for where it is looked for).
pub fn is_available() -> bool {
    ffi::nccl().is_ok()
}

/// The id that names one communicator: made by one rank ([`UniqueId::new`]), sent to the
/// others out of band ([`Rendezvous`], or any channel: [`UniqueId::to_bytes`]).
#[derive(Clone, Copy)]
pub struct UniqueId(RawUniqueId);

impl UniqueId {
    /// A fresh id (`ncclGetUniqueId`; it also starts NCCL's bootstrap listener on this host).
    pub fn new() -> Result<Self> {
        let nccl = ffi::nccl()?;
        let mut raw = RawUniqueId { internal: [0; 128] };
        // SAFETY: writes one ncclUniqueId.
        ffi::check(nccl, "ncclGetUniqueId", unsafe { (nccl.ncclGetUniqueId)(&mut raw) }, std::ptr::null_mut())?;
        Ok(UniqueId(raw))
    }

    /// The 128 bytes to send to the other ranks.
    pub fn to_bytes(&self) -> [u8; 128] {
        self.0.internal
    }

    /// An id received from rank 0; `None` unless exactly 128 bytes.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        Some(UniqueId(RawUniqueId { internal: bytes.try_into().ok()? }))
    }
}

impl std::fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "UniqueId({:02x?}..)", &self.0.internal[..8])
    }
}

/// How long dropping a [`Communicator`] waits for NCCL to finalise it (its queued operations
/// to complete) when the [`Config`] sets neither [`Config::drop_timeout`] nor
/// [`Config::timeout`]; past it the communicator is aborted instead (issue 29: a drop used to
/// wait forever when a peer was gone).
pub const DEFAULT_DROP_TIMEOUT: Duration = Duration::from_secs(30);

/// How a communicator is created.
#[derive(Debug, Clone, Default)]
pub struct Config {
    timeout: Option<Duration>,
    drop_timeout: Option<Duration>,
}

impl Config {
    /// No timeout for the waits of creation, operations and [`Communicator::synchronize`]
    /// (they wait for the other ranks as long as it takes, NCCL's default). The communicator
    /// is still made non-blocking (`config.blocking = 0`, the calls are polled), so that its
    /// drop is bounded: see [`Config::drop_timeout`].
    pub fn new() -> Self {
        Config::default()
    }

    /// Bounds the wait of the communicator's drop for NCCL's finalisation (its queued
    /// operations completing): past it the communicator is aborted (`ncclCommAbort`, which
    /// cancels them) with a message, instead of hanging on a peer that is gone. Defaults to
    /// [`Config::timeout`] if set, else [`DEFAULT_DROP_TIMEOUT`]. Synchronise before dropping
    /// ([`Communicator::synchronize`] with a [`Config::timeout`]) to get a hung peer as an
    /// error instead.
    #[must_use]
    pub fn drop_timeout(mut self, timeout: Duration) -> Self {
        self.drop_timeout = Some(timeout);
        self
    }

    /// The bound of the drop's wait (see [`Config::drop_timeout`]): never unbounded.
    fn drop_bound(&self) -> Duration {
        self.drop_timeout.or(self.timeout).unwrap_or(DEFAULT_DROP_TIMEOUT)
    }

    /// Makes the communicator non-blocking (`config.blocking = 0`) and bounds every wait for
    /// the other ranks (creation, [`Communicator::synchronize`], finalisation) by `timeout`:
    /// past it the communicator is aborted (`ncclCommAbort`) and the call fails with
    /// [`Error::Timeout`] instead of hanging on a dead or stuck peer.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
}

/// `ncclGroupStart` depth on this thread, and the communicators (with their timeouts) that
/// issued work in the outermost group, polled at its end when non-blocking.
type GroupState = (u32, Vec<(RawComm, Option<Duration>)>);

thread_local! {
    static GROUP: RefCell<GroupState> = const { RefCell::new((0, Vec::new())) };
}

/// One rank of an NCCL communicator, on one GPU (a [`Context`]).
///
/// Dropping it finalises and destroys it (`ncclCommFinalize` + `ncclCommDestroy`, on a thread of
/// its own), which waits for its queued operations, at most [`Config::drop_timeout`]: past it
/// (a peer is gone, a rank died) that thread aborts it (`ncclCommAbort`) with a message, and the
/// drop returns after at most the timeout plus a second whatever NCCL does, rather than hang
/// (a finalisation still blocked inside NCCL is then left to that thread, with a message; its
/// work is given up on, and a process that exits while that thread is inside NCCL waits for it
/// at exit, at most 5 s, then ends with `_exit` and its exit status rather than tear NCCL down
/// under it: synchronise before dropping). An aborted
/// communicator is only released. Leaked (`mem::forget`), nothing is finalised: NCCL's
/// resources stay allocated, and the operations already queued still complete on their streams
/// (their buffers' records keep the buffers until then).
pub struct Communicator {
    raw: RawComm,
    nccl: &'static Nccl,
    rank: usize,
    world_size: usize,
    context: Context,
    timeout: Option<Duration>,
    /// The bound of the drop's finalisation ([`Config::drop_timeout`]).
    drop_timeout: Duration,
    aborted: Cell<bool>,
    /// NCCL's own buffers of this communicator: every operation declares them written, so
    /// operations queued on different streams run one after the other.
    state: BufferUsage,
}

// SAFETY: an NCCL communicator may be used from any thread, one at a time (it is not Sync).
unsafe impl Send for Communicator {}

impl Communicator {
    /// The communicator NCCL's init call wrote to `raw`, as `rank` of `world_size` on
    /// `context` (shared by [`init_rank`](Self::init_rank) and [`init_all`](Self::init_all)).
    fn joined(raw: RawComm, nccl: &'static Nccl, rank: usize, world_size: usize, context: &Context, config: &Config) -> Self {
        Communicator {
            raw,
            nccl,
            rank,
            world_size,
            context: context.clone(),
            timeout: config.timeout,
            drop_timeout: config.drop_bound(),
            aborted: Cell::new(false),
            state: BufferUsage::for_library_state(context),
        }
    }

    /// Joins communicator `id` as `rank` of `world_size`, on `context`'s GPU. Every rank must
    /// call it (it returns once all have joined, or fails after the config's timeout).
    pub fn init_rank(context: &Context, world_size: usize, rank: usize, id: &UniqueId, config: &Config) -> Result<Self> {
        check_rank("Communicator::init_rank", rank, world_size)?;
        let nccl = ffi::nccl()?;
        // The rank's context is current for NCCL's calls (NCCL uses the runtime, which uses
        // the thread's current context) and the caller's comes back when `_current` drops
        // (session 21: a created context left current on the caller's thread gets the
        // runtime allocations of other libraries, G20R-4's class).
        let _current = context.push_current()?;
        let mut raw_config = RawConfig::new(false);
        let mut raw = std::ptr::null_mut();
        // SAFETY: writes one communicator handle; the config outlives the call.
        let code = unsafe { (nccl.ncclCommInitRankConfig)(&mut raw, world_size as i32, id.0, rank as i32, &mut raw_config) };
        let comm = Communicator::joined(raw, nccl, rank, world_size, context, config);
        if code != IN_PROGRESS
            && let Err(e) = ffi::check(nccl, "ncclCommInitRankConfig", code, raw)
        {
            comm.abort_now();
            return Err(e);
        }
        comm.wait_ready("ncclCommInitRankConfig")?;
        Ok(comm)
    }

    /// One communicator over several GPUs driven by this thread (like `ncclCommInitAll`):
    /// rank `i` on `contexts[i]`. Operations on them must be issued inside one
    /// [`crate::group`] (NCCL needs all ranks' calls before any can complete).
    pub fn init_all(contexts: &[Context], config: &Config) -> Result<Vec<Self>> {
        let nccl = ffi::nccl()?;
        let id = UniqueId::new()?;
        let world_size = contexts.len();
        let mut comms = Vec::with_capacity(world_size);
        // SAFETY: no arguments; balanced by ncclGroupEnd below.
        ffi::check(nccl, "ncclGroupStart", unsafe { (nccl.ncclGroupStart)() }, std::ptr::null_mut())?;
        let mut first_error = None;
        // Each rank's context current for its registration and through the group's end (the
        // last one's, as NCCL's single-thread init expects), then the caller's again: popped
        // innermost first below.
        let mut current = Vec::with_capacity(world_size);
        for (rank, context) in contexts.iter().enumerate() {
            match context.push_current() {
                Ok(guard) => current.push(guard),
                Err(e) => {
                    first_error.get_or_insert(Error::from(e));
                    break;
                }
            }
            let mut raw_config = RawConfig::new(false);
            let mut raw = std::ptr::null_mut();
            // SAFETY: as in init_rank; inside a group the call only registers the rank.
            let code = unsafe { (nccl.ncclCommInitRankConfig)(&mut raw, world_size as i32, id.0, rank as i32, &mut raw_config) };
            if code != IN_PROGRESS
                && let Err(e) = ffi::check(nccl, "ncclCommInitRankConfig", code, raw)
            {
                first_error.get_or_insert(e);
            }
            comms.push(Communicator::joined(raw, nccl, rank, world_size, context, config));
        }
        // SAFETY: ends the group started above.
        let end = unsafe { (nccl.ncclGroupEnd)() };
        while current.pop().is_some() {}
        if end != IN_PROGRESS
            && let Err(e) = ffi::check(nccl, "ncclGroupEnd", end, std::ptr::null_mut())
        {
            first_error.get_or_insert(e);
        }
        if let Some(e) = first_error {
            comms.iter().for_each(Communicator::abort_now);
            return Err(e);
        }
        for comm in &comms {
            comm.wait_ready("ncclCommInitAll")?;
        }
        Ok(comms)
    }

    /// One process per GPU, from the environment (see [`crate::rendezvous`]): reads `RANK`,
    /// `WORLD_SIZE`, `LOCAL_RANK`, uses GPU `LOCAL_RANK`'s primary context, and shares the id
    /// through `FERROCUDA_RENDEZVOUS_FILE` or `MASTER_ADDR:MASTER_PORT`.
    pub fn from_env(config: &Config) -> Result<(Self, Launch)> {
        let launch = Launch::from_env()?;
        let rendezvous = Rendezvous::from_env()?;
        let context = Context::primary(launch.local_rank)?;
        let comm = Self::from_rendezvous(&context, launch.rank, launch.world_size, &rendezvous, Rendezvous::timeout_from_env()?, config)?;
        Ok((comm, launch))
    }

    /// Rank 0 makes an id, `rendezvous` gives it to the others, every rank joins.
    pub fn from_rendezvous(context: &Context, rank: usize, world_size: usize, rendezvous: &Rendezvous, wait: Duration, config: &Config) -> Result<Self> {
        let mine = if rank == 0 { UniqueId::new()?.to_bytes().to_vec() } else { Vec::new() };
        let bytes = rendezvous.share(rank, world_size, &mine, wait)?;
        let id = UniqueId::from_bytes(&bytes).ok_or_else(|| Error::Rendezvous {
            method: format!("{rendezvous:?}"),
            message: format!("received {} bytes, not a 128-byte NCCL id", bytes.len()),
        })?;
        let comm = Self::init_rank(context, world_size, rank, &id, config)?;
        rendezvous.finish(rank)?;
        Ok(comm)
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    pub fn world_size(&self) -> usize {
        self.world_size
    }

    /// The context (GPU) of this rank.
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// The raw `ncclComm_t`, for NCCL calls this crate does not wrap.
    pub fn raw(&self) -> *mut c_void {
        self.raw
    }

    /// This communicator's operations, queued on `stream` (a stream of this rank's context).
    pub fn on<'c>(&'c self, stream: &'c Stream) -> Result<OnStream<'c>> {
        if stream.context().raw() != self.context.raw() {
            return Err(Error::WrongDevice {
                operation: "Communicator::on",
                what: "stream",
                expected: self.context.device().ordinal(),
                got: stream.context().device().ordinal(),
            });
        }
        Ok(OnStream { comm: self, stream })
    }

    /// Waits until the work queued on `stream` (collectives included) has finished. With a
    /// [`Config::timeout`], it polls NCCL's asynchronous error meanwhile and aborts the
    /// communicator when the timeout passes or NCCL reports an error (a peer that died, a
    /// network failure), instead of waiting forever.
    pub fn synchronize(&self, stream: &Stream) -> Result<()> {
        self.usable("Communicator::synchronize")?;
        let Some(timeout) = self.timeout else {
            stream.synchronize()?;
            return self.async_error("Communicator::synchronize");
        };
        let start = Instant::now();
        loop {
            // A driver error (a fault) is reported with its text.
            if stream.is_idle()? {
                return self.async_error("Communicator::synchronize");
            }
            self.async_error("Communicator::synchronize")?;
            if start.elapsed() > timeout {
                self.abort_now();
                return Err(Error::Timeout { operation: "Communicator::synchronize", after: timeout });
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    /// Aborts the communicator (`ncclCommAbort`): its pending operations are cancelled, and it
    /// cannot be used again. For when a peer is known to be gone.
    pub fn abort(self) {
        self.abort_now();
    }

    /// Aborts unless already aborted; later calls fail with [`Error::Aborted`].
    fn abort_now(&self) {
        if self.aborted.replace(true) || self.raw.is_null() {
            return;
        }
        let _current = self.context.push_current();
        // SAFETY: a live communicator, released here exactly once (Drop skips aborted ones).
        unsafe { (self.nccl.ncclCommAbort)(self.raw) };
    }

    fn usable(&self, operation: &'static str) -> Result<()> {
        if self.aborted.get() { Err(Error::Aborted { operation }) } else { Ok(()) }
    }

    /// NCCL's asynchronous error: `Ok` when none (or still in progress), else the error
    /// after aborting the communicator.
    fn async_error(&self, operation: &'static str) -> Result<()> {
        let mut state = SUCCESS;
        // SAFETY: a live communicator; writes one result.
        let code = unsafe { (self.nccl.ncclCommGetAsyncError)(self.raw, &mut state) };
        ffi::check(self.nccl, "ncclCommGetAsyncError", code, self.raw)?;
        if state == SUCCESS || state == IN_PROGRESS {
            return Ok(());
        }
        let error = ffi::check(self.nccl, operation, state, self.raw);
        self.abort_now();
        error
    }

    /// Waits while NCCL reports the communicator in progress (non-blocking mode), bounded by
    /// the timeout; aborts on an error or at the timeout.
    fn wait_ready(&self, operation: &'static str) -> Result<()> {
        poll_ready(self.nccl, self.raw, self.timeout, operation).inspect_err(|_| self.abort_now())
    }

    /// Issues one NCCL call for `operation`, then completes a non-blocking one.
    fn issue(&self, operation: &'static str, call: impl FnOnce(&Nccl) -> ffi::NcclResult) -> Result<()> {
        self.usable(operation)?;
        // The caller's current context comes back when the call returns (see `init_rank`).
        let _current = self.context.push_current()?;
        let code = call(self.nccl);
        let in_group = GROUP.with(|g| {
            let mut g = g.borrow_mut();
            if g.0 > 0 && !g.1.iter().any(|(raw, _)| *raw == self.raw) {
                g.1.push((self.raw, self.timeout));
            }
            g.0 > 0
        });
        if code == IN_PROGRESS {
            return if in_group { Ok(()) } else { self.wait_ready(operation) };
        }
        ffi::check(self.nccl, operation, code, self.raw)
    }
}

/// Refuses an NCCL operation issued while this thread's NCCL group is open (`depth > 0`) other
/// than by a [`crate::Grouped`] member (`member`): NCCL would only record it until the group's
/// end, but the door orders and releases its buffers as if it were queued, so a buffer dropped
/// in the group's body was written after its release (audit 2026-11-27f F12-1).
fn check_not_in_foreign_group(operation: &'static str, depth: u32, member: bool) -> Result<()> {
    if depth > 0 && !member {
        return Err(Error::GroupMisuse {
            operation,
            problem: "issued inside a `group` body, but not through the `Grouped` member the body was given: NCCL would queue it \
                      only at the group's end, after its buffers' ordering and release were settled (F12-1); issue it through \
                      the member (`members[i].all_reduce(..)`), or after the group",
        });
    }
    Ok(())
}

/// Refuses, inside an open group (`depth > 0`), an operation on a view whose buffer record is
/// shared (`shared_view`: a half of a `split_at_mut`). NCCL queues a grouped operation only at
/// the group's end, but the door records it when it is issued and lets go of the record then;
/// a write of the other half on another stream in between (this thread's body, or another
/// thread) replaced it as the record's writer, so the buffer's host reads and its release
/// waited for that write and not for the NCCL operation (audit 2026-11-28, G13-4: a host read
/// returned before the grouped receive landed). A whole buffer, or a view of one that is not
/// split, is reachable by this operation alone until the group ends (its `'a` borrow).
fn check_no_shared_view_in_group(operation: &'static str, depth: u32, shared_view: bool) -> Result<()> {
    if depth > 0 && shared_view {
        return Err(Error::GroupMisuse {
            operation,
            problem: "a view passed to a grouped operation is a half of a `split_at_mut`, whose buffer record other streams may \
                      write meanwhile: NCCL queues the operation only at the group's end, and a write of the other half declared \
                      before then would drop it from the record, so the buffer's host reads and release would not wait for it \
                      (G13-4); pass grouped operations whole buffers (or views of a buffer that is not split), or issue the \
                      operation after the group",
        });
    }
    Ok(())
}

/// Polls `ncclCommGetAsyncError` until the communicator is no longer in progress.
fn poll_ready(nccl: &Nccl, raw: RawComm, timeout: Option<Duration>, operation: &'static str) -> Result<()> {
    poll_until_done(
        || {
            let mut state = SUCCESS;
            // SAFETY: a live communicator; writes one result.
            let code = unsafe { (nccl.ncclCommGetAsyncError)(raw, &mut state) };
            ffi::check(nccl, "ncclCommGetAsyncError", code, raw)?;
            if state == IN_PROGRESS { Ok(false) } else { ffi::check(nccl, operation, state, raw).map(|()| true) }
        },
        timeout,
        operation,
    )
}

/// Calls `done` until it answers true (or fails), for at most `timeout` (none: for ever),
/// yielding the thread between calls (the rule of [`poll_ready`], unit-tested without NCCL).
fn poll_until_done(mut done: impl FnMut() -> Result<bool>, timeout: Option<Duration>, operation: &'static str) -> Result<()> {
    let start = Instant::now();
    loop {
        if done()? {
            return Ok(());
        }
        if let Some(timeout) = timeout
            && start.elapsed() > timeout
        {
            return Err(Error::Timeout { operation, after: timeout });
        }
        std::thread::yield_now();
    }
}

/// How long past the drop timeout a drop waits for its finaliser thread's answer before it
/// leaves the finalisation to that thread.
const DROP_GRACE: Duration = Duration::from_secs(1);

/// How a communicator's drop ended, as the dropping thread sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DropOutcome {
    /// Finalised and destroyed: its queued operations completed.
    Finalised,
    /// Aborted (`ncclCommAbort`): its queued operations may never complete.
    Aborted,
    /// The finaliser thread did not answer in time (blocked inside NCCL): it goes on alone.
    LeftToThread,
}

impl DropOutcome {
    /// True when the communicator's queued work is given up on (P12): releases and the
    /// context's teardown must not wait for it.
    fn gives_up_on_work(self) -> bool {
        self != DropOutcome::Finalised
    }
}

/// The dropping thread's wait for its finaliser thread's answer (true: it aborted), at most
/// `bound` plus [`DROP_GRACE`]. It makes no CUDA or NCCL call (the fix of `s9_item2_*`).
fn await_finaliser(done: &std::sync::mpsc::Receiver<bool>, bound: Duration) -> DropOutcome {
    match done.recv_timeout(bound + DROP_GRACE) {
        Ok(false) => DropOutcome::Finalised,
        Ok(true) => DropOutcome::Aborted,
        Err(_) => DropOutcome::LeftToThread,
    }
}

/// What a drop prints when it leaves the finalisation to its thread after waiting `waited`.
fn left_to_thread_message(rank: usize, world_size: usize, waited: Duration) -> String {
    format!(
        "ferrocuda-collectives: dropping the NCCL communicator of rank {rank} of {world_size}: NCCL did not return within \
         {waited:?}; its finalisation is left to a background thread, which aborts it past Config::drop_timeout (that thread \
         and the communicator are leaked if NCCL never returns). Its queued work is given up on: releases leak the memory \
         it may still use instead of waiting for it, and the streams it used are leaked. A process that exits while that \
         thread is still inside NCCL waits for it at exit (at most {exit_wait:?}, then ends with _exit): synchronise the \
         communicator's streams (or abort it) before dropping it",
        exit_wait = super::exit_guard::EXIT_WAIT
    )
}

impl Drop for Communicator {
    fn drop(&mut self) {
        if self.aborted.get() || self.raw.is_null() {
            return;
        }
        // Finalised and destroyed on a thread of its own (issue 29: a drop used to wait for
        // ever for a peer that was gone), which aborts the communicator past the drop timeout.
        // This thread waits for it at most the drop timeout plus a second, then leaves it to
        // finish in the background. After the hand-off this thread makes no CUDA call: on an
        // H200 with NCCL 2.28 (`s9_item2_*`) the drop printed its hand-off message at 1.2 s
        // and returned at 3 s, when the host callback holding the user's stream ended; the only
        // calls it made in between were CUDA's, recording the event that marks the given-up
        // work (`BufferUsage::give_up_on_work`: cuEventCreate, cuEventRecord), blocked while
        // the finaliser thread was inside NCCL (itself blocked as long). So those markers are
        // recorded first, before NCCL runs on the other thread, and committed with no CUDA call.
        let give_up = self.state.prepare_give_up();
        let (nccl, raw, context, bound) = (self.nccl, SendComm(self.raw), self.context.clone(), self.drop_timeout);
        let (rank, world_size) = (self.rank, self.world_size);
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        // Held by the finaliser until its last NCCL or CUDA call: a process that exits while it
        // is still inside NCCL waits for it (bounded) instead of tearing NCCL down under it
        // (`exit_guard`: the exit crash of `s9_item2_*`).
        let in_flight = InFlight::begin();
        let finaliser = std::thread::Builder::new().name("ferrocuda-nccl-drop".into()).spawn(move || {
            let (raw, context, in_flight) = (raw.into_inner(), context, in_flight);
            let aborted = finalise_or_abort(nccl, raw, &context, bound, rank, world_size);
            // The context handle may be the last one (a CUDA call): released before the token.
            drop(context);
            drop(in_flight);
            let _ = done_tx.send(aborted);
        });
        let outcome = match finaliser {
            Ok(_) => await_finaliser(&done_rx, bound),
            Err(_) => {
                // No thread: abort here (bounded by NCCL's abort), never wait for peers.
                eprintln!("ferrocuda-collectives: no thread could be started to finalise an NCCL communicator; it is aborted");
                let _current = self.context.push_current();
                // SAFETY: a live communicator, released here exactly once.
                unsafe { (self.nccl.ncclCommAbort)(self.raw) };
                DropOutcome::Aborted
            }
        };
        if outcome == DropOutcome::LeftToThread {
            eprintln!("{}", left_to_thread_message(rank, world_size, bound + DROP_GRACE));
        }
        if outcome.gives_up_on_work() {
            // The aborted (or still pending) operations' kernels may never end: nothing
            // implicit (buffer drops, the context's teardown) waits for them (P12). No CUDA
            // call: the markers were recorded above.
            give_up.commit(&self.state);
        } else {
            drop(give_up); // destroys the markers (the finaliser is done with NCCL)
        }
    }
}

/// A communicator handle moved to the thread that finalises it (NCCL communicators may be
/// used from any thread, one at a time; the dropping thread no longer uses it).
struct SendComm(RawComm);

// SAFETY: see the type's documentation.
unsafe impl Send for SendComm {}

impl SendComm {
    /// The handle (a method, so that a closure calling it captures the whole `SendComm`).
    fn into_inner(self) -> RawComm {
        self.0
    }
}

/// Finalises the communicator `raw` of `context` within `bound`, then destroys it; past the
/// bound (or on an error) aborts it with a message instead. True when it was aborted.
fn finalise_or_abort(nccl: &Nccl, raw: RawComm, context: &Context, bound: Duration, rank: usize, world_size: usize) -> bool {
    let abort = || {
        let _current = context.push_current();
        // SAFETY: a live communicator, released here exactly once.
        unsafe { (nccl.ncclCommAbort)(raw) };
        true
    };
    // The finaliser's own thread, but popped all the same: nothing of ferrocuda's stays current.
    let Ok(current) = context.push_current() else {
        return abort();
    };
    // SAFETY: a live communicator; finalising flushes its queued operations (non-blocking: it
    // returns in progress, and the wait below is bounded).
    let code = unsafe { (nccl.ncclCommFinalize)(raw) };
    let finalised = if code != SUCCESS && code != IN_PROGRESS {
        ffi::check(nccl, "ncclCommFinalize", code, raw)
    } else {
        poll_ready(nccl, raw, Some(bound), "ncclCommFinalize")
    };
    if let Err(error) = finalised {
        eprintln!("{}", drop_abort_message(rank, world_size, &error));
        return abort();
    }
    // SAFETY: finalised above; destroyed exactly once.
    unsafe { (nccl.ncclCommDestroy)(raw) };
    drop(current);
    false
}

/// What a drop that could not finalise its communicator prints before aborting it.
fn drop_abort_message(rank: usize, world_size: usize, error: &Error) -> String {
    format!(
        "ferrocuda-collectives: dropping the NCCL communicator of rank {rank} of {world_size} could not finalise it ({error}); it \
         is aborted (ncclCommAbort) rather than waited for: operations it still had queued are cancelled, so their output \
         buffers may hold partial results, and a peer rank may be gone. Call Communicator::synchronize (with a \
         Config::timeout) before dropping to get this as an error, or raise Config::drop_timeout if the work was only slow"
    )
}

impl std::fmt::Debug for Communicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Communicator")
            .field("rank", &self.rank)
            .field("world_size", &self.world_size)
            .field("device", &self.context.device().ordinal())
            .finish()
    }
}

/// A [`Communicator`] with the stream its operations are queued on: the NCCL implementation
/// of [`Collectives`], on device views (`buffer.slice(..)`, `buffer.slice_mut(..)`).
///
/// Operations return once queued, through [`Stream::enqueue`] with the views they read and
/// write: the stream waits for those buffers' earlier work on other streams, and their later
/// work, host copies and drops wait for the operation.
#[derive(Clone, Copy)]
pub struct OnStream<'c> {
    comm: &'c Communicator,
    stream: &'c Stream,
}

impl<'c> OnStream<'c> {
    /// Queues the NCCL call `call` (named `name` in errors) through the stream's door, with
    /// `accesses` (the communicator's state first, then the views the call reads and writes)
    /// declared, and hands it the NCCL library and the stream handle.
    fn enqueue(&self, name: &'static str, accesses: &[BufferAccess<'_>], call: impl FnOnce(&Nccl, RawStream) -> ffi::NcclResult) -> Result<()> {
        let depth = GROUP.with(|g| g.borrow().0);
        check_not_in_foreign_group(name, depth, crate::api::issuing_member())?;
        // The views (after the communicator's own state, which only this thread declares: a
        // `Communicator` is not `Sync`).
        check_no_shared_view_in_group(name, depth, accesses.iter().skip(1).any(BufferAccess::is_shared))?;
        self.stream.enqueue(name, accesses, |stream| self.comm.issue(name, |nccl| call(nccl, stream.get().cast())))
    }

    /// The communicator.
    pub fn comm(&self) -> &'c Communicator {
        self.comm
    }

    /// The stream.
    pub fn stream(&self) -> &'c Stream {
        self.stream
    }
}

/// The device address of a view, as NCCL takes it.
fn address<T>(view: &DeviceView<'_, T>) -> *mut c_void {
    view.as_device_ptr().address() as usize as *mut c_void
}

/// The device address of a writable view, as NCCL takes it.
fn address_mut<T>(view: &DeviceViewMut<'_, T>) -> *mut c_void {
    view.as_device_ptr().address() as usize as *mut c_void
}

fn reduce_op(op: ReduceOp) -> i32 {
    match op {
        ReduceOp::Sum => 0,
        ReduceOp::Prod => 1,
        ReduceOp::Max => 2,
        ReduceOp::Min => 3,
        ReduceOp::Avg => 4,
    }
}

impl Collectives for OnStream<'_> {
    type Src<'a, T: Element> = DeviceView<'a, T>;
    type Dst<'a, T: Element> = DeviceViewMut<'a, T>;
    const DEFERS_GROUPED_OPS: bool = false;

    fn rank(&self) -> usize {
        self.comm.rank
    }

    fn world_size(&self) -> usize {
        self.comm.world_size
    }

    fn all_reduce<T: Element>(&self, send: DeviceView<'_, T>, mut recv: DeviceViewMut<'_, T>, op: ReduceOp) -> Result<()> {
        check_len("all_reduce", "recv", send.len(), recv.len())?;
        let (s, r, n, comm) = (address(&send), address_mut(&recv), send.len(), self.comm.raw);
        // SAFETY: both views hold n elements of T on this rank's GPU, alive for the call and,
        // declared to the door, until the stream passes the operation.
        self.enqueue(
            "ncclAllReduce",
            &[BufferAccess::library_state(&self.comm.state), BufferAccess::read(&send), BufferAccess::write(&mut recv)],
            |nccl, stream| unsafe { (nccl.ncclAllReduce)(s, r, n, T::DATA_TYPE as i32, reduce_op(op), comm, stream) },
        )
    }

    fn all_reduce_in_place<T: Element>(&self, mut buf: DeviceViewMut<'_, T>, op: ReduceOp) -> Result<()> {
        let (p, n, comm) = (address_mut(&buf), buf.len(), self.comm.raw);
        // SAFETY: as above; NCCL supports sendbuff == recvbuff.
        self.enqueue("ncclAllReduce", &[BufferAccess::library_state(&self.comm.state), BufferAccess::write(&mut buf)], |nccl, stream| unsafe {
            (nccl.ncclAllReduce)(p, p, n, T::DATA_TYPE as i32, reduce_op(op), comm, stream)
        })
    }

    fn broadcast<T: Element>(&self, mut buf: DeviceViewMut<'_, T>, root: usize) -> Result<()> {
        check_rank("broadcast", root, self.world_size())?;
        let (p, n, comm) = (address_mut(&buf), buf.len(), self.comm.raw);
        // SAFETY: as above (in place).
        self.enqueue("ncclBroadcast", &[BufferAccess::library_state(&self.comm.state), BufferAccess::write(&mut buf)], |nccl, stream| unsafe {
            (nccl.ncclBroadcast)(p, p, n, T::DATA_TYPE as i32, root as i32, comm, stream)
        })
    }

    fn reduce<T: Element>(&self, send: DeviceView<'_, T>, mut recv: DeviceViewMut<'_, T>, op: ReduceOp, root: usize) -> Result<()> {
        check_rank("reduce", root, self.world_size())?;
        if self.rank() == root {
            check_len("reduce", "recv", send.len(), recv.len())?;
        }
        let (s, r, n, comm) = (address(&send), address_mut(&recv), send.len(), self.comm.raw);
        // SAFETY: as above; recv is written on the root only.
        self.enqueue(
            "ncclReduce",
            &[BufferAccess::library_state(&self.comm.state), BufferAccess::read(&send), BufferAccess::write(&mut recv)],
            |nccl, stream| unsafe { (nccl.ncclReduce)(s, r, n, T::DATA_TYPE as i32, reduce_op(op), root as i32, comm, stream) },
        )
    }

    fn all_gather<T: Element>(&self, send: DeviceView<'_, T>, mut recv: DeviceViewMut<'_, T>) -> Result<()> {
        check_len("all_gather", "recv", send.len() * self.world_size(), recv.len())?;
        let (s, r, n, comm) = (address(&send), address_mut(&recv), send.len(), self.comm.raw);
        // SAFETY: recv holds world_size * n elements.
        self.enqueue(
            "ncclAllGather",
            &[BufferAccess::library_state(&self.comm.state), BufferAccess::read(&send), BufferAccess::write(&mut recv)],
            |nccl, stream| unsafe { (nccl.ncclAllGather)(s, r, n, T::DATA_TYPE as i32, comm, stream) },
        )
    }

    fn reduce_scatter<T: Element>(&self, send: DeviceView<'_, T>, mut recv: DeviceViewMut<'_, T>, op: ReduceOp) -> Result<()> {
        check_len("reduce_scatter", "send", recv.len() * self.world_size(), send.len())?;
        let (s, r, n, comm) = (address(&send), address_mut(&recv), recv.len(), self.comm.raw);
        // SAFETY: send holds world_size * n elements, recv n.
        self.enqueue(
            "ncclReduceScatter",
            &[BufferAccess::library_state(&self.comm.state), BufferAccess::read(&send), BufferAccess::write(&mut recv)],
            |nccl, stream| unsafe { (nccl.ncclReduceScatter)(s, r, n, T::DATA_TYPE as i32, reduce_op(op), comm, stream) },
        )
    }

    fn send<T: Element>(&self, buf: DeviceView<'_, T>, peer: usize) -> Result<()> {
        check_rank("send", peer, self.world_size())?;
        let (p, n, comm) = (address(&buf), buf.len(), self.comm.raw);
        // SAFETY: buf holds n elements.
        self.enqueue("ncclSend", &[BufferAccess::library_state(&self.comm.state), BufferAccess::read(&buf)], |nccl, stream| unsafe {
            (nccl.ncclSend)(p, n, T::DATA_TYPE as i32, peer as i32, comm, stream)
        })
    }

    fn recv<T: Element>(&self, mut buf: DeviceViewMut<'_, T>, peer: usize) -> Result<()> {
        check_rank("recv", peer, self.world_size())?;
        let (p, n, comm) = (address_mut(&buf), buf.len(), self.comm.raw);
        // SAFETY: buf holds n elements.
        self.enqueue("ncclRecv", &[BufferAccess::library_state(&self.comm.state), BufferAccess::write(&mut buf)], |nccl, stream| unsafe {
            (nccl.ncclRecv)(p, n, T::DATA_TYPE as i32, peer as i32, comm, stream)
        })
    }

    fn group_begin(_: crate::api::GroupToken) -> Result<()> {
        if GROUP.with(|g| g.borrow().0) > 0 {
            return Err(Error::GroupMisuse {
                operation: "group",
                problem: "a group of NCCL operations begun inside another one: NCCL issues the inner group's operations only at the \
                          outer group's end, after the inner group's buffers are released to the caller (F12-1); issue them through \
                          the outer group's members instead",
            });
        }
        let nccl = ffi::nccl()?;
        // SAFETY: no arguments; balanced by group_end.
        ffi::check(nccl, "ncclGroupStart", unsafe { (nccl.ncclGroupStart)() }, std::ptr::null_mut())?;
        GROUP.with(|g| g.borrow_mut().0 += 1);
        Ok(())
    }

    fn group_end(_: crate::api::GroupToken) -> Result<()> {
        let nccl = ffi::nccl()?;
        let touched = GROUP.with(|g| {
            let mut g = g.borrow_mut();
            g.0 = g.0.saturating_sub(1);
            if g.0 == 0 { std::mem::take(&mut g.1) } else { Vec::new() }
        });
        // SAFETY: ends the group of the matching group_begin.
        let code = unsafe { (nccl.ncclGroupEnd)() };
        if code == IN_PROGRESS {
            // Non-blocking communicators: the group completes asynchronously; wait for each.
            for (raw, timeout) in touched {
                poll_ready(nccl, raw, timeout, "ncclGroupEnd")?;
            }
            return Ok(());
        }
        ffi::check(nccl, "ncclGroupEnd", code, std::ptr::null_mut())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// F12-1 (audit 2026-11-27f): an NCCL operation inside an open group is refused unless a
    /// `Grouped` member issues it; outside a group every operation goes on. (The GPU half,
    /// `f12_1_*` in tests/gpu_nccl.rs, shows the receive that wrote a freed buffer refused.)
    #[test]
    fn f12_1_an_operation_inside_an_open_group_is_refused_unless_a_member_issues_it() {
        assert!(check_not_in_foreign_group("ncclRecv", 0, false).is_ok());
        assert!(check_not_in_foreign_group("ncclRecv", 1, true).is_ok());
        let refused = check_not_in_foreign_group("ncclRecv", 1, false).unwrap_err();
        assert!(matches!(refused, Error::GroupMisuse { operation: "ncclRecv", .. }), "{refused:?}");
        assert!(refused.to_string().contains("`Grouped` member"), "{refused}");
    }

    /// G13-4 (audit 2026-11-28): inside an open group, an operation on a half of a split
    /// buffer (a shared record) is refused; outside a group, or on a view that is not split,
    /// it goes on. (The GPU half, `g13_4_*` in tests/gpu_g13.rs, shows the host read that did
    /// not wait for the grouped receive.)
    #[test]
    fn g13_4_a_grouped_operation_on_a_split_half_is_refused() {
        assert!(check_no_shared_view_in_group("ncclRecv", 0, true).is_ok());
        assert!(check_no_shared_view_in_group("ncclRecv", 1, false).is_ok());
        let refused = check_no_shared_view_in_group("ncclRecv", 1, true).unwrap_err();
        assert!(matches!(refused, Error::GroupMisuse { operation: "ncclRecv", .. }), "{refused:?}");
        assert!(refused.to_string().contains("split_at_mut"), "{refused}");
    }

    /// Issue 29: a communicator's drop never waits without a bound: with no timeout set, the
    /// drop's bound is [`DEFAULT_DROP_TIMEOUT`]; an explicit drop timeout wins over the
    /// operations' timeout.
    #[test]
    fn s9_nccl_drop_wait_is_always_bounded() {
        assert_eq!(Config::new().drop_bound(), DEFAULT_DROP_TIMEOUT);
        assert_eq!(Config::new().timeout(Duration::from_secs(3)).drop_bound(), Duration::from_secs(3));
        assert_eq!(Config::new().timeout(Duration::from_secs(3)).drop_timeout(Duration::from_millis(5)).drop_bound(), Duration::from_millis(5));
    }

    /// Issue 29: the finalisation a drop waits for that never completes (a peer gone) ends in
    /// a timeout after the bound, and the message says what the abort did and what to do.
    #[test]
    fn s9_nccl_drop_of_a_communicator_that_never_finalises_times_out_and_says_so() {
        let start = Instant::now();
        let outcome = poll_until_done(|| Ok(false), Some(Duration::from_millis(50)), "ncclCommFinalize");
        let waited = start.elapsed();
        assert!(matches!(outcome, Err(Error::Timeout { operation: "ncclCommFinalize", .. })), "{outcome:?}");
        assert!(waited >= Duration::from_millis(50) && waited < Duration::from_secs(5), "{waited:?}");
        let message = drop_abort_message(0, 2, &outcome.unwrap_err());
        assert!(message.contains("ncclCommAbort") && message.contains("synchronize") && message.contains("drop_timeout"), "{message}");
        // A finalisation that completes, or fails, ends the wait at once.
        assert!(poll_until_done(|| Ok(true), None, "x").is_ok());
        assert!(poll_until_done(|| Err(Error::Aborted { operation: "x" }), None, "x").is_err());
    }

    /// `s9_item2` (H200, NCCL 2.28): a drop whose finaliser thread is stuck inside NCCL returned
    /// only after 3 s with a 200 ms drop timeout. The dropping thread's wait is bounded by the
    /// timeout plus [`DROP_GRACE`] whatever its finaliser does (never answers, or dies), and only
    /// a finalisation that completed keeps the work's markers from being committed.
    #[test]
    fn s9_item2_nccl_drop_wait_for_its_finaliser_is_bounded_and_gives_up_unless_finalised() {
        let bound = Duration::from_millis(50);
        // A finaliser that never answers (its sender alive, as a thread blocked inside NCCL).
        let (stuck_tx, stuck_rx) = std::sync::mpsc::channel::<bool>();
        let start = Instant::now();
        let outcome = await_finaliser(&stuck_rx, bound);
        let waited = start.elapsed();
        assert_eq!(outcome, DropOutcome::LeftToThread);
        assert!(waited >= bound + DROP_GRACE && waited < bound + DROP_GRACE + Duration::from_millis(900), "{waited:?}");
        drop(stuck_tx);
        // A finaliser that died without answering: no wait at all, and the work is given up on.
        let (dead_tx, dead_rx) = std::sync::mpsc::channel::<bool>();
        drop(dead_tx);
        let start = Instant::now();
        assert_eq!(await_finaliser(&dead_rx, Duration::from_secs(30)), DropOutcome::LeftToThread);
        assert!(start.elapsed() < Duration::from_secs(1));
        // Answers are taken as given.
        for (aborted, expected) in [(false, DropOutcome::Finalised), (true, DropOutcome::Aborted)] {
            let (tx, rx) = std::sync::mpsc::channel();
            tx.send(aborted).unwrap();
            assert_eq!(await_finaliser(&rx, bound), expected);
        }
        assert!(!DropOutcome::Finalised.gives_up_on_work());
        assert!(DropOutcome::Aborted.gives_up_on_work() && DropOutcome::LeftToThread.gives_up_on_work());
        // The message says what was leaked, what is given up on, and the risk at exit.
        let message = left_to_thread_message(0, 1, bound + DROP_GRACE);
        for needle in ["leaked", "given up on", "exit", "synchronise"] {
            assert!(message.contains(needle), "{needle}: {message}");
        }
    }
}
