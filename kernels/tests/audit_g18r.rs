//! Held-out review of session 18 (audit/2026-11-28f/FINDINGS-review.md): repros of the
//! findings in the kernel library, on the CPU executor (its race detector is the sanitizer).
//! Each test asserts what the library *should* do; while a finding is open it fails, showing
//! what happens instead.

mod common;

use common::gpu;
use ferrocuda_device::cpu::CpuExecutor;
use ferrocuda_host::LaunchConfig;
use ferrocuda_kernels_device::attention::{AttentionShape, LAYOUT_BHSD};

const D: usize = 64;
const SEQ: usize = 64;

fn shape() -> AttentionShape {
    AttentionShape { batch: 1, heads_q: 1, heads_kv: 1, seq_q: SEQ as u32, seq_kv: SEQ as u32, layout: LAYOUT_BHSD, causal: 0, scale: 0.125 }
}

fn inputs() -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let x: Vec<f32> = (0..SEQ * D).map(|i| ((i * 37 % 101) as f32 - 50.0) / 64.0).collect();
    (x.clone(), x.clone(), vec![0.0; SEQ])
}

/// G18R-1: `attention_backward_dkv_mma` is a safe `#[kernel]` (a safe launcher in the public
/// crate `ferrocuda-kernels-device`) whose `UncheckedSlice` writes rely on a 1-D launch, but it
/// checks only `blockDim.x == 128`. A grid of `(1, 2)` blocks makes both blocks write the same
/// dK/dV rows: a data race from safe code. The launch should be refused (or the kernel return
/// without writing); the executor reports the race instead.
#[test]
fn g18r_1_attention_backward_dkv_mma_in_a_2d_grid_is_refused_or_harmless() {
    let result = dkv_on_the_cpu(LaunchConfig::new((1u32, 2u32), 128u32));
    assert!(result.is_ok(), "G18R-1: a safe launch of attention_backward_dkv_mma on a (1, 2) grid races: {}", result.unwrap_err());
}

/// `attention_backward_dkv_mma` (f32) on the CPU executor with `config`.
fn dkv_on_the_cpu(config: LaunchConfig) -> Result<(), ferrocuda_device::cpu::CpuError> {
    let executor = CpuExecutor::new();
    let (x, dout, lse) = inputs();
    let delta = vec![0.0f32; SEQ];
    let (mut dk, mut dv) = (vec![0.0f32; SEQ * D], vec![0.0f32; SEQ * D]);
    ferrocuda_kernels_device::for_f32::attention_backward_dkv_mma::launch_cpu(
        &executor,
        config,
        &x,
        &x,
        &x,
        &dout,
        &lse,
        &delta,
        &mut dk,
        &mut dv,
        D as u32,
        shape(),
    )
}

/// G18R-1, the block form: blocks of `(128, 2)` threads pass `blockDim.x == 128`; the two rows
/// of threads stage the same shared tiles and write the same dK/dV elements.
#[test]
fn g18r_1_attention_backward_dkv_mma_with_2d_blocks_is_refused_or_harmless() {
    let result = dkv_on_the_cpu(LaunchConfig::new(1u32, (128u32, 2u32)));
    assert!(result.is_ok(), "G18R-1: a safe launch of attention_backward_dkv_mma with (128, 2) blocks races: {}", result.unwrap_err());
}

/// G18R-1, the dQ kernel: the same check (`blockDim.x` alone) in front of the same
/// `UncheckedSlice` writes.
#[test]
fn g18r_1_attention_backward_dq_mma_in_a_2d_grid_is_refused_or_harmless() {
    let executor = CpuExecutor::new();
    let (x, dout, lse) = inputs();
    let delta = vec![0.0f32; SEQ];
    let mut dq = vec![0.0f32; SEQ * D];
    let config = LaunchConfig::new((1u32, 2u32), 128u32);
    let result = ferrocuda_kernels_device::for_f32::attention_backward_dq_mma::launch_cpu(
        &executor,
        config,
        &x,
        &x,
        &x,
        &dout,
        &lse,
        &delta,
        &mut dq,
        D as u32,
        shape(),
    );
    assert!(result.is_ok(), "G18R-1: a safe launch of attention_backward_dq_mma on a (1, 2) grid races: {}", result.unwrap_err());
}

/// G18R-1 on a GPU: the same safe launch (blocks of `(128, 2)` threads on a `(1, 2)` grid) is
/// accepted by the GPU launcher; both rows of threads of both blocks stage the same shared
/// tiles and store the same dK/dV elements (`compute-sanitizer --tool racecheck` reported no
/// hazard on an H200: the writers store equal values; the CPU executor reports both races).
/// The launch should be refused, or the kernel return without writing.
#[test]
fn g18r_1_gpu_attention_backward_dkv_mma_in_a_2d_launch_is_refused() {
    let Some((context, stream)) = gpu("g18r_1_gpu_attention_backward_dkv_mma_in_a_2d_launch_is_refused") else { return };
    let (x, dout, lse) = inputs();
    let up = |v: &[f32]| ferrocuda_host::DeviceBuffer::from_slice(&context, v).unwrap();
    let (q, d_out, l, delta) = (up(&x), up(&dout), up(&lse), up(&vec![0.0f32; SEQ]));
    let (mut dk, mut dv) = (up(&vec![0.0f32; SEQ * D]), up(&vec![0.0f32; SEQ * D]));
    let config = LaunchConfig::new((1u32, 2u32), (128u32, 2u32));
    let result = ferrocuda_kernels_device::for_f32::attention_backward_dkv_mma::launch(
        &stream,
        config,
        &q,
        &q,
        &q,
        &d_out,
        &l,
        &delta,
        &mut dk,
        &mut dv,
        D as u32,
        shape(),
    );
    stream.synchronize().unwrap();
    let accepted = result.is_ok();
    let mut host = vec![0.0f32; SEQ * D];
    dk.copy_to_host(&mut host).unwrap();
    let written = host.iter().filter(|v| **v != 0.0).count();
    println!(
        "G18R-1 GPU: launch {}; {written} of {} dK elements written; dK[0..4] = {:?}",
        if accepted { "accepted" } else { "refused" },
        host.len(),
        &host[..4]
    );
    // Sound: refused by the launcher, or the kernel returns without writing (a uniform check of
    // the whole launch shape, as `supported()` does for `blockDim.x`).
    assert!(!accepted || written == 0, "G18R-1: the GPU ran a 2-D launch of attention_backward_dkv_mma: four threads wrote each of {written} dK elements");
}
