//! `gpt2`: GPT-2 training on ferrocuda's kernels (see the crate's README).
//!
//! ```text
//! gpt2 [train] [--config 124m|tiny] [--checkpoint FILE [--resume]] [--data SHARD]
//!      [--batch B] [--seq T] [--steps N] [--lr LR] [--weight-decay WD] [--clip MAX]
//!      [--dtype bf16|f32] [--cpu] [--save FILE] [--bench] [--profile] [--alphabet A]
//!      [--seed S] [--ranks N] [--graph]
//! gpt2 init --out FILE [--config 124m|tiny] [--seed S] [--bf16]
//! gpt2 make-shard --out FILE [--tokens N] [--alphabet A] [--seed S]
//! ```
//! Data parallel: one process per GPU with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and
//! MASTER_PORT set (torchrun's variables), or `--ranks N`, which starts N such processes on
//! this host.

use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::Instant;

use ferrocuda_collectives::nccl::{Communicator, Config as NcclConfig};
use ferrocuda_collectives::{Collectives, ReduceOp};
use ferrocuda_host::{Context, Device};
use gpt2::Result;
use gpt2::backend::{Act, Backend};
use gpt2::checkpoint::{State, read_model, read_state, state_path, write_model, write_state};
use gpt2::config::Config;
use gpt2::cpu::Cpu;
use gpt2::data::{Loader, read_shard, synthetic_corpus, write_shard};
use gpt2::gpu::Gpu;
use gpt2::layout::{Layout, init_params};
use gpt2::model::Shape;
use gpt2::train::{Hyper, Trainer, fingerprint};
use half::bf16;

/// The options of `gpt2 train`.
#[derive(Clone, Debug)]
struct Options {
    config: String,
    checkpoint: Option<PathBuf>,
    resume: bool,
    data: Option<PathBuf>,
    batch: usize,
    seq: usize,
    steps: usize,
    hyper: Hyper,
    dtype: String,
    cpu: bool,
    save: Option<PathBuf>,
    bench: bool,
    profile: bool,
    alphabet: Option<usize>,
    seed: u64,
    ranks: Option<usize>,
    graph: bool,
}

fn parse(args: &[String]) -> Result<Options> {
    let mut o = Options {
        config: "124m".into(),
        checkpoint: None,
        resume: false,
        data: None,
        batch: 4,
        seq: 1024,
        steps: 20,
        hyper: Hyper::default(),
        dtype: "bf16".into(),
        cpu: false,
        save: None,
        bench: false,
        profile: false,
        alphabet: None,
        seed: 1337,
        ranks: None,
        graph: false,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = || it.next().cloned().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--config" => o.config = value()?,
            "--checkpoint" => o.checkpoint = Some(value()?.into()),
            "--resume" => o.resume = true,
            "--data" => o.data = Some(value()?.into()),
            "--batch" => o.batch = value()?.parse()?,
            "--seq" => o.seq = value()?.parse()?,
            "--steps" => o.steps = value()?.parse()?,
            "--lr" => o.hyper.learning_rate = value()?.parse()?,
            "--weight-decay" => o.hyper.weight_decay = value()?.parse()?,
            "--clip" => o.hyper.max_norm = value()?.parse()?,
            "--dtype" => o.dtype = value()?,
            "--cpu" => o.cpu = true,
            "--save" => o.save = Some(value()?.into()),
            "--bench" => o.bench = true,
            "--profile" => o.profile = true,
            "--alphabet" => o.alphabet = Some(value()?.parse()?),
            "--seed" => o.seed = value()?.parse()?,
            "--ranks" => o.ranks = Some(value()?.parse()?),
            "--graph" => o.graph = true,
            other => return Err(format!("unknown option {other:?} (see the doc comment of models/gpt2/src/main.rs)").into()),
        }
    }
    Ok(o)
}

/// The value of `--name` in `args`.
fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("init") => init(&args[1..]),
        Some("make-shard") => make_shard(&args[1..]),
        Some("train") => train(&args[1..]),
        _ => train(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gpt2: {e}");
            ExitCode::FAILURE
        }
    }
}

fn init(args: &[String]) -> Result<()> {
    let config = Config::named(&flag(args, "--config").unwrap_or_else(|| "124m".into())).ok_or("--config is 124m or tiny")?;
    let seed = flag(args, "--seed").map(|s| s.parse()).transpose()?.unwrap_or(1337);
    let out = PathBuf::from(flag(args, "--out").ok_or("init needs --out FILE")?);
    let params = init_params(&Layout::new(&config), seed);
    write_model(&out, &config, &params, args.iter().any(|a| a == "--bf16"))?;
    println!("wrote {} ({} parameters, llm.c init, seed {seed})", out.display(), params.len());
    Ok(())
}

fn make_shard(args: &[String]) -> Result<()> {
    let out = PathBuf::from(flag(args, "--out").ok_or("make-shard needs --out FILE")?);
    let tokens = flag(args, "--tokens").map(|s| s.parse()).transpose()?.unwrap_or(1 << 20);
    let alphabet = flag(args, "--alphabet").map(|s| s.parse()).transpose()?.unwrap_or(50257);
    let seed = flag(args, "--seed").map(|s| s.parse()).transpose()?.unwrap_or(1);
    write_shard(&out, &synthetic_corpus(tokens, alphabet, seed))?;
    println!("wrote {} ({tokens} tokens of the synthetic progression corpus, alphabet {alphabet})", out.display());
    Ok(())
}

fn train(args: &[String]) -> Result<()> {
    let o = parse(args)?;
    if let Some(ranks) = o.ranks
        && std::env::var("RANK").is_err()
    {
        return launch(ranks, args);
    }
    let world: usize = std::env::var("WORLD_SIZE").ok().map(|w| w.parse()).transpose()?.unwrap_or(1);
    if o.cpu {
        if world > 1 {
            return Err("--cpu runs one rank; data parallelism needs GPUs".into());
        }
        return match o.dtype.as_str() {
            "f32" => run::<Cpu, f32>(Cpu::new(), &o, None, "CPU executor"),
            "bf16" => run::<Cpu, bf16>(Cpu::new(), &o, None, "CPU executor"),
            d => Err(format!("--dtype {d}: bf16 or f32").into()),
        };
    }
    let (context, comm) = if world > 1 {
        let (comm, launch) = Communicator::from_env(&NcclConfig::new().timeout(std::time::Duration::from_secs(300)))?;
        println!("rank {}/{} on GPU {}", launch.rank, launch.world_size, launch.local_rank);
        (comm.context().clone(), Some(comm))
    } else {
        (Context::primary(0)?, None)
    };
    let name = Device::get(context.device().ordinal())?.name()?;
    let mut gpu = Gpu::new(&context)?;
    if o.profile {
        gpu.enable_profile();
    }
    match o.dtype.as_str() {
        "f32" => run::<Gpu, f32>(gpu, &o, comm.as_ref(), &name),
        "bf16" => run::<Gpu, bf16>(gpu, &o, comm.as_ref(), &name),
        d => Err(format!("--dtype {d}: bf16 or f32").into()),
    }
}

/// Starts `ranks` copies of this program on this host, one per GPU, torchrun-style.
fn launch(ranks: usize, args: &[String]) -> Result<()> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    println!("launching {ranks} ranks (rendezvous 127.0.0.1:{port})");
    let children: Vec<_> = (0..ranks)
        .map(|rank| {
            Command::new(std::env::current_exe()?)
                .args(args)
                .env("RANK", rank.to_string())
                .env("WORLD_SIZE", ranks.to_string())
                .env("LOCAL_RANK", rank.to_string())
                .env("MASTER_ADDR", "127.0.0.1")
                .env("MASTER_PORT", port.to_string())
                .env("NCCL_NVLS_ENABLE", std::env::var("NCCL_NVLS_ENABLE").unwrap_or_else(|_| "0".into()))
                .spawn()
        })
        .collect::<std::io::Result<_>>()?;
    let mut failed = 0;
    for mut child in children {
        if !child.wait()?.success() {
            failed += 1;
        }
    }
    if failed > 0 {
        return Err(format!("{failed} of {ranks} ranks failed").into());
    }
    Ok(())
}

/// Something that averages the gradients of every rank in place (NCCL), for the GPU backend.
trait AllReduce<B: Backend> {
    fn average(&self, backend: &B, grads: &mut B::Buf<f32>) -> Result<()>;
    /// Leaves every rank the largest rank's value (the gradient norm all ranks clip with).
    fn agree(&self, backend: &B, value: &mut B::Buf<f32>) -> Result<()>;
}

impl AllReduce<Gpu> for Communicator {
    fn average(&self, backend: &Gpu, grads: &mut ferrocuda_host::DeviceBuffer<f32>) -> Result<()> {
        Ok(self.on(backend.stream())?.all_reduce_in_place(grads.slice_mut(..), ReduceOp::Avg)?)
    }
    fn agree(&self, backend: &Gpu, value: &mut ferrocuda_host::DeviceBuffer<f32>) -> Result<()> {
        Ok(self.on(backend.stream())?.all_reduce_in_place(value.slice_mut(..), ReduceOp::Max)?)
    }
}

impl AllReduce<Cpu> for Communicator {
    fn average(&self, _: &Cpu, _: &mut Vec<f32>) -> Result<()> {
        Err("the CPU executor runs one rank".into())
    }
    fn agree(&self, _: &Cpu, _: &mut Vec<f32>) -> Result<()> {
        Err("the CPU executor runs one rank".into())
    }
}

fn run<B: Backend, T: Act>(backend: B, o: &Options, comm: Option<&Communicator>, device: &str) -> Result<()>
where
    Communicator: AllReduce<B>,
{
    let (rank, world) = comm.map_or((0, 1), |c| (c.rank(), c.world_size()));
    let (config, master) = match &o.checkpoint {
        Some(path) => read_model(path)?,
        None => {
            let config = Config::named(&o.config).ok_or("--config is 124m or tiny")?;
            let params = init_params(&Layout::new(&config), o.seed);
            (config, params)
        }
    };
    let seq = o.seq.min(config.max_seq);
    let shape = Shape { batch: o.batch, seq };
    let tokens = match &o.data {
        Some(path) => read_shard(path)?,
        None => synthetic_corpus((world * shape.tokens() * 64 + 1).max(1 << 16), o.alphabet.unwrap_or(config.vocab), o.seed),
    };
    let mut loader = Loader::new(tokens, shape.batch, shape.seq, rank, world)?;
    let mut trainer = Trainer::<B, T>::new(backend, &config, shape, o.hyper, &master)?;
    trainer.use_graph = o.graph;
    if o.resume {
        let path = o.checkpoint.as_ref().ok_or("--resume needs --checkpoint")?;
        let state = read_state(&state_path(path), trainer.layout.total())?;
        trainer.restore(&state.master, &state.m, &state.v, state.step)?;
        loader.seek(state.position);
        println!("resumed from {} at step {}", path.display(), state.step);
    }
    if rank == 0 {
        println!(
            "gpt2: {} layers, {} heads, {} channels, vocab {} (padded {}), {} parameters | {} on {device} | batch {} x seq {} x {world} rank(s) | lr {} wd {} clip {}",
            config.layers,
            config.heads,
            config.channels,
            config.vocab,
            config.padded_vocab,
            trainer.layout.total(),
            T::NAME,
            shape.batch,
            shape.seq,
            o.hyper.learning_rate,
            o.hyper.weight_decay,
            o.hyper.max_norm
        );
    }
    let tokens_per_step = (shape.tokens() * world) as f64;
    // GPT2_TRACE=1: a diagnostics line per step (see `Acts::trace`; not for timing).
    let trace = std::env::var("GPT2_TRACE").is_ok_and(|v| v == "1");
    let mut times = Vec::new();
    let mut last_loss = f32::NAN;
    for step in 1..=o.steps {
        let (x, y) = loader.next_batch();
        let started = Instant::now();
        trainer.set_batch(&x, &y)?;
        trainer.forward_queued()?;
        if trace && rank == 0 {
            // The step's diagnostics, then the same forward pass again: a second loss that
            // differs from the first means the forward pass is not a function of its inputs.
            let (first, line, audit) = (trainer.last_loss()?, trainer.trace()?, trainer.audit_worst(2)?);
            trainer.forward_queued()?;
            println!("trace {step} {line} | again {:+.3e}", trainer.last_loss()? - first);
            for row in audit {
                println!("audit {step} {row}");
            }
        }
        trainer.backward()?;
        match comm {
            Some(c) => {
                c.average(&trainer.backend, &mut trainer.grads)?;
                trainer.update_with(|backend, norm| c.agree(backend, norm))?;
            }
            None => trainer.update()?,
        }
        let loss = trainer.last_loss()?;
        let ms = started.elapsed().as_secs_f64() * 1e3;
        let norm = trainer.grad_norm()?;
        times.push(ms);
        last_loss = loss;
        if !loss.is_finite() {
            return Err(format!("step {step}: the loss is {loss}").into());
        }
        if step == 1 {
            trainer.backend.take_profile();
        }
        if step == 2 && o.graph && rank == 0 {
            match trainer.graph_recorded() {
                true => println!("graph: the backward pass is a CUDA graph, recorded at step 2 and replayed from then on"),
                false => println!("graph: not recorded (see the note above); the backward pass runs eagerly"),
            }
        }
        if rank == 0 {
            println!("step {step:4}/{} | loss {loss:.6} | norm {norm:.4} | {ms:.2} ms | {:.0} tok/s", o.steps, tokens_per_step / (ms / 1e3));
        }
    }
    // Steps 11-30 when there are that many (llm.c's and the issue's window), else all after the first.
    let window: &[f64] = if times.len() >= 30 {
        &times[10..30]
    } else if times.len() > 1 {
        &times[1..]
    } else {
        &times
    };
    let mean = window.iter().sum::<f64>() / window.len().max(1) as f64;
    let hash = fingerprint(&trainer.state()?.0);
    let params_hash = fingerprint(&trainer.parameters()?);
    println!(
        "summary: rank {rank}/{world} | {} steps | final loss {last_loss:.6} | mean {mean:.2} ms/step over {} steps{} | {:.0} tok/s | {} {device} | master-weights fnv {hash:016x} | params fnv {params_hash:016x}",
        o.steps,
        window.len(),
        if times.len() >= 30 { " (11-30)" } else { "" },
        tokens_per_step / (mean / 1e3),
        T::NAME
    );
    let profile = trainer.backend.take_profile();
    if !profile.is_empty() && o.steps > 1 && rank == 0 {
        let steps = (o.steps - 1) as f64;
        let total: f64 = profile.iter().map(|p| p.1).sum();
        println!("profile (steps 2-{}, each operation synchronized; per step):", o.steps);
        println!("| kernel family | ms/step | share | calls/step |\n|---|---:|---:|---:|");
        let mut rows = profile.clone();
        rows.sort_by(|a, b| b.1.total_cmp(&a.1));
        for (name, ms, calls) in rows {
            println!("| {name} | {:.2} | {:.1}% | {:.0} |", ms / steps, 100.0 * ms / total, calls as f64 / steps);
        }
        println!("| total | {:.2} | 100% | |", total / steps);
    }
    if o.bench && times.len() < 30 {
        println!("note: --bench wants --steps 30 or more to average steps 11-30");
    }
    if let Some(path) = &o.save
        && rank == 0
    {
        let (master, m, v) = trainer.state()?;
        write_model(path, &config, &master, T::NAME == "bf16")?;
        write_state(&state_path(path), &State { step: trainer.step, position: loader.position(), world, master, m, v })?;
        println!("saved {} and {}", path.display(), state_path(path).display());
    }
    Ok(())
}
