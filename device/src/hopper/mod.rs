//! Hopper (sm_90) features, together: the tensor-core `wgmma`, the TMA copy engine (`tma`),
//! the transaction barriers both complete on (`mbarrier`), named barriers and warpgroups for
//! producer/consumer roles (`named_barrier`, `warpgroup`), the stage rings built from them
//! (`pipeline`), and the CPU executor's emulation of all of it (`emu`).
//!
//! Each module is also re-exported at the crate's root under its own name
//! (`ferrocuda_device::tma`, ...), the paths code written before this module used.

#[cfg(not(target_arch = "nvptx64"))]
pub mod emu;
pub mod mbarrier;
pub mod named_barrier;
pub mod pipeline;
pub mod tma;
pub mod warpgroup;
#[cfg(any(not(target_arch = "nvptx64"), ferrocuda_sm = "90a"))]
pub mod wgmma;
