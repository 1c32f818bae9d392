// `c` is written while `a` is read: passing one buffer as both does not compile.
use ferrocuda::{Cublas, DeviceBuffer, Gemm};

fn run(blas: &Cublas, b: &DeviceBuffer<f32>, c: &mut DeviceBuffer<f32>) {
    let gemm = Gemm::<f32, f32>::dense(4, 4, 4).unwrap();
    blas.gemm(&gemm, 1.0, &*c, b, 0.0, c).unwrap();
}

fn main() {}
