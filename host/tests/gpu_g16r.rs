//! GPU repros of the held-out review of session 16 (audit/2026-11-28d/FINDINGS-review.md),
//! named for the findings (`g16r_<n>_...`). Host API only (no kernel crate; the one kernel is
//! hand-written PTX), so this binary builds with the host crate alone. Each test skips without a
//! GPU and fails under `REQUIRE_GPU=1` while its finding is present. The deadlock repros run
//! their case in a child process (this binary, re-run on the one test by `common/child.rs`)
//! with a deadline, so a hang is a failure, not a hung test binary.
//!
//! Run: `REQUIRE_GPU=1 cargo test --release -p ferrocuda-host --test gpu_g16r -- --nocapture --test-threads=1`
//! (or `scripts/gpu-run/review16.sh`).
//!
//! Some tests here compare the GPU's free memory before and after, which other processes on the
//! GPU disturb (session 18's final call: G16R-1 saw -173 MiB with five other test binaries
//! running): `ferrocuda-gpu-run: alone` (scripts/gpu-run/run.sh runs this binary by itself).

use std::sync::Arc;
use std::time::{Duration, Instant};

use ferrocuda_host::__private::launch_in_module;
use ferrocuda_host::{BufferAccess, Context, DeviceBuffer, Error, Event, JitOptions, KernelSignature, LaunchConfig, Module, Stream};

#[path = "common/child.rs"]
mod child;
mod common;
use child::{in_child, run_child};
use common::gpu_or_skip;

/// A module with one kernel, `mark(u32* out)`: `*out = 7`, and a 256 MiB global that the kernel
/// touches, so that whether the module is loaded shows in the device's free memory.
const MARK_PTX: &str = r#"
.version 7.0
.target sm_50
.address_size 64

.visible .global .align 4 .b8 g16r_big[268435456];

.visible .entry mark(
    .param .u64 out
)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, 7;
    st.global.u32 [%rd2], %r1;
    mov.u64 %rd3, g16r_big;
    st.global.u32 [%rd3], %r1;
    ret;
}
"#;

/// The module's global, in bytes.
const BIG: i64 = 256 << 20;

/// What the typed launcher of `mark` would pass (`#[kernel] unsafe fn mark(out: *mut u32)`).
static MARK: KernelSignature =
    KernelSignature { symbol: "mark", param_sizes: &[8], canonical: "", fingerprint: 0, layout: &[], param_names: &[], type_names: &[], type_keys: &[] };

/// `mark<<<1, 1, 0, stream>>>(out)` from `module`, as `mark::launch_in(&module, stream, ..)`
/// does (the generated launcher calls this very function).
fn launch_mark(module: &Module, stream: &Stream, out: &mut DeviceBuffer<u32>) -> ferrocuda_host::Result<()> {
    let address = out.as_device_ptr().address();
    let params = [ferrocuda_host::__private::KernelParam::value(&address)];
    // SAFETY: `mark` takes one pointer to a u32, which `out` holds; `out` is declared written.
    unsafe { launch_in_module(module, &MARK, stream, LaunchConfig::new(1u32, 1u32), &params, &[BufferAccess::write(out)]) }
}

fn free_bytes(context: &Context) -> i64 {
    context.memory_info().expect("cuMemGetInfo").0 as i64
}

/// G16R-1: a kernel of an explicitly loaded module, launched on a stream forked into a capture
/// (`Stream::wait_event` on an event recorded into it), is not kept loaded by the graph. The
/// launch path keeps the module for the graph only when the launching stream itself is the
/// capturing one (`is_capturing_fast`), and under the capturing stream's key; a joined stream is
/// neither. So dropping the module once the capture has ended unloads it while the graph holds
/// a node of its kernel: `Graph::instantiate` (safe) then meets a node of an unloaded module
/// (U5: it crashes the driver), and `GraphExec::launch`, whose contract says "the modules of
/// captured kernels are kept loaded by the graph itself", runs unloaded code.
///
/// Seen here without crashing: the module's 256 MiB global comes back to the device's free
/// memory when the module is dropped, while the graph still lives (then the graph is not
/// instantiated). After the fix the memory stays in use until the graph goes, and the graph's
/// replay writes the mark.
#[test]
fn g16r_1_a_module_launched_on_a_forked_stream_stays_loaded_for_the_graph() {
    let Some(context) = gpu_or_skip("g16r_1_a_module_launched_on_a_forked_stream_stays_loaded_for_the_graph") else { return };
    let origin = Stream::non_blocking(&context).unwrap();
    let forked = Stream::non_blocking(&context).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(&context, 1).unwrap();
    let free_before = free_bytes(&context);
    // SAFETY: the PTX above is valid, and `launch_mark` passes `mark` its one pointer.
    let module = unsafe { Module::load_ptx(&context, "g16r_1", MARK_PTX, &JitOptions::new()) }.unwrap();
    // A real launch first: the module's code and global are loaded for sure.
    launch_mark(&module, &origin, &mut out).unwrap();
    origin.synchronize().unwrap();
    let free_loaded = free_bytes(&context);
    let (fork, join) = (Event::without_timing(&context).unwrap(), Event::without_timing(&context).unwrap());
    let graph = origin
        .capture(|stream| {
            fork.record(stream)?;
            forked.wait_event(&fork)?;
            launch_mark(&module, &forked, &mut out)?;
            join.record(&forked)?;
            stream.wait_event(&join)
        })
        .unwrap();
    let nodes = graph.node_count().unwrap();
    drop(module);
    let free_after_drop = free_bytes(&context);
    println!(
        "G16R-1: module load took {} MiB; graph of {nodes} nodes; dropping the module with the graph alive gave back {} MiB",
        (free_before - free_loaded) >> 20,
        (free_after_drop - free_loaded) >> 20
    );
    assert!(free_before - free_loaded >= BIG / 2, "the module's global did not show in the free memory: the test cannot tell");
    assert!(
        free_after_drop - free_loaded < BIG / 2,
        "the module was unloaded while the graph holds a node of its kernel (instantiating it would crash the driver, U5)"
    );
    // Kept: the graph runs the kernel.
    out.fill_async(0, &origin).unwrap();
    origin.synchronize().unwrap();
    let exec = graph.instantiate().unwrap();
    // SAFETY: the graph's kernel writes `out`, alive and used on `origin` only until the sync.
    unsafe { exec.launch(&origin) }.unwrap();
    origin.synchronize().unwrap();
    assert_eq!(out.to_vec().unwrap(), vec![7]);
    drop(exec);
    drop(graph);
    context.synchronize().unwrap();
    let free_end = free_bytes(&context);
    println!("G16R-1: after the graph's drop {} MiB came back", (free_end - free_loaded) >> 20);
    assert!(free_end - free_loaded >= BIG / 2, "the module is still loaded after its graph went");
}

/// G16R-2: an `end_capture` that fails (here: a stream forked into the capture and never joined
/// back, `CUDA_ERROR_STREAM_CAPTURE_UNJOINED`) returned before it took the modules kept for the
/// capture off the context's list, so an explicitly loaded module launched in the failed capture
/// stayed loaded for the context's life after its last handle dropped: a leak that nothing
/// counts (`Context::deferred_releases` is 0) or says, and a later capture on a stream with the
/// same handle inherits it. Seen through the module's 256 MiB global.
#[test]
fn g16r_2_a_failed_capture_leaves_no_module_loaded() {
    let Some(context) = gpu_or_skip("g16r_2_a_failed_capture_leaves_no_module_loaded") else { return };
    let origin = Stream::non_blocking(&context).unwrap();
    let forked = Stream::non_blocking(&context).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(&context, 1).unwrap();
    context.synchronize().unwrap();
    let free_before = free_bytes(&context);
    // SAFETY: as in g16r_1.
    let module = unsafe { Module::load_ptx(&context, "g16r_2", MARK_PTX, &JitOptions::new()) }.unwrap();
    launch_mark(&module, &origin, &mut out).unwrap();
    origin.synchronize().unwrap();
    let free_loaded = free_bytes(&context);
    let fork = Event::without_timing(&context).unwrap();
    let mut side = DeviceBuffer::<u32>::zeroed(&context, 1).unwrap();
    let captured = origin.capture(|stream| {
        launch_mark(&module, stream, &mut out)?;
        fork.record(stream)?;
        forked.wait_event(&fork)?;
        // Work on the forked stream, never joined back: the capture's end fails. (A fork with
        // no work of its own ends with the origin's nodes and counts as joined: the first GPU
        // run of this test, session 16, ended such a capture with a graph.)
        side.fill_async(1, &forked)
    });
    println!("G16R-2: the capture with an unjoined fork: {:?}", captured.as_ref().map(|_| "a graph"));
    assert!(matches!(captured, Err(Error::CaptureFailed { .. })), "{:?}", captured.map(|_| ()));
    drop(module);
    drop(fork);
    context.synchronize().unwrap();
    let free_after = free_bytes(&context);
    println!(
        "G16R-2: module load took {} MiB; after the failed capture and the module's drop {} MiB came back; deferred releases {}",
        (free_before - free_loaded) >> 20,
        (free_after - free_loaded) >> 20,
        context.deferred_releases()
    );
    assert!(free_before - free_loaded >= BIG / 2, "the module's global did not show in the free memory: the test cannot tell");
    assert!(free_after - free_loaded >= BIG / 2, "the module stayed loaded after its last handle dropped (kept for a capture that failed)");
}

/// G16R-3: `Event::record` into a capture keeps the capturing stream in the event
/// (`captured_on`) as a clone that counts as one of the caller's handles (`Stream::user`). So
/// dropping the caller's last `Stream` handle while it captures does not end the capture (N11,
/// docs/host-safety.md: "the caller's last handle dropped while capturing: the capture ends")
/// while any event recorded into it lives: the capture runs on unseen by the caller, the
/// context's deferred releases (modules, plans, handles, graphs) wait for it, and
/// `Context::synchronize` fails with `CaptureInProgress` naming a capture whose stream the
/// caller no longer has.
#[test]
fn g16r_3_the_last_stream_handle_ends_its_capture_even_with_an_event_recorded_in_it() {
    let Some(context) = gpu_or_skip("g16r_3_the_last_stream_handle_ends_its_capture_even_with_an_event_recorded_in_it") else { return };
    let event = Event::without_timing(&context).unwrap();
    {
        let stream = Stream::non_blocking(&context).unwrap();
        stream.begin_capture().unwrap();
        event.record(&stream).unwrap();
        // The caller's last handle.
    }
    let synced = context.synchronize();
    println!("G16R-3: Context::synchronize with the capturing stream dropped and the event alive: {synced:?}");
    drop(event);
    let after = context.synchronize();
    println!("G16R-3: after the event's drop: {after:?}");
    assert!(synced.is_ok(), "the capture outlived the caller's last handle of its stream: {synced:?}");
    assert!(after.is_ok(), "{after:?}");
}

/// G16R-4: since G16-1, `Event::synchronize` holds the event's mutex while it blocks in
/// `cuEventSynchronize`, and `is_complete`, `record`, `elapsed_ms` and `Stream::wait_event`
/// take that mutex before anything else. A host callback that touches the event (here
/// `is_complete`, which must fail there: the driver refuses CUDA calls in callbacks, and
/// `launch_host_fn`'s docs promise "ferrocuda returns its error instead of deadlocking") blocks
/// on the mutex, while the synchronising thread waits for an event recorded after that
/// callback: a deadlock of safe code (the stream's callback thread and the caller hang for
/// ever). Before G16-1 the call returned the driver's error.
#[test]
fn g16r_4_an_event_used_in_a_host_callback_never_deadlocks_its_synchronize() {
    const TEST: &str = "g16r_4_an_event_used_in_a_host_callback_never_deadlocks_its_synchronize";
    let Some(context) = gpu_or_skip(TEST) else { return };
    if in_child(TEST) {
        let stream = Stream::non_blocking(&context).unwrap();
        let event = Arc::new(Event::without_timing(&context).unwrap());
        // Holds the stream for a while, so that the synchronize below is waiting first.
        stream.launch_host_fn(|| std::thread::sleep(Duration::from_millis(300))).unwrap();
        let in_callback = Arc::clone(&event);
        stream
            .launch_host_fn(move || {
                let answer = in_callback.is_complete();
                println!("G16R-4: is_complete inside the callback returned {answer:?}");
            })
            .unwrap();
        event.record(&stream).unwrap();
        let synced = event.synchronize();
        println!("G16R-4: synchronize returned {synced:?}");
        synced.unwrap();
        return;
    }
    drop(context);
    let output = run_child(TEST, Duration::from_secs(10));
    let Some(output) = output else { panic!("G16R-4: deadlock: Event::synchronize and a host callback's is_complete of the same event hang") };
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    println!("G16R-4 child:\n{text}");
    assert!(output.status.success() && text.contains("G16R-4: synchronize returned Ok"), "{}", output.status);
}

/// G16R-5: since G16-1, `Stream::wait_event` takes the event's mutex first and then waits for
/// the stream's `hold_off_capture` stretches to end (its capture gate). A thread inside such a
/// stretch that touches the event (here `is_complete`; `record` and `synchronize` alike, none
/// of which is refused inside a stretch, unlike a capture or an event wait) waits for the
/// mutex, and its stretch never ends: a deadlock of safe code. The documented lock order
/// ("hold_off_capture / NoCapture: no lock, refused rather than waiting") has no such edge.
#[test]
fn g16r_5_a_wait_event_never_waits_for_a_stretch_while_holding_the_event() {
    const TEST: &str = "g16r_5_a_wait_event_never_waits_for_a_stretch_while_holding_the_event";
    let Some(context) = gpu_or_skip(TEST) else { return };
    if in_child(TEST) {
        let stream = Stream::non_blocking(&context).unwrap();
        let event = Event::without_timing(&context).unwrap();
        event.record(&stream).unwrap();
        stream.synchronize().unwrap();
        let (opened, open) = std::sync::mpsc::channel();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let stretch = stream.hold_off_capture("g16r_5").unwrap();
                opened.send(()).unwrap();
                // Long enough for the wait below to take the event's lock and wait for us.
                std::thread::sleep(Duration::from_millis(300));
                let answer = event.is_complete();
                println!("G16R-5: is_complete inside the stretch returned {answer:?}");
                drop(stretch);
            });
            open.recv().unwrap();
            let waited = stream.wait_event(&event);
            println!("G16R-5: wait_event returned {waited:?}");
            waited.unwrap();
        });
        return;
    }
    drop(context);
    let output = run_child(TEST, Duration::from_secs(10));
    let Some(output) = output else { panic!("G16R-5: deadlock: wait_event holding the event waits for a stretch whose thread waits for the event") };
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    println!("G16R-5 child:\n{text}");
    assert!(output.status.success() && text.contains("G16R-5: wait_event returned Ok"), "{}", output.status);
}

/// `mark(u32* out)` alone (no big global), for the embedded module of g16r_6.
const MARK_SMALL_PTX: &str = r#"
.version 7.0
.target sm_50
.address_size 64

.visible .entry mark(
    .param .u64 out
)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, 7;
    st.global.u32 [%rd2], %r1;
    ret;
}
"#;

/// A kernel crate's `KERNELS` as `embed_kernels!()` would make it, of the PTX above.
// SAFETY: `mark` is launched below only with the one pointer its PTX takes.
static G16R_6_KERNELS: ferrocuda_host::EmbeddedModule = unsafe {
    ferrocuda_host::EmbeddedModule::new(ferrocuda_host::EmbeddedImages {
        crate_name: "g16r_6_kernels",
        toolchain: "",
        ptx: &[(50, MARK_SMALL_PTX)],
        cubins: &[],
        resources: &[],
        device_overflow_checks: false,
        host_overflow_probe: |x| x,
    })
};

/// G16R-6: the first launch of a kernel crate's embedded module inside a capture is refused
/// (`ModuleNotLoadedInCapture`, E1a: load it before the capture), but only on the capturing
/// stream itself (`is_capturing_fast`); on a stream forked into the capture the launcher loaded
/// the module inside it. After the fix the fork is refused the same way, before anything is
/// loaded, and the same launch after the capture loads the module and runs.
#[test]
fn g16r_6_a_first_launch_on_a_forked_stream_loads_no_module_inside_the_capture() {
    let Some(context) = gpu_or_skip("g16r_6_a_first_launch_on_a_forked_stream_loads_no_module_inside_the_capture") else { return };
    let origin = Stream::non_blocking(&context).unwrap();
    let forked = Stream::non_blocking(&context).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(&context, 1).unwrap();
    let launch = |stream: &Stream, out: &mut DeviceBuffer<u32>| {
        let address = out.as_device_ptr().address();
        let params = [ferrocuda_host::__private::KernelParam::value(&address)];
        // SAFETY: `mark` takes one pointer to a u32, which `out` holds; `out` is declared written.
        unsafe {
            ferrocuda_host::__private::launch_embedded(&G16R_6_KERNELS, &MARK, stream, LaunchConfig::new(1u32, 1u32), &params, &[BufferAccess::write(out)])
        }
    };
    let (fork, join) = (Event::without_timing(&context).unwrap(), Event::without_timing(&context).unwrap());
    let mut on_origin = None;
    let mut on_fork = None;
    let graph = origin.capture(|stream| {
        on_origin = Some(launch(stream, &mut out));
        fork.record(stream)?;
        forked.wait_event(&fork)?;
        on_fork = Some(launch(&forked, &mut out));
        join.record(&forked)?;
        stream.wait_event(&join)
    });
    println!(
        "G16R-6: first launch in the capture on the capturing stream {on_origin:?}; on the forked stream {on_fork:?}; capture {:?}",
        graph.as_ref().map(|_| ())
    );
    assert!(matches!(on_origin, Some(Err(Error::ModuleNotLoadedInCapture { .. }))), "{on_origin:?}");
    assert!(matches!(on_fork, Some(Err(Error::ModuleNotLoadedInCapture { .. }))), "the fork loaded the module inside the capture: {on_fork:?}");
    graph.unwrap();
    launch(&origin, &mut out).unwrap();
    origin.synchronize().unwrap();
    assert_eq!(out.to_vec().unwrap(), vec![7]);
}

/// G16R-7: a capturing stream whose last handle is dropped inside a host callback (of another
/// stream) handed the end of its capture (N11) to `Context::release`, which on the release
/// thread postponed it until no capture of the context ran: that is, until this very capture
/// ended, which only that release would do. The capture never ended; `Context::synchronize`
/// failed with `CaptureInProgress` for good, and every later postponed release of the context
/// (modules, plans, handles, events recorded into captures) waited with it. docs/host-safety.md:
/// "the caller's last handle dropped while capturing: the capture ends (N11) ...; dropped in a
/// callback: destroyed after it". Second part, the same path: what is released at once even
/// during an unrelated capture (an `Event` never recorded into one, P5) waited for the end of
/// every capture when dropped in a callback.
#[test]
fn g16r_7_a_capturing_stream_dropped_in_a_host_callback_ends_its_capture() {
    let Some(context) = gpu_or_skip("g16r_7_a_capturing_stream_dropped_in_a_host_callback_ends_its_capture") else { return };
    let other = Stream::non_blocking(&context).unwrap();
    let capturing = Stream::non_blocking(&context).unwrap();
    capturing.begin_capture().unwrap();
    other.launch_host_fn(move || drop(capturing)).unwrap();
    other.synchronize().unwrap();
    // Waits for the release thread's hand-offs first.
    let synced = context.synchronize();
    println!(
        "G16R-7: Context::synchronize after the capturing stream's last handle dropped in a callback: {synced:?}; deferred {}",
        context.deferred_releases()
    );
    assert!(synced.is_ok(), "the capture of a stream dropped in a host callback never ended: {synced:?}");

    let unrelated = Stream::non_blocking(&context).unwrap();
    unrelated.begin_capture().unwrap();
    let event = Event::without_timing(&context).unwrap();
    other.launch_host_fn(move || drop(event)).unwrap();
    other.synchronize().unwrap();
    let during = context.synchronize();
    let deferred = context.deferred_releases();
    println!("G16R-7: an event dropped in a callback during an unrelated capture: {during:?}; deferred {deferred}");
    unrelated.end_capture().unwrap();
    assert!(matches!(during, Err(Error::CaptureInProgress { .. })), "{during:?}");
    assert_eq!(deferred, 0, "an event never recorded into a capture waited for an unrelated capture (P5)");
}

/// G16R-8: a stream another library owns (here cudarc's, adopted as `borrowed::cudarc::stream`
/// does: `Stream::from_raw` on its handle, which that safe function calls) could be forked into
/// a capture of ferrocuda's (`wait_event` on an event recorded into it). From then until the
/// capture's end, everything the **owner** queues on its own stream, from any thread and
/// through its own safe API, is recorded into ferrocuda's graph instead of running: the owner's
/// calls succeed, its work never runs (unless ferrocuda's caller launches the graph, whose
/// `unsafe` contract asks for the liveness of memory it never saw). `begin_capture` on such a
/// stream is refused for this very reason (`CaptureOfBorrowedStream`, Q8), a fork was not.
///
/// Here the owner (raw driver calls standing for cudarc's safe `memset`) fills its own memory on
/// its stream, on another thread, while the stream is forked into ferrocuda's capture. Before
/// the fix: the fork `Ok`, the owner's fill `Ok`, its memory still 0 after its synchronize.
/// After: the fork is refused (`ForkOfBorrowedStream`), the fill runs.
#[test]
fn g16r_8_a_borrowed_stream_is_never_forked_into_a_capture_of_ferrocudas() {
    use cudarc::driver::{CudaContext, result};
    let Some(context) = gpu_or_skip("g16r_8_a_borrowed_stream_is_never_forked_into_a_capture_of_ferrocudas") else { return };
    let cuda = CudaContext::new(0).expect("cudarc opens device 0");
    let theirs = cuda.new_stream().unwrap();
    cuda.bind_to_thread().unwrap();
    const BYTES: usize = 1024;
    // SAFETY: the owner's own allocation in the primary context, freed at the end.
    let memory = unsafe { result::malloc_sync(BYTES) }.unwrap();
    // SAFETY: `memory` holds BYTES bytes; the stream is alive.
    unsafe { result::memset_d8_async(memory, 0, BYTES, theirs.cu_stream()) }.unwrap();
    theirs.synchronize().unwrap();
    // SAFETY: cudarc's stream of `context` (the primary context), kept alive by the Arc held with
    // it: what the safe `borrowed::cudarc::stream(&theirs)` does.
    let adopted = unsafe { Stream::from_raw(&context, theirs.cu_stream(), theirs.clone()) }.unwrap();
    let origin = Stream::non_blocking(&context).unwrap();
    let (fork, join) = (Event::without_timing(&context).unwrap(), Event::without_timing(&context).unwrap());
    origin.begin_capture().unwrap();
    fork.record(&origin).unwrap();
    let forked = adopted.wait_event(&fork);
    // The owner's code, on its own thread, on its own stream.
    let filled = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                cuda.bind_to_thread().unwrap();
                // SAFETY: `memory` holds BYTES bytes, the owner's; the stream is alive.
                unsafe { result::memset_d8_async(memory, 7, BYTES, theirs.cu_stream()) }
            })
            .join()
            .unwrap()
    });
    let joined_back = if forked.is_ok() { join.record(&adopted).and_then(|()| origin.wait_event(&join)) } else { Ok(()) };
    let ended = origin.end_capture();
    theirs.synchronize().unwrap();
    let mut host = vec![0u8; BYTES];
    cuda.bind_to_thread().unwrap();
    // SAFETY: `memory` holds BYTES bytes; `host` as many.
    unsafe { result::memcpy_dtoh_sync(&mut host, memory) }.unwrap();
    // SAFETY: allocated above, its work done.
    unsafe { result::free_sync(memory) }.unwrap();
    let sevens = host.iter().filter(|&&b| b == 7).count();
    println!(
        "G16R-8: fork of the owner's stream {forked:?}; owner's fill {filled:?}; join back {joined_back:?}; end {:?}; {sevens} of {BYTES} bytes filled",
        ended.as_ref().map(|graph| graph.node_count().unwrap_or(0))
    );
    assert!(filled.is_ok(), "{filled:?}");
    assert!(matches!(forked, Err(Error::ForkOfBorrowedStream { .. })), "the owner's stream was forked into ferrocuda's capture: {forked:?}");
    assert_eq!(sevens, BYTES, "the owner's work was recorded into ferrocuda's graph instead of running");
    assert!(ended.is_ok(), "{:?}", ended.map(|_| ()));
}

/// Probe (an attack that should hold): after a capture's end fails because a stream forked into
/// it was never joined back (`CUDA_ERROR_STREAM_CAPTURE_UNJOINED`), ferrocuda clears the forked
/// stream's "joined" flag and treats it as an ordinary stream again. That is right only if the
/// driver took the forked stream out of the capture too: otherwise ferrocuda's later work on it
/// (ordered and tracked as if it ran) would be recorded into a dead capture and never run, and a
/// buffer written there would be read back unwritten. Checked: both streams report no capture,
/// and a fill on the forked stream lands.
#[test]
fn g16r_probe_a_failed_capture_leaves_no_stream_captured() {
    let Some(context) = gpu_or_skip("g16r_probe_a_failed_capture_leaves_no_stream_captured") else { return };
    let origin = Stream::non_blocking(&context).unwrap();
    let forked = Stream::non_blocking(&context).unwrap();
    let mut buffer = DeviceBuffer::<u32>::zeroed(&context, 64).unwrap();
    let fork = Event::without_timing(&context).unwrap();
    let mut side = DeviceBuffer::<u32>::zeroed(&context, 1).unwrap();
    let captured = origin.capture(|stream| {
        fork.record(stream)?;
        forked.wait_event(&fork)?;
        // Work of its own on the fork, so that it is unjoined (see g16r_2).
        side.fill_async(1, &forked)
    });
    let states = (origin.is_capturing(), forked.is_capturing());
    let fill = buffer.fill_async(5, &forked);
    let synced = forked.synchronize();
    let values = buffer.to_vec();
    println!(
        "probe: capture with an unjoined fork {:?}; capturing after it (origin, forked) {states:?}; fill {fill:?}; sync {synced:?}",
        captured.as_ref().map(|_| ())
    );
    assert!(matches!(captured, Err(Error::CaptureFailed { .. })), "{:?}", captured.map(|_| ()));
    assert!(matches!(states, (Ok(false), Ok(false))), "the driver kept a stream in the failed capture: {states:?}");
    assert!(fill.is_ok() && synced.is_ok(), "{fill:?} {synced:?}");
    assert_eq!(values.unwrap(), vec![5u32; 64], "work on the forked stream after the failed capture did not run");
}

/// G16R-10: `Stream::capture` ended whatever capture ran on the stream when its closure
/// returned. Other code holding a clone of the stream may end the closure's capture (any handle
/// may end a capture, by design) and begin its own; that code's work, queued through its own
/// handle on its own thread, is then recorded into its capture, and `Stream::capture` ended
/// *that* capture and returned its graph as the closure's: the caller got a graph of work it
/// never queued, on memory it never saw (its `GraphExec::launch` contract cannot be kept), and
/// the other code's own `end_capture` failed.
///
/// Before the fix: the closure queues nothing, yet its graph has the other code's fill node, and
/// the other code's end fails. After: `Stream::capture` returns `CaptureEndedElsewhere`, the
/// other code's capture keeps running and its end returns its graph.
#[test]
fn g16r_10_stream_capture_returns_only_its_own_capture() {
    let Some(context) = gpu_or_skip("g16r_10_stream_capture_returns_only_its_own_capture") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    let other = stream.clone();
    let mut theirs = DeviceBuffer::<u32>::zeroed(&context, 256).unwrap();
    let mut other_code = None;
    let captured = stream.capture(|_| {
        // The closure queues nothing itself; meanwhile other code, on another thread, ends this
        // capture, begins its own and queues into it through its own handle.
        other_code = Some(std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let ended_ours = other.end_capture().map(|_| ());
                    let began = other.begin_capture();
                    let fill = theirs.fill_async(9, &other);
                    (ended_ours, began, fill)
                })
                .join()
                .unwrap()
        }));
        Ok(())
    });
    let nodes = captured.as_ref().map(|graph| graph.node_count());
    let their_end = other.end_capture().map(|graph| graph.node_count());
    println!("G16R-10: other code (end ours, begin, fill) {other_code:?}; Stream::capture gave {nodes:?}; the other code's end {their_end:?}");
    let (ended_ours, began, fill) = other_code.unwrap();
    assert!(ended_ours.is_ok() && began.is_ok() && fill.is_ok(), "the other code's steps: {ended_ours:?} {began:?} {fill:?}");
    assert!(matches!(captured, Err(Error::CaptureEndedElsewhere)), "Stream::capture returned another code's capture as its own: {nodes:?}");
    assert!(matches!(their_end, Ok(Ok(1))), "the other code's capture was ended under it: {their_end:?}");
}

/// `spin_then_mark(u32* out, u64 ns)`: one thread spins `ns` nanoseconds on `%globaltimer`, then
/// writes 0xdead to `out[0]`.
const SPIN_PTX: &str = r#"
.version 7.0
.target sm_50
.address_size 64

.visible .entry spin_then_mark(
    .param .u64 out,
    .param .u64 ns
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<2>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd2, %rd1;
    ld.param.u64 %rd3, [ns];
    mov.u64 %rd4, %globaltimer;
    add.u64 %rd5, %rd4, %rd3;
SPIN:
    mov.u64 %rd6, %globaltimer;
    setp.lt.u64 %p1, %rd6, %rd5;
    @%p1 bra SPIN;
    mov.u32 %r1, 57005;
    st.global.u32 [%rd2], %r1;
    ret;
}
"#;

static SPIN: KernelSignature = KernelSignature {
    symbol: "spin_then_mark",
    param_sizes: &[8, 8],
    canonical: "",
    fingerprint: 0,
    layout: &[],
    param_names: &[],
    type_names: &[],
    type_keys: &[],
};

/// `spin_then_mark<<<1, 1, 0, stream>>>(out, ns)`, `out` declared written.
fn launch_spin(module: &Module, stream: &Stream, out: &mut DeviceBuffer<u32>, ns: u64) -> ferrocuda_host::Result<()> {
    let address = out.as_device_ptr().address();
    let params = [ferrocuda_host::__private::KernelParam::value(&address), ferrocuda_host::__private::KernelParam::value(&ns)];
    // SAFETY: the kernel takes a pointer to a u32, which `out` holds, and a u64.
    unsafe { launch_in_module(module, &SPIN, stream, LaunchConfig::new(1u32, 1u32), &params, &[BufferAccess::write(out)]) }
}

/// G16R-11: `DeviceSlice::usage()` is public and safe, and so is `BufferUsage::give_up_on_work`
/// (meant for a library's own state after an abort: "the record forgets those streams"). On a
/// buffer's record it made the buffer forget the kernel still writing it: a host copy then read
/// it at once (before the write: a data race with the kernel), and its drop freed the memory on
/// the legacy stream with no wait (a non-blocking stream's kernel is not ordered with it), so
/// the memory pool handed it to a new buffer while the kernel still wrote it (use after free).
///
/// Before the fix: the copy returns 0 at once; the new buffer (when the pool reuses the address)
/// reads 0xdead after the kernel. After: the copy waits for the kernel (0xdead, about 300 ms);
/// the new buffer reads 0.
#[test]
fn g16r_11_giving_up_on_a_buffers_work_never_frees_it_under_the_work() {
    let Some(context) = gpu_or_skip("g16r_11_giving_up_on_a_buffers_work_never_frees_it_under_the_work") else { return };
    let spinning = Stream::non_blocking(&context).unwrap();
    let other = Stream::non_blocking(&context).unwrap();
    // SAFETY: the PTX above is valid, and `launch_spin` passes its two parameters.
    let module = unsafe { Module::load_ptx(&context, "g16r_11", SPIN_PTX, &JitOptions::new()) }.unwrap();
    const SPIN_NS: u64 = 300_000_000;

    // The host copy.
    let mut victim = DeviceBuffer::<u32>::zeroed_async(&spinning, 1).unwrap();
    spinning.synchronize().unwrap();
    launch_spin(&module, &spinning, &mut victim, SPIN_NS).unwrap();
    victim.usage().give_up_on_work();
    let start = Instant::now();
    let seen = victim.to_vec().unwrap();
    let waited = start.elapsed();
    spinning.synchronize().unwrap();
    drop(victim);
    context.synchronize().unwrap();
    println!("G16R-11: a host copy after give_up_on_work read {:#x} after {waited:?} (the kernel writes 0xdead after 300 ms)", seen[0]);

    // The free.
    let mut victim = DeviceBuffer::<u32>::zeroed_async(&spinning, 1024).unwrap();
    spinning.synchronize().unwrap();
    let address = victim.as_device_ptr().address();
    launch_spin(&module, &spinning, &mut victim, SPIN_NS).unwrap();
    victim.usage().give_up_on_work();
    drop(victim);
    Stream::default_of(&context).synchronize().unwrap();
    let fresh: Vec<DeviceBuffer<u32>> = (0..4).map(|_| DeviceBuffer::<u32>::zeroed_async(&other, 1024).unwrap()).collect();
    other.synchronize().unwrap();
    spinning.synchronize().unwrap();
    let reused = fresh.iter().find(|buffer| buffer.as_device_ptr().address() == address);
    let after = reused.map(|buffer| buffer.to_vec().unwrap()[0]);
    println!("G16R-11: the dropped buffer's address reused by a new buffer: {}; its first element after the kernel: {after:x?}", reused.is_some());
    drop(fresh);
    context.synchronize().unwrap();
    assert_eq!(seen, vec![0xdead], "the host copy did not wait for the kernel writing the buffer (its record forgot it)");
    assert!(waited >= Duration::from_millis(200), "the host copy returned after {waited:?}, before the kernel's write");
    assert_ne!(after, Some(0xdead), "the buffer was freed under the kernel and its memory handed to a new buffer, which the kernel wrote");
}

/// `spin_then_copy(u32* out, const u32* in, u64 ns)`: one thread spins `ns` nanoseconds on
/// `%globaltimer`, then copies `in[0]` to `out[0]`.
const SPIN_COPY_PTX: &str = r#"
.version 7.0
.target sm_50
.address_size 64

.visible .entry spin_then_copy(
    .param .u64 out,
    .param .u64 in,
    .param .u64 ns
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<2>;
    .reg .b64 %rd<10>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd2, %rd1;
    ld.param.u64 %rd7, [in];
    cvta.to.global.u64 %rd8, %rd7;
    ld.param.u64 %rd3, [ns];
    mov.u64 %rd4, %globaltimer;
    add.u64 %rd5, %rd4, %rd3;
SPIN:
    mov.u64 %rd6, %globaltimer;
    setp.lt.u64 %p1, %rd6, %rd5;
    @%p1 bra SPIN;
    ld.global.u32 %r1, [%rd8];
    st.global.u32 [%rd2], %r1;
    ret;
}
"#;

/// What a raw-pointer launcher of `spin_then_copy` would pass
/// (`#[kernel] unsafe fn spin_then_copy(out: *mut u32, input: *const u32, ns: u64)`).
static SPIN_COPY: KernelSignature = KernelSignature {
    symbol: "spin_then_copy",
    param_sizes: &[8, 8, 8],
    canonical: "",
    fingerprint: 0,
    layout: &[],
    param_names: &[],
    type_names: &[],
    type_keys: &[],
};

/// G16R-12: `BufferAccess::library_state(&BufferUsage)` (safe, public; meant for records made
/// by `BufferUsage::for_library_state`) declares a **write** through a shared reference, and
/// `DeviceSlice::usage()` hands any buffer's record out through `&`. The tracking's premise for
/// records that are not shared ("a write needs `&mut`, so no other work is declared on the
/// memory meanwhile": the fast path, and `Stream::will_use`'s "for a buffer or view only you
/// hold that is given") is then false: another thread holding `&buf` declares a write between a
/// declaration and its queuing, the record replaces its readers with that writer, and the
/// declared work is forgotten. Deterministic with `Stream::will_use` (the README's way to order
/// a raw-pointer launch, whose `unsafe` contract the caller keeps: it declared the buffer): A
/// declares a read of `buf` on its stream; B declares a library-state write of `buf.usage()` on
/// another; A launches its kernel (raw pointer, after a 20 ms spin it reads `buf`); `buf` is
/// dropped: its free waits only for B's stream, which waited for A's stream *before* A's
/// kernel. The pool hands the memory to a new buffer that is filled with 0xab, and A's kernel
/// reads 0xab: a use after free caused by the safe call. (Without `will_use` the same window is
/// one door call wide: a race of safe calls only.)
///
/// Before the fix: `out` reads 0xab (when the pool reuses the address; else 0, inconclusive
/// about the free but the record was still corrupted). After: `library_state` on a buffer's
/// record panics with a message (B's thread), and A's kernel reads 0.
#[test]
fn g16r_12_a_library_state_access_is_never_made_of_a_buffers_record() {
    let Some(context) = gpu_or_skip("g16r_12_a_library_state_access_is_never_made_of_a_buffers_record") else { return };
    let (mine, theirs, fresh_stream) =
        (Stream::non_blocking(&context).unwrap(), Stream::non_blocking(&context).unwrap(), Stream::non_blocking(&context).unwrap());
    // SAFETY: the PTX above is valid, and the launch below passes its three parameters.
    let module = unsafe { Module::load_ptx(&context, "g16r_12", SPIN_COPY_PTX, &JitOptions::new()) }.unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed_async(&mine, 1).unwrap();
    let buf = DeviceBuffer::<u32>::zeroed_async(&mine, 1024).unwrap();
    mine.synchronize().unwrap();
    let address = buf.as_device_ptr().address();
    // A: declare the read, as the README says a raw-pointer launch must.
    mine.will_use(&[BufferAccess::read(&buf)]).unwrap();
    // B, holding `&buf`: a write declared through a shared reference.
    let declared = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    theirs.enqueue("a library-state write", &[BufferAccess::library_state(buf.usage())], |_| Ok::<_, Error>(()))
                }))
            })
            .join()
            .unwrap()
    });
    // A: the launch it declared for (raw pointers: the launcher declares nothing for them).
    let (out_address, in_address, ns) = (out.as_device_ptr().address(), address, 20_000_000u64);
    let params = [
        ferrocuda_host::__private::KernelParam::value(&out_address),
        ferrocuda_host::__private::KernelParam::value(&in_address),
        ferrocuda_host::__private::KernelParam::value(&ns),
    ];
    // SAFETY: the kernel's pointers are `out` (declared written) and `buf` (declared read with
    // `will_use` on this stream just before, as the README's rule for raw pointers says); both
    // outlive the kernel as far as the caller's code goes: `buf`'s drop waits for its record.
    unsafe { launch_in_module(&module, &SPIN_COPY, &mine, LaunchConfig::new(1u32, 1u32), &params, &[BufferAccess::write(&mut out)]) }.unwrap();
    drop(buf);
    let mut fresh: Vec<DeviceBuffer<u32>> = Vec::new();
    for _ in 0..4 {
        let mut buffer = DeviceBuffer::<u32>::zeroed_async(&fresh_stream, 1024).unwrap();
        buffer.fill_async(0xab, &fresh_stream).unwrap();
        fresh.push(buffer);
    }
    fresh_stream.synchronize().unwrap();
    mine.synchronize().unwrap();
    let reused = fresh.iter().any(|buffer| buffer.as_device_ptr().address() == address);
    let read = out.to_vec().unwrap()[0];
    println!(
        "G16R-12: B's library-state write declaration on `&buf`: {}; address reused by a new buffer: {reused}; A's kernel read {read:#x} (0xab: the memory of the new buffer)",
        match &declared {
            Ok(result) => format!("{result:?}"),
            Err(_) => "panicked (refused)".to_string(),
        }
    );
    assert_ne!(read, 0xab, "the buffer was freed under the kernel that read it (its read was erased from the record by a write declared through `&`)");
    assert!(declared.is_err() || matches!(declared, Ok(Err(_))), "a write was declared on a buffer's record through a shared reference");
}

/// G16R-12, second door: the same write through `&buf` without `library_state`:
/// `DeviceRead::kernel_arg(&buf)` (a public trait method) returns the buffer's `SliceArg`, whose
/// `write(name)` made an `Access::Write` of it. After the fix it panics (a write is declared
/// through `DeviceWrite::kernel_arg_mut`, `&mut`), and the `&mut` path still works.
#[test]
fn g16r_12_a_write_is_never_declared_through_a_shared_slice_argument() {
    use ferrocuda_host::{DeviceRead, DeviceWrite};
    let Some(context) = gpu_or_skip("g16r_12_a_write_is_never_declared_through_a_shared_slice_argument") else { return };
    let mut buf = DeviceBuffer::<u32>::zeroed(&context, 16).unwrap();
    let through_shared = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let access = DeviceRead::<u32>::kernel_arg(&buf).write("buf");
        format!("{access:?}")
    }));
    println!("G16R-12: a write declared through `&buf` (`kernel_arg().write`): {through_shared:?}");
    assert!(through_shared.is_err(), "a write was declared through a shared reference: {through_shared:?}");
    let stream = Stream::non_blocking(&context).unwrap();
    let access = DeviceWrite::<u32>::kernel_arg_mut(&mut buf).write("buf");
    assert_eq!(access.access(), ferrocuda_host::Access::Write);
    stream.enqueue("declared through &mut", &[access], |_| Ok::<_, Error>(())).unwrap();
}
