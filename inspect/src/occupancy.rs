//! Theoretical occupancy from a kernel's registers and shared memory, computed as CUDA's
//! occupancy calculator does, from the per-SM limits NVIDIA documents for each compute
//! capability (CUDA C++ Programming Guide, "Compute Capabilities", table "Technical
//! Specifications per Compute Capability"; allocation granularities from the Occupancy
//! Calculator).
//!
//! What it does not model: the shared-memory carveout the driver picks (the largest one is
//! assumed, as with `cudaFuncAttributePreferredSharedMemoryCarveout` = 100), thread-block
//! clusters, and the per-kernel opt-in above 48 KiB of dynamic shared memory (assumed done).

/// The per-SM limits of one architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SmLimits {
    /// `sm_XY` number.
    pub arch: u32,
    /// Resident warps per SM.
    pub max_warps: u32,
    /// Resident blocks per SM.
    pub max_blocks: u32,
    /// 32-bit registers per SM (and per block).
    pub registers: u32,
    /// Registers are given to a warp in units of this many.
    pub register_unit: u32,
    /// Most registers one thread can use.
    pub max_registers_per_thread: u32,
    /// Warp-scheduler partitions (registers are split evenly between them).
    pub partitions: u32,
    /// Shared memory per SM at the largest carveout, bytes.
    pub shared_per_sm: u32,
    /// Most shared memory one block can use (with the opt-in), bytes.
    pub shared_per_block: u32,
    /// Shared memory the system reserves per resident block, bytes.
    pub shared_reserved_per_block: u32,
    /// Shared memory is given to a block in units of this many bytes.
    pub shared_unit: u32,
    /// Most threads per block.
    pub max_threads_per_block: u32,
}

const KIB: u32 = 1024;

impl SmLimits {
    /// The architectures this table knows.
    pub const KNOWN: &[u32] = &[80, 86, 87, 89, 90];

    /// The limits of `sm_<arch>` (`90a` counts as `90`), or `None` when not in the table.
    pub fn for_arch(arch: u32) -> Option<SmLimits> {
        let base = SmLimits {
            arch,
            max_warps: 64,
            max_blocks: 32,
            registers: 64 * KIB,
            register_unit: 256,
            max_registers_per_thread: 255,
            partitions: 4,
            shared_per_sm: 164 * KIB,
            shared_per_block: 163 * KIB,
            shared_reserved_per_block: KIB,
            shared_unit: 128,
            max_threads_per_block: 1024,
        };
        match arch {
            // A100 (8.0) and Jetson Orin (8.7): 2048 threads, 164 KiB shared per SM.
            80 | 87 => Some(base),
            // GA10x (8.6): 1536 threads, 16 blocks, 100 KiB.
            86 => Some(SmLimits { max_warps: 48, max_blocks: 16, shared_per_sm: 100 * KIB, shared_per_block: 99 * KIB, ..base }),
            // Ada (8.9): 1536 threads, 24 blocks, 100 KiB.
            89 => Some(SmLimits { max_warps: 48, max_blocks: 24, shared_per_sm: 100 * KIB, shared_per_block: 99 * KIB, ..base }),
            // Hopper (9.0): 2048 threads, 32 blocks, 228 KiB.
            90 => Some(SmLimits { shared_per_sm: 228 * KIB, shared_per_block: 227 * KIB, ..base }),
            _ => None,
        }
    }
}

/// What limits the number of resident blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limiter {
    /// Resident warps per SM.
    Warps,
    /// Resident blocks per SM.
    Blocks,
    /// Registers.
    Registers,
    /// Shared memory.
    SharedMemory,
}

impl std::fmt::Display for Limiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Limiter::Warps => "warps",
            Limiter::Blocks => "blocks",
            Limiter::Registers => "regs",
            Limiter::SharedMemory => "smem",
        })
    }
}

/// The occupancy of one kernel at one block size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Occupancy {
    /// The kernel can run; `blocks` blocks fit on one SM.
    Fits {
        /// Resident blocks per SM.
        blocks: u32,
        /// Resident warps per SM.
        warps: u32,
        /// `warps` / the SM's warp limit, 0..=1.
        ratio: f64,
        /// The tightest limit.
        limiter: Limiter,
    },
    /// The launch would fail: the reason.
    CannotLaunch(&'static str),
}

impl std::fmt::Display for Occupancy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Occupancy::Fits { blocks, ratio, limiter, .. } => write!(f, "{:.0}% ({blocks} blk, {limiter})", ratio * 100.0),
            Occupancy::CannotLaunch(why) => write!(f, "no launch: {why}"),
        }
    }
}

/// What a kernel needs per thread and per block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelNeeds {
    /// Registers per thread.
    pub registers: u32,
    /// Static shared memory per block, bytes.
    pub static_shared: u32,
    /// Dynamic shared memory per block, bytes (what the launch would ask for).
    pub dynamic_shared: u32,
    /// Threads per block.
    pub block_threads: u32,
}

/// Computes the theoretical occupancy of `needs` on an SM with `limits`.
pub fn occupancy(limits: &SmLimits, needs: KernelNeeds) -> Occupancy {
    if needs.block_threads == 0 {
        return Occupancy::CannotLaunch("empty block");
    }
    if needs.block_threads > limits.max_threads_per_block {
        return Occupancy::CannotLaunch("block over 1024 threads");
    }
    if needs.registers > limits.max_registers_per_thread {
        return Occupancy::CannotLaunch("over 255 registers per thread");
    }
    let warps_per_block = needs.block_threads.div_ceil(32);
    let by_warps = limits.max_warps / warps_per_block;

    // Registers: per warp, rounded up to the allocation unit; each of the SM's partitions holds
    // a whole number of warps; a block's warps are counted rounded up to the partitions.
    let by_registers = if needs.registers == 0 {
        u32::MAX
    } else {
        let per_warp = round_up(needs.registers * 32, limits.register_unit);
        let per_block = per_warp * round_up(warps_per_block, limits.partitions);
        if per_block > limits.registers {
            return Occupancy::CannotLaunch("too many registers for the block size");
        }
        let warps_per_partition = limits.registers / limits.partitions / per_warp;
        warps_per_partition * limits.partitions / warps_per_block
    };

    let shared = needs.static_shared + needs.dynamic_shared;
    if shared > limits.shared_per_block {
        return Occupancy::CannotLaunch("shared memory over the per-block limit");
    }
    let shared_per_block = round_up(shared + limits.shared_reserved_per_block, limits.shared_unit);
    let by_shared = limits.shared_per_sm / shared_per_block;

    let candidates = [(by_warps, Limiter::Warps), (limits.max_blocks, Limiter::Blocks), (by_registers, Limiter::Registers), (by_shared, Limiter::SharedMemory)];
    // The first minimum wins: warps before blocks before registers before shared memory.
    let (blocks, limiter) = candidates.into_iter().fold((u32::MAX, Limiter::Warps), |best, c| if c.0 < best.0 { c } else { best });
    if blocks == 0 {
        return Occupancy::CannotLaunch("no block fits on an SM");
    }
    let warps = blocks * warps_per_block;
    Occupancy::Fits { blocks, warps, ratio: f64::from(warps) / f64::from(limits.max_warps), limiter }
}

fn round_up(value: u32, unit: u32) -> u32 {
    value.div_ceil(unit) * unit
}

#[cfg(test)]
mod tests {
    use super::*;

    fn needs(registers: u32, static_shared: u32, block_threads: u32) -> KernelNeeds {
        KernelNeeds { registers, static_shared, dynamic_shared: 0, block_threads }
    }

    fn fits(o: Occupancy) -> (u32, f64, Limiter) {
        match o {
            Occupancy::Fits { blocks, ratio, limiter, .. } => (blocks, ratio, limiter),
            Occupancy::CannotLaunch(why) => panic!("cannot launch: {why}"),
        }
    }

    // Figures cross-checked by hand against the CUDA Occupancy Calculator's rules.
    #[test]
    fn small_kernels_are_limited_by_warps() {
        let h100 = SmLimits::for_arch(90).unwrap();
        // 10 registers, 256 threads: 8 warps per block, 64 warps per SM -> 8 blocks, 100%.
        assert_eq!(fits(occupancy(&h100, needs(10, 16, 256))), (8, 1.0, Limiter::Warps));
        // 32 threads: 64 blocks by warps but only 32 resident blocks.
        assert_eq!(fits(occupancy(&h100, needs(10, 0, 32))), (32, 0.5, Limiter::Blocks));
    }

    #[test]
    fn registers_limit_big_kernels() {
        let a100 = SmLimits::for_arch(80).unwrap();
        // 128 registers: 4096 per warp, 4 warps per partition, 16 warps per SM -> 2 blocks of 8 warps.
        assert_eq!(fits(occupancy(&a100, needs(128, 0, 256))), (2, 0.25, Limiter::Registers));
        // 119 registers round up to 120 x 32 = 3840 per warp: 16384 / 3840 = 4 warps per partition.
        assert_eq!(fits(occupancy(&a100, needs(119, 8208, 256))), (2, 0.25, Limiter::Registers));
        // 255 registers x 1024 threads does not fit the register file.
        assert_eq!(occupancy(&a100, needs(255, 0, 1024)), Occupancy::CannotLaunch("too many registers for the block size"));
    }

    #[test]
    fn shared_memory_limits_and_the_reserved_kilobyte() {
        let a100 = SmLimits::for_arch(80).unwrap();
        // 48 KiB + 1 KiB reserved = 49 KiB per block; 164 / 49 = 3 blocks.
        assert_eq!(fits(occupancy(&a100, needs(32, 48 * 1024, 128))), (3, 0.1875, Limiter::SharedMemory));
        let rtx = SmLimits::for_arch(86).unwrap();
        // 100 / 49 = 2 blocks of 4 warps = 8 of 48 warps.
        let (blocks, ratio, limiter) = fits(occupancy(&rtx, needs(32, 48 * 1024, 128)));
        assert_eq!((blocks, limiter), (2, Limiter::SharedMemory));
        assert!((ratio - 8.0 / 48.0).abs() < 1e-9);
        let with_dynamic = KernelNeeds { dynamic_shared: 200 * 1024, ..needs(32, 0, 128) };
        assert_eq!(occupancy(&a100, with_dynamic), Occupancy::CannotLaunch("shared memory over the per-block limit"));
        let h100 = SmLimits::for_arch(90).unwrap();
        assert_eq!(fits(occupancy(&h100, with_dynamic)).0, 1);
    }

    #[test]
    fn partial_warps_and_partition_rounding() {
        let ada = SmLimits::for_arch(89).unwrap();
        // 96 threads = 3 warps; 48 / 3 = 16 blocks by warps; 24 block limit; 64 regs:
        // 2048 per warp, 8 warps per partition, 32 per SM; a block counts as 4 warps for the
        // per-block check only, the SM check uses 32 / 3 = 10 blocks.
        assert_eq!(fits(occupancy(&ada, needs(64, 0, 96))), (10, 30.0 / 48.0, Limiter::Registers));
        assert_eq!(occupancy(&ada, needs(16, 0, 2048)), Occupancy::CannotLaunch("block over 1024 threads"));
        assert!(SmLimits::for_arch(75).is_none());
    }
}
