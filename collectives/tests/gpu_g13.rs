//! G13-2 of the held-out review of 2026-11-28 (`audit/2026-11-28/FINDINGS.md`): two calls of
//! one rank's peer all-reduce on different streams ran at the same time, and the later one
//! overwrote the staging half that the earlier one was still summing (calls `k` and `k + 2`
//! share a half; the kernel's argument assumed each call starts after the previous one ended,
//! which only one stream gives). Every call now declares the rank's staging and flags
//! written, so a call on another stream waits for the previous one.
//!
//! One GPU, one rank (no peer access needed): each output must equal its own input exactly.
//! Skipped (printed) without a GPU; `REQUIRE_GPU=1` makes that a failure.

use std::io::Write;
use std::time::Duration;

use ferrocuda_collectives::peer::PeerGroup;
use ferrocuda_host::{Context, Device, DeviceBuffer, Event, Stream};

fn gpu_or_skip(test: &str) -> Option<Context> {
    let skip = |why: String| {
        assert!(std::env::var("REQUIRE_GPU").as_deref() != Ok("1"), "REQUIRE_GPU=1 but {test} cannot run: {why}");
        let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
        None
    };
    match Device::count() {
        Ok(n) if n >= 1 => Some(Context::primary(0).expect("the primary context of GPU 0")),
        Ok(_) => skip("no GPU".to_string()),
        Err(e) => skip(e.to_string()),
    }
}

#[test]
fn g13_2_peer_all_reduce_calls_on_two_streams_do_not_share_a_staging_half_at_once() {
    const TEST: &str = "g13_2_peer_all_reduce_calls_on_two_streams_do_not_share_a_staging_half_at_once";
    let Some(context) = gpu_or_skip(TEST) else { return };
    let n = 1usize << 24;
    let mut rank = PeerGroup::new(std::slice::from_ref(&context), n).unwrap().pop().unwrap();
    let gate = Stream::non_blocking(&context).unwrap();
    let streams: Vec<Stream> = (0..3).map(|_| Stream::non_blocking(&context).unwrap()).collect();
    // Calls 1 and 3 (big, the same staging half) around call 2 (tiny, the other half).
    let lengths = [n, 4, n];
    let inputs: Vec<DeviceBuffer<f32>> = (0..3).map(|c| DeviceBuffer::from_slice(&context, &vec![(c + 1) as f32; lengths[c]]).unwrap()).collect();
    let mut outputs: Vec<DeviceBuffer<f32>> = (0..3).map(|c| DeviceBuffer::zeroed(&context, lengths[c]).unwrap()).collect();
    let mut bad_rounds = 0;
    let rounds = 30;
    for round in 0..rounds {
        // The three streams wait for one event behind a host callback, so the calls start together.
        gate.launch_host_fn(|| std::thread::sleep(Duration::from_millis(20))).unwrap();
        let start = Event::without_timing(&context).unwrap();
        start.record(&gate).unwrap();
        for stream in &streams {
            stream.wait_event(&start).unwrap();
        }
        for (c, output) in outputs.iter_mut().enumerate() {
            rank.all_reduce(&streams[c], inputs[c].slice(..), output.slice_mut(..)).unwrap();
        }
        for stream in &streams {
            stream.synchronize().unwrap();
        }
        let mut wrong = [0usize; 3];
        for (c, output) in outputs.iter().enumerate() {
            wrong[c] = output.to_vec().unwrap().iter().filter(|&&v| v != (c + 1) as f32).count();
        }
        if wrong.iter().any(|&w| w > 0) {
            bad_rounds += 1;
            eprintln!("{TEST}: round {round}: wrong elements per call {wrong:?}");
        }
    }
    eprintln!("{TEST}: {bad_rounds} of {rounds} rounds had a wrong output");
    assert_eq!(bad_rounds, 0, "calls on different streams raced on the staging half");
}
