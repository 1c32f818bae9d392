//! The adversarial pass of issue 21 beyond the audit's findings: streams x threads x graphs x
//! callbacks x drops x library calls, each case built to break one promise of
//! `docs/host-safety.md` (the page names the case that pins each promise). Skip (printed)
//! without a GPU; fail under `REQUIRE_GPU=1`. Run with `--test-threads=1` for the cases that
//! measure device memory (`a23`).
//!
//! Some tests here compare the GPU's free memory before and after, which other processes on the
//! GPU disturb (session 18's final call: G16R-1 saw -173 MiB with five other test binaries
//! running): `ferrocuda-gpu-run: alone` (scripts/gpu-run/run.sh runs this binary by itself).

mod common;
#[path = "common/host_ordering.rs"]
mod host_ordering;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use ferrocuda::cufft::{C2C, C2R, Complex, Plan};
use ferrocuda::{BufferAccess, Context, Cublas, DeviceBuffer, Error, Event, JitOptions, LaunchConfig, Module, PinnedBuffer, SchedulePolicy, Stream};
use gpu_kernels::saxpy;
use host_ordering::{gpu_with_cufft, skip};
use test_kernels::launch_kinds::{mark_blocks, spin_for};

const SLOW_NS: u64 = 300_000_000;

fn gpu_with_cublas(test: &str) -> Option<Context> {
    let context = common::gpu_or_skip(test)?;
    if !Cublas::is_available() {
        skip(test, "cuBLAS could not be loaded");
        return None;
    }
    Some(context)
}

/// A context of its own (its deferred releases and memory are this test's alone).
fn own_context() -> Context {
    Context::create(0, SchedulePolicy::Auto).unwrap()
}

fn busy(stream: &Stream) {
    spin_for::launch(stream, (1u32, 1u32), SLOW_NS).unwrap();
}

/// Waits (bounded) until `context` has no deferred release left, synchronising it meanwhile.
fn settle(context: &Context) -> usize {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        context.synchronize().unwrap();
        let left = context.deferred_releases();
        if left == 0 || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn ones(n: usize) -> Vec<Complex<f32>> {
    vec![Complex::new(1.0f32, 0.0); n]
}

fn load_late_read(context: &Context, ns: u64) -> Module {
    // SAFETY: a hand-written kernel with mark_blocks's parameters (bool, pointer, length).
    unsafe { Module::load_ptx(context, "late_read", &host_ordering::late_read_ptx(ns), &JitOptions::new().host_writable_globals(["FILL"])) }.unwrap()
}

/// cuBLAS on its handle's stream reads an input that a kernel on another stream still writes.
#[test]
fn a01_cublas_waits_for_a_writer_of_its_input_on_another_stream() {
    let Some(context) = gpu_with_cublas("a01_cublas_waits_for_a_writer_of_its_input_on_another_stream") else { return };
    let (s1, s2) = (Stream::non_blocking(&context).unwrap(), Stream::non_blocking(&context).unwrap());
    let n = 256;
    let mut a = DeviceBuffer::<f32>::zeroed(&context, n * n).unwrap();
    let b = DeviceBuffer::from_slice(&context, &vec![1.0f32; n * n]).unwrap();
    let mut c = DeviceBuffer::<f32>::zeroed(&context, n * n).unwrap();
    busy(&s1);
    a.fill_async(2.0, &s1).unwrap();
    let blas = Cublas::new(&s2).unwrap();
    blas.sgemm((n, n, n), 1.0, &a, &b, 0.0, &mut c).unwrap();
    let wrong = c.to_vec().unwrap().iter().filter(|&&v| v != 2.0 * n as f32).count();
    assert_eq!(wrong, 0, "{wrong} elements of the product used `a` before its writer finished");
}

/// A transform's output copied on another stream right after the transform.
#[test]
fn a02_fft_output_copied_on_another_stream_waits_for_the_transform() {
    let Some(context) = gpu_with_cufft("a02_fft_output_copied_on_another_stream_waits_for_the_transform") else { return };
    let (s1, s2) = (Stream::non_blocking(&context).unwrap(), Stream::non_blocking(&context).unwrap());
    let n = 1 << 20;
    let plan = Plan::<C2C>::new(&context, &[n], 1).unwrap();
    let input = DeviceBuffer::from_slice(&context, &ones(n)).unwrap();
    let mut output = DeviceBuffer::<Complex<f32>>::zeroed(&context, n).unwrap();
    let mut copy = DeviceBuffer::<Complex<f32>>::zeroed(&context, n).unwrap();
    busy(&s1);
    plan.forward(&s1, &input, &mut output).unwrap();
    copy.copy_from_device_async(&output, &s2).unwrap();
    s2.synchronize().unwrap();
    assert_eq!(copy.to_vec().unwrap()[0], Complex::new(n as f32, 0.0));
}

/// A transform's input written on another stream (behind a slow kernel) just before it.
#[test]
fn a03_fft_waits_for_a_writer_of_its_input_on_another_stream() {
    let Some(context) = gpu_with_cufft("a03_fft_waits_for_a_writer_of_its_input_on_another_stream") else { return };
    let (s1, s2) = (Stream::non_blocking(&context).unwrap(), Stream::non_blocking(&context).unwrap());
    let n = 1 << 20;
    let plan = Plan::<C2C>::new(&context, &[n], 1).unwrap();
    let source = DeviceBuffer::from_slice(&context, &ones(n)).unwrap();
    let mut input = DeviceBuffer::<Complex<f32>>::zeroed(&context, n).unwrap();
    let mut output = DeviceBuffer::<Complex<f32>>::zeroed(&context, n).unwrap();
    busy(&s1);
    input.copy_from_device_async(&source, &s1).unwrap();
    plan.forward(&s2, &input, &mut output).unwrap();
    assert_eq!(output.to_vec().unwrap()[0], Complex::new(n as f32, 0.0), "the transform read its input before the copy into it");
}

/// A complex-to-real transform overwrites its input: it waits for an earlier reader of the
/// input on another stream (declared as a write).
#[test]
fn a04_c2r_waits_for_earlier_readers_of_the_input_it_overwrites() {
    let Some(context) = gpu_with_cufft("a04_c2r_waits_for_earlier_readers_of_the_input_it_overwrites") else { return };
    let (s1, s2) = (Stream::non_blocking(&context).unwrap(), Stream::non_blocking(&context).unwrap());
    let n = 1 << 20;
    let half = n / 2 + 1;
    let plan = Plan::<C2R>::new(&context, &[n], 1).unwrap();
    let spectrum: Vec<Complex<f32>> = (0..half).map(|i| Complex::new((i % 17) as f32, 0.0)).collect();
    let mut input = DeviceBuffer::from_slice(&context, &spectrum).unwrap();
    let mut snapshot = DeviceBuffer::<Complex<f32>>::zeroed(&context, half).unwrap();
    let mut output = DeviceBuffer::<f32>::zeroed(&context, n).unwrap();
    busy(&s1);
    snapshot.copy_from_device_async(&input, &s1).unwrap();
    plan.inverse(&s2, &mut input, &mut output).unwrap();
    s2.synchronize().unwrap();
    assert_eq!(snapshot.to_vec().unwrap(), spectrum, "the snapshot read the input after the transform overwrote it");
}

/// Host access to a pinned buffer waits for a copy into it queued behind a slow kernel.
#[test]
fn a05_pinned_host_read_waits_for_a_copy_behind_a_slow_kernel() {
    let Some(context) = common::gpu_or_skip("a05_pinned_host_read_waits_for_a_copy_behind_a_slow_kernel") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    let n = 1 << 20;
    let source = DeviceBuffer::from_slice(&context, &vec![9u32; n]).unwrap();
    let mut pinned = PinnedBuffer::<u32>::zeroed(&context, n).unwrap();
    busy(&stream);
    pinned.copy_from_device_async(&source, &stream).unwrap();
    assert!(pinned.as_slice().unwrap().iter().all(|&v| v == 9));
}

/// A pinned buffer dropped right after a copy out of it, queued behind a slow kernel.
#[test]
fn a06_pinned_dropped_right_after_an_async_copy_still_sends_its_data() {
    let Some(context) = common::gpu_or_skip("a06_pinned_dropped_right_after_an_async_copy_still_sends_its_data") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    let n = 1 << 20;
    let pinned = PinnedBuffer::from_slice(&context, &vec![4u32; n]).unwrap();
    let mut target = DeviceBuffer::<u32>::zeroed(&context, n).unwrap();
    busy(&stream);
    pinned.copy_to_device_async(&mut target, &stream).unwrap();
    drop(pinned);
    stream.synchronize().unwrap();
    assert!(target.to_vec().unwrap().iter().all(|&v| v == 4));
}

/// A pinned buffer dropped inside a host callback is freed once the callback returned.
#[test]
fn a07_pinned_dropped_in_a_host_callback_is_freed() {
    if common::gpu_or_skip("a07_pinned_dropped_in_a_host_callback_is_freed").is_none() {
        return;
    }
    let context = own_context();
    let stream = Stream::non_blocking(&context).unwrap();
    let n = 1 << 20;
    let pinned = PinnedBuffer::from_slice(&context, &vec![3u32; n]).unwrap();
    let mut target = DeviceBuffer::<u32>::zeroed(&context, n).unwrap();
    pinned.copy_to_device_async(&mut target, &stream).unwrap();
    stream.launch_host_fn(move || drop(pinned)).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(settle(&context), 0, "a pinned buffer dropped in a callback was never released");
    assert!(target.to_vec().unwrap().iter().all(|&v| v == 3));
}

/// The last clone of a stream (with a buffer allocated on it) dropped inside a callback on
/// another stream.
#[test]
fn a08_stream_and_its_buffer_dropped_in_a_host_callback_are_released() {
    if common::gpu_or_skip("a08_stream_and_its_buffer_dropped_in_a_host_callback_are_released").is_none() {
        return;
    }
    let context = own_context();
    let (s1, s2) = (Stream::non_blocking(&context).unwrap(), Stream::non_blocking(&context).unwrap());
    let mut buffer = DeviceBuffer::<u32>::zeroed_async(&s2, 1 << 20).unwrap();
    buffer.fill_async(1, &s2).unwrap();
    s1.launch_host_fn(move || {
        drop(buffer);
        drop(s2);
    })
    .unwrap();
    s1.synchronize().unwrap();
    assert_eq!(settle(&context), 0);
}

/// An event and a cuBLAS handle dropped inside a callback.
#[test]
fn a09_event_and_cublas_handle_dropped_in_a_host_callback_are_released() {
    if gpu_with_cublas("a09_event_and_cublas_handle_dropped_in_a_host_callback_are_released").is_none() {
        return;
    }
    let context = own_context();
    let stream = Stream::non_blocking(&context).unwrap();
    let event = Event::new(&context).unwrap();
    event.record(&stream).unwrap();
    let blas = Cublas::new(&stream).unwrap();
    stream
        .launch_host_fn(move || {
            drop(event);
            drop(blas);
        })
        .unwrap();
    stream.synchronize().unwrap();
    assert_eq!(settle(&context), 0);
}

/// A plan used on a stream, then dropped inside a callback on that stream.
#[test]
fn a10_fft_plan_dropped_in_a_host_callback_after_use_is_released() {
    if gpu_with_cufft("a10_fft_plan_dropped_in_a_host_callback_after_use_is_released").is_none() {
        return;
    }
    let context = own_context();
    let stream = Stream::non_blocking(&context).unwrap();
    let n = 1 << 16;
    let plan = Plan::<C2C>::new(&context, &[n], 1).unwrap();
    let input = DeviceBuffer::from_slice(&context, &ones(n)).unwrap();
    let mut output = DeviceBuffer::<Complex<f32>>::zeroed(&context, n).unwrap();
    plan.forward(&stream, &input, &mut output).unwrap();
    stream.launch_host_fn(move || drop(plan)).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(settle(&context), 0);
    assert_eq!(output.to_vec().unwrap()[0], Complex::new(n as f32, 0.0));
}

/// A buffer dropped in a callback while another thread captures an unrelated stream in the
/// same context: released on the release thread right after the callback, as it would be
/// outside a callback (P5: an unrelated capture, maybe one that never ends, holds no memory
/// back; audit 2026-11-28d review G16R-7 made callbacks keep that rule; this test asserted the
/// wait before), and the capture is not disturbed (it ends with its one node).
#[test]
fn a11_callback_drop_during_another_threads_unrelated_capture_is_released_and_leaves_it_whole() {
    if common::gpu_or_skip("a11_callback_drop_during_another_threads_unrelated_capture_is_released_and_leaves_it_whole").is_none() {
        return;
    }
    let context = own_context();
    let (capturing_tx, capturing_rx) = mpsc::channel();
    let (end_tx, end_rx) = mpsc::channel::<()>();
    let capturer = {
        let context = context.clone();
        std::thread::spawn(move || {
            let stream = Stream::non_blocking(&context).unwrap();
            let mut y = DeviceBuffer::<u32>::zeroed(&context, 32).unwrap();
            mark_blocks::launch(&stream, (1u32, 32u32), false, &mut y).unwrap();
            stream.synchronize().unwrap();
            stream.begin_capture().unwrap();
            mark_blocks::launch(&stream, (1u32, 32u32), false, &mut y).unwrap();
            capturing_tx.send(()).unwrap();
            end_rx.recv().unwrap();
            stream.end_capture().unwrap().node_count().unwrap()
        })
    };
    capturing_rx.recv().unwrap();
    let stream = Stream::non_blocking(&context).unwrap();
    let buffer = DeviceBuffer::<u8>::zeroed(&context, 1 << 20).unwrap();
    stream.launch_host_fn(move || drop(buffer)).unwrap();
    stream.synchronize().unwrap();
    // The release thread performs it right after the callback: give it up to 2 s.
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while context.deferred_releases() != 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(context.deferred_releases(), 0, "an unrelated capture held a callback's release back");
    end_tx.send(()).unwrap();
    assert_eq!(capturer.join().unwrap(), 1);
    assert_eq!(settle(&context), 0);
}

/// Dropping one clone of a capturing stream leaves the capture to the other clone.
#[test]
fn a12_dropping_one_clone_of_a_capturing_stream_keeps_the_capture() {
    let Some(context) = common::gpu_or_skip("a12_dropping_one_clone_of_a_capturing_stream_keeps_the_capture") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    let mut y = DeviceBuffer::<u32>::zeroed(&context, 32).unwrap();
    mark_blocks::launch(&stream, (1u32, 32u32), false, &mut y).unwrap();
    stream.synchronize().unwrap();
    stream.begin_capture().unwrap();
    let clone = stream.clone();
    drop(stream);
    mark_blocks::launch(&clone, (1u32, 32u32), false, &mut y).unwrap();
    assert_eq!(clone.end_capture().unwrap().node_count().unwrap(), 1);
}

/// A buffer dropped during a capture, then the capturing stream dropped: the capture ends and
/// the buffer is freed right then. (Since P5 the buffer must have been used on the capturing
/// stream to wait for the capture: one the capture does not involve is freed at once.)
#[test]
fn a13_buffer_dropped_in_a_capture_is_freed_when_the_capturing_stream_drops() {
    if common::gpu_or_skip("a13_buffer_dropped_in_a_capture_is_freed_when_the_capturing_stream_drops").is_none() {
        return;
    }
    let context = own_context();
    let stream = Stream::non_blocking(&context).unwrap();
    let mut buffer = DeviceBuffer::<u32>::zeroed(&context, 1 << 18).unwrap();
    mark_blocks::launch(&stream, (1u32, 32u32), false, &mut buffer).unwrap(); // its record holds `stream`
    stream.begin_capture().unwrap();
    drop(buffer);
    assert_eq!(context.deferred_releases(), 1, "a free of a buffer used on the capturing stream must wait for its end");
    drop(stream);
    assert_eq!(context.deferred_releases(), 0, "dropping the capturing stream must end the capture and free what waited");
    assert_eq!(settle(&context), 0);
}

/// Two threads capture at once in one context and drop buffers inside their captures.
#[test]
fn a14_two_threads_capturing_at_once_both_get_their_graphs_and_free_their_buffers() {
    if common::gpu_or_skip("a14_two_threads_capturing_at_once_both_get_their_graphs_and_free_their_buffers").is_none() {
        return;
    }
    let context = own_context();
    let barrier = Arc::new(std::sync::Barrier::new(2));
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let (context, barrier) = (context.clone(), barrier.clone());
            std::thread::spawn(move || {
                let stream = Stream::non_blocking(&context).unwrap();
                let mut y = DeviceBuffer::<u32>::zeroed(&context, 32).unwrap();
                mark_blocks::launch(&stream, (1u32, 32u32), false, &mut y).unwrap();
                stream.synchronize().unwrap();
                let scratch = DeviceBuffer::<u8>::zeroed(&context, 1 << 20).unwrap();
                let graph = stream
                    .capture(|s| {
                        barrier.wait();
                        mark_blocks::launch(s, (1u32, 32u32), false, &mut y)?;
                        drop(scratch);
                        barrier.wait();
                        Ok(())
                    })
                    .unwrap();
                graph.node_count().unwrap()
            })
        })
        .collect();
    for thread in threads {
        assert_eq!(thread.join().unwrap(), 1);
    }
    assert_eq!(settle(&context), 0);
}

/// A module dropped while its kernel still spins on a non-blocking stream: the unload waits.
#[test]
fn a15_module_dropped_while_its_kernel_runs_is_unloaded_after_it() {
    let Some(context) = common::gpu_or_skip("a15_module_dropped_while_its_kernel_runs_is_unloaded_after_it") else { return };
    let module = load_late_read(&context, SLOW_NS);
    let stream = Stream::non_blocking(&context).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(&context, 4).unwrap();
    mark_blocks::launch_in(&module, &stream, (4u32, 32u32), false, &mut out).unwrap();
    drop(module);
    stream.synchronize().unwrap();
    assert_eq!(out.to_vec().unwrap(), [1, 2, 3, 4]);
}

/// Global writes on one thread while another keeps launching the module's kernels: no
/// deadlock between the globals' gate and the buffer tracking, and every write is seen by the
/// launches queued after it on the writer's stream.
#[test]
fn a16_global_writes_and_launches_from_two_threads() {
    let Some(context) = common::gpu_or_skip("a16_global_writes_and_launches_from_two_threads") else { return };
    let module = load_late_read(&context, 10_000);
    let stop = Arc::new(AtomicBool::new(false));
    let launcher = {
        let (module, context, stop) = (module.clone(), context.clone(), stop.clone());
        std::thread::spawn(move || {
            let stream = Stream::non_blocking(&context).unwrap();
            let mut out = DeviceBuffer::<u32>::zeroed(&context, 4).unwrap();
            let mut launches = 0;
            while !stop.load(Ordering::SeqCst) {
                mark_blocks::launch_in(&module, &stream, (4u32, 32u32), false, &mut out).unwrap();
                launches += 1;
            }
            stream.synchronize().unwrap();
            let v = out.to_vec().unwrap();
            assert!(v.windows(2).all(|w| w[1] == w[0] + 1), "a launch saw two values of FILL: {v:?}");
            launches
        })
    };
    let fill = module.global::<u32>("FILL").unwrap();
    let stream = Stream::non_blocking(&context).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(&context, 4).unwrap();
    for value in (0..2000).step_by(100) {
        fill.write(&value).unwrap();
        mark_blocks::launch_in(&module, &stream, (4u32, 32u32), false, &mut out).unwrap();
        assert_eq!(out.to_vec().unwrap(), [value, value + 1, value + 2, value + 3]);
    }
    stop.store(true, Ordering::SeqCst);
    assert!(launcher.join().unwrap() > 0);
}

/// One plan shared by four threads, each on its own stream, several rounds.
#[test]
fn a17_fft_plan_shared_by_four_threads_gives_the_sequential_results() {
    let Some(context) = gpu_with_cufft("a17_fft_plan_shared_by_four_threads_gives_the_sequential_results") else { return };
    let n = 1 << 20;
    let plan = Arc::new(Plan::<C2C>::new(&context, &[n], 1).unwrap());
    let inputs: Vec<Vec<Complex<f32>>> = (0..4).map(|t| (0..n).map(|i| Complex::new(((i * (t + 1)) % 23) as f32, t as f32)).collect()).collect();
    let expected: Vec<Vec<Complex<f32>>> = inputs
        .iter()
        .map(|x| {
            let stream = Stream::non_blocking(&context).unwrap();
            let input = DeviceBuffer::from_slice(&context, x).unwrap();
            let mut out = DeviceBuffer::<Complex<f32>>::zeroed(&context, n).unwrap();
            plan.forward(&stream, &input, &mut out).unwrap();
            out.to_vec().unwrap()
        })
        .collect();
    std::thread::scope(|scope| {
        for t in 0..4 {
            let (plan, context, x, expected) = (plan.clone(), context.clone(), &inputs[t], &expected[t]);
            scope.spawn(move || {
                let stream = Stream::non_blocking(&context).unwrap();
                let input = DeviceBuffer::from_slice(&context, x).unwrap();
                for round in 0..4 {
                    let mut out = DeviceBuffer::<Complex<f32>>::zeroed(&context, n).unwrap();
                    plan.forward(&stream, &input, &mut out).unwrap();
                    stream.synchronize().unwrap();
                    assert!(out.to_vec().unwrap() == *expected, "thread {t} round {round}: wrong transform");
                }
            });
        }
    });
}

/// One buffer passed around three streams: write, write, read, write again.
#[test]
fn a18_a_buffer_passed_around_three_streams_keeps_every_order() {
    let Some(context) = common::gpu_or_skip("a18_a_buffer_passed_around_three_streams_keeps_every_order") else { return };
    let s: Vec<Stream> = (0..3).map(|_| Stream::non_blocking(&context).unwrap()).collect();
    let n = 1 << 22;
    let x = DeviceBuffer::from_slice(&context, &vec![1.0f32; n]).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&context, n).unwrap();
    let mut z = DeviceBuffer::<f32>::zeroed(&context, n).unwrap();
    let config = LaunchConfig::for_elements(n, 256);
    busy(&s[0]);
    y.fill_async(1.0, &s[0]).unwrap(); // y = 1 (late)
    saxpy::launch(&s[1], config, 1.0, &x, &mut y).unwrap(); // y = 2
    saxpy::launch(&s[2], config, 1.0, &y, &mut z).unwrap(); // z = 2
    y.fill_async(5.0, &s[0]).unwrap(); // after the read on s[2]
    for stream in &s {
        stream.synchronize().unwrap();
    }
    assert!(z.to_vec().unwrap().iter().all(|&v| v == 2.0), "z read y at the wrong time");
    assert!(y.to_vec().unwrap().iter().all(|&v| v == 5.0));
}

/// A pinned buffer written by a copy in one context and read by a copy in another.
#[test]
fn a19_pinned_buffer_ordered_across_two_contexts() {
    let Some(primary) = common::gpu_or_skip("a19_pinned_buffer_ordered_across_two_contexts") else { return };
    let other = own_context();
    let (s1, s2) = (Stream::non_blocking(&primary).unwrap(), Stream::non_blocking(&other).unwrap());
    let n = 1 << 20;
    let source = DeviceBuffer::from_slice(&primary, &vec![6u32; n]).unwrap();
    let mut pinned = PinnedBuffer::<u32>::zeroed(&primary, n).unwrap();
    let mut target = DeviceBuffer::<u32>::zeroed(&other, n).unwrap();
    busy(&s1);
    pinned.copy_from_device_async(&source, &s1).unwrap();
    pinned.copy_to_device_async(&mut target, &s2).unwrap();
    s2.synchronize().unwrap();
    assert!(target.to_vec().unwrap().iter().all(|&v| v == 6), "the copy in the other context sent the pinned data before it arrived");
}

/// An async device copy on one stream, read by a kernel on another.
#[test]
fn a20_a_kernel_waits_for_an_async_copy_into_its_input_on_another_stream() {
    let Some(context) = common::gpu_or_skip("a20_a_kernel_waits_for_an_async_copy_into_its_input_on_another_stream") else { return };
    let (s1, s2) = (Stream::non_blocking(&context).unwrap(), Stream::non_blocking(&context).unwrap());
    let n = 1 << 22;
    let source = DeviceBuffer::from_slice(&context, &vec![3.0f32; n]).unwrap();
    let mut copy = DeviceBuffer::<f32>::zeroed(&context, n).unwrap();
    let mut z = DeviceBuffer::<f32>::zeroed(&context, n).unwrap();
    busy(&s1);
    copy.copy_from_device_async(&source, &s1).unwrap();
    saxpy::launch(&s2, LaunchConfig::for_elements(n, 256), 1.0, &copy, &mut z).unwrap();
    s2.synchronize().unwrap();
    assert!(z.to_vec().unwrap().iter().all(|&v| v == 3.0));
}

/// A host callback that panics still releases what it owned.
#[test]
fn a21_a_panicking_host_callback_still_releases_what_it_owned() {
    if common::gpu_or_skip("a21_a_panicking_host_callback_still_releases_what_it_owned").is_none() {
        return;
    }
    let context = own_context();
    let stream = Stream::non_blocking(&context).unwrap();
    let buffer = DeviceBuffer::<u8>::zeroed(&context, 1 << 20).unwrap();
    stream
        .launch_host_fn(move || {
            let _owned = buffer;
            panic!("a21: a callback that panics (expected)");
        })
        .unwrap();
    stream.synchronize().unwrap();
    assert_eq!(settle(&context), 0);
}

/// The door refuses a buffer of another context, before running the work.
#[test]
fn a22_the_door_refuses_a_buffer_of_another_context_before_queuing() {
    let Some(context) = common::gpu_or_skip("a22_the_door_refuses_a_buffer_of_another_context_before_queuing") else { return };
    let other = own_context();
    let foreign = DeviceBuffer::<u32>::zeroed(&other, 16).unwrap();
    let stream = Stream::non_blocking(&context).unwrap();
    let ran = AtomicBool::new(false);
    let outcome = stream.enqueue("a22", &[BufferAccess::read(&foreign)], |_raw| {
        ran.store(true, Ordering::SeqCst);
        Ok::<_, Error>(())
    });
    assert!(matches!(outcome, Err(Error::BufferInOtherContext { .. })), "{outcome:?}");
    assert!(!ran.load(Ordering::SeqCst), "the work ran although its buffer was refused");
}

/// Q9: inside ferrocuda's own capture the context check still holds: a launch on a capturing
/// stream of one context with a buffer of another is refused (it used to be recorded into the
/// graph, a kernel node writing another context's memory), and the capture stays usable.
#[test]
fn q9_a_buffer_of_another_context_is_refused_inside_a_capture() {
    let Some(context) = common::gpu_or_skip("q9_a_buffer_of_another_context_is_refused_inside_a_capture") else { return };
    let other = own_context();
    let x = DeviceBuffer::from_slice(&context, &[1.0f32; 32]).unwrap();
    let mut foreign = DeviceBuffer::<f32>::zeroed(&other, 32).unwrap();
    let mut own = DeviceBuffer::<f32>::zeroed(&context, 32).unwrap();
    let stream = Stream::non_blocking(&context).unwrap();
    // Loaded before the capture (a module cannot be loaded inside one).
    saxpy::launch(&stream, (1u32, 32u32), 1.0, &x, &mut own).unwrap();
    stream.synchronize().unwrap();
    stream.begin_capture().unwrap();
    let refused = saxpy::launch(&stream, (1u32, 32u32), 1.0, &x, &mut foreign);
    let ran = AtomicBool::new(false);
    let door = stream.enqueue("q9", &[BufferAccess::read(&foreign)], |_raw| {
        ran.store(true, Ordering::SeqCst);
        Ok::<_, Error>(())
    });
    saxpy::launch(&stream, (1u32, 32u32), 1.0, &x, &mut own).unwrap();
    let graph = stream.end_capture().unwrap();
    assert!(matches!(&refused, Err(Error::BufferInOtherContext { argument: "y", .. })), "{refused:?}");
    assert!(matches!(door, Err(Error::BufferInOtherContext { .. })), "{door:?}");
    assert!(!ran.load(Ordering::SeqCst), "the door ran work with another context's buffer inside a capture");
    assert_eq!(graph.node_count().unwrap(), 1, "only the launch on the stream's own context's buffer was recorded");
}

/// The last handles of a created context (its stream and a 256 MiB buffer) dropped inside a
/// host callback on that very stream: the context is destroyed on the release thread and its
/// memory comes back.
#[test]
fn a23_the_last_context_handle_dropped_in_a_host_callback_tears_it_down() {
    let Some(primary) = common::gpu_or_skip("a23_the_last_context_handle_dropped_in_a_host_callback_tears_it_down") else { return };
    let (free_before, _) = primary.memory_info().unwrap();
    let context = own_context();
    let stream = Stream::non_blocking(&context).unwrap();
    let buffer = DeviceBuffer::<u8>::zeroed(&context, 256 << 20).unwrap();
    let (free_held, _) = primary.memory_info().unwrap();
    let (inner_stream, inner_context) = (stream.clone(), context.clone());
    stream
        .launch_host_fn(move || {
            drop(buffer);
            drop(inner_stream);
            drop(inner_context);
        })
        .unwrap();
    drop(stream);
    drop(context);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut free_after = 0;
    while Instant::now() < deadline {
        free_after = primary.memory_info().unwrap().0;
        if free_after + (64 << 20) >= free_before {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        free_after + (64 << 20) >= free_before,
        "the context's memory did not come back: free before {} MiB, while held {} MiB, after {} MiB",
        free_before >> 20,
        free_held >> 20,
        free_after >> 20
    );
}

/// A graph and its executable dropped inside a host callback.
#[test]
fn a24_graph_and_executable_dropped_in_a_host_callback_are_released() {
    if common::gpu_or_skip("a24_graph_and_executable_dropped_in_a_host_callback_are_released").is_none() {
        return;
    }
    let context = own_context();
    let stream = Stream::non_blocking(&context).unwrap();
    let mut y = DeviceBuffer::<u32>::zeroed(&context, 32).unwrap();
    mark_blocks::launch(&stream, (1u32, 32u32), false, &mut y).unwrap();
    stream.synchronize().unwrap();
    let graph = stream.capture(|s| mark_blocks::launch(s, (1u32, 32u32), false, &mut y)).unwrap();
    let exec = graph.instantiate().unwrap();
    // SAFETY: `y`, the only memory the graph touches, outlives the replay (synchronised below).
    unsafe { exec.launch(&stream) }.unwrap();
    stream
        .launch_host_fn(move || {
            drop(exec);
            drop(graph);
        })
        .unwrap();
    stream.synchronize().unwrap();
    assert_eq!(settle(&context), 0);
    assert_eq!(y.to_vec().unwrap()[0], 0);
}

/// cuBLAS output dropped right after the call, behind a slow kernel: not reused under it.
#[test]
fn a25_cublas_output_dropped_after_sgemm_is_not_reused_under_it() {
    let Some(context) = gpu_with_cublas("a25_cublas_output_dropped_after_sgemm_is_not_reused_under_it") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    let n = 2048;
    let a = DeviceBuffer::from_slice(&context, &vec![1.0f32; n * n]).unwrap();
    let mut c = DeviceBuffer::<f32>::zeroed(&context, n * n).unwrap();
    let blas = Cublas::new(&stream).unwrap();
    busy(&stream);
    blas.sgemm((n, n, n), 1.0, &a, &a, 0.0, &mut c).unwrap();
    drop(c);
    let fresh = DeviceBuffer::from_slice(&context, &vec![5.0f32; n * n]).unwrap();
    stream.synchronize().unwrap();
    let overwritten = fresh.to_vec().unwrap().iter().filter(|&&v| v != 5.0).count();
    assert_eq!(overwritten, 0);
}

/// `to_vec` of a device buffer waits for an async copy from pinned memory into it.
#[test]
fn a26_to_vec_waits_for_a_pinned_copy_into_the_buffer() {
    let Some(context) = common::gpu_or_skip("a26_to_vec_waits_for_a_pinned_copy_into_the_buffer") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    let n = 1 << 20;
    let pinned = PinnedBuffer::from_slice(&context, &vec![8u32; n]).unwrap();
    let mut target = DeviceBuffer::<u32>::zeroed(&context, n).unwrap();
    busy(&stream);
    pinned.copy_to_device_async(&mut target, &stream).unwrap();
    assert!(target.to_vec().unwrap().iter().all(|&v| v == 8));
}

/// A buffer used on a stream before that stream's capture, dropped during the capture, then
/// the stream dropped: the postponed release must not keep the capturing stream (and so its
/// capture) alive; the capture ends and the buffer is freed.
#[test]
fn a27_a_buffer_used_on_the_capturing_stream_does_not_keep_its_capture_alive() {
    if common::gpu_or_skip("a27_a_buffer_used_on_the_capturing_stream_does_not_keep_its_capture_alive").is_none() {
        return;
    }
    let context = own_context();
    let stream = Stream::non_blocking(&context).unwrap();
    let mut y = DeviceBuffer::<u32>::zeroed(&context, 1 << 20).unwrap();
    mark_blocks::launch(&stream, (4u32, 32u32), false, &mut y).unwrap(); // y's record holds `stream`
    stream.synchronize().unwrap();
    stream.begin_capture().unwrap();
    drop(y);
    assert_eq!(context.deferred_releases(), 1);
    drop(stream);
    assert_eq!(context.deferred_releases(), 0, "the postponed release kept the capturing stream alive");
    assert_eq!(settle(&context), 0);
}

/// The same with a cuFFT plan used on the capturing stream before the capture.
#[test]
fn a28_a_plan_used_on_the_capturing_stream_does_not_keep_its_capture_alive() {
    if gpu_with_cufft("a28_a_plan_used_on_the_capturing_stream_does_not_keep_its_capture_alive").is_none() {
        return;
    }
    let context = own_context();
    let stream = Stream::non_blocking(&context).unwrap();
    let n = 1 << 12;
    let plan = Plan::<C2C>::new(&context, &[n], 1).unwrap();
    let input = DeviceBuffer::from_slice(&context, &ones(n)).unwrap();
    let mut output = DeviceBuffer::<Complex<f32>>::zeroed(&context, n).unwrap();
    plan.forward(&stream, &input, &mut output).unwrap();
    stream.synchronize().unwrap();
    stream.begin_capture().unwrap();
    drop(plan);
    drop(stream);
    assert_eq!(settle(&context), 0, "the plan's postponed release kept the capturing stream alive");
    assert_eq!(output.to_vec().unwrap()[0], Complex::new(n as f32, 0.0));
}

/// Issue 21: a stream whose capture was begun on one thread and whose last handle is dropped
/// on another ends its capture cleanly there (relaxed capture mode: any thread may end it):
/// the postponed releases happen, the stream (still held by a buffer's record) is an ordinary
/// stream again, which other streams can wait for, and the thread that began the capture can
/// allocate again. Under the thread-local mode the end failed on the other thread, the driver
/// kept capturing, and the wait below joined `other` to the abandoned capture.
#[test]
fn a29_a_capture_abandoned_on_another_thread_ends_there() {
    if common::gpu_or_skip("a29_a_capture_abandoned_on_another_thread_ends_there").is_none() {
        return;
    }
    let context = own_context();
    let stream = Stream::non_blocking(&context).unwrap();
    let mut y = DeviceBuffer::<u32>::zeroed(&context, 64).unwrap();
    mark_blocks::launch(&stream, (64u32, 32u32), false, &mut y).unwrap(); // y's record holds `stream`
    stream.synchronize().unwrap();
    let (handed_tx, handed_rx) = mpsc::channel();
    let (ended_tx, ended_rx) = mpsc::channel::<()>();
    let beginner = {
        let context = context.clone();
        std::thread::spawn(move || {
            let mut z = DeviceBuffer::<u32>::zeroed(&context, 64).unwrap();
            let dropped = DeviceBuffer::<u8>::zeroed(&context, 4 << 20).unwrap();
            stream.begin_capture().unwrap();
            mark_blocks::launch(&stream, (64u32, 32u32), false, &mut z).unwrap();
            drop(dropped);
            // P5: the capture does not involve `dropped` (only the legacy stream used it).
            assert_eq!(context.deferred_releases(), 0, "a buffer the capture does not use must be freed at once");
            handed_tx.send(stream).unwrap();
            ended_rx.recv().unwrap();
            // This thread began the capture: it can allocate and synchronise again.
            let fresh = DeviceBuffer::<u8>::zeroed(&context, 1 << 20).map(|b| b.len());
            (fresh.map_err(|e| e.to_string()), z.to_vec().map_err(|e| e.to_string()))
        })
    };
    let stream = handed_rx.recv().unwrap();
    std::thread::spawn(move || drop(stream)).join().unwrap();
    assert_eq!(context.deferred_releases(), 0, "the capture's postponed release did not happen");
    let other = Stream::non_blocking(&context).unwrap();
    mark_blocks::launch(&other, (64u32, 32u32), true, &mut y).unwrap(); // waits for the old stream
    other.synchronize().expect("`other` must not have joined the abandoned capture");
    assert!(y.to_vec().unwrap().iter().all(|&v| v != 0), "the launch on `other` did not run");
    ended_tx.send(()).unwrap();
    let (fresh, z) = beginner.join().unwrap();
    assert_eq!(fresh, Ok(1 << 20), "the thread that began the capture cannot allocate: the capture did not end");
    assert_eq!(z.map(|z| z.iter().all(|&v| v == 0)), Ok(true), "the captured launch ran although its graph was discarded");
    assert_eq!(settle(&context), 0);
}

/// Issue 21: a capture that fails names what was dropped during it, in drop order, and
/// those releases happen once it ends (the drops did not cause the failure: they waited).
#[test]
fn a30_capture_failed_names_the_drops_during_the_capture() {
    if common::gpu_or_skip("a30_capture_failed_names_the_drops_during_the_capture").is_none() {
        return;
    }
    let context = own_context();
    let before = DeviceBuffer::<u8>::zeroed(&context, 1 << 10).unwrap();
    drop(before); // released at once: not named
    let stream = Stream::new(&context).unwrap(); // ordered with the legacy stream
    let buffer = DeviceBuffer::<u8>::zeroed(&context, 4 << 20).unwrap();
    let pinned = PinnedBuffer::<u32>::zeroed(&context, 256).unwrap();
    let event = Event::new(&context).unwrap();
    let host_data = DeviceBuffer::from_slice(&context, &[1u32; 16]).unwrap();
    stream.begin_capture().unwrap();
    drop(buffer);
    drop(pinned);
    // Never recorded into a capture: destroyed at once (issue 29 host item 3), not named.
    drop(event);
    // A synchronous copy on the legacy stream while a stream ordered with it is captured: the
    // capture is invalidated.
    assert!(host_data.to_vec().is_err(), "a synchronous copy must fail while a blocking stream is captured");
    assert_eq!(context.deferred_releases(), 2);
    let error = stream.end_capture().expect_err("the capture was invalidated");
    let message = error.to_string();
    match &error {
        Error::CaptureFailed { dropped, .. } => assert_eq!(dropped, &["DeviceBuffer of 4.00 MiB", "PinnedBuffer of 1.00 KiB"], "{message}"),
        other => panic!("expected CaptureFailed, got {other:?}"),
    }
    assert!(message.contains("Dropped during the capture: DeviceBuffer of 4.00 MiB, PinnedBuffer of 1.00 KiB"), "{message}");
    println!("a30: {message}");
    assert_eq!(context.deferred_releases(), 0, "the drops of the failed capture must be released when it ends");
    assert_eq!(settle(&context), 0);
    assert_eq!(host_data.to_vec().unwrap(), vec![1u32; 16]);
}
