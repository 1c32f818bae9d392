// G18S-1 (audit/2026-11-28e/FINDINGS-review.md, session 18's addendum; closed for the CPU
// executor in session 19): `extern crate self as ferrocuda_device;` with the real device crate
// re-exported beside an `args` module of the crate's own (a `KernelOutput` whose `REQUIREMENTS`
// are none, a no-op `check_output_launch`; safe code, no `unsafe` written) skipped the CPU
// launcher's checks of the launch's shape, and the generated `unsafe { parts.output(shape) }`
// reached the real `OutputParts` through the re-export: a 2-D launch of a per-thread output gave
// two threads each element. `OutputParts::output` now checks the running launch against the
// output's own facts in every thread: the launch is refused, nothing is written.
extern crate ferrocuda_device as real_device;
extern crate self as ferrocuda_device;

// What the generated host code names under `::ferrocuda_device` besides `__private`.
pub use real_device::{cpu, global, kernel};

pub mod __private {
    pub use ::real_device::__private::*;

    pub mod args {
        pub use ::real_device::__private::args::*;

        /// Says that a per-thread output requires nothing of its launch.
        pub trait KernelOutput {
            type Shape;
            const REQUIREMENTS: ::ferrocuda::types::LaunchRequirements;
        }
        impl KernelOutput for ::real_device::global::DisjointSlice<'_, u32> {
            type Shape = ();
            const REQUIREMENTS: ::ferrocuda::types::LaunchRequirements = ::ferrocuda::types::LaunchRequirements::NONE;
        }

        pub fn check_output_launch<S, O>(
            _: &'static str,
            _: &::ferrocuda::types::LaunchConfig,
            _: usize,
            _: S,
            _: ::core::marker::PhantomData<O>,
        ) -> Result<(), ::ferrocuda::types::LaunchProblem> {
            Ok(())
        }
    }
}

pub static KERNELS: ferrocuda::EmbeddedModule = ferrocuda::EmbeddedModule::without_images("t");

mod kernels {
    use ferrocuda_device::global::{DisjointSlice, unique_index};

    #[ferrocuda_device::kernel]
    pub fn per_thread(mut out: DisjointSlice<u32>) {
        if let Some(o) = out.get_mut(unique_index()) {
            *o += 1;
        }
    }
}

fn main() {
    let executor = ferrocuda::cpu::CpuExecutor::new();
    let mut out = vec![0u32; 64];
    // Two threads per index of a per-thread output: (32, 2) threads in one block.
    let refused = kernels::per_thread::launch_cpu(&executor, (1u32, (32u32, 2u32)), &mut out);
    let text = format!("{refused:?}");
    assert!(text.contains("does not meet what an output of the kernel requires"), "a 2-D launch of a per-thread output, its launcher's checks renamed away: {text}");
    assert!(out.iter().all(|&v| v == 0), "no thread got the output");
    kernels::per_thread::launch_cpu(&executor, (2u32, 32u32), &mut out).expect("a 1-D launch runs");
    assert!(out.iter().all(|&v| v == 1));
    println!("G18S-1 (CPU): the 2-D launch refused in its threads");
}
