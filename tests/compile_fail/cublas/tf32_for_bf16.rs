// The TF32 fast path exists for f32 inputs only.
use ferrocuda::Gemm;
use ferrocuda::half::bf16;

fn main() {
    let _ = Gemm::<bf16, f32>::dense(4, 4, 4).unwrap().tf32();
}
