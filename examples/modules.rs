//! Explicit modules: JIT options and the JIT's log, a typed launch from the module, a module
//! global, and a hot reload of new PTX while launches are queued.
//!
//! `cargo run --release --example modules`

use ferrocuda::{Context, DeviceBuffer, JitOptions, ReloadableModule, Stream};
use test_kernels::launch_kinds::mark_blocks;

/// The kernel crate's PTX plus a global `VERSION = version`: a stand-in for PTX rebuilt while
/// the program runs (same kernels, something new inside), and a global to read back.
fn ptx_with_version(version: u32) -> String {
    let ptx = test_kernels::KERNELS.ptx_for(80).expect("sm_80 PTX is built");
    format!("{ptx}\n.visible .global .align 4 .u32 VERSION = {version};\n")
}

fn main() -> std::process::ExitCode {
    ferrocuda_test_support::exit_code(run())
}

fn run() -> ferrocuda::Result<()> {
    let context = Context::primary(0)?;
    let options = JitOptions::new().optimization_level(3).max_registers(32).line_info(true).verbose(true);
    // SAFETY: the PTX/cubin is this project's own build (kernels built by #[kernel], whose
    // fingerprints `launch_in` checks), or a module that is never launched through a typed launcher.
    let module = unsafe { ReloadableModule::load_ptx(&context, "test_kernels", &ptx_with_version(1), options, &[&mark_blocks::SIGNATURE]) }?;
    let current = module.current();
    println!("JIT log of `{}` ({} lines), first lines:", current.name(), current.info_log().lines().count());
    for line in current.info_log().lines().take(3) {
        println!("  {line}");
    }
    let attributes = current.function(mark_blocks::SYMBOL)?.attributes()?;
    println!("mark_blocks: {} registers, PTX {} -> sm_{}", attributes.registers, attributes.ptx_version, attributes.binary_version);
    println!("global VERSION = {}", current.global::<u32>("VERSION")?.read()?);
    drop(current);

    let stream = Stream::new(&context)?;
    let mut out = DeviceBuffer::<u32>::zeroed(&context, 4)?;
    for _ in 0..100 {
        mark_blocks::launch_in(&module.current(), &stream, (4u32, 32u32), false, &mut out)?;
    }
    // SAFETY: the PTX/cubin is this project's own build (kernels built by #[kernel], whose
    // fingerprints `launch_in` checks), or a module that is never launched through a typed launcher.
    unsafe { module.reload_ptx(&ptx_with_version(2)) }?; // the old module stays until its queued launches end
    mark_blocks::launch_in(&module.current(), &stream, (4u32, 32u32), true, &mut out)?;
    stream.synchronize()?;
    println!("after reload (generation {}): VERSION = {}, out = {:?}", module.generation(), module.current().global::<u32>("VERSION")?.read()?, out.to_vec()?);
    Ok(())
}
