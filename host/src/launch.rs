//! Launch configurations, their validation against device limits, and the launch itself.

use std::ffi::c_void;
use std::fmt;

use cudarc::driver::sys;

use crate::driver::check;
use crate::embedded::EmbeddedModule;
use crate::error::{Error, Result};
use crate::memory::DeviceSlice;
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

/// Grid, block and dynamic shared memory of one launch: CUDA's `<<<grid, block, shared>>>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks in the grid.
    pub grid: Dim3,
    /// Threads in a block.
    pub block: Dim3,
    /// Bytes of dynamic shared memory per block.
    pub shared_bytes: u32,
}

impl LaunchConfig {
    /// A 1-D configuration covering `n` elements with `block` threads per block.
    pub fn for_elements(n: usize, block: u32) -> Self {
        let blocks = n.div_ceil(block.max(1) as usize).max(1);
        LaunchConfig { grid: Dim3::from(u32::try_from(blocks).unwrap_or(u32::MAX)), block: block.into(), shared_bytes: 0 }
    }
}

impl<G: Into<Dim3>, B: Into<Dim3>> From<(G, B)> for LaunchConfig {
    fn from((grid, block): (G, B)) -> Self {
        LaunchConfig { grid: grid.into(), block: block.into(), shared_bytes: 0 }
    }
}

impl<G: Into<Dim3>, B: Into<Dim3>> From<(G, B, u32)> for LaunchConfig {
    fn from((grid, block, shared_bytes): (G, B, u32)) -> Self {
        LaunchConfig { grid: grid.into(), block: block.into(), shared_bytes }
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
}

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
        let ptr = if slice.is_empty() { std::mem::align_of::<T>() as u64 } else { slice.device_ptr() };
        SliceArg { ptr, len: slice.len() }
    }
}

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
pub unsafe fn launch_embedded(module: &'static EmbeddedModule, symbol: &'static str, stream: &Stream, config: LaunchConfig, params: &mut [*mut c_void]) -> Result<()> {
    let context = stream.context();
    config.validate(context.limits()).map_err(|problem| Error::InvalidLaunch { kernel: symbol.to_string(), problem })?;
    context.bind_to_thread()?;
    let function = context.embedded_function(module, symbol)?;
    // SAFETY: the function belongs to the bound context; the caller vouches for `params`.
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
    check("cuLaunchKernel", code)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const H100ISH: DeviceLimits = DeviceLimits { max_threads_per_block: 1024, max_block: [1024, 1024, 64], max_grid: [2147483647, 65535, 65535], max_shared_per_block: 232448 };

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
