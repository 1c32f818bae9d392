//! G19R-3 (audit 2026-11-28g/FINDINGS-review.md): `SliceArg`, the type whose constructors were
//! to prove "this slice argument is real device memory of this length" (session 18's rule for
//! the launchers' `unsafe`), has a safe public `from_parts(ptr, len)` and public mutable fields
//! `ptr` and `len`. A crate that depends on a re-export of ferrocuda-host under the name
//! `ferrocuda_host` (no `unsafe` in it or here) replaces `__private::SliceArg` with a forger,
//! and the real `KernelParam` and `launch_embedded` accept what it makes: a safe launch writes
//! memory the launcher was never given.
//!
//! Build: add `"audit/2026-11-28g/g19r3-kernels"` and `"audit/2026-11-28g/g19r3-host-shim"` to the
//! root Cargo.toml's `members`, then `cargo test --release -p g19r3-kernels -- --include-ignored --nocapture`.

use ferrocuda_host::{Context, DeviceBuffer, Error, LaunchConfig, Stream};
use g19r3_kernels::{fill, forge};

/// Without a GPU: the shim's `SliceArg::output`, the call the generated launcher makes, gives a
/// real `SliceArg` with the forged address and length (that the launcher compiles at all against
/// the real `KernelParam` and `launch_embedded` is the other half).
#[test]
fn g19r_3_a_renamed_host_runtime_forges_the_slice_arguments_the_real_launch_takes() {
    forge(0xdead_0000, 1 << 20);
    let mut mine = [0u32; 1];
    let arg = ferrocuda_host::__private::SliceArg::output::<u32, _>(&mut mine);
    println!("forged SliceArg: ptr {:#x}, len {}", arg.ptr, arg.len);
    assert_eq!((arg.ptr, arg.len), (0xdead_0000, 1 << 20));
}

/// On a GPU: `fill::launch(&stream, .., &mut decoy)` (a 1-element buffer) writes 0xBAD into
/// `victim`, a buffer the launch was never given. Sound would be: victim untouched.
#[test]
#[ignore = "G19R-3 (live): needs a GPU; on one, a safe launch writes a buffer it was never given"]
fn g19r_3_a_safe_launch_writes_a_buffer_it_was_never_given() {
    let context = match Context::primary(0) {
        Ok(context) => context,
        Err(error @ (Error::NoDriver | Error::NoDevice { .. })) => {
            assert!(std::env::var("REQUIRE_GPU").as_deref() != Ok("1"), "REQUIRE_GPU=1 but no GPU: {error}");
            eprintln!("SKIPPED g19r_3: {error}");
            return;
        }
        Err(error) => panic!("{error}"),
    };
    let stream = Stream::new(&context).unwrap();
    let victim = DeviceBuffer::<u32>::zeroed(&context, 1024).unwrap();
    let mut decoy = DeviceBuffer::<u32>::zeroed(&context, 1).unwrap();
    forge(victim.device_ptr(), victim.len());
    let launched = fill::launch(&stream, LaunchConfig::new(4u32, 256u32), &mut decoy);
    stream.synchronize().unwrap();
    let written = victim.to_vec().unwrap().iter().filter(|&&v| v == 0xBAD).count();
    println!("launch: {launched:?}; {written} of {} elements of a buffer the launch was never given hold 0xBAD", victim.len());
    assert_eq!(written, 0, "G19R-3: a safe launch wrote {written} elements of a buffer it was never given");
}
