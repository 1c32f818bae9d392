//! Regression tests for the host-side soundness and error findings of the 2026-11 audit
//! (`audit-2026-11/FINDINGS.md`): stream-ordered buffer lifetimes (U3, U4, C2, E1b), wrappers
//! the driver trusts (U5, U7), and clear errors (E1a, E2, E7, H1). Each test is named for what
//! it guards. Skip (printed) without a GPU; fail under `REQUIRE_GPU=1`. The U3 test needs two
//! GPUs with peer access and skips with a message on one.
//!
//! Some tests here compare the GPU's free memory before and after, which other processes on the
//! GPU disturb (session 18's final call: G16R-1 saw -173 MiB with five other test binaries
//! running): `ferrocuda-gpu-run: alone` (scripts/gpu-run/run.sh runs this binary by itself).

mod common;

use std::io::Write;
use std::time::Duration;

use ferrocuda::{Context, DeviceBuffer, Error, Event, JitOptions, LaunchConfig, LaunchProblem, Module, PinnedBuffer, SchedulePolicy, Stream};
use gpu_kernels::saxpy;
use test_kernels::device_lib::{dynamic_shared_sum, math_f32};
use test_kernels::launch_kinds::spin_for;

/// Elements of the buffers the slow writers work on (64 MiB of f32).
const N: usize = 1 << 24;
/// Launches of `y = x + y` queued back to back: keeps a stream busy for several milliseconds.
const ROUNDS: usize = 40;

fn skip(test: &str, why: &str) {
    assert!(!ferrocuda_test_support::gpu_required() || why.contains("two GPUs"), "REQUIRE_GPU=1 but {test} skipped: {why}");
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
}

/// Queues `ROUNDS` launches of `y = 1 * x + y` on `stream` (with `x` all ones, `y` gains
/// `ROUNDS`).
fn slow_writer(stream: &Stream, x: &DeviceBuffer<f32>, y: &mut DeviceBuffer<f32>) {
    for _ in 0..ROUNDS {
        saxpy::launch(stream, LaunchConfig::for_elements(N, 256), 1.0, x, y).unwrap();
    }
}

fn all_equal(values: &[f32], expected: f32) -> Result<(), String> {
    match values.iter().position(|&v| v != expected) {
        None => Ok(()),
        Some(i) => Err(format!(
            "element {i} is {} instead of {expected} ({} of {} differ)",
            values[i],
            values.iter().filter(|&&v| v != expected).count(),
            values.len()
        )),
    }
}

/// U4: a kernel on a second stream that reads a buffer a first stream is still writing must
/// wait for it (two non-blocking streams, nothing ordered by the caller).
#[test]
fn u4_a_launch_on_another_stream_waits_for_the_buffers_writer() {
    let Some(context) = common::gpu_or_skip("u4_a_launch_on_another_stream_waits_for_the_buffers_writer") else { return };
    let (s1, s2) = (Stream::non_blocking(&context).unwrap(), Stream::non_blocking(&context).unwrap());
    let x = DeviceBuffer::from_slice(&context, &vec![1.0f32; N]).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&context, N).unwrap();
    let mut z = DeviceBuffer::<f32>::zeroed(&context, N).unwrap();
    slow_writer(&s1, &x, &mut y);
    // z = 1 * y + z on s2: must see y after all of s1's launches.
    saxpy::launch(&s2, LaunchConfig::for_elements(N, 256), 1.0, &y, &mut z).unwrap();
    // And a writer of y on s2 must wait for s1 too (else s1's later launches would overwrite it).
    y.fill_async(7.0, &s2).unwrap();
    s2.synchronize().unwrap();
    all_equal(&z.to_vec().unwrap(), ROUNDS as f32).unwrap();
    all_equal(&y.to_vec().unwrap(), 7.0).unwrap();
}

/// U4: synchronous host copies must wait for kernels on non-blocking streams (they run on the
/// legacy stream, which does not wait for those), and later kernels for the copies.
#[test]
fn u4_host_copies_wait_for_kernels_on_non_blocking_streams() {
    let Some(context) = common::gpu_or_skip("u4_host_copies_wait_for_kernels_on_non_blocking_streams") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    let x = DeviceBuffer::from_slice(&context, &vec![1.0f32; N]).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&context, N).unwrap();
    slow_writer(&stream, &x, &mut y);
    all_equal(&y.to_vec().unwrap(), ROUNDS as f32).unwrap();
    slow_writer(&stream, &x, &mut y);
    // The host's data must not be overwritten by the kernels still queued before it.
    y.copy_from_host(&vec![0.5f32; N]).unwrap();
    saxpy::launch(&stream, LaunchConfig::for_elements(N, 256), 1.0, &x, &mut y).unwrap();
    all_equal(&y.to_vec().unwrap(), 1.5).unwrap();
}

/// U4 (drop): dropping a buffer that a non-blocking stream still writes must not hand its
/// memory to the next allocation before the kernels end (the free is stream-ordered).
#[test]
fn u4_a_dropped_buffer_is_not_reused_while_kernels_still_write_it() {
    let Some(context) = common::gpu_or_skip("u4_a_dropped_buffer_is_not_reused_while_kernels_still_write_it") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    let x = DeviceBuffer::from_slice(&context, &vec![1.0f32; N]).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&context, N).unwrap();
    slow_writer(&stream, &x, &mut y);
    let started = std::time::Instant::now();
    drop(y);
    let drop_time = started.elapsed();
    let fresh = DeviceBuffer::from_slice(&context, &vec![3.0f32; N]).unwrap();
    stream.synchronize().unwrap();
    all_equal(&fresh.to_vec().unwrap(), 3.0).unwrap();
    let _ = writeln!(std::io::stderr(), "drop of a buffer with queued writers returned after {drop_time:?} (pools: {})", context.uses_memory_pools());
}

/// C2: a buffer of one context passed to a kernel on a stream of another context of the same
/// device is refused (it used to fault the process with CUDA_ERROR_ILLEGAL_ADDRESS), for
/// launches and for the source of an async copy.
#[test]
fn c2_launches_refuse_a_buffer_of_another_context() {
    let Some(primary) = common::gpu_or_skip("c2_launches_refuse_a_buffer_of_another_context") else { return };
    let created = Context::create(0, SchedulePolicy::Auto).unwrap();
    let stream = Stream::new(&created).unwrap();
    let x = DeviceBuffer::from_slice(&primary, &[1.0f32; 64]).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&created, 64).unwrap();
    let error = saxpy::launch(&stream, (1u32, 64u32), 1.0, &x, &mut y).unwrap_err();
    assert!(matches!(&error, Error::BufferInOtherContext { argument: "x", .. }), "{error:?}");
    assert!(error.to_string().contains("enable peer access"), "{error}");
    let error = y.copy_from_device_async(&x, &stream).unwrap_err();
    assert!(matches!(&error, Error::BufferInOtherContext { argument: "source", .. }), "{error:?}");
    // The same buffers in their own context still work.
    let mut y2 = DeviceBuffer::<f32>::zeroed(&primary, 64).unwrap();
    saxpy::launch(&Stream::new(&primary).unwrap(), (1u32, 64u32), 2.0, &x, &mut y2).unwrap();
    all_equal(&y2.to_vec().unwrap(), 2.0).unwrap();
}

/// U3 (two GPUs): with peer access, a kernel on GPU 1 writing a buffer of GPU 0 keeps the
/// buffer alive after its drop until the kernel ends: the next allocation on GPU 0 must not
/// receive the kernel's writes (it used to: a use-after-free).
#[test]
fn u3_a_peer_kernel_keeps_the_buffer_of_another_gpu_alive_after_its_drop() {
    let test = "u3_a_peer_kernel_keeps_the_buffer_of_another_gpu_alive_after_its_drop";
    let Some(ctx0) = common::gpu_or_skip(test) else { return };
    if ferrocuda::Device::count().unwrap() < 2 {
        return skip(test, "needs two GPUs (this machine has one)");
    }
    let ctx1 = Context::primary(1).unwrap();
    if !ctx1.can_access_peer(&ctx0).unwrap() {
        return skip(test, "needs two GPUs with peer access between them");
    }
    ctx1.enable_peer_access(&ctx0).unwrap();
    // Without peer access in the other direction nothing changes for ctx0's own streams.
    let stream1 = Stream::non_blocking(&ctx1).unwrap();
    let x1 = DeviceBuffer::from_slice(&ctx1, &vec![1.0f32; N]).unwrap();
    let mut y0 = DeviceBuffer::<f32>::zeroed(&ctx0, N).unwrap();
    slow_writer(&stream1, &x1, &mut y0);
    drop(y0);
    let fresh = DeviceBuffer::from_slice(&ctx0, &vec![5.0f32; N]).unwrap();
    stream1.synchronize().unwrap();
    ctx0.synchronize().unwrap();
    all_equal(&fresh.to_vec().unwrap(), 5.0).unwrap();
    // A buffer of GPU 0 on GPU 1 without peer access from GPU 0's side is refused the other way.
    let stream0 = Stream::new(&ctx0).unwrap();
    let x1_small = DeviceBuffer::from_slice(&ctx1, &[1.0f32; 32]).unwrap();
    let mut y0_small = DeviceBuffer::<f32>::zeroed(&ctx0, 32).unwrap();
    if !ctx0.can_access_peer(&ctx1).unwrap() {
        let error = saxpy::launch(&stream0, (1u32, 32u32), 1.0, &x1_small, &mut y0_small).unwrap_err();
        assert!(matches!(error, Error::BufferInOtherContext { .. }), "{error:?}");
    }
}

/// U5: a graph that captured a kernel of an explicitly loaded module keeps the module loaded:
/// dropping the module before `instantiate` used to crash inside the driver.
#[test]
fn u5_a_graph_keeps_the_module_of_its_captured_kernels_loaded() {
    let Some(context) = common::gpu_or_skip("u5_a_graph_keeps_the_module_of_its_captured_kernels_loaded") else { return };
    let ptx = gpu_kernels::KERNELS.ptx_for(80).expect("sm_80 PTX");
    // SAFETY: the crate's own PTX, built by #[kernel] (fingerprints checked by launch_in).
    let module = unsafe { Module::load_ptx(&context, "graph module", ptx, &JitOptions::new()) }.unwrap();
    let stream = Stream::non_blocking(&context).unwrap();
    let x = DeviceBuffer::from_slice(&context, &[1.0f32; 256]).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&context, 256).unwrap();
    // Look the kernel up (and check it) before the capture.
    saxpy::launch_in(&module, &stream, (1u32, 256u32), 0.0, &x, &mut y).unwrap();
    stream.synchronize().unwrap();
    let graph = stream.capture(|s| saxpy::launch_in(&module, s, (1u32, 256u32), 1.0, &x, &mut y)).unwrap();
    drop(module);
    let exec = graph.instantiate().unwrap();
    drop(graph);
    for _ in 0..3 {
        // SAFETY: `x` and `y` outlive the replays, which are synchronised below before reading.
        unsafe { exec.launch(&stream) }.unwrap();
    }
    stream.synchronize().unwrap();
    all_equal(&y.to_vec().unwrap(), 3.0).unwrap();
}

/// U7: a module whose kernel has the launcher's name and parameter sizes but other element
/// types (`math_f32` and `math_f64` swapped: both take two 16-byte slices) is refused by the
/// full-signature fingerprint before the first launch (it used to write out of bounds).
#[test]
fn u7_launch_in_refuses_a_kernel_whose_signature_differs_only_in_element_types() {
    let Some(context) = common::gpu_or_skip("u7_launch_in_refuses_a_kernel_whose_signature_differs_only_in_element_types") else { return };
    let ptx = test_kernels::KERNELS.ptx_for(80).expect("sm_80 PTX");
    let swapped = ptx.replace("math_f32", "math_tmp").replace("math_f64", "math_f32").replace("math_tmp", "math_f64");
    // SAFETY: deliberately violated to check that the fingerprint catches it: the launch must
    // be refused before anything runs.
    let module = unsafe { Module::load_ptx(&context, "swapped", &swapped, &JitOptions::new()) }.unwrap();
    let stream = Stream::new(&context).unwrap();
    let x = DeviceBuffer::from_slice(&context, &[1.0f32; 32]).unwrap();
    let mut out = DeviceBuffer::<f32>::zeroed(&context, 32 * 24).unwrap();
    let error = math_f32::launch_in(&module, &stream, (1u32, 32u32), &x, &mut out).unwrap_err();
    assert!(matches!(error, Error::KernelSignatureMismatch { .. }), "{error:?}");
    assert!(error.to_string().contains("fingerprint"), "{error}");
    // The unswapped module passes the same check.
    // SAFETY: the crate's own PTX.
    let module = unsafe { Module::load_ptx(&context, "original", ptx, &JitOptions::new()) }.unwrap();
    math_f32::launch_in(&module, &stream, (1u32, 32u32), &x, &mut out).unwrap();
    stream.synchronize().unwrap();
}

/// E1a: the first launch of a crate's kernel in a context, inside a capture, is an error that
/// names `embedded_image` (loading the module there invalidated the capture).
#[test]
fn e1a_first_launch_inside_a_capture_names_how_to_load_the_module_first() {
    let Some(_primary) = common::gpu_or_skip("e1a_first_launch_inside_a_capture_names_how_to_load_the_module_first") else { return };
    let fresh = Context::create(0, SchedulePolicy::Auto).unwrap();
    let stream = Stream::non_blocking(&fresh).unwrap();
    let x = DeviceBuffer::from_slice(&fresh, &[1.0f32; 32]).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&fresh, 32).unwrap();
    let error = stream.capture(|s| saxpy::launch(s, (1u32, 32u32), 1.0, &x, &mut y)).unwrap_err();
    assert!(matches!(error, Error::ModuleNotLoadedInCapture { .. }), "{error:?}");
    assert!(error.to_string().contains("embedded_image"), "{error}");
    // Loading it first makes the same capture work.
    fresh.embedded_image(&gpu_kernels::KERNELS).unwrap();
    let graph = stream.capture(|s| saxpy::launch(s, (1u32, 32u32), 1.0, &x, &mut y)).unwrap();
    assert_eq!(graph.node_count().unwrap(), 1);
}

/// E1b: a buffer dropped inside a capture must neither invalidate the capture nor leak: its
/// release waits for the end of the capture (64 captures of 64 MiB each used to leak 4 GiB).
#[test]
fn e1b_a_buffer_dropped_inside_a_capture_is_freed_after_it_without_invalidating_it() {
    let Some(context) = common::gpu_or_skip("e1b_a_buffer_dropped_inside_a_capture_is_freed_after_it_without_invalidating_it") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    let x = DeviceBuffer::from_slice(&context, &[1.0f32; 256]).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&context, 256).unwrap();
    saxpy::launch(&stream, (1u32, 256u32), 1.0, &x, &mut y).unwrap();
    context.synchronize().unwrap();
    let (free_before, _) = context.memory_info().unwrap();
    for _ in 0..64 {
        let mut temporary = DeviceBuffer::<f32>::zeroed(&context, 16 << 20).unwrap();
        let graph = stream
            .capture(|s| {
                saxpy::launch(s, (1u32, 256u32), 1.0, &x, &mut temporary.slice_mut(..256))?;
                drop(temporary);
                // Its only recorded stream is the legacy one (the launch in the capture is not
                // recorded): freed at once there, which neither joins nor invalidates the
                // capture of this non-blocking stream (P5).
                assert_eq!(context.deferred_releases(), 0, "the drop inside the capture was held back although the capture does not involve its streams");
                saxpy::launch(s, (1u32, 256u32), 1.0, &x, &mut y)
            })
            .unwrap();
        assert_eq!(context.deferred_releases(), 0, "released when the capture ended");
        drop(graph);
    }
    context.synchronize().unwrap();
    let (free_after, _) = context.memory_info().unwrap();
    let lost = free_before.saturating_sub(free_after);
    assert!(lost < 1 << 30, "{} MiB of device memory lost over 64 captures", lost >> 20);
}

/// E2: dynamic shared memory above the kernel's limit (48 KiB unless raised) is refused with
/// the setter to call, instead of the driver's CUDA_ERROR_INVALID_VALUE; raising it works.
#[test]
fn e2_dynamic_shared_memory_above_the_kernels_limit_names_the_setter() {
    let Some(context) = common::gpu_or_skip("e2_dynamic_shared_memory_above_the_kernels_limit_names_the_setter") else { return };
    if context.limits().max_shared_per_block < 100_000 {
        return skip("e2_dynamic_shared_memory_above_the_kernels_limit_names_the_setter", "the device allows less than 100 000 bytes of shared memory");
    }
    let stream = Stream::new(&context).unwrap();
    let x = DeviceBuffer::from_slice(&context, &[1u32; 256]).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(&context, 1).unwrap();
    let config = LaunchConfig::new(1u32, 256u32).with_shared_bytes(100_000);
    let function = dynamic_shared_sum::function(&context).unwrap();
    function.set_max_dynamic_shared_bytes(48 * 1024).unwrap();
    let error = dynamic_shared_sum::launch(&stream, config, &x, &mut out).unwrap_err();
    assert!(matches!(&error, Error::InvalidLaunch { problem: LaunchProblem::SharedMemoryAboveKernelMax { .. }, .. }), "{error:?}");
    assert!(error.to_string().contains("set_max_dynamic_shared_bytes(100000)"), "{error}");
    function.set_max_dynamic_shared_bytes(100_000).unwrap();
    dynamic_shared_sum::launch(&stream, config, &x, &mut out).unwrap();
    stream.synchronize().unwrap();
}

/// E7: `Event::record` on a stream of another context, huge allocations (device and pinned),
/// and PTX that is not PTX each give an error that names the cause.
#[test]
fn e7_runtime_mistakes_return_errors_that_name_the_cause() {
    let Some(context) = common::gpu_or_skip("e7_runtime_mistakes_return_errors_that_name_the_cause") else { return };
    let created = Context::create(0, SchedulePolicy::Auto).unwrap();
    let event = Event::new(&created).unwrap();
    let error = event.record(&Stream::new(&context).unwrap()).unwrap_err();
    assert!(matches!(error, Error::StreamInOtherContext { operation: "Event::record" }), "{error:?}");

    let error = DeviceBuffer::<u64>::zeroed(&context, usize::MAX / 4).unwrap_err();
    assert!(matches!(error, Error::AllocationTooLarge { .. }), "{error:?}");
    let error = PinnedBuffer::<u64>::zeroed(&context, usize::MAX / 4).unwrap_err();
    assert!(matches!(error, Error::AllocationTooLarge { .. }), "{error:?}");

    // SAFETY: never launched.
    let error = unsafe { Module::load_ptx(&context, "garbage", "garbage", &JitOptions::new()) }.unwrap_err();
    assert!(error.to_string().contains("not PTX"), "{error}");
}

/// H1: `Stream::synchronize_timeout` gives up on work that takes longer, and a later
/// synchronisation still waits for it.
#[test]
fn h1_synchronize_timeout_gives_up_on_long_work() {
    let Some(context) = common::gpu_or_skip("h1_synchronize_timeout_gives_up_on_long_work") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    let x = DeviceBuffer::from_slice(&context, &vec![1.0f32; N]).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&context, N).unwrap();
    slow_writer(&stream, &x, &mut y);
    let error = stream.synchronize_timeout(Duration::from_micros(1)).unwrap_err();
    assert!(matches!(error, Error::Timeout { .. }), "{error:?}");
    stream.synchronize_timeout(Duration::from_secs(60)).unwrap();
    all_equal(&y.to_vec().unwrap(), ROUNDS as f32).unwrap();
}

/// S1: dropping the last handles of a created context (its stream first) while a kernel of its
/// embedded module still runs must wait for the kernel before the module is unloaded; the
/// kernel has only a scalar argument, so no buffer keeps anything alive. Before the fix
/// `ContextInner::drop` unloaded the module at once, under the running code.
#[test]
fn s1_dropping_the_last_context_handle_waits_for_a_kernel_still_running_its_code() {
    let test = "s1_dropping_the_last_context_handle_waits_for_a_kernel_still_running_its_code";
    let Some(_primary) = common::gpu_or_skip(test) else { return };
    const SPIN: Duration = Duration::from_millis(300);
    let context = Context::create(0, SchedulePolicy::Auto).unwrap();
    let stream = Stream::non_blocking(&context).unwrap();
    // Load the module first, so that the timed part is the drop alone.
    spin_for::launch(&stream, (1u32, 1u32), 0).unwrap();
    stream.synchronize().unwrap();
    spin_for::launch(&stream, (1u32, 1u32), SPIN.as_nanos() as u64).unwrap();
    let start = std::time::Instant::now();
    drop(stream);
    drop(context);
    let waited = start.elapsed();
    assert!(
        waited >= SPIN * 2 / 3,
        "dropping the last handles returned after {waited:?} while a {SPIN:?} kernel of the context's module was running: the module was unloaded under it"
    );
}
