// The bias is read while `c` is written: the same buffer cannot be both.
use ferrocuda::half::bf16;
use ferrocuda::{CublasLt, DeviceBuffer, Epilogue, Gemm};

fn run(lt: &CublasLt, a: &DeviceBuffer<bf16>, c: &mut DeviceBuffer<bf16>) {
    let gemm = Gemm::<bf16, bf16>::dense(4, 4, 4).unwrap();
    lt.matmul(&gemm, Epilogue::bias(&*c), 1.0, a, a, 0.0, c).unwrap();
}

fn main() {}
