//! All-reduce bandwidth on every GPU of this host (one thread per GPU): NCCL through this
//! crate from 8 B to 1 GiB, and the Rust one-shot peer kernel from 8 B to 64 MiB, with
//! nccl-tests' definitions: `algbw = bytes / time`, `busbw = algbw * 2 (n - 1) / n`.
//!
//! Same protocol as `collectives/bench/nccl_allreduce_ref.cu` (the C++ reference on libnccl):
//! f32 sum, out of place; per size a barrier, warm-up calls, then `iters` calls between two
//! events on each rank's stream; the time is the slowest rank's. Each result is checked.
//!
//! Prints lines `<impl> <bytes> <time_us> <algbw_GBps> <busbw_GBps>`.
//! Options: `--max-bytes N` (default 1 GiB), `--peer-max-bytes N` (default 64 MiB).

use std::sync::{Barrier, Mutex};

use ferrocuda_collectives::nccl::{self, Communicator, Config, UniqueId};
use ferrocuda_collectives::peer::{PeerGroup, PeerRank};
use ferrocuda_collectives::{Collectives, ReduceOp};
use ferrocuda_host::{Context, Device, DeviceBuffer, Event, Stream};

fn iterations(bytes: usize) -> (usize, usize) {
    if bytes <= 1 << 20 { (10, 100) } else { (5, 20) }
}

fn sizes(max: usize) -> Vec<usize> {
    std::iter::successors(Some(8usize), |b| Some(b * 2)).take_while(|&b| b <= max).collect()
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// What one rank does per size: queue `iters` all-reduces of `count` floats on `stream`.
trait AllReduce {
    fn run(&mut self, stream: &Stream, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>, count: usize) -> Result<(), Box<dyn std::error::Error>>;
}

struct Nccl(Communicator);
impl AllReduce for Nccl {
    fn run(&mut self, stream: &Stream, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>, count: usize) -> Result<(), Box<dyn std::error::Error>> {
        self.0.on(stream)?.all_reduce(x.slice(..count), y.slice_mut(..count), ReduceOp::Sum)?;
        Ok(())
    }
}

struct Peer(PeerRank);
impl AllReduce for Peer {
    fn run(&mut self, stream: &Stream, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>, count: usize) -> Result<(), Box<dyn std::error::Error>> {
        self.0.all_reduce(stream, x.slice(..count), y.slice_mut(..count))?;
        Ok(())
    }
}

/// Times every size on one rank; rank 0 prints the slowest rank's figures.
#[allow(clippy::too_many_arguments)]
fn rank_loop(
    name: &str,
    rank: usize,
    world: usize,
    context: &Context,
    op: &mut dyn AllReduce,
    max_bytes: usize,
    barrier: &Barrier,
    times: &Mutex<Vec<f64>>,
) -> Result<(), Box<dyn std::error::Error>> {
    let stream = Stream::new(context)?;
    let max_count = max_bytes / 4;
    let mut x = DeviceBuffer::<f32>::zeroed(context, max_count)?;
    x.fill((rank + 1) as f32)?;
    let mut y = DeviceBuffer::<f32>::zeroed(context, max_count)?;
    let (start, end) = (Event::new(context)?, Event::new(context)?);
    let want = (world * (world + 1) / 2) as f32;
    for bytes in sizes(max_bytes) {
        let count = bytes / 4;
        let (warmup, iters) = iterations(bytes);
        barrier.wait();
        for _ in 0..warmup {
            op.run(&stream, &x, &mut y, count)?;
        }
        stream.synchronize()?;
        barrier.wait();
        start.record(&stream)?;
        for _ in 0..iters {
            op.run(&stream, &x, &mut y, count)?;
        }
        end.record(&stream)?;
        end.synchronize()?;
        let us = f64::from(start.elapsed_ms(&end)?) * 1e3 / iters as f64;
        for (first, got) in [(0, read(&y, 0, count.min(4096))?), (count.saturating_sub(4096), read(&y, count.saturating_sub(4096), count)?)] {
            if let Some(bad) = got.iter().position(|&v| v != want) {
                return Err(format!("{name}: {bytes} B: rank {rank} element {} is {}, expected {want}", first + bad, got[bad]).into());
            }
        }
        times.lock().unwrap()[rank] = us;
        barrier.wait();
        if rank == 0 {
            let slowest = times.lock().unwrap().iter().cloned().fold(0.0, f64::max);
            let algbw = bytes as f64 / (slowest * 1e-6) / 1e9;
            let busbw = algbw * 2.0 * (world - 1) as f64 / world as f64;
            println!("{name} {bytes} {slowest:.2} {algbw:.3} {busbw:.3}");
        }
        barrier.wait();
    }
    Ok(())
}

/// Elements `from..to` of `buffer` (synchronous copy; the whole buffer may be 1 GiB).
fn read(buffer: &DeviceBuffer<f32>, from: usize, to: usize) -> Result<Vec<f32>, Box<dyn std::error::Error>> {
    let mut out = vec![0.0f32; to - from];
    if out.is_empty() {
        return Ok(out);
    }
    buffer.context().bind_to_thread()?;
    // SAFETY: from..to lies inside the buffer (callers pass to <= len); `out` holds to - from floats.
    let code = unsafe { ferrocuda_host::sys::cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), buffer.device_ptr() + (from * 4) as u64, out.len() * 4) };
    if code != ferrocuda_host::sys::CUresult::CUDA_SUCCESS {
        return Err(format!("cuMemcpyDtoH failed: {code:?}").into());
    }
    Ok(out)
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("allreduce_bench: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let world = Device::count()?;
    if world < 2 {
        return Err(format!("needs at least 2 GPUs, found {world}").into());
    }
    let (major, minor, patch) = nccl::version()?;
    let contexts: Vec<Context> = (0..world).map(Context::primary).collect::<Result<_, _>>()?;
    println!("# {} x {}, NCCL {major}.{minor}.{patch} (loaded by ferrocuda-collectives)", world, Device::get(0)?.name()?);
    println!("# impl bytes time_us algbw_GBps busbw_GBps");
    let (max_bytes, peer_max) = (arg("--max-bytes", 1 << 30), arg("--peer-max-bytes", 64 << 20));
    let barrier = Barrier::new(world);
    let times = Mutex::new(vec![0.0; world]);

    let id = UniqueId::new()?;
    std::thread::scope(|s| -> Result<(), Box<dyn std::error::Error>> {
        let handles: Vec<_> = contexts
            .iter()
            .enumerate()
            .map(|(rank, context)| {
                let (barrier, times) = (&barrier, &times);
                s.spawn(move || -> Result<(), String> {
                    let comm = Communicator::init_rank(context, world, rank, &id, &Config::new()).map_err(|e| e.to_string())?;
                    rank_loop("ferrocuda-nccl", rank, world, context, &mut Nccl(comm), max_bytes, barrier, times).map_err(|e| e.to_string())
                })
            })
            .collect();
        for h in handles {
            h.join().map_err(|_| "a rank panicked")??;
        }
        Ok(())
    })?;

    let ranks = PeerGroup::new(&contexts, peer_max / 4)?;
    std::thread::scope(|s| -> Result<(), Box<dyn std::error::Error>> {
        let handles: Vec<_> = ranks
            .into_iter()
            .map(|rank_handle| {
                let (barrier, times) = (&barrier, &times);
                let context = rank_handle.context().clone();
                s.spawn(move || -> Result<(), String> {
                    let rank = rank_handle.rank();
                    let mut peer = Peer(rank_handle);
                    rank_loop("ferrocuda-peer", rank, world, &context, &mut peer, peer_max, barrier, times).map_err(|e| e.to_string())?;
                    peer.0.check().map_err(|e| e.to_string())
                })
            })
            .collect();
        for h in handles {
            h.join().map_err(|_| "a rank panicked")??;
        }
        Ok(())
    })?;
    Ok(())
}
