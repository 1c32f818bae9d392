//! Errors of the host API. [`DriverError`] is one failed driver call; [`Error`] is what every
//! fallible function returns, with messages that say what to do next.

use crate::LaunchProblem;
pub use crate::driver::DriverError;

impl From<DriverError> for Error {
    /// Always [`Error::Driver`]: no hidden reads. The calls that notice kernel faults
    /// (synchronisations, host copies, allocations) upgrade explicitly to
    /// [`Error::KernelPanic`] (`panic_report::with_kernel_panic`).
    fn from(error: DriverError) -> Self {
        Error::Driver(error)
    }
}

/// Everything that can go wrong in the host API.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The CUDA driver library could not be loaded.
    #[error(
        "no CUDA driver found: could not load libcuda.so.1 (nvcuda.dll on Windows). Install the NVIDIA driver, \
         or add the directory holding libcuda.so.1 to LD_LIBRARY_PATH"
    )]
    NoDriver,
    /// The device ordinal does not exist.
    #[error("there is no CUDA device {ordinal}: the driver sees {count} device(s)")]
    NoDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// How many devices the driver sees.
        count: usize,
    },
    /// A driver call failed.
    #[error(transparent)]
    Driver(DriverError),
    /// A kernel panicked (reported by ferrocuda-device's panic handler); the context, and
    /// with today's drivers the whole process, can no longer use the GPU.
    #[error("{report}\n({source})")]
    KernelPanic {
        /// Where and why (boxed: it is the largest payload, and every `Result` of this crate
        /// carries the size of the largest variant).
        report: Box<crate::KernelPanic>,
        /// The driver's error, from the call that noticed the fault.
        source: DriverError,
    },
    /// A kernel faulted (a sticky error with no panic record) after kernels whose stack ptxas
    /// could not bound had been launched in this process (recursion, or calls through a
    /// function pointer or `dyn` method, vouched for with the builder's `allow_recursion`):
    /// a call chain deeper than the context's stack limit faults like this, so the error names
    /// them and the limit (audit 2026-11-27b, Q4).
    #[error(
        "{source}.\nKernels whose stack depth the build could not bound (recursion, or calls through a function pointer or `dyn` \
         method, allowed with `KernelBuilder::allow_recursion`) were launched in this process: {kernels}. A call chain deeper than \
         the stack limit writes past the thread's stack and faults like this (CUDA names no stack). Give them room with \
         `Context::set_limit(Limit::StackSize, bytes)` before the launches (bytes: the deepest chain's frames, each function's in \
         `ptxas -v`), or bound the depth"
    )]
    StackLimitFault {
        /// Each such kernel, with the context's stack limit and the stack ptxas counted for it
        /// (without the recursive or indirect calls) at its first launch.
        kernels: String,
        /// The driver's error, from the call that noticed the fault.
        source: DriverError,
    },
    /// A launch configuration that breaks a device limit; nothing was launched.
    #[error("cannot launch `{kernel}`: {problem}")]
    InvalidLaunch {
        /// The kernel.
        kernel: String,
        /// The limit that was broken.
        problem: LaunchProblem,
    },
    /// The driver rejected a module; `log` is the JIT compiler's error log.
    #[error("loading module `{module}` failed: {source}{}", if log.is_empty() { String::new() } else { format!("\nJIT log:\n{log}") })]
    ModuleLoad {
        /// Which module.
        module: String,
        /// The driver error.
        source: DriverError,
        /// The JIT error log.
        log: String,
    },
    /// No image in an embedded module can run on this device.
    #[error("module `{module}` has no image for {device} (sm_{arch}): it was built for {built}; rebuild with an older `.arch(..)`")]
    NoCompatibleImage {
        /// Which module.
        module: String,
        /// The device name.
        device: String,
        /// The device's architecture number.
        arch: u32,
        /// What the module has.
        built: String,
    },
    /// A kernel is not in the module (stale PTX, or a wrong name).
    #[error("kernel `{kernel}` is not in module `{module}` (stale build? rebuild the kernel crate)")]
    KernelNotFound {
        /// The kernel asked for.
        kernel: String,
        /// The module searched.
        module: String,
    },
    /// A copy between buffers of different lengths.
    #[error("length mismatch: the destination holds {destination} elements, the source {source_len}")]
    LengthMismatch {
        /// Destination length.
        destination: usize,
        /// Source length.
        source_len: usize,
    },
    /// An allocation the device has no room for.
    #[error(
        "out of device memory: allocating {} on device {device} failed with {} free of {}; \
         free buffers you no longer need, allocate less, or split the work into smaller pieces",
        human_bytes(*requested), human_bytes(*free), human_bytes(*total)
    )]
    OutOfMemory {
        /// The device ordinal.
        device: usize,
        /// Bytes asked for.
        requested: usize,
        /// Bytes free when it failed.
        free: usize,
        /// The device's memory in bytes.
        total: usize,
    },
    /// [`Context::recover`](crate::Context::recover) on a primary context that other
    /// handles still use.
    #[error(
        "cannot reset the primary context of device {device}: {other_handles} other handle(s) to it are still alive; \
         drop every buffer, stream, event, graph and clone of the context first, and call `borrowed::cudarc::forget_cached_contexts()` if \
         you borrowed cudarc's (candle's) context (or use `Context::create` for a fresh context)"
    )]
    ContextStillInUse {
        /// The device ordinal.
        device: usize,
        /// Handles other than the one given to `recover`.
        other_handles: usize,
    },
    /// Peer access between two devices that cannot reach each other.
    #[error("device {from} cannot access memory of device {to} directly (no peer access between them); copy through the host instead")]
    PeerAccessUnsupported {
        /// The accessing device.
        from: usize,
        /// The device whose memory was to be accessed.
        to: usize,
    },
    /// A memset of an element size the driver cannot fill.
    #[error(
        "cannot fill elements of {size} bytes with a memset (1 or 2 bytes or a multiple of 4): upload the values with `copy_from_host` or write them with a kernel"
    )]
    FillElementSize {
        /// `size_of::<T>()`.
        size: usize,
    },
    /// A view of device memory as another element type ([`DeviceSlice::cast`](crate::DeviceSlice::cast))
    /// whose length or address does not fit that type.
    #[error(
        "cannot view {bytes} bytes of `{from}` at {address:#x} as `{to}` ({to_size} bytes, aligned to {to_align}): {problem}; \
         view a range that fits (`slice(a..b)` first) or keep the data in `{from}`"
    )]
    ElementCast {
        /// The element type of the memory.
        from: &'static str,
        /// The element type asked for.
        to: &'static str,
        /// The bytes viewed.
        bytes: usize,
        /// Their device address.
        address: u64,
        /// `size_of` of the type asked for.
        to_size: usize,
        /// `align_of` of the type asked for.
        to_align: usize,
        /// What does not fit.
        problem: &'static str,
    },
    /// `Stream::launch_host_fn` on a stream that is being captured into a graph.
    #[error(
        "cannot queue a run-once host callback while the stream is being captured: the graph would run it on every replay; \
         queue it on the stream after launching the graph instead"
    )]
    HostCallbackInCapture,
    /// After a kernel fault the driver refuses all CUDA work in this process.
    #[error(
        "the GPU cannot be used again in this process after the kernel fault ({} still fails with {}): the driver keeps the \
         process's CUDA state poisoned, so only a new process can use the GPU: restart it, or run fault-prone GPU work in a child process",
        source.call, source.name()
    )]
    ProcessPoisoned {
        /// The sticky error the driver still returns.
        source: DriverError,
    },
    /// A launch without a stream, on a thread that has no current context.
    #[error("no current CUDA context on this thread: create one first (`Context::primary(0)?`) or pass a stream")]
    NoCurrentContext,
    /// The PTX needs a newer PTX ISA than the installed driver can JIT-compile.
    #[error(
        "module `{module}` needs PTX ISA {needs}, but the driver (CUDA {driver}) supports PTX ISA up to {supports}: update the NVIDIA driver, or build the PTX with an older toolchain"
    )]
    PtxIsaTooNew {
        /// Which module.
        module: String,
        /// The `.version` the PTX declares, e.g. "9.1".
        needs: String,
        /// The newest PTX ISA the driver accepts, e.g. "9.0".
        supports: String,
        /// The driver's CUDA version, e.g. "13.0".
        driver: String,
    },
    /// The PTX targets a newer architecture than the device has.
    #[error("module `{module}` targets {target}, which the device (sm_{device_arch}) cannot run: build the PTX for sm_{device_arch} or older")]
    ArchTooNew {
        /// Which module.
        module: String,
        /// The `.target` of the PTX, e.g. "sm_100".
        target: String,
        /// The device's architecture number.
        device_arch: u32,
    },
    /// A kernel in a module does not have the parameters the host launcher passes.
    #[error("kernel `{kernel}` in module `{module}` does not match its launcher: {detail} (stale PTX? rebuild the kernel crate or reload the module)")]
    KernelSignatureMismatch {
        /// The kernel.
        kernel: String,
        /// The module.
        module: String,
        /// What differs.
        detail: String,
    },
    /// A module global (`__constant__` or global variable) is not in the module.
    #[error("module `{module}` has no global `{name}`")]
    GlobalNotFound {
        /// The symbol asked for.
        name: String,
        /// The module searched.
        module: String,
    },
    /// A module global that ferrocuda itself reads and writes (a name starting with
    /// `__ferrocuda_`: the panic handler's record address and claim flag, the launch checks'
    /// tables) was asked for through [`Module::global`](crate::Module::global): handing it out
    /// would let safe code point the device panic handler's stores at any address (audit
    /// 2026-11-28b G14-1).
    #[error(
        "global `{name}` of module `{module}` belongs to ferrocuda (the `__ferrocuda_` prefix: the panic handler's and the launch checks' own state), and is not handed out: rename your global if it is yours"
    )]
    ReservedGlobal {
        /// The symbol asked for.
        name: String,
        /// The module.
        module: String,
    },
    /// A module global that the image does not declare visible outside its module was asked
    /// for through [`Module::global`](crate::Module::global): module-internal data (in a
    /// `#[kernel]` crate, the compiler's own panic locations, string literals, constant tables
    /// and vtables, which the kernels' code was compiled trusting never to change) is never
    /// handed out (audit 2026-11-28h G20R-5), nor any global of a fatbin, whose declarations
    /// ferrocuda cannot read.
    #[error(
        "global `{name}` of module `{module}` is not handed out: {reason}. Declare a global the host may read and write in the device code with external linkage and interior mutability (`#[unsafe(no_mangle)] static mut NAME: T = ..;` in a kernel crate, `.visible .global`/`.visible .const` in PTX), and load the module from PTX or a cubin"
    )]
    ModuleInternalGlobal {
        /// The symbol asked for.
        name: String,
        /// The module.
        module: String,
        /// Why it is not handed out.
        reason: &'static str,
    },
    /// [`Global::write`](crate::Global::write) of a variable the loader did not name
    /// host-writable: the image cannot tell an immutable `static` (whose code may assume its
    /// value) from a `static mut`, nor a `const` `__constant__` (whose values nvcc folds) from
    /// a mutable one, so only the loader's list opens one for writing (session 21, the residual
    /// of audit 2026-11-28h G20R-5; `.const` data since session 23).
    #[error("global `{name}` of module `{module}` is read-only to the host: {}", read_only_reason(*.constant, .name))]
    GlobalReadOnly {
        /// The global.
        name: String,
        /// The module.
        module: String,
        /// It is `.const` (`__constant__`) data (else a `.global`).
        constant: bool,
    },
    /// A module global has another size than the type it is accessed as.
    #[error(
        "global `{name}` of module `{module}` holds {bytes} bytes, but `{type_name}` has {type_bytes}: access it as a type of the same size (an array for an array)"
    )]
    GlobalSizeMismatch {
        /// The symbol.
        name: String,
        /// The module.
        module: String,
        /// Its size in the module.
        bytes: usize,
        /// The Rust type asked for.
        type_name: &'static str,
        /// That type's size.
        type_bytes: usize,
    },
    /// A kernel of a module was launched on a stream of another context.
    #[error("cannot launch `{kernel}`: module `{module}` was loaded into another context than the stream's; load it into the stream's context")]
    WrongContext {
        /// The kernel.
        kernel: String,
        /// The module.
        module: String,
    },
    /// Work on a buffer was queued on a stream of another context. A buffer's free waits only
    /// for its own context, so such work could outlive the memory.
    #[error(
        "{operation}: the stream belongs to a different context than the buffer; queue it on a stream of the buffer's own context (`Stream::new(buffer.context())`)"
    )]
    StreamInOtherContext {
        /// What was asked for.
        operation: &'static str,
    },
    /// Bytes given as a cubin/fatbin that are not a complete one.
    #[error("module `{module}` is not a loadable binary image: {reason}")]
    InvalidImage {
        /// Which module.
        module: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A JIT option out of its range.
    #[error("invalid JIT option: {0}")]
    InvalidJitOption(String),
    /// A kernel argument (or other stream work's buffer) lives in another context than the
    /// stream, without peer access between them (U3, C2).
    #[error(
        "{operation}: buffer `{argument}` belongs to another context than the stream; use a stream of the buffer's context, \
         copy the data over (`copy_from_peer`), or enable peer access first (`stream_context.enable_peer_access(&buffer_context)`)"
    )]
    BufferInOtherContext {
        /// The kernel launched, or the operation.
        operation: String,
        /// The parameter's name (or the buffer's position).
        argument: &'static str,
    },
    /// Work queued through ferrocuda on a stream that the driver records into a graph that
    /// ferrocuda did not begin: another library's capture of a borrowed stream, or a capture
    /// such a stream joined (Q8). Ferrocuda could not keep the work's buffers and module alive
    /// for as long as that graph may be launched.
    #[error(
        "{operation}: the stream is being captured into a graph that ferrocuda did not begin (another library's capture of \
         a borrowed stream, or a capture it joined through an event): ferrocuda cannot keep the buffers and module of work \
         recorded there alive for as long as that graph may be launched, so the work is refused. Queue ferrocuda's work \
         before the owner begins its capture or after it ends it, or record it with ferrocuda's own `Stream::capture` on a \
         stream of ferrocuda's (`Stream::new`) and launch that graph"
    )]
    ForeignCapture {
        /// The launch or operation refused.
        operation: String,
    },
    /// Ferrocuda-owned memory (a [`DeviceBuffer`](crate::DeviceBuffer), or a library's work
    /// area) used by work on a stream of
    /// [`Stream::from_raw_in_owner_captures`](crate::Stream::from_raw_in_owner_captures) while
    /// its owner captures it (audit 2026-11-29d, G23R-2): the work would be recorded into the
    /// owner's graph, and each replay of that graph would use the memory after ferrocuda freed
    /// it, since nothing of the owner's keeps it alive.
    #[error(
        "{operation}: `{argument}` is ferrocuda-owned memory, and the stream is being captured by its owner (torch.cuda.graph): its \
         replays would use it after ferrocuda frees it. Inside the owner's capture use only the owner's memory (the op's tensors; \
         scratch space as an output, `Op::scratch`), or run this work outside the capture"
    )]
    OwnedMemoryInOwnerCapture {
        /// The launch or operation refused.
        operation: String,
        /// The parameter's name (or the buffer's position).
        argument: &'static str,
    },
    /// A kernel launched through a clone of a stream whose lender ended the loan
    /// ([`Stream::end_loan`](crate::Stream::end_loan); audit 2026-11-29d, G23R-2: a clone of a
    /// torch op's stream kept past the op, whose handle torch may destroy, or capture later).
    #[error("{operation}: this stream was lent for one call, which has ended (do not keep its clones); take the stream again from the next call")]
    StreamLoanEnded {
        /// The operation refused.
        operation: String,
    },
    /// Work queued on a stream while a capture of ferrocuda's records it, through a `Stream`
    /// handle that is not the capture's (audit 2026-11-28b G14-5, review2 G14R-4): a clone
    /// made before the capture, on any thread (the capturing one too: another async task
    /// while the capturing one is suspended), or the capture's own handle on another thread,
    /// outside the capture's [`Stream::capture`](crate::Stream::capture) closure; or a fork
    /// of another thread's capture. It would be recorded into that graph
    /// instead of running, and the graph's launcher would not know the buffers it uses. (The
    /// name is historical: the capture's owner was its OS thread until session 15.)
    #[error(
        "{operation}: this stream is being captured into a graph by other code: through another `Stream` handle (its \
         `Stream::begin_capture`, or a `Stream::wait_event` that joined it to a capture), or through this handle on another \
         thread than the one that began the capture; work queued here would be recorded into that graph instead of running. \
         Queue it through the `Stream` value that began the capture (or a clone made from it during the capture) on the \
         thread that began it, inside its `Stream::capture` closure, on another stream, or after the capture ends"
    )]
    CapturedByAnotherThread {
        /// The launch or operation refused.
        operation: String,
    },
    /// The stream's capture began, ended or changed hands between the door's first check of a
    /// piece of work and its queuing (another handle's `begin_capture`, `end_capture`, or a
    /// join, on another thread). The work was ordered and tracked for the state it was checked
    /// in, so it is refused rather than recorded into a graph untracked, or run untracked
    /// (audit 2026-11-28b G14-5, closed in session 15). Nothing was queued.
    #[error(
        "{operation}: the stream's capture began, ended or changed while this work was being queued (through another \
         handle of the stream, on another thread); nothing was queued. Queue it again; to keep it out of (or in) the capture, \
         order it with the thread that begins and ends the capture"
    )]
    CaptureChangedWhileQueued {
        /// The launch or operation refused.
        operation: String,
    },
    /// A call made from inside the `work` closure of a [`Stream::enqueue`](crate::Stream::enqueue)
    /// (audit 2026-11-28c review2, G15R-6) that could wait for a lock: queuing on any stream,
    /// a capture's begin or end, an event's record, wait or query, a host wait for a stream's
    /// work, a declaration ([`Stream::will_use`](crate::Stream::will_use)), a library call that
    /// holds a lock across its queuing, [`Context::synchronize`](crate::Context::synchronize).
    /// `work` runs with its stream's driver-call lock held: such a call could wait for that
    /// lock (its own thread), or for a thread that waits for it (two closures queuing on each
    /// other's streams). Nothing was queued or waited for.
    #[error(
        "{operation}: called from inside the work closure of a `Stream::enqueue`, which holds its stream's driver-call \
         lock until the work returns; inside it ferrocuda waits for no lock (this call could wait for its own thread, or \
         for a thread waiting for it): make the call after that closure returns, or queue the work through the closure's \
         raw handle"
    )]
    NestedDoorCall {
        /// The launch or operation refused.
        operation: String,
    },
    /// A call made inside a stream host callback ([`Stream::launch_host_fn`](crate::Stream::launch_host_fn))
    /// that would queue work or wait for a lock (session 16, with G15R-6): CUDA refuses API
    /// calls there, and the stream's later work waits for the callback, so a thread waiting for
    /// that work (a `Stream::synchronize` inside another stream's door) must never wait, through
    /// the callback, for a lock it holds. Nothing was queued or waited for. Drops are fine
    /// inside a callback (their releases are handed to a release thread).
    #[error(
        "{operation}: called inside a stream host callback, where CUDA refuses API calls (and ferrocuda waits for no lock: \
         the stream's later work waits for the callback); signal another thread to make the call"
    )]
    CallInHostCallback {
        /// The launch or operation refused.
        operation: String,
    },
    /// [`Stream::begin_capture`](crate::Stream::begin_capture) on a stream another library
    /// owns (Q8): the owner can end the capture itself and keep the graph, with ferrocuda's
    /// buffers in it, beyond those buffers' lifetimes.
    #[error(
        "Stream::begin_capture: this stream is borrowed from another library (or waited on another library's raw event), \
         which can end the capture itself and keep a graph that uses ferrocuda's buffers after they are freed; capture on a \
         stream of ferrocuda's own (`Stream::new`) instead, ordered with the borrowed stream through events \
         (`Event::record` on one, `Stream::wait_event` on the other)"
    )]
    CaptureOfBorrowedStream,
    /// [`Stream::wait_event`](crate::Stream::wait_event) on an event recorded into a capture of
    /// ferrocuda's, through a stream another library owns (or that waited on another library's
    /// raw event): the wait would fork the owner's stream into ferrocuda's capture, and
    /// everything the owner queues on it until the capture ends would be recorded into
    /// ferrocuda's graph instead of running (audit 2026-11-28d review, G16R-8). Nothing was
    /// queued.
    #[error(
        "{operation}: this stream is borrowed from another library (or waited on another library's raw event), and the event          was recorded into a capture of ferrocuda's: the wait would fork the owner's stream into that capture, and the          owner's own work on it would be recorded into ferrocuda's graph instead of running; fork a stream of ferrocuda's          own (`Stream::new`) into the capture instead, and order the borrowed stream with it through events recorded          outside the capture"
    )]
    ForkOfBorrowedStream {
        /// The call refused.
        operation: &'static str,
    },
    /// [`Stream::capture`](crate::Stream::capture): the capture it began was ended before its
    /// closure returned (by [`Stream::end_capture`](crate::Stream::end_capture) through another
    /// handle, or inside the closure), so there is no graph of the closure's work to return. A
    /// capture running on the stream now was begun by other code and is left to it: its graph
    /// holds that code's work, not the closure's (audit 2026-11-28d review, G16R-10).
    #[error(
        "Stream::capture: the capture it began was ended before its closure returned (`Stream::end_capture` through another \
         handle, or inside the closure), so there is no graph of the closure's work to return; a capture running on the \
         stream now belongs to the code that began it and is left running; do not end another code's capture"
    )]
    CaptureEndedElsewhere,
    /// An allocation whose size in bytes does not fit in `usize`.
    #[error("cannot allocate {len} elements of {element_bytes} bytes: the size in bytes overflows usize; allocate less")]
    AllocationTooLarge {
        /// Elements asked for.
        len: usize,
        /// `size_of::<T>()`.
        element_bytes: usize,
    },
    /// A wait that gave up (see [`Stream::synchronize_timeout`](crate::Stream::synchronize_timeout)).
    #[error(
        "{operation}: the work was still running after {waited:?} (a kernel that never ends, e.g. one spinning on a flag nobody sets?); it keeps running, and a later synchronisation waits for it"
    )]
    Timeout {
        /// What timed out.
        operation: &'static str,
        /// How long it waited.
        waited: std::time::Duration,
    },
    /// The first launch of a crate's kernel in a context happened inside a stream capture: the
    /// embedded module would have to be loaded there, which a capture forbids (E1a).
    #[error(
        "cannot launch `{kernel}` inside a stream capture: the module `{module}` is not loaded into this context yet, and loading \
         it is not allowed while capturing. Load it before `begin_capture`/`capture`: `context.embedded_image(&{module}::KERNELS)?` \
         (or launch one of its kernels once)"
    )]
    ModuleNotLoadedInCapture {
        /// The kernel.
        kernel: String,
        /// The kernel crate.
        module: String,
    },
    /// A run-time library (cuBLAS, ...) could not be loaded.
    #[error("{library} could not be loaded: add its directory (e.g. /usr/local/cuda/lib64) to LD_LIBRARY_PATH")]
    LibraryUnavailable {
        /// The library.
        library: &'static str,
    },
    /// A run-time library call failed.
    #[error("{library}: {call} failed with {status}")]
    Library {
        /// The library.
        library: &'static str,
        /// The call.
        call: &'static str,
        /// The library's status code.
        status: String,
    },
    /// A GEMM description ([`Gemm`](crate::Gemm)) or the buffers passed with it do not fit:
    /// shapes that disagree, a leading dimension below the rows, a dimension beyond cuBLAS's
    /// 32-bit limit, overlapping output batches, a buffer too short for its layout, or an
    /// epilogue cuBLASLt cannot run for these types.
    #[error("invalid GEMM: {problem}")]
    InvalidGemm {
        /// What is wrong and what to do.
        problem: String,
    },
    /// `Stream::end_capture` failed: something illegal during a capture invalidated it.
    #[error(
        "{source}; the capture was invalidated by an operation that is not allowed while capturing (a synchronous copy or memset \
         on the legacy stream, a synchronisation of the captured stream, work on the captured stream from another context, a query or synchronisation of an event recorded in the capture){}",
        dropped_during_capture(dropped)
    )]
    CaptureFailed {
        /// The driver's error from `cuStreamEndCapture`.
        source: DriverError,
        /// What was dropped during the capture ("DeviceBuffer of 4.00 MiB", "cuFFT plan", in
        /// the order of the drops): their releases were postponed (they cannot have invalidated
        /// the capture) and happen once no capture runs in the context any more. Empty when
        /// nothing was dropped.
        dropped: Vec<String>,
    },
    /// A kernel that stores through a tensor map (`&StoreMap` parameter) was given a map made
    /// for loads.
    #[error(
        "`{kernel}` stores through its tensor map `{parameter}`, but the map passed was made for loads (`TensorMap::tiled`): \
         make it with `TensorMap::tiled_mut(&mut buffer, ..)` (or `tiled_2d_mut`), which borrows the buffer exclusively so that \
         the launch can declare the write"
    )]
    TensorMapNotForStores {
        /// The kernel's symbol.
        kernel: &'static str,
        /// The `&StoreMap` parameter.
        parameter: &'static str,
    },
    /// Work that uses memory living only for the call (a tensor map copied from the call's
    /// stack, a temporary buffer it frees) on a stream that is being captured, or about to be
    /// (audit 2026-11-28, S1): a graph would replay it after that memory is gone.
    #[error(
        "{operation}: cannot run while its stream is being captured into a graph (or a capture of it is starting on another \
         thread): it copies from memory that lives only for this call (a tensor map on its stack, a temporary buffer), which a \
         replay of the graph would read after it is gone. Make the call before `begin_capture`/`capture` or after the capture \
         ends, and do not queue work on a stream that another thread is capturing"
    )]
    CallMemoryInCapture {
        /// The call (`TensorMap::to_device_async`, `hopper_gemm_bf16`, ...).
        operation: &'static str,
    },
    /// A capture begun, or an event waited on, by a thread inside its own
    /// [`Stream::hold_off_capture`](crate::Stream::hold_off_capture) stretch, which keeps
    /// captures from starting until it ends: the thread would wait for itself.
    #[error(
        "a stream capture cannot begin (and no stream can wait on an event) on a thread inside a `Stream::hold_off_capture` \
         stretch: the stretch keeps captures from starting until it ends, so this thread would wait for itself. End the stretch \
         (drop its `NoCapture`) first"
    )]
    CaptureInsideHoldOff,
    /// A stream-ordered allocation on a stream that is being captured into a graph (P2): the
    /// driver would record a graph allocation node whose memory exists only while the graph
    /// runs, so the buffer would point at unmapped memory once the capture ends.
    #[error(
        "{operation}: cannot allocate device memory on a stream that is being captured into a graph: inside a capture the \
         driver records a graph allocation whose memory exists only while the graph runs, so the buffer would escape the \
         capture pointing at unmapped memory. Allocate the buffer before `begin_capture`/`capture` and use it inside"
    )]
    AllocationInCapture {
        /// The allocating call (`DeviceBuffer::zeroed_async`, ...).
        operation: &'static str,
    },
    /// A context-wide synchronisation while a stream capture of the context is still running
    /// (P5): the driver refuses it for the whole capture.
    #[error(
        "{operation}: {captures} stream capture(s) of this context are still running, and the driver refuses to synchronise \
         a context during a capture. End each capture (`Stream::end_capture`, or drop the stream) first; prefer \
         `Stream::capture`, which always ends it. A capturing `Stream` leaked with `mem::forget` (or in an `Rc` cycle) \
         keeps its capture running for the life of the context: synchronise its other streams one by one instead"
    )]
    CaptureInProgress {
        /// What was refused.
        operation: &'static str,
        /// How many captures run in the context.
        captures: usize,
    },
    /// [`Context::recover`](crate::Context::recover) on a device's primary context, which
    /// other libraries of the process may use (P6).
    #[error(
        "Context::recover does not reset the primary context of device {device}: other libraries in this process (cudarc, \
         candle, PyTorch, the CUDA runtime) may use it, and a reset destroys their streams and memory under them. Use \
         `Context::create` for a context you can start over; if you know nothing else uses the primary context, \
         `unsafe {{ context.reset_primary() }}` resets it"
    )]
    SharedContextNotReset {
        /// The device ordinal.
        device: usize,
    },
    /// [`Context::set_limit`](crate::Context::set_limit) lowering a limit of a context that
    /// other libraries may use (the primary context, or one borrowed from another library).
    #[error(
        "Context::set_limit would lower {limit:?} from {current} to {requested} bytes in a context other libraries may use \
         (the primary context, or a borrowed one): their kernels may need the current value. Raise limits only, use a \
         context of your own (`Context::create`), or call `unsafe {{ context.set_limit_unchecked(..) }}`"
    )]
    SharedLimitLowered {
        /// The limit.
        limit: crate::context::options::Limit,
        /// Its value now.
        current: usize,
        /// The value asked for.
        requested: usize,
    },
    /// A wait that an earlier timeout already reported as hopeless (P12): after
    /// [`Stream::synchronize_timeout`](crate::Stream::synchronize_timeout) gave up on work of
    /// this context, releases and host waits no longer block on work that is still running.
    #[error(
        "{operation}: work of this context that `Stream::synchronize_timeout` reported as still running has not finished, so \
         this does not wait for it (it might never end). What needed the wait is left as it is (memory is leaked, not \
         freed under the GPU). Call `Context::synchronize()` to wait for the work for good (it clears the timeout), or end \
         the process"
    )]
    WorkStillRunning {
        /// What did not wait.
        operation: &'static str,
    },
    /// A host query or wait of an [`Event`](crate::Event) whose last record was into a stream
    /// capture, or a stream's wait for it after that capture ended (audit 2026-11-27e E5). Such
    /// an event is a node of the capture's graph, not a point in a stream: the driver refuses
    /// the query and *invalidates the capture* for it, and after the capture it answers
    /// `CUDA_ERROR_INVALID_VALUE` to every use. Refused before the driver sees it.
    #[error(
        "{operation}: the event was last recorded into a stream capture (it is a node of the captured graph, not a point in a \
         stream), so the host cannot query or wait for it (the driver would invalidate the capture for the query), and once \
         the capture ended no stream can wait for it either. Record it outside the capture (before `begin_capture`, after \
         `end_capture`, or on a stream that is not captured) to time or wait for work; inside the capture, other streams of \
         the capture may wait for it (a fork or join)"
    )]
    EventRecordedInCapture {
        /// What was refused.
        operation: &'static str,
    },
    /// [`Stream::wait_event`](crate::Stream::wait_event) on a stream that one capture of
    /// ferrocuda's records, for an event recorded into another (session 18, the rest of G16-2):
    /// CUDA forbids merging two captures' graphs this way (the driver invalidates the captures),
    /// and nothing would keep the event's capture from ending, and its graph from being destroyed,
    /// under the wait. Refused before the driver sees it.
    #[error(
        "{operation}: the waiting stream is being captured into one graph and the event was recorded into another capture; \
         CUDA cannot make one capture's work depend on another's (the driver would invalidate both). Wait on the event from a \
         stream of its own capture (fork or join there), or record a real point outside the captures (after `end_capture`) \
         and wait on that"
    )]
    WaitAcrossCaptures {
        /// What was refused.
        operation: &'static str,
    },
    /// A call that may wait inside the driver (or a library) for all of the context's work
    /// was refused because [`Stream::synchronize_timeout`](crate::Stream::synchronize_timeout)
    /// reported work of the context that has not finished (audit 2026-11-27e E2): loading a
    /// module (the first use of a kernel crate loads its embedded module), the first-use checks
    /// of an explicitly loaded module's kernel, creating a cuBLAS / cuBLASLt handle or a cuFFT
    /// plan. Such a call used to hang the calling thread for as long as the work runs, perhaps
    /// for ever.
    #[error(
        "{operation}: refused, because `Stream::synchronize_timeout` reported work of this context as still running (still \
         so after a 2 s grace) and this call may wait inside the driver for all of the context's work (which might never \
         end). Do it before queuing \
         work that may never end (load a kernel crate's module first, e.g. `Context::embedded_image(&KERNELS)`; make \
         library handles and plans early), or call `Context::synchronize()` to wait for the work (it clears the timeout)"
    )]
    RefusedAfterTimeout {
        /// What was refused (names the module, kernel or library).
        operation: String,
    },
    /// Work (or a host wait) that must come after the work queued on a stream that is being
    /// captured into a graph, when ferrocuda cannot name a point in that stream covering its
    /// work from before the capture (item 1 of issue 29's host review): an event recorded
    /// inside a capture is a graph node, not a point in the stream, so an ordering that rested
    /// on it would be void (the waiting stream would join the capture instead). Ferrocuda
    /// records such a point when the capture begins; this error means another thread queued
    /// work on the stream while the capture was beginning, so that point may miss it.
    #[error(
        "{operation}: the memory was last used on a stream that is being captured into a graph, and this work is not part          of that capture. Ferrocuda orders it after the work that stream queued before the capture began, but another          thread queued work on that stream while the capture was beginning, so that point is not known. End the capture          first (`Stream::end_capture`, or use `Stream::capture`), and do not queue work on a stream from one thread while          another begins capturing it"
    )]
    OrderingAfterCapture {
        /// What was refused.
        operation: &'static str,
    },
    /// `CU_STREAM_PER_THREAD` (cudarc's `per_thread_stream()`, a per-thread default stream)
    /// given where a [`Stream`](crate::Stream) is made from a raw handle (`Stream::from_raw`,
    /// `borrowed::cudarc::stream`): that handle names a different CUDA stream on each host
    /// thread, so one `Stream` value cannot stand for it (D1).
    #[error(
        "CU_STREAM_PER_THREAD (cudarc's `per_thread_stream()`, or a per-thread default stream) names a different CUDA stream on \
         each host thread, so it cannot be adopted as one `Stream` (a buffer used on it from two threads would be ordered and \
         freed on the wrong stream): pass a stream that is one stream on every thread (cudarc's `new_stream()` or \
         `default_stream()`, ferrocuda's `Stream::new`), or borrow the calling thread's per-thread stream for a while with \
         `BorrowedStream::new(&context, CU_STREAM_PER_THREAD)`, which queues on a stream of ferrocuda's ordered with it"
    )]
    PerThreadStream,
    /// [`Stream::will_use`](crate::Stream::will_use) given memory whose use record two threads
    /// may declare work on at once (a half of a `split_at_mut`, a library's state): a
    /// declaration that is not queued at once can be overtaken there (another thread's
    /// ordering replaces it in the record before its work is queued, D2), so it is refused;
    /// [`Stream::will_use_for`](crate::Stream::will_use_for) declares and queues under the
    /// record's lock.
    #[error(
        "Stream::will_use: `{argument}` shares its use record with views that other threads may use at once (a half of a \
         `split_at_mut`, or a library's state), where a declaration made before its work is queued can be overtaken by \
         another thread's and lost: declare and queue together with `Stream::will_use_for(accesses, || queue the work)`, or \
         declare on the whole buffer once the halves are gone"
    )]
    SharedDeclarationNotHeld {
        /// The declared memory (its access's name).
        argument: &'static str,
    },
    /// Memory whose use record this thread holds (declared by the `Stream::will_use_for` or
    /// `Stream::enqueue` whose work is running, for memory other threads may reach: a half of
    /// a `split_at_mut`, a library's state) declared or waited for again from inside that work
    /// (audit 2026-11-27e E8): it would wait for itself (the thread used to deadlock).
    #[error(
        "{operation}: `{argument}` was already declared by the `Stream::will_use_for` (or `Stream::enqueue`) whose work is \
         running on this thread, which holds its record until the work is queued; declaring it again there would wait for \
         itself. Declare it once: either in `will_use_for`'s list (and queue the work inside through raw pointers, \
         `DevicePtr`), or only by the work inside (a typed launch declares its own arguments)"
    )]
    DeclaredAgainWhileHeld {
        /// What was refused.
        operation: String,
        /// The memory declared again (its access's name).
        argument: &'static str,
    },
    /// Memory other threads may use at once (a half of a `split_at_mut`, a library's state)
    /// declared inside the `work` of a [`Stream::will_use_for`](crate::Stream::will_use_for)
    /// that holds the use records of other such memory (session 17). Waiting there for this
    /// record's lock, while holding those, could wait for ever: another thread may hold this
    /// record and wait for one of those (two threads whose works declare crossed halves of two
    /// split buffers deadlocked). So a thread that holds shared records takes no other; nothing
    /// was declared or queued.
    #[error(
        "{operation}: `{argument}` is memory other threads may use at once (a half of a split buffer, a library's state), \
         declared inside the work of a `Stream::will_use_for` that holds the records of other such memory; waiting for its \
         record there could deadlock with a thread that holds it and waits for those. Declare all of the work's shared \
         memory in the one `will_use_for` (and queue the work inside through raw pointers, `DevicePtr`), or declare it \
         after the work returns"
    )]
    SharedDeclarationWhileHeld {
        /// What was refused.
        operation: String,
        /// The memory declared (its access's name).
        argument: &'static str,
    },
    /// A capture's begin or an event wait ([`Stream::begin_capture`](crate::Stream::begin_capture),
    /// [`Stream::wait_event`](crate::Stream::wait_event), `wait_raw_event`) inside the `work`
    /// of a [`Stream::will_use_for`](crate::Stream::will_use_for) that holds the use records of
    /// memory other threads may use at once (session 17). Those calls wait for the stream's
    /// [`Stream::hold_off_capture`](crate::Stream::hold_off_capture) stretches on other
    /// threads, whose work may wait for one of the held records: a deadlock. Nothing was done.
    #[error(
        "{operation}: called inside the work of a `Stream::will_use_for` that holds the use records of memory other threads \
         may use at once (a half of a split buffer, a library's state); it waits for other threads' \
         `Stream::hold_off_capture` stretches, whose work may wait for those records. Make the call before the \
         `will_use_for` or after its work returns"
    )]
    WaitWhileDeclarationHeld {
        /// What was refused.
        operation: String,
    },
    /// A handle or allocation borrowed from another library (`ferrocuda_host::borrowed`) does
    /// not fit what it was borrowed as (wrong context, misaligned, too short, ...).
    #[error("{problem}")]
    BorrowedHandle {
        /// What is wrong and what to do.
        problem: String,
    },
    /// [`Context::bind_to_thread`](crate::Context::bind_to_thread) (or
    /// [`Context::primary`](crate::Context::primary), which calls it) on a thread where a
    /// [`CurrentGuard`](crate::CurrentGuard) or one of ferrocuda's own binds (the `work` of a
    /// door call such as `Stream::enqueue`) is alive, for a context that is not current
    /// (G23S-2, audit 2026-11-29e): it would replace that guard's entry on the thread's context
    /// stack with a context the guard does not keep alive, and the guard's drop would then pop
    /// or re-push the wrong context. Nothing was changed.
    #[error(
        "{operation}: called while a `push_current` guard (or the work of a door call such as `Stream::enqueue`) is alive \
         on this thread; making another context current for good would replace the guard's entry on the thread's context \
         stack. Use `Context::push_current` (a guard) inside, or call it after the guard drops"
    )]
    BindInsideGuard {
        /// The call refused.
        operation: &'static str,
    },
}

/// The part of [`Error::CaptureFailed`]'s message that names the drops of the capture.
fn dropped_during_capture(dropped: &[String]) -> String {
    if dropped.is_empty() {
        return String::new();
    }
    format!(
        ". Dropped during the capture: {} (their releases waited for the end of the capture and are done now; they did not \
         invalidate it)",
        dropped.join(", ")
    )
}

/// Bytes as a short human-readable size ("1.50 GiB").
pub(crate) fn human_bytes(bytes: usize) -> String {
    const UNITS: [&str; 5] = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{bytes} bytes") } else { format!("{value:.2} {}", UNITS[unit]) }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a global is read-only to the host, and how to name it ([`Error::GlobalReadOnly`]).
fn read_only_reason(constant: bool, name: &str) -> String {
    let what = if constant {
        "it is `.const` (`__constant__`) data, and nvcc folds the values of a `const`-qualified `__constant__` into the code while declaring it exactly as a mutable one, so the image does not say whether the kernels read it. If it is a `__constant__` that is not `const`"
    } else {
        "the image does not say whether the device code may assume its value (rustc declares an immutable `static` and a `static mut` alike). If it is a `static mut`, an `UnsafeCell` static or a non-const `__device__` variable"
    };
    format!("{what}, name it when loading: `JitOptions::new().host_writable_globals([\"{name}\"])` (part of the load's safety contract)")
}

#[cfg(test)]
mod tests {
    use cudarc::driver::sys;

    use super::*;

    #[test]
    fn out_of_memory_names_the_sizes_and_what_to_do() {
        let error = Error::OutOfMemory { device: 0, requested: 3 << 40, free: 1536 << 20, total: 80 << 30 };
        let message = error.to_string();
        assert!(message.contains("allocating 3.00 TiB on device 0"), "{message}");
        assert!(message.contains("1.50 GiB free of 80.00 GiB"), "{message}");
        assert!(message.contains("free buffers you no longer need"), "{message}");
    }

    /// Issue 21: a failed capture names what was dropped during it, in drop order.
    #[test]
    fn capture_failed_names_the_drops_during_the_capture() {
        use crate::context::Released;
        let dropped: Vec<String> =
            [Released::DeviceBuffer(4 << 20), Released::CufftPlan, Released::PinnedBuffer(512)].iter().map(ToString::to_string).collect();
        // The driver's part of the message asks the driver for the code's name: only the
        // named drops are checked without one.
        let message = dropped_during_capture(&dropped);
        assert!(message.contains("Dropped during the capture: DeviceBuffer of 4.00 MiB, cuFFT plan, PinnedBuffer of 512 bytes"), "{message}");
        assert!(message.contains("did not invalidate it"), "{message}");
        assert_eq!(dropped_during_capture(&[]), "");
        if crate::driver_present() {
            let source = DriverError { call: "cuStreamEndCapture", code: sys::CUresult::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED };
            let full = Error::CaptureFailed { source, dropped }.to_string();
            assert!(full.ends_with(&message), "{full}");
        }
    }

    /// Issue 21: a load map given to a kernel that stores through it names the fix.
    #[test]
    fn a_load_map_for_stores_names_tiled_mut() {
        let message = Error::TensorMapNotForStores { kernel: "tma_copy_boxes", parameter: "dst" }.to_string();
        assert!(message.contains("`tma_copy_boxes` stores through its tensor map `dst`"), "{message}");
        assert!(message.contains("TensorMap::tiled_mut(&mut buffer, ..)"), "{message}");
    }

    #[test]
    fn sticky_errors_tell_how_to_start_over() {
        let error = DriverError { call: "cuMemAlloc", code: sys::CUresult::CUDA_ERROR_ILLEGAL_ADDRESS };
        assert!(error.is_sticky());
        // Display asks the driver for the name, so only the advice is checked without one.
        let advice = "can no longer be used (every later call in it fails)";
        if crate::driver_present() {
            assert!(error.to_string().contains(advice), "{error}");
        }
        assert_eq!(human_bytes(512), "512 bytes");
        assert_eq!(human_bytes(2048), "2.00 KiB");
    }
}
