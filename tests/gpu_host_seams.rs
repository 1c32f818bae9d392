//! Regression tests for the host-side findings of the third audit
//! (`audit-2026-11-27/FINDINGS.md`, issue 29): where ferrocuda's guarantees meet destructors
//! that may never run (P3 a leaked cudarc borrow, P5 a leaked capturing stream), graph capture
//! (P2 an allocation inside a capture), contexts other libraries own (P6 `recover` of the
//! primary context under cudarc) and hangs (P12 dropping a context after a timeout).
//!
//! Each test is named for the finding it guards. Skip (printed) without a GPU; fail under
//! `REQUIRE_GPU=1`. What hangs the GPU for good (P12) runs in a child process (this binary
//! re-run with `FERROCUDA_SEAMS_CHILD=<test name>`), bounded by a deadline.

mod common;

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cudarc::driver::CudaContext;
use ferrocuda::borrowed;
use ferrocuda::{Context, DeviceBuffer, Error, Event, LaunchConfig, Limit, SchedulePolicy, Stream, TensorDataType, TensorMap, TensorSwizzle, sys};
use gpu_kernels::saxpy;
use test_kernels::launch_kinds::{mark_blocks, spin_for};

/// 16 Mi floats: large enough that a kernel over it is still running when the next call comes.
const N: usize = 1 << 24;
/// Nanoseconds a "slow" kernel keeps a stream busy: long enough that unordered work runs first.
const SLOW_NS: u64 = 300_000_000;
const CHILD: &str = "FERROCUDA_SEAMS_CHILD";

/// A context of its own (its captures, deferred releases and memory are this test's alone).
fn own_context(test: &str) -> Option<Context> {
    common::gpu_or_skip(test)?;
    Some(Context::create(0, SchedulePolicy::Auto).unwrap())
}

/// Bytes of the device's default memory pool that allocations hold now (the pool every
/// stream-ordered `DeviceBuffer` comes from), whatever the pool keeps reserved.
fn pool_in_use(context: &Context) -> u64 {
    let mut pool = std::ptr::null_mut();
    let mut used = 0u64;
    // SAFETY: writes one pool handle of a valid device, then one 64-bit attribute value of it.
    unsafe {
        assert_eq!(sys::cuDeviceGetDefaultMemPool(&mut pool, context.device().raw()), sys::CUresult::CUDA_SUCCESS);
        let attribute = sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_CURRENT;
        assert_eq!(sys::cuMemPoolGetAttribute(pool, attribute, (&mut used as *mut u64).cast()), sys::CUresult::CUDA_SUCCESS);
    }
    used
}

/// Loads the test kernels' module into `context` (a capture cannot load it).
fn load_kernels(context: &Context) {
    let stream = Stream::non_blocking(context).unwrap();
    let mut y = DeviceBuffer::<u32>::zeroed(context, 32).unwrap();
    mark_blocks::launch(&stream, (1u32, 32u32), false, &mut y).unwrap();
    spin_for::launch(&stream, (1u32, 1u32), 0).unwrap();
    saxpy::launch(&stream, (1u32, 32u32), 0.0, &DeviceBuffer::<f32>::zeroed(context, 32).unwrap(), &mut DeviceBuffer::<f32>::zeroed(context, 32).unwrap())
        .unwrap();
    stream.synchronize().unwrap();
}

/// P2: `zeroed_async` on a capturing stream used to return a buffer backed by a graph
/// allocation node, which escaped the capture (a later safe launch wrote unmapped memory).
/// Now it is refused with an error naming the rule, and nothing escapes; a stream that joined
/// the capture through an event (which ferrocuda never saw begin) is refused too, because
/// the check asks the driver.
#[test]
fn p2_an_allocation_on_a_capturing_stream_is_refused_and_nothing_escapes() {
    let Some(context) = own_context("p2_an_allocation_on_a_capturing_stream_is_refused_and_nothing_escapes") else { return };
    load_kernels(&context);
    let stream = Stream::non_blocking(&context).unwrap();
    let mut escaped = None;
    let outcome = stream.capture(|s| {
        escaped = Some(DeviceBuffer::<u32>::zeroed_async(s, N)?);
        Ok(())
    });
    let error = outcome.expect_err("an allocation inside a capture must be refused");
    let message = error.to_string();
    println!("p2: {message}");
    assert!(matches!(error, Error::AllocationInCapture { operation: "DeviceBuffer::zeroed_async" }), "{error:?}");
    assert!(message.contains("Allocate the buffer before `begin_capture`/`capture`"), "{message}");
    assert!(escaped.is_none(), "a buffer escaped the capture");
    assert!(!stream.is_capturing().unwrap(), "the capture was not ended");

    // A stream that joins the capture through an event: ferrocuda's flag says "not
    // capturing", the driver says it is.
    let joined = Stream::non_blocking(&context).unwrap();
    stream.begin_capture().unwrap();
    let fork = Event::without_timing(&context).unwrap();
    fork.record(&stream).unwrap();
    joined.wait_event(&fork).unwrap();
    let refused = DeviceBuffer::<u32>::zeroed_async(&joined, 1024).map(|b| b.len());
    let join = Event::without_timing(&context).unwrap();
    join.record(&joined).unwrap();
    stream.wait_event(&join).unwrap();
    let graph = stream.end_capture();
    assert!(matches!(refused, Err(Error::AllocationInCapture { .. })), "an allocation on a stream joined to a capture: {refused:?}");
    graph.expect("the capture stays valid after the refusal");

    // Allocating before the capture (what the error says) works, inside and after it.
    let mut before = DeviceBuffer::<u32>::zeroed_async(&stream, N).unwrap();
    let graph = stream.capture(|s| mark_blocks::launch(s, (4u32, 32u32), true, &mut before)).unwrap();
    assert_eq!(graph.node_count().unwrap(), 1);
    mark_blocks::launch(&stream, (4u32, 32u32), false, &mut before).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(&before.to_vec().unwrap()[..4], &[0, 1, 2, 3]);
}

/// P2 across threads: one thread allocates on a stream (`zeroed_async`) while another keeps
/// capturing it. Each allocation is either refused or an ordinary, zeroed buffer: a capture
/// cannot begin between the check and the allocation (the stream's capture gate), which
/// would make the buffer a graph allocation that escapes (its read-back then fails, as in the
/// audit's `capture_alloc`).
#[test]
fn p2_a_capture_begun_on_another_thread_never_slips_between_the_check_and_the_allocation() {
    let Some(context) = own_context("p2_a_capture_begun_on_another_thread_never_slips_between_the_check_and_the_allocation") else { return };
    load_kernels(&context);
    let stream = Stream::non_blocking(&context).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let capturer = {
        let (stream, stop) = (stream.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut captures = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                stream.capture(|_| Ok(())).expect("an empty capture failed");
                captures += 1;
                // Gaps between the captures, so that some allocations get through.
                std::thread::sleep(Duration::from_micros(20));
            }
            captures
        })
    };
    // Kept, and read only once the captures are over: a read while the stream is captured
    // would have to wait for it, which a capture does not allow.
    let mut buffers = Vec::new();
    let mut refused = 0u32;
    for _ in 0..3000 {
        match DeviceBuffer::<u32>::zeroed_async(&stream, 1024) {
            Ok(buffer) => buffers.push(buffer),
            Err(Error::AllocationInCapture { .. }) => refused += 1,
            Err(other) => panic!("zeroed_async beside a capture failed otherwise: {other}"),
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let captures = capturer.join().unwrap();
    println!("p2 threads: {} allocations, {refused} refused during {captures} captures", buffers.len());
    assert!(!buffers.is_empty(), "no allocation got through: the test shows nothing");
    stream.synchronize().unwrap();
    for buffer in &buffers {
        let back = buffer.to_vec().expect("a buffer allocated beside a capture cannot be read: it escaped the capture");
        assert!(back.iter().all(|&v| v == 0), "a buffer allocated beside a capture was not zeroed");
    }
    drop(buffers);
    context.synchronize().unwrap();
}

/// Audit 2026-11-28, S1: `TensorMap::to_device_async` copies the map from its own stack frame
/// (`cuMemcpyHtoDAsync`, which a graph replays by reading the source again). It used to check
/// for a capture (its allocation, under the capture gate) and queue the copy afterwards, so a
/// capture begun by another thread in between recorded the copy into its graph. One thread
/// makes maps on a stream while another keeps capturing the same stream with nothing of its
/// own: every graph must be empty (a node would be the other thread's copy; a capture the
/// driver invalidated over it fails its `expect`), and every call either succeeds or is
/// refused by name (`AllocationInCapture` at the start of a capture, `CallMemoryInCapture` when
/// one began during the call). Before the fix some graphs held a node (timing-dependent).
#[test]
fn s1_a_capture_begun_on_another_thread_never_records_a_call_scoped_copy() {
    let Some(context) = own_context("s1_a_capture_begun_on_another_thread_never_records_a_call_scoped_copy") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    let source = DeviceBuffer::<u32>::zeroed(&context, 1024).unwrap();
    // Gaps between the captures, so that some calls get through.
    let capturer = ferrocuda_test_support::CaptureLoop::start(&stream, Duration::from_micros(20));
    let (mut made, mut refused) = (Vec::new(), 0u32);
    for _ in 0..3000 {
        let map = TensorMap::tiled(&source, TensorDataType::U32, &[1024], &[256], TensorSwizzle::None).unwrap();
        match map.to_device_async(&stream) {
            Ok(device) => made.push(device),
            Err(Error::AllocationInCapture { .. } | Error::CallMemoryInCapture { .. }) => refused += 1,
            Err(other) => panic!("to_device_async beside a capture failed otherwise: {other}"),
        }
    }
    let seen = capturer.finish();
    println!(
        "s1 threads: {} maps copied, {refused} refused during {} captures, {} graphs with a node, {} failed",
        made.len(),
        seen.captures,
        seen.with_nodes,
        seen.failed
    );
    assert!(!made.is_empty() && seen.captures > 0, "one side never ran: the test shows nothing");
    assert_eq!(seen.with_nodes, 0, "a capture recorded another thread's copy from a stack frame");
    assert_eq!(seen.failed, 0, "an empty capture failed (the driver refused work another thread put in it)");
    stream.synchronize().unwrap();
    drop(made);
    context.synchronize().unwrap();
}

/// P3, read side: a ferrocuda kernel reads a cudarc slice behind 300 ms of other work, and
/// the lent slice is leaked with `mem::forget`. The scope still orders cudarc's later
/// overwrite of the slice after the kernel (the old guard's ordering lived in its `Drop`:
/// forgotten, cudarc's overwrite ran first and the kernel copied 9s, in all 16 Mi elements).
#[test]
fn p3_a_leaked_cudarc_read_borrow_still_orders_cudarcs_overwrite_after_the_kernel() {
    let Some(context) = common::gpu_or_skip("p3_a_leaked_cudarc_read_borrow_still_orders_cudarcs_overwrite_after_the_kernel") else { return };
    let cuda = CudaContext::new(0).expect("cudarc opens device 0");
    let a = cuda.new_stream().unwrap();
    let ctx = borrowed::cudarc::context(&cuda).unwrap();
    assert_eq!(ctx.raw(), context.raw(), "cudarc's context is the primary one");
    let ours = Stream::non_blocking(&ctx).unwrap();
    let mut x = a.clone_htod(&vec![1.0f32; N]).unwrap();
    let nines = a.clone_htod(&vec![9.0f32; N]).unwrap();
    a.synchronize().unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&ctx, N).unwrap();
    spin_for::launch(&ours, (1u32, 1u32), SLOW_NS).unwrap(); // our stream is busy
    borrowed::cudarc::scope(|scope| {
        let xs = scope.slice(&x, &a).unwrap();
        saxpy::launch(&ours, LaunchConfig::for_elements(N, 256), 1.0, &xs, &mut y).unwrap(); // y = x, after the spin
        std::mem::forget(xs);
    });
    a.memcpy_dtod(&nines, &mut x).unwrap(); // cudarc overwrites x on its stream
    ours.synchronize().unwrap();
    let v = y.to_vec().unwrap();
    let wrong = v.iter().filter(|&&e| e != 1.0).count();
    assert_eq!(wrong, 0, "cudarc overwrote x under the kernel that read it: {wrong} of {N} elements of y are not 1 (y[0] = {})", v[0]);
}

/// P3's control: the same with the old guard form (now `unsafe`, whose contract this breaks on
/// purpose by leaking the guard): cudarc's overwrite must overtake the kernel, or the test
/// above could not see the bug it guards against.
#[test]
fn p3_control_a_leaked_guard_lets_cudarc_overwrite_under_the_kernel() {
    let Some(_context) = common::gpu_or_skip("p3_control_a_leaked_guard_lets_cudarc_overwrite_under_the_kernel") else { return };
    let cuda = CudaContext::new(0).expect("cudarc opens device 0");
    let a = cuda.new_stream().unwrap();
    let ctx = borrowed::cudarc::context(&cuda).unwrap();
    let ours = Stream::non_blocking(&ctx).unwrap();
    let mut x = a.clone_htod(&vec![1.0f32; N]).unwrap();
    let nines = a.clone_htod(&vec![9.0f32; N]).unwrap();
    a.synchronize().unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&ctx, N).unwrap();
    spin_for::launch(&ours, (1u32, 1u32), SLOW_NS).unwrap();
    {
        // SAFETY: the contract is broken on purpose (the guard is leaked below) to show the race
        // it exists for: a device-memory race on this test's own buffers, which the assertion
        // observes; no host memory is involved.
        let xs = unsafe { borrowed::cudarc::slice(&x, &a) }.unwrap();
        saxpy::launch(&ours, LaunchConfig::for_elements(N, 256), 1.0, &*xs, &mut y).unwrap();
        std::mem::forget(xs);
    }
    a.memcpy_dtod(&nines, &mut x).unwrap();
    ours.synchronize().unwrap();
    let v = y.to_vec().unwrap();
    let raced = v.iter().filter(|&&e| e == 9.0).count();
    println!("p3 control: with the guard leaked, {raced} of {N} elements of y are cudarc's later 9");
    assert!(raced > 0, "the control did not race: the P3 tests cannot tell the fix from the bug on this machine");
}

/// P3, write side: a ferrocuda kernel writes a cudarc slice behind 300 ms of other work, the
/// lent slice is leaked; cudarc's copy of the slice on its own stream must see the kernel's
/// values.
#[test]
fn p3_a_leaked_cudarc_write_borrow_still_orders_cudarcs_read_after_the_kernel() {
    let Some(_context) = common::gpu_or_skip("p3_a_leaked_cudarc_write_borrow_still_orders_cudarcs_read_after_the_kernel") else { return };
    let cuda = CudaContext::new(0).expect("cudarc opens device 0");
    let a = cuda.new_stream().unwrap();
    let ctx = borrowed::cudarc::context(&cuda).unwrap();
    let ours = Stream::non_blocking(&ctx).unwrap();
    let fours = DeviceBuffer::from_slice(&ctx, &vec![4.0f32; N]).unwrap();
    let mut y = a.alloc_zeros::<f32>(N).unwrap();
    let mut copy = a.alloc_zeros::<f32>(N).unwrap();
    a.synchronize().unwrap();
    spin_for::launch(&ours, (1u32, 1u32), SLOW_NS).unwrap();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        borrowed::cudarc::scope(|scope| {
            let mut ys = scope.slice_mut(&mut y, &a).unwrap();
            saxpy::launch(&ours, LaunchConfig::for_elements(N, 256), 0.5, &fours, &mut ys).unwrap(); // y = 2, after the spin
            std::mem::forget(ys);
            panic!("unwinding out of the scope");
        })
    }));
    assert!(outcome.is_err());
    a.memcpy_dtod(&y, &mut copy).unwrap(); // cudarc reads y on its stream
    let copied = a.clone_dtoh(&copy).unwrap();
    ours.synchronize().unwrap();
    let missing = copied.iter().filter(|&&e| e != 2.0).count();
    assert_eq!(missing, 0, "cudarc read y before the kernel wrote it: {missing} of {N} elements lack the kernel's 2.0");
}

/// P5: a capturing stream leaked with `mem::forget` never ends its capture. Buffers dropped
/// afterwards that the capture does not involve are freed at once (they used to wait for its
/// end forever: 1 GiB lost in the audit, 2 GiB here), and `Context::synchronize` names the running capture
/// instead of failing with the driver's bare code.
#[test]
fn p5_a_leaked_capturing_stream_strands_no_buffer_it_does_not_use() {
    let Some(context) = own_context("p5_a_leaked_capturing_stream_strands_no_buffer_it_does_not_use") else { return };
    load_kernels(&context);
    context.synchronize().unwrap();
    let in_use_before = pool_in_use(&context);
    {
        let s = Stream::non_blocking(&context).unwrap();
        s.begin_capture().unwrap();
        std::mem::forget(s);
    }
    for _ in 0..32 {
        drop(DeviceBuffer::<u8>::zeroed(&context, 64 << 20).unwrap());
    }
    // Used on a stream of its own (not the capturing one), then dropped.
    let other = Stream::non_blocking(&context).unwrap();
    let mut used = DeviceBuffer::<u32>::zeroed_async(&other, 16 << 20).unwrap();
    mark_blocks::launch(&other, (64u32, 32u32), false, &mut used).unwrap();
    drop(used);
    assert_eq!(context.deferred_releases(), 0, "buffers the leaked capture does not use wait for its end");
    other.synchronize().unwrap();
    // The frees are queued on the legacy stream (where the buffers were made): let them run.
    std::thread::sleep(Duration::from_millis(300));
    let in_use_after = pool_in_use(&context);
    let held = in_use_after.saturating_sub(in_use_before) >> 20;
    println!("p5: memory pool in use before {} MiB, after {} MiB", in_use_before >> 20, in_use_after >> 20);
    // The leak was 2112 MiB; other tests of the binary may hold a few hundred MiB meanwhile.
    assert!(held < 1024, "{held} MiB of the 2112 MiB dropped after the leaked capture are still held");
    let error = context.synchronize().unwrap_err();
    let message = error.to_string();
    println!("p5: {message}");
    assert!(matches!(error, Error::CaptureInProgress { captures: 1, .. }), "{error:?}");
    assert!(message.contains("mem::forget") && message.contains("end_capture"), "{message}");
    // The context keeps working.
    let again = DeviceBuffer::from_slice(&context, &[7u32; 64]).unwrap();
    assert_eq!(again.to_vec().unwrap(), vec![7u32; 64]);
}

/// P6: `Context::recover` on the primary context used to reset it under cudarc's live stream
/// and slices (cudarc's next safe call crashed the process). Now it refuses, naming why, and
/// cudarc's stream and slice keep working; lowering a limit of the shared primary context is
/// refused too, raising it is not.
#[test]
fn p6_recover_never_resets_the_primary_context_under_cudarc() {
    let Some(_context) = common::gpu_or_skip("p6_recover_never_resets_the_primary_context_under_cudarc") else { return };
    let cuda = CudaContext::new(0).expect("cudarc opens device 0");
    let a = cuda.new_stream().unwrap();
    let y = a.clone_htod(&vec![1u32; N]).unwrap();
    let mut y2 = a.alloc_zeros::<u32>(N).unwrap();
    a.synchronize().unwrap();
    let error = Context::primary(0).unwrap().recover().unwrap_err();
    println!("p6: {error}");
    assert!(matches!(error, Error::SharedContextNotReset { device: 0 }), "{error:?}");
    a.memcpy_dtod(&y, &mut y2).unwrap(); // waits for y's event on a: crashed after a reset
    let back = a.clone_dtoh(&y2).unwrap();
    assert!(back.iter().all(|&v| v == 1), "cudarc's memory changed under it");

    let primary = Context::primary(0).unwrap();
    let stack = primary.limit(Limit::StackSize).unwrap();
    let lowered = primary.set_limit(Limit::StackSize, stack / 2).unwrap_err();
    println!("p6: {lowered}");
    assert!(matches!(lowered, Error::SharedLimitLowered { limit: Limit::StackSize, .. }), "{lowered:?}");
    assert_eq!(primary.limit(Limit::StackSize).unwrap(), stack, "a refused set_limit changed the limit");
    primary.set_limit(Limit::StackSize, stack).unwrap();
    let own = Context::create(0, SchedulePolicy::Auto).unwrap();
    let own_stack = own.limit(Limit::StackSize).unwrap();
    own.set_limit(Limit::StackSize, own_stack / 2).expect("a context of our own may lower its limits");
}

/// P12: after `synchronize_timeout` reported a kernel that never ends, dropping the buffer it
/// used, its stream and the last handle of the context returns (the context's teardown used
/// to wait for the kernel forever, so the process never exited). Runs in a child process,
/// which must exit within a deadline with the kernel still spinning.
#[test]
fn p12_dropping_a_context_after_a_reported_timeout_returns() {
    const NAME: &str = "p12_dropping_a_context_after_a_reported_timeout_returns";
    if std::env::var(CHILD).is_ok_and(|t| t == NAME) {
        // Each step on stderr as it happens (a hang is then located from the child's output).
        let step = |what: &str| eprintln!("p12 child: {what}");
        let context = Context::primary(0).unwrap();
        let mut mode = sys::CUmoduleLoadingMode::CU_MODULE_EAGER_LOADING;
        // SAFETY: writes one enum value.
        let _ = unsafe { sys::cuModuleGetLoadingMode(&mut mode) };
        step(&format!("module loading mode {mode:?} (CUDA_MODULE_LOADING={:?})", std::env::var("CUDA_MODULE_LOADING").ok()));
        let stream = Stream::non_blocking(&context).unwrap();
        let mut out = DeviceBuffer::<u32>::zeroed(&context, 64).unwrap();
        step("context, stream and buffer made");
        // The first launch of this module's kernels in the process comes here, on purpose (no
        // `load_kernels`): `mark_blocks`' first launch, behind a kernel that never ends, must not
        // wait for it (s9-p12: a lazy kernel load or a read of module memory there hung).
        spin_for::launch(&stream, (1u32, 1u32), u64::MAX).unwrap(); // never ends
        step("spin launched");
        mark_blocks::launch(&stream, (2u32, 32u32), false, &mut out).unwrap(); // queued behind it
        step("mark_blocks queued");
        let error = stream.synchronize_timeout(Duration::from_secs(2)).unwrap_err();
        step("synchronize_timeout returned");
        println!("TIMEOUT: {error}");
        assert!(matches!(error, Error::Timeout { .. }), "{error:?}");
        let start = Instant::now();
        drop(out);
        step("buffer dropped");
        drop(stream);
        step("stream dropped");
        drop(context);
        println!("DROPPED ALL after {:?}", start.elapsed());
        return;
    }
    if common::gpu_or_skip(NAME).is_none() {
        return;
    }
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([NAME, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, NAME)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Both pipes drained while the child runs (a full pipe would stall the child), and kept
    // whatever happens: every line reaches the report, also after a kill at the deadline.
    let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut text);
            }
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as Box<dyn std::io::Read + Send>));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as Box<dyn std::io::Read + Send>));
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (stdout, stderr) = (stdout.join().unwrap_or_default(), stderr.join().unwrap_or_default());
    let lines = |name: &str, text: &str| text.lines().map(|l| format!("  child {name}| {l}\n")).collect::<String>();
    let text = format!("{}{}", lines("stdout", &stdout), lines("stderr", &stderr));
    let _ = writeln!(std::io::stdout(), "child output:\n{text}");
    let status = status.unwrap_or_else(|| {
        let last = stderr.lines().rev().find(|l| l.starts_with("p12 child: ")).unwrap_or("(no step printed)");
        panic!("the child still ran 60 s after its start (killed); its last step: {last}\nevery line of the child:\n{text}")
    });
    assert!(status.success(), "the child failed:\n{text}");
    assert!(text.contains("TIMEOUT: ") && text.contains("DROPPED ALL after"), "{text}");
    assert!(text.contains("left to the end of the process"), "the teardown did not say why it skipped the wait:\n{text}");
}

/// Issue 29, host item 1: a buffer last written on stream `a` before `a`'s capture began is
/// read on stream `b` outside the capture (and by a synchronous copy, on the legacy stream).
/// The ordering used to rest on `a`'s tail event recorded *into* the capture: a graph node,
/// not a point in `a`, so `b` waited on it and joined the capture (its work was recorded, not
/// run, and `a`'s `end_capture` then failed with an unjoined stream). Now `b` waits for the
/// tail event recorded for real when the capture began: it reads `a`'s result (2.0, written
/// after a 300 ms spin, so an unordered read would see 0.0), `b` never captures, and the
/// capture ends cleanly.
#[test]
fn s9_item1_a_stream_outside_a_capture_waits_for_the_captured_streams_real_work() {
    let Some(context) = own_context("s9_item1_a_stream_outside_a_capture_waits_for_the_captured_streams_real_work") else { return };
    load_kernels(&context);
    let n = 1 << 20;
    let (a, b) = (Stream::non_blocking(&context).unwrap(), Stream::non_blocking(&context).unwrap());
    let x = DeviceBuffer::from_slice(&context, &vec![1.0f32; n]).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&context, n).unwrap();
    let mut z = DeviceBuffer::<f32>::zeroed(&context, n).unwrap();
    // y = 2 * x on `a`, late (behind a spin), then `a` starts capturing.
    spin_for::launch(&a, (1u32, 1u32), SLOW_NS).unwrap();
    saxpy::launch(&a, for_n(n), 2.0, &x, &mut y).unwrap();
    a.begin_capture().unwrap();
    // z = 1 * y + z on `b`, outside the capture: must wait for `a`'s saxpy.
    saxpy::launch(&b, for_n(n), 1.0, &y, &mut z).unwrap();
    let b_joined = b.is_capturing().unwrap();
    // A synchronous copy (legacy stream) of y during the capture: the host gets a's result.
    let seen = y.to_vec();
    let graph = a.end_capture();
    b.synchronize().unwrap();
    println!("s9 item1: b captured after its launch: {b_joined}; end_capture: {:?}", graph.as_ref().map(|_| ()).map_err(ToString::to_string));
    assert!(!b_joined, "b joined a's capture through an event recorded into it");
    graph.expect("the capture was ended cleanly (no stream joined it behind its back)");
    let seen = seen.expect("a host copy during the capture is ordered after a's real work");
    assert!(seen.iter().all(|&v| v == 2.0), "the host copy ran before a's saxpy: {}", seen[0]);
    let z = z.to_vec().unwrap();
    let wrong = z.iter().filter(|&&v| v != 2.0).count();
    assert_eq!(wrong, 0, "{wrong} of {n} elements of z were read before a's saxpy wrote y (z[0] = {})", z[0]);
}

/// Issue 29, host item 1, a borrowed stream: a `BorrowedStream` dropped while ferrocuda's
/// stream behind it is captured used to join the owner's stream back through an event recorded
/// into that capture, so the owner's stream joined ferrocuda's capture (its later work was
/// recorded, not run) and was never ordered after the real work. Now the owner waits for the
/// point recorded when the capture began: its copy of `y` sees ferrocuda's result (written
/// behind a 300 ms spin), and the owner's stream is not captured.
#[test]
fn s9_item1_a_borrowed_streams_drop_during_a_capture_orders_the_owner_after_the_real_work() {
    const NAME: &str = "s9_item1_a_borrowed_streams_drop_during_a_capture_orders_the_owner_after_the_real_work";
    if common::gpu_or_skip(NAME).is_none() {
        return;
    }
    let cuda = CudaContext::new(0).unwrap();
    let context = borrowed::cudarc::context(&cuda).unwrap();
    load_kernels(&context);
    let owner = cuda.new_stream().unwrap();
    let n = 1 << 20;
    let x = DeviceBuffer::from_slice(&context, &vec![1.0f32; n]).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&context, n).unwrap();
    let y_address = y.device_ptr();
    {
        // SAFETY: cudarc's live stream of this context, destroyed only after this scope.
        let stream = unsafe { borrowed::BorrowedStream::new(&context, owner.cu_stream()) }.unwrap();
        spin_for::launch(&stream, (1u32, 1u32), SLOW_NS).unwrap();
        saxpy::launch(&stream, for_n(n), 2.0, &x, &mut y).unwrap();
        stream.begin_capture().unwrap();
        // Dropped while capturing: the owner's stream is joined back, then the capture ends.
    }
    let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    let mut host = vec![0.0f32; n];
    // SAFETY: a live stream of the current context; `y` is a live allocation of n floats, read
    // by the owner after the borrow ended (the order this test checks); `host` holds n floats.
    unsafe {
        assert_eq!(sys::cuStreamIsCapturing(owner.cu_stream(), &mut status), sys::CUresult::CUDA_SUCCESS);
        assert_eq!(sys::cuMemcpyDtoHAsync_v2(host.as_mut_ptr().cast(), y_address, n * 4, owner.cu_stream()), sys::CUresult::CUDA_SUCCESS);
    }
    owner.synchronize().unwrap();
    println!("s9 item1 borrowed: owner's capture status after the drop {status:?}; y[0] as the owner read it {}", host[0]);
    assert_eq!(status, sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE, "the owner's stream joined ferrocuda's capture");
    let wrong = host.iter().filter(|&&v| v != 2.0).count();
    assert_eq!(wrong, 0, "the owner read {wrong} of {n} elements before ferrocuda's saxpy wrote them");
}

/// Issue 29, host item 1, the other half: a stream joined to the capture (a fork through an
/// event) does captured work from then on, as a capturing stream does: a launch on it that
/// reads a buffer last written outside the capture is recorded without an ordering wait (a
/// capture may not wait on an event recorded outside it: the driver's
/// `CUDA_ERROR_STREAM_CAPTURE_ISOLATION`, which the same test met before the fix), the
/// capture ends cleanly, and the joined stream is an ordinary one again afterwards.
#[test]
fn s9_item1_a_stream_joined_to_the_capture_does_captured_work() {
    let Some(context) = own_context("s9_item1_a_stream_joined_to_the_capture_does_captured_work") else { return };
    load_kernels(&context);
    let n = 4096;
    let (a, b) = (Stream::non_blocking(&context).unwrap(), Stream::non_blocking(&context).unwrap());
    let x = DeviceBuffer::from_slice(&context, &vec![1.0f32; n]).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&context, n).unwrap();
    let mut z = DeviceBuffer::<f32>::zeroed(&context, n).unwrap();
    saxpy::launch(&a, for_n(n), 2.0, &x, &mut y).unwrap();
    a.synchronize().unwrap();
    let graph = a
        .capture(|a| {
            saxpy::launch(a, for_n(n), 1.0, &x, &mut y)?;
            let fork = Event::without_timing(&context)?;
            fork.record(a)?;
            b.wait_event(&fork)?;
            saxpy::launch(&b, for_n(n), 1.0, &y, &mut z)?;
            let join = Event::without_timing(&context)?;
            join.record(&b)?;
            a.wait_event(&join)
        })
        .expect("a fork/join capture works");
    let nodes = graph.node_count().unwrap();
    println!("s9 item1 fork/join: {nodes} nodes; b capturing after: {}", b.is_capturing().unwrap());
    assert!(nodes >= 2, "{nodes}");
    assert!(!b.is_capturing().unwrap());
    // Nothing captured ran: y is still 2.0, z still 0.0; b works as an ordinary stream again.
    assert!(y.to_vec().unwrap().iter().all(|&v| v == 2.0));
    assert!(z.to_vec().unwrap().iter().all(|&v| v == 0.0));
    saxpy::launch(&b, for_n(n), 1.0, &y, &mut z).unwrap();
    b.synchronize().unwrap();
    assert!(z.to_vec().unwrap().iter().all(|&v| v == 2.0), "b's launch after the capture ran");
}

/// Issue 29, host item 3 (P5's remainder): while a capture runs that never ends (its stream
/// leaked with `mem::forget`), graphs, events never recorded into a capture and pinned buffers
/// copied on other streams used to wait for its end, that is, leak. Now they are released at
/// once (`deferred_releases() == 0`), and releasing them does not disturb a capture that does
/// run (it still ends cleanly).
#[test]
fn s9_item3_graphs_events_and_pinned_buffers_are_released_during_an_unrelated_capture() {
    let Some(context) = own_context("s9_item3_graphs_events_and_pinned_buffers_are_released_during_an_unrelated_capture") else { return };
    load_kernels(&context);
    let other = Stream::non_blocking(&context).unwrap();
    let mut y = DeviceBuffer::<u32>::zeroed(&context, 64).unwrap();
    let graph = other.capture(|s| mark_blocks::launch(s, (4u32, 32u32), false, &mut y)).unwrap();
    let running = Stream::non_blocking(&context).unwrap();
    running.begin_capture().unwrap();
    {
        let leaked = Stream::non_blocking(&context).unwrap();
        leaked.begin_capture().unwrap();
        std::mem::forget(leaked);
    }
    let event = Event::without_timing(&context).unwrap();
    event.record(&other).unwrap();
    other.wait_event(&event).unwrap();
    let mut pinned = ferrocuda::PinnedBuffer::<u32>::zeroed(&context, 1 << 20).unwrap();
    let device = DeviceBuffer::<u32>::from_slice(&context, &vec![3u32; 1 << 20]).unwrap();
    pinned.copy_from_device_async(&device, &other).unwrap();
    drop((graph, event, pinned));
    let deferred = context.deferred_releases();
    mark_blocks::launch(&running, (4u32, 32u32), true, &mut y).unwrap();
    let ended = running.end_capture();
    println!("s9 item3: deferred releases {deferred}; the running capture: {:?}", ended.as_ref().map(|g| g.node_count().unwrap()).map_err(ToString::to_string));
    assert_eq!(deferred, 0, "a graph, an event or a pinned buffer waited for a capture that does not involve it");
    assert_eq!(ended.expect("the releases did not invalidate the running capture").node_count().unwrap(), 1);
    other.synchronize().unwrap();
}

/// A launch configuration covering `n` elements (a multiple of 256) with 256-thread blocks.
fn for_n(n: usize) -> (u32, u32) {
    ((n / 256) as u32, 256)
}

/// Issue 29, host item 5: the stack size is a context-wide limit whose change waits for all
/// the context's work (every library's): refused while a capture of the context runs (the
/// driver refuses a context-wide wait then) with the capture named, allowed once it ended;
/// lowering it stays refused in a shared context (the primary one).
#[test]
fn s9_item5_the_stack_limit_is_not_set_during_a_capture() {
    let Some(context) = own_context("s9_item5_the_stack_limit_is_not_set_during_a_capture") else { return };
    let stream = Stream::non_blocking(&context).unwrap();
    let before = context.limit(Limit::StackSize).unwrap();
    stream.begin_capture().unwrap();
    let refused = context.set_limit(Limit::StackSize, before + 1024);
    let graph = stream.end_capture();
    println!("s9 item5: {:?}", refused.as_ref().map_err(ToString::to_string));
    assert!(matches!(refused, Err(Error::CaptureInProgress { captures: 1, .. })), "{refused:?}");
    graph.expect("the refused call did not touch the capture");
    context.set_limit(Limit::StackSize, before + 1024).unwrap();
    assert!(context.limit(Limit::StackSize).unwrap() >= before + 1024);
}

/// F5 (audit 2026-11-27c): a ferrocuda kernel writes a lent cudarc slice behind a long spin,
/// `synchronize_timeout` reports it running, and cudarc begins a capture of the home stream
/// inside the scope. The home stream can then queue no wait and the host wait is refused
/// (the timeout), so nothing orders cudarc's later free of the slice after the kernel: the
/// scope used to return 3 ms after the timeout and hand the slice back (a use-after-free from
/// safe code). Now the process aborts with a message naming why; the child must not print
/// `SCOPE RETURNED`.
#[test]
fn f5_a_cudarc_scope_never_hands_a_slice_back_unordered_after_a_timeout() {
    const NAME: &str = "f5_a_cudarc_scope_never_hands_a_slice_back_unordered_after_a_timeout";
    if std::env::var(CHILD).is_ok_and(|t| t == NAME) {
        let cuda = CudaContext::new(0).expect("cudarc opens device 0");
        let home = cuda.new_stream().unwrap();
        let ctx = borrowed::cudarc::context(&cuda).unwrap();
        let ours = Stream::non_blocking(&ctx).unwrap();
        let fours = DeviceBuffer::from_slice(&ctx, &vec![4.0f32; 1 << 20]).unwrap();
        let mut y = home.alloc_zeros::<f32>(1 << 20).unwrap();
        home.synchronize().unwrap();
        load_kernels(&ctx);
        borrowed::cudarc::scope(|scope| {
            let mut ys = scope.slice_mut(&mut y, &home).unwrap();
            spin_for::launch(&ours, (1u32, 1u32), 5_000_000_000).unwrap(); // 5 s
            saxpy::launch(&ours, LaunchConfig::for_elements(1 << 20, 256), 0.5, &fours, &mut ys).unwrap(); // writes y after it
            let timeout = ours.synchronize_timeout(Duration::from_millis(100));
            println!("TIMEOUT: {timeout:?}");
            home.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED).unwrap();
            println!("CAPTURE BEGUN");
        });
        println!("SCOPE RETURNED with the kernel unordered");
        return;
    }
    if common::gpu_or_skip(NAME).is_none() {
        return;
    }
    let output = Command::new(std::env::current_exe().unwrap()).args([NAME, "--exact", "--nocapture", "--test-threads=1"]).env(CHILD, NAME).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    let _ = writeln!(std::io::stdout(), "child output:\n{text}");
    assert!(text.contains("TIMEOUT: Err(Timeout") && text.contains("CAPTURE BEGUN"), "the child did not reach the case:\n{text}");
    assert!(!text.contains("SCOPE RETURNED"), "the scope handed the slice back to cudarc while the kernel may write it:\n{text}");
    assert!(!output.status.success(), "{text}");
    assert!(text.contains("cannot be ordered after ferrocuda's") && text.contains("synchronize_timeout"), "the abort did not say why:\n{text}");
}

/// F6 (audit 2026-11-27c): a `PinnedBuffer` whose copy still runs after
/// `synchronize_timeout` reported it is dropped: the drop leaks the memory (it must not free
/// it under the copy) and used to say nothing; now each such leak is counted
/// (`leaked_releases`) and the first of the process is said on standard error.
#[test]
fn f6_a_pinned_buffer_dropped_after_a_timeout_leaks_and_says_so() {
    let Some(context) = own_context("f6_a_pinned_buffer_dropped_after_a_timeout_leaks_and_says_so") else { return };
    load_kernels(&context);
    let stream = Stream::non_blocking(&context).unwrap();
    let source = DeviceBuffer::from_slice(&context, &[5u32; 1024]).unwrap();
    let mut pinned = ferrocuda::PinnedBuffer::<u32>::zeroed(&context, 1024).unwrap();
    spin_for::launch(&stream, (1u32, 1u32), 3_000_000_000).unwrap(); // 3 s
    pinned.copy_from_device_async(&source, &stream).unwrap(); // queued behind the spin
    let timeout = stream.synchronize_timeout(Duration::from_millis(100)).unwrap_err();
    assert!(matches!(timeout, Error::Timeout { .. }), "{timeout:?}");
    let before = ferrocuda::leaked_releases();
    drop(pinned);
    let after = ferrocuda::leaked_releases();
    println!("f6: leaked_releases {before} -> {after}");
    assert!(after > before, "the pinned buffer's skipped release was not counted");
    context.synchronize().unwrap(); // waits for good (clears the timeout)
}

/// Runs this binary's test `name` as a child with `FERROCUDA_SEAMS_CHILD=name`, killed after
/// `deadline`: its exit status (`None`: killed at the deadline) and every line it printed.
fn run_child(name: &str, deadline: Duration) -> (Option<std::process::ExitStatus>, String) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, name)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut text);
            }
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as Box<dyn std::io::Read + Send>));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as Box<dyn std::io::Read + Send>));
    let end = Instant::now() + deadline;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (stdout, stderr) = (stdout.join().unwrap_or_default(), stderr.join().unwrap_or_default());
    let lines = |tag: &str, text: &str| text.lines().map(|l| format!("  child {tag}| {l}\n")).collect::<String>();
    let text = format!("{}{}", lines("stdout", &stdout), lines("stderr", &stderr));
    let _ = writeln!(std::io::stdout(), "child output:\n{text}");
    (status, text)
}

/// E2 (audit 2026-11-27e): after `synchronize_timeout` reported a kernel that never ends, the
/// first use of another kernel crate (its embedded module loads into the context then) hung
/// the calling thread. Now every call that may wait inside the driver for all of the context's
/// work returns `Error::RefusedAfterTimeout`, naming the earlier timeout, at once: the first
/// launch of another crate's kernel, that crate's module load alone (`embedded_image`), an
/// explicit module load, and a cuBLAS handle. Child process, bounded by a deadline.
#[test]
fn e2_the_first_use_of_another_kernel_crate_after_a_timeout_returns() {
    const NAME: &str = "e2_the_first_use_of_another_kernel_crate_after_a_timeout_returns";
    if std::env::var(CHILD).is_ok_and(|t| t == NAME) {
        let step = |what: &str| eprintln!("e2 child: {what}");
        let context = Context::primary(0).unwrap();
        let spinning = Stream::non_blocking(&context).unwrap();
        let other = Stream::non_blocking(&context).unwrap();
        let x = DeviceBuffer::from_slice(&context, &[1.0f32; 1024]).unwrap();
        let mut y = DeviceBuffer::<f32>::zeroed(&context, 1024).unwrap();
        spin_for::launch(&spinning, (1u32, 1u32), u64::MAX).unwrap(); // test_kernels: loaded now; never ends
        let error = spinning.synchronize_timeout(Duration::from_millis(300)).unwrap_err();
        assert!(matches!(error, Error::Timeout { .. }), "{error:?}");
        step("timeout reported");
        // gpu_kernels' first use in this process: its module would load now.
        let start = Instant::now();
        let launch = saxpy::launch(&other, LaunchConfig::for_elements(1024, 256), 2.0, &x, &mut y).unwrap_err();
        println!("FIRST LAUNCH of another crate after {:?}: {launch}", start.elapsed());
        assert!(matches!(launch, Error::RefusedAfterTimeout { .. }), "{launch:?}");
        assert!(launch.to_string().contains("synchronize_timeout") && launch.to_string().contains("loading the kernels of"), "{launch}");
        let load = context.embedded_image(&gpu_kernels::KERNELS).unwrap_err();
        println!("MODULE LOAD: {load}");
        assert!(matches!(load, Error::RefusedAfterTimeout { .. }), "{load:?}");
        // SAFETY: refused before the driver sees the text (the check under test).
        let explicit = unsafe { ferrocuda::Module::load_ptx(&context, "e2", ".version 8.0\n.target sm_90\n.address_size 64\n", &Default::default()) };
        let explicit = explicit.map(drop).unwrap_err();
        println!("EXPLICIT LOAD: {explicit}");
        assert!(matches!(explicit, Error::RefusedAfterTimeout { .. }), "{explicit:?}");
        if ferrocuda::cublas::Cublas::is_available() {
            let cublas = ferrocuda::cublas::Cublas::new(&other).map(drop).unwrap_err();
            println!("CUBLAS: {cublas}");
            assert!(matches!(cublas, Error::RefusedAfterTimeout { .. }), "{cublas:?}");
        }
        println!("E2 ALL RETURNED after {:?}", start.elapsed());
        assert!(start.elapsed() < Duration::from_secs(20), "each refusal waits at most its 2 s grace");
        drop((x, y, spinning, other));
        drop(context);
        return;
    }
    if common::gpu_or_skip(NAME).is_none() {
        return;
    }
    let (status, text) = run_child(NAME, Duration::from_secs(60));
    let status = status.unwrap_or_else(|| {
        let last = text.lines().rev().find(|l| l.contains("e2 child: ")).unwrap_or("(no step printed)");
        panic!("the child still ran 60 s after its start (killed); its last step: {last}\n{text}")
    });
    assert!(status.success(), "the child failed:\n{text}");
    assert!(text.contains("FIRST LAUNCH of another crate") && text.contains("E2 ALL RETURNED"), "{text}");
}

/// F12-2 (audit 2026-11-27f): after `synchronize_timeout` reported a never-ending kernel,
/// releases whose driver or library call waits for the whole device hung the thread for ever
/// on an H200: dropping a cuBLAS (`cublasDestroy`) or cuBLASLt handle, a cuFFT plan, or a
/// `PinnedBuffer` that no stream used (`cuMemFreeHost`), and allocating a new `PinnedBuffer`
/// (`cuMemHostAlloc`). Now each drop leaks (counted in `leaked_releases`) and returns, and the
/// allocation is `Error::RefusedAfterTimeout` after its 2 s grace. Child process, bounded by a
/// deadline.
#[test]
fn f12_2_drops_and_pinned_allocations_after_a_timeout_return() {
    const NAME: &str = "f12_2_drops_and_pinned_allocations_after_a_timeout_return";
    if std::env::var(CHILD).is_ok_and(|t| t == NAME) {
        let step = |what: &str| eprintln!("f12_2 child: {what}");
        let context = Context::primary(0).unwrap();
        let spinning = Stream::non_blocking(&context).unwrap();
        let other = Stream::non_blocking(&context).unwrap();
        let cublas = ferrocuda::cublas::Cublas::is_available().then(|| ferrocuda::cublas::Cublas::new(&other).unwrap());
        let lt = ferrocuda::cublas::CublasLt::is_available().then(|| ferrocuda::cublas::CublasLt::new(&other).unwrap());
        let plan = ferrocuda::cufft::Plan::<ferrocuda::cufft::C2C>::new(&context, &[256], 4).ok();
        let pinned = ferrocuda::PinnedBuffer::<f32>::zeroed(&context, 1 << 20).unwrap();
        spin_for::launch(&spinning, (1u32, 1u32), u64::MAX).unwrap(); // never ends
        let error = spinning.synchronize_timeout(Duration::from_millis(300)).unwrap_err();
        assert!(matches!(error, Error::Timeout { .. }), "{error:?}");
        step("timeout reported");
        let (start, leaked) = (Instant::now(), ferrocuda::leaked_releases());
        step("drop cuBLAS");
        drop(cublas);
        step("drop cuBLASLt");
        drop(lt);
        step("drop cuFFT plan");
        drop(plan);
        step("drop PinnedBuffer");
        drop(pinned);
        println!("DROPS RETURNED after {:?}; leaked {}", start.elapsed(), ferrocuda::leaked_releases() - leaked);
        assert!(ferrocuda::leaked_releases() > leaked, "the skipped releases are counted");
        step("new PinnedBuffer");
        let made = ferrocuda::PinnedBuffer::<f32>::zeroed(&context, 1 << 20).map(drop).unwrap_err();
        println!("NEW PINNED: {made}");
        assert!(matches!(made, Error::RefusedAfterTimeout { .. }), "{made:?}");
        println!("F12_2 ALL RETURNED after {:?}", start.elapsed());
        drop((spinning, other));
        drop(context);
        // The process's exit would wait for the kernel (F12-5): end here.
        std::process::exit(0);
    }
    if common::gpu_or_skip(NAME).is_none() {
        return;
    }
    let (status, text) = run_child(NAME, Duration::from_secs(60));
    let Some(status) = status else {
        // The exit itself may wait for the spinning kernel (F12-5): what matters is that every
        // step returned before the deadline.
        assert!(text.contains("F12_2 ALL RETURNED"), "the child still ran 60 s after its start (killed) before its steps returned:\n{text}");
        return;
    };
    assert!(status.success(), "the child failed:\n{text}");
    assert!(text.contains("DROPS RETURNED") && text.contains("F12_2 ALL RETURNED"), "{text}");
}

/// E5 (audit 2026-11-27e): an `Event` recorded into a running capture, then queried
/// (`is_complete`) or waited for (`synchronize`) inside the capture: the driver's query
/// invalidated the capture (whose error then named other causes), and after it every use of the
/// event was a raw `CUDA_ERROR_INVALID_VALUE`. Now each use is refused by name before the driver
/// sees it (`Error::EventRecordedInCapture`), the capture survives and runs, a stream of the
/// capture may still wait for the event (a fork), and re-recording the event outside the
/// capture makes it usable again.
#[test]
fn e5_an_event_recorded_in_a_capture_is_refused_by_name_and_the_capture_survives() {
    let Some(context) = own_context("e5_an_event_recorded_in_a_capture_is_refused_by_name_and_the_capture_survives") else { return };
    load_kernels(&context);
    let stream = Stream::non_blocking(&context).unwrap();
    let other = Stream::non_blocking(&context).unwrap();
    let x = DeviceBuffer::from_slice(&context, &[1.0f32; 1024]).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&context, 1024).unwrap();
    let (start, event) = (Event::new(&context).unwrap(), Event::new(&context).unwrap());
    start.record(&stream).unwrap();
    stream.synchronize().unwrap();
    let refused = |result: Result<(), Error>, what: &str| {
        let error = result.unwrap_err();
        assert!(matches!(error, Error::EventRecordedInCapture { .. }), "{what}: {error:?}");
        assert!(error.to_string().contains("recorded into a stream capture") && error.to_string().contains(what), "{error}");
    };
    let graph = stream
        .capture(|s| {
            saxpy::launch(s, LaunchConfig::for_elements(1024, 256), 2.0, &x, &mut y)?;
            event.record(s)?;
            refused(event.is_complete().map(drop), "Event::is_complete");
            refused(event.synchronize(), "Event::synchronize");
            refused(start.elapsed_ms(&event).map(drop), "Event::elapsed_ms");
            // A fork: `other` joins the capture by waiting for the event, then joins back.
            other.wait_event(&event)?;
            let back = Event::without_timing(&context)?;
            back.record(&other)?;
            s.wait_event(&back)
        })
        .expect("the capture survives the refused queries");
    let exec = graph.instantiate().unwrap();
    // SAFETY: `x` and `y`, the only memory the graph touches, outlive the replay (synchronised below).
    unsafe { exec.launch(&stream) }.unwrap();
    stream.synchronize().unwrap();
    assert_eq!(y.to_vec().unwrap(), vec![2.0f32; 1024]);
    // After the capture: a wait, a query and a timing are refused by name, not raw errors.
    refused(other.wait_event(&event), "Stream::wait_event");
    refused(event.is_complete().map(drop), "Event::is_complete");
    refused(start.elapsed_ms(&event).map(drop), "Event::elapsed_ms");
    // Recorded outside the capture, it is a point in a stream again.
    event.record(&stream).unwrap();
    event.synchronize().unwrap();
    assert!(event.is_complete().unwrap());
    assert!(start.elapsed_ms(&event).unwrap() >= 0.0);
    other.wait_event(&event).unwrap();
    other.synchronize().unwrap();
}
