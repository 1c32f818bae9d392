//! Compiles this crate for the GPU; the host build of the same crate embeds the result.

fn main() {
    // Defaults: PTX for sm_75 (the oldest architecture CUDA 13 compiles for; the driver
    // JIT-compiles it for newer GPUs) declaring PTX ISA 7.8, under which everything the device
    // library offers for sm_75 assembles, and, where ptxas is installed, cubins for sm_80 and
    // sm_90. What needs a newer GPU (L2 cache policies, cp.async: sm_80; clusters, TMA: sm_90)
    // is refused at compile time with the architecture it needs: add `.arch(Arch::SM_80)` (or
    // SM_90) and put that code under `#[cfg(ferrocuda_sm = "80")]`. What the default build
    // does *not* refuse but compiles in software: FP8 conversions (`half::fp8::e4m3x2`, one
    // `cvt` instruction from sm_89, c10's rounding in software below it, as nvcc's
    // `cuda_fp8.hpp` under `-arch=sm_75`), even when the PTX runs on an H100/H200: add
    // `.arch(Arch::SM_90)` for the instruction. The same for bf16 below sm_80: `f32` to bf16
    // (`x.to_bf16()`, `bf16::from_f32_rn`, `Bf16x2`/`Bf16x8::from_f32s`), bf16 `add_rn`/
    // `sub_rn`/`mul_rn`/`fma_rn`, `Bf16x2::fma` and the 16-bit `max_num`/`min_num` are one
    // instruction from `.arch(Arch::SM_80)` (or SM_90) on, software rounding (the same bits)
    // in this default sm_75 PTX and in the sm_80/sm_90 cubins made from it. f16 conversions and
    // `widen()` are one `cvt` from sm_75.
    // Other choices: `.cubin_arch(Arch::SM_90)` (cubins), `.fast_math(true)` (nvcc's
    // --use_fast_math), `.ptx_isa(8, 0)`, `.release(false)`, `.line_info(false)`,
    // `.fma(FmaContraction::Off)`, `.cfg("name")`, `.panic_messages(true)` (panic reports with
    // core's messages, printed by the device too, for a ~600-byte stack frame in every kernel
    // that can panic), `.runtime_unroll(4)` (loops whose trip count is known only at run time
    // unrolled by 4 as nvcc's: four loads in flight in a loop over a batch; not the default,
    // see docs/performance.md).
    ferrocuda_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).run();
}
