//! Compiles the test kernels to PTX (and cubins where `ptxas` is installed), like any user's
//! kernel crate.

fn main() {
    ferrocuda_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR"))
        // sm_80 PTX for everything; the sm_90 build adds the cluster kernels behind
        // `cfg(ferrocuda_sm = "90")`, which the tests check are absent from the sm_80 PTX.
        .arch(ferrocuda_builder::Arch::SM_80)
        .arch(ferrocuda_builder::Arch::SM_90)
        .run();
}
