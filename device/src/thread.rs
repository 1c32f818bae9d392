//! Thread, block and grid indices and sizes (`threadIdx`, `blockIdx`, `blockDim`, `gridDim`).
//!
//! Each compiles to one `mov.u32 %r, %tid.x`-style special-register read.

macro_rules! special_registers {
    ($($(#[$doc:meta])* $name:ident => $intrinsic:ident;)*) => {$(
        $(#[$doc])*
        #[inline(always)]
        pub fn $name() -> u32 {
            #[cfg(target_arch = "nvptx64")]
            // SAFETY: reading a special register has no preconditions inside a kernel.
            unsafe { core::arch::nvptx::$intrinsic() as u32 }
            #[cfg(not(target_arch = "nvptx64"))]
            crate::not_on_host(stringify!($name))
        }
    )*};
}

special_registers! {
    /// `threadIdx.x`
    thread_idx_x => _thread_idx_x;
    /// `threadIdx.y`
    thread_idx_y => _thread_idx_y;
    /// `threadIdx.z`
    thread_idx_z => _thread_idx_z;
    /// `blockIdx.x`
    block_idx_x => _block_idx_x;
    /// `blockIdx.y`
    block_idx_y => _block_idx_y;
    /// `blockIdx.z`
    block_idx_z => _block_idx_z;
    /// `blockDim.x`
    block_dim_x => _block_dim_x;
    /// `blockDim.y`
    block_dim_y => _block_dim_y;
    /// `blockDim.z`
    block_dim_z => _block_dim_z;
    /// `gridDim.x`
    grid_dim_x => _grid_dim_x;
    /// `gridDim.y`
    grid_dim_y => _grid_dim_y;
    /// `gridDim.z`
    grid_dim_z => _grid_dim_z;
}

/// `blockIdx.x * blockDim.x + threadIdx.x` as `usize`: the 1-D global index.
#[inline(always)]
pub fn index_1d() -> usize {
    block_idx_x() as usize * block_dim_x() as usize + thread_idx_x() as usize
}

/// `gridDim.x * blockDim.x` as `usize`: the stride of a 1-D grid-stride loop.
#[inline(always)]
pub fn grid_stride_1d() -> usize {
    grid_dim_x() as usize * block_dim_x() as usize
}

/// The indices `index_1d(), index_1d() + stride, ...` below `len`: a grid-stride loop.
#[inline(always)]
pub fn grid_stride_range(len: usize) -> core::iter::StepBy<core::ops::Range<usize>> {
    (index_1d().min(len)..len).step_by(grid_stride_1d().max(1))
}

/// Block-wide barrier (`__syncthreads()`, `bar.sync 0`): every thread of the block must reach it.
#[inline(always)]
pub fn sync_threads() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a barrier; the caller keeps it in uniform control flow, as in CUDA.
    unsafe {
        core::arch::nvptx::_syncthreads()
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::not_on_host("sync_threads")
}
