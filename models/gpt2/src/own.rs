//! The per-type launchers of this crate's own kernels (`ferrocuda-gpt2-kernels`), reached
//! from generic code as methods of the element type, on the GPU and on the CPU executor.

use ferrocuda_device::cpu::{CpuError, CpuExecutor};
use ferrocuda_host::{DeviceRead, DeviceWrite, LaunchConfig, Stream};
use gpt2_kernels::Heads;

/// Threads per block of every launch of these kernels.
pub const BLOCK: u32 = 256;

/// A grid-stride launch over `n` elements: up to 8192 blocks of 256 threads.
pub fn grid(n: usize) -> LaunchConfig {
    LaunchConfig::new(n.div_ceil(BLOCK as usize).clamp(1, 8192) as u32, BLOCK)
}

/// True when the head permutes of `shape` take the packed kernels (8 elements per thread):
/// `head_dim`, `row_stride` and `offset` multiples of 8.
pub fn packed_heads(shape: Heads) -> bool {
    shape.head_dim.is_multiple_of(8) && shape.row_stride.is_multiple_of(8) && shape.offset.is_multiple_of(8)
}

/// A launch of `cols / 4` warps for [`gpt2_kernels::sum_partials_split()`], or `None` when
/// `cols` is not a multiple of 4 (the one-thread-a-column `sum_partials` then).
pub fn sum_split_grid(cols: usize) -> Option<LaunchConfig> {
    cols.is_multiple_of(4).then(|| LaunchConfig::new((cols * 8).div_ceil(BLOCK as usize).max(1) as u32, BLOCK))
}

macro_rules! own_kernels {
    ($($ty:ty => $ef:ident, $ewte:ident, $ewpe:ident, $split:ident, $merge:ident, $cast:ident, $colp:ident, $split_p:ident, $merge_p:ident;)*) => {
        /// This crate's kernels for one element type (GPU: `stream`; CPU executor: `executor`).
        #[allow(clippy::too_many_arguments)]
        pub trait OwnKernels: Sized {
            /// [`gpt2_kernels::encoder_forward`].
            fn encoder_forward(s: &Stream, c: LaunchConfig, tokens: &(impl DeviceRead<u32> + ?Sized), wte: &(impl DeviceRead<Self> + ?Sized), wpe: &(impl DeviceRead<Self> + ?Sized), out: &mut (impl DeviceWrite<Self> + ?Sized), seq: u32, channels: u32) -> ferrocuda_host::Result<()>;
            /// [`gpt2_kernels::encoder_backward_wte`].
            fn encoder_backward_wte(s: &Stream, c: LaunchConfig, tokens: &(impl DeviceRead<u32> + ?Sized), dout: &(impl DeviceRead<Self> + ?Sized), dwte: &mut (impl DeviceWrite<f32> + ?Sized), channels: u32) -> ferrocuda_host::Result<()>;
            /// [`gpt2_kernels::encoder_backward_wpe`].
            fn encoder_backward_wpe(s: &Stream, c: LaunchConfig, dout: &(impl DeviceRead<Self> + ?Sized), dwpe: &mut (impl DeviceWrite<f32> + ?Sized), batch: u32) -> ferrocuda_host::Result<()>;
            /// [`gpt2_kernels::split_heads`] (the packed form where [`packed_heads`] allows).
            fn split_heads(s: &Stream, src: &(impl DeviceRead<Self> + ?Sized), dst: &mut (impl DeviceWrite<Self> + ?Sized), shape: Heads) -> ferrocuda_host::Result<()>;
            /// [`gpt2_kernels::merge_heads`] (the packed form where [`packed_heads`] allows).
            fn merge_heads(s: &Stream, q: &(impl DeviceRead<Self> + ?Sized), k: &(impl DeviceRead<Self> + ?Sized), v: &(impl DeviceRead<Self> + ?Sized), dst: &mut (impl DeviceWrite<Self> + ?Sized), shape: Heads, parts: u32) -> ferrocuda_host::Result<()>;
            /// [`gpt2_kernels::cast_from_f32`].
            fn cast_from_f32(s: &Stream, c: LaunchConfig, src: &(impl DeviceRead<f32> + ?Sized), dst: &mut (impl DeviceWrite<Self> + ?Sized)) -> ferrocuda_host::Result<()>;
            /// [`gpt2_kernels::column_partials`].
            fn column_partials(s: &Stream, dout: &(impl DeviceRead<Self> + ?Sized), partial: &mut (impl DeviceWrite<f32> + ?Sized), rows: u32, cols: u32) -> ferrocuda_host::Result<()>;
            /// [`OwnKernels::column_partials`] on the CPU executor.
            fn column_partials_cpu(e: &CpuExecutor, dout: &[Self], partial: &mut [f32], rows: u32, cols: u32) -> Result<(), CpuError>;
            /// [`gpt2_kernels::encoder_forward`] on the CPU executor.
            fn encoder_forward_cpu(e: &CpuExecutor, c: LaunchConfig, tokens: &[u32], wte: &[Self], wpe: &[Self], out: &mut [Self], seq: u32, channels: u32) -> Result<(), CpuError>;
            /// [`gpt2_kernels::encoder_backward_wte`] on the CPU executor.
            fn encoder_backward_wte_cpu(e: &CpuExecutor, c: LaunchConfig, tokens: &[u32], dout: &[Self], dwte: &mut [f32], channels: u32) -> Result<(), CpuError>;
            /// [`gpt2_kernels::encoder_backward_wpe`] on the CPU executor.
            fn encoder_backward_wpe_cpu(e: &CpuExecutor, c: LaunchConfig, dout: &[Self], dwpe: &mut [f32], batch: u32) -> Result<(), CpuError>;
            /// [`OwnKernels::split_heads`] on the CPU executor.
            fn split_heads_cpu(e: &CpuExecutor, src: &[Self], dst: &mut [Self], shape: Heads) -> Result<(), CpuError>;
            /// [`OwnKernels::merge_heads`] on the CPU executor.
            fn merge_heads_cpu(e: &CpuExecutor, q: &[Self], k: &[Self], v: &[Self], dst: &mut [Self], shape: Heads, parts: u32) -> Result<(), CpuError>;
            /// [`gpt2_kernels::cast_from_f32`] on the CPU executor.
            fn cast_from_f32_cpu(e: &CpuExecutor, c: LaunchConfig, src: &[f32], dst: &mut [Self]) -> Result<(), CpuError>;
        }
        $(
            #[allow(clippy::too_many_arguments)]
            impl OwnKernels for $ty {
                fn encoder_forward(s: &Stream, c: LaunchConfig, tokens: &(impl DeviceRead<u32> + ?Sized), wte: &(impl DeviceRead<Self> + ?Sized), wpe: &(impl DeviceRead<Self> + ?Sized), out: &mut (impl DeviceWrite<Self> + ?Sized), seq: u32, channels: u32) -> ferrocuda_host::Result<()> {
                    gpt2_kernels::$ef::launch(s, c, tokens, wte, wpe, out, seq, channels)
                }
                fn encoder_backward_wte(s: &Stream, c: LaunchConfig, tokens: &(impl DeviceRead<u32> + ?Sized), dout: &(impl DeviceRead<Self> + ?Sized), dwte: &mut (impl DeviceWrite<f32> + ?Sized), channels: u32) -> ferrocuda_host::Result<()> {
                    gpt2_kernels::$ewte::launch(s, c, tokens, dout, dwte, channels)
                }
                fn encoder_backward_wpe(s: &Stream, c: LaunchConfig, dout: &(impl DeviceRead<Self> + ?Sized), dwpe: &mut (impl DeviceWrite<f32> + ?Sized), batch: u32) -> ferrocuda_host::Result<()> {
                    gpt2_kernels::$ewpe::launch(s, c, dout, dwpe, batch)
                }
                fn split_heads(s: &Stream, src: &(impl DeviceRead<Self> + ?Sized), dst: &mut (impl DeviceWrite<Self> + ?Sized), shape: Heads) -> ferrocuda_host::Result<()> {
                    let n = dst.kernel_arg().len();
                    if packed_heads(shape) { gpt2_kernels::$split_p::launch(s, grid(n / 8), src, dst, shape) } else { gpt2_kernels::$split::launch(s, grid(n), src, dst, shape) }
                }
                fn merge_heads(s: &Stream, q: &(impl DeviceRead<Self> + ?Sized), k: &(impl DeviceRead<Self> + ?Sized), v: &(impl DeviceRead<Self> + ?Sized), dst: &mut (impl DeviceWrite<Self> + ?Sized), shape: Heads, parts: u32) -> ferrocuda_host::Result<()> {
                    let n = dst.kernel_arg().len();
                    if packed_heads(shape) { gpt2_kernels::$merge_p::launch(s, grid(n / 8), q, k, v, dst, shape, parts) } else { gpt2_kernels::$merge::launch(s, grid(n), q, k, v, dst, shape, parts) }
                }
                fn cast_from_f32(s: &Stream, c: LaunchConfig, src: &(impl DeviceRead<f32> + ?Sized), dst: &mut (impl DeviceWrite<Self> + ?Sized)) -> ferrocuda_host::Result<()> {
                    gpt2_kernels::$cast::launch(s, c, src, dst)
                }
                fn column_partials(s: &Stream, dout: &(impl DeviceRead<Self> + ?Sized), partial: &mut (impl DeviceWrite<f32> + ?Sized), rows: u32, cols: u32) -> ferrocuda_host::Result<()> {
                    gpt2_kernels::$colp::launch(s, grid(partial.kernel_arg().len()), dout, partial, rows, cols)
                }
                fn column_partials_cpu(e: &CpuExecutor, dout: &[Self], partial: &mut [f32], rows: u32, cols: u32) -> Result<(), CpuError> {
                    gpt2_kernels::$colp::launch_cpu(e, grid(partial.len()), dout, partial, rows, cols)
                }
                fn encoder_forward_cpu(e: &CpuExecutor, c: LaunchConfig, tokens: &[u32], wte: &[Self], wpe: &[Self], out: &mut [Self], seq: u32, channels: u32) -> Result<(), CpuError> {
                    gpt2_kernels::$ef::launch_cpu(e, c, tokens, wte, wpe, out, seq, channels)
                }
                fn encoder_backward_wte_cpu(e: &CpuExecutor, c: LaunchConfig, tokens: &[u32], dout: &[Self], dwte: &mut [f32], channels: u32) -> Result<(), CpuError> {
                    gpt2_kernels::$ewte::launch_cpu(e, c, tokens, dout, dwte, channels)
                }
                fn encoder_backward_wpe_cpu(e: &CpuExecutor, c: LaunchConfig, dout: &[Self], dwpe: &mut [f32], batch: u32) -> Result<(), CpuError> {
                    gpt2_kernels::$ewpe::launch_cpu(e, c, dout, dwpe, batch)
                }
                fn split_heads_cpu(e: &CpuExecutor, src: &[Self], dst: &mut [Self], shape: Heads) -> Result<(), CpuError> {
                    let n = dst.len();
                    if packed_heads(shape) { gpt2_kernels::$split_p::launch_cpu(e, grid(n / 8), src, dst, shape) } else { gpt2_kernels::$split::launch_cpu(e, grid(n), src, dst, shape) }
                }
                fn merge_heads_cpu(e: &CpuExecutor, q: &[Self], k: &[Self], v: &[Self], dst: &mut [Self], shape: Heads, parts: u32) -> Result<(), CpuError> {
                    let n = dst.len();
                    if packed_heads(shape) { gpt2_kernels::$merge_p::launch_cpu(e, grid(n / 8), q, k, v, dst, shape, parts) } else { gpt2_kernels::$merge::launch_cpu(e, grid(n), q, k, v, dst, shape, parts) }
                }
                fn cast_from_f32_cpu(e: &CpuExecutor, c: LaunchConfig, src: &[f32], dst: &mut [Self]) -> Result<(), CpuError> {
                    gpt2_kernels::$cast::launch_cpu(e, c, src, dst)
                }
            }
        )*
    };
}

own_kernels! {
    f32 => encoder_forward_f32, encoder_backward_wte_f32, encoder_backward_wpe_f32, split_heads_f32, merge_heads_f32, cast_from_f32_f32, column_partials_f32,
        split_heads_packed_f32, merge_heads_packed_f32;
    half::bf16 => encoder_forward_bf16, encoder_backward_wte_bf16, encoder_backward_wpe_bf16, split_heads_bf16, merge_heads_bf16, cast_from_f32_bf16, column_partials_bf16,
        split_heads_packed_bf16, merge_heads_packed_bf16;
}
