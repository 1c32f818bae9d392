//! What session 15's variant of the fourth port compiles to, pinned on the PTX the build embeds
//! (no GPU needed): see bench/ports4/RESULTS.md, "Session 15".

#[path = "../../../tests/common/ptx.rs"]
mod ptx_text;
use ptx_text::entry_body;

fn vllm(kernel: &str) -> &'static str {
    let ptx = ferrocuda_ports4::KERNELS.ptx_for(90).expect("the vLLM ports are built for sm_90");
    entry_body(ptx, kernel)
}

/// `RuntimeBlockReduce::sum_broadcast` is cub's `Reduce` plus vLLM's `if (threadIdx.x == 0)
/// s_variance = ..; __syncthreads();`: 2 barriers in the whole kernel (the partials', the
/// hand-off's), where the first try's `sum` plus a `shared_array!` hand-off has 3.
#[test]
fn p30_3_sum_broadcast_takes_the_sources_two_barriers() {
    let barriers = |kernel: &str| vllm(kernel).matches("barrier.sync 0;").count();
    assert_eq!(barriers("rms_norm_kernel_broadcast"), 2, "{}", vllm("rms_norm_kernel_broadcast"));
    assert_eq!(barriers("rms_norm_kernel"), 3, "the first try (pinned)");
}

/// Session 18: `reduce_broadcast` has one path for every block size (a block of one warp
/// passes the partials' barrier too, no hand-off shuffle), so the code after the hand-off
/// barrier is straight, as in vLLM's source (the one-warp shuffle made it a join, and ptxas
/// left the output loop's setup after the barrier: 0.97x nvcc). Warp 0's second level stays 5
/// `shfl.down` (the library's row kernels keep their registers: CUB's thread-0 fold of 32
/// slots read at once cost them 6-32); with a partial last warp's 5, 10 in all.
#[test]
fn p30_s18_broadcast_has_one_path_and_warp_0_shuffles() {
    let body = vllm("rms_norm_kernel_broadcast");
    assert_eq!(body.matches("shfl.sync.idx").count(), 0, "no hand-off shuffle:\n{body}");
    assert_eq!(body.matches("shfl.sync.down").count(), 10, "{body}");
    assert_eq!(body.matches("ld.shared.v4").count(), 0, "no thread reads the 32 slots at once:\n{body}");
}

/// Session 16: a kernel entry assumes its outputs' launch requirements, which every launcher
/// checks before the kernel runs; `BlockRows` asks for a 1-D launch, so `blockDim.y`/`.z` are 1
/// and `RuntimeBlockReduce` reads neither them nor `threadIdx.y`/`.z` (its 3-D rank and block
/// size folded: the broadcast variant 421 -> 401 SASS instructions, nvcc's 372). Before, each
/// of these kernels read `%ntid.y`, `%ntid.z` and, in a branch, `%tid.y` and `%tid.z`.
#[test]
fn p30_s16_one_dimensional_kernels_read_no_y_or_z_dimension() {
    for kernel in ["rms_norm_kernel", "rms_norm_kernel_fixed", "rms_norm_kernel_broadcast", "silu_and_mul_kernel"] {
        let body = vllm(kernel);
        for register in ["%ntid.y", "%ntid.z", "%tid.y", "%tid.z", "%nctaid.y", "%nctaid.z", "%ctaid.y", "%ctaid.z"] {
            assert!(!body.contains(register), "{kernel} reads {register}: {body}");
        }
    }
}
