//! Compiles the twins' launch stubs (empty kernels whose only use is their typed, `unsafe`
//! launchers, which `launch_in` the nvcc-built cubins of bench/ports7/cuda/ports7.cu).

use ferrocuda_builder::{Arch, KernelBuilder};

fn main() {
    KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).arch(Arch::SM_90).run();
}
