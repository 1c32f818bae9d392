//! Releases of GPU resources that cannot happen now happen later, and are never lost
//! (issue 21: N10, N11, N12, S2).
//!
//! Every `Drop` of a type that owns something on the GPU (buffers, pinned memory, streams,
//! events, graphs, modules, library plans and handles) hands its release to
//! [`Context::release`], which runs it at once unless:
//! - the drop happens inside a stream host callback ([`Stream::launch_host_fn`](crate::Stream::launch_host_fn)),
//!   where the driver refuses every CUDA call: the trampoline marks the thread, and the
//!   release goes to the release thread, which runs it as soon as the callback has returned;
//! - a stream capture runs in the context: freeing or synchronising would invalidate it (E1b,
//!   N12, S2), so the release waits in the context's list until the last capture ends. A
//!   stream dropped while capturing ends its capture (N11). Device memory waits only when
//!   the capture involves it ([`Context::release_after_streams`], P5): a capture that never
//!   ends (its `Stream` leaked with `mem::forget`) strands the other kinds of releases (they
//!   leak), never a buffer that the capture does not use.
//!
//! Each waiting release holds a handle to its context, so a context is never destroyed with
//! releases pending. [`Context::deferred_releases`] counts both kinds;
//! [`Context::synchronize`] first waits for the release thread to finish this context's.

use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Sender};
use std::sync::{Mutex, OnceLock};

use super::{Context, lock};

/// A release postponed until no capture runs in the context (it holds its context).
pub(crate) type DeferredRelease = Box<dyn FnOnce() + Send>;

/// What a release frees, for the messages that name the drops of a capture
/// ([`Error::CaptureFailed`](crate::Error::CaptureFailed)). Plain data: naming costs nothing
/// unless the release is postponed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Released {
    /// A `DeviceBuffer` of this many bytes.
    DeviceBuffer(usize),
    /// A `PinnedBuffer` of this many bytes.
    PinnedBuffer(usize),
    /// A `cufft::Plan` (its work area).
    CufftPlan,
    /// A `Cublas` handle.
    Cublas,
    /// A `CublasLt` handle (its plans; its workspace is a `DeviceBuffer` of its own).
    CublasLt,
    /// An `Event`.
    Event,
    /// A `GraphExec`.
    GraphExec,
    /// A `Module` (unloaded after the context's queued work).
    Module,
    /// A `Stream` (destroyed after its queued work).
    Stream,
}

impl std::fmt::Display for Released {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Released::DeviceBuffer(bytes) => write!(f, "DeviceBuffer of {}", crate::error::human_bytes(*bytes)),
            Released::PinnedBuffer(bytes) => write!(f, "PinnedBuffer of {}", crate::error::human_bytes(*bytes)),
            Released::CufftPlan => f.write_str("cuFFT plan"),
            Released::Cublas => f.write_str("cuBLAS handle"),
            Released::CublasLt => f.write_str("cuBLASLt handle"),
            Released::Event => f.write_str("Event"),
            Released::GraphExec => f.write_str("GraphExec"),
            Released::Module => f.write_str("Module"),
            Released::Stream => f.write_str("Stream"),
        }
    }
}

/// The releases a context postpones while a capture runs, in the order of their drops, each
/// with its sequence number (counted over the context's life, so a capture can name the drops
/// that happened since it began) and what it frees.
#[derive(Default)]
pub(crate) struct Deferred {
    list: Vec<(u64, Released, DeferredRelease)>,
    /// The sequence number of the next postponed release.
    next: u64,
}

thread_local! {
    /// True while this thread runs a stream host callback (set by the trampoline).
    static IN_HOST_CALLBACK: Cell<bool> = const { Cell::new(false) };
}

/// True on a thread that is running a stream host callback, where CUDA calls are refused.
#[inline]
pub(crate) fn in_host_callback() -> bool {
    IN_HOST_CALLBACK.with(Cell::get)
}

/// True where a drop must not release its GPU resource itself but hand it to the release
/// thread: inside a stream host callback (CUDA calls are refused there), and inside the `work`
/// of a door call (`Stream::enqueue`), which holds its stream's driver-call lock: a release
/// waits for other streams' locks, which may be held by threads waiting for this one (audit
/// 2026-11-28c review2 G15R-6).
#[inline]
pub(crate) fn hand_off_releases() -> bool {
    in_host_callback() || crate::stream::in_door_work()
}

/// [`Error::NestedDoorCall`](crate::Error::NestedDoorCall) inside the `work` of a door call
/// (G15R-6), for this module's parent's waits (the door's own check, reached from here).
pub(crate) fn refuse_inside_door_work(operation: &str) -> crate::Result<()> {
    crate::stream::refuse_inside_door_work(operation)
}

/// Marks the current thread as running a host callback until dropped.
pub(crate) struct HostCallbackScope {
    was: bool,
}

impl HostCallbackScope {
    /// Entered by the host-callback trampoline around the user's closure.
    pub(crate) fn enter() -> Self {
        HostCallbackScope { was: IN_HOST_CALLBACK.with(|c| c.replace(true)) }
    }
}

impl Drop for HostCallbackScope {
    fn drop(&mut self) {
        IN_HOST_CALLBACK.with(|c| c.set(self.was));
    }
}

/// A raw CUDA handle moved into a release closure. CUDA handles may be used from any thread
/// once their context is bound there, which every release does first.
pub(crate) struct Handle<T>(pub(crate) T);

// SAFETY: see the type's documentation: the handle is only used with its context bound.
unsafe impl<T> Send for Handle<T> {}

impl<T> Handle<T> {
    /// The handle (a method, so that a closure calling it captures the whole `Handle`).
    pub(crate) fn into_inner(self) -> T {
        self.0
    }
}

type Job = Box<dyn FnOnce() + Send>;

/// Runs `job` on the release thread (started on first use).
pub(super) fn run_on_release_thread(job: Job) {
    static SENDER: OnceLock<Option<Mutex<Sender<Job>>>> = OnceLock::new();
    let sender = SENDER.get_or_init(|| {
        let (sender, receiver) = mpsc::channel::<Job>();
        let started = std::thread::Builder::new().name("ferrocuda-release".into()).spawn(move || {
            for job in receiver {
                // A panicking release must not end the thread (every later release from a
                // host callback would be lost); its context's count is kept by the job's guard.
                if let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)) {
                    // Its drop may panic too, which would end this thread (E7).
                    let described = crate::panic_report::dispose_of_caught_panic(payload);
                    eprintln!("ferrocuda: a release performed after a host callback panicked{described} (the panic was caught; what it freed may be leaked)");
                }
            }
        });
        started.ok().map(|_| Mutex::new(sender))
    });
    match sender {
        Some(sender) if lock(sender).send(job).is_ok() => {}
        _ => eprintln!("ferrocuda: the release thread could not be started; a GPU resource dropped in a host callback is leaked"),
    }
}

impl Context {
    /// Releases a GPU resource now, or later when it cannot be done now (see the module docs).
    /// `what` names what is freed (for [`Error::CaptureFailed`](crate::Error::CaptureFailed)).
    pub(crate) fn release(&self, what: Released, release: impl FnOnce(&Context) + Send + 'static) {
        if hand_off_releases() {
            self.hand_off(move |context| context.release(what, release));
            return;
        }
        if let Err(now) = self.defer_while_capturing(what, release) {
            now(self);
        }
    }

    /// Runs `job` on the release thread, counted until it has run ([`Context::synchronize`]
    /// waits for it): for what cannot be done on this thread now ([`hand_off_releases`]). A
    /// release hands itself off as `context.release(..)` again (which then waits for the end of
    /// the captures if it must); the end of an abandoned capture hands off the end itself (it
    /// must not wait for the end of the captures: it is one of them).
    pub(crate) fn hand_off(&self, job: impl FnOnce(&Context) + Send + 'static) {
        self.inner.handed_off.fetch_add(1, Ordering::AcqRel);
        /// Counts the hand-off as done when dropped: also when the job panics, so that
        /// `Context::synchronize` (which waits for the count to reach zero) cannot hang.
        struct HandedOff(Context);
        impl Drop for HandedOff {
            fn drop(&mut self) {
                self.0.inner.handed_off.fetch_sub(1, Ordering::AcqRel);
            }
        }
        let handed = HandedOff(self.clone());
        run_on_release_thread(Box::new(move || {
            job(&handed.0);
            drop(handed);
        }));
    }

    /// Releases something whose release queues no stream work and synchronises nothing (a
    /// `Graph`, an `Event` never recorded into a capture), or that ends a capture itself (a
    /// capturing stream's last handle, N11): now, even while a capture runs in the context, so
    /// that a capture that never ends (its `Stream` leaked, P5) strands none of them. A drop
    /// inside a host callback or a door call's work (G15R-6) hands it to the release thread,
    /// which performs it as it is, not after the context's captures (audit 2026-11-28d review, G16R-7: a capturing stream's
    /// last handle dropped in a callback waited there for the end of its own capture, which
    /// only it would bring: the capture never ended, and every later postponed release of the
    /// context waited with it).
    pub(crate) fn release_outside_captures(&self, release: impl FnOnce(&Context) + Send + 'static) {
        if hand_off_releases() {
            self.hand_off(release);
        } else {
            release(self);
        }
    }

    /// Releases memory that `streams` used (a buffer's drop): now, unless a capture in the
    /// context involves the release, that is one of `streams` (or the stream the free goes on,
    /// see [`usage::free_stream`](crate::memory::usage::free_stream)) is being captured; then
    /// it waits like [`Context::release`] for the end of the captures (P5). A capture on an
    /// unrelated stream, even one that never ends because its `Stream` was leaked, does not
    /// hold the memory back: nothing of the release is queued on the capturing stream, so the
    /// capture is neither extended nor invalidated by it.
    pub(crate) fn release_after_streams(
        &self,
        what: Released,
        streams: Vec<crate::Stream>,
        release: impl FnOnce(&Context, crate::stream::UsedStreams) + Send + 'static,
    ) {
        if hand_off_releases() {
            // Decided on the release thread, where the capture queries work (G16R-7: deciding
            // here deferred it behind any capture, an unrelated one included, against P5).
            self.hand_off(move |context| context.release_after_streams(what, streams, release));
            return;
        }
        let involved = self.is_capturing() && crate::memory::usage::involves_capture(self, &streams);
        let held = crate::stream::UsedStreams::hold(streams);
        if involved {
            self.release(what, move |context| release(context, held));
        } else {
            release(self, held);
        }
    }

    /// Postpones `release` until no capture runs in the context (E1b); hands it back when
    /// none runs now (then run it now: nothing is boxed on that common path).
    pub(crate) fn defer_while_capturing<F: FnOnce(&Context) + Send + 'static>(&self, what: Released, release: F) -> Result<(), F> {
        let mut deferred = lock(&self.inner.deferred);
        // Checked under the lock that `capture_ended` drains with, so nothing is left behind.
        if self.is_capturing() {
            let context = self.clone();
            let seq = deferred.next;
            deferred.next += 1;
            deferred.list.push((seq, what, Box::new(move || release(&context))));
            Ok(())
        } else {
            Err(release)
        }
    }

    /// The sequence number the next postponed release will get: a capture notes it when it
    /// begins, to name later the drops that happened during it ([`Context::deferred_since`]).
    pub(crate) fn deferred_mark(&self) -> u64 {
        lock(&self.inner.deferred).next
    }

    /// What the releases postponed since `mark` free (those not performed yet: all of them
    /// while a capture still runs), in the order of their drops.
    pub(crate) fn deferred_since(&self, mark: u64) -> Vec<Released> {
        lock(&self.inner.deferred).list.iter().filter(|(seq, _, _)| *seq >= mark).map(|(_, what, _)| *what).collect()
    }

    /// Runs the postponed releases unless a capture still runs.
    pub(crate) fn drain_deferred(&self) {
        let deferred = {
            let mut deferred = lock(&self.inner.deferred);
            if self.is_capturing() {
                return;
            }
            std::mem::take(&mut deferred.list)
        };
        for (_, _, release) in deferred {
            release();
        }
    }

    /// Waits until the release thread has handled this context's releases from host
    /// callbacks (they may still wait for a capture to end, see [`Context::deferred_releases`]).
    pub(crate) fn wait_for_handed_off_releases(&self) {
        while self.inner.handed_off.load(Ordering::Acquire) > 0 {
            std::thread::sleep(std::time::Duration::from_micros(20));
        }
    }

    /// How many releases of GPU resources dropped in this context wait to happen: those
    /// dropped while a capture ran (freed when the last capture in the context ends) and
    /// those dropped inside host callbacks that the release thread has not performed yet
    /// ([`Context::synchronize`] waits for those). Zero when nothing is stuck.
    pub fn deferred_releases(&self) -> usize {
        lock(&self.inner.deferred).list.len() + self.inner.handed_off.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_callback_scope_nests_and_restores() {
        assert!(!in_host_callback());
        {
            let _outer = HostCallbackScope::enter();
            assert!(in_host_callback());
            {
                let _inner = HostCallbackScope::enter();
                assert!(in_host_callback());
            }
            assert!(in_host_callback(), "leaving a nested scope keeps the outer one");
        }
        assert!(!in_host_callback());
    }

    /// Issue 29 host item 4: a release that panics on the release thread does not end it:
    /// later releases from host callbacks still run (they used to be lost, and the context's
    /// count of them never reached zero, so `Context::synchronize` waited for ever).
    #[test]
    fn s9_item4_a_panicking_release_does_not_stop_the_release_thread() {
        let (tx, rx) = mpsc::channel();
        run_on_release_thread(Box::new(|| panic!("a release that panics")));
        run_on_release_thread(Box::new(move || tx.send(7).unwrap()));
        assert_eq!(rx.recv_timeout(std::time::Duration::from_secs(5)), Ok(7));
    }

    #[test]
    fn the_release_thread_runs_jobs_in_order() {
        let (tx, rx) = mpsc::channel();
        for i in 0..5 {
            let tx = tx.clone();
            run_on_release_thread(Box::new(move || tx.send(i).unwrap()));
        }
        let got: Vec<i32> = (0..5).map(|_| rx.recv_timeout(std::time::Duration::from_secs(5)).unwrap()).collect();
        assert_eq!(got, [0, 1, 2, 3, 4]);
    }
}
