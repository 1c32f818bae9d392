//! The ported kernels (src/lib.rs) on a GPU: each one's output is checked against the CPU
//! reference (src/cases.rs), then timed against its CUDA C++ twin (bench/cuda/ports.cu) built by
//! nvcc, launched through the same typed launcher (`launch` for Rust, `launch_in` on the twin's
//! cubin) with the same buffers and configuration. CUDA events, warm-up and timed runs
//! interleaved, median; "twin/Rust" above 1 means the Rust kernel is faster.
//!
//! ```text
//! nvcc -cubin -O3 -arch=sm_90 -DPORTS_VLLM bench/cuda/ports.cu -o DIR/ports_vllm.cubin
//! nvcc -cubin -O3 -arch=sm_90 -DPORTS_LLMC --use_fast_math bench/cuda/ports.cu -o DIR/ports_llmc.cubin
//! cargo run --release -p ferrocuda-ports --example ports_bench -- DIR
//! ```

use ferrocuda::{Context, DeviceBuffer, LaunchConfig, Module, Stream};
use ferrocuda_device::half::bf16;
use gpu_kernels::twins::harness::{self, Result, report};
use gpu_kernels::twins::timing::{Runs, measure};
use ports::cases::{self, Random};
use ports::{I8x16, MOE_TOPK, X128};

const RUNS: Runs = Runs { warmup: 3, timed: 20 };

fn main() -> std::process::ExitCode {
    harness::exit_code("ports_bench", run)
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

/// One row: each implementation's median, bandwidth and time over the first one's.
fn row(name: &str, times: &[Vec<f64>], bytes: f64) -> f64 {
    harness::row(name, 28, &times[0], &times[1], bytes)
}

fn run() -> Result<bool> {
    let dir = std::env::args().nth(1).ok_or("usage: ports_bench DIR (the nvcc-built ports_vllm.cubin and ports_llmc.cubin)")?;
    let context = Context::primary(0)?;
    let stream = Stream::new(&context)?;
    harness::print_header(&context, &stream, RUNS)?;
    let dir = std::path::Path::new(&dir);
    let twins = Twins { vllm: load(&context, &dir.join("ports_vllm.cubin"))?, llmc: load(&context, &dir.join("ports_llmc.cubin"))? };
    let only: Vec<String> = std::env::args().skip(2).collect();
    let wanted = |name: &str| only.is_empty() || only.iter().any(|o| o == name);
    let mut ok = true;
    if wanted("gelu_and_mul") {
        ok &= gelu_and_mul(&context, &stream, &twins)?;
    }
    if wanted("encoder_forward") {
        ok &= encoder_forward(&context, &stream, &twins)?;
    }
    if wanted("global_norm_squared") {
        ok &= global_norm_squared(&context, &stream, &twins)?;
    }
    if wanted("moe_softmax") {
        ok &= moe_softmax(&context, &stream, &twins)?;
    }
    if wanted("dynamic_scaled_int8_quant") {
        ok &= int8_quant(&context, &stream, &twins)?;
    }
    if wanted("softmax_forward") {
        ok &= softmax_forward(&context, &stream, &twins)?;
    }
    if wanted("moe_sum") {
        ok &= moe_sum(&context, &stream, &twins)?;
    }
    Ok(ok)
}

/// vLLM gelu_and_mul, 16384 tokens x d 4096, bf16.
fn gelu_and_mul(context: &Context, stream: &Stream, twins: &Twins) -> Result<bool> {
    let (tokens, d) = (16384usize, 4096usize);
    println!("gelu_and_mul (vLLM): {tokens} tokens, d {d}, bf16");
    let host = Random::new(11).bf16s(tokens * 2 * d, -4.0, 4.0);
    let input = DeviceBuffer::from_slice(context, &host)?;
    let mut out = DeviceBuffer::<bf16>::zeroed(context, tokens * d)?;
    let config = LaunchConfig::new(tokens as u32, d.min(1024) as u32);
    let expected = cases::gelu_and_mul(&host, d);
    ports::gelu_and_mul::launch(stream, config, &input, d as u32, &mut out)?;
    let mut ok = report("Rust", cases::check_gelu_and_mul(&out.to_vec()?, &expected));
    ports::gelu_and_mul::launch_in(&twins.vllm, stream, config, &input, d as u32, &mut out)?;
    ok &= report("nvcc twin", cases::check_gelu_and_mul(&out.to_vec()?, &expected));
    let times = measure(stream, RUNS, &[0, 1], |which, stopwatch| -> ferrocuda::Result<()> {
        stopwatch.start()?;
        match which {
            0 => ports::gelu_and_mul::launch(stream, config, &input, d as u32, &mut out),
            _ => ports::gelu_and_mul::launch_in(&twins.vllm, stream, config, &input, d as u32, &mut out),
        }
    })?;
    row("gelu_and_mul", &times, (tokens * 3 * d * 2) as f64);
    Ok(ok)
}

/// llm.c encoder_forward, B 32 x T 1024 x C 768, vocabulary 50257, bf16.
fn encoder_forward(context: &Context, stream: &Stream, twins: &Twins) -> Result<bool> {
    let (b, t, c, vocab) = (32usize, 1024usize, 768usize, 50257usize);
    println!("encoder_forward (llm.c): B {b}, T {t}, C {c}, vocabulary {vocab}, bf16");
    let mut random = Random::new(12);
    let inp: Vec<i32> = (0..b * t).map(|_| (random.uniform(0.0, vocab as f32) as i32).min(vocab as i32 - 1)).collect();
    let wte_host = random.bf16s(vocab * c, -1.0, 1.0);
    let wpe_host = random.bf16s(t * c, -1.0, 1.0);
    let tokens = DeviceBuffer::from_slice(context, &inp)?;
    let wte = DeviceBuffer::from_slice(context, &cases::pack(&wte_host))?;
    let wpe = DeviceBuffer::from_slice(context, &cases::pack(&wpe_host))?;
    let packs = b * t * c / 8;
    let mut out = DeviceBuffer::<X128>::zeroed(context, packs)?;
    let config = LaunchConfig::for_elements(packs, 256);
    let expected = cases::encoder_forward(&inp, &wte_host, &wpe_host, t, c);
    let (t32, c32) = (t as u32, c as u32);
    ports::encoder_forward::launch(stream, config, &tokens, &wte, &wpe, t32, c32, &mut out)?;
    let mut ok = report("Rust", cases::check_exact("encoder_forward", &cases::unpack(&out.to_vec()?), &expected));
    ports::encoder_forward::launch_in(&twins.llmc, stream, config, &tokens, &wte, &wpe, t32, c32, &mut out)?;
    ok &= report("nvcc twin", cases::check_exact("encoder_forward", &cases::unpack(&out.to_vec()?), &expected));
    let times = measure(stream, RUNS, &[0, 1], |which, stopwatch| -> ferrocuda::Result<()> {
        stopwatch.start()?;
        match which {
            0 => ports::encoder_forward::launch(stream, config, &tokens, &wte, &wpe, t32, c32, &mut out),
            _ => ports::encoder_forward::launch_in(&twins.llmc, stream, config, &tokens, &wte, &wpe, t32, c32, &mut out),
        }
    })?;
    row("encoder_forward", &times, (b * t * c * 2 * 3) as f64);
    Ok(ok)
}

/// llm.c global_norm_squared, 2^27 bf16, llm.c's grid (a full wave of 512-thread blocks).
fn global_norm_squared(context: &Context, stream: &Stream, twins: &Twins) -> Result<bool> {
    let n = 1usize << 27;
    let blocks = context.device().multiprocessor_count()? * 2048 / 512;
    println!("global_norm_squared (llm.c): {n} bf16, {blocks} blocks of 512");
    let host = Random::new(13).bf16s(n, -1.0, 1.0);
    let data = DeviceBuffer::from_slice(context, &host)?;
    let config = LaunchConfig::new(blocks, 512);
    let expected = cases::sum_of_squares(&host);
    let mut partials = DeviceBuffer::<f32>::zeroed(context, blocks as usize)?;
    ports::global_norm_squared::launch(stream, config, &data, &mut partials)?;
    let mut ok = report("Rust", cases::check_norm_partials(&partials.to_vec()?, 0.0, expected));
    let mut partials = DeviceBuffer::<f32>::zeroed(context, blocks as usize)?;
    ports::global_norm_squared::launch_in(&twins.llmc, stream, config, &data, &mut partials)?;
    ok &= report("nvcc twin", cases::check_norm_partials(&partials.to_vec()?, 0.0, expected));
    let times = measure(stream, RUNS, &[0, 1], |which, stopwatch| -> ferrocuda::Result<()> {
        stopwatch.start()?;
        match which {
            0 => ports::global_norm_squared::launch(stream, config, &data, &mut partials),
            _ => ports::global_norm_squared::launch_in(&twins.llmc, stream, config, &data, &mut partials),
        }
    })?;
    row("global_norm_squared", &times, (n * 2) as f64);
    Ok(ok)
}

/// vLLM moeSoftmax<256>, 65536 rows of 160 experts (f32), every 16th row finished.
fn moe_softmax(context: &Context, stream: &Stream, twins: &Twins) -> Result<bool> {
    let (rows, cols) = (65536usize, 160usize);
    println!("moe_softmax (vLLM moeSoftmax<256>): {rows} rows x {cols} experts, f32");
    let host = Random::new(14).f32s(rows * cols, -8.0, 8.0);
    let finished_host: Vec<u8> = (0..rows).map(|r| u8::from(r % 16 == 5)).collect();
    let input = DeviceBuffer::from_slice(context, &host)?;
    let finished = DeviceBuffer::from_slice(context, &finished_host)?;
    let sentinel = -7.5f32;
    let config = LaunchConfig::new(rows as u32, 256);
    let expected = cases::moe_softmax(&host, &finished_host, cols);
    let mut out = DeviceBuffer::from_slice(context, &vec![sentinel; rows * cols])?;
    ports::moe_softmax::launch(stream, config, &input, &finished, cols as u32, &mut out)?;
    let mut ok = report("Rust", cases::check_moe_softmax(&out.to_vec()?, &expected, sentinel));
    let mut out = DeviceBuffer::from_slice(context, &vec![sentinel; rows * cols])?;
    ports::moe_softmax::launch_in(&twins.vllm, stream, config, &input, &finished, cols as u32, &mut out)?;
    ok &= report("nvcc twin", cases::check_moe_softmax(&out.to_vec()?, &expected, sentinel));
    let times = measure(stream, RUNS, &[0, 1], |which, stopwatch| -> ferrocuda::Result<()> {
        stopwatch.start()?;
        match which {
            0 => ports::moe_softmax::launch(stream, config, &input, &finished, cols as u32, &mut out),
            _ => ports::moe_softmax::launch_in(&twins.vllm, stream, config, &input, &finished, cols as u32, &mut out),
        }
    })?;
    row("moe_softmax", &times, (rows * cols * 8) as f64);
    Ok(ok)
}

/// vLLM dynamic_scaled_int8_quant, 16384 tokens x 4096, bf16 in, i8 out.
fn int8_quant(context: &Context, stream: &Stream, twins: &Twins) -> Result<bool> {
    let (tokens, hidden) = (16384usize, 4096usize);
    println!("dynamic_scaled_int8_quant (vLLM): {tokens} tokens x {hidden}, bf16 -> i8");
    let host = Random::new(15).bf16s(tokens * hidden, -3.0, 3.0);
    let input = DeviceBuffer::from_slice(context, &cases::pack(&host))?;
    let mut out = DeviceBuffer::<I8x16>::zeroed(context, tokens * hidden / 16)?;
    let mut scales = DeviceBuffer::<f32>::zeroed(context, tokens)?;
    let config = LaunchConfig::new(tokens as u32, hidden.min(1024) as u32);
    let h16 = (hidden / 16) as u32;
    let (q, s) = cases::int8_quant(&host, hidden);
    ports::dynamic_scaled_int8_quant::launch(stream, config, &input, h16, &mut out, &mut scales)?;
    let mut ok = report("Rust values", cases::check_exact("int8", &cases::unpack_i8(&out.to_vec()?), &q));
    ok &= report("Rust scales", cases::check_exact("scales", &scales.to_vec()?, &s));
    ports::dynamic_scaled_int8_quant::launch_in(&twins.vllm, stream, config, &input, h16, &mut out, &mut scales)?;
    ok &= report("nvcc twin values", cases::check_exact("int8", &cases::unpack_i8(&out.to_vec()?), &q));
    ok &= report("nvcc twin scales", cases::check_exact("scales", &scales.to_vec()?, &s));
    let times = measure(stream, RUNS, &[0, 1], |which, stopwatch| -> ferrocuda::Result<()> {
        stopwatch.start()?;
        match which {
            0 => ports::dynamic_scaled_int8_quant::launch(stream, config, &input, h16, &mut out, &mut scales),
            _ => ports::dynamic_scaled_int8_quant::launch_in(&twins.vllm, stream, config, &input, h16, &mut out, &mut scales),
        }
    })?;
    // The row is read twice (the second read mostly from L2); counted once, as DRAM traffic.
    row("dynamic_scaled_int8_quant", &times, (tokens * hidden * 3) as f64);
    Ok(ok)
}

/// llm.c softmax_forward_kernel5, N = B NH = 96 matrices of T 1024 x 1024, bf16.
fn softmax_forward(context: &Context, stream: &Stream, twins: &Twins) -> Result<bool> {
    let (n, t) = (96usize, 1024usize);
    println!("softmax_forward (llm.c softmax_forward_kernel5): N {n}, T {t}, causal, bf16");
    let host = Random::new(16).bf16s(n * t * t, -6.0, 6.0);
    let inp = DeviceBuffer::from_slice(context, &host)?;
    let sentinel = bf16::from_f32(-3.0);
    let config = LaunchConfig::new((n * t * 32).div_ceil(256) as u32, 256);
    let scale = 0.125f32;
    let expected = cases::causal_softmax(&host, scale, t);
    let mut out = DeviceBuffer::from_slice(context, &vec![sentinel; n * t * t])?;
    ports::softmax_forward::launch(stream, config, &inp, scale, t as u32, &mut out)?;
    let mut ok = report("Rust", cases::check_causal_softmax(&out.to_vec()?, &expected, sentinel));
    let mut out = DeviceBuffer::from_slice(context, &vec![sentinel; n * t * t])?;
    ports::softmax_forward::launch_in(&twins.llmc, stream, config, &inp, scale, t as u32, &mut out)?;
    ok &= report("nvcc twin", cases::check_causal_softmax(&out.to_vec()?, &expected, sentinel));
    let times = measure(stream, RUNS, &[0, 1], |which, stopwatch| -> ferrocuda::Result<()> {
        stopwatch.start()?;
        match which {
            0 => ports::softmax_forward::launch(stream, config, &inp, scale, t as u32, &mut out),
            _ => ports::softmax_forward::launch_in(&twins.llmc, stream, config, &inp, scale, t as u32, &mut out),
        }
    })?;
    // The lower triangle, read once (the second read is L2's) and written once.
    row("softmax_forward", &times, (n * t * (t + 1) / 2 * 2 * 2) as f64);
    Ok(ok)
}

/// vLLM moe_sum<bf16, 2>, 16384 tokens x d 4096.
fn moe_sum(context: &Context, stream: &Stream, twins: &Twins) -> Result<bool> {
    let (tokens, d) = (16384usize, 4096usize);
    println!("moe_sum (vLLM moe_sum_kernel<bf16, {MOE_TOPK}>): {tokens} tokens, d {d}");
    let host = Random::new(17).bf16s(tokens * MOE_TOPK * d, -2.0, 2.0);
    let input = DeviceBuffer::from_slice(context, &host)?;
    let mut out = DeviceBuffer::<bf16>::zeroed(context, tokens * d)?;
    let config = LaunchConfig::new(tokens as u32, d.min(1024) as u32);
    let expected = cases::moe_sum(&host, d);
    ports::moe_sum::launch(stream, config, &input, d as u32, &mut out)?;
    let mut ok = report("Rust", cases::check_moe_sum(&out.to_vec()?, &expected));
    ports::moe_sum::launch_in(&twins.vllm, stream, config, &input, d as u32, &mut out)?;
    ok &= report("nvcc twin", cases::check_moe_sum(&out.to_vec()?, &expected));
    let times = measure(stream, RUNS, &[0, 1], |which, stopwatch| -> ferrocuda::Result<()> {
        stopwatch.start()?;
        match which {
            0 => ports::moe_sum::launch(stream, config, &input, d as u32, &mut out),
            _ => ports::moe_sum::launch_in(&twins.vllm, stream, config, &input, d as u32, &mut out),
        }
    })?;
    row("moe_sum", &times, (tokens * d * (MOE_TOPK + 1) * 2) as f64);
    Ok(ok)
}
