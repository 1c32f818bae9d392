//! GPU tests of session 18's host items: G16-2 (audit/2026-11-28d/FINDINGS.md, addendum of
//! session 18) explained and closed. Host API and cudarc only (no kernel crate). They skip
//! without a GPU and fail under `REQUIRE_GPU=1`; the one marked `#[ignore]` is a driver probe
//! that may crash its process (run it alone: `--ignored --exact`).
//!
//! Run: `REQUIRE_GPU=1 cargo test --release -p ferrocuda-host --test gpu_s18 -- --nocapture`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cudarc::driver::{CudaContext, sys};
use ferrocuda_host::{Error, Event, Stream};

mod common;
use common::gpu_or_skip;

/// Records `event` into a capture of `stream` (relaxed mode) and ends it: the graph, to be
/// destroyed by the caller. Raw driver calls, as another library would make them.
fn record_into_ended_capture(stream: sys::CUstream, event: sys::CUevent) -> sys::CUgraph {
    let mut graph = std::ptr::null_mut();
    // SAFETY: live stream and event of the bound context; the graph handle is written once.
    unsafe {
        sys::cuStreamBeginCapture_v2(stream, sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED).result().expect("cuStreamBeginCapture");
        sys::cuEventRecord(event, stream).result().expect("cuEventRecord in the capture");
        sys::cuStreamEndCapture(stream, &mut graph).result().expect("cuStreamEndCapture");
    }
    graph
}

/// G16-2, the driver's side: what `cuStreamWaitEvent` answers for an event whose last record
/// went into a capture that has ended cleanly (its graph still alive). The CUDA programming
/// guide forbids using a captured event outside its capture; audit 2026-11-27e E5 saw
/// `CUDA_ERROR_INVALID_VALUE` after an *invalidated* capture. This pins the answer for a clean
/// end, the state `Stream::wait_event` reached in G16-2's race, and that a plain record makes
/// the event usable again.
#[test]
fn g16_2_the_driver_answers_invalid_value_for_a_wait_on_an_event_of_an_ended_capture() {
    let Some(_context) = gpu_or_skip("g16_2_the_driver_answers_invalid_value_for_a_wait_on_an_event_of_an_ended_capture") else { return };
    let cuda = CudaContext::new(0).expect("cudarc opens device 0");
    let (origin, waiter) = (cuda.new_stream().unwrap(), cuda.new_stream().unwrap());
    let event = cuda.new_event(None).unwrap();
    let graph = record_into_ended_capture(origin.cu_stream(), event.cu_event());
    // SAFETY: live handles of one context.
    let after_end = unsafe { sys::cuStreamWaitEvent(waiter.cu_stream(), event.cu_event(), 0) };
    // SAFETY: as above; a plain record, then the same wait.
    let (recorded, after_plain) =
        unsafe { (sys::cuEventRecord(event.cu_event(), origin.cu_stream()), sys::cuStreamWaitEvent(waiter.cu_stream(), event.cu_event(), 0)) };
    // SAFETY: the graph from the capture above, destroyed once.
    let destroyed = unsafe { sys::cuGraphDestroy(graph) };
    waiter.synchronize().unwrap();
    println!(
        "G16-2 probe: wait after the capture's end {after_end:?}; plain record {recorded:?}, wait after it {after_plain:?}; graph destroyed {destroyed:?}"
    );
    assert_eq!(after_end, sys::CUresult::CUDA_ERROR_INVALID_VALUE, "the driver's answer for a wait on an event of an ended capture");
    assert_eq!((recorded, after_plain), (sys::CUresult::CUDA_SUCCESS, sys::CUresult::CUDA_SUCCESS), "a plain record makes the event a point again");
}

/// The same after the capture's graph was destroyed: the state G16-1's race crashed in
/// (SIGSEGV inside the driver). A probe, printed; it may kill its process, so it runs alone.
#[test]
#[ignore = "driver probe that may crash its process: run alone with --ignored --exact"]
fn g16_2_probe_a_wait_on_an_event_whose_captures_graph_was_destroyed() {
    let Some(_context) = gpu_or_skip("g16_2_probe_a_wait_on_an_event_whose_captures_graph_was_destroyed") else { return };
    let cuda = CudaContext::new(0).expect("cudarc opens device 0");
    let (origin, waiter) = (cuda.new_stream().unwrap(), cuda.new_stream().unwrap());
    let event = cuda.new_event(None).unwrap();
    let graph = record_into_ended_capture(origin.cu_stream(), event.cu_event());
    // SAFETY: the graph from the capture above, destroyed once.
    let destroyed = unsafe { sys::cuGraphDestroy(graph) };
    // SAFETY: live stream and event (the graph that held the event's node is gone: the probe).
    let after_destroy = unsafe { sys::cuStreamWaitEvent(waiter.cu_stream(), event.cu_event(), 0) };
    waiter.synchronize().unwrap();
    println!("G16-2 probe: graph destroyed {destroyed:?}; wait after it {after_destroy:?}");
    assert_ne!(after_destroy, sys::CUresult::CUDA_SUCCESS, "a wait on an event of a destroyed capture graph");
}

/// G16-2 (audit 2026-11-28d; explained in session 18): `wait_event` read the capture state of
/// the event's last record (into a running capture: `captured_for_ordering` true), and only
/// then the capture's owner (`join_owner_check`) and its origin (`capture_origin`). A capture
/// that ended between the first read and the others left no capture to check, so the wait was
/// made with no join, on another thread, for an event of an ended capture (whose graph the
/// capturing thread may have destroyed already): the driver's `CUDA_ERROR_INVALID_VALUE`
/// (above), in 1 of ~7600 calls of G16-1's loop in session 17. Here every record goes into a
/// capture, so the waiting thread meets the end of a capture far more often. Passes when every
/// wait is `Ok` (before the first capture) or a refusal, and no wait reached the driver.
#[test]
fn g16_2_a_wait_racing_the_end_of_its_events_capture_is_refused_never_sent() {
    let Some(context) = gpu_or_skip("g16_2_a_wait_racing_the_end_of_its_events_capture_is_refused_never_sent") else { return };
    let origin = Stream::non_blocking(&context).unwrap();
    let waiter = Stream::non_blocking(&context).unwrap();
    let event = Event::without_timing(&context).unwrap();
    event.record(&origin).unwrap();
    origin.synchronize().unwrap();
    let stop = AtomicBool::new(false);
    let (ok, ended, not_ours, changed) = (AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0));
    let unexpected = std::sync::Mutex::new(Vec::<String>::new());
    let mut captures = 0u32;
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                let counter = match waiter.wait_event(&event) {
                    Ok(()) => &ok,
                    Err(Error::EventRecordedInCapture { .. }) => &ended,
                    Err(Error::CapturedByAnotherThread { .. }) => &not_ours,
                    Err(Error::CaptureChangedWhileQueued { .. }) => &changed,
                    Err(error) => {
                        let mut errors = unexpected.lock().unwrap();
                        if errors.len() < 8 {
                            errors.push(error.to_string());
                        }
                        continue;
                    }
                };
                counter.fetch_add(1, Ordering::Relaxed);
            }
        });
        let deadline = Instant::now() + Duration::from_secs(4);
        while Instant::now() < deadline && captures < 20_000 {
            origin.begin_capture().unwrap();
            event.record(&origin).unwrap();
            drop(origin.end_capture().unwrap());
            captures += 1;
        }
        stop.store(true, Ordering::Relaxed);
    });
    waiter.synchronize().unwrap();
    let unexpected = unexpected.into_inner().unwrap();
    println!(
        "G16-2 race: {captures} captures; waits: {} Ok, {} refused as of an ended capture, {} as another thread's capture, {} as changed, {} other errors {:?}",
        ok.into_inner(),
        ended.into_inner(),
        not_ours.into_inner(),
        changed.into_inner(),
        unexpected.len(),
        unexpected
    );
    assert!(unexpected.is_empty(), "waits that reached the driver or failed otherwise: {unexpected:?}");
}

/// Session 18 (found reading G16-2's path): a stream captured into one graph waiting on an
/// event recorded into another capture of the same thread skipped the registration that keeps
/// the event's capture from ending under the wait (only a stream outside every capture
/// registered), and the driver's wait merged two captures, which CUDA forbids (it invalidates
/// them). Now refused by name before the driver, and both captures end cleanly.
#[test]
fn g16_2_a_wait_across_two_captures_is_refused_and_both_end() {
    let Some(context) = gpu_or_skip("g16_2_a_wait_across_two_captures_is_refused_and_both_end") else { return };
    let (first, second) = (Stream::non_blocking(&context).unwrap(), Stream::non_blocking(&context).unwrap());
    let event = Event::without_timing(&context).unwrap();
    first.begin_capture().unwrap();
    event.record(&first).unwrap();
    second.begin_capture().unwrap();
    let waited = second.wait_event(&event);
    let (second_end, first_end) = (second.end_capture().map(drop), first.end_capture().map(drop));
    println!("G16-2 across captures: wait {waited:?}; second's end {second_end:?}; first's end {first_end:?}");
    assert!(matches!(waited, Err(Error::WaitAcrossCaptures { .. })), "{waited:?}");
    assert!(second_end.is_ok() && first_end.is_ok(), "both captures end: {second_end:?} {first_end:?}");
    // The event is usable again after a plain record.
    event.record(&first).unwrap();
    second.wait_event(&event).unwrap();
    second.synchronize().unwrap();
}
