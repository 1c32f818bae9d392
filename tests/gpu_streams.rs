//! Streams, events, host callbacks, graphs and memory on the GPU. Skip (printed) without a
//! GPU; fail under `REQUIRE_GPU=1`.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use ferrocuda::{DeviceBuffer, Error, Event, LaunchConfig, PinnedBuffer, Stream, StreamOrdering};
use gpu_kernels::saxpy;

#[test]
fn stream_priorities_flags_and_queries() {
    let Some(context) = common::gpu_or_skip("stream_priorities_flags_and_queries") else { return };
    let (least, greatest) = context.stream_priority_range().unwrap();
    eprintln!("priority range: lowest {least}, highest {greatest}");
    let urgent = Stream::with_priority(&context, StreamOrdering::NonBlocking, greatest).unwrap();
    let relaxed = Stream::with_priority(&context, StreamOrdering::WithLegacyDefault, least).unwrap();
    assert_eq!(urgent.priority().unwrap(), greatest);
    assert_eq!(relaxed.priority().unwrap(), least);
    assert_eq!(urgent.ordering().unwrap(), StreamOrdering::NonBlocking);
    assert_eq!(relaxed.ordering().unwrap(), StreamOrdering::WithLegacyDefault);
    assert_eq!(Stream::new(&context).unwrap().ordering().unwrap(), StreamOrdering::WithLegacyDefault);

    // Queue enough work that the query sees it running, then wait and see it done.
    let n = 1 << 24;
    let x = DeviceBuffer::from_slice(&context, &vec![1.0f32; n]).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&context, n).unwrap();
    let config = LaunchConfig::for_elements(n, 256);
    for _ in 0..100 {
        saxpy::launch(&urgent, config, 1.0, &x, &mut y).unwrap();
    }
    let busy = !urgent.is_idle().unwrap();
    urgent.synchronize().unwrap();
    assert!(urgent.is_idle().unwrap());
    eprintln!("query right after queueing 100 launches: busy = {busy}");
    assert!(busy, "100 launches over 64 MiB finished before the query returned");
    assert_eq!(y.to_vec().unwrap(), vec![100.0f32; n]);
}

#[test]
fn a_stream_waits_for_an_event_of_another_stream_and_events_time_work() {
    let Some(context) = common::gpu_or_skip("a_stream_waits_for_an_event_of_another_stream_and_events_time_work") else { return };
    let producer = Stream::non_blocking(&context).unwrap();
    let consumer = Stream::non_blocking(&context).unwrap();
    let n = 1 << 24;
    let x = DeviceBuffer::from_slice(&context, &vec![2.0f32; n]).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&context, n).unwrap();
    let mut copy = DeviceBuffer::<f32>::zeroed(&context, n).unwrap();
    let (start, produced) = (Event::new(&context).unwrap(), Event::new(&context).unwrap());
    start.record(&producer).unwrap();
    for _ in 0..50 {
        saxpy::launch(&producer, LaunchConfig::for_elements(n, 256), 1.0, &x, &mut y).unwrap();
    }
    produced.record(&producer).unwrap();
    consumer.wait_event(&produced).unwrap();
    copy.copy_from_device_async(&y, &consumer).unwrap();
    consumer.synchronize().unwrap();
    assert!(produced.is_complete().unwrap(), "the consumer finished before the event it waited for");
    assert_eq!(copy.to_vec().unwrap(), vec![100.0f32; n], "the copy ran before the producer's kernels");
    let ms = start.elapsed_ms(&produced).unwrap();
    eprintln!("50 saxpy launches over {n} elements: {ms:.3} ms");
    assert!(ms > 0.0);
}

#[test]
fn host_callbacks_run_in_order_once_each_and_are_freed_once() {
    let Some(context) = common::gpu_or_skip("host_callbacks_run_in_order_once_each_and_are_freed_once") else { return };
    struct CountDrops(Arc<AtomicUsize>);
    impl Drop for CountDrops {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let stream = Stream::non_blocking(&context).unwrap();
    let n = 1 << 22;
    let x = DeviceBuffer::from_slice(&context, &vec![1.0f32; n]).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&context, n).unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let drops = Arc::new(AtomicUsize::new(0));
    for i in 0..10 {
        saxpy::launch(&stream, LaunchConfig::for_elements(n, 256), 1.0, &x, &mut y).unwrap();
        let (order, guard) = (order.clone(), CountDrops(drops.clone()));
        stream
            .launch_host_fn(move || {
                let _guard = guard;
                order.lock().unwrap().push(i);
            })
            .unwrap();
    }
    stream.launch_host_fn(|| panic!("a panicking callback must not take the process down")).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(*order.lock().unwrap(), (0..10).collect::<Vec<_>>());
    assert_eq!(drops.load(Ordering::SeqCst), 10, "each closure is freed exactly once");
    assert_eq!(y.to_vec().unwrap(), vec![10.0f32; n]);
}

#[test]
fn a_captured_graph_replays_several_kernels_n_times() {
    let Some(context) = common::gpu_or_skip("a_captured_graph_replays_several_kernels_n_times") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    let n = 1_000_003;
    let x_host: Vec<f32> = (0..n).map(|i| (i % 5) as f32).collect();
    let y_host: Vec<f32> = (0..n).map(|i| (i % 3) as f32).collect();
    let x = DeviceBuffer::from_slice(&context, &x_host).unwrap();
    let mut y = DeviceBuffer::from_slice(&context, &y_host).unwrap();
    let config = LaunchConfig::for_elements(n, 256);
    let callbacks = Arc::new(AtomicUsize::new(0));
    let mut scratch = DeviceBuffer::<i32>::zeroed(&context, 1000).unwrap();

    // Load the module before capturing (a capture cannot load modules).
    context.embedded_image(&gpu_kernels::KERNELS).unwrap();
    let graph = stream
        .capture(|s| {
            saxpy::launch(s, config, 1.0, &x, &mut y)?;
            saxpy::launch(s, config, 2.0, &x, &mut y)?;
            scratch.fill_async(-7, s)
        })
        .unwrap();
    assert!(!stream.is_capturing().unwrap());
    assert_eq!(graph.node_count().unwrap(), 3);
    stream.synchronize().unwrap();
    assert_eq!(y.to_vec().unwrap(), y_host, "capturing ran the kernels");
    assert_eq!(scratch.to_vec().unwrap(), vec![0; 1000], "capturing ran the memset");

    let exec = graph.instantiate().unwrap();
    drop(graph);
    const REPLAYS: usize = 10;
    for _ in 0..REPLAYS {
        // SAFETY: `x` and `y` outlive every replay (they are dropped after the sync below).
        unsafe { exec.launch(&stream) }.unwrap();
    }
    stream.synchronize().unwrap();
    assert_eq!(scratch.to_vec().unwrap(), vec![-7; 1000], "the captured memset did not replay");
    // A run-once host callback cannot go into a graph that replays it: refused, capture ended.
    let counter = callbacks.clone();
    let error = stream
        .capture(|s| {
            s.launch_host_fn(move || {
                counter.fetch_add(1, Ordering::SeqCst);
            })
        })
        .unwrap_err();
    eprintln!("host callback in a capture: {error}");
    assert!(matches!(error, Error::HostCallbackInCapture), "{error:?}");
    assert!(!stream.is_capturing().unwrap());
    stream.synchronize().unwrap();
    assert_eq!(callbacks.load(Ordering::SeqCst), 0, "the refused callback ran");
    let got = y.to_vec().unwrap();
    for i in 0..n {
        // Small integers: every intermediate is exact in f32.
        assert_eq!(got[i], y_host[i] + 3.0 * REPLAYS as f32 * x_host[i], "element {i}");
    }

    // An error inside the capture ends it and is returned.
    let error = stream.capture(|_| Err(Error::NoCurrentContext)).unwrap_err();
    assert!(matches!(error, Error::NoCurrentContext), "{error:?}");
    assert!(!stream.is_capturing().unwrap());
}

#[test]
fn memsets_of_every_width_sync_and_async() {
    let Some(context) = common::gpu_or_skip("memsets_of_every_width_sync_and_async") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    let mut bytes = DeviceBuffer::<u8>::zeroed(&context, 1001).unwrap();
    bytes.fill(0xab).unwrap();
    assert_eq!(bytes.to_vec().unwrap(), vec![0xab; 1001]);
    let mut halves = DeviceBuffer::<u16>::zeroed(&context, 1001).unwrap();
    halves.fill(0xbeef).unwrap();
    assert_eq!(halves.to_vec().unwrap(), vec![0xbeef; 1001]);
    let mut floats = DeviceBuffer::<f32>::zeroed(&context, 1001).unwrap();
    floats.fill_async(-2.5, &stream).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(floats.to_vec().unwrap(), vec![-2.5f32; 1001]);
    let mut words = DeviceBuffer::<i32>::zeroed(&context, 7).unwrap();
    words.fill(-123_456_789).unwrap();
    assert_eq!(words.to_vec().unwrap(), vec![-123_456_789; 7]);
    // Regression p30_6: 8- and 16-byte elements were refused (`FillElementSize`); they are one
    // strided memset per word now (or one plain memset when the words are equal).
    let mut wide = DeviceBuffer::<f64>::zeroed(&context, 1001).unwrap();
    wide.fill(1.0).unwrap();
    assert_eq!(wide.to_vec().unwrap(), vec![1.0f64; 1001]);
    let mut same_words = DeviceBuffer::<u64>::zeroed(&context, 5).unwrap();
    same_words.fill_async(0x1234_5678_1234_5678, &stream).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(same_words.to_vec().unwrap(), vec![0x1234_5678_1234_5678u64; 5]);
    let mut quads = DeviceBuffer::<[f32; 4]>::zeroed(&context, 333).unwrap();
    quads.fill_async([1.0, -2.0, 3.5, f32::MAX], &stream).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(quads.to_vec().unwrap(), vec![[1.0, -2.0, 3.5, f32::MAX]; 333]);
    let mut odd = DeviceBuffer::<[u8; 3]>::zeroed(&context, 4).unwrap();
    let error = odd.fill([1, 2, 3]).unwrap_err();
    assert!(matches!(error, Error::FillElementSize { size: 3 }), "{error:?}");
    eprintln!("fill of [u8; 3]: {error}");
}

#[test]
fn async_copies_through_pinned_memory_and_between_device_buffers() {
    let Some(context) = common::gpu_or_skip("async_copies_through_pinned_memory_and_between_device_buffers") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    let n = (1 << 22) + 5;
    let data: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(2_654_435_761)).collect();
    let upload = PinnedBuffer::from_slice(&context, &data).unwrap();
    let mut first = DeviceBuffer::<u32>::zeroed(&context, n).unwrap();
    let mut second = DeviceBuffer::<u32>::zeroed(&context, n).unwrap();
    let mut download = PinnedBuffer::<u32>::zeroed(&context, n).unwrap();
    upload.copy_to_device_async(&mut first, &stream).unwrap();
    second.copy_from_device_async(&first, &stream).unwrap();
    download.copy_from_device_async(&second, &stream).unwrap();
    // No explicit synchronisation: reading the pinned buffer waits for its copy.
    assert!(download.as_slice().unwrap() == data.as_slice(), "the round trip changed the data");
    let mut third = DeviceBuffer::<u32>::zeroed(&context, n).unwrap();
    third.copy_from_device(&second).unwrap();
    assert_eq!(third.to_vec().unwrap(), data);
    let mut short = DeviceBuffer::<u32>::zeroed(&context, 3).unwrap();
    let error = upload.copy_to_device_async(&mut short, &stream).unwrap_err();
    assert!(matches!(error, Error::LengthMismatch { destination: 3, .. }), "{error:?}");
}

/// "Freeing a buffer that a queued kernel still uses must not be undefined behaviour": the
/// input is dropped while ~200 launches that read it are still queued, and its memory is
/// handed out again at once; the result must still be right. The drop does not wait: the free
/// is queued after the kernels (stream-ordered), so the new allocation cannot get the memory
/// before they end.
#[test]
fn dropping_a_buffer_that_queued_kernels_still_read_is_safe() {
    let Some(context) = common::gpu_or_skip("dropping_a_buffer_that_queued_kernels_still_read_is_safe") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    let n = 1 << 24;
    let config = LaunchConfig::for_elements(n, 256);
    let x = DeviceBuffer::from_slice(&context, &vec![1.0f32; n]).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&context, n).unwrap();
    for _ in 0..200 {
        saxpy::launch(&stream, config, 1.0, &x, &mut y).unwrap();
    }
    let busy_before = !stream.is_idle().unwrap();
    drop(x);
    let idle_after = stream.is_idle().unwrap();
    eprintln!("busy before the drop: {busy_before}; idle right after it: {idle_after} (pools: {})", context.uses_memory_pools());
    if !context.uses_memory_pools() {
        assert!(idle_after, "without pools the drop waits for the kernels that read the buffer");
    }
    let mut reuse = DeviceBuffer::<f32>::zeroed(&context, n).unwrap();
    reuse.fill(-1000.0).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(y.to_vec().unwrap(), vec![200.0f32; n]);

    // Stream-ordered: freed on its stream after the kernels queued there, without a wait.
    if !context.device().supports_memory_pools().unwrap() {
        eprintln!("SKIPPED stream-ordered part: the device has no memory pools");
        return;
    }
    let mut z = DeviceBuffer::<f32>::zeroed_async(&stream, n).unwrap();
    let mut temporary = DeviceBuffer::<f32>::zeroed_async(&stream, n).unwrap();
    temporary.fill_async(2.0, &stream).unwrap();
    for _ in 0..100 {
        saxpy::launch(&stream, config, 1.0, &temporary, &mut z).unwrap();
    }
    drop(temporary);
    let still_busy = !stream.is_idle().unwrap();
    let mut reuse = DeviceBuffer::<f32>::zeroed_async(&stream, n).unwrap();
    reuse.fill_async(-1000.0, &stream).unwrap();
    stream.synchronize().unwrap();
    eprintln!("stream-ordered drop returned with the stream still busy: {still_busy}");
    assert_eq!(z.to_vec().unwrap(), vec![200.0f32; n]);
}

/// Synchronous copies run on the legacy default stream. Between it and a stream made with
/// `StreamOrdering::WithLegacyDefault` the buffer tracking queues no event wait (CUDA orders the
/// two already); between it and a non-blocking stream it must. Both directions, both kinds of
/// stream, with the stream kept busy for 50 ms so that a missing order shows: a download that
/// did not wait for the kernel reads zeros, an upload that did not wait for the kernel's read
/// changes what the kernel squares.
#[test]
fn synchronous_copies_stay_ordered_with_launches_on_either_kind_of_stream() {
    use test_kernels::launch_kinds::spin_for;
    use test_kernels::square_checked;
    let test = "synchronous_copies_stay_ordered_with_launches_on_either_kind_of_stream";
    let Some(context) = common::gpu_or_skip(test) else { return };
    let n = 1 << 20;
    let first: Vec<u32> = (0..n as u32).map(|i| i % 60_000 + 1).collect();
    let second = vec![7u32; n];
    let config = LaunchConfig::for_elements(n, 256);
    for ordering in [StreamOrdering::WithLegacyDefault, StreamOrdering::NonBlocking] {
        let stream = Stream::with_priority(&context, ordering, 0).unwrap();
        let mut x = DeviceBuffer::from_slice(&context, &first).unwrap();
        let mut out = DeviceBuffer::<u32>::zeroed(&context, n).unwrap();
        // Kernel after a synchronous upload, download after the kernel.
        spin_for::launch(&stream, LaunchConfig::new(1u32, 1u32), 50_000_000).unwrap();
        square_checked::launch(&stream, config, &x, &mut out).unwrap();
        let squares = out.to_vec().unwrap();
        assert!(squares.iter().zip(&first).all(|(s, f)| *s == f * f), "{ordering:?}: the download did not wait for the kernel");
        // A synchronous upload over a buffer that a queued kernel still reads.
        spin_for::launch(&stream, LaunchConfig::new(1u32, 1u32), 50_000_000).unwrap();
        square_checked::launch(&stream, config, &x, &mut out).unwrap();
        x.copy_from_host(&second).unwrap();
        let squares = out.to_vec().unwrap();
        assert!(squares.iter().zip(&first).all(|(s, f)| *s == f * f), "{ordering:?}: the upload overwrote the input before the kernel read it");
        square_checked::launch(&stream, config, &x, &mut out).unwrap();
        assert_eq!(out.to_vec().unwrap(), vec![49u32; n], "{ordering:?}: the kernel after the upload read stale input");
    }
}
