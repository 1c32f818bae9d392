//! Times each port of bench/ports8 beside its CUDA C++ twin (the public source as written,
//! `cuda/ports8.cu`, built by nvcc on the GPU machine into two cubins: llm.c's with
//! `--use_fast_math`, vLLM's without) on GPU 0, and compares their outputs bit for bit from the
//! same inputs.
//!
//! `cargo run --release -p ferrocuda-ports8 --example ports8_bench -- LLMC.cubin VLLM.cubin`.
//! Timing, table and per-kernel cases are the shared harness's (`ferrocuda-bench-timing`,
//! bench/timing): each figure the median of its `PASSES` passes of about 20 ms of back-to-back
//! launches between two events, after warm-up, port and twin alternating. `PORTS8_ONLY=L2,V1`
//! runs a subset (labels L1-L4 for llm.c, V1-V4 for vLLM).

use ferrocuda::{Context, DeviceBuffer, DevicePtr, LaunchConfig, Stream};
use ferrocuda_bench_timing::{self as timing, Table, case, check_bits, ptr};
use ferrocuda_device::pack16::Bf16x8;
use half::bf16;
use ports8_llmc::{AGGREGATE_BLOCK, INIT_BLOCK, LN_BLOCK, WPE_BLOCK};
use ports8_twins::*;
use ports8_vllm::{Bf16x4, Fp8x4, Fp8x8, QUANT_BLOCK};
use std::num::NonZeroU32;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Twin and port on the shared harness: `reps` from the port's launch time, then
/// `time_pair`. Returns `(ours ms, twin ms)`, as `time_pair` and [`TABLE`]'s rows take them.
fn race(context: &Context, stream: &Stream, twin: &mut dyn FnMut() -> Res<()>, ours: &mut dyn FnMut() -> Res<()>) -> Res<(f64, f64)> {
    let reps = timing::reps_for(context, stream, &mut *ours)?;
    timing::time_pair(context, stream, reps, &mut *ours, &mut *twin)
}

/// The bench's report lines' column widths (kernel name, size).
const TABLE: Table = Table::new(38, 30);

/// [`timing::check_f32`] with the shared relative error ([`timing::max_rel_err`]).
fn check_f32(what: &str, ours: &[f32], twin: &[f32], tolerance: f32) -> String {
    timing::check_f32(what, ours, twin, tolerance, timing::max_rel_err)
}

/// A deterministic pseudo-random value in [-1, 1).
fn noise(i: usize, salt: u32) -> f32 {
    let h = ports8_llmc::squirrel_noise5(i as u32, salt);
    (h >> 8) as f32 / (1u32 << 23) as f32 - 1.0
}

fn bf16s(n: usize, salt: u32, scale: f32) -> Vec<bf16> {
    (0..n).map(|i| bf16::from_f32(noise(i, salt) * scale)).collect()
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(llmc_cubin), Some(vllm_cubin)) = (args.get(1), args.get(2)) else {
        return Err("usage: ports8_bench LLMC_CUBIN VLLM_CUBIN (nvcc's builds of bench/ports8/cuda/ports8.cu)".into());
    };
    let context = Context::primary(0)?;
    let stream = Stream::new(&context)?;
    timing::print_device(&context)?;
    // SAFETY: cubins built by nvcc from cuda/ports8.cu (the job script builds them); the stubs
    // in ports8_twins declare their kernels' parameter lists.
    let llmc = unsafe { timing::load_cubin(&context, "ports8_llmc_twins", llmc_cubin)? };
    // SAFETY: as above.
    let vllm = unsafe { timing::load_cubin(&context, "ports8_vllm_twins", vllm_cubin)? };
    println!("twins: {llmc_cubin}, {vllm_cubin}; each time the median of {} passes (ms per launch)", timing::PASSES);
    println!("{}", TABLE.header());

    // ------------------------------------------------------------ init_from_master_kernel
    case("PORTS8_ONLY", "L1", || -> Res<()> {
        let (n, slices, seed) = (4_718_592usize, 12usize, 0xdead_beefu32);
        let master = DeviceBuffer::from_slice(&context, &(0..n * slices).map(|i| noise(i, 1)).collect::<Vec<_>>())?;
        let mut ours = DeviceBuffer::<bf16>::zeroed(&context, n * slices)?;
        let twin = DeviceBuffer::<bf16>::zeroed(&context, n * slices)?;
        let config = LaunchConfig::new(((n as u32).div_ceil(INIT_BLOCK), slices as u32), INIT_BLOCK);
        let (tp, mp) = (twin.as_device_ptr(), master.as_device_ptr());
        let mut t = || -> Res<()> {
            // SAFETY: `twin` and `master` hold `slices` slices of `n` at stride `n`.
            unsafe { twin_init_from_master::launch_in(&llmc, &stream, config, tp, mp, n as u64, n as i64, n as i64, seed)? };
            Ok(())
        };
        let mut o = || -> Res<()> {
            ports8_llmc::init_from_master_kernel::launch(&stream, config, &mut ours, &master, n as u32, n as u32, n as u32, seed)?;
            Ok(())
        };
        let times = race(&context, &stream, &mut t, &mut o)?;
        stream.synchronize()?;
        let check = check_bits("bf16", &ours.to_vec()?, &twin.to_vec()?);
        TABLE.row("init_from_master_kernel (llm.c)", &format!("{slices} x {n} f32->bf16"), times, &check);
        Ok(())
    });

    // ------------------------------------------------------------ wpe_backward_kernel
    case("PORTS8_ONLY", "L2", || -> Res<()> {
        let (b, t, c, seed) = (32usize, 1024usize, 768usize, 1234u32);
        let dout_h = Bf16x8::collect(&bf16s(b * t * c, 2, 0.01)).unwrap();
        let dwpe_h = Bf16x8::collect(&bf16s(t * c, 3, 0.1)).unwrap();
        let dout = DeviceBuffer::from_slice(&context, &dout_h)?;
        let mut ours = DeviceBuffer::from_slice(&context, &dwpe_h)?;
        let mut twin = DeviceBuffer::from_slice(&context, &dwpe_h)?;
        let packs = (t * c / 8) as u32;
        let config = LaunchConfig::new(packs.div_ceil(WPE_BLOCK), WPE_BLOCK);
        let (tp, dp) = (twin.as_device_ptr(), dout.as_device_ptr());
        let null = DevicePtr::<i32>::from_address(0);
        let mut tw = || -> Res<()> {
            // SAFETY: `twin` holds T C bf16, `dout` B T C; `inp` is not read.
            unsafe { twin_wpe_backward::launch_in(&llmc, &stream, config, ptr(tp), ptr(dp), null, b as i32, t as i32, c as i32, seed)? };
            Ok(())
        };
        let mut o = || -> Res<()> {
            ports8_llmc::wpe_backward_kernel::launch(&stream, config, &mut ours, &dout, b as u32, seed)?;
            Ok(())
        };
        let times = race(&context, &stream, &mut tw, &mut o)?;
        let mut f = || -> Res<()> {
            ports8_llmc::wpe_backward_kernel_fixed::launch(&stream, config, &mut ours, &dout, b as u32, seed)?;
            Ok(())
        };
        let fixed = race(&context, &stream, &mut tw, &mut f)?;
        let mut f4 = || -> Res<()> {
            ports8_llmc::wpe_backward_kernel_x4::launch(&stream, config, &mut ours, &dout, b as u32, seed)?;
            Ok(())
        };
        let x4 = race(&context, &stream, &mut tw, &mut f4)?;
        // Outputs from the same state: one launch each on fresh copies.
        ours.copy_from_host(&dwpe_h)?;
        twin.copy_from_host(&dwpe_h)?;
        tw()?;
        ports8_llmc::wpe_backward_kernel::launch(&stream, config, &mut ours, &dout, b as u32, seed)?;
        stream.synchronize()?;
        let check = check_bits("bf16", Bf16x8::elements(&ours.to_vec()?), Bf16x8::elements(&twin.to_vec()?));
        TABLE.row("wpe_backward_kernel (llm.c)", &format!("B{b} T{t} C{c} bf16"), times, &check);
        ours.copy_from_host(&dwpe_h)?;
        ports8_llmc::wpe_backward_kernel_fixed::launch(&stream, config, &mut ours, &dout, b as u32, seed)?;
        stream.synchronize()?;
        let check = check_bits("bf16", Bf16x8::elements(&ours.to_vec()?), Bf16x8::elements(&twin.to_vec()?));
        TABLE.row("  wpe_backward_kernel_fixed", "", fixed, &check);
        ours.copy_from_host(&dwpe_h)?;
        ports8_llmc::wpe_backward_kernel_x4::launch(&stream, config, &mut ours, &dout, b as u32, seed)?;
        stream.synchronize()?;
        let check = check_bits("bf16", Bf16x8::elements(&ours.to_vec()?), Bf16x8::elements(&twin.to_vec()?));
        TABLE.row("  wpe_backward_kernel_x4 (s21)", "", x4, &check);
        Ok(())
    });

    // ------------------------------------------------------------ global_norm_aggregate_kernel
    case("PORTS8_ONLY", "L3", || -> Res<()> {
        let grid_size = 1024usize;
        let partials: Vec<f32> = (0..grid_size).map(|i| noise(i, 4).abs()).collect();
        let mut ours = DeviceBuffer::from_slice(&context, &partials)?;
        let mut twin = DeviceBuffer::from_slice(&context, &partials)?;
        let config = LaunchConfig::new(1, AGGREGATE_BLOCK);
        let tp = twin.as_device_ptr();
        let mut tw = || -> Res<()> {
            // SAFETY: `twin` holds `grid_size` floats; one block of 1024 threads.
            unsafe { twin_global_norm_aggregate::launch_in(&llmc, &stream, config, tp, grid_size as u64)? };
            Ok(())
        };
        let mut o = || -> Res<()> {
            ports8_llmc::global_norm_aggregate_kernel::launch(&stream, config, &mut ours, grid_size as u32)?;
            Ok(())
        };
        let times = race(&context, &stream, &mut tw, &mut o)?;
        let mut f = || -> Res<()> {
            ports8_llmc::global_norm_aggregate_kernel_fixed::launch(&stream, config, &mut ours, grid_size as u32)?;
            Ok(())
        };
        let fixed = race(&context, &stream, &mut tw, &mut f)?;
        ours.copy_from_host(&partials)?;
        twin.copy_from_host(&partials)?;
        tw()?;
        ports8_llmc::global_norm_aggregate_kernel::launch(&stream, config, &mut ours, grid_size as u32)?;
        stream.synchronize()?;
        let check = check_f32("f32", &ours.to_vec()?, &twin.to_vec()?, 1e-5);
        TABLE.row("global_norm_aggregate_kernel (llm.c)", &format!("{grid_size} partials"), times, &check);
        ours.copy_from_host(&partials)?;
        ports8_llmc::global_norm_aggregate_kernel_fixed::launch(&stream, config, &mut ours, grid_size as u32)?;
        stream.synchronize()?;
        let check = check_f32("f32", &ours.to_vec()?, &twin.to_vec()?, 1e-5);
        TABLE.row("  global_norm_aggregate_kernel_fixed", "", fixed, &check);
        Ok(())
    });

    // ------------------------------------------------------------ layernorm_forward_kernel6
    case("PORTS8_ONLY", "L4", || -> Res<()> {
        let (n, c) = (32_768usize, 768usize);
        let inp = DeviceBuffer::from_slice(&context, &Bf16x8::collect(&bf16s(n * c, 5, 2.0)).unwrap())?;
        let weight = DeviceBuffer::from_slice(&context, &Bf16x8::collect(&bf16s(c, 6, 1.0)).unwrap())?;
        let bias = DeviceBuffer::from_slice(&context, &Bf16x8::collect(&bf16s(c, 7, 0.2)).unwrap())?;
        let mut outs = [DeviceBuffer::<Bf16x8>::zeroed(&context, n * c / 8)?, DeviceBuffer::<Bf16x8>::zeroed(&context, n * c / 8)?];
        let mut means = [DeviceBuffer::<f32>::zeroed(&context, n)?, DeviceBuffer::<f32>::zeroed(&context, n)?];
        let mut rstds = [DeviceBuffer::<f32>::zeroed(&context, n)?, DeviceBuffer::<f32>::zeroed(&context, n)?];
        let block_y = LN_BLOCK / 32;
        let smem = (2 + block_y) * c as u32 * 2;
        let ours_cfg = LaunchConfig::new((n as u32).div_ceil(block_y), LN_BLOCK).with_shared_bytes(smem);
        let twin_cfg = LaunchConfig::new((n as u32).div_ceil(block_y), (32, block_y)).with_shared_bytes(smem);
        let (to, tm, tr) = (outs[0].as_device_ptr(), means[0].as_device_ptr(), rstds[0].as_device_ptr());
        let (ip, wp, bp) = (inp.as_device_ptr(), weight.as_device_ptr(), bias.as_device_ptr());
        let [_, ours_out] = &mut outs;
        let [_, ours_mean] = &mut means;
        let [_, ours_rstd] = &mut rstds;
        let mut tw = || -> Res<()> {
            // SAFETY: shapes as allocated above; blocks (32, 8) with (2 + 8) C 2 bytes of shared memory.
            unsafe { twin_layernorm_forward6::launch_in(&llmc, &stream, twin_cfg, ptr(to), tm, tr, ptr(ip), ptr(wp), ptr(bp), n as i32, c as i32)? };
            Ok(())
        };
        let mut o = || -> Res<()> {
            ports8_llmc::layernorm_forward_kernel6::launch(&stream, ours_cfg, ours_out, ours_mean, ours_rstd, &inp, &weight, &bias, n as u32, (c / 8) as u32)?;
            Ok(())
        };
        let times = race(&context, &stream, &mut tw, &mut o)?;
        stream.synchronize()?;
        let compare = |outs: &[DeviceBuffer<Bf16x8>; 2], means: &[DeviceBuffer<f32>; 2], rstds: &[DeviceBuffer<f32>; 2]| -> Res<String> {
            Ok(format!(
                "{}; {}; {}",
                check_bits("out", Bf16x8::elements(&outs[1].to_vec()?), Bf16x8::elements(&outs[0].to_vec()?)),
                check_f32("mean", &means[1].to_vec()?, &means[0].to_vec()?, 1e-5),
                check_f32("rstd", &rstds[1].to_vec()?, &rstds[0].to_vec()?, 1e-4)
            ))
        };
        TABLE.row("layernorm_forward_kernel6 (llm.c)", &format!("{n} x {c} bf16"), times, &compare(&outs, &means, &rstds)?);
        outs[1].copy_from_host(&vec![Bf16x8::default(); n * c / 8])?;
        means[1].copy_from_host(&vec![0.0; n])?;
        rstds[1].copy_from_host(&vec![0.0; n])?;
        {
            let [_, ours_out] = &mut outs;
            let [_, ours_mean] = &mut means;
            let [_, ours_rstd] = &mut rstds;
            let mut f = || -> Res<()> {
                ports8_llmc::layernorm_forward_kernel6_fixed::launch(
                    &stream,
                    ours_cfg,
                    ours_out,
                    ours_mean,
                    ours_rstd,
                    &inp,
                    &weight,
                    &bias,
                    n as u32,
                    (c / 8) as u32,
                )?;
                Ok(())
            };
            let fixed = race(&context, &stream, &mut tw, &mut f)?;
            stream.synchronize()?;
            TABLE.row("  layernorm_forward_kernel6_fixed", "", fixed, &compare(&outs, &means, &rstds)?);
        }
        Ok(())
    });

    // ------------------------------------------------------------ reshape_and_cache_kernel
    case("PORTS8_ONLY", "V1", || -> Res<()> {
        let (tokens, heads, head_size, block_size, x) = (8192usize, 32usize, 128usize, 16usize, 8usize);
        let blocks = tokens / block_size + 8;
        let n = heads * head_size;
        let key = DeviceBuffer::from_slice(&context, &bf16s(tokens * n, 8, 1.0))?;
        let value = DeviceBuffer::from_slice(&context, &bf16s(tokens * n, 9, 1.0))?;
        // A permutation of the slots (odd multiplier), every 97th token padding.
        let slots_h: Vec<i64> = (0..tokens).map(|t| if t % 97 == 96 { -1 } else { ((t * 2_654_435_761) % tokens) as i64 }).collect();
        let slots = DeviceBuffer::from_slice(&context, &slots_h)?;
        let len = blocks * heads * head_size * block_size;
        let mut caches = [
            DeviceBuffer::<bf16>::zeroed(&context, len)?,
            DeviceBuffer::<bf16>::zeroed(&context, len)?,
            DeviceBuffer::<bf16>::zeroed(&context, len)?,
            DeviceBuffer::<bf16>::zeroed(&context, len)?,
        ];
        let config = LaunchConfig::new(tokens as u32, n.min(512) as u32);
        let (tk, tv) = (caches[0].as_device_ptr(), caches[1].as_device_ptr());
        let (kp, vp, sp) = (key.as_device_ptr(), value.as_device_ptr(), slots.as_device_ptr());
        let [_, _, ours_k, ours_v] = &mut caches;
        let nz = |v: usize| NonZeroU32::new(v as u32).unwrap();
        let mut tw = || -> Res<()> {
            // SAFETY: every slot is below blocks * block_size; rows of `n` contiguous.
            unsafe {
                twin_reshape_and_cache::launch_in(
                    &vllm,
                    &stream,
                    config,
                    kp,
                    vp,
                    tk,
                    tv,
                    sp,
                    n as i32,
                    n as i32,
                    heads as i32,
                    head_size as i32,
                    block_size as i32,
                    x as i32,
                    1.0,
                    1.0,
                )?
            };
            Ok(())
        };
        let mut o = || -> Res<()> {
            ports8_vllm::reshape_and_cache_kernel::launch(
                &stream,
                config,
                &key,
                &value,
                ours_k,
                ours_v,
                &slots,
                n as u32,
                n as u32,
                heads as u32,
                nz(head_size),
                nz(block_size),
                nz(x),
                1.0,
                1.0,
            )?;
            Ok(())
        };
        let times = race(&context, &stream, &mut tw, &mut o)?;
        stream.synchronize()?;
        let check = |caches: &[DeviceBuffer<bf16>; 4]| -> Res<String> {
            Ok(format!(
                "{}; {}",
                check_bits("key", &caches[2].to_vec()?, &caches[0].to_vec()?),
                check_bits("value", &caches[3].to_vec()?, &caches[1].to_vec()?)
            ))
        };
        TABLE.row("reshape_and_cache_kernel (vLLM)", &format!("{tokens} tok {heads}x{head_size} bf16"), times, &check(&caches)?);
        for cache in &mut caches[2..] {
            cache.copy_from_host(&vec![bf16::ZERO; len])?;
        }
        {
            let [_, _, ours_k, ours_v] = &mut caches;
            let mut f = || -> Res<()> {
                ports8_vllm::reshape_and_cache_kernel_fixed::launch(
                    &stream,
                    config,
                    &key,
                    &value,
                    ours_k,
                    ours_v,
                    &slots,
                    n as u32,
                    n as u32,
                    heads as u32,
                    nz(head_size),
                    nz(block_size),
                    nz(x),
                    1.0,
                    1.0,
                )?;
                Ok(())
            };
            let fixed = race(&context, &stream, &mut tw, &mut f)?;
            stream.synchronize()?;
            TABLE.row("  reshape_and_cache_kernel_fixed", "", fixed, &check(&caches)?);
        }
        Ok(())
    });

    // ------------------------------------------------------------ FP8: max reduction, quantisation
    case("PORTS8_ONLY", "V2", || -> Res<()> {
        let (tokens, hidden) = (8192usize, 4096usize);
        let num = tokens * hidden;
        let input_h = bf16s(num, 10, 3.0);
        let input = DeviceBuffer::from_slice(&context, &input_h)?;
        let input4 = DeviceBuffer::from_slice(&context, &input_h.chunks_exact(4).map(|c| Bf16x4([c[0], c[1], c[2], c[3]])).collect::<Vec<_>>())?;
        let mut scales = [DeviceBuffer::<f32>::zeroed(&context, 1)?, DeviceBuffer::<f32>::zeroed(&context, 1)?];
        let twin_cfg = LaunchConfig::new(tokens as u32, QUANT_BLOCK);
        let ours_cfg = twin_cfg.with_shared_bytes(QUANT_BLOCK * 4);
        let (ts, ip) = (scales[0].as_device_ptr(), input.as_device_ptr());
        {
            let [_, ours_s] = &mut scales;
            let mut tw = || -> Res<()> {
                // SAFETY: `input` holds `num` bf16, `ts` one float; blocks of 1024.
                unsafe { twin_segmented_max_reduction::launch_in(&vllm, &stream, twin_cfg, ts, ip, num as i64)? };
                Ok(())
            };
            let mut o = || -> Res<()> {
                ports8_vllm::segmented_max_reduction::launch(&stream, ours_cfg, ours_s, &input)?;
                Ok(())
            };
            let times = race(&context, &stream, &mut tw, &mut o)?;
            stream.synchronize()?;
            let check = check_f32("scale", &scales[1].to_vec()?, &scales[0].to_vec()?, 0.0);
            TABLE.row("segmented_max_reduction (vLLM)", &format!("{tokens} x {hidden} bf16"), times, &check);
        }
        // Quantise with the scale just found (the twin's).
        let scale = DeviceBuffer::from_slice(&context, &scales[0].to_vec()?)?;
        let mut twin_out = DeviceBuffer::<u8>::zeroed(&context, num)?;
        let mut ours_out = DeviceBuffer::<Fp8x4>::zeroed(&context, num / 4)?;
        let (to, sp) = (twin_out.as_device_ptr(), scale.as_device_ptr());
        let mut tw = || -> Res<()> {
            // SAFETY: `to` holds `num` bytes, `input` `num` bf16 (8-byte aligned), `scale` one float.
            unsafe { twin_scaled_fp8_quant::launch_in(&vllm, &stream, twin_cfg, to, ip, sp, num as i64)? };
            Ok(())
        };
        let mut o = || -> Res<()> {
            ports8_vllm::scaled_fp8_quant_kernel::launch(&stream, twin_cfg, &mut ours_out, &input4, &scale)?;
            Ok(())
        };
        let times = race(&context, &stream, &mut tw, &mut o)?;
        stream.synchronize()?;
        let ours_bytes: Vec<u8> = ours_out.to_vec()?.iter().flat_map(|p| p.0).collect();
        let check = check_bits("fp8", &ours_bytes, &twin_out.to_vec()?);
        TABLE.row("scaled_fp8_quant_kernel (vLLM)", &format!("{tokens} x {hidden} bf16->fp8"), times, &check);
        let _ = &mut twin_out;
        Ok(())
    });

    // ------------------------------------------------------------ fused add RMS norm + FP8
    case("PORTS8_ONLY", "V4", || -> Res<()> {
        let (tokens, hidden) = (8192usize, 4096usize);
        let input = DeviceBuffer::from_slice(&context, &Bf16x8::collect(&bf16s(tokens * hidden, 12, 1.0)).unwrap())?;
        let res_h = Bf16x8::collect(&bf16s(tokens * hidden, 13, 1.0)).unwrap();
        let weight = DeviceBuffer::from_slice(&context, &Bf16x8::collect(&bf16s(hidden, 14, 1.0)).unwrap())?;
        let scale = DeviceBuffer::from_slice(&context, &[0.01f32])?;
        let mut res = [DeviceBuffer::from_slice(&context, &res_h)?, DeviceBuffer::from_slice(&context, &res_h)?];
        let mut twin_out = DeviceBuffer::<u8>::zeroed(&context, tokens * hidden)?;
        let mut ours_out = DeviceBuffer::<Fp8x8>::zeroed(&context, tokens * hidden / 8)?;
        // vLLM's block: min(hidden, num_tokens < 256 ? 1024 : 256).
        let block = hidden.min(if tokens < 256 { 1024 } else { 256 }) as u32;
        let config = LaunchConfig::new(tokens as u32, block);
        let (to, ip, tr, wp, sp) = (twin_out.as_device_ptr(), input.as_device_ptr(), res[0].as_device_ptr(), weight.as_device_ptr(), scale.as_device_ptr());
        let eps = 1e-6f32;
        {
            let [_, ours_res] = &mut res;
            let mut tw = || -> Res<()> {
                // SAFETY: shapes as allocated above (rows of `hidden`, contiguous); blocks of 256.
                unsafe {
                    twin_fused_add_rms_norm_static_fp8_quant::launch_in(
                        &vllm,
                        &stream,
                        config,
                        to,
                        ptr(ip),
                        hidden as i32,
                        ptr(tr),
                        ptr(wp),
                        sp,
                        eps,
                        tokens as i32,
                        hidden as i32,
                    )?
                };
                Ok(())
            };
            let mut o = || -> Res<()> {
                ports8_vllm::fused_add_rms_norm_static_fp8_quant_kernel::launch(
                    &stream,
                    config,
                    &mut ours_out,
                    &input,
                    (hidden / 8) as u32,
                    ours_res,
                    &weight,
                    &scale,
                    eps,
                    tokens as u32,
                    (hidden / 8) as u32,
                )?;
                Ok(())
            };
            let times = race(&context, &stream, &mut tw, &mut o)?;
            stream.synchronize()?;
            // Outputs from the same state: one launch each on fresh residuals.
            ours_res.copy_from_host(&res_h)?;
            ports8_vllm::fused_add_rms_norm_static_fp8_quant_kernel::launch(
                &stream,
                config,
                &mut ours_out,
                &input,
                (hidden / 8) as u32,
                ours_res,
                &weight,
                &scale,
                eps,
                tokens as u32,
                (hidden / 8) as u32,
            )?;
            stream.synchronize()?;
            TABLE.row("fused_add_rms_norm_static_fp8 (vLLM)", &format!("{tokens} x {hidden} bf16->fp8"), times, "(below)");
        }
        res[0].copy_from_host(&res_h)?;
        // SAFETY: as above.
        unsafe {
            twin_fused_add_rms_norm_static_fp8_quant::launch_in(
                &vllm,
                &stream,
                config,
                to,
                ptr(ip),
                hidden as i32,
                ptr(tr),
                ptr(wp),
                sp,
                eps,
                tokens as i32,
                hidden as i32,
            )?
        };
        stream.synchronize()?;
        let ours_bytes: Vec<u8> = ours_out.to_vec()?.iter().flat_map(|p| p.0).collect();
        println!(
            "{:<34} output: {}; {}",
            "",
            check_bits("residual", Bf16x8::elements(&res[1].to_vec()?), Bf16x8::elements(&res[0].to_vec()?)),
            check_bits("out", &ours_bytes, &twin_out.to_vec()?)
        );
        let _ = &mut twin_out;
        Ok(())
    });
    Ok(())
}
