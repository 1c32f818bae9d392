//! CUDA graphs: capture several launches on a stream once, then replay them many times.
//!
//! `cargo run --release --example graphs`

use std::process::ExitCode;

use ferrocuda::{Context, DeviceBuffer, LaunchConfig, Stream};
use gpu_kernels::saxpy;

fn main() -> ExitCode {
    ferrocuda_test_support::exit_code(run())
}

fn run() -> ferrocuda::Result<()> {
    let context = Context::primary(0)?;
    // Capture needs a stream that does not synchronise with the legacy default stream.
    let stream = Stream::non_blocking(&context)?;
    let n = 1 << 20;
    let x = DeviceBuffer::from_slice(&context, &vec![1.0f32; n])?;
    let mut y = DeviceBuffer::<f32>::zeroed(&context, n)?;
    let config = LaunchConfig::for_elements(n, 256);
    context.embedded_image(&gpu_kernels::KERNELS)?; // load the module outside the capture

    let graph = stream.capture(|s| {
        for a in [1.0, 2.0, 3.0, 4.0] {
            saxpy::launch(s, config, a, &x, &mut y)?;
        }
        Ok(())
    })?;
    println!("captured a graph of {} nodes", graph.node_count()?);
    let exec = graph.instantiate()?;
    let replays = 25;
    for _ in 0..replays {
        // SAFETY: `x` and `y` live until after the synchronisation below.
        unsafe { exec.launch(&stream)? };
    }
    stream.synchronize()?;
    let result = y.to_vec()?;
    let expected = 10.0 * replays as f32;
    assert!(result.iter().all(|&v| v == expected), "wrong result");
    println!("replayed it {replays} times: y[0] = {} (expected {expected}): graphs example verified", result[0]);
    Ok(())
}
