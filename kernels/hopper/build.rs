//! Compiles the Hopper kernels for `sm_90a` (wgmma and setmaxnreg need the arch-specific
//! target; its PTX and cubin run on H100/H200 only).

fn main() {
    ferrocuda_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).arch(ferrocuda_builder::Arch::SM_90A).run();
}
