// G18S-1's program (audit/2026-11-28e/FINDINGS-review.md, session 18's addendum; closed for the
// GPU launch in session 19), included by its two users: the seams/pass case
// (`seams/pass/g18s_1_runtime_renamed_checks_no_launch_away.rs`, run by trybuild) and the test
// binary `ferrocuda/tests/gpu_g18s_1_renamed_runtime.rs` (run on the GPU machines). One source,
// so the two cannot drift apart. Each user writes `extern crate self as ferrocuda_host;` itself,
// at its crate root (an `extern crate` from a macro such as `include!` may not shadow a name
// passed with `--extern`), and calls `renamed_runtime_case()`.
//
// `extern crate self as ferrocuda_host;` with the real `__private` re-exported beside no-op
// `check_requirements`, `check_output_shape` and `check_same_len` (safe code, no `unsafe`
// written) skipped every check the launchers make of the launch's shape, and the generated
// `unsafe { launch_embedded(..) }` reached the real launch: a 2-D launch of a per-thread output
// (two threads per element, a data race on the GPU), a `same_len` group of other lengths (the
// device entry rebuilds `y` with `x`'s length: written past `y`'s end). The facts now travel in
// the output's and the member's `KernelParam`s (`OutputArg`, `SameLen`, made only by the real
// constructors), and the real launch checks them itself, first: both are refused with
// `InvalidLaunch`, before any module is loaded (this crate embeds none).
//
// Needs a GPU for a `Stream`: without one it prints why and passes, under `REQUIRE_GPU=1` it
// fails.

/// The renamed runtime: the real `__private`, but for the three checks, made no-ops.
pub mod __private {
    pub use ::ferrocuda::__private::*;

    /// No-op.
    pub fn check_requirements(
        _: &'static str,
        _: &::ferrocuda::types::LaunchConfig,
        _: ::ferrocuda::types::LaunchRequirements,
    ) -> Result<(), ::ferrocuda::Error> {
        Ok(())
    }
    /// No-op.
    pub fn check_output_shape(_: &'static str, _: Result<(), ::ferrocuda::types::LaunchProblem>) -> Result<(), ::ferrocuda::Error> {
        Ok(())
    }
    /// No-op.
    pub fn check_same_len(_: &'static str, _: &[(&'static str, usize)]) -> Result<(), ::ferrocuda::Error> {
        Ok(())
    }
}

/// No embedded images: both launches are refused before any module is loaded.
pub static KERNELS: ferrocuda::EmbeddedModule = ferrocuda::EmbeddedModule::without_images("t");

mod kernels {
    use ferrocuda_device::global::{DisjointSlice, unique_index};

    #[ferrocuda_device::kernel]
    pub fn per_thread(mut out: DisjointSlice<u32>) {
        if let Some(o) = out.get_mut(unique_index()) {
            *o += 1;
        }
    }

    #[ferrocuda_device::kernel(same_len(x, y))]
    pub fn grouped(x: &[u32], mut y: DisjointSlice<u32>) {
        let i = unique_index();
        if let (Some(o), Some(v)) = (y.get_mut(i), x.get(i.get())) {
            *o = *v;
        }
    }
}

/// Both launches, their launchers' checks renamed away: each must be refused by the real launch.
fn renamed_runtime_case() {
    use ferrocuda::types::LaunchProblem;
    use ferrocuda::{Context, DeviceBuffer, Error, Stream};
    let context = match Context::primary(0) {
        Ok(context) => context,
        Err(error @ (Error::NoDriver | Error::NoDevice { .. })) => {
            assert!(std::env::var("REQUIRE_GPU").as_deref() != Ok("1"), "REQUIRE_GPU=1 but G18S-1's case found no GPU: {error}");
            eprintln!("SKIPPED g18s_1_runtime_renamed_checks_no_launch_away: {error}");
            return;
        }
        Err(error) => panic!("G18S-1's case could not open the GPU: {error}"),
    };
    let stream = Stream::non_blocking(&context).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(&context, 64).unwrap();
    // Two threads per element: (32, 2) threads in one block.
    match kernels::per_thread::launch(&stream, (1u32, (32u32, 2u32)), &mut out) {
        Err(Error::InvalidLaunch { problem: LaunchProblem::NotOneDimensional { .. }, .. }) => {}
        other => panic!("a 2-D launch of a per-thread output, its launcher's checks renamed away: {other:?}"),
    }
    let x = DeviceBuffer::<u32>::zeroed(&context, 64).unwrap();
    let mut y = DeviceBuffer::<u32>::zeroed(&context, 1).unwrap();
    match kernels::grouped::launch(&stream, (1u32, 64u32), &x, &mut y) {
        Err(Error::InvalidLaunch { problem: LaunchProblem::LengthsDiffer { .. }, .. }) => {}
        other => panic!("a same_len group of other lengths, its launcher's check renamed away: {other:?}"),
    }
    println!("G18S-1: both launches refused by the real launch");
}
