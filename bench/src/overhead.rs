//! CPU cost of a launch (raw `cuLaunchKernel` against the typed launcher, on the same empty
//! kernel) and the time to load the kernel module from PTX (JIT) and from a cubin.

use std::ffi::c_void;
use std::time::Instant;

use ferrocuda_host::{Context, JitOptions, LaunchConfig, Module, Result, Stream, sys};
use gpu_kernels::KERNELS;
use test_kernels::launch_kinds::empty;

/// Launches per variant per round.
pub const LAUNCHES: usize = 100_000;
/// Launches between (uncounted) synchronisations: few enough that the launch queue never
/// fills, so the time measured is the CPU's, not the GPU's launch rate.
pub const BATCH: usize = 500;
const ROUNDS: usize = 3;

/// µs per launch of the empty kernel: `[("raw cuLaunchKernel", ..), ("typed empty::launch", ..)]`.
/// Each round submits 100 000 launches per variant in batches of 500, the variants taking
/// turns batch by batch (so that the machine's drift, large on these VMs, hits both alike);
/// the figure is the median over the batches of all rounds.
pub fn launch_overhead(context: &Context) -> Result<Vec<(String, f64)>> {
    let stream = Stream::non_blocking(context)?;
    let config = LaunchConfig::new(1u32, 32u32);
    // The raw baseline launches the very function the typed launcher uses.
    let function = empty::function(context)?.raw();
    // Taken once through the door (the empty kernel touches no memory).
    let raw_stream = stream.enqueue("raw baseline", &[], |s| Ok::<_, ferrocuda_host::Error>(s.get()))?;
    let raw = move || {
        // SAFETY: `function` is loaded in the bound context and takes no parameters.
        let code = unsafe { sys::cuLaunchKernel(function, 1, 1, 1, 32, 1, 1, 0, raw_stream, std::ptr::null_mut::<*mut c_void>(), std::ptr::null_mut()) };
        assert_eq!(code, sys::CUresult::CUDA_SUCCESS, "cuLaunchKernel failed");
    };
    let typed = || empty::launch(&stream, config).expect("typed launch failed");
    type Launcher<'s> = Box<dyn FnMut() + 's>;
    let mut variants: [(&str, Launcher); 2] = [("raw cuLaunchKernel", Box::new(raw)), ("typed empty::launch", Box::new(typed))];
    // The raw baseline's `cuLaunchKernel` needs the context current; pushed for the
    // measurement and popped at the end (session 21: library code leaves no context current).
    let _current = context.push_current()?;
    for (_, launch) in &mut variants {
        for _ in 0..1000 {
            launch();
        }
    }
    stream.synchronize()?;
    let mut per_batch = vec![Vec::with_capacity(ROUNDS * LAUNCHES / BATCH); variants.len()];
    for _ in 0..ROUNDS {
        for _ in 0..LAUNCHES / BATCH {
            for (i, (_, launch)) in variants.iter_mut().enumerate() {
                let start = Instant::now();
                for _ in 0..BATCH {
                    launch();
                }
                per_batch[i].push(start.elapsed().as_secs_f64() * 1e6 / BATCH as f64);
                stream.synchronize()?;
            }
        }
    }
    Ok(variants.iter().zip(&per_batch).map(|((name, _), times)| (name.to_string(), crate::timing::median(times))).collect())
}

/// Median and first time (ms) to load the whole `gpu-kernels` module and look up the example
/// kernels, from PTX (the driver's JIT compiles it) and from the cubin built for this GPU.
pub fn module_load(context: &Context, arch: u32) -> Result<Vec<(String, f64, f64)>> {
    const LOADS: usize = 5;
    const SYMBOLS: [&str; 7] = ["saxpy_x4", "sum_x4", "transpose_32", "matmul_128x128", "softmax_rows_1024", "histogram_bytes", "stencil_5pt"];
    let mut results = Vec::new();
    let ptx = KERNELS.ptx.iter().filter(|(a, _)| *a <= arch).max_by_key(|(a, _)| *a);
    let cubin = KERNELS.cubins.iter().find(|(a, _)| *a == arch);
    let mut time = |what: String, load: &dyn Fn() -> Result<Module>| -> Result<()> {
        let mut times = Vec::new();
        for _ in 0..LOADS {
            let start = Instant::now();
            let module = load()?;
            for symbol in SYMBOLS {
                module.function(symbol)?;
            }
            times.push(start.elapsed().as_secs_f64() * 1e3);
            module.unload()?;
        }
        let first = times[0];
        results.push((what, crate::timing::median(&times), first));
        Ok(())
    };
    if let Some(&(ptx_arch, text)) = ptx {
        // SAFETY: the PTX/cubin is this project's own build (kernels built by #[kernel], whose
        // fingerprints `launch_in` checks), or a module that is never launched through a typed launcher.
        time(format!("PTX sm_{ptx_arch} (JIT), {} KiB", text.len() / 1024), &|| unsafe {
            Module::load_ptx(context, "gpu_kernels PTX", text, &JitOptions::new())
        })?;
    }
    if let Some(&(cubin_arch, image)) = cubin {
        // SAFETY: the PTX/cubin is this project's own build (kernels built by #[kernel], whose
        // fingerprints `launch_in` checks), or a module that is never launched through a typed launcher.
        time(format!("cubin sm_{cubin_arch}, {} KiB", image.len() / 1024), &|| unsafe {
            Module::load_binary(context, "gpu_kernels cubin", image, &JitOptions::new())
        })?;
    }
    Ok(results)
}
