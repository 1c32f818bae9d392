//! [`LaunchConfig`]: CUDA's `<<<grid, block, shared>>>` plus the extended launch's options.

use crate::dim3::Dim3;
use crate::problem::LaunchProblem;

/// Grid, block and dynamic shared memory of one launch: CUDA's `<<<grid, block, shared>>>`,
/// plus the extended launch's thread-block cluster and cooperative flag.
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
}

impl LaunchConfig {
    /// A configuration of `grid` blocks of `block` threads, without shared memory or clusters.
    pub fn new(grid: impl Into<Dim3>, block: impl Into<Dim3>) -> Self {
        LaunchConfig { grid: grid.into(), block: block.into(), shared_bytes: 0, cluster: None, cooperative: false }
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
