//! Contexts: the primary context beside a created one, push/pop, scheduling flags, limits,
//! and starting over with a fresh context.
//!
//! `cargo run --release --example contexts`

use std::process::ExitCode;

use ferrocuda::{Context, DeviceBuffer, LaunchConfig, Limit, SchedulePolicy, Stream};
use gpu_kernels::saxpy;

fn main() -> ExitCode {
    ferrocuda_test_support::exit_code(run())
}

/// `y = 2x + y` in `context`, checked on the host; returns the first element.
fn saxpy_in(context: &Context) -> ferrocuda::Result<f32> {
    let n = 1 << 16;
    let stream = Stream::new(context)?;
    let x = DeviceBuffer::from_slice(context, &vec![1.5f32; n])?;
    let mut y = DeviceBuffer::from_slice(context, &vec![1.0f32; n])?;
    saxpy::launch(&stream, LaunchConfig::for_elements(n, 256), 2.0, &x, &mut y)?;
    stream.synchronize()?;
    let result = y.to_vec()?;
    assert!(result.iter().all(|&v| v == 4.0), "saxpy gave a wrong result");
    Ok(result[0])
}

fn run() -> ferrocuda::Result<()> {
    let primary = Context::primary(0)?;
    println!("primary context of device 0 ({}): saxpy -> {}", primary.device().name()?, saxpy_in(&primary)?);

    let isolated = Context::create(0, SchedulePolicy::BlockingSync)?;
    println!("created context: schedule {:?}, saxpy -> {}", isolated.schedule_policy()?, saxpy_in(&isolated)?);

    primary.bind_to_thread()?;
    {
        let _guard = isolated.push_current()?;
        println!("inside push_current: current context is the created one: {}", Context::current().map(|c| c.raw()) == Some(isolated.raw()));
    }
    println!("after the guard: current context is the primary one: {}", Context::current().map(|c| c.raw()) == Some(primary.raw()));

    for limit in [Limit::StackSize, Limit::PrintfFifoSize, Limit::MallocHeapSize] {
        println!("{limit:?}: {} bytes", isolated.limit(limit)?);
    }
    isolated.set_limit(Limit::PrintfFifoSize, 8 << 20)?;
    println!("PrintfFifoSize after set_limit(8 MiB): {} bytes", isolated.limit(Limit::PrintfFifoSize)?);
    let (least, greatest) = isolated.stream_priority_range()?;
    println!("stream priorities: {least} (lowest) to {greatest} (highest)");

    // After a kernel fault, `recover()` gives a working context (for a created context, a new
    // one; for the primary context, a reset once no other handle is alive).
    let fresh = isolated.recover()?;
    println!("recovered (new) created context: saxpy -> {}", saxpy_in(&fresh)?);
    println!("contexts example: all results verified");
    Ok(())
}
