//! Compiles the ports for sm_90 (PTX and cubin): vLLM's `convert_fp8_kernel` converts to FP8
//! E4M3, one `cvt.rn.satfinite.e4m3x2.f32` from sm_89 on and software rounding below (the
//! template's comment); the twins are built for sm_90 too.

fn main() {
    use ferrocuda_builder::Arch;
    ferrocuda_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR"))
        .arch(Arch::SM_90)
        .cubin_arch(Arch::SM_90)
        // The bench launches every kernel with 256 or 512 threads a block; the occupancy
        // warning checks the larger.
        .launch_block_threads(512)
        .run();
}
