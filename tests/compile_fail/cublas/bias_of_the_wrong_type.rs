// The bias vector has the output's element type.
use ferrocuda::half::bf16;
use ferrocuda::{CublasLt, DeviceBuffer, Epilogue, Gemm};

fn run(lt: &CublasLt, a: &DeviceBuffer<bf16>, c: &mut DeviceBuffer<bf16>, bias: &DeviceBuffer<f32>) {
    let gemm = Gemm::<bf16, bf16>::dense(4, 4, 4).unwrap();
    lt.matmul(&gemm, Epilogue::bias(bias), 1.0, a, a, 0.0, c).unwrap();
}

fn main() {}
