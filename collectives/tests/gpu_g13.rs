//! G13-2 of the held-out review of 2026-11-28 (`audit/2026-11-28/FINDINGS.md`): two calls of
//! one rank's peer all-reduce on different streams ran at the same time, and the later one
//! overwrote the staging half that the earlier one was still summing (calls `k` and `k + 2`
//! share a half; the kernel's argument assumed each call starts after the previous one ended,
//! which only one stream gives). Every call now declares the rank's staging and flags
//! written, so a call on another stream waits for the previous one.
//!
//! One GPU, one rank (no peer access needed): each output must equal its own input exactly.
//! Skipped (printed) without a GPU; `REQUIRE_GPU=1` makes that a failure.
//!
//! G13-4: an NCCL operation inside a `group` is queued only at the group's end, but the door
//! records it when it is issued. On a half of a `split_at_mut` (a shared record), a write of
//! the other half on another stream in between replaced it as the record's writer: the
//! buffer's host reads and release then waited for that write only, not for the receive.
//! Two GPUs and libnccl; skipped otherwise, required under `REQUIRE_GPU=1 REQUIRE_GPUS=2`.

use std::io::Write;
use std::time::Duration;

use ferrocuda_collectives::nccl::{self, Communicator, Config};
use ferrocuda_collectives::peer::PeerGroup;
use ferrocuda_collectives::{Error, group};
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

fn two_gpus_with_nccl_or_skip(test: &str) -> Option<Vec<Context>> {
    let required = |var: &str| std::env::var(var).ok().and_then(|v| v.parse::<usize>().ok()).unwrap_or(0);
    let skip = |why: String| {
        assert!(!(required("REQUIRE_GPU") == 1 && required("REQUIRE_GPUS") >= 2), "REQUIRE_GPU=1 REQUIRE_GPUS=2 but {test} cannot run: {why}");
        let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
        None
    };
    match Device::count() {
        Ok(n) if n >= 2 => {}
        Ok(n) => return skip(format!("needs two GPUs, found {n}")),
        Err(e) => return skip(e.to_string()),
    }
    if let Err(e) = nccl::version() {
        return skip(e.to_string());
    }
    Some((0..2).map(|i| Context::primary(i).unwrap()).collect())
}

#[test]
fn g13_4_a_grouped_receive_into_a_split_half_is_refused_or_waited_for() {
    const TEST: &str = "g13_4_a_grouped_receive_into_a_split_half_is_refused_or_waited_for";
    let Some(contexts) = two_gpus_with_nccl_or_skip(TEST) else { return };
    let n = 1usize << 22;
    let comms = Communicator::init_all(&contexts, &Config::new()).unwrap();
    let (s0, s1, t1) = (Stream::non_blocking(&contexts[0]).unwrap(), Stream::non_blocking(&contexts[1]).unwrap(), Stream::non_blocking(&contexts[1]).unwrap());
    let x0 = DeviceBuffer::from_slice(&contexts[0], &vec![7.0f32; n]).unwrap();
    let z1 = DeviceBuffer::from_slice(&contexts[1], &vec![5.0f32; n]).unwrap();
    let mut y1 = DeviceBuffer::<f32>::zeroed(&contexts[1], 2 * n).unwrap();
    let mut peer = PeerGroup::new(&contexts[1..2], n).unwrap().pop().unwrap();
    let on = vec![comms[0].on(&s0).unwrap(), comms[1].on(&s1).unwrap()];
    // Rank 0's send starts 300 ms late: its stream first runs a host callback that sleeps.
    s0.launch_host_fn(|| std::thread::sleep(Duration::from_millis(300))).unwrap();
    let mut received_in_group = false;
    {
        let mut whole = y1.slice_mut(..);
        let (a, b) = whole.split_at_mut(n);
        group(&on, |ranks| {
            match ranks[1].recv(a, 0) {
                Ok(()) => {
                    received_in_group = true;
                    ranks[0].send(x0.slice(..), 1).unwrap();
                }
                Err(error @ Error::GroupMisuse { .. }) => eprintln!("{TEST}: refused: {error}"),
                Err(other) => panic!("{TEST}: {other}"),
            }
            // Another stream writes the other half while the receive waits for the group's end.
            peer.all_reduce(&t1, z1.slice(..), b).unwrap();
        })
        .unwrap();
    }
    // A host read waits for every stream whose work on `y1` is recorded.
    let got = y1.to_vec().unwrap();
    let received = got[..n].iter().filter(|&&v| v == 7.0).count();
    eprintln!("{TEST}: receive issued in the group: {received_in_group}; {received} of {n} received elements seen by the host read");
    assert!(got[n..].iter().all(|&v| v == 5.0), "the other half holds the peer kernel's output");
    if received_in_group {
        assert_eq!(received, n, "the host read did not wait for the grouped receive (the record lost it)");
    }
    for stream in [&s0, &s1, &t1] {
        stream.synchronize().unwrap();
    }
}
