//! A data-parallel training step on several GPUs, one process per GPU: each rank computes the
//! gradient of its data shard with a Rust kernel, the ranks average the gradients with an
//! NCCL all-reduce, every rank applies the same update (a second kernel), and the result is
//! checked against the same computation on the host.
//!
//! ```text
//! data_parallel                 # launcher: one process per visible GPU on this host
//! data_parallel --ranks 2       # launcher with 2 processes
//! RANK=1 WORLD_SIZE=4 LOCAL_RANK=1 MASTER_ADDR=host0 MASTER_PORT=29500 data_parallel
//!                               # one rank of a multi-host job (see docs/collectives.md)
//! data_parallel --cpu --ranks 4 # no GPU: threads for ranks, kernels on the CPU executor
//! data_parallel --peer          # the gradients summed by the Rust peer kernel (CUDA IPC)
//! ```
//! Options: `--steps S` (default 20), `--elements N` (default 1 << 20).

use std::error::Error;
use std::process::{Command, ExitCode};

use ferrocuda_collectives::nccl::{Communicator, Config};
use ferrocuda_collectives::peer::PeerGroup;
use ferrocuda_collectives::{Collectives, ReduceOp, ThreadGroup};
use ferrocuda_collectives_kernels::{local_gradient, sgd_step};
use ferrocuda_host::{Device, DeviceBuffer, LaunchConfig, Stream};

const RATE: f32 = 0.05;

#[derive(Clone, Copy)]
struct Options {
    ranks: Option<usize>,
    steps: usize,
    elements: usize,
    cpu: bool,
    peer: bool,
}

fn options() -> Result<Options, String> {
    let mut o = Options { ranks: None, steps: 20, elements: 1 << 20, cpu: false, peer: false };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().and_then(|v| v.parse::<usize>().ok()).ok_or(format!("{name} needs a number"));
        match arg.as_str() {
            "--ranks" => o.ranks = Some(value("--ranks")?),
            "--steps" => o.steps = value("--steps")?,
            "--elements" => o.elements = value("--elements")?,
            "--cpu" => o.cpu = true,
            "--peer" => o.peer = true,
            other => return Err(format!("unknown argument {other:?} (see the doc comment of examples/data_parallel.rs)")),
        }
    }
    Ok(o)
}

/// Rank `r`'s shard: inputs and targets of `n` independent models `t = p * d`.
fn shard(rank: usize, n: usize) -> (Vec<f32>, Vec<f32>) {
    let data = (0..n).map(|i| 0.5 + ((i * 7 + rank * 3) % 13) as f32 / 13.0).collect();
    let targets = (0..n).map(|i| ((i % 5) as f32 - 2.0) + 0.25 * rank as f32).collect();
    (data, targets)
}

/// The same steps on the host: the reference every rank's parameters must match.
fn host_reference(world: usize, n: usize, steps: usize) -> Vec<f32> {
    let shards: Vec<_> = (0..world).map(|r| shard(r, n)).collect();
    let mut params = vec![0.0f32; n];
    for _ in 0..steps {
        for i in 0..n {
            let sum: f32 = shards.iter().map(|(d, t)| 2.0 * (params[i] * d[i] - t[i]) * d[i]).sum();
            params[i] -= RATE * (sum / world as f32);
        }
    }
    params
}

fn check(rank: usize, got: &[f32], want: &[f32]) -> Result<f32, String> {
    let mut worst = 0.0f32;
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let error = (g - w).abs() / w.abs().max(1.0);
        if error > 1e-4 {
            return Err(format!("rank {rank}: parameter {i} is {g}, the host computed {w}"));
        }
        worst = worst.max(error);
    }
    Ok(worst)
}

/// One rank of a multi-process job (RANK, WORLD_SIZE, ... in the environment).
fn gpu_rank(o: Options) -> Result<(), Box<dyn Error>> {
    let (comm, launch) = Communicator::from_env(&Config::new().timeout(std::time::Duration::from_secs(120)))?;
    let context = comm.context().clone();
    let stream = Stream::new(&context)?;
    let n = o.elements;
    let (data, targets) = shard(launch.rank, n);
    let (data, targets) = (DeviceBuffer::from_slice(&context, &data)?, DeviceBuffer::from_slice(&context, &targets)?);
    let params = DeviceBuffer::<f32>::zeroed(&context, n)?;
    let mut grad = DeviceBuffer::<f32>::zeroed(&context, n)?;
    let mut summed = DeviceBuffer::<f32>::zeroed(&context, n)?;
    let mut peer = if o.peer { Some(PeerGroup::across_processes(&comm, &stream, n)?) } else { None };
    let config = LaunchConfig::for_elements(n, 256);
    let started = std::time::Instant::now();
    for _ in 0..o.steps {
        // SAFETY: all four buffers hold n floats of this GPU and outlive the synchronize below;
        // grad is written by this kernel alone.
        unsafe {
            local_gradient::launch(&stream, config, n as u32, params.as_device_ptr(), data.as_device_ptr(), targets.as_device_ptr(), grad.as_device_ptr())?;
        }
        let (step_grad, rate) = match peer.as_mut() {
            // The Rust peer kernel sums; the update divides by the number of ranks.
            Some(peer) => {
                peer.all_reduce(&stream, grad.slice(..), summed.slice_mut(..))?;
                (&summed, RATE / launch.world_size as f32)
            }
            None => {
                comm.on(&stream)?.all_reduce_in_place(grad.slice_mut(..), ReduceOp::Avg)?;
                (&grad, RATE)
            }
        };
        // SAFETY: as above; params is written by this kernel alone.
        unsafe { sgd_step::launch(&stream, config, n as u32, rate, step_grad.as_device_ptr(), params.as_device_ptr())? };
    }
    comm.synchronize(&stream)?;
    if let Some(mut peer) = peer {
        peer.check()?;
        peer.finish(&comm, &stream)?;
    }
    let elapsed = started.elapsed();
    let worst = check(launch.rank, &params.to_vec()?, &host_reference(launch.world_size, n, o.steps))?;
    println!(
        "rank {}/{} on GPU {} ({}): {} steps of {n} parameters ({}) in {:.1} ms; parameters match the host (largest relative error {worst:.1e})",
        launch.rank,
        launch.world_size,
        launch.local_rank,
        Device::get(launch.local_rank)?.name()?,
        o.steps,
        if o.peer { "Rust peer all-reduce over CUDA IPC" } else { "NCCL all-reduce" },
        elapsed.as_secs_f64() * 1e3
    );
    Ok(())
}

/// Starts one process per GPU on this host and waits for them.
fn launcher(o: Options) -> Result<(), Box<dyn Error>> {
    let gpus = match Device::count() {
        Ok(n) if n > 0 => n,
        other => {
            let why = other.map(|_| "no GPU".to_string()).unwrap_or_else(|e| e.to_string());
            if std::env::var("REQUIRE_GPU").is_ok_and(|v| v == "1") {
                return Err(format!("REQUIRE_GPU=1 but {why}").into());
            }
            println!("nothing to run on the GPU ({why}); `--cpu` runs the same step with threads for ranks");
            return Ok(());
        }
    };
    let world = o.ranks.unwrap_or(gpus);
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    println!("launching {world} ranks on {gpus} GPUs (rendezvous 127.0.0.1:{port})");
    let children: Vec<_> = (0..world)
        .map(|rank| {
            Command::new(std::env::current_exe()?)
                .args(["--steps", &o.steps.to_string(), "--elements", &o.elements.to_string()])
                .args(o.peer.then_some("--peer"))
                .env("RANK", rank.to_string())
                .env("WORLD_SIZE", world.to_string())
                .env("LOCAL_RANK", (rank % gpus).to_string())
                .env("MASTER_ADDR", "127.0.0.1")
                .env("MASTER_PORT", port.to_string())
                .env("NCCL_NVLS_ENABLE", std::env::var("NCCL_NVLS_ENABLE").unwrap_or_else(|_| "0".into()))
                .spawn()
        })
        .collect::<Result<_, _>>()?;
    let mut failed = 0;
    for mut child in children {
        if !child.wait()?.success() {
            failed += 1;
        }
    }
    if failed > 0 {
        return Err(format!("{failed} of {world} ranks failed").into());
    }
    println!("all {world} ranks agree with the host");
    Ok(())
}

/// The same step with threads standing in for ranks and the kernels on the CPU executor.
fn cpu(o: Options) -> Result<(), Box<dyn Error>> {
    let world = o.ranks.unwrap_or(2);
    let n = o.elements.min(1 << 14);
    let want = host_reference(world, n, o.steps);
    let results = ThreadGroup::new(world).run(|comm| -> Result<f32, String> {
        let executor = ferrocuda_device::cpu::CpuExecutor::new();
        let (data, targets) = shard(comm.rank(), n);
        let (mut params, mut grad) = (vec![0.0f32; n], vec![0.0f32; n]);
        let config = LaunchConfig::for_elements(n, 256);
        for _ in 0..o.steps {
            // SAFETY: every vector holds n floats and outlives the (synchronous) CPU launch.
            unsafe { local_gradient::launch_cpu(&executor, config, n as u32, params.as_ptr(), data.as_ptr(), targets.as_ptr(), grad.as_mut_ptr()) }
                .map_err(|e| e.to_string())?;
            comm.all_reduce_in_place(&mut grad[..], ReduceOp::Avg).map_err(|e| e.to_string())?;
            // SAFETY: as above.
            unsafe { sgd_step::launch_cpu(&executor, config, n as u32, RATE, grad.as_ptr(), params.as_mut_ptr()) }.map_err(|e| e.to_string())?;
        }
        check(comm.rank(), &params, &want)
    });
    for (rank, result) in results.into_iter().enumerate() {
        println!("rank {rank}/{world} (CPU): parameters match the host (largest relative error {:.1e})", result?);
    }
    Ok(())
}

fn main() -> ExitCode {
    let result = options().map_err(Box::<dyn Error>::from).and_then(|o| {
        if o.cpu {
            cpu(o)
        } else if std::env::var_os("RANK").is_some() {
            gpu_rank(o)
        } else {
            launcher(o)
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("data_parallel: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_step_matches_the_host_for_several_world_sizes() {
        for ranks in [1, 2, 3] {
            cpu(Options { ranks: Some(ranks), steps: 5, elements: 3000, cpu: true, peer: false }).unwrap();
        }
    }

    #[test]
    fn check_reports_the_first_parameter_that_differs() {
        let err = check(1, &[1.0, 2.0, 3.5], &[1.0, 2.0, 3.0]).unwrap_err();
        assert!(err.contains("rank 1: parameter 2 is 3.5"), "{err}");
    }
}
