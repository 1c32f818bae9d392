//! Times the library's calls on GPU 0 (bf16 unless said; f32 AdamW), one line per call: the
//! mean over 20 back-to-back calls after 3 warm-up calls, timed with events, and the bytes
//! each call must move at least (its effective bandwidth). `kernels/bench/torch_eager.py`
//! times PyTorch eager on the same shapes. `BENCH_ROWS_ONLY=1` stops before attention. A
//! benchmark, not a test.

use ferrocuda_host::{Context, DeviceBuffer, Event, Stream};
use ferrocuda_kernels::attention::{self, Attention, Layout};
use ferrocuda_kernels::rows::{self, AdamW, Rope, Rows};
use ferrocuda_kernels::{KernelsError, bf16};

fn time(context: &Context, stream: &Stream, name: &str, bytes: f64, flops: f64, mut f: impl FnMut() -> Result<(), KernelsError>) -> Result<(), KernelsError> {
    for _ in 0..3 {
        f()?;
    }
    let (start, end) = (Event::new(context)?, Event::new(context)?);
    start.record(stream)?;
    const ITERS: usize = 20;
    for _ in 0..ITERS {
        f()?;
    }
    end.record(stream)?;
    end.synchronize()?;
    let ms = start.elapsed_ms(&end)? as f64 / ITERS as f64;
    let gbs = bytes / (ms * 1e-3) / 1e9;
    let tflops = flops / (ms * 1e-3) / 1e12;
    println!("{name:<44} {ms:>9.4} ms  {gbs:>8.1} GB/s  {tflops:>7.2} TFLOP/s");
    Ok(())
}

fn buf(context: &Context, n: usize, seed: u32) -> Result<DeviceBuffer<bf16>, KernelsError> {
    let v: Vec<bf16> = (0..n).map(|i| bf16::from_f32((((i as u32).wrapping_mul(2654435761).wrapping_add(seed) >> 16) as f32 / 65536.0) * 2.0 - 1.0)).collect();
    Ok(DeviceBuffer::from_slice(context, &v)?)
}

fn main() -> Result<(), KernelsError> {
    let context = Context::primary(0)?;
    let stream = Stream::new(&context)?;
    println!("{:<44} {:>12} {:>14} {:>15}", "call (bf16)", "time", "min bytes/time", "");
    let shape = Rows { rows: 8192, cols: 4096 };
    let n = shape.len();
    let (x, res, w, b) = (buf(&context, n, 1)?, buf(&context, n, 2)?, buf(&context, shape.cols, 3)?, buf(&context, shape.cols, 4)?);
    let (mut out, mut sum) = (buf(&context, n, 5)?, buf(&context, n, 6)?);
    let (mut mean, mut rstd) = (DeviceBuffer::<f32>::zeroed(&context, shape.rows)?, DeviceBuffer::<f32>::zeroed(&context, shape.rows)?);
    let e = 2.0;
    time(&context, &stream, "rmsnorm 8192x4096", e * 2.0 * n as f64, 0.0, || rows::rmsnorm(&stream, &x, &w, &mut out, &mut rstd, shape, 1e-6))?;
    time(&context, &stream, "add_rmsnorm 8192x4096", e * 4.0 * n as f64, 0.0, || {
        rows::add_rmsnorm(&stream, &x, &res, &w, &mut out, &mut sum, &mut rstd, shape, 1e-6)
    })?;
    time(&context, &stream, "layernorm 8192x4096", e * 2.0 * n as f64, 0.0, || {
        rows::layernorm(&stream, &x, &w, &b, &mut out, &mut mean, &mut rstd, shape, 1e-5)
    })?;
    // The 8-columns-a-thread kernel the library used for this width before (512 threads, 40
    // registers: three rows an SM), beside the 16-columns-a-thread one above.
    time(&context, &stream, "layernorm 8192x4096 (8 columns a thread)", e * 2.0 * n as f64, 0.0, || {
        let config = ferrocuda_host::LaunchConfig::new(shape.rows as u32, shape.cols as u32 / 8);
        ferrocuda_kernels_device::for_bf16::layernorm_forward_packed::launch(
            &stream,
            config,
            &x,
            &w,
            &b,
            &mut out,
            &mut mean,
            &mut rstd,
            shape.cols as u32,
            1e-5,
        )?;
        Ok(())
    })?;
    let (mut dw, mut db) = (DeviceBuffer::<f32>::zeroed(&context, shape.cols)?, DeviceBuffer::<f32>::zeroed(&context, shape.cols)?);
    time(&context, &stream, "layernorm_backward 8192x4096 (dx,dw,db)", e * 3.0 * n as f64, 0.0, || {
        rows::layernorm_backward(&stream, &res, &x, &w, &mean, &rstd, None, &mut out, &mut dw, &mut db, shape)
    })?;
    // The same backward in other forms, side by side with the library's (the fused kernel, then
    // the split column sums): the fused kernel with the old column sums (one thread a column,
    // 16 blocks for 4096 columns); two kernels (dx per row, then the weight partials re-reading
    // dout and x; the library's path for rows wider than 4096) with the split and the old sums.
    {
        use ferrocuda_host::LaunchConfig;
        use ferrocuda_kernels_device::{
            for_bf16,
            packed::{sum_column_pairs, sum_column_pairs_split},
        };
        let (rows_u32, cols_u32) = (shape.rows as u32, shape.cols as u32);
        let old_sum = LaunchConfig::new(cols_u32.div_ceil(256), 256);
        let split_sum = LaunchConfig::new((cols_u32 * 8).div_ceil(256), 256);
        let g = rows::fused_backward_blocks(shape).expect("4096 columns take the fused kernel");
        let (mut fdw, mut fdb) =
            (DeviceBuffer::<f32>::zeroed(&context, g as usize * shape.cols)?, DeviceBuffer::<f32>::zeroed(&context, g as usize * shape.cols)?);
        time(&context, &stream, "layernorm_backward 8192x4096 fused, old column sum", e * 3.0 * n as f64, 0.0, || {
            let fused = LaunchConfig::new(g, cols_u32 / 8);
            for_bf16::layernorm_backward_fused_packed::launch(&stream, fused, &res, &x, &w, &mean, &rstd, &res, &mut out, &mut fdw, &mut fdb, cols_u32, 0)?;
            sum_column_pairs::launch(&stream, old_sum, &fdw, &fdb, &mut dw, &mut db, g, cols_u32)?;
            Ok(())
        })?;
        let chunks = shape.rows.div_ceil(64);
        let (mut pdw, mut pdb) = (DeviceBuffer::<f32>::zeroed(&context, chunks * shape.cols)?, DeviceBuffer::<f32>::zeroed(&context, chunks * shape.cols)?);
        for split in [true, false] {
            let name = if split { "layernorm_backward 8192x4096 two-kernel" } else { "layernorm_backward 8192x4096 two-kernel, old sum" };
            time(&context, &stream, name, e * 3.0 * n as f64, 0.0, || {
                for_bf16::norm_backward_packed::launch(
                    &stream,
                    LaunchConfig::new(rows_u32, cols_u32 / 8),
                    &res,
                    &x,
                    &w,
                    &mean,
                    &rstd,
                    &res,
                    &mut out,
                    cols_u32,
                    0,
                    1,
                )?;
                let partial = LaunchConfig::new((chunks * shape.cols / 8).div_ceil(256) as u32, 256);
                for_bf16::norm_backward_weights_partial_packed::launch(
                    &stream, partial, &res, &x, &mean, &rstd, &mut pdw, &mut pdb, rows_u32, cols_u32, 64, 1,
                )?;
                if split {
                    sum_column_pairs_split::launch(&stream, split_sum, &pdw, &pdb, &mut dw, &mut db, chunks as u32, cols_u32)?;
                } else {
                    sum_column_pairs::launch(&stream, old_sum, &pdw, &pdb, &mut dw, &mut db, chunks as u32, cols_u32)?;
                }
                Ok(())
            })?;
        }
        time(&context, &stream, "norm dx only 8192x4096 (norm_backward_packed)", e * 3.0 * n as f64, 0.0, || {
            for_bf16::norm_backward_packed::launch(
                &stream,
                LaunchConfig::new(rows_u32, cols_u32 / 8),
                &res,
                &x,
                &w,
                &mean,
                &rstd,
                &res,
                &mut out,
                cols_u32,
                0,
                1,
            )?;
            Ok(())
        })?;
    }
    time(&context, &stream, "rmsnorm_backward 8192x4096 (dx,dw)", e * 3.0 * n as f64, 0.0, || {
        rows::rmsnorm_backward(&stream, &res, &x, &w, &rstd, None, &mut out, &mut dw, shape)
    })?;
    time(&context, &stream, "softmax 8192x4096", e * 2.0 * n as f64, 0.0, || rows::softmax(&stream, &x, &mut out, shape))?;
    time(&context, &stream, "gelu 8192x4096", e * 2.0 * n as f64, 0.0, || rows::gelu(&stream, &x, &mut out))?;
    time(&context, &stream, "gelu_backward 8192x4096", e * 3.0 * n as f64, 0.0, || rows::gelu_backward(&stream, &x, &res, &mut out))?;
    let half = Rows { rows: 8192, cols: 2048 };
    let mut gated = buf(&context, half.len(), 16)?;
    time(&context, &stream, "silu_and_mul 8192x(2x2048)", e * 1.5 * n as f64, 0.0, || rows::silu_and_mul(&stream, &x, &mut gated, half))?;
    let mut dgated = buf(&context, n, 17)?;
    time(&context, &stream, "silu_and_mul_backward 8192x(2x2048)", e * 2.5 * n as f64, 0.0, || {
        rows::silu_and_mul_backward(&stream, &x, &gated, &mut dgated, half)
    })?;
    let rope = Rope { tokens: 8192, heads: 32, head_dim: 128, rotary_dim: 128, max_positions: 8192 };
    let positions = DeviceBuffer::from_slice(&context, &(0..8192u32).collect::<Vec<_>>())?;
    let table = DeviceBuffer::<f32>::zeroed(&context, 8192 * 64)?;
    time(&context, &stream, "rotary_embedding 8192x32x128", e * 2.0 * n as f64, 0.0, || {
        rows::rotary_embedding(&stream, &x, &positions, &table, &table, &mut out, rope, false)
    })?;
    let ce = Rows { rows: 4096, cols: 50304 };
    let logits = buf(&context, ce.len(), 7)?;
    let mut dlogits = buf(&context, ce.len(), 8)?;
    let targets = DeviceBuffer::from_slice(&context, &(0..4096u32).map(|r| r * 11 % 50304).collect::<Vec<_>>())?;
    let mut losses = DeviceBuffer::<f32>::zeroed(&context, ce.rows)?;
    time(&context, &stream, "cross_entropy fwd+bwd 4096x50304", e * 2.0 * ce.len() as f64, 0.0, || {
        rows::cross_entropy(&stream, &logits, &targets, &mut losses, &mut dlogits, ce, 1.0 / 4096.0)
    })?;
    drop((logits, dlogits));
    let p = 64 << 20;
    let mut params = DeviceBuffer::<f32>::zeroed(&context, p)?;
    let grads = DeviceBuffer::<f32>::zeroed(&context, p)?;
    let (mut m, mut v) = (DeviceBuffer::<f32>::zeroed(&context, p)?, DeviceBuffer::<f32>::zeroed(&context, p)?);
    let hyper = AdamW { learning_rate: 1e-3, beta1: 0.9, beta2: 0.95, eps: 1e-8, weight_decay: 0.1 };
    time(&context, &stream, "adamw f32 64M params", 4.0 * 7.0 * p as f64, 0.0, || rows::adamw(&stream, &mut params, &grads, &mut m, &mut v, hyper, 1, 1.0))?;
    // The element-wise kernel the library used before (one element a thread, 4-byte accesses).
    let hp = ferrocuda_kernels_device::AdamWStep {
        learning_rate: 1e-3,
        beta1: 0.9,
        beta2: 0.95,
        beta1_correction: 0.1,
        beta2_correction: 0.05,
        eps: 1e-8,
        weight_decay: 0.1,
        grad_scale: 1.0,
    };
    time(&context, &stream, "adamw f32 64M params (old element-wise kernel)", 4.0 * 7.0 * p as f64, 0.0, || {
        let config = ferrocuda_host::LaunchConfig::new(8192, 256);
        ferrocuda_kernels_device::for_f32::adamw_step::launch(&stream, config, &mut params, &grads, &mut m, &mut v, hp)?;
        Ok(())
    })?;
    let mut total = DeviceBuffer::<f32>::zeroed(&context, 1)?;
    time(&context, &stream, "sum_of_squares f32 64M", 4.0 * p as f64, 0.0, || rows::sum_of_squares(&stream, &grads, &mut total))?;
    // The element-wise kernel the library used before (4-byte loads, one atomic a warp).
    time(&context, &stream, "sum_of_squares f32 64M (old element-wise kernel)", 4.0 * p as f64, 0.0, || {
        let config = ferrocuda_host::LaunchConfig::new(1024, 256);
        ferrocuda_kernels_device::for_f32::sum_of_squares::launch(&stream, config, &grads, &mut total)?;
        Ok(())
    })?;
    drop((params, grads, m, v));
    if std::env::var_os("BENCH_ROWS_ONLY").is_some() {
        return Ok(());
    }

    let arch = context.device().arch()?;
    for (s, causal) in [(1024usize, false), (1024, true), (4096, false), (4096, true)] {
        let a = Attention { batch: 4, heads_q: 16, heads_kv: 16, seq_q: s, seq_kv: s, head_dim: 128, layout: Layout::Bhsd, causal, scale: None };
        // One element more than the shape: the views `1..` start 2 bytes in, not 16-byte
        // aligned, which sends the call to the tensor-core (mma.sync) path instead of sm_90's.
        let (q, k, v) = (buf(&context, a.q_len() + 1, 9)?, buf(&context, a.kv_len() + 1, 10)?, buf(&context, a.kv_len() + 1, 11)?);
        let (q, k, v) = (&q, &k, &v);
        let (qa, ka, va) = (q.slice(..a.q_len()), k.slice(..a.kv_len()), v.slice(..a.kv_len()));
        let mut o = buf(&context, a.q_len(), 12)?;
        let mut lse = DeviceBuffer::<f32>::zeroed(&context, a.q_rows())?;
        let flops = 4.0 * (a.batch * a.heads_q) as f64 * (s * s) as f64 * 128.0 * if causal { 0.5 } else { 1.0 };
        let path = attention::hopper_kernel::<bf16>(&a, arch).unwrap_or("not sm_90: the mma.sync path");
        time(&context, &stream, &format!("attention fwd B4 H16 S{s} D128 causal={causal} [{path}]"), 0.0, flops, || {
            attention::attention_forward(&stream, &qa, &ka, &va, &mut o, &mut lse, a)
        })?;
        let (qm, km, vm) = (q.slice(1..), k.slice(1..), v.slice(1..));
        time(&context, &stream, &format!("attention fwd B4 H16 S{s} D128 causal={causal} [mma.sync path]"), 0.0, flops, || {
            attention::attention_forward(&stream, &qm, &km, &vm, &mut o, &mut lse, a)
        })?;
        let (q, k, v) = (qa, ka, va);
        if s == 1024 {
            let (mut dq, mut dk, mut dv) = (buf(&context, a.q_len(), 13)?, buf(&context, a.kv_len(), 14)?, buf(&context, a.kv_len(), 15)?);
            time(&context, &stream, &format!("attention bwd B4 H16 S{s} D128 causal={causal}"), 0.0, 2.5 * flops, || {
                attention::attention_backward(
                    &stream,
                    attention::Backward { q: &q, k: &k, v: &v, out: &o, dout: &q, lse: &lse, dq: &mut dq, dk: &mut dk, dv: &mut dv },
                    a,
                )
            })?;
        }
    }
    Ok(())
}
