//! Audit 2026-11-27f GPU cases (safe code only). `f_gpu <case>`; see ../../run_gpu.sh.
#![allow(unsafe_code)] // only GraphExec::launch in gemm_capture, with its contract met

use std::time::{Duration, Instant};

use ferrocuda::{Context, DeviceBuffer, Device, LaunchConfig, Stream};
use ferrocuda_collectives::nccl::{Communicator, Config, OnStream};
use ferrocuda_collectives::{Collectives, ReduceOp, group};

type R = Result<(), Box<dyn std::error::Error>>;

fn contexts() -> Result<Vec<Context>, Box<dyn std::error::Error>> {
    let n = Device::count()?.min(2);
    Ok((0..n).map(Context::primary).collect::<Result<_, _>>()?)
}

fn sevens(v: &[f32]) -> usize {
    v.iter().filter(|&&x| x != 0.0).count()
}

/// F12-1a: inside `group`, a plain `OnStream` all-reduce (not the `Grouped` member) into a buffer
/// made and dropped inside the body; a new buffer of the same size is then made on the stream.
fn c4_drop_in_group(zmode: u32) -> R {
    let ctxs = contexts()?;
    let comms = Communicator::init_all(&ctxs, &Config::new().timeout(Duration::from_secs(20)))?;
    let streams: Vec<Stream> = ctxs.iter().map(Stream::new).collect::<Result<_, _>>()?;
    let ons: Vec<OnStream> = comms.iter().zip(&streams).map(|(c, s)| c.on(s)).collect::<Result<_, _>>()?;
    let n = 1 << 20;
    let xs: Vec<DeviceBuffer<f32>> = ctxs.iter().map(|c| DeviceBuffer::from_slice(c, &vec![7.0f32; n])).collect::<Result<_, _>>()?;
    println!("  ranks {}", ons.len());
    let zs = group(&ons, |_members| -> Result<Vec<(usize, usize, DeviceBuffer<f32>)>, ferrocuda::Error> {
        let mut out = Vec::new();
        for (i, on) in ons.iter().enumerate() {
            let mut y = DeviceBuffer::<f32>::zeroed_async(on.stream(), n)?;
            let ya = y.slice(..).as_device_ptr().address() as usize;
            let r = on.all_reduce(xs[i].slice(..), y.slice_mut(..), ReduceOp::Sum);
            println!("  rank {i}: all_reduce inside the group body (plain OnStream): {:?}", r.map_err(|e| e.to_string()));
            drop(y);
            let z = if zmode == 0 { DeviceBuffer::<f32>::zeroed_async(on.stream(), n)? } else { DeviceBuffer::<f32>::zeroed(on.stream().context(), n)? };
            let za = z.slice(..).as_device_ptr().address() as usize;
            out.push((ya, za, z));
        }
        Ok(out)
    });
    let zs = match zs {
        Ok(Ok(z)) => z,
        other => {
            println!("  group: {:?}", other.map(|_| ()).map_err(|e| e.to_string()));
            return Ok(());
        }
    };
    for s in &streams {
        s.synchronize()?;
    }
    for (i, (ya, za, z)) in zs.iter().enumerate() {
        let v = z.to_vec()?;
        println!("  rank {i}: dropped y at {ya:#x}, new zeroed z at {za:#x}; nonzero elements of z after the group: {} of {n}{}", sevens(&v), if sevens(&v) > 0 { "  <-- the collective wrote a freed buffer" } else { "" });
    }
    Ok(())
}

/// F12-1b: the public (doc-hidden) `Collectives::group_begin` / `group_end` called directly.
fn c4_manual_group() -> R {
    let ctxs = contexts()?;
    let comms = Communicator::init_all(&ctxs, &Config::new().timeout(Duration::from_secs(20)))?;
    let streams: Vec<Stream> = ctxs.iter().map(Stream::new).collect::<Result<_, _>>()?;
    let n = 1 << 20;
    let xs: Vec<DeviceBuffer<f32>> = ctxs.iter().map(|c| DeviceBuffer::from_slice(c, &vec![7.0f32; n])).collect::<Result<_, _>>()?;
    let mut ys: Vec<DeviceBuffer<f32>> = streams.iter().map(|s| DeviceBuffer::<f32>::zeroed_async(s, n)).collect::<Result<_, _>>()?;
    for s in &streams {
        s.synchronize()?;
    }
    println!("  group_begin: {:?}", OnStream::group_begin().map_err(|e| e.to_string()));
    for (i, ((c, s), y)) in comms.iter().zip(&streams).zip(ys.iter_mut()).enumerate() {
        let r = c.on(s)?.all_reduce(xs[i].slice(..), y.slice_mut(..), ReduceOp::Sum);
        println!("  rank {i}: all_reduce: {:?}", r.map_err(|e| e.to_string()));
    }
    // The door says the write is queued on the stream: a host read waits for it.
    for (i, y) in ys.iter().enumerate() {
        let v = y.to_vec()?;
        println!("  rank {i}: y.to_vec() before group_end: {} of {n} written", sevens(&v));
    }
    println!("  group_end: {:?}", OnStream::group_end().map_err(|e| e.to_string()));
    for s in &streams {
        s.synchronize()?;
    }
    for (i, y) in ys.iter().enumerate() {
        let v = y.to_vec()?;
        println!("  rank {i}: y.to_vec() after group_end: {} of {n} written", sevens(&v));
    }
    Ok(())
}

/// F12-1c: inside `group`, self send/recv (one rank: p2p to itself), the receive buffer
/// dropped in the body and a new one made; the data lands after the group ends.
fn c4_sendrecv_drop() -> R {
    let ctx = Context::primary(0)?;
    let comms = Communicator::init_all(std::slice::from_ref(&ctx), &Config::new().timeout(Duration::from_secs(20)))?;
    let s = Stream::new(&ctx)?;
    let on = comms[0].on(&s)?;
    let n = 1 << 20;
    let x = DeviceBuffer::from_slice(&ctx, &vec![7.0f32; n])?;
    let out = group(std::slice::from_ref(&on), |_m| -> Result<(usize, usize, DeviceBuffer<f32>), ferrocuda::Error> {
        let mut y = DeviceBuffer::<f32>::zeroed_async(&s, n)?;
        let ya = y.slice(..).as_device_ptr().address() as usize;
        println!("  send: {:?}", on.send(x.slice(..), 0).map_err(|e| e.to_string()));
        println!("  recv: {:?}", on.recv(y.slice_mut(..), 0).map_err(|e| e.to_string()));
        drop(y);
        let z = DeviceBuffer::<f32>::zeroed_async(&s, n)?;
        let za = z.slice(..).as_device_ptr().address() as usize;
        Ok((ya, za, z))
    });
    match out {
        Ok(Ok((ya, za, z))) => {
            s.synchronize()?;
            let v = z.to_vec()?;
            println!("  dropped y at {ya:#x}, new zeroed z at {za:#x}; nonzero elements of z: {} of {n}{}", sevens(&v), if sevens(&v) > 0 { "  <-- recv wrote a freed buffer" } else { "" });
        }
        other => println!("  group: {:?}", other.map(|_| ()).map_err(|e| e.to_string())),
    }
    Ok(())
}

/// F12-1d: only the lifetime-checked `Grouped` API, but a `group` nested in another `group`'s
/// body: the inner group's end is not NCCL's end (depth 2 -> 1), so its self send/recv is still
/// deferred when the inner `group` returns and its buffer can be dropped in the outer body.
fn c4_nested() -> R {
    let ctx = Context::primary(0)?;
    let comms = Communicator::init_all(std::slice::from_ref(&ctx), &Config::new().timeout(Duration::from_secs(20)))?;
    let s = Stream::new(&ctx)?;
    let on = comms[0].on(&s)?;
    let n = 1 << 20;
    let x = DeviceBuffer::from_slice(&ctx, &vec![7.0f32; n])?;
    let out = group(std::slice::from_ref(&on), |_outer| -> Result<(usize, usize, DeviceBuffer<f32>), Box<dyn std::error::Error>> {
        let mut y = DeviceBuffer::<f32>::zeroed_async(&s, n)?;
        let ya = y.slice(..).as_device_ptr().address() as usize;
        let inner = group(std::slice::from_ref(&on), |m| -> ferrocuda_collectives::Result<()> {
            m[0].send(x.slice(..), 0)?;
            m[0].recv(y.slice_mut(..), 0)
        });
        println!("  inner group: {:?}", inner.map_err(|e| e.to_string()));
        drop(y);
        let z = DeviceBuffer::<f32>::zeroed_async(&s, n)?;
        let za = z.slice(..).as_device_ptr().address() as usize;
        Ok((ya, za, z))
    });
    match out {
        Ok(Ok((ya, za, z))) => {
            s.synchronize()?;
            let v = z.to_vec()?;
            println!("  dropped y at {ya:#x}, new zeroed z at {za:#x}; nonzero elements of z: {} of {n}{}", sevens(&v), if sevens(&v) > 0 { "  <-- recv wrote a freed buffer" } else { "" });
        }
        Ok(Err(e)) => println!("  body: Err({e})"),
        Err(e) => println!("  outer group: Err({e})"),
    }
    Ok(())
}

/// Named barriers on the GPU (compare with f_cpu nb): (block, count, live).
fn nb(block: u32, count: u32, live: u32) -> R {
    let ctx = Context::primary(0)?;
    let s = Stream::new(&ctx)?;
    let mut out = DeviceBuffer::<u32>::zeroed(&ctx, block as usize)?;
    let t = Instant::now();
    let r = f_kernels::named_exit::launch(&s, LaunchConfig::new(1u32, block), count, live, &mut out);
    let sync = s.synchronize_timeout(Duration::from_secs(3));
    println!("  block {block} count {count} live {live}: launch {:?}, sync {:?} after {:?}", r.map_err(|e| e.to_string()), sync.as_ref().map_err(|e| e.to_string()), t.elapsed());
    if sync.is_ok() {
        let v = out.to_vec()?;
        println!("  out: {}", v.iter().map(|x| x.to_string()).collect::<String>());
    } else {
        println!("  HUNG (exiting so the script goes on)");
        std::process::exit(3);
    }
    Ok(())
}

fn nb_mixed(count1: u32) -> R {
    let ctx = Context::primary(0)?;
    let s = Stream::new(&ctx)?;
    let mut out = DeviceBuffer::<u32>::zeroed(&ctx, 64)?;
    let r = f_kernels::named_mixed::launch(&s, LaunchConfig::new(1u32, 64u32), count1, &mut out);
    let sync = s.synchronize_timeout(Duration::from_secs(3));
    println!("  mixed counts 64/{count1}: launch {:?}, sync {:?}", r.map_err(|e| e.to_string()), sync.as_ref().map_err(|e| e.to_string()));
    if sync.is_err() {
        println!("  HUNG");
        std::process::exit(3);
    }
    let v = out.to_vec()?;
    println!("  out: {}", v.iter().map(|x| x.to_string()).collect::<String>());
    Ok(())
}

/// F12-2: after `synchronize_timeout` reports a never-ending kernel on stream A, one step
/// (each in its own process: a hung step blocks its thread), bounded by a 5 s watchdog.
/// Steps: 0 drop a GemmEngine made on stream B before the hang (cublasDestroy); 1 drop a
/// PinnedBuffer nobody copied with (cuMemFreeHost); 2 drop a synchronous `DeviceBuffer::zeroed`
/// never used on A; 3 drop a cuFFT plan made before the hang; 4 (control) drop a Stream;
/// 5 make a new PinnedBuffer.
fn t2(step: u32) -> R {
    let ctx = Context::primary(0)?;
    let a = Stream::new(&ctx)?;
    let b = Stream::new(&ctx)?;
    let engine = ferrocuda_kernels::gemm::GemmEngine::new(&b)?;
    let pinned = ferrocuda::PinnedBuffer::<f32>::zeroed(&ctx, 1 << 20)?;
    let plain = DeviceBuffer::<f32>::zeroed(&ctx, 1 << 20)?;
    let plan = ferrocuda::cufft::Plan::<ferrocuda::cufft::C2C>::new(&ctx, &[256], 4).map_err(|e| e.to_string());
    let other = Stream::new(&ctx)?;
    let mut flag = DeviceBuffer::<u32>::zeroed(&ctx, 1)?;
    f_kernels::spin_flag::launch(&a, LaunchConfig::new(1u32, 32u32), &mut flag)?;
    let t = Instant::now();
    let r = a.synchronize_timeout(Duration::from_millis(300));
    println!("  synchronize_timeout(300 ms): {:?} after {:?}", r.map_err(|e| e.to_string()), t.elapsed());
    let (tx, rx) = std::sync::mpsc::channel();
    let name = ["drop(GemmEngine)", "drop(PinnedBuffer, unused)", "drop(DeviceBuffer::zeroed, unused on A)", "drop(cufft Plan)", "drop(Stream) (control)", "PinnedBuffer::zeroed (new)"][step as usize];
    let c2 = ctx.clone();
    std::thread::spawn(move || {
        let t = Instant::now();
        let out: String = match step {
            0 => { drop(engine); "returned".into() }
            1 => { drop(pinned); "returned".into() }
            2 => { drop(plain); "returned".into() }
            3 => { drop(plan); "returned".into() }
            4 => { drop(other); "returned".into() }
            _ => format!("{:?}", ferrocuda::PinnedBuffer::<f32>::zeroed(&c2, 1 << 20).map(|_| ()).map_err(|e| e.to_string())),
        };
        let _ = tx.send(format!("{out} after {:?}", t.elapsed()));
    });
    match rx.recv_timeout(Duration::from_secs(5)) {
        Ok(m) => println!("  [{name}] {m}; leaked_releases = {}", ferrocuda::leaked_releases()),
        Err(_) => println!("  [{name}] HUNG: no return after 5 s"),
    }
    std::process::exit(0);
}

/// G2: the strided-batched GEMM (cuBLAS, not cuBLASLt) recorded into `Stream::capture`
/// (audit E's C3 did not reach it), replayed twice; compared with the direct call.
fn gemm_capture() -> R {
    use ferrocuda_kernels::gemm::{GemmEngine, GemmEpilogue, GemmShape, gemm};
    let ctx = Context::primary(0)?;
    let s = Stream::new(&ctx)?;
    let engine = GemmEngine::new(&s)?;
    let (m, n, k, batch) = (64, 64, 64, 3);
    let shape = GemmShape { m, n, k, batch, transpose_a: false, transpose_b: true };
    let a: Vec<f32> = (0..m * k * batch).map(|i| ((i * 7) % 13) as f32 / 13.0).collect();
    let b: Vec<f32> = (0..n * k * batch).map(|i| ((i * 5) % 11) as f32 / 11.0).collect();
    let (da, db) = (DeviceBuffer::from_slice(&ctx, &a)?, DeviceBuffer::from_slice(&ctx, &b)?);
    let mut direct = DeviceBuffer::<f32>::zeroed(&ctx, m * n * batch)?;
    gemm::<f32, f32>(&engine, &da, &db, &mut direct, shape, GemmEpilogue::None, 1.0, 0.0)?;
    s.synchronize()?;
    let mut c = DeviceBuffer::<f32>::zeroed(&ctx, m * n * batch)?;
    let mut inner: Option<String> = None;
    let graph = s.capture(|_s| {
        if let Err(e) = gemm::<f32, f32>(&engine, &da, &db, &mut c, shape, GemmEpilogue::None, 1.0, 0.0) {
            inner = Some(e.to_string());
        }
        Ok(())
    });
    if let Some(e) = inner {
        println!("  gemm inside the capture: Err({e})");
    }
    let graph = match graph {
        Ok(g) => g,
        Err(e) => {
            println!("  capture: Err({e})");
            return Ok(());
        }
    };
    println!("  capture: Ok, {} nodes", graph.node_count()?);
    let exec = graph.instantiate()?;
    for _ in 0..2 {
        // SAFETY: every buffer the captured work touched (da, db, c, the engine's handles and
        // workspace) lives until after the synchronize below, and is used on `s` only.
        unsafe { exec.launch(&s)? };
    }
    s.synchronize()?;
    let (x, y) = (direct.to_vec()?, c.to_vec()?);
    let diff = x.iter().zip(&y).map(|(p, q)| (p - q).abs()).fold(0.0f32, f32::max);
    println!("  replayed: max |graph - direct| = {diff}");
    Ok(())
}

/// F12-4: the allocating forms (`attention_backward`, `rmsnorm_backward`) with one operand of
/// the wrong length, outside and inside a capture: which error, and what was queued first.
fn k2_capture() -> R {
    use ferrocuda_kernels::attention::{Attention, Layout, attention_backward};
    use ferrocuda_kernels::rows::{Rows, rmsnorm_backward};
    use half::bf16;
    let ctx = Context::primary(0)?;
    let s = Stream::new(&ctx)?;
    let shape = Attention { batch: 1, heads_q: 2, heads_kv: 2, seq_q: 64, seq_kv: 64, head_dim: 64, layout: Layout::Bhsd, causal: false, scale: None };
    let (ql, kl, rows) = (shape.q_len(), shape.kv_len(), shape.q_rows());
    let z = |n: usize| DeviceBuffer::<bf16>::zeroed(&ctx, n);
    let (q, k, v, o, d_o) = (z(ql)?, z(kl)?, z(kl)?, z(ql)?, z(ql)?);
    let lse = DeviceBuffer::<f32>::zeroed(&ctx, rows)?;
    let (mut dq, mut dk, mut dv) = (z(ql)?, z(kl)?, z(kl - 1)?);
    let r = attention_backward(&s, &q, &k, &v, &o, &d_o, &lse, &mut dq, &mut dk, &mut dv, shape);
    println!("  attention_backward, dv one short, no capture: {:?}", r.map_err(|e| e.to_string()));
    let mut inner = None;
    let g = s.capture(|s| {
        inner = Some(attention_backward(s, &q, &k, &v, &o, &d_o, &lse, &mut dq, &mut dk, &mut dv, shape).map_err(|e| e.to_string()));
        Ok(())
    });
    println!("  attention_backward, dv one short, in a capture: {:?}; capture {:?}", inner, g.map(|g| g.node_count().unwrap_or(99)).map_err(|e| e.to_string()));
    let rs = Rows { rows: 8, cols: 768 };
    let (dout, x, w) = (z(rs.len())?, z(rs.len())?, z(768)?);
    let rstd = DeviceBuffer::<f32>::zeroed(&ctx, 8)?;
    let mut dx = z(rs.len() - 1)?;
    let mut dw = DeviceBuffer::<f32>::zeroed(&ctx, 768)?;
    let mut inner = None;
    let g = s.capture(|s| {
        inner = Some(rmsnorm_backward(s, &dout, &x, &w, &rstd, None, &mut dx, &mut dw, rs).map_err(|e| e.to_string()));
        Ok(())
    });
    println!("  rmsnorm_backward, dx one short, in a capture: {:?}; capture {:?}", inner, g.map(|g| g.node_count().unwrap_or(99)).map_err(|e| e.to_string()));
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize| args.get(i).and_then(|a| a.parse::<u32>().ok()).unwrap_or(0);
    let case = args.get(1).map(String::as_str).unwrap_or("");
    println!("== {}", args[1..].join(" "));
    let r = match case {
        "c4_drop" => c4_drop_in_group(arg(2)),
        "c4_manual" => c4_manual_group(),
        "c4_sendrecv" => c4_sendrecv_drop(),
        "c4_nested" => c4_nested(),
        "nb" => nb(arg(2), arg(3), arg(4)),
        "nb_mixed" => nb_mixed(arg(2)),
        "t2" => t2(arg(2)),
        "gemm_capture" => gemm_capture(),
        "k2_capture" => k2_capture(),
        _ => {
            eprintln!("cases: c4_drop [0|1], c4_manual, c4_sendrecv, nb <block> <count> <live>, nb_mixed <count1>");
            return;
        }
    };
    if let Err(e) = r {
        println!("  error: {e}");
    }
}
