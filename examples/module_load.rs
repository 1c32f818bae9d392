//! How long loading the kernel modules takes: the example module (what the main job ships) and
//! the test module, from PTX (the driver's JIT compiles it) and from the cubin for this GPU.
//! Run with `CUDA_CACHE_DISABLE=1` to time the JIT rather than the driver's cache of it.
//!
//! `cargo run --release --example module_load`

use std::time::Instant;

use ferrocuda::{Context, JitOptions, Module};

fn main() -> std::process::ExitCode {
    ferrocuda_test_support::exit_code(run())
}

fn run() -> ferrocuda::Result<()> {
    let context = Context::primary(0)?;
    let arch = context.device().arch()?;
    println!("device: {} (sm_{arch}), kernels built by {}", context.device().name()?, gpu_kernels::KERNELS.toolchain);
    for (name, kernels) in [("gpu_kernels (example module)", &gpu_kernels::KERNELS), ("test_kernels (test module)", &test_kernels::KERNELS)] {
        if let Some((ptx_arch, ptx)) = kernels.ptx.iter().rev().find(|(a, _)| *a <= arch) {
            let start = Instant::now();
            // SAFETY: this project's own PTX, loaded to time the JIT and unloaded unlaunched.
            let module = unsafe { Module::load_ptx(&context, name, ptx, &JitOptions::new()) }?;
            let jit = start.elapsed();
            module.unload()?;
            println!("{name}: PTX sm_{ptx_arch}, {} KiB: JIT + load {:.3} s", ptx.len() / 1024, jit.as_secs_f64());
        }
        if let Some((_, cubin)) = kernels.cubins.iter().find(|(a, _)| *a == arch) {
            let start = Instant::now();
            // SAFETY: this project's own cubin (built by ptxas from its PTX), loaded to time the
            // load and unloaded unlaunched.
            let module = unsafe { Module::load_binary(&context, name, cubin, &JitOptions::new()) }?;
            let load = start.elapsed();
            module.unload()?;
            println!("{name}: cubin sm_{arch}, {} KiB: load {:.1} ms", cubin.len() / 1024, load.as_secs_f64() * 1e3);
        }
    }
    Ok(())
}
