//! GPU repros of the second held-out review of session 14 (audit/2026-11-28b/FINDINGS-review2.md),
//! named for the findings (`g14r_<n>_...`). Host API only (no kernel crate), so this binary builds
//! with the host crate alone. They skip without a GPU and fail under `REQUIRE_GPU=1`.
//!
//! Run: `REQUIRE_GPU=1 cargo test --release -p ferrocuda-host --test gpu_g14r -- --nocapture`.

use ferrocuda_host::{DeviceBuffer, Error, Event, Stream};

mod common;
use common::gpu_or_skip;

/// G14R-1 (b): a wait the door refused (`CapturedByAnotherThread`: the stream is joined to
/// another thread's capture) still ran `note_join`, which made the refused thread the joined
/// stream's capture owner. From then on that thread's work on the stream passed the G14-5 rule
/// and went into the capturing thread's graph, untracked, reported `Ok` (and the capturing
/// thread was refused on its own forked stream). Wanted: the refused thread stays refused.
#[test]
fn g14r_1_a_refused_wait_does_not_hand_a_joined_stream_to_another_thread() {
    let Some(context) = gpu_or_skip("g14r_1_a_refused_wait_does_not_hand_a_joined_stream_to_another_thread") else { return };
    let origin = Stream::non_blocking(&context).unwrap();
    let forked = Stream::non_blocking(&context).unwrap();
    let mut theirs = DeviceBuffer::<u32>::zeroed(&context, 256).unwrap();
    let outside = Event::new(&context).unwrap();
    outside.record(&forked).unwrap();
    forked.synchronize().unwrap();

    origin.begin_capture().unwrap();
    let fork = Event::new(&context).unwrap();
    fork.record(&origin).unwrap();
    // This thread forks `forked` into its capture.
    forked.wait_event(&fork).unwrap();

    let (wait, fill) = std::thread::scope(|s| {
        s.spawn(|| {
            let wait = forked.wait_event(&outside);
            let fill = theirs.fill_async(7, &forked);
            (wait, fill)
        })
        .join()
        .unwrap()
    });
    println!("G14R-1 (b): the other thread's wait: {wait:?}; its fill on the joined stream afterwards: {fill:?}");

    // Join back and end, as the capturing thread meant to (refused before the fix: the owner moved).
    let join = Event::new(&context).unwrap();
    let joined_back = join.record(&forked).and_then(|()| origin.wait_event(&join));
    let graph = origin.end_capture();
    println!("G14R-1 (b): join back {joined_back:?}; graph nodes {:?}", graph.as_ref().map(|g| g.node_count()));
    assert!(matches!(wait, Err(Error::CapturedByAnotherThread { .. })), "the other thread's wait on the joined stream: {wait:?}");
    assert!(
        matches!(fill, Err(Error::CapturedByAnotherThread { .. })),
        "after its refused wait, the other thread's work on the joined stream was accepted: {fill:?}"
    );
    assert!(joined_back.is_ok(), "the capturing thread lost its forked stream: {joined_back:?}");
}

/// G14R-1 (a): another thread holding an event recorded into a capture forked its own stream
/// into that capture (`wait_event`), became that stream's capture owner, and its work there
/// went into the capturing thread's graph, untracked, reported `Ok`. Wanted: the fork is
/// refused by name on any thread but the capturing one.
#[test]
fn g14r_1_another_thread_cannot_fork_its_stream_into_a_capture() {
    let Some(context) = gpu_or_skip("g14r_1_another_thread_cannot_fork_its_stream_into_a_capture") else { return };
    let origin = Stream::non_blocking(&context).unwrap();
    let theirs_stream = Stream::non_blocking(&context).unwrap();
    let mut theirs = DeviceBuffer::<u32>::zeroed(&context, 256).unwrap();
    origin.begin_capture().unwrap();
    let fork = Event::new(&context).unwrap();
    fork.record(&origin).unwrap();
    let (wait, fill) = std::thread::scope(|s| {
        s.spawn(|| {
            let wait = theirs_stream.wait_event(&fork);
            let fill = theirs.fill_async(7, &theirs_stream);
            // Where the fork was accepted: join back into the capture, so that it can end
            // with the other thread's node in its graph.
            let back = wait.is_ok().then(|| {
                let back = Event::new(&context).unwrap();
                let _ = back.record(&theirs_stream);
                back
            });
            (wait, fill.map(|()| back))
        })
        .join()
        .unwrap()
    });
    if let Ok(Some(back)) = &fill {
        let _ = origin.wait_event(back);
    }
    let graph = origin.end_capture();
    println!(
        "G14R-1 (a): the other thread's fork: {wait:?}; its fill: {:?}; graph nodes {:?}",
        fill.as_ref().map(|_| ()),
        graph.as_ref().map(|g| g.node_count())
    );
    assert!(matches!(wait, Err(Error::CapturedByAnotherThread { .. })), "another thread forked its stream into this thread's capture: {wait:?}");
    // Refused fork: the fill ran on the other thread's own stream, for real.
    assert!(fill.is_ok(), "the other thread's own stream, not joined: {:?}", fill.as_ref().map(|_| ()));
    assert_eq!(theirs.to_vec().unwrap(), vec![7u32; 256], "a fill reported Ok never ran (recorded into the other thread's graph)");
}
