//! Fast GPU kernels as a library: the calls a training or inference program makes, on
//! ferrocuda's buffers and streams, with every shape checked before anything is queued and no
//! `unsafe` for the caller.
//!
//! - [`rows`]: RMSNorm and layer norm (with fused residual add) forward and backward, softmax,
//!   cross-entropy with its gradient (llm.c's fused classifier), GELU (tanh) forward and
//!   backward, SiLU-and-mul forward and backward, rotary embeddings, AdamW, global-norm
//!   gradient clipping;
//! - [`attention`]: attention forward (with the log-sum-exp) and backward (dQ, dK, dV),
//!   `[B, H, S, D]` or `[B, S, H, D]`, causal or not, grouped-query heads;
//! - [`gemm`]: one row-major `gemm` call over cuBLAS/cuBLASLt with transposes, strided
//!   batches, and bias/GELU epilogues.
//!
//! Every row and attention kernel runs for `f32`, `bf16` and `f16` ([`Element`]), with `f32`
//! arithmetic. The same calls run on the CPU executor ([`cpu`]) on host slices: that is how the
//! crate is tested against `f64` references without a GPU, and how a program can check its
//! own use of them.
//!
//! ```no_run
//! use ferrocuda_host::{Context, DeviceBuffer, Stream};
//! use ferrocuda_kernels::rows::{self, Rows};
//! use half::bf16;
//! # fn main() -> Result<(), ferrocuda_kernels::KernelsError> {
//! let context = Context::primary(0)?;
//! let stream = Stream::new(&context)?;
//! let shape = Rows { rows: 4, cols: 768 };
//! let x = DeviceBuffer::from_slice(&context, &vec![bf16::from_f32(1.0); 4 * 768])?;
//! let weight = DeviceBuffer::from_slice(&context, &vec![bf16::from_f32(1.0); 768])?;
//! let mut out = DeviceBuffer::<bf16>::zeroed(&context, 4 * 768)?;
//! let mut rstd = DeviceBuffer::<f32>::zeroed(&context, 4)?;
//! rows::rmsnorm(&stream, &x, &weight, &mut out, &mut rstd, shape, 1e-6)?;
//! // A gamma of the wrong length is refused before anything is queued, and named:
//! let short = DeviceBuffer::from_slice(&context, &vec![bf16::from_f32(1.0); 512])?;
//! let error = rows::rmsnorm(&stream, &x, &short, &mut out, &mut rstd, shape, 1e-6).unwrap_err();
//! assert!(error.to_string().contains("`weight`"));
//! # Ok(()) }
//! ```

pub mod attention;
pub mod cpu;
mod error;
pub mod gemm;
mod hopper;
mod launchers;
pub mod rows;

pub use error::{KernelsError, Result};
pub use ferrocuda_kernels_device::{IGNORE_TARGET, bf16, f16};

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for half::bf16 {}
    impl Sealed for half::f16 {}
}

/// The element types of the row and attention kernels: `f32`, `half::bf16`, `half::f16`
/// (sealed). Values are widened to `f32` for arithmetic and rounded once when stored.
pub trait Element: ferrocuda_kernels_device::Float + launchers::Launchers + launchers::CpuLaunchers + sealed::Sealed + Send + Sync + 'static {
    /// Attention may run on the tensor cores for this type (16-bit floats).
    #[doc(hidden)]
    const TENSOR_CORES: bool;
    /// Attention may run on the sm_90 kernels for this type (bf16 only).
    #[doc(hidden)]
    const HOPPER: bool;
    /// Attention backward may run on the sm_90 kernels for this type (bf16 and f16).
    #[doc(hidden)]
    const HOPPER_BACKWARD: bool;
    /// The type is f16 (the sm_90 backward's instance and tensor maps).
    #[doc(hidden)]
    const F16: bool;
}

impl Element for f32 {
    const TENSOR_CORES: bool = false;
    const HOPPER: bool = false;
    const HOPPER_BACKWARD: bool = false;
    const F16: bool = false;
}
impl Element for half::bf16 {
    const TENSOR_CORES: bool = true;
    const HOPPER: bool = true;
    const HOPPER_BACKWARD: bool = true;
    const F16: bool = false;
}
impl Element for half::f16 {
    const TENSOR_CORES: bool = true;
    const HOPPER: bool = false;
    const HOPPER_BACKWARD: bool = true;
    const F16: bool = true;
}

/// Elements of a kernel argument (its length as the kernel will see it).
pub(crate) fn len_of<T>(x: &(impl ferrocuda_host::DeviceRead<T> + ?Sized)) -> usize {
    x.kernel_arg().len()
}

/// Threads per block of every launch of this crate.
pub(crate) const BLOCK: u32 = 256;

/// Warps (rows) per block of the row kernels.
pub(crate) const ROWS_PER_BLOCK: usize = (BLOCK / 32) as usize;

/// One warp per row: `ceil(rows / 8)` blocks of 256 threads.
pub(crate) fn warp_per_row(rows: usize) -> ferrocuda_host::LaunchConfig {
    ferrocuda_host::LaunchConfig::new(rows.div_ceil(ROWS_PER_BLOCK) as u32, BLOCK)
}

/// The launch of the packed row kernels (`ferrocuda_kernels_device::packed`): one block per
/// row, `cols / 8` threads each, 8 columns per thread; `None` for shapes they do not take
/// (`cols` not a multiple of 8, or fewer than 256 or more than 8192 columns), which the
/// warp-per-row kernels run instead.
pub(crate) fn packed_rows(rows: usize, cols: usize) -> Option<ferrocuda_host::LaunchConfig> {
    let threads = cols / 8;
    (cols.is_multiple_of(8) && (32..=1024).contains(&threads) && rows > 0 && rows < (1 << 31))
        .then(|| ferrocuda_host::LaunchConfig::new(rows as u32, threads as u32))
}

/// The launch of the packed element-wise kernels (chunks of 8); `None` unless `n` is a
/// non-zero multiple of 8.
pub(crate) fn packed_elements(n: usize) -> Option<ferrocuda_host::LaunchConfig> {
    (n > 0 && n.is_multiple_of(8)).then(|| chunk_grid(n / 8))
}

/// A launch of one thread per chunk of 8 (up to 2^20 blocks of 256 threads; the kernels'
/// grid-stride loops take the rest): every thread's 16-byte load is issued at once, where a
/// grid of a few blocks per SM would walk the chunks with one load in flight per thread.
pub(crate) fn chunk_grid(chunks: usize) -> ferrocuda_host::LaunchConfig {
    ferrocuda_host::LaunchConfig::new(chunks.div_ceil(BLOCK as usize).clamp(1, 1 << 20) as u32, BLOCK)
}

/// The rotary embedding's launch over `chunks` chunks of 8: [`chunk_grid`] up to
/// [`ROTARY_BLOCKS`] blocks of 256, each thread walking the rest in the kernel's grid-stride
/// loop. The kernel's fixed work a thread (the alignment checks, the divisors' reciprocals:
/// about 140 SASS instructions against a step of 159) then spreads over several chunks: on an
/// H100 (session 14, `bench_rows` `BENCH_ROWS_VARIANTS`) 4096 blocks at 8192 x 32 x 128 ran in
/// 51.6 µs against 52.9 with a thread a chunk, and 1024 blocks in 57.7.
pub(crate) fn rotary_grid(chunks: usize) -> ferrocuda_host::LaunchConfig {
    ferrocuda_host::LaunchConfig::new(chunks.div_ceil(BLOCK as usize).clamp(1, ROTARY_BLOCKS) as u32, BLOCK)
}

/// The most blocks of a rotary-embedding launch ([`rotary_grid`]).
pub(crate) const ROTARY_BLOCKS: usize = 4096;

/// A grid-stride launch over `n` elements: up to 8192 blocks of 256 threads.
pub(crate) fn grid_stride(n: usize) -> ferrocuda_host::LaunchConfig {
    ferrocuda_host::LaunchConfig::new(n.div_ceil(BLOCK as usize).clamp(1, 8192) as u32, BLOCK)
}
