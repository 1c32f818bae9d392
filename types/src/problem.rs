//! [`LaunchProblem`]: which limit a launch configuration broke, with a message that says what
//! to do.

use core::fmt;

use crate::dim3::Dim3;

/// Which limit a launch configuration broke.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LaunchProblem {
    /// A grid dimension is zero.
    EmptyGrid {
        /// The grid.
        grid: Dim3,
    },
    /// A block dimension is zero.
    EmptyBlock {
        /// The block.
        block: Dim3,
    },
    /// More threads per block than the device allows.
    BlockTooLarge {
        /// Threads asked for.
        threads: u64,
        /// The device limit.
        max: u32,
    },
    /// One block dimension exceeds its limit.
    BlockAxisTooLarge {
        /// "x", "y" or "z".
        axis: &'static str,
        /// The size asked for.
        size: u32,
        /// The device limit.
        max: u32,
    },
    /// One grid dimension exceeds its limit.
    GridAxisTooLarge {
        /// "x", "y" or "z".
        axis: &'static str,
        /// The size asked for.
        size: u32,
        /// The device limit.
        max: u32,
    },
    /// More dynamic shared memory than a block may have.
    SharedMemoryTooLarge {
        /// Bytes asked for.
        requested: u32,
        /// The device limit.
        max: u32,
    },
    /// More dynamic shared memory than this kernel currently allows (48 KiB unless raised):
    /// the device has room, but the kernel's attribute must be raised first.
    SharedMemoryAboveKernelMax {
        /// Bytes asked for.
        requested: u32,
        /// The kernel's current `max_dynamic_shared_bytes`.
        kernel_max: u32,
        /// The device's opt-in limit.
        device_max: u32,
    },
    /// The kernel's static shared memory (its `shared_array!`s) plus the launch's dynamic shared
    /// memory exceed what one block may have (audit 2026-11-27c, F7): no opt-in raises it.
    SharedMemoryTotalTooLarge {
        /// Bytes of static shared memory the kernel declares.
        static_bytes: u32,
        /// Bytes of dynamic shared memory asked for.
        dynamic_bytes: u32,
        /// The device's limit per block (static and dynamic together).
        max: u32,
    },
    /// The device cannot launch thread-block clusters (they need sm_90 or newer).
    ClustersUnsupported,
    /// The device cannot launch cooperatively.
    CooperativeUnsupported,
    /// A cluster dimension is zero.
    EmptyCluster {
        /// The cluster.
        cluster: Dim3,
    },
    /// The launch asks for clusters of another shape than the kernel was compiled for
    /// (`#[kernel(cluster_dims(..))]`, `.reqnctapercluster` in its PTX).
    ClusterDiffersFromCompiled {
        /// The kernel's compiled cluster shape.
        compiled: Dim3,
        /// The cluster the launch configuration asks for.
        requested: Dim3,
    },
    /// A cluster dimension does not divide the grid's.
    ClusterDoesNotDivideGrid {
        /// "x", "y" or "z".
        axis: &'static str,
        /// The cluster's size along the axis.
        cluster: u32,
        /// The grid's size along the axis.
        grid: u32,
    },
    /// A cooperative grid with more blocks than can be resident at once.
    CooperativeGridTooLarge {
        /// Blocks asked for.
        blocks: u64,
        /// Blocks that fit at once (`per_sm * sms`).
        max: u64,
        /// Blocks of this kernel and configuration that fit on one SM.
        per_sm: u32,
        /// SMs on the device.
        sms: u32,
    },
    /// More blocks per cluster than the portable limit.
    ClusterTooLarge {
        /// Blocks asked for.
        blocks: u64,
        /// The limit.
        max: u64,
    },
    /// [`LaunchConfig::try_for_elements`](crate::LaunchConfig::try_for_elements): covering the elements one per thread needs more
    /// than `u32::MAX` blocks.
    TooManyElements {
        /// Elements asked for.
        elements: u64,
        /// Threads per block.
        block: u32,
    },
    /// The kernel has a per-thread output (`DisjointSlice`, `DisjointChunks`,
    /// `DisjointPlanes`), whose elements are owned by the 1-D thread index, and the launch is
    /// not 1-D.
    NotOneDimensional {
        /// The grid.
        grid: Dim3,
        /// The block.
        block: Dim3,
    },
    /// Slices a kernel declares of one length (`#[kernel(same_len(..))]`) differ.
    LengthsDiffer {
        /// The group's first parameter.
        first: &'static str,
        /// Its length.
        first_len: u64,
        /// The parameter whose length differs.
        other: &'static str,
        /// Its length.
        other_len: u64,
    },
    /// The kernel has a per-thread output and the launch has more threads than its 32-bit
    /// thread index can name.
    TooManyThreadsForIndex {
        /// Threads asked for.
        threads: u64,
        /// The limit.
        max: u64,
    },
    /// The kernel has a 2-D per-thread output (`DisjointMatrix`) and the grid or block has
    /// `z > 1`.
    NotTwoDimensional {
        /// The grid.
        grid: Dim3,
        /// The block.
        block: Dim3,
    },
    /// The kernel has a 2-D per-thread output and the threads along one axis
    /// (`gridDim * blockDim`) exceed what its 32-bit coordinates can name.
    TooManyThreadsAlongAxis {
        /// "x" or "y".
        axis: &'static str,
        /// Threads along the axis.
        threads: u64,
        /// The limit.
        max: u64,
    },
    /// The kernel has a per-warp output (`PerWarpRow`) and `blockDim.x` is not a multiple of 32.
    NotWholeWarps {
        /// The block.
        block: Dim3,
    },
    /// The kernel has a per-block tile output (`PerBlockTile`) whose thread shape the block
    /// must have exactly, in a grid with `z = 1`.
    BlockShapeRequired {
        /// The block shape the output requires.
        required: Dim3,
        /// The grid.
        grid: Dim3,
        /// The block.
        block: Dim3,
    },
    /// Two outputs of the kernel require different block shapes: no launch satisfies both.
    ConflictingBlockShapes,
    /// The kernel has a row-tile output (`DisjointSlice<T, RowTiles>`: block `(x, y)` owns a
    /// tile of row `x`, its threads striding by `blockDim.x`) or a slice output
    /// (`DisjointSlice<T, GridSlices>`: slice `blockIdx.y` over a 1-D grid along x), and the
    /// block is not 1-D or the grid has `z > 1`.
    NotRowTileLaunch {
        /// The grid.
        grid: Dim3,
        /// The block.
        block: Dim3,
    },
    /// An output's launch-time bound does not hold: the partition's device code relies on a
    /// fact about its shape, the launch and the buffer that the launchers check once (issue 30:
    /// `Cells3d`'s row index fits in 32 bits, so each thread's index needs no overflow test).
    OutputShapeOutOfRange {
        /// The output parameter.
        output: &'static str,
        /// The partition's rule, in words, with what to do.
        rule: &'static str,
        /// The launch's value of the bounded quantity.
        value: u64,
        /// Its limit.
        limit: u64,
    },
    /// More threads per block than the kernel's own limit: its `launch_bounds(max)` (PTX
    /// `.maxntid`), or the registers it was compiled with (the function's
    /// `CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`). A GPU refuses the launch
    /// (`CUDA_ERROR_INVALID_VALUE` or `CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES`: audit P11).
    AboveKernelThreadLimit {
        /// Threads per block asked for.
        threads: u64,
        /// The kernel's limit.
        max: u32,
        /// Where the limit comes from: `"launch_bounds"` or `"registers"`.
        source: &'static str,
    },
    /// The kernel needs more local memory (its stack: local arrays, spills, call frames) per
    /// thread than the GPU gives a thread (audit 2026-11-27b, Q7: a GPU refuses the launch
    /// with a bare `CUDA_ERROR_INVALID_VALUE`).
    LocalMemoryTooLarge {
        /// Bytes of local memory per thread the kernel needs (`ptxas -v`'s stack size,
        /// `CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES`).
        bytes: u64,
        /// The per-thread limit checked against ([`MAX_LOCAL_BYTES_PER_THREAD`](crate::MAX_LOCAL_BYTES_PER_THREAD)).
        limit: u64,
        /// On a GPU: the threads that can be resident at once (SMs times threads per SM), for
        /// each of which the driver reserves that memory, and the device's memory in bytes.
        reserve: Option<(u64, u64)>,
    },
    /// A kernel compiled with `reqntid(n)` (PTX `.reqntid n, 1, 1`) launched with another block.
    RequiredBlockThreads {
        /// The block the kernel requires: `(n, 1, 1)`.
        required: Dim3,
        /// The block asked for.
        block: Dim3,
    },
}

impl fmt::Display for LaunchProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::EmptyGrid { grid } => write!(f, "the grid {grid} has a zero dimension; every dimension must be at least 1"),
            Self::EmptyBlock { block } => write!(f, "the block {block} has a zero dimension; every dimension must be at least 1"),
            Self::BlockTooLarge { threads, max } => {
                write!(f, "a block of {threads} threads exceeds the device's max threads per block ({max})")
            }
            Self::BlockAxisTooLarge { axis, size, max } => write!(f, "block dimension {axis} = {size} exceeds the device's limit of {max}"),
            Self::GridAxisTooLarge { axis, size, max } => {
                write!(f, "grid dimension {axis} = {size} exceeds the device's limit of {max}")?;
                if *size == u32::MAX && *axis == "x" {
                    // What `LaunchConfig::for_elements` clamps an overflowing grid to.
                    write!(
                        f,
                        " (`LaunchConfig::for_elements` clamps to this when the elements need more blocks than fit in a u32: use a grid-stride loop over fewer blocks, or `try_for_elements`)"
                    )?;
                }
                Ok(())
            }
            Self::SharedMemoryTooLarge { requested, max } => {
                write!(f, "{requested} bytes of dynamic shared memory exceed the device's max shared memory per block ({max} bytes)")
            }
            Self::SharedMemoryAboveKernelMax { requested, kernel_max, device_max } => write!(
                f,
                "{requested} bytes of dynamic shared memory exceed this kernel's limit of {kernel_max} bytes; the device allows up to {device_max}: \
                 raise the kernel's limit first with `name::function(&context)?.set_max_dynamic_shared_bytes({requested})`"
            ),
            Self::SharedMemoryTotalTooLarge { static_bytes, dynamic_bytes, max } => write!(
                f,
                "{static_bytes} bytes of static shared memory (the kernel's shared_array!s) plus {dynamic_bytes} bytes of dynamic shared \
                 memory exceed the device's max shared memory per block ({max} bytes, static and dynamic together); ask for at most \
                 {} bytes of dynamic shared memory, or move static arrays into the dynamic shared memory",
                max.saturating_sub(*static_bytes)
            ),
            Self::ClustersUnsupported => {
                write!(f, "the device does not support thread-block clusters (they need sm_90 or newer); launch without `with_cluster`")
            }
            Self::CooperativeUnsupported => write!(f, "the device does not support cooperative launches"),
            Self::EmptyCluster { cluster } => write!(f, "the cluster {cluster} has a zero dimension; every dimension must be at least 1"),
            Self::ClusterDiffersFromCompiled { compiled, requested } => write!(
                f,
                "the kernel was compiled for clusters of {compiled} blocks (`#[kernel(cluster_dims(..))]`) but the launch asks for {requested}; \
                 leave the cluster out of the configuration (the compiled one is used) or ask for {compiled}"
            ),
            Self::ClusterDoesNotDivideGrid { axis, cluster, grid } => {
                write!(f, "cluster dimension {axis} = {cluster} does not divide grid dimension {axis} = {grid}; make the grid a multiple of the cluster")
            }
            Self::CooperativeGridTooLarge { blocks, max, per_sm, sms } => write!(
                f,
                "a cooperative grid of {blocks} blocks exceeds the {max} that can be resident at once ({per_sm} per SM x {sms} SMs for this kernel and block size); use at most {max} blocks, e.g. a grid-stride loop"
            ),
            Self::ClusterTooLarge { blocks, max } => write!(f, "a cluster of {blocks} blocks exceeds the portable limit of {max} blocks per cluster"),
            Self::TooManyElements { elements, block } => write!(
                f,
                "{elements} elements at one per thread in blocks of {block} threads need more than {} blocks; use a grid-stride loop over fewer blocks",
                u32::MAX
            ),
            Self::NotOneDimensional { grid, block } => write!(
                f,
                "the kernel has a per-thread output (`DisjointSlice`, `DisjointChunks`, `DisjointPlanes`), whose elements belong to the 1-D thread \
                 index `blockIdx.x * blockDim.x + threadIdx.x`, but the grid {grid} and block {block} are not both 1-D. Launch with y = z = 1 \
                 (a grid-stride loop covers any length), or give the kernel an output made for a 2-D launch: `DisjointMatrix` (thread (x, y) \
                 owns element (row y, column x)), `PerBlockTile` (a tile per block, its threads striding over it), `PerBlock` (one element \
                 per block), `AtomicSlice` (any thread, atomically), or `UncheckedSlice` (unsafe: you prove the threads' elements disjoint)"
            ),
            Self::LengthsDiffer { first, first_len, other, other_len } => write!(
                f,
                "the kernel declares `{first}` and `{other}` of the same length (`#[kernel(same_len(..))]`) but `{first}` has {first_len} \
                 elements and `{other}` {other_len}: pass slices of one length (`buffer.slice(..n)`)"
            ),
            Self::TooManyThreadsForIndex { threads, max } => write!(
                f,
                "the launch has {threads} threads but a kernel with a per-thread output (`DisjointSlice`, `DisjointChunks`, `DisjointPlanes`) \
                 allows at most {max} (its thread index is 32-bit): use fewer blocks and a grid-stride loop (`grid_stride(len)`)"
            ),
            Self::NotTwoDimensional { grid, block } => write!(
                f,
                "the kernel has a 2-D per-thread output (`DisjointMatrix`), whose element (row y, column x; row x, column y for `DisjointMatrix<T, true>`) belongs to the thread at \
                 (x, y) = (blockIdx.x * blockDim.x + threadIdx.x, blockIdx.y * blockDim.y + threadIdx.y), but the grid {grid} or the block \
                 {block} has z > 1 (two threads would share an element): launch with z = 1"
            ),
            Self::TooManyThreadsAlongAxis { axis, threads, max } => write!(
                f,
                "the launch has {threads} threads along {axis} but a kernel with a 2-D per-thread output (`DisjointMatrix`) allows at most \
                 {max} per axis (its coordinates are 32-bit): use fewer blocks and a 2-D grid-stride loop (`grid_stride_2d`)"
            ),
            Self::NotWholeWarps { block } => write!(
                f,
                "the kernel has a per-warp output (`PerWarpRow`), whose row w belongs to warp w of a 1-D launch, but the block {block} is not a \
                 whole number of warps: make blockDim.x a multiple of 32"
            ),
            Self::BlockShapeRequired { required, grid, block } => write!(
                f,
                "the kernel has a per-block tile output (`PerBlockTile`) whose threads stride over the tile in blocks of exactly {required}, \
                 but the launch has blocks of {block} in a grid of {grid}: launch with blocks of {required} and a grid with z = 1"
            ),
            Self::NotRowTileLaunch { grid, block } => write!(
                f,
                "the kernel has a row-tile output (`DisjointSlice<T, RowTiles>`, whose block (x, y) owns tile y of row x and whose \
                 threads stride over the tile by blockDim.x) or a slice output (`DisjointSlice<T, GridSlices>`, slice blockIdx.y over a \
                 1-D grid along x), but the grid {grid} or the block {block} is not of that shape (two threads would share an element): \
                 launch 1-D blocks (blockDim = (n, 1, 1)) in a grid with z = 1, e.g. grid (rows, tiles, 1)"
            ),
            Self::OutputShapeOutOfRange { output, rule, value, limit } => {
                write!(f, "the output `{output}`: {rule} (this launch: {value}, above the limit {limit})")
            }
            Self::ConflictingBlockShapes => write!(
                f,
                "the kernel has two per-block tile outputs (`PerBlockTile`) that require different block shapes, so no launch can satisfy both: \
                 give them the same thread shape (the last two const parameters)"
            ),
            Self::AboveKernelThreadLimit { threads, max, source: "launch_bounds" } => write!(
                f,
                "a block of {threads} threads exceeds the kernel's launch bounds of {max} threads per block (`#[kernel(launch_bounds({max}))]`, \
                 PTX `.maxntid {max}`), which a GPU refuses: launch blocks of at most {max} threads, or raise the bound"
            ),
            Self::AboveKernelThreadLimit { threads, max, source } => write!(
                f,
                "a block of {threads} threads exceeds this kernel's limit of {max} threads per block (set by its {source}: \
                 `CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`), which a GPU refuses: launch blocks of at most {max} threads, \
                 or compile the kernel with `launch_bounds` so that ptxas keeps its registers within that block size"
            ),
            Self::LocalMemoryTooLarge { bytes, limit, reserve } => {
                write!(
                    f,
                    "the kernel needs {bytes} bytes ({} KiB) of local memory per thread (its stack: local arrays, spills and call frames; \
                     `ptxas -v` prints it as the stack frame), and a GPU thread gets less than {limit} bytes ({} KiB)",
                    bytes / 1024,
                    limit / 1024
                )?;
                if let Some((threads, memory)) = reserve {
                    let needed = bytes.saturating_mul(*threads);
                    write!(
                        f,
                        "; the driver also reserves it for every thread that can be resident at once ({threads} threads here: {} MiB, of the \
                         device's {} MiB)",
                        needed >> 20,
                        memory >> 20
                    )?;
                }
                write!(
                    f,
                    ". Move large arrays out of the thread's locals: into global memory (a buffer parameter, one slice per thread) or \
                     shared memory (`shared_array!`, one per block), or make them smaller"
                )
            }
            Self::RequiredBlockThreads { required, block } => write!(
                f,
                "the kernel was compiled with `reqntid({})` (PTX `.reqntid {}, 1, 1`): it runs only in blocks of exactly {required}, \
                 but the launch has blocks of {block}",
                required.x, required.x
            ),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for LaunchProblem {}
