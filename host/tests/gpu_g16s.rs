//! GPU repros of the third held-out review of session 16 (audit/2026-11-28d/FINDINGS-review3.md),
//! named for the findings (`g16s_<n>_...`). Host API only (the kernels are hand-written PTX), so
//! this binary builds with the host crate alone. Each test skips without a GPU and fails under
//! `REQUIRE_GPU=1` while its finding is present. The repros that may hang or abort run their case
//! in a child process (this binary, re-run on the one test by `common/child.rs`) with a deadline.
//!
//! Run: `REQUIRE_GPU=1 cargo test --release -p ferrocuda-host --test gpu_g16s -- --nocapture --test-threads=1`
//! (or `scripts/gpu-run/review16s.sh`).

use std::sync::{Mutex, OnceLock, mpsc};
use std::time::{Duration, Instant};

use ferrocuda_host::__private::launch_in_module;
use ferrocuda_host::{
    BorrowedStream, BufferAccess, Context, DeviceBuffer, EmbeddedImages, EmbeddedModule, Error, JitOptions, KernelSignature, LaunchConfig, Module, Stream,
    driver, sys,
};

#[path = "common/child.rs"]
mod child;
mod common;
use child::{in_child, run_child};
use common::gpu_or_skip;

/// `spin(out, ns)`: spins for `ns` nanoseconds of the GPU's global timer, then `*out = 7`.
const SPIN_PTX: &str = r#"
.version 7.0
.target sm_50
.address_size 64

.visible .entry spin(
    .param .u64 out,
    .param .u64 ns
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<2>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [ns];
    mov.u64 %rd3, %globaltimer;
LOOP:
    mov.u64 %rd4, %globaltimer;
    sub.u64 %rd5, %rd4, %rd3;
    setp.lt.u64 %p1, %rd5, %rd2;
    @%p1 bra LOOP;
    cvta.to.global.u64 %rd6, %rd1;
    mov.u32 %r1, 7;
    st.global.u32 [%rd6], %r1;
    ret;
}
"#;

/// What a typed launcher of `spin` would pass (`#[kernel] unsafe fn spin(out: *mut u32, ns: u64)`).
static SPIN: KernelSignature =
    KernelSignature { symbol: "spin", param_sizes: &[8, 8], canonical: "", fingerprint: 0, layout: &[], param_names: &[], type_names: &[], type_keys: &[] };

/// `spin<<<1, 1, 0, stream>>>(out, ns)` from `module`.
fn launch_spin(module: &Module, stream: &Stream, out: &mut DeviceBuffer<u32>, ns: u64) -> ferrocuda_host::Result<()> {
    let address = out.as_device_ptr().address();
    let params = [ferrocuda_host::__private::KernelParam::value(&address), ferrocuda_host::__private::KernelParam::value(&ns)];
    // SAFETY: `spin` takes a pointer to a u32, which `out` holds (declared written), and a u64.
    unsafe { launch_in_module(module, &SPIN, stream, LaunchConfig::new(1u32, 1u32), &params, &[BufferAccess::write(out)]) }
}

/// G16S-1: a `BorrowedStream` dropped inside a stream host callback handed the owner's stream
/// back with nothing ordering it after the work queued through the borrow. Its drop joins the
/// owner's stream after ferrocuda's (`order_raw_after`), which a callback refuses
/// (`Error::CallInHostCallback`, session 16), then falls back to a host wait
/// (`Stream::synchronize`), which the driver refuses in a callback; that error was dropped. So
/// the owner's next work (a write, a free of memory the borrow's kernels use) raced the kernel.
/// The borrow is made as `BorrowedStream::new`'s contract says (the owner's stream outlives it);
/// nothing in that contract or in `launch_host_fn`'s docs ("dropping ferrocuda values inside it
/// is fine") forbids the drop there.
///
/// Seen here: the owner's stream is idle (`cuStreamQuery` answers `CUDA_SUCCESS`) right after the
/// drop, while the borrow's 600 ms kernel still runs. After the fix the drop aborts the process
/// with a message (nothing can order the owner there, and the owner may reuse its memory as soon
/// as the drop returns), as the end of a borrowed slice's scope already did.
#[test]
fn g16s_1_a_borrowed_stream_dropped_in_a_host_callback_is_never_handed_back_unordered() {
    const TEST: &str = "g16s_1_a_borrowed_stream_dropped_in_a_host_callback_is_never_handed_back_unordered";
    if in_child(TEST) {
        static CONTEXT: OnceLock<Context> = OnceLock::new();
        let context = CONTEXT.get_or_init(|| Context::primary(0).expect("the GPU"));
        context.bind_to_thread().unwrap();
        let mut owner: sys::CUstream = std::ptr::null_mut();
        // SAFETY: writes one stream handle, destroyed at the end (after the borrow's end).
        unsafe { driver::stream::create_with_priority(&mut owner, sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32, 0) }.expect("cuStreamCreate");
        // SAFETY: the PTX above is valid, and `launch_spin` passes `spin` its two parameters.
        let module = unsafe { Module::load_ptx(context, "g16s_1", SPIN_PTX, &JitOptions::new()) }.unwrap();
        let mut out = DeviceBuffer::<u32>::zeroed(context, 1).unwrap();
        // SAFETY: `owner` is a live stream of `context`, destroyed only after the borrow drops.
        let borrowed = unsafe { BorrowedStream::new(context, owner) }.unwrap();
        launch_spin(&module, &borrowed, &mut out, 600_000_000).unwrap();
        let other = Stream::non_blocking(context).unwrap();
        let (done, ended) = mpsc::channel();
        other
            .launch_host_fn(move || {
                drop(borrowed);
                let _ = done.send(());
            })
            .unwrap();
        ended.recv_timeout(Duration::from_secs(5)).expect("the callback ran");
        // SAFETY: `owner` is live.
        let query = unsafe { driver::stream::query(owner) };
        let ordered = query.as_ref().is_err_and(|error| error.code == sys::cudaError_enum::CUDA_ERROR_NOT_READY);
        println!("G16S-1: the owner's stream right after the borrow's end in a callback, with its 600 ms kernel running: {query:?}");
        if !ordered {
            println!("G16S-1: UNORDERED: the owner's stream was handed back idle while the borrow's kernel runs");
        }
        context.synchronize().unwrap();
        // SAFETY: created above, destroyed once, after the borrow's end.
        let _ = unsafe { driver::stream::destroy(owner) };
        return;
    }
    if gpu_or_skip(TEST).is_none() {
        return;
    }
    let output = run_child(TEST, Duration::from_secs(20)).expect("the child hung");
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    println!("G16S-1: child status {:?}\n{stdout}{stderr}", output.status);
    assert!(!stdout.contains("UNORDERED"), "G16S-1 present: the owner's stream was handed back unordered after the borrow's end in a callback");
    assert!(
        stderr.contains("dropped inside a stream host callback") && !output.status.success(),
        "the drop in a callback neither ordered the owner's stream nor aborted with the message: {:?}",
        output.status
    );
}

/// An embedded module (as `embed_kernels!()` makes one) of PTX only: loaded by the driver's JIT.
const EMPTY_PTX: &str = r#"
.version 7.0
.target sm_50
.address_size 64

.visible .entry nothing()
{
    ret;
}
"#;

// SAFETY: the images are valid PTX with one kernel and no check tables (nothing is launched from
// them: the test only loads them).
static LOADED_IN_THE_MAIN_THREAD: EmbeddedModule = unsafe {
    EmbeddedModule::new(EmbeddedImages {
        crate_name: "g16s_2_main",
        toolchain: "",
        ptx: &[(50, EMPTY_PTX)],
        cubins: &[],
        resources: &[],
        device_overflow_checks: false,
        host_overflow_probe: |x| x,
    })
};
// SAFETY: as above.
static LOOKED_UP_IN_THE_CALLBACK: EmbeddedModule = unsafe {
    EmbeddedModule::new(EmbeddedImages {
        crate_name: "g16s_2_callback",
        toolchain: "",
        ptx: &[(50, EMPTY_PTX)],
        cubins: &[],
        resources: &[],
        device_overflow_checks: false,
        host_overflow_probe: |x| x,
    })
};

/// G16S-2: the context's list of loaded kernel crates (`with_embedded`) is a lock held across
/// a crate's load (`cuModuleLoadData`, `cuFuncLoad`, the check tables' read), which may wait
/// inside the driver for the context's work (E2), a host callback included; and a callback could
/// take it (`Context::embedded_image`, `Function::from_embedded`, a typed launcher's
/// `name::function(&context)`): nothing refused those there. A thread loading a crate while a
/// callback waits for the list then waits for the callback: a hang that `launch_host_fn`'s docs
/// rule out ("ferrocuda returns its error instead of deadlocking").
///
/// Here: a callback sleeps 300 ms (the main thread starts loading a crate meanwhile), then asks
/// for another crate's image. Printed: how long the main thread's load took (300 ms or more: the
/// load waited for the callback, and before the fix the two waited for each other for ever) and
/// what the callback got. After the fix: `CallInHostCallback`, at once, whatever the driver does.
#[test]
fn g16s_2_a_host_callback_never_waits_for_the_loaded_crates_lock() {
    const TEST: &str = "g16s_2_a_host_callback_never_waits_for_the_loaded_crates_lock";
    if in_child(TEST) {
        let context = Context::primary(0).expect("the GPU");
        let stream = Stream::non_blocking(&context).unwrap();
        let (started, running) = mpsc::channel();
        let (answer, answered) = mpsc::channel();
        let in_callback = context.clone();
        stream
            .launch_host_fn(move || {
                let _ = started.send(());
                std::thread::sleep(Duration::from_millis(300));
                let image = in_callback.embedded_image(&LOOKED_UP_IN_THE_CALLBACK);
                let _ = answer.send(format!("{image:?}"));
            })
            .unwrap();
        running.recv_timeout(Duration::from_secs(5)).expect("the callback started");
        let start = Instant::now();
        let loaded = context.embedded_image(&LOADED_IN_THE_MAIN_THREAD);
        println!("G16S-2: the main thread's load, made while the callback runs: {loaded:?} after {:?}", start.elapsed());
        let got = answered.recv_timeout(Duration::from_secs(5)).expect("the callback answered");
        println!("G16S-2: the callback's embedded_image: {got}");
        stream.synchronize().unwrap();
        assert!(got.contains("CallInHostCallback"), "G16S-2 present: the callback took the loaded crates' lock: {got}");
        return;
    }
    if gpu_or_skip(TEST).is_none() {
        return;
    }
    let Some(output) = run_child(TEST, Duration::from_secs(20)) else {
        panic!("G16S-2 present: the callback and the loading thread waited for each other (the child hung)");
    };
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    println!("G16S-2: child status {:?}\n{stdout}{stderr}", output.status);
    assert!(output.status.success(), "the child failed: {:?}", output.status);
}

/// G16S-3: `Stream::capture` ended its capture on unwind when `std::thread::panicking()` was
/// true as its guard dropped, which is also the case for a capture made by a destructor while
/// another panic unwinds: the capture was ended (and its graph dropped) right after `work`
/// returned `Ok`, and the call reported `Error::CaptureEndedElsewhere` about its own capture.
/// After the fix the guard ends the capture only when it is dropped by an unwind out of `work`.
#[test]
fn g16s_3_a_capture_made_by_a_destructor_during_an_unwind_returns_its_graph() {
    let Some(context) = gpu_or_skip("g16s_3_a_capture_made_by_a_destructor_during_an_unwind_returns_its_graph") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(&context, 1).unwrap();
    let got: Mutex<Option<String>> = Mutex::new(None);
    struct CaptureOnDrop<'a> {
        stream: &'a Stream,
        out: &'a mut DeviceBuffer<u32>,
        got: &'a Mutex<Option<String>>,
    }
    impl Drop for CaptureOnDrop<'_> {
        fn drop(&mut self) {
            let out = &mut *self.out;
            let graph = self.stream.capture(|s| out.fill_async(5, s));
            *self.got.lock().unwrap() = Some(format!("{:?}", graph.map(|_| "a graph")));
        }
    }
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _capture = CaptureOnDrop { stream: &stream, out: &mut out, got: &got };
        panic!("G16S-3: an unwind during which a destructor captures");
    }));
    assert!(unwound.is_err());
    let got = got.lock().unwrap().take().expect("the destructor ran");
    println!("G16S-3: Stream::capture inside a destructor during an unwind: {got}");
    assert_eq!(got, "Ok(\"a graph\")", "G16S-3 present: the capture made during an unwind was ended by its own guard");
    assert!(!stream.is_capturing().unwrap(), "the capture still runs");
}

/// The owner's object of a context adopted with `Context::from_raw` (what cudarc's `CudaContext`
/// is for `borrowed::cudarc::context` of a non-primary context): its drop is where the owner may
/// destroy the context. It reports whether the context's work was done then (`cuEventQuery` of an
/// event recorded after that work), and leaves the destruction to the test.
struct OwnerObject {
    event: std::sync::Arc<OnceLock<usize>>,
    seen: mpsc::Sender<String>,
}

impl Drop for OwnerObject {
    fn drop(&mut self) {
        let event = self.event.get().copied().unwrap_or(0) as sys::CUevent;
        // SAFETY: the event is alive (destroyed by the test after this reported).
        let query = unsafe { driver::event::query(event) };
        let thread = std::thread::current().name().unwrap_or("?").to_string();
        let _ = self.seen.send(format!("{query:?} on thread {thread}"));
    }
}

/// G16S-5: the last handle of a context adopted from another library (`Context::from_raw`,
/// which `borrowed::cudarc::context` uses for cudarc's non-primary contexts; a `BorrowedContext`)
/// dropped inside a door call's work (or a host callback): the teardown (bind, wait for the
/// context's work, unload the modules) was handed to the release thread, but the owner's
/// keep-alive was dropped at once, with the `ContextInner`'s other fields. The owner may destroy
/// the context in that drop (cudarc does), and the teardown then ran on a destroyed context; a
/// `BorrowedContext`'s owner may destroy it as soon as its drop returns, which it did before the
/// teardown ran.
///
/// Seen here: the owner's object is dropped while the context's work (a 400 ms host callback)
/// still runs (`cuEventQuery` answers `CUDA_ERROR_NOT_READY`), printed as `UNORDERED`. After the
/// fix the teardown runs in place inside door work (it waits for no lock of ferrocuda's) and the
/// keep-alive is dropped after it (`Ok(())`).
#[test]
fn g16s_5_a_borrowed_contexts_owner_is_let_go_only_after_its_teardown() {
    let Some(primary) = gpu_or_skip("g16s_5_a_borrowed_contexts_owner_is_let_go_only_after_its_teardown") else { return };
    let device = ferrocuda_host::Device::get(0).unwrap();
    let mut raw: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: writes one context handle, destroyed at the end; null parameters ask for a plain one.
    unsafe { driver::context::create(&mut raw, std::ptr::null_mut(), 0, device.raw()) }.expect("cuCtxCreate");
    let mut popped: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: pops what cuCtxCreate pushed.
    let _ = unsafe { driver::context::pop_current(&mut popped) };
    let slot = std::sync::Arc::new(OnceLock::new());
    let (seen, owner_dropped) = mpsc::channel();
    // SAFETY: `raw` is live until the end of the test, after the last ferrocuda handle dropped.
    let adopted = unsafe { Context::from_raw(raw, OwnerObject { event: slot.clone(), seen }) }.unwrap();
    let stream = Stream::non_blocking(&adopted).unwrap();
    stream.launch_host_fn(|| std::thread::sleep(Duration::from_millis(400))).unwrap();
    let mut event: sys::CUevent = std::ptr::null_mut();
    adopted.bind_to_thread().unwrap();
    // SAFETY: writes one event handle of the adopted context, destroyed at the end.
    unsafe { driver::event::create(&mut event, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32) }.expect("cuEventCreate");
    // SAFETY: the event and the stream are alive and of one context.
    stream.enqueue("cuEventRecord", &[], |s| Ok::<_, Error>(unsafe { driver::event::record(event, s.get()) }?)).unwrap();
    slot.set(event as usize).unwrap();
    drop(stream);
    let other = Stream::non_blocking(&primary).unwrap();
    other
        .enqueue("drop the last handle of an adopted context", &[], move |_| {
            drop(adopted);
            Ok::<_, Error>(())
        })
        .unwrap();
    let got = owner_dropped.recv_timeout(Duration::from_secs(10)).expect("the owner's object was dropped");
    println!("G16S-5: the adopted context's work when its owner's object was dropped (last handle dropped in door work): {got}");
    // Whatever ran on the release thread: let it finish before the context goes.
    std::thread::sleep(Duration::from_millis(600));
    primary.synchronize().unwrap();
    // SAFETY: created above, destroyed once; no ferrocuda handle of the context is left.
    unsafe {
        let _ = driver::event::destroy(event);
        let _ = driver::context::destroy(raw);
    }
    primary.bind_to_thread().unwrap();
    assert!(got.starts_with("Ok(())"), "G16S-5 present: UNORDERED: the owner's object was dropped before the context's teardown: {got}");
}
