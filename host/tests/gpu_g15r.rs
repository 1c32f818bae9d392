//! GPU repros of the second held-out review of session 15 (audit/2026-11-28c/FINDINGS-review2.md),
//! named for the findings (`g15r_<n>_...`). Host API and cudarc only (no kernel crate), so this
//! binary builds with the host crate alone. They skip without a GPU and fail under
//! `REQUIRE_GPU=1`; the ones marked `#[ignore]` show open findings (run them with `--ignored`:
//! they fail while the finding is open).
//!
//! Run: `REQUIRE_GPU=1 cargo test --release -p ferrocuda-host --test gpu_g15r -- --nocapture --include-ignored`.
//! Not run when written (no device time in session 15's review).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cudarc::driver::{CudaContext, sys};
use ferrocuda_host::{BufferAccess, DeviceBuffer, Error, Event, Stream};

mod common;
use common::gpu_or_skip;

/// G15R-1: an `Event` recorded on a stream of `Stream::from_raw_in_owner_captures` while its
/// owner (PyTorch, here cudarc) captures it is a node of the owner's graph, but `Event::record`
/// asked only `captured_for_ordering`, which answers "not captured" for every borrowed stream:
/// the event looked like a point in a stream, and a ferrocuda stream's `wait_event` on it
/// joined that foreign capture unseen (no flag, no driver query on an owned stream's door).
/// Its later work (here a fill of a ferrocuda buffer) was recorded into the owner's graph,
/// which the owner launches when it likes, untracked, reported `Ok` (Q8's class).
///
/// Before the fix (expected): `wait: Ok(())`, `joined: Ok(true)`, the fill `Ok` but the buffer
/// still 0 after a synchronize (the fill is in the owner's graph; the owner's end fails with
/// an unjoined fork). After: `wait: Err(EventRecordedInCapture)`, `joined: Ok(false)`, the
/// fill runs (the buffer holds 7s), and the owner's capture ends cleanly.
#[test]
fn g15r_1_an_event_recorded_in_an_owners_capture_forks_no_stream_of_ferrocudas_into_it() {
    let Some(context) = gpu_or_skip("g15r_1_an_event_recorded_in_an_owners_capture_forks_no_stream_of_ferrocudas_into_it") else { return };
    let cuda = CudaContext::new(0).expect("cudarc opens device 0");
    let home = cuda.new_stream().unwrap();
    let ours = Stream::non_blocking(&context).unwrap();
    let mut theirs = DeviceBuffer::<u32>::zeroed(&context, 256).unwrap();
    let event = Event::without_timing(&context).unwrap();
    home.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED).unwrap();
    let (recorded, wait, joined, fill) = {
        // SAFETY: cudarc's stream, kept alive by the Arc held with it; the only work through it
        // is an event record (no memory), and the context outlives the graph.
        let owned = unsafe { Stream::from_raw_in_owner_captures(&context, home.cu_stream(), home.clone()) }.unwrap();
        let recorded = event.record(&owned);
        let wait = ours.wait_event(&event);
        let joined = ours.is_capturing();
        let fill = theirs.fill_async(7, &ours);
        (recorded, wait, joined, fill)
    };
    let ended = home.end_capture(sys::CUgraphInstantiate_flags(0)).map(|graph| graph.is_some());
    let synced = ours.synchronize();
    let values = theirs.to_vec();
    println!("G15R-1: record {recorded:?}; wait {wait:?}; joined {joined:?}; fill {fill:?}; owner's end {ended:?}; sync {synced:?}");
    assert!(recorded.is_ok(), "{recorded:?}");
    assert!(matches!(wait, Err(Error::EventRecordedInCapture { .. })), "a wait on an event in the owner's capture: {wait:?}");
    assert!(!joined.unwrap(), "ferrocuda's stream joined the owner's capture");
    assert!(fill.is_ok() && synced.is_ok(), "{fill:?} {synced:?}");
    assert_eq!(values.unwrap(), vec![7u32; 256], "the fill went into the owner's graph instead of running");
    assert!(ended.is_ok(), "the owner's capture: {ended:?}");
}

/// G15R-2: `Event::record` stored the event's capture state after the driver's record, with no
/// lock held in between: a `wait_event` on another thread in that window read the previous
/// state ("a point in a stream"), skipped the owner rule (G14R-1's fix) and forked its stream
/// into the capture; the thread's later work on the stream was captured, reported `Ok`. The
/// window is a few instructions wide, so this races one capturing thread (begin, record, end)
/// against a thread waiting on the event, many rounds, and counts waits that returned `Ok`
/// and left the waiter's stream captured.
///
/// Before the fix (expected): some silent joins in 2,000 rounds (not every run: a race).
/// After: none (the waits that met the captured record are refused: `CapturedByAnotherThread`
/// or `EventRecordedInCapture`).
#[test]
fn g15r_2_a_wait_racing_an_events_record_into_a_capture_never_joins_silently() {
    let Some(context) = gpu_or_skip("g15r_2_a_wait_racing_an_events_record_into_a_capture_never_joins_silently") else { return };
    let origin = Stream::non_blocking(&context).unwrap();
    let waiter = Stream::non_blocking(&context).unwrap();
    let event = Event::without_timing(&context).unwrap();
    event.record(&origin).unwrap();
    origin.synchronize().unwrap();
    let stop = AtomicBool::new(false);
    let (silent, refused, waits) = (AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0));
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                match waiter.wait_event(&event) {
                    Ok(()) => {
                        waits.fetch_add(1, Ordering::Relaxed);
                        if waiter.is_capturing().unwrap_or(false) {
                            silent.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Err(_) => {
                        refused.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        for _ in 0..2000 {
            if Instant::now() > deadline {
                break;
            }
            if let Err(error) = origin.begin_capture() {
                // After a failed end (an unjoined fork), in case the driver kept the stream.
                println!("G15R-2: begin refused: {error}");
                let _ = origin.end_capture();
                continue;
            }
            let _ = event.record(&origin);
            // Fails (an unjoined fork) when the waiter joined: that is what is counted.
            let _ = origin.end_capture();
            // A point in the stream again, for the next round's waits.
            let _ = event.record(&origin);
        }
        stop.store(true, Ordering::Relaxed);
    });
    let (silent, refused, waits) = (silent.into_inner(), refused.into_inner(), waits.into_inner());
    println!("G15R-2: {waits} waits Ok, {refused} refused, {silent} silent joins");
    assert_eq!(silent, 0, "a wait returned Ok and left the waiting stream captured by another thread's capture");
}

/// G15R-5: `Stream::will_use_for` checks the capture once, before `work`. Declared
/// inside a capture, the declaration orders and records nothing (captured work is not
/// tracked); when another handle ends the capture before `work` queues (here: inside `work`,
/// a clone made before the capture, deterministic; in general another thread's
/// `end_capture`), the work runs for real and the buffer's record never names the stream:
/// host reads, other streams and its free do not wait for it. The peer all-reduce
/// (`collectives::peer`) queues its kernel this way.
///
/// Before the fix (expected): `y` read back as 0s (the host read did not wait for the memset,
/// which queues behind ~20 ms of fills: 1,000 of 64 MiB). After: the door work inside `work`
/// on that stream is refused (`CaptureChangedWhileQueued`: the declaration was made for the
/// capture), so nothing untracked runs.
#[test]
fn g15r_5_a_declaration_made_in_a_capture_that_ended_before_its_work_still_tracks_it() {
    let Some(context) = gpu_or_skip("g15r_5_a_declaration_made_in_a_capture_that_ended_before_its_work_still_tracks_it") else { return };
    let capturing = Stream::non_blocking(&context).unwrap();
    let other_handle = capturing.clone();
    let n = 64 << 20;
    let mut scratch = DeviceBuffer::<u8>::zeroed(&context, n).unwrap();
    let mut y = DeviceBuffer::<u8>::zeroed(&context, n).unwrap();
    let y_address = y.as_device_ptr().address();
    capturing.begin_capture().unwrap();
    let outcome = capturing.will_use_for(&[BufferAccess::write(&mut y)], || -> Result<(), Error> {
        let ended = other_handle.end_capture();
        // Real work now: slow fills ahead of the declared work on the same stream.
        for _ in 0..1000 {
            scratch.fill_async(1, &capturing)?;
        }
        // The declared work, through raw pointers as the peer all-reduce's launcher does.
        // SAFETY: `y` is a live allocation of n bytes of this context, written by nothing else.
        capturing.enqueue("cuMemsetD8Async", &[], |raw| {
            unsafe { cudarc::driver::result::memset_d8_async(y_address, 7, n, raw.get()) }.expect("cuMemsetD8Async");
            Ok::<_, Error>(())
        })?;
        println!("G15R-5: the other handle's end: {:?}", ended.map(|_| ()));
        Ok(())
    });
    let read = y.to_vec();
    capturing.synchronize().unwrap();
    println!("G15R-5: will_use_for {outcome:?}; y[0] read right after: {:?}", read.as_ref().map(|v| v[0]));
    if let (Ok(Ok(())), Ok(values)) = (&outcome, &read) {
        assert!(values.iter().all(|&v| v == 7), "the work declared inside the capture ran after it ended, untracked: the host read did not wait for it");
    }
    assert!(matches!(outcome, Ok(Err(Error::CaptureChangedWhileQueued { .. }))), "{outcome:?}");
}

/// G15R-6 (liveness): the door holds the stream's `driver_calls` mutex while `work` runs, and
/// `Stream::enqueue` is public and safe: a `work` closure that queued on the same stream again
/// waited for a mutex its own thread holds, for ever. Now refused (`NestedDoorCall`). Run on a
/// helper thread with a 5 s limit so that the test reports instead of hanging. (The rest of
/// the class: the three `g15r_6_*` tests below.)
///
/// Before the fix (expected): `HUNG`. After: `Err(NestedDoorCall { operation: "inner" })`, and
/// the stream is usable afterwards.
#[test]
fn g15r_6_a_door_call_inside_a_door_closure_returns() {
    let Some(context) = gpu_or_skip("g15r_6_a_door_call_inside_a_door_closure_returns") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let nested = stream.enqueue("outer", &[], |_| stream.enqueue("inner", &[], |_| Ok::<_, Error>(())));
        let again = stream.enqueue("after", &[], |_| Ok::<_, Error>(()));
        let _ = done.send((nested, again));
    });
    match finished.recv_timeout(Duration::from_secs(5)) {
        Ok((nested, again)) => {
            println!("G15R-6: nested door call returned {nested:?}; the next call {again:?}");
            assert!(matches!(&nested, Err(Error::NestedDoorCall { operation }) if operation == "inner"), "{nested:?}");
            assert!(again.is_ok(), "{again:?}");
        }
        Err(_) => panic!("G15R-6: HUNG: a door call inside a door closure did not return within 5 s (the thread waits for its own driver_calls)"),
    }
}

/// G15R-6's remainder (the class): two `Stream::enqueue` closures on two threads, each
/// inside its own stream's door at once (a barrier), queuing on the other's stream. Before:
/// each waited for the other's driver-call lock for ever (ABBA; the helper threads report
/// `HUNG` after 5 s). Now every call that could wait for a lock inside a door's work is
/// refused: both return `Err(NestedDoorCall)` and both streams work afterwards.
#[test]
fn g15r_6_two_enqueue_closures_queuing_on_each_others_streams_return() {
    let Some(context) = gpu_or_skip("g15r_6_two_enqueue_closures_queuing_on_each_others_streams_return") else { return };
    let (a, b) = (Stream::non_blocking(&context).unwrap(), Stream::non_blocking(&context).unwrap());
    let both_inside = std::sync::Arc::new(std::sync::Barrier::new(2));
    let (done, finished) = std::sync::mpsc::channel();
    for (own, other) in [(a.clone(), b.clone()), (b.clone(), a.clone())] {
        let (both_inside, done) = (both_inside.clone(), done.clone());
        std::thread::spawn(move || {
            let outcome = own.enqueue("own", &[], |_| {
                both_inside.wait();
                Ok::<_, Error>(other.enqueue("the other stream's", &[], |_| Ok::<_, Error>(())))
            });
            let _ = done.send(outcome);
        });
    }
    for _ in 0..2 {
        let outcome = finished.recv_timeout(Duration::from_secs(5)).expect("G15R-6: HUNG: two enqueue closures queuing on each other's streams deadlocked");
        println!("G15R-6 (two streams): {outcome:?}");
        assert!(matches!(&outcome, Ok(Err(Error::NestedDoorCall { operation })) if operation == "the other stream's"), "{outcome:?}");
    }
    let mut x = DeviceBuffer::<u32>::zeroed(&context, 64).unwrap();
    x.fill_async(3, &a).unwrap();
    x.fill_async(4, &b).unwrap();
    assert_eq!(x.to_vec().unwrap(), vec![4u32; 64], "both streams work afterwards");
}

/// G15R-6's remainder: ending a capture (`end_capture`, or dropping its last handle) inside an
/// `enqueue` closure on a stream joined to that capture. The end locks the joined stream's
/// driver-call lock, which the closure's door holds: before, a hang. Now `end_capture` there is
/// refused (`NestedDoorCall`; the capture goes on and ends cleanly after the join back), and the
/// last handle's drop hands the abandoned capture's end to the release thread, which ends it
/// once the closure returns. Each step on a helper thread with a 5 s limit.
#[test]
fn g15r_6_a_captures_end_inside_a_closure_on_a_joined_stream_returns() {
    let Some(context) = gpu_or_skip("g15r_6_a_captures_end_inside_a_closure_on_a_joined_stream_returns") else { return };
    let (done, finished) = std::sync::mpsc::channel();
    let worker_context = context.clone();
    std::thread::spawn(move || {
        let context = worker_context;
        let origin = Stream::non_blocking(&context).unwrap();
        let joined = Stream::non_blocking(&context).unwrap();
        let (fork, join) = (Event::without_timing(&context).unwrap(), Event::without_timing(&context).unwrap());
        origin.begin_capture().unwrap();
        fork.record(&origin).unwrap();
        joined.wait_event(&fork).unwrap();
        let inside = joined.enqueue("end inside", &[], |_| Ok::<_, Error>(origin.end_capture().map(drop)));
        // The capture still runs: join back, end it cleanly.
        join.record(&joined).unwrap();
        origin.wait_event(&join).unwrap();
        let ended = origin.end_capture().map(|graph| graph.node_count());
        // Again, with the last handle of the capture dropped inside the closure (joined back
        // first, so that the abandoned capture ends cleanly; the events let go of `origin`).
        let plain = Stream::non_blocking(&context).unwrap();
        origin.begin_capture().unwrap();
        fork.record(&origin).unwrap();
        joined.wait_event(&fork).unwrap();
        join.record(&joined).unwrap();
        origin.wait_event(&join).unwrap();
        fork.record(&plain).unwrap();
        join.record(&plain).unwrap();
        let dropped = joined.enqueue("drop inside", &[], |_| {
            drop(origin);
            Ok::<_, Error>(())
        });
        let synced = context.synchronize();
        let still_joined = joined.is_capturing();
        let _ = done.send((inside, ended, dropped, synced, still_joined));
    });
    let (inside, ended, dropped, synced, still_joined) =
        finished.recv_timeout(Duration::from_secs(5)).expect("G15R-6: HUNG: a capture's end inside a closure on a stream joined to it");
    println!(
        "G15R-6 (end inside a joined stream's closure): {inside:?}; then {ended:?}; drop inside {dropped:?}, sync {synced:?}, joined after {still_joined:?}"
    );
    assert!(matches!(&inside, Ok(Err(Error::NestedDoorCall { operation })) if operation == "Stream::end_capture"), "{inside:?}");
    assert!(matches!(ended, Ok(Ok(_))), "the capture ends cleanly after the closure: {ended:?}");
    assert!(dropped.is_ok() && synced.is_ok(), "{dropped:?} {synced:?}");
    assert!(!still_joined.unwrap(), "the abandoned capture was ended by the release thread");
    assert_eq!(context.deferred_releases(), 0);
}

/// G15R-6's remainder: GPU resources dropped inside an `enqueue` closure (a buffer used on that
/// very stream, whose release orders after it) are released after the closure, on the release
/// thread, instead of waiting for locks inside it. Before: the release's own door call on the
/// stream met the held lock (now `NestedDoorCall`) or, on another stream, could deadlock.
#[test]
fn g15r_6_a_buffer_dropped_inside_a_closure_is_released_after_it() {
    let Some(context) = gpu_or_skip("g15r_6_a_buffer_dropped_inside_a_closure_is_released_after_it") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    let mut buffer = DeviceBuffer::<u32>::zeroed(&context, 1 << 20).unwrap();
    buffer.fill_async(5, &stream).unwrap();
    let (done, finished) = std::sync::mpsc::channel();
    let worker = stream.clone();
    std::thread::spawn(move || {
        let outcome = worker.enqueue("drop inside", &[], |_| {
            drop(buffer);
            Ok::<_, Error>(())
        });
        let _ = done.send(outcome);
    });
    let outcome = finished.recv_timeout(Duration::from_secs(5)).expect("G15R-6: HUNG: a buffer dropped inside an enqueue closure");
    let synced = context.synchronize();
    println!("G15R-6 (drop inside): {outcome:?}; sync {synced:?}; deferred {}", context.deferred_releases());
    assert!(outcome.is_ok() && synced.is_ok(), "{outcome:?} {synced:?}");
    assert_eq!(context.deferred_releases(), 0, "the release was handed off and performed");
}

/// Found with G15R-6's fix (session 16): the last handle of a capturing stream dropped inside a
/// host callback (of another stream) handed the capture's end to the release thread through
/// `Context::release`, which postpones a release until the context's captures have ended: this
/// capture among them, so it never ended (`Context::synchronize` kept failing with
/// `CaptureInProgress`, and the releases postponed for it never ran). Now the end is handed off
/// as such and runs at once on the release thread.
///
/// Before (expected): `sync Err(CaptureInProgress { captures: 1, .. })`. After: `sync Ok(())`,
/// nothing left deferred.
#[test]
fn s16_a_capture_abandoned_inside_a_host_callback_ends() {
    let Some(context) = gpu_or_skip("s16_a_capture_abandoned_inside_a_host_callback_ends") else { return };
    let origin = Stream::non_blocking(&context).unwrap();
    let other = Stream::non_blocking(&context).unwrap();
    origin.begin_capture().unwrap();
    other.launch_host_fn(move || drop(origin)).unwrap();
    other.synchronize().unwrap();
    let synced = context.synchronize();
    println!("s16 (capture abandoned in a host callback): sync {synced:?}; deferred {}", context.deferred_releases());
    assert!(synced.is_ok(), "the abandoned capture never ended: {synced:?}");
    assert_eq!(context.deferred_releases(), 0);
}

/// Session 16, with G15R-6: a stream call inside a host callback (which the stream's later work
/// waits for) is refused before it takes any lock of ferrocuda's (`CallInHostCallback`), so a
/// thread waiting on the GPU inside a door's work is never waited for through a callback. Before:
/// the door took its locks and the driver refused the call (`CUDA_ERROR_NOT_PERMITTED`).
#[test]
fn s16_a_stream_call_inside_a_host_callback_is_refused_before_any_lock() {
    let Some(context) = gpu_or_skip("s16_a_stream_call_inside_a_host_callback_is_refused_before_any_lock") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    let inner = stream.clone();
    let (sent, received) = std::sync::mpsc::channel();
    stream
        .launch_host_fn(move || {
            let _ = sent.send(inner.enqueue("inside a callback", &[], |_| Ok::<_, Error>(())));
        })
        .unwrap();
    stream.synchronize().unwrap();
    let outcome = received.recv_timeout(Duration::from_secs(5)).expect("the callback ran");
    println!("s16 (stream call in a host callback): {outcome:?}");
    assert!(matches!(&outcome, Err(Error::CallInHostCallback { operation }) if operation == "inside a callback"), "{outcome:?}");
}

/// G15R-7: ordering a ferrocuda stream after a stream of `Stream::from_raw_in_owner_captures`
/// (here: a fill on another stream of a buffer the owner's stream wrote before its owner began
/// capturing) recorded that stream's tail event **into the owner's capture**: `tail_for` asked
/// `captured_for_ordering`, which answers "not captured" for borrowed streams, and the record
/// went through the door, which lets such a stream's work into its owner's capture. The waiting
/// ferrocuda stream then joined the owner's capture unseen, and its fill (and all its later
/// work until the owner's end) was recorded into the owner's graph, reported `Ok`.
///
/// Before the fix (expected): `fill Ok(())`, `joined Ok(true)`, the buffer still 1s after a
/// synchronize, the owner's end fails (unjoined fork). After: the fill is refused
/// (`OrderingAfterCapture`: no point of that stream recorded outside the owner's capture),
/// `joined Ok(false)`, the owner's end `Ok`; after the end the fill runs (9s).
#[test]
fn g15r_7_ordering_after_a_stream_in_its_owners_capture_does_not_join_the_waiter_to_it() {
    let Some(context) = gpu_or_skip("g15r_7_ordering_after_a_stream_in_its_owners_capture_does_not_join_the_waiter_to_it") else { return };
    let cuda = CudaContext::new(0).expect("cudarc opens device 0");
    let home = cuda.new_stream().unwrap();
    let ours = Stream::non_blocking(&context).unwrap();
    let mut x = DeviceBuffer::<u32>::zeroed(&context, 256).unwrap();
    // SAFETY: cudarc's stream, kept alive by the Arc held with it; nothing is recorded through it
    // into the owner's graph (its one fill runs before the capture).
    let owned = unsafe { Stream::from_raw_in_owner_captures(&context, home.cu_stream(), home.clone()) }.unwrap();
    x.fill_async(1, &owned).unwrap();
    home.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED).unwrap();
    let fill = x.fill_async(9, &ours);
    let joined = ours.is_capturing();
    let ended = home.end_capture(sys::CUgraphInstantiate_flags(0)).map(|graph| graph.is_some());
    let synced = ours.synchronize().and_then(|()| owned.synchronize());
    let after_capture = x.to_vec();
    println!("G15R-7: fill {fill:?}; joined {joined:?}; owner's end {ended:?}; sync {synced:?}; x[0] {:?}", after_capture.as_ref().map(|v| v[0]));
    assert!(matches!(fill, Err(Error::OrderingAfterCapture { .. })), "the ordering after the owner's captured stream: {fill:?}");
    assert!(!joined.unwrap(), "ferrocuda's stream joined the owner's capture");
    assert!(ended.is_ok(), "the owner's capture: {ended:?}");
    assert_eq!(after_capture.unwrap(), vec![1u32; 256]);
    x.fill_async(9, &ours).unwrap();
    assert_eq!(x.to_vec().unwrap(), vec![9u32; 256], "after the owner's end the fill runs");
}

/// G16-1 (audit 2026-11-28d, found running G15R-2's loop on an H200: a segfault in three runs
/// of four): `wait_event`, `Event::synchronize`, `is_complete` and `elapsed_ms` read the
/// event's capture state and released its lock before their driver call. Another thread's
/// record into a capture, the capture's end and its graph's destruction fit in between, and
/// the driver then waited on (or queried) a node of a destroyed graph: the process died
/// inside the driver. Now the lock is held across the driver call. This races a thread that
/// captures (begin, record, end, the graph dropped, a plain record again) against one that
/// waits, queries and synchronizes on the event, and passes if the process lives and every
/// call returned `Ok` or a refusal. G16-2 (explained in session 18): a wait whose event was
/// last recorded into the capture, where the capture ended between `wait_event`'s first check
/// and its read of the capture, reached the driver and got `CUDA_ERROR_INVALID_VALUE` (1 of
/// ~7600 calls in session 17, 65 of ~9000 in session 16); now it is refused
/// (`EventRecordedInCapture`), so any driver error here fails the test.
#[test]
fn g16_1_a_wait_or_query_racing_a_record_into_an_ended_and_dropped_capture_never_reads_its_graph() {
    let Some(context) = gpu_or_skip("g16_1_a_wait_or_query_racing_a_record_into_an_ended_and_dropped_capture_never_reads_its_graph") else { return };
    let origin = Stream::non_blocking(&context).unwrap();
    let waiter = Stream::non_blocking(&context).unwrap();
    let event = Event::without_timing(&context).unwrap();
    event.record(&origin).unwrap();
    origin.synchronize().unwrap();
    let stop = AtomicBool::new(false);
    let (ok, refused, spurious) = (AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0));
    let unexpected = std::sync::Mutex::new(Vec::<String>::new());
    let capturing_errors = std::sync::Mutex::new(Vec::<String>::new());
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut round = 0u32;
            while !stop.load(Ordering::Relaxed) {
                round += 1;
                let outcome = match round % 3 {
                    0 => waiter.wait_event(&event),
                    1 => event.is_complete().map(|_| ()),
                    _ => event.synchronize(),
                };
                match outcome {
                    Ok(()) => ok.fetch_add(1, Ordering::Relaxed),
                    Err(Error::EventRecordedInCapture { .. } | Error::CapturedByAnotherThread { .. } | Error::CaptureChangedWhileQueued { .. }) => {
                        refused.fetch_add(1, Ordering::Relaxed)
                    }
                    // G16-2 before session 18: counted apart, so that the line says how often.
                    Err(Error::Driver(error)) if error.call == "cuStreamWaitEvent" && error.code == sys::cudaError_enum::CUDA_ERROR_INVALID_VALUE => {
                        spurious.fetch_add(1, Ordering::Relaxed)
                    }
                    Err(error) => {
                        unexpected.lock().unwrap().push(format!("round {round}: {error}"));
                        0
                    }
                };
            }
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        for _ in 0..3000 {
            if Instant::now() > deadline {
                break;
            }
            let note = |step: &str, outcome: Result<(), Error>| {
                if let Err(error) = outcome {
                    let mut steps = capturing_errors.lock().unwrap();
                    if steps.len() < 8 {
                        steps.push(format!("{step}: {error}"));
                    }
                }
            };
            if let Err(error) = origin.begin_capture() {
                note("begin", Err(error));
                note("end after a refused begin", origin.end_capture().map(drop));
                continue;
            }
            note("record in capture", event.record(&origin));
            note("end", origin.end_capture().map(drop));
            note("record", event.record(&origin));
        }
        stop.store(true, Ordering::Relaxed);
    });
    println!("G16-1: the capturing thread's errors (first 8): {:?}", capturing_errors.into_inner().unwrap());
    let _ = waiter.synchronize();
    let unexpected = unexpected.into_inner().unwrap();
    println!(
        "G16-1: {} calls Ok, {} refused, {} waits answered INVALID_VALUE (G16-2), {} other errors {:?}",
        ok.into_inner(),
        refused.into_inner(),
        spurious.load(Ordering::Relaxed),
        unexpected.len(),
        unexpected.iter().take(3).collect::<Vec<_>>()
    );
    assert!(unexpected.is_empty(), "calls failed with errors other than the refusals: {unexpected:?}");
    assert_eq!(spurious.into_inner(), 0, "G16-2: a wait reached the driver for an event of an ended capture");
}
