//! Explicitly loaded modules on the GPU: JIT options and logs, a bad PTX's error log, PTX that
//! needs a newer driver or device, typed globals, hot reload while launches are in flight, and
//! a stale module whose kernel no longer matches its launcher.

mod common;

use ferrocuda::{DeviceBuffer, Error, JitFallback, JitOptions, Module, ReloadableModule, Stream};
use test_kernels::launch_kinds::{Affine, affine, mark_blocks};

/// A hand-written `mark_blocks` (same parameters as the Rust kernel: bool, &mut [u32]): thread
/// 0 of block `b` writes `VALUE + b`, where `VALUE` is `{value}` (a register or the global).
const MARK_BLOCKS_PTX: &str = r#"
.version 7.0
.target sm_70
.address_size 64

.visible .global .align 4 .u32 FILL = 1;
.visible .const .align 4 .b8 TABLE[16] = {1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0};

.visible .entry mark_blocks(
	.param .u8 mark_blocks_param_0,
	.param .u64 .ptr .align 4 mark_blocks_param_1,
	.param .u64 mark_blocks_param_2
)
{
	.reg .pred %p<3>;
	.reg .b32 %r<8>;
	.reg .b64 %rd<8>;

	mov.u32 %r1, %tid.x;
	setp.ne.u32 %p1, %r1, 0;
	@%p1 bra DONE;
	mov.u32 %r2, %ctaid.x;
	cvt.u64.u32 %rd1, %r2;
	ld.param.u64 %rd2, [mark_blocks_param_2];
	setp.ge.u64 %p2, %rd1, %rd2;
	@%p2 bra DONE;
	ld.param.u64 %rd3, [mark_blocks_param_1];
	cvta.to.global.u64 %rd4, %rd3;
	shl.b64 %rd5, %rd1, 2;
	add.s64 %rd6, %rd4, %rd5;
	{value}
	add.s32 %r4, %r3, %r2;
	st.global.u32 [%rd6], %r4;
DONE:
	ret;
}
"#;

fn mark_blocks_ptx(value: &str) -> String {
    MARK_BLOCKS_PTX.replace("{value}", value)
}

const FROM_GLOBAL: &str = "ld.global.u32 %r3, [FILL];";

#[test]
fn jit_options_apply_and_the_info_log_is_captured() {
    let Some(context) = common::gpu_or_skip("jit_options_apply_and_the_info_log_is_captured") else { return };
    let ptx = test_kernels::KERNELS.ptx_for(80).unwrap();
    // sm_90 raises a register cap below 24 to 24, and the tensor-core kernel needs 28: cap at 32.
    let options = JitOptions::new().optimization_level(0).max_registers(32).line_info(true).fallback(JitFallback::PreferPtx).verbose(true);
    // SAFETY: the PTX/cubin is this project's own build (kernels built by #[kernel], whose
    // fingerprints `launch_in` checks), or a module that is never launched through a typed launcher.
    let module =
        unsafe { Module::load_ptx_checked(&context, "test_kernels (O0, 32 regs)", ptx, &options, &[&affine::SIGNATURE, &mark_blocks::SIGNATURE]) }.unwrap();
    eprintln!("JIT info log (first lines):\n{}", module.info_log().lines().take(4).collect::<Vec<_>>().join("\n"));
    assert!(
        module.info_log().contains("for 'affine' with  32 of maxrregcount option"),
        "the JIT should apply the register cap to affine:\n{}",
        module.info_log()
    );
    let attributes = module.function("affine").unwrap().attributes().unwrap();
    eprintln!("affine under O0 and max_registers(32): {attributes:?}");
    assert!(attributes.registers <= 32, "{attributes:?}");
    // CU_FUNC_ATTRIBUTE_PTX_VERSION is the virtual architecture the PTX targets (sm_80 -> 80).
    assert_eq!(attributes.ptx_version, 80);
    // Without options the same PTX compiles at O4, which needs no more registers than O0.
    // SAFETY: the PTX/cubin is this project's own build (kernels built by #[kernel], whose
    // fingerprints `launch_in` checks), or a module that is never launched through a typed launcher.
    let default = unsafe { Module::load_ptx(&context, "test_kernels (defaults)", ptx, &JitOptions::new()) }.unwrap();
    let optimised = default.function("affine").unwrap().attributes().unwrap();
    eprintln!("affine with the driver's default JIT options: {} registers", optimised.registers);
    assert!(optimised.registers <= attributes.registers, "O4 {optimised:?} vs O0 {attributes:?}");

    // The typed launcher runs the kernel from this module.
    let stream = Stream::new(&context).unwrap();
    let x_host: Vec<f32> = (0..500).map(|i| i as f32).collect();
    let x = DeviceBuffer::from_slice(&context, &x_host).unwrap();
    let mut out = DeviceBuffer::<f32>::zeroed(&context, 500).unwrap();
    affine::launch_in(&module, &stream, (4u32, 128u32), Affine { scale: 0.5, offset: 2.0, limit: 500 }, &x, &mut out).unwrap();
    stream.synchronize().unwrap();
    assert!(out.to_vec().unwrap().iter().zip(&x_host).all(|(g, x)| *g == 0.5 * x + 2.0));
    module.unload().unwrap();

    // An explicit JIT target (the device's own architecture) instead of the context's.
    let arch = context.device().arch().unwrap();
    // SAFETY: the PTX/cubin is this project's own build (kernels built by #[kernel], whose
    // fingerprints `launch_in` checks), or a module that is never launched through a typed launcher.
    let targeted = unsafe { Module::load_ptx(&context, "targeted", ptx, &JitOptions::new().target(arch)) }.unwrap();
    assert_eq!(targeted.function("affine").unwrap().attributes().unwrap().binary_version, arch);

    // SAFETY: the PTX/cubin is this project's own build (kernels built by #[kernel], whose
    // fingerprints `launch_in` checks), or a module that is never launched through a typed launcher.
    let error = unsafe { Module::load_ptx(&context, "m", ptx, &JitOptions::new().optimization_level(7)) }.unwrap_err();
    assert!(error.to_string().contains("optimization level 7 is out of range"), "{error}");
}

#[test]
fn a_bad_ptx_error_carries_the_jit_log() {
    let Some(context) = common::gpu_or_skip("a_bad_ptx_error_carries_the_jit_log") else { return };
    let broken = mark_blocks_ptx("ld.global.u32 %r3, [NO_SUCH_SYMBOL];");
    // SAFETY: the PTX/cubin is this project's own build (kernels built by #[kernel], whose
    // fingerprints `launch_in` checks), or a module that is never launched through a typed launcher.
    let error = unsafe { Module::load_ptx(&context, "broken", &broken, &JitOptions::new()) }.unwrap_err();
    let message = error.to_string();
    eprintln!("bad PTX: {message}");
    let Error::ModuleLoad { log, .. } = &error else { panic!("expected ModuleLoad, got {error:?}") };
    assert!(log.contains("NO_SUCH_SYMBOL"), "the log should name the undefined symbol: {log}");
    assert!(message.contains("loading module `broken` failed") && message.contains("JIT log:"), "{message}");
}

#[test]
fn ptx_for_a_newer_driver_or_device_is_refused_by_name() {
    let Some(context) = common::gpu_or_skip("ptx_for_a_newer_driver_or_device_is_refused_by_name") else { return };
    let too_new_isa = mark_blocks_ptx(FROM_GLOBAL).replace(".version 7.0", ".version 99.1");
    // SAFETY: the PTX/cubin is this project's own build (kernels built by #[kernel], whose
    // fingerprints `launch_in` checks), or a module that is never launched through a typed launcher.
    let message = unsafe { Module::load_ptx(&context, "future", &too_new_isa, &JitOptions::new()) }.unwrap_err().to_string();
    eprintln!("{message}");
    assert!(message.contains("needs PTX ISA 99.1, but the driver (CUDA"), "{message}");
    let arch = context.device().arch().unwrap();
    let too_new_arch = mark_blocks_ptx(FROM_GLOBAL).replace(".target sm_70", &format!(".target sm_{}", arch + 10));
    // SAFETY: the PTX/cubin is this project's own build (kernels built by #[kernel], whose
    // fingerprints `launch_in` checks), or a module that is never launched through a typed launcher.
    let message = unsafe { Module::load_ptx(&context, "future", &too_new_arch, &JitOptions::new()) }.unwrap_err().to_string();
    eprintln!("{message}");
    assert!(message.contains(&format!("targets sm_{}", arch + 10)) && message.contains(&format!("(sm_{arch})")), "{message}");
}

#[test]
fn module_globals_read_and_write_as_typed_values() {
    let Some(context) = common::gpu_or_skip("module_globals_read_and_write_as_typed_values") else { return };
    // SAFETY: the PTX/cubin is this project's own build (kernels built by #[kernel], whose
    // fingerprints `launch_in` checks), or a module that is never launched through a typed launcher.
    let module = unsafe {
        Module::load_ptx_checked(
            &context,
            "globals",
            &mark_blocks_ptx(FROM_GLOBAL),
            &JitOptions::new().host_writable_globals(["FILL"]),
            &[&mark_blocks::SIGNATURE],
        )
    }
    .unwrap();
    let fill = module.global::<u32>("FILL").unwrap();
    assert_eq!(fill.read().unwrap(), 1);
    assert_eq!(module.global::<[u32; 4]>("TABLE").unwrap().read().unwrap(), [1, 2, 3, 4]);
    fill.write(&40).unwrap();
    assert_eq!(fill.read().unwrap(), 40);

    let stream = Stream::new(&context).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(&context, 16).unwrap();
    mark_blocks::launch_in(&module, &stream, (16u32, 32u32), false, &mut out).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(out.to_vec().unwrap(), (40..56).collect::<Vec<_>>());

    let error = module.global::<u32>("TABLE").unwrap_err().to_string();
    assert!(error.contains("holds 16 bytes, but `u32` has 4"), "{error}");
    let error = module.global::<u32>("NOPE").unwrap_err().to_string();
    assert!(error.contains("has no global `NOPE`"), "{error}");
}

#[test]
fn hot_reload_swaps_code_without_breaking_launches_in_flight() {
    let Some(context) = common::gpu_or_skip("hot_reload_swaps_code_without_breaking_launches_in_flight") else { return };
    // SAFETY: the PTX/cubin is this project's own build (kernels built by #[kernel], whose
    // fingerprints `launch_in` checks), or a module that is never launched through a typed launcher.
    let reloadable =
        unsafe { ReloadableModule::load_ptx(&context, "hot", &mark_blocks_ptx("mov.u32 %r3, 1000;"), JitOptions::new(), &[&mark_blocks::SIGNATURE]) }.unwrap();
    let stream = Stream::new(&context).unwrap();
    let blocks = 1 << 16;
    let mut before = DeviceBuffer::<u32>::zeroed(&context, blocks).unwrap();
    let mut after = DeviceBuffer::<u32>::zeroed(&context, blocks).unwrap();
    // Queue many launches of the old code, then reload while they are (likely) still running.
    for _ in 0..200 {
        mark_blocks::launch_in(&reloadable.current(), &stream, (blocks as u32, 256u32), false, &mut before).unwrap();
    }
    // SAFETY: the PTX/cubin is this project's own build (kernels built by #[kernel], whose
    // fingerprints `launch_in` checks), or a module that is never launched through a typed launcher.
    unsafe { reloadable.reload_ptx(&mark_blocks_ptx("mov.u32 %r3, 2000;")) }.unwrap();
    assert_eq!(reloadable.generation(), 1);
    mark_blocks::launch_in(&reloadable.current(), &stream, (blocks as u32, 256u32), false, &mut after).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(before.to_vec().unwrap(), (0..blocks as u32).map(|b| 1000 + b).collect::<Vec<_>>());
    assert_eq!(after.to_vec().unwrap(), (0..blocks as u32).map(|b| 2000 + b).collect::<Vec<_>>());

    // A reload that would break the launcher is refused and the current code stays.
    let stale = mark_blocks_ptx("mov.u32 %r3, 3000;").replace("\t.param .u8 mark_blocks_param_0,\n", "");
    // SAFETY: the PTX/cubin is this project's own build (kernels built by #[kernel], whose
    // fingerprints `launch_in` checks), or a module that is never launched through a typed launcher.
    let error = unsafe { reloadable.reload_ptx(&stale) }.unwrap_err();
    eprintln!("stale reload: {error}");
    assert!(matches!(error, Error::KernelSignatureMismatch { .. }), "{error}");
    assert_eq!(reloadable.generation(), 1);
}

#[test]
fn a_stale_module_is_named_with_the_mismatch() {
    let Some(context) = common::gpu_or_skip("a_stale_module_is_named_with_the_mismatch") else { return };
    // The kernel lost its `bool` parameter: two PTX parameters where the launcher passes three.
    let stale = mark_blocks_ptx(FROM_GLOBAL).replace("\t.param .u8 mark_blocks_param_0,\n", "");
    // SAFETY: the PTX/cubin is this project's own build (kernels built by #[kernel], whose
    // fingerprints `launch_in` checks), or a module that is never launched through a typed launcher.
    let error = unsafe { Module::load_ptx_checked(&context, "stale", &stale, &JitOptions::new(), &[&mark_blocks::SIGNATURE]) }.unwrap_err();
    let message = error.to_string();
    eprintln!("{message}");
    assert!(message.contains("kernel `mark_blocks` in module `stale` does not match its launcher"), "{message}");
    assert!(message.contains("has 2 parameters, the launcher passes 3"), "{message}");

    // Loaded without the check, the first typed launch reports the same and launches nothing.
    // SAFETY: the PTX/cubin is this project's own build (kernels built by #[kernel], whose
    // fingerprints `launch_in` checks), or a module that is never launched through a typed launcher.
    let module = unsafe { Module::load_ptx(&context, "stale", &stale, &JitOptions::new()) }.unwrap();
    let stream = Stream::new(&context).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(&context, 4).unwrap();
    let error = mark_blocks::launch_in(&module, &stream, (4u32, 32u32), true, &mut out).unwrap_err();
    assert!(matches!(error, Error::KernelSignatureMismatch { .. }), "{error}");

    // A module without the kernel at all.
    let error = affine::launch_in(
        &module,
        &stream,
        (1u32, 32u32),
        Affine { scale: 1.0, offset: 0.0, limit: 0 },
        &DeviceBuffer::<f32>::zeroed(&context, 1).unwrap(),
        &mut DeviceBuffer::<f32>::zeroed(&context, 1).unwrap(),
    )
    .unwrap_err();
    assert!(error.to_string().contains("kernel `affine` is not in module `stale`"), "{error}");
}

#[test]
fn a_cubin_loads_as_a_binary_module_and_garbage_does_not() {
    let Some(context) = common::gpu_or_skip("a_cubin_loads_as_a_binary_module_and_garbage_does_not") else { return };
    let arch = context.device().arch().unwrap();
    let Some(&(_, cubin)) = test_kernels::KERNELS.cubins.iter().find(|(a, _)| *a == arch) else {
        assert!(!ferrocuda_test_support::gpu_required() || test_kernels::KERNELS.cubins.is_empty(), "no cubin for sm_{arch} although cubins were built");
        eprintln!("no cubin for sm_{arch} embedded; nothing to load");
        return;
    };
    // SAFETY: the PTX/cubin is this project's own build (kernels built by #[kernel], whose
    // fingerprints `launch_in` checks), or a module that is never launched through a typed launcher.
    let module = unsafe { Module::load_binary(&context, "test_kernels cubin", cubin, &JitOptions::new()) }.unwrap();
    module.check_kernels(&[&affine::SIGNATURE, &mark_blocks::SIGNATURE]).unwrap();
    let stream = Stream::new(&context).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(&context, 5).unwrap();
    mark_blocks::launch_in(&module, &stream, (5u32, 32u32), false, &mut out).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(out.to_vec().unwrap(), [0, 1, 2, 3, 4]);

    // SAFETY: the PTX/cubin is this project's own build (kernels built by #[kernel], whose
    // fingerprints `launch_in` checks), or a module that is never launched through a typed launcher.
    let error = unsafe { Module::load_binary(&context, "garbage", b"not a cubin at all", &JitOptions::new()) }.unwrap_err();
    eprintln!("garbage image: {error}");
    assert!(error.to_string().contains("module `garbage` is not a loadable binary image: it is neither a cubin"), "{error}");
    // A cubin cut short is refused before the driver could read past its end.
    // SAFETY: the PTX/cubin is this project's own build (kernels built by #[kernel], whose
    // fingerprints `launch_in` checks), or a module that is never launched through a typed launcher.
    let error = unsafe { Module::load_binary(&context, "truncated", &cubin[..cubin.len() / 2], &JitOptions::new()) }.unwrap_err();
    assert!(error.to_string().contains("the ELF is truncated"), "{error}");
}
