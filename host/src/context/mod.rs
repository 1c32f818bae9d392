//! Contexts. The default is the device's primary context, the one runtime-API libraries
//! (cuBLAS, cuFFT, ...) also use, so work and memory can be shared with them.

use std::any::Any;
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use cudarc::driver::sys;

use crate::DeviceLimits;
use crate::EmbeddedModule;
use crate::KernelSignature;
use crate::device::Device;
use crate::driver::{self, DriverError};
use crate::embedded::LoadedEmbedded;
use crate::error::{Error, Result};
use crate::loader::init;
use crate::panic_report::ContextRecord;

mod capture;
mod current;
pub(crate) mod options;
mod peer;
mod recover;
mod release;

pub(crate) use capture::any_capture_running;
pub use current::CurrentGuard;
pub use options::{Limit, SchedulePolicy};
use recover::poisoned_if_sticky;
pub(crate) use release::{Handle, HostCallbackScope, Released, hand_off_releases, in_host_callback};

thread_local! {
    /// The ferrocuda context last bound on this thread (weak: binding does not keep it alive).
    pub(crate) static CURRENT: RefCell<Weak<ContextInner>> = const { RefCell::new(Weak::new()) };
}

/// The primary contexts this process holds through ferrocuda, one per device at most, so
/// that every `Context::primary(n)` shares one handle (and one set of loaded modules), and
/// [`Context::recover`] can tell whether any other handle is still alive. Weak: it keeps no
/// context, and so no driver object of one, alive (G22S-2's audit, docs/host-safety.md).
pub(crate) static PRIMARY: Mutex<Vec<Weak<ContextInner>>> = Mutex::new(Vec::new());

/// A CUDA context; cloning shares it. Streams, buffers and modules keep their context alive.
///
/// Two kinds (driver reference:
/// [context management](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__CTX.html),
/// [primary context management](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__PRIMARY__CTX.html)):
/// - [`Context::primary`]: the device's primary context, the one the CUDA runtime and its
///   libraries (cuBLAS, cuFFT, ...) use, so memory and streams can be shared with them. It is
///   reference-counted by the driver: dropping the last ferrocuda handle releases our
///   reference and never resets it under another component's feet.
/// - [`Context::create`]: a context of its own (`cuCtxCreate`), isolated from every other
///   component of the process: nobody else can reset or poison it. It costs device memory
///   and context switches, so use it when isolation matters (plug-ins, fault recovery).
#[derive(Clone)]
pub struct Context {
    pub(crate) inner: Arc<ContextInner>,
}

pub(crate) struct ContextInner {
    pub(crate) raw: sys::CUcontext,
    pub(crate) device: Device,
    pub(crate) kind: ContextKind,
    pub(crate) limits: DeviceLimits,
    /// Embedded modules loaded into this context, loaded on first launch (runtime-API style).
    pub(crate) embedded: Mutex<Vec<LoadedEmbedded>>,
    /// The device supports stream-ordered allocation (`cuMemAllocAsync`); buffers then come
    /// from its default pool and are freed stream-ordered.
    pub(crate) memory_pools: bool,
    /// Streams of this context being captured through `Stream::begin_capture`.
    pub(crate) capturing: AtomicUsize,
    /// Those of them ordered with the legacy default stream (`StreamOrdering::WithLegacyDefault`).
    pub(crate) capturing_with_legacy: AtomicUsize,
    /// Set when `Stream::synchronize_timeout` gave up on work of this context (P12), cleared
    /// once that work ended (its markers in `hung` completed) or a `Context::synchronize`
    /// returned: while set, releases and teardown never block on work that is still running
    /// (they leak instead).
    pub(crate) timed_out: AtomicBool,
    /// Events recorded after the work each timeout gave up on (null: none could be recorded).
    pub(crate) hung: Mutex<Vec<Handle<sys::CUevent>>>,
    /// Releases of resources dropped while a capture was running (E1b), run when it ends.
    pub(crate) deferred: Mutex<release::Deferred>,
    /// Releases from host callbacks handed to the release thread and not yet performed.
    pub(crate) handed_off: AtomicUsize,
    /// Explicit modules whose kernels were launched into a capture, by capturing stream: the
    /// graph made by `end_capture` keeps them loaded (U5).
    pub(crate) captured_modules: Mutex<Vec<(usize, Arc<dyn Any + Send + Sync>)>>,
    /// Contexts whose memory kernels of this one may use (`enable_peer_access`), held weakly:
    /// a peer whose last handle dropped is released (a primary context is reset, a created
    /// one destroyed), which ends the peer access, and a later context may get the same raw
    /// handle without it (audit 2026-11-28b G14-2: a raw handle kept here let the next primary
    /// context of the peer device through the door without peer access).
    pub(crate) peers: Mutex<Vec<(Weak<ContextInner>, usize)>>,
    /// For a context borrowed from another library: what keeps it alive (`crate::borrowed`).
    pub(crate) keep_alive: Option<Arc<dyn Any + Send + Sync>>,
    /// This context's panic record (G22S-2, audit 2026-11-29c): allocated in this context at
    /// its first module load, written only by its own modules' kernels, freed by the teardown
    /// after the modules are unloaded and before the context is released or destroyed.
    /// Page-locked memory dies with the context it was allocated in, so no record may be
    /// shared across contexts (the one per process used to be freed with whichever context
    /// made it, and written afterwards by the panics of every other).
    pub(crate) panic_record: ContextRecord,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ContextKind {
    Primary,
    Created(SchedulePolicy),
    /// Owned by another library (`crate::borrowed`): never released or destroyed here.
    Borrowed,
}

// SAFETY: a CUcontext may be used from any thread once made current there; every use binds it.
unsafe impl Send for ContextInner {}
// SAFETY: as above; the mutable state is behind a Mutex.
unsafe impl Sync for ContextInner {}

impl ContextInner {
    fn new(raw: sys::CUcontext, device: Device, kind: ContextKind, limits: DeviceLimits) -> Self {
        ContextInner {
            raw,
            device,
            kind,
            limits,
            embedded: Mutex::new(Vec::new()),
            memory_pools: device.supports_memory_pools().unwrap_or(false) && std::env::var_os("FERROCUDA_NO_MEMORY_POOLS").is_none(),
            capturing: AtomicUsize::new(0),
            capturing_with_legacy: AtomicUsize::new(0),
            timed_out: AtomicBool::new(false),
            hung: Mutex::new(Vec::new()),
            deferred: Mutex::new(release::Deferred::default()),
            handed_off: AtomicUsize::new(0),
            captured_modules: Mutex::new(Vec::new()),
            peers: Mutex::new(Vec::new()),
            keep_alive: None,
            panic_record: ContextRecord::new(raw),
        }
    }

    /// A context another library owns (`crate::borrowed`), kept alive by `keep_alive` or, for
    /// `None`, by the caller's contract.
    pub(crate) fn borrowed(raw: sys::CUcontext, device: Device, keep_alive: Option<Arc<dyn Any + Send + Sync>>) -> Result<Arc<Self>> {
        let limits = device.launch_limits()?;
        let mut inner = ContextInner::new(raw, device, ContextKind::Borrowed, limits);
        inner.keep_alive = keep_alive;
        Ok(Arc::new(inner))
    }
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Context {
    /// True when buffers of this context come from the device's default memory pool
    /// (`cuMemAllocAsync`) and are freed stream-ordered (`cuMemFreeAsync`). Set
    /// `FERROCUDA_NO_MEMORY_POOLS` to use `cuMemAlloc` instead (frees then wait for the
    /// streams that used the buffer).
    pub fn uses_memory_pools(&self) -> bool {
        self.inner.memory_pools
    }

    /// Retains the primary context of device `ordinal` and makes it current on this thread.
    ///
    /// Every call for the same device returns a handle to the same context while one is
    /// alive. Dropping the last handle releases (never resets) the primary context, so other
    /// components of the process that use it, through ferrocuda or the CUDA runtime, keep
    /// working.
    ///
    /// Keep a handle while you launch: the embedded kernels are loaded into a handle's context
    /// state at its first launch (the module, every kernel's code and check tables: about a
    /// millisecond or more) and unloaded, after a context-wide synchronisation, when its last
    /// handle drops. Code that takes a handle per call and drops it pays both every call
    /// (`borrowed::cudarc::context` caches the handle of cudarc's primary context for this reason).
    ///
    /// It is the one call besides [`Context::bind_to_thread`] that leaves a context current
    /// (as `cudaSetDevice` does for the runtime): every other ferrocuda call leaves the
    /// thread's current context as it found it, whatever the kind of context (session 22).
    ///
    /// # Errors
    /// [`Error::BindInsideGuard`] while a [`CurrentGuard`] (or a door call's `work`) is alive
    /// on this thread and another context is current (see [`Context::bind_to_thread`]): use
    /// [`Context::push_current`] on a handle taken before; the driver's errors.
    pub fn primary(ordinal: usize) -> Result<Self> {
        let context = Self::retain_primary(ordinal)?;
        context.bind_to_thread()?;
        Ok(context)
    }

    /// [`Context::primary`] without making the context current: the handle of the device's
    /// primary context, retained (shared with every other handle of it), the thread's current
    /// context left as it is. For adopting another library's primary context
    /// (`crate::borrowed`, PyTorch's in ferrocuda-torch), which must not change the thread's
    /// current context (session 22), and for use inside a [`CurrentGuard`] or a door call's
    /// work, where [`Context::primary`] is refused (G23S-2). ferrocuda's calls bind the context
    /// for their own driver calls; hold [`Context::push_current`] around raw driver calls.
    ///
    /// # Errors
    /// [`Error::NoDriver`], [`Error::NoDevice`] for an ordinal the driver does not see, and the
    /// driver's errors.
    pub fn retain_primary(ordinal: usize) -> Result<Self> {
        init()?;
        let device = Device::get(ordinal)?;
        let mut registry = PRIMARY.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        registry.retain(|weak| weak.strong_count() > 0);
        if let Some(inner) = registry.iter().filter_map(Weak::upgrade).find(|inner| inner.device == device) {
            return Ok(Context { inner });
        }
        let mut raw = std::ptr::null_mut();
        // SAFETY: writes one context handle; released in Drop.
        unsafe { driver::context::primary_retain(&mut raw, device.raw()) }.map_err(poisoned_if_sticky)?;
        let limits = match device.launch_limits() {
            Ok(limits) => limits,
            Err(e) => {
                // SAFETY: balances the retain above.
                let _ = unsafe { driver::context::primary_release(device.raw()) };
                return Err(e);
            }
        };
        let inner = Arc::new(ContextInner::new(raw, device, ContextKind::Primary, limits));
        registry.push(Arc::downgrade(&inner));
        drop(registry);
        Ok(Context { inner })
    }

    /// Creates a new context of its own on device `ordinal` (`cuCtxCreate`). It is destroyed
    /// when the last handle drops.
    ///
    /// It is never left current on the thread, here or by any later ferrocuda call with it
    /// (each binds it for its own driver calls and restores the context current before): the
    /// CUDA runtime and the libraries over it (PyTorch, cuDNN, a C++ extension) use the
    /// thread's current context for their own allocations, and would otherwise put them into
    /// this one, which ferrocuda destroys when its last handle drops (audit 2026-11-28h
    /// G20R-4). [`Context::bind_to_thread`] and [`Context::push_current`] make it current on
    /// request; what other code then creates in it is destroyed with it. [`Context::current`]
    /// names it (the context ferrocuda last used on this thread).
    ///
    /// Nothing outside this handle can reset it, and a kernel fault in another context does
    /// not touch it: the tool for isolation (plug-ins in one process) and for starting over
    /// after a fault.
    pub fn create(ordinal: usize, schedule: SchedulePolicy) -> Result<Self> {
        init()?;
        let device = Device::get(ordinal)?;
        let limits = device.launch_limits()?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: writes one handle (destroyed in Drop); null parameters ask for a regular
        // context. The driver pushes it onto this thread's context stack.
        unsafe { driver::context::create(&mut raw, std::ptr::null_mut(), schedule.flags(), device.raw()) }.map_err(poisoned_if_sticky)?;
        let mut popped = std::ptr::null_mut();
        // SAFETY: pops what cuCtxCreate pushed, restoring the thread's stack and its current
        // context (G20R-4: the new context is not left current).
        let _ = unsafe { driver::context::pop_current(&mut popped) };
        let context = Context { inner: Arc::new(ContextInner::new(raw, device, ContextKind::Created(schedule), limits)) };
        context.note_current();
        Ok(context)
    }

    /// The context last bound on this thread, if it is still alive.
    pub fn current() -> Option<Self> {
        CURRENT.with(|c| c.borrow().upgrade()).map(|inner| Context { inner })
    }

    /// Makes this context current on the calling thread (no driver call when it already is),
    /// and leaves it current. ferrocuda's own calls do not need it (each binds its context);
    /// a context of [`Context::create`] made current this way is used by the CUDA runtime and
    /// the libraries over it for their own allocations on this thread, which are destroyed
    /// with the context (G20R-4): prefer [`Context::push_current`], whose guard restores the
    /// previous context.
    ///
    /// # Errors
    /// [`Error::BindInsideGuard`] when the context is not current and a
    /// [`CurrentGuard`] (or the `work` of a door call such as
    /// [`Stream::enqueue`](crate::Stream::enqueue)) is alive on this thread (G23S-2, audit
    /// 2026-11-29e): making it current for good would replace that guard's entry on the
    /// thread's context stack with a context the guard does not keep alive. Use
    /// [`Context::push_current`] there.
    pub fn bind_to_thread(&self) -> Result<()> {
        if current::entries_alive() {
            let mut top = std::ptr::null_mut();
            // SAFETY: writes one handle.
            unsafe { driver::context::get_current(&mut top) }?;
            if top != self.inner.raw {
                return Err(Error::BindInsideGuard { operation: "Context::bind_to_thread (or Context::primary)" });
            }
        }
        self.bind()?.keep();
        Ok(())
    }

    /// Makes this context current on the calling thread for the life of the returned guard
    /// (ferrocuda's own driver calls), whatever its kind, and the context current before comes
    /// back when it drops. For a created or borrowed context that is G20R-4 (the CUDA runtime
    /// of another library allocates in the thread's current context, and a created context dies
    /// with its last handle, a borrowed one with its owner). For a primary context it is
    /// session 22's residual of the same class: a primary context left current moved another
    /// library's current device (PyTorch's, on a thread where device 1 was current, after a call
    /// on device 0), and made a DLPack call leave the caller's context changed (session 21's
    /// `test_s21.py`). Only [`Context::primary`] and [`Context::bind_to_thread`], whose purpose
    /// it is, leave a context current.
    ///
    /// Cost: one `cuCtxGetCurrent` when the context is already current (no other driver call),
    /// else a `cuCtxPushCurrent` here and a `cuCtxPopCurrent` at the drop (a primary context
    /// used to take one `cuCtxSetCurrent` and no restore: one driver call more, a few tens of
    /// nanoseconds, on calls that queue work of microseconds; measured by `tests/gpu_s22.rs`
    /// in the host crate, printed, not asserted).
    ///
    /// The guard restores through the driver's own context stack (`cuCtxPushCurrent` here,
    /// `cuCtxPopCurrent` at the drop), never by naming the previous context: that context
    /// belongs to someone else, who may destroy it while the guard lives (another thread, or
    /// an owner's keep-alive dropped inside the call), and a handle kept here would then be
    /// dangling, or name a new context that reused its address. Left on the driver's stack,
    /// it is the driver's to track: a destroyed context that comes back current answers
    /// `CUDA_ERROR_CONTEXT_IS_DESTROYED` to its next use, as it would had ferrocuda never run
    /// (the G21 residual of G20R-4, docs/host-safety.md).
    pub(crate) fn bind(&self) -> Result<Bound> {
        let mut current = std::ptr::null_mut();
        // SAFETY: writes one handle.
        unsafe { driver::context::get_current(&mut current) }?;
        let mut restore = None;
        if current != self.inner.raw {
            // Every kind alike (session 22: a primary context too, see above).
            // SAFETY: the context is alive (we hold it); popped by the guard's drop.
            unsafe { driver::context::push_current(self.inner.raw) }?;
            // Counted with the `push_current` guards (G23S-1): a guard dropped or made inside
            // this bind (a door call's `work`) steps over this push or is stepped over by it.
            restore = Some((self.inner.raw, current::bind_pushed(self.inner.raw)));
        }
        self.note_current();
        Ok(Bound { restore, _not_send: std::marker::PhantomData })
    }

    /// Records this context as the one ferrocuda last used on this thread ([`Context::current`]).
    fn note_current(&self) {
        CURRENT.with(|c| {
            let mut c = c.borrow_mut();
            if !std::ptr::eq(c.as_ptr(), Arc::as_ptr(&self.inner)) {
                *c = Arc::downgrade(&self.inner);
            }
        });
    }

    /// The device of this context.
    pub fn device(&self) -> Device {
        self.inner.device
    }

    /// The launch limits of the device.
    pub fn limits(&self) -> &DeviceLimits {
        &self.inner.limits
    }

    /// The raw `CUcontext`.
    pub fn raw(&self) -> sys::CUcontext {
        self.inner.raw
    }

    /// Waits until all work in this context is done; reports a kernel fault if one happened
    /// (with the kernel's panic report when a `#[kernel]` panicked).
    ///
    /// Releases of resources dropped inside host callbacks in this context are performed
    /// first (see [`Context::deferred_releases`]). Returning clears the state a
    /// [`Stream::synchronize_timeout`](crate::Stream::synchronize_timeout) that gave up left
    /// (P12): the work it reported has finished.
    ///
    /// # Errors
    /// [`Error::CaptureInProgress`] while a stream capture of the context runs (the driver
    /// refuses a context-wide synchronisation then): end the capture first. A capture whose
    /// `Stream` was leaked (`mem::forget`) never ends: synchronise the other streams one by
    /// one ([`Stream::synchronize`](crate::Stream::synchronize)) instead.
    /// [`Error::NestedDoorCall`] inside the `work` of a [`Stream::enqueue`](crate::Stream::enqueue):
    /// the wait for the release thread and the postponed releases could wait for that very
    /// work's stream (G15R-6); [`Error::CallInHostCallback`] inside a stream host callback.
    pub fn synchronize(&self) -> Result<()> {
        // Refused inside a door call's work and inside a host callback (where the driver refuses
        // it anyway): the waits below take stream locks (G15R-6).
        release::refuse_inside_door_work("Context::synchronize")?;
        self.wait_for_handed_off_releases();
        self.drain_deferred();
        let captures = self.captures();
        if captures > 0 {
            return Err(Error::CaptureInProgress { operation: "Context::synchronize", captures });
        }
        let _bound = self.bind()?;
        // SAFETY: no arguments.
        unsafe { driver::context::synchronize() }.map_err(crate::panic_report::with_kernel_panic)?;
        if self.inner.timed_out.load(Ordering::Acquire) {
            self.clear_hung();
        }
        Ok(())
    }

    /// Waits for the work queued in this context (the releases' own wait: it does not wait
    /// for the release thread, which may be the caller). After a reported timeout (P12) it
    /// does not block: [`Error::WorkStillRunning`], and the release leaks what it frees.
    pub(crate) fn synchronize_queued_work(&self) -> Result<()> {
        if self.timed_out() {
            return Err(Error::WorkStillRunning { operation: "a release's wait for the context's work" });
        }
        let _bound = self.bind()?;
        // SAFETY: no arguments.
        unsafe { driver::context::synchronize() }.map_err(crate::panic_report::with_kernel_panic)?;
        Ok(())
    }

    /// Remembers that a wait on this context's work gave up (P12): `marker` is an event
    /// recorded after that work (null when none could be recorded: then only a returning
    /// [`Context::synchronize`] clears the state).
    pub(crate) fn note_hung(&self, marker: sys::CUevent) {
        let mut hung = lock(&self.inner.hung);
        hung.push(Handle(marker));
        self.inner.timed_out.store(true, Ordering::Release);
    }

    /// True while work that a [`Stream::synchronize_timeout`](crate::Stream::synchronize_timeout)
    /// gave up on is still running (P12): until it ends, or a [`Context::synchronize`]
    /// returns. Code that would otherwise wait for the context's work in a `Drop` (a library's
    /// teardown) checks it and leaks instead: the work may never end. Costs one atomic load
    /// when no timeout was reported, one event query per reported timeout otherwise.
    pub fn timed_out(&self) -> bool {
        if !self.inner.timed_out.load(Ordering::Acquire) {
            return false;
        }
        let mut hung = lock(&self.inner.hung);
        let Ok(_bound) = self.bind() else {
            return true;
        };
        hung.retain(|marker| {
            if marker.0.is_null() {
                return true;
            }
            // SAFETY: the event is alive (owned by this list). An error other than "not ready"
            // is a faulted context: the work is over then.
            let done = !matches!(unsafe { driver::event::query(marker.0) }, Err(e) if e.code == sys::CUresult::CUDA_ERROR_NOT_READY);
            if done {
                // SAFETY: owned by this list, destroyed once, here.
                let _ = unsafe { driver::event::destroy(marker.0) };
            }
            !done
        });
        let still = !hung.is_empty();
        if !still {
            self.inner.timed_out.store(false, Ordering::Release);
        }
        still
    }

    /// For the calls that may wait inside the driver for every piece of the context's work (a
    /// module load, a library handle's creation; E2, audit 2026-11-27e): while
    /// [`Context::timed_out`], waits up to [`AFTER_TIMEOUT_GRACE`] for the work given up on to
    /// end (work that was only slow, and another thread's first module load, then go on), and
    /// returns [`Error::RefusedAfterTimeout`] naming `operation` if it still runs. One atomic
    /// load when no timeout was reported.
    pub(crate) fn refuse_after_timeout(&self, operation: impl FnOnce() -> String) -> Result<()> {
        if !self.timed_out() {
            return Ok(());
        }
        let until = std::time::Instant::now() + AFTER_TIMEOUT_GRACE;
        while std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(1));
            if !self.timed_out() {
                return Ok(());
            }
        }
        Err(Error::RefusedAfterTimeout { operation: operation() })
    }

    /// Forgets the reported timeouts: the work is over (a context-wide synchronisation returned).
    fn clear_hung(&self) {
        let mut hung = lock(&self.inner.hung);
        for marker in hung.drain(..) {
            if !marker.0.is_null() {
                // SAFETY: owned by the list, destroyed once, here.
                let _ = unsafe { driver::event::destroy(marker.0) };
            }
        }
        self.inner.timed_out.store(false, Ordering::Release);
    }

    /// Free and total device memory in bytes.
    pub fn memory_info(&self) -> Result<(usize, usize)> {
        let _bound = self.bind()?;
        let (mut free, mut total) = (0, 0);
        // SAFETY: writes two sizes.
        unsafe { driver::memory::get_info(&mut free, &mut total) }?;
        Ok((free, total))
    }

    /// The function `symbol` of `module`, loading the module into this context on first use.
    pub(crate) fn embedded_function(&self, module: &'static EmbeddedModule, symbol: &'static str) -> Result<sys::CUfunction> {
        self.with_embedded(module, |loaded| loaded.function(symbol))
    }

    /// The function of `signature` in `module`, for a launch: loads the module into this
    /// context on first use, and checks the function's layout against the launcher's on its
    /// first launch (Q1, Q2).
    pub(crate) fn embedded_launch_function(&self, module: &'static EmbeddedModule, signature: &'static KernelSignature) -> Result<sys::CUfunction> {
        self.with_embedded(module, |loaded| loaded.launch_function(signature))
    }

    /// As [`Context::embedded_launch_function`] if the module is already loaded into this
    /// context; else [`Error::ModuleNotLoadedInCapture`] (loading is not allowed during a
    /// capture, E1a).
    pub(crate) fn embedded_launch_function_if_loaded(&self, module: &'static EmbeddedModule, signature: &'static KernelSignature) -> Result<sys::CUfunction> {
        let mut loaded = lock(&self.inner.embedded);
        match loaded.iter_mut().find(|l| l.is(module)) {
            Some(loaded) => loaded.launch_function(signature),
            None => Err(Error::ModuleNotLoadedInCapture { kernel: signature.symbol.to_string(), module: module.crate_name.to_string() }),
        }
    }

    /// Runs `f` on `module` as loaded into this context, loading it first if needed.
    ///
    /// The list's lock is held across a load, which may wait inside the driver for the
    /// context's work (E2: a module load, a kernel's code), and so for a host callback queued
    /// in it: refused inside a callback before the lock ([`Error::CallInHostCallback`]), which
    /// would otherwise wait for a thread that waits for the callback (audit 2026-11-28d
    /// review3, G16S-2). Inside a door call's work (a launch's first use of a crate) it is
    /// taken as a leaf: its holders wait for no lock of ferrocuda's.
    fn with_embedded<R>(&self, module: &'static EmbeddedModule, f: impl FnOnce(&mut LoadedEmbedded) -> Result<R>) -> Result<R> {
        refuse_in_host_callback(module)?;
        let mut loaded = self.inner.embedded.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let index = match loaded.iter().position(|l| l.is(module)) {
            Some(index) => index,
            None => {
                // Loading a module may wait for the context's work (E2): not after a timeout.
                self.refuse_after_timeout(|| format!("loading the kernels of `{}` into the context (its first use here)", module.crate_name))?;
                loaded.push(LoadedEmbedded::load(module, self.inner.device, &self.inner.panic_record)?);
                loaded.len() - 1
            }
        };
        f(&mut loaded[index])
    }

    /// Which image of `module` this context runs ("cubin sm_90" or "PTX sm_70, JIT"), loading
    /// it if needed.
    ///
    /// # Errors
    /// [`Error::CallInHostCallback`] inside a stream host callback (G16S-2); the load's errors.
    pub fn embedded_image(&self, module: &'static EmbeddedModule) -> Result<String> {
        refuse_in_host_callback(module)?;
        let _bound = self.bind()?;
        self.with_embedded(module, |loaded| Ok(loaded.image().to_string()))
    }

    /// True for the device's primary context, false for one made by [`Context::create`].
    pub fn is_primary(&self) -> bool {
        self.inner.kind == ContextKind::Primary
    }

    /// Makes this context current on the calling thread until the guard drops, then restores
    /// the previous one (`cuCtxPushCurrent` / `cuCtxPopCurrent`). Guards nest; the guard stays
    /// on its thread. Guards dropped out of order keep the innermost live guard's context
    /// current (the dropped one's entry is taken from under the others).
    pub fn push_current(&self) -> Result<CurrentGuard> {
        // SAFETY: the context is alive (we hold it); popped by the guard.
        unsafe { driver::context::push_current(self.inner.raw) }?;
        let previous = CURRENT.with(|c| std::mem::replace(&mut *c.borrow_mut(), Arc::downgrade(&self.inner)));
        Ok(CurrentGuard::pushed(self.clone(), previous))
    }

    /// How host threads wait for this context's work.
    pub fn schedule_policy(&self) -> Result<SchedulePolicy> {
        let _bound = self.bind()?;
        let mut flags = 0;
        // SAFETY: writes one int (flags of the current context, bound above).
        unsafe { driver::context::get_flags(&mut flags) }?;
        Ok(SchedulePolicy::from_flags(flags))
    }

    /// The current value of a resource limit, in bytes.
    pub fn limit(&self, limit: Limit) -> Result<usize> {
        let _bound = self.bind()?;
        let mut value = 0;
        // SAFETY: writes one size for the current context (bound above).
        unsafe { driver::context::get_limit(&mut value, limit.raw()) }?;
        Ok(value)
    }

    /// Changes a resource limit, in bytes. The driver may round the value (read it back with
    /// [`Context::limit`]); a heap size can only be set before the first kernel that uses
    /// device `malloc`.
    ///
    /// A limit is the whole context's: in a context other libraries may use (the primary
    /// context, a borrowed one) it may only be raised; lowering it there is refused with
    /// [`Error::SharedLimitLowered`] (their kernels may need the current value: a smaller
    /// stack faults a recursive kernel). Lower it in a context of your own
    /// ([`Context::create`]), or with [`Context::set_limit_unchecked`].
    ///
    /// The stack size ([`Limit::StackSize`]) is also a context-wide wait: the driver blocks
    /// until all work queued in the context (every library's) has finished, and reserves the new
    /// size for every resident thread of the device (device memory that other libraries' work
    /// in the context then lacks). So it is refused while a stream capture of the context runs
    /// ([`Error::CaptureInProgress`]: the driver refuses a context-wide wait then) and after a
    /// [`Stream::synchronize_timeout`](crate::Stream::synchronize_timeout) gave up on work of the
    /// context that is still running ([`Error::WorkStillRunning`]: the wait might never end).
    /// Set it once, early, before other libraries queue work; ferrocuda never sets a limit on
    /// its own.
    pub fn set_limit(&self, limit: Limit, bytes: usize) -> Result<()> {
        if !matches!(self.inner.kind, ContextKind::Created(_)) {
            let current = self.limit(limit)?;
            if bytes < current {
                return Err(Error::SharedLimitLowered { limit, current, requested: bytes });
            }
        }
        // SAFETY: a created context is ferrocuda's alone; elsewhere the value only grows.
        unsafe { self.set_limit_unchecked(limit, bytes) }
    }

    /// [`Context::set_limit`] without the check that a limit of a shared context only grows.
    ///
    /// # Safety
    /// No other library's kernels in this context need more than `bytes` of `limit` (for the
    /// stack: no kernel of theirs recurses deeper than it allows), now or later. The stack
    /// size's refusals during a capture and after a reported timeout hold here too.
    pub unsafe fn set_limit_unchecked(&self, limit: Limit, bytes: usize) -> Result<()> {
        // The stack size is a context-wide wait (see `set_limit`).
        if limit == Limit::StackSize {
            let captures = self.captures();
            if captures > 0 {
                return Err(Error::CaptureInProgress { operation: "Context::set_limit(Limit::StackSize, ..)", captures });
            }
            if self.timed_out() {
                return Err(Error::WorkStillRunning { operation: "Context::set_limit(Limit::StackSize, ..)" });
            }
        }
        let _bound = self.bind()?;
        // SAFETY: applies to the current context (bound above).
        unsafe { driver::context::set_limit(limit.raw(), bytes) }?;
        Ok(())
    }

    /// The stream priorities this context supports, as `(lowest, highest)`: numerically the
    /// highest priority is the smallest, e.g. `(0, -5)`. See [`Stream::with_priority`](crate::Stream::with_priority).
    pub fn stream_priority_range(&self) -> Result<(i32, i32)> {
        let _bound = self.bind()?;
        let (mut least, mut greatest) = (0, 0);
        // SAFETY: writes two ints.
        unsafe { driver::context::get_stream_priority_range(&mut least, &mut greatest) }?;
        Ok((least, greatest))
    }
}

/// A context bound by [`Context::bind`] for ferrocuda's own driver calls: dropping it pops the
/// context off the thread's stack (any kind of context: G20R-4, session 22), so the context
/// current before the bind is current again, whatever became of it meanwhile. Its push is an
/// entry of the `push_current` guards' list (`current.rs`, G23S-1).
#[must_use = "the context is unbound again as soon as the guard drops"]
pub(crate) struct Bound {
    /// The context pushed by the bind and its entry's id, to pop at the drop (none: nothing
    /// was pushed).
    restore: Option<(sys::CUcontext, u64)>,
    /// The driver's current context is per thread: the guard must drop where it was made.
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Bound {
    /// Leaves the context current ([`Context::bind_to_thread`]): it replaces, on the thread's
    /// stack, the context that was current before (as `cuCtxSetCurrent` does).
    fn keep(mut self) {
        let Some((pushed, id)) = self.restore.take() else { return };
        let mut popped = std::ptr::null_mut();
        // SAFETY: pops the entry the bind pushed (still on top: nothing ran in between), then
        // makes the same context, alive (its handle is borrowed by the caller), current in
        // place of the one below it.
        if unsafe { driver::context::pop_current(&mut popped) }.is_ok() {
            current::bind_popped(id);
            let _ = unsafe { driver::context::set_current(pushed) };
        } else {
            // Still pushed: the drop pops it.
            self.restore = Some((pushed, id));
        }
    }
}

impl Drop for Bound {
    fn drop(&mut self) {
        let Some((pushed, id)) = self.restore.take() else { return };
        // Pops only while the pushed context is still on top; takes the push from under the
        // guards pushed inside the bind and still alive (`current::bind_dropped`).
        current::bind_dropped(id, pushed);
    }
}

impl Drop for ContextInner {
    fn drop(&mut self) {
        let embedded = std::mem::take(self.embedded.get_mut().unwrap_or_else(|p| p.into_inner()));
        // The teardown binds this context through the driver's stack and pops it again (or the
        // destroy does), so the context current before comes back without ferrocuda naming it
        // (G20R-4: a dying or leaked created context is not left current for the runtime of
        // another library to allocate in; G21: the previous context may have been destroyed by
        // its owner meanwhile, and a saved handle of it would be dangling).
        if teardown_leaks(still_hung(self)) {
            // P12: work reported as hung may still run; the synchronisation below would never
            // return. Leave the context (and its modules) to the process's exit; its panic record
            // stays allocated and registered with it (its kernels may still write it).
            std::mem::forget(embedded);
            eprintln!(
                "ferrocuda: the last handle of a context was dropped after `Stream::synchronize_timeout` reported work in it still \
                 running; the context is left to the end of the process instead of waiting for that work (call \
                 `Context::synchronize()` before dropping it to wait for the work and release the context)"
            );
            return;
        }
        // A borrowed context's keep-alive (its owner's object: a cudarc `CudaContext`, say) goes
        // with the teardown and is dropped after it: its drop may destroy the context (audit
        // 2026-11-28d review3, G16S-5: dropped here while the teardown waited on the release
        // thread, the owner destroyed the context first, and the teardown then bound, waited on
        // and unloaded modules of a destroyed context).
        let keep_alive = self.keep_alive.take();
        let panic_record = std::mem::replace(&mut self.panic_record, ContextRecord::new(self.raw));
        let teardown = Teardown { raw: self.raw, device: self.device, kind: self.kind, embedded, keep_alive, panic_record };
        let teardown = Handle(teardown);
        if in_host_callback() {
            // The last handle went inside a host callback, where CUDA calls are refused.
            release::run_on_release_thread(Box::new(move || teardown.into_inner().run()));
        } else if hand_off_releases() {
            // Inside a door call's work (G15R-6): in place, not on the release thread. The
            // teardown waits for no lock of ferrocuda's (the GPU only, as `Stream::synchronize`
            // there), and a context borrowed for a lifetime (`BorrowedContext`) may be destroyed
            // by its owner as soon as this drop returns (G16S-5). The thread's current context
            // (the door's) is current again for the rest of the work (the teardown pops).
            teardown.into_inner().run();
        } else {
            teardown.into_inner().run();
        }
    }
}

/// Makes the dying context `raw` current on this thread for its teardown: pushed onto the
/// driver's context stack unless it is current already. True when pushed (then popped by
/// [`unbind_after_teardown`], or by `cuCtxDestroy`, which pops a context current on the
/// calling thread), so the context current before comes back without ferrocuda keeping its
/// handle (see [`Context::bind`]). The driver's error when it could not be made current.
///
/// Not pushed when current already (G23S-2): the context is then on top without an entry of
/// this thread's guards and binds naming it (each recorded entry's context is alive, held by its
/// guard or bind's caller, and this one is dying), so the destroy's pop takes either an entry
/// that `bind_to_thread` left outside every guard (refused inside one) or one that another
/// library's `cuCtxSetCurrent` put in place of a guard's push; that guard's drop then finds its
/// push gone and pops nothing (`current.rs`).
fn bind_for_teardown(raw: sys::CUcontext) -> std::result::Result<bool, DriverError> {
    let mut current = std::ptr::null_mut();
    // SAFETY: writes one handle.
    unsafe { driver::context::get_current(&mut current) }?;
    if current == raw {
        return Ok(false);
    }
    // SAFETY: the context is alive until its teardown ends.
    unsafe { driver::context::push_current(raw) }?;
    Ok(true)
}

/// Pops what [`bind_for_teardown`] pushed.
fn unbind_after_teardown(pushed: Option<bool>) {
    if pushed == Some(true) {
        let mut popped = std::ptr::null_mut();
        // SAFETY: pops this thread's entry pushed by `bind_for_teardown` (still on top: the
        // teardown pushes and sets nothing else).
        let _ = unsafe { driver::context::pop_current(&mut popped) };
    }
}

/// Whether a context's teardown leaks the context instead of waiting for its work: exactly
/// when work reported by a timeout is still running (P12).
fn teardown_leaks(hung: bool) -> bool {
    hung
}

/// [`Context::timed_out`] for a context whose last handle is being dropped: queries the
/// markers (destroying the completed ones) with the context bound.
fn still_hung(inner: &mut ContextInner) -> bool {
    if !*inner.timed_out.get_mut() {
        return false;
    }
    let markers = std::mem::take(inner.hung.get_mut().unwrap_or_else(|p| p.into_inner()));
    let pushed = bind_for_teardown(inner.raw).ok();
    if pushed.is_none() {
        return true;
    }
    let mut hung = false;
    for Handle(marker) in markers {
        if marker.is_null() {
            hung = true;
            continue;
        }
        // SAFETY: owned by the list; destroyed once, here, unless still running (then leaked
        // with the context).
        match unsafe { driver::event::query(marker) } {
            Err(e) if e.code == sys::CUresult::CUDA_ERROR_NOT_READY => hung = true,
            _ => {
                let _ = unsafe { driver::event::destroy(marker) };
            }
        }
    }
    unbind_after_teardown(pushed);
    hung
}

/// What destroying a context takes, moved out of it so that it can run on another thread.
struct Teardown {
    raw: sys::CUcontext,
    device: Device,
    kind: ContextKind,
    embedded: Vec<LoadedEmbedded>,
    /// A borrowed context's keep-alive: dropped last, after the context's state is gone (G16S-5).
    keep_alive: Option<Arc<dyn Any + Send + Sync>>,
    /// The context's panic record: freed after the modules, before the context (G22S-2).
    panic_record: ContextRecord,
}

impl Teardown {
    fn run(mut self) {
        // Modules first, while the context still exists; errors cannot be reported from Drop.
        let bound = bind_for_teardown(self.raw);
        let pushed = bound.ok();
        // Kernels of the embedded modules may still run (their stream and last handles may be
        // gone, with only scalar or raw-pointer arguments): wait before unloading the code (S1).
        // Not bound, a wait would be another context's (G23S-3's class): the bind's error
        // stands for the wait's.
        // SAFETY: no arguments; the context is current (set above).
        let waited = bound.and_then(|_| unsafe { driver::context::synchronize() });
        if !wait_ended_the_work(waited) {
            // G23S-3: the wait was refused (another thread's global-mode capture bars it, or the
            // context could not be made current) and the kernels may still run: unloading their
            // code, freeing the panic record they write and destroying the context would pull
            // those out from under them. Leak all three, visibly, as the explicit `Module`'s drop
            // does when its wait fails. The record stays registered (its kernels may still write
            // it, and a later error of the process may still read it).
            unbind_after_teardown(pushed);
            eprintln!(
                "ferrocuda: the last handle of a context was dropped, but the driver refused the context-wide wait before its \
                 teardown ({}); the context, its kernel modules and its panic record are left to the end of the process \
                 instead of being freed under kernels that may still run (call `Context::synchronize()` before dropping \
                 the last handle, outside any other thread's stream capture, to release the context)",
                waited.err().map_or_else(String::new, |e| e.to_string())
            );
            std::mem::forget(std::mem::take(&mut self.embedded));
            std::mem::forget(std::mem::replace(&mut self.panic_record, ContextRecord::new(self.raw)));
            std::mem::forget(self.keep_alive.take());
            return;
        }
        self.embedded.clear();
        // SAFETY: the context's work has finished (synchronised above, or the context faulted,
        // which ends its kernels), its embedded modules are unloaded, and no explicit module,
        // graph or stream is left (each holds a handle); it is released or destroyed below.
        // Not bound: the record is only unregistered, and the destruction frees it.
        unsafe { self.panic_record.free(pushed.is_some()) };
        match self.kind {
            ContextKind::Primary => {
                unbind_after_teardown(pushed);
                // SAFETY: balances the retain in `Context::primary`.
                unsafe { driver::context::primary_release(self.device.raw()) }
            }
            // SAFETY: created in `Context::create`, destroyed once; being current on this
            // thread (bound above), it is also popped, and the context below it is current again.
            ContextKind::Created(_) => unsafe { driver::context::destroy(self.raw) },
            // Its owner destroys it (after `keep_alive`, dropped with this, lets it).
            ContextKind::Borrowed => {
                unbind_after_teardown(pushed);
                Ok(())
            }
        }
        .ok();
        drop(self.keep_alive.take());
    }
}

/// Whether a teardown's context-wide wait (`cuCtxSynchronize`) means that no kernel of the
/// context runs any more, so its modules, its panic record and the context may be freed
/// (G23S-3, audit 2026-11-29e): it returned, or it reported a sticky error (the context faulted,
/// which ends its kernels), or the driver is shutting down (`CUDA_ERROR_DEINITIALIZED`, at the
/// process's exit: no work runs, and the later calls fail harmlessly). Any other error (the
/// driver refused the wait during another thread's global-mode capture:
/// `CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED`, `_IMPLICIT`, ...; the context could not be made
/// current, so no wait ran) leaves them possibly running.
fn wait_ended_the_work(waited: std::result::Result<(), DriverError>) -> bool {
    match waited {
        Ok(()) => true,
        Err(error) => error.is_sticky() || error.code == sys::CUresult::CUDA_ERROR_DEINITIALIZED,
    }
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").field("raw", &self.inner.raw).field("device", &self.inner.device.ordinal()).field("primary", &self.is_primary()).finish()
    }
}

/// [`Error::CallInHostCallback`] inside a stream host callback, for the calls that take the
/// context's list of loaded kernel crates (G16S-2, [`Context::with_embedded`]): the list's
/// holder may wait inside the driver for the callback.
pub(crate) fn refuse_in_host_callback(module: &EmbeddedModule) -> Result<()> {
    if in_host_callback() {
        return Err(Error::CallInHostCallback { operation: format!("loading or looking up the kernels of `{}`", module.crate_name) });
    }
    Ok(())
}

/// How long a call that may wait inside the driver for all of a context's work waits, after a
/// reported timeout, for the work given up on to end before it is refused
/// ([`Error::RefusedAfterTimeout`], E2): long enough for work that was only slow, short enough
/// that nothing hangs.
pub(crate) const AFTER_TIMEOUT_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

#[cfg(test)]
mod tests {
    use super::*;

    /// P12: after a reported timeout the teardown leaks rather than waits (it would wait for
    /// a kernel that never ends); without one it waits and releases as before.
    /// G16S-2 (audit 2026-11-28d review3): the calls that take the context's list of loaded
    /// kernel crates (held across loads, which may wait inside the driver for a host callback)
    /// are refused inside a callback before the lock, by name; outside one they go on.
    #[test]
    fn g16s_2_the_loaded_crates_list_is_refused_inside_a_host_callback() {
        static KERNELS: EmbeddedModule = EmbeddedModule::without_images("g16s_2_kernels");
        assert!(refuse_in_host_callback(&KERNELS).is_ok());
        let inside = HostCallbackScope::enter();
        match refuse_in_host_callback(&KERNELS) {
            Err(Error::CallInHostCallback { operation }) => assert!(operation.contains("g16s_2_kernels"), "{operation}"),
            other => panic!("the list was not refused inside a host callback: {other:?}"),
        }
        drop(inside);
        assert!(refuse_in_host_callback(&KERNELS).is_ok(), "the refusal outlived the callback");
    }

    /// G23S-3 (audit 2026-11-29e): the teardown frees only after a wait that ended the work:
    /// it returned, or the context faulted (sticky). A refused wait (another thread's
    /// global-mode capture) or any other error leaks the context, its modules and its record.
    #[test]
    fn g23s_3_the_teardown_frees_only_after_a_wait_that_ended_the_work() {
        use sys::CUresult::*;
        let failed = |code| Err(DriverError { call: "cuCtxSynchronize", code });
        assert!(wait_ended_the_work(Ok(())));
        assert!(wait_ended_the_work(failed(CUDA_ERROR_DEINITIALIZED)), "the driver is shutting down: no work runs");
        for sticky in [CUDA_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_LAUNCH_FAILED, CUDA_ERROR_ASSERT] {
            assert!(wait_ended_the_work(failed(sticky)), "{sticky:?}: the context faulted, its kernels ended");
        }
        for refused in [
            CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
            CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
            CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
            CUDA_ERROR_NOT_PERMITTED,
            CUDA_ERROR_INVALID_CONTEXT,
            CUDA_ERROR_LAUNCH_TIMEOUT,
        ] {
            assert!(!wait_ended_the_work(failed(refused)), "{refused:?}: the kernels may still run, the teardown must leak");
        }
    }

    /// G23S-2: the refusal of `bind_to_thread` inside a guard names the call and what to do.
    #[test]
    fn g23s_2_the_refusal_inside_a_guard_says_what_to_use() {
        let message = Error::BindInsideGuard { operation: "Context::bind_to_thread (or Context::primary)" }.to_string();
        assert!(message.starts_with("Context::bind_to_thread"), "{message}");
        assert!(message.contains("Context::push_current") && message.contains("after the guard drops"), "{message}");
    }

    #[test]
    fn p12_the_teardown_after_a_timeout_leaks_instead_of_waiting() {
        assert!(teardown_leaks(true));
        assert!(!teardown_leaks(false));
        let message = Error::WorkStillRunning { operation: "a release's wait for a stream" }.to_string();
        assert!(message.contains("synchronize_timeout") && message.contains("Context::synchronize()"), "{message}");
    }

    #[test]
    fn without_a_driver_contexts_report_no_driver() {
        if crate::driver_present() {
            return; // checked on machines without a driver (CI)
        }
        assert!(matches!(Context::create(0, SchedulePolicy::Auto), Err(Error::NoDriver)));
        assert!(matches!(Context::primary(0), Err(Error::NoDriver)));
    }
}
