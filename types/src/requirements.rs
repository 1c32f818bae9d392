//! [`LaunchRequirements`]: what a kernel's parameter types require of its launch
//! configuration, checked once by every typed launcher (GPU and CPU) before the kernel runs.

use crate::config::LaunchConfig;
use crate::problem::LaunchProblem;

/// What a kernel's output parameters require of the launch, so that their witnesses are
/// unique without any check on the device.
///
/// The per-thread outputs (`DisjointSlice`, `DisjointChunks`, `DisjointPlanes`) are
/// partitioned by the 1-D thread index `blockIdx.x * blockDim.x + threadIdx.x`, computed in
/// `u32` on the device. That index names one thread only when the launch is 1-D (grid and
/// block have `y = z = 1`) and has at most `u32::MAX` threads; the generated launchers refuse
/// any other configuration of such a kernel ([`LaunchConfig::check_requirements`]).
///
/// The 2-D outputs add their own: `DisjointMatrix` needs a 2-D launch (`z = 1`) whose thread
/// counts along x and along y each fit in `u32` ([`PLANAR_THREADS`](Self::PLANAR_THREADS));
/// `PerBlockTile` needs blocks of exactly its thread shape in a 2-D grid
/// ([`tile_block`](Self::tile_block)); `PerWarpRow` needs a 1-D launch of whole warps
/// ([`LINEAR_WARPS`](Self::LINEAR_WARPS)); `DisjointSlice<T, Cells3d>` at most `u32::MAX`
/// threads along each axis of a 3-D launch ([`SPATIAL_THREADS`](Self::SPATIAL_THREADS));
/// `DisjointSlice<T, RowTiles>` 1-D blocks in a grid with `z = 1`
/// ([`LINEAR_BLOCKS`](Self::LINEAR_BLOCKS)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LaunchRequirements {
    /// The launch must be 1-D with at most `u32::MAX` threads.
    pub linear_threads: bool,
    /// Grid and block must have `z = 1`, and `gridDim.x * blockDim.x` and `gridDim.y *
    /// blockDim.y` must each be at most `u32::MAX`.
    pub planar_threads: bool,
    /// `gridDim * blockDim` must be at most `u32::MAX` along each of x, y and z (any `z`).
    pub spatial_threads: bool,
    /// `blockDim.x` must be a multiple of 32 (each warp lies in one row of threads).
    pub whole_warps: bool,
    /// Blocks must be 1-D (`blockDim = (x, 1, 1)`, so `threadIdx.x` names the thread in its
    /// block) and the grid have `z = 1` (so `(blockIdx.x, blockIdx.y)` names the block): the
    /// row-tile partition's launch (any grid x and y, any block size).
    pub linear_blocks: bool,
    /// The block must be exactly `(x, y, 1)` and the grid have `z = 1`; `(0, 0)` means any.
    pub block_shape: (u32, u32),
    /// Two outputs asked for different block shapes: no launch can satisfy both.
    pub conflicting_block_shapes: bool,
    /// At most this many threads per block (`#[kernel(launch_bounds(max))]`, PTX
    /// `.maxntid`); 0: no bound.
    pub max_block_threads: u32,
    /// Blocks of exactly `(n, 1, 1)` (`#[kernel(reqntid(n))]`, PTX `.reqntid`); 0: any.
    pub required_block_threads: u32,
    /// An output uses the in-place row phase barrier (`InPlaceRows`, hardware barrier 4),
    /// which is sound only when one output per kernel uses it: combining two such
    /// requirements ([`and`](Self::and)) fails to compile.
    pub row_phase: bool,
}

impl LaunchRequirements {
    /// No requirement.
    pub const NONE: Self = LaunchRequirements {
        linear_threads: false,
        planar_threads: false,
        spatial_threads: false,
        whole_warps: false,
        linear_blocks: false,
        block_shape: (0, 0),
        conflicting_block_shapes: false,
        max_block_threads: 0,
        required_block_threads: 0,
        row_phase: false,
    };
    /// A 1-D launch of at most `u32::MAX` threads.
    pub const LINEAR_THREADS: Self = LaunchRequirements { linear_threads: true, ..Self::NONE };
    /// A 2-D launch (`z = 1`) with at most `u32::MAX` threads along x and along y.
    pub const PLANAR_THREADS: Self = LaunchRequirements { planar_threads: true, ..Self::NONE };
    /// At most `u32::MAX` threads along each of x, y and z (a 3-D launch).
    pub const SPATIAL_THREADS: Self = LaunchRequirements { spatial_threads: true, ..Self::NONE };
    /// A 1-D launch of at most `u32::MAX` threads in blocks of whole warps.
    pub const LINEAR_WARPS: Self = LaunchRequirements { linear_threads: true, whole_warps: true, ..Self::NONE };
    /// 1-D blocks (`(x, 1, 1)`) in a grid with `z = 1` (any grid x and y).
    pub const LINEAR_BLOCKS: Self = LaunchRequirements { linear_blocks: true, ..Self::NONE };
    /// The output uses the in-place row phase barrier (one such output per kernel).
    pub const ROW_PHASE: Self = LaunchRequirements { row_phase: true, ..Self::NONE };

    /// Blocks of exactly `x * y` threads (`blockDim = (x, y, 1)`) in a grid with `z = 1`.
    #[must_use]
    pub const fn tile_block(x: u32, y: u32) -> Self {
        LaunchRequirements { block_shape: (x, y), ..Self::NONE }
    }

    /// Blocks of at most `max` threads: the kernel's `launch_bounds(max)` (PTX `.maxntid`),
    /// which a GPU enforces by refusing the launch (audit P11). The `#[kernel]` launchers,
    /// `launch_cpu` included, check it first.
    #[must_use]
    pub const fn launch_bounds(max: u32) -> Self {
        LaunchRequirements { max_block_threads: max, ..Self::NONE }
    }

    /// Blocks of exactly `(n, 1, 1)`: the kernel's `reqntid(n)` (PTX `.reqntid n, 1, 1`).
    #[must_use]
    pub const fn reqntid(n: u32) -> Self {
        LaunchRequirements { required_block_threads: n, max_block_threads: n, ..Self::NONE }
    }

    /// Both sets of requirements.
    ///
    /// # Panics
    /// (At compile time, in the `REQUIREMENTS` constant `#[kernel]` writes.) When both use the
    /// in-place row phase barrier: a kernel may have one `InPlaceRows` output.
    #[must_use]
    pub const fn and(self, other: Self) -> Self {
        assert!(
            !(self.row_phase && other.row_phase),
            "a kernel may have one `InPlaceRows` output: its phase barrier (hardware barrier 4) is sound only when each thread passes it once in the launch"
        );
        let (a, b) = (self.block_shape, other.block_shape);
        let a_any = a.0 == 0 && a.1 == 0;
        let b_any = b.0 == 0 && b.1 == 0;
        let conflict = !a_any && !b_any && (a.0 != b.0 || a.1 != b.1);
        LaunchRequirements {
            linear_threads: self.linear_threads || other.linear_threads,
            planar_threads: self.planar_threads || other.planar_threads,
            spatial_threads: self.spatial_threads || other.spatial_threads,
            whole_warps: self.whole_warps || other.whole_warps,
            linear_blocks: self.linear_blocks || other.linear_blocks,
            block_shape: if a_any { b } else { a },
            conflicting_block_shapes: self.conflicting_block_shapes || other.conflicting_block_shapes || conflict,
            max_block_threads: match (self.max_block_threads, other.max_block_threads) {
                (0, b) => b,
                (a, 0) => a,
                (a, b) if a < b => a,
                (_, b) => b,
            },
            required_block_threads: if self.required_block_threads == 0 { other.required_block_threads } else { self.required_block_threads },
            row_phase: self.row_phase || other.row_phase,
        }
    }
}

impl LaunchConfig {
    /// Checks the configuration against a kernel's [`LaunchRequirements`]. Every `#[kernel]`
    /// launcher (`launch`, `launch_in`, `launch_cpu`) calls it before anything else, so the
    /// device code can rely on it.
    ///
    /// # Errors
    /// [`LaunchProblem::NotOneDimensional`], [`LaunchProblem::TooManyThreadsForIndex`],
    /// [`LaunchProblem::NotTwoDimensional`], [`LaunchProblem::NotWholeWarps`],
    /// [`LaunchProblem::NotRowTileLaunch`], [`LaunchProblem::BlockShapeRequired`], [`LaunchProblem::ConflictingBlockShapes`],
    /// [`LaunchProblem::RequiredBlockThreads`] or [`LaunchProblem::AboveKernelThreadLimit`].
    #[inline]
    pub fn check_requirements(&self, requirements: LaunchRequirements) -> Result<(), LaunchProblem> {
        let (grid, block) = (self.grid, self.block);
        if requirements.conflicting_block_shapes {
            return Err(LaunchProblem::ConflictingBlockShapes);
        }
        if requirements.linear_threads {
            if grid.y != 1 || grid.z != 1 || block.y != 1 || block.z != 1 {
                return Err(LaunchProblem::NotOneDimensional { grid, block });
            }
            let threads = u64::from(grid.x) * u64::from(block.x);
            if threads > u64::from(u32::MAX) {
                return Err(LaunchProblem::TooManyThreadsForIndex { threads, max: u64::from(u32::MAX) });
            }
        }
        if requirements.planar_threads {
            if grid.z != 1 || block.z != 1 {
                return Err(LaunchProblem::NotTwoDimensional { grid, block });
            }
            for (axis, g, b) in [("x", grid.x, block.x), ("y", grid.y, block.y)] {
                let threads = u64::from(g) * u64::from(b);
                if threads > u64::from(u32::MAX) {
                    return Err(LaunchProblem::TooManyThreadsAlongAxis { axis, threads, max: u64::from(u32::MAX) });
                }
            }
        }
        if requirements.spatial_threads {
            for (axis, g, b) in [("x", grid.x, block.x), ("y", grid.y, block.y), ("z", grid.z, block.z)] {
                let threads = u64::from(g) * u64::from(b);
                if threads > u64::from(u32::MAX) {
                    return Err(LaunchProblem::TooManyThreadsAlongAxis { axis, threads, max: u64::from(u32::MAX) });
                }
            }
        }
        if requirements.linear_blocks && (block.y != 1 || block.z != 1 || grid.z != 1) {
            return Err(LaunchProblem::NotRowTileLaunch { grid, block });
        }
        if requirements.whole_warps && !block.x.is_multiple_of(32) {
            return Err(LaunchProblem::NotWholeWarps { block });
        }
        let required = requirements.required_block_threads;
        if required != 0 && (block.x != required || block.y != 1 || block.z != 1) {
            return Err(LaunchProblem::RequiredBlockThreads { required: crate::Dim3 { x: required, y: 1, z: 1 }, block });
        }
        let max = requirements.max_block_threads;
        if max != 0 && block.volume() > u64::from(max) {
            return Err(LaunchProblem::AboveKernelThreadLimit { threads: block.volume(), max, source: "launch_bounds" });
        }
        let (x, y) = requirements.block_shape;
        if (x, y) != (0, 0) && (block.x != x || block.y != y || block.z != 1 || grid.z != 1) {
            return Err(LaunchProblem::BlockShapeRequired { required: crate::Dim3 { x, y, z: 1 }, grid, block });
        }
        Ok(())
    }
}

/// Checks that the slices of a `#[kernel(same_len(a, b, ..))]` group have one length: the
/// device code then uses the first one's length for all of them. `lengths` pairs each
/// parameter's name with its length, the first being the group's reference.
///
/// # Errors
/// [`LaunchProblem::LengthsDiffer`] naming the first parameter whose length differs.
#[inline]
pub fn same_lengths(lengths: &[(&'static str, usize)]) -> Result<(), LaunchProblem> {
    let Some(&(first, first_len)) = lengths.first() else { return Ok(()) };
    match lengths.iter().find(|(_, len)| *len != first_len) {
        None => Ok(()),
        Some(&(other, other_len)) => Err(LaunchProblem::LengthsDiffer { first, first_len: first_len as u64, other, other_len: other_len as u64 }),
    }
}

/// What an output parameter asks of its launch, as the host's launch checks it itself
/// (session 19, audit 2026-11-28e's G18S-1): the output's [`LaunchRequirements`] and its
/// launch-time bound over the launch, the buffer's length and the output's shape.
///
/// Shared by the device crate, which implements it for its output type (`DisjointSlice<T, P>`,
/// the same facts as its `KernelOutput`), and the host crate, whose GPU launch reads an
/// output's facts from the parameter made by `OutputArg::new::<O>` (bounded by this trait):
/// the `#[kernel]` launchers name their checks through paths the kernel's crate can rename
/// (`extern crate self as ferrocuda_host;`), and a check made through such a path protects
/// nothing, so the launch checks what the output's own type says.
///
/// # Safety
/// The output type hands its elements to the threads of a launch disjointly (or atomically)
/// whenever the launch meets [`REQUIREMENTS`](Self::REQUIREMENTS) and
/// [`check_launch`](Self::check_launch) accepts it, with one `shape` for every thread.
#[doc(hidden)]
pub unsafe trait OutputLaunch {
    /// What the output needs besides its buffer (`()`, a row width, or two values).
    type Shape: Copy + PartialEq + Send + Sync + 'static;
    /// What the launch configuration must satisfy.
    const REQUIREMENTS: LaunchRequirements;
    /// The output's launch-time bound over the configuration, the buffer's length in elements
    /// and the shape; `output` names the parameter in the error.
    ///
    /// # Errors
    /// The [`LaunchProblem`] the output's partition names.
    fn check_launch(output: &'static str, config: &LaunchConfig, len: usize, shape: Self::Shape) -> Result<(), LaunchProblem>;

    /// Both checks, in the launchers' order.
    ///
    /// # Errors
    /// As [`LaunchConfig::check_requirements`], then [`check_launch`](Self::check_launch).
    #[inline]
    fn check(output: &'static str, config: &LaunchConfig, len: usize, shape: Self::Shape) -> Result<(), LaunchProblem> {
        config.check_requirements(Self::REQUIREMENTS)?;
        Self::check_launch(output, config, len, shape)
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::string::ToString;

    use super::*;
    use crate::Dim3;

    /// Issue 30, `InPlaceRows`: its phase barrier is sound only when each thread passes it
    /// once, so two such outputs in one kernel are refused (at compile time in `#[kernel]`'s
    /// `REQUIREMENTS` constant; here, called at run time, a panic).
    #[test]
    #[should_panic(expected = "one `InPlaceRows` output")]
    fn p30_two_in_place_row_outputs_in_one_kernel_are_refused() {
        let one = LaunchRequirements::LINEAR_THREADS.and(LaunchRequirements::ROW_PHASE);
        assert!(one.row_phase && one.linear_threads);
        let _ = std::hint::black_box(one).and(LaunchRequirements::ROW_PHASE);
    }

    #[test]
    fn linear_threads_needs_a_1d_launch_of_at_most_u32_max_threads() {
        let need = LaunchRequirements::NONE.and(LaunchRequirements::LINEAR_THREADS);
        assert!(LaunchConfig::new(4u32, 256u32).check_requirements(need).is_ok());
        assert!(LaunchConfig::new(i32::MAX as u32, 1u32).check_requirements(need).is_ok());
        let two_d = LaunchConfig::new(Dim3 { x: 2, y: 2, z: 1 }, 32u32);
        assert!(matches!(two_d.check_requirements(need), Err(LaunchProblem::NotOneDimensional { .. })));
        assert!(two_d.check_requirements(LaunchRequirements::NONE).is_ok());
        let block_2d = LaunchConfig::new(1u32, Dim3 { x: 8, y: 1, z: 2 });
        assert!(matches!(block_2d.check_requirements(need), Err(LaunchProblem::NotOneDimensional { .. })));
        let huge = LaunchConfig::new(i32::MAX as u32, 4u32);
        let problem = huge.check_requirements(need).unwrap_err();
        assert_eq!(problem, LaunchProblem::TooManyThreadsForIndex { threads: i32::MAX as u64 * 4, max: u32::MAX as u64 });
        assert!(problem.to_string().contains("4294967295"), "{problem}");
    }

    #[test]
    fn planar_threads_needs_z_1_and_each_axis_within_u32() {
        let need = LaunchRequirements::PLANAR_THREADS;
        assert!(LaunchConfig::new(Dim3 { x: 64, y: 64, z: 1 }, Dim3 { x: 32, y: 8, z: 1 }).check_requirements(need).is_ok());
        let three_d = LaunchConfig::new(Dim3 { x: 2, y: 2, z: 2 }, 32u32);
        assert!(matches!(three_d.check_requirements(need), Err(LaunchProblem::NotTwoDimensional { .. })));
        let block_z = LaunchConfig::new(2u32, Dim3 { x: 8, y: 1, z: 2 });
        assert!(matches!(block_z.check_requirements(need), Err(LaunchProblem::NotTwoDimensional { .. })));
        // 2^31 - 1 blocks of 4 along x: more than u32::MAX threads along x.
        let wide = LaunchConfig::new(Dim3 { x: i32::MAX as u32, y: 1, z: 1 }, Dim3 { x: 4, y: 1, z: 1 });
        let problem = wide.check_requirements(need).unwrap_err();
        assert_eq!(problem, LaunchProblem::TooManyThreadsAlongAxis { axis: "x", threads: i32::MAX as u64 * 4, max: u32::MAX as u64 });
        assert!(problem.to_string().contains("along x"), "{problem}");
    }

    #[test]
    fn whole_warps_and_block_shapes_are_checked_and_conflicts_refused() {
        let warps = LaunchRequirements::LINEAR_WARPS;
        assert!(LaunchConfig::new(4u32, 256u32).check_requirements(warps).is_ok());
        assert!(matches!(LaunchConfig::new(4u32, 48u32).check_requirements(warps), Err(LaunchProblem::NotWholeWarps { .. })));
        let tile = LaunchRequirements::tile_block(32, 8);
        assert!(LaunchConfig::new(Dim3 { x: 4, y: 4, z: 1 }, Dim3 { x: 32, y: 8, z: 1 }).check_requirements(tile).is_ok());
        for (grid, block) in [(Dim3 { x: 4, y: 4, z: 1 }, Dim3 { x: 8, y: 32, z: 1 }), (Dim3 { x: 4, y: 4, z: 2 }, Dim3 { x: 32, y: 8, z: 1 })] {
            assert!(matches!(LaunchConfig::new(grid, block).check_requirements(tile), Err(LaunchProblem::BlockShapeRequired { .. })), "{grid} {block}");
        }
        assert_eq!(tile.and(LaunchRequirements::tile_block(32, 8)), tile);
        let both = tile.and(LaunchRequirements::tile_block(16, 16));
        assert!(both.conflicting_block_shapes);
        let any = LaunchConfig::new(Dim3 { x: 4, y: 4, z: 1 }, Dim3 { x: 32, y: 8, z: 1 });
        assert_eq!(any.check_requirements(both), Err(LaunchProblem::ConflictingBlockShapes));
        assert_eq!(LaunchRequirements::NONE.and(tile), tile);
    }

    /// Regression (audit P11): a `launch_bounds(64)` kernel launched with 128 threads got
    /// `CUDA_ERROR_INVALID_VALUE` from the driver and ran on the CPU executor.
    #[test]
    fn p11_launch_bounds_and_reqntid_are_launch_requirements() {
        let bounded = LaunchRequirements::LINEAR_THREADS.and(LaunchRequirements::launch_bounds(64));
        assert!(LaunchConfig::new(4u32, 64u32).check_requirements(bounded).is_ok());
        assert!(LaunchConfig::new(4u32, 32u32).check_requirements(bounded).is_ok());
        let problem = LaunchConfig::new(2u32, 128u32).check_requirements(bounded).unwrap_err();
        assert_eq!(problem, LaunchProblem::AboveKernelThreadLimit { threads: 128, max: 64, source: "launch_bounds" });
        assert!(problem.to_string().contains("launch bounds of 64 threads per block"), "{problem}");
        let block_3d = LaunchConfig::new(1u32, Dim3 { x: 8, y: 8, z: 2 });
        assert!(matches!(block_3d.check_requirements(LaunchRequirements::launch_bounds(64)), Err(LaunchProblem::AboveKernelThreadLimit { threads: 128, .. })));
        assert_eq!(LaunchRequirements::launch_bounds(256).and(LaunchRequirements::launch_bounds(64)).max_block_threads, 64);
        let exact = LaunchRequirements::reqntid(128);
        assert!(LaunchConfig::new(4u32, 128u32).check_requirements(exact).is_ok());
        for block in [Dim3 { x: 64, y: 1, z: 1 }, Dim3 { x: 128, y: 2, z: 1 }, Dim3 { x: 64, y: 2, z: 1 }] {
            let problem = LaunchConfig::new(1u32, block).check_requirements(exact).unwrap_err();
            assert!(matches!(problem, LaunchProblem::RequiredBlockThreads { .. }), "{block}: {problem}");
            assert!(problem.to_string().contains("reqntid(128)"), "{problem}");
        }
    }

    #[test]
    fn spatial_threads_allows_3d_launches_with_each_axis_within_u32() {
        let need = LaunchRequirements::SPATIAL_THREADS;
        assert!(LaunchConfig::new(Dim3 { x: 4, y: 3, z: 5 }, Dim3 { x: 32, y: 4, z: 2 }).check_requirements(need).is_ok());
        let wide = LaunchConfig::new(Dim3 { x: i32::MAX as u32, y: 1, z: 2 }, Dim3 { x: 4, y: 1, z: 1 });
        let problem = wide.check_requirements(need).unwrap_err();
        assert_eq!(problem, LaunchProblem::TooManyThreadsAlongAxis { axis: "x", threads: i32::MAX as u64 * 4, max: u32::MAX as u64 });
        assert_eq!(need.and(LaunchRequirements::NONE), need);
    }

    /// Issue 30 (ports5 finding 3): the row-tile partition (block `(x, y)` owns tile `y` of
    /// row `x`) needs 1-D blocks in a grid with `z = 1`, and nothing else.
    #[test]
    fn p30_linear_blocks_needs_1d_blocks_in_a_grid_with_z_1() {
        let need = LaunchRequirements::LINEAR_BLOCKS;
        assert!(LaunchConfig::new(Dim3 { x: 64, y: 3, z: 1 }, 1024u32).check_requirements(need).is_ok());
        assert!(LaunchConfig::new(Dim3 { x: i32::MAX as u32, y: 65_535, z: 1 }, 1024u32).check_requirements(need).is_ok());
        for (grid, block) in [
            (Dim3 { x: 4, y: 2, z: 1 }, Dim3 { x: 32, y: 2, z: 1 }),
            (Dim3 { x: 4, y: 2, z: 1 }, Dim3 { x: 32, y: 1, z: 2 }),
            (Dim3 { x: 4, y: 2, z: 2 }, Dim3 { x: 32, y: 1, z: 1 }),
        ] {
            let problem = LaunchConfig::new(grid, block).check_requirements(need).unwrap_err();
            assert_eq!(problem, LaunchProblem::NotRowTileLaunch { grid, block });
            assert!(problem.to_string().contains("RowTiles"), "{problem}");
        }
        assert!(need.and(LaunchRequirements::NONE).linear_blocks);
        assert!(LaunchRequirements::NONE.and(need).linear_blocks);
    }

    #[test]
    fn same_lengths_names_the_first_that_differs() {
        assert!(same_lengths(&[("x", 4), ("y", 4), ("z", 4)]).is_ok());
        let problem = same_lengths(&[("x", 4), ("y", 4), ("z", 5)]).unwrap_err();
        assert_eq!(problem, LaunchProblem::LengthsDiffer { first: "x", first_len: 4, other: "z", other_len: 5 });
        assert!(problem.to_string().contains("same_len"), "{problem}");
    }
}
