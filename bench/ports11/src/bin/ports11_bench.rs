//! bench/ports11's GPU bench: each Rust port beside its CUDA C++ twin (the public sources as
//! written, `bench/ports11/cuda/ports11.cu`, built by nvcc in the GPU job), on the same inputs
//! and launch shapes, timed with `ferrocuda-bench-timing`, then the outputs compared. A report,
//! not a test: nothing is asserted. `PORTS11_ONLY=L1,V2` runs a subset.
//!
//! Usage: `ports11_bench LLMC_CUBIN LLMC_NOFAST_CUBIN VLLM_CUBIN`.

use std::num::NonZeroU32;

use ferrocuda::{Context, DeviceBuffer, Stream};
use ferrocuda_bench_timing::{self as timing, PASSES, Result, Table, WARMUP, case, check_bits, check_f32, max_rel_err, ptr, reps_for, time_pair};
use ferrocuda_ports11::{block_tables, uniform, uniform_bf16};
use ports11_kernels::twins::*;
use ports11_kernels::*;

const ONLY: &str = "PORTS11_ONLY";

fn nz(v: u32) -> NonZeroU32 {
    NonZeroU32::new(v).expect("a bench shape is not zero")
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    // A fourth cubin (session 24): bench/results/s23-gaps/nvcc-s23.cu's, for the R1024 case.
    let (llmc_cubin, nofast_cubin, vllm_cubin, s23_cubin) = match &args[..] {
        [_, l, n, v] => (l, n, v, None),
        [_, l, n, v, s] => (l, n, v, Some(s)),
        _ => {
            return Err("usage: ports11_bench LLMC_CUBIN LLMC_NOFAST_CUBIN VLLM_CUBIN [S23_CUBIN] (nvcc's builds of bench/ports11/cuda/ports11.cu \
                        and bench/results/s23-gaps/nvcc-s23.cu)"
                .into());
        }
    };
    let context = Context::primary(0)?;
    let stream = Stream::new(&context)?;
    timing::print_device(&context)?;
    let sms = context.device().multiprocessor_count()?;
    // SAFETY: the cubins are nvcc's output for ports11.cu (the job script builds them there), and
    // each twin is launched through the stub of its own parameter list.
    let (lm, lm_nofast, vm) = unsafe {
        (
            timing::load_cubin(&context, "ports11_llmc", llmc_cubin)?,
            timing::load_cubin(&context, "ports11_llmc_nofast", nofast_cubin)?,
            timing::load_cubin(&context, "ports11_vllm", vllm_cubin)?,
        )
    };
    println!("twins: {llmc_cubin}, {nofast_cubin}, {vllm_cubin}; each time the median of {PASSES} passes (ms per launch), after {WARMUP} warm-ups");
    let table = Table::new(36, 34);
    println!("{}", table.header());

    // Session 24, item 4: does `RuntimeBlockReduce`'s trailing barrier cost at 1024 threads?
    // bench/results/s23-gaps' R1024 shape (65536 rows of 1024 floats, one a thread, block size at
    // run time) against `cub::BlockReduce<float, 1024>`: the library's `sum`, and the same
    // two-level fold written out with one barrier and with two.
    if let Some(s23_cubin) = s23_cubin {
        // SAFETY: nvcc's build of nvcc-s23.cu; `row_sum_1024` is launched through its stub.
        let s23m = unsafe { timing::load_cubin(&context, "s23_gaps", s23_cubin)? };
        case(ONLY, "R1024", || -> Result<()> {
            let (rows, cols, block) = (65536usize, 1024usize, 1024u32);
            let x = DeviceBuffer::from_slice(&context, &uniform(rows * cols, 41))?;
            let mut ours = DeviceBuffer::<f32>::zeroed(&context, rows)?;
            let twin_out = DeviceBuffer::<f32>::zeroed(&context, rows)?;
            let config = (rows as u32, block);
            let run_twin = || -> Result<()> {
                // SAFETY: sums holds a float a row, x rows x cols floats; blocks of 1024.
                unsafe { s24::twin_row_sum_1024::launch_in(&s23m, &stream, config, ptr(&twin_out), ptr(&x), cols as i32)? };
                Ok(())
            };
            for form in ["library", "one_barrier", "two_barriers", "two_barriers_rank3d", "two_barriers_tested_fold"] {
                let mut run_ours = || -> Result<()> {
                    match form {
                        "library" => s24::s24_row_sum_library::launch(&stream, config, &mut ours, &x, cols as u32)?,
                        "one_barrier" => s24::s24_row_sum_one_barrier::launch(&stream, config, &mut ours, &x, cols as u32)?,
                        "two_barriers_rank3d" => s24::s24_row_sum_two_barriers_rank3d::launch(&stream, config, &mut ours, &x, cols as u32)?,
                        "two_barriers_tested_fold" => s24::s24_row_sum_two_barriers_tested_fold::launch(&stream, config, &mut ours, &x, cols as u32)?,
                        _ => s24::s24_row_sum_two_barriers::launch(&stream, config, &mut ours, &x, cols as u32)?,
                    }
                    Ok(())
                };
                let reps = reps_for(&context, &stream, &mut run_ours)?;
                let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
                stream.synchronize()?;
                // The trees differ (CUB's fold and ours): 1e-4 relative, floor 1e-3.
                let check = check_f32("", &ours.to_vec()?, &twin_out.to_vec()?, 1e-4, max_rel_err);
                table.row(&format!("R1024 row sum, {form} (s24)"), &format!("{rows}x{cols} f32, block {block}"), times, &check);
            }
            Ok(())
        });
    }

    case(ONLY, "L1", || -> Result<()> {
        let (n, c, block) = (8192usize, 768usize, 256u32);
        let inp = DeviceBuffer::from_slice(&context, &uniform(n * c, 1))?;
        let weight = DeviceBuffer::from_slice(&context, &uniform(c, 2))?;
        let bias = DeviceBuffer::from_slice(&context, &uniform(c, 3))?;
        let mut ours = DeviceBuffer::<f32>::zeroed(&context, n * c)?;
        let mut ours_mean = DeviceBuffer::<f32>::zeroed(&context, n)?;
        let mut ours_rstd = DeviceBuffer::<f32>::zeroed(&context, n)?;
        let twin = DeviceBuffer::<f32>::zeroed(&context, n * c)?;
        let twin_mean = DeviceBuffer::<f32>::zeroed(&context, n)?;
        let twin_rstd = DeviceBuffer::<f32>::zeroed(&context, n)?;
        let config = (n as u32, block);
        let mut run_ours = || -> Result<()> {
            layernorm_forward_kernel5::launch(&stream, config, &mut ours, &mut ours_mean, &mut ours_rstd, &inp, &weight, &bias, n as u32, c as u32)?;
            Ok(())
        };
        let run_twin = || -> Result<()> {
            // SAFETY: the buffers hold n x c, n and c floats, as the kernel reads and writes them.
            unsafe {
                twin_layernorm_forward_kernel5::launch_in(
                    &lm,
                    &stream,
                    config,
                    ptr(&twin),
                    ptr(&twin_mean),
                    ptr(&twin_rstd),
                    ptr(&inp),
                    ptr(&weight),
                    ptr(&bias),
                    n as i32,
                    c as i32,
                )?
            };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_ours)?;
        let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
        stream.synchronize()?;
        let check = format!(
            "{}; {}; {}",
            check_f32("out", &ours.to_vec()?, &twin.to_vec()?, 1e-5, max_rel_err),
            check_bits("mean", &ours_mean.to_vec()?, &twin_mean.to_vec()?),
            check_bits("rstd", &ours_rstd.to_vec()?, &twin_rstd.to_vec()?)
        );
        table.row("L1 layernorm_forward_kernel5", &format!("{n}x{c} f32, block {block}"), times, &check);
        // The fix round (RESULTS.md), beside the same twin on the same buffers.
        let mut run_fix = || -> Result<()> {
            layernorm_forward_kernel5_fix::launch(&stream, config, &mut ours, &mut ours_mean, &mut ours_rstd, &inp, &weight, &bias, n as u32, c as u32)?;
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_fix)?;
        let times = time_pair(&context, &stream, reps, run_fix, run_twin)?;
        stream.synchronize()?;
        let check = format!(
            "{}; {}; {}",
            check_f32("out", &ours.to_vec()?, &twin.to_vec()?, 1e-5, max_rel_err),
            check_bits("mean", &ours_mean.to_vec()?, &twin_mean.to_vec()?),
            check_bits("rstd", &ours_rstd.to_vec()?, &twin_rstd.to_vec()?)
        );
        table.row("L1 layernorm_forward_kernel5_fix", &format!("{n}x{c} f32, block {block}"), times, &check);
        // Session 24 (bench/results/s24-gaps/): the first try and the fix under
        // `#[kernel(ftz)]`, nvcc's `-ftz=true`; `out` compared bit for bit too.
        let mut run_ftz = || -> Result<()> {
            s24::layernorm_forward_kernel5_ftz::launch(&stream, config, &mut ours, &mut ours_mean, &mut ours_rstd, &inp, &weight, &bias, n as u32, c as u32)?;
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_ftz)?;
        let times = time_pair(&context, &stream, reps, run_ftz, run_twin)?;
        stream.synchronize()?;
        let check = format!(
            "{}; {}; {}",
            check_bits("out", &ours.to_vec()?, &twin.to_vec()?),
            check_bits("mean", &ours_mean.to_vec()?, &twin_mean.to_vec()?),
            check_bits("rstd", &ours_rstd.to_vec()?, &twin_rstd.to_vec()?)
        );
        table.row("L1 layernorm_forward_kernel5_ftz (s24)", &format!("{n}x{c} f32, block {block}"), times, &check);
        let mut run_fix_ftz = || -> Result<()> {
            s24::layernorm_forward_kernel5_fix_ftz::launch(
                &stream,
                config,
                &mut ours,
                &mut ours_mean,
                &mut ours_rstd,
                &inp,
                &weight,
                &bias,
                n as u32,
                c as u32,
            )?;
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_fix_ftz)?;
        let times = time_pair(&context, &stream, reps, run_fix_ftz, run_twin)?;
        stream.synchronize()?;
        let check = format!(
            "{}; {}; {}",
            check_bits("out", &ours.to_vec()?, &twin.to_vec()?),
            check_bits("mean", &ours_mean.to_vec()?, &twin_mean.to_vec()?),
            check_bits("rstd", &ours_rstd.to_vec()?, &twin_rstd.to_vec()?)
        );
        table.row("L1 layernorm_forward_kernel5_fix_ftz (s24)", &format!("{n}x{c} f32, block {block}"), times, &check);
        Ok(())
    });

    case(ONLY, "L2", || -> Result<()> {
        let (b, t, oc, block) = (8usize, 1024usize, 3072usize, 512u32);
        let dout = DeviceBuffer::from_slice(&context, &uniform_bf16(b * t * oc, 4, 1.0))?;
        let dbias0 = uniform_bf16(oc, 5, 4.0);
        let mut ours = DeviceBuffer::from_slice(&context, &dbias0)?;
        let mut twin = DeviceBuffer::from_slice(&context, &dbias0)?;
        let twin_at = twin.as_device_ptr();
        let config = (oc as u32, block);
        {
            let mut run_ours = || -> Result<()> {
                matmul_backward_bias_kernel3::launch(&stream, config, &mut ours, &dout, b as u32, t as u32, oc as u32)?;
                Ok(())
            };
            let run_twin = || -> Result<()> {
                // SAFETY: dout holds b t oc elements and dbias oc; grid oc blocks.
                unsafe { twin_matmul_backward_bias_kernel3::launch_in(&lm_nofast, &stream, config, ptr(twin_at), ptr(&dout), b as i32, t as i32, oc as i32)? };
                Ok(())
            };
            let reps = reps_for(&context, &stream, &mut run_ours)?;
            let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
            stream.synchronize()?;
            // In place (dbias +=): one more launch of each on fresh copies for the check.
            ours.copy_from_host(&dbias0)?;
            twin.copy_from_host(&dbias0)?;
            matmul_backward_bias_kernel3::launch(&stream, config, &mut ours, &dout, b as u32, t as u32, oc as u32)?;
            // SAFETY: as above.
            unsafe { twin_matmul_backward_bias_kernel3::launch_in(&lm_nofast, &stream, config, ptr(&twin), ptr(&dout), b as i32, t as i32, oc as i32)? };
            stream.synchronize()?;
            let check = check_bits("bf16", &ours.to_vec()?, &twin.to_vec()?);
            table.row("L2 matmul_backward_bias_kernel3", &format!("{}x{oc} bf16, block {block}", b * t), times, &check);
            // The fix round (RESULTS.md): timed beside the same twin, checked the same way.
            let mut run_fix = || -> Result<()> {
                matmul_backward_bias_kernel3_fix::launch(&stream, config, &mut ours, &dout, b as u32, t as u32, oc as u32)?;
                Ok(())
            };
            let reps = reps_for(&context, &stream, &mut run_fix)?;
            let times = time_pair(&context, &stream, reps, run_fix, run_twin)?;
            stream.synchronize()?;
            ours.copy_from_host(&dbias0)?;
            twin.copy_from_host(&dbias0)?;
            matmul_backward_bias_kernel3_fix::launch(&stream, config, &mut ours, &dout, b as u32, t as u32, oc as u32)?;
            // SAFETY: as above.
            unsafe { twin_matmul_backward_bias_kernel3::launch_in(&lm_nofast, &stream, config, ptr(&twin), ptr(&dout), b as i32, t as i32, oc as i32)? };
            stream.synchronize()?;
            let check = check_bits("bf16", &ours.to_vec()?, &twin.to_vec()?);
            table.row("L2 matmul_backward_bias_kernel3_fix", &format!("{}x{oc} bf16, block {block}", b * t), times, &check);
        }
        Ok(())
    });

    case(ONLY, "L3", || -> Result<()> {
        let (n, c, block) = (4096usize, 50257usize, 256u32);
        let inp = DeviceBuffer::from_slice(&context, &uniform(n * c, 6).iter().map(|v| 8.0 * v).collect::<Vec<_>>())?;
        let mut ours = DeviceBuffer::<f32>::zeroed(&context, n * c)?;
        let twin = DeviceBuffer::<f32>::zeroed(&context, n * c)?;
        let config = ((n as u32).div_ceil(block / 32), block);
        let mut run_ours = || -> Result<()> {
            softmax_forward_online_kernel8::launch(&stream, config, &mut ours, &inp, n as u32, c as u32)?;
            Ok(())
        };
        let run_twin = || -> Result<()> {
            // SAFETY: both hold n x c floats.
            unsafe { twin_softmax_forward_online_kernel8::launch_in(&lm, &stream, config, ptr(&twin), ptr(&inp), n as i32, c as i32)? };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_ours)?;
        let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
        stream.synchronize()?;
        let check = check_f32("", &ours.to_vec()?, &twin.to_vec()?, 1e-5, max_rel_err);
        table.row("L3 softmax_forward_online_kernel8", &format!("{n}x{c} f32, block {block}"), times, &check);
        Ok(())
    });

    case(ONLY, "L4", || -> Result<()> {
        let (count, block) = (1usize << 26, 512u32);
        let grid = 2048 * sms / block;
        let data = DeviceBuffer::from_slice(&context, &uniform_bf16(count, 7, 2.0))?;
        let mut ours = DeviceBuffer::<f32>::zeroed(&context, 1)?;
        let mut twin = DeviceBuffer::<f32>::zeroed(&context, 1)?;
        let twin_at = twin.as_device_ptr();
        let config = (grid, block);
        {
            let mut run_ours = || -> Result<()> {
                norm_kernel2::launch(&stream, config, &mut ours, &data)?;
                Ok(())
            };
            let run_twin = || -> Result<()> {
                // SAFETY: data holds count elements, out one float.
                unsafe { twin_norm_kernel2::launch_in(&lm, &stream, config, ptr(twin_at), ptr(&data), count as u64)? };
                Ok(())
            };
            let reps = reps_for(&context, &stream, &mut run_ours)?;
            let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
            stream.synchronize()?;
            ours.fill(0.0)?;
            twin.fill(0.0)?;
            norm_kernel2::launch(&stream, config, &mut ours, &data)?;
            // SAFETY: as above.
            unsafe { twin_norm_kernel2::launch_in(&lm, &stream, config, ptr(&twin), ptr(&data), count as u64)? };
            stream.synchronize()?;
            // One atomic add a warp in whatever order the warps finish: not bit-reproducible.
            let check = check_f32("sum", &ours.to_vec()?, &twin.to_vec()?, 1e-5, max_rel_err);
            table.row("L4 norm_kernel2<bf16>", &format!("{count} bf16, {grid}x{block}"), times, &check);
        }
        Ok(())
    });

    let (b, nh, t) = (8usize, 12usize, 1024usize);
    case(ONLY, "L5", || -> Result<()> {
        let block = 256u32;
        let preatt = DeviceBuffer::from_slice(&context, &uniform(b * nh * t * t, 8).iter().map(|v| 6.0 * v).collect::<Vec<_>>())?;
        let mut ours = DeviceBuffer::<f32>::zeroed(&context, b * nh * t * t)?;
        let twin = DeviceBuffer::<f32>::zeroed(&context, b * nh * t * t)?;
        let config = (((b * nh * t) as u32).div_ceil(block), block);
        let mut run_ours = || -> Result<()> {
            attention_softmax_kernel1::launch(&stream, config, &mut ours, &preatt, b as u32, nz(t as u32), nz(nh as u32))?;
            Ok(())
        };
        let run_twin = || -> Result<()> {
            // SAFETY: both hold b nh t t floats.
            unsafe { twin_attention_softmax_kernel1::launch_in(&lm, &stream, config, ptr(&twin), ptr(&preatt), b as i32, t as i32, nh as i32)? };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_ours)?;
        let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
        stream.synchronize()?;
        let check = check_bits("f32", &ours.to_vec()?, &twin.to_vec()?);
        table.row("L5 attention_softmax_kernel1", &format!("{b}x{nh}x{t}x{t} f32, block {block}"), times, &check);
        // Session 24: the `PermutedRows` form (the source's three passes, plain stores and
        // loads of the thread's own row), beside the same twin.
        let mut run_perm = || -> Result<()> {
            s24::attention_softmax_kernel1_perm::launch(&stream, config, &mut ours, &preatt, t as u32, nh as u32)?;
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_perm)?;
        let times = time_pair(&context, &stream, reps, run_perm, run_twin)?;
        stream.synchronize()?;
        let check = check_bits("f32", &ours.to_vec()?, &twin.to_vec()?);
        table.row("L5 attention_softmax_kernel1_perm (s24)", &format!("{b}x{nh}x{t}x{t} f32, block {block}"), times, &check);
        Ok(())
    });

    case(ONLY, "L6", || -> Result<()> {
        let block = 256u32;
        let n = b * nh * t * t;
        let inp0 = uniform(n, 9);
        let mut ours = DeviceBuffer::from_slice(&context, &inp0)?;
        let mut twin = DeviceBuffer::from_slice(&context, &inp0)?;
        let twin_at = twin.as_device_ptr();
        let config = ((n as u32).div_ceil(block), block);
        let scale = 1.0 / (64f32).sqrt();
        {
            let mut run_ours = || -> Result<()> {
                scale_kernel::launch(&stream, config, &mut ours, scale, b as u32, nh as u32, nz(t as u32))?;
                Ok(())
            };
            let run_twin = || -> Result<()> {
                // SAFETY: inp holds b nh t t floats.
                unsafe { twin_scale_kernel::launch_in(&lm, &stream, config, ptr(twin_at), scale, b as i32, nh as i32, t as i32)? };
                Ok(())
            };
            let reps = reps_for(&context, &stream, &mut run_ours)?;
            let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
            stream.synchronize()?;
            ours.copy_from_host(&inp0)?;
            twin.copy_from_host(&inp0)?;
            scale_kernel::launch(&stream, config, &mut ours, scale, b as u32, nh as u32, nz(t as u32))?;
            // SAFETY: as above.
            unsafe { twin_scale_kernel::launch_in(&lm, &stream, config, ptr(&twin), scale, b as i32, nh as i32, t as i32)? };
            stream.synchronize()?;
            let check = check_bits("f32", &ours.to_vec()?, &twin.to_vec()?);
            table.row("L6 scale_kernel (in place)", &format!("{b}x{nh}x{t}x{t} f32, block {block}"), times, &check);
        }
        Ok(())
    });

    case(ONLY, "V1", || -> Result<()> {
        let (blocks, stride, block) = (4096usize, 16 * 8 * 128usize, 512u32);
        let src = DeviceBuffer::from_slice(&context, &uniform_bf16(blocks * stride, 10, 600.0))?;
        let mut ours = DeviceBuffer::<u8>::zeroed(&context, blocks * stride)?;
        let twin = DeviceBuffer::<u8>::zeroed(&context, blocks * stride)?;
        let config = (blocks as u32, block);
        let scale = 1.5f32;
        let mut run_ours = || -> Result<()> {
            convert_fp8_kernel::launch(&stream, config, &src, &mut ours, scale, stride as u32)?;
            Ok(())
        };
        let run_twin = || -> Result<()> {
            // SAFETY: both hold blocks x stride elements.
            unsafe { twin_convert_fp8_kernel::launch_in(&vm, &stream, config, ptr(&src), ptr(&twin), scale, stride as i64)? };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_ours)?;
        let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
        stream.synchronize()?;
        let check = check_bits("fp8", &ours.to_vec()?, &twin.to_vec()?);
        table.row("V1 convert_fp8_kernel<u8, bf16, e4m3>", &format!("{blocks}x{stride} bf16, block {block}"), times, &check);
        Ok(())
    });

    case(ONLY, "V2", || -> Result<()> {
        let seqs = (sms * ADVANCE_STEP_THREADS) as usize;
        // Wide enough for the positions after every launch of the timing (each adds 1).
        let stride = 1100usize;
        let lens0: Vec<i32> = (0..seqs).map(|s| ((s * 37) % 200) as i32).collect();
        let tables = DeviceBuffer::from_slice(&context, &block_tables(seqs, stride))?;
        let sampled = DeviceBuffer::<i64>::zeroed(&context, seqs)?;
        let mut ours_lens = DeviceBuffer::from_slice(&context, &lens0)?;
        let mut ours_pos = DeviceBuffer::<i64>::zeroed(&context, seqs)?;
        let mut ours_slots = DeviceBuffer::<i32>::zeroed(&context, seqs)?;
        let mut twin_lens = DeviceBuffer::from_slice(&context, &lens0)?;
        let twin_pos = DeviceBuffer::<i64>::zeroed(&context, seqs)?;
        let twin_slots = DeviceBuffer::<i32>::zeroed(&context, seqs)?;
        let twin_lens_at = twin_lens.as_device_ptr();
        // vLLM's launch: one block per SM, 256 threads.
        let config = (sms, ADVANCE_STEP_THREADS);
        {
            let mut run_ours = || -> Result<()> {
                advance_step_kernel::launch(&stream, config, nz(16), &sampled, &mut ours_pos, &mut ours_lens, &mut ours_slots, &tables, stride as u32)?;
                Ok(())
            };
            let run_twin = || -> Result<()> {
                // SAFETY: the per-sequence arrays hold seqs elements, the tables seqs rows of
                // `stride`, wider than any position the timing reaches.
                unsafe {
                    twin_advance_step_kernel::launch_in(
                        &vm,
                        &stream,
                        config,
                        seqs as i32,
                        16,
                        ptr(&sampled),
                        ptr(&twin_pos),
                        ptr(twin_lens_at),
                        ptr(&twin_slots),
                        ptr(&tables),
                        stride as i64,
                    )?
                };
                Ok(())
            };
            let reps = reps_for(&context, &stream, &mut run_ours)?.min(1000);
            let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
            stream.synchronize()?;
            ours_lens.copy_from_host(&lens0)?;
            twin_lens.copy_from_host(&lens0)?;
            advance_step_kernel::launch(&stream, config, nz(16), &sampled, &mut ours_pos, &mut ours_lens, &mut ours_slots, &tables, stride as u32)?;
            // SAFETY: as above.
            unsafe {
                twin_advance_step_kernel::launch_in(
                    &vm,
                    &stream,
                    config,
                    seqs as i32,
                    16,
                    ptr(&sampled),
                    ptr(&twin_pos),
                    ptr(&twin_lens),
                    ptr(&twin_slots),
                    ptr(&tables),
                    stride as i64,
                )?
            };
            stream.synchronize()?;
            let check = format!(
                "{}; {}; {}",
                check_bits("lens", &ours_lens.to_vec()?, &twin_lens.to_vec()?),
                check_bits("pos", &ours_pos.to_vec()?, &twin_pos.to_vec()?),
                check_bits("slots", &ours_slots.to_vec()?, &twin_slots.to_vec()?)
            );
            table.row("V2 advance_step_kernel<256>", &format!("{seqs} seqs, {sms}x{ADVANCE_STEP_THREADS}"), times, &check);

            // The same pair with the host's launch path taken out: each side's 100 launches
            // captured into a CUDA graph and the graphs timed (RESULTS.md: V2 is launch-bound,
            // and the typed launcher's buffer bookkeeping is the one thing its twin skips).
            const IN_GRAPH: usize = 100;
            ours_lens.copy_from_host(&lens0)?;
            twin_lens.copy_from_host(&lens0)?;
            let ours_graph = stream
                .capture(|s| {
                    for _ in 0..IN_GRAPH {
                        advance_step_kernel::launch(s, config, nz(16), &sampled, &mut ours_pos, &mut ours_lens, &mut ours_slots, &tables, stride as u32)?;
                    }
                    Ok(())
                })?
                .instantiate()?;
            let twin_graph = stream
                .capture(|s| {
                    for _ in 0..IN_GRAPH {
                        // SAFETY: as above.
                        unsafe {
                            twin_advance_step_kernel::launch_in(
                                &vm,
                                s,
                                config,
                                seqs as i32,
                                16,
                                ptr(&sampled),
                                ptr(&twin_pos),
                                ptr(&twin_lens),
                                ptr(&twin_slots),
                                ptr(&tables),
                                stride as i64,
                            )?
                        };
                    }
                    Ok(())
                })?
                .instantiate()?;
            // SAFETY: every buffer the graphs use lives until this scope ends, after the last
            // replay has been synchronised; nothing else uses them meanwhile. 20 replays a pass
            // keep every position inside the block tables ((3 + 7 x 20) x 100 + 200 < stride x 16).
            let run_ours_graph = || -> Result<()> { Ok(unsafe { ours_graph.launch(&stream) }?) };
            let run_twin_graph = || -> Result<()> { Ok(unsafe { twin_graph.launch(&stream) }?) };
            let (o, t) = time_pair(&context, &stream, 20, run_ours_graph, run_twin_graph)?;
            stream.synchronize()?;
            let per_kernel = (o / IN_GRAPH as f64, t / IN_GRAPH as f64);
            table.row("V2 advance_step_kernel<256> (graphs)", &format!("{IN_GRAPH} launches a graph, per launch"), per_kernel, "(timing only)");
            // Session 24, item 5: the gather as a weak load (`LDG.E.EL`) instead of `.nc`.
            let weak_graph = stream
                .capture(|s| {
                    for _ in 0..IN_GRAPH {
                        s24::advance_step_kernel_weak_gather::launch(
                            s,
                            config,
                            nz(16),
                            &sampled,
                            &mut ours_pos,
                            &mut ours_lens,
                            &mut ours_slots,
                            &tables,
                            stride as u32,
                        )?;
                    }
                    Ok(())
                })?
                .instantiate()?;
            // Positions back to the start, so that this timing's replays stay inside the tables
            // as the first one's did (the twin reads no bound).
            stream.synchronize()?;
            ours_lens.copy_from_host(&lens0)?;
            twin_lens.copy_from_host(&lens0)?;
            // SAFETY: as above (the weak graph's buffers are the first graph's).
            let run_weak_graph = || -> Result<()> { Ok(unsafe { weak_graph.launch(&stream) }?) };
            let (o, t) = time_pair(&context, &stream, 20, run_weak_graph, run_twin_graph)?;
            stream.synchronize()?;
            let per_kernel = (o / IN_GRAPH as f64, t / IN_GRAPH as f64);
            table.row("V2 weak gather (graphs, s24)", &format!("{IN_GRAPH} launches a graph, per launch"), per_kernel, "(timing only)");
            // Session 24 (final call): without `.reqntid` (EIATTR_REQNTID), and without the unused
            // slice parameter (a smaller parameter block), each beside the twin's graph.
            for variant in ["no reqntid", "fewer params"] {
                stream.synchronize()?;
                ours_lens.copy_from_host(&lens0)?;
                twin_lens.copy_from_host(&lens0)?;
                let graph = stream
                    .capture(|s| {
                        for _ in 0..IN_GRAPH {
                            if variant == "no reqntid" {
                                s24::advance_step_kernel_no_reqntid::launch(
                                    s,
                                    config,
                                    nz(16),
                                    &sampled,
                                    &mut ours_pos,
                                    &mut ours_lens,
                                    &mut ours_slots,
                                    &tables,
                                    stride as u32,
                                )?;
                            } else {
                                s24::advance_step_kernel_fewer_params::launch(
                                    s,
                                    config,
                                    nz(16),
                                    &mut ours_pos,
                                    &mut ours_lens,
                                    &mut ours_slots,
                                    &tables,
                                    stride as u32,
                                )?;
                            }
                        }
                        Ok(())
                    })?
                    .instantiate()?;
                // SAFETY: as above (the same buffers as the first graph's).
                let run_graph = || -> Result<()> { Ok(unsafe { graph.launch(&stream) }?) };
                let (o, t) = time_pair(&context, &stream, 20, run_graph, run_twin_graph)?;
                stream.synchronize()?;
                let per_kernel = (o / IN_GRAPH as f64, t / IN_GRAPH as f64);
                table.row(&format!("V2 {variant} (graphs, s24)"), &format!("{IN_GRAPH} launches a graph, per launch"), per_kernel, "(timing only)");
            }
        }
        Ok(())
    });
    Ok(())
}
