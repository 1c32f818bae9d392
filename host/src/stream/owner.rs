//! Who may queue on a stream that a capture of ferrocuda's records, and the bookkeeping that
//! makes the door's capture check and its driver call one critical section (audit 2026-11-28b
//! G14-5 and review2 G14R-4; docs/host-safety.md, "Graph capture").
//!
//! - Each capture begun through ferrocuda gets a **token** ([`new_token`]: process-unique,
//!   never 0), kept in the stream (`StreamInner::capture_owner`) and in the `Stream` value
//!   that began it (`Stream::token`; a clone made from that value during the capture copies
//!   it, a clone made before does not hold it).
//! - Work through the door on a captured stream is let in when its handle holds the token and
//!   is used on the thread that began the capture, or when the calling thread is inside that
//!   capture's [`Stream::capture`](super::Stream::capture) closure ([`CaptureScope`]):
//!   [`member_rule`]. The OS thread alone no longer stands for the owner (G14R-4: two async
//!   tasks on one thread were one owner; a clone on the capturing thread is now refused).
//! - The capture state (flag, token, joined flag) is written only under the stream's
//!   `driver_calls` mutex, and the door checks it again under that mutex, around its driver
//!   call ([`recheck_rule`]).
//! - A capture's end takes the `driver_calls` of every stream joined to it
//!   ([`JoinedStreams`]): joins register before their driver wait, and the end closes the list
//!   before it locks the members, so no join slips past the end unlocked.

use std::cell::RefCell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::error::{Error, Result};

/// A new capture's token: a number no other capture of the process has had, never 0.
pub(super) fn new_token() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// This thread's number: no other live or past thread of the process has it, never 0. Kept by
/// a capture for [`member_rule`] and [`join_rule`].
pub(super) fn this_thread() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static TOKEN: u64 = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    TOKEN.with(|token| *token)
}

thread_local! {
    /// The captures whose [`Stream::capture`](super::Stream::capture) closure runs on this
    /// thread now (innermost last).
    static SCOPES: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// The calling thread is inside the `Stream::capture` closure of the capture `token` until
/// this drops. Not `Send`: it marks the thread that made it.
pub(super) struct CaptureScope {
    token: u64,
    _this_thread: PhantomData<*const ()>,
}

impl CaptureScope {
    pub(super) fn enter(token: u64) -> Self {
        SCOPES.with(|scopes| scopes.borrow_mut().push(token));
        CaptureScope { token, _this_thread: PhantomData }
    }
}

impl Drop for CaptureScope {
    fn drop(&mut self) {
        SCOPES.with(|scopes| {
            let mut scopes = scopes.borrow_mut();
            if let Some(at) = scopes.iter().rposition(|&token| token == self.token) {
                scopes.remove(at);
            }
        });
    }
}

/// True while the calling thread is inside the `Stream::capture` closure of capture `token`.
pub(super) fn in_scope(token: u64) -> bool {
    token != 0 && SCOPES.with(|scopes| scopes.borrow().contains(&token))
}

/// The rule for work through the door on a stream that the capture `owner` records (G14-5,
/// G14R-4): let in when the calling thread is inside that capture's `Stream::capture` closure
/// (`scoped`), or when the handle it is queued through holds the capture's token (`handle`:
/// the value that began it, a clone made from that value during the capture, the value that
/// joined a stream to it) **and** is used on the thread that began the capture
/// (`capture_thread`): a value shared between threads (an `Arc<Stream>`, a `&Stream` lent to a
/// scoped thread) stays the capturing thread's. Anything else would be recorded into a graph
/// whose launcher never saw its buffers.
pub(super) fn member_rule(owner: u64, handle: u64, scoped: impl FnOnce(u64) -> bool, capture_thread: u64, here: u64, operation: &str) -> Result<()> {
    if owner != 0 && ((handle == owner && capture_thread == here) || scoped(owner)) {
        Ok(())
    } else {
        Err(Error::CapturedByAnotherThread { operation: operation.to_string() })
    }
}

/// The rule for joining a stream to the capture `owner` ([`Stream::wait_event`](super::Stream::wait_event)
/// on an event recorded into it, a fork; G14R-1): inside the capture's `Stream::capture`
/// closure (`scoped`), or on the thread that began it (`began_here`: the waiting handle is
/// another stream's, which holds no token yet, and outside the closure only the thread tells
/// the capture's code from other code; an event recorded into the capture must have been
/// handed to that other code, on that thread, for it to fork: see host-safety.md).
pub(super) fn join_rule(owner: u64, scoped: impl FnOnce(u64) -> bool, began_here: bool, operation: &str) -> Result<()> {
    if owner != 0 && (began_here || scoped(owner)) { Ok(()) } else { Err(Error::CapturedByAnotherThread { operation: operation.to_string() }) }
}

/// The door's second check, under the stream's `driver_calls` mutex (G14-5's window): the
/// capture state then (`now`: ferrocuda's capture flag or joined flag) must be the one the
/// early check saw (`checked`), and, captured, the work must still be a member of the capture
/// that runs now (`member`, which reads the token under the mutex). Work checked as outside a
/// capture that finds one begun, or checked as captured that finds it ended, is refused: its
/// ordering and tracking were decided for the other state.
pub(super) fn recheck_rule(checked: bool, now: bool, member: impl FnOnce() -> Result<()>, operation: &str) -> Result<()> {
    if checked != now {
        return Err(Error::CaptureChangedWhileQueued { operation: operation.to_string() });
    }
    if now { member() } else { Ok(()) }
}

/// The streams joined to one capture (its origin's list), for its end to lock (generic for
/// the unit tests).
pub(super) struct JoinedStreams<T> {
    state: Mutex<JoinedState<T>>,
}

struct JoinedState<T> {
    /// The capture the list is for (0: none yet).
    token: u64,
    /// The thread that began it (`this_thread`), kept with the token under one lock: a join
    /// reads the two together, never one capture's token with another's thread (G15R-8).
    thread: u64,
    /// Closed by the capture's end: joins are refused from then on.
    closed: bool,
    members: Vec<Weak<T>>,
}

impl<T> Default for JoinedStreams<T> {
    fn default() -> Self {
        JoinedStreams { state: Mutex::new(JoinedState { token: 0, thread: 0, closed: true, members: Vec::new() }) }
    }
}

impl<T> JoinedStreams<T> {
    fn state(&self) -> std::sync::MutexGuard<'_, JoinedState<T>> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The capture `token` begins on `thread` (under its stream's `driver_calls`): an empty,
    /// open list.
    pub(super) fn open(&self, token: u64, thread: u64) {
        *self.state() = JoinedState { token, thread, closed: false, members: Vec::new() };
    }

    /// The thread that began the capture `token`, while it runs (`None` once it has ended or
    /// been replaced).
    pub(super) fn thread_of(&self, token: u64) -> Option<u64> {
        let state = self.state();
        (!state.closed && state.token == token).then_some(state.thread)
    }

    /// Before a join's driver wait (under the joining stream's `driver_calls`): adds `stream`
    /// (once) unless the capture `token` has ended or been replaced; false then (refuse the
    /// join: nothing was waited for).
    pub(super) fn register(&self, token: u64, stream: &Arc<T>) -> bool {
        let mut state = self.state();
        if state.closed || state.token != token {
            return false;
        }
        if !state.members.iter().any(|member| std::ptr::eq(member.as_ptr(), Arc::as_ptr(stream))) {
            state.members.push(Arc::downgrade(stream));
        }
        true
    }

    /// After a join's driver wait that joined nothing (failed, or the stream is not captured):
    /// removes `stream` again (no-op once closed: the end locked it, which is harmless).
    pub(super) fn unregister(&self, stream: &Arc<T>) {
        let mut state = self.state();
        if !state.closed {
            state.members.retain(|member| !std::ptr::eq(member.as_ptr(), Arc::as_ptr(stream)));
        }
    }

    /// The capture's end (under its stream's `driver_calls`): closes the list (later joins are
    /// refused) and returns the live members, each once, to be locked before the driver's end.
    pub(super) fn close(&self) -> Vec<Arc<T>> {
        let mut state = self.state();
        state.closed = true;
        std::mem::take(&mut state.members).iter().filter_map(Weak::upgrade).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn in_no_scope(_: u64) -> bool {
        false
    }

    /// G14-5 / G14R-4: the handle that began the capture is let in on the capturing thread; a
    /// clone made before it (token 0, or an older capture's) is refused, on any thread, the
    /// capturing one included; the capturing handle used on another thread is refused; inside
    /// the capture's closure every handle of that thread is let in.
    #[test]
    fn g14r_4_the_capturing_handle_owns_the_capture_not_the_thread() {
        let capture = new_token();
        let here = this_thread();
        assert!(capture != 0 && new_token() != capture, "tokens are distinct and never 0");
        assert!(member_rule(capture, capture, in_no_scope, here, here, "saxpy").is_ok(), "the value that began the capture");
        let refused = member_rule(capture, 0, in_no_scope, here, here, "saxpy").unwrap_err();
        assert!(matches!(&refused, Error::CapturedByAnotherThread { operation } if operation == "saxpy"), "{refused:?}");
        let message = refused.to_string();
        assert!(message.contains("another `Stream` handle") && message.contains("Stream::capture"), "{message}");
        assert!(member_rule(capture, capture - 1, in_no_scope, here, here, "saxpy").is_err(), "a handle of an earlier capture");
        let there = std::thread::spawn(this_thread).join().unwrap();
        assert!(member_rule(capture, capture, in_no_scope, here, there, "saxpy").is_err(), "the capturing value shared with another thread");
        assert!(member_rule(0, 0, |_| true, here, here, "saxpy").is_err(), "no capture recorded: refused, never recorded silently");
        // Inside the capture's closure on this thread: every handle (a library's clone).
        assert!(!in_scope(capture));
        {
            let _scope = CaptureScope::enter(capture);
            assert!(in_scope(capture) && !in_scope(capture + 1) && !in_scope(0));
            assert!(member_rule(capture, 0, in_scope, here, here, "cublasLtMatmul").is_ok());
            // Another thread is not inside this thread's closure.
            let there = std::thread::spawn(move || member_rule(capture, 0, in_scope, here, this_thread(), "saxpy").is_err()).join().unwrap();
            assert!(there, "another thread's clone let in by this thread's scope");
            {
                let inner = new_token();
                let _nested = CaptureScope::enter(inner);
                assert!(in_scope(capture) && in_scope(inner), "nested captures of two streams");
            }
            assert!(in_scope(capture));
        }
        assert!(!in_scope(capture), "the scope ends with the closure");
        assert!(member_rule(capture, 0, in_scope, here, here, "saxpy").is_err());
    }

    /// G15R-4 (audit 2026-11-28c review2): the capture's own value lent to a scoped thread
    /// inside its `Stream::capture` closure is refused there (the scope is the capturing
    /// thread's, and the value is the capturing thread's); `Stream::capture`'s docs said such a
    /// thread queues into the capture (fixed: they say it is refused).
    #[test]
    fn g15r_4_the_captures_value_lent_to_a_scoped_thread_inside_the_closure_is_refused() {
        let capture = new_token();
        let here = this_thread();
        let _scope = CaptureScope::enter(capture);
        assert!(member_rule(capture, capture, in_scope, here, here, "saxpy").is_ok());
        let there = std::thread::scope(|s| s.spawn(|| member_rule(capture, capture, in_scope, here, this_thread(), "saxpy")).join().unwrap());
        assert!(matches!(there, Err(Error::CapturedByAnotherThread { .. })), "{there:?}");
    }

    /// G15R-3 (design, decided): inside a `Stream::capture` closure every handle this thread
    /// queues through is let in, also when the code queuing is not the closure's own text: a
    /// task of an executor polled inside the closure, or a job that a work-stealing `join`
    /// (rayon) runs on this thread while it waits, holding a clone of the stream made before
    /// the capture. The capture cannot tell such a clone from a library value's (the reason the
    /// scope exists), so the rule is "everything that runs on the capturing thread inside the
    /// closure is the closure's", and the graph's `unsafe` launch vouches for it
    /// (`GraphExec::launch`'s contract). What the library checks, pinned here: the scope is the
    /// closure's only (not before, not after), the thread's only (another thread's job is
    /// refused, even a scoped thread's), the capture's only (another capture's scope lets in
    /// nothing here); and without the closure (`begin_capture`) the same job is refused on the
    /// capturing thread too, the form to use when `work` would run other code.
    #[test]
    fn g15r_3_the_captures_closure_scope_is_its_thread_and_its_time_only() {
        let capture = new_token();
        let here = this_thread();
        // A job elsewhere in the program, holding a clone made before the capture (token 0).
        let job = move || member_rule(capture, 0, in_scope, here, this_thread(), "saxpy");
        assert!(job().is_err(), "before the closure (a `begin_capture` capture): refused on the capturing thread");
        {
            let _other_capture = CaptureScope::enter(new_token());
            assert!(job().is_err(), "another capture's closure lets nothing into this capture");
        }
        {
            let _scope = CaptureScope::enter(capture);
            assert!(job().is_ok(), "inside the closure, on its thread: the closure's (the documented rule)");
            let elsewhere = std::thread::scope(|s| s.spawn(job).join().unwrap());
            assert!(matches!(elsewhere, Err(Error::CapturedByAnotherThread { .. })), "a job on another thread: {elsewhere:?}");
        }
        assert!(job().is_err(), "after the closure: refused again");
    }

    /// G14R-1 with G14R-4: a fork needs the capture's closure or the thread that began it; any
    /// other thread is refused.
    #[test]
    fn g14r_4_a_fork_needs_the_capture_or_the_thread_that_began_it() {
        let capture = new_token();
        assert!(join_rule(capture, in_no_scope, true, "Stream::wait_event").is_ok());
        assert!(join_rule(capture, |token| token == capture, false, "Stream::wait_event").is_ok());
        assert!(matches!(join_rule(capture, in_no_scope, false, "Stream::wait_event"), Err(Error::CapturedByAnotherThread { .. })));
        assert!(join_rule(0, in_no_scope, true, "Stream::wait_event").is_err(), "no capture: nothing to join");
        assert_eq!(this_thread(), this_thread());
        assert_ne!(this_thread(), std::thread::spawn(this_thread).join().unwrap());
    }

    /// G14-5's window: the door's second check, under the driver-call mutex, refuses work whose
    /// capture state changed since its first check, either way, and re-applies the member rule.
    #[test]
    fn g14_5_the_check_under_the_driver_lock_refuses_a_changed_capture_state() {
        assert!(recheck_rule(false, false, || unreachable!("not captured: no member check"), "saxpy").is_ok());
        assert!(recheck_rule(true, true, || Ok(()), "saxpy").is_ok());
        let began = recheck_rule(false, true, || Ok(()), "saxpy").unwrap_err();
        assert!(matches!(&began, Error::CaptureChangedWhileQueued { operation } if operation == "saxpy"), "{began:?}");
        assert!(began.to_string().contains("nothing was queued"), "{began}");
        assert!(matches!(recheck_rule(true, false, || Ok(()), "saxpy"), Err(Error::CaptureChangedWhileQueued { .. })), "ended meanwhile");
        let other = recheck_rule(true, true, || Err(Error::CapturedByAnotherThread { operation: "saxpy".into() }), "saxpy");
        assert!(matches!(other, Err(Error::CapturedByAnotherThread { .. })), "another capture runs now");
    }

    /// The joined list: a join registers before its wait and only into the open capture it
    /// names; the end closes the list (later joins refused) and gets each live member once.
    #[test]
    fn g14_5_a_capture_end_gets_every_stream_joined_before_it_and_refuses_later_joins() {
        let list = JoinedStreams::<u32>::default();
        let (a, b, gone) = (Arc::new(1), Arc::new(2), Arc::new(3));
        assert!(!list.register(7, &a), "no capture yet");
        list.open(7, 1);
        assert!(!list.register(8, &a), "another capture's join");
        assert!(list.register(7, &a) && list.register(7, &a) && list.register(7, &b) && list.register(7, &gone));
        list.unregister(&b);
        drop(gone);
        let members = list.close();
        assert_eq!(members.len(), 1, "a once, b unregistered, the dropped one skipped");
        assert!(Arc::ptr_eq(&members[0], &a));
        assert!(!list.register(7, &b), "a join after the end is refused");
        list.open(9, 1);
        assert!(list.register(9, &b) && list.close().len() == 1);
    }

    /// The lock protocol of a capture's end and its joins, with a mutex per stream standing
    /// for `driver_calls`: joins take their own stream's mutex, register, "wait" (set their
    /// joined flag); the end takes the capturing stream's mutex, closes the list, takes each
    /// member's mutex and clears their flags. Over many rounds with several joiners, nothing
    /// deadlocks (the test ends) and no stream is left marked joined after the end: a join
    /// either came before the end (which then cleared it under its lock) or was refused.
    #[test]
    fn g14_5_a_capture_end_and_racing_joins_neither_deadlock_nor_leave_a_stream_joined() {
        struct Fake {
            driver_calls: Mutex<()>,
            joined: std::sync::atomic::AtomicBool,
            list: JoinedStreams<Fake>,
        }
        let fake = || Arc::new(Fake { driver_calls: Mutex::new(()), joined: false.into(), list: JoinedStreams::default() });
        for round in 1..=300u64 {
            let origin = fake();
            let streams: Vec<_> = (0..4).map(|_| fake()).collect();
            {
                let _driver = origin.driver_calls.lock().unwrap();
                origin.list.open(round, 1);
            }
            std::thread::scope(|scope| {
                for stream in &streams {
                    let origin = &origin;
                    scope.spawn(move || {
                        let _driver = stream.driver_calls.lock().unwrap();
                        if origin.list.register(round, stream) {
                            // The driver's wait joined the stream to the capture.
                            stream.joined.store(true, Ordering::SeqCst);
                        }
                    });
                }
                scope.spawn(|| {
                    let _driver = origin.driver_calls.lock().unwrap();
                    let members = origin.list.close();
                    let _locked: Vec<_> = members.iter().map(|member| member.driver_calls.lock().unwrap()).collect();
                    // The driver's end takes every joined stream out of the capture.
                    for member in &members {
                        member.joined.store(false, Ordering::SeqCst);
                    }
                });
            });
            let left = streams.iter().filter(|stream| stream.joined.load(Ordering::SeqCst)).count();
            assert_eq!(left, 0, "round {round}: a stream joined after the end's list was taken, and is marked joined to an ended capture");
        }
    }

    /// G15R-8: the capture's thread is read with its token, under the list's lock: a join that
    /// names an ended capture's token gets no thread (refused), and one that names the running
    /// capture gets that capture's thread, never the previous one's.
    #[test]
    fn g15r_8_a_join_reads_the_captures_thread_with_its_token() {
        let list = JoinedStreams::<u32>::default();
        assert_eq!(list.thread_of(0), None, "no capture yet");
        list.open(11, 100);
        assert_eq!(list.thread_of(11), Some(100));
        assert!(list.close().is_empty());
        assert_eq!(list.thread_of(11), None, "ended");
        list.open(12, 200);
        assert_eq!(list.thread_of(11), None, "an earlier capture's token");
        assert_eq!(list.thread_of(12), Some(200), "the new capture's own thread");
    }

    /// The end and a join, racing: every join that registered is in the end's list (the end
    /// locks it), and every join after the close is refused; none is lost in between.
    #[test]
    fn g14_5_no_join_slips_past_a_capture_end() {
        for round in 0..200u64 {
            let list = Arc::new(JoinedStreams::<u64>::default());
            list.open(round + 1, 1);
            let joiners: Vec<_> = (0..4)
                .map(|i| {
                    let list = Arc::clone(&list);
                    std::thread::spawn(move || {
                        let me = Arc::new(i);
                        let joined = list.register(round + 1, &me);
                        (joined, me)
                    })
                })
                .collect();
            std::thread::yield_now();
            let ended = list.close();
            let results: Vec<_> = joiners.into_iter().map(|j| j.join().unwrap()).collect();
            // Members the end got are still alive only through `results`' Arcs here: count by value.
            for (joined, me) in &results {
                let in_end = ended.iter().any(|m| Arc::ptr_eq(m, me));
                assert_eq!(*joined, in_end, "a join that registered must be in the end's list, and only such a join");
            }
        }
    }
}
