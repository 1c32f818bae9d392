//! Contexts on the GPU: created contexts beside the primary one, push/pop, flags, limits, the
//! seeds' plug-in scenario, and starting over after a kernel fault.
//!
//! What resets or poisons a context runs in a child process (this test binary re-run with
//! `FERROCUDA_CONTEXT_CHILD=<test name>`), so the other tests of the binary are unaffected.

mod common;

use std::process::Command;

use ferrocuda::{Context, DeviceBuffer, Error, LaunchConfig, Limit, SchedulePolicy, Stream, sys};
use gpu_kernels::saxpy;
use test_kernels::square_checked;

const CHILD: &str = "FERROCUDA_CONTEXT_CHILD";

/// Runs `saxpy` with `a = 2` on fresh data in `context` and checks every element.
fn saxpy_works_in(context: &Context) -> ferrocuda::Result<()> {
    let n = 100_003;
    let x_host: Vec<f32> = (0..n).map(|i| (i % 101) as f32).collect();
    let y_host: Vec<f32> = (0..n).map(|i| (i % 7) as f32 - 3.0).collect();
    let stream = Stream::new(context)?;
    let x = DeviceBuffer::from_slice(context, &x_host)?;
    let mut y = DeviceBuffer::from_slice(context, &y_host)?;
    saxpy::launch(&stream, LaunchConfig::for_elements(n, 256), 2.0, &x, &mut y)?;
    stream.synchronize()?;
    let got = y.to_vec()?;
    for i in 0..n {
        assert_eq!(got[i], 2.0f32.mul_add(x_host[i], y_host[i]), "element {i}");
    }
    Ok(())
}

fn current_raw() -> sys::CUcontext {
    let mut raw = std::ptr::null_mut();
    // SAFETY: writes one handle.
    assert_eq!(unsafe { sys::cuCtxGetCurrent(&mut raw) }, sys::CUresult::CUDA_SUCCESS);
    raw
}

/// Re-runs this binary for one test in a child process and returns its output.
fn run_child(test: &str) -> String {
    let output = Command::new(std::env::current_exe().unwrap()).args([test, "--exact", "--nocapture", "--test-threads=1"]).env(CHILD, test).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    println!("child output:\n{text}");
    assert!(output.status.success(), "the child failed:\n{text}");
    text
}

fn is_child(test: &str) -> bool {
    std::env::var(CHILD).is_ok_and(|t| t == test)
}

#[test]
fn created_context_beside_the_primary_one_with_push_pop_flags_and_limits() {
    let Some(primary) = common::gpu_or_skip("created_context_beside_the_primary_one_with_push_pop_flags_and_limits") else { return };
    assert!(primary.is_primary());
    let again = Context::primary(0).unwrap();
    assert_eq!(again.raw(), primary.raw(), "one primary context per device");

    let created = Context::create(0, SchedulePolicy::BlockingSync).unwrap();
    assert!(!created.is_primary());
    assert_ne!(created.raw(), primary.raw());
    assert_eq!(created.schedule_policy().unwrap(), SchedulePolicy::BlockingSync);
    assert_eq!(current_raw(), primary.raw(), "create leaves the current context as it was (G20R-4)");

    primary.bind_to_thread().unwrap();
    assert_eq!(current_raw(), primary.raw());
    {
        let _outer = created.push_current().unwrap();
        assert_eq!(current_raw(), created.raw());
        assert_eq!(Context::current().unwrap().raw(), created.raw());
        {
            let _inner = primary.push_current().unwrap();
            assert_eq!(current_raw(), primary.raw());
        }
        assert_eq!(current_raw(), created.raw(), "the inner guard restored the outer context");
    }
    assert_eq!(current_raw(), primary.raw(), "the guard restored the primary context");
    assert_eq!(Context::current().unwrap().raw(), primary.raw());

    for (limit, bytes) in [(Limit::StackSize, 8192), (Limit::PrintfFifoSize, 4 << 20), (Limit::MallocHeapSize, 64 << 20)] {
        let before = created.limit(limit).unwrap();
        created.set_limit(limit, bytes).unwrap();
        let after = created.limit(limit).unwrap();
        eprintln!("{limit:?}: {before} -> {after} bytes (asked {bytes})");
        assert!(after >= bytes, "{limit:?} is {after} after asking for {bytes}");
    }

    // Both contexts run kernels (the embedded module is loaded into each on first launch),
    // with buffers alive in both at the same time.
    let keep = DeviceBuffer::from_slice(&primary, &[7u32; 16]).unwrap();
    saxpy_works_in(&created).unwrap();
    saxpy_works_in(&primary).unwrap();
    assert_eq!(keep.to_vec().unwrap(), vec![7u32; 16]);
    let (least, greatest) = created.stream_priority_range().unwrap();
    eprintln!("stream priorities: {least} (lowest) .. {greatest} (highest)");
    assert!(greatest <= least);
}

/// The seeds' plug-in scenario: two components in one process, each opening CUDA on its own
/// through this API. One tears its CUDA state down; the other must keep working.
#[test]
fn one_plugin_tearing_down_leaves_the_other_working() {
    let Some(_probe) = common::gpu_or_skip("one_plugin_tearing_down_leaves_the_other_working") else { return };
    drop(_probe);

    struct Plugin {
        context: Context,
        stream: Stream,
        data: DeviceBuffer<f32>,
    }
    let open = |value: f32| {
        let context = Context::primary(0).unwrap();
        let stream = Stream::new(&context).unwrap();
        let data = DeviceBuffer::from_slice(&context, &vec![value; 4096]).unwrap();
        Plugin { context, stream, data }
    };
    let first = open(1.0);
    let mut second = open(5.0);

    // The first plug-in is done: it drops everything it had. With the runtime API it would
    // call cudaDeviceReset here and destroy the primary context under the second one; here
    // dropping only releases its reference.
    drop(first);

    let ones = DeviceBuffer::from_slice(&second.context, &vec![1.0f32; 4096]).unwrap();
    saxpy::launch(&second.stream, LaunchConfig::for_elements(4096, 128), 3.0, &ones, &mut second.data).unwrap();
    second.stream.synchronize().unwrap();
    assert_eq!(second.data.to_vec().unwrap(), vec![8.0f32; 4096], "the second plug-in's buffer and launch survived");
    saxpy_works_in(&second.context).unwrap();
}

/// Why a created context isolates: a plug-in that resets the primary context (what
/// `cudaDeviceReset` does) destroys every buffer in it, but nothing in a created context.
#[test]
fn a_created_context_survives_a_primary_context_reset() {
    const NAME: &str = "a_created_context_survives_a_primary_context_reset";
    if is_child(NAME) {
        let isolated = Context::create(0, SchedulePolicy::Auto).unwrap();
        let kept = DeviceBuffer::from_slice(&isolated, &[42u32; 1000]).unwrap();
        let shared = Context::primary(0).unwrap();
        let in_primary = DeviceBuffer::from_slice(&shared, &[9u32; 1000]).unwrap();

        // A careless plug-in resets the primary context behind everyone's back.
        let device = shared.device().raw();
        // SAFETY: deliberately what a runtime-API plug-in's cudaDeviceReset does.
        assert_eq!(unsafe { sys::cuDevicePrimaryCtxReset_v2(device) }, sys::CUresult::CUDA_SUCCESS);

        match in_primary.to_vec() {
            Ok(values) if values == vec![9u32; 1000] => println!("PRIMARY BUFFER: unexpectedly intact"),
            Ok(_) => println!("PRIMARY BUFFER: contents lost"),
            Err(error) => println!("PRIMARY BUFFER: {error}"),
        }
        assert_eq!(kept.to_vec().unwrap(), vec![42u32; 1000]);
        saxpy_works_in(&isolated).unwrap();
        println!("CREATED CONTEXT: intact and working");
        // The primary handles are stale now; leak them instead of releasing a reset context.
        std::mem::forget(in_primary);
        std::mem::forget(shared);
        return;
    }
    if common::gpu_or_skip(NAME).is_none() {
        return;
    }
    let text = run_child(NAME);
    assert!(text.contains("CREATED CONTEXT: intact and working"), "{text}");
    assert!(text.contains("PRIMARY BUFFER: ") && !text.contains("unexpectedly intact"), "the reset did not reach the primary context:\n{text}");
}

/// After a kernel fault every call fails with a clear message. Starting over in the faulted
/// process is tried every way (`Context::create` beside the faulted context, bound and
/// unbound; `recover()` of the primary context once every handle is dropped): each either
/// works or says plainly that only a new process can use the GPU (what the CUDA 13.0 driver
/// does: it poisons the whole process). Then a new process (this test's parent, after the
/// faulting child) gets a working context and a correct launch.
#[test]
fn after_a_kernel_fault_starting_over_works_or_says_why_not() {
    const NAME: &str = "after_a_kernel_fault_starting_over_works_or_says_why_not";
    let report = |step: &str, outcome: ferrocuda::Result<()>| match outcome {
        Ok(()) => println!("{step}: works"),
        Err(error) => println!("{step}: {error}"),
    };
    if is_child(NAME) {
        let context = Context::primary(0).unwrap();
        let stream = Stream::new(&context).unwrap();
        let x = DeviceBuffer::from_slice(&context, &(0..64u32).collect::<Vec<_>>()).unwrap();
        let mut out = DeviceBuffer::<u32>::zeroed(&context, 40).unwrap();
        square_checked::launch(&stream, LaunchConfig::from((2u32, 32u32)), &x, &mut out).unwrap();
        let fault = stream.synchronize().unwrap_err();
        println!("FAULT: {fault}");
        let after = DeviceBuffer::<f32>::zeroed(&context, 16).unwrap_err();
        println!("USE AFTER FAULT: {after}");
        // The fault was a device panic, so the sticky error carries its record.
        assert!(matches!(&after, Error::KernelPanic { source, .. } if source.is_sticky()), "{after:?}");

        // P6: the primary context may be other libraries' too: `recover` never resets it.
        let shared = context.clone().recover().unwrap_err();
        println!("RECOVER OF THE PRIMARY CONTEXT: {shared}");
        assert!(matches!(shared, Error::SharedContextNotReset { .. }), "{shared:?}");
        // SAFETY: nothing but ferrocuda uses the primary context in this child process.
        let refused = unsafe { context.clone().reset_primary() }.unwrap_err();
        println!("RECOVER WITH HANDLES ALIVE: {refused}");
        assert!(matches!(refused, Error::ContextStillInUse { .. }), "{refused:?}");

        report("CREATED CONTEXT AFTER FAULT", Context::create(0, SchedulePolicy::Auto).and_then(|c| saxpy_works_in(&c)));
        // SAFETY: unbinds the faulted context from this thread (a null context is allowed).
        unsafe { sys::cuCtxSetCurrent(std::ptr::null_mut()) };
        report("CREATED CONTEXT AFTER FAULT, UNBOUND", Context::create(0, SchedulePolicy::Auto).and_then(|c| saxpy_works_in(&c)));
        drop((x, out, stream));
        // SAFETY: as above.
        report("RECOVERED PRIMARY", unsafe { context.reset_primary() }.and_then(|c| saxpy_works_in(&c)));
        report("CREATED CONTEXT AFTER RECOVER", Context::create(0, SchedulePolicy::Auto).and_then(|c| saxpy_works_in(&c)));
        return;
    }
    if common::gpu_or_skip(NAME).is_none() {
        return;
    }
    let text = run_child(NAME);
    assert!(text.contains("USE AFTER FAULT: ") && text.contains("can no longer be used"), "{text}");
    assert!(text.contains("Context::recover()"), "{text}");
    assert!(text.contains("RECOVER WITH HANDLES ALIVE: cannot reset the primary context"), "{text}");
    let Some(context) = common::gpu_or_skip(NAME) else { return };
    saxpy_works_in(&context).unwrap();
    println!("NEW PROCESS AFTER THE FAULT: works");
    for step in ["CREATED CONTEXT AFTER FAULT", "CREATED CONTEXT AFTER FAULT, UNBOUND", "RECOVERED PRIMARY", "CREATED CONTEXT AFTER RECOVER"] {
        let line = text.lines().find(|l| l.starts_with(&format!("{step}: "))).unwrap_or_else(|| panic!("no {step} line in:\n{text}"));
        assert!(line.ends_with(": works") || line.contains("only a new process can use the GPU"), "starting over neither worked nor said why: {line}");
    }
}

/// Q10: buffers dropped after a kernel fault name the fault (once), not a capture by another
/// library (a failed capture query used to count as a capture, and each drop blamed one).
#[test]
fn q10_buffers_dropped_after_a_fault_name_the_fault_not_a_capture() {
    const NAME: &str = "q10_buffers_dropped_after_a_fault_name_the_fault_not_a_capture";
    if is_child(NAME) {
        let context = Context::primary(0).unwrap();
        let stream = Stream::new(&context).unwrap();
        let x = DeviceBuffer::from_slice(&context, &(0..64u32).collect::<Vec<_>>()).unwrap();
        let mut out = DeviceBuffer::<u32>::zeroed(&context, 40).unwrap();
        let more: Vec<_> = (0..3).map(|_| DeviceBuffer::<u32>::zeroed_async(&stream, 256).unwrap()).collect();
        square_checked::launch(&stream, LaunchConfig::from((2u32, 32u32)), &x, &mut out).unwrap();
        println!("FAULT: {}", stream.synchronize().unwrap_err());
        drop((x, out, more));
        println!("DROPPED");
        return;
    }
    if common::gpu_or_skip(NAME).is_none() {
        return;
    }
    let text = run_child(NAME);
    assert!(text.contains("FAULT: ") && text.contains("DROPPED"), "{text}");
    assert!(!text.contains("outside ferrocuda's knowledge"), "a drop after the fault blamed a capture:\n{text}");
    assert_eq!(text.matches("dropped after its context failed").count(), 1, "the fault is named once:\n{text}");
}

#[test]
fn an_impossible_allocation_says_how_much_was_asked_and_free() {
    let Some(context) = common::gpu_or_skip("an_impossible_allocation_says_how_much_was_asked_and_free") else { return };
    let (_, total) = context.memory_info().unwrap();
    let error = DeviceBuffer::<u8>::zeroed(&context, total * 4).unwrap_err();
    let message = error.to_string();
    eprintln!("OUT OF MEMORY: {message}");
    assert!(matches!(error, Error::OutOfMemory { requested, .. } if requested == total * 4), "{error:?}");
    assert!(message.contains("out of device memory") && message.contains("free of"), "{message}");
    // The context is still usable: out-of-memory is not sticky.
    saxpy_works_in(&context).unwrap();
}

#[test]
fn async_work_on_a_stream_of_another_context_is_refused() {
    let Some(primary) = common::gpu_or_skip("async_work_on_a_stream_of_another_context_is_refused") else { return };
    let other = Context::create(0, SchedulePolicy::Auto).unwrap();
    let foreign = Stream::new(&other).unwrap();
    let mut buffer = DeviceBuffer::<u32>::zeroed(&primary, 1024).unwrap();
    let source = DeviceBuffer::<u32>::zeroed(&primary, 1024).unwrap();
    let mut pinned = ferrocuda::PinnedBuffer::<u32>::zeroed(&primary, 1024).unwrap();
    let refusals = [
        buffer.fill_async(7, &foreign).unwrap_err(),
        buffer.zero_async(&foreign).unwrap_err(),
        buffer.copy_from_device_async(&source, &foreign).unwrap_err(),
        pinned.copy_to_device_async(&mut buffer, &foreign).unwrap_err(),
        pinned.copy_from_device_async(&source, &foreign).unwrap_err(),
    ];
    for error in &refusals {
        assert!(matches!(error, Error::StreamInOtherContext { .. }), "{error:?}");
    }
    println!("{}", refusals[0]);
    // The same calls on a stream of the buffer's own context work.
    let own = Stream::new(&primary).unwrap();
    buffer.fill_async(7, &own).unwrap();
    own.synchronize().unwrap();
    assert!(buffer.to_vec().unwrap().iter().all(|&v| v == 7));
}

/// F4 (audit 2026-11-27c): two `CurrentGuard`s dropped out of order. Dropping the outer guard
/// first used to pop the inner guard's context (the inner guard, still alive, was no longer
/// current), and after both drops the driver's current context and `Context::current()`
/// disagreed. Now the outer guard's entry is taken from under the inner one: the inner
/// guard's context stays current, and the last drop restores what was current before both.
#[test]
fn f4_current_guards_dropped_out_of_order_keep_the_live_guards_context_current() {
    let Some(primary) = common::gpu_or_skip("f4_current_guards_dropped_out_of_order_keep_the_live_guards_context_current") else { return };
    let created = Context::create(0, SchedulePolicy::Auto).unwrap();
    primary.bind_to_thread().unwrap();
    let outer = primary.push_current().unwrap();
    let inner = created.push_current().unwrap();
    assert_eq!(current_raw(), created.raw());
    drop(outer);
    assert_eq!(current_raw(), created.raw(), "dropping the outer guard first popped the inner guard's context");
    assert_eq!(Context::current().unwrap().raw(), created.raw());
    drop(inner);
    assert_eq!(current_raw(), primary.raw(), "the last drop restores the context current before both guards");
    assert_eq!(Context::current().unwrap().raw(), primary.raw(), "Context::current() disagrees with the driver");
}
