//! G19R-1 (audit 2026-11-28g), the host half on a GPU. The audit's kernel crate depended on a
//! shim *as* `ferrocuda_device` whose `__private::key_of` returned 0, so its device module's
//! type-key table held 0 ("unknown" until session 20: not compared), and a safe launch passed a
//! host integer to an entry that stored 42 through it. The repro crate no longer builds (the
//! builder refuses the rename; the device entry rebuilds by-value parameters through the device
//! crate's `Pod`-bounded `by_value`), so here the module the shim's build produced is written
//! by hand: the entry `poke` stores 42 at the address its one 8-byte parameter holds, with this
//! launcher's fingerprint and layout, and a type-key table of 0. Its launch must be refused and
//! the memory untouched; the same module with the launcher's own key passes the check (and
//! then, being hand-written to lie, writes 42: what the check is there to stop).
//!
//! A normal test binary (staged by scripts/gpu-run/stage.sh): skips without a GPU, fails under
//! `REQUIRE_GPU=1`.

use ferrocuda::{Context, DeviceBuffer, Error, JitOptions, Module, Stream};

/// No embedded images: the module is loaded from PTX text (`launch_in`).
pub static KERNELS: ferrocuda::EmbeddedModule = ferrocuda::EmbeddedModule::without_images("g19r_1");

mod kernels {
    /// The launcher's side: a by-value `u64` (plain data, what `KernelParam::scalar` takes).
    #[ferrocuda_device::kernel]
    pub fn poke(w: u64) {
        let _ = w;
    }
}
use kernels::poke;

/// The device module as a build with the given type key writes it: fingerprint and layout as
/// the launcher's, the entry storing 42 through its parameter.
fn module_ptx(type_key: u64) -> String {
    let layout: Vec<String> = poke::SIGNATURE.layout.iter().map(u64::to_string).collect();
    format!(
        ".version 7.0\n.target sm_70\n.address_size 64\n\
         .visible .global .align 8 .u64 __ferrocuda_fingerprint_poke = {fingerprint};\n\
         .visible .global .align 8 .u64 __ferrocuda_layout_poke[{words}] = {{{layout}}};\n\
         .visible .global .align 8 .u64 __ferrocuda_types_poke[1] = {{{type_key}}};\n\
         .visible .entry poke(.param .u64 poke_param_0)\n{{\n\
         \t.reg .b64 %rd<3>;\n\t.reg .b32 %r<2>;\n\
         \tld.param.u64 %rd1, [poke_param_0];\n\tcvta.to.global.u64 %rd2, %rd1;\n\
         \tmov.u32 %r1, 42;\n\tst.global.u32 [%rd2], %r1;\n\tret;\n}}\n",
        fingerprint = poke::SIGNATURE.fingerprint,
        words = layout.len(),
        layout = layout.join(", "),
    )
}

#[test]
fn g19r_1_a_device_module_whose_type_keys_are_zero_is_refused_on_the_gpu() {
    let context = match Context::primary(0) {
        Ok(context) => context,
        Err(error @ (Error::NoDriver | Error::NoDevice { .. })) => {
            assert!(std::env::var("REQUIRE_GPU").as_deref() != Ok("1"), "REQUIRE_GPU=1 but G19R-1's test found no GPU: {error}");
            eprintln!("SKIPPED g19r_1_a_device_module_whose_type_keys_are_zero_is_refused_on_the_gpu: {error}");
            return;
        }
        Err(error) => panic!("G19R-1's test could not open the GPU: {error}"),
    };
    let host_key = poke::SIGNATURE.type_keys.first().copied().flatten().expect("the launcher has a type key")();
    assert_ne!(host_key, 0, "the real key_of never gives 0");
    let stream = Stream::new(&context).unwrap();
    let victim = DeviceBuffer::<u32>::zeroed(&context, 1).unwrap();
    let address = victim.device_ptr();

    // SAFETY: a hand-written module standing for the shim's build; `launch_in` checks its tables.
    let shim = unsafe { Module::load_ptx(&context, "g19r_1 shim build", &module_ptx(0), &JitOptions::new()) }.unwrap();
    let refused = poke::launch_in(&shim, &stream, (1u32, 1u32), address);
    stream.synchronize().unwrap();
    let after = victim.to_vec().unwrap()[0];
    println!("g19r_1: keys 0: launch {refused:?}, the buffer holds {after}");
    match &refused {
        Err(Error::KernelSignatureMismatch { detail, .. }) => assert!(detail.contains("parameter `w` (#0) of `poke`"), "{detail}"),
        other => panic!("G19R-1: a device type-key table of 0 passed the first-launch check: {other:?}"),
    }
    assert_eq!(after, 0, "G19R-1: the refused launch wrote memory it was never lent");
    assert!(matches!(shim.check_kernels(&[&poke::SIGNATURE]), Err(Error::KernelSignatureMismatch { .. })), "check_kernels refuses it too");

    // The same module with the launcher's key: the check passes, and the hand-written entry does
    // what it says (the test could fail: the refusal above is what kept the buffer 0).
    // SAFETY: as above.
    let agreeing = unsafe { Module::load_ptx(&context, "g19r_1 agreeing keys", &module_ptx(host_key), &JitOptions::new()) }.unwrap();
    poke::launch_in(&agreeing, &stream, (1u32, 1u32), address).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(victim.to_vec().unwrap()[0], 42, "with agreeing keys the launch runs");
}
