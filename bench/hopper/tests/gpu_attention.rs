//! The attention kernels on a Hopper GPU (skipped with the reason printed where there is none;
//! a failure under `REQUIRE_GPU=1`): every kernel (D 64/128, causal or not, every schedule) on
//! problems whose length is no multiple of the tile (S = 300 and 1000, 3 heads), O and LSE
//! poisoned first, every row against the f64 reference within `attention::within_bound`.
//! The benchmark `hopper-attention` checks the large sizes.

use std::io::Write;

use ferrocuda_host::{Context, Stream};
use hopper_kernels::attention_host::{self, Problem};

/// The GPU's context, or `None` (printed) where there is no usable Hopper GPU; panics instead
/// under `REQUIRE_GPU=1`.
fn hopper_or_skip() -> Option<Context> {
    let required = ferrocuda_test_support::gpu_required();
    let context = match Context::primary(0) {
        Ok(context) => context,
        Err(error) => {
            assert!(!required, "REQUIRE_GPU=1 but no GPU could be opened: {error}");
            // Straight to stderr: the harness captures `eprintln!` of passing tests.
            let _ = writeln!(std::io::stderr(), "SKIPPED gpu_attention: {error}");
            return None;
        }
    };
    let arch = context.device().arch().expect("compute capability");
    if arch != 90 {
        assert!(!required, "REQUIRE_GPU=1 but the GPU is sm_{arch}: these kernels are sm_90a (H100/H200)");
        let _ = writeln!(std::io::stderr(), "SKIPPED gpu_attention: sm_{arch} GPU, the kernels are sm_90a");
        return None;
    }
    Some(context)
}

#[test]
fn gpu_attention_every_kernel_matches_the_f64_reference_on_masked_lengths() {
    let Some(context) = hopper_or_skip() else { return };
    let stream = Stream::non_blocking(&context).expect("stream");
    let mut failures = Vec::new();
    for d in [64u32, 128] {
        for seq_len in [300u32, 1000] {
            let mut problem = Problem::new(&context, d, 3, seq_len, 0xfeed ^ (seq_len as u64) << 8 ^ d as u64).expect("problem");
            for causal in ["", "_causal"] {
                for schedule in ["", "_serial", "_pingpong", "_s3", "_pingpong_s3"] {
                    let name = format!("attention_d{d}{causal}{schedule}");
                    let kernel = attention_host::kernel(&context, &name).expect("kernel");
                    match problem.check(kernel, &stream, !causal.is_empty(), 3 * seq_len as usize) {
                        Ok(line) => eprintln!("{name} S {seq_len}: {line}"),
                        Err(why) => failures.push(format!("{name} S {seq_len}: {why}")),
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
