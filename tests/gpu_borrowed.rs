//! Borrowing what other libraries own (`ferrocuda::borrowed`), with cudarc 0.19 playing the
//! other library: its context, streams and allocations, used in place by ferrocuda kernels.
//! Skip (printed) without a GPU; fail under `REQUIRE_GPU=1`.

mod common;

use std::process::Command;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};
use ferrocuda::borrowed::{self, BorrowedContext, BorrowedSlice, BorrowedSliceMut, BorrowedStream};
use ferrocuda::{Context, DeviceBuffer, Error, Event, LaunchConfig, Stream, sys};
use gpu_kernels::saxpy;

/// 64 Mi floats: big enough that queued work is still running when the next call is made.
const N: usize = 1 << 26;

/// cudarc's context for device 0 (the primary one, as `CudaContext::new` takes), or `None`
/// without a GPU.
/// The raw handle of one of our streams, the way any code gets it: through the door, with no
/// memory declared.
fn raw_of(stream: &Stream) -> sys::CUstream {
    stream.enqueue("gpu_borrowed: raw handle", &[], |raw| Ok::<_, Error>(raw.get())).unwrap()
}

fn owner(test: &str) -> Option<(Context, Arc<CudaContext>)> {
    let context = common::gpu_or_skip(test)?;
    Some((context, CudaContext::new(0).expect("cudarc opens device 0")))
}

/// The device address of a cudarc slice (the owner's own view of it).
fn address<T>(slice: &CudaSlice<T>, stream: &CudaStream) -> u64 {
    let (ptr, _record) = slice.device_ptr(stream);
    ptr
}

/// The owner's work queued before the borrow comes first: the owner fills `x` with 20 slow
/// device copies on its stream; ferrocuda reads it on a stream of its own, which must wait.
#[test]
fn the_owners_earlier_work_on_its_home_stream_comes_first() {
    let Some((context, cuda)) = owner("the_owners_earlier_work_on_its_home_stream_comes_first") else { return };
    let home_cu = cuda.new_stream().unwrap();
    let threes = home_cu.clone_htod(&vec![3.0f32; N]).unwrap();
    let mut x = home_cu.alloc_zeros::<f32>(N).unwrap();
    home_cu.synchronize().unwrap();
    for _ in 0..20 {
        home_cu.memcpy_dtod(&threes, &mut x).unwrap();
    }
    let x_ptr = address(&x, &home_cu);
    // SAFETY: cudarc's stream of this context, alive while the Arc clone kept with it is.
    let home = unsafe { Stream::from_raw(&context, home_cu.cu_stream(), home_cu.clone()) }.unwrap();
    // SAFETY: `x` is N floats of a live cudarc allocation, written only on `home` before now.
    let xs = unsafe { BorrowedSlice::<f32>::new(&home, x_ptr, N) }.unwrap();
    assert_eq!(xs.device_ptr(), x_ptr, "nothing copied: the kernel gets the owner's address");
    let ours = Stream::non_blocking(&context).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&context, N).unwrap();
    saxpy::launch(&ours, LaunchConfig::for_elements(N, 256), 1.0, &xs, &mut y).unwrap();
    drop(xs);
    let y = y.to_vec().unwrap();
    assert!(y.iter().all(|&v| v == 3.0), "the kernel read x before the owner's copies ended: y[0] = {}", y[0]);
}

/// The owner's work after the borrow waits for ours: 50 launches on a stream of ours write the
/// owner's `y`; the owner then copies it back on its own stream and sees all 50.
#[test]
fn the_owners_later_work_on_its_home_stream_waits_for_ours() {
    let Some((context, cuda)) = owner("the_owners_later_work_on_its_home_stream_waits_for_ours") else { return };
    let home_cu = cuda.new_stream().unwrap();
    let ones = home_cu.clone_htod(&vec![1.0f32; N]).unwrap();
    let y = home_cu.alloc_zeros::<f32>(N).unwrap();
    home_cu.synchronize().unwrap();
    let (x_ptr, y_ptr) = (address(&ones, &home_cu), address(&y, &home_cu));
    {
        let home = borrowed::cudarc::stream(&home_cu).unwrap();
        assert_eq!(raw_of(&home), home_cu.cu_stream(), "Stream::from_raw uses the owner's stream itself");
        // SAFETY: live cudarc allocations of N floats, not used by cudarc during the borrow.
        let (xs, mut ys) = unsafe { (BorrowedSlice::<f32>::new(&home, x_ptr, N).unwrap(), BorrowedSliceMut::<f32>::new(&home, y_ptr, N).unwrap()) };
        let ours = Stream::non_blocking(&context).unwrap();
        for _ in 0..50 {
            saxpy::launch(&ours, LaunchConfig::for_elements(N, 256), 1.0, &xs, &mut ys).unwrap();
        }
    } // the borrows end: `home` (the owner's stream) now waits for `ours`
    let back = home_cu.clone_dtoh(&y).unwrap();
    assert!(back.iter().all(|&v| v == 50.0), "the owner's copy ran before our launches ended: y[0] = {}, y[N-1] = {}", back[0], back[N - 1]);
}

/// A BorrowedStream runs our work in the owner's order: after what the owner queued before the
/// borrow, before what it queues after the borrow ends.
#[test]
fn a_borrowed_stream_keeps_the_owners_order_both_ways() {
    let Some((context, cuda)) = owner("a_borrowed_stream_keeps_the_owners_order_both_ways") else { return };
    let owner_cu = cuda.new_stream().unwrap();
    let twos = owner_cu.clone_htod(&vec![2.0f32; N]).unwrap();
    let mut x = owner_cu.alloc_zeros::<f32>(N).unwrap();
    let y = owner_cu.alloc_zeros::<f32>(N).unwrap();
    owner_cu.synchronize().unwrap();
    for _ in 0..20 {
        owner_cu.memcpy_dtod(&twos, &mut x).unwrap(); // before the borrow
    }
    let (x_ptr, y_ptr) = (address(&x, &owner_cu), address(&y, &owner_cu));
    {
        // SAFETY: cudarc's live stream of this context, destroyed only after this scope.
        let stream = unsafe { BorrowedStream::new(&context, owner_cu.cu_stream()) }.unwrap();
        assert_eq!(stream.owner_raw(), owner_cu.cu_stream());
        // SAFETY: live allocations of N floats, used by cudarc only on its stream, before the
        // borrow or after it ends.
        let (xs, mut ys) = unsafe { (BorrowedSlice::<f32>::new(&stream, x_ptr, N).unwrap(), BorrowedSliceMut::<f32>::new(&stream, y_ptr, N).unwrap()) };
        for _ in 0..10 {
            saxpy::launch(&stream, LaunchConfig::for_elements(N, 256), 1.0, &xs, &mut ys).unwrap();
        }
    }
    owner_cu.memset_zeros(&mut x).unwrap(); // after: must not overtake our reads of x
    let back = owner_cu.clone_dtoh(&y).unwrap();
    assert!(back.iter().all(|&v| v == 20.0), "y[0] = {}, y[N-1] = {} (expected 10 launches of y += 2)", back[0], back[N - 1]);
}

/// The cudarc adapter honours cudarc's per-slice events across two cudarc streams: cudarc
/// writes `x` on stream A, ferrocuda reads it and writes `y` with B as home, cudarc then reads
/// `y` on A; cudarc's own events order each step.
#[test]
fn the_cudarc_adapter_honours_cudarcs_events_across_streams() {
    let Some((_context, cuda)) = owner("the_cudarc_adapter_honours_cudarcs_events_across_streams") else { return };
    let (a, b) = (cuda.new_stream().unwrap(), cuda.new_stream().unwrap());
    assert!(cuda.is_managing_stream_synchronization(), "two streams: cudarc tracks events per slice");
    let fours = a.clone_htod(&vec![4.0f32; N]).unwrap();
    let mut x = a.alloc_zeros::<f32>(N).unwrap();
    let mut y = a.alloc_zeros::<f32>(N).unwrap();
    for _ in 0..20 {
        a.memcpy_dtod(&fours, &mut x).unwrap(); // cudarc records x's write event on A
    }
    let stream = borrowed::cudarc::stream(&b).unwrap();
    borrowed::cudarc::scope(|scope| {
        let xs = scope.slice(&x, &b).unwrap(); // B waits for x's write event
        let mut ys = scope.slice_mut(&mut y, &b).unwrap();
        assert_eq!(raw_of(ys.home()), b.cu_stream());
        for _ in 0..5 {
            saxpy::launch(&stream, LaunchConfig::for_elements(N, 256), 0.5, &xs, &mut ys).unwrap();
        }
    }); // cudarc records y's write event and x's read event on B
    let back = a.clone_dtoh(&y).unwrap(); // A waits for y's write event
    assert!(back.iter().all(|&v| v == 10.0), "y[0] = {}, y[N-1] = {} (expected 5 x 0.5 x 4)", back[0], back[N - 1]);
}

/// Events for what the tracking cannot see: the owner's work on another stream, ordered by an
/// event the owner recorded, and ours, by one we record for the owner.
#[test]
fn events_order_with_the_owners_other_streams() {
    let Some((context, cuda)) = owner("events_order_with_the_owners_other_streams") else { return };
    let (home_cu, side_cu) = (cuda.new_stream().unwrap(), cuda.new_stream().unwrap());
    let fives = side_cu.clone_htod(&vec![5.0f32; N]).unwrap();
    let mut x = side_cu.alloc_zeros::<f32>(N).unwrap();
    side_cu.synchronize().unwrap();
    for _ in 0..20 {
        side_cu.memcpy_dtod(&fives, &mut x).unwrap();
    }
    let written = side_cu.record_event(None).unwrap(); // the owner's event
    let x_ptr = address(&x, &side_cu);
    let home = borrowed::cudarc::stream(&home_cu).unwrap();
    // SAFETY: the owner's event, alive until after the wait is queued.
    unsafe { home.wait_raw_event(written.cu_event()) }.unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&context, N).unwrap();
    let done = Event::without_timing(&context).unwrap();
    {
        // SAFETY: live allocation; the owner's write is ordered before `home` by the event.
        let xs = unsafe { BorrowedSlice::<f32>::new(&home, x_ptr, N) }.unwrap();
        saxpy::launch(&home, LaunchConfig::for_elements(N, 256), 1.0, &xs, &mut y).unwrap();
        done.record(&home).unwrap(); // for the owner's side stream
    }
    // SAFETY: our event, alive (we hold it) until the wait is queued.
    assert_eq!(unsafe { sys::cuStreamWaitEvent(side_cu.cu_stream(), done.raw(), 0) }, sys::CUresult::CUDA_SUCCESS);
    side_cu.memset_zeros(&mut x).unwrap(); // after our read, thanks to the event
    assert!(y.to_vec().unwrap().iter().all(|&v| v == 5.0), "the read of x was not ordered after the owner's writes, or before its memset");
}

/// The checks of the unsafe constructors: what the driver can tell is wrong is an error that
/// says so, before anything runs.
#[test]
fn borrowing_checks_alignment_extent_memory_kind_and_context() {
    let Some((context, cuda)) = owner("borrowing_checks_alignment_extent_memory_kind_and_context") else { return };
    let cu = cuda.new_stream().unwrap();
    let x = cu.alloc_zeros::<f32>(1000).unwrap();
    let ptr = address(&x, &cu);
    let home = borrowed::cudarc::stream(&cu).unwrap();
    let message = |e: Error| e.to_string();
    // SAFETY (each): the checks under test refuse these before any use.
    let misaligned = unsafe { BorrowedSlice::<f32>::new(&home, ptr + 2, 10) }.map(drop).map_err(message).unwrap_err();
    assert!(misaligned.contains("not aligned"), "{misaligned}");
    let too_long = unsafe { BorrowedSlice::<f32>::new(&home, ptr, 1 << 34) }.map(drop).map_err(message).unwrap_err();
    assert!(too_long.contains("run past the end of their allocation"), "{too_long}");
    // How tight the driver's extent is (pool allocations may sit in a larger range): a fact
    // for the log, not a promise.
    let one_more = unsafe { BorrowedSlice::<f32>::new(&home, ptr, 1001) }.map(drop).map_err(message);
    eprintln!("borrowing 1001 floats of a 1000-float cudarc allocation: {one_more:?}");
    let host = [0.0f32; 16];
    let on_host = unsafe { BorrowedSliceMut::<f32>::new(&home, host.as_ptr() as u64, 16) }.map(drop).map_err(message).unwrap_err();
    assert!(on_host.contains("not device memory"), "{on_host}");
    let whole = unsafe { BorrowedSlice::<f32>::new(&home, ptr, 1000) }.unwrap();
    assert_eq!(whole.len(), 1000);
    drop(whole);
    // A stream of another context.
    let other = Context::create(0, ferrocuda::SchedulePolicy::Auto).unwrap();
    let wrong = unsafe { BorrowedStream::new(&other, cu.cu_stream()) }.map(drop).map_err(message).unwrap_err();
    assert!(wrong.contains("belongs to context"), "{wrong}");
    drop(other);
    context.bind_to_thread().unwrap();
    // A stream being captured.
    let capturing = Stream::non_blocking(&context).unwrap();
    capturing.begin_capture().unwrap();
    let captured = unsafe { BorrowedStream::new(&context, raw_of(&capturing)) }.map(drop).map_err(message).unwrap_err();
    assert!(captured.contains("being captured"), "{captured}");
    capturing.end_capture().unwrap();
}

/// E1 (audit 2026-11-27e): a cudarc slice of the primary context lent with `on` = a stream of
/// another (cudarc, non-primary) context was accepted, and a launch in that context wrote the
/// slice with nothing ordering cudarc's later work in the slice's context after it. Every
/// door that lends another library's memory now refuses a home stream of another context than
/// the memory's, by name, before anything runs: the scope's `slice` / `slice_mut`, the guard
/// forms, and the raw constructors (the pointer's own context, as the driver reports it).
#[test]
fn e1_a_cudarc_slice_lent_with_another_contexts_stream_is_refused() {
    let Some((context, a)) = owner("e1_a_cudarc_slice_lent_with_another_contexts_stream_is_refused") else { return };
    let n = 1usize << 20;
    let b = CudaContext::new_non_primary(0, 0).unwrap();
    let (sa, sb) = (a.default_stream(), b.new_stream().unwrap());
    let mut x = sa.alloc_zeros::<f32>(n).unwrap();
    let mut y = sa.alloc_zeros::<f32>(n).unwrap();
    sa.synchronize().unwrap();
    let fb = borrowed::cudarc::context(&b).unwrap();
    let fsb = borrowed::cudarc::stream_in(&fb, &sb).unwrap();
    let message = |e: Error| e.to_string();
    // The scope: both forms refused by name, and nothing was launched.
    let refused = borrowed::cudarc::scope(|scope| {
        let write = scope.slice_mut(&mut x, &sb).map(drop).map_err(message).unwrap_err();
        let read = scope.slice(&y, &sb).map(drop).map_err(message).unwrap_err();
        (write, read)
    });
    for text in [&refused.0, &refused.1] {
        assert!(text.contains("belongs to context") && text.contains("stream of the slice's context"), "{text}");
    }
    // The guard forms (unsafe, same check).
    // SAFETY: refused before any use (the check under test).
    let guard = unsafe { borrowed::cudarc::slice_mut(&mut y, &sb) }.map(drop).map_err(message).unwrap_err();
    assert!(guard.contains("belongs to context"), "{guard}");
    // The raw constructors, given a stream of context B for memory cuMemAlloc'd in context A:
    // the pointer's context (CU_POINTER_ATTRIBUTE_CONTEXT) is compared with the home stream's.
    // (cuMemAlloc: memory of one context; a memory pool's reports none, and stays the
    // constructor's contract.)
    context.bind_to_thread().unwrap();
    // SAFETY: a plain allocation of `n` floats in the primary context, freed below.
    let own = unsafe { cudarc::driver::result::malloc_sync(n * 4) }.unwrap();
    // SAFETY: refused before any use (the check under test).
    let raw = unsafe { BorrowedSlice::<f32>::new(&fsb, own, n) }.map(drop).map_err(message);
    context.bind_to_thread().unwrap();
    // SAFETY: allocated above, never used by any work.
    unsafe { cudarc::driver::result::free_sync(own) }.unwrap();
    let raw = raw.unwrap_err();
    assert!(raw.contains("is memory of context") && raw.contains("memory's own context"), "{raw}");
    // The control: the slice's own context's stream is accepted, and the launch runs.
    let home = borrowed::cudarc::stream(&sa).unwrap();
    borrowed::cudarc::scope(|scope| {
        let xs = scope.slice(&y, &sa).unwrap();
        let mut xm = scope.slice_mut(&mut x, &sa).unwrap();
        saxpy::launch(&home, LaunchConfig::for_elements(n, 256), 2.0, &xs, &mut xm).unwrap();
    });
    assert_eq!(sa.clone_dtoh(&x).unwrap()[..4], [0.0f32; 4]);
    drop(fsb);
    drop(fb);
}

/// The primary context that cudarc (and PyTorch, and candle) use is the one ferrocuda retains:
/// borrowing it gives the same handle, and kernels loaded through it are shared.
#[test]
fn borrowing_the_primary_context_gives_ferrocudas_own_handle() {
    let Some((context, cuda)) = owner("borrowing_the_primary_context_gives_ferrocudas_own_handle") else { return };
    // SAFETY: cudarc's primary context, alive while `cuda` is.
    let borrowed = unsafe { BorrowedContext::new(cuda.cu_ctx()) }.unwrap();
    assert!(borrowed.is_primary());
    assert_eq!(borrowed.raw(), context.raw());
    assert_eq!(borrowed::cudarc::context(&cuda).unwrap().raw(), context.raw());
}

const CHILD: &str = "FERROCUDA_BORROWED_CHILD";

const PER_CALL: &str = "candle_per_call_a_cudarc_context_keeps_one_ferrocuda_handle_while_it_lives";

/// One call as candle-ops makes it: cudarc's stream looked up, the slices lent in a scope, a
/// launch (y += x), nothing ferrocuda kept afterwards.
fn one_call(cu_stream: &Arc<CudaStream>, x: &CudaSlice<f32>, y: &mut CudaSlice<f32>) {
    let stream = borrowed::cudarc::stream(cu_stream).unwrap();
    borrowed::cudarc::scope(|scope| {
        let xs = scope.slice(x, cu_stream).unwrap();
        let mut ys = scope.slice_mut(y, cu_stream).unwrap();
        saxpy::launch(&stream, LaunchConfig::for_elements(1024, 256), 1.0, &xs, &mut ys).unwrap();
    });
}

/// candle-ops paid about 3 ms a call (docs/interop.md, the candle section): each call looked
/// cudarc's primary context up, got a fresh ferrocuda handle (the only one), loaded the kernels
/// into it at the launch and tore it down (a context-wide synchronisation, the modules
/// unloaded) when the call's streams dropped. Now `borrowed::cudarc::context` keeps the handle
/// while cudarc's context lives: after a call, with nothing of ferrocuda's kept, the handle is
/// still alive (this thread's current context), and `forget_cached_contexts` lets it go. In a
/// child process, where no other test holds a handle of the primary context. Prints the time
/// of a call (not asserted).
#[test]
fn candle_per_call_a_cudarc_context_keeps_one_ferrocuda_handle_while_it_lives() {
    if std::env::var(CHILD).is_ok_and(|t| t == PER_CALL) {
        let cuda = CudaContext::new(0).expect("cudarc opens device 0");
        let cu_stream = cuda.new_stream().unwrap();
        let x = cu_stream.clone_htod(&[1.0f32; 1024]).unwrap();
        let mut y = cu_stream.alloc_zeros::<f32>(1024).unwrap();
        assert!(Context::current().is_none(), "a ferrocuda context before the first call");
        one_call(&cu_stream, &x, &mut y);
        assert!(Context::current().is_some(), "the call's ferrocuda handle went with the call: every call loads the kernels again");
        cu_stream.synchronize().unwrap();
        let calls: u32 = 200;
        let start = std::time::Instant::now();
        for _ in 0..calls {
            one_call(&cu_stream, &x, &mut y);
        }
        cu_stream.synchronize().unwrap();
        println!("PER CALL: {:?} (lookup, scope, launch of a 1024-element saxpy)", start.elapsed() / calls);
        let back = cu_stream.clone_dtoh(&y).unwrap();
        assert!(back.iter().all(|&v| v == (calls + 1) as f32), "y = {}, not {}", back[0], calls + 1);
        borrowed::cudarc::forget_cached_contexts();
        assert!(Context::current().is_none(), "forget_cached_contexts kept the handle");
        println!("CHILD DONE");
        return;
    }
    if common::gpu_or_skip(PER_CALL).is_none() {
        return;
    }
    let output =
        Command::new(std::env::current_exe().unwrap()).args([PER_CALL, "--exact", "--nocapture", "--test-threads=1"]).env(CHILD, PER_CALL).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    println!("child output:\n{text}");
    assert!(output.status.success() && text.contains("CHILD DONE"), "{text}");
}

/// A context another library created (not primary): work in it through ferrocuda, then the
/// borrow ends cleanly when everything made in it is gone; a buffer left alive when it ends
/// stops the process (child process) instead of letting the owner destroy the context under it.
#[test]
fn a_borrowed_created_context_ends_cleanly_or_stops_the_process_if_something_outlives_it() {
    let Some((_context, _cuda)) = owner("a_borrowed_created_context_ends_cleanly_or_stops_the_process_if_something_outlives_it") else { return };
    let escape = std::env::var(CHILD).is_ok();
    let theirs = CudaContext::new_non_primary(0, 0).unwrap();
    let mut kept = None;
    {
        // SAFETY: cudarc's created context, alive while `theirs` is (past this scope).
        let borrowed = unsafe { BorrowedContext::new(theirs.cu_ctx()) }.unwrap();
        assert!(!borrowed.is_primary());
        let stream = Stream::non_blocking(&borrowed).unwrap();
        let x = DeviceBuffer::from_slice(&borrowed, &[1.0f32; 1024]).unwrap();
        let mut y = DeviceBuffer::from_slice(&borrowed, &[1.0f32; 1024]).unwrap();
        saxpy::launch(&stream, LaunchConfig::for_elements(1024, 256), 2.0, &x, &mut y).unwrap();
        assert_eq!(y.to_vec().unwrap(), vec![3.0f32; 1024]);
        if escape {
            kept = Some(y); // outlives the borrow: must stop the process
        }
    }
    assert!(kept.is_none(), "the borrow ended with a buffer of it alive, and the process went on");
    if !escape {
        let output = Command::new(std::env::current_exe().unwrap())
            .args(["a_borrowed_created_context_ends_cleanly_or_stops_the_process_if_something_outlives_it", "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .output()
            .unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        println!("child output:\n{text}");
        assert!(!output.status.success(), "the child went on with a buffer outliving its borrowed context");
        assert!(text.contains("Drop everything made in a borrowed context before the borrow ends"), "{text}");
    }
}

/// cudarc's capture mode for these tests (any thread may end the capture).
const RELAXED: sys::CUstreamCaptureMode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;

/// Q8: a launch on a stream borrowed from cudarc while **cudarc** captures it is refused by
/// name (it used to be recorded into cudarc's graph; ferrocuda then freed the buffer, and
/// cudarc's safe `CudaGraph::launch` wrote the freed memory, by then another buffer's). The
/// replay of cudarc's graph leaves a new buffer at the old address untouched, and the stream
/// works again once cudarc's capture is over.
#[test]
fn q8_a_launch_on_a_borrowed_stream_inside_cudarcs_capture_is_refused() {
    let Some((context, cuda)) = owner("q8_a_launch_on_a_borrowed_stream_inside_cudarcs_capture_is_refused") else { return };
    let n = 1 << 20;
    let home = cuda.new_stream().unwrap();
    let ours = borrowed::cudarc::stream_in(&context, &home).unwrap();
    let x = DeviceBuffer::from_slice(&context, &vec![1.0f32; n]).unwrap();
    let mut victim = DeviceBuffer::<f32>::zeroed_async(&ours, n).unwrap();
    // Loads the module before the capture (a load inside one is refused on its own).
    saxpy::launch(&ours, LaunchConfig::for_elements(n, 256), 1.0, &x, &mut victim).unwrap();
    ours.synchronize().unwrap();
    let address = victim.device_ptr();
    home.begin_capture(RELAXED).unwrap();
    let launch = saxpy::launch(&ours, LaunchConfig::for_elements(n, 256), 7.0, &x, &mut victim);
    let declared = ours.will_use(&[ferrocuda::BufferAccess::write(&mut victim)]);
    let ran = std::sync::atomic::AtomicBool::new(false);
    let door = ours.enqueue("q8 door", &[], |_raw| {
        ran.store(true, std::sync::atomic::Ordering::SeqCst);
        Ok::<_, Error>(())
    });
    let graph = home.end_capture(sys::CUgraphInstantiate_flags(0)).unwrap();
    let error = launch.unwrap_err();
    println!("{error}");
    assert!(matches!(&error, Error::ForeignCapture { .. }), "{error:?}");
    assert!(error.to_string().contains("did not begin"), "{error}");
    assert!(matches!(&declared, Err(Error::ForeignCapture { operation }) if operation == "Stream::will_use"), "{declared:?}");
    assert!(matches!(&door, Err(Error::ForeignCapture { operation }) if operation == "q8 door"), "{door:?}");
    assert!(!ran.load(std::sync::atomic::Ordering::SeqCst), "work ran on a stream inside cudarc's capture");
    // The audit's use-after-free, replayed: nothing of ferrocuda's is in cudarc's graph.
    drop(victim);
    ours.synchronize().unwrap();
    let fresh = DeviceBuffer::from_slice(&context, &vec![5.0f32; n]).unwrap();
    println!("victim at {address:#x}, new buffer at {:#x}", fresh.device_ptr());
    if let Some(graph) = graph {
        graph.launch().unwrap();
        home.synchronize().unwrap();
    }
    let values = fresh.to_vec().unwrap();
    assert_eq!(values.iter().filter(|&&v| v != 5.0).count(), 0, "cudarc's replay wrote a new buffer: {}", values[0]);
    // Outside cudarc's capture the borrowed stream works and is tracked again.
    let mut y = DeviceBuffer::<f32>::zeroed(&context, n).unwrap();
    saxpy::launch(&ours, LaunchConfig::for_elements(n, 256), 2.0, &x, &mut y).unwrap();
    assert!(y.to_vec().unwrap().iter().all(|&v| v == 2.0));
}

/// Q8, the other way round: ferrocuda does not capture a borrowed stream (cudarc could end
/// that capture with its safe `end_capture`, keep the graph, and replay it after ferrocuda
/// freed the buffers in it). The refusal names what to do; the stream is left uncaptured.
#[test]
fn q8_ferrocuda_refuses_to_capture_a_borrowed_stream() {
    let Some((context, cuda)) = owner("q8_ferrocuda_refuses_to_capture_a_borrowed_stream") else { return };
    let home = cuda.new_stream().unwrap();
    let ours = borrowed::cudarc::stream_in(&context, &home).unwrap();
    let begun = ours.begin_capture().unwrap_err();
    println!("{begun}");
    assert!(matches!(begun, Error::CaptureOfBorrowedStream), "{begun:?}");
    assert!(begun.to_string().contains("Stream::new"), "{begun}");
    let captured = ours.capture(|_| Ok(())).map(drop).unwrap_err();
    assert!(matches!(captured, Error::CaptureOfBorrowedStream), "{captured:?}");
    assert!(!ours.is_capturing().unwrap(), "a refused capture left the stream capturing");
    // The route the message gives: capture on a stream of ferrocuda's, ordered by events.
    let n = 1024;
    let x = DeviceBuffer::from_slice(&context, &vec![1.0f32; n]).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&context, n).unwrap();
    let own = Stream::new(&context).unwrap();
    saxpy::launch(&own, LaunchConfig::for_elements(n, 256), 1.0, &x, &mut y).unwrap();
    let graph = own.capture(|s| saxpy::launch(s, LaunchConfig::for_elements(n, 256), 1.0, &x, &mut y)).unwrap();
    assert_eq!(graph.node_count().unwrap(), 1);
}

/// Q8: a borrowed stream that waited on another library's raw event asks the driver from then
/// on: if the wait joined cudarc's capture, ferrocuda's work there is refused.
#[test]
fn q8_a_borrowed_stream_joined_to_cudarcs_capture_refuses_work() {
    let Some((context, cuda)) = owner("q8_a_borrowed_stream_joined_to_cudarcs_capture_refuses_work") else { return };
    let capturing = cuda.new_stream().unwrap();
    let joined = cuda.new_stream().unwrap();
    let ours = borrowed::cudarc::stream_in(&context, &joined).unwrap();
    let n = 1024;
    let x = DeviceBuffer::from_slice(&context, &vec![1.0f32; n]).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&context, n).unwrap();
    saxpy::launch(&ours, LaunchConfig::for_elements(n, 256), 1.0, &x, &mut y).unwrap();
    ours.synchronize().unwrap();
    capturing.begin_capture(RELAXED).unwrap();
    let event = capturing.record_event(None).unwrap();
    // SAFETY: cudarc's live event of this context.
    unsafe { ours.wait_raw_event(event.cu_event()) }.unwrap();
    let launch = saxpy::launch(&ours, LaunchConfig::for_elements(n, 256), 1.0, &x, &mut y);
    // cudarc joins back and ends its capture.
    joined.record_event(None).and_then(|e| capturing.wait(&e)).unwrap();
    let _graph = capturing.end_capture(sys::CUgraphInstantiate_flags(0)).unwrap();
    assert!(matches!(&launch, Err(Error::ForeignCapture { .. })), "{launch:?}");
}

const GLOBAL: sys::CUstreamCaptureMode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL;

/// The stream of the PyTorch ops (`Stream::from_raw_in_owner_captures`, issue 32), made while
/// its owner captures it in global mode as `torch.cuda.graph` does: a launch on the owner's
/// memory is recorded into the owner's graph (nothing runs at capture) and runs at each replay;
/// an allocation inside the capture is still refused. Also the regression test of issue 32's
/// first GPU run: making the stream asked the driver for its flags, which it refuses during a
/// capture (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED), and that invalidated the owner's capture.
#[test]
fn issue32_a_stream_joining_its_owners_capture_records_work_into_the_owners_graph() {
    let Some((context, cuda)) = owner("issue32_a_stream_joining_its_owners_capture_records_work_into_the_owners_graph") else { return };
    let n = 1 << 20;
    let home = cuda.new_stream().unwrap();
    let x = home.clone_htod(&vec![1.0f32; n]).unwrap();
    let y = home.clone_htod(&vec![10.0f32; n]).unwrap();
    let (x_ptr, y_ptr) = (address(&x, &home), address(&y, &home));
    home.synchronize().unwrap();
    // Loads the kernel's module before the capture (a load inside one is refused).
    {
        let warm = Stream::new(&context).unwrap();
        let mut scratch = DeviceBuffer::<f32>::zeroed(&context, 32).unwrap();
        let ones = DeviceBuffer::from_slice(&context, &[1.0f32; 32]).unwrap();
        saxpy::launch(&warm, LaunchConfig::for_elements(32, 32), 1.0, &ones, &mut scratch).unwrap();
        warm.synchronize().unwrap();
    }
    home.begin_capture(GLOBAL).unwrap();
    {
        // SAFETY: cudarc's stream, kept alive by the Arc held with it; the work below uses only
        // cudarc's `x` and `y`, which outlive every launch of the graph (dropped at the end),
        // and kernels of `context`, which outlives the graph too.
        let ours = unsafe { Stream::from_raw_in_owner_captures(&context, home.cu_stream(), home.clone()) }.unwrap();
        // SAFETY: n floats of live cudarc allocations, written by nothing else meanwhile.
        let xs = unsafe { BorrowedSlice::<f32>::new(&ours, x_ptr, n) }.unwrap();
        let mut ys = unsafe { BorrowedSliceMut::<f32>::new(&ours, y_ptr, n) }.unwrap();
        saxpy::launch(&ours, LaunchConfig::for_elements(n, 256), 3.0, &xs, &mut ys).unwrap();
        let refused = DeviceBuffer::<f32>::zeroed_async(&ours, 16).unwrap_err();
        assert!(matches!(refused, Error::AllocationInCapture { .. }), "{refused:?}");
    }
    let graph = home.end_capture(sys::CUgraphInstantiate_flags(0)).unwrap().expect("a graph with the launch");
    let before = home.clone_dtoh(&y).unwrap();
    assert!(before.iter().all(|&v| v == 10.0), "the captured launch ran at capture: y[0] = {}", before[0]);
    graph.launch().unwrap();
    graph.launch().unwrap();
    home.synchronize().unwrap();
    let after = home.clone_dtoh(&y).unwrap();
    assert!(after.iter().all(|&v| v == 16.0), "two replays of y += 3 x: y[0] = {}", after[0]);
}
