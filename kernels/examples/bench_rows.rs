//! The row kernels beside their CUDA C++ twins (issue 31: every row kernel >= 0.97x the same
//! algorithm in CUDA C++), in one process on GPU 0. The twins (`kernels/bench/rows_twins.cu`,
//! the same algorithm, symbol and parameter layout) are built by nvcc into a cubin:
//!
//! ```text
//! nvcc -cubin -O3 -arch=sm_90 kernels/bench/rows_twins.cu -o DIR/rows_twins.cubin
//! cargo run --release -p ferrocuda-kernels --example bench_rows -- DIR/rows_twins.cubin
//! ```
//!
//! Both sides are launched through the Rust kernel's typed launcher (`launch`, and `launch_in`
//! on the twin's module) with the same buffers and the launch configurations the library's call
//! makes (every launch of the call: the norm backward's column sums too). Before any timing,
//! each op's outputs from both sides are checked against the same reference: the library's CPU
//! executor (`ferrocuda_kernels::cpu`, itself tested against `f64`) on the first rows (the whole
//! input for the global norm, `f64` sums for the weight gradients); a line `check <op>: ours
//! max err .. twin max err .. ok|FAIL`. Then 3 warm-ups each and 7 rounds of 20 back-to-back calls
//! between events, ours and the twin alternating; the median round, per call, in µs. The lines
//! that `scripts/gpu-run/rows_table.py` reads are tab-separated: `pair`, op, shape, ours µs,
//! twin µs, bytes; `lib`, op, shape, µs (the library's own call, for widths where it picks
//! between two kernels). bf16 unless said. A benchmark, not a test: a FAIL check is reported
//! and its op is still timed; the exit status is 1 if any check failed.

use std::error::Error;

use ferrocuda_device::cpu::CpuExecutor;
use ferrocuda_host::{Context, DeviceBuffer, Event, JitOptions, LaunchConfig, Module, Stream};
use ferrocuda_kernels::rows::{self, AdamW, Rope, Rows};
use ferrocuda_kernels::{bf16, cpu};
use ferrocuda_kernels_device::{AdamWStep, RopeShape, for_bf16 as kb, for_f32 as kf, packed};

type R<T = ()> = Result<T, Box<dyn Error>>;
type Launch<'a> = Box<dyn FnMut(Option<&Module>) -> ferrocuda_host::Result<()> + 'a>;

/// Rows of each row op the checks compare with the CPU executor.
const CHECK_ROWS: usize = 3;
const ROUNDS: usize = 7;
const ITERS: usize = 20;

struct Env {
    context: Context,
    stream: Stream,
    twin: Module,
    cpu: CpuExecutor,
    failed: std::cell::Cell<bool>,
}

fn values(n: usize, seed: u32, scale: f32) -> Vec<f32> {
    (0..n).map(|i| ((((i as u32).wrapping_mul(2654435761).wrapping_add(seed.wrapping_mul(40503))) >> 16) as f32 / 65536.0 * 2.0 - 1.0) * scale).collect()
}

fn bf(v: &[f32]) -> Vec<bf16> {
    v.iter().map(|&x| bf16::from_f32(x)).collect()
}

fn widen(v: &[bf16]) -> Vec<f32> {
    v.iter().map(|x| x.to_f32()).collect()
}

impl Env {
    fn dev<T: ferrocuda_host::Pod>(&self, v: &[T]) -> R<DeviceBuffer<T>> {
        Ok(DeviceBuffer::from_slice(&self.context, v)?)
    }

    fn zeros<T: ferrocuda_host::Pod>(&self, n: usize) -> R<DeviceBuffer<T>> {
        Ok(DeviceBuffer::zeroed(&self.context, n)?)
    }

    /// `check <op> <what>: ...`: the largest error of each side against `want` in units of
    /// `atol + rtol |want|` (ok at most 1).
    #[allow(clippy::too_many_arguments)]
    fn compare(&self, op: &str, what: &str, ours: &[f32], twin: &[f32], want: &[f32], rtol: f32, atol: f32) {
        let worst = |got: &[f32]| {
            got.iter().zip(want).fold(0.0f32, |m, (&g, &w)| {
                let e = (g - w).abs() / (atol + rtol * w.abs());
                if e.is_nan() || g.is_nan() != w.is_nan() { f32::INFINITY } else { m.max(e) }
            })
        };
        let (o, t) = (worst(&ours[..want.len()]), worst(&twin[..want.len()]));
        let ok = o <= 1.0 && t <= 1.0;
        self.failed.set(self.failed.get() || !ok);
        println!("check {op} {what}: ours {o:.3} twin {t:.3} (of the tolerance) {}", if ok { "ok" } else { "FAIL" });
    }

    /// Times `f(None)` (ours) and `f(Some(twin))` alternating; prints the `pair` line.
    fn pair(&self, op: &str, shape: &str, bytes: f64, f: &mut Launch<'_>) -> R {
        for _ in 0..3 {
            f(None)?;
            f(Some(&self.twin))?;
        }
        let (mut ours, mut twin) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            ours.push(self.round(f, None)?);
            twin.push(self.round(f, Some(&self.twin))?);
        }
        let (o, t) = (median(ours), median(twin));
        println!("pair\t{op}\t{shape}\t{o:.2}\t{t:.2}\t{bytes:.0}\t# twin/ours {:.3} (>1: ours faster), ours {:.0} GB/s", t / o, bytes / (o * 1e-6) / 1e9);
        Ok(())
    }

    /// Times the library's call alone; prints the `lib` line.
    fn lib(&self, op: &str, shape: &str, mut f: impl FnMut() -> Result<(), ferrocuda_kernels::KernelsError>) -> R {
        for _ in 0..3 {
            f()?;
        }
        let mut times = Vec::new();
        for _ in 0..ROUNDS {
            let (start, end) = (Event::new(&self.context)?, Event::new(&self.context)?);
            start.record(&self.stream)?;
            for _ in 0..ITERS {
                f()?;
            }
            end.record(&self.stream)?;
            end.synchronize()?;
            times.push(start.elapsed_ms(&end)? as f64 * 1e3 / ITERS as f64);
        }
        println!("lib\t{op}\t{shape}\t{:.2}", median(times));
        Ok(())
    }

    fn round(&self, f: &mut Launch<'_>, module: Option<&Module>) -> R<f64> {
        let (start, end) = (Event::new(&self.context)?, Event::new(&self.context)?);
        start.record(&self.stream)?;
        for _ in 0..ITERS {
            f(module)?;
        }
        end.record(&self.stream)?;
        end.synchronize()?;
        Ok(start.elapsed_ms(&end)? as f64 * 1e3 / ITERS as f64)
    }
}

/// One candidate of [`Env::candidates`]: a label and its launch (the twin is `None` as the
/// module argument of the first launch, see there).
type Candidate<'a> = (&'a str, Box<dyn FnMut() -> ferrocuda_host::Result<()> + 'a>);

impl Env {
    /// Times the twin (`twin(Some(module))`) and each candidate alternating, `ROUNDS` rounds of
    /// `ITERS` calls, `repeats` times over; prints one `cand` line per candidate and repeat:
    /// op, shape, candidate, its median µs, the twin's median µs in the same rounds, twin/candidate.
    fn candidates(&self, op: &str, shape: &str, repeats: usize, twin: &mut Launch<'_>, list: &mut [Candidate<'_>]) -> R {
        for _ in 0..3 {
            twin(Some(&self.twin))?;
            for (_, f) in list.iter_mut() {
                f()?;
            }
        }
        for rep in 0..repeats {
            let mut twin_times = Vec::new();
            let mut times = vec![Vec::new(); list.len()];
            for _ in 0..ROUNDS {
                twin_times.push(self.round(twin, Some(&self.twin))?);
                for (k, (_, f)) in list.iter_mut().enumerate() {
                    let (start, end) = (Event::new(&self.context)?, Event::new(&self.context)?);
                    start.record(&self.stream)?;
                    for _ in 0..ITERS {
                        f()?;
                    }
                    end.record(&self.stream)?;
                    end.synchronize()?;
                    times[k].push(start.elapsed_ms(&end)? as f64 * 1e3 / ITERS as f64);
                }
            }
            let t = median(twin_times);
            for ((name, _), v) in list.iter().zip(times) {
                let o = median(v);
                println!("cand\t{op}\t{shape}\t{name}\t{o:.2}\t{t:.2}\t{:.3}\t# repeat {rep}, twin/candidate (>1: candidate faster)", t / o);
            }
        }
        Ok(())
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

macro_rules! side {
    ($module:expr, $($kernel:ident)::+, $stream:expr, $config:expr, $($arg:expr),* $(,)?) => {{
        match $module {
            None => $($kernel)::+::launch($stream, $config, $($arg),*),
            Some(m) => $($kernel)::+::launch_in(m, $stream, $config, $($arg),*),
        }
    }};
}

/// [`side!`] where ours is another entry than the twin's name: the kernel the library picks
/// for the shape (`*_t<threads>`, compiled for one block: session 14 (2)) beside the twin.
macro_rules! side_as {
    ($module:expr, $($ours:ident)::+ | $($twin:ident)::+, $stream:expr, $config:expr, $($arg:expr),* $(,)?) => {{
        match $module {
            None => $($ours)::+::launch($stream, $config, $($arg),*),
            Some(m) => $($twin)::+::launch_in(m, $stream, $config, $($arg),*),
        }
    }};
}

fn rmsnorm(env: &Env, cols: usize, sixteen: bool) -> R {
    let shape = Rows { rows: 8192, cols };
    let (n, c32) = (shape.len(), cols as u32);
    let (hx, hw) = (bf(&values(n, 1, 2.0)), bf(&values(cols, 3, 1.5)));
    let (x, w) = (env.dev(&hx)?, env.dev(&hw)?);
    let (out, rstd) = (cell::<bf16>(env, n)?, cell::<f32>(env, shape.rows)?);
    let stream = &env.stream;
    let op = if sixteen { "rmsnorm (16 columns a thread)" } else { "rmsnorm (8 columns a thread)" };
    let mut f: Launch<'_> = Box::new(|m: Option<&Module>| {
        let (mut out, mut rstd) = (out.borrow_mut(), rstd.borrow_mut());
        if sixteen {
            let config = LaunchConfig::new(shape.rows as u32, c32 / 16);
            side!(m, kb::rmsnorm_forward_packed16, stream, config, &x, &w, &mut *out, &mut *rstd, c32, 1e-6)
        } else {
            let config = LaunchConfig::new(shape.rows as u32, c32 / 8);
            side!(m, kb::rmsnorm_forward_packed, stream, config, &x, &w, &mut *out, &mut *rstd, c32, 1e-6)
        }
    });
    let check_shape = Rows { rows: CHECK_ROWS, cols };
    let (mut want, mut want_rstd) = (vec![bf16::default(); check_shape.len()], vec![0.0f32; CHECK_ROWS]);
    cpu::rmsnorm(&env.cpu, &hx[..check_shape.len()], &hw, &mut want, &mut want_rstd, check_shape, 1e-6)?;
    check(env, op, &format!("out {cols}"), &mut f, &out, &widen(&want), 1e-2, 1e-2)?;
    check(env, op, &format!("rstd {cols}"), &mut f, &rstd, &want_rstd, 1e-4, 0.0)?;
    env.pair(op, &format!("8192x{cols}"), 4.0 * n as f64, &mut f)?;
    drop(f);
    if sixteen {
        return Ok(());
    }
    let (mut out, mut rstd) = (out.into_inner(), rstd.into_inner());
    env.lib("rmsnorm (library call)", &format!("8192x{cols}"), || rows::rmsnorm(stream, &x, &w, &mut out, &mut rstd, shape, 1e-6))
}

/// Values read back as `f32`.
trait Wide: ferrocuda_host::Pod + Default {
    fn wide(v: Vec<Self>) -> Vec<f32>;
}
impl Wide for bf16 {
    fn wide(v: Vec<Self>) -> Vec<f32> {
        widen(&v)
    }
}
impl Wide for f32 {
    fn wide(v: Vec<Self>) -> Vec<f32> {
        v
    }
}

type Cell<T> = std::cell::RefCell<DeviceBuffer<T>>;

/// Runs ours, reads `out`, runs the twin, reads `out`, and compares both with `want`.
#[allow(clippy::too_many_arguments)]
fn check<T: Wide>(env: &Env, op: &str, what: &str, f: &mut Launch<'_>, out: &Cell<T>, want: &[f32], rtol: f32, atol: f32) -> R {
    f(None)?;
    env.stream.synchronize()?;
    let ours = T::wide(out.borrow().to_vec()?);
    f(Some(&env.twin))?;
    env.stream.synchronize()?;
    let twin = T::wide(out.borrow().to_vec()?);
    env.compare(op, what, &ours, &twin, want, rtol, atol);
    Ok(())
}

fn cell<T: ferrocuda_host::Pod>(env: &Env, n: usize) -> R<Cell<T>> {
    Ok(std::cell::RefCell::new(env.zeros::<T>(n)?))
}

const BIG: Rows = Rows { rows: 8192, cols: 4096 };
const BIG_NAME: &str = "8192x4096";

fn norms(env: &Env) -> R {
    let shape = BIG;
    let (n, cols, c32) = (shape.len(), shape.cols, shape.cols as u32);
    let (hx, hr, hw, hb) = (bf(&values(n, 1, 2.0)), bf(&values(n, 2, 1.0)), bf(&values(cols, 3, 1.5)), bf(&values(cols, 4, 0.5)));
    let (x, res, w, b) = (env.dev(&hx)?, env.dev(&hr)?, env.dev(&hw)?, env.dev(&hb)?);
    let (out, sum, mean, rstd) = (cell::<bf16>(env, n)?, cell::<bf16>(env, n)?, cell::<f32>(env, shape.rows)?, cell::<f32>(env, shape.rows)?);
    let check_shape = Rows { rows: CHECK_ROWS, cols };
    let k = check_shape.len();
    {
        let stream = &env.stream;
        let mut f: Launch<'_> = Box::new(|m: Option<&Module>| {
            let config = LaunchConfig::new(shape.rows as u32, c32 / 8);
            // 4096 columns: the library's kernel is the `reqntid(512)` one.
            side_as!(
                m,
                kb::add_rmsnorm_forward_packed_t512 | kb::add_rmsnorm_forward_packed,
                stream,
                config,
                &x,
                &res,
                &w,
                &mut *out.borrow_mut(),
                &mut *sum.borrow_mut(),
                &mut *rstd.borrow_mut(),
                c32,
                1e-6
            )
        });
        let (mut wo, mut ws, mut wr) = (vec![bf16::default(); k], vec![bf16::default(); k], vec![0.0f32; CHECK_ROWS]);
        cpu::add_rmsnorm(&env.cpu, &hx[..k], &hr[..k], &hw, &mut wo, &mut ws, &mut wr, check_shape, 1e-6)?;
        check(env, "add_rmsnorm", "out", &mut f, &out, &widen(&wo), 1e-2, 1e-2)?;
        // One bf16 ulp: a zero tolerance failed for ours and the twin alike on an H100 (the
        // CPU executor's reference rounds the bf16 sum differently in rare elements).
        check(env, "add_rmsnorm", "sum", &mut f, &sum, &widen(&ws), 1.0 / 256.0, 0.0)?;
        check(env, "add_rmsnorm", "rstd", &mut f, &rstd, &wr, 1e-4, 0.0)?;
        env.pair("add_rmsnorm", BIG_NAME, 8.0 * n as f64, &mut f)?;
    }
    {
        let stream = &env.stream;
        let mut f: Launch<'_> = Box::new(|m: Option<&Module>| {
            let config = LaunchConfig::new(shape.rows as u32, c32 / 16);
            // 4096 columns: the library's kernel is the `reqntid(256)` one.
            side_as!(
                m,
                kb::layernorm_forward_packed16_t256 | kb::layernorm_forward_packed16,
                stream,
                config,
                &x,
                &w,
                &b,
                &mut *out.borrow_mut(),
                &mut *mean.borrow_mut(),
                &mut *rstd.borrow_mut(),
                c32,
                1e-5
            )
        });
        let (mut wo, mut wm, mut wr) = (vec![bf16::default(); k], vec![0.0f32; CHECK_ROWS], vec![0.0f32; CHECK_ROWS]);
        cpu::layernorm(&env.cpu, &hx[..k], &hw, &hb, &mut wo, &mut wm, &mut wr, check_shape, 1e-5)?;
        check(env, "layernorm", "out", &mut f, &out, &widen(&wo), 1e-2, 1e-2)?;
        check(env, "layernorm", "mean", &mut f, &mean, &wm, 1e-4, 1e-5)?;
        check(env, "layernorm", "rstd", &mut f, &rstd, &wr, 1e-4, 0.0)?;
        env.pair("layernorm", BIG_NAME, 4.0 * n as f64, &mut f)?;
    }
    Ok(())
}

/// `sum over rows of dout * (x - mean) * rstd` (and of `dout`) per column, in `f64`.
fn weight_gradients(dout: &[bf16], x: &[bf16], mean: Option<&[f32]>, rstd: &[f32], cols: usize) -> (Vec<f32>, Vec<f32>) {
    let (mut dw, mut db) = (vec![0.0f64; cols], vec![0.0f64; cols]);
    for (r, (d, v)) in dout.chunks(cols).zip(x.chunks(cols)).enumerate() {
        let (m, s) = (mean.map_or(0.0, |m| m[r] as f64), rstd[r] as f64);
        for c in 0..cols {
            let d = d[c].to_f32() as f64;
            dw[c] += d * (v[c].to_f32() as f64 - m) * s;
            db[c] += d;
        }
    }
    (dw.iter().map(|&v| v as f32).collect(), db.iter().map(|&v| v as f32).collect())
}

fn backward(env: &Env) -> R {
    let shape = BIG;
    let (n, cols, c32) = (shape.len(), shape.cols, shape.cols as u32);
    let (hd, hx, hw, hb) = (bf(&values(n, 2, 1.0)), bf(&values(n, 1, 2.0)), bf(&values(cols, 3, 1.5)), bf(&values(cols, 4, 0.5)));
    let (dout, x, w, b) = (env.dev(&hd)?, env.dev(&hx)?, env.dev(&hw)?, env.dev(&hb)?);
    let (mut y, mut mean, mut rstd) = (env.zeros::<bf16>(n)?, env.zeros::<f32>(shape.rows)?, env.zeros::<f32>(shape.rows)?);
    rows::layernorm(&env.stream, &x, &w, &b, &mut y, &mut mean, &mut rstd, shape, 1e-5)?;
    env.stream.synchronize()?;
    let (hmean, hrstd) = (mean.to_vec()?, rstd.to_vec()?);
    let g = rows::fused_backward_blocks(shape).ok_or("4096 columns take the fused backward")?;
    let fused = LaunchConfig::new(g, c32 / 8);
    let split = LaunchConfig::new((c32 * 8).div_ceil(256), 256);
    let (dx, dw, db) = (cell::<bf16>(env, n)?, cell::<f32>(env, cols)?, cell::<f32>(env, cols)?);
    let (pdw, pdb) = (cell::<f32>(env, g as usize * cols)?, cell::<f32>(env, g as usize * cols)?);
    let check_shape = Rows { rows: CHECK_ROWS, cols };
    let k = check_shape.len();
    {
        let stream = &env.stream;
        let mut f: Launch<'_> = Box::new(|m: Option<&Module>| {
            let (mut pdw, mut pdb) = (pdw.borrow_mut(), pdb.borrow_mut());
            side!(
                m,
                kb::layernorm_backward_fused_packed,
                stream,
                fused,
                &dout,
                &x,
                &w,
                &mean,
                &rstd,
                &dout,
                &mut *dx.borrow_mut(),
                &mut *pdw,
                &mut *pdb,
                c32,
                0
            )?;
            side!(m, packed::sum_column_pairs_split, stream, split, &*pdw, &*pdb, &mut *dw.borrow_mut(), &mut *db.borrow_mut(), g, c32)
        });
        let (mut wdx, mut wdw, mut wdb) = (vec![bf16::default(); k], vec![0.0f32; cols], vec![0.0f32; cols]);
        cpu::layernorm_backward(
            &env.cpu,
            &hd[..k],
            &hx[..k],
            &hw,
            &hmean[..CHECK_ROWS],
            &hrstd[..CHECK_ROWS],
            None,
            &mut wdx,
            &mut wdw,
            &mut wdb,
            check_shape,
        )?;
        let (gw, gb) = weight_gradients(&hd, &hx, Some(&hmean), &hrstd, cols);
        check(env, "layernorm_backward", "dx", &mut f, &dx, &widen(&wdx), 1e-2, 1e-2)?;
        check(env, "layernorm_backward", "dweight", &mut f, &dw, &gw, 1e-3, 0.05)?;
        check(env, "layernorm_backward", "dbias", &mut f, &db, &gb, 1e-3, 0.05)?;
        env.pair("layernorm_backward (dx,dw,db)", BIG_NAME, 6.0 * n as f64, &mut f)?;
    }
    rows::rmsnorm(&env.stream, &x, &w, &mut y, &mut rstd, shape, 1e-6)?;
    env.stream.synchronize()?;
    let hrstd = rstd.to_vec()?;
    {
        let stream = &env.stream;
        let mut f: Launch<'_> = Box::new(|m: Option<&Module>| {
            let mut pdw = pdw.borrow_mut();
            side!(m, kb::rmsnorm_backward_fused_packed, stream, fused, &dout, &x, &w, &rstd, &dout, &mut *dx.borrow_mut(), &mut *pdw, c32, 0)?;
            side!(m, packed::sum_column_partials_split, stream, split, &*pdw, &mut *dw.borrow_mut(), g, c32)
        });
        let (mut wdx, mut wdw) = (vec![bf16::default(); k], vec![0.0f32; cols]);
        cpu::rmsnorm_backward(&env.cpu, &hd[..k], &hx[..k], &hw, &hrstd[..CHECK_ROWS], None, &mut wdx, &mut wdw, check_shape)?;
        let (gw, _) = weight_gradients(&hd, &hx, None, &hrstd, cols);
        check(env, "rmsnorm_backward", "dx", &mut f, &dx, &widen(&wdx), 1e-2, 1e-2)?;
        check(env, "rmsnorm_backward", "dweight", &mut f, &dw, &gw, 1e-3, 0.05)?;
        env.pair("rmsnorm_backward (dx,dw)", BIG_NAME, 6.0 * n as f64, &mut f)?;
    }
    Ok(())
}

fn softmax_ce(env: &Env) -> R {
    let shape = BIG;
    let (n, c32) = (shape.len(), shape.cols as u32);
    let hx = bf(&values(n, 1, 4.0));
    let x = env.dev(&hx)?;
    let out = cell::<bf16>(env, n)?;
    let check_shape = Rows { rows: CHECK_ROWS, cols: shape.cols };
    {
        let stream = &env.stream;
        let mut f: Launch<'_> = Box::new(|m: Option<&Module>| {
            let config = LaunchConfig::new(shape.rows as u32, c32 / 8);
            // 4096 columns: the library's kernel is the `reqntid(512)` one.
            side_as!(m, kb::softmax_forward_packed_t512 | kb::softmax_forward_packed, stream, config, &x, &mut *out.borrow_mut(), c32)
        });
        let mut want = vec![bf16::default(); check_shape.len()];
        cpu::softmax(&env.cpu, &hx[..check_shape.len()], &mut want, check_shape)?;
        check(env, "softmax", "out", &mut f, &out, &widen(&want), 1e-2, 1e-6)?;
        env.pair("softmax", BIG_NAME, 4.0 * n as f64, &mut f)?;
    }
    drop((x, out));
    let ce = Rows { rows: 4096, cols: 50304 };
    let (n, v32) = (ce.len(), ce.cols as u32);
    let hl = bf(&values(n, 7, 8.0));
    let mut ht: Vec<u32> = (0..ce.rows as u32).map(|r| r * 11 % v32).collect();
    ht[1] = ferrocuda_kernels::IGNORE_TARGET;
    let (logits, targets) = (env.dev(&hl)?, env.dev(&ht)?);
    let (losses, dlogits) = (cell::<f32>(env, ce.rows)?, cell::<bf16>(env, n)?);
    let stream = &env.stream;
    let dloss = 1.0 / 4096.0;
    let mut f: Launch<'_> = Box::new(|m: Option<&Module>| {
        let config = LaunchConfig::new((ce.rows as u32).div_ceil(8), 256);
        side!(
            m,
            kb::cross_entropy_forward_backward,
            stream,
            config,
            &logits,
            &targets,
            &mut *losses.borrow_mut(),
            &mut *dlogits.borrow_mut(),
            ce.rows as u32,
            v32,
            dloss
        )
    });
    let check_shape = Rows { rows: CHECK_ROWS, cols: ce.cols };
    let (mut wl, mut wd) = (vec![0.0f32; CHECK_ROWS], vec![bf16::default(); check_shape.len()]);
    cpu::cross_entropy(&env.cpu, &hl[..check_shape.len()], &ht[..CHECK_ROWS], &mut wl, &mut wd, check_shape, dloss)?;
    check(env, "cross_entropy", "losses", &mut f, &losses, &wl, 1e-4, 1e-4)?;
    check(env, "cross_entropy", "dlogits", &mut f, &dlogits, &widen(&wd), 1e-2, 1e-9)?;
    env.pair("cross_entropy fwd+bwd (fused)", "4096x50304", 4.0 * n as f64, &mut f)?;
    drop(f);
    // The PyTorch op's two halves: the forward (losses and lse, no gradient), then the backward
    // from lse and a gradient per row (here all `dloss`: the fused kernel's values).
    let lse = cell::<f32>(env, ce.rows)?;
    let mut forward: Launch<'_> = Box::new(|m: Option<&Module>| {
        let config = LaunchConfig::new((ce.rows as u32).div_ceil(8), 256);
        side!(m, kb::cross_entropy_forward, stream, config, &logits, &targets, &mut *losses.borrow_mut(), &mut *lse.borrow_mut(), ce.rows as u32, v32)
    });
    check(env, "cross_entropy_forward", "losses", &mut forward, &losses, &wl, 1e-4, 1e-4)?;
    env.pair("cross_entropy fwd (losses, lse)", "4096x50304", 2.0 * n as f64, &mut forward)?;
    forward(None)?;
    drop(forward);
    let dlosses = env.dev(&vec![dloss; ce.rows])?;
    let cpr = std::num::NonZeroU32::new(v32 / 8).ok_or("vocab")?;
    let lse = lse.into_inner();
    let mut backward: Launch<'_> = Box::new(|m: Option<&Module>| {
        let config = LaunchConfig::new((n / 8).div_ceil(256).clamp(1, 1 << 20) as u32, 256);
        side!(m, kb::cross_entropy_backward_packed, stream, config, &logits, &targets, &lse, &dlosses, &mut *dlogits.borrow_mut(), cpr)
    });
    check(env, "cross_entropy_backward", "dlogits", &mut backward, &dlogits, &widen(&wd), 1e-2, 1e-9)?;
    env.pair("cross_entropy bwd (from lse, dloss per row)", "4096x50304", 4.0 * n as f64, &mut backward)
}

fn activations(env: &Env) -> R {
    let n = BIG.len();
    let (hx, hd) = (bf(&values(n, 1, 3.0)), bf(&values(n, 2, 1.0)));
    let (x, d) = (env.dev(&hx)?, env.dev(&hd)?);
    let out = cell::<bf16>(env, n)?;
    let k = CHECK_ROWS * 4096;
    let chunk_grid = |chunks: usize| LaunchConfig::new(chunks.div_ceil(256).clamp(1, 1 << 20) as u32, 256);
    // The rotary's launch as the library makes it (`rotary_grid`: at most 4096 blocks, each
    // thread walking several chunks; session 15).
    let rotary_grid = |chunks: usize| LaunchConfig::new(chunks.div_ceil(256).clamp(1, 4096) as u32, 256);
    {
        let stream = &env.stream;
        let mut f: Launch<'_> = Box::new(|m: Option<&Module>| side!(m, kb::gelu_forward_packed, stream, chunk_grid(n / 8), &x, &mut *out.borrow_mut()));
        let mut want = vec![bf16::default(); k];
        cpu::gelu(&env.cpu, &hx[..k], &mut want)?;
        check(env, "gelu", "out", &mut f, &out, &widen(&want), 1e-2, 1e-3)?;
        env.pair("gelu", BIG_NAME, 4.0 * n as f64, &mut f)?;
    }
    {
        let stream = &env.stream;
        let mut f: Launch<'_> = Box::new(|m: Option<&Module>| side!(m, kb::gelu_backward_packed, stream, chunk_grid(n / 8), &x, &d, &mut *out.borrow_mut()));
        let mut want = vec![bf16::default(); k];
        cpu::gelu_backward(&env.cpu, &hx[..k], &hd[..k], &mut want)?;
        check(env, "gelu_backward", "dx", &mut f, &out, &widen(&want), 1e-2, 1e-3)?;
        env.pair("gelu_backward", BIG_NAME, 6.0 * n as f64, &mut f)?;
    }
    let half = Rows { rows: 8192, cols: 2048 };
    let cpr = std::num::NonZeroU32::new(half.cols as u32 / 8).ok_or("d")?;
    let gated = cell::<bf16>(env, half.len())?;
    let check_half = Rows { rows: CHECK_ROWS, cols: half.cols };
    {
        let stream = &env.stream;
        let mut f: Launch<'_> =
            Box::new(|m: Option<&Module>| side!(m, kb::silu_and_mul_forward_packed, stream, chunk_grid(half.len() / 8), &x, &mut *gated.borrow_mut(), cpr));
        let mut want = vec![bf16::default(); check_half.len()];
        cpu::silu_and_mul(&env.cpu, &hx[..2 * check_half.len()], &mut want, check_half)?;
        check(env, "silu_and_mul", "out", &mut f, &gated, &widen(&want), 1e-2, 1e-3)?;
        env.pair("silu_and_mul", "8192x(2x2048)", 3.0 * n as f64, &mut f)?;
    }
    {
        let stream = &env.stream;
        let dg = env.dev(&hd[..half.len()])?;
        let mut f: Launch<'_> =
            Box::new(|m: Option<&Module>| side!(m, kb::silu_and_mul_backward_packed, stream, chunk_grid(half.len() / 4), &x, &dg, &mut *out.borrow_mut(), cpr));
        let mut want = vec![bf16::default(); 2 * check_half.len()];
        cpu::silu_and_mul_backward(&env.cpu, &hx[..2 * check_half.len()], &hd[..check_half.len()], &mut want, check_half)?;
        check(env, "silu_and_mul_backward", "dinput", &mut f, &out, &widen(&want), 1e-2, 1e-3)?;
        env.pair("silu_and_mul_backward", "8192x(2x2048)", 5.0 * n as f64, &mut f)?;
    }
    let rope = Rope { tokens: 8192, heads: 32, head_dim: 128, rotary_dim: 128, max_positions: 8192 };
    let hp: Vec<u32> = (0..8192u32).map(|t| (t * 7) % 8192).collect();
    let (hc, hs) = (values(8192 * 64, 11, 1.0), values(8192 * 64, 12, 1.0));
    let (positions, cos, sin) = (env.dev(&hp)?, env.dev(&hc)?, env.dev(&hs)?);
    let shape = RopeShape { heads: 32, head_dim: 128, rotary_dim: 128, max_positions: 8192, inverse: 0 };
    let (head_chunks, heads) = (std::num::NonZeroU32::new(16).ok_or("16")?, std::num::NonZeroU32::new(32).ok_or("32")?);
    {
        let stream = &env.stream;
        let mut f: Launch<'_> = Box::new(|m: Option<&Module>| {
            side!(m, kb::rotary_embedding_packed, stream, rotary_grid(n / 8), &x, &positions, &cos, &sin, &mut *out.borrow_mut(), head_chunks, heads, shape)
        });
        let small = Rope { tokens: CHECK_ROWS, ..rope };
        let mut want = vec![bf16::default(); CHECK_ROWS * 32 * 128];
        cpu::rotary_embedding(&env.cpu, &hx[..want.len()], &hp[..CHECK_ROWS], &hc, &hs, &mut want, small, false)?;
        check(env, "rotary_embedding", "out", &mut f, &out, &widen(&want), 1e-2, 1e-2)?;
        env.pair("rotary_embedding", "8192x32x128", 4.0 * n as f64, &mut f)?;
    }
    Ok(())
}

fn optimiser(env: &Env) -> R {
    let p = 64usize << 20;
    let (hp, hg) = (values(p, 21, 1.0), values(p, 22, 0.1));
    let (hm, hv) = (values(p, 23, 0.01), values(p, 24, 0.001).iter().map(|v| v * v).collect::<Vec<f32>>());
    let grads = env.dev(&hg)?;
    let (params, m, v) = (std::cell::RefCell::new(env.dev(&hp)?), std::cell::RefCell::new(env.dev(&hm)?), std::cell::RefCell::new(env.dev(&hv)?));
    let hyper = AdamW { learning_rate: 1e-3, beta1: 0.9, beta2: 0.95, eps: 1e-8, weight_decay: 0.1 };
    let hpar = AdamWStep {
        learning_rate: 1e-3,
        beta1: 0.9,
        beta2: 0.95,
        beta1_correction: 0.1,
        beta2_correction: 1.0 - 0.95,
        eps: 1e-8,
        weight_decay: 0.1,
        grad_scale: 1.0,
    };
    let k = 4096usize;
    {
        let stream = &env.stream;
        let config = LaunchConfig::new((p / 8).div_ceil(256).clamp(1, 1 << 20) as u32, 256);
        let mut f: Launch<'_> = Box::new(|mm: Option<&Module>| {
            side!(mm, kf::adamw_step_packed, stream, config, &mut *params.borrow_mut(), &grads, &mut *m.borrow_mut(), &mut *v.borrow_mut(), hpar)
        });
        // One step from the same state on each side: reset, step, read.
        let (mut wp, mut wm, mut wv) = (hp[..k].to_vec(), hm[..k].to_vec(), hv[..k].to_vec());
        cpu::adamw(&env.cpu, &mut wp, &hg[..k], &mut wm, &mut wv, hyper, 1, 1.0)?;
        let mut sides = Vec::new();
        for module in [None, Some(&env.twin)] {
            params.borrow_mut().copy_from_host(&hp)?;
            m.borrow_mut().copy_from_host(&hm)?;
            v.borrow_mut().copy_from_host(&hv)?;
            f(module)?;
            env.stream.synchronize()?;
            sides.push((params.borrow().to_vec()?, m.borrow().to_vec()?, v.borrow().to_vec()?));
        }
        let (o, t) = (&sides[0], &sides[1]);
        env.compare("adamw", "params", &o.0, &t.0, &wp, 1e-6, 1e-7);
        env.compare("adamw", "m", &o.1, &t.1, &wm, 1e-6, 1e-9);
        env.compare("adamw", "v", &o.2, &t.2, &wv, 1e-6, 1e-12);
        env.pair("adamw f32", "64M params", 28.0 * p as f64, &mut f)?;
    }
    drop((params, m, v));
    let total = cell::<f32>(env, 1)?;
    {
        let stream = &env.stream;
        let config = LaunchConfig::new((p / 8).div_ceil(2 * 256).clamp(1, 1024) as u32, 256);
        let mut f: Launch<'_> = Box::new(|m: Option<&Module>| side!(m, kf::sum_of_squares_packed, stream, config, &grads, &mut *total.borrow_mut()));
        let want = hg.iter().map(|&g| g as f64 * g as f64).sum::<f64>() as f32;
        let mut sides = Vec::new();
        for module in [None, Some(&env.twin)] {
            total.borrow_mut().copy_from_host(&[0.0])?;
            f(module)?;
            env.stream.synchronize()?;
            sides.push(total.borrow().to_vec()?[0]);
        }
        env.compare("sum_of_squares", "total", &[sides[0]], &[sides[1]], &[want], 1e-4, 0.0);
        env.pair("sum_of_squares f32", "64M", 4.0 * p as f64, &mut f)?;
    }
    Ok(())
}

/// Checks candidate `f`'s `out` against `want` (a `check` line naming the candidate).
#[allow(clippy::too_many_arguments)]
fn check_candidate<T: Wide>(
    env: &Env,
    op: &str,
    what: &str,
    f: &mut dyn FnMut() -> ferrocuda_host::Result<()>,
    out: &Cell<T>,
    want: &[f32],
    rtol: f32,
    atol: f32,
) -> R {
    f()?;
    env.stream.synchronize()?;
    let got = T::wide(out.borrow().to_vec()?);
    env.compare(op, what, &got, &got, want, rtol, atol);
    Ok(())
}

/// The ops that were below 0.97x their twins (session 13, H100; session 14, H200), the
/// library's kernel beside the twin in `BENCH_ROWS_REPEATS` (default 3) repeats of the rounds,
/// one `cand` line each: the spread between repeats is the noise of the pair's ratio. Session
/// 14 timed its candidate kernels here the same way (`bench/results/s14-rows/`); a new
/// candidate is one more entry in a list. `BENCH_ROWS_VARIANTS=1` runs them before the table,
/// `=only` alone, `=rotary` only the rotary embedding's (a short run: issue 31's last row
/// below 0.97x its twin).
fn variants(env: &Env) -> R {
    let repeats = std::env::var("BENCH_ROWS_REPEATS").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    let stream = &env.stream;
    // Rotary, the benchmark's shape.
    {
        let n = BIG.len();
        let hx = bf(&values(n, 1, 3.0));
        let x = env.dev(&hx)?;
        let out = cell::<bf16>(env, n)?;
        let rope = Rope { tokens: 8192, heads: 32, head_dim: 128, rotary_dim: 128, max_positions: 8192 };
        let hp: Vec<u32> = (0..8192u32).map(|t| (t * 7) % 8192).collect();
        let (hc, hs) = (values(8192 * 64, 11, 1.0), values(8192 * 64, 12, 1.0));
        let (positions, cos, sin) = (env.dev(&hp)?, env.dev(&hc)?, env.dev(&hs)?);
        let shape = RopeShape { heads: 32, head_dim: 128, rotary_dim: 128, max_positions: 8192, inverse: 0 };
        let (hch, heads) = (std::num::NonZeroU32::new(16).ok_or("16")?, std::num::NonZeroU32::new(32).ok_or("32")?);
        let grid = LaunchConfig::new((n / 8).div_ceil(256).clamp(1, 1 << 20) as u32, 256);
        let small = Rope { tokens: CHECK_ROWS, ..rope };
        let mut want = vec![bf16::default(); CHECK_ROWS * 32 * 128];
        cpu::rotary_embedding(&env.cpu, &hx[..want.len()], &hp[..CHECK_ROWS], &hc, &hs, &mut want, small, false)?;
        let want = widen(&want);
        // The library's grid first (`rotary_grid`: at most 4096 blocks of 256, each thread
        // walking several chunks), then a thread a chunk; at each the library's kernel and the
        // session-16 trials (`packed::rotary_trials`: the walk of commit 1cf277f, session 15's
        // walk, the library's walk without its cap of 32 registers)
        // beside the twin on the same grid.
        use packed::rotary_trials as rt;
        let library = LaunchConfig::new((n / 8).div_ceil(256).clamp(1, 4096) as u32, 256);
        for (label, config) in [("library grid", library), ("a thread a chunk", grid)] {
            let mut twin: Launch<'_> = Box::new(|m: Option<&Module>| {
                side!(m, kb::rotary_embedding_packed, stream, config, &x, &positions, &cos, &sin, &mut *out.borrow_mut(), hch, heads, shape)
            });
            let o = &out;
            let (x, positions, cos, sin) = (&x, &positions, &cos, &sin);
            let mut list: Vec<Candidate<'_>> = vec![
                (
                    "library",
                    Box::new(move || kb::rotary_embedding_packed::launch(stream, config, x, positions, cos, sin, &mut *o.borrow_mut(), hch, heads, shape)),
                ),
                (
                    "s14_walk",
                    Box::new(move || {
                        rt::rotary_embedding_packed_s14_bf16::launch(stream, config, x, positions, cos, sin, &mut *o.borrow_mut(), hch, heads, shape)
                    }),
                ),
                (
                    "s15_walk",
                    Box::new(move || {
                        rt::rotary_embedding_packed_s15_bf16::launch(stream, config, x, positions, cos, sin, &mut *o.borrow_mut(), hch, heads, shape)
                    }),
                ),
                (
                    "u32_uncapped",
                    Box::new(move || {
                        rt::rotary_embedding_packed_u32_bf16::launch(stream, config, x, positions, cos, sin, &mut *o.borrow_mut(), hch, heads, shape)
                    }),
                ),
            ];
            for (name, f) in list.iter_mut() {
                check_candidate(env, "rotary_embedding", name, &mut **f, &out, &want, 1e-2, 1e-2)?;
            }
            env.candidates("rotary_embedding", &format!("8192x32x128, {label} ({} blocks of 256)", config.grid.x), repeats, &mut twin, &mut list)?;
        }
    }
    if std::env::var("BENCH_ROWS_VARIANTS").is_ok_and(|v| v == "rotary") {
        return Ok(());
    }
    // Layer norm 16 columns a thread, 8192 x 4096.
    {
        let shape = BIG;
        let (n, cols, c32) = (shape.len(), shape.cols, shape.cols as u32);
        let (hx, hw, hb) = (bf(&values(n, 1, 2.0)), bf(&values(cols, 3, 1.5)), bf(&values(cols, 4, 0.5)));
        let (x, w, b) = (env.dev(&hx)?, env.dev(&hw)?, env.dev(&hb)?);
        let (out, mean, rstd) = (cell::<bf16>(env, n)?, cell::<f32>(env, shape.rows)?, cell::<f32>(env, shape.rows)?);
        let check_shape = Rows { rows: CHECK_ROWS, cols };
        let k = check_shape.len();
        let (mut wo, mut wm, mut wr) = (vec![bf16::default(); k], vec![0.0f32; CHECK_ROWS], vec![0.0f32; CHECK_ROWS]);
        cpu::layernorm(&env.cpu, &hx[..k], &hw, &hb, &mut wo, &mut wm, &mut wr, check_shape, 1e-5)?;
        let wo = widen(&wo);
        let config = LaunchConfig::new(shape.rows as u32, c32 / 16);
        let mut twin: Launch<'_> = Box::new(|m: Option<&Module>| {
            side!(
                m,
                kb::layernorm_forward_packed16,
                stream,
                config,
                &x,
                &w,
                &b,
                &mut *out.borrow_mut(),
                &mut *mean.borrow_mut(),
                &mut *rstd.borrow_mut(),
                c32,
                1e-5
            )
        });
        let mut list: Vec<Candidate<'_>> = vec![(
            "any block (main)",
            Box::new(|| {
                kb::layernorm_forward_packed16::launch(
                    stream,
                    config,
                    &x,
                    &w,
                    &b,
                    &mut *out.borrow_mut(),
                    &mut *mean.borrow_mut(),
                    &mut *rstd.borrow_mut(),
                    c32,
                    1e-5,
                )
            }),
        )];
        // Session 14 (2): compiled for blocks of 256, the library's pick at 4096 columns.
        list.push((
            "reqntid(256) (library)",
            Box::new(|| {
                kb::layernorm_forward_packed16_t256::launch(
                    stream,
                    config,
                    &x,
                    &w,
                    &b,
                    &mut *out.borrow_mut(),
                    &mut *mean.borrow_mut(),
                    &mut *rstd.borrow_mut(),
                    c32,
                    1e-5,
                )
            }),
        ));
        for (name, f) in list.iter_mut() {
            check_candidate(env, "layernorm", &format!("{name} out"), &mut **f, &out, &wo, 1e-2, 1e-2)?;
            check_candidate(env, "layernorm", &format!("{name} rstd"), &mut **f, &rstd, &wr, 1e-4, 0.0)?;
        }
        env.candidates("layernorm", BIG_NAME, repeats, &mut twin, &mut list)?;
    }
    // RMSNorm 8 columns a thread.
    for cols in [768usize, 1024, 4096] {
        let shape = Rows { rows: 8192, cols };
        let (n, c32) = (shape.len(), cols as u32);
        let (hx, hw) = (bf(&values(n, 1, 2.0)), bf(&values(cols, 3, 1.5)));
        let (x, w) = (env.dev(&hx)?, env.dev(&hw)?);
        let (out, rstd) = (cell::<bf16>(env, n)?, cell::<f32>(env, shape.rows)?);
        let check_shape = Rows { rows: CHECK_ROWS, cols };
        let (mut want, mut want_rstd) = (vec![bf16::default(); check_shape.len()], vec![0.0f32; CHECK_ROWS]);
        cpu::rmsnorm(&env.cpu, &hx[..check_shape.len()], &hw, &mut want, &mut want_rstd, check_shape, 1e-6)?;
        let want = widen(&want);
        let config = LaunchConfig::new(shape.rows as u32, c32 / 8);
        let mut twin: Launch<'_> = Box::new(|m: Option<&Module>| {
            side!(m, kb::rmsnorm_forward_packed, stream, config, &x, &w, &mut *out.borrow_mut(), &mut *rstd.borrow_mut(), c32, 1e-6)
        });
        let mut list: Vec<Candidate<'_>> = vec![(
            "any block (main)",
            Box::new(|| kb::rmsnorm_forward_packed::launch(stream, config, &x, &w, &mut *out.borrow_mut(), &mut *rstd.borrow_mut(), c32, 1e-6)),
        )];
        // Session 14 (2): the same body compiled for the block (`reqntid`), the library's
        // pick at 768 and 1024 columns.
        if cols == 768 {
            list.push((
                "reqntid(96) (library)",
                Box::new(|| kb::rmsnorm_forward_packed_t96::launch(stream, config, &x, &w, &mut *out.borrow_mut(), &mut *rstd.borrow_mut(), c32, 1e-6)),
            ));
        } else if cols == 1024 {
            list.push((
                "reqntid(128) (library)",
                Box::new(|| kb::rmsnorm_forward_packed_t128::launch(stream, config, &x, &w, &mut *out.borrow_mut(), &mut *rstd.borrow_mut(), c32, 1e-6)),
            ));
        }
        for (name, f) in list.iter_mut() {
            check_candidate(env, "rmsnorm (8 columns a thread)", &format!("{name} out {cols}"), &mut **f, &out, &want, 1e-2, 1e-2)?;
            check_candidate(env, "rmsnorm (8 columns a thread)", &format!("{name} rstd {cols}"), &mut **f, &rstd, &want_rstd, 1e-4, 0.0)?;
        }
        env.candidates("rmsnorm (8 columns a thread)", &format!("8192x{cols}"), repeats, &mut twin, &mut list)?;
        drop((twin, list));
        if cols == 1024 {
            // 16 columns a thread at 1024 (64 threads a row; the library takes it from 2048):
            // the 8-column kernel read 0.79x its twin here on an H200 (session 14), the
            // 16-column one 0.98 at 2048.
            let config = LaunchConfig::new(shape.rows as u32, c32 / 16);
            let mut twin: Launch<'_> = Box::new(|m: Option<&Module>| {
                side!(m, kb::rmsnorm_forward_packed16, stream, config, &x, &w, &mut *out.borrow_mut(), &mut *rstd.borrow_mut(), c32, 1e-6)
            });
            let mut list: Vec<Candidate<'_>> = vec![(
                "library 16-column kernel",
                Box::new(|| kb::rmsnorm_forward_packed16::launch(stream, config, &x, &w, &mut *out.borrow_mut(), &mut *rstd.borrow_mut(), c32, 1e-6)),
            )];
            check(env, "rmsnorm (16 columns a thread)", "out 1024", &mut twin, &out, &want, 1e-2, 1e-2)?;
            env.candidates("rmsnorm (16 columns a thread)", "8192x1024", repeats, &mut twin, &mut list)?;
        }
    }
    // Softmax: the library's kernel and the twin again (noise of the pair at 0.97).
    {
        let shape = BIG;
        let (n, c32) = (shape.len(), shape.cols as u32);
        let hx = bf(&values(n, 1, 4.0));
        let x = env.dev(&hx)?;
        let out = cell::<bf16>(env, n)?;
        let config = LaunchConfig::new(shape.rows as u32, c32 / 8);
        let mut twin: Launch<'_> = Box::new(|m: Option<&Module>| side!(m, kb::softmax_forward_packed, stream, config, &x, &mut *out.borrow_mut(), c32));
        let mut list: Vec<Candidate<'_>> = vec![
            ("any block (main)", Box::new(|| kb::softmax_forward_packed::launch(stream, config, &x, &mut *out.borrow_mut(), c32))),
            // Session 14 (2): compiled for blocks of 512, the library's pick at 4096 columns.
            ("reqntid(512) (library)", Box::new(|| kb::softmax_forward_packed_t512::launch(stream, config, &x, &mut *out.borrow_mut(), c32))),
        ];
        env.candidates("softmax", BIG_NAME, repeats, &mut twin, &mut list)?;
    }
    Ok(())
}

fn main() -> R {
    let path = std::env::args().nth(1).ok_or("usage: bench_rows TWINS.cubin (nvcc -cubin -O3 -arch=sm_90 kernels/bench/rows_twins.cu)")?;
    let context = Context::primary(0)?;
    let stream = Stream::new(&context)?;
    let image = std::fs::read(&path)?;
    // SAFETY: the twins are launched only through the typed launchers of the Rust kernels whose
    // symbols and parameter layouts they repeat (`launch_in` checks each kernel's parameter
    // sizes on its first launch), with the buffers and launch configurations the library uses.
    let twin = unsafe { Module::load_binary(&context, &path, &image, &JitOptions::default())? };
    println!("device: {}", context.device().name()?);
    let env = Env { context, stream, twin, cpu: CpuExecutor::new(), failed: std::cell::Cell::new(false) };
    let variants_mode = std::env::var("BENCH_ROWS_VARIANTS").unwrap_or_default();
    if !variants_mode.is_empty() {
        variants(&env)?;
        if variants_mode == "only" || variants_mode == "rotary" {
            return if env.failed.get() { Err("a check failed (see the FAIL lines)".into()) } else { Ok(()) };
        }
    }
    for cols in [768, 2048, 4096, 8192] {
        rmsnorm(&env, cols, false)?;
        if rows::rmsnorm_rows16(8192, cols).is_some() {
            rmsnorm(&env, cols, true)?;
        }
    }
    norms(&env)?;
    backward(&env)?;
    softmax_ce(&env)?;
    activations(&env)?;
    optimiser(&env)?;
    if env.failed.get() {
        return Err("a check failed (see the FAIL lines)".into());
    }
    Ok(())
}
