//! G19R-1 (audit 2026-11-28g/FINDINGS-review.md): with `::ferrocuda_device` renamed to a crate of
//! the user's own (no `unsafe` in it or here), a by-value kernel parameter is plain data on the
//! host and a `&'static mut u32` on the device; the first launch's type check compares nothing,
//! and a safe launch writes device memory the kernel was never lent.
//!
//! Build (outside the workspace, which excludes audit/): add `"audit/2026-11-28g/g19r1-kernels"`
//! and `"audit/2026-11-28g/g19r1-device-shim"` to the root Cargo.toml's `members`, then
//! `cargo test --release -p g19r1-kernels -- --include-ignored --nocapture`.
//! GPU: `REQUIRE_GPU=1 <the test binary> --include-ignored --nocapture` (bench/results/s19-review).

use ferrocuda_host::{Context, DeviceBuffer, Error, LaunchConfig, Stream};
use g19r1_kernels::{KERNELS, Word, poke};

/// The device module's PTX holds the entry with its one 8-byte parameter dereferenced for a
/// store, and its type-key table is the "unknown" key 0: the check that tells a `u64` from a
/// reference is off. No GPU needed.
#[test]
fn g19r_1_the_device_build_stores_through_a_by_value_parameter_and_its_key_table_is_unknown() {
    let ptx = KERNELS.ptx_for(80).expect("the kernel crate's PTX (sm_80, which every newer GPU JIT-compiles)");
    let entry = ptx.find(".entry poke").expect("the entry `poke` in the PTX");
    let body = &ptx[entry..];
    let body = &body[..body.find("\n}").expect("the end of the entry")];
    println!("{body}");
    // The one parameter is 8 bytes, and 42 is stored at the address it holds.
    assert!(body.contains("ld.param.b64") || body.contains("ld.param.u64"), "the parameter is read as 8 bytes");
    assert!(body.lines().any(|l| l.contains("st.") && l.contains(", 42;")), "and 42 is stored through it");
    // The layout table agrees with the host's (8 bytes, align 8), and the type-key table holds
    // the "unknown" key 0, which the host does not compare.
    let layout = ptx.lines().find(|l| l.contains("__ferrocuda_layout_poke")).expect("the layout table");
    let types = ptx.lines().find(|l| l.contains("__ferrocuda_types_poke")).expect("the type-key table");
    println!("{layout}\n{types}");
    assert!(layout.contains("= {8, 0, 0, 0, 0, 0, 0, 0, 8}"), "{layout}");
    assert!(types.trim_end().ends_with("[8];"), "a zero-initialised table (key 0): {types}");
}

/// A safe launch writes 42 into a buffer the kernel was never given. Sound would be: the launch
/// refused (`KernelSignatureMismatch`), the buffer still 0.
#[test]
#[ignore = "G19R-1 (live): needs a GPU; on one, a safe launch writes device memory the kernel was never lent"]
fn g19r_1_a_renamed_device_runtime_lets_a_safe_launch_write_memory_it_was_never_lent() {
    let context = match Context::primary(0) {
        Ok(context) => context,
        Err(error @ (Error::NoDriver | Error::NoDevice { .. })) => {
            assert!(std::env::var("REQUIRE_GPU").as_deref() != Ok("1"), "REQUIRE_GPU=1 but no GPU: {error}");
            eprintln!("SKIPPED g19r_1: {error}");
            return;
        }
        Err(error) => panic!("{error}"),
    };
    let stream = Stream::new(&context).unwrap();
    let victim = DeviceBuffer::<u32>::zeroed(&context, 1).unwrap();
    // A number, as far as the host build knows (`Word` is `Pod` there).
    let address = victim.device_ptr();
    let launched = poke::launch(&stream, LaunchConfig::new(1u32, 1u32), Word(address));
    stream.synchronize().unwrap();
    let after = victim.to_vec().unwrap()[0];
    println!("launch: {launched:?}; the buffer the kernel was never given now holds {after}");
    assert!(
        launched.is_err() && after == 0,
        "G19R-1: the launch passed the type check ({launched:?}) and the kernel wrote {after} into memory it was never lent"
    );
}
