//! Regression tests for the host-side findings of the second audit
//! (`audit-2026-11-24/FINDINGS.md`, issue 21): work that did not declare the memory it touches
//! (N2 cuFFT buffers, N3/S4 a plan's work area, N4 pinned buffers, S1 module globals) and drops
//! in states nobody planned for (N10 host callbacks, N11 a stream dropped while capturing,
//! N12/S2 a plan or module dropped in a capture), and `Context::recover` against a thread that
//! revives the primary context (S3). S5 (peer all-reduce lengths) needs two GPUs: see
//! `collectives/tests/gpu_peer_lengths.rs`.
//!
//! Each test is named for what it guards. Skip (printed) without a GPU; fail under
//! `REQUIRE_GPU=1`. Every test uses only APIs that existed before the fix, so the same file
//! built against the audited commit shows the failures.
//!
//! Some tests here compare the GPU's free memory before and after, which other processes on the
//! GPU disturb (session 18's final call: G16R-1 saw -173 MiB with five other test binaries
//! running): `ferrocuda-gpu-run: alone` (scripts/gpu-run/run.sh runs this binary by itself).

mod common;
#[path = "common/host_ordering.rs"]
mod host_ordering;

use std::io::Write;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferrocuda::cufft::{C2C, Complex, Plan};
use ferrocuda::{Context, DeviceBuffer, Error, JitOptions, Module, PinnedBuffer, Stream};
use host_ordering::gpu_with_cufft;
use test_kernels::launch_kinds::{mark_blocks, spin_for};

/// Nanoseconds a "slow" kernel keeps a stream busy: long enough that unordered work runs first.
const SLOW_NS: u64 = 300_000_000;
/// Points of the large transforms (as in the audit's repro).
const FFT_N: usize = 1 << 24;

/// Keeps `stream` busy for `SLOW_NS` with a kernel that touches no buffer.
fn busy(stream: &Stream) {
    spin_for::launch(stream, (1u32, 1u32), SLOW_NS).unwrap();
}

/// Fails the process if a test hangs (a deadlock must not pass by never finishing).
fn watchdog(test: &'static str, limit: Duration) {
    std::thread::spawn(move || {
        std::thread::sleep(limit);
        let _ = writeln!(std::io::stderr(), "{test}: HANG: still running after {limit:?}");
        std::process::exit(4);
    });
}

/// N2: a buffer that cuFFT writes is not freed under the transform: its drop waits for it, so
/// a new allocation (which may get the same address) keeps its contents.
#[test]
fn n2_fft_output_dropped_after_forward_is_not_reused_under_the_transform() {
    let Some(context) = gpu_with_cufft("n2_fft_output_dropped_after_forward_is_not_reused_under_the_transform") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    let plan = Plan::<C2C>::new(&context, &[FFT_N], 1).unwrap();
    let input = DeviceBuffer::from_slice(&context, &vec![Complex::new(1.0f32, 0.0); FFT_N]).unwrap();
    let mut output = DeviceBuffer::<Complex<f32>>::zeroed(&context, FFT_N).unwrap();
    busy(&stream);
    plan.forward(&stream, &input, &mut output).unwrap();
    drop(output);
    let fresh = DeviceBuffer::from_slice(&context, &vec![Complex::new(5.0f32, 5.0); FFT_N]).unwrap();
    stream.synchronize().unwrap();
    let values = fresh.to_vec().unwrap();
    let overwritten = values.iter().filter(|c| **c != Complex::new(5.0, 5.0)).count();
    assert_eq!(overwritten, 0, "{overwritten} of {FFT_N} elements of a new buffer were overwritten by a transform into a dropped one");
}

/// N2: `to_vec` of a transform's output waits for the transform (it ran on a non-blocking
/// stream behind a slow kernel).
#[test]
fn n2_to_vec_of_an_fft_output_waits_for_the_transform() {
    let Some(context) = gpu_with_cufft("n2_to_vec_of_an_fft_output_waits_for_the_transform") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    let plan = Plan::<C2C>::new(&context, &[FFT_N], 1).unwrap();
    let input = DeviceBuffer::from_slice(&context, &vec![Complex::new(1.0f32, 0.0); FFT_N]).unwrap();
    let mut output = DeviceBuffer::<Complex<f32>>::zeroed(&context, FFT_N).unwrap();
    busy(&stream);
    plan.forward(&stream, &input, &mut output).unwrap();
    let early = output.to_vec().unwrap();
    assert_eq!(early[0], Complex::new(FFT_N as f32, 0.0), "to_vec right after forward read a value the transform had not written yet");
}

/// N3: one plan used on two streams: the second use waits for the first (they share the
/// plan's work area), so both give the one-stream results.
#[test]
fn n3_one_plan_on_two_streams_gives_the_one_stream_results() {
    let Some(context) = gpu_with_cufft("n3_one_plan_on_two_streams_gives_the_one_stream_results") else { return };
    let (s1, s2) = (Stream::non_blocking(&context).unwrap(), Stream::non_blocking(&context).unwrap());
    let (n, batch) = (1usize << 22, 4usize);
    let plan = Plan::<C2C>::new(&context, &[n], batch).unwrap();
    let len = n * batch;
    let a: Vec<Complex<f32>> = (0..len).map(|i| Complex::new((i % 97) as f32, (i % 13) as f32)).collect();
    let b: Vec<Complex<f32>> = (0..len).map(|i| Complex::new((i % 31) as f32 - 15.0, 1.0)).collect();
    let (a, b) = (DeviceBuffer::from_slice(&context, &a).unwrap(), DeviceBuffer::from_slice(&context, &b).unwrap());
    let (mut ra, mut rb) = (DeviceBuffer::<Complex<f32>>::zeroed(&context, len).unwrap(), DeviceBuffer::<Complex<f32>>::zeroed(&context, len).unwrap());
    plan.forward(&s1, &a, &mut ra).unwrap();
    s1.synchronize().unwrap();
    plan.forward(&s1, &b, &mut rb).unwrap();
    s1.synchronize().unwrap();
    let (ra, rb) = (ra.to_vec().unwrap(), rb.to_vec().unwrap());
    let (mut o1, mut o2) = (DeviceBuffer::<Complex<f32>>::zeroed(&context, len).unwrap(), DeviceBuffer::<Complex<f32>>::zeroed(&context, len).unwrap());
    for run in 0..5 {
        plan.forward(&s1, &a, &mut o1).unwrap();
        plan.forward(&s2, &b, &mut o2).unwrap();
        s1.synchronize().unwrap();
        s2.synchronize().unwrap();
        let bad = o1.to_vec().unwrap().iter().zip(&ra).chain(o2.to_vec().unwrap().iter().zip(&rb)).filter(|(x, y)| x != y).count();
        assert_eq!(bad, 0, "run {run}: {bad} elements differ from the one-stream results");
    }
}

/// S4: one plan shared by two threads, each on its own stream: each thread's transform runs on
/// its own stream (its `synchronize` covers it) and gives the one-stream result.
#[test]
fn s4_one_plan_from_two_threads_runs_each_on_its_own_stream() {
    let Some(context) = gpu_with_cufft("s4_one_plan_from_two_threads_runs_each_on_its_own_stream") else { return };
    let n = 1usize << 22;
    let plan = Arc::new(Plan::<C2C>::new(&context, &[n], 2).unwrap());
    let len = 2 * n;
    let reference = |seed: usize| -> (Vec<Complex<f32>>, Vec<Complex<f32>>) {
        let x: Vec<Complex<f32>> = (0..len).map(|i| Complex::new(((i + seed) % 89) as f32, (i % 7) as f32)).collect();
        let stream = Stream::non_blocking(&context).unwrap();
        let input = DeviceBuffer::from_slice(&context, &x).unwrap();
        let mut out = DeviceBuffer::<Complex<f32>>::zeroed(&context, len).unwrap();
        plan.forward(&stream, &input, &mut out).unwrap();
        stream.synchronize().unwrap();
        (x, out.to_vec().unwrap())
    };
    let cases = [reference(0), reference(5)];
    std::thread::scope(|scope| {
        for (t, (x, expected)) in cases.iter().enumerate() {
            let (plan, context) = (plan.clone(), context.clone());
            scope.spawn(move || {
                let stream = Stream::non_blocking(&context).unwrap();
                let input = DeviceBuffer::from_slice(&context, x).unwrap();
                for round in 0..10 {
                    let mut out = DeviceBuffer::<Complex<f32>>::zeroed(&context, len).unwrap();
                    busy_short(&stream);
                    plan.forward(&stream, &input, &mut out).unwrap();
                    stream.synchronize().unwrap();
                    // Read on this thread's stream's terms: after its synchronize, with no
                    // further wait, the result must be there.
                    let bad = out.to_vec().unwrap().iter().zip(expected).filter(|(a, b)| a != b).count();
                    assert_eq!(bad, 0, "thread {t} round {round}: {bad} elements wrong");
                }
            });
        }
    });
}

/// A few milliseconds of spinning: enough to make the two threads' calls overlap.
fn busy_short(stream: &Stream) {
    spin_for::launch(stream, (1u32, 1u32), 5_000_000u64).unwrap();
}

/// N4: a copy out of a pinned buffer on one stream, then a copy into it on another stream:
/// the second waits for the first, which therefore sends the earlier data.
#[test]
fn n4_pinned_copies_on_two_streams_are_ordered() {
    let Some(context) = common::gpu_or_skip("n4_pinned_copies_on_two_streams_are_ordered") else { return };
    let (s1, s2) = (Stream::non_blocking(&context).unwrap(), Stream::non_blocking(&context).unwrap());
    let n = 1 << 24;
    let mut pinned = PinnedBuffer::from_slice(&context, &vec![0x1111_1111u32; n]).unwrap();
    let mut d1 = DeviceBuffer::<u32>::zeroed(&context, n).unwrap();
    let d2 = DeviceBuffer::from_slice(&context, &vec![0x2222_2222u32; n]).unwrap();
    busy(&s1);
    pinned.copy_to_device_async(&mut d1, &s1).unwrap();
    pinned.copy_from_device_async(&d2, &s2).unwrap();
    s1.synchronize().unwrap();
    s2.synchronize().unwrap();
    let later = d1.to_vec().unwrap().iter().filter(|&&x| x != 0x1111_1111).count();
    assert_eq!(later, 0, "{later} of {n} elements were overwritten in the pinned buffer before they were sent");
    assert!(pinned.as_slice().unwrap().iter().all(|&x| x == 0x2222_2222));
}

/// N4, the other order: a copy into a pinned buffer on a busy stream, then a copy out of it on
/// another stream: the second sends the data the first brought.
#[test]
fn n4_a_pinned_read_on_another_stream_waits_for_the_pinned_write() {
    let Some(context) = common::gpu_or_skip("n4_a_pinned_read_on_another_stream_waits_for_the_pinned_write") else { return };
    let (s1, s2) = (Stream::non_blocking(&context).unwrap(), Stream::non_blocking(&context).unwrap());
    let n = 1 << 22;
    let mut pinned = PinnedBuffer::from_slice(&context, &vec![1u32; n]).unwrap();
    let source = DeviceBuffer::from_slice(&context, &vec![7u32; n]).unwrap();
    let mut target = DeviceBuffer::<u32>::zeroed(&context, n).unwrap();
    busy(&s1);
    pinned.copy_from_device_async(&source, &s1).unwrap();
    pinned.copy_to_device_async(&mut target, &s2).unwrap();
    s2.synchronize().unwrap();
    let stale = target.to_vec().unwrap().iter().filter(|&&x| x != 7).count();
    assert_eq!(stale, 0, "{stale} of {n} elements were sent before the pinned buffer received them");
}

/// N10: buffers dropped inside host callbacks are freed (after the callback returns), and the
/// count of deferred releases goes back to zero.
#[test]
fn n10_buffers_dropped_in_host_callbacks_are_freed() {
    let Some(context) = common::gpu_or_skip("n10_buffers_dropped_in_host_callbacks_are_freed") else { return };
    watchdog("n10_buffers_dropped_in_host_callbacks_are_freed", Duration::from_secs(60));
    // A context of its own: other tests' allocations do not move its free-memory figure.
    let context = Context::create(0, ferrocuda::SchedulePolicy::Auto).unwrap_or(context);
    let stream = Stream::new(&context).unwrap();
    context.synchronize().unwrap();
    let (free_before, _) = context.memory_info().unwrap();
    for _ in 0..16 {
        let buffer = DeviceBuffer::<u8>::zeroed(&context, 64 << 20).unwrap();
        stream.launch_host_fn(move || drop(buffer)).unwrap();
    }
    stream.synchronize().unwrap();
    context.synchronize().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while context.deferred_releases() > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
        context.synchronize().unwrap();
    }
    assert_eq!(context.deferred_releases(), 0, "releases from host callbacks are stuck");
    let (free_after, _) = context.memory_info().unwrap();
    let lost = free_before.saturating_sub(free_after) >> 20;
    assert!(
        lost < 256,
        "{lost} MiB of the 1024 MiB dropped in host callbacks were not freed (free before {} MiB, after {} MiB)",
        free_before >> 20,
        free_after >> 20
    );
}

/// N11: a stream dropped while capturing ends its capture, so buffers dropped afterwards are
/// freed instead of waiting forever for a capture that nobody can end.
#[test]
fn n11_a_stream_dropped_while_capturing_ends_its_capture() {
    let Some(primary) = common::gpu_or_skip("n11_a_stream_dropped_while_capturing_ends_its_capture") else { return };
    let context = Context::create(0, ferrocuda::SchedulePolicy::Auto).unwrap_or(primary);
    let buffers: Vec<DeviceBuffer<u8>> = (0..8).map(|_| DeviceBuffer::<u8>::zeroed(&context, 64 << 20).unwrap()).collect();
    let stream = Stream::non_blocking(&context).unwrap();
    stream.begin_capture().unwrap();
    drop(stream); // the capture is never ended by the caller
    drop(buffers);
    context.synchronize().unwrap();
    assert_eq!(context.deferred_releases(), 0, "releases wait for a capture on a stream that no longer exists");
    let later = DeviceBuffer::<u8>::zeroed(&context, 1 << 20).unwrap();
    drop(later);
    assert_eq!(context.deferred_releases(), 0);
    // Capturing still works in the context.
    let other = Stream::non_blocking(&context).unwrap();
    let mut y = DeviceBuffer::<u32>::zeroed(&context, 32).unwrap();
    mark_blocks::launch(&other, (1u32, 32u32), false, &mut y).unwrap();
    other.synchronize().unwrap();
    let graph = other.capture(|s| mark_blocks::launch(s, (1u32, 32u32), false, &mut y)).unwrap();
    assert_eq!(graph.node_count().unwrap(), 1);
}

/// N12: a plan dropped inside a capture does not invalidate it; it is destroyed once the
/// capture ends.
#[test]
fn n12_a_plan_dropped_inside_a_capture_is_destroyed_after_it() {
    let Some(context) = gpu_with_cufft("n12_a_plan_dropped_inside_a_capture_is_destroyed_after_it") else { return };
    let context = Context::create(0, ferrocuda::SchedulePolicy::Auto).unwrap_or(context);
    let stream = Stream::non_blocking(&context).unwrap();
    let mut y = DeviceBuffer::<u32>::zeroed(&context, 1024).unwrap();
    mark_blocks::launch(&stream, (4u32, 256u32), false, &mut y).unwrap(); // loads the module first
    stream.synchronize().unwrap();
    let plan = Plan::<C2C>::new(&context, &[1024], 1).unwrap();
    let graph = stream.capture(|s| {
        mark_blocks::launch(s, (4u32, 256u32), false, &mut y)?;
        drop(plan);
        Ok(())
    });
    let graph = graph.unwrap_or_else(|e| panic!("dropping a plan inside a capture broke it: {e}"));
    assert_eq!(graph.node_count().unwrap(), 1);
    context.synchronize().unwrap();
    assert_eq!(context.deferred_releases(), 0);
}

/// S1: a write of a module's global waits for the module's kernels already queued on other
/// streams (they read the old value), and kernels queued after it read the new one.
#[test]
fn s1_a_global_write_is_ordered_with_the_modules_kernels_on_other_streams() {
    let Some(context) = common::gpu_or_skip("s1_a_global_write_is_ordered_with_the_modules_kernels_on_other_streams") else { return };
    // SAFETY: a hand-written kernel with mark_blocks's parameters (bool, pointer, length).
    let module =
        unsafe { Module::load_ptx(&context, "late_read", &host_ordering::late_read_ptx(300_000_000), &JitOptions::new().host_writable_globals(["FILL"])) }
            .unwrap();
    let fill = module.global::<u32>("FILL").unwrap();
    let stream = Stream::non_blocking(&context).unwrap();
    let mut before = DeviceBuffer::<u32>::zeroed(&context, 4).unwrap();
    mark_blocks::launch_in(&module, &stream, (4u32, 32u32), false, &mut before).unwrap();
    fill.write(&100).unwrap(); // issued while the kernel spins
    let mut after = DeviceBuffer::<u32>::zeroed(&context, 4).unwrap();
    mark_blocks::launch_in(&module, &stream, (4u32, 32u32), false, &mut after).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(before.to_vec().unwrap(), [1, 2, 3, 4], "a kernel queued before the write saw the written value");
    assert_eq!(after.to_vec().unwrap(), [100, 101, 102, 103], "a kernel queued after the write did not see it");
    // And a read of the global waits for nothing it should not: it sees the last write.
    assert_eq!(fill.read().unwrap(), 100);
}

/// S2: a module dropped inside a capture does not invalidate it (its unload waits for the end
/// of the capture; the graph keeps the module it captured loaded).
#[test]
fn s2_a_module_dropped_inside_a_capture_is_unloaded_after_it() {
    let Some(context) = common::gpu_or_skip("s2_a_module_dropped_inside_a_capture_is_unloaded_after_it") else { return };
    let context = Context::create(0, ferrocuda::SchedulePolicy::Auto).unwrap_or(context);
    // SAFETY: as in the S1 test.
    let module = unsafe { Module::load_ptx(&context, "dropped_in_capture", &host_ordering::late_read_ptx(300_000_000), &JitOptions::new()) }.unwrap();
    let stream = Stream::non_blocking(&context).unwrap();
    let mut y = DeviceBuffer::<u32>::zeroed(&context, 32).unwrap();
    mark_blocks::launch(&stream, (1u32, 32u32), false, &mut y).unwrap(); // the embedded module, loaded before
    stream.synchronize().unwrap();
    let graph = stream.capture(|s| {
        mark_blocks::launch(s, (1u32, 32u32), false, &mut y)?;
        drop(module);
        Ok(())
    });
    let graph = graph.unwrap_or_else(|e| panic!("dropping a module inside a capture broke it: {e}"));
    assert_eq!(graph.node_count().unwrap(), 1);
    context.synchronize().unwrap();
    assert_eq!(context.deferred_releases(), 0);
}

/// The environment variable naming the test a child process runs (S3 resets the primary
/// context, which must not happen under the other tests of this process).
const CHILD: &str = "FERROCUDA_HOST_SAFETY_CHILD";

/// S3: `Context::recover` on the primary context while another thread keeps reviving its
/// handle (`Context::current` on a thread where it was bound): either recover refuses
/// (`ContextStillInUse`, nothing reset), or it succeeds and the other thread never gets a
/// handle to the reset context again; the thread's work never fails because of the reset.
#[test]
fn s3_recover_against_a_thread_reviving_the_primary_context() {
    const TEST: &str = "s3_recover_against_a_thread_reviving_the_primary_context";
    if std::env::var(CHILD).is_ok_and(|t| t == TEST) {
        s3_child();
        return;
    }
    if common::gpu_or_skip(TEST).is_none() {
        return;
    }
    let output = Command::new(std::env::current_exe().unwrap()).args([TEST, "--exact", "--nocapture", "--test-threads=1"]).env(CHILD, TEST).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    eprintln!("{text}");
    assert!(output.status.success(), "the child failed:\n{text}");
    assert!(text.contains("S3 outcome:"), "{text}");
}

fn s3_child() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    watchdog("s3 child", Duration::from_secs(60));
    let (mut refused, mut recovered) = (0, 0);
    for _ in 0..20 {
        let context = Context::primary(0).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let (work_done, stale_handles) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (bound_tx, bound_rx) = std::sync::mpsc::channel();
        let reviver = {
            let (stop, work_done, stale) = (stop.clone(), work_done.clone(), stale_handles.clone());
            let mine = context.clone();
            std::thread::spawn(move || {
                mine.bind_to_thread().unwrap();
                let raw = mine.raw();
                drop(mine); // only the thread-local weak handle is left
                bound_tx.send(()).unwrap();
                while !stop.load(Ordering::SeqCst) {
                    if let Some(revived) = Context::current() {
                        // A revived handle must be usable: its context cannot be reset under it.
                        let buffer = DeviceBuffer::from_slice(&revived, &[3u32; 16]).expect("work in a revived context failed");
                        assert_eq!(buffer.to_vec().expect("work in a revived context failed"), [3u32; 16]);
                        if revived.raw() != raw {
                            stale.fetch_add(1, Ordering::SeqCst);
                        }
                        work_done.fetch_add(1, Ordering::SeqCst);
                    }
                }
            })
        };
        bound_rx.recv().unwrap();
        std::thread::sleep(Duration::from_micros(200));
        // SAFETY: nothing but ferrocuda uses the primary context in this test process (no
        // cudarc, runtime or library handle lives in it).
        match unsafe { context.reset_primary() } {
            Ok(fresh) => {
                recovered += 1;
                drop(fresh);
            }
            Err(Error::ContextStillInUse { .. }) => refused += 1,
            Err(other) => panic!("recover failed otherwise: {other}"),
        }
        stop.store(true, Ordering::SeqCst);
        reviver.join().expect("the reviving thread's work failed");
        assert_eq!(stale_handles.load(Ordering::SeqCst), 0, "a revived handle named another context than the one bound");
    }
    println!("S3 outcome: {recovered} recoveries, {refused} refusals (ContextStillInUse), no work failed");
}
