//! The GPU bench of bench/ports7: each Rust port (and its fix-round variant, where there is
//! one) beside its CUDA C++ twin (the nvcc-built cubins of bench/ports7/cuda/ports7.cu,
//! launched through the raw-pointer stubs of `ferrocuda_ports7_twins`), on the same grid and
//! the same inputs, in one process. The timing harness is bench/timing's
//! (`ferrocuda_bench_timing`), shared with bench/ports6.
//!
//! `ports7_bench LLMC_CUBIN VLLM_CUBIN`: for every kernel, 3 warm-up launches of each into its
//! own output, then 7 passes that time `reps` back-to-back launches of one and then of the
//! other (the order alternating per pass) with CUDA events; each time is the median over the
//! passes of the time per launch. `twin/ours` above 1: the port is faster. Then the outputs are
//! compared (in-place kernels: one more launch of each on fresh copies of the same input). A
//! report, not a test: nothing is asserted.

use ferrocuda::{Context, DeviceBuffer, LaunchConfig, Stream};
use ferrocuda_bench_timing::{self as timing, PASSES, Result, Table, WARMUP, check_bits, nz, ptr, reps_for, time_pair};
use ferrocuda_ports7::*;
use ferrocuda_ports7_llmc as llmc;
use ferrocuda_ports7_twins as twins;
use ferrocuda_ports7_vllm as vllm;

/// The bench's report lines' column widths (kernel name, size).
const TABLE: Table = Table::new(44, 30);

/// Runs one case (`timing::case`); `PORTS7_ONLY=L1,V2` runs only the cases whose labels start
/// with one of the listed prefixes.
fn case(label: &str, f: impl FnOnce() -> Result<()>) {
    timing::case("PORTS7_ONLY", label, f);
}

/// [`timing::check_f32`] with this port's relative error.
fn check_f32(what: &str, ours: &[f32], twin: &[f32], tolerance: f32) -> String {
    timing::check_f32(what, ours, twin, tolerance, max_rel_err)
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, llmc_cubin, vllm_cubin] = &args[..] else {
        return Err("usage: ports7_bench LLMC_CUBIN VLLM_CUBIN (the nvcc-built twins of bench/ports7/cuda/ports7.cu)".into());
    };
    let context = Context::primary(0)?;
    let stream = Stream::new(&context)?;
    timing::print_device(&context)?;
    // SAFETY: the cubins are nvcc's output for ports7.cu (the job script builds them there).
    let lm = unsafe { timing::load_cubin(&context, "ports7_llmc", llmc_cubin)? };
    // SAFETY: as above.
    let vm = unsafe { timing::load_cubin(&context, "ports7_vllm", vllm_cubin)? };
    println!("twins: {llmc_cubin}, {vllm_cubin}; each time the median of {PASSES} passes (ms per launch), after {WARMUP} warm-ups");
    println!("{}", TABLE.header());

    // L1: residual_forward_kernel: B 8, T 1024, C 3072 (an MLP-wide residual); block 256.
    case("L1", || -> Result<()> {
        let n = 8 * 1024 * 3072usize;
        let a = DeviceBuffer::from_slice(&context, &random_bf16(n, 1, 4.0))?;
        let b = DeviceBuffer::from_slice(&context, &random_bf16(n, 2, 4.0))?;
        let mut ours = DeviceBuffer::<bf16>::zeroed(&context, n)?;
        let twin_out = DeviceBuffer::<bf16>::zeroed(&context, n)?;
        let config = LaunchConfig::new((n / (256 * 8)) as u32, 256);
        let (a8, b8) = (a.cast::<llmc::X128>()?, b.cast::<llmc::X128>()?);
        let mut run_ours = || -> Result<()> {
            llmc::residual_forward_kernel::launch(&stream, config, &mut ours.cast_mut::<llmc::X128>()?, &a8, &b8)?;
            Ok(())
        };
        let run_twin = || -> Result<()> {
            // SAFETY: the buffers hold what the kernel reads and writes at this shape.
            unsafe { twins::twin_residual_forward_kernel::launch_in(&lm, &stream, config, ptr(&twin_out), ptr(&a), ptr(&b))? };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_ours)?;
        let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
        stream.synchronize()?;
        TABLE.row("llm.c residual_forward_kernel", &format!("{n} bf16"), times, &check_bits("bf16", &ours.to_vec()?, &twin_out.to_vec()?));
        Ok(())
    });

    // L2: unpermute_kernel_backward: B 8, T 1024, NH 32, HS 128; block 256.
    case("L2", || -> Result<()> {
        let (b, t, nh, hd) = (8u32, 1024u32, 32u32, 128u32);
        let n = (b * t * nh * hd) as usize;
        let dout = DeviceBuffer::from_slice(&context, &random_bf16(n, 3, 1.0))?;
        let mut ours = DeviceBuffer::<bf16>::zeroed(&context, n)?;
        let twin_out = DeviceBuffer::<bf16>::zeroed(&context, n)?;
        let config = LaunchConfig::new((n as u32).div_ceil(256), 256);
        let mut run_ours = || -> Result<()> {
            llmc::unpermute_kernel_backward::launch(&stream, config, &mut ours, &dout, nz(t), nz(nh), nz(hd))?;
            Ok(())
        };
        let run_twin = || -> Result<()> {
            // SAFETY: as above.
            unsafe {
                twins::twin_unpermute_kernel_backward::launch_in(&lm, &stream, config, ptr(&twin_out), ptr(&dout), b as i32, t as i32, nh as i32, hd as i32)?
            };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_ours)?;
        let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
        stream.synchronize()?;
        TABLE.row(
            "llm.c unpermute_kernel_backward",
            &format!("B{b} T{t} NH{nh} HS{hd} bf16"),
            times,
            &check_bits("bf16", &ours.to_vec()?, &twin_out.to_vec()?),
        );
        Ok(())
    });

    // L3: permute_kernel_backward: B 8, T 1024, NH 32, HS 128; block 256.
    case("L3", || -> Result<()> {
        let (b, t, nh, hd) = (8u32, 1024u32, 32u32, 128u32);
        let n = (b * t * nh * hd) as usize;
        let dq = DeviceBuffer::from_slice(&context, &random_bf16(n, 4, 1.0))?;
        let dk = DeviceBuffer::from_slice(&context, &random_bf16(n, 5, 1.0))?;
        let dv = DeviceBuffer::from_slice(&context, &random_bf16(n, 6, 1.0))?;
        let mut ours = DeviceBuffer::<bf16>::zeroed(&context, 3 * n)?;
        let twin_out = DeviceBuffer::<bf16>::zeroed(&context, 3 * n)?;
        let config = LaunchConfig::new((n as u32).div_ceil(256), 256);
        let mut run_ours = || -> Result<()> {
            llmc::permute_kernel_backward::launch(&stream, config, &mut ours, &dq, &dk, &dv, nz(t), nz(nh), nz(hd))?;
            Ok(())
        };
        let run_twin = || -> Result<()> {
            // SAFETY: as above.
            unsafe {
                twins::twin_permute_kernel_backward::launch_in(
                    &lm,
                    &stream,
                    config,
                    ptr(&twin_out),
                    ptr(&dq),
                    ptr(&dk),
                    ptr(&dv),
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
        TABLE.row("llm.c permute_kernel_backward", &format!("B{b} T{t} NH{nh} HS{hd} bf16"), times, &check_bits("bf16", &ours.to_vec()?, &twin_out.to_vec()?));
        Ok(())
    });

    // L4: reduce_add_sum_kernel: n 4M bf16 (in place), m 8 rows of f32 partials; block 256,
    // CEIL_DIV(n, 256 * 4) blocks as llm.c's matmul_backward_bias.
    case("L4", || -> Result<()> {
        let (n, m) = (4usize << 20, 8usize);
        let src = DeviceBuffer::from_slice(&context, &random_f32(n * m, 7))?;
        let dst0 = random_bf16(n, 8, 2.0);
        let config = LaunchConfig::new((n as u32).div_ceil(256 * 4), 256);
        let src4 = src.cast::<llmc::F128>()?;
        for fixed in [false, true] {
            let mut ours = DeviceBuffer::from_slice(&context, &dst0)?;
            let mut twin_out = DeviceBuffer::from_slice(&context, &dst0)?;
            let mut run_ours = || -> Result<()> {
                if fixed {
                    llmc::reduce_add_sum_kernel_fixed::launch(&stream, config, &mut ours, &src4, n as u32, m as u32)?;
                } else {
                    llmc::reduce_add_sum_kernel::launch(&stream, config, &mut ours, &src4, n as u32, m as u32)?;
                }
                Ok(())
            };
            let run_twin = || -> Result<()> {
                // SAFETY: as above.
                unsafe { twins::twin_reduce_add_sum_kernel::launch_in(&lm, &stream, config, ptr(&twin_out), ptr(&src), n as u64, m as u64)? };
                Ok(())
            };
            let reps = reps_for(&context, &stream, &mut run_ours)?;
            let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
            // The check: one launch of each on the same fresh input.
            stream.synchronize()?;
            ours.copy_from_host(&dst0)?;
            twin_out.copy_from_host(&dst0)?;
            if fixed {
                llmc::reduce_add_sum_kernel_fixed::launch(&stream, config, &mut ours, &src4, n as u32, m as u32)?;
            } else {
                llmc::reduce_add_sum_kernel::launch(&stream, config, &mut ours, &src4, n as u32, m as u32)?;
            }
            // SAFETY: as above.
            unsafe { twins::twin_reduce_add_sum_kernel::launch_in(&lm, &stream, config, ptr(&twin_out), ptr(&src), n as u64, m as u64)? };
            stream.synchronize()?;
            let name = if fixed { "  fix: reduce_add_sum_kernel strided_x4" } else { "llm.c reduce_add_sum_kernel" };
            TABLE.row(name, &format!("n {n} bf16, m {m}"), times, &check_bits("bf16", &ours.to_vec()?, &twin_out.to_vec()?));
        }
        Ok(())
    });

    // L5: fused_residual_forward_kernel5: N = B T = 16384 rows of C 768; llm.c's block (32, 8),
    // the port's 256 (the same 8 warps), (2 + 8) C 2 shared bytes.
    case("L5", || -> Result<()> {
        let (rows, c, block_y) = (16384usize, 768usize, 8usize);
        let a = DeviceBuffer::from_slice(&context, &random_bf16(rows * c, 9, 2.0))?;
        let b = DeviceBuffer::from_slice(&context, &random_bf16(rows * c, 10, 2.0))?;
        let w = DeviceBuffer::from_slice(&context, &random_bf16(c, 11, 1.0))?;
        let bias = DeviceBuffer::from_slice(&context, &random_bf16(c, 12, 0.5))?;
        let smem = ((2 + block_y) * c * 2) as u32;
        let grid = (rows / block_y) as u32;
        let config = LaunchConfig::new(grid, (32 * block_y) as u32).with_shared_bytes(smem);
        let twin_config = LaunchConfig::new(grid, (32, block_y as u32)).with_shared_bytes(smem);
        let (a8, b8, w8, bias8) = (a.cast::<llmc::X128>()?, b.cast::<llmc::X128>()?, w.cast::<llmc::X128>()?, bias.cast::<llmc::X128>()?);
        let twin_res = DeviceBuffer::<bf16>::zeroed(&context, rows * c)?;
        let twin_norm = DeviceBuffer::<bf16>::zeroed(&context, rows * c)?;
        let twin_mean = DeviceBuffer::<f32>::zeroed(&context, rows)?;
        let twin_rstd = DeviceBuffer::<f32>::zeroed(&context, rows)?;
        for fixed in [false, true] {
            let mut res = DeviceBuffer::<bf16>::zeroed(&context, rows * c)?;
            let mut norm = DeviceBuffer::<bf16>::zeroed(&context, rows * c)?;
            let mut mean = DeviceBuffer::<f32>::zeroed(&context, rows)?;
            let mut rstd = DeviceBuffer::<f32>::zeroed(&context, rows)?;
            let mut run_ours = || -> Result<()> {
                let (mut r8, mut n8) = (res.cast_mut::<llmc::X128>()?, norm.cast_mut::<llmc::X128>()?);
                if fixed {
                    llmc::fused_residual_forward_kernel5_fixed::launch(
                        &stream,
                        config,
                        &mut r8,
                        &mut n8,
                        &mut mean,
                        &mut rstd,
                        &a8,
                        &b8,
                        &w8,
                        &bias8,
                        (c / 8) as u32,
                    )?;
                } else {
                    llmc::fused_residual_forward_kernel5::launch(
                        &stream,
                        config,
                        &mut r8,
                        &mut n8,
                        &mut mean,
                        &mut rstd,
                        &a8,
                        &b8,
                        &w8,
                        &bias8,
                        (c / 8) as u32,
                    )?;
                }
                Ok(())
            };
            let run_twin = || -> Result<()> {
                // SAFETY: as above.
                unsafe {
                    twins::twin_fused_residual_forward_kernel5::launch_in(
                        &lm,
                        &stream,
                        twin_config,
                        ptr(&twin_res),
                        ptr(&twin_norm),
                        ptr(&twin_mean),
                        ptr(&twin_rstd),
                        ptr(&a),
                        ptr(&b),
                        ptr(&w),
                        ptr(&bias),
                        rows as i32,
                        c as i32,
                    )?
                };
                Ok(())
            };
            let reps = reps_for(&context, &stream, &mut run_ours)?;
            let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
            stream.synchronize()?;
            let check = format!(
                "{}; {}; {}; {}",
                check_bits("residual", &res.to_vec()?, &twin_res.to_vec()?),
                check_bits("normed", &norm.to_vec()?, &twin_norm.to_vec()?),
                check_f32("mean", &mean.to_vec()?, &twin_mean.to_vec()?, 1e-5),
                check_f32("rstd", &rstd.to_vec()?, &twin_rstd.to_vec()?, 1e-5)
            );
            let name = if fixed { "  fix: fused_residual_forward_kernel5" } else { "llm.c fused_residual_forward_kernel5" };
            TABLE.row(name, &format!("N{rows} C{c} bf16, 8 warps"), times, &check);
        }
        Ok(())
    });

    // V1: act_and_mul_kernel_with_param<bf16, fatrelu>: 8192 tokens of d 4096; block 1024.
    case("V1", || -> Result<()> {
        let (tokens, d) = (8192u32, 4096u32);
        let input = DeviceBuffer::from_slice(&context, &random_bf16((tokens * 2 * d) as usize, 13, 3.0))?;
        let mut ours = DeviceBuffer::<bf16>::zeroed(&context, (tokens * d) as usize)?;
        let twin_out = DeviceBuffer::<bf16>::zeroed(&context, (tokens * d) as usize)?;
        let config = LaunchConfig::new(tokens, d.min(1024));
        let threshold = 0.25f32;
        let mut run_ours = || -> Result<()> {
            vllm::act_and_mul_kernel_with_param::launch(&stream, config, &mut ours, &input, d, threshold)?;
            Ok(())
        };
        let run_twin = || -> Result<()> {
            // SAFETY: as above.
            unsafe { twins::twin_act_and_mul_kernel_with_param::launch_in(&vm, &stream, config, ptr(&twin_out), ptr(&input), d as i32, threshold)? };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_ours)?;
        let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
        stream.synchronize()?;
        TABLE.row(
            "vLLM act_and_mul_kernel_with_param<fatrelu>",
            &format!("{tokens}x{d} bf16, block 1024"),
            times,
            &check_bits("bf16", &ours.to_vec()?, &twin_out.to_vec()?),
        );
        Ok(())
    });

    // V2: static_scaled_int8_quant_kernel<bf16, float>: 8192 tokens of hidden 8192; block 1024.
    // Then the fix (session 19, after the GPU call: not measured there): 31 registers.
    case("V2", || -> Result<()> {
        let (tokens, hidden) = (8192u32, 8192u32);
        let input = DeviceBuffer::from_slice(&context, &random_bf16((tokens * hidden) as usize, 14, 3.0))?;
        let scale = DeviceBuffer::from_slice(&context, &[0.02f32])?;
        let twin_out = DeviceBuffer::<i8>::zeroed(&context, input.len())?;
        let config = LaunchConfig::new(tokens, hidden.min(1024));
        let input8 = input.cast::<vllm::Bf16x8>()?;
        for variant in 0..4 {
            let fixed = variant == 1;
            let mut ours = DeviceBuffer::<i8>::zeroed(&context, input.len())?;
            let mut run_ours = || -> Result<()> {
                if variant == 2 {
                    // Session 20: the BlockRowsX16 port (any hidden; here head and tail empty).
                    vllm::static_scaled_int8_quant_kernel_x16::launch(&stream, config, &input, &mut ours, &scale, hidden)?;
                    return Ok(());
                }
                if variant == 3 {
                    // Session 21: the same with the idle threads returning first (`has_work`).
                    vllm::static_scaled_int8_quant_kernel_x16_idle::launch(&stream, config, &input, &mut ours, &scale, hidden)?;
                    return Ok(());
                }
                let mut o = ours.cast_mut::<vllm::I8x16>()?;
                if fixed {
                    vllm::static_scaled_int8_quant_kernel_fixed::launch(&stream, config, &input8, &mut o, &scale, hidden / 16)?;
                } else {
                    vllm::static_scaled_int8_quant_kernel::launch(&stream, config, &input8, &mut o, &scale, hidden / 16)?;
                }
                Ok(())
            };
            let run_twin = || -> Result<()> {
                // SAFETY: as above.
                unsafe {
                    twins::twin_static_scaled_int8_quant_kernel::launch_in(&vm, &stream, config, ptr(&input), ptr(&twin_out), ptr(&scale), hidden as i32)?
                };
                Ok(())
            };
            let reps = reps_for(&context, &stream, &mut run_ours)?;
            let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
            stream.synchronize()?;
            let name = match variant {
                1 => "  fix: static_scaled_int8 packed, 31 regs",
                2 => "  s20: BlockRowsX16 (any hidden)",
                3 => "  s21: BlockRowsX16, idle threads return",
                _ => "vLLM static_scaled_int8_quant_kernel",
            };
            TABLE.row(name, &format!("{tokens}x{hidden} bf16, block 1024"), times, &check_bits("i8", &ours.to_vec()?, &twin_out.to_vec()?));
        }
        Ok(())
    });

    // V3: dynamic_scaled_int8_quant_kernel<bf16, float>: 8192 tokens of hidden 8192; block 1024.
    case("V3", || -> Result<()> {
        let (tokens, hidden) = (8192u32, 8192u32);
        let input = DeviceBuffer::from_slice(&context, &random_bf16((tokens * hidden) as usize, 15, 3.0))?;
        let twin_out = DeviceBuffer::<i8>::zeroed(&context, input.len())?;
        let twin_scale = DeviceBuffer::<f32>::zeroed(&context, tokens as usize)?;
        let config = LaunchConfig::new(tokens, hidden.min(1024));
        let input8 = input.cast::<vllm::Bf16x8>()?;
        for fixed in [false, true] {
            let mut ours = DeviceBuffer::<i8>::zeroed(&context, input.len())?;
            let mut scale = DeviceBuffer::<f32>::zeroed(&context, tokens as usize)?;
            let mut run_ours = || -> Result<()> {
                let mut o = ours.cast_mut::<vllm::I8x16>()?;
                if fixed {
                    vllm::dynamic_scaled_int8_quant_kernel_fixed::launch(&stream, config, &input8, &mut o, &mut scale, hidden / 16)?;
                } else {
                    vllm::dynamic_scaled_int8_quant_kernel::launch(&stream, config, &input8, &mut o, &mut scale, hidden / 16)?;
                }
                Ok(())
            };
            let run_twin = || -> Result<()> {
                // SAFETY: as above.
                unsafe {
                    twins::twin_dynamic_scaled_int8_quant_kernel::launch_in(&vm, &stream, config, ptr(&input), ptr(&twin_out), ptr(&twin_scale), hidden as i32)?
                };
                Ok(())
            };
            let reps = reps_for(&context, &stream, &mut run_ours)?;
            let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
            stream.synchronize()?;
            let check = format!("{}; {}", check_bits("i8", &ours.to_vec()?, &twin_out.to_vec()?), check_bits("scale", &scale.to_vec()?, &twin_scale.to_vec()?));
            let name = if fixed { "  fix: dynamic_scaled_int8 reduce_broadcast" } else { "vLLM dynamic_scaled_int8_quant_kernel" };
            TABLE.row(name, &format!("{tokens}x{hidden} bf16, block 1024"), times, &check);
        }
        Ok(())
    });
    Ok(())
}
