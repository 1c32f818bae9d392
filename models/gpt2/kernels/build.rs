//! Compiles the GPT-2 trainer's own kernels to PTX for sm_80 (newer GPUs JIT-compile it) and
//! cubins for sm_90 where `ptxas` is installed.

fn main() {
    use ferrocuda_builder::Arch;
    ferrocuda_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).arch(Arch::SM_80).cubin_arch(Arch::SM_90).run();
}
