//! Regression tests for the host findings of audit 2026-11-27d (`audit/2026-11-27d/FINDINGS.md`
//! on branch s10-review): streams and buffer records reached from two host threads at once.
//!
//! - D1: `CU_STREAM_PER_THREAD` (cudarc's safe `per_thread_stream()`) is a different stream on
//!   each thread; adopted as one `Stream`, a read on thread 2 did not wait for thread 1's write
//!   and the free went after thread 2's stream only (the old kernel wrote 205792 elements of
//!   the next allocation on an H200). It is refused now where a `Stream` is made from a handle;
//!   `BorrowedStream::new` borrows it for the calling thread, ordered with an event, and its
//!   end waits on the host: a thread whose per-thread stream still has unfinished work never
//!   finishes exiting (driver 580; the first fix joined it with an event, and the writer thread
//!   of the D1 test hung in its exit).
//! - D2: the two halves of a `split_at_mut` written from two threads at once lost one write
//!   from the buffer's record (25 of 100 rounds read before it, 22 of 100 freed under it). The
//!   record's lock is now held from the ordering to the queuing.
//! - D4: the per-thread stream of another context was accepted for a buffer of this context
//!   (the fast path ran before the context check).
//!
//! Each test is named for the finding it guards. Skip (printed) without a GPU; fail under
//! `REQUIRE_GPU=1`.

mod common;

use std::sync::Barrier;

use cudarc::driver::CudaContext;
use ferrocuda::borrowed::{self, BorrowedStream};
use ferrocuda::{Context, DeviceBuffer, Error, LaunchConfig, Stream, sys};
use test_kernels::launch_kinds::{mark_blocks, spin_for};
use test_kernels::square_checked;

/// `CU_STREAM_PER_THREAD`.
const PER_THREAD: sys::CUstream = 2usize as sys::CUstream;
/// Elements of the buffers (one block of 32 threads each for `mark_blocks`).
const N: usize = 1 << 16;
/// How long the slow writer's stream is kept busy before its write: long enough that any work
/// not ordered after it runs first.
const SLOW_NS: u64 = 200_000_000;

/// `out[b] = b` (or `u32::MAX - b` with `invert`) for every element: one block per element.
fn blocks(n: usize) -> LaunchConfig {
    LaunchConfig::new(n as u32, 32u32)
}

/// Loads the test kernels' module into `context`.
fn load_kernels(context: &Context) {
    let stream = Stream::non_blocking(context).unwrap();
    let mut y = DeviceBuffer::<u32>::zeroed(context, 32).unwrap();
    mark_blocks::launch(&stream, blocks(32), false, &mut y).unwrap();
    spin_for::launch(&stream, (1u32, 1u32), 0).unwrap();
    square_checked::launch(&stream, LaunchConfig::for_elements(32, 32), &DeviceBuffer::<u32>::zeroed(context, 32).unwrap(), &mut y).unwrap();
    stream.synchronize().unwrap();
}

/// D1: cudarc's per-thread stream is refused by every safe and unsafe path that would make it
/// one `Stream` (`borrowed::cudarc::stream`, `stream_in`, `Stream::from_raw`,
/// `from_raw_in_owner_captures`), with the error saying what to pass instead; the legacy
/// stream (one stream on every thread) is still adopted.
#[test]
fn d1_the_per_thread_stream_is_never_adopted_as_one_stream() {
    let Some(_) = common::gpu_or_skip("d1_the_per_thread_stream_is_never_adopted_as_one_stream") else { return };
    let cuda = CudaContext::new(0).unwrap();
    let context = borrowed::cudarc::context(&cuda).unwrap();
    let refused = borrowed::cudarc::stream(&cuda.per_thread_stream());
    assert!(matches!(refused, Err(Error::PerThreadStream)), "{:?}", refused.map(|_| ()));
    assert!(matches!(borrowed::cudarc::stream_in(&context, &cuda.per_thread_stream()), Err(Error::PerThreadStream)));
    // SAFETY: a default stream handle, valid as long as the context.
    assert!(matches!(unsafe { Stream::from_raw(&context, PER_THREAD, ()) }, Err(Error::PerThreadStream)));
    // SAFETY: as above.
    assert!(matches!(unsafe { Stream::from_raw_in_owner_captures(&context, PER_THREAD, ()) }, Err(Error::PerThreadStream)));
    let message = Error::PerThreadStream.to_string();
    println!("d1: {message}");
    assert!(message.contains("new_stream()") && message.contains("BorrowedStream::new"), "{message}");
    assert!(borrowed::cudarc::stream(&cuda.default_stream()).is_ok(), "the legacy stream is one stream: adopted");
}

/// D1, the audit's repro with what replaces the adoption: thread 1 borrows its per-thread
/// stream (`BorrowedStream::new`), queues a slow write into `buf` there and hands `buf` over;
/// thread 2 borrows its own per-thread stream, reads `buf`, drops it and allocates again. The
/// read must see the whole write, and the old write must not land in the new allocation.
/// Before: "thread 2's copy read 0 of 262144 elements" and "the new buffer holds 205792".
/// With the first fix (the borrow's end joined thread 1's per-thread stream with an event)
/// thread 1 never finished exiting (H200); `d1_a_thread_that_borrowed_its_per_thread_stream_exits`
/// has the diagnosis and guards it in child processes.
#[test]
fn d1_a_buffer_written_on_one_threads_per_thread_stream_is_ordered_on_anothers() {
    let Some(context) = common::gpu_or_skip("d1_a_buffer_written_on_one_threads_per_thread_stream_is_ordered_on_anothers") else { return };
    load_kernels(&context);
    let (tx, rx) = std::sync::mpsc::channel::<DeviceBuffer<u32>>();
    let writer_context = context.clone();
    let writer = std::thread::spawn(move || {
        let mut buf = DeviceBuffer::<u32>::zeroed(&writer_context, N).unwrap();
        // SAFETY: the per-thread default stream lives as long as the context.
        let stream = unsafe { BorrowedStream::new(&writer_context, PER_THREAD) }.unwrap();
        spin_for::launch(&stream, (1u32, 1u32), SLOW_NS).unwrap();
        mark_blocks::launch(&stream, blocks(N), true, &mut buf).unwrap();
        drop(stream); // the host waits for the write (nothing is left queued on this thread's per-thread stream)
        tx.send(buf).unwrap();
    });
    let buf = rx.recv().unwrap();
    writer.join().unwrap();
    // SAFETY: as above.
    let stream = unsafe { BorrowedStream::new(&context, PER_THREAD) }.unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(&context, N).unwrap();
    square_checked::launch(&stream, LaunchConfig::for_elements(N, 256), &buf, &mut out).unwrap();
    stream.synchronize().unwrap();
    let old = buf.device_ptr();
    drop(buf);
    let fresh = DeviceBuffer::<u32>::zeroed_async(&stream, N).unwrap();
    stream.synchronize().unwrap();
    context.synchronize().unwrap();
    let read = out.to_vec().unwrap();
    let want = |b: usize| (u32::MAX - b as u32).wrapping_mul(u32::MAX - b as u32);
    let right = (0..N).filter(|&b| read[b] == want(b)).count();
    let dirty = fresh.to_vec().unwrap().iter().filter(|&&x| x != 0).count();
    println!("d1: thread 2 read {right} of {N} written values; new buffer at the old address: {}; {dirty} of its elements written", fresh.device_ptr() == old);
    assert_eq!(right, N, "thread 2's read did not wait for thread 1's write");
    assert_eq!(dirty, 0, "thread 1's write landed in the next allocation (freed under it)");
}

/// D1: a per-thread stream borrowed on one thread and dropped on another cannot join the
/// first thread's per-thread stream from there: the drop waits on the host instead, so when
/// it returns the work queued through it has finished.
#[test]
fn d1_a_per_thread_borrow_dropped_on_another_thread_waits_for_its_work() {
    let Some(context) = common::gpu_or_skip("d1_a_per_thread_borrow_dropped_on_another_thread_waits_for_its_work") else { return };
    load_kernels(&context);
    let mut buf = DeviceBuffer::<u32>::zeroed(&context, N).unwrap();
    // SAFETY: the per-thread default stream lives as long as the context.
    let stream = unsafe { BorrowedStream::new(&context, PER_THREAD) }.unwrap();
    spin_for::launch(&stream, (1u32, 1u32), SLOW_NS).unwrap();
    mark_blocks::launch(&stream, blocks(N), false, &mut buf).unwrap();
    let ours = Stream::clone(&stream);
    std::thread::scope(|scope| {
        scope.spawn(move || drop(stream));
    });
    assert!(ours.is_idle().unwrap(), "the drop on another thread returned before the borrowed work finished");
}

/// One round of the audit's G2 (`split`) and G2b (`split_uaf`): thread 1 writes the left half
/// on stream `a` behind a slow kernel, thread 2 the right half on `b`, both launched at once;
/// then a host read of the whole buffer (must see both writes), then the buffer's drop and a
/// new allocation (the old writes must not land in it). Returns (missed read, write into the
/// new allocation).
fn d2_round(context: &Context, a: &Stream, b: &Stream, round: u32) -> (bool, bool) {
    let half = N / 2;
    let mut buf = DeviceBuffer::<u32>::zeroed_async(a, N).unwrap();
    a.synchronize().unwrap(); // last writer: `a` (its fast path, before the fix)
    {
        let (mut left, mut right) = buf.split_at_mut(half);
        let gate = Barrier::new(2);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                spin_for::launch(a, (1u32, 1u32), SLOW_NS / 20).unwrap();
                gate.wait();
                mark_blocks::launch(a, blocks(half), true, &mut left).unwrap();
            });
            scope.spawn(|| {
                gate.wait();
                mark_blocks::launch(b, blocks(half), true, &mut right).unwrap();
            });
        });
    }
    let v = buf.to_vec().unwrap();
    let want = |i: usize| u32::MAX - (i % half) as u32;
    let missed = (0..N).any(|i| v[i] != want(i));
    if round.is_multiple_of(2) {
        // The drop alone (no host read before it): the free must wait for both writes.
        let mut buf2 = DeviceBuffer::<u32>::zeroed_async(a, N).unwrap();
        a.synchronize().unwrap();
        {
            let (mut left, mut right) = buf2.split_at_mut(half);
            let gate = Barrier::new(2);
            std::thread::scope(|scope| {
                scope.spawn(|| {
                    spin_for::launch(a, (1u32, 1u32), SLOW_NS / 20).unwrap();
                    gate.wait();
                    mark_blocks::launch(a, blocks(half), true, &mut left).unwrap();
                });
                scope.spawn(|| {
                    gate.wait();
                    mark_blocks::launch(b, blocks(half), true, &mut right).unwrap();
                });
            });
        }
        drop(buf2);
    }
    drop(buf);
    let fresh = DeviceBuffer::<u32>::zeroed_async(b, N).unwrap();
    b.synchronize().unwrap();
    context.synchronize().unwrap();
    let dirty = fresh.to_vec().unwrap().iter().any(|&x| x != 0);
    (missed, dirty)
}

/// D2: 100 rounds of two threads writing the two halves of one `split_at_mut` on two streams
/// at once: no host read misses a queued write, and no dropped buffer's write lands in the
/// next allocation. Before (H200): 25 of 100 rounds missed a write, 22 of 100 wrote into the
/// next allocation.
#[test]
fn d2_two_threads_writing_the_halves_of_a_split_lose_no_write() {
    let Some(context) = common::gpu_or_skip("d2_two_threads_writing_the_halves_of_a_split_lose_no_write") else { return };
    load_kernels(&context);
    let (a, b) = (Stream::non_blocking(&context).unwrap(), Stream::non_blocking(&context).unwrap());
    let rounds = 100;
    let (mut missed, mut dirty) = (0, 0);
    for round in 0..rounds {
        let (m, d) = d2_round(&context, &a, &b, round);
        missed += m as u32;
        dirty += d as u32;
    }
    println!("d2: rounds whose host read missed a queued write: {missed} of {rounds}; rounds whose new allocation was written: {dirty} of {rounds}");
    assert_eq!((missed, dirty), (0, 0));
}

/// D2, a read of one half against a write of the other: thread 1 reads the left half on `a`
/// (behind a slow kernel), thread 2 writes the right half on `b`; then the buffer is written
/// whole on `b` (a later writer must wait for the read). The read must see the values from
/// before that whole write.
#[test]
fn d2_a_read_of_one_half_is_not_lost_by_a_write_of_the_other() {
    let Some(context) = common::gpu_or_skip("d2_a_read_of_one_half_is_not_lost_by_a_write_of_the_other") else { return };
    load_kernels(&context);
    let (a, b) = (Stream::non_blocking(&context).unwrap(), Stream::non_blocking(&context).unwrap());
    let half = N / 2;
    let mut lost = 0;
    for _ in 0..50 {
        let mut buf = DeviceBuffer::<u32>::zeroed_async(&a, N).unwrap();
        mark_blocks::launch(&a, blocks(N), false, &mut buf).unwrap(); // buf[i] = i
        a.synchronize().unwrap();
        let mut out = DeviceBuffer::<u32>::zeroed(&context, half).unwrap();
        {
            let (left, mut right) = buf.split_at_mut(half);
            let gate = Barrier::new(2);
            let out = &mut out;
            std::thread::scope(|scope| {
                scope.spawn(|| {
                    spin_for::launch(&a, (1u32, 1u32), SLOW_NS / 20).unwrap();
                    gate.wait();
                    square_checked::launch(&a, LaunchConfig::for_elements(half, 256), &left.slice(..), out).unwrap();
                });
                scope.spawn(|| {
                    gate.wait();
                    mark_blocks::launch(&b, blocks(half), false, &mut right).unwrap();
                });
            });
        }
        // A whole write on `b`: must wait for the read on `a`.
        mark_blocks::launch(&b, blocks(N), true, &mut buf).unwrap();
        context.synchronize().unwrap();
        let read = out.to_vec().unwrap();
        if (0..half).any(|i| read[i] != (i as u32).wrapping_mul(i as u32)) {
            lost += 1;
        }
    }
    println!("d2: rounds whose read of the left half saw the later whole write: {lost} of 50");
    assert_eq!(lost, 0);
}

/// D2 through `Stream::will_use` (the declaration that the caller's own queuing follows): a
/// half of a `split_at_mut` is refused there, saying to use `will_use_for`, which declares and
/// queues under the record's lock; once the halves are gone, the buffer's own use returns the
/// record to the fast path and `will_use` takes it again.
#[test]
fn d2_will_use_refuses_a_half_of_a_split_and_the_whole_buffer_is_taken_again_after() {
    let Some(context) = common::gpu_or_skip("d2_will_use_refuses_a_half_of_a_split_and_the_whole_buffer_is_taken_again_after") else { return };
    let a = Stream::non_blocking(&context).unwrap();
    let mut buf = DeviceBuffer::<u32>::zeroed(&context, N).unwrap();
    assert!(!buf.usage().is_shared());
    {
        let (mut left, mut right) = buf.split_at_mut(N / 2);
        let refused = a.will_use(&[ferrocuda::BufferAccess::write(&mut left)]);
        println!("d2: will_use on a half: {refused:?}");
        let Err(error @ Error::SharedDeclarationNotHeld { .. }) = refused else { panic!("{refused:?}") };
        assert!(error.to_string().contains("will_use_for"), "{error}");
        assert!(matches!(a.will_use(&[ferrocuda::BufferAccess::read(&right)]), Err(Error::SharedDeclarationNotHeld { .. })), "reads too");
        assert_eq!(a.will_use_for(&[ferrocuda::BufferAccess::write(&mut right)], || 7).unwrap(), 7);
    }
    assert!(a.will_use(&[ferrocuda::BufferAccess::write(&mut buf)]).is_ok(), "the halves are gone");
    assert!(!buf.usage().is_shared(), "the buffer's own use ends the shared state");
}

/// D2, the way back: one buffer split and written from two threads, read whole, written whole
/// (its own use: the fast path again), then split again, 40 rounds: no round's host read misses
/// a half's write or sees a stale whole write, so the record's return to the fast path between
/// two splits loses nothing.
#[test]
fn d2_a_buffer_split_again_after_its_fast_path_came_back_loses_no_write() {
    let Some(context) = common::gpu_or_skip("d2_a_buffer_split_again_after_its_fast_path_came_back_loses_no_write") else { return };
    load_kernels(&context);
    let (a, b) = (Stream::non_blocking(&context).unwrap(), Stream::non_blocking(&context).unwrap());
    let half = N / 2;
    let mut buf = DeviceBuffer::<u32>::zeroed_async(&a, N).unwrap();
    let (mut missed, mut stale) = (0, 0);
    for round in 0..40u32 {
        let invert = round % 2 == 0;
        {
            let (mut left, mut right) = buf.split_at_mut(half);
            let gate = Barrier::new(2);
            std::thread::scope(|scope| {
                scope.spawn(|| {
                    spin_for::launch(&a, (1u32, 1u32), SLOW_NS / 20).unwrap();
                    gate.wait();
                    mark_blocks::launch(&a, blocks(half), invert, &mut left).unwrap();
                });
                scope.spawn(|| {
                    gate.wait();
                    mark_blocks::launch(&b, blocks(half), invert, &mut right).unwrap();
                });
            });
        }
        let v = buf.to_vec().unwrap();
        let want = |i: usize| if invert { u32::MAX - (i % half) as u32 } else { (i % half) as u32 };
        missed += (0..N).any(|i| v[i] != want(i)) as u32;
        assert!(!buf.usage().is_shared(), "round {round}: the buffer's own use ends the shared state");
        // A whole write on `b` behind a slow kernel on `a`'s side of the record, then a read on
        // `a`: the read must wait for it (fast path or not).
        spin_for::launch(&b, (1u32, 1u32), SLOW_NS / 20).unwrap();
        mark_blocks::launch(&b, blocks(N), !invert, &mut buf).unwrap();
        let mut out = DeviceBuffer::<u32>::zeroed_async(&a, N).unwrap();
        square_checked::launch(&a, LaunchConfig::for_elements(N, 256), &buf, &mut out).unwrap();
        let read = out.to_vec().unwrap();
        let whole = |i: usize| if invert { i as u32 } else { u32::MAX - i as u32 };
        stale += (0..N).any(|i| read[i] != whole(i).wrapping_mul(whole(i))) as u32;
    }
    println!("d2: rounds whose host read missed a half's write: {missed} of 40; rounds whose read missed the whole write: {stale} of 40");
    assert_eq!((missed, stale), (0, 0));
}

/// D4: the per-thread stream of another context (cudarc's non-primary context on the same GPU)
/// was accepted for a buffer of the primary context, because its key (2) was the key of every
/// context's per-thread stream and the fast path ran before the context check. Now the handle
/// is refused as one `Stream`, and borrowed for the thread it is a stream of the other context,
/// which the context check refuses, as it refuses that context's plain stream (the control).
#[test]
fn d4_a_buffer_of_one_context_is_refused_on_another_contexts_per_thread_stream() {
    let Some(context) = common::gpu_or_skip("d4_a_buffer_of_one_context_is_refused_on_another_contexts_per_thread_stream") else { return };
    load_kernels(&context);
    let mut buf = DeviceBuffer::<u32>::zeroed(&context, N).unwrap();
    // Last written on this context's per-thread stream (borrowed for this thread).
    {
        // SAFETY: the per-thread default stream lives as long as the context.
        let mine = unsafe { BorrowedStream::new(&context, PER_THREAD) }.unwrap();
        mark_blocks::launch(&mine, blocks(N), false, &mut buf).unwrap();
    }
    let other = CudaContext::new_non_primary(0, 0).unwrap();
    let other_context = borrowed::cudarc::context(&other).unwrap();
    load_kernels(&other_context);
    assert!(matches!(borrowed::cudarc::stream(&other.per_thread_stream()), Err(Error::PerThreadStream)));
    // SAFETY: as above.
    let theirs = unsafe { BorrowedStream::new(&other_context, PER_THREAD) }.unwrap();
    let refused = mark_blocks::launch(&theirs, blocks(N), true, &mut buf);
    println!("d4: other context's per-thread stream: {refused:?}");
    assert!(matches!(refused, Err(Error::BufferInOtherContext { .. })), "{refused:?}");
    let plain = Stream::non_blocking(&other_context).unwrap();
    assert!(matches!(mark_blocks::launch(&plain, blocks(N), true, &mut buf), Err(Error::BufferInOtherContext { .. })), "control");
    drop(theirs);
    other_context.synchronize().unwrap();
    assert!(buf.to_vec().unwrap().iter().enumerate().all(|(i, &x)| x == i as u32), "the other context wrote the buffer");
}

// ---------------------------------------------------------------------------------------------
// D1, a thread that borrowed its per-thread stream must be able to exit (issue 29, class 7).
//
// `d1_a_buffer_written_on_one_threads_per_thread_stream_is_ordered_on_anothers` hung on an
// H200 (session 10): the writer thread's last statement returned, but its exit never ended.
// Diagnosed on an H200 (driver 580.159.04, bench/results/s11-host/run1-d1_exit.txt): the
// exiting thread stays inside the driver's own thread teardown (a pthread-key destructor of
// libcuda, on a futex; 5 s later, long after the work ended) when its per-thread stream still
// has unfinished work at the exit:
// the borrow's drop had joined the per-thread stream after the 200 ms kernel with an event,
// and a plain `cuMemsetD32Async` on the per-thread stream just before the exit hangs the same
// way, without ferrocuda. The exit ended when that work had finished first (a sleep, a
// `cuStreamSynchronize` of the per-thread stream, a context synchronisation, or the borrow
// dropped on another thread, which waits on the host). So the borrow's end now waits on the
// host and queues nothing on the per-thread stream.
//
// Each case runs in a child process (this test binary again, with `EXIT_CASE` naming the
// case), with a watchdog that, past `EXIT_BOUND`, prints every thread's state (kernel wait
// channel, system call, and the code addresses found on its stack) and ends the child, so a
// hang is reported, not waited for.

/// The environment variable naming the case a child runs.
const EXIT_CASE: &str = "FERROCUDA_D1_EXIT_CASE";
/// How long a case may take (its GPU work takes `SLOW_NS`, 200 ms, or 1.2 s for the timeout
/// cases; a hang is for good, so the bound leaves room for a GPU shared with other test
/// binaries, as in the integration runs).
const EXIT_BOUND: std::time::Duration = std::time::Duration::from_secs(10);

static EXIT_START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

/// A line on standard error with the time since the case began (straight to the descriptor:
/// the test harness's capture is gone in thread-local destructors).
fn exit_mark(what: &str) {
    use std::io::Write;
    let ms = EXIT_START.get_or_init(std::time::Instant::now).elapsed().as_secs_f64() * 1e3;
    let _ = writeln!(std::io::stderr(), "[{ms:9.3} ms] {what}");
}

/// Says when this thread's Rust thread-local destructors run (the first phase of its exit).
struct ExitMarker(&'static str);
impl Drop for ExitMarker {
    fn drop(&mut self) {
        exit_mark(&format!("{}: its Rust thread-local destructors run", self.0));
    }
}
thread_local! {
    static EXIT_MARKER: std::cell::RefCell<Option<ExitMarker>> = const { std::cell::RefCell::new(None) };
}

/// A raw driver call that must succeed.
fn cu(result: sys::CUresult, what: &str) {
    assert_eq!(result, sys::CUresult::CUDA_SUCCESS, "{what}");
}

#[repr(C)]
struct DlInfo {
    fname: *const std::ffi::c_char,
    fbase: *mut std::ffi::c_void,
    sname: *const std::ffi::c_char,
    saddr: *mut std::ffi::c_void,
}

unsafe extern "C" {
    fn dladdr(address: *const std::ffi::c_void, info: *mut DlInfo) -> std::ffi::c_int;
    fn _exit(status: std::ffi::c_int) -> !;
}

/// `address` as `file+offset (nearest dynamic symbol)` when it lies in an executable mapping.
fn code_address(maps: &[(u64, u64, u64, String)], address: u64) -> Option<String> {
    let (start, _, offset, path) = maps.iter().find(|(start, end, _, _)| (*start..*end).contains(&address))?;
    let mut info = DlInfo { fname: std::ptr::null(), fbase: std::ptr::null_mut(), sname: std::ptr::null(), saddr: std::ptr::null_mut() };
    // SAFETY: dladdr only reads the loader's tables and writes `info`.
    let found = unsafe { dladdr(address as *const _, &mut info) } != 0;
    let symbol = if found && !info.sname.is_null() {
        // SAFETY: a NUL-terminated name owned by the loader.
        let name = unsafe { std::ffi::CStr::from_ptr(info.sname) }.to_string_lossy().into_owned();
        format!(" ({name}+{:#x})", address - info.saddr as u64)
    } else {
        String::new()
    };
    let file = path.rsplit('/').next().unwrap_or(path);
    Some(format!("{file}+{:#x}{symbol}", address - start + offset))
}

/// Prints every thread of this process: name, state, kernel wait channel, system call, and the
/// code addresses on the top 32 KiB of its stack (return addresses among them: a rough
/// backtrace without a debugger, which the GPU machine lacks).
fn dump_threads() {
    use std::os::unix::fs::FileExt;
    let maps: Vec<(u64, u64, u64, String)> = std::fs::read_to_string("/proc/self/maps")
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() < 6 || !fields[1].contains('x') {
                return None;
            }
            let (start, end) = fields[0].split_once('-')?;
            Some((u64::from_str_radix(start, 16).ok()?, u64::from_str_radix(end, 16).ok()?, u64::from_str_radix(fields[2], 16).ok()?, fields[5].to_string()))
        })
        .collect();
    let memory = std::fs::File::open("/proc/self/mem").ok();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return };
    for task in tasks.flatten() {
        let dir = task.path();
        let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap_or_default().trim().to_string();
        let stat = read("stat");
        let state = stat.rsplit_once(") ").map(|(_, rest)| rest.chars().next().unwrap_or('?')).unwrap_or('?');
        let syscall = read("syscall");
        exit_mark(&format!("thread {:?} '{}': state {state}, wchan {}, syscall {syscall}", task.file_name(), read("comm"), read("wchan")));
        let fields: Vec<&str> = syscall.split_whitespace().collect();
        let (Some(memory), true) = (&memory, fields.len() >= 9) else { continue };
        let parse = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
        let (Some(sp), Some(pc)) = (parse(fields[7]), parse(fields[8])) else { continue };
        let mut frames = vec![format!("pc {}", code_address(&maps, pc).unwrap_or_else(|| format!("{pc:#x}")))];
        let mut stack = vec![0u8; 32 * 1024];
        let mut got = 0;
        while got < stack.len() {
            match memory.read_at(&mut stack[got..], sp + got as u64) {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
        }
        for word in stack[..got].chunks_exact(8) {
            let value = u64::from_le_bytes(word.try_into().unwrap());
            if let Some(code) = code_address(&maps, value) {
                frames.push(code);
                if frames.len() >= 40 {
                    break;
                }
            }
        }
        exit_mark(&format!("  stack: {}", frames.join(" <- ")));
    }
}

/// Runs `case` in this child process under a watchdog: past `EXIT_BOUND` it prints every
/// thread and ends the process with status 3.
fn exit_case_child(case: &str) {
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let name = case.to_string();
    std::thread::spawn(move || {
        if finished.recv_timeout(EXIT_BOUND).is_err() {
            exit_mark(&format!("D1-EXIT {name}: still running after {EXIT_BOUND:?}: the threads now"));
            dump_threads();
            println!("D1-EXIT {name}: hang");
            use std::io::Write;
            let _ = std::io::stdout().flush();
            // SAFETY: ends the process at once, without the exit handlers (the CUDA teardown
            // could wait for the stuck thread).
            unsafe { _exit(3) };
        }
    });
    exit_case(case);
    done.send(()).unwrap();
    println!("D1-EXIT {case}: exited");
}

/// One case: a writer thread borrows its per-thread stream, queues a slow write through it,
/// ends the borrow (and does what the case names), hands the buffer over and exits; the
/// calling thread joins it, then reads the buffer on its own per-thread stream, drops it and
/// allocates again, as the D1 test does. `driver_probe`: the writer queues plain work on its
/// per-thread stream with the driver alone and exits (no buffer).
fn exit_case(case: &str) {
    exit_mark(&format!("case {case}"));
    let context = common::gpu_or_skip(case).expect("a GPU");
    load_kernels(&context);
    let raw = context.raw() as usize;
    let (tx, rx) = std::sync::mpsc::channel::<DeviceBuffer<u32>>();
    let writer_context = context.clone();
    // For the driver probe: 1 GiB that the writer sets on its per-thread stream.
    let big = DeviceBuffer::<u32>::zeroed(&context, if case == "driver_probe" { 1 << 28 } else { 1 }).unwrap();
    let big_ptr = big.device_ptr();
    let case_name = case.to_string();
    let writer = std::thread::spawn(move || {
        let case = case_name.as_str();
        EXIT_MARKER.with(|m| *m.borrow_mut() = Some(ExitMarker("writer")));
        match case {
            "driver_probe" => {
                // SAFETY: the context is alive (the main thread holds it until after the join),
                // and so is the 1 GiB, until after a context synchronisation.
                unsafe {
                    cu(sys::cuCtxSetCurrent(raw as sys::CUcontext), "cuCtxSetCurrent");
                    for _ in 0..16 {
                        cu(sys::cuMemsetD32Async(big_ptr, 7, 1 << 28, PER_THREAD), "cuMemsetD32Async");
                    }
                }
            }
            "own_stream" => {
                // Control: a stream of ferrocuda's instead of the per-thread stream.
                let mut buf = DeviceBuffer::<u32>::zeroed(&writer_context, N).unwrap();
                let stream = Stream::new(&writer_context).unwrap();
                spin_for::launch(&stream, (1u32, 1u32), SLOW_NS).unwrap();
                mark_blocks::launch(&stream, blocks(N), true, &mut buf).unwrap();
                tx.send(buf).unwrap();
            }
            "borrow_no_launch" => {
                // SAFETY: the per-thread default stream lives as long as the context.
                drop(unsafe { BorrowedStream::new(&writer_context, PER_THREAD) }.unwrap());
            }
            _ => {
                let mut buf = DeviceBuffer::<u32>::zeroed(&writer_context, N).unwrap();
                // SAFETY: the per-thread default stream lives as long as the context.
                let stream = unsafe { BorrowedStream::new(&writer_context, PER_THREAD) }.unwrap();
                // After a reported timeout the borrow's end may not wait on the host (nor join).
                let slow = if case.starts_with("borrow_timeout") { 6 * SLOW_NS } else { SLOW_NS };
                spin_for::launch(&stream, (1u32, 1u32), slow).unwrap();
                mark_blocks::launch(&stream, blocks(N), true, &mut buf).unwrap();
                if case.starts_with("borrow_timeout") {
                    let gave_up = stream.synchronize_timeout(std::time::Duration::from_millis(20));
                    exit_mark(&format!("writer: synchronize_timeout(20 ms): {gave_up:?}"));
                    assert!(matches!(gave_up, Err(Error::Timeout { .. })));
                }
                if case.ends_with("elsewhere") {
                    // Dropped on another thread, whose per-thread stream is another one.
                    std::thread::scope(|scope| {
                        scope.spawn(move || drop(stream));
                    });
                } else {
                    drop(stream);
                }
                exit_mark("writer: borrow dropped");
                match case {
                    // SAFETY (each): plain driver calls with the context bound (the drop bound it).
                    "borrow_sync" => exit_mark(&format!("writer: cuStreamSynchronize(per-thread): {:?}", unsafe { sys::cuStreamSynchronize(PER_THREAD) })),
                    "borrow_query" => exit_mark(&format!("writer: cuStreamQuery(per-thread): {:?}", unsafe { sys::cuStreamQuery(PER_THREAD) })),
                    "borrow_unbind" => exit_mark(&format!("writer: cuCtxSetCurrent(null): {:?}", unsafe { sys::cuCtxSetCurrent(std::ptr::null_mut()) })),
                    _ => {}
                }
                tx.send(buf).unwrap();
                exit_mark("writer: buffer sent");
            }
        }
        drop(writer_context);
        exit_mark("writer: its Context handle dropped");
        drop(tx);
        exit_mark("writer: its closure returns");
    });
    let buf = rx.recv().ok();
    exit_mark(&format!("main: buffer received: {}; joining the writer", buf.is_some()));
    writer.join().unwrap();
    exit_mark("main: the writer has exited");
    if let Some(buf) = buf.filter(|_| case.starts_with("borrow")) {
        // The rest of the D1 test: the reader borrows its own per-thread stream.
        // SAFETY: as above.
        let stream = unsafe { BorrowedStream::new(&context, PER_THREAD) }.unwrap();
        let mut out = DeviceBuffer::<u32>::zeroed(&context, N).unwrap();
        square_checked::launch(&stream, LaunchConfig::for_elements(N, 256), &buf, &mut out).unwrap();
        stream.synchronize().unwrap();
        drop(buf);
        let fresh = DeviceBuffer::<u32>::zeroed_async(&stream, N).unwrap();
        stream.synchronize().unwrap();
        drop(stream);
        context.synchronize().unwrap();
        let read = out.to_vec().unwrap();
        let want = |b: usize| (u32::MAX - b as u32).wrapping_mul(u32::MAX - b as u32);
        let right = (0..N).filter(|&b| read[b] == want(b)).count();
        let dirty = fresh.to_vec().unwrap().iter().filter(|&&x| x != 0).count();
        println!("D1-EXIT {case}: the reader read {right} of {N} written values; {dirty} elements of the next allocation written");
    }
    context.synchronize().unwrap();
    drop(big);
    exit_mark(&format!("main: case {case} done"));
}

/// The cases: the D1 test's writer as it is (`borrow`), then with what it may do after the
/// borrow's end before exiting (query or unbind, which hung before the fix; synchronise, which
/// did not), dropping the borrow on another thread, after a reported timeout (on the borrowing
/// thread and on another), without work, and a stream of ferrocuda's instead (control).
const EXIT_CASES: &[&str] = &[
    "borrow",
    "borrow_query",
    "borrow_unbind",
    "borrow_sync",
    "borrow_elsewhere",
    "borrow_timeout",
    "borrow_timeout_elsewhere",
    "borrow_no_launch",
    "own_stream",
];

/// Runs `case` in a child process; its outcome ("exited", "HANG", ...) and its output.
fn run_exit_case(name: &str, case: &str) -> (String, String) {
    let started = std::time::Instant::now();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--test-threads=1", "--nocapture"])
        .env(EXIT_CASE, case)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipes = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let out = std::thread::spawn(move || {
        use std::io::Read;
        let mut text = String::new();
        let _ = pipes.0.read_to_string(&mut text);
        let mut err = String::new();
        let _ = pipes.1.read_to_string(&mut err);
        text + &err
    });
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > EXIT_BOUND * 2 + std::time::Duration::from_secs(2) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let text = out.join().unwrap();
    let outcome = match status {
        None => "killed (the child's watchdog did not end it)".to_string(),
        Some(_) if text.contains(&format!("D1-EXIT {case}: exited")) => "exited".to_string(),
        Some(_) if text.contains(&format!("D1-EXIT {case}: hang")) => "HANG".to_string(),
        Some(status) => format!("failed ({status})"),
    };
    println!("===== case {case}: {outcome} in {:.2} s\n{text}", started.elapsed().as_secs_f64());
    (outcome, text)
}

/// D1, the thread exit (issue 29, class 7): a thread that borrowed its per-thread stream
/// (`BorrowedStream::new(&context, CU_STREAM_PER_THREAD)`), queued a slow write through it and
/// ended the borrow exits at once, whatever it does next, and the buffer it hands over is read
/// whole on another thread's per-thread stream, and not written after its free. Before the fix
/// the writer's exit never ended when it exited right away, queried or unbound (H200, run 1 of
/// session 11). Each case runs in a child process whose watchdog reports a hang (with every
/// thread's state) instead of waiting for it. Also printed, not asserted: the driver's own
/// behaviour (`driver_probe`: plain work on the per-thread stream, then the exit), which is
/// why the borrow's end queues nothing there.
#[test]
fn d1_a_thread_that_borrowed_its_per_thread_stream_exits() {
    const NAME: &str = "d1_a_thread_that_borrowed_its_per_thread_stream_exits";
    if let Ok(case) = std::env::var(EXIT_CASE) {
        exit_case_child(&case);
        return;
    }
    if common::gpu_or_skip(NAME).is_none() {
        return;
    }
    let mut outcomes = Vec::new();
    for case in EXIT_CASES {
        let (outcome, text) = run_exit_case(NAME, case);
        if outcome == "exited" && !matches!(*case, "borrow_no_launch" | "own_stream") {
            assert!(text.contains(&format!("D1-EXIT {case}: the reader read {N} of {N} written values; 0 elements")), "case {case}: {text}");
        }
        if case.starts_with("borrow_timeout") {
            assert!(text.contains("is not ordered after it, as for a leaked borrow"), "case {case}: {text}");
        }
        outcomes.push((case, outcome));
    }
    let (probe, _) = run_exit_case(NAME, "driver_probe");
    println!("d1 thread exit: {outcomes:?}; driver probe (a thread exiting with unfinished work on its per-thread stream, no ferrocuda): {probe}");
    let stuck: Vec<_> = outcomes.iter().filter(|(_, outcome)| outcome != "exited").collect();
    assert!(stuck.is_empty(), "cases whose writer thread did not exit: {stuck:?}");
}

/// E8 (audit 2026-11-27e): `Stream::will_use_for(buffers, work)` holds the records of the
/// shared memory it declared (a half of a `split_at_mut`) while `work` runs; a launch inside
/// `work` that declared the same half again locked that record a second time on the same
/// thread and blocked for ever. It is now refused by name (`Error::DeclaredAgainWhileHeld`),
/// and so is a nested `will_use_for` of it; the hold ends with `work` (the half is usable
/// again), and the right use (the half declared once, by the launch) runs.
#[test]
fn e8_will_use_for_refuses_work_that_declares_a_held_half_again() {
    let Some(context) = common::gpu_or_skip("e8_will_use_for_refuses_work_that_declares_a_held_half_again") else { return };
    let a = Stream::non_blocking(&context).unwrap();
    let mut x = DeviceBuffer::from_slice(&context, &[1.0f32; 2048]).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&context, 1024).unwrap();
    let (left, _right) = x.split_at_mut(1024);
    let config = LaunchConfig::for_elements(1024, 256);
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let declared = [ferrocuda::BufferAccess::read(&left)];
            let inner = a.will_use_for(&declared, || gpu_kernels::saxpy::launch(&a, config, 2.0, &left, &mut y)).unwrap();
            let nested = a.will_use_for(&declared, || a.will_use_for(&[ferrocuda::BufferAccess::read(&left)], || ())).unwrap();
            let _ = sender.send((inner.map_err(|e| e.to_string()), nested.map_err(|e| e.to_string())));
        });
        // A deadlock would leave the channel empty: the test fails after the wait instead of hanging.
        let Ok((inner, nested)) = receiver.recv_timeout(std::time::Duration::from_secs(20)) else {
            // The scope would wait for the deadlocked thread: end the process, failing.
            eprintln!("e8: will_use_for did not return within 20 s (E8: the thread deadlocked)");
            std::process::exit(101);
        };
        println!("e8: launch inside: {inner:?}; nested will_use_for: {nested:?}");
        for result in [&inner, &nested] {
            let error = result.as_ref().unwrap_err();
            assert!(error.contains("`left`") || error.contains("was already declared"), "{error}");
            assert!(error.contains("Declare it once"), "{error}");
        }
    });
    // The hold ended with the work: the half declared once, by the launch, runs.
    gpu_kernels::saxpy::launch(&a, config, 2.0, &left, &mut y).unwrap();
    a.synchronize().unwrap();
    assert_eq!(y.to_vec().unwrap(), vec![2.0f32; 1024]);
}
