//! Compiles the ports (and the twins' launch stubs) for the GPU: PTX and a cubin for sm_90, the
//! H200 the GPU job runs on. sm_90 rather than the default sm_75 PTX: the bf16 kernels' `f32`
//! to bf16 roundings are one `cvt.rn.bf16.f32` from sm_80 on, software below it.

fn main() {
    ferrocuda_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).arch(ferrocuda_builder::Arch::SM_90).run();
}
