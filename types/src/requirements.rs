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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LaunchRequirements {
    /// The launch must be 1-D with at most `u32::MAX` threads.
    pub linear_threads: bool,
}

impl LaunchRequirements {
    /// No requirement.
    pub const NONE: Self = LaunchRequirements { linear_threads: false };
    /// A 1-D launch of at most `u32::MAX` threads.
    pub const LINEAR_THREADS: Self = LaunchRequirements { linear_threads: true };

    /// Both sets of requirements.
    #[must_use]
    pub const fn and(self, other: Self) -> Self {
        LaunchRequirements { linear_threads: self.linear_threads || other.linear_threads }
    }
}

impl LaunchConfig {
    /// Checks the configuration against a kernel's [`LaunchRequirements`]. Every `#[kernel]`
    /// launcher (`launch`, `launch_in`, `launch_cpu`) calls it before anything else, so the
    /// device code can rely on it.
    ///
    /// # Errors
    /// [`LaunchProblem::NotOneDimensional`] or [`LaunchProblem::TooManyThreadsForIndex`].
    #[inline]
    pub fn check_requirements(&self, requirements: LaunchRequirements) -> Result<(), LaunchProblem> {
        if !requirements.linear_threads {
            return Ok(());
        }
        let (grid, block) = (self.grid, self.block);
        if grid.y != 1 || grid.z != 1 || block.y != 1 || block.z != 1 {
            return Err(LaunchProblem::NotOneDimensional { grid, block });
        }
        let threads = u64::from(grid.x) * u64::from(block.x);
        if threads > u64::from(u32::MAX) {
            return Err(LaunchProblem::TooManyThreadsForIndex { threads, max: u64::from(u32::MAX) });
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

#[cfg(test)]
mod tests {
    extern crate std;
    use std::string::ToString;

    use super::*;
    use crate::Dim3;

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
    fn same_lengths_names_the_first_that_differs() {
        assert!(same_lengths(&[("x", 4), ("y", 4), ("z", 4)]).is_ok());
        let problem = same_lengths(&[("x", 4), ("y", 4), ("z", 5)]).unwrap_err();
        assert_eq!(problem, LaunchProblem::LengthsDiffer { first: "x", first_len: 4, other: "z", other_len: 5 });
        assert!(problem.to_string().contains("same_len"), "{problem}");
    }
}
