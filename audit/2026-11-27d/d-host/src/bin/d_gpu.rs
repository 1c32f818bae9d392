//! Audit 2026-11-27d, GPU cases. Safe code only. `d_gpu <case> [args]`.
#![forbid(unsafe_code)]

use std::sync::{Barrier, mpsc};
use std::time::{Duration, Instant};

use cudarc::driver::CudaContext;
use d_kernels::{copy_u32, fill, partial_sync, partial_warp, spin_fill};
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

/// Iterations of `spin_fill` over `n` elements that take about `target_ms` (measured here).
fn calibrate(ctx: &Context, n: usize, target_ms: f64) -> R<u32> {
    let s = Stream::non_blocking(ctx)?;
    let mut b = DeviceBuffer::<u32>::zeroed(ctx, n)?;
    let cfg = LaunchConfig::for_elements(n, 256);
    spin_fill::launch(&s, cfg, 1000, 1, &mut b)?; // loads the module
    s.synchronize()?;
    let probe = 2_000_000u32;
    let t = Instant::now();
    spin_fill::launch(&s, cfg, probe, 1, &mut b)?;
    s.synchronize()?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let iters = ((probe as f64) * target_ms / ms.max(0.01)).min(u32::MAX as f64) as u32;
    println!("  calibration: {probe} iterations over {n} elements took {ms:.2} ms -> {iters} for ~{target_ms} ms");
    Ok(iters)
}

/// G1: cudarc's per-thread default stream, adopted on two threads, is one stream to ferrocuda
/// (key 0x2): a read on thread 2 is not ordered after a write on thread 1, and the drop frees
/// the buffer on thread 2's per-thread stream while thread 1's kernel still writes it.
fn ptds(control: bool) -> R {
    let n = 1usize << 18;
    let cfg = LaunchConfig::for_elements(n, 256);
    let cuda = CudaContext::new(0)?;
    let ctx = borrowed::cudarc::context(&cuda)?;
    let iters = calibrate(&ctx, n, arg(2, 400) as f64)?;
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
    s2.synchronize()?; // thread 2's own stream only: no legacy-stream work before the drop
    println!("  thread 2: copy of the buffer done at {:?}", t0.elapsed());
    // The drop: freed on thread 2's stream; a new allocation there may get the same memory.
    let old = buf.device_ptr();
    drop(buf);
    let fresh = DeviceBuffer::<u32>::zeroed_async(&s2, n)?;
    s2.synchronize()?;
    println!("  freed {old:#x}; new buffer at {:#x} (same address: {}) at {:?}", fresh.device_ptr(), fresh.device_ptr() == old, t0.elapsed());
    ctx.synchronize()?; // now thread 1's kernel has finished
    println!("  context synchronised at {:?}", t0.elapsed());
    let seen = out.to_vec()?;
    println!("  thread 2's copy read {} of {n} elements as 7 (want {n})", count(&seen, 7));
    let late = fresh.to_vec()?;
    println!("  the new buffer holds {} of {n} elements = 7 (want 0: thread 1's kernel wrote freed memory)", count(&late, 7));
    tx_done.send(()).ok();
    writer.join().unwrap()?;
    Ok(())
}

/// G2: two threads launch on two streams into the two halves of one buffer
/// (`split_at_mut`); the buffer has one use record, and the fast path / the unlocked gap
/// between ordering and queuing lose one of the writes: `to_vec` then does not wait for it.
fn split(rounds: u64) -> R {
    let half = 1usize << 16;
    let ctx = Context::primary(0)?;
    let iters = calibrate(&ctx, half, arg(3, 10) as f64)?;
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

/// G2b: the same race, then the buffer's drop: freed after the recorded writer only, the pool
/// hands the memory to the next allocation on that stream, and thread 1's kernel writes it.
fn split_uaf(rounds: u64) -> R {
    let half = 1usize << 16;
    let ctx = Context::primary(0)?;
    let (a, b) = (Stream::non_blocking(&ctx)?, Stream::non_blocking(&ctx)?);
    let iters = calibrate(&ctx, half, arg(3, 10) as f64)?;
    let cfg = LaunchConfig::for_elements(half, 256);
    let mut hits = 0;
    for round in 1..=rounds as u32 {
        let mut buf = DeviceBuffer::<u32>::zeroed_async(&a, 2 * half)?;
        fill::launch(&a, LaunchConfig::for_elements(2 * half, 256), 0, &mut buf)?;
        a.synchronize()?;
        let value = 1000 + round;
        {
            let (mut left, mut right) = buf.split_at_mut(half);
            let gate = Barrier::new(2);
            std::thread::scope(|sc| -> R {
                let t1 = sc.spawn(|| -> R {
                    gate.wait();
                    spin_fill::launch(&a, cfg, iters, value, &mut left)?;
                    Ok(())
                });
                let t2 = sc.spawn(|| -> R {
                    gate.wait();
                    fill::launch(&b, cfg, value, &mut right)?;
                    Ok(())
                });
                t1.join().unwrap()?;
                t2.join().unwrap()?;
                Ok(())
            })?;
        }
        let old = buf.device_ptr();
        drop(buf);
        let fresh = DeviceBuffer::<u32>::zeroed_async(&b, 2 * half)?;
        b.synchronize()?;
        ctx.synchronize()?;
        let v = fresh.to_vec()?;
        let written = count(&v, value);
        if written > 0 {
            hits += 1;
            if hits <= 3 {
                println!(
                    "  round {round}: old buffer {old:#x}, new buffer {:#x}: {written} elements of the NEW buffer hold the old launch's value {value}",
                    fresh.device_ptr()
                );
            }
        }
    }
    println!("  rounds where a dropped buffer's kernel wrote into the next allocation: {hits} of {rounds}");
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
        let (mut dq, mut dk, mut dv) =
            (DeviceBuffer::<bf16>::zeroed(&ctx, ql)?, DeviceBuffer::<bf16>::zeroed(&ctx, kl)?, DeviceBuffer::<bf16>::zeroed(&ctx, kl)?);
        let mut scratch = DeviceBuffer::<f32>::zeroed(&ctx, attention::backward_scratch_len(&shape))?;
        attention::attention_backward_with_scratch(&s, &q, &k, &v, &o, &dout, &lse, &mut dq, &mut dk, &mut dv, &mut scratch, shape)?;
        s.synchronize()?;
        let mut inner = None;
        let graph = s.capture(|s| {
            inner = Some(
                attention::attention_backward_with_scratch(s, &q, &k, &v, &o, &dout, &lse, &mut dq, &mut dk, &mut dv, &mut scratch, shape)
                    .map_err(|e| e.to_string()),
            );
            Ok(())
        });
        println!("  {name}: call inside Stream::capture: {inner:?}; capture: {:?}", graph.map(|g| g.node_count()));
    }
    Ok(())
}

/// G4: the per-thread stream's key is the same in every context, and the fast path comes
/// before the context check. Same device: cudarc's primary and a non-primary context (both
/// safe); with two GPUs also GPU 0 and GPU 1.
fn ptds_ctx() -> R {
    let n = 1usize << 20;
    let cfg = LaunchConfig::for_elements(n, 256);
    let c0 = CudaContext::new(0)?;
    let mut others = vec![("same GPU, cudarc non-primary context", CudaContext::new_non_primary(0, 0)?)];
    if let Ok(c) = CudaContext::new(1) {
        others.push(("GPU 1, primary context", c));
    }
    let f0 = borrowed::cudarc::context(&c0)?;
    let p0 = borrowed::cudarc::stream_in(&f0, &c0.per_thread_stream())?;
    for (name, c1) in others {
        let f1 = borrowed::cudarc::context(&c1)?;
        let p1 = borrowed::cudarc::stream_in(&f1, &c1.per_thread_stream())?;
        let mut buf = DeviceBuffer::<u32>::zeroed(&f0, n)?;
        fill::launch(&p0, cfg, 5, &mut buf)?;
        p0.synchronize()?;
        let plain = Stream::non_blocking(&f1)?;
        println!(
            "  [{name}] plain stream of that context, buffer of the primary context: {:?}",
            fill::launch(&plain, cfg, 6, &mut buf).map_err(|e| e.to_string())
        );
        println!("  [{name}] its per-thread stream, same buffer: {:?}", fill::launch(&p1, cfg, 6, &mut buf).map_err(|e| e.to_string()));
        println!("  [{name}] synchronize_timeout: {:?}", p1.synchronize_timeout(Duration::from_secs(5)).map_err(|e| e.to_string()));
        println!("  [{name}] buffer now: {:?}", buf.to_vec().map(|v| (count(&v, 5), count(&v, 6))).map_err(|e| e.to_string()));
    }
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

/// G7: attention forward through views at odd offsets (the sm_90 path needs 16-byte aligned
/// Q/K/V and a 4-byte aligned O; other offsets take the tensor-core path): every result must
/// match the CPU executor's on the same data.
fn attn_views() -> R {
    let ctx = Context::primary(0)?;
    let s = Stream::non_blocking(&ctx)?;
    let shape = Attention { batch: 1, heads_q: 2, heads_kv: 2, seq_q: 256, seq_kv: 256, head_dim: 64, layout: Layout::Bhsd, causal: true, scale: None };
    let (ql, kl, rows) = (shape.q_len(), shape.kv_len(), shape.q_rows());
    let (q, k, v) = (bf(ql + 8, 1), bf(kl + 8, 2), bf(kl + 8, 3));
    let e = ferrocuda::cpu::CpuExecutor::new();
    let (mut o_ref, mut l_ref) = (vec![bf16::ZERO; ql], vec![0f32; rows]);
    ferrocuda_kernels::cpu::attention_forward(&e, &q[8..], &k[8..], &v[8..], &mut o_ref, &mut l_ref, shape)?;
    let (qd, kd, vd) = (DeviceBuffer::from_slice(&ctx, &q)?, DeviceBuffer::from_slice(&ctx, &k)?, DeviceBuffer::from_slice(&ctx, &v)?);
    for (label, in_off, out_off) in [("inputs +16 B, out +0", 8usize, 0usize), ("inputs +16 B, out +4 B", 8, 2), ("inputs +16 B, out +2 B", 8, 1)] {
        let _ = in_off;
        let mut o = DeviceBuffer::<bf16>::zeroed(&ctx, ql + 8)?;
        let mut l = DeviceBuffer::<f32>::zeroed(&ctx, rows + 1)?;
        let r = attention::attention_forward(
            &s,
            &qd.slice(8..),
            &kd.slice(8..),
            &vd.slice(8..),
            &mut o.slice_mut(out_off..out_off + ql),
            &mut l.slice_mut(1..),
            shape,
        );
        let sync = s.synchronize();
        let ov = o.to_vec()?;
        let diff = ov[out_off..out_off + ql].iter().zip(&o_ref).map(|(a, b)| (a.to_f32() - b.to_f32()).abs()).fold(0f32, f32::max);
        let outside = ov[..out_off].iter().chain(&ov[out_off + ql..]).filter(|x| x.to_f32() != 0.0).count();
        println!(
            "  {label}: {:?} sync {:?}; max |gpu - cpu| {diff}; elements written outside the view: {outside}",
            r.map_err(|e| e.to_string()),
            sync.map_err(|e| e.to_string())
        );
    }
    Ok(())
}

/// G6: warp operations in a partial warp (block of 48), for comparison with `d_cpu c11`.
fn partial() -> R {
    let ctx = Context::primary(0)?;
    let s = Stream::non_blocking(&ctx)?;
    for mode in 0..8u32 {
        let mut out = DeviceBuffer::from_slice(&ctx, &[0xffff_ffffu32; 48])?;
        let r = partial_warp::launch(&s, LaunchConfig::new(1u32, 48u32), mode, &mut out).and_then(|()| s.synchronize_timeout(Duration::from_secs(5)));
        let v = out.to_vec()?;
        println!("  mode {mode}: {:?} lanes 0,31: {:#x} {:#x}; lanes 32..48: {:x?}", r.map_err(|e| e.to_string()), v[0], v[31], &v[32..]);
    }
    Ok(())
}

/// G8: barriers in a partial warp (block of 48), for comparison with `d_cpu c12`.
fn partial_barriers() -> R {
    let ctx = Context::primary(0)?;
    let s = Stream::non_blocking(&ctx)?;
    for mode in 0..3u32 {
        let mut out = DeviceBuffer::from_slice(&ctx, &[0xffff_ffffu32; 48])?;
        let r = partial_sync::launch(&s, LaunchConfig::new(1u32, 48u32), mode, &mut out).and_then(|()| s.synchronize_timeout(Duration::from_secs(5)));
        let v = out.to_vec()?;
        println!("  mode {mode}: {:?} out[0] {} out[40] {}", r.map_err(|e| e.to_string()), v[0], v[40]);
    }
    Ok(())
}

fn main() {
    let case = std::env::args().nth(1).unwrap_or_default();
    println!("### {case}");
    let r = match case.as_str() {
        "ptds" => ptds(false),
        "ptds_control" => ptds(true),
        "split" => split(arg(2, 200)),
        "split_uaf" => split_uaf(arg(2, 100)),
        "attn_capture" => attn_capture(),
        "ptds_ctx" => ptds_ctx(),
        "callback" => callback(),
        "partial" => partial(),
        "partial_barriers" => partial_barriers(),
        "attn_views" => attn_views(),
        _ => Err("cases: ptds ptds_control split attn_capture ptds_ctx callback".into()),
    };
    println!("  -> {:?}", r.map_err(|e| e.to_string()));
}
