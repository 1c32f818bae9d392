//! Launch bounds for kernels: the `__launch_bounds__(threads, min_blocks)` of CUDA C++.
//!
//! [`launch_bounds!`](macro@crate::launch_bounds) emits a marker global that `ferrocuda-builder`
//! turns into the kernel's `.maxntid threads, 1, 1` and `.minnctapersm min_blocks` (or
//! `.reqntid threads, 1, 1`) PTX directives, then removes. ptxas then caps the kernel's
//! registers so that `min_blocks` blocks of `threads` fit on one SM, as nvcc does.
//! Launching with more threads than the bound fails (`CUDA_ERROR_INVALID_VALUE`).
//!
//! [`cluster_dims!`](macro@crate::cluster_dims) is CUDA C++'s `__cluster_dims__(x, y, z)`: a
//! marker the builder turns into `.reqnctapercluster x, y, z`, so that the kernel always runs
//! in clusters of that shape.

/// Declares launch bounds for the kernel named `$kernel` (its exported symbol):
/// `launch_bounds!(gemm, 384, 1)` is `.maxntid 384, 1, 1` + `.minnctapersm 1`;
/// `launch_bounds!(gemm, 384, 0)` is `.maxntid` alone; `launch_bounds!(reqntid gemm, 256)`
/// is `.reqntid 256, 1, 1` (the block must have exactly 256 threads);
/// `launch_bounds!(reqntid gemm, 256, 4)` adds `.minnctapersm 4` (CUDA's `__launch_bounds__(256,
/// 4)` for a kernel always launched with 256 threads: registers capped so that 4 blocks fit).
#[macro_export]
macro_rules! launch_bounds {
    ($kernel:ident, $threads:expr, $min_blocks:expr) => {
        $crate::launch_bounds!(@marker $kernel, $threads, $min_blocks, 0);
    };
    (reqntid $kernel:ident, $threads:expr) => {
        $crate::launch_bounds!(@marker $kernel, $threads, 0, 1);
    };
    (reqntid $kernel:ident, $threads:expr, $min_blocks:expr) => {
        $crate::launch_bounds!(@marker $kernel, $threads, $min_blocks, 1);
    };
    (@marker $kernel:ident, $threads:expr, $min_blocks:expr, $kind:expr) => {
        // The values a GPU can run, checked at compile time on every target (E6, audit
        // 2026-11-27e; `#[kernel]` checks literal values itself, at the attribute).
        const _: () = {
            let (threads, min_blocks): ($crate::__private::core::primitive::u32, $crate::__private::core::primitive::u32) = ($threads, $min_blocks);
            $crate::__private::assert!(threads >= 1 && threads <= 1024, "launch_bounds / reqntid: the thread count must be in 1..=1024 (a block has at least 1 and at most 1024 threads)");
            $crate::__private::assert!(min_blocks <= 32, "launch_bounds: min_blocks_per_sm must be at most 32 (an SM holds at most 32 blocks)");
            $crate::__private::assert!(
                min_blocks as $crate::__private::core::primitive::u64 * threads as $crate::__private::core::primitive::u64 <= 2048,
                "launch_bounds: max_threads * min_blocks_per_sm must be at most 2048 (the threads one SM holds)"
            );
        };
        const _: () = {
            #[cfg(target_arch = "nvptx64")]
            #[used]
            #[unsafe(export_name = $crate::__private::concat!("__ferrocuda_launch_bounds__", $crate::__private::stringify!($kernel)))]
            static MARKER: [$crate::__private::core::primitive::u32; 3] = [$threads, $min_blocks, $kind];
        };
    };
}

/// Declares the cluster shape of the kernel named `$kernel` (CUDA C++'s `__cluster_dims__`):
/// `cluster_dims!(exchange, 2, 1, 1)` becomes `.reqnctapercluster 2, 1, 1` in its PTX
/// (through `ferrocuda-builder`), and the kernel always runs in clusters of 2 blocks along x,
/// even from a launch that names no cluster. `#[kernel(cluster_dims(2))]` writes it for a
/// `#[kernel]`, and its typed launchers then fill in the cluster of a configuration without
/// one and refuse another (`LaunchConfig::for_compiled_cluster`). Clusters need sm_90: gate
/// such a kernel with `#[cfg_attr(target_arch = "nvptx64", cfg(ferrocuda_sm = "90"))]`.
#[macro_export]
macro_rules! cluster_dims {
    ($kernel:ident, $x:expr, $y:expr, $z:expr) => {
        // E6 (audit 2026-11-27e): a shape the launchers can run, at compile time.
        const _: () = {
            let (x, y, z): ($crate::__private::core::primitive::u32, $crate::__private::core::primitive::u32, $crate::__private::core::primitive::u32) =
                ($x, $y, $z);
            $crate::__private::assert!(x >= 1 && y >= 1 && z >= 1, "cluster_dims: each cluster dimension must be at least 1");
            $crate::__private::assert!(
                x as $crate::__private::core::primitive::u64 * y as $crate::__private::core::primitive::u64 * z as $crate::__private::core::primitive::u64 <= 8,
                "cluster_dims: at most 8 blocks per cluster (the portable limit; the launchers refuse more)"
            );
        };
        const _: () = {
            #[cfg(target_arch = "nvptx64")]
            #[used]
            #[unsafe(export_name = $crate::__private::concat!("__ferrocuda_cluster_dims__", $crate::__private::stringify!($kernel)))]
            static MARKER: [$crate::__private::core::primitive::u32; 3] = [$x, $y, $z];
        };
    };
}
