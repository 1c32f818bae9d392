//! Audit 2026-11-27e, GPU cases. Safe code only. `e_gpu <case> [arg]`; `run_gpu.sh` runs each
//! in its own process under `timeout`.
#![forbid(unsafe_code)]

use std::io::Write;
use std::panic::AssertUnwindSafe;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use e_kernels::{cluster_exit_sync, dyn_split, elect_divergent, fill, plain_cluster_pdl, spin_flag};
use ferrocuda::{Context, DeviceBuffer, Event, LaunchConfig, SchedulePolicy, Stream};
use ferrocuda_kernels::attention::{self, Attention, Layout};
use ferrocuda_kernels::gemm::{self, GemmEngine, GemmEpilogue, GemmShape};
use ferrocuda_kernels::rows::{self, AdamW, Rows};
use half::bf16;

type R<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn arg(i: usize, default: u64) -> u64 {
    std::env::args().nth(i).and_then(|a| a.parse().ok()).unwrap_or(default)
}

fn say(s: impl AsRef<str>) {
    println!("{}", s.as_ref());
    std::io::stdout().flush().ok();
}

fn e<T>(r: Result<T, impl std::fmt::Display>) -> String {
    match r {
        Ok(_) => "Ok".into(),
        Err(e) => format!("Err({e})"),
    }
}

/// Runs `f` on a helper thread; if it has not returned after `secs`, says HUNG and ends the
/// process (the script's `timeout` kills it if the exit itself hangs).
fn bounded<T: Send + 'static>(label: &str, secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let t0 = Instant::now();
    std::thread::spawn(move || {
        let v = f();
        tx.send(v).ok();
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(v) => {
            say(format!("  [{label}] returned after {:?}", t0.elapsed()));
            v
        }
        Err(_) => {
            say(format!("  [{label}] HUNG: no return after {secs} s"));
            std::process::exit(3);
        }
    }
}

fn bf(n: usize, seed: u32) -> Vec<bf16> {
    (0..n).map(|i| bf16::from_f32((((i as u32).wrapping_mul(2654435761).wrapping_add(seed) >> 20) as f32 / 4096.0) - 0.5)).collect()
}
fn fl(n: usize, seed: u32) -> Vec<f32> {
    (0..n).map(|i| (((i as u32).wrapping_mul(2654435761).wrapping_add(seed) >> 20) as f32 / 4096.0) - 0.5).collect()
}
fn maxdiff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| if x.is_nan() && y.is_nan() { 0.0 } else { (x - y).abs() })
        .fold(0f32, |m, d| if d.is_nan() { f32::INFINITY } else { m.max(d) })
}
fn tof(v: &[bf16]) -> Vec<f32> {
    v.iter().map(|x| x.to_f32()).collect()
}

/// A kernel that never ends on `s`, then `synchronize_timeout`. Returns the flag buffer.
fn start_hang(ctx: &Context, s: &Stream) -> R<DeviceBuffer<u32>> {
    let mut flag = DeviceBuffer::<u32>::zeroed(ctx, 1)?;
    spin_flag::launch(s, LaunchConfig::new(1u32, 32u32), &mut flag)?;
    let t = Instant::now();
    let r = s.synchronize_timeout(Duration::from_millis(300));
    say(format!("  synchronize_timeout(300 ms) on the spinning stream: {} after {:?}", e(r), t.elapsed()));
    Ok(flag)
}

/// E-T1: after a reported timeout of a kernel on a *blocking* stream (`Stream::new`), calls
/// that are not explicit waits must not hang.
fn to_blocking() -> R {
    let ctx = Context::primary(0)?;
    let s = Stream::new(&ctx)?;
    let flag = start_hang(&ctx, &s)?;
    let c = ctx.clone();
    let z = bounded("DeviceBuffer::zeroed(&ctx, 16)", 5, move || DeviceBuffer::<u32>::zeroed(&c, 16).map(|_| ()).map_err(|e| e.to_string()));
    say(format!("    -> {z:?}"));
    let c = ctx.clone();
    let r = bounded("Stream::non_blocking + fill + its synchronize", 5, move || -> Result<(), String> {
        let s2 = Stream::non_blocking(&c).map_err(|e| e.to_string())?;
        let mut b = DeviceBuffer::<u32>::zeroed_async(&s2, 64).map_err(|e| e.to_string())?;
        fill::launch(&s2, LaunchConfig::for_elements(64, 64), 7, &mut b).map_err(|e| e.to_string())?;
        s2.synchronize().map_err(|e| e.to_string())
    });
    say(format!("    -> {r:?}"));
    bounded("drop the spinner's buffer", 5, move || drop(flag));
    bounded("drop the spinning stream and the context", 5, move || {
        drop(s);
        drop(ctx);
    });
    say(format!("  leaked_releases = {}", ferrocuda::leaked_releases()));
    say("  exit");
    Ok(())
}

/// E-T2: after a reported timeout (non-blocking stream): the first use of another crate's
/// kernels (ferrocuda-kernels: its module loads now) on another stream; a GEMM engine made
/// before the timeout, used and dropped after it (cuBLAS/cuBLASLt handle destruction).
fn to_modload() -> R {
    let ctx = Context::primary(0)?;
    let s = Stream::non_blocking(&ctx)?;
    let s3 = Stream::non_blocking(&ctx)?;
    let engine = GemmEngine::new(&s3)?;
    let (a, b) = (DeviceBuffer::from_slice(&ctx, &fl(64 * 64, 1))?, DeviceBuffer::from_slice(&ctx, &fl(64 * 64, 2))?);
    let mut c = DeviceBuffer::<f32>::zeroed(&ctx, 64 * 64)?;
    gemm::gemm(&engine, &a, &b, &mut c, GemmShape::new(64, 64, 64), GemmEpilogue::None, 1.0, 0.0)?;
    s3.synchronize()?;
    let flag = start_hang(&ctx, &s)?;
    let c2 = ctx.clone();
    let r = bounded("first rmsnorm (loads ferrocuda-kernels' module) on another stream + synchronize_timeout(3 s)", 8, move || -> Result<Vec<f32>, String> {
        let c = c2;
        let s2 = Stream::non_blocking(&c).map_err(|e| e.to_string())?;
        let sh = Rows { rows: 4, cols: 64 };
        let x = DeviceBuffer::from_slice(&c, &fl(256, 1)).map_err(|e| e.to_string())?;
        let w = DeviceBuffer::from_slice(&c, &[1.0f32; 64]).map_err(|e| e.to_string())?;
        let mut out = DeviceBuffer::<f32>::zeroed(&c, 256).map_err(|e| e.to_string())?;
        let mut rstd = DeviceBuffer::<f32>::zeroed(&c, 4).map_err(|e| e.to_string())?;
        rows::rmsnorm(&s2, &x, &w, &mut out, &mut rstd, sh, 1e-5).map_err(|e| e.to_string())?;
        s2.synchronize_timeout(Duration::from_secs(3)).map_err(|e| e.to_string())?;
        rstd.to_vec().map_err(|e| e.to_string())
    });
    say(format!("    -> {r:?}"));
    let r = bounded("gemm on the engine made before the timeout + synchronize_timeout(3 s)", 8, move || -> Result<(GemmEngine, Stream), String> {
        gemm::gemm(&engine, &a, &b, &mut c, GemmShape::new(64, 64, 64), GemmEpilogue::None, 1.0, 0.0).map_err(|e| e.to_string())?;
        s3.synchronize_timeout(Duration::from_secs(3)).map_err(|e| e.to_string())?;
        Ok((engine, s3))
    });
    match r {
        Ok((engine, s3)) => {
            say("    -> Ok");
            bounded("drop the GEMM engine (cuBLAS + cuBLASLt handles, workspace)", 8, move || drop(engine));
            drop(s3);
        }
        Err(err) => say(format!("    -> Err({err})")),
    }
    let c2 = ctx.clone();
    let r = bounded("GemmEngine::new after the timeout, then drop it", 8, move || -> Result<(), String> {
        let s4 = Stream::non_blocking(&c2).map_err(|e| e.to_string())?;
        GemmEngine::new(&s4).map(drop).map_err(|e| e.to_string())
    });
    say(format!("    -> {r:?}"));
    bounded("drop everything", 5, move || {
        drop(flag);
        drop(s);
        drop(ctx);
    });
    say(format!("  leaked_releases = {}", ferrocuda::leaked_releases()));
    say("  exit");
    Ok(())
}

/// E-C4: a GEMM engine (cuBLAS, cuBLASLt, a workspace) made inside a capture.
fn capture_engine() -> R {
    let ctx = Context::primary(0)?;
    let s = Stream::non_blocking(&ctx)?;
    let mut made = None;
    let g = s.capture(|st| {
        made = Some(GemmEngine::new(st).map(|_| ()).map_err(|e| e.to_string()));
        Ok(())
    });
    say(format!(
        "  GemmEngine::new inside a capture: {:?}; capture {}",
        made,
        match &g {
            Ok(g) => format!("Ok ({} nodes)", g.node_count().unwrap_or(usize::MAX)),
            Err(e) => format!("Err({e})"),
        }
    ));
    drop(g);
    say(format!(
        "  Context::synchronize = {}; deferred_releases = {}; leaked_releases = {}",
        e(ctx.synchronize()),
        ctx.deferred_releases(),
        ferrocuda::leaked_releases()
    ));
    Ok(())
}

/// E-C1: an event recorded into a capture, then used outside it.
fn capture_event() -> R {
    let ctx = Context::primary(0)?;
    let s = Stream::non_blocking(&ctx)?;
    let other = Stream::non_blocking(&ctx)?;
    let cfg = LaunchConfig::for_elements(1024, 256);
    let mut buf = DeviceBuffer::<u32>::zeroed(&ctx, 1024)?;
    fill::launch(&s, cfg, 1, &mut buf)?;
    s.synchronize()?;
    let ev = Event::new(&ctx)?;
    let start = Event::new(&ctx)?;
    start.record(&other)?;
    let g = s.capture(|s| {
        fill::launch(s, cfg, 5, &mut buf)?;
        ev.record(s)?;
        say(format!("  in capture: ev.is_complete() = {:?}", ev.is_complete().map_err(|e| e.to_string())));
        say(format!("  in capture: ev.synchronize() = {}", e(ev.synchronize())));
        Ok(())
    });
    say(format!(
        "  capture: {}",
        match &g {
            Ok(g) => format!("Ok, {} nodes", g.node_count().unwrap_or(usize::MAX)),
            Err(e) => format!("Err({e})"),
        }
    ));
    say(format!("  after: other.wait_event(&ev) = {}", e(other.wait_event(&ev))));
    let o2 = other.clone();
    let r = bounded("other.synchronize()", 5, move || o2.synchronize().map_err(|e| e.to_string()));
    say(format!("    -> {r:?}"));
    say(format!("  after: ev.is_complete() = {:?}", ev.is_complete().map_err(|e| e.to_string())));
    say(format!("  after: start.elapsed_ms(&ev) = {:?}", start.elapsed_ms(&ev).map_err(|e| e.to_string())));
    let r = bounded("ev.synchronize()", 5, move || ev.synchronize().map_err(|e| e.to_string()));
    say(format!("    -> {r:?}"));
    say(format!("  buf[0] after (captured fill(5) never ran): {:?}", buf.to_vec().map(|v| v[0]).map_err(|e| e.to_string())));
    drop(g);
    say(format!("  Context::synchronize = {}; deferred_releases = {}", e(ctx.synchronize()), ctx.deferred_releases()));
    Ok(())
}

/// E-C2: a capture whose closure launches on a buffer then panics; the buffer dropped after.
fn capture_panic() -> R {
    let ctx = Context::primary(0)?;
    let s = Stream::non_blocking(&ctx)?;
    let cfg = LaunchConfig::for_elements(1 << 20, 256);
    let mut buf = DeviceBuffer::<u32>::zeroed(&ctx, 1 << 20)?;
    fill::launch(&s, cfg, 1, &mut buf)?;
    s.synchronize()?;
    let r = std::panic::catch_unwind(AssertUnwindSafe(|| {
        s.capture(|s| {
            fill::launch(s, cfg, 5, &mut buf)?;
            panic!("audit: panic inside the capture closure");
        })
    }));
    say(format!("  capture + panic: caught = {}", r.is_err()));
    say(format!("  is_capturing after = {:?}", s.is_capturing().map_err(|e| e.to_string())));
    fill::launch(&s, cfg, 9, &mut buf)?;
    s.synchronize()?;
    let v = buf.to_vec()?;
    say(format!("  fill(9) after: {} of {} are 9", v.iter().filter(|&&x| x == 9).count(), v.len()));
    drop(buf);
    let b2 = DeviceBuffer::<u32>::zeroed(&ctx, 1 << 20)?;
    say(format!("  new buffer: {} nonzero", b2.to_vec()?.iter().filter(|&&x| x != 0).count()));
    say(format!(
        "  Context::synchronize = {}; deferred_releases = {}; leaked_releases = {}",
        e(ctx.synchronize()),
        ctx.deferred_releases(),
        ferrocuda::leaked_releases()
    ));
    Ok(())
}

fn graph_result(g: &Result<ferrocuda::Graph, ferrocuda::Error>, inner: &Option<String>) -> String {
    match g {
        Ok(g) => format!("capture Ok ({} nodes), call {}", g.node_count().unwrap_or(usize::MAX), inner.clone().unwrap_or_default()),
        Err(e) => format!("capture Err({e}), call {}", inner.clone().unwrap_or_default()),
    }
}

macro_rules! captured {
    ($name:expr, $s:expr, $ctx:expr, |$st:ident| $call:expr) => {{
        // Warm-up outside the capture (loads the modules), then the same call captured.
        let warm = {
            let $st = &$s;
            $call
        };
        $s.synchronize()?;
        let mut inner: Option<String> = None;
        let g = $s.capture(|$st| {
            inner = Some(match $call {
                Ok(_) => "Ok".to_string(),
                Err(e) => format!("Err({e})"),
            });
            Ok(())
        });
        say(format!("  {:<44} warm-up {:<6} | {}", $name, e(warm), graph_result(&g, &inner)));
        drop(g);
    }};
}

/// E-C3: the kernels library inside `Stream::capture` (each call warmed up first).
fn capture_lib() -> R {
    let ctx = Context::primary(0)?;
    let s = Stream::non_blocking(&ctx)?;
    let sh = Rows { rows: 64, cols: 768 };
    let n = sh.len();
    let x = DeviceBuffer::from_slice(&ctx, &bf(n, 1))?;
    let w = DeviceBuffer::from_slice(&ctx, &bf(768, 2))?;
    let b = DeviceBuffer::from_slice(&ctx, &bf(768, 3))?;
    let mut out = DeviceBuffer::<bf16>::zeroed(&ctx, n)?;
    let (mut mean, mut rstd) = (DeviceBuffer::<f32>::zeroed(&ctx, 64)?, DeviceBuffer::<f32>::zeroed(&ctx, 64)?);
    captured!("rmsnorm bf16 64x768", s, ctx, |st| rows::rmsnorm(st, &x, &w, &mut out, &mut rstd, sh, 1e-5));
    captured!("layernorm bf16 64x768", s, ctx, |st| rows::layernorm(st, &x, &w, &b, &mut out, &mut mean, &mut rstd, sh, 1e-5));
    captured!("softmax bf16 64x768", s, ctx, |st| rows::softmax(st, &x, &mut out, sh));
    let targets = DeviceBuffer::from_slice(&ctx, &(0..64u32).collect::<Vec<_>>())?;
    let mut losses = DeviceBuffer::<f32>::zeroed(&ctx, 64)?;
    captured!("cross_entropy bf16 64x768", s, ctx, |st| rows::cross_entropy(st, &x, &targets, &mut losses, &mut out, sh, 1.0 / 64.0));
    let mut p = DeviceBuffer::from_slice(&ctx, &bf(n, 4))?;
    let (mut m, mut v) = (DeviceBuffer::<f32>::zeroed(&ctx, n)?, DeviceBuffer::<f32>::zeroed(&ctx, n)?);
    let hyper = AdamW { learning_rate: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 };
    captured!("adamw bf16 49152", s, ctx, |st| rows::adamw(st, &mut p, &x, &mut m, &mut v, hyper, 1, 1.0));
    let mut total = DeviceBuffer::<f32>::zeroed(&ctx, 1)?;
    captured!("sum_of_squares bf16", s, ctx, |st| rows::sum_of_squares(st, &x, &mut total));
    let shape = Attention { batch: 1, heads_q: 4, heads_kv: 4, seq_q: 256, seq_kv: 256, head_dim: 64, layout: Layout::Bhsd, causal: true, scale: None };
    let (ql, kl, qr) = (shape.q_len(), shape.kv_len(), shape.q_rows());
    let (q, k, vv) = (DeviceBuffer::from_slice(&ctx, &bf(ql, 5))?, DeviceBuffer::from_slice(&ctx, &bf(kl, 6))?, DeviceBuffer::from_slice(&ctx, &bf(kl, 7))?);
    let mut o = DeviceBuffer::<bf16>::zeroed(&ctx, ql)?;
    let mut lse = DeviceBuffer::<f32>::zeroed(&ctx, qr)?;
    captured!("attention_forward bf16 D64 causal", s, ctx, |st| attention::attention_forward(st, &q, &k, &vv, &mut o, &mut lse, shape));
    let dout = DeviceBuffer::from_slice(&ctx, &bf(ql, 8))?;
    let (mut dq, mut dk, mut dv) = (DeviceBuffer::<bf16>::zeroed(&ctx, ql)?, DeviceBuffer::<bf16>::zeroed(&ctx, kl)?, DeviceBuffer::<bf16>::zeroed(&ctx, kl)?);
    let mut scratch = DeviceBuffer::<f32>::zeroed(&ctx, attention::backward_scratch_len(&shape))?;
    captured!("attention_backward_with_scratch bf16 D64", s, ctx, |st| attention::attention_backward_with_scratch(
        st,
        &q,
        &k,
        &vv,
        &o,
        &dout,
        &lse,
        &mut dq,
        &mut dk,
        &mut dv,
        &mut scratch,
        shape
    ));
    captured!("attention_backward (allocates) bf16 D64", s, ctx, |st| attention::attention_backward(
        st, &q, &k, &vv, &o, &dout, &lse, &mut dq, &mut dk, &mut dv, shape
    ));
    let engine = GemmEngine::new(&s)?;
    let (ga, gb) = (DeviceBuffer::from_slice(&ctx, &bf(256 * 128, 9))?, DeviceBuffer::from_slice(&ctx, &bf(64 * 192 * 4, 10))?);
    let mut gc = DeviceBuffer::<bf16>::zeroed(&ctx, 256 * 192 * 2)?;
    let one = GemmShape::new(256, 192, 128);
    captured!("gemm bf16 256x192x128 (cuBLASLt)", s, ctx, |_st| gemm::gemm(
        &engine,
        &ga,
        &gb.slice(..128 * 192),
        &mut gc.slice_mut(..256 * 192),
        one,
        GemmEpilogue::None,
        1.0,
        0.0
    ));
    let batched = GemmShape { m: 128, n: 192, k: 64, batch: 4, transpose_a: false, transpose_b: false };
    captured!("gemm bf16 batch 4 (cuBLAS strided)", s, ctx, |_st| gemm::gemm(
        &engine,
        &ga.slice(..128 * 64 * 4),
        &gb.slice(..64 * 192 * 4),
        &mut gc.slice_mut(..128 * 192 * 4),
        batched,
        GemmEpilogue::None,
        1.0,
        0.0
    ));
    drop(engine);
    say(format!(
        "  Context::synchronize = {}; deferred_releases = {}; leaked_releases = {}",
        e(ctx.synchronize()),
        ctx.deferred_releases(),
        ferrocuda::leaked_releases()
    ));
    Ok(())
}

/// E-K1: a GEMM on stream B reads W while AdamW on stream A updates W (and the reverse):
/// the library's calls on two streams sharing a buffer must be ordered by the door.
fn gemm_adamw() -> R {
    let ctx = Context::primary(0)?;
    let (sa, sb) = (Stream::non_blocking(&ctx)?, Stream::non_blocking(&ctx)?);
    let engine = GemmEngine::new(&sb)?;
    let (m, k, n) = (8192usize, 4096usize, 4096usize);
    let shape = GemmShape::new(m, n, k);
    let x = DeviceBuffer::from_slice(&ctx, &bf(m * k, 1))?;
    let w0 = bf(k * n, 2);
    let mut w = DeviceBuffer::from_slice(&ctx, &w0)?;
    let grads = DeviceBuffer::from_slice(&ctx, &bf(k * n, 3))?;
    let mut c = DeviceBuffer::<f32>::zeroed(&ctx, m * n)?;
    let (mut mo, mut vo) = (DeviceBuffer::<f32>::zeroed(&ctx, k * n)?, DeviceBuffer::<f32>::zeroed(&ctx, k * n)?);
    let hyper = AdamW { learning_rate: 10.0, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 };
    gemm::gemm(&engine, &x, &w, &mut c, shape, GemmEpilogue::None, 1.0, 0.0)?;
    sb.synchronize()?;
    let c_old = c.to_vec()?;
    rows::adamw(&sa, &mut w, &grads, &mut mo, &mut vo, hyper, 1, 1.0)?;
    sa.synchronize()?;
    gemm::gemm(&engine, &x, &w, &mut c, shape, GemmEpilogue::None, 1.0, 0.0)?;
    sb.synchronize()?;
    let c_new = c.to_vec()?;
    say(format!("  reference: max |C(new W) - C(old W)| = {}", maxdiff(&c_old, &c_new)));
    let (mut bad1, mut bad2) = (0, 0);
    for round in 0..6 {
        // 1: GEMMs (B) read W, then AdamW (A) writes it: C must be C(old W).
        w.copy_from_host(&w0)?;
        mo.fill(0.0)?;
        vo.fill(0.0)?;
        for _ in 0..6 {
            gemm::gemm(&engine, &x, &w, &mut c, shape, GemmEpilogue::None, 1.0, 0.0)?;
        }
        rows::adamw(&sa, &mut w, &grads, &mut mo, &mut vo, hyper, 1, 1.0)?;
        let d1 = maxdiff(&c.to_vec()?, &c_old);
        // 2: AdamW (A) writes W from the old W, then a GEMM (B) reads it: C must be C(new W).
        w.copy_from_host(&w0)?;
        mo.fill(0.0)?;
        vo.fill(0.0)?;
        rows::adamw(&sa, &mut w, &grads, &mut mo, &mut vo, hyper, 1, 1.0)?;
        gemm::gemm(&engine, &x, &w, &mut c, shape, GemmEpilogue::None, 1.0, 0.0)?;
        let d2 = maxdiff(&c.to_vec()?, &c_new);
        if d1 != 0.0 {
            bad1 += 1;
        }
        if d2 != 0.0 {
            bad2 += 1;
        }
        say(format!("  round {round}: read-then-write max diff {d1}; write-then-read max diff {d2}"));
    }
    say(format!("  rounds with a difference: {bad1} (read then write), {bad2} (write then read) of 6"));
    Ok(())
}

fn host_gemm(a: &[f32], b: &[f32], m: usize, n: usize, k: usize) -> Vec<f32> {
    let mut c = vec![0f32; m * n];
    for i in 0..m {
        for p in 0..k {
            let av = a[i * k + p];
            for j in 0..n {
                c[i * n + j] += av * b[p * n + j];
            }
        }
    }
    c
}

/// E-K2: GEMMs through views at odd element offsets, and a misaligned bias.
fn gemm_views() -> R {
    let ctx = Context::primary(0)?;
    let s = Stream::non_blocking(&ctx)?;
    let engine = GemmEngine::new(&s)?;
    let (m, n, k) = (64usize, 96usize, 80usize);
    let shape = GemmShape::new(m, n, k);
    let (a, b) = (fl(m * k + 4, 1), fl(k * n + 4, 2));
    let (ad, bd) = (DeviceBuffer::from_slice(&ctx, &a)?, DeviceBuffer::from_slice(&ctx, &b)?);
    for off in [0usize, 1, 2, 3] {
        let reference = host_gemm(&a[off..off + m * k], &b[off..off + k * n], m, n, k);
        let mut c = DeviceBuffer::from_slice(&ctx, &vec![-7.0f32; m * n + 4])?;
        let r = gemm::gemm(
            &engine,
            &ad.slice(off..off + m * k),
            &bd.slice(off..off + k * n),
            &mut c.slice_mut(off..off + m * n),
            shape,
            GemmEpilogue::None,
            1.0,
            0.0,
        );
        let sync = s.synchronize();
        let cv = c.to_vec()?;
        let outside = cv[..off].iter().chain(&cv[off + m * n..]).filter(|&&x| x != -7.0).count();
        say(format!(
            "  f32 operands at +{off} elements: {} sync {}; max |gpu - host| {}; written outside the view: {outside}",
            e(r),
            e(sync),
            maxdiff(&cv[off..off + m * n], &reference)
        ));
    }
    let (abf, bbf) = (bf(m * k + 8, 3), bf(k * n + 8, 4));
    let (ad, bd) = (DeviceBuffer::from_slice(&ctx, &abf)?, DeviceBuffer::from_slice(&ctx, &bbf)?);
    for off in [0usize, 1, 3] {
        let reference = host_gemm(&tof(&abf[off..off + m * k]), &tof(&bbf[off..off + k * n]), m, n, k);
        let mut c = DeviceBuffer::from_slice(&ctx, &vec![bf16::from_f32(-7.0); m * n + 8])?;
        let r = gemm::gemm(
            &engine,
            &ad.slice(off..off + m * k),
            &bd.slice(off..off + k * n),
            &mut c.slice_mut(off..off + m * n),
            shape,
            GemmEpilogue::None,
            1.0,
            0.0,
        );
        let sync = s.synchronize();
        let cv = tof(&c.to_vec()?);
        let outside = cv[..off].iter().chain(&cv[off + m * n..]).filter(|&&x| x != -7.0).count();
        say(format!(
            "  bf16 operands at +{off} elements: {} sync {}; max |gpu - host| {}; written outside: {outside}",
            e(r),
            e(sync),
            maxdiff(&cv[off..off + m * n], &reference)
        ));
    }
    let bias = DeviceBuffer::from_slice(&ctx, &vec![1.0f32; n + 4])?;
    let mut c = DeviceBuffer::<f32>::zeroed(&ctx, m * n)?;
    let (ad, bd) = (DeviceBuffer::from_slice(&ctx, &a[..m * k])?, DeviceBuffer::from_slice(&ctx, &b[..k * n])?);
    for off in [0usize, 1] {
        let bv = bias.slice(off..off + n);
        let r = gemm::gemm(&engine, &ad, &bd, &mut c, shape, GemmEpilogue::Bias(&bv), 1.0, 0.0);
        say(format!("  f32 bias view at +{off} elements: {} sync {}", e(r), e(s.synchronize())));
    }
    // k = 0 (C = beta * C): C prefilled with NaN, beta = 0.
    for (mm, nn, kk) in [(8usize, 8usize, 0usize), (0, 8, 8), (8, 0, 8)] {
        let sh = GemmShape::new(mm, nn, kk);
        let a0 = DeviceBuffer::<f32>::zeroed(&ctx, mm * kk)?;
        let b0 = DeviceBuffer::<f32>::zeroed(&ctx, kk * nn)?;
        let mut c0 = DeviceBuffer::from_slice(&ctx, &vec![f32::NAN; (mm * nn).max(1)])?;
        let r = gemm::gemm(&engine, &a0, &b0, &mut c0.slice_mut(..mm * nn), sh, GemmEpilogue::None, 1.0, 0.0);
        let sync = s.synchronize();
        let v = c0.to_vec()?;
        say(format!(
            "  m {mm} n {nn} k {kk}, C = NaN, beta 0: {} sync {}; C has {} NaN of {} (BLAS: beta = 0 means C is not read, so 0 NaN)",
            e(r),
            e(sync),
            v[..mm * nn].iter().filter(|x| x.is_nan()).count(),
            mm * nn
        ));
    }
    Ok(())
}

/// E-K3: the row kernels through views at odd element offsets, GPU against the CPU executor.
fn lib_views() -> R {
    let ctx = Context::primary(0)?;
    let s = Stream::non_blocking(&ctx)?;
    let ex = ferrocuda::cpu::CpuExecutor::new();
    // AdamW bf16, n = 1024 (the packed 16-byte path), every operand at +off elements.
    let n = 1024usize;
    let (p0, g0) = (bf(n + 8, 1), bf(n + 8, 2));
    let hyper = AdamW { learning_rate: 1e-2, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.01 };
    for off in [0usize, 1, 3, 4] {
        let (mut pc, mut mc, mut vc) = (p0[off..off + n].to_vec(), vec![0.1f32; n], vec![0.2f32; n]);
        ferrocuda_kernels::cpu::adamw(&ex, &mut pc, &g0[off..off + n], &mut mc, &mut vc, hyper, 3, 0.5)?;
        let mut pd = DeviceBuffer::from_slice(&ctx, &p0)?;
        let gd = DeviceBuffer::from_slice(&ctx, &g0)?;
        let (mut md, mut vd) = (DeviceBuffer::from_slice(&ctx, &vec![0.1f32; n + 8])?, DeviceBuffer::from_slice(&ctx, &vec![0.2f32; n + 8])?);
        let r = rows::adamw(
            &s,
            &mut pd.slice_mut(off..off + n),
            &gd.slice(off..off + n),
            &mut md.slice_mut(off..off + n),
            &mut vd.slice_mut(off..off + n),
            hyper,
            3,
            0.5,
        );
        let sync = s.synchronize();
        let (pv, mv) = (tof(&pd.to_vec()?), md.to_vec()?);
        let outside = (0..off).chain(off + n..n + 8).filter(|&i| pv[i] != p0[i].to_f32() || mv[i] != 0.1).count();
        say(format!(
            "  adamw bf16 n {n} at +{off}: {} sync {}; params max |gpu-cpu| {}; m max |gpu-cpu| {}; changed outside: {outside}",
            e(r),
            e(sync),
            maxdiff(&pv[off..off + n], &tof(&pc)),
            maxdiff(&mv[off..off + n], &mc)
        ));
    }
    // RMSNorm bf16 8 x 768 (packed rows), x and out at +off elements.
    let sh = Rows { rows: 8, cols: 768 };
    let (x0, w0) = (bf(sh.len() + 8, 3), bf(768, 4));
    for off in [0usize, 1, 8] {
        let (mut oc, mut rc) = (vec![bf16::ZERO; sh.len()], vec![0f32; 8]);
        ferrocuda_kernels::cpu::rmsnorm(&ex, &x0[off..off + sh.len()], &w0, &mut oc, &mut rc, sh, 1e-5)?;
        let (xd, wd) = (DeviceBuffer::from_slice(&ctx, &x0)?, DeviceBuffer::from_slice(&ctx, &w0)?);
        let mut od = DeviceBuffer::<bf16>::zeroed(&ctx, sh.len() + 8)?;
        let mut rd = DeviceBuffer::<f32>::zeroed(&ctx, 8)?;
        let r = rows::rmsnorm(&s, &xd.slice(off..off + sh.len()), &wd, &mut od.slice_mut(off..off + sh.len()), &mut rd, sh, 1e-5);
        let sync = s.synchronize();
        let ov = tof(&od.to_vec()?);
        let outside = (0..off).chain(off + sh.len()..sh.len() + 8).filter(|&i| ov[i] != 0.0).count();
        say(format!(
            "  rmsnorm bf16 8x768 at +{off}: {} sync {}; out max |gpu-cpu| {}; rstd max {}; written outside: {outside}",
            e(r),
            e(sync),
            maxdiff(&ov[off..off + sh.len()], &tof(&oc)),
            maxdiff(&rd.to_vec()?, &rc)
        ));
    }
    // Cross-entropy f32 4 x 1000, logits at +off.
    let sh = Rows { rows: 4, cols: 1000 };
    let l0 = fl(sh.len() + 4, 5);
    let t = [3u32, 999, 0, ferrocuda_kernels::IGNORE_TARGET];
    for off in [0usize, 1] {
        let (mut lc, mut dc) = (vec![0f32; 4], vec![0f32; sh.len()]);
        ferrocuda_kernels::cpu::cross_entropy(&ex, &l0[off..off + sh.len()], &t, &mut lc, &mut dc, sh, 0.25)?;
        let (ld, td) = (DeviceBuffer::from_slice(&ctx, &l0)?, DeviceBuffer::from_slice(&ctx, &t)?);
        let (mut lo, mut dd) = (DeviceBuffer::<f32>::zeroed(&ctx, 4)?, DeviceBuffer::<f32>::zeroed(&ctx, sh.len() + 4)?);
        let r = rows::cross_entropy(&s, &ld.slice(off..off + sh.len()), &td, &mut lo, &mut dd.slice_mut(off..off + sh.len()), sh, 0.25);
        let sync = s.synchronize();
        let dv = dd.to_vec()?;
        say(format!(
            "  cross_entropy f32 4x1000 at +{off}: {} sync {}; losses max |gpu-cpu| {}; dlogits max {}",
            e(r),
            e(sync),
            maxdiff(&lo.to_vec()?, &lc),
            maxdiff(&dv[off..off + sh.len()], &dc)
        ));
    }
    Ok(())
}

/// E-K4: two threads run the sm_90 attention forward on two streams, reading the same Q/K/V
/// and writing the two halves of one output (`split_at_mut`).
fn two_thread_attention() -> R {
    let ctx = Context::primary(0)?;
    let (sa, sb) = (Stream::non_blocking(&ctx)?, Stream::non_blocking(&ctx)?);
    let shape = Attention { batch: 1, heads_q: 8, heads_kv: 8, seq_q: 1024, seq_kv: 1024, head_dim: 64, layout: Layout::Bhsd, causal: true, scale: None };
    let (ql, kl, qr) = (shape.q_len(), shape.kv_len(), shape.q_rows());
    let (q, k, v) = (DeviceBuffer::from_slice(&ctx, &bf(ql, 1))?, DeviceBuffer::from_slice(&ctx, &bf(kl, 2))?, DeviceBuffer::from_slice(&ctx, &bf(kl, 3))?);
    let mut oref = DeviceBuffer::<bf16>::zeroed(&ctx, ql)?;
    let mut lref = DeviceBuffer::<f32>::zeroed(&ctx, qr)?;
    attention::attention_forward(&sa, &q, &k, &v, &mut oref, &mut lref, shape)?;
    sa.synchronize()?;
    let oref = oref.to_vec()?;
    let mut bad = 0;
    for round in 0..10 {
        let mut o = DeviceBuffer::<bf16>::zeroed(&ctx, 2 * ql)?;
        let mut l = DeviceBuffer::<f32>::zeroed(&ctx, 2 * qr)?;
        {
            let (mut o1, mut o2) = o.split_at_mut(ql);
            let (mut l1, mut l2) = l.split_at_mut(qr);
            let gate = std::sync::Barrier::new(2);
            std::thread::scope(|sc| -> R {
                let t1 = sc.spawn(|| {
                    gate.wait();
                    attention::attention_forward(&sa, &q, &k, &v, &mut o1, &mut l1, shape).map_err(|e| e.to_string())
                });
                let t2 = sc.spawn(|| {
                    gate.wait();
                    attention::attention_forward(&sb, &q, &k, &v, &mut o2, &mut l2, shape).map_err(|e| e.to_string())
                });
                t1.join().unwrap()?;
                t2.join().unwrap()?;
                Ok(())
            })?;
        }
        let ov = o.to_vec()?;
        let (h1, h2) = (ov[..ql] == oref[..], ov[ql..] == oref[..]);
        if !(h1 && h2) {
            bad += 1;
            say(format!("  round {round}: half 1 equal {h1}, half 2 equal {h2}"));
        }
    }
    say(format!("  rounds with a half differing from the single-stream result: {bad} of 10"));
    Ok(())
}

/// E-X1: buffers of the primary context, stream of a created context, through the kernels
/// library (row kernel, sm_90 attention, GEMM engine).
fn ctx_mismatch_lib() -> R {
    let ctx = Context::primary(0)?;
    let c2 = Context::create(0, SchedulePolicy::Auto)?;
    let s2 = Stream::non_blocking(&c2)?;
    let sh = Rows { rows: 4, cols: 64 };
    let x = DeviceBuffer::from_slice(&ctx, &fl(256, 1))?;
    let w = DeviceBuffer::from_slice(&ctx, &[1.0f32; 64])?;
    let mut out = DeviceBuffer::<f32>::zeroed(&ctx, 256)?;
    let mut rstd = DeviceBuffer::<f32>::zeroed(&ctx, 4)?;
    say(format!("  rmsnorm on the other context's stream: {}", e(rows::rmsnorm(&s2, &x, &w, &mut out, &mut rstd, sh, 1e-5))));
    let shape = Attention { batch: 1, heads_q: 2, heads_kv: 2, seq_q: 256, seq_kv: 256, head_dim: 64, layout: Layout::Bhsd, causal: false, scale: None };
    let (q, k, v) = (
        DeviceBuffer::from_slice(&ctx, &bf(shape.q_len(), 1))?,
        DeviceBuffer::from_slice(&ctx, &bf(shape.kv_len(), 2))?,
        DeviceBuffer::from_slice(&ctx, &bf(shape.kv_len(), 3))?,
    );
    let mut o = DeviceBuffer::<bf16>::zeroed(&ctx, shape.q_len())?;
    let mut l = DeviceBuffer::<f32>::zeroed(&ctx, shape.q_rows())?;
    say(format!("  attention_forward (sm_90 path) on the other context's stream: {}", e(attention::attention_forward(&s2, &q, &k, &v, &mut o, &mut l, shape))));
    let engine = GemmEngine::new(&s2)?;
    let (a, b) = (DeviceBuffer::<f32>::zeroed(&ctx, 64 * 64)?, DeviceBuffer::<f32>::zeroed(&ctx, 64 * 64)?);
    let mut c = DeviceBuffer::<f32>::zeroed(&ctx, 64 * 64)?;
    say(format!("  gemm on the other context's engine: {}", e(gemm::gemm(&engine, &a, &b, &mut c, GemmShape::new(64, 64, 64), GemmEpilogue::None, 1.0, 0.0))));
    say(format!("  s2.synchronize = {}; ctx.synchronize = {}", e(s2.synchronize()), e(ctx.synchronize())));
    drop(engine);
    say(format!("  leaked_releases = {}; deferred = {} / {}", ferrocuda::leaked_releases(), ctx.deferred_releases(), c2.deferred_releases()));
    Ok(())
}

/// E-L1: cluster shapes at launch: 16 (non-portable on H100), 3, cluster + cooperative.
fn cluster_cfg() -> R {
    let ctx = Context::primary(0)?;
    let s = Stream::non_blocking(&ctx)?;
    let mut b = DeviceBuffer::<u32>::zeroed(&ctx, 4096)?;
    for (label, cfg) in [
        ("grid 16, cluster 16", LaunchConfig::new(16u32, 32u32).with_cluster(16u32)),
        ("grid 16, cluster 8", LaunchConfig::new(16u32, 32u32).with_cluster(8u32)),
        ("grid 6, cluster 3", LaunchConfig::new(6u32, 32u32).with_cluster(3u32)),
        ("grid 4, cluster 2, cooperative", LaunchConfig::new(4u32, 32u32).with_cluster(2u32).cooperative()),
        ("grid 0", LaunchConfig::new(0u32, 32u32)),
        ("block 0", LaunchConfig::new(1u32, 0u32)),
    ] {
        let r = fill::launch(&s, cfg, 3, &mut b);
        say(format!("  fill, {label}: launch {} sync {}", e(r), e(s.synchronize_timeout(Duration::from_secs(3)))));
    }
    let mut o = DeviceBuffer::<u32>::zeroed(&ctx, 64)?;
    let r = cluster_exit_sync::launch(&s, LaunchConfig::new(2u32, 32u32).cooperative(), 32, &mut o);
    say(format!(
        "  cluster_exit_sync (cluster_dims(2)), cooperative grid 2: launch {} sync {} out[0] {:?}",
        e(r),
        e(s.synchronize_timeout(Duration::from_secs(3))),
        o.to_vec().map(|v| v[0])
    ));
    Ok(())
}

/// E-L2: a cooperative grid that fits without dynamic shared memory and not with it.
fn coop_shared() -> R {
    let ctx = Context::primary(0)?;
    let s = Stream::non_blocking(&ctx)?;
    let sms = ctx.device().multiprocessor_count()?;
    let f = dyn_split::function(&ctx)?;
    f.set_max_dynamic_shared_bytes(200 * 1024)?;
    for (grid, shared) in [(sms, 64u32), (2 * sms, 64), (2 * sms, 150 * 1024), (sms + 1, 150 * 1024)] {
        let mut o = DeviceBuffer::<u32>::zeroed(&ctx, (grid * 1024) as usize)?;
        let cfg = LaunchConfig::new(grid, 1024u32).with_shared_bytes(shared).cooperative();
        let r = dyn_split::launch(&s, cfg, 4, &mut o);
        say(format!(
            "  cooperative grid {grid} x 1024, dynamic shared {shared} B ({sms} SMs): launch {} sync {}",
            e(r),
            e(s.synchronize_timeout(Duration::from_secs(3)))
        ));
    }
    Ok(())
}

fn show(v: &[u32]) -> String {
    v.iter().map(|&x| if x == u32::MAX { "-".to_string() } else { x.to_string() }).collect::<Vec<_>>().join("")
}

/// E-G1: `warpgroup::elect_one` (safe) with part of the warp absent.
fn elect(mode: u32) -> R {
    let ctx = Context::primary(0)?;
    let s = Stream::non_blocking(&ctx)?;
    if mode == 4 {
        let mut out = DeviceBuffer::from_slice(&ctx, &[u32::MAX; 32])?;
        let r = e_kernels::shuffle_divergent::launch(&s, LaunchConfig::new(1u32, 32u32), &mut out);
        let sync = s.synchronize_timeout(Duration::from_secs(3));
        say(format!("  control shuffle_divergent: launch {} sync {}", e(r), e(sync)));
        return Ok(());
    }
    let threads = if mode == 3 { 48u32 } else { 32 };
    let mut out = DeviceBuffer::from_slice(&ctx, &vec![u32::MAX; threads as usize])?;
    let r = elect_divergent::launch(&s, LaunchConfig::new(1u32, threads), mode, &mut out);
    let sync = s.synchronize_timeout(Duration::from_secs(3));
    say(format!("  elect_divergent mode {mode}, block {threads}: launch {} sync {}", e(r), e(sync)));
    match out.to_vec() {
        Ok(v) => say(format!("  out (1 elected, 0 not, 2 other branch, - returned): {}", show(&v))),
        Err(err) => say(format!("  to_vec: Err({err})")),
    }
    Ok(())
}

/// E-G2: `cluster::sync()` (safe) where some threads of each block returned first.
fn cluster_exit(live: u32) -> R {
    let ctx = Context::primary(0)?;
    let s = Stream::non_blocking(&ctx)?;
    let mut out = DeviceBuffer::from_slice(&ctx, &[u32::MAX; 64])?;
    let r = cluster_exit_sync::launch(&s, LaunchConfig::new(2u32, 32u32), live, &mut out);
    let sync = s.synchronize_timeout(Duration::from_secs(3));
    say(format!("  cluster_exit_sync live {live}: launch {} sync {}", e(r), e(sync)));
    match out.to_vec() {
        Ok(v) => say(format!("  out: {:?}", &v.iter().map(|&x| x as i64 - if x == u32::MAX { u32::MAX as i64 + 1 } else { 0 }).collect::<Vec<_>>()[..])),
        Err(err) => say(format!("  to_vec: Err({err})")),
    }
    Ok(())
}

/// E-G3: cluster and grid-dependency calls in a plain launch; dynamic shared memory split at
/// an unaligned point then read as vectors.
fn plain_and_split() -> R {
    let ctx = Context::primary(0)?;
    let s = Stream::non_blocking(&ctx)?;
    let mut out = DeviceBuffer::from_slice(&ctx, &[u32::MAX; 64])?;
    let r = plain_cluster_pdl::launch(&s, LaunchConfig::new(2u32, 32u32), &mut out);
    say(format!(
        "  plain_cluster_pdl: {} sync {}; out[0] {:?} out[32] {:?}",
        e(r),
        e(s.synchronize_timeout(Duration::from_secs(3))),
        out.to_vec()?[0],
        out.to_vec()?[32]
    ));
    for mid in [4u32, 2] {
        let mut o = DeviceBuffer::from_slice(&ctx, &[u32::MAX; 32])?;
        let r = dyn_split::launch(&s, LaunchConfig::new(1u32, 32u32).with_shared_bytes(64), mid, &mut o);
        let sync = s.synchronize_timeout(Duration::from_secs(3));
        say(format!("  dyn_split mid {mid}: launch {} sync {}; out[0] {:?}", e(r), e(sync), o.to_vec().map(|v| v[0]).map_err(|e| e.to_string())));
    }
    Ok(())
}

struct Bomb;
impl Drop for Bomb {
    fn drop(&mut self) {
        panic!("audit: the panic payload's destructor panics");
    }
}

/// E-H1: host callbacks that panic (mode 0), or whose panic payload panics when dropped (1).
fn callback_panic(mode: u32) -> R {
    let ctx = Context::primary(0)?;
    let s = Stream::non_blocking(&ctx)?;
    if mode == 0 {
        s.launch_host_fn(|| panic!("audit: a host callback panics"))?;
    } else {
        s.launch_host_fn(|| std::panic::panic_any(Bomb))?;
    }
    let r = s.synchronize_timeout(Duration::from_secs(3));
    say(format!("  callback mode {mode}: synchronize {}", e(r)));
    let mut b = DeviceBuffer::<u32>::zeroed(&ctx, 16)?;
    fill::launch(&s, LaunchConfig::new(1u32, 16u32), 4, &mut b)?;
    say(format!("  stream after: {:?}", b.to_vec()?[0]));
    Ok(())
}

/// E-X2: a cudarc slice of the primary context lent by `borrowed::cudarc::scope` with a home
/// stream of another cudarc context on the same GPU (the docs: "a stream of the slice's
/// context"), then written by a ferrocuda launch on that home stream. mode 0: control (home
/// stream of the slice's context, launch on the other context's stream); mode 1: the case.
fn cudarc_ctx(mode: u32) -> R {
    use cudarc::driver::CudaContext;
    use ferrocuda::borrowed;
    let n = 1usize << 20;
    let cfg = LaunchConfig::for_elements(n, 256);
    let a = CudaContext::new(0)?;
    let b = CudaContext::new_non_primary(0, 0)?;
    let (sa, sb) = (a.default_stream(), b.new_stream()?);
    let mut x = sa.alloc_zeros::<u32>(n)?;
    sa.synchronize()?;
    let fb = borrowed::cudarc::context(&b)?;
    let fsb = borrowed::cudarc::stream_in(&fb, &sb)?;
    say(format!(
        "  slice {:#x} in cudarc's primary context; home stream: {}",
        {
            use cudarc::driver::DevicePtr;
            let (p, _g) = x.device_ptr(&sa);
            p
        },
        if mode == 0 { "the slice's context (control)" } else { "the other context's stream" }
    ));
    let home = if mode == 0 { &sa } else { &sb };
    let r = borrowed::cudarc::scope(|sc| -> Result<(), String> {
        let mut v = sc.slice_mut(&mut x, home).map_err(|e| format!("lend: {e}"))?;
        fill::launch(&fsb, cfg, 7, &mut v).map_err(|e| format!("launch: {e}"))?;
        fsb.synchronize().map_err(|e| format!("synchronize: {e}"))
    });
    say(format!("  scope: {r:?}"));
    let host = sa.clone_dtoh(&x);
    say(format!(
        "  cudarc reads the slice back: {}",
        match host {
            Ok(v) => format!("{} of {n} are 7", v.iter().filter(|&&y| y == 7).count()),
            Err(e) => format!("Err({e:?})"),
        }
    ));
    Ok(())
}

/// E-M1: `#[kernel]` attribute arguments at their edges (crate `e-badattr`), on the GPU.
fn badattr() -> R {
    use e_badattr::{cd0, cd2x2x4, cd16, lb0, lb128_min64, lb4096};
    let ctx = Context::primary(0)?;
    let s = Stream::non_blocking(&ctx)?;
    let sums = |b: &DeviceBuffer<u32>| b.to_vec().map(|v| v.iter().sum::<u32>()).map_err(|e| e.to_string());
    for block in [32u32, 1024] {
        let cfg = LaunchConfig::new(16u32, block);
        let n = 16 * block as usize;
        let mut o = DeviceBuffer::<u32>::zeroed(&ctx, n)?;
        let r = lb0::launch(&s, cfg, &mut o);
        say(format!("  launch_bounds(0), block {block}: {} sync {}; ones {:?}", e(r), e(s.synchronize_timeout(Duration::from_secs(3))), sums(&o)));
        let mut o = DeviceBuffer::<u32>::zeroed(&ctx, n)?;
        let r = lb4096::launch(&s, cfg, &mut o);
        say(format!("  launch_bounds(4096), block {block}: {} sync {}; ones {:?}", e(r), e(s.synchronize_timeout(Duration::from_secs(3))), sums(&o)));
        let mut o = DeviceBuffer::<u32>::zeroed(&ctx, n)?;
        let r = lb128_min64::launch(&s, cfg, &mut o);
        say(format!("  launch_bounds(128, 64), block {block}: {} sync {}; ones {:?}", e(r), e(s.synchronize_timeout(Duration::from_secs(3))), sums(&o)));
    }
    say(format!("  lb0 attributes: {:?}", lb0::function(&ctx).map(|f| format!("{f:?}")).map_err(|e| e.to_string())));
    let cfg = LaunchConfig::new(16u32, 32u32);
    let mut o = DeviceBuffer::<u32>::zeroed(&ctx, 512)?;
    let r = cd0::launch(&s, cfg, &mut o);
    say(format!("  cluster_dims(0), grid 16: {} sync {}; ones {:?}", e(r), e(s.synchronize_timeout(Duration::from_secs(3))), sums(&o)));
    let mut o = DeviceBuffer::<u32>::zeroed(&ctx, 512)?;
    let r = cd16::launch(&s, cfg, &mut o);
    say(format!("  cluster_dims(16), grid 16: {} sync {}; ones {:?}", e(r), e(s.synchronize_timeout(Duration::from_secs(3))), sums(&o)));
    let mut o = DeviceBuffer::<u32>::zeroed(&ctx, 512)?;
    let cfg3 = LaunchConfig::new(ferrocuda::Dim3::new(2, 2, 4), ferrocuda::Dim3::new(32, 1, 1));
    let r = cd2x2x4::launch(&s, cfg3, &mut o);
    say(format!("  cluster_dims(2, 2, 4), grid (2, 2, 4): {} sync {}; ones {:?}", e(r), e(s.synchronize_timeout(Duration::from_secs(3))), sums(&o)));
    Ok(())
}

/// E1 follow-up (not run in the audit's GPU call): the cross-context lend of `cudarc_ctx 1`
/// without a synchronize inside the scope. A ~`ms` ms kernel on the other context's stream
/// writes the lent slice; after the scope, cudarc reads the slice on its own stream, frees it
/// and allocates again: nothing orders cudarc's stream after the kernel. mode 0: control (a
/// home stream and a launch stream of the slice's own context).
fn cudarc_uaf(mode: u32, ms: u64) -> R {
    use cudarc::driver::CudaContext;
    use e_kernels::spin_fill;
    use ferrocuda::borrowed;
    let n = 1usize << 22;
    let cfg = LaunchConfig::for_elements(n, 256);
    let a = CudaContext::new(0)?;
    let b = CudaContext::new_non_primary(0, 0)?;
    let (sa, sb) = (a.new_stream()?, b.new_stream()?);
    let (fa, fb) = (borrowed::cudarc::context(&a)?, borrowed::cudarc::context(&b)?);
    let (fsa, fsb) = (borrowed::cudarc::stream_in(&fa, &sa)?, borrowed::cudarc::stream_in(&fb, &sb)?);
    let (home, launch_on, fctx) = if mode == 0 { (&sa, &fsa, &fa) } else { (&sb, &fsb, &fb) };
    // Calibrate spin_fill to about `ms` ms in the launch stream's context.
    let mut probe = DeviceBuffer::<u32>::zeroed(fctx, n)?;
    spin_fill::launch(launch_on, cfg, 1000, 1, &mut probe)?;
    launch_on.synchronize()?;
    let t = Instant::now();
    spin_fill::launch(launch_on, cfg, 200_000, 1, &mut probe)?;
    launch_on.synchronize()?;
    let iters = (200_000.0 * ms as f64 / (t.elapsed().as_secs_f64() * 1e3).max(0.01)).min(u32::MAX as f64) as u32;
    drop(probe);
    let mut x = sa.alloc_zeros::<u32>(n)?;
    sa.synchronize()?;
    let t0 = Instant::now();
    let r = borrowed::cudarc::scope(|sc| -> Result<(), String> {
        let mut v = sc.slice_mut(&mut x, home).map_err(|e| format!("lend: {e}"))?;
        spin_fill::launch(launch_on, cfg, iters, 7, &mut v).map_err(|e| format!("launch: {e}"))
    });
    say(format!("  mode {mode}: scope {r:?} returned at {:?} (kernel ~{ms} ms, {iters} iterations)", t0.elapsed()));
    let seen = sa.clone_dtoh(&x)?;
    say(format!(
        "  cudarc's read on its stream after the scope (at {:?}): {} of {n} are 7 (ordered: all)",
        t0.elapsed(),
        seen.iter().filter(|&&y| y == 7).count()
    ));
    // Let the scope's kernel be running when the memory is freed and reused (mode 1).
    let mut z = sa.alloc_zeros::<u32>(n)?;
    let r2 = borrowed::cudarc::scope(|sc| -> Result<(), String> {
        let mut v = sc.slice_mut(&mut z, home).map_err(|e| format!("lend: {e}"))?;
        spin_fill::launch(launch_on, cfg, iters, 9, &mut v).map_err(|e| format!("launch: {e}"))
    });
    let old = {
        use cudarc::driver::DevicePtr;
        let (p, _g) = z.device_ptr(&sa);
        p
    };
    drop(z);
    let fresh = sa.alloc_zeros::<u32>(n)?;
    let new = {
        use cudarc::driver::DevicePtr;
        let (p, _g) = fresh.device_ptr(&sa);
        p
    };
    sa.synchronize()?;
    std::thread::sleep(Duration::from_millis(2 * ms + 200));
    let late = sa.clone_dtoh(&fresh)?;
    say(format!(
        "  second scope {r2:?}; freed {old:#x}, new cudarc allocation at {new:#x}; after the kernel: {} of {n} elements of the NEW allocation are 9 (ordered: 0)",
        late.iter().filter(|&&y| y == 9).count()
    ));
    Ok(())
}

/// E2 follow-up: which step of `to_modload`'s first use hangs after a reported timeout.
fn to_modload_steps() -> R {
    let ctx = Context::primary(0)?;
    let s = Stream::non_blocking(&ctx)?;
    let flag = start_hang(&ctx, &s)?;
    let c = ctx.clone();
    let s2 = bounded("Stream::non_blocking", 5, move || Stream::non_blocking(&c).map_err(|e| e.to_string()))?;
    let c = ctx.clone();
    let x = bounded("DeviceBuffer::from_slice (synchronous upload)", 5, move || DeviceBuffer::from_slice(&c, &fl(256, 1)).map_err(|e| e.to_string()))?;
    let c = ctx.clone();
    let w = bounded("DeviceBuffer::from_slice again", 5, move || DeviceBuffer::from_slice(&c, &[1.0f32; 64]).map_err(|e| e.to_string()))?;
    let c = ctx.clone();
    let (out, rstd) = bounded("two DeviceBuffer::zeroed", 5, move || -> Result<_, String> {
        Ok((DeviceBuffer::<f32>::zeroed(&c, 256).map_err(|e| e.to_string())?, DeviceBuffer::<f32>::zeroed(&c, 4).map_err(|e| e.to_string())?))
    })?;
    let c = ctx.clone();
    let r = bounded("ferrocuda-kernels' module: Context::embedded_image (the load alone)", 8, move || {
        c.embedded_image(&ferrocuda_kernels_device::KERNELS).map(|_| ()).map_err(|e| e.to_string())
    });
    say(format!("    -> {r:?}"));
    let s3 = s2.clone();
    let r = bounded("rows::rmsnorm (first launch of the module's kernel)", 8, move || -> Result<(), String> {
        let (mut out, mut rstd) = (out, rstd);
        rows::rmsnorm(&s3, &x, &w, &mut out, &mut rstd, Rows { rows: 4, cols: 64 }, 1e-5).map_err(|e| e.to_string())
    });
    say(format!("    -> {r:?}"));
    let r = bounded("synchronize_timeout(3 s) of that stream", 8, move || s2.synchronize_timeout(Duration::from_secs(3)).map_err(|e| e.to_string()));
    say(format!("    -> {r:?}"));
    drop(flag);
    say("  exit");
    Ok(())
}

/// E8 follow-up (not run): `Stream::will_use_for` on a view of a split buffer (a shared record)
/// whose `work` queues a library call reading the same view. The docs: "`work` must not declare
/// the same buffers again ...: that would wait for itself". A watchdog ends the process after 5 s.
fn will_use_self() -> R {
    let ctx = Context::primary(0)?;
    let s = Stream::non_blocking(&ctx)?;
    let mut buf = DeviceBuffer::<u32>::zeroed(&ctx, 2048)?;
    let mut total = DeviceBuffer::<f32>::zeroed(&ctx, 1)?;
    let (l, _r) = buf.split_at_mut(1024);
    let (tx, rx) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        if rx.recv_timeout(Duration::from_secs(5)).is_err() {
            say("  HUNG: will_use_for did not return after 5 s (the thread waits for its own lock)");
            std::process::exit(3);
        }
    });
    let acc = [ferrocuda::BufferAccess::read(&l)];
    let r = s.will_use_for(&acc, || rows::sum_of_squares::<f32>(&s, &l.slice(..).cast::<f32>()?, &mut total));
    tx.send(()).ok();
    say(format!("  will_use_for(read l, || sum_of_squares(l)): {:?}", r.map(|inner| inner.map_err(|e| e.to_string())).map_err(|e| e.to_string())));
    Ok(())
}

fn main() {
    let case = std::env::args().nth(1).unwrap_or_default();
    say(format!("== {case}"));
    let r = match case.as_str() {
        "to_blocking" => to_blocking(),
        "to_modload" => to_modload(),
        "capture_event" => capture_event(),
        "capture_panic" => capture_panic(),
        "capture_lib" => capture_lib(),
        "gemm_adamw" => gemm_adamw(),
        "gemm_views" => gemm_views(),
        "lib_views" => lib_views(),
        "two_thread_attention" => two_thread_attention(),
        "ctx_mismatch_lib" => ctx_mismatch_lib(),
        "cluster_cfg" => cluster_cfg(),
        "coop_shared" => coop_shared(),
        "elect" => elect(arg(2, 0) as u32),
        "cluster_exit" => cluster_exit(arg(2, 16) as u32),
        "plain_and_split" => plain_and_split(),
        "callback_panic" => callback_panic(arg(2, 0) as u32),
        "cudarc_ctx" => cudarc_ctx(arg(2, 1) as u32),
        "badattr" => badattr(),
        "capture_engine" => capture_engine(),
        "cudarc_uaf" => cudarc_uaf(arg(2, 1) as u32, arg(3, 300)),
        "to_modload_steps" => to_modload_steps(),
        "will_use_self" => will_use_self(),
        _ => Err(format!("unknown case {case:?}").into()),
    };
    match r {
        Ok(()) => say("  (case returned Ok)"),
        Err(err) => {
            say(format!("  case error: {err}"));
            if err.to_string().contains("no CUDA") || err.to_string().contains("no GPU") {
                std::process::exit(if std::env::var("REQUIRE_GPU").is_ok() { 1 } else { 0 });
            }
        }
    }
}
