//! G22R-1 repro: runs the two kernels of `g22r1-kernels` on the CPU executor (which reports
//! nothing and gives the expected values) and, when a GPU is present, on the GPU (where the
//! safe, in-bounds `SharedArray` accesses land outside the declared `.shared` array).
//! `g22r1-host cpu` | `g22r1-host gpu-len` | `g22r1-host gpu-far` | `g22r1-host gpu-reduce`.
//! GPU exit codes: 0 = REPRODUCED, 1 = NOT REPRODUCED, 2 = SKIPPED (no GPU).

use ferrocuda_device::cpu::{CpuExecutor, LaunchConfig as CpuConfig};
use ferrocuda_host::{Context, Device, DeviceBuffer, LaunchConfig, Stream};
use g22r1_kernels::{g22r1_multi_block_reduce, g22r1_shadowed_len, g22r1_shadowed_len_far, g22r1_tag};

fn cpu() {
    let executor = CpuExecutor::new();
    let mut out = vec![0u32; 32];
    let r = g22r1_shadowed_len::launch_cpu(&executor, CpuConfig::new(1u32, 32u32), &mut out);
    println!("CPU g22r1_shadowed_len: {r:?}; guard read back: {:?}", &out[..8]);
    let r = g22r1_shadowed_len_far::launch_cpu(&executor, CpuConfig::new(1u32, 32u32), &mut out);
    println!("CPU g22r1_shadowed_len_far: {r:?}; guard read back: {:?}", &out[..8]);
    let mut out = vec![0f32; 256];
    let r = g22r1_multi_block_reduce::launch_cpu(&executor, CpuConfig::new(1u32, 256u32), &mut out);
    let mut tag_out = vec![0u32; 32];
    let t = g22r1_tag::launch_cpu(&executor, CpuConfig::new(1u32, 32u32), &mut tag_out, 0x1234_5678, 7);
    println!("CPU g22r1_tag (panics on purpose; the name is the executor's own): {t:?}");
    println!("CPU g22r1_multi_block_reduce: {r:?}; guard read back: {:?}; sum in thread 32: {}", &out[..8], out[32]);
}

/// The escalation (`g22r1_tag`): the panic report's kernel name read from an address the launch
/// was never given.
fn gpu_tag() -> i32 {
    if !matches!(Device::count(), Ok(n) if n >= 1) {
        println!("SKIPPED g22r1 gpu-tag: no GPU");
        return 2;
    }
    let context = Context::primary(0).unwrap();
    let stream = Stream::new(&context).unwrap();
    let secret = DeviceBuffer::<u8>::from_slice(&context, b"SECRET-BYTES-NOT-LENT-TO-KERNEL!\0").unwrap();
    let address = secret.device_ptr();
    let mut out = DeviceBuffer::<u32>::zeroed(&context, 32).unwrap();
    let r = g22r1_tag::launch(&stream, LaunchConfig::new(1u32, 32u32), &mut out, address, 7).and_then(|()| stream.synchronize());
    let text = format!("{r:?}");
    println!("g22r1 gpu-tag: {text}");
    if text.contains("SECRET-BYTES") {
        println!("REPRODUCED g22r1 gpu-tag: the panic report carries bytes of a buffer the safe kernel was never given");
        0
    } else {
        println!("NOT REPRODUCED g22r1 gpu-tag (ptxas may have placed the tag before `big`; see ptx-sass.txt)");
        1
    }
}

fn gpu(which: &str) -> i32 {
    if which == "gpu-tag" {
        return gpu_tag();
    }
    if !matches!(Device::count(), Ok(n) if n >= 1) {
        println!("SKIPPED g22r1 {which}: no GPU");
        return 2;
    }
    let context = Context::primary(0).unwrap();
    let stream = Stream::new(&context).unwrap();
    let (launched, guard): (Result<(), String>, Vec<f64>) = if which == "gpu-len" || which == "gpu-far" {
        let mut out = DeviceBuffer::<u32>::zeroed(&context, 32).unwrap();
        let r = if which == "gpu-len" {
            g22r1_shadowed_len::launch(&stream, LaunchConfig::new(1u32, 32u32), &mut out)
        } else {
            g22r1_shadowed_len_far::launch(&stream, LaunchConfig::new(1u32, 32u32), &mut out)
        }
        .map_err(|e| e.to_string());
        let r = r.and_then(|()| stream.synchronize().map_err(|e| e.to_string()));
        let v = r.as_ref().ok().and_then(|_| out.to_vec().ok()).unwrap_or_default();
        (r, v.iter().map(|&x| x as f64).collect())
    } else {
        let mut out = DeviceBuffer::<f32>::zeroed(&context, 256).unwrap();
        let r = g22r1_multi_block_reduce::launch(&stream, LaunchConfig::new(1u32, 256u32), &mut out).map_err(|e| e.to_string());
        let r = r.and_then(|()| stream.synchronize().map_err(|e| e.to_string()));
        let v = r.as_ref().ok().and_then(|_| out.to_vec().ok()).unwrap_or_default();
        (r, v.iter().map(|&x| x as f64).collect())
    };
    match launched {
        Err(e) => {
            println!("REPRODUCED g22r1 {which}: the safe kernel faulted on the GPU (CPU executor: no error): {e}");
            0
        }
        Ok(()) => {
            let bad = guard.iter().take(32).filter(|&&x| x != 7.0).count();
            println!("g22r1 {which}: guard read back (first 8): {:?}; {bad} of 32 guard elements changed", &guard[..8.min(guard.len())]);
            if bad > 0 {
                println!(
                    "REPRODUCED g22r1 {which}: a shared array nobody wrote after the barrier was overwritten by in-bounds writes of another array (CPU executor: unchanged, no error)"
                );
                0
            } else {
                println!("NOT REPRODUCED g22r1 {which}: guard intact (ptxas may have placed `guard` before the short array; see the PTX/SASS)");
                1
            }
        }
    }
}

/// Attacks on `MultiBlockReduce` that the CPU executor should report (they are in "what held").
fn probes() {
    use ferrocuda_device::block::MultiBlockReduce;
    use ferrocuda_device::shared_array;
    use ferrocuda_device::thread::rank_in_block;
    let executor = CpuExecutor::new();
    // Two reducers of different N over one Copy `SharedArray`: B's partials (warp 16, k 0) are
    // A's hand-off slot (32), written right after A's last barrier while others still read it.
    let r = executor.run("probe_two_widths", CpuConfig::new(1u32, 1024u32), &|| {
        let slots = shared_array![f32; 66];
        let a = MultiBlockReduce::<f32, 1, 66>::new(slots);
        let b = MultiBlockReduce::<f32, 2, 66>::new(slots);
        for _ in 0..3 {
            let [x] = a.sum_all([1.0]);
            let [y, z] = b.sum_all([1.0, 2.0]);
            assert!(x == 1024.0 && y == 1024.0 && z == 2048.0, "wrong sums {x} {y} {z}");
        }
    });
    println!("probe two widths over one array: {r:?}");
    // `op` calling a barrier inside a partial warp's tested fold.
    let r = executor.run("probe_op_barrier", CpuConfig::new(1u32, 48u32), &|| {
        let reduce = ferrocuda_device::multi_block_reduce!(f32; 1);
        let _ = reduce.reduce_broadcast(
            [1.0],
            |a, b| {
                ferrocuda_device::sync::sync_threads();
                a + b
            },
            |t| t,
        );
    });
    println!("probe op with a barrier: {r:?}");
    // The user's own accesses of the reducer's array.
    let r = executor.run("probe_user_writes_slots", CpuConfig::new(1u32, 64u32), &|| {
        let slots = shared_array![f32; 33];
        let reduce = MultiBlockReduce::<f32, 1, 33>::new(slots);
        let [s] = reduce.sum_all([1.0]);
        slots.set(rank_in_block() as usize % 33, s);
    });
    println!("probe user writes the reducer's slots: {r:?}");
}

fn main() {
    let which = std::env::args().nth(1).unwrap_or_else(|| "cpu".into());
    if which == "cpu" {
        cpu();
    } else if which == "probes" {
        probes();
    } else {
        std::process::exit(gpu(&which));
    }
}
