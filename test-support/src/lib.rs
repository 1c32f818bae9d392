//! What this repository's tests, examples and main job share, kept out of the `ferrocuda`
//! facade so that its API is the product's alone.

use ferrocuda_host::{Error, Result};

/// True when GPU tests must run rather than skip (`REQUIRE_GPU=1`).
pub fn gpu_required() -> bool {
    std::env::var("REQUIRE_GPU").is_ok_and(|v| v == "1")
}

/// The exit code of a program whose GPU work returned `result`: success, or "nothing to run"
/// (also success) when the machine has no driver or no device, unless `REQUIRE_GPU=1`; or the
/// error on stderr and a failure. The examples' `main` is `exit_code(run())`.
pub fn exit_code(result: Result<()>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error @ (Error::NoDriver | Error::NoDevice { .. })) if !gpu_required() => {
            println!("nothing to run: {error}");
            std::process::ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// A thread that keeps capturing a stream into empty graphs, queuing nothing itself, while the
/// test queues work on the same stream through another handle (audit 2026-11-28 S1,
/// 2026-11-28b G14-3 / G14-5: work of the test's thread must never land in those graphs).
/// Started by [`CaptureLoop::start`], stopped and counted by [`CaptureLoop::finish`].
pub struct CaptureLoop {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<CaptureCounts>,
}

/// What a [`CaptureLoop`] saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CaptureCounts {
    /// Captures begun and ended.
    pub captures: u32,
    /// Graphs that held at least one node: work queued by another handle, recorded into them.
    pub with_nodes: u32,
    /// Nodes in all the graphs together.
    pub nodes: usize,
    /// Captures the driver refused to begin or end (an end fails when work another thread put
    /// into the capture invalidated it).
    pub failed: u32,
}

impl CaptureLoop {
    /// Starts capturing `stream` (through a clone made here, before any capture, so the test's
    /// own handle is not the captures') with `Stream::capture(|_| Ok(()))`, pausing `gap`
    /// between captures so that some of the test's work runs between them.
    pub fn start(stream: &ferrocuda_host::Stream, gap: std::time::Duration) -> Self {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (stream, stopped) = (stream.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut counts = CaptureCounts::default();
            while !stopped.load(Ordering::Relaxed) {
                match stream.capture(|_| Ok(())) {
                    Ok(graph) => {
                        let nodes = graph.node_count().unwrap_or(usize::MAX);
                        counts.with_nodes += u32::from(nodes > 0);
                        counts.nodes = counts.nodes.saturating_add(nodes);
                    }
                    Err(_) => counts.failed += 1,
                }
                counts.captures += 1;
                if !gap.is_zero() {
                    std::thread::sleep(gap);
                }
            }
            counts
        });
        CaptureLoop { stop, thread }
    }

    /// Stops the loop and returns its counts.
    pub fn finish(self) -> CaptureCounts {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().expect("the capturing thread panicked")
    }
}
