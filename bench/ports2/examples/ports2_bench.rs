//! Issue 30's second held-out port on a GPU: each ported kernel's output is checked against the
//! CPU reference (`ports2::cases`), then timed against its CUDA C++ twin (`cuda/ports2.cu`) built
//! by nvcc, both launched through the same typed launcher (`launch` for Rust, `launch_in` on the
//! twin's cubin) with the same buffers and configuration. CUDA events, warm-up and timed runs
//! interleaved, median; "twin/Rust" above 1 means the Rust kernel is faster.
//!
//! ```text
//! nvcc -cubin -O3 -arch=sm_90 -DPORTS2_VLLM bench/ports2/cuda/ports2.cu -o DIR/ports2_vllm.cubin
//! nvcc -cubin -O3 -arch=sm_90 -DPORTS2_LLMC --use_fast_math bench/ports2/cuda/ports2.cu -o DIR/ports2_llmc.cubin
//! cargo run --release -p ferrocuda-ports2 --example ports2_bench -- DIR [kernel ...]
//! ```

use std::num::NonZeroU32;

use ferrocuda::{Context, DeviceBuffer, LaunchConfig, Module, Stream};
use ferrocuda_device::half::bf16;
use gpu_kernels::twins::harness::{self, Result, report};
use gpu_kernels::twins::timing::{Runs, measure};
use ports2::cases::{self, AdamW, Random};
use ports2::{KEY_COLS, NUM_HEADS, NUM_KV_HEADS, QUERY_COLS, Vec8};
use ports2_llmc::X128;

/// 3 warm-up and 20 timed runs; `PORTS2_RUNS=N` times N runs after one warm-up (1 under
/// compute-sanitizer).
fn runs() -> Runs {
    match std::env::var("PORTS2_RUNS").ok().and_then(|v| v.parse().ok()) {
        Some(timed) => Runs { warmup: 1, timed },
        None => Runs { warmup: 3, timed: 20 },
    }
}

fn main() -> std::process::ExitCode {
    harness::exit_code("ports2_bench", run)
}

/// The twins' modules: vLLM's (built without fast math) and llm.c's (`--use_fast_math`).
struct Twins {
    vllm: Module,
    llmc: Module,
}

fn load(context: &Context, path: &std::path::Path) -> Result<Module> {
    // SAFETY: the twins are launched only through the typed launchers of the Rust kernels of
    // the same names, whose parameter layouts the CUDA C++ source declares alike.
    unsafe { harness::load_twin(context, path) }
}

/// One row: each implementation's median, bandwidth and the twin's time over Rust's.
fn row(name: &str, times: &[Vec<f64>], bytes: f64) -> f64 {
    harness::row(name, 36, &times[0], &times[1], bytes)
}

/// Two rows for a kernel with a fix-round variant: the first try and the fixed port, each
/// against the twin (`times`: first try, twin, fixed).
fn rows3(name: &str, times: &[Vec<f64>], bytes: f64) {
    row(name, &times[..2], bytes);
    row(&format!("{name} (fixed)"), &[times[2].clone(), times[1].clone()], bytes);
}

fn run() -> Result<bool> {
    let dir = std::env::args().nth(1).ok_or("usage: ports2_bench DIR (the nvcc-built ports2_vllm.cubin and ports2_llmc.cubin) [kernel ...]")?;
    let context = Context::primary(0)?;
    let stream = Stream::new(&context)?;
    harness::print_header(&context, &stream, runs())?;
    let dir = std::path::Path::new(&dir);
    let twins = Twins { vllm: load(&context, &dir.join("ports2_vllm.cubin"))?, llmc: load(&context, &dir.join("ports2_llmc.cubin"))? };
    let only: Vec<String> = std::env::args().skip(2).collect();
    let wanted = |name: &str| only.is_empty() || only.iter().any(|o| o == name);
    let mut ok = true;
    type Case = fn(&Context, &Stream, &Twins) -> Result<bool>;
    let all: [(&str, Case); 9] = [
        ("gelu_backward_inplace", gelu_backward_inplace),
        ("adamw", adamw),
        ("layernorm_forward", layernorm_forward),
        ("matmul_backward_bias", matmul_backward_bias),
        ("permute", permute),
        ("fused_add_rms_norm", fused_add_rms_norm),
        ("rotary_embedding", rotary_embedding),
        ("count_and_sort_expert_tokens", count_and_sort),
        ("reduce_single_pass", reduce_single_pass),
    ];
    for (name, case) in all {
        if wanted(name) {
            match case(&context, &stream, &twins) {
                Ok(passed) => ok &= passed,
                Err(error) => {
                    // One case's error (a refused launch, a fault) is reported; the rest still run
                    // unless the context is lost.
                    println!("{name}: FAILED with an error: {error}");
                    ok = false;
                }
            }
        }
    }
    Ok(ok)
}

/// llm.c gelu_backward_inplace: B T 4C = 16384 x 3072 bf16, blocks of 128.
fn gelu_backward_inplace(context: &Context, stream: &Stream, twins: &Twins) -> Result<bool> {
    let n = 16384 * 3072;
    println!("gelu_backward_inplace (llm.c): {n} bf16, in place");
    let mut random = Random::new(21);
    let inp_host = random.bf16s(n, -4.0, 4.0);
    let dout_host = random.bf16s(n, -1.0, 1.0);
    let expected = cases::gelu_backward(&inp_host, &dout_host);
    let dout_packed: Vec<X128> = cases::pack(&dout_host);
    let inp = DeviceBuffer::from_slice(context, &cases::pack::<X128>(&inp_host))?;
    let mut d = DeviceBuffer::from_slice(context, &dout_packed)?;
    let config = LaunchConfig::new((n / (128 * 8)) as u32, 128);
    ports2_llmc::gelu_backward_inplace_kernel::launch(stream, config, &mut d, &inp)?;
    let mut ok = report("Rust", cases::check_close_bf16("gelu_backward", &cases::unpack(&d.to_vec()?), &expected, 1e-3, 1e-2));
    d.copy_from_host(&dout_packed)?;
    ports2_llmc::gelu_backward_inplace_kernel::launch_in(&twins.llmc, stream, config, &mut d, &inp)?;
    ok &= report("nvcc twin", cases::check_close_bf16("gelu_backward", &cases::unpack(&d.to_vec()?), &expected, 1e-3, 1e-2));
    d.copy_from_host(&dout_packed)?;
    ports2_llmc::gelu_backward_inplace_fixed::launch(stream, config, &mut d, &inp)?;
    ok &= report("Rust (fixed)", cases::check_close_bf16("gelu_backward", &cases::unpack(&d.to_vec()?), &expected, 1e-3, 1e-2));
    let times = measure(stream, runs(), &[0, 1, 2], |which, stopwatch| -> ferrocuda::Result<()> {
        stopwatch.start()?;
        match which {
            0 => ports2_llmc::gelu_backward_inplace_kernel::launch(stream, config, &mut d, &inp),
            1 => ports2_llmc::gelu_backward_inplace_kernel::launch_in(&twins.llmc, stream, config, &mut d, &inp),
            _ => ports2_llmc::gelu_backward_inplace_fixed::launch(stream, config, &mut d, &inp),
        }
    })?;
    rows3("gelu_backward_inplace", &times, (n * 2 * 3) as f64);
    Ok(ok)
}

/// llm.c adamw_kernel3: GPT-2 124M's parameters with master weights, blocks of 512.
fn adamw(context: &Context, stream: &Stream, twins: &Twins) -> Result<bool> {
    let n = 124_475_904usize;
    println!("adamw_kernel3 (llm.c): {n} parameters, bf16 params and grads, f32 master, m, v");
    let mut random = Random::new(22);
    let master_host = random.f32s(n, -1.0, 1.0);
    let params_host: Vec<bf16> = master_host.iter().map(|&x| bf16::from_f32(x)).collect();
    let grads_host = random.bf16s(n, -0.1, 0.1);
    let m_host = random.f32s(n, -0.01, 0.01);
    let v_host = random.f32s(n, 0.0, 1e-4);
    let h = AdamW::step3();
    let expected = cases::adamw(&master_host, &grads_host, &m_host, &v_host, h, 512);
    let grads = DeviceBuffer::from_slice(context, &grads_host)?;
    let mut p = DeviceBuffer::from_slice(context, &params_host)?;
    let mut ms = DeviceBuffer::from_slice(context, &master_host)?;
    let mut m = DeviceBuffer::from_slice(context, &m_host)?;
    let mut v = DeviceBuffer::from_slice(context, &v_host)?;
    let config = LaunchConfig::new(n.div_ceil(512) as u32, 512);
    macro_rules! launch {
        ($how:ident $(, $module:expr)?) => {
            ports2_llmc::adamw_kernel3::$how($($module,)? stream, config, &mut p, &mut ms, &grads, &mut m, &mut v, h.lr, h.beta1, h.beta2, h.beta1_correction, h.beta2_correction, h.eps, h.weight_decay, h.grad_scale, h.seed)
        };
    }
    launch!(launch)?;
    let mut ok = report("Rust", cases::check_adamw(&p.to_vec()?, &ms.to_vec()?, &m.to_vec()?, &v.to_vec()?, &expected));
    p.copy_from_host(&params_host)?;
    ms.copy_from_host(&master_host)?;
    m.copy_from_host(&m_host)?;
    v.copy_from_host(&v_host)?;
    launch!(launch_in, &twins.llmc)?;
    ok &= report("nvcc twin", cases::check_adamw(&p.to_vec()?, &ms.to_vec()?, &m.to_vec()?, &v.to_vec()?, &expected));
    let times = measure(stream, runs(), &[0, 1], |which, stopwatch| -> ferrocuda::Result<()> {
        stopwatch.start()?;
        match which {
            0 => launch!(launch),
            _ => launch!(launch_in, &twins.llmc),
        }
    })?;
    // grads 2 + m, v, master 4 each read; m, v, master 4 each and params 2 written.
    row("adamw_kernel3", &times, (n * 28) as f64);
    Ok(ok)
}

/// llm.c layernorm_forward_kernel3: N = B T = 32768 rows of C = 768, blocks of 256.
fn layernorm_forward(context: &Context, stream: &Stream, twins: &Twins) -> Result<bool> {
    let (n, c) = (32768usize, 768usize);
    println!("layernorm_forward_kernel3 (llm.c): N {n}, C {c}, bf16");
    let mut random = Random::new(23);
    let inp_host = random.bf16s(n * c, -3.0, 3.0);
    let weight_host = random.bf16s(c, 0.5, 1.5);
    let bias_host = random.bf16s(c, -0.5, 0.5);
    let (out_e, mean_e, rstd_e) = cases::layernorm(&inp_host, &weight_host, &bias_host, n, c);
    let inp = DeviceBuffer::from_slice(context, &inp_host)?;
    let weight = DeviceBuffer::from_slice(context, &weight_host)?;
    let bias = DeviceBuffer::from_slice(context, &bias_host)?;
    let mut out = DeviceBuffer::<bf16>::zeroed(context, n * c)?;
    let mut mean = DeviceBuffer::<f32>::zeroed(context, n)?;
    let mut rstd = DeviceBuffer::<f32>::zeroed(context, n)?;
    let config = LaunchConfig::new((n * 32).div_ceil(256) as u32, 256);
    let (n32, c32) = (n as u32, c as u32);
    let mut ok = true;
    for which in 0..3 {
        out.fill(bf16::ZERO)?;
        match which {
            0 => ports2_llmc::layernorm_forward_kernel3::launch(stream, config, &mut out, &mut mean, &mut rstd, &inp, &weight, &bias, n32, c32)?,
            1 => {
                ports2_llmc::layernorm_forward_kernel3::launch_in(&twins.llmc, stream, config, &mut out, &mut mean, &mut rstd, &inp, &weight, &bias, n32, c32)?
            }
            _ => ports2_llmc::layernorm_forward_fixed::launch(stream, config, &mut out, &mut mean, &mut rstd, &inp, &weight, &bias, n32, c32)?,
        }
        let who = ["Rust", "nvcc twin", "Rust (fixed)"][which];
        ok &= report(&format!("{who} mean"), cases::check_close("mean", &mean.to_vec()?, &mean_e, 1e-5, 1e-4));
        ok &= report(&format!("{who} rstd"), cases::check_close("rstd", &rstd.to_vec()?, &rstd_e, 1e-5, 1e-4));
        ok &= report(&format!("{who} out"), cases::check_close_bf16("out", &out.to_vec()?, &out_e, 1e-2, 1e-2));
    }
    let times = measure(stream, runs(), &[0, 1, 2], |which, stopwatch| -> ferrocuda::Result<()> {
        stopwatch.start()?;
        match which {
            0 => ports2_llmc::layernorm_forward_kernel3::launch(stream, config, &mut out, &mut mean, &mut rstd, &inp, &weight, &bias, n32, c32),
            1 => ports2_llmc::layernorm_forward_kernel3::launch_in(&twins.llmc, stream, config, &mut out, &mut mean, &mut rstd, &inp, &weight, &bias, n32, c32),
            _ => ports2_llmc::layernorm_forward_fixed::launch(stream, config, &mut out, &mut mean, &mut rstd, &inp, &weight, &bias, n32, c32),
        }
    })?;
    rows3("layernorm_forward_kernel3", &times, (n * c * 2 * 2 + n * 8) as f64);
    Ok(ok)
}

/// llm.c matmul_backward_bias_kernel9<float, true>: B T = 32768 rows of OC = 768 (and 3072),
/// blocks of (4, 8, 32), llm.c's grid (a full GPU of 1024-thread blocks).
fn matmul_backward_bias(context: &Context, stream: &Stream, twins: &Twins) -> Result<bool> {
    let mut ok = true;
    for oc in [768usize, 3072] {
        let (b, t) = (32usize, 1024usize);
        let sms = context.device().multiprocessor_count()?;
        let grid_x = oc.div_ceil(64) as u32;
        let grid_y = (2048 * sms / (1024 * grid_x)).max(1);
        println!("matmul_backward_bias_kernel9 (llm.c): B T {}, OC {oc}, grid ({grid_x}, {grid_y}), bf16 -> f32 partials", b * t);
        let dout_host = Random::new(24 + oc as u64).bf16s(b * t * oc, -1.0, 1.0);
        let (sums, abs) = cases::column_sums(&dout_host, oc);
        let dout = DeviceBuffer::from_slice(context, &cases::pack::<X128>(&dout_host))?;
        let mut partials = DeviceBuffer::<f32>::zeroed(context, oc * grid_y as usize)?;
        let config = LaunchConfig::new((grid_x, grid_y), (4, 8, 32));
        let (b32, t32, oc32) = (b as u32, t as u32, oc as u32);
        ports2_llmc::matmul_backward_bias_kernel9::launch(stream, config, &mut partials, &dout, b32, t32, oc32)?;
        ok &= report("Rust", cases::check_bias_partials(&partials.to_vec()?, oc, &sums, &abs));
        partials.fill(0.0)?;
        ports2_llmc::matmul_backward_bias_kernel9::launch_in(&twins.llmc, stream, config, &mut partials, &dout, b32, t32, oc32)?;
        ok &= report("nvcc twin", cases::check_bias_partials(&partials.to_vec()?, oc, &sums, &abs));
        let times = measure(stream, runs(), &[0, 1], |which, stopwatch| -> ferrocuda::Result<()> {
            stopwatch.start()?;
            match which {
                0 => ports2_llmc::matmul_backward_bias_kernel9::launch(stream, config, &mut partials, &dout, b32, t32, oc32),
                _ => ports2_llmc::matmul_backward_bias_kernel9::launch_in(&twins.llmc, stream, config, &mut partials, &dout, b32, t32, oc32),
            }
        })?;
        row(&format!("matmul_backward_bias_kernel9 OC {oc}"), &times, (b * t * oc * 2) as f64);
    }
    Ok(ok)
}

/// llm.c permute_kernel: B 16, N 1024, NH 12, d 64 (GPT-2 124M's qkv), blocks of 256.
fn permute(context: &Context, stream: &Stream, twins: &Twins) -> Result<bool> {
    let (b, n, nh, d) = (16usize, 1024usize, 12usize, 64usize);
    println!("permute_kernel (llm.c): B {b}, N {n}, NH {nh}, d {d}, bf16");
    let inp_host = Random::new(25).bf16s(b * n * 3 * nh * d, -1.0, 1.0);
    let expected = cases::permute(&inp_host, b, n, nh, d);
    let total = b * nh * n * d;
    let inp = DeviceBuffer::from_slice(context, &inp_host)?;
    let mut q = DeviceBuffer::<bf16>::zeroed(context, total)?;
    let mut k = DeviceBuffer::<bf16>::zeroed(context, total)?;
    let mut v = DeviceBuffer::<bf16>::zeroed(context, total)?;
    let config = LaunchConfig::new(total.div_ceil(256) as u32, 256);
    let nz = |x: usize| NonZeroU32::new(x as u32).unwrap();
    let (bb, nn, hh, dd) = (b as u32, nz(n), nz(nh), nz(d));
    let mut ok = true;
    for which in 0..3 {
        q.fill(bf16::ZERO)?;
        k.fill(bf16::ZERO)?;
        v.fill(bf16::ZERO)?;
        match which {
            0 => ports2_llmc::permute_kernel::launch(stream, config, &mut q, &mut k, &mut v, &inp, bb, nn, hh, dd)?,
            1 => ports2_llmc::permute_kernel::launch_in(&twins.llmc, stream, config, &mut q, &mut k, &mut v, &inp, bb, nn, hh, dd)?,
            _ => ports2_llmc::permute_fixed::launch(stream, config, &mut q, &mut k, &mut v, &inp, bb, nn, hh, dd)?,
        }
        let who = ["Rust", "nvcc twin", "Rust (fixed)"][which];
        for (name, (buf, e)) in ["q", "k", "v"].iter().zip([(&q, &expected[0]), (&k, &expected[1]), (&v, &expected[2])]) {
            ok &= report(&format!("{who} {name}"), cases::check_exact(name, &buf.to_vec()?, e));
        }
    }
    let times = measure(stream, runs(), &[0, 1, 2], |which, stopwatch| -> ferrocuda::Result<()> {
        stopwatch.start()?;
        match which {
            0 => ports2_llmc::permute_kernel::launch(stream, config, &mut q, &mut k, &mut v, &inp, bb, nn, hh, dd),
            1 => ports2_llmc::permute_kernel::launch_in(&twins.llmc, stream, config, &mut q, &mut k, &mut v, &inp, bb, nn, hh, dd),
            _ => ports2_llmc::permute_fixed::launch(stream, config, &mut q, &mut k, &mut v, &inp, bb, nn, hh, dd),
        }
    })?;
    rows3("permute_kernel", &times, (total * 3 * 2 * 2) as f64);
    Ok(ok)
}

/// vLLM fused_add_rms_norm<bf16, 8>: 16384 tokens x 4096, blocks of 256 (256 tokens or more).
fn fused_add_rms_norm(context: &Context, stream: &Stream, twins: &Twins) -> Result<bool> {
    let (tokens, hidden) = (16384usize, 4096usize);
    println!("fused_add_rms_norm_kernel<bf16, 8> (vLLM): {tokens} tokens x {hidden}, in place");
    let mut random = Random::new(26);
    let input_host: Vec<Vec8> = cases::pack(&random.bf16s(tokens * hidden, -2.0, 2.0));
    let residual_host: Vec<Vec8> = cases::pack(&random.bf16s(tokens * hidden, -2.0, 2.0));
    let weight_host = random.bf16s(hidden, 0.5, 1.5);
    let eps = 1e-6f32;
    let (in_e, res_e) = cases::fused_add_rms_norm(&cases::unpack(&input_host), &cases::unpack(&residual_host), &weight_host, hidden, eps);
    let weight = DeviceBuffer::from_slice(context, &cases::pack::<Vec8>(&weight_host))?;
    let mut x = DeviceBuffer::from_slice(context, &input_host)?;
    let mut r = DeviceBuffer::from_slice(context, &residual_host)?;
    let config = LaunchConfig::new(tokens as u32, hidden.min(256) as u32);
    let (stride, t32, vh) = (hidden as i64, tokens as i32, (hidden / 8) as u32);
    let mut ok = true;
    for which in 0..2 {
        x.copy_from_host(&input_host)?;
        r.copy_from_host(&residual_host)?;
        match which {
            0 => ports2::fused_add_rms_norm_kernel::launch(stream, config, &mut x, stride, &mut r, &weight, eps, t32, vh)?,
            _ => ports2::fused_add_rms_norm_kernel::launch_in(&twins.vllm, stream, config, &mut x, stride, &mut r, &weight, eps, t32, vh)?,
        }
        let who = ["Rust", "nvcc twin"][which];
        ok &= report(&format!("{who} residual"), cases::check_exact("residual", &cases::unpack(&r.to_vec()?), &res_e));
        // Two bf16 ulps: the reference's rsqrt is exact, the GPU's rsqrtf 2 ulp (the first run saw 2-ulp
        // differences in 3 and 9 of 67M values, Rust and nvcc).
        ok &= report(&format!("{who} input"), cases::check_close_bf16("input", &cases::unpack(&x.to_vec()?), &in_e, 1e-3, 1.6e-2));
    }
    let times = measure(stream, runs(), &[0, 1], |which, stopwatch| -> ferrocuda::Result<()> {
        stopwatch.start()?;
        match which {
            0 => ports2::fused_add_rms_norm_kernel::launch(stream, config, &mut x, stride, &mut r, &weight, eps, t32, vh),
            _ => ports2::fused_add_rms_norm_kernel::launch_in(&twins.vllm, stream, config, &mut x, stride, &mut r, &weight, eps, t32, vh),
        }
    })?;
    // input and residual read, residual written, residual read again (L2, not counted), input written.
    row("fused_add_rms_norm_kernel", &times, (tokens * hidden * 2 * 4) as f64);
    Ok(ok)
}

/// vLLM rotary_embedding_kernel<bf16, bf16, true>: 16384 tokens, 32 query and 8 key heads of 128,
/// positions below 4096, blocks of 512.
fn rotary_embedding(context: &Context, stream: &Stream, twins: &Twins) -> Result<bool> {
    let tokens = 16384usize;
    let head = 128usize;
    println!("rotary_embedding_kernel<bf16, bf16, NeoX> (vLLM): {tokens} tokens, {NUM_HEADS} q / {NUM_KV_HEADS} kv heads of {head}, in place");
    let mut random = Random::new(27);
    let positions_host: Vec<i64> = (0..tokens).map(|_| (random.next_u64() % 4096) as i64).collect();
    let cache_host = cases::cos_sin_cache(4096, head, 500000.0);
    let query_host = random.bf16s(tokens * QUERY_COLS as usize, -2.0, 2.0);
    let key_host = random.bf16s(tokens * KEY_COLS as usize, -2.0, 2.0);
    let q_e = cases::rotary_neox(&query_host, &positions_host, &cache_host, NUM_HEADS as usize, head);
    let k_e = cases::rotary_neox(&key_host, &positions_host, &cache_host, NUM_KV_HEADS as usize, head);
    let positions = DeviceBuffer::from_slice(context, &positions_host)?;
    let cache = DeviceBuffer::from_slice(context, &cache_host)?;
    let mut q = DeviceBuffer::from_slice(context, &query_host)?;
    let mut k = DeviceBuffer::from_slice(context, &key_host)?;
    let config = LaunchConfig::new(tokens as u32, (NUM_HEADS * 64).min(512));
    let (h32, qs, ks) = (head as i32, QUERY_COLS as i64, KEY_COLS as i64);
    let (nh, nkv) = (NUM_HEADS as i32, NUM_KV_HEADS as i32);
    macro_rules! launch {
        ($how:ident $(, $module:expr)?) => {
            ports2::rotary_embedding_kernel::$how($($module,)? stream, config, &positions, &mut q, &mut k, &cache, h32, qs, ks, head as i64, nh, nkv, h32, 0, false)
        };
    }
    let mut ok = true;
    for which in 0..2 {
        q.copy_from_host(&query_host)?;
        k.copy_from_host(&key_host)?;
        match which {
            0 => launch!(launch)?,
            _ => launch!(launch_in, &twins.vllm)?,
        }
        let who = ["Rust", "nvcc twin"][which];
        ok &= report(&format!("{who} query"), cases::check_close_bf16("query", &q.to_vec()?, &q_e, 1e-2, 8e-3));
        ok &= report(&format!("{who} key"), cases::check_close_bf16("key", &k.to_vec()?, &k_e, 1e-2, 8e-3));
    }
    let times = measure(stream, runs(), &[0, 1], |which, stopwatch| -> ferrocuda::Result<()> {
        stopwatch.start()?;
        match which {
            0 => launch!(launch),
            _ => launch!(launch_in, &twins.vllm),
        }
    })?;
    row("rotary_embedding_kernel", &times, (tokens * (QUERY_COLS + KEY_COLS) as usize * 2 * 2) as f64);
    Ok(ok)
}

/// vLLM count_and_sort_expert_tokens_kernel: 16384 tokens x top-8 of 256 experts (DeepSeek-V3's
/// routing), segments padded to 64, blocks of 256, vLLM's grid. The counters are reset before
/// every run (outside the timed interval).
fn count_and_sort(context: &Context, stream: &Stream, twins: &Twins) -> Result<bool> {
    let (numel, experts) = (16384usize * 8, 256usize);
    println!("count_and_sort_expert_tokens_kernel (vLLM): {numel} routed slots, {experts} experts, padded to 64");
    let mut random = Random::new(28);
    let topk_host: Vec<i32> = (0..numel).map(|_| (random.next_u64() % experts as u64) as i32).collect();
    let offsets = cases::expert_offsets(&topk_host, experts, 64);
    let padding = numel as i32;
    let sorted_init = vec![padding; *offsets.last().unwrap() as usize];
    let topk = DeviceBuffer::from_slice(context, &topk_host)?;
    let cumsum_init = DeviceBuffer::from_slice(context, &offsets)?;
    let mut cumsum = DeviceBuffer::from_slice(context, &offsets)?;
    let mut sorted = DeviceBuffer::from_slice(context, &sorted_init)?;
    let config = LaunchConfig::new(numel.div_ceil(256).min(65535) as u32, 256);
    let mut ok = true;
    for which in 0..2 {
        cumsum.copy_from_host(&offsets)?;
        sorted.copy_from_host(&sorted_init)?;
        match which {
            0 => ports2::count_and_sort_expert_tokens_kernel::launch(stream, config, &topk, &mut sorted, &mut cumsum, numel as u64)?,
            _ => ports2::count_and_sort_expert_tokens_kernel::launch_in(&twins.vllm, stream, config, &topk, &mut sorted, &mut cumsum, numel as u64)?,
        }
        let who = ["Rust", "nvcc twin"][which];
        ok &= report(who, cases::check_sorted(&sorted.to_vec()?, &cumsum.to_vec()?, &topk_host, &offsets, padding));
    }
    let times = measure(stream, runs(), &[0, 1], |which, stopwatch| -> ferrocuda::Result<()> {
        cumsum.copy_from_device_async(&cumsum_init, stream)?;
        stopwatch.start()?;
        match which {
            0 => ports2::count_and_sort_expert_tokens_kernel::launch(stream, config, &topk, &mut sorted, &mut cumsum, numel as u64),
            _ => ports2::count_and_sort_expert_tokens_kernel::launch_in(&twins.vllm, stream, config, &topk, &mut sorted, &mut cumsum, numel as u64),
        }
    })?;
    row("count_and_sort_expert_tokens_kernel", &times, (numel * 8) as f64);
    Ok(ok)
}

/// CUDA samples threadFenceReduction `reduceSinglePass<256, false>`: 2^24 floats, the sample's
/// launch (blocks of 256, `min(64, n / 512)` blocks), the last block sums the 64 partials. The
/// retirement counter is zeroed once: each launch leaves it 0.
fn reduce_single_pass(context: &Context, stream: &Stream, twins: &Twins) -> Result<bool> {
    let n = 1usize << 24;
    let blocks = (n as u32).div_ceil(2 * ports2::REDUCE_THREADS).clamp(1, ports2::REDUCE_MAX_BLOCKS);
    println!("reduce_single_pass (CUDA samples threadFenceReduction): {n} floats, {blocks} blocks of {}", ports2::REDUCE_THREADS);
    let x_host = Random::new(29).f32s(n, -1.0, 1.0);
    let x = DeviceBuffer::from_slice(context, &x_host)?;
    let mut partials = DeviceBuffer::from_slice(context, &vec![0.0f32; blocks as usize])?;
    let mut counter = DeviceBuffer::from_slice(context, &[0u32])?;
    let mut total = DeviceBuffer::from_slice(context, &[f32::NAN])?;
    let config = LaunchConfig::new(blocks, ports2::REDUCE_THREADS);
    let mut ok = true;
    for which in 0..3 {
        total.copy_from_host(&[f32::NAN])?;
        match which {
            0 => ports2::reduce_single_pass::launch(stream, config, &x, &mut partials, &mut counter, &mut total)?,
            1 => ports2::reduce_single_pass::launch_in(&twins.vllm, stream, config, &x, &mut partials, &mut counter, &mut total)?,
            _ => ports2::reduce_single_pass_fixed::launch(stream, config, &x, &mut partials, &mut counter, &mut total)?,
        }
        let who = ["Rust", "nvcc twin", "Rust (fixed)"][which];
        ok &= report(who, cases::check_sum("total", total.to_vec()?[0], &x_host));
        ok &= report(&format!("{who}: the counter is back at 0"), if counter.to_vec()? == [0] { Ok(()) } else { Err("not reset".into()) });
    }
    let times = measure(stream, runs(), &[0, 1, 2], |which, stopwatch| -> ferrocuda::Result<()> {
        stopwatch.start()?;
        match which {
            0 => ports2::reduce_single_pass::launch(stream, config, &x, &mut partials, &mut counter, &mut total),
            1 => ports2::reduce_single_pass::launch_in(&twins.vllm, stream, config, &x, &mut partials, &mut counter, &mut total),
            _ => ports2::reduce_single_pass_fixed::launch(stream, config, &x, &mut partials, &mut counter, &mut total),
        }
    })?;
    rows3("reduce_single_pass", &times, (n * 4) as f64);
    Ok(ok)
}
