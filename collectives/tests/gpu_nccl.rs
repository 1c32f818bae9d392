//! NCCL collectives and the peer all-reduce on real GPUs. Skipped (printed) without a GPU or
//! without libnccl; failures instead of skips under `REQUIRE_GPU=1`, and the tests that need
//! several GPUs also fail under `REQUIRE_GPUS=<n>` when fewer are present. Keep
//! `NCCL_NVLS_ENABLE=0` set on shared machines (NVLink multicast off).

use std::io::Write;
use std::time::Duration;

use ferrocuda_collectives::nccl::{self, Communicator, Config};
use ferrocuda_collectives::peer::PeerGroup;
use ferrocuda_collectives::{Collectives, Error, ReduceOp, Rendezvous, group, reduce_into};
use ferrocuda_host::{Context, Device, DeviceBuffer, Stream};

fn required(var: &str) -> usize {
    std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// Contexts of the first `want` GPUs (at least `min`), or `None` with the skip printed.
fn gpus_or_skip(test: &str, min: usize) -> Option<Vec<Context>> {
    let skip = |why: String| {
        let must = required("REQUIRE_GPU") == 1 && (min <= 1 || required("REQUIRE_GPUS") >= min);
        assert!(!must, "REQUIRE_GPU=1 but {test} cannot run: {why}");
        let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
        None
    };
    let count = match Device::count() {
        Ok(n) => n,
        Err(e) => return skip(e.to_string()),
    };
    if count < min {
        return skip(format!("needs {min} GPUs, found {count}"));
    }
    if let Err(e) = nccl::version() {
        return skip(e.to_string());
    }
    Some((0..count).map(|i| Context::primary(i).unwrap()).collect())
}

fn data(rank: usize, n: usize) -> Vec<f32> {
    (0..n).map(|i| ((rank * 13 + i * 5) % 17) as f32 - 8.0).collect()
}

fn reference(world: usize, n: usize, op: ReduceOp) -> Vec<f32> {
    let inputs: Vec<Vec<f32>> = (0..world).map(|r| data(r, n)).collect();
    let refs: Vec<&[f32]> = inputs.iter().map(Vec::as_slice).collect();
    let mut out = vec![0.0; n];
    reduce_into(&refs, op, &mut out);
    out
}

#[test]
fn nccl_loads_and_reports_its_version() {
    let Some(_) = gpus_or_skip("nccl_loads_and_reports_its_version", 1) else { return };
    let (major, minor, patch) = nccl::version().unwrap();
    println!("NCCL {major}.{minor}.{patch}");
    assert_eq!(major, 2);
}

#[test]
fn one_thread_drives_every_gpu_through_every_collective() {
    let Some(contexts) = gpus_or_skip("one_thread_drives_every_gpu_through_every_collective", 1) else { return };
    let world = contexts.len();
    let comms = Communicator::init_all(&contexts, &Config::new()).unwrap();
    let streams: Vec<Stream> = contexts.iter().map(|c| Stream::new(c).unwrap()).collect();
    let on: Vec<_> = comms.iter().zip(&streams).map(|(c, s)| c.on(s).unwrap()).collect();
    let n = 1000;
    for op in [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max, ReduceOp::Avg] {
        let inputs: Vec<DeviceBuffer<f32>> = contexts.iter().enumerate().map(|(r, c)| DeviceBuffer::from_slice(c, &data(r, n)).unwrap()).collect();
        let mut outputs: Vec<DeviceBuffer<f32>> = contexts.iter().map(|c| DeviceBuffer::zeroed(c, n).unwrap()).collect();
        group(&on, |members| {
            for ((m, x), y) in members.iter().zip(&inputs).zip(outputs.iter_mut()) {
                m.all_reduce(x.slice(..), y.slice_mut(..), op).unwrap();
            }
        })
        .unwrap();
        for (r, y) in outputs.iter().enumerate() {
            comms[r].synchronize(&streams[r]).unwrap();
            let got = y.to_vec().unwrap();
            let want = reference(world, n, op);
            for i in 0..n {
                assert!((got[i] - want[i]).abs() <= 1e-3 * want[i].abs().max(1.0), "{op:?} rank {r} element {i}: {} vs {}", got[i], want[i]);
            }
        }
    }
    // broadcast from the last rank, all-gather, reduce-scatter, reduce to rank 0, ring send/recv.
    let root = world - 1;
    let mut bufs: Vec<DeviceBuffer<f32>> = contexts.iter().enumerate().map(|(r, c)| DeviceBuffer::from_slice(c, &data(r, n)).unwrap()).collect();
    group(&on, |m| m.iter().zip(bufs.iter_mut()).for_each(|(m, b)| m.broadcast(b.slice_mut(..), root).unwrap())).unwrap();
    let mut gathered: Vec<DeviceBuffer<f32>> = contexts.iter().map(|c| DeviceBuffer::zeroed(c, n * world).unwrap()).collect();
    let mut scattered: Vec<DeviceBuffer<f32>> = contexts.iter().map(|c| DeviceBuffer::zeroed(c, n / world.max(1)).unwrap()).collect();
    let big: Vec<DeviceBuffer<f32>> = contexts.iter().enumerate().map(|(r, c)| DeviceBuffer::from_slice(c, &data(r, (n / world) * world)).unwrap()).collect();
    let mut reduced: Vec<DeviceBuffer<f32>> = contexts.iter().map(|c| DeviceBuffer::zeroed(c, n).unwrap()).collect();
    let mut ring: Vec<DeviceBuffer<f32>> = contexts.iter().map(|c| DeviceBuffer::zeroed(c, n).unwrap()).collect();
    let m_len = (n / world) * world;
    group(&on, |members| {
        for ((m, b), g) in members.iter().zip(&bufs).zip(gathered.iter_mut()) {
            m.all_gather(b.slice(..), g.slice_mut(..)).unwrap();
        }
    })
    .unwrap();
    group(&on, |members| {
        for ((m, b), o) in members.iter().zip(&big).zip(scattered.iter_mut()) {
            m.reduce_scatter(b.slice(..), o.slice_mut(..), ReduceOp::Sum).unwrap();
        }
    })
    .unwrap();
    group(&on, |members| {
        for ((m, b), o) in members.iter().zip(&big).zip(reduced.iter_mut()) {
            m.reduce(b.slice(..), o.slice_mut(..m_len), ReduceOp::Max, 0).unwrap();
        }
    })
    .unwrap();
    group(&on, |members| {
        for (r, ((m, b), o)) in members.iter().zip(&big).zip(ring.iter_mut()).enumerate() {
            m.send(b.slice(..), (r + 1) % world).unwrap();
            m.recv(o.slice_mut(..m_len), (r + world - 1) % world).unwrap();
        }
    })
    .unwrap();
    let chunk = n / world;
    let full_sum = reference(world, chunk * world, ReduceOp::Sum);
    let full_max = reference(world, chunk * world, ReduceOp::Max);
    for r in 0..world {
        comms[r].synchronize(&streams[r]).unwrap();
        assert_eq!(bufs[r].to_vec().unwrap(), data(root, n), "broadcast, rank {r}");
        let want: Vec<f32> = (0..world).flat_map(|_| data(root, n)).collect();
        assert_eq!(gathered[r].to_vec().unwrap(), want, "all_gather, rank {r}");
        assert_eq!(scattered[r].to_vec().unwrap()[..], full_sum[r * chunk..(r + 1) * chunk], "reduce_scatter, rank {r}");
        if r == 0 {
            assert_eq!(reduced[0].to_vec().unwrap()[..chunk * world], full_max[..], "reduce to rank 0");
        }
        assert_eq!(ring[r].to_vec().unwrap()[..chunk * world], data((r + world - 1) % world, chunk * world)[..], "ring recv, rank {r}");
    }
}

#[test]
fn one_thread_per_gpu_meets_through_a_tcp_rendezvous() {
    let Some(contexts) = gpus_or_skip("one_thread_per_gpu_meets_through_a_tcp_rendezvous", 2) else { return };
    let world = contexts.len();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let rendezvous = Rendezvous::Tcp(format!("127.0.0.1:{port}"));
    let n = 1 << 20;
    std::thread::scope(|s| {
        for (rank, context) in contexts.iter().enumerate() {
            let rendezvous = &rendezvous;
            s.spawn(move || {
                let config = Config::new().timeout(Duration::from_secs(60));
                let comm = Communicator::from_rendezvous(context, rank, world, rendezvous, Duration::from_secs(60), &config).unwrap();
                let stream = Stream::new(context).unwrap();
                let mut buf = DeviceBuffer::from_slice(context, &data(rank, n)).unwrap();
                for _ in 0..3 {
                    comm.on(&stream).unwrap().all_reduce_in_place(buf.slice_mut(..), ReduceOp::Max).unwrap();
                }
                comm.synchronize(&stream).unwrap();
                assert_eq!(buf.to_vec().unwrap(), reference(world, n, ReduceOp::Max));
            });
        }
    });
}

#[test]
fn a_peer_that_never_joins_the_collective_times_out_and_aborts() {
    let Some(contexts) = gpus_or_skip("a_peer_that_never_joins_the_collective_times_out_and_aborts", 2) else { return };
    let world = contexts.len();
    let id = nccl::UniqueId::new().unwrap();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let done_rx = std::sync::Mutex::new(done_rx);
    std::thread::scope(|s| {
        for (rank, context) in contexts.iter().enumerate() {
            let (done_tx, done_rx) = (done_tx.clone(), &done_rx);
            s.spawn(move || {
                let config = Config::new().timeout(Duration::from_secs(3));
                let comm = Communicator::init_rank(context, world, rank, &id, &config).unwrap();
                if rank != 0 {
                    // Never calls the collective; waits for rank 0's verdict, then aborts.
                    let _ = done_rx.lock().unwrap().recv_timeout(Duration::from_secs(60));
                    comm.abort();
                    return;
                }
                let stream = Stream::new(context).unwrap();
                let mut buf = DeviceBuffer::<f32>::zeroed(context, 1024).unwrap();
                let started = std::time::Instant::now();
                // The timeout may strike while NCCL is still enqueuing (connecting to the
                // absent peer) or while the kernel waits for it.
                let err = match comm.on(&stream).unwrap().all_reduce_in_place(buf.slice_mut(..), ReduceOp::Sum) {
                    Err(e) => e,
                    Ok(()) => comm.synchronize(&stream).unwrap_err(),
                };
                assert!(matches!(err, Error::Timeout { .. }), "{err}");
                assert!(started.elapsed() < Duration::from_secs(30));
                let again = comm.on(&stream).unwrap().all_reduce_in_place(buf.slice_mut(..), ReduceOp::Sum).unwrap_err();
                assert!(matches!(again, Error::Aborted { .. }), "{again}");
                for _ in 1..world {
                    done_tx.send(()).unwrap();
                }
            });
        }
    });
}

#[test]
fn wrong_device_streams_and_bad_roots_are_refused_before_nccl_sees_them() {
    let Some(contexts) = gpus_or_skip("wrong_device_streams_and_bad_roots_are_refused_before_nccl_sees_them", 2) else { return };
    let comms = Communicator::init_all(&contexts, &Config::new()).unwrap();
    let other = Stream::new(&contexts[1]).unwrap();
    assert!(matches!(comms[0].on(&other), Err(Error::WrongDevice { expected: 0, got: 1, .. })));
    let stream = Stream::new(&contexts[0]).unwrap();
    let mut buf = DeviceBuffer::<u8>::zeroed(&contexts[0], 4).unwrap();
    let err = comms[0].on(&stream).unwrap().broadcast(buf.slice_mut(..), 7).unwrap_err();
    assert!(matches!(err, Error::BadRank { rank: 7, .. }), "{err}");
}

#[test]
fn the_peer_all_reduce_matches_the_host_sum_back_to_back() {
    let Some(contexts) = gpus_or_skip("the_peer_all_reduce_matches_the_host_sum_back_to_back", 2) else { return };
    let world = contexts.len();
    let capacity = 1 << 22;
    let ranks = PeerGroup::new(&contexts, capacity).unwrap();
    std::thread::scope(|s| {
        for mut rank in ranks {
            s.spawn(move || {
                let r = rank.rank();
                let context = rank.context().clone();
                let stream = Stream::new(&context).unwrap();
                for (call, n) in [1usize, 5, 1000, 4096, 65_536, 1 << 20, capacity, 333, 1 << 22].into_iter().cycle().take(40).enumerate() {
                    let input: Vec<f32> = (0..n).map(|i| ((r * 7 + i * 3 + call) % 29) as f32 - 14.0).collect();
                    let x = DeviceBuffer::from_slice(&context, &input).unwrap();
                    let mut y = DeviceBuffer::<f32>::zeroed(&context, n).unwrap();
                    rank.all_reduce(&stream, x.slice(..), y.slice_mut(..)).unwrap();
                    stream.synchronize().unwrap();
                    let got = y.to_vec().unwrap();
                    for (i, value) in got.iter().enumerate() {
                        let want: f32 = (0..world).map(|q| ((q * 7 + i * 3 + call) % 29) as f32 - 14.0).sum();
                        assert_eq!(*value, want, "rank {r}, call {call}, n {n}, element {i}");
                    }
                }
                rank.check().unwrap();
            });
        }
    });
}

/// Issue 34: `PeerGroup::across_processes` failed on every rank with `cuIpcGetMemHandle failed:
/// CUDA_ERROR_INVALID_VALUE`: its staging buffers came from the stream-ordered pool, which
/// legacy CUDA IPC cannot export. One process per GPU (this test binary runs itself once per
/// rank: CUDA IPC handles open only in another process), inputs and outputs in ordinary
/// (pool) `DeviceBuffer`s, as a user has them.
#[test]
fn issue34_peer_all_reduce_across_processes_with_pool_buffers() {
    const TEST: &str = "issue34_peer_all_reduce_across_processes_with_pool_buffers";
    if let Ok(rank) = std::env::var("FERROCUDA_TEST_PEER_RANK") {
        return across_processes_rank(rank.parse().unwrap());
    }
    let Some(contexts) = gpus_or_skip(TEST, 2) else { return };
    let world = contexts.len();
    drop(contexts);
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    // Every rank is started before any is waited for: they meet in the rendezvous.
    let spawned: Vec<_> = (0..world)
        .map(|rank| {
            std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", TEST, "--nocapture", "--test-threads=1"])
                .env("FERROCUDA_TEST_PEER_RANK", rank.to_string())
                .env("WORLD_SIZE", world.to_string())
                .env("MASTER_PORT", port.to_string())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let children: Vec<_> = spawned.into_iter().map(|child| child.wait_with_output().unwrap()).collect();
    for (rank, child) in children.iter().enumerate() {
        assert!(
            child.status.success() && String::from_utf8_lossy(&child.stdout).contains("1 passed"),
            "rank {rank} failed:\n{}\n{}",
            String::from_utf8_lossy(&child.stdout),
            String::from_utf8_lossy(&child.stderr)
        );
    }
}

/// One rank of [`issue34_peer_all_reduce_across_processes_with_pool_buffers`].
fn across_processes_rank(rank: usize) {
    let world: usize = std::env::var("WORLD_SIZE").unwrap().parse().unwrap();
    let port = std::env::var("MASTER_PORT").unwrap();
    let context = Context::primary(rank).unwrap();
    let rendezvous = Rendezvous::Tcp(format!("127.0.0.1:{port}"));
    let config = Config::new().timeout(Duration::from_secs(60));
    let comm = Communicator::from_rendezvous(&context, rank, world, &rendezvous, Duration::from_secs(60), &config).unwrap();
    let stream = Stream::new(&context).unwrap();
    let capacity = 1 << 20;
    let mut peer = PeerGroup::across_processes(&comm, &stream, capacity).unwrap().spin_limit(1 << 28);
    for n in [1usize, 1000, capacity, 4097] {
        let x = DeviceBuffer::from_slice(&context, &data(rank, n)).unwrap();
        let mut y = DeviceBuffer::<f32>::zeroed(&context, n).unwrap();
        peer.all_reduce(&stream, x.slice(..), y.slice_mut(..)).unwrap();
        stream.synchronize().unwrap();
        assert_eq!(y.to_vec().unwrap(), reference(world, n, ReduceOp::Sum), "rank {rank}, n {n}");
    }
    peer.check().unwrap();
    peer.finish(&comm, &stream).unwrap();
}

/// Issue 29, host item 2: dropping a communicator used to wait for NCCL's finalisation without
/// a bound when the config set no timeout (a blocking communicator: `ncclCommFinalize` waits
/// for the queued operations, for ever if a peer is gone). Now every communicator is
/// non-blocking and the drop waits at most `Config::drop_timeout` (default 30 s), then aborts
/// it with a message. One GPU: a one-rank communicator without a timeout works as before, and
/// its drop, with an all-reduce queued behind a host callback that holds the stream for 3 s,
/// returns well before the callback ends.
#[test]
fn s9_item2_dropping_a_communicator_whose_work_cannot_finish_is_bounded() {
    let Some(contexts) = gpus_or_skip("s9_item2_dropping_a_communicator_whose_work_cannot_finish_is_bounded", 1) else { return };
    let context = &contexts[0];
    let config = Config::new().drop_timeout(Duration::from_millis(200));
    let comm = Communicator::init_all(&contexts[..1], &config).unwrap().remove(0);
    let stream = Stream::non_blocking(context).unwrap();
    let mut buf = DeviceBuffer::from_slice(context, &[1.5f32; 1024]).unwrap();
    comm.on(&stream).unwrap().all_reduce_in_place(buf.slice_mut(..), ReduceOp::Sum).unwrap();
    comm.synchronize(&stream).unwrap();
    assert_eq!(buf.to_vec().unwrap(), vec![1.5f32; 1024], "a one-rank sum is the input");
    stream.launch_host_fn(|| std::thread::sleep(Duration::from_secs(3))).unwrap();
    comm.on(&stream).unwrap().all_reduce_in_place(buf.slice_mut(..), ReduceOp::Sum).unwrap();
    let start = std::time::Instant::now();
    drop(comm);
    let took = start.elapsed();
    println!("s9 item2: the drop returned after {took:?} (work held for 3 s; drop_timeout 200 ms)");
    assert!(took < Duration::from_millis(2500), "the drop waited for the held work: {took:?}");
    stream.synchronize().unwrap();
}

/// F12-1 (audit 2026-11-27f): inside a `group` body, NCCL records an operation and queues it
/// only at the outermost group's end, while the door orders and releases its buffers as if it
/// were queued at the call. On an H200 a plain `OnStream` receive in the body, into a buffer
/// dropped in the body, wrote the next allocation (1048576 of 1048576 elements). Now a plain
/// operation in the body and a group nested in another are refused (`Error::GroupMisuse`),
/// and the same exchange through the body's `Grouped` member still works (one rank, sending to
/// itself).
#[test]
fn f12_1_operations_a_group_would_defer_past_their_buffers_are_refused() {
    let Some(contexts) = gpus_or_skip("f12_1_operations_a_group_would_defer_past_their_buffers_are_refused", 1) else { return };
    let context = &contexts[0];
    let comms = Communicator::init_all(std::slice::from_ref(context), &Config::new().timeout(Duration::from_secs(30))).unwrap();
    let stream = Stream::new(context).unwrap();
    let on = comms[0].on(&stream).unwrap();
    let n = 1 << 16;
    let x = DeviceBuffer::from_slice(context, &vec![7.0f32; n]).unwrap();
    // A plain operation in the body: refused before NCCL or the door sees it.
    let refused = group(std::slice::from_ref(&on), |_members| {
        let mut y = DeviceBuffer::<f32>::zeroed(context, n).unwrap();
        let send = on.send(x.slice(..), 0);
        let recv = on.recv(y.slice_mut(..), 0);
        (send, recv)
    })
    .unwrap();
    for (what, result) in [("send", refused.0), ("recv", refused.1)] {
        assert!(matches!(result, Err(Error::GroupMisuse { .. })), "{what}: {result:?}");
    }
    // A nested group: refused.
    let nested = group(std::slice::from_ref(&on), |_outer| group(std::slice::from_ref(&on), |_inner| ()).map(drop)).unwrap();
    assert!(matches!(nested, Err(Error::GroupMisuse { operation: "group", .. })), "{nested:?}");
    // Through the member: completes at the group's end, as before.
    let mut y = DeviceBuffer::<f32>::zeroed(context, n).unwrap();
    group(std::slice::from_ref(&on), |members| -> Result<(), Error> {
        members[0].send(x.slice(..), 0)?;
        members[0].recv(y.slice_mut(..), 0)
    })
    .unwrap()
    .unwrap();
    stream.synchronize().unwrap();
    assert!(y.to_vec().unwrap().iter().all(|&v| v == 7.0));
    // The thread's group state is clean afterwards: a plain operation outside a group runs.
    let mut z = DeviceBuffer::<f32>::zeroed(context, n).unwrap();
    on.all_reduce(x.slice(..), z.slice_mut(..), ReduceOp::Sum).unwrap();
    stream.synchronize().unwrap();
    assert!(z.to_vec().unwrap().iter().all(|&v| v == 7.0));
}
