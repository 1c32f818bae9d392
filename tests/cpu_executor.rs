//! The CPU executor: the bundled example kernels on both back ends (the same checks on the
//! CPU always and on the GPU when present), then what only the CPU executor does: turn a
//! panic, a barrier some threads skip, a warp operation some lanes skip, and a shared-memory
//! data race into structured errors, and show poisoned, per-block shared memory.

#[path = "common/backend.rs"]
mod backend;
mod common;

use backend::{Backend, KernelArg, launch_on, on_both_backends};
use ferrocuda::{Dim3, LaunchConfig};
use ferrocuda_device::cpu::{CpuError, CpuExecutor, RaceKind, SHARED_POISON_BYTE};
use gpu_kernels::examples::{self, MATMUL_BLOCK_M, MATMUL_BLOCK_N, MATMUL_THREADS};
use gpu_kernels::{saxpy, sum_f32};
use test_kernels::cpu_examples::{self, TILE};
use test_kernels::launch_kinds::{self, Affine};
use test_kernels::{device_lib, square_checked};

on_both_backends!(
    saxpy_matches_the_host,
    sum_reduces_with_shuffles_and_atomics,
    square_checked_squares_when_the_output_fits,
    a_struct_argument_arrives_field_by_field,
    both_instances_of_a_generic_kernel_run,
    a_bool_argument_marks_every_block,
    two_outputs_in_one_launch,
    tiled_matrix_product_matches_the_host,
    pipelined_sgemm_matches_the_host,
    pipelined_sgemm_refuses_shapes_it_was_not_written_for,
);

impl KernelArg for Affine {
    type Gpu = Affine;
    type Cpu = Affine;
    fn gpu(self) -> Affine {
        self
    }
    fn cpu(self) -> Affine {
        self
    }
}

fn close(got: f32, want: f32, relative: f32) -> bool {
    (got - want).abs() <= relative * want.abs().max(1.0)
}

fn saxpy_matches_the_host(backend: &Backend) {
    // Not a multiple of the block: the last block's guard matters.
    let n = 100_003;
    let x: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 0.5).collect();
    let y0: Vec<f32> = (0..n).map(|i| (i % 7) as f32 - 3.0).collect();
    let input = backend.upload(&x);
    let mut y = backend.upload(&y0);
    launch_on!(backend, saxpy, LaunchConfig::for_elements(n, 256), 2.5f32, &input, &mut y).unwrap();
    let y = backend.download(&y);
    for i in 0..n {
        // The GPU fuses the multiply-add (one rounding), the CPU rounds twice: within an ulp.
        assert!(close(y[i], 2.5 * x[i] + y0[i], 1e-6), "{}: y[{i}] = {}, want {}", backend.name(), y[i], 2.5 * x[i] + y0[i]);
    }
}

fn sum_reduces_with_shuffles_and_atomics(backend: &Backend) {
    let n = 1 << 18;
    // Integers: exact in f32 partial sums of this size, whatever the order.
    let x: Vec<f32> = (0..n).map(|i| (i % 17) as f32).collect();
    let input = backend.upload(&x);
    let mut out = backend.zeroed::<f32>(1);
    launch_on!(backend, sum_f32, (64u32, 256u32), &input, &mut out).unwrap();
    let expected: f64 = x.iter().map(|&v| v as f64).sum();
    assert_eq!(backend.download(&out)[0] as f64, expected, "{}", backend.name());
}

fn square_checked_squares_when_the_output_fits(backend: &Backend) {
    let x: Vec<u32> = (0..1000).map(|i| i * 3 + 1).collect();
    let input = backend.upload(&x);
    let mut out = backend.zeroed::<u32>(1000);
    launch_on!(backend, square_checked, LaunchConfig::for_elements(1000, 128), &input, &mut out).unwrap();
    assert_eq!(backend.download(&out), x.iter().map(|v| v.wrapping_mul(*v)).collect::<Vec<_>>(), "{}", backend.name());
}

fn a_struct_argument_arrives_field_by_field(backend: &Backend) {
    let n = 1000;
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.25).collect();
    let p = Affine { scale: 3.0, offset: -1.5, limit: 700 };
    let input = backend.upload(&x);
    let mut out = backend.upload(&vec![-7.0f32; n]);
    launch_on!(backend, launch_kinds::affine, LaunchConfig::for_elements(n, 128), p, &input, &mut out).unwrap();
    let out = backend.download(&out);
    for i in 0..n {
        let want = if i < 700 { 3.0 * x[i] - 1.5 } else { -7.0 };
        assert!(close(out[i], want, 1e-6), "{}: out[{i}] = {}, want {want}", backend.name(), out[i]);
    }
}

fn both_instances_of_a_generic_kernel_run(backend: &Backend) {
    let n = 777;
    let x32: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let x64: Vec<f64> = (0..n).map(|i| i as f64).collect();
    let (in32, in64) = (backend.upload(&x32), backend.upload(&x64));
    let (mut out32, mut out64) = (backend.zeroed::<f32>(n), backend.zeroed::<f64>(n));
    launch_on!(backend, launch_kinds::scale_into_f32, LaunchConfig::for_elements(n, 256), -3.0f32, &in32, &mut out32).unwrap();
    launch_on!(backend, launch_kinds::scale_into_f64, LaunchConfig::for_elements(n, 256), 1.0f64 / 3.0, &in64, &mut out64).unwrap();
    assert_eq!(backend.download(&out32), x32.iter().map(|v| -3.0 * v).collect::<Vec<_>>());
    assert_eq!(backend.download(&out64), x64.iter().map(|v| 1.0 / 3.0 * v).collect::<Vec<_>>());
}

fn a_bool_argument_marks_every_block(backend: &Backend) {
    let mut out = backend.zeroed::<u32>(8);
    launch_on!(backend, launch_kinds::mark_blocks, (8u32, 32u32), true, &mut out).unwrap();
    assert_eq!(backend.download(&out), (0..8).map(|b| u32::MAX - b).collect::<Vec<_>>());
    launch_on!(backend, launch_kinds::mark_blocks, (8u32, 32u32), false, &mut out).unwrap();
    assert_eq!(backend.download(&out), (0..8).collect::<Vec<_>>());
}

fn two_outputs_in_one_launch(backend: &Backend) {
    let n = 300;
    let x: Vec<f32> = (0..n).map(|i| i as f32 - 150.0).collect();
    let input = backend.upload(&x);
    let (mut low, mut high) = (backend.zeroed::<f32>(n), backend.zeroed::<f32>(n));
    launch_on!(backend, launch_kinds::split_sign, LaunchConfig::for_elements(n, 128), &input, &mut low, &mut high).unwrap();
    assert_eq!(backend.download(&low), x.iter().map(|v| v.min(0.0)).collect::<Vec<_>>());
    assert_eq!(backend.download(&high), x.iter().map(|v| v.max(0.0)).collect::<Vec<_>>());
}

fn tiled_matrix_product_matches_the_host(backend: &Backend) {
    // Not a multiple of the tile: the edge guards matter.
    let n = 100usize;
    let a: Vec<f32> = (0..n * n).map(|i| ((i * 7) % 13) as f32 * 0.25 - 1.5).collect();
    let b: Vec<f32> = (0..n * n).map(|i| ((i * 5) % 11) as f32 * 0.5 - 2.0).collect();
    let (da, db) = (backend.upload(&a), backend.upload(&b));
    let mut c = backend.upload(&vec![f32::NAN; n * n]);
    let tiles = n.div_ceil(TILE) as u32;
    launch_on!(backend, cpu_examples::matmul_tiled, ((tiles, tiles), (TILE as u32, TILE as u32)), n as u32, &da, &db, &mut c).unwrap();
    let c = backend.download(&c);
    for row in 0..n {
        for col in 0..n {
            // Quarters and halves: every product and partial sum is exact in f32.
            let want: f32 = (0..n).map(|k| a[row * n + k] * b[k * n + col]).sum();
            assert_eq!(c[row * n + col], want, "{}: C[{row}][{col}]", backend.name());
        }
    }
}

/// The line of `needle` in `file` (1-based), to check reported panic locations.
fn line_of(file: &str, needle: &str) -> u32 {
    // Compiled in, so the test binary also runs where the sources are not (a GPU machine).
    let text = match file {
        "tests/kernels/src/lib.rs" => include_str!("kernels/src/lib.rs"),
        "tests/kernels/src/device_lib.rs" => include_str!("kernels/src/device_lib.rs"),
        _ => panic!("line_of: add {file} to the files compiled in"),
    };
    text.lines().position(|l| l.contains(needle)).unwrap_or_else(|| panic!("{needle:?} not in {file}")) as u32 + 1
}

#[test]
fn a_panic_reports_kernel_file_line_block_and_thread() {
    let line = line_of("tests/kernels/src/lib.rs", "out[i] = x[i].wrapping_mul(x[i]);");
    let x: Vec<u32> = (0..1000).collect();
    let mut out = vec![0u32; 500];
    for executor in [CpuExecutor::new(), CpuExecutor::deterministic()] {
        let error = square_checked::launch_cpu(&executor, LaunchConfig::for_elements(1000, 256), &x, &mut out).unwrap_err();
        let CpuError::KernelPanic(panic) = &error else { panic!("expected a kernel panic, got {error:?}") };
        // The first element past the output is 500: block 1, thread 244 (the lowest failing
        // block is reported, and its threads run in order).
        assert_eq!((panic.kernel.as_str(), panic.file.as_str(), panic.line), ("square_checked", "tests/kernels/src/lib.rs", line));
        assert_eq!((panic.block[0], panic.thread[0]), (1, 244), "{error}");
        assert!(panic.message.contains("index out of bounds: the len is 500 but the index is 500"), "{}", panic.message);
        assert_eq!(
            error.to_string(),
            format!(
                "kernel `square_checked` panicked at tests/kernels/src/lib.rs:{line}:{}, block (1, 0, 0), thread (244, 0, 0): {}",
                panic.column, panic.message
            )
        );
    }
}

#[test]
fn a_formatted_panic_message_keeps_its_arguments() {
    let mut x = vec![1u32; 512];
    x[300] = 77;
    let error = device_lib::panic_formatted::launch_cpu(&CpuExecutor::new(), (2u32, 256u32), &x, 50).unwrap_err();
    let CpuError::KernelPanic(panic) = &error else { panic!("expected a kernel panic, got {error:?}") };
    assert_eq!(panic.message, "value 77 at 300 is over the limit 50");
    assert_eq!((panic.block[0], panic.thread[0], panic.kernel.as_str()), (1, 44, "panic_formatted"));
    assert_eq!(panic.line, line_of("tests/kernels/src/device_lib.rs", "panic!(\"value {} at {} is over the limit {}\""));
}

#[test]
fn the_executor_works_again_after_a_failed_launch() {
    let executor = CpuExecutor::new();
    let x: Vec<u32> = (0..100).collect();
    let mut short = vec![0u32; 10];
    assert!(square_checked::launch_cpu(&executor, (1u32, 128u32), &x, &mut short).is_err());
    let mut out = vec![0u32; 100];
    square_checked::launch_cpu(&executor, (1u32, 128u32), &x, &mut out).unwrap();
    assert_eq!(out, x.iter().map(|v| v * v).collect::<Vec<_>>());
}

/// Threads that return before a `sync_threads()` release it, as PTX's `exit` defines (audit
/// P9; this test expected a `BarrierDivergence` before): the others pass it and read the
/// values of the threads that reached it.
#[test]
fn p9_threads_that_exit_before_a_barrier_release_it() {
    let mut out = vec![0u32; 128];
    cpu_examples::barrier_after_early_return::launch_cpu(&CpuExecutor::new(), (1u32, 128u32), 100, &mut out).unwrap();
    assert_eq!(out[..100], (0..100).map(|t| (t + 1) % 100).collect::<Vec<_>>());
    assert_eq!(out[100..], [0; 28]);
    // When every thread reaches it, the same kernel is fine.
    cpu_examples::barrier_after_early_return::launch_cpu(&CpuExecutor::new(), (1u32, 100u32), 100, &mut out).unwrap();
    assert_eq!(out[..100], (0..100).map(|t| (t + 1) % 100).collect::<Vec<_>>());
}

#[test]
fn a_warp_operation_that_half_the_warp_skips_is_an_error() {
    let mut out = vec![0u32; 64];
    let error = cpu_examples::warp_shuffle_divergent::launch_cpu(&CpuExecutor::new(), (1u32, 64u32), &mut out).unwrap_err();
    let CpuError::WarpDeadlock(deadlock) = &error else { panic!("expected a warp deadlock, got {error:?}") };
    assert_eq!(deadlock.warp, 0);
    assert_eq!(deadlock.waiting.iter().map(|t| t.x).collect::<Vec<_>>(), (0..16).collect::<Vec<_>>());
    assert_eq!(deadlock.at_barrier.iter().map(|t| t.x).collect::<Vec<_>>(), (16..32).collect::<Vec<_>>());
}

#[test]
fn a_missing_barrier_is_reported_as_a_shared_memory_race() {
    let x: Vec<f32> = (0..512).map(|i| i as f32).collect();
    let mut out = vec![0.0f32; 512];
    let error = cpu_examples::shared_race_missing_barrier::launch_cpu(&CpuExecutor::new(), (2u32, 256u32), &x, &mut out).unwrap_err();
    let CpuError::SharedMemoryRace(race) = &error else { panic!("expected a race, got {error:?}") };
    // Thread 0 read element 1 before thread 1 wrote it.
    assert_eq!((race.kind, race.first.x, race.second.x, race.block.x), (RaceKind::WriteAfterRead, 0, 1, 0), "{error}");
    assert_eq!(race.address % 4, 0);
    let text = error.to_string();
    assert!(text.contains("thread (0, 0, 0) read it and then thread (1, 0, 0) wrote it with no barrier between"), "{text}");
    // The same kernel with a barrier (shared_two_arrays) passes the detector: see the device-library tests.
}

#[test]
fn without_race_detection_the_racy_kernel_reads_poison() {
    // Threads run in rank order between barriers, so thread t reads element t + 1 before its
    // owner wrote it: the poison shows (NaN), except for thread 255, which reads element 0.
    let x: Vec<f32> = (0..256).map(|i| i as f32).collect();
    let mut out = vec![0.0f32; 256];
    let executor = CpuExecutor::deterministic().with_race_detection(false);
    cpu_examples::shared_race_missing_barrier::launch_cpu(&executor, (1u32, 256u32), &x, &mut out).unwrap();
    assert!(out[..255].iter().all(|v| v.is_nan()), "reads before the writes must see the poison");
    assert_eq!(out[255], 0.0);
}

#[test]
fn shared_memory_starts_poisoned_in_every_block_and_never_leaks() {
    let poison = u32::from_ne_bytes([SHARED_POISON_BYTE; 4]);
    // Without race detection: with it, the read before any write is itself reported (Q6,
    // tests/cpu_sanitizer.rs).
    for executor in [CpuExecutor::new().with_race_detection(false), CpuExecutor::deterministic().with_race_detection(false)] {
        let blocks = 50;
        let mut out = vec![0u32; blocks * 64];
        // Each block reads its shared array first, then writes its block number + 1 there.
        cpu_examples::shared_uninitialized::launch_cpu(&executor, (blocks as u32, 64u32), &mut out).unwrap();
        assert!(out.iter().all(|&v| v == poison), "a block saw another block's shared memory: {:?}", out.iter().find(|&&v| v != poison));
    }
}

#[test]
fn bad_configurations_are_refused_with_the_limit_named() {
    let executor = CpuExecutor::new();
    let mut out = vec![0u32; 8];
    let error = launch_kinds::mark_blocks::launch_cpu(&executor, (1u32, 2048u32), true, &mut out).unwrap_err();
    assert!(matches!(error, CpuError::InvalidConfig { .. }), "{error:?}");
    assert_eq!(error.to_string(), "cannot launch `mark_blocks` on the CPU executor: block dimension x = 2048 exceeds the device's limit of 1024");
    let error = launch_kinds::mark_blocks::launch_cpu(&executor, LaunchConfig::new(1u32, 32u32).with_shared_bytes(300 << 10), true, &mut out).unwrap_err();
    assert!(error.to_string().contains("bytes of dynamic shared memory exceed"), "{error}");
    let error = launch_kinds::mark_blocks::launch_cpu(&executor, (0u32, 32u32), true, &mut out).unwrap_err();
    assert!(error.to_string().contains("has a zero dimension"), "{error}");
}

/// The programmatic-dependent-launch pair of `tests/launch_kinds.rs` on the CPU executor: the
/// configuration flag is accepted, launches run one after another, and the `grid_dependency`
/// calls do nothing, so the secondary reads the primary's finished output.
#[test]
fn a_programmatic_dependent_launch_runs_in_order_on_the_cpu() {
    use test_kernels::grid_dependency::{mix, pdl_primary, pdl_secondary, secondary_of};
    let executor = CpuExecutor::new();
    let (blocks, threads, rounds) = (4u32, 64u32, 100u32);
    let n = (blocks * threads) as usize;
    let (mut primary, mut finished) = (vec![0xdead_beef_u32; n], vec![0u64; n]);
    let (mut secondary, mut started) = (vec![0u32; n], vec![0u64; n]);
    pdl_primary::launch_cpu(&executor, LaunchConfig::new(blocks, threads), rounds, &mut primary, &mut finished).unwrap();
    // SAFETY: `pdl_secondary` calls `wait_for_prerequisites()` before it touches memory.
    let config = unsafe { LaunchConfig::new(blocks, threads).with_programmatic_dependent_launch() };
    pdl_secondary::launch_cpu(&executor, config, &primary, &mut secondary, &mut started).unwrap();
    for (i, &got) in secondary.iter().enumerate() {
        assert_eq!(got, secondary_of((0..rounds).fold(i as u32, |x, _| mix(x))), "element {i}");
    }
}

#[test]
fn raw_pointer_kernels_run_with_host_pointers() {
    let x: Vec<f32> = (0..200).map(|i| i as f32).collect();
    let mut out = vec![0.0f32; 200];
    // SAFETY: both pointers cover 200 elements and `out` has no other user during the launch.
    unsafe { launch_kinds::add_one_raw::launch_cpu(&CpuExecutor::new(), LaunchConfig::for_elements(200, 64), 200, x.as_ptr(), out.as_mut_ptr()) }.unwrap();
    assert_eq!(out, x.iter().map(|v| v + 1.0).collect::<Vec<_>>());
}

#[test]
fn deterministic_and_parallel_executors_agree() {
    let x: Vec<u32> = (0..200_000u32).map(|i| i.wrapping_mul(2_654_435_761) >> 7).collect();
    let run = |executor: &CpuExecutor| {
        let mut bins = vec![0u32; 256];
        device_lib::histogram_256::launch_cpu(executor, (40u32, 256u32), &x, &mut bins).unwrap();
        bins
    };
    let deterministic = CpuExecutor::deterministic();
    assert_eq!(deterministic.workers(), 1);
    let parallel = CpuExecutor::new().with_workers(4);
    assert_eq!(run(&deterministic), run(&parallel));
    assert_eq!(run(&deterministic).iter().sum::<u32>(), x.len() as u32);
}

#[test]
fn an_empty_kernel_and_a_one_thread_grid_run() {
    launch_kinds::empty::launch_cpu(&CpuExecutor::new(), (1000u32, 1024u32)).unwrap();
    let mut out = vec![0u32; 1];
    launch_kinds::mark_blocks::launch_cpu(&CpuExecutor::new(), (1u32, 1u32), false, &mut out).unwrap();
    assert_eq!(out, [0]);
}

#[test]
fn intrinsics_outside_a_kernel_say_they_need_one() {
    let result = std::panic::catch_unwind(ferrocuda_device::thread::thread_idx_x);
    let payload = result.unwrap_err();
    let message = payload.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(message.contains("`thread_idx` only has a value inside a kernel"), "{message}");
}

/// Inputs of the SGEMM tests: quarters in [-1.5, 1.5] and halves in [-2, 3], so that every
/// product and partial sum below is exact in f32 (the GPU's fused and the CPU's separate
/// multiply-adds then agree bit for bit, in any order).
fn sgemm_inputs(m: usize, n: usize, k: usize) -> (Vec<f32>, Vec<f32>) {
    let a = (0..m * k).map(|i| ((i * 7) % 13) as f32 * 0.25 - 1.5).collect();
    let b = (0..k * n).map(|i| ((i * 5) % 11) as f32 * 0.5 - 2.0).collect();
    (a, b)
}

/// `sgemm_pipelined` on C = A B for `m x k` by `k x n`, C first filled with NaN.
fn run_sgemm(backend: &Backend, a: &[f32], b: &[f32], (m, n, k): (u32, u32, u32)) -> Vec<f32> {
    let (da, db) = (backend.upload(a), backend.upload(b));
    let mut c = backend.upload(&vec![f32::NAN; (m * n) as usize]);
    let grid = (n.div_ceil(MATMUL_BLOCK_N).max(1), m.div_ceil(MATMUL_BLOCK_M).max(1));
    launch_on!(backend, examples::sgemm_pipelined, LaunchConfig::new(grid, MATMUL_THREADS), &da, &db, &mut c, m, n, k).unwrap();
    backend.download(&c)
}

fn pipelined_sgemm_matches_the_host(backend: &Backend) {
    // Square with 8 depth steps (both stages used four times); then wider than tall, and
    // taller than wide, with 4 and 2 steps (the last step's prefetch of the same tile).
    for (m, n, k) in [(256u32, 256u32, 64u32), (128, 384, 32), (384, 128, 16)] {
        let (mu, nu, ku) = (m as usize, n as usize, k as usize);
        let (a, b) = sgemm_inputs(mu, nu, ku);
        // Host vectors of f32 from the system allocator are 16-byte aligned on the targets
        // this runs on; a misaligned one would make the kernel return and leave NaN.
        let c = run_sgemm(backend, &a, &b, (m, n, k));
        for row in 0..mu {
            for col in 0..nu {
                let want: f32 = (0..ku).map(|p| a[row * ku + p] * b[p * nu + col]).sum();
                assert_eq!(c[row * nu + col], want, "{}: {m}x{n}x{k}: C[{row}][{col}]", backend.name());
            }
        }
    }
}

fn pipelined_sgemm_refuses_shapes_it_was_not_written_for(backend: &Backend) {
    // m not a multiple of 128, k not a multiple of 8, k = 0: every thread returns at once,
    // before any access, and C keeps its NaN.
    for (m, n, k) in [(100u32, 128u32, 8u32), (128, 128, 12), (128, 128, 0)] {
        let (a, b) = sgemm_inputs(m as usize, n as usize, k as usize);
        let c = run_sgemm(backend, &a, &b, (m, n, k));
        assert!(c.iter().all(|v| v.is_nan()), "{}: {m}x{n}x{k} wrote C", backend.name());
    }
    // C is a `PerThreadTile` of 256 threads per block: every launcher refuses other blocks
    // (128 threads, or 256 as 16 x 16) before anything runs.
    let (a, b) = sgemm_inputs(128, 128, 8);
    let (da, db) = (backend.upload(&a), backend.upload(&b));
    let mut c = backend.upload(&vec![f32::NAN; 128 * 128]);
    for block in [Dim3 { x: 128, y: 1, z: 1 }, Dim3 { x: 16, y: 16, z: 1 }] {
        let error = launch_on!(backend, examples::sgemm_pipelined, LaunchConfig::new(1u32, block), &da, &db, &mut c, 128u32, 128u32, 8u32)
            .expect_err("a block that is not 256 x 1");
        assert!(error.contains("blocks of exactly"), "{}: {block}: {error}", backend.name());
    }
    assert!(backend.download(&c).iter().all(|v| v.is_nan()), "{}: a refused launch wrote C", backend.name());
}

/// A block index whose tile origin would wrap around `u32` is refused, not wrapped onto another
/// block's tile: with `block * 32` in plain `u32`, block 2^27 of the transpose would write the
/// tile of block 0 (two threads on one element: a data race in a safe kernel). transpose,
/// matmul, softmax and the stencil compute their origins with `offset_below`.
#[test]
fn tile_origins_that_would_wrap_around_u32_are_refused() {
    use gpu_kernels::examples::offset_below;
    assert_eq!((1u32 << 27).wrapping_mul(32), 0, "the wrap this guards against");
    assert_eq!(offset_below(1 << 27, 32, 0, 64), None);
    assert_eq!(offset_below(1 << 25, 128, 0, 4096), None);
    assert_eq!(offset_below(u32::MAX / 1024 + 1, 1024, 1023, u32::MAX), None);
    assert_eq!(offset_below(u32::MAX / 1024, 1024, u32::MAX, u32::MAX), None, "the offset's add overflows");
    assert_eq!(offset_below(1, 32, 0, 64), Some(32));
    assert_eq!(offset_below(2, 32, 0, 64), None);
    assert_eq!(offset_below(3, 4, 2, 15), Some(14));
}
