//! Audit 2026-11-27d, GPU cases. Safe code only. `d_gpu <case> [args]`.
#![forbid(unsafe_code)]

use std::sync::{Barrier, mpsc};
use std::time::{Duration, Instant};

use cudarc::driver::CudaContext;
use d_kernels::{copy_u32, fill, spin_fill};
use ferrocuda::{Context, DeviceBuffer, LaunchConfig, Stream, borrowed};
use ferrocuda_kernels::attention::{self, Attention, Layout};
use half::bf16;

type R<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn arg(i: usize, default: u64) -> u64 {
    std::env::args().nth(i).and_then(|a| a.parse().ok()).unwrap_or(default)
}

fn count(v: &[u32], want: u32) -> usize {
    v.iter().filter(|&&x| x == want).count()
}

/// G1: cudarc's per-thread default stream, adopted on two threads, is one stream to ferrocuda
/// (key 0x2): a read on thread 2 is not ordered after a write on thread 1, and the drop frees
/// the buffer on thread 2's per-thread stream while thread 1's kernel still writes it.
fn ptds(control: bool) -> R {
    let iters = arg(2, 100_000_000) as u32;
    let n = 1usize << 18;
    let cfg = LaunchConfig::for_elements(n, 256);
    let cuda = CudaContext::new(0)?;
    let ctx = borrowed::cudarc::context(&cuda)?;
    let warm = Stream::non_blocking(&ctx)?;
    let mut buf = DeviceBuffer::<u32>::zeroed(&ctx, n)?;
    let mut out = DeviceBuffer::<u32>::zeroed(&ctx, n)?;
    fill::launch(&warm, cfg, 0, &mut buf)?; // loads the module
    warm.synchronize()?;
    let (tx_buf, rx_buf) = mpsc::channel();
    let (tx_done, rx_done) = mpsc::channel::<()>();
    let cuda1 = cuda.clone();
    let ctx1 = ctx.clone();
    let t0 = Instant::now();
    let writer = std::thread::spawn(move || -> R {
        // Thread 1: the writer, on its per-thread default stream (or, control, a stream of its own).
        let s = if control { Stream::non_blocking(&ctx1)? } else { borrowed::cudarc::stream(&cuda1.per_thread_stream())? };
        spin_fill::launch(&s, cfg, iters, 7, &mut buf)?;
        println!("  thread 1: spin_fill(7) queued at {:?}", t0.elapsed());
        tx_buf.send(buf).unwrap();
        rx_done.recv().ok(); // stay alive (its per-thread stream too) until the main thread is done
        Ok(())
    });
    let buf = rx_buf.recv()?;
    // Thread 2 (main): reads the buffer on its own per-thread default stream.
    let s2 = if control { Stream::non_blocking(&ctx)? } else { borrowed::cudarc::stream(&cuda.per_thread_stream())? };
    copy_u32::launch(&s2, cfg, &buf, &mut out)?;
    s2.synchronize()?;
    let seen = out.to_vec()?;
    println!(
        "  thread 2: copy of the buffer read {} of {n} elements as 7 (want {n}) at {:?}",
        count(&seen, 7),
        t0.elapsed()
    );
    // The drop: freed on thread 2's stream; a new allocation there may get the same memory.
    let old = buf.device_ptr();
    drop(buf);
    let fresh = DeviceBuffer::<u32>::zeroed_async(&s2, n)?;
    s2.synchronize()?;
    println!("  freed {old:#x}; new buffer at {:#x} (same: {})", fresh.device_ptr(), fresh.device_ptr() == old);
    ctx.synchronize()?; // now thread 1's kernel has finished
    let late = fresh.to_vec()?;
    println!("  new buffer after thread 1's kernel finished: {} of {n} elements are 7 (want 0) at {:?}", count(&late, 7), t0.elapsed());
    tx_done.send(()).ok();
    writer.join().unwrap()?;
    Ok(())
}

/// G2: two threads launch on two streams into the two halves of one buffer
/// (`split_at_mut`); the buffer has one use record, and the fast path / the unlocked gap
/// between ordering and queuing lose one of the writes: `to_vec` then does not wait for it.
fn split(rounds: u64) -> R {
    let iters = arg(3, 4_000_000) as u32;
    let half = 1usize << 16;
    let ctx = Context::primary(0)?;
    let (a, b) = (Stream::non_blocking(&ctx)?, Stream::non_blocking(&ctx)?);
    let mut buf = DeviceBuffer::<u32>::zeroed(&ctx, 2 * half)?;
    let cfg = LaunchConfig::for_elements(half, 256);
    let mut stale_rounds = 0;
    let mut first = None;
    for round in 1..=rounds as u32 {
        fill::launch(&a, LaunchConfig::for_elements(2 * half, 256), 0, &mut buf)?; // last writer: a
        a.synchronize()?;
        {
            let (mut left, mut right) = buf.split_at_mut(half);
            let gate = Barrier::new(2);
            std::thread::scope(|sc| -> R {
                let t1 = sc.spawn(|| -> R {
                    gate.wait();
                    spin_fill::launch(&a, cfg, iters, round, &mut left)?;
                    Ok(())
                });
                let t2 = sc.spawn(|| -> R {
                    gate.wait();
                    fill::launch(&b, cfg, round, &mut right)?;
                    Ok(())
                });
                t1.join().unwrap()?;
                t2.join().unwrap()?;
                Ok(())
            })?;
        }
        // Both launches returned: a host copy must see both writes.
        let v = buf.to_vec()?;
        let (l, r) = (count(&v[..half], round), count(&v[half..], round));
        if l != half || r != half {
            stale_rounds += 1;
            first.get_or_insert((round, l, r));
        }
        a.synchronize()?;
        b.synchronize()?;
    }
    println!("  rounds whose to_vec missed a queued write: {stale_rounds} of {rounds}; first: {first:?} (round, left ok, right ok of {half})");
    Ok(())
}

fn bf(n: usize, seed: u32) -> Vec<bf16> {
    (0..n).map(|i| bf16::from_f32((((i as u32).wrapping_mul(2654435761).wrapping_add(seed) >> 20) as f32 / 4096.0) - 0.5)).collect()
}

/// G3: `attention_backward_with_scratch` says it allocates nothing and may be recorded into a
/// graph; its tensor-core path allocates `delta` on the stream.
fn attn_capture() -> R {
    let ctx = Context::primary(0)?;
    let s = Stream::non_blocking(&ctx)?;
    for (name, d) in [("bf16 D64 (tensor cores)", 64usize), ("bf16 D96 (portable)", 96)] {
        let shape = Attention { batch: 1, heads_q: 2, heads_kv: 2, seq_q: 64, seq_kv: 64, head_dim: d, layout: Layout::Bhsd, causal: false, scale: None };
        let (ql, kl) = (shape.q_len(), shape.kv_len());
        let q = DeviceBuffer::from_slice(&ctx, &bf(ql, 1))?;
        let k = DeviceBuffer::from_slice(&ctx, &bf(kl, 2))?;
        let v = DeviceBuffer::from_slice(&ctx, &bf(kl, 3))?;
        let mut o = DeviceBuffer::<bf16>::zeroed(&ctx, ql)?;
        let mut lse = DeviceBuffer::<f32>::zeroed(&ctx, shape.q_rows())?;
        attention::attention_forward(&s, &q, &k, &v, &mut o, &mut lse, shape)?;
        let dout = DeviceBuffer::from_slice(&ctx, &bf(ql, 4))?;
        let (mut dq, mut dk, mut dv) = (DeviceBuffer::<bf16>::zeroed(&ctx, ql)?, DeviceBuffer::<bf16>::zeroed(&ctx, kl)?, DeviceBuffer::<bf16>::zeroed(&ctx, kl)?);
        let mut scratch = DeviceBuffer::<f32>::zeroed(&ctx, attention::backward_scratch_len(&shape))?;
        attention::attention_backward_with_scratch(&s, &q, &k, &v, &o, &dout, &lse, &mut dq, &mut dk, &mut dv, &mut scratch, shape)?;
        s.synchronize()?;
        let mut inner = None;
        let graph = s.capture(|s| {
            inner = Some(attention::attention_backward_with_scratch(s, &q, &k, &v, &o, &dout, &lse, &mut dq, &mut dk, &mut dv, &mut scratch, shape).map_err(|e| e.to_string()));
            Ok(())
        });
        println!("  {name}: call inside Stream::capture: {inner:?}; capture: {:?}", graph.map(|g| g.node_count()));
    }
    Ok(())
}

/// G4 (two GPUs): the per-thread stream's key is the same in every context, and the fast path
/// comes before the context check.
fn ptds_ctx() -> R {
    let n = 1usize << 20;
    let cfg = LaunchConfig::for_elements(n, 256);
    let (c0, c1) = (CudaContext::new(0)?, CudaContext::new(1)?);
    let (f0, f1) = (borrowed::cudarc::context(&c0)?, borrowed::cudarc::context(&c1)?);
    let (p0, p1) = (borrowed::cudarc::stream(&c0.per_thread_stream())?, borrowed::cudarc::stream(&c1.per_thread_stream())?);
    let mut buf = DeviceBuffer::<u32>::zeroed(&f0, n)?;
    fill::launch(&p0, cfg, 5, &mut buf)?;
    p0.synchronize()?;
    let plain = Stream::non_blocking(&f1)?;
    println!("  GPU 1, plain stream, GPU 0's buffer: {:?}", fill::launch(&plain, cfg, 6, &mut buf).map_err(|e| e.to_string()));
    println!("  GPU 1, per-thread stream, GPU 0's buffer: {:?}", fill::launch(&p1, cfg, 6, &mut buf).map_err(|e| e.to_string()));
    println!("  GPU 1 per-thread stream synchronize: {:?}", p1.synchronize_timeout(Duration::from_secs(5)).map_err(|e| e.to_string()));
    Ok(())
}

/// G5: a host callback that makes CUDA calls through ferrocuda's safe API.
fn callback() -> R {
    let ctx = Context::primary(0)?;
    let s = Stream::non_blocking(&ctx)?;
    let s2 = Stream::non_blocking(&ctx)?;
    let mut b = DeviceBuffer::<u32>::zeroed(&ctx, 1024)?;
    fill::launch(&s2, LaunchConfig::for_elements(1024, 256), 1, &mut b)?;
    s2.synchronize()?;
    let ctx2 = ctx.clone();
    s.launch_host_fn(move || {
        let z = DeviceBuffer::<u32>::zeroed(&ctx2, 16).map(|_| ()).map_err(|e| e.to_string());
        println!("  in callback: DeviceBuffer::zeroed -> {z:?}");
        let l = fill::launch(&s2, LaunchConfig::for_elements(1024, 256), 2, &mut b).map_err(|e| e.to_string());
        println!("  in callback: launch -> {l:?}");
        let v = b.to_vec().map(|v| v[0]).map_err(|e| e.to_string());
        println!("  in callback: to_vec -> {v:?}");
    })?;
    println!("  synchronize_timeout(5 s): {:?}", s.synchronize_timeout(Duration::from_secs(5)).map_err(|e| e.to_string()));
    Ok(())
}

fn main() {
    let case = std::env::args().nth(1).unwrap_or_default();
    println!("### {case}");
    let r = match case.as_str() {
        "ptds" => ptds(false),
        "ptds_control" => ptds(true),
        "split" => split(arg(2, 200)),
        "attn_capture" => attn_capture(),
        "ptds_ctx" => ptds_ctx(),
        "callback" => callback(),
        _ => Err("cases: ptds ptds_control split attn_capture ptds_ctx callback".into()),
    };
    println!("  -> {:?}", r.map_err(|e| e.to_string()));
}
