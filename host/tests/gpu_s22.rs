//! Session 22: every ferrocuda call leaves the thread's current context as it found it, whatever
//! the kind of context. Session 20 (G20R-4) and 21 made created and borrowed contexts pushed and
//! popped; a *primary* context was still made current with `cuCtxSetCurrent` and left current
//! by every internal bind (`Context::bind`). On a thread whose current context was another one
//! (another device's primary context, which is PyTorch's current device; a context of another
//! library) any call on the primary context replaced it, and session 21's Python package had to
//! push the context around its own calls (`Parked.context`, d5dd8d0) to hide it. Only
//! `Context::primary` and `Context::bind_to_thread` leave a context current: their purpose.
//! Host API only (no kernel crate). They skip without a GPU and fail under `REQUIRE_GPU=1`.
//!
//! Run: `REQUIRE_GPU=1 cargo test --release -p ferrocuda-host --test gpu_s22 -- --nocapture --test-threads=1`.

use std::time::Instant;

use cudarc::driver::sys;
use ferrocuda_host::{Context, DeviceBuffer, Event, Limit, SchedulePolicy, Stream};

mod common;
use common::gpu_or_skip;

/// The thread's current driver context (null: none).
fn current_raw() -> sys::CUcontext {
    let mut raw = std::ptr::null_mut();
    // SAFETY: writes one handle.
    assert_eq!(unsafe { sys::cuCtxGetCurrent(&mut raw) }, sys::CUresult::CUDA_SUCCESS);
    raw
}

/// Work of every kind on `context` (allocation, copies, a stream, an event, queries, a limit, a
/// context-wide wait, the releases), checking after each call that the thread's current context
/// is still `expected`.
fn every_kind_of_call_leaves(context: &Context, expected: sys::CUcontext) {
    let check = |what: &str| assert_eq!(current_raw(), expected, "{what} on a primary context changed the thread's current context");
    let stream = Stream::non_blocking(context).unwrap();
    check("Stream::non_blocking");
    let x = DeviceBuffer::from_slice(context, &[3u32; 4096]).unwrap();
    check("DeviceBuffer::from_slice");
    let mut y = DeviceBuffer::<u32>::zeroed_async(&stream, 4096).unwrap();
    check("DeviceBuffer::zeroed_async");
    y.copy_from_device_async(&x, &stream).unwrap();
    check("copy_from_device_async");
    let event = Event::new(context).unwrap();
    event.record(&stream).unwrap();
    check("Event::record");
    stream.synchronize().unwrap();
    check("Stream::synchronize");
    assert!(event.is_complete().unwrap());
    assert_eq!(y.to_vec().unwrap(), vec![3u32; 4096]);
    check("DeviceBuffer::to_vec");
    context.memory_info().unwrap();
    context.limit(Limit::StackSize).unwrap();
    context.stream_priority_range().unwrap();
    check("Context queries");
    context.synchronize().unwrap();
    check("Context::synchronize");
    drop((event, x, y, stream));
    check("the releases (event, buffers, stream)");
}

/// On a thread with no current context (a new thread: what a Python thread is before torch's
/// first call there) and on one where another context is current (a created context, standing
/// for another library's or another device's), calls on the primary context leave the thread's
/// current context unchanged. A borrowed handle of the primary context (`Context::from_raw`,
/// what `borrowed::cudarc::context` does per call) no longer makes it current either.
#[test]
fn s22_calls_on_a_primary_context_leave_the_threads_current_context_unchanged() {
    let Some(primary) = gpu_or_skip("s22_calls_on_a_primary_context_leave_the_threads_current_context_unchanged") else { return };
    // `Context::primary` is documented to make the context current (as `cudaSetDevice` does).
    assert_eq!(current_raw(), primary.raw());
    std::thread::scope(|s| {
        s.spawn(|| {
            assert!(current_raw().is_null(), "a new thread starts without a current context");
            every_kind_of_call_leaves(&primary, std::ptr::null_mut());
            // SAFETY: the primary context, retained by `primary` for the whole test.
            let adopted = unsafe { Context::from_raw(primary.raw(), ()) }.unwrap();
            assert!(adopted.is_primary());
            assert!(current_raw().is_null(), "Context::from_raw of a primary context made it current");
            every_kind_of_call_leaves(&adopted, std::ptr::null_mut());
        })
        .join()
        .unwrap();
        s.spawn(|| {
            let other = Context::create(0, SchedulePolicy::Auto).unwrap();
            let _other_current = other.push_current().unwrap();
            assert_eq!(current_raw(), other.raw());
            every_kind_of_call_leaves(&primary, other.raw());
        })
        .join()
        .unwrap();
    });
    // The primary context is still current where `Context::primary` made it so.
    assert_eq!(current_raw(), primary.raw());
}

/// The dying primary handle's teardown (the last handle dropped on a thread where another
/// context is current) restores that context too: it binds through the driver's stack.
#[test]
fn s22_the_last_primary_handle_dropped_elsewhere_restores_the_current_context() {
    let Some(primary) = gpu_or_skip("s22_the_last_primary_handle_dropped_elsewhere_restores_the_current_context") else { return };
    std::thread::scope(|s| {
        s.spawn(move || {
            let other = Context::create(0, SchedulePolicy::Auto).unwrap();
            let _other_current = other.push_current().unwrap();
            // SAFETY: `primary` keeps the primary context retained while this handle is used.
            let adopted = unsafe { Context::from_raw(primary.raw(), ()) }.unwrap();
            every_kind_of_call_leaves(&adopted, other.raw());
            drop(adopted);
            drop(primary);
            assert_eq!(current_raw(), other.raw(), "the primary context's teardown changed the thread's current context");
        })
        .join()
        .unwrap();
    });
}

/// What the push and pop cost (printed, not asserted: a benchmark): `Context::memory_info`
/// (one bind, one `cuMemGetInfo`) on a primary context that is current (the bind makes one
/// `cuCtxGetCurrent` and nothing else), and from a thread where none is current (one
/// `cuCtxPushCurrent` more, and the `cuCtxPopCurrent` at the guard's drop; before session 22 it
/// was one `cuCtxSetCurrent`, and no restore). The difference is the price of never leaving the
/// primary context current.
#[test]
fn s22_bind_cost_of_a_primary_context_printed() {
    let Some(primary) = gpu_or_skip("s22_bind_cost_of_a_primary_context_printed") else { return };
    const CALLS: u32 = 20_000;
    let per_call = |context: &Context| {
        for _ in 0..1000 {
            context.memory_info().unwrap();
        }
        let start = Instant::now();
        for _ in 0..CALLS {
            context.memory_info().unwrap();
        }
        start.elapsed().as_nanos() as f64 / f64::from(CALLS)
    };
    let current = per_call(&primary);
    let pushed = std::thread::scope(|s| {
        s.spawn(|| {
            let ns = per_call(&primary);
            assert!(current_raw().is_null());
            ns
        })
        .join()
        .unwrap()
    });
    // SAFETY: no arguments; one driver call, for its cost alone.
    let raw_push_pop = {
        let start = Instant::now();
        for _ in 0..CALLS {
            let mut popped = std::ptr::null_mut();
            // SAFETY: the primary context is alive; popped right after.
            unsafe {
                assert_eq!(sys::cuCtxPushCurrent_v2(primary.raw()), sys::CUresult::CUDA_SUCCESS);
                assert_eq!(sys::cuCtxPopCurrent_v2(&mut popped), sys::CUresult::CUDA_SUCCESS);
            }
        }
        start.elapsed().as_nanos() as f64 / f64::from(CALLS)
    };
    println!(
        "s22 bind cost: Context::memory_info {current:.0} ns/call with the primary context current, {pushed:.0} ns/call with none current \
         (push + pop); a raw cuCtxPushCurrent + cuCtxPopCurrent pair {raw_push_pop:.0} ns"
    );
}
