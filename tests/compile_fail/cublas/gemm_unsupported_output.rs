// cuBLAS has no GEMM from bf16 inputs to an f16 output: the pairing does not compile.
use ferrocuda::half::{bf16, f16};
use ferrocuda::{Cublas, DeviceBuffer, Gemm};

fn run(blas: &Cublas, a: &DeviceBuffer<bf16>, b: &DeviceBuffer<bf16>, c: &mut DeviceBuffer<f16>) {
    let gemm = Gemm::<bf16, f16>::dense(4, 4, 4).unwrap();
    blas.gemm(&gemm, 1.0, a, b, 0.0, c).unwrap();
}

fn main() {}
