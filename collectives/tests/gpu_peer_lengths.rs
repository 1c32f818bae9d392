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
                    matches!(rank.check(), Err(Error::Timeout { .. }))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(outcomes.iter().any(|&timed_out| timed_out), "mismatched lengths went unreported: {outcomes:?}");
}
