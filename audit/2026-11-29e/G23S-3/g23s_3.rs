//! G23S-3 (audit 2026-11-29e, review2): a context's teardown (`Teardown::run`,
//! host/src/context/mod.rs) waits for the context's work with `cuCtxSynchronize` and ignores
//! its result, then unloads the embedded modules and frees the panic record (G22S-2's new
//! `ContextRecord::free`), whose `# Safety` says "the context's work has finished
//! (synchronised above, or the context faulted)". A third case exists: the driver refuses the
//! wait because another thread runs a stream capture in `CU_STREAM_CAPTURE_MODE_GLOBAL`
//! ("potentially unsafe API calls" are prohibited on every other thread that is not in relaxed
//! mode; the project knows it: host/src/stream/relaxed.rs enters relaxed mode for its waits
//! and queries, but the teardown does not). cudarc's `CudaStream::begin_capture` is safe.
//!
//! A capture of any mode on the same GPU may do it too (measured by others on NVIDIA hardware:
//! a device-wide synchronisation from another thread fails with 900/906 during a thread-local
//! or global capture on the same GPU), so the second variant uses ferrocuda's own safe
//! `Stream::begin_capture` (relaxed mode) in another created context.
//!
//! Safe code only. Thread B begins a capture (variant `cudarc`: global mode, cudarc, the
//! primary context; variant `ferrocuda`: `Stream::begin_capture`, another created context);
//! thread A (main) loads `test_kernels` into a created context (its panic record made), queues
//! `spin_for(2 s)` (scalar arguments only) on a ferrocuda stream, and drops every handle. If the drop returns before
//! the 2 s kernel could have ended, the teardown went on while the context's kernels still
//! ran: their module unloaded, their panic record freed (or, if the driver refused the frees
//! too, leaked unseen).
//!
//! Build (from the worktree root, reusing the release build of the workspace's test kernels):
//!   cp audit/2026-11-29e/G23S-3/g23s_3.rs examples/g23s_3.rs
//!   cargo build --release -p ferrocuda-main --example g23s_3 ; rm examples/g23s_3.rs
//! Run: target/release/examples/g23s_3   (runs both variants, each in a child process, and
//! prints `G23S-3 <variant> ...: UNSOUND|held`)

use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use cudarc::driver::sys::CUstreamCaptureMode;
use ferrocuda::{Context, DeviceBuffer, LaunchConfig, SchedulePolicy, Stream};
use test_kernels::launch_kinds::spin_for;
use test_kernels::square_checked;

const SPIN: Duration = Duration::from_secs(2);

fn main() {
    if !ferrocuda::driver_present() {
        println!("G23S-3: skipped: no CUDA driver");
        if std::env::var_os("REQUIRE_GPU").is_some() {
            std::process::exit(1);
        }
        return;
    }
    match std::env::args().nth(1).as_deref() {
        Some(variant @ ("cudarc" | "ferrocuda")) => run(variant),
        _ => {
            for variant in ["cudarc", "ferrocuda"] {
                let exe = std::env::current_exe().unwrap();
                let child = std::process::Command::new(exe).arg(variant).output().unwrap();
                print!("{}{}", String::from_utf8_lossy(&child.stdout), String::from_utf8_lossy(&child.stderr));
                println!("G23S-3 {variant}: child exited {:?}", child.status);
            }
        }
    }
}

fn run(variant: &str) {
    let context = Context::create(0, SchedulePolicy::Auto).expect("context");
    let stream = Stream::new(&context).expect("stream");
    let x = DeviceBuffer::from_slice(&context, &(0..64u32).collect::<Vec<_>>()).expect("x");
    let mut out = DeviceBuffer::<u32>::zeroed(&context, 40).expect("out");
    // Loads the module (and makes the context's panic record) before anything else.
    square_checked::launch(&stream, LaunchConfig::from((1u32, 32u32)), &x, &mut out).expect("warm-up");
    stream.synchronize().expect("warm-up sync");
    // The buffers go now, while the stream is idle (their release must not be what waits).
    drop((x, out));
    let queued = Instant::now();
    // Scalar arguments only: nothing but the context's teardown can wait for it.
    spin_for::launch(&stream, (1u32, 1u32), SPIN.as_nanos() as u64).expect("spin");

    let (started_tx, started_rx) = channel();
    let (end_tx, end_rx) = channel::<()>();
    let by_cudarc = variant == "cudarc";
    let capturer = std::thread::spawn(move || {
        if by_cudarc {
            let ctx = cudarc::driver::CudaContext::new(0).expect("cudarc context");
            let s = ctx.new_stream().expect("cudarc stream");
            let begun = s.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL);
            started_tx.send(format!("cudarc begin_capture(GLOBAL): {begun:?}")).unwrap();
            end_rx.recv().ok();
            let ended = s.end_capture(cudarc::driver::sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH);
            format!("{:?}", ended.map(|g| g.is_some()))
        } else {
            let other = Context::create(0, SchedulePolicy::Auto).expect("context B");
            let s = Stream::new(&other).expect("stream B");
            let begun = s.begin_capture();
            started_tx.send(format!("ferrocuda Stream::begin_capture (relaxed): {begun:?}")).unwrap();
            end_rx.recv().ok();
            format!("{:?}", s.end_capture().map(|_| "graph").map_err(|e| e.to_string()))
        }
    });
    println!("G23S-3 {variant}: thread B: {}", started_rx.recv().unwrap());

    let t = Instant::now();
    drop(stream);
    let buffers_and_stream = t.elapsed();
    drop(context); // the last handle: the teardown runs here
    let teardown_done = queued.elapsed();
    println!(
        "G23S-3 {variant}: the stream dropped in {buffers_and_stream:?}; the context's teardown returned {teardown_done:?} after the 2 s kernel was queued"
    );
    if teardown_done < SPIN - Duration::from_millis(300) {
        println!(
            "G23S-3 {variant}: teardown during another thread's capture: UNSOUND: the teardown went on (unloaded the module, freed the panic record, destroyed the context) while a kernel of the context was still running (the spin needed {SPIN:?})"
        );
    } else {
        println!("G23S-3 {variant}: teardown during another thread's capture: held (the teardown waited for the kernels)");
    }
    end_tx.send(()).ok();
    println!("G23S-3 {variant}: thread B's end_capture: {}", capturer.join().unwrap());
    std::thread::sleep(Duration::from_secs(1));
    // What became of the process: a new context's first work.
    let after = Context::create(0, SchedulePolicy::Auto).and_then(|c| c.synchronize().map(|()| c));
    println!("G23S-3 {variant}: a new context afterwards: {:?}", after.map(|_| "works").map_err(|e| e.to_string()));
}
