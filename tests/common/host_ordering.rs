//! Shared by the GPU tests of host ordering (`gpu_host_safety`, `gpu_host_adversarial`;
//! included with `#[path]`): the skip for a missing library, the cuFFT gate, and a hand-written
//! `mark_blocks` module that starts late, for a kernel still running while the host queues more
//! work.

use std::io::Write;

use ferrocuda::Context;
use ferrocuda::cufft::{cufft_present, cufft_version};

/// Prints why `test` skipped, or fails under `REQUIRE_GPU=1`.
pub fn skip(test: &str, why: &str) {
    assert!(!ferrocuda_test_support::gpu_required(), "REQUIRE_GPU=1 but {test} skipped: {why}");
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
}

/// The context, when a GPU and cuFFT are present.
pub fn gpu_with_cufft(test: &str) -> Option<Context> {
    let context = super::common::gpu_or_skip(test)?;
    if !cufft_present() {
        skip(test, &format!("cuFFT could not be loaded: {}", cufft_version().unwrap_err()));
        return None;
    }
    Some(context)
}

/// The PTX of `mark_blocks` (parameters `bool, &mut [u32]`) that first spins for `ns`
/// nanoseconds, then writes `FILL + block` (so a write of `FILL` issued meanwhile would show).
pub fn late_read_ptx(ns: u64) -> String {
    format!(
        r#"
.version 7.0
.target sm_70
.address_size 64
.visible .global .align 4 .u32 FILL = 1;
.visible .entry mark_blocks(
	.param .u8 mark_blocks_param_0,
	.param .u64 .ptr .align 4 mark_blocks_param_1,
	.param .u64 mark_blocks_param_2
)
{{
	.reg .pred %p<4>;
	.reg .b32 %r<8>;
	.reg .b64 %rd<12>;
	mov.u64 %rd8, %globaltimer;
SPIN:
	mov.u64 %rd9, %globaltimer;
	sub.u64 %rd10, %rd9, %rd8;
	setp.lt.u64 %p3, %rd10, {ns};
	@%p3 bra SPIN;
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
	ld.global.u32 %r3, [FILL];
	add.s32 %r4, %r3, %r2;
	st.global.u32 [%rd6], %r4;
DONE:
	ret;
}}
"#
    )
}
