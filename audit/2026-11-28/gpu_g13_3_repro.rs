//! G13-3 of the held-out review of 2026-11-28 (`audit/2026-11-28/FINDINGS.md`): a module of
//! device code made by hand in safe code. `EmbeddedModule`'s fields were public, so a crate
//! could write its own `KERNELS` static (as `embed_kernels!()` does) with any PTX text, and the
//! typed, safe launchers of its `#[kernel]`s then ran that code: the checks at load pass when
//! the fingerprint, layout and type tables are missing. Loading device code is what
//! `Module::load_ptx`/`load_binary` make `unsafe`. This hand-made `square_checked` writes 64
//! words past the end of its output, into memory the launch did not lend. (Pre-fix repro:
//! after the fix the literal below no longer compiles, see
//! `tests/compile_fail/kernel_model/g13_3_embedded_module_by_hand.rs`.)

mod common;

use ferrocuda::{DeviceBuffer, LaunchConfig, Stream};
use ferrocuda_device::global::{DisjointSlice, unique_index};
use ferrocuda_device::kernel;

/// Device code written by hand: the entry `square_checked` with the four parameters the
/// launcher passes (x pointer, x length, out pointer, out length), storing 0xdead to
/// `out[out.len + threadIdx.x]`: past the end of the output.
const HAND_MADE_PTX: &str = "
.version 7.8
.target sm_80
.address_size 64

.visible .entry square_checked(
    .param .u64 square_checked_param_0,
    .param .u64 square_checked_param_1,
    .param .u64 square_checked_param_2,
    .param .u64 square_checked_param_3
)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [square_checked_param_2];
    ld.param.u64 %rd2, [square_checked_param_3];
    cvta.to.global.u64 %rd3, %rd1;
    mov.u32 %r1, %tid.x;
    cvt.u64.u32 %rd4, %r1;
    add.s64 %rd5, %rd2, %rd4;
    shl.b64 %rd6, %rd5, 2;
    add.s64 %rd7, %rd3, %rd6;
    mov.u32 %r2, 57005;
    st.global.u32 [%rd7], %r2;
    ret;
}
";

pub static KERNELS: ferrocuda::EmbeddedModule = ferrocuda::EmbeddedModule {
    crate_name: "g13_3_hand_made",
    toolchain: "",
    ptx: &[(80, HAND_MADE_PTX)],
    cubins: &[],
    resources: &[],
    device_overflow_checks: false,
    host_overflow_probe: |x| x,
};

/// What the launcher promises: `out[i] = x[i]` for the launch's threads, nothing else.
#[kernel]
pub fn square_checked(x: &[u32], mut out: DisjointSlice<u32>) {
    let i = unique_index();
    if i.get() < x.len()
        && let Some(o) = out.get_mut(i)
    {
        *o = x[i];
    }
}

#[test]
fn g13_3_a_hand_made_module_writes_past_its_output_through_a_safe_launcher() {
    const TEST: &str = "g13_3_a_hand_made_module_writes_past_its_output_through_a_safe_launcher";
    let Some(context) = common::gpu_or_skip(TEST) else { return };
    let stream = Stream::new(&context).unwrap();
    let x = DeviceBuffer::from_slice(&context, &[3u32; 1024]).unwrap();
    let mut pool = DeviceBuffer::<u32>::zeroed(&context, 2048).unwrap();
    // Only the first 1024 elements are lent to the launch.
    let result = square_checked::launch(&stream, LaunchConfig::new(1u32, 64u32), &x, &mut pool.slice_mut(..1024));
    stream.synchronize().unwrap();
    let after = pool.to_vec().unwrap();
    let outside = after[1024..].iter().filter(|&&v| v == 0xdead).count();
    eprintln!("{TEST}: launch {result:?}; {outside} of the 1024 elements outside the lent view were written");
    assert!(result.is_err() || outside == 0, "a safe launcher ran hand-made device code that wrote {outside} elements outside its output");
}
