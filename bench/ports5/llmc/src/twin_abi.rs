//! The parameter lists of the llm.c twins (bench/ports5/cuda/ports5.cu, `-DPORTS5_LLMC`), as
//! stub kernels with raw pointers, so that the host harness launches the nvcc-built cubin's
//! kernels with typed launchers (`twin_x::launch_in(&twins, ..)`). The stubs' own bodies are
//! empty: only their signatures (PTX parameter lists identical to the CUDA C++ ones) are used.
#![allow(unused_variables)]

use ferrocuda_device::half::bf16;
use ferrocuda_device::kernel;

/// `residual_forward_kernel2(floatX* out, const floatX* inp1, const floatX* inp2, int N)`.
///
/// # Safety
/// The twin writes `out[0..N]` and reads `inp1[0..N]`, `inp2[0..N]`: each must hold `N` bf16.
#[kernel]
pub unsafe fn twin_residual_forward_kernel2(out: *mut bf16, inp1: *const bf16, inp2: *const bf16, n: i32) {}

/// `crossentropy_forward_kernel1(float* losses, const float* probs, const int* targets, int B, int T, int V)`.
///
/// # Safety
/// `losses` and `targets` hold `B T` elements, `probs` `B T V`, targets within `0..V`.
#[kernel]
pub unsafe fn twin_crossentropy_forward_kernel1(losses: *mut f32, probs: *const f32, targets: *const i32, b: i32, t: i32, v: i32) {}

/// `crossentropy_softmax_backward_kernel1(float* dlogits, const float* dlosses, const float* probs, const int* targets, int B, int T, int V)`.
///
/// # Safety
/// `dlogits` and `probs` hold `B T V` elements, `dlosses` and `targets` `B T`.
#[kernel]
pub unsafe fn twin_crossentropy_softmax_backward_kernel1(
    dlogits: *mut f32,
    dlosses: *const f32,
    probs: *const f32,
    targets: *const i32,
    b: i32,
    t: i32,
    v: i32,
) {
}

/// `copy_and_cast_kernel(__nv_bfloat16* dst, const float* src, size_t n, ptrdiff_t stride_dst, ptrdiff_t stride_src)`.
///
/// # Safety
/// For every `y < gridDim.y`, `dst[y stride_dst ..][..n]` and `src[y stride_src ..][..n]` lie in their buffers.
#[kernel]
pub unsafe fn twin_copy_and_cast_kernel(dst: *mut bf16, src: *const f32, n: usize, stride_dst: isize, stride_src: isize) {}
