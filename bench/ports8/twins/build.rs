//! Compiles the kernels for sm_90 (the lent H200) and to an sm_90 cubin where `ptxas` is
//! installed: one device build, as the docs advise for the GPUs one runs on.

fn main() {
    use ferrocuda_builder::Arch;
    ferrocuda_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).arch(Arch::SM_90).cubin_arch(Arch::SM_90).run();
}
