//! The GPU side of issue 29's classes 5 and 6 (audit 2026-11-27 findings P4, P7, P8, P9, P10,
//! P11): what a GPU does with the kernels of tests/kernels/src/gpu_rules.rs, and that the CPU
//! executor gives the same result (tests/cpu_gpu_rules.rs has the CPU side alone). Skip
//! (printed) without a GPU; fail under `REQUIRE_GPU=1`.
//!
//! A kernel that hangs keeps the GPU until its process ends (and dropping its context then
//! waits for it), so the P4 checks run in a child process that exits without dropping.

mod common;

use std::process::Command;
use std::time::Duration;

use ferrocuda::{Context, DeviceBuffer, Error, LaunchProblem, Limit, Stream};
use ferrocuda_device::cpu::CpuExecutor;
use test_kernels::gpu_rules;

const CHILD: &str = "FERROCUDA_GPU_RULES_CHILD";

/// Runs the test `name` of this binary again in a child process (with `CHILD` set to `name`):
/// whether it succeeded, and its standard output and error.
fn run_child(name: &str) -> (bool, String) {
    let output = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--test-threads=1", "--nocapture"])
        .env(CHILD, name)
        .output()
        .expect("run the test binary again");
    (output.status.success(), format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr)))
}

fn in_child(name: &str) -> bool {
    std::env::var(CHILD).is_ok_and(|v| v == name)
}

/// In a child: launches `p4_mixed_barriers` in `mode`, waits up to 3 s, prints the outcome and
/// exits at once (a hung kernel would make the context's drop wait).
fn mixed_barriers_child(test: &str, mode: u32) {
    let Some(context) = common::gpu_or_skip(test) else { std::process::exit(0) };
    let stream = Stream::non_blocking(&context).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(&context, 128).unwrap();
    gpu_rules::p4_mixed_barriers::launch(&stream, (1u32, 64u32), mode, &mut out).unwrap();
    let outcome = stream.synchronize_timeout(Duration::from_secs(3));
    println!("P4 mode {mode} on the GPU: {outcome:?}");
    match outcome {
        Err(Error::Timeout { .. }) => println!("P4-OUTCOME: hang"),
        Ok(()) => println!("P4-OUTCOME: completed"),
        Err(_) => println!("P4-OUTCOME: fault"),
    }
    std::process::exit(0);
}

fn p4_check(name: &str, mode: u32) {
    if in_child(name) {
        mixed_barriers_child(name, mode);
    }
    if common::gpu_or_skip(name).is_none() {
        return;
    }
    let (success, output) = run_child(name);
    println!("{output}");
    assert!(success, "{output}");
    assert!(output.contains("P4-OUTCOME: hang"), "mixed barrier kinds must wait (a hang), not fault: {output}");
    assert!(!output.contains("ILLEGAL_INSTRUCTION"), "{output}");
}

/// P4: `sync_threads()` in one warp and `sync_threads_count()` in the other faulted an H100
/// (`CUDA_ERROR_ILLEGAL_INSTRUCTION`): one barrier used by two forms, which PTX calls
/// unpredictable. With one hardware barrier per kind it is a wait that never ends (the CPU
/// executor reports it as `MixedBarriers`), which `synchronize_timeout` bounds.
#[test]
fn p4_sync_threads_beside_sync_threads_count_waits_instead_of_faulting() {
    p4_check("p4_sync_threads_beside_sync_threads_count_waits_instead_of_faulting", 0);
}

/// P4: `sync_threads_and` beside `sync_threads_or`, likewise.
#[test]
fn p4_sync_threads_and_beside_sync_threads_or_waits_instead_of_faulting() {
    p4_check("p4_sync_threads_and_beside_sync_threads_or_waits_instead_of_faulting", 1);
}

/// P4's controls: the reducing barriers on their own barriers give CUDA's results, on the GPU
/// as on the CPU executor.
#[test]
fn p4_uniform_reducing_barriers_agree_with_the_cpu_executor() {
    let Some(context) = common::gpu_or_skip("p4_uniform_reducing_barriers_agree_with_the_cpu_executor") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    for (mode, expected) in [(2u32, 10u32), (3, 11)] {
        let mut out = DeviceBuffer::<u32>::zeroed(&context, 128).unwrap();
        gpu_rules::p4_mixed_barriers::launch(&stream, (1u32, 64u32), mode, &mut out).unwrap();
        stream.synchronize_timeout(Duration::from_secs(10)).unwrap();
        let gpu = out.to_vec().unwrap();
        let mut cpu = vec![0u32; 128];
        gpu_rules::p4_mixed_barriers::launch_cpu(&CpuExecutor::new(), (1u32, 64u32), mode, &mut cpu).unwrap();
        println!("P4 mode {mode}: GPU out[0] = {}, out[63] = {}, passed {}", gpu[0], gpu[63], gpu[64..].iter().sum::<u32>());
        assert_eq!(gpu[..64], [expected; 64], "mode {mode}");
        assert_eq!(gpu, cpu, "mode {mode}: GPU and CPU executor differ");
    }
    // ptxas reserves every barrier up to the highest id a kernel uses, and an SM holds 64: with
    // the reductions on barriers 13..=15 a kernel of 32-thread blocks fitted 4 blocks per SM
    // instead of 32 (H100, run 1). On 1..=3, `sync_threads` with `sync_threads_count` (2
    // barriers) loses nothing; all four kinds (4 barriers) fit 16 such blocks (H100, run 2).
    let none = gpu_rules::p11_bounded::function(&context).unwrap().max_active_blocks_per_sm(32, 0).unwrap();
    let two = gpu_rules::p9_exited_then_barrier::function(&context).unwrap().max_active_blocks_per_sm(32, 0).unwrap();
    let four = gpu_rules::p4_mixed_barriers::function(&context).unwrap().max_active_blocks_per_sm(32, 0).unwrap();
    println!("P4 occupancy with 32 threads per block: no barrier {none} blocks per SM, 2 barriers {two}, 4 barriers {four}");
    assert_eq!(two, none, "sync_threads with sync_threads_count must cost no occupancy");
    assert!(four >= none.min(16), "4 barriers: {four} blocks per SM");
}

/// P7: the named-barrier producer/consumer and a two-barrier ping-pong give the same values on
/// the GPU and on the CPU executor (whose race detector no longer reports them).
#[test]
fn p7_named_barrier_handoffs_agree_with_the_cpu_executor() {
    let Some(context) = common::gpu_or_skip("p7_named_barrier_handoffs_agree_with_the_cpu_executor") else { return };
    if context.device().compute_capability().map(|(major, _)| major < 9).unwrap_or(true) {
        assert!(!ferrocuda_test_support::gpu_required(), "REQUIRE_GPU=1 but the named-barrier kernels need sm_90");
        eprintln!("SKIPPED p7: the named-barrier kernels are built for sm_90");
        return;
    }
    let stream = Stream::non_blocking(&context).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(&context, 256).unwrap();
    gpu_rules::p7_named_producer_consumer::launch(&stream, (256u32, 64u32), 0, &mut out).unwrap();
    stream.synchronize_timeout(Duration::from_secs(10)).unwrap();
    let gpu = out.to_vec().unwrap();
    let mut cpu = vec![0u32; 256];
    gpu_rules::p7_named_producer_consumer::launch_cpu(&CpuExecutor::new(), (256u32, 64u32), 0, &mut cpu).unwrap();
    let wrong = (0..256).filter(|&b| gpu[b] != 42 + b as u32).count();
    println!("P7 producer/consumer: GPU blocks with a wrong value: {wrong} of 256; CPU executor (race detection on): Ok");
    assert_eq!(wrong, 0);
    assert_eq!(gpu, cpu);

    let mut out = DeviceBuffer::<u32>::zeroed(&context, 512).unwrap();
    gpu_rules::p7_ping_pong::launch(&stream, (256u32, 64u32), &mut out).unwrap();
    stream.synchronize_timeout(Duration::from_secs(10)).unwrap();
    let gpu = out.to_vec().unwrap();
    let mut cpu = vec![0u32; 512];
    gpu_rules::p7_ping_pong::launch_cpu(&CpuExecutor::new(), (256u32, 64u32), &mut cpu).unwrap();
    println!("P7 ping-pong: GPU out[0..4] = {:?}", &gpu[..4]);
    assert_eq!(gpu, cpu);
}

/// P8: spin-waits on atomics set by another warp complete on the GPU and on the CPU executor,
/// with the same results.
#[test]
fn p8_spin_waits_agree_with_the_cpu_executor() {
    let Some(context) = common::gpu_or_skip("p8_spin_waits_agree_with_the_cpu_executor") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    let mut flag = DeviceBuffer::<u32>::zeroed(&context, 4).unwrap();
    gpu_rules::p8_spin_flag::launch(&stream, (1u32, 64u32), &mut flag).unwrap();
    stream.synchronize_timeout(Duration::from_secs(10)).unwrap();
    let gpu = flag.to_vec().unwrap();
    let mut cpu = vec![0u32; 4];
    gpu_rules::p8_spin_flag::launch_cpu(&CpuExecutor::new(), (1u32, 64u32), &mut cpu).unwrap();
    println!("P8 spin_flag: GPU {gpu:?}, CPU executor {cpu:?}");
    assert_eq!(gpu, [1, 7, 0, 0]);
    assert_eq!(gpu, cpu);

    let mut lock = DeviceBuffer::<u32>::zeroed(&context, 4).unwrap();
    gpu_rules::p8_spin_lock::launch(&stream, (3u32, 128u32), 4, &mut lock).unwrap();
    stream.synchronize_timeout(Duration::from_secs(10)).unwrap();
    let gpu = lock.to_vec().unwrap();
    println!("P8 spin_lock: GPU {gpu:?}");
    assert_eq!(gpu[1], 12);
}

/// P9: threads that return before a `sync_threads()` release it on the GPU (32 of 32 pass),
/// and now on the CPU executor; a write by a thread that waited at the barrier before
/// returning reaches the others.
#[test]
fn p9_exited_threads_release_sync_threads_on_both() {
    let Some(context) = common::gpu_or_skip("p9_exited_threads_release_sync_threads_on_both") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(&context, 64).unwrap();
    gpu_rules::p9_exited_then_barrier::launch(&stream, (4u32, 64u32), 0, &mut out).unwrap();
    stream.synchronize_timeout(Duration::from_secs(10)).unwrap();
    let gpu = out.to_vec().unwrap();
    let mut cpu = vec![0u32; 64];
    gpu_rules::p9_exited_then_barrier::launch_cpu(&CpuExecutor::new(), (4u32, 64u32), 0, &mut cpu).unwrap();
    println!("P9: threads past the barrier: GPU {}, CPU executor {}", gpu.iter().sum::<u32>(), cpu.iter().sum::<u32>());
    assert_eq!(gpu, cpu);
    assert_eq!(gpu[..32], [1; 32]);

    let mut out = DeviceBuffer::<u32>::zeroed(&context, 64).unwrap();
    gpu_rules::p9_exited_writer::launch(&stream, (1u32, 64u32), 1, &mut out).unwrap();
    stream.synchronize_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(out.to_vec().unwrap()[..32], [5; 32]);
}

/// P9: `sync_threads_count(true)` in 32 threads whose 32 block-mates returned: released (PTX
/// `exit`), counting the 32 that arrived, on the GPU (H100: 32) and the CPU executor alike. Run
/// in a child, in case a GPU waits there.
#[test]
fn p9_a_reducing_barrier_after_exited_threads_counts_the_threads_that_arrived() {
    const NAME: &str = "p9_a_reducing_barrier_after_exited_threads_counts_the_threads_that_arrived";
    if in_child(NAME) {
        let Some(context) = common::gpu_or_skip(NAME) else { std::process::exit(0) };
        let stream = Stream::non_blocking(&context).unwrap();
        let mut out = DeviceBuffer::<u32>::zeroed(&context, 64).unwrap();
        gpu_rules::p9_exited_then_barrier::launch(&stream, (1u32, 64u32), 1, &mut out).unwrap();
        let outcome = stream.synchronize_timeout(Duration::from_secs(3));
        println!("P9 sync_threads_count after 32 exits: {outcome:?}");
        if outcome.is_ok() {
            let gpu = out.to_vec().unwrap();
            let mut cpu = vec![0u32; 64];
            gpu_rules::p9_exited_then_barrier::launch_cpu(&CpuExecutor::new(), (1u32, 64u32), 1, &mut cpu).unwrap();
            println!("P9 counts: GPU {:?}, CPU executor {:?}", &gpu[..4], &cpu[..4]);
            if gpu == cpu && gpu[..32] == [32; 32] {
                println!("P9-COUNT-AGREES");
            }
        }
        std::process::exit(0);
    }
    if common::gpu_or_skip(NAME).is_none() {
        return;
    }
    let (success, output) = run_child(NAME);
    println!("{output}");
    assert!(success, "{output}");
    assert!(output.contains("P9-COUNT-AGREES"), "{output}");
}

/// P10's premise: a kernel whose stack ptxas can bound (about 3 KiB of frames, no recursion)
/// gets that stack from the driver whatever the context's limit (1 KiB by default), so only
/// recursion (refused by the builder, tests/gpu_rules_build.rs) can outrun the stack.
#[test]
fn p10_a_deep_but_bounded_call_chain_runs_with_the_default_stack_limit() {
    let Some(context) = common::gpu_or_skip("p10_a_deep_but_bounded_call_chain_runs_with_the_default_stack_limit") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    let limit = context.limit(Limit::StackSize).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(&context, 4096).unwrap();
    gpu_rules::p10_deep_but_bounded::launch(&stream, (16u32, 256u32), &mut out).unwrap();
    let outcome = stream.synchronize_timeout(Duration::from_secs(10));
    println!(
        "P10 deep_but_bounded: stack limit {limit} bytes per thread before the launch, outcome {outcome:?}, limit after {:?}",
        context.limit(Limit::StackSize)
    );
    outcome.unwrap();
    let gpu = out.to_vec().unwrap();
    let mut cpu = vec![0u32; 4096];
    gpu_rules::p10_deep_but_bounded::launch_cpu(&CpuExecutor::new(), (16u32, 256u32), &mut cpu).unwrap();
    assert_eq!(gpu, cpu);
}

/// P11: a `launch_bounds(64)` kernel launched with 128 threads: `cuLaunchKernel` answered
/// `CUDA_ERROR_INVALID_VALUE`. Now refused before the launch, naming the bound (the
/// function's attribute says the same), nothing written; `reqntid` likewise.
#[test]
fn p11_launch_bounds_are_refused_with_the_bound_named() {
    let Some(context) = common::gpu_or_skip("p11_launch_bounds_are_refused_with_the_bound_named") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(&context, 256).unwrap();
    let error = gpu_rules::p11_bounded::launch(&stream, (2u32, 128u32), &mut out).unwrap_err();
    println!("P11 128 threads for launch_bounds(64): {error}");
    assert!(matches!(&error, Error::InvalidLaunch { problem: LaunchProblem::AboveKernelThreadLimit { threads: 128, max: 64, .. }, .. }), "{error:?}");
    let attributes = gpu_rules::p11_bounded::function(&context).unwrap().attributes().unwrap();
    assert_eq!(attributes.max_threads_per_block, 64);
    gpu_rules::p11_bounded::launch(&stream, (4u32, 64u32), &mut out).unwrap();
    stream.synchronize_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(out.to_vec().unwrap(), [1; 256]);

    let mut out = DeviceBuffer::<u32>::zeroed(&context, 256).unwrap();
    let error = gpu_rules::p11_exact::launch(&stream, (4u32, 64u32), &mut out).unwrap_err();
    println!("P11 64 threads for reqntid(128): {error}");
    assert!(matches!(&error, Error::InvalidLaunch { problem: LaunchProblem::RequiredBlockThreads { .. }, .. }), "{error:?}");
    gpu_rules::p11_exact::launch(&stream, (2u32, 128u32), &mut out).unwrap();
    stream.synchronize_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(out.to_vec().unwrap(), [2; 256]);
}

/// P11, a limit the kernel's registers set (no launch bounds written): the driver's
/// `CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES` (or `INVALID_VALUE`) for a block over
/// `CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK` becomes an error naming that limit; nothing runs.
#[test]
fn p11_a_block_over_the_register_limit_is_refused_naming_the_limit() {
    let Some(context) = common::gpu_or_skip("p11_a_block_over_the_register_limit_is_refused_naming_the_limit") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    let attributes = gpu_rules::p11_register_heavy::function(&context).unwrap().attributes().unwrap();
    println!("P11 register_heavy: {} registers, at most {} threads per block", attributes.registers, attributes.max_threads_per_block);
    assert!(attributes.max_threads_per_block < 1024, "the fixture no longer limits the block: {attributes:?}");
    let x = DeviceBuffer::from_slice(&context, &vec![1.0f32; 1024]).unwrap();
    let mut out = DeviceBuffer::<f32>::zeroed(&context, 1024).unwrap();
    let error = gpu_rules::p11_register_heavy::launch(&stream, (1u32, 1024u32), &x, &mut out).unwrap_err();
    println!("P11 1024 threads for the register-heavy kernel: {error}");
    let expected = attributes.max_threads_per_block;
    assert!(
        matches!(&error, Error::InvalidLaunch { problem: LaunchProblem::AboveKernelThreadLimit { threads: 1024, max, .. }, .. } if *max == expected),
        "{error:?}"
    );
    stream.synchronize_timeout(Duration::from_secs(10)).unwrap();
    assert!(out.to_vec().unwrap().iter().all(|&v| v == 0.0), "nothing ran");
    gpu_rules::p11_register_heavy::launch(&stream, (8u32, 128u32), &x, &mut out).unwrap();
    stream.synchronize_timeout(Duration::from_secs(10)).unwrap();
}

/// Q4 (audit 2026-11-27b): recursion through a function pointer, vouched for with
/// `allow_recursion` (tests/kernels/build.rs), run past the context's stack limit: the fault
/// used to be a bare `CUDA_ERROR_ILLEGAL_ADDRESS`; now the error names the kernel and the
/// stack limit (`Error::StackLimitFault`). In a child (the fault poisons the context). The
/// parent also runs it within a raised limit, where the GPU and the CPU executor agree.
#[test]
fn q4_a_fault_after_an_allowed_recursion_names_the_kernel_and_the_stack_limit() {
    const TEST: &str = "q4_a_fault_after_an_allowed_recursion_names_the_kernel_and_the_stack_limit";
    if in_child(TEST) {
        let Some(context) = common::gpu_or_skip(TEST) else { return };
        let stream = Stream::non_blocking(&context).unwrap();
        let mut out = DeviceBuffer::<u32>::zeroed(&context, 64).unwrap();
        println!("Q4 child: stack limit {:?} bytes per thread", context.limit(Limit::StackSize));
        gpu_rules::q4_fnptr_recurse::launch(&stream, (1u32, 64u32), 100, 0, &mut out).unwrap();
        let error = stream.synchronize_timeout(Duration::from_secs(20)).unwrap_err();
        println!("Q4 CHILD SAW: {error}");
        assert!(matches!(error, Error::StackLimitFault { .. }), "{error:?}");
        println!("Q4 CHILD CHECKED");
        std::process::exit(0);
    }
    let Some(context) = common::gpu_or_skip(TEST) else { return };
    let (ok, text) = run_child(TEST);
    println!("child:\n{text}");
    assert!(ok && text.contains("Q4 CHILD CHECKED"), "the child's checks did not pass:\n{text}");
    assert!(text.contains("`q4_fnptr_recurse` (stack limit set: ") && text.contains("Limit::StackSize"), "{text}");

    // Within a stack limit that holds depth 100 (about 176 bytes per level), it runs, and the
    // CPU executor gives the same values (in a context of its own: the raised limit stays
    // with the context, and the primary one serves the other tests).
    drop(context);
    let context = ferrocuda::Context::create(0, ferrocuda::SchedulePolicy::Auto).unwrap();
    let stream = Stream::non_blocking(&context).unwrap();
    context.set_limit(Limit::StackSize, 64 * 1024).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(&context, 64).unwrap();
    gpu_rules::q4_fnptr_recurse::launch(&stream, (1u32, 64u32), 100, 1, &mut out).unwrap();
    stream.synchronize_timeout(Duration::from_secs(20)).unwrap();
    let gpu = out.to_vec().unwrap();
    let mut cpu = vec![0u32; 64];
    gpu_rules::q4_fnptr_recurse::launch_cpu(&CpuExecutor::new(), (1u32, 64u32), 100, 1, &mut cpu).unwrap();
    println!("Q4 depth 100 with a 64 KiB stack limit: gpu[0..4] = {:?}, cpu[0..4] = {:?}", &gpu[..4], &cpu[..4]);
    assert_eq!(gpu, cpu);
}

/// Q7 (audit 2026-11-27b): a kernel with 512 KiB of locals per thread got a bare
/// `CUDA_ERROR_INVALID_VALUE` from `cuLaunchKernel`. Now the error names the local memory per
/// thread, the limit and what to do; a kernel with 32 KiB runs, as on the CPU executor.
#[test]
fn q7_too_much_local_memory_is_refused_with_the_limit_named() {
    let Some(context) = common::gpu_or_skip("q7_too_much_local_memory_is_refused_with_the_limit_named") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    let attributes = gpu_rules::q7_big_stack::function(&context).unwrap().attributes().unwrap();
    println!("Q7 big_stack attributes: {attributes:?}");
    let mut out = DeviceBuffer::<u32>::zeroed(&context, 64).unwrap();
    let error = gpu_rules::q7_big_stack::launch(&stream, (1u32, 64u32), 9, &mut out).unwrap_err();
    println!("Q7 GPU: {error}");
    let Error::InvalidLaunch { problem: LaunchProblem::LocalMemoryTooLarge { bytes, limit, reserve }, .. } = &error else { panic!("{error:?}") };
    assert_eq!((*bytes, *limit), (524_288, 512 * 1024));
    assert!(reserve.is_some(), "the device's figures are named");
    assert!(error.to_string().contains("local memory per thread"), "{error}");
    // The CPU executor refuses it too (the ptxas figure embedded at build time).
    let mut cpu = vec![0u32; 64];
    let cpu_error = gpu_rules::q7_big_stack::launch_cpu(&CpuExecutor::new(), (1u32, 64u32), 9, &mut cpu).unwrap_err();
    println!("Q7 CPU: {cpu_error}");
    assert!(
        matches!(&cpu_error, ferrocuda_device::cpu::CpuError::InvalidConfig { problem: LaunchProblem::LocalMemoryTooLarge { bytes: 524_288, .. }, .. }),
        "{cpu_error:?}"
    );
    // For the record, in a context of its own: what the driver accepts as a stack limit near
    // 512 KiB.
    {
        let own = ferrocuda::Context::create(0, ferrocuda::SchedulePolicy::Auto).unwrap();
        for bytes in [256 * 1024, 512 * 1024 - 4096, 512 * 1024] {
            println!("Q7 set_limit(StackSize, {bytes}) on a created context: {:?}", own.set_limit(Limit::StackSize, bytes));
        }
    }
    // The control runs on both, with the same values.
    gpu_rules::q7_small_stack::launch(&stream, (1u32, 64u32), 9, &mut out).unwrap();
    stream.synchronize().unwrap();
    gpu_rules::q7_small_stack::launch_cpu(&CpuExecutor::new(), (1u32, 64u32), 9, &mut cpu).unwrap();
    assert_eq!(out.to_vec().unwrap(), cpu);
}

/// Q11 (audit 2026-11-27b), release profile: this crate's host build and its device build
/// both wrap on integer overflow (cargo's release default; the builder follows it), so the GPU
/// and the CPU executor give the same wrapped values. (tests/overflow_checks.rs has both builds
/// checking.)
#[test]
fn q11_overflow_wraps_alike_on_the_gpu_and_the_cpu_executor_in_release() {
    let Some(context) = common::gpu_or_skip("q11_overflow_wraps_alike_on_the_gpu_and_the_cpu_executor_in_release") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    let x = [u32::MAX, 1 << 31, 0x5555_5556, 7];
    let input = DeviceBuffer::from_slice(&context, &x).unwrap();
    for (mode, s) in [(0u32, 0u32), (1, 3), (2, 0)] {
        let mut out = DeviceBuffer::<u32>::zeroed(&context, 4).unwrap();
        gpu_rules::q11_int_ops::launch(&stream, (1u32, 4u32), mode, &input, s, &mut out).unwrap();
        stream.synchronize().unwrap();
        let gpu = out.to_vec().unwrap();
        let mut cpu = vec![0u32; 4];
        gpu_rules::q11_int_ops::launch_cpu(&CpuExecutor::new(), (1u32, 4u32), mode, &x, s, &mut cpu).unwrap();
        println!("Q11 release mode {mode}: gpu {gpu:x?}, cpu {cpu:x?}");
        assert_eq!(gpu, cpu, "mode {mode}");
    }
}

/// F2 (audit 2026-11-27c, r20b): the hand-written grid barrier in a cooperative launch
/// completes on the GPU (every block resident by contract) and on the CPU executor (which now
/// runs every block of a cooperative launch at once), with the same values.
#[test]
fn f2_a_cooperative_grid_barrier_agrees_with_the_cpu_executor() {
    let Some(context) = common::gpu_or_skip("f2_a_cooperative_grid_barrier_agrees_with_the_cpu_executor") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    let config = ferrocuda::LaunchConfig::new(4u32, 32u32).cooperative();
    let mut counter = DeviceBuffer::<u32>::zeroed(&context, 1).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(&context, 128).unwrap();
    gpu_rules::f2_grid_barrier::launch(&stream, config, &mut counter, &mut out).unwrap();
    stream.synchronize_timeout(Duration::from_secs(10)).unwrap();
    let gpu = out.to_vec().unwrap();
    let (mut cpu_counter, mut cpu) = (vec![0u32; 1], vec![0u32; 128]);
    gpu_rules::f2_grid_barrier::launch_cpu(&CpuExecutor::new(), config, &mut cpu_counter, &mut cpu).unwrap();
    println!(
        "F2 cooperative grid barrier: GPU counter {:?}, out[0..4] {:?}; CPU executor {:?}, {:?}",
        counter.to_vec().unwrap(),
        &gpu[..4],
        cpu_counter,
        &cpu[..4]
    );
    assert_eq!(gpu, vec![4u32; 128]);
    assert_eq!(gpu, cpu);
}

/// F7 (audit 2026-11-27c, r22): static plus dynamic shared memory over the block's limit is
/// refused on the GPU with the same problem as on the CPU executor, naming both parts: the
/// launch (whose dynamic part is above 48 KiB) and the opt-in that would allow it both say so;
/// what fits runs, with the opt-in.
#[test]
fn f7_static_plus_dynamic_shared_memory_over_the_block_limit_is_refused_on_the_gpu() {
    let Some(context) = common::gpu_or_skip("f7_static_plus_dynamic_shared_memory_over_the_block_limit_is_refused_on_the_gpu") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    let function = gpu_rules::f7_static_plus_dynamic::function(&context).unwrap();
    let static_bytes = function.attributes().unwrap().static_shared_bytes;
    let max = context.limits().max_shared_per_block;
    println!("F7: static shared {static_bytes} bytes, device max per block {max} bytes");
    assert!(static_bytes >= 48000, "{static_bytes}");
    let mut out = DeviceBuffer::<u32>::zeroed(&context, 32).unwrap();
    let too_much = max - static_bytes + 1024;
    let error =
        gpu_rules::f7_static_plus_dynamic::launch(&stream, ferrocuda::LaunchConfig::new(1u32, 32u32).with_shared_bytes(too_much), &mut out).unwrap_err();
    println!("F7 launch with {too_much} dynamic bytes: {error}");
    assert!(matches!(&error, Error::InvalidLaunch { problem: LaunchProblem::SharedMemoryTotalTooLarge { .. }, .. }), "{error:?}");
    let opt_in = function.set_max_dynamic_shared_bytes(too_much);
    println!("F7 opt-in to {too_much} dynamic bytes: {opt_in:?}");
    assert!(matches!(&opt_in, Err(Error::InvalidLaunch { problem: LaunchProblem::SharedMemoryTotalTooLarge { .. }, .. })), "{opt_in:?}");
    let fits = max - static_bytes;
    function.set_max_dynamic_shared_bytes(fits).unwrap();
    gpu_rules::f7_static_plus_dynamic::launch(&stream, ferrocuda::LaunchConfig::new(1u32, 32u32).with_shared_bytes(fits), &mut out).unwrap();
    stream.synchronize_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(out.to_vec().unwrap(), (1..=32).collect::<Vec<u32>>());
}

/// G8 (audit 2026-11-27d, c12's GPU half): barriers in a block of 48 threads (a second warp of
/// 16 lanes). `sync_warp(u32::MAX)` names lanes that do not exist, which CUDA counts as exited
/// (the barrier waits only for the lanes that exist: 1 everywhere), and `sync_threads_count`
/// counts the 48 threads (24 odd ones). The GPU and the CPU executor must agree; a hang is
/// bounded by `synchronize_timeout` and reported.
#[test]
fn g8_barriers_in_a_partial_warp_agree_with_the_cpu_executor() {
    let Some(context) = common::gpu_or_skip("g8_barriers_in_a_partial_warp_agree_with_the_cpu_executor") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    for (mode, expected) in [(0u32, 1u32), (1, 48), (2, 24)] {
        let mut out = DeviceBuffer::from_slice(&context, &[u32::MAX; 48]).unwrap();
        gpu_rules::g8_partial_warp_barriers::launch(&stream, (1u32, 48u32), mode, &mut out).unwrap();
        let waited = stream.synchronize_timeout(Duration::from_secs(5));
        assert!(waited.is_ok(), "G8 mode {mode} on the GPU: {waited:?}");
        let gpu = out.to_vec().unwrap();
        let mut cpu = vec![u32::MAX; 48];
        let on_cpu = gpu_rules::g8_partial_warp_barriers::launch_cpu(&CpuExecutor::new().with_watchdog(Duration::from_secs(5)), (1u32, 48u32), mode, &mut cpu);
        println!("G8 mode {mode}: GPU out[0] {} out[40] {}; CPU executor {on_cpu:?} out[0] {} out[40] {}", gpu[0], gpu[40], cpu[0], cpu[40]);
        on_cpu.unwrap();
        assert_eq!(gpu, vec![expected; 48], "G8 mode {mode} on the GPU");
        assert_eq!(gpu, cpu, "G8 mode {mode}: GPU and CPU executor differ");
    }
}

/// True on an sm_90 device (the cluster and `elect.sync` kernels are built for it only); else
/// prints a skip (and fails under `REQUIRE_GPU=1`).
fn sm90_or_skip(context: &Context, test: &str) -> bool {
    if context.device().compute_capability().map(|(major, _)| major < 9).unwrap_or(true) {
        assert!(!ferrocuda_test_support::gpu_required(), "REQUIRE_GPU=1 but {test} needs sm_90");
        eprintln!("SKIPPED {test}: the kernels are built for sm_90");
        return false;
    }
    true
}

/// E4 (audit 2026-11-27e): a `cluster::sync()` held up only by threads that returned is
/// released on the GPU (PTX `exit`) and now on the CPU executor, which refused it; also when a
/// whole block of each cluster returned. Same values on both.
#[test]
fn e4_a_cluster_barrier_after_exited_threads_is_released_on_both_back_ends() {
    const NAME: &str = "e4_a_cluster_barrier_after_exited_threads_is_released_on_both_back_ends";
    let Some(context) = common::gpu_or_skip(NAME) else { return };
    if !sm90_or_skip(&context, NAME) {
        return;
    }
    let stream = Stream::non_blocking(&context).unwrap();
    for (blocks, live, odd) in [(2u32, 16u32, false), (4, 32, true), (2, 32, false)] {
        let config = ferrocuda::LaunchConfig::new(blocks, 32u32).with_cluster(2u32);
        let n = blocks as usize * 32;
        let mut out = DeviceBuffer::<u32>::zeroed(&context, n).unwrap();
        test_kernels::seams_e::e4_cluster_exit_sync::launch(&stream, config, live, odd, &mut out).unwrap();
        stream.synchronize_timeout(Duration::from_secs(10)).unwrap();
        let gpu = out.to_vec().unwrap();
        let mut cpu = vec![0u32; n];
        test_kernels::seams_e::e4_cluster_exit_sync::launch_cpu(&CpuExecutor::new(), config, live, odd, &mut cpu).unwrap();
        println!(
            "E4 blocks {blocks} live {live} odd blocks return {odd}: GPU {} threads passed, CPU {}",
            gpu.iter().filter(|&&v| v == 102).count(),
            cpu.iter().filter(|&&v| v == 102).count()
        );
        assert_eq!(gpu, cpu);
        assert_eq!(gpu.iter().filter(|&&v| v == 102).count(), if odd { n / 2 } else { blocks as usize * live as usize });
    }
}

/// E3 (audit 2026-11-27e): the shapes of `warpgroup::elect_one()` a GPU completes agree with
/// the CPU executor, which now runs it as a warp collective (the divergent shape, a hang on
/// the GPU, is reported by the executor: tests/cpu_sanitizer.rs).
#[test]
fn e3_elect_one_agrees_with_the_cpu_executor_where_the_gpu_completes() {
    const NAME: &str = "e3_elect_one_agrees_with_the_cpu_executor_where_the_gpu_completes";
    let Some(context) = common::gpu_or_skip(NAME) else { return };
    if !sm90_or_skip(&context, NAME) {
        return;
    }
    let stream = Stream::non_blocking(&context).unwrap();
    for (threads, shape) in [(32u32, 0u32), (32, 1), (48, 0), (64, 1)] {
        let mut out = DeviceBuffer::<u32>::zeroed(&context, threads as usize).unwrap();
        test_kernels::seams_e::e3_elect_shapes::launch(&stream, (1u32, threads), shape, &mut out).unwrap();
        stream.synchronize_timeout(Duration::from_secs(10)).unwrap();
        let gpu = out.to_vec().unwrap();
        let mut cpu = vec![0u32; threads as usize];
        test_kernels::seams_e::e3_elect_shapes::launch_cpu(&CpuExecutor::new(), (1u32, threads), shape, &mut cpu).unwrap();
        println!("E3 threads {threads} shape {shape}: GPU elected lanes {:?}", (0..threads).filter(|&t| gpu[t as usize] == 1).collect::<Vec<_>>());
        assert_eq!(gpu, cpu);
    }
}
