//! bench/ports9's GPU bench: each port beside its CUDA C++ twin (nvcc's cubins of
//! `cuda/ports9.cu`), on the same grid and inputs, timed with CUDA events by
//! `ferrocuda-bench-timing`; then the outputs compared. A report, not a test.
//!
//! usage: ports9_bench LLMC_CUBIN LLMC_NOFAST_CUBIN VLLM_CUBIN   (`PORTS9_ONLY=L3,V2` runs a subset)

use ferrocuda::half::bf16;
use ferrocuda::{Context, DeviceBuffer, LaunchConfig, Stream};
use ferrocuda_bench_timing::{self as timing, PASSES, Result, Table, WARMUP, case, check_bits, check_f32, ptr, reps_for, time_pair};
use ferrocuda_ports9::*;
use ferrocuda_ports9_llmc as llmc;
use ferrocuda_ports9_twins as twins;
use ferrocuda_ports9_vllm as vllm;

const ONLY: &str = "PORTS9_ONLY";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, llmc_cubin, nofast_cubin, vllm_cubin] = &args[..] else {
        return Err("usage: ports9_bench LLMC_CUBIN LLMC_NOFAST_CUBIN VLLM_CUBIN (nvcc's builds of bench/ports9/cuda/ports9.cu)".into());
    };
    let context = Context::primary(0)?;
    let stream = Stream::new(&context)?;
    timing::print_device(&context)?;
    // SAFETY: the cubins are nvcc's output for ports9.cu (scripts/gpu-job.sh builds them); each
    // kernel is launched only through its stub in `twins`, whose parameter list is the entry's.
    let (lm, lnf, vm) = unsafe {
        (
            timing::load_cubin(&context, "ports9_llmc", llmc_cubin)?,
            timing::load_cubin(&context, "ports9_llmc_nofast", nofast_cubin)?,
            timing::load_cubin(&context, "ports9_vllm", vllm_cubin)?,
        )
    };
    println!("twins: {llmc_cubin}, {nofast_cubin}, {vllm_cubin}; each time the median of {PASSES} passes (ms per launch), after {WARMUP} warm-ups");
    let table = Table::new(42, 34);
    println!("{}", table.header());
    let d = |v: &[bf16]| DeviceBuffer::from_slice(&context, v);

    // L1 unpermute_kernel_backward, GPT-2 124M's attention: B 8, N 1024, NH 12, d 64.
    case(ONLY, "L1", || -> Result<()> {
        let (b, n, nh, hd) = (8u32, 1024u32, 12u32, 64u32);
        let total = (b * n * nh * hd) as usize;
        let dout = d(&bf16_noise(1, total, 1.0))?;
        let mut ours = DeviceBuffer::<bf16>::zeroed(&context, total)?;
        let twin = DeviceBuffer::<bf16>::zeroed(&context, total)?;
        let config = LaunchConfig::for_elements(total, 256);
        let mut run_ours = || -> Result<()> { Ok(llmc::unpermute_kernel_backward::launch(&stream, config, &mut ours, &dout, b, n, nh, hd)?) };
        let run_twin = || -> Result<()> {
            // SAFETY: `twin` and `dout` hold B N NH d elements, the grid covers them.
            unsafe {
                twins::twin_unpermute_kernel_backward::launch_in(&lm, &stream, config, ptr(&twin), ptr(&dout), b as i32, n as i32, nh as i32, hd as i32)?
            };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_ours)?;
        let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
        stream.synchronize()?;
        table.row("llm.c unpermute_kernel_backward", "B8 N1024 NH12 d64 bf16, block 256", times, &check_bits("", &ours.to_vec()?, &twin.to_vec()?));
        Ok(())
    });

    // L2 permute_kernel_backward: the same shape; ours gathers (3x the threads).
    case(ONLY, "L2", || -> Result<()> {
        let (b, n, nh, hd) = (8u32, 1024u32, 12u32, 64u32);
        let len = (b * n * nh * hd) as usize;
        let (dq, dk, dv) = (d(&bf16_noise(2, len, 1.0))?, d(&bf16_noise(3, len, 1.0))?, d(&bf16_noise(4, len, 1.0))?);
        let mut ours = DeviceBuffer::<bf16>::zeroed(&context, 3 * len)?;
        let twin = DeviceBuffer::<bf16>::zeroed(&context, 3 * len)?;
        let config_ours = LaunchConfig::for_elements(3 * len, 256);
        let config_twin = LaunchConfig::for_elements(len, 256);
        let mut run_ours = || -> Result<()> { Ok(llmc::permute_kernel_backward::launch(&stream, config_ours, &mut ours, &dq, &dk, &dv, b, n, nh, hd)?) };
        let run_twin = || -> Result<()> {
            // SAFETY: `twin` holds 3 B N NH d elements, the inputs B N NH d each.
            unsafe {
                twins::twin_permute_kernel_backward::launch_in(
                    &lm,
                    &stream,
                    config_twin,
                    ptr(&twin),
                    ptr(&dq),
                    ptr(&dk),
                    ptr(&dv),
                    b as i32,
                    n as i32,
                    nh as i32,
                    hd as i32,
                )?
            };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_ours)?;
        let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
        stream.synchronize()?;
        table.row("llm.c permute_kernel_backward", "B8 N1024 NH12 d64 bf16, block 256", times, &check_bits("", &ours.to_vec()?, &twin.to_vec()?));
        // The fix round (written after session 21's GPU call): the tile launch, the source's
        // work per thread.
        let config_tiles = LaunchConfig::new(((nh * hd).div_ceil(256), b * n), 256);
        let mut fixed = DeviceBuffer::<bf16>::zeroed(&context, 3 * len)?;
        let mut run_fixed =
            || -> Result<()> { Ok(llmc::permute_kernel_backward_fixed::launch(&stream, config_tiles, &mut fixed, &dq, &dk, &dv, b, n, nh, hd, nh * hd)?) };
        let reps = reps_for(&context, &stream, &mut run_fixed)?;
        let times = time_pair(&context, &stream, reps, run_fixed, run_twin)?;
        stream.synchronize()?;
        table.row("llm.c permute_kernel_backward (fixed)", "B8 N1024 NH12 d64 bf16, block 256", times, &check_bits("", &fixed.to_vec()?, &twin.to_vec()?));
        Ok(())
    });

    // L3 layernorm_backward_kernel2: B 8, T 1024, C 768, block 256, in place (+=) and atomics:
    // timed on the same buffers, checked on one more launch of each on fresh copies.
    case(ONLY, "L3", || -> Result<()> {
        let (b, t, c, block) = (8u32, 1024u32, 768u32, 256u32);
        let rows = (b * t) as usize;
        let n = rows * c as usize;
        let dinp0 = bf16_noise(5, n, 0.5);
        let (dout, inp, weight) = (d(&bf16_noise(6, n, 1.0))?, d(&bf16_noise(7, n, 2.0))?, d(&bf16_noise(8, c as usize, 1.0))?);
        let mean = d(&bf16_noise(9, rows, 0.2))?;
        let rstd = d(&(0..rows).map(|r| bf16::from_f32(1.0 + 0.5 * noise(10, r))).collect::<Vec<_>>())?;
        let unused = DeviceBuffer::<bf16>::zeroed(&context, c as usize)?;
        let config = LaunchConfig::new((32 * b * t).div_ceil(block), block).with_shared_bytes(2 * c * 4);
        let (mut o, tw) = (d(&dinp0)?, d(&dinp0)?);
        let (mut ow, mut ob) = (DeviceBuffer::<f32>::zeroed(&context, c as usize)?, DeviceBuffer::<f32>::zeroed(&context, c as usize)?);
        let (tww, twb) = (DeviceBuffer::<f32>::zeroed(&context, c as usize)?, DeviceBuffer::<f32>::zeroed(&context, c as usize)?);
        let launch_ours = |o: &mut DeviceBuffer<bf16>, ow: &mut DeviceBuffer<f32>, ob: &mut DeviceBuffer<f32>, fixed: bool| -> Result<()> {
            // The first try (`launch_bounds(256)`, 32 registers and a spill) is no longer built:
            // first-try/layernorm_backward_kernel2.rs; its figures are in RESULTS.md.
            if fixed {
                llmc::layernorm_backward_kernel2_fixed8::launch(&stream, config, o, &dout, &inp, &weight, &mean, &rstd, b, t, c, ow, ob)?;
            } else {
                llmc::layernorm_backward_kernel2_fixed::launch(&stream, config, o, &dout, &inp, &weight, &mean, &rstd, b, t, c, ow, ob)?;
            }
            Ok(())
        };
        let launch_twin = |o: &DeviceBuffer<bf16>, ow: &DeviceBuffer<f32>, ob: &DeviceBuffer<f32>| -> Result<()> {
            // SAFETY: row tensors hold B T C elements, `weight` C, `mean`/`rstd` B T, the sums C;
            // 2 C floats of dynamic shared memory; the grid covers B T warps.
            unsafe {
                twins::twin_layernorm_backward_kernel2::launch_in(
                    &lm,
                    &stream,
                    config,
                    ptr(o),
                    ptr(&unused),
                    ptr(&unused),
                    ptr(&dout),
                    ptr(&inp),
                    ptr(&weight),
                    ptr(&mean),
                    ptr(&rstd),
                    b as i32,
                    t as i32,
                    c as i32,
                    ptr(ow),
                    ptr(ob),
                )?
            };
            Ok(())
        };
        for (fixed, name) in [(false, "llm.c layernorm_backward_kernel2 (fixed, 256 6)"), (true, "llm.c layernorm_backward_kernel2 (fixed, 256 8)")] {
            let mut run_ours = || launch_ours(&mut o, &mut ow, &mut ob, fixed);
            let reps = reps_for(&context, &stream, &mut run_ours)?;
            let times = time_pair(&context, &stream, reps, run_ours, || launch_twin(&tw, &tww, &twb))?;
            let (mut o1, t1) = (d(&dinp0)?, d(&dinp0)?);
            let (mut w1, mut b1) = (DeviceBuffer::<f32>::zeroed(&context, c as usize)?, DeviceBuffer::<f32>::zeroed(&context, c as usize)?);
            let (tw1, tb1) = (DeviceBuffer::<f32>::zeroed(&context, c as usize)?, DeviceBuffer::<f32>::zeroed(&context, c as usize)?);
            launch_ours(&mut o1, &mut w1, &mut b1, fixed)?;
            launch_twin(&t1, &tw1, &tb1)?;
            stream.synchronize()?;
            let check = format!(
                "{}; {}; {}",
                check_f32("dinp", &widen(&o1.to_vec()?), &widen(&t1.to_vec()?), 1.0 / 128.0, rel_err),
                check_f32("dweight", &w1.to_vec()?, &tw1.to_vec()?, 1e-4, rel_err),
                check_f32("dbias", &b1.to_vec()?, &tb1.to_vec()?, 1e-4, rel_err)
            );
            table.row(name, "B8 T1024 C768 bf16, block 256", times, &check);
        }
        Ok(())
    });

    // L4 matmul_backward_bias_kernel4: B 8, T 1024, OC 3072 (GPT-2's MLP), block 1024, in place.
    case(ONLY, "L4", || -> Result<()> {
        let (b, t, oc, block) = (8u32, 1024u32, 3072u32, 1024u32);
        let dbias0 = bf16_noise(11, oc as usize, 1.0);
        let dout = d(&bf16_noise(12, (b * t * oc) as usize, 1.0))?;
        let config = LaunchConfig::new(oc / 32, block).with_shared_bytes(block * 4);
        let (mut o, tw) = (d(&dbias0)?, d(&dbias0)?);
        let launch_ours = |o: &mut DeviceBuffer<bf16>, fixed: bool| -> Result<()> {
            if fixed {
                llmc::matmul_backward_bias_kernel4_fixed::launch(&stream, config, o, &dout, b, t, oc)?;
            } else {
                llmc::matmul_backward_bias_kernel4::launch(&stream, config, o, &dout, b, t, oc)?;
            }
            Ok(())
        };
        let launch_twin = |o: &DeviceBuffer<bf16>| -> Result<()> {
            // SAFETY: `o` holds OC elements (a multiple of 32), `dout` B T OC; grid OC / 32.
            unsafe { twins::twin_matmul_backward_bias_kernel4::launch_in(&lnf, &stream, config, ptr(o), ptr(&dout), b as i32, t as i32, oc as i32)? };
            Ok(())
        };
        for (fixed, name) in [(false, "llm.c matmul_backward_bias_kernel4"), (true, "llm.c matmul_backward_bias_kernel4 (fixed)")] {
            let mut run_ours = || launch_ours(&mut o, fixed);
            let reps = reps_for(&context, &stream, &mut run_ours)?;
            let times = time_pair(&context, &stream, reps, run_ours, || launch_twin(&tw))?;
            let (mut o1, t1) = (d(&dbias0)?, d(&dbias0)?);
            launch_ours(&mut o1, fixed)?;
            launch_twin(&t1)?;
            stream.synchronize()?;
            table.row(name, "B8 T1024 OC3072 bf16, block 1024", times, &check_bits("", &o1.to_vec()?, &t1.to_vec()?));
        }
        Ok(())
    });

    // L5 encoder_backward_kernel2: B 8, T 1024, C 768, V 50257, block 256 (3 blocks), in place.
    case(ONLY, "L5", || -> Result<()> {
        let (b, t, c, vocab) = (8u32, 1024u32, 768u32, 50257usize);
        let bt = (b * t) as usize;
        let ids: Vec<i32> = (0..bt).map(|i| ((noise(13, i) + 1.0) * 0.5 * vocab as f32) as i32 % vocab as i32).collect();
        let (wte0, wpe0) = (f32_noise(14, vocab * c as usize, 0.1), f32_noise(15, (t * c) as usize, 0.1));
        let dout = DeviceBuffer::from_slice(&context, &f32_noise(16, bt * c as usize, 1.0))?;
        let inp = DeviceBuffer::from_slice(&context, &ids)?;
        let config = LaunchConfig::for_elements(c as usize, 256);
        let f = |v: &[f32]| DeviceBuffer::from_slice(&context, v);
        let (mut ow, mut op, tw, tp) = (f(&wte0)?, f(&wpe0)?, f(&wte0)?, f(&wpe0)?);
        let launch_ours = |w: &mut DeviceBuffer<f32>, p: &mut DeviceBuffer<f32>| -> Result<()> {
            Ok(llmc::encoder_backward_kernel2::launch(&stream, config, w, p, &dout, &inp, b, t, c)?)
        };
        let launch_twin = |w: &DeviceBuffer<f32>, p: &DeviceBuffer<f32>| -> Result<()> {
            // SAFETY: `w` holds V C elements and every id is below V, `p` T C, `dout` B T C.
            unsafe {
                twins::twin_encoder_backward_kernel2::launch_in(&lm, &stream, config, ptr(w), ptr(p), ptr(&dout), ptr(&inp), b as i32, t as i32, c as i32)?
            };
            Ok(())
        };
        let mut run_ours = || launch_ours(&mut ow, &mut op);
        let reps = reps_for(&context, &stream, &mut run_ours)?;
        let times = time_pair(&context, &stream, reps, run_ours, || launch_twin(&tw, &tp))?;
        let (mut ow1, mut op1, tw1, tp1) = (f(&wte0)?, f(&wpe0)?, f(&wte0)?, f(&wpe0)?);
        launch_ours(&mut ow1, &mut op1)?;
        launch_twin(&tw1, &tp1)?;
        stream.synchronize()?;
        let check = format!("{}; {}", check_bits("dwte", &ow1.to_vec()?, &tw1.to_vec()?), check_bits("dwpe", &op1.to_vec()?, &tp1.to_vec()?));
        table.row("llm.c encoder_backward_kernel2", "B8 T1024 C768 V50257 f32, block 256", times, &check);
        Ok(())
    });

    // V1 copy_blocks_kernel: 8 layers of 512 blocks of 16 x 8 x 128 bf16, 128 pairs, block 1024.
    case(ONLY, "V1", || -> Result<()> {
        let (layers, blocks, numel) = (8u32, 512usize, 16 * 8 * 128u32);
        let layer_numel = blocks * numel as usize;
        let pairs: Vec<i64> = (0..128).flat_map(|p| [p as i64, 256 + p as i64]).collect();
        let map = DeviceBuffer::from_slice(&context, &pairs)?;
        let keys0 = bf16_noise(17, layers as usize * layer_numel, 1.0);
        let values0 = bf16_noise(18, layers as usize * layer_numel, 1.0);
        let (mut ok, mut ov, tk, tv) = (d(&keys0)?, d(&values0)?, d(&keys0)?, d(&values0)?);
        let addrs = |buf: &DeviceBuffer<bf16>| -> Vec<i64> {
            (0..layers as u64).map(|l| (buf.as_device_ptr().address() + l * layer_numel as u64 * 2) as i64).collect()
        };
        let (kp, vp) = (DeviceBuffer::from_slice(&context, &addrs(&tk))?, DeviceBuffer::from_slice(&context, &addrs(&tv))?);
        let config = LaunchConfig::new((layers, pairs.len() as u32 / 2), numel.min(1024));
        let mut run_ours = || -> Result<()> { Ok(vllm::copy_blocks_kernel::launch(&stream, config, &mut ok, &mut ov, &map, numel, layer_numel as u64)?) };
        let run_twin = || -> Result<()> {
            // SAFETY: the pointer arrays hold the layers' addresses inside `tk`/`tv`, which hold
            // every block the mapping names; nothing else touches them during the launch.
            unsafe { twins::twin_copy_blocks_kernel::launch_in(&vm, &stream, config, ptr(&kp), ptr(&vp), ptr(&map), numel as i32)? };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_ours)?;
        let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
        stream.synchronize()?;
        // The copy is idempotent (no block is both a source and a destination): the buffers
        // after the timed runs are the result of one launch.
        let (ks, vs) = (ok.to_vec()?, ov.to_vec()?);
        let check = format!(
            "{}; {}; changed {} keys",
            check_bits("keys", &ks, &tk.to_vec()?),
            check_bits("values", &vs, &tv.to_vec()?),
            ks.iter().zip(&keys0).filter(|(a, b)| a != b).count()
        );
        table.row("vLLM copy_blocks_kernel", "8 layers x 128 pairs x 16384 bf16", times, &check);
        Ok(())
    });

    // V2 poly_norm_kernel: 4096 tokens x 4096 hidden, block 1024.
    case(ONLY, "V2", || -> Result<()> {
        let (tokens, hidden) = (4096u32, 4096u32);
        let input = d(&bf16_noise(19, (tokens * hidden) as usize, 2.0))?;
        let weight = d(&[bf16::from_f32(0.5), bf16::from_f32(-1.25), bf16::from_f32(2.0)])?;
        let bias = d(&[bf16::from_f32(0.125)])?;
        let mut ours = DeviceBuffer::<bf16>::zeroed(&context, (tokens * hidden) as usize)?;
        let twin = DeviceBuffer::<bf16>::zeroed(&context, (tokens * hidden) as usize)?;
        let config = LaunchConfig::new(tokens, hidden.min(1024));
        let run_twin = || -> Result<()> {
            // SAFETY: `twin`/`input` hold tokens x hidden elements, `weight` 3, `bias` 1.
            unsafe { twins::twin_poly_norm_kernel::launch_in(&vm, &stream, config, ptr(&twin), ptr(&input), ptr(&weight), ptr(&bias), 1e-6, hidden as i32)? };
            Ok(())
        };
        for (variant, name) in [(0, "vLLM poly_norm_kernel"), (1, "vLLM poly_norm_kernel (fixed)"), (2, "vLLM poly_norm_kernel (MultiBlockReduce)")] {
            let mut run_ours = || -> Result<()> {
                match variant {
                    1 => vllm::poly_norm_kernel_fixed::launch(&stream, config, &mut ours, &input, &weight, &bias, 1e-6, hidden)?,
                    2 => vllm::poly_norm_kernel_multi::launch(&stream, config, &mut ours, &input, &weight, &bias, 1e-6, hidden)?,
                    _ => vllm::poly_norm_kernel::launch(&stream, config, &mut ours, &input, &weight, &bias, 1e-6, hidden)?,
                }
                Ok(())
            };
            let reps = reps_for(&context, &stream, &mut run_ours)?;
            let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
            stream.synchronize()?;
            let check = check_f32("", &widen(&ours.to_vec()?), &widen(&twin.to_vec()?), 1.0 / 128.0, rel_err);
            table.row(name, "4096 x 4096 bf16, block 1024", times, &check);
        }
        Ok(())
    });

    // V3 swigluoai_and_mul_kernel: 4096 tokens, d 2880 (gpt-oss), block min(d, 1024).
    case(ONLY, "V3", || -> Result<()> {
        let (tokens, dim) = (4096u32, 2880u32);
        let host = bf16_noise(20, (2 * tokens * dim) as usize, 6.0);
        let packs = vllm::InputPack::collect(&host).ok_or("2 d is a multiple of 8")?;
        let input = DeviceBuffer::from_slice(&context, &packs)?;
        let vecs = dim / 4;
        let mut ours = DeviceBuffer::<vllm::Bf16x4>::zeroed(&context, (tokens * vecs) as usize)?;
        let twin = DeviceBuffer::<bf16>::zeroed(&context, (tokens * dim) as usize)?;
        let config = LaunchConfig::new(tokens, dim.min(1024));
        let mut run_ours = || -> Result<()> { Ok(vllm::swigluoai_and_mul_kernel::launch(&stream, config, &mut ours, &input, vecs, 1.702, 7.0)?) };
        let run_twin = || -> Result<()> {
            // SAFETY: `twin` holds tokens x d elements, `input` 2 tokens x d.
            unsafe { twins::twin_swigluoai_and_mul_kernel::launch_in(&vm, &stream, config, ptr(&twin), ptr(&input), dim as i32, 1.702, 7.0)? };
            Ok(())
        };
        let reps = reps_for(&context, &stream, &mut run_ours)?;
        let times = time_pair(&context, &stream, reps, run_ours, run_twin)?;
        stream.synchronize()?;
        let ours_flat: Vec<bf16> = ours.to_vec()?.iter().flat_map(|p| p.0).collect();
        let check = check_f32("", &widen(&ours_flat), &widen(&twin.to_vec()?), 1.0 / 128.0, rel_err);
        table.row("vLLM swigluoai_and_mul_kernel", "4096 x 2880 bf16, block 1024", times, &check);
        Ok(())
    });
    Ok(())
}
