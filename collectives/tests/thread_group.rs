//! The thread backend: every collective, group semantics, and failure reporting, with
//! threads standing in for ranks (no GPU needed).

use std::time::Duration;

use ferrocuda_collectives::{Collectives, Error, HostComm, ReduceOp, ThreadGroup, reduce_into};

/// Rank `r`'s input: distinct per rank and element, small enough that products stay exact.
fn input(rank: usize, n: usize) -> Vec<i64> {
    (0..n).map(|i| ((rank * 7 + i * 3) % 11) as i64 - 4).collect()
}

fn expected(world: usize, n: usize, op: ReduceOp) -> Vec<i64> {
    let inputs: Vec<Vec<i64>> = (0..world).map(|r| input(r, n)).collect();
    let refs: Vec<&[i64]> = inputs.iter().map(Vec::as_slice).collect();
    let mut out = vec![0; n];
    reduce_into(&refs, op, &mut out);
    out
}

const OPS: [ReduceOp; 5] = [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max, ReduceOp::Avg];

#[test]
fn all_reduce_gives_every_rank_the_reduction_for_every_op_and_world_size() {
    for world in 1..=4 {
        for op in OPS {
            let results = ThreadGroup::new(world).run(|comm| {
                let send = input(comm.rank(), 37);
                let mut recv = vec![0; 37];
                comm.all_reduce(&send, &mut recv, op).unwrap();
                recv
            });
            for (rank, got) in results.iter().enumerate() {
                assert_eq!(got, &expected(world, 37, op), "world {world}, {op:?}, rank {rank}");
            }
        }
    }
}

#[test]
fn all_reduce_in_place_and_floats_match_the_rank_ordered_reference() {
    let results = ThreadGroup::new(3).run(|comm| {
        let mut buf: Vec<f32> = (0..100).map(|i| (i as f32 + 0.1) * (comm.rank() as f32 + 1.0)).collect();
        comm.all_reduce_in_place(&mut buf, ReduceOp::Avg).unwrap();
        buf
    });
    for got in &results {
        for (i, v) in got.iter().enumerate() {
            let x = i as f32 + 0.1;
            assert_eq!(*v, (x * 1.0 + x * 2.0 + x * 3.0) / 3.0, "element {i}");
        }
    }
}

#[test]
fn broadcast_copies_the_roots_buffer_from_any_root() {
    for root in 0..3 {
        let results = ThreadGroup::new(3).run(|comm| {
            let mut buf = input(comm.rank(), 10);
            comm.broadcast(&mut buf, root).unwrap();
            buf
        });
        assert!(results.iter().all(|r| *r == input(root, 10)), "root {root}");
    }
}

#[test]
fn reduce_writes_only_the_roots_output() {
    let results = ThreadGroup::new(4).run(|comm| {
        let mut recv = vec![99; 8];
        comm.reduce(&input(comm.rank(), 8), &mut recv, ReduceOp::Max, 2).unwrap();
        recv
    });
    for (rank, got) in results.iter().enumerate() {
        let want = if rank == 2 { expected(4, 8, ReduceOp::Max) } else { vec![99; 8] };
        assert_eq!(got, &want, "rank {rank}");
    }
}

#[test]
fn all_gather_concatenates_in_rank_order() {
    let results = ThreadGroup::new(3).run(|comm| {
        let mut recv = vec![0; 15];
        comm.all_gather(&input(comm.rank(), 5), &mut recv).unwrap();
        recv
    });
    let want: Vec<i64> = (0..3).flat_map(|r| input(r, 5)).collect();
    assert!(results.iter().all(|r| *r == want));
}

#[test]
fn reduce_scatter_gives_each_rank_its_chunk_of_the_reduction() {
    let results = ThreadGroup::new(4).run(|comm| {
        let mut recv = vec![0; 6];
        comm.reduce_scatter(&input(comm.rank(), 24), &mut recv, ReduceOp::Sum).unwrap();
        recv
    });
    let full = expected(4, 24, ReduceOp::Sum);
    for (rank, got) in results.iter().enumerate() {
        assert_eq!(got[..], full[rank * 6..rank * 6 + 6], "rank {rank}");
    }
}

#[test]
fn send_and_recv_deliver_in_order_between_pairs() {
    let results = ThreadGroup::new(2).run(|comm| {
        if comm.rank() == 0 {
            comm.send(&[1u32, 2, 3][..], 1).unwrap();
            comm.send(&[4u32][..], 1).unwrap();
            vec![]
        } else {
            let (mut a, mut b) = ([0u32; 3], [0u32; 1]);
            comm.recv(&mut a[..], 0).unwrap();
            comm.recv(&mut b[..], 0).unwrap();
            [a.to_vec(), b.to_vec()].concat()
        }
    });
    assert_eq!(results[1], vec![1, 2, 3, 4]);
}

/// Every rank receives from its left neighbour before sending to its right one: outside a
/// group each recv waits for a send that is never made.
fn ring_exchange(comm: &HostComm, grouped: bool) -> ferrocuda_collectives::Result<Vec<u64>> {
    let world = comm.world_size();
    let (left, right) = ((comm.rank() + world - 1) % world, (comm.rank() + 1) % world);
    let mine = [comm.rank() as u64; 4];
    let mut got = vec![u64::MAX; 4];
    if grouped {
        comm.group(|g| {
            g.recv(&mut got[..], left)?;
            g.send(&mine[..], right)
        })??;
    } else {
        comm.recv(&mut got[..], left)?;
        comm.send(&mine[..], right)?;
    }
    Ok(got)
}

#[test]
fn a_group_completes_a_ring_exchange_that_deadlocks_without_it() {
    let results = ThreadGroup::new(4).run(|comm| ring_exchange(comm, true));
    for (rank, got) in results.into_iter().enumerate() {
        assert_eq!(got.unwrap(), vec![((rank + 3) % 4) as u64; 4]);
    }
    let ungrouped = ThreadGroup::new(3).timeout(Duration::from_millis(200)).run(|comm| ring_exchange(comm, false));
    assert!(ungrouped.iter().all(|r| matches!(r, Err(Error::Timeout { .. }) | Err(Error::PeerFailed { .. }))), "{ungrouped:?}");
}

#[test]
fn grouped_collectives_complete_at_the_end_of_the_group() {
    let results = ThreadGroup::new(3).run(|comm| {
        let a = input(comm.rank(), 6);
        let mut sum = vec![0; 6];
        let mut gathered = vec![0; 18];
        comm.group(|g| {
            g.all_reduce(&a[..], &mut sum[..], ReduceOp::Sum).unwrap();
            g.all_gather(&a[..], &mut gathered[..]).unwrap();
        })
        .unwrap();
        (sum, gathered)
    });
    let want_gather: Vec<i64> = (0..3).flat_map(|r| input(r, 6)).collect();
    for (sum, gathered) in results {
        assert_eq!(sum, expected(3, 6, ReduceOp::Sum));
        assert_eq!(gathered, want_gather);
    }
}

#[test]
fn mismatched_calls_are_reported_not_hung() {
    let results = ThreadGroup::new(2).run(|comm| {
        let mut buf = vec![1i32; 4];
        if comm.rank() == 0 { comm.broadcast(&mut buf, 0) } else { comm.all_reduce_in_place(&mut buf, ReduceOp::Sum) }
    });
    for r in results {
        let message = r.unwrap_err().to_string();
        assert!(message.contains("every rank must make the same calls"), "{message}");
    }
}

#[test]
fn mismatched_lengths_are_reported() {
    let results = ThreadGroup::new(2).run(|comm| {
        let mut buf = vec![1i32; 4 + comm.rank()];
        comm.all_reduce_in_place(&mut buf, ReduceOp::Sum)
    });
    assert!(results.iter().any(|r| matches!(r, Err(Error::Length { .. }))), "{results:?}");
    let local = ThreadGroup::new(1).run(|comm| comm.all_gather(&[1u8, 2][..], &mut [0u8; 3][..]));
    assert!(matches!(local[0], Err(Error::Length { expected: 2, got: 3, .. })), "{local:?}");
}

#[test]
fn a_bad_root_or_peer_is_an_error() {
    let results = ThreadGroup::new(2).run(|comm| {
        let mut buf = [0u8; 2];
        (comm.broadcast(&mut buf[..], 2).unwrap_err(), comm.send(&buf[..], 5).unwrap_err())
    });
    for (a, b) in results {
        assert!(matches!(a, Error::BadRank { rank: 2, world_size: 2, .. }));
        assert!(matches!(b, Error::BadRank { rank: 5, .. }));
    }
}

#[test]
fn a_rank_that_leaves_early_fails_the_others_instead_of_hanging() {
    let results = ThreadGroup::new(3).timeout(Duration::from_secs(30)).run(|comm| {
        if comm.rank() == 1 {
            return Ok(()); // skips the collective
        }
        let mut buf = [1.0f64; 3];
        comm.all_reduce_in_place(&mut buf[..], ReduceOp::Sum)
    });
    assert!(results[1].is_ok());
    for rank in [0, 2] {
        assert!(matches!(results[rank], Err(Error::PeerFailed { rank: 1, .. })), "{:?}", results[rank]);
    }
}

#[test]
#[should_panic(expected = "rank 2 gives up")]
fn a_panicking_rank_is_re_raised_after_the_others_fail() {
    ThreadGroup::new(3).run(|comm| {
        if comm.rank() == 2 {
            panic!("rank 2 gives up");
        }
        let mut buf = [0u32; 1];
        assert!(matches!(comm.all_reduce_in_place(&mut buf[..], ReduceOp::Sum), Err(Error::PeerFailed { rank: 2, .. })));
    });
}

#[test]
fn many_back_to_back_collectives_stay_in_step() {
    let results = ThreadGroup::new(4).run(|comm| {
        let mut total = 0u64;
        for step in 0..200u64 {
            let mut buf = [step + comm.rank() as u64];
            comm.all_reduce_in_place(&mut buf[..], ReduceOp::Sum).unwrap();
            total += buf[0];
        }
        total
    });
    let want: u64 = (0..200u64).map(|s| 4 * s + 6).sum();
    assert!(results.iter().all(|&t| t == want));
}
