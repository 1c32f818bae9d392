//! Streams and events: priorities, events between streams, timing, host callbacks, pinned
//! memory with asynchronous copies, stream-ordered allocation.
//!
//! `cargo run --release --example streams_events`

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use ferrocuda::{Context, DeviceBuffer, Event, LaunchConfig, PinnedBuffer, Stream, StreamOrdering};
use gpu_kernels::saxpy;

fn main() -> ExitCode {
    ferrocuda_test_support::exit_code(run())
}

fn run() -> ferrocuda::Result<()> {
    let context = Context::primary(0)?;
    let (least, greatest) = context.stream_priority_range()?;
    let producer = Stream::with_priority(&context, StreamOrdering::NonBlocking, greatest)?;
    let consumer = Stream::with_priority(&context, StreamOrdering::NonBlocking, least)?;
    println!("producer priority {}, consumer priority {}", producer.priority()?, consumer.priority()?);

    let n = 1 << 24;
    let host_x = PinnedBuffer::from_slice(&context, &vec![1.0f32; n])?;
    // Stream-ordered buffers: `y` is also read on `consumer`; the copy there waits for the
    // producer's kernel, and `y`'s drop waits for the copy (each buffer tracks its streams).
    let mut x = DeviceBuffer::<f32>::zeroed_async(&producer, n)?;
    let mut y = DeviceBuffer::<f32>::zeroed_async(&producer, n)?;
    host_x.copy_to_device_async(&mut x, &producer)?;

    let (start, done) = (Event::new(&context)?, Event::new(&context)?);
    start.record(&producer)?;
    for _ in 0..20 {
        saxpy::launch(&producer, LaunchConfig::for_elements(n, 256), 0.5, &x, &mut y)?;
    }
    done.record(&producer)?;
    let callbacks = Arc::new(AtomicUsize::new(0));
    let counter = callbacks.clone();
    producer.launch_host_fn(move || {
        counter.fetch_add(1, Ordering::SeqCst);
    })?;

    // The consumer waits for the producer's event on the GPU, not on the host.
    consumer.wait_event(&done)?;
    let mut host_y = PinnedBuffer::<f32>::zeroed(&context, n)?;
    host_y.copy_from_device_async(&y, &consumer)?;
    println!("queued everything; producer idle yet: {}", producer.is_idle()?);
    let values = host_y.as_slice()?; // waits for its copy
    assert!(values.iter().all(|&v| v == 10.0), "wrong result");
    producer.synchronize()?;
    println!(
        "20 saxpy launches over {n} elements took {:.3} ms (events); host callback ran {} time(s)",
        start.elapsed_ms(&done)?,
        callbacks.load(Ordering::SeqCst)
    );
    println!("y[0] = {} (expected 10): streams and events example verified", values[0]);
    Ok(())
}
