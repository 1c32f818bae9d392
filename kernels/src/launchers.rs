//! The per-type launchers behind [`Element`](crate::Element): one generated launcher module
//! per kernel instance (`rmsnorm_forward_bf16::launch`, ...), reached from generic code as a
//! method of the element type. One table below lists each kernel's parameters once; a macro
//! writes the trait and its three impls (GPU and CPU executor) from it.

use core::num::NonZeroU32;

use ferrocuda_device::cpu::{CpuError, CpuExecutor};
use ferrocuda_host::{DeviceRead, DeviceWrite, LaunchConfig, Stream};
use ferrocuda_kernels_device::attention::AttentionShape;
use ferrocuda_kernels_device::{AdamWStep, RopeShape, bf16, f16, for_bf16, for_f16, for_f32};

/// A kernel parameter's type in a GPU launcher, for element type `$elem` (`Self` in the
/// [`Launchers`] trait, `T` in a [`Gpu`] runner's generic method): `[in T]` is an input of the
/// element type, `[out f32]` an output of `f32`, anything else a by-value parameter.
macro_rules! gpu_arg {
    ($elem:ty; [in T]) => { &(impl DeviceRead<$elem> + ?Sized) };
    ($elem:ty; [in $t:ty]) => { &(impl DeviceRead<$t> + ?Sized) };
    ($elem:ty; [out T]) => { &mut (impl DeviceWrite<$elem> + ?Sized) };
    ($elem:ty; [out $t:ty]) => { &mut (impl DeviceWrite<$t> + ?Sized) };
    ($elem:ty; $t:ty) => { $t };
}

/// The same parameter in a CPU-executor launcher or a [`Cpu`] runner's method (host slices).
macro_rules! cpu_arg {
    ($elem:ty; [in T]) => {
        &[$elem]
    };
    ($elem:ty; [in $t:ty]) => {
        &[$t]
    };
    ($elem:ty; [out T]) => {
        &mut [$elem]
    };
    ($elem:ty; [out $t:ty]) => {
        &mut [$t]
    };
    ($elem:ty; $t:ty) => {
        $t
    };
}

/// Where a call of [`rows`](crate::rows) runs: on a stream of a GPU. The calls are written once
/// (`rows.rs`, by `row_op!`) against a runner `run`; its methods are the launches, on
/// device buffers here and host slices in [`Cpu`]. Each method is the kernel of the same name
/// for the element type of its operands.
#[derive(Clone, Copy)]
pub(crate) struct Gpu<'a>(pub &'a Stream);

/// Where a call of [`rows`](crate::rows) runs on the CPU executor (host slices): the same
/// methods as [`Gpu`].
#[derive(Clone, Copy)]
pub(crate) struct Cpu<'a>(pub &'a CpuExecutor);

impl Gpu<'_> {
    /// Elements of an operand, as the kernel will see it.
    pub(crate) fn len<U>(&self, x: &(impl DeviceRead<U> + ?Sized)) -> usize {
        x.kernel_arg().len()
    }

    /// `len` zeroed `f32`s of scratch, allocated on the stream.
    pub(crate) fn scratch(&self, len: usize) -> crate::Result<ferrocuda_host::DeviceBuffer<f32>> {
        Ok(ferrocuda_host::DeviceBuffer::<f32>::zeroed_async(self.0, len)?)
    }

    /// [`sum_column_partials`](ferrocuda_kernels_device::sum_column_partials).
    pub(crate) fn sum_column_partials(
        &self,
        config: LaunchConfig,
        partial: &(impl DeviceRead<f32> + ?Sized),
        out: &mut (impl DeviceWrite<f32> + ?Sized),
        chunks: u32,
        cols: u32,
    ) -> crate::Result<()> {
        Ok(ferrocuda_kernels_device::sum_column_partials::launch(self.0, config, partial, out, chunks, cols)?)
    }

    /// [`sum_column_partials_split`](ferrocuda_kernels_device::packed::sum_column_partials_split).
    pub(crate) fn sum_column_partials_split(
        &self,
        config: LaunchConfig,
        partial: &(impl DeviceRead<f32> + ?Sized),
        out: &mut (impl DeviceWrite<f32> + ?Sized),
        chunks: u32,
        cols: u32,
    ) -> crate::Result<()> {
        Ok(ferrocuda_kernels_device::packed::sum_column_partials_split::launch(self.0, config, partial, out, chunks, cols)?)
    }

    /// [`sum_column_pairs`](ferrocuda_kernels_device::packed::sum_column_pairs).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn sum_column_pairs(
        &self,
        config: LaunchConfig,
        partial_a: &(impl DeviceRead<f32> + ?Sized),
        partial_b: &(impl DeviceRead<f32> + ?Sized),
        out_a: &mut (impl DeviceWrite<f32> + ?Sized),
        out_b: &mut (impl DeviceWrite<f32> + ?Sized),
        chunks: u32,
        cols: u32,
    ) -> crate::Result<()> {
        Ok(ferrocuda_kernels_device::packed::sum_column_pairs::launch(self.0, config, partial_a, partial_b, out_a, out_b, chunks, cols)?)
    }

    /// [`sum_column_pairs_split`](ferrocuda_kernels_device::packed::sum_column_pairs_split).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn sum_column_pairs_split(
        &self,
        config: LaunchConfig,
        partial_a: &(impl DeviceRead<f32> + ?Sized),
        partial_b: &(impl DeviceRead<f32> + ?Sized),
        out_a: &mut (impl DeviceWrite<f32> + ?Sized),
        out_b: &mut (impl DeviceWrite<f32> + ?Sized),
        chunks: u32,
        cols: u32,
    ) -> crate::Result<()> {
        Ok(ferrocuda_kernels_device::packed::sum_column_pairs_split::launch(self.0, config, partial_a, partial_b, out_a, out_b, chunks, cols)?)
    }
}

impl Cpu<'_> {
    /// Elements of an operand.
    pub(crate) fn len<U>(&self, x: &[U]) -> usize {
        x.len()
    }

    /// [`sum_column_partials`](ferrocuda_kernels_device::sum_column_partials).
    pub(crate) fn sum_column_partials(&self, config: LaunchConfig, partial: &[f32], out: &mut [f32], chunks: u32, cols: u32) -> crate::Result<()> {
        Ok(ferrocuda_kernels_device::sum_column_partials::launch_cpu(self.0, config, partial, out, chunks, cols)?)
    }

    /// [`sum_column_partials_split`](ferrocuda_kernels_device::packed::sum_column_partials_split).
    pub(crate) fn sum_column_partials_split(&self, config: LaunchConfig, partial: &[f32], out: &mut [f32], chunks: u32, cols: u32) -> crate::Result<()> {
        Ok(ferrocuda_kernels_device::packed::sum_column_partials_split::launch_cpu(self.0, config, partial, out, chunks, cols)?)
    }

    /// [`sum_column_pairs`](ferrocuda_kernels_device::packed::sum_column_pairs).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn sum_column_pairs(
        &self,
        config: LaunchConfig,
        partial_a: &[f32],
        partial_b: &[f32],
        out_a: &mut [f32],
        out_b: &mut [f32],
        chunks: u32,
        cols: u32,
    ) -> crate::Result<()> {
        Ok(ferrocuda_kernels_device::packed::sum_column_pairs::launch_cpu(self.0, config, partial_a, partial_b, out_a, out_b, chunks, cols)?)
    }

    /// [`sum_column_pairs_split`](ferrocuda_kernels_device::packed::sum_column_pairs_split).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn sum_column_pairs_split(
        &self,
        config: LaunchConfig,
        partial_a: &[f32],
        partial_b: &[f32],
        out_a: &mut [f32],
        out_b: &mut [f32],
        chunks: u32,
        cols: u32,
    ) -> crate::Result<()> {
        Ok(ferrocuda_kernels_device::packed::sum_column_pairs_split::launch_cpu(self.0, config, partial_a, partial_b, out_a, out_b, chunks, cols)?)
    }
}

macro_rules! declare_launchers {
    ({ $( fn $name:ident ( $($param:ident : $kind:tt),* $(,)? ); )* }) => {
        #[allow(clippy::too_many_arguments, dead_code)]
        impl Gpu<'_> {
            $(
                pub(crate) fn $name<T: Launchers>(&self, config: LaunchConfig, $($param: gpu_arg!(T; $kind)),*) -> crate::Result<()> {
                    Ok(<T as Launchers>::$name(self.0, config, $($param),*)?)
                }
            )*
        }
        #[allow(clippy::too_many_arguments, dead_code)]
        impl Cpu<'_> {
            $(
                pub(crate) fn $name<T: CpuLaunchers>(&self, config: LaunchConfig, $($param: cpu_arg!(T; $kind)),*) -> crate::Result<()> {
                    Ok(<T as CpuLaunchers>::$name(self.0, config, $($param),*)?)
                }
            )*
        }
        /// The launchers of every kernel for one element type (GPU: `stream`; CPU executor:
        /// `_cpu`). Plumbing for the public calls, which check shapes first.
        #[allow(clippy::too_many_arguments, missing_docs)]
        pub trait Launchers: Sized {
            $(
                fn $name(stream: &Stream, config: LaunchConfig, $($param: gpu_arg!(Self; $kind)),*) -> ferrocuda_host::Result<()>;
            )*
        }
        /// [`Launchers`] on the CPU executor.
        #[allow(clippy::too_many_arguments, missing_docs)]
        pub trait CpuLaunchers: Sized {
            $(
                fn $name(executor: &CpuExecutor, config: LaunchConfig, $($param: cpu_arg!(Self; $kind)),*) -> Result<(), CpuError>;
            )*
        }
    };
}

macro_rules! impl_launchers {
    ($ty:ty, $module:ident, { $( fn $name:ident ( $($param:ident : $kind:tt),* $(,)? ); )* }) => {
        #[allow(clippy::too_many_arguments)]
        impl Launchers for $ty {
            $(
                fn $name(stream: &Stream, config: LaunchConfig, $($param: gpu_arg!(Self; $kind)),*) -> ferrocuda_host::Result<()> {
                    $module::$name::launch(stream, config, $($param),*)
                }
            )*
        }
        #[allow(clippy::too_many_arguments)]
        impl CpuLaunchers for $ty {
            $(
                fn $name(executor: &CpuExecutor, config: LaunchConfig, $($param: cpu_arg!(Self; $kind)),*) -> Result<(), CpuError> {
                    $module::$name::launch_cpu(executor, config, $($param),*)
                }
            )*
        }
    };
}

macro_rules! kernel_table {
    ($table:tt) => {
        declare_launchers!($table);
        impl_launchers!(f32, for_f32, $table);
        impl_launchers!(bf16, for_bf16, $table);
        impl_launchers!(f16, for_f16, $table);
    };
}

kernel_table!({
    fn rmsnorm_forward(x: [in T], weight: [in T], out: [out T], rstd: [out f32], rows: u32, cols: u32, eps: f32);
    fn add_rmsnorm_forward(x: [in T], residual: [in T], weight: [in T], out: [out T], sum: [out T], rstd: [out f32], rows: u32, cols: u32, eps: f32);
    fn layernorm_forward(x: [in T], weight: [in T], bias: [in T], out: [out T], mean: [out f32], rstd: [out f32], rows: u32, cols: u32, eps: f32);
    fn add_layernorm_forward(
        x: [in T], residual: [in T], weight: [in T], bias: [in T], out: [out T], sum: [out T], mean: [out f32], rstd: [out f32], rows: u32, cols: u32, eps: f32
    );
    fn layernorm_backward(
        dout: [in T], x: [in T], weight: [in T], mean: [in f32], rstd: [in f32], dresidual: [in T], dx: [out T], rows: u32, cols: u32, add_dresidual: u32
    );
    fn rmsnorm_backward(dout: [in T], x: [in T], weight: [in T], rstd: [in f32], dresidual: [in T], dx: [out T], rows: u32, cols: u32, add_dresidual: u32);
    fn norm_backward_weights_partial(
        dout: [in T], x: [in T], mean: [in f32], rstd: [in f32], partial_dweight: [out f32], partial_dbias: [out f32], rows: u32, cols: NonZeroU32,
        rows_per_chunk: u32, centred: u32
    );
    fn softmax_forward(x: [in T], out: [out T], rows: u32, cols: u32);
    fn rmsnorm_forward_packed(x: [in T], weight: [in T], out: [out T], rstd: [out f32], cols: u32, eps: f32);
    fn rmsnorm_forward_packed_t96(x: [in T], weight: [in T], out: [out T], rstd: [out f32], cols: u32, eps: f32);
    fn rmsnorm_forward_packed_t128(x: [in T], weight: [in T], out: [out T], rstd: [out f32], cols: u32, eps: f32);
    fn rmsnorm_forward_packed16(x: [in T], weight: [in T], out: [out T], rstd: [out f32], cols: u32, eps: f32);
    fn add_rmsnorm_forward_packed(x: [in T], residual: [in T], weight: [in T], out: [out T], sum: [out T], rstd: [out f32], cols: u32, eps: f32);
    fn add_rmsnorm_forward_packed_t512(x: [in T], residual: [in T], weight: [in T], out: [out T], sum: [out T], rstd: [out f32], cols: u32, eps: f32);
    fn layernorm_forward_packed(x: [in T], weight: [in T], bias: [in T], out: [out T], mean: [out f32], rstd: [out f32], cols: u32, eps: f32);
    fn layernorm_forward_packed16(x: [in T], weight: [in T], bias: [in T], out: [out T], mean: [out f32], rstd: [out f32], cols: u32, eps: f32);
    fn layernorm_forward_packed16_t256(x: [in T], weight: [in T], bias: [in T], out: [out T], mean: [out f32], rstd: [out f32], cols: u32, eps: f32);
    fn add_layernorm_forward_packed(
        x: [in T], residual: [in T], weight: [in T], bias: [in T], out: [out T], sum: [out T], mean: [out f32], rstd: [out f32], cols: u32, eps: f32
    );
    fn norm_backward_packed(
        dout: [in T], x: [in T], weight: [in T], mean: [in f32], rstd: [in f32], dresidual: [in T], dx: [out T], cols: u32, add_dresidual: u32, centred: u32
    );
    fn softmax_forward_packed(x: [in T], out: [out T], cols: u32);
    fn softmax_forward_packed_t512(x: [in T], out: [out T], cols: u32);
    fn norm_backward_weights_partial_packed(
        dout: [in T], x: [in T], mean: [in f32], rstd: [in f32], partial_dweight: [out f32], partial_dbias: [out f32], rows: u32, cols: u32,
        rows_per_chunk: u32, centred: u32
    );
    fn layernorm_backward_fused_packed(
        dout: [in T], x: [in T], weight: [in T], mean: [in f32], rstd: [in f32], dresidual: [in T], dx: [out T], partial_dweight: [out f32],
        partial_dbias: [out f32], cols: u32, add_dresidual: u32
    );
    fn rmsnorm_backward_fused_packed(
        dout: [in T], x: [in T], weight: [in T], rstd: [in f32], dresidual: [in T], dx: [out T], partial_dweight: [out f32], cols: u32,
        add_dresidual: u32
    );
    fn silu_and_mul_forward_packed(input: [in T], out: [out T], chunks_per_row: NonZeroU32);
    fn silu_and_mul_backward_packed(input: [in T], dout: [in T], dinput: [out T], chunks_per_row: NonZeroU32);
    fn rotary_embedding_packed(
        x: [in T], positions: [in u32], cos: [in f32], sin: [in f32], out: [out T], head_chunks: NonZeroU32, heads: NonZeroU32, shape: RopeShape
    );
    fn gelu_forward_packed(x: [in T], out: [out T]);
    fn gelu_backward_packed(x: [in T], dout: [in T], dx: [out T]);
    fn cross_entropy_forward_backward(logits: [in T], targets: [in u32], losses: [out f32], dlogits: [out T], rows: u32, vocab: u32, dloss: f32);
    fn cross_entropy_forward(logits: [in T], targets: [in u32], losses: [out f32], lse: [out f32], rows: u32, vocab: u32);
    fn cross_entropy_backward(logits: [in T], targets: [in u32], lse: [in f32], dlosses: [in f32], dlogits: [out T], vocab: NonZeroU32);
    fn cross_entropy_backward_packed(logits: [in T], targets: [in u32], lse: [in f32], dlosses: [in f32], dlogits: [out T], chunks_per_row: NonZeroU32);
    fn gelu_forward(x: [in T], out: [out T]);
    fn gelu_backward(x: [in T], dout: [in T], dx: [out T]);
    fn silu_and_mul_forward(input: [in T], out: [out T], d: NonZeroU32);
    fn silu_and_mul_backward(input: [in T], dout: [in T], dinput: [out T], d: NonZeroU32);
    fn rotary_embedding(
        x: [in T], positions: [in u32], cos: [in f32], sin: [in f32], out: [out T], head_dim: NonZeroU32, heads: NonZeroU32, shape: RopeShape
    );
    fn adamw_step(params: [out T], grads: [in T], m: [out f32], v: [out f32], hp: AdamWStep);
    fn adamw_step_packed(params: [out T], grads: [in T], m: [out f32], v: [out f32], hp: AdamWStep);
    fn sum_of_squares(x: [in T], total: [out f32]);
    fn sum_of_squares_packed(x: [in T], total: [out f32]);
    fn clip_by_global_norm(grads: [out T], norm_squared: [in f32], max_norm: f32);
    fn attention_forward(q: [in T], k: [in T], v: [in T], out: [out T], lse: [out f32], head_dim: u32, shape: AttentionShape);
    fn attention_forward_mma(q: [in T], k: [in T], v: [in T], out: [out T], lse: [out f32], tile_width: u32, head_dim: u32, shape: AttentionShape);
    fn attention_backward_dq(
        q: [in T], k: [in T], v: [in T], out: [in T], dout: [in T], lse: [in f32], dq: [out T], delta: [out f32], head_dim: u32, shape: AttentionShape
    );
    fn attention_backward_dkv(
        q: [in T], k: [in T], v: [in T], dout: [in T], lse: [in f32], delta: [in f32], dk: [out T], dv: [out T], head_dim: u32, shape: AttentionShape
    );
    fn attention_backward_delta(out: [in T], dout: [in T], delta: [out f32], head_dim: u32);
    fn attention_backward_dkv_mma(
        q: [in T], k: [in T], v: [in T], dout: [in T], lse: [in f32], delta: [in f32], dk: [out T], dv: [out T], head_dim: u32, shape: AttentionShape
    );
    fn attention_backward_dq_mma(q: [in T], k: [in T], v: [in T], dout: [in T], lse: [in f32], delta: [in f32], dq: [out T], head_dim: u32, shape: AttentionShape);
    fn attention_backward_prep(out: [in T], dout: [in T], lse: [in f32], lse2: [out f32], delta: [out f32], head_dim: u32, shape: AttentionShape);
    fn attention_backward_dq_convert(dq_acc: [in f32], dq: [out T], head_dim: u32, shape: AttentionShape);
});
