//! Launch configurations, their validation against device limits, and the launch itself.

use std::ffi::c_void;
use std::fmt;

use cudarc::driver::sys;

use crate::context::Context;
use crate::driver::check;
use crate::embedded::EmbeddedModule;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::memory::DeviceSlice;
use crate::module::Module;
use crate::stream::Stream;

/// Grid or block dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dim3 {
    /// x
    pub x: u32,
    /// y
    pub y: u32,
    /// z
    pub z: u32,
}

impl Dim3 {
    /// Number of elements (threads or blocks) it spans.
    pub fn volume(&self) -> u64 {
        self.x as u64 * self.y as u64 * self.z as u64
    }

    fn axes(&self) -> [u32; 3] {
        [self.x, self.y, self.z]
    }
}

impl From<u32> for Dim3 {
    fn from(x: u32) -> Self {
        Dim3 { x, y: 1, z: 1 }
    }
}

impl From<(u32, u32)> for Dim3 {
    fn from((x, y): (u32, u32)) -> Self {
        Dim3 { x, y, z: 1 }
    }
}

impl From<(u32, u32, u32)> for Dim3 {
    fn from((x, y, z): (u32, u32, u32)) -> Self {
        Dim3 { x, y, z }
    }
}

impl fmt::Display for Dim3 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({}, {}, {})", self.x, self.y, self.z)
    }
}

/// Grid, block and dynamic shared memory of one launch: CUDA's `<<<grid, block, shared>>>`,
/// plus the extended launch's thread-block cluster and cooperative flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks in the grid.
    pub grid: Dim3,
    /// Threads in a block.
    pub block: Dim3,
    /// Bytes of dynamic shared memory per block.
    pub shared_bytes: u32,
    /// Blocks per thread-block cluster (sm_90 and newer); must divide the grid. `None`: no
    /// clusters.
    pub cluster: Option<Dim3>,
    /// A cooperative launch: all blocks are resident at once, so they may synchronise grid-wide.
    pub cooperative: bool,
}

impl LaunchConfig {
    /// A configuration of `grid` blocks of `block` threads, without shared memory or clusters.
    pub fn new(grid: impl Into<Dim3>, block: impl Into<Dim3>) -> Self {
        LaunchConfig { grid: grid.into(), block: block.into(), shared_bytes: 0, cluster: None, cooperative: false }
    }

    /// A 1-D configuration covering `n` elements with `block` threads per block.
    pub fn for_elements(n: usize, block: u32) -> Self {
        let blocks = n.div_ceil(block.max(1) as usize).max(1);
        Self::new(u32::try_from(blocks).unwrap_or(u32::MAX), block)
    }

    /// The same configuration with `bytes` of dynamic shared memory per block.
    #[must_use]
    pub fn with_shared_bytes(mut self, bytes: u32) -> Self {
        self.shared_bytes = bytes;
        self
    }

    /// The same configuration with thread-block clusters of `cluster` blocks (launched
    /// through `cuLaunchKernelEx`).
    #[must_use]
    pub fn with_cluster(mut self, cluster: impl Into<Dim3>) -> Self {
        self.cluster = Some(cluster.into());
        self
    }

    /// The same configuration as a cooperative launch (`cuLaunchKernelEx` with the
    /// cooperative attribute): the grid must fit on the device at once.
    #[must_use]
    pub fn cooperative(mut self) -> Self {
        self.cooperative = true;
        self
    }

    /// True when the launch needs `cuLaunchKernelEx` (clusters or cooperative).
    pub fn is_extended(&self) -> bool {
        self.cluster.is_some() || self.cooperative
    }
}

impl<G: Into<Dim3>, B: Into<Dim3>> From<(G, B)> for LaunchConfig {
    fn from((grid, block): (G, B)) -> Self {
        LaunchConfig::new(grid, block)
    }
}

impl<G: Into<Dim3>, B: Into<Dim3>> From<(G, B, u32)> for LaunchConfig {
    fn from((grid, block, shared_bytes): (G, B, u32)) -> Self {
        LaunchConfig::new(grid, block).with_shared_bytes(shared_bytes)
    }
}

/// The device limits a launch is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceLimits {
    /// `CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK`.
    pub max_threads_per_block: u32,
    /// Largest block along x, y, z.
    pub max_block: [u32; 3],
    /// Largest grid along x, y, z.
    pub max_grid: [u32; 3],
    /// Shared memory a block may use (opt-in maximum).
    pub max_shared_per_block: u32,
    /// The device supports thread-block clusters (`CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH`).
    pub cluster_launch: bool,
    /// The device supports cooperative launches (`CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH`).
    pub cooperative_launch: bool,
}

/// Most blocks a cluster may have without the non-portable opt-in (CUDA's portable limit).
pub const MAX_PORTABLE_CLUSTER_BLOCKS: u64 = 8;

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
    /// The device cannot launch thread-block clusters (they need sm_90 or newer).
    ClustersUnsupported,
    /// The device cannot launch cooperatively.
    CooperativeUnsupported,
    /// A cluster dimension is zero.
    EmptyCluster {
        /// The cluster.
        cluster: Dim3,
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
            Self::GridAxisTooLarge { axis, size, max } => write!(f, "grid dimension {axis} = {size} exceeds the device's limit of {max}"),
            Self::SharedMemoryTooLarge { requested, max } => {
                write!(f, "{requested} bytes of dynamic shared memory exceed the device's max shared memory per block ({max} bytes)")
            }
            Self::ClustersUnsupported => write!(f, "the device does not support thread-block clusters (they need sm_90 or newer); launch without `with_cluster`"),
            Self::CooperativeUnsupported => write!(f, "the device does not support cooperative launches"),
            Self::EmptyCluster { cluster } => write!(f, "the cluster {cluster} has a zero dimension; every dimension must be at least 1"),
            Self::ClusterDoesNotDivideGrid { axis, cluster, grid } => {
                write!(f, "cluster dimension {axis} = {cluster} does not divide grid dimension {axis} = {grid}; make the grid a multiple of the cluster")
            }
            Self::CooperativeGridTooLarge { blocks, max, per_sm, sms } => write!(
                f,
                "a cooperative grid of {blocks} blocks exceeds the {max} that can be resident at once ({per_sm} per SM x {sms} SMs for this kernel and block size); use at most {max} blocks, e.g. a grid-stride loop"
            ),
            Self::ClusterTooLarge { blocks, max } => write!(f, "a cluster of {blocks} blocks exceeds the portable limit of {max} blocks per cluster"),
        }
    }
}

impl LaunchConfig {
    /// Checks the configuration against `limits`, naming the first limit it breaks.
    pub fn validate(&self, limits: &DeviceLimits) -> Result<(), LaunchProblem> {
        const AXES: [&str; 3] = ["x", "y", "z"];
        if self.grid.volume() == 0 {
            return Err(LaunchProblem::EmptyGrid { grid: self.grid });
        }
        if self.block.volume() == 0 {
            return Err(LaunchProblem::EmptyBlock { block: self.block });
        }
        for (i, (&size, &max)) in self.block.axes().iter().zip(&limits.max_block).enumerate() {
            if size > max {
                return Err(LaunchProblem::BlockAxisTooLarge { axis: AXES[i], size, max });
            }
        }
        if self.block.volume() > limits.max_threads_per_block as u64 {
            return Err(LaunchProblem::BlockTooLarge { threads: self.block.volume(), max: limits.max_threads_per_block });
        }
        for (i, (&size, &max)) in self.grid.axes().iter().zip(&limits.max_grid).enumerate() {
            if size > max {
                return Err(LaunchProblem::GridAxisTooLarge { axis: AXES[i], size, max });
            }
        }
        if self.shared_bytes > limits.max_shared_per_block {
            return Err(LaunchProblem::SharedMemoryTooLarge { requested: self.shared_bytes, max: limits.max_shared_per_block });
        }
        if let Some(cluster) = self.cluster {
            if !limits.cluster_launch {
                return Err(LaunchProblem::ClustersUnsupported);
            }
            if cluster.volume() == 0 {
                return Err(LaunchProblem::EmptyCluster { cluster });
            }
            for (i, (&c, &g)) in cluster.axes().iter().zip(&self.grid.axes()).enumerate() {
                if g % c != 0 {
                    return Err(LaunchProblem::ClusterDoesNotDivideGrid { axis: AXES[i], cluster: c, grid: g });
                }
            }
            if cluster.volume() > MAX_PORTABLE_CLUSTER_BLOCKS {
                return Err(LaunchProblem::ClusterTooLarge { blocks: cluster.volume(), max: MAX_PORTABLE_CLUSTER_BLOCKS });
            }
        }
        if self.cooperative && !limits.cooperative_launch {
            return Err(LaunchProblem::CooperativeUnsupported);
        }
        Ok(())
    }
}

/// A slice as a kernel receives it: device pointer and length.
///
/// An empty slice gets a dangling but non-null, aligned pointer, as Rust's references require;
/// the kernel never reads through it.
#[derive(Debug, Clone, Copy)]
#[doc(hidden)]
pub struct SliceArg {
    /// Device address.
    pub ptr: u64,
    /// Number of elements.
    pub len: usize,
}

impl SliceArg {
    /// The kernel argument for `slice`.
    #[inline]
    pub fn new<T>(slice: &DeviceSlice<T>) -> Self {
        Self::from_parts::<T>(slice.device_ptr(), slice.len())
    }

    /// The kernel argument for `len` elements of `T` at device address `ptr`.
    #[inline]
    pub fn from_parts<T>(ptr: u64, len: usize) -> Self {
        let ptr = if len == 0 { std::mem::align_of::<T>() as u64 } else { ptr };
        SliceArg { ptr, len }
    }
}

/// What the host expects of a kernel in a module: its symbol and the byte size of each PTX
/// parameter, in order. Generated by `#[kernel]` as `name::SIGNATURE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelSignature {
    /// The PTX symbol.
    pub symbol: &'static str,
    /// Byte size of each parameter as the PTX declares it (a slice is two: pointer, length).
    pub param_sizes: &'static [usize],
}

/// A type that can be passed to a kernel by value: plain data with no pointers to host
/// memory. Every `bytemuck::Pod` type is one (derive `Pod` on a `#[repr(C)]` struct).
///
/// # Safety
/// Every bit pattern of the type's bytes must be valid on the device, and it must hold no
/// host pointers (what `Pod` promises).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be passed to a kernel by value",
    label = "not plain data",
    note = "kernel parameters by value must be integers, floats, bool, or `#[repr(C)]` structs that derive `bytemuck::Pod` and `bytemuck::Zeroable`"
)]
pub unsafe trait KernelValue: Copy {}
// SAFETY: `Pod` is exactly the promise above.
unsafe impl<T: bytemuck::Pod> KernelValue for T {}

/// Compile-time check used by generated launchers: `T` may be passed by value.
#[doc(hidden)]
#[inline(always)]
pub fn require_kernel_value<T: KernelValue>() {}

/// The `void*` that `cuLaunchKernel` wants for one argument.
#[doc(hidden)]
#[inline(always)]
pub fn param_ptr<T>(value: &T) -> *mut c_void {
    value as *const T as *mut c_void
}

/// Launches `symbol` of an embedded module, loading the module into the stream's context on
/// first use.
///
/// # Safety
/// `params` must match the kernel's parameters in number, order and type, and every device
/// pointer among them must stay valid (and, for outputs, unaliased) until the kernel ends.
/// The `#[kernel]` launchers guarantee this from the kernel's own signature.
#[doc(hidden)]
#[inline]
pub unsafe fn launch_embedded(module: &'static EmbeddedModule, symbol: &'static str, stream: &Stream, config: LaunchConfig, params: &mut [*mut c_void]) -> Result<()> {
    let context = stream.context();
    config.validate(context.limits()).map_err(|problem| Error::InvalidLaunch { kernel: symbol.to_string(), problem })?;
    context.bind_to_thread()?;
    let function = context.embedded_function(module, symbol)?;
    // SAFETY: the function belongs to the bound context; the caller vouches for `params`.
    unsafe { launch_function(function, symbol, stream, &config, params) }
}

/// Launches the kernel `signature` names from an explicitly loaded `module`; the first launch
/// checks the module's kernel against the signature.
///
/// # Safety
/// As for [`launch_embedded`].
#[doc(hidden)]
#[inline]
pub unsafe fn launch_in_module(module: &Module, signature: &'static KernelSignature, stream: &Stream, config: LaunchConfig, params: &mut [*mut c_void]) -> Result<()> {
    let context = stream.context();
    if context.raw() != module.context().raw() {
        return Err(Error::WrongContext { kernel: signature.symbol.to_string(), module: module.name().to_string() });
    }
    config.validate(context.limits()).map_err(|problem| Error::InvalidLaunch { kernel: signature.symbol.to_string(), problem })?;
    context.bind_to_thread()?;
    let function = module.checked_function(signature)?;
    // SAFETY: the function belongs to the bound context; the caller vouches for `params`.
    unsafe { launch_function(function, signature.symbol, stream, &config, params) }
}

/// `cuLaunchKernel`, or `cuLaunchKernelEx` when the configuration has a cluster or is
/// cooperative. Allocates nothing: the extended attributes live on the stack.
///
/// # Safety
/// `function` belongs to the current context (the stream's); `params` as for
/// [`launch_embedded`].
#[inline]
pub(crate) unsafe fn launch_function(function: sys::CUfunction, symbol: &'static str, stream: &Stream, config: &LaunchConfig, params: &mut [*mut c_void]) -> Result<()> {
    if !config.is_extended() {
        // SAFETY: per this function's contract.
        let code = unsafe {
            sys::cuLaunchKernel(
                function,
                config.grid.x,
                config.grid.y,
                config.grid.z,
                config.block.x,
                config.block.y,
                config.block.z,
                config.shared_bytes,
                stream.raw(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        return Ok(check("cuLaunchKernel", code)?);
    }
    // SAFETY: an all-zero attribute is a valid (ignored) value of this plain C union.
    let mut attributes: [sys::CUlaunchAttribute; 2] = unsafe { std::mem::zeroed() };
    let mut count = 0;
    if let Some(cluster) = config.cluster {
        attributes[count].id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attributes[count].value.clusterDim = sys::CUlaunchAttributeValue_union__bindgen_ty_1 { x: cluster.x, y: cluster.y, z: cluster.z };
        count += 1;
    }
    if config.cooperative {
        attributes[count].id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
        attributes[count].value.cooperative = 1;
        count += 1;
    }
    let launch = sys::CUlaunchConfig {
        gridDimX: config.grid.x,
        gridDimY: config.grid.y,
        gridDimZ: config.grid.z,
        blockDimX: config.block.x,
        blockDimY: config.block.y,
        blockDimZ: config.block.z,
        sharedMemBytes: config.shared_bytes,
        hStream: stream.raw(),
        attrs: attributes.as_mut_ptr(),
        numAttrs: count as u32,
    };
    // SAFETY: `launch` and its attributes outlive the call; the rest per this function's contract.
    let code = unsafe { sys::cuLaunchKernelEx(&launch, function, params.as_mut_ptr(), std::ptr::null_mut()) };
    if code == sys::CUresult::CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE {
        // Only on this error path: say how many blocks would have fitted.
        return Err(cooperative_too_large(function, symbol, stream, config));
    }
    Ok(check("cuLaunchKernelEx", code)?)
}

/// The error for a cooperative grid larger than what fits on the device at once, with the
/// numbers from the occupancy API (or the driver's error when those cannot be had).
#[cold]
fn cooperative_too_large(function: sys::CUfunction, symbol: &str, stream: &Stream, config: &LaunchConfig) -> Error {
    let driver_error = || Error::Driver(crate::error::DriverError { call: "cuLaunchKernelEx", code: sys::CUresult::CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE });
    let mut per_sm = 0;
    let threads = config.block.volume().min(i32::MAX as u64) as i32;
    // SAFETY: writes one int; the function belongs to the bound context.
    let occupancy = unsafe { sys::cuOccupancyMaxActiveBlocksPerMultiprocessor(&mut per_sm, function, threads, config.shared_bytes as usize) };
    let Ok(sms) = stream.context().device().multiprocessor_count() else { return driver_error() };
    if occupancy != sys::CUresult::CUDA_SUCCESS {
        return driver_error();
    }
    let max = per_sm as u64 * sms as u64;
    Error::InvalidLaunch { kernel: symbol.to_string(), problem: LaunchProblem::CooperativeGridTooLarge { blocks: config.grid.volume(), max, per_sm: per_sm as u32, sms } }
}

/// The kernel `symbol` of an embedded module as loaded into `context` (loading it if needed),
/// for attributes and occupancy. Generated launchers expose it as `name::function(&context)`.
#[doc(hidden)]
pub fn embedded_function(module: &'static EmbeddedModule, symbol: &'static str, context: &Context) -> Result<Function> {
    context.bind_to_thread()?;
    let raw = context.embedded_function(module, symbol)?;
    Ok(Function::new(raw, symbol.to_string(), context.clone(), None))
}

#[cfg(test)]
mod tests {
    use super::*;

    const H100ISH: DeviceLimits = DeviceLimits {
        max_threads_per_block: 1024,
        max_block: [1024, 1024, 64],
        max_grid: [2147483647, 65535, 65535],
        max_shared_per_block: 232448,
        cluster_launch: true,
        cooperative_launch: true,
    };
    const VOLTAISH: DeviceLimits = DeviceLimits { cluster_launch: false, ..H100ISH };

    #[test]
    fn cluster_checks_name_the_problem() {
        let ok = LaunchConfig::new((8u32, 4u32), 128u32).with_cluster((2u32, 2u32));
        assert_eq!(ok.validate(&H100ISH), Ok(()));
        assert!(ok.is_extended() && !LaunchConfig::new(1u32, 1u32).is_extended());
        let cases: [(LaunchConfig, &DeviceLimits, &str); 4] = [
            (LaunchConfig::new(6u32, 32u32).with_cluster(4u32), &H100ISH, "cluster dimension x = 4 does not divide grid dimension x = 6"),
            (LaunchConfig::new(16u32, 32u32).with_cluster(16u32), &H100ISH, "a cluster of 16 blocks exceeds the portable limit of 8"),
            (LaunchConfig::new(4u32, 32u32).with_cluster((1u32, 0u32)), &H100ISH, "the cluster (1, 0, 1) has a zero dimension"),
            (ok, &VOLTAISH, "does not support thread-block clusters"),
        ];
        for (config, limits, expected) in cases {
            let message = config.validate(limits).unwrap_err().to_string();
            assert!(message.contains(expected), "{message:?} should contain {expected:?}");
        }
        let no_coop = DeviceLimits { cooperative_launch: false, ..H100ISH };
        assert_eq!(LaunchConfig::new(1u32, 32u32).cooperative().validate(&no_coop), Err(LaunchProblem::CooperativeUnsupported));
    }

    #[test]
    fn valid_configurations_pass() {
        assert_eq!(LaunchConfig::from((1000u32, 256u32)).validate(&H100ISH), Ok(()));
        assert_eq!(LaunchConfig::from(((4u32, 4u32), (16u32, 16u32, 4u32), 1024)).validate(&H100ISH), Ok(()));
    }

    #[test]
    fn each_limit_is_named() {
        let cases: [(LaunchConfig, &str); 6] = [
            (LaunchConfig::from((0u32, 256u32)), "grid (0, 1, 1) has a zero dimension"),
            (LaunchConfig::from((1u32, (0u32, 1u32))), "block (0, 1, 1) has a zero dimension"),
            (LaunchConfig::from((1u32, 2048u32)), "block dimension x = 2048 exceeds the device's limit of 1024"),
            (LaunchConfig::from((1u32, (64u32, 32u32))), "2048 threads exceeds the device's max threads per block (1024)"),
            (LaunchConfig::from(((1u32, 70000u32), 32u32)), "grid dimension y = 70000 exceeds the device's limit of 65535"),
            (LaunchConfig::from((1u32, 32u32, 300_000)), "300000 bytes of dynamic shared memory exceed"),
        ];
        for (config, expected) in cases {
            let message = config.validate(&H100ISH).unwrap_err().to_string();
            assert!(message.contains(expected), "{message:?} should contain {expected:?}");
        }
    }

    #[test]
    fn for_elements_rounds_up() {
        let config = LaunchConfig::for_elements(1000, 256);
        assert_eq!((config.grid.x, config.block.x), (4, 256));
        assert_eq!(LaunchConfig::for_elements(0, 256).grid.x, 1);
    }
}
