//! The GPU bench of bench/ports6: each Rust port beside its CUDA C++ twin (the nvcc-built
//! cubins of bench/ports6/cuda/ports6.cu, launched through the raw-pointer stubs of
//! `ferrocuda_ports6_twins`), on the same grid and the same inputs, in one process. The timing
//! harness is bench/timing's (`ferrocuda_bench_timing`).
//!
//! `ports6_bench LLMC_CUBIN VLLM_CUBIN`: for every kernel, 3 warm-up launches of each into its
//! own output, then 7 passes that time `reps` back-to-back launches of one and then of the other (the order alternating per pass) with CUDA events;
//! each time is the median over the passes of the time per launch. `twin/ours` above 1: the
//! port is faster. Then the two outputs are compared (the same inputs every launch, so the
//! same values; a port that differs from its twin says MISMATCH). A report, not a test:
//! nothing is asserted.

use ferrocuda::{Context, DeviceBuffer, LaunchConfig, Stream};
use ferrocuda_bench_timing::{self as timing, PASSES, Result, Table, WARMUP, check_bits, nz, ptr, reps_for, time_pair};
use ferrocuda_ports6::*;
use ferrocuda_ports6_llmc as llmc;
use ferrocuda_ports6_twins as twins;
use ferrocuda_ports6_vllm as vllm;
use half::bf16;

/// The bench's report lines' column widths (kernel name, size).
const TABLE: Table = Table::new(38, 34);

/// Runs one case; an error (a refused launch, a missing kernel) is printed and the next case
/// runs. `PORTS6_ONLY=L3,V3` runs only the cases whose labels start with one of the listed
/// prefixes (session 18's GPU call ran `L3,V3`: the originals and the re-ports beside them).
/// Not the shared `timing::case`: this bench's error line has always been `ERROR: <error>`.
fn case(label: &str, f: impl FnOnce() -> Result<()>) {
    if !timing::selected("PORTS6_ONLY", label) {
        return;
    }
    if let Err(error) = f() {
        println!("ERROR: {error}");
    }
}

/// [`timing::check_f32`] with this port's relative error and no output name.
fn check_f32(ours: &[f32], twin: &[f32], tolerance: f32) -> String {
    timing::check_f32("", ours, twin, tolerance, max_rel_err)
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, llmc_cubin, vllm_cubin] = &args[..] else {
        return Err("usage: ports6_bench LLMC_CUBIN VLLM_CUBIN (the nvcc-built twins of bench/ports6/cuda/ports6.cu)".into());
    };
    let context = Context::primary(0)?;
    let stream = Stream::new(&context)?;
    timing::print_device(&context)?;
    // SAFETY: the cubins are nvcc's output for ports6.cu (the job script builds them there).
    let llmc_module = unsafe { timing::load_cubin(&context, "ports6_llmc", llmc_cubin)? };
    // SAFETY: as above.
    let vllm_module = unsafe { timing::load_cubin(&context, "ports6_vllm", vllm_cubin)? };
    println!("twins: {llmc_cubin}, {vllm_cubin}; each time the median of {PASSES} passes (ms per launch), after {WARMUP} warm-ups");
    println!("{}", TABLE.header());

    // L1: rope_forward_kernel1, llm.c's main: B 8, T 1024, 32 heads of 128; block 128.
    case("L1", || -> Result<()> {
        let (b, t, nh, hd) = (8u32, 1024u32, 32u32, 128u32);
        let n = (b * t * nh * hd) as usize;
        let inp = DeviceBuffer::from_slice(&context, &random_f32(n, 21))?;
        let freqs = DeviceBuffer::from_slice(&context, &random_f32((t * hd) as usize, 22))?;
        let mut ours = DeviceBuffer::<f32>::zeroed(&context, n)?;
        let twin_out = DeviceBuffer::<f32>::zeroed(&context, n)?;
        let config = LaunchConfig::new((n as u32 / 2).div_ceil(128), 128);
        let mut run_ours = || -> Result<()> {
            llmc::rope_forward_kernel1::launch(&stream, config, &mut ours, &inp, &freqs, nz(t), nz(nh), hd)?;
            Ok(())
        };
        let run_twin = || -> Result<()> {
            // SAFETY: the buffers hold what the kernel reads and writes at this shape.
            unsafe {
                twins::twin_rope_forward_kernel1::launch_in(
                    &llmc_module,
                    &stream,
                    config,
                    ptr(&twin_out),
                    ptr(&inp),
                    ptr(&freqs),
                    b as i32,
                    t as i32,
                    nh as i32,
                    hd as i32,
                )?
            };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_ours)?;
        let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
        stream.synchronize()?;
        let check = check_f32(&ours.to_vec()?, &twin_out.to_vec()?, 1e-6);
        TABLE.row("llm.c rope_forward_kernel1", &format!("B{b} T{t} NH{nh} HD{hd} f32"), times, &check);
        Ok(())
    });

    // L2: repkv_backward_kernel1: B 8, T 1024, 32 query heads, 8 KV heads of 128; block 128.
    case("L2", || -> Result<()> {
        let (b, t, nh, nh_kv, hd) = (8u32, 1024u32, 32u32, 8u32, 128u32);
        let rep = nh / nh_kv;
        let n = (b * t * 3 * nh * hd) as usize;
        let dout = DeviceBuffer::from_slice(&context, &random_f32(n, 23))?;
        let m = (b * t * (nh + 2 * nh_kv) * hd) as usize;
        let mut ours = DeviceBuffer::<f32>::zeroed(&context, m)?;
        let twin_out = DeviceBuffer::<f32>::zeroed(&context, m)?;
        let config = LaunchConfig::new((n as u32).div_ceil(128), 128);
        let mut run_ours = || -> Result<()> {
            llmc::repkv_backward_kernel1::launch(&stream, config, &mut ours, &dout, nz(t), nz(nh), nz(rep), nz(hd))?;
            Ok(())
        };
        let run_twin = || -> Result<()> {
            // SAFETY: as above.
            unsafe {
                twins::twin_repkv_backward_kernel1::launch_in(
                    &llmc_module,
                    &stream,
                    config,
                    ptr(&twin_out),
                    ptr(&dout),
                    b as i32,
                    t as i32,
                    nh as i32,
                    rep as i32,
                    hd as i32,
                )?
            };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_ours)?;
        let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
        stream.synchronize()?;
        let check = check_f32(&ours.to_vec()?, &twin_out.to_vec()?, 1e-6);
        TABLE.row("llm.c repkv_backward_kernel1", &format!("B{b} T{t} NH{nh} KV{nh_kv} HD{hd} f32"), times, &check);
        Ok(())
    });

    // L3: matmul_forward_kernel1: B 8, T 256 (BT 2048), C 768, OC 3072, with bias; 16 x 16.
    case("L3", || -> Result<()> {
        let (bt, c, oc) = (2048u32, 768u32, 3072u32);
        let inp = DeviceBuffer::from_slice(&context, &random_f32((bt * c) as usize, 24))?;
        let weight = DeviceBuffer::from_slice(&context, &random_f32((oc * c) as usize, 25))?;
        let bias = DeviceBuffer::from_slice(&context, &random_f32(oc as usize, 26))?;
        let mut ours = DeviceBuffer::<f32>::zeroed(&context, (bt * oc) as usize)?;
        let twin_out = DeviceBuffer::<f32>::zeroed(&context, (bt * oc) as usize)?;
        let config = LaunchConfig::new((bt.div_ceil(16), oc.div_ceil(16)), (16, 16));
        let mut run_ours = || -> Result<()> {
            llmc::matmul_forward_kernel1::launch(&stream, config, &mut ours, &inp, &weight, Some(&bias), bt, c, oc)?;
            Ok(())
        };
        let run_twin = || -> Result<()> {
            // SAFETY: as above.
            unsafe {
                twins::twin_matmul_forward_kernel1::launch_in(
                    &llmc_module,
                    &stream,
                    config,
                    ptr(&twin_out),
                    ptr(&inp),
                    ptr(&weight),
                    ptr(&bias),
                    bt as i32,
                    c as i32,
                    oc as i32,
                )?
            };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_ours)?;
        let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
        stream.synchronize()?;
        let check = check_f32(&ours.to_vec()?, &twin_out.to_vec()?, 1e-5);
        TABLE.row("llm.c matmul_forward_kernel1", &format!("BT{bt} C{c} OC{oc} f32, 16x16"), times, &check);
        Ok(())
    });

    // L3 s18: matmul_forward_kernel1 with the transposed cell map (`DisjointMatrix<f32, true>`),
    // the same size and grid as L3, against the same twin.
    case("L3-cells", || -> Result<()> {
        let (bt, c, oc) = (2048u32, 768u32, 3072u32);
        let inp = DeviceBuffer::from_slice(&context, &random_f32((bt * c) as usize, 24))?;
        let weight = DeviceBuffer::from_slice(&context, &random_f32((oc * c) as usize, 25))?;
        let bias = DeviceBuffer::from_slice(&context, &random_f32(oc as usize, 26))?;
        let mut ours = DeviceBuffer::<f32>::zeroed(&context, (bt * oc) as usize)?;
        let twin_out = DeviceBuffer::<f32>::zeroed(&context, (bt * oc) as usize)?;
        let config = LaunchConfig::new((bt.div_ceil(16), oc.div_ceil(16)), (16, 16));
        let mut run_ours = || -> Result<()> {
            llmc::matmul_forward_kernel1_cells::launch(&stream, config, &mut ours, &inp, &weight, Some(&bias), bt, c, oc)?;
            Ok(())
        };
        let run_twin = || -> Result<()> {
            // SAFETY: as above.
            unsafe {
                twins::twin_matmul_forward_kernel1::launch_in(
                    &llmc_module,
                    &stream,
                    config,
                    ptr(&twin_out),
                    ptr(&inp),
                    ptr(&weight),
                    ptr(&bias),
                    bt as i32,
                    c as i32,
                    oc as i32,
                )?
            };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_ours)?;
        let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
        stream.synchronize()?;
        let check = check_f32(&ours.to_vec()?, &twin_out.to_vec()?, 1e-5);
        TABLE.row("llm.c matmul_forward_kernel1 (cells^T)", &format!("BT{bt} C{c} OC{oc} f32, 16x16"), times, &check);
        Ok(())
    });

    // L4: softmax_forward_kernel2: N 2048 rows of V 50257 (llm.c's main: B 8, T 1024); block 512.
    case("L4", || -> Result<()> {
        let (n, c, block) = (2048u32, 50257u32, 512u32);
        let data: Vec<f32> = random_f32((n * c) as usize, 27).into_iter().map(|x| x * 8.0).collect();
        let inp = DeviceBuffer::from_slice(&context, &data)?;
        let mut ours = DeviceBuffer::<f32>::zeroed(&context, data.len())?;
        let twin_out = DeviceBuffer::<f32>::zeroed(&context, data.len())?;
        let config = LaunchConfig::new(n, block).with_shared_bytes(block * 4);
        let mut run_ours = || -> Result<()> {
            llmc::softmax_forward_kernel2::launch(&stream, config, &mut ours, &inp, c)?;
            Ok(())
        };
        let run_twin = || -> Result<()> {
            // SAFETY: as above.
            unsafe { twins::twin_softmax_forward_kernel2::launch_in(&llmc_module, &stream, config, ptr(&twin_out), ptr(&inp), n as i32, c as i32)? };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_ours)?;
        let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
        stream.synchronize()?;
        let check = check_f32(&ours.to_vec()?, &twin_out.to_vec()?, 1e-4);
        TABLE.row("llm.c softmax_forward_kernel2", &format!("N{n} C{c} f32, block {block}"), times, &check);
        // The fix round (docs/performance.md's reqntid row): the same body at a fixed 512.
        let mut run_fixed = || -> Result<()> {
            llmc::softmax_forward_kernel2_reqntid512::launch(&stream, config, &mut ours, &inp, c)?;
            Ok(())
        };
        let run_twin = || -> Result<()> {
            // SAFETY: as above.
            unsafe { twins::twin_softmax_forward_kernel2::launch_in(&llmc_module, &stream, config, ptr(&twin_out), ptr(&inp), n as i32, c as i32)? };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_fixed)?;
        let times = time_pair(&context, &stream, reps, run_fixed, run_twin)?;
        stream.synchronize()?;
        let check = check_f32(&ours.to_vec()?, &twin_out.to_vec()?, 1e-4);
        TABLE.row("  fix: softmax_forward_kernel2 reqntid(512)", &format!("N{n} C{c} f32, block {block}"), times, &check);
        // Session 18: the per-thread shared region (`per_thread::<1>()`, `ThreadSlot`s).
        let mut run_slots = || -> Result<()> {
            llmc::softmax_forward_kernel2_slots::launch(&stream, config, &mut ours, &inp, c)?;
            Ok(())
        };
        let run_twin = || -> Result<()> {
            // SAFETY: as above.
            unsafe { twins::twin_softmax_forward_kernel2::launch_in(&llmc_module, &stream, config, ptr(&twin_out), ptr(&inp), n as i32, c as i32)? };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_slots)?;
        let times = time_pair(&context, &stream, reps, run_slots, run_twin)?;
        stream.synchronize()?;
        let check = check_f32(&ours.to_vec()?, &twin_out.to_vec()?, 1e-4);
        TABLE.row("  s18: softmax_forward_kernel2 slots", &format!("N{n} C{c} f32, block {block}"), times, &check);
        // Session 18 (gap 2 experiment): the same with its row loops unrolled by 4.
        let mut run_x4 = || -> Result<()> {
            llmc::softmax_forward_kernel2_x4::launch(&stream, config, &mut ours, &inp, c)?;
            Ok(())
        };
        let run_twin = || -> Result<()> {
            // SAFETY: as above.
            unsafe { twins::twin_softmax_forward_kernel2::launch_in(&llmc_module, &stream, config, ptr(&twin_out), ptr(&inp), n as i32, c as i32)? };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_x4)?;
        let times = time_pair(&context, &stream, reps, run_x4, run_twin)?;
        stream.synchronize()?;
        let check = check_f32(&ours.to_vec()?, &twin_out.to_vec()?, 1e-4);
        TABLE.row("  s18 x4: softmax_forward_kernel2 slots", &format!("N{n} C{c} f32, block {block}"), times, &check);
        Ok(())
    });

    // L5: attention_query_key_kernel1: B 4, T 1024, C 768, NH 12; block 256.
    case("L5", || -> Result<()> {
        let (b, t, c, nh) = (4u32, 1024u32, 768u32, 12u32);
        let inp = DeviceBuffer::from_slice(&context, &random_f32((b * t * 3 * c) as usize, 28))?;
        let n = (b * nh * t * t) as usize;
        let mut ours = DeviceBuffer::<f32>::zeroed(&context, n)?;
        let twin_out = DeviceBuffer::<f32>::zeroed(&context, n)?;
        let config = LaunchConfig::new((n as u32).div_ceil(256), 256);
        let mut run_ours = || -> Result<()> {
            llmc::attention_query_key_kernel1::launch(&stream, config, &mut ours, &inp, nz(t), c, nz(nh))?;
            Ok(())
        };
        let run_twin = || -> Result<()> {
            // SAFETY: as above.
            unsafe {
                twins::twin_attention_query_key_kernel1::launch_in(
                    &llmc_module,
                    &stream,
                    config,
                    ptr(&twin_out),
                    ptr(&inp),
                    b as i32,
                    t as i32,
                    c as i32,
                    nh as i32,
                )?
            };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_ours)?;
        let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
        stream.synchronize()?;
        let check = check_f32(&ours.to_vec()?, &twin_out.to_vec()?, 1e-5);
        TABLE.row("llm.c attention_query_key_kernel1", &format!("B{b} T{t} C{c} NH{nh} f32"), times, &check);
        Ok(())
    });

    // V1: activation_kernel<bf16, gelu_new>: 8192 tokens of d 4096; block min(d, 1024).
    case("V1", || -> Result<()> {
        let (tokens, d) = (8192u32, 4096u32);
        let input = DeviceBuffer::from_slice(&context, &random_bf16((tokens * d) as usize, 29, 4.0))?;
        let mut ours = DeviceBuffer::<bf16>::zeroed(&context, input.len())?;
        let twin_out = DeviceBuffer::<bf16>::zeroed(&context, input.len())?;
        let config = LaunchConfig::new(tokens, d.min(1024));
        let mut run_ours = || -> Result<()> {
            vllm::activation_kernel_gelu_new::launch(&stream, config, &mut ours, &input, d)?;
            Ok(())
        };
        let run_twin = || -> Result<()> {
            // SAFETY: as above.
            unsafe { twins::twin_activation_kernel_gelu_new::launch_in(&vllm_module, &stream, config, ptr(&twin_out), ptr(&input), d as i32)? };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_ours)?;
        let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
        stream.synchronize()?;
        let check = check_bits("bf16", &ours.to_vec()?, &twin_out.to_vec()?);
        TABLE.row("vLLM activation_kernel<gelu_new>", &format!("{tokens}x{d} bf16, block 1024"), times, &check);
        // Session 18 (gap 2 experiment): the row loop unrolled by 4 without a division.
        let mut run_x4 = || -> Result<()> {
            vllm::activation_kernel_gelu_new_x4::launch(&stream, config, &mut ours, &input, d)?;
            Ok(())
        };
        let run_twin = || -> Result<()> {
            // SAFETY: as above.
            unsafe { twins::twin_activation_kernel_gelu_new::launch_in(&vllm_module, &stream, config, ptr(&twin_out), ptr(&input), d as i32)? };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_x4)?;
        let times = time_pair(&context, &stream, reps, run_x4, run_twin)?;
        stream.synchronize()?;
        let check = check_bits("bf16", &ours.to_vec()?, &twin_out.to_vec()?);
        TABLE.row("  s18 x4: activation_kernel<gelu_new>", &format!("{tokens}x{d} bf16, block 1024"), times, &check);
        Ok(())
    });

    // V2: dynamic_scaled_int8_azp_quant_kernel: 8192 tokens of hidden 4096; block 1024.
    case("V2", || -> Result<()> {
        let (tokens, hidden) = (8192u32, 4096u32);
        let input = DeviceBuffer::from_slice(&context, &random_bf16((tokens * hidden) as usize, 30, 3.0))?;
        let mut ours = DeviceBuffer::<i8>::zeroed(&context, input.len())?;
        let mut scale = DeviceBuffer::<f32>::zeroed(&context, tokens as usize)?;
        let mut azp = DeviceBuffer::<i32>::zeroed(&context, tokens as usize)?;
        let twin_out = DeviceBuffer::<i8>::zeroed(&context, input.len())?;
        let twin_scale = DeviceBuffer::<f32>::zeroed(&context, tokens as usize)?;
        let twin_azp = DeviceBuffer::<i32>::zeroed(&context, tokens as usize)?;
        let config = LaunchConfig::new(tokens, hidden.min(1024));
        let mut run_ours = || -> Result<()> {
            vllm::dynamic_scaled_int8_azp_quant_kernel::launch(&stream, config, &input, &mut ours, &mut scale, &mut azp, hidden)?;
            Ok(())
        };
        let run_twin = || -> Result<()> {
            // SAFETY: as above.
            unsafe {
                twins::twin_dynamic_scaled_int8_azp_quant_kernel::launch_in(
                    &vllm_module,
                    &stream,
                    config,
                    ptr(&input),
                    ptr(&twin_out),
                    ptr(&twin_scale),
                    ptr(&twin_azp),
                    hidden as i32,
                )?
            };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_ours)?;
        let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
        stream.synchronize()?;
        let check = format!(
            "{}; {}; {}",
            check_bits("out", &ours.to_vec()?, &twin_out.to_vec()?),
            check_bits("scale", &scale.to_vec()?, &twin_scale.to_vec()?),
            check_bits("azp", &azp.to_vec()?, &twin_azp.to_vec()?)
        );
        TABLE.row("vLLM dynamic_scaled_int8_azp_quant", &format!("{tokens}x{hidden} bf16, block 1024"), times, &check);
        Ok(())
    });

    // V3: per_token_group_quant_8bit_kernel, FP8: 8192 tokens of hidden 7168, groups of 128,
    // 16 groups per block (256 threads, 4096 shared bytes).
    case("V3", || -> Result<()> {
        let (tokens, hidden, gpb) = (8192u32, 7168u32, 16u32);
        let group = vllm::GROUP_SIZE;
        let num_groups = tokens * hidden / group;
        let input = DeviceBuffer::from_slice(&context, &random_bf16((tokens * hidden) as usize, 31, 2.0))?;
        let mut ours = DeviceBuffer::<u8>::zeroed(&context, input.len())?;
        let mut scales = DeviceBuffer::<f32>::zeroed(&context, num_groups as usize)?;
        let twin_out = DeviceBuffer::<u8>::zeroed(&context, input.len())?;
        let twin_scales = DeviceBuffer::<f32>::zeroed(&context, num_groups as usize)?;
        let config = LaunchConfig::new(num_groups / gpb, gpb * vllm::THREADS_PER_GROUP).with_shared_bytes(gpb * group * 2);
        let (eps, min8, max8) = (1e-10f32, -448.0f32, 448.0f32);
        let input8 = input.cast::<vllm::Bf16x8>()?;
        let mut run_ours = || -> Result<()> {
            let mut q = ours.cast_mut::<vllm::Fp8x8>()?;
            vllm::per_token_group_quant_8bit_kernel::launch(&stream, config, &input8, &mut q, &mut scales, gpb, eps, min8, max8)?;
            Ok(())
        };
        let run_twin = || -> Result<()> {
            // SAFETY: as above.
            unsafe {
                twins::twin_per_token_group_quant_8bit_kernel::launch_in(
                    &vllm_module,
                    &stream,
                    config,
                    ptr(&input),
                    ptr(&twin_out),
                    ptr(&twin_scales),
                    group as i32,
                    num_groups as i32,
                    gpb as i32,
                    eps,
                    min8,
                    max8,
                    0,
                    0,
                )?
            };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_ours)?;
        let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
        stream.synchronize()?;
        let check = format!("{}; {}", check_bits("q", &ours.to_vec()?, &twin_out.to_vec()?), check_bits("scales", &scales.to_vec()?, &twin_scales.to_vec()?));
        TABLE.row("vLLM per_token_group_quant_8bit (fp8)", &format!("{tokens}x{hidden} bf16, groups of {group}"), times, &check);
        Ok(())
    });
    // V3 s18: the `SegmentRows<16>` re-port for groups of 64, 128 and 256 (vectorised, `Fp8x8`
    // rows) and the byte form for groups of 100 (vLLM's scalar path), each against the same
    // twin (its `group_size` is a run-time argument), 16 groups per block.
    for (label, group, bytes) in [("V3-seg64", 64u32, false), ("V3-seg128", 128, false), ("V3-seg256", 256, false), ("V3-bytes100", 100, true)] {
        case(label, || -> Result<()> {
            let (tokens, hidden, gpb) = (8192u32, if group == 100 { 7200u32 } else { 7168 }, 16u32);
            let num_groups = tokens * hidden / group;
            let input = DeviceBuffer::from_slice(&context, &random_bf16((tokens * hidden) as usize, 31, 2.0))?;
            let mut ours = DeviceBuffer::<u8>::zeroed(&context, input.len())?;
            let mut scales = DeviceBuffer::<f32>::zeroed(&context, num_groups as usize)?;
            let twin_out = DeviceBuffer::<u8>::zeroed(&context, input.len())?;
            let twin_scales = DeviceBuffer::<f32>::zeroed(&context, num_groups as usize)?;
            let config = LaunchConfig::new(num_groups / gpb, gpb * vllm::THREADS_PER_GROUP).with_shared_bytes(gpb * group * 2);
            let (eps, min8, max8) = (1e-10f32, -448.0f32, 448.0f32);
            let input8 = input.cast::<vllm::Bf16x8>()?;
            let mut run_ours = || -> Result<()> {
                if bytes {
                    vllm::per_token_group_quant_8bit_bytes::launch(&stream, config, &input, &mut ours, &mut scales, group, eps, min8, max8)?;
                } else {
                    let mut q = ours.cast_mut::<vllm::Fp8x8>()?;
                    vllm::per_token_group_quant_8bit_segments::launch(&stream, config, &input8, &mut q, &mut scales, group / 8, eps, min8, max8)?;
                }
                Ok(())
            };
            let run_twin = || -> Result<()> {
                // SAFETY: as above.
                unsafe {
                    twins::twin_per_token_group_quant_8bit_kernel::launch_in(
                        &vllm_module,
                        &stream,
                        config,
                        ptr(&input),
                        ptr(&twin_out),
                        ptr(&twin_scales),
                        group as i32,
                        num_groups as i32,
                        gpb as i32,
                        eps,
                        min8,
                        max8,
                        0,
                        0,
                    )?
                };
                Ok(())
            };
            let reps = reps_for(&context, &stream, &mut run_ours)?;
            let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
            stream.synchronize()?;
            let check =
                format!("{}; {}", check_bits("q", &ours.to_vec()?, &twin_out.to_vec()?), check_bits("scales", &scales.to_vec()?, &twin_scales.to_vec()?));
            let name = if bytes { "vLLM per_token_group_quant (u8 segs)" } else { "vLLM per_token_group_quant (segs)" };
            TABLE.row(name, &format!("{tokens}x{hidden} bf16, groups of {group}"), times, &check);
            Ok(())
        });
    }
    Ok(())
}
