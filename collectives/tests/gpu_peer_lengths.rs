//! S5 of the second audit (issue 21): `PeerRank::all_reduce` with different lengths on
//! different ranks. The ranks then launch different block counts, and a block waits for a peer
//! block that never runs. With a spin limit the wait is bounded and `check` reports it;
//! with the default `spin_limit(0)` it would wait forever (the documented contract: every rank
//! makes the same calls with the same lengths). Needs two GPUs: skipped (printed) on fewer,
//! and required only under `REQUIRE_GPU=1 REQUIRE_GPUS=2`.

use std::io::Write;
use std::time::Duration;

use ferrocuda_collectives::Error;
use ferrocuda_collectives::peer::PeerGroup;
use ferrocuda_host::{Context, Device, DeviceBuffer, Stream};

fn required(var: &str) -> usize {
    std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or(0)
}

fn two_gpus_or_skip(test: &str) -> Option<Vec<Context>> {
    let skip = |why: String| {
        assert!(!(required("REQUIRE_GPU") == 1 && required("REQUIRE_GPUS") >= 2), "REQUIRE_GPU=1 REQUIRE_GPUS=2 but {test} cannot run: {why}");
        let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
        None
    };
    match Device::count() {
        Ok(n) if n >= 2 => Some((0..2).map(|i| Context::primary(i).unwrap()).collect()),
        Ok(n) => skip(format!("needs two GPUs, found {n}")),
        Err(e) => skip(e.to_string()),
    }
}

#[test]
fn s5_mismatched_lengths_end_in_a_reported_timeout_with_a_spin_limit() {
    const TEST: &str = "s5_mismatched_lengths_end_in_a_reported_timeout_with_a_spin_limit";
    let Some(contexts) = two_gpus_or_skip(TEST) else { return };
    let ranks = match PeerGroup::new(&contexts, 1 << 20) {
        Ok(ranks) => ranks,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "SKIPPED {TEST}: {e}");
            return;
        }
    };
    // A hang must fail the test, not stall it.
    std::thread::spawn(|| {
        std::thread::sleep(Duration::from_secs(60));
        let _ = writeln!(std::io::stderr(), "{TEST}: HANG after 60 s");
        std::process::exit(4);
    });
    let outcomes: Vec<bool> = std::thread::scope(|scope| {
        let handles: Vec<_> = ranks
            .into_iter()
            .map(|rank| {
                scope.spawn(move || {
                    let mut rank = rank.spin_limit(1 << 22);
                    let n = if rank.rank() == 0 { 1000 } else { 100_000 };
                    let context = rank.context().clone();
                    let stream = Stream::new(&context).unwrap();
                    let x = DeviceBuffer::from_slice(&context, &vec![1.0f32; n]).unwrap();
                    let mut y = DeviceBuffer::<f32>::zeroed(&context, n).unwrap();
                    rank.all_reduce(&stream, x.slice(..), y.slice_mut(..)).unwrap();
                    stream.synchronize().unwrap();
                    matches!(rank.check(), Err(Error::GroupPoisoned { .. }))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(outcomes.iter().any(|&timed_out| timed_out), "mismatched lengths went unreported: {outcomes:?}");
}

/// G20R-1 (audit 2026-11-28h), needs two GPUs: rank 0 bounds its waits, rank 1 (the default,
/// waiting for ever) starts 1 s late, and both make the same three calls (the documented
/// contract). Rank 0's give-up used to let it carry on and run ahead: its call 3 overwrote the
/// staging half rank 1 had not read for its call 1, so rank 1's call 1 gave 103 instead of 101
/// while rank 1's `check()` said Ok. Now a give-up ends the group: every element of every
/// output is the right sum or NaN, and both ranks' `check()` report the timeout.
#[test]
fn g20r1_a_rank_that_timed_out_does_not_run_ahead_of_a_late_peer() {
    const TEST: &str = "g20r1_a_rank_that_timed_out_does_not_run_ahead_of_a_late_peer";
    const N: usize = 1 << 20;
    let Some(contexts) = two_gpus_or_skip(TEST) else { return };
    let ranks = match PeerGroup::new(&contexts, N) {
        Ok(ranks) => ranks,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "SKIPPED {TEST}: {e}");
            assert!(!(required("REQUIRE_GPU") == 1 && required("REQUIRE_GPUS") >= 2), "{TEST}: no peer group: {e}");
            return;
        }
    };
    std::thread::spawn(|| {
        std::thread::sleep(Duration::from_secs(30));
        let _ = writeln!(std::io::stderr(), "{TEST}: HANG after 30 s");
        std::process::exit(4);
    });
    // Per rank: its number, (wrong, NaN) elements per call, whether `check()` reported it.
    type Outcome = (usize, Vec<(usize, usize)>, bool);
    let results: Vec<Outcome> = std::thread::scope(|scope| {
        let handles: Vec<_> = ranks
            .into_iter()
            .map(|rank| {
                scope.spawn(move || {
                    let r = rank.rank();
                    let mut rank = if r == 0 { rank.spin_limit(1 << 12) } else { rank };
                    let context = rank.context().clone();
                    let stream = Stream::new(&context).unwrap();
                    if r == 1 {
                        std::thread::sleep(Duration::from_millis(1000));
                    }
                    let mut per_call = Vec::new();
                    for call in 1..=3u32 {
                        // Rank 0 contributes `call`, rank 1 contributes 100: call k is 100 + k.
                        let value = if r == 0 { call as f32 } else { 100.0 };
                        let x = DeviceBuffer::from_slice(&context, &vec![value; N]).unwrap();
                        let mut y = DeviceBuffer::<f32>::zeroed(&context, N).unwrap();
                        rank.all_reduce(&stream, x.slice(..), y.slice_mut(..)).unwrap();
                        stream.synchronize().unwrap();
                        let out = y.to_vec().unwrap();
                        let want = 100.0 + call as f32;
                        let wrong = out.iter().filter(|&&v| v != want && !v.is_nan()).count();
                        let nan = out.iter().filter(|v| v.is_nan()).count();
                        println!("{TEST}: rank {r} call {call}: y[0] = {}, {wrong} wrong and {nan} NaN of {N}", out[0]);
                        per_call.push((wrong, nan));
                    }
                    let told = matches!(rank.check(), Err(Error::GroupPoisoned { .. }));
                    println!("{TEST}: rank {r}: check() reports the timeout: {told}");
                    // Later calls are refused with the same error, which says to make a new group.
                    let x = DeviceBuffer::from_slice(&context, &[1.0f32; 4]).unwrap();
                    let mut y = DeviceBuffer::<f32>::zeroed(&context, 4).unwrap();
                    let again = rank.all_reduce(&stream, x.slice(..), y.slice_mut(..));
                    assert!(!told || matches!(again, Err(Error::GroupPoisoned { operation: "PeerRank::all_reduce", .. })), "rank {r}: {again:?}");
                    (r, per_call, told)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (r, per_call, told) in &results {
        for (call, (wrong, nan)) in per_call.iter().enumerate() {
            assert_eq!(*wrong, 0, "rank {r} call {}: {wrong} elements hold another call's sum", call + 1);
            assert!(*nan == 0 || *told, "rank {r} call {}: NaN without an error from check()", call + 1);
        }
        assert!(*told, "rank {r}: check() did not report that the group gave up");
    }
}
