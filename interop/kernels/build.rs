//! Compiles the interop kernels to PTX for sm_80 (every newer GPU JIT-compiles it) and to
//! cubins for sm_80 and sm_90 where `ptxas` is installed.

fn main() {
    use ferrocuda_builder::Arch;
    ferrocuda_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).arch(Arch::SM_80).cubin_arch(Arch::SM_80).cubin_arch(Arch::SM_90).run();
}
