//! [`LaunchConfig`]: CUDA's `<<<grid, block, shared>>>` plus the extended launch's options.

use crate::dim3::Dim3;
use crate::problem::LaunchProblem;

/// Grid, block and dynamic shared memory of one launch: CUDA's `<<<grid, block, shared>>>`,
/// plus the extended launch's thread-block cluster, cooperative flag and programmatic
/// dependent launch.
///
/// Build one with [`LaunchConfig::new`], [`LaunchConfig::for_elements`] or from a tuple
/// (`(grid, block)`, `(grid, block, shared_bytes)`), then the `with_*` methods. Grid, block,
/// shared memory, cluster and the cooperative flag are public fields; programmatic dependent
/// launch is not, because enabling it is `unsafe`
/// ([`LaunchConfig::with_programmatic_dependent_launch`]), so a configuration is built with
/// these functions rather than a struct literal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
    /// Programmatic dependent launch (`CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`).
    /// Private: only [`LaunchConfig::with_programmatic_dependent_launch`], an `unsafe fn`,
    /// sets it.
    programmatic_dependent_launch: bool,
}

impl LaunchConfig {
    /// A configuration of `grid` blocks of `block` threads, without shared memory or clusters.
    pub fn new(grid: impl Into<Dim3>, block: impl Into<Dim3>) -> Self {
        LaunchConfig { grid: grid.into(), block: block.into(), shared_bytes: 0, cluster: None, cooperative: false, programmatic_dependent_launch: false }
    }

    /// A 1-D configuration covering `n` elements with `block` threads per block.
    ///
    /// When `n` needs more than `u32::MAX` blocks the grid is clamped to `u32::MAX` blocks,
    /// and the launch is refused with a message that names this function; use
    /// [`LaunchConfig::try_for_elements`] to get that error here, or a grid-stride loop.
    pub fn for_elements(n: usize, block: u32) -> Self {
        Self::try_for_elements(n, block).unwrap_or_else(|_| Self::new(u32::MAX, block))
    }

    /// A 1-D configuration covering `n` elements with `block` threads per block, or
    /// [`LaunchProblem::TooManyElements`] when that needs more than `u32::MAX` blocks.
    pub fn try_for_elements(n: usize, block: u32) -> Result<Self, LaunchProblem> {
        let blocks = n.div_ceil(block.max(1) as usize).max(1);
        match u32::try_from(blocks) {
            Ok(blocks) => Ok(Self::new(blocks, block)),
            Err(_) => Err(LaunchProblem::TooManyElements { elements: n as u64, block }),
        }
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

    /// This configuration for a kernel compiled with the cluster shape `compiled`
    /// (`#[kernel(cluster_dims(..))]`; `None`: no compiled shape, the configuration as it is).
    /// A configuration without a cluster gets the compiled one, so that the usual checks
    /// (the grid a multiple of the cluster, the device able to launch clusters) apply and the
    /// CPU executor forms the same clusters as the GPU; one with another cluster is refused.
    /// The typed launchers call it.
    ///
    /// # Errors
    /// [`LaunchProblem::ClusterDiffersFromCompiled`] when the configuration's cluster differs.
    #[inline]
    pub fn for_compiled_cluster(self, compiled: Option<Dim3>) -> Result<Self, LaunchProblem> {
        match (compiled, self.cluster) {
            (None, _) => Ok(self),
            (Some(compiled), None) => Ok(self.with_cluster(compiled)),
            (Some(compiled), Some(requested)) if requested == compiled => Ok(self),
            (Some(compiled), Some(requested)) => Err(LaunchProblem::ClusterDiffersFromCompiled { compiled, requested }),
        }
    }

    /// The same configuration as a cooperative launch (`cuLaunchKernelEx` with the
    /// cooperative attribute): the grid must fit on the device at once.
    #[must_use]
    pub fn cooperative(mut self) -> Self {
        self.cooperative = true;
        self
    }

    /// The same configuration as a programmatic dependent launch (sm_90 and newer;
    /// `cuLaunchKernelEx` with `CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`): the
    /// kernel may start before the previous kernel on its stream has finished, once every
    /// block of that kernel has called `ferrocuda_device::grid_dependency::launch_dependents()`
    /// (or exited). This hides the launch latency of this kernel, and the tail of the previous
    /// one, behind the previous kernel's last blocks. The kernel itself calls
    /// `ferrocuda_device::grid_dependency::wait_for_prerequisites()`, which returns once the
    /// earlier kernels have completed and their writes are visible.
    ///
    /// ```
    /// # use ferrocuda_types::LaunchConfig;
    /// // SAFETY: the kernel launched with this configuration calls `wait_for_prerequisites()`
    /// // in every thread before it touches any memory.
    /// let config = unsafe { LaunchConfig::for_elements(1 << 20, 256).with_programmatic_dependent_launch() };
    /// assert!(config.programmatic_dependent_launch() && config.is_extended());
    /// ```
    ///
    /// On devices older than sm_90 the driver accepts the attribute and the launch is ordered
    /// as usual (the CUDA Programming Guide: these APIs "require at least compute capability
    /// 9.0 to provide overlapping execution"); `griddepcontrol` itself needs sm_90 PTX, so a
    /// kernel that calls the `grid_dependency` functions is built for sm_90 or newer.
    ///
    /// # Safety
    /// With this attribute the stream no longer orders the kernel after the work queued
    /// before it; the kernel does so itself. So every thread of the kernel launched with this
    /// configuration must call `wait_for_prerequisites()`
    /// - before it reads or writes any memory that work queued earlier on the stream (or that
    ///   the stream was made to wait for, e.g. by ferrocuda's ordering of buffers used on other
    ///   streams) writes: a read before the wait may see stale data;
    /// - before it writes any memory that such earlier work reads or writes: a write before the
    ///   wait may change the earlier kernel's input or be overwritten by it;
    /// - and before it returns, so that the kernel cannot finish before the work it overlaps
    ///   has (work queued after it, and `Stream::synchronize`, rely on that ordering).
    ///
    /// Calling `wait_for_prerequisites()` as the first statement of the kernel always meets
    /// this contract; work before it may only touch memory no earlier kernel uses (compute,
    /// shared memory, loads of data nothing on the device writes). A kernel that never calls
    /// it must not be launched with this configuration. What the previous kernel does with
    /// `launch_dependents()` is not part of the contract: it is only a hint when to start.
    #[must_use]
    pub unsafe fn with_programmatic_dependent_launch(mut self) -> Self {
        self.programmatic_dependent_launch = true;
        self
    }

    /// True when the launch is a programmatic dependent launch
    /// ([`LaunchConfig::with_programmatic_dependent_launch`]).
    pub fn programmatic_dependent_launch(&self) -> bool {
        self.programmatic_dependent_launch
    }

    /// True when the launch needs `cuLaunchKernelEx` (clusters, cooperative or programmatic
    /// dependent launch).
    pub fn is_extended(&self) -> bool {
        self.cluster.is_some() || self.cooperative || self.programmatic_dependent_launch
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

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::string::ToString;

    #[test]
    fn a_compiled_cluster_fills_in_a_missing_one_and_refuses_another() {
        let plain = LaunchConfig::new(8u32, 64u32);
        let pair = Dim3::from(2u32);
        assert_eq!(plain.for_compiled_cluster(None), Ok(plain));
        assert_eq!(plain.with_cluster(4u32).for_compiled_cluster(None), Ok(plain.with_cluster(4u32)));
        assert_eq!(plain.for_compiled_cluster(Some(pair)), Ok(plain.with_cluster(pair)));
        assert_eq!(plain.with_cluster(pair).for_compiled_cluster(Some(pair)), Ok(plain.with_cluster(pair)));
        let refused = plain.with_cluster(4u32).for_compiled_cluster(Some(pair)).unwrap_err();
        assert_eq!(refused, LaunchProblem::ClusterDiffersFromCompiled { compiled: pair, requested: Dim3::from(4u32) });
        assert!(refused.to_string().contains("compiled for clusters of (2, 1, 1) blocks") && refused.to_string().contains("asks for (4, 1, 1)"), "{refused}");
    }

    #[test]
    fn programmatic_dependent_launch_is_off_unless_asked_for_and_kept_by_the_builders() {
        let plain = LaunchConfig::new(4u32, 32u32);
        assert!(!plain.programmatic_dependent_launch() && !plain.is_extended());
        let from_tuple: LaunchConfig = (4u32, 32u32, 128u32).into();
        assert!(!from_tuple.programmatic_dependent_launch());
        assert!(!LaunchConfig::for_elements(1000, 128).programmatic_dependent_launch());
        // SAFETY: a test of the flag only; nothing is launched.
        let pdl = unsafe { plain.with_programmatic_dependent_launch() };
        assert!(pdl.programmatic_dependent_launch() && pdl.is_extended());
        assert_ne!(pdl, plain);
        let pdl = pdl.with_shared_bytes(64).with_cluster(2u32).cooperative();
        assert!(pdl.programmatic_dependent_launch() && pdl.cooperative && pdl.cluster.is_some() && pdl.shared_bytes == 64);
    }
}
