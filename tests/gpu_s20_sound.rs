//! Session 20, soundness helper: G19R-1's host half on a GPU (audit 2026-11-28g). A device
//! module whose type-key table holds 0 ("unknown" until session 20, not compared) is what a
//! kernel crate whose `::ferrocuda_device` was a shim with `key_of` returning 0 produced; the
//! repro crate itself no longer builds (the builder refuses the rename, and the device entry
//! rebuilds by-value parameters through the device crate's `Pod`-bounded `by_value`, so its
//! device `Word(&'static mut u32)` is a compile error). Here the real `affine` kernel's module
//! has its type table zeroed in the PTX text, as the shim's build wrote it, and the first
//! launch's check must refuse it, while the unpatched module passes and runs. Skips without a
//! GPU, fails under `REQUIRE_GPU=1`.

mod common;

use ferrocuda::{DeviceBuffer, Error, JitOptions, Module, Stream};
use test_kernels::launch_kinds::{Affine, affine};

/// The embedded sm_80 PTX with `affine`'s type-key table made zero-initialised (`= {..}` cut).
fn ptx_with_zero_keys(ptx: &str) -> String {
    let start = ptx.find("__ferrocuda_types_affine[").expect("affine's type-key table in the PTX");
    let line_end = start + ptx[start..].find('\n').expect("the table's line ends");
    let line = &ptx[start..line_end];
    let cut = line.find(" = {").expect("the table has an initialiser (its keys)");
    format!("{}{};{}", &ptx[..start], &line[..cut], &ptx[line_end..])
}

/// G19R-1: the first-launch check refuses a device type-key table of zeros (`check_kernels`,
/// and `launch_in`, which makes the same check), naming the by-value parameter; the module as
/// built passes, and its launch runs.
#[test]
fn g19r_1_a_device_module_whose_type_keys_are_zero_is_refused_on_the_gpu() {
    let Some(context) = common::gpu_or_skip("g19r_1_a_device_module_whose_type_keys_are_zero_is_refused_on_the_gpu") else { return };
    let ptx = test_kernels::KERNELS.ptx_for(80).expect("test_kernels' sm_80 PTX");
    let zeroed = ptx_with_zero_keys(ptx);
    assert!(zeroed.len() < ptx.len(), "the initialiser was cut");
    // SAFETY: this project's own `#[kernel]` build of test_kernels, with one table's initialiser
    // removed (data the host reads, never code the kernels run): the launcher checks it.
    let patched = unsafe { Module::load_ptx(&context, "g19r_1 zero keys", &zeroed, &JitOptions::new()) }.unwrap();
    let refused = patched.check_kernels(&[&affine::SIGNATURE]);
    println!("g19r_1: check of the zeroed table: {refused:?}");
    match &refused {
        Err(Error::KernelSignatureMismatch { detail, .. }) => assert!(detail.contains("parameter `p` (#0)"), "{detail}"),
        other => panic!("G19R-1: a device type-key table of zeros passed the first-launch check: {other:?}"),
    }
    let stream = Stream::new(&context).unwrap();
    let x = DeviceBuffer::from_slice(&context, &[1.0f32; 64]).unwrap();
    let mut out = DeviceBuffer::<f32>::zeroed(&context, 64).unwrap();
    let params = Affine { scale: 2.0, offset: 1.0, limit: 64 };
    let launched = affine::launch_in(&patched, &stream, (1u32, 64u32), params, &x, &mut out);
    assert!(matches!(launched, Err(Error::KernelSignatureMismatch { .. })), "launch_in refuses it too: {launched:?}");
    stream.synchronize().unwrap();
    assert!(out.to_vec().unwrap().iter().all(|&v| v == 0.0), "nothing ran");
    // The module as built: passes and runs.
    // SAFETY: as above, unpatched.
    let real = unsafe { Module::load_ptx(&context, "g19r_1 as built", ptx, &JitOptions::new()) }.unwrap();
    real.check_kernels(&[&affine::SIGNATURE]).unwrap();
    affine::launch_in(&real, &stream, (1u32, 64u32), params, &x, &mut out).unwrap();
    stream.synchronize().unwrap();
    assert!(out.to_vec().unwrap().iter().all(|&v| v == 3.0), "the agreeing module ran: 2 * 1 + 1");
}
