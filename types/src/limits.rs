//! [`DeviceLimits`] and the validation of a [`LaunchConfig`] against them, which names the
//! limit a configuration breaks ([`LaunchProblem`]).

use crate::config::LaunchConfig;
use crate::problem::LaunchProblem;

/// The device limits a launch is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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

/// CUDA's maximum of local memory per thread (512 KiB on every architecture since sm_20, the
/// CUDA C++ Programming Guide's table of technical specifications). A kernel needs less than
/// this: the driver's stack limit stays below it (an H200 accepted 520,192 bytes and refused
/// 524,288), and an H100 and an H200 refused a kernel of exactly 512 KiB (audit 2026-11-27b,
/// Q7), so launchers refuse `bytes >= limit`.
pub const MAX_LOCAL_BYTES_PER_THREAD: u64 = 512 * 1024;

/// Most blocks a cluster may have without the non-portable opt-in (CUDA's portable limit).
pub const MAX_PORTABLE_CLUSTER_BLOCKS: u64 = 8;

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

    /// Checks the kernel's `static_bytes` of static shared memory plus this launch's dynamic
    /// shared memory against the device's limit per block, which covers both (audit
    /// 2026-11-27c, F7: 48000 static + 190 KiB dynamic passed a check of the dynamic part
    /// alone).
    pub fn validate_total_shared(&self, static_bytes: u32, limits: &DeviceLimits) -> Result<(), LaunchProblem> {
        if static_bytes as u64 + self.shared_bytes as u64 > limits.max_shared_per_block as u64 {
            return Err(LaunchProblem::SharedMemoryTotalTooLarge { static_bytes, dynamic_bytes: self.shared_bytes, max: limits.max_shared_per_block });
        }
        Ok(())
    }

    /// Checks the dynamic shared memory against a kernel's current limit (its
    /// `max_dynamic_shared_bytes` attribute, 48 KiB unless raised), after
    /// [`LaunchConfig::validate`] checked it against the device's.
    pub fn validate_kernel_shared(&self, kernel_max: u32, limits: &DeviceLimits) -> Result<(), LaunchProblem> {
        if self.shared_bytes > kernel_max {
            return Err(LaunchProblem::SharedMemoryAboveKernelMax { requested: self.shared_bytes, kernel_max, device_max: limits.max_shared_per_block });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::string::ToString;

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

    /// F7 (audit 2026-11-27c): static and dynamic shared memory together are checked against
    /// the per-block limit, naming both parts and what would fit.
    #[test]
    fn f7_static_plus_dynamic_shared_memory_over_the_block_limit_is_refused() {
        let config = LaunchConfig::new(1u32, 32u32).with_shared_bytes(190 * 1024);
        assert_eq!(config.validate(&H100ISH), Ok(()), "the dynamic part alone fits");
        let problem = config.validate_total_shared(48000, &H100ISH).unwrap_err();
        assert_eq!(problem, LaunchProblem::SharedMemoryTotalTooLarge { static_bytes: 48000, dynamic_bytes: 190 * 1024, max: 232448 });
        let message = problem.to_string();
        assert!(message.contains("48000 bytes of static") && message.contains("194560 bytes of dynamic") && message.contains("(232448 bytes"), "{message}");
        assert!(message.contains("at most 184448 bytes of dynamic"), "{message}");
        assert_eq!(config.validate_total_shared(232448 - 190 * 1024, &H100ISH), Ok(()), "exactly the limit fits");
    }

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

    /// E7: `for_elements(usize::MAX, 256)` clamped silently and the error named only a grid of
    /// 4294967295 blocks.
    #[test]
    fn for_elements_overflow_is_named() {
        let problem = LaunchConfig::try_for_elements(usize::MAX, 256).unwrap_err();
        assert!(matches!(problem, LaunchProblem::TooManyElements { block: 256, .. }));
        assert!(problem.to_string().contains("grid-stride loop"), "{problem}");
        let clamped = LaunchConfig::for_elements(usize::MAX, 256);
        let message = clamped.validate(&H100ISH).unwrap_err().to_string();
        assert!(message.contains("`LaunchConfig::for_elements` clamps"), "{message}");
    }

    /// E2: dynamic shared memory above the kernel's 48 KiB default passed validation against
    /// the device's opt-in maximum, and the driver answered CUDA_ERROR_INVALID_VALUE.
    #[test]
    fn shared_memory_above_the_kernel_max_names_the_setter() {
        let config = LaunchConfig::new(1u32, 32u32).with_shared_bytes(100_000);
        assert_eq!(config.validate(&H100ISH), Ok(()));
        let message = config.validate_kernel_shared(48 * 1024, &H100ISH).unwrap_err().to_string();
        assert!(message.contains("set_max_dynamic_shared_bytes(100000)") && message.contains("49152"), "{message}");
        assert_eq!(config.validate_kernel_shared(100_000, &H100ISH), Ok(()));
    }
}
