//! bench/ports12's GPU bench: each port beside its nvcc-built CUDA C++ twin
//! (bench/ports12/cuda/ports12.cu), same grid, same inputs, timed with CUDA events
//! (`ferrocuda-bench-timing`), then the two outputs compared. `PORTS12_ONLY=L1,V2` runs a
//! subset. A report, not a test: nothing is asserted.

use ferrocuda::{Context, DeviceBuffer, Stream};
use ferrocuda_bench_timing::{self as timing, PASSES, Result, Table, WARMUP, case, check_bits, check_f32, max_rel_err, nz, ptr, reps_for, time_pair};
use ferrocuda_ports12::kernels::{llmc, twins, vllm};
use ferrocuda_ports12::*;
use half::{bf16, f16};

const ONLY: &str = "PORTS12_ONLY";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, llmc_cubin, vllm_cubin] = &args[..] else {
        return Err("usage: ports12_bench LLMC_CUBIN VLLM_CUBIN (nvcc's builds of bench/ports12/cuda/ports12.cu with -DPORTS12_LLMC / -DPORTS12_VLLM)".into());
    };
    let context = Context::primary(0)?;
    let stream = Stream::new(&context)?;
    timing::print_device(&context)?;
    // SAFETY: the cubins are nvcc's output for ports12.cu (the job script builds them there).
    let lm = unsafe { timing::load_cubin(&context, "ports12_llmc", llmc_cubin)? };
    // SAFETY: as above.
    let vm = unsafe { timing::load_cubin(&context, "ports12_vllm", vllm_cubin)? };
    println!("twins: {llmc_cubin}, {vllm_cubin}; each time the median of {PASSES} passes (ms per launch), after {WARMUP} warm-ups");
    let table = Table::new(40, 34);
    println!("{}", table.header());

    case(ONLY, "L1", || -> Result<()> {
        let (b, t, c, nh) = (8usize, 256usize, 768usize, 12usize);
        let att = DeviceBuffer::from_slice(&context, &values(b * nh * t * t, 1, 0.0, 0.01))?;
        let inp = DeviceBuffer::from_slice(&context, &values(b * t * 3 * c, 2, -1.0, 1.0))?;
        let mut ours = DeviceBuffer::<f32>::zeroed(&context, b * t * c)?;
        let twin = DeviceBuffer::<f32>::zeroed(&context, b * t * c)?;
        let config = attention_value_config(b, t, nh, 256);
        let mut run_ours = || -> Result<()> {
            llmc::attention_value_kernel1::launch(&stream, config, &mut ours, &att, &inp, b as u32, nz(t as u32), c as u32, nz(nh as u32), (c / nh) as u32)?;
            Ok(())
        };
        let run_twin = || -> Result<()> {
            // SAFETY: the buffers hold B T C, B NH T T and B T 3C floats; the grid covers B T NH threads.
            unsafe {
                twins::twin_attention_value_kernel1::launch_in(&lm, &stream, config, ptr(&twin), ptr(&att), ptr(&inp), b as i32, t as i32, c as i32, nh as i32)?
            };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_ours)?;
        let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
        stream.synchronize()?;
        let check = check_f32("", &ours.to_vec()?, &twin.to_vec()?, 1e-5, max_rel_err);
        table.row("L1 llm.c attention_value_kernel1", &format!("B{b} T{t} C{c} NH{nh}, block 256"), times, &check);
        Ok(())
    });

    case(ONLY, "L2", || -> Result<()> {
        let (n, c, block) = (2048usize, 50257usize, 512u32);
        let inp = DeviceBuffer::from_slice(&context, &values(n * c, 3, -8.0, 8.0))?;
        let mut ours = DeviceBuffer::<f32>::zeroed(&context, n * c)?;
        let twin = DeviceBuffer::<f32>::zeroed(&context, n * c)?;
        let twin_config = softmax7_config(n, block);
        let config = ferrocuda::LaunchConfig::new(n as u32, block);
        let mut run_ours = || -> Result<()> {
            llmc::softmax_forward_kernel7::launch(&stream, config, &mut ours, &inp, n as u32, c as u32)?;
            Ok(())
        };
        let run_twin = || -> Result<()> {
            // SAFETY: in and out hold N C floats; a block per row with its shared memory.
            unsafe { twins::twin_softmax_forward_kernel7::launch_in(&lm, &stream, twin_config, ptr(&twin), ptr(&inp), n as i32, c as i32)? };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_ours)?;
        let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
        stream.synchronize()?;
        // The block's sum is folded in another order (a tree in warp 0, the twin's thread 0 in
        // order): last bits.
        let check = check_f32("", &ours.to_vec()?, &twin.to_vec()?, 1e-5, max_rel_err);
        table.row("L2 llm.c softmax_forward_kernel7", &format!("{n}x{c} f32, block {block}"), times, &check);
        Ok(())
    });

    case(ONLY, "L3", || -> Result<()> {
        let (n, c, block) = (8192usize, 768usize, 256u32);
        let inp = DeviceBuffer::from_slice(&context, &values(n * c, 5, -1.0, 3.0))?;
        let mut ours = DeviceBuffer::<f32>::zeroed(&context, n)?;
        let twin = DeviceBuffer::<f32>::zeroed(&context, n)?;
        let config = mean_config(n, block);
        let mut run_ours = || -> Result<()> {
            llmc::mean_kernel::launch(&stream, config, &mut ours, &inp, n as u32, c as u32, block)?;
            Ok(())
        };
        let run_twin = || -> Result<()> {
            // SAFETY: mean holds N floats, inp N C; a block of `block` threads per row, `block` floats of shared memory.
            unsafe { twins::twin_mean_kernel::launch_in(&lm, &stream, config, ptr(&twin), ptr(&inp), n as i32, c as i32, block as i32)? };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_ours)?;
        let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
        stream.synchronize()?;
        // nvcc's fast-math `/` and the port's `fast_div` may round the last bit apart.
        let check = check_f32("", &ours.to_vec()?, &twin.to_vec()?, 1e-5, max_rel_err);
        table.row("L3 llm.c mean_kernel", &format!("{n}x{c} f32, block {block}"), times, &check);
        Ok(())
    });

    case(ONLY, "L4", || -> Result<()> {
        let (b, t, oc, block) = (8usize, 1024usize, 3072usize, 256u32);
        let dout = DeviceBuffer::from_slice(&context, &values_bf16(b * t * oc, 6, -1.0, 1.0))?;
        let dbias0 = values_bf16(oc, 7, -1.0, 1.0);
        let mut ours = DeviceBuffer::from_slice(&context, &dbias0)?;
        let mut twin = DeviceBuffer::from_slice(&context, &dbias0)?;
        let config = bias2_config(oc, block);
        let mut run_ours = || -> Result<()> {
            llmc::matmul_backward_bias_kernel2::launch(&stream, config, &mut ours, &dout, b as u32, t as u32, oc as u32)?;
            Ok(())
        };
        let mut run_twin = || -> Result<()> {
            // SAFETY: dbias holds OC bf16, dout B T OC; a warp per channel.
            unsafe { twins::twin_matmul_backward_bias_kernel2::launch_in(&lm, &stream, config, ptr(&twin), ptr(&dout), b as i32, t as i32, oc as i32)? };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_ours)?;
        let times = time_pair(&context, &stream, reps, &mut run_ours, &mut run_twin)?;
        stream.synchronize()?;
        // dbias accumulates: check one more launch of each on fresh copies.
        ours = DeviceBuffer::from_slice(&context, &dbias0)?;
        twin = DeviceBuffer::from_slice(&context, &dbias0)?;
        llmc::matmul_backward_bias_kernel2::launch(&stream, config, &mut ours, &dout, b as u32, t as u32, oc as u32)?;
        // SAFETY: as above.
        unsafe { twins::twin_matmul_backward_bias_kernel2::launch_in(&lm, &stream, config, ptr(&twin), ptr(&dout), b as i32, t as i32, oc as i32)? };
        stream.synchronize()?;
        let check = check_bits("bf16", &ours.to_vec()?, &twin.to_vec()?);
        table.row("L4 llm.c matmul_backward_bias_kernel2", &format!("B{b} T{t} OC{oc} bf16, block {block}"), times, &check);
        Ok(())
    });

    case(ONLY, "L5", || -> Result<()> {
        let (n, c, block) = (2048usize, 50257usize, 256u32);
        let inp = DeviceBuffer::from_slice(&context, &values(n * c, 4, -8.0, 8.0))?;
        let mut ours = DeviceBuffer::<f32>::zeroed(&context, n * c)?;
        let twin = DeviceBuffer::<f32>::zeroed(&context, n * c)?;
        let config = softmax_online2_config(n, block);
        let mut run_ours = || -> Result<()> {
            llmc::softmax_forward_online_kernel2::launch(&stream, config, &mut ours, &inp, n as u32, c as u32)?;
            Ok(())
        };
        let run_twin = || -> Result<()> {
            // SAFETY: in and out hold N C floats; a warp per row.
            unsafe { twins::twin_softmax_forward_online_kernel2::launch_in(&lm, &stream, config, ptr(&twin), ptr(&inp), n as i32, c as i32)? };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_ours)?;
        let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
        stream.synchronize()?;
        // nvcc's fast-math `/` and the port's `fast_div` may round the last bit apart.
        let check = check_f32("", &ours.to_vec()?, &twin.to_vec()?, 1e-5, max_rel_err);
        table.row("L5 llm.c softmax_forward_online_kernel2", &format!("{n}x{c} f32, block {block}"), times, &check);
        Ok(())
    });

    // Fix rounds (bench/ports12/RESULTS.md): each beside the same twin as its first try.
    case(ONLY, "L2F", || -> Result<()> {
        let (n, c, block) = (2048usize, 50257usize, 512u32);
        let inp = DeviceBuffer::from_slice(&context, &values(n * c, 3, -8.0, 8.0))?;
        let mut ours = DeviceBuffer::<f32>::zeroed(&context, n * c)?;
        let twin = DeviceBuffer::<f32>::zeroed(&context, n * c)?;
        let twin_config = softmax7_config(n, block);
        let config = ferrocuda::LaunchConfig::new(n as u32, block);
        let mut run_ours = || -> Result<()> {
            llmc::softmax_forward_kernel7_fix::launch(&stream, config, &mut ours, &inp, n as u32, c as u32)?;
            Ok(())
        };
        let run_twin = || -> Result<()> {
            // SAFETY: in and out hold N C floats; a block per row with its shared memory.
            unsafe { twins::twin_softmax_forward_kernel7::launch_in(&lm, &stream, twin_config, ptr(&twin), ptr(&inp), n as i32, c as i32)? };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_ours)?;
        let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
        stream.synchronize()?;
        let check = check_f32("", &ours.to_vec()?, &twin.to_vec()?, 1e-5, max_rel_err);
        table.row("L2 fix softmax_forward_kernel7_fix", &format!("{n}x{c} f32, block {block}"), times, &check);
        Ok(())
    });

    case(ONLY, "L3F", || -> Result<()> {
        let (n, c, block) = (8192usize, 768usize, 256u32);
        let inp = DeviceBuffer::from_slice(&context, &values(n * c, 5, -1.0, 3.0))?;
        let mut ours = DeviceBuffer::<f32>::zeroed(&context, n)?;
        let twin = DeviceBuffer::<f32>::zeroed(&context, n)?;
        let config = mean_config(n, block);
        let mut run_ours = || -> Result<()> {
            llmc::mean_kernel_fix::launch(&stream, config, &mut ours, &inp, n as u32, c as u32, block)?;
            Ok(())
        };
        let run_twin = || -> Result<()> {
            // SAFETY: mean holds N floats, inp N C; a block of `block` threads per row, `block` floats of shared memory.
            unsafe { twins::twin_mean_kernel::launch_in(&lm, &stream, config, ptr(&twin), ptr(&inp), n as i32, c as i32, block as i32)? };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_ours)?;
        let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
        stream.synchronize()?;
        // nvcc's fast-math `/` and the port's `fast_div` may round the last bit apart.
        let check = check_f32("", &ours.to_vec()?, &twin.to_vec()?, 1e-5, max_rel_err);
        table.row("L3 fix mean_kernel_fix", &format!("{n}x{c} f32, block {block}"), times, &check);
        Ok(())
    });

    case(ONLY, "V1", || -> Result<()> {
        let (tokens, d) = (2048usize, 8192usize);
        let input: Vec<bf16> = values_bf16(tokens * 2 * d, 8, -6.0, 6.0);
        let packs_d = DeviceBuffer::from_slice(&context, &packs(&input))?;
        let input_d = DeviceBuffer::from_slice(&context, &input)?;
        let scale = DeviceBuffer::from_slice(&context, &[0.05f32])?;
        let mut ours = DeviceBuffer::<u64>::zeroed(&context, tokens * d / 8)?;
        let twin = DeviceBuffer::<u8>::zeroed(&context, tokens * d)?;
        let (config, dv, tile) = act_quant_shape(tokens, d);
        let mut run_ours = || -> Result<()> {
            vllm::act_and_mul_quant_kernel::launch(&stream, config, &mut ours, &packs_d, &scale, dv, tile)?;
            Ok(())
        };
        let run_twin = || -> Result<()> {
            // SAFETY: out holds tokens d bytes, input tokens 2d bf16, scale one float; vLLM's grid.
            unsafe { twins::twin_act_and_mul_quant_kernel::launch_in(&vm, &stream, config, ptr(&twin), ptr(&input_d), ptr(&scale), d as i32)? };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_ours)?;
        let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
        stream.synchronize()?;
        let ours_bytes: Vec<u8> = ours.to_vec()?.iter().flat_map(|w| w.to_le_bytes()).collect();
        let check = check_bits("fp8", &ours_bytes, &twin.to_vec()?);
        table.row("V1 vLLM act_and_mul_quant_kernel<silu>", &format!("{tokens}x{d} bf16->fp8, block 512"), times, &check);
        Ok(())
    });

    case(ONLY, "V2", || -> Result<()> {
        let (kx, ky) = (4096usize, 2048usize);
        let x = DeviceBuffer::from_slice(&context, &values_bf16(kx * ky, 9, -3.0, 3.0))?;
        let words = ky * q8_1_padded(kx) / 32 * 9;
        let mut ours = DeviceBuffer::<u32>::zeroed(&context, words)?;
        let twin = DeviceBuffer::<u32>::zeroed(&context, words)?;
        let (config, twin_config) = (q8_1_config(kx, ky), q8_1_twin_config(kx, ky));
        let kp = q8_1_padded(kx);
        let mut run_ours = || -> Result<()> {
            vllm::quantize_q8_1::launch(&stream, config, &x, &mut ours, kx as u32, nz(kp as u32))?;
            Ok(())
        };
        let run_twin = || -> Result<()> {
            // SAFETY: x holds ky kx bf16, vy ky kx_padded / 32 blocks of 36 bytes; vLLM's grid.
            unsafe { twins::twin_quantize_q8_1::launch_in(&vm, &stream, twin_config, ptr(&x), ptr(&twin), kx as i32, kp as i32)? };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_ours)?;
        let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
        stream.synchronize()?;
        let check = check_bits("block_q8_1 words", &ours.to_vec()?, &twin.to_vec()?);
        table.row("V2 vLLM quantize_q8_1<bf16>", &format!("{ky}x{kx} bf16, block 256"), times, &check);
        Ok(())
    });

    case(ONLY, "V3", || -> Result<()> {
        let k = 4096usize * 4096;
        let blocks = DeviceBuffer::from_slice(&context, &q4_0_blocks(k / 32, 10))?;
        let mut ours = DeviceBuffer::<f16>::zeroed(&context, k)?;
        let twin = DeviceBuffer::<f16>::zeroed(&context, k)?;
        let (config, twin_config) = (dequant_config(k), dequant_twin_config(k));
        let mut run_ours = || -> Result<()> {
            vllm::dequantize_block_q4_0::launch(&stream, config, &blocks, &mut ours)?;
            Ok(())
        };
        let run_twin = || -> Result<()> {
            // SAFETY: vx holds k / 32 blocks of 18 bytes, y k halves; k / 2 threads.
            unsafe { twins::twin_dequantize_block_q4_0::launch_in(&vm, &stream, twin_config, ptr(&blocks), ptr(&twin), k as i32)? };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_ours)?;
        let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
        stream.synchronize()?;
        let check = check_bits("f16", &ours.to_vec()?, &twin.to_vec()?);
        table.row("V3 vLLM dequantize_block<q4_0, half>", &format!("{k} values, block 256"), times, &check);
        Ok(())
    });
    case(ONLY, "L1F", || -> Result<()> {
        let (b, t, c, nh) = (8usize, 256usize, 768usize, 12usize);
        let att = DeviceBuffer::from_slice(&context, &values(b * nh * t * t, 1, 0.0, 0.01))?;
        let inp = DeviceBuffer::from_slice(&context, &values(b * t * 3 * c, 2, -1.0, 1.0))?;
        let mut ours = DeviceBuffer::<f32>::zeroed(&context, b * t * c)?;
        let twin = DeviceBuffer::<f32>::zeroed(&context, b * t * c)?;
        let config = attention_value_config(b, t, nh, 256);
        let mut run_ours = || -> Result<()> {
            llmc::attention_value_kernel1_fix::launch(
                &stream,
                config,
                &mut ours,
                &att,
                &inp,
                b as u32,
                nz(t as u32),
                c as u32,
                nz(nh as u32),
                (c / nh) as u32,
            )?;
            Ok(())
        };
        let run_twin = || -> Result<()> {
            // SAFETY: the buffers hold B T C, B NH T T and B T 3C floats; the grid covers B T NH threads.
            unsafe {
                twins::twin_attention_value_kernel1::launch_in(&lm, &stream, config, ptr(&twin), ptr(&att), ptr(&inp), b as i32, t as i32, c as i32, nh as i32)?
            };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_ours)?;
        let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
        stream.synchronize()?;
        let check = check_f32("", &ours.to_vec()?, &twin.to_vec()?, 1e-5, max_rel_err);
        table.row("L1 fix attention_value_kernel1_fix", &format!("B{b} T{t} C{c} NH{nh}, block 256"), times, &check);
        Ok(())
    });

    case(ONLY, "V2F", || -> Result<()> {
        let (kx, ky) = (4096usize, 2048usize);
        let x = DeviceBuffer::from_slice(&context, &values_bf16(kx * ky, 9, -3.0, 3.0))?;
        let words = ky * q8_1_padded(kx) / 32 * 9;
        let mut ours = DeviceBuffer::<u32>::zeroed(&context, words)?;
        let twin = DeviceBuffer::<u32>::zeroed(&context, words)?;
        let (config, twin_config) = (q8_1_config(kx, ky), q8_1_twin_config(kx, ky));
        let kp = q8_1_padded(kx);
        let mut run_ours = || -> Result<()> {
            vllm::quantize_q8_1_fix::launch(&stream, config, &x, &mut ours, kx as u32, nz((kp / 256) as u32))?;
            Ok(())
        };
        let run_twin = || -> Result<()> {
            // SAFETY: x holds ky kx bf16, vy ky kx_padded / 32 blocks of 36 bytes; vLLM's grid.
            unsafe { twins::twin_quantize_q8_1::launch_in(&vm, &stream, twin_config, ptr(&x), ptr(&twin), kx as i32, kp as i32)? };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_ours)?;
        let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
        stream.synchronize()?;
        let check = check_bits("block_q8_1 words", &ours.to_vec()?, &twin.to_vec()?);
        table.row("V2 fix quantize_q8_1_fix", &format!("{ky}x{kx} bf16, block 256"), times, &check);
        Ok(())
    });

    case(ONLY, "V3F", || -> Result<()> {
        let k = 4096usize * 4096;
        let blocks = DeviceBuffer::from_slice(&context, &q4_0_blocks(k / 32, 10))?;
        let mut ours = DeviceBuffer::<f16>::zeroed(&context, k)?;
        let twin = DeviceBuffer::<f16>::zeroed(&context, k)?;
        let (config, twin_config) = (dequant_config(k), dequant_twin_config(k));
        let mut run_ours = || -> Result<()> {
            vllm::dequantize_block_q4_0_fix::launch(&stream, config, &blocks, &mut ours)?;
            Ok(())
        };
        let run_twin = || -> Result<()> {
            // SAFETY: vx holds k / 32 blocks of 18 bytes, y k halves; k / 2 threads.
            unsafe { twins::twin_dequantize_block_q4_0::launch_in(&vm, &stream, twin_config, ptr(&blocks), ptr(&twin), k as i32)? };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_ours)?;
        let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
        stream.synchronize()?;
        let check = check_bits("f16", &ours.to_vec()?, &twin.to_vec()?);
        table.row("V3 fix dequantize_block_q4_0_fix", &format!("{k} values, block 256"), times, &check);
        Ok(())
    });
    Ok(())
}
