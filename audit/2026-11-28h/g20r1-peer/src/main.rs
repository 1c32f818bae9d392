//! G20R-1: `PeerRank::spin_limit` (safe) lets a rank that gave up waiting run ahead of its
//! peers, so the kernel's "two staging halves" argument no longer holds: the fast rank's call
//! k + 2 overwrites the staging half its slow peer's call k has not read yet. The slow peer
//! never times out and `check()` says Ok, yet its call k sums the fast rank's call k + 2 data
//! (and, with other timings, reads the half while the fast rank's GPU writes it: a data race
//! between two GPUs on plain memory, from safe code only).
//!
//! Safe code only. Every rank makes the same three calls with the same lengths (the documented
//! contract); rank 1 merely starts 1 s later. Exit 0 = the finding reproduced (prints
//! REPRODUCED), 1 = not reproduced, 2 = skipped (fewer than two GPUs, or no peer access).

use std::time::Duration;

use ferrocuda_collectives::peer::PeerGroup;
use ferrocuda_host::{Context, Device, DeviceBuffer, Stream};

const N: usize = 1 << 20;

fn main() {
    let count = Device::count().unwrap_or(0);
    if count < 2 {
        println!("SKIPPED g20r1: needs two GPUs, found {count}");
        std::process::exit(2);
    }
    let contexts: Vec<Context> = (0..2).map(|i| Context::primary(i).unwrap()).collect();
    let ranks = match PeerGroup::new(&contexts, N) {
        Ok(r) => r,
        Err(e) => {
            println!("SKIPPED g20r1: {e}");
            std::process::exit(2);
        }
    };
    std::thread::spawn(|| {
        std::thread::sleep(Duration::from_secs(20));
        println!("g20r1: HANG after 20 s");
        std::process::exit(4);
    });
    let results: Vec<(usize, Vec<f32>, String)> = std::thread::scope(|scope| {
        let handles: Vec<_> = ranks
            .into_iter()
            .map(|rank| {
                scope.spawn(move || {
                    let r = rank.rank();
                    // Rank 0 bounds its waits (safe API); rank 1 waits forever (the default).
                    let mut rank = if r == 0 { rank.spin_limit(1 << 12) } else { rank };
                    let context = rank.context().clone();
                    let stream = Stream::new(&context).unwrap();
                    if r == 1 {
                        std::thread::sleep(Duration::from_millis(1000));
                    }
                    let mut firsts = Vec::new();
                    for call in 1..=3u32 {
                        // Rank 0 contributes `call`, rank 1 contributes 100: call k should give 100 + k.
                        let value = if r == 0 { call as f32 } else { 100.0 };
                        let x = DeviceBuffer::from_slice(&context, &vec![value; N]).unwrap();
                        let mut y = DeviceBuffer::<f32>::zeroed(&context, N).unwrap();
                        rank.all_reduce(&stream, x.slice(..), y.slice_mut(..)).unwrap();
                        stream.synchronize().unwrap();
                        let out = y.to_vec().unwrap();
                        let wrong = out.iter().filter(|&&v| v != 100.0 + call as f32).count();
                        println!(
                            "rank {r} call {call}: y[0] = {}, y[N-1] = {}, {wrong} of {N} elements differ from {}",
                            out[0],
                            out[N - 1],
                            100.0 + call as f32
                        );
                        firsts.push(out[0]);
                    }
                    let status = match rank.check() {
                        Ok(()) => "check() Ok".to_string(),
                        Err(e) => format!("check() Err: {e}"),
                    };
                    println!("rank {r}: {status}");
                    (r, firsts, status)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let rank1 = results.iter().find(|(r, _, _)| *r == 1).unwrap();
    // Rank 1 never timed out and was told nothing, but its call 1 summed another call's data.
    if rank1.2 == "check() Ok" && rank1.1[0] != 101.0 {
        println!("REPRODUCED g20r1: rank 1's call 1 gave {} (expected 101: rank 0's call 1 is 1.0), with rank 1's check() Ok", rank1.1[0]);
        std::process::exit(0);
    }
    println!("NOT REPRODUCED g20r1: rank 1 results {:?}, {}", rank1.1, rank1.2);
    std::process::exit(1);
}
