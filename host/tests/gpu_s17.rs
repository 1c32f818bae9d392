//! GPU tests of session 17's host soundness items, named for them: the lock order of
//! `Stream::will_use_for`'s held records (`s17_*`: crossed halves of two split buffers, a module's
//! globals gate, a capture's wait for stretches) and G16S-4 (audit/2026-11-28d/FINDINGS-review3.md:
//! a buffer released while one of its streams begins capturing). Host API only (the kernel is
//! hand-written PTX), so this binary builds with the host crate alone. Each test skips without a
//! GPU and fails under `REQUIRE_GPU=1`. The cases whose failure is a hang, or whose evidence is
//! on standard error, run in a child process (this binary, re-run on the one test by
//! `common/child.rs`) with a deadline.
//!
//! G16S-4's test compares the GPU's free memory before and after, so other processes on the GPU
//! disturb it: `ferrocuda-gpu-run: alone` (scripts/gpu-run/run.sh runs this binary by itself).
//!
//! Run: `REQUIRE_GPU=1 cargo test --release -p ferrocuda-host --test gpu_s17 -- --nocapture --test-threads=1`
//! (or `scripts/gpu-run/sound17.sh`).

use std::sync::{Barrier, mpsc};
use std::time::Duration;

use ferrocuda_host::__private::launch_in_module;
use ferrocuda_host::{BufferAccess, Context, DeviceBuffer, Error, JitOptions, KernelSignature, LaunchConfig, Module, Stream, driver, sys};

#[path = "common/child.rs"]
mod child;
mod common;
use child::{in_child, run_child};
use common::gpu_or_skip;

/// How long a child may run before its case counts as a hang.
const DEADLINE: Duration = Duration::from_secs(20);

/// `store_fill(out)`: `*out = FILL` (a module global).
const FILL_PTX: &str = r#"
.version 7.0
.target sm_50
.address_size 64

.visible .global .align 4 .u32 FILL;

.visible .entry store_fill(
    .param .u64 out
)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd2, %rd1;
    ld.global.u32 %r1, [FILL];
    st.global.u32 [%rd2], %r1;
    ret;
}
"#;

/// What a typed launcher of `store_fill` would pass (`#[kernel] unsafe fn store_fill(out: *mut u32)`).
static STORE_FILL: KernelSignature =
    KernelSignature { symbol: "store_fill", param_sizes: &[8], canonical: "", fingerprint: 0, layout: &[], param_names: &[], type_names: &[], type_keys: &[] };

/// `store_fill<<<1, 1, 0, stream>>>(out)` from `module`, through the module's launch path (its
/// globals gate); `declared`: the accesses the launch declares (none when `out` is declared by
/// an enclosing `will_use_for`).
fn launch_store_fill(module: &Module, stream: &Stream, out: u64, declared: &[BufferAccess<'_>]) -> ferrocuda_host::Result<()> {
    let address = out;
    let params = [ferrocuda_host::__private::KernelParam::value(&address)];
    // SAFETY: `store_fill` takes one pointer to a u32; `out` is a live u32 of this context,
    // declared written by the caller (in `declared` or by its `will_use_for`).
    unsafe { launch_in_module(module, &STORE_FILL, stream, LaunchConfig::new(1u32, 1u32), &params, declared) }
}

/// `cuMemsetD32Async(address, value, n)` on `stream`, declaring nothing (the memory is declared
/// by the enclosing `will_use_for`).
fn memset_raw(stream: &Stream, address: u64, value: u32, n: usize) -> ferrocuda_host::Result<()> {
    // SAFETY: `address` holds `n` u32 of this stream's context, declared written by the caller.
    stream.enqueue("memset inside will_use_for", &[], |raw| Ok::<_, Error>(unsafe { driver::memory::memset_d32_async(address, value, n, raw.get()) }?))
}

/// Runs `test` in a child process with [`DEADLINE`] and returns its standard output and error,
/// failing on a hang or a failed child.
fn child_output(test: &str) -> (String, String) {
    let Some(output) = run_child(test, DEADLINE) else { panic!("{test}: HUNG (the child ran past {DEADLINE:?}: a deadlock)") };
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout).into_owned(), String::from_utf8_lossy(&output.stderr).into_owned());
    println!("{test} child ({}):\n{stdout}{stderr}", output.status);
    assert!(output.status.success(), "{test}: the child failed ({})", output.status);
    (stdout, stderr)
}

/// Session 17, item 1 (README's known gaps, session 16): `Stream::will_use_for(accesses, work)`
/// holds the records of the shared memory it declared while `work` runs. Two threads whose works
/// then declared crossed halves of two split buffers (thread 1 holds `a`'s record and declares a
/// half of `b`, thread 2 holds `b`'s and declares a half of `a`) each waited for the record the
/// other held, for ever. A thread that holds shared records is now refused any other
/// (`Error::SharedDeclarationWhileHeld`), so neither waits; both threads hold their records
/// when they declare (a barrier inside both works), so the refusal does not depend on timing.
/// Then the right use, 200 rounds: each thread declares both of its halves in the one
/// `will_use_for` (locked in address order) and queues raw memsets inside; no hang, and every
/// value written lands.
///
/// Before the fix (expected): the child is killed at the deadline (`HUNG`). After: both inner
/// declarations `Err(SharedDeclarationWhileHeld ..)`, `s17 crossed: 200 rounds ok`.
#[test]
fn s17_will_use_for_crossed_split_buffers_do_not_deadlock() {
    const NAME: &str = "s17_will_use_for_crossed_split_buffers_do_not_deadlock";
    let Some(context) = gpu_or_skip(NAME) else { return };
    if !in_child(NAME) {
        let (stdout, _) = child_output(NAME);
        assert!(stdout.contains("s17 crossed: 200 rounds ok"), "{stdout}");
        return;
    }
    const N: usize = 1 << 12;
    let streams = [Stream::non_blocking(&context).unwrap(), Stream::non_blocking(&context).unwrap()];
    let mut a = DeviceBuffer::<u32>::zeroed(&context, 2 * N).unwrap();
    let mut b = DeviceBuffer::<u32>::zeroed(&context, 2 * N).unwrap();
    {
        let ((a1, a2), (b1, b2)) = (a.split_at_mut(N), b.split_at_mut(N));
        let both_hold = Barrier::new(2);
        let inner: Vec<String> = std::thread::scope(|scope| {
            let threads = [(0usize, a1, b1), (1, b2, a2)].map(|(stream, mut held, mut other)| {
                let (streams, both_hold) = (&streams, &both_hold);
                scope.spawn(move || {
                    let s = &streams[stream];
                    let outcome = s
                        .will_use_for(&[BufferAccess::write(&mut held)], || {
                            both_hold.wait();
                            s.enqueue("the other buffer's half", &[BufferAccess::write(&mut other)], |_| Ok::<_, Error>(()))
                        })
                        .unwrap();
                    format!("{outcome:?}")
                })
            });
            threads.map(|t| t.join().unwrap()).into_iter().collect()
        });
        println!("s17 crossed: inner declarations {inner:?}");
        for outcome in &inner {
            assert!(outcome.contains("SharedDeclarationWhileHeld"), "{outcome}");
        }
        let message = Error::SharedDeclarationWhileHeld { operation: "x".into(), argument: "y" }.to_string();
        assert!(message.contains("Declare all of the work's shared memory in the one `will_use_for`"), "{message}");
    }
    // The right use: both halves in one declaration, raw work inside, crossed on two threads.
    let rounds = 200u32;
    for round in 1..=rounds {
        let ((mut a1, mut a2), (mut b1, mut b2)) = (a.split_at_mut(N), b.split_at_mut(N));
        let start = Barrier::new(2);
        std::thread::scope(|scope| {
            for (stream, first, second) in [(0usize, &mut a1, &mut b1), (1, &mut b2, &mut a2)] {
                let (streams, start) = (&streams, &start);
                scope.spawn(move || {
                    let (p, q) = (first.as_device_ptr().address(), second.as_device_ptr().address());
                    let s = &streams[stream];
                    start.wait();
                    s.will_use_for(&[BufferAccess::write(first), BufferAccess::write(second)], || {
                        memset_raw(s, p, round, N).and_then(|()| memset_raw(s, q, round, N))
                    })
                    .unwrap()
                    .unwrap();
                });
            }
        });
    }
    // Host reads wait for both streams' last writes (the records kept them).
    let (a, b) = (a.to_vec().unwrap(), b.to_vec().unwrap());
    let wrong = a.iter().chain(&b).filter(|&&v| v != rounds).count();
    assert_eq!(wrong, 0, "{wrong} of {} values are not the last round's", a.len() + b.len());
    println!("s17 crossed: {rounds} rounds ok");
}

/// Session 17, found with item 1: a launch of an explicitly loaded module's kernel took the
/// module's globals gate (shared) **before** its arguments' records, and held it while it waited
/// for a record. Thread 1's launch with a half of a split buffer waited for the record that
/// thread 2's `will_use_for` held; thread 3's `Global::write` waited for the gate (exclusive)
/// behind thread 1; thread 2's work then launched a kernel of the same module and waited for the
/// gate behind the waiting writer (std's `RwLock` lets no reader pass a waiting writer): three
/// threads waiting in a cycle. The door now takes the gate after the arguments' records
/// (`Stream::enqueue_gated`), so a thread holding the gate waits for no record.
///
/// Before the fix (expected): `HUNG`. After: the three calls `Ok`, and the kernels wrote the
/// values they should (`s17 gate: ok`).
#[test]
fn s17_a_launch_waiting_for_a_held_record_holds_no_module_gate() {
    const NAME: &str = "s17_a_launch_waiting_for_a_held_record_holds_no_module_gate";
    let Some(context) = gpu_or_skip(NAME) else { return };
    if !in_child(NAME) {
        let (stdout, _) = child_output(NAME);
        assert!(stdout.contains("s17 gate: ok"), "{stdout}");
        return;
    }
    // SAFETY: `store_fill` as `STORE_FILL` describes it (one pointer).
    let module = unsafe { Module::load_ptx(&context, "s17_fill", FILL_PTX, &JitOptions::new().host_writable_globals(["FILL"])) }.unwrap();
    let fill = module.global::<u32>("FILL").unwrap();
    fill.write(&1).unwrap();
    let streams = [Stream::non_blocking(&context).unwrap(), Stream::non_blocking(&context).unwrap()];
    let mut a = DeviceBuffer::<u32>::zeroed(&context, 2).unwrap();
    {
        let (mut a1, mut a2) = a.split_at_mut(1);
        let (a1_address, a2_address) = (a1.as_device_ptr().address(), a2.as_device_ptr().address());
        let (holding_tx, holding_rx) = mpsc::channel::<()>();
        let outcomes = std::thread::scope(|scope| {
            let (streams, module, fill) = (&streams, &module, &fill);
            // Thread 2: holds `a`'s record, then launches the module's kernel (raw pointer).
            let holder = scope.spawn(move || {
                let s = &streams[1];
                s.will_use_for(&[BufferAccess::write(&mut a2)], || {
                    holding_tx.send(()).unwrap();
                    // Thread 1 now waits for `a`'s record, thread 3 for the gate (before the fix).
                    std::thread::sleep(Duration::from_millis(400));
                    launch_store_fill(module, s, a2_address, &[])
                })
                .map(|launched| format!("{launched:?}"))
            });
            holding_rx.recv().unwrap();
            // Thread 1: declares the other half (waits for the record thread 2 holds).
            let waiter =
                scope.spawn(move || launch_store_fill(module, &streams[0], a1_address, &[BufferAccess::write(&mut a1)]).map(|()| "launched".to_string()));
            // Thread 3: writes the global once thread 1 waits.
            let writer = scope.spawn(move || {
                std::thread::sleep(Duration::from_millis(150));
                fill.write(&9).map(|()| "written".to_string())
            });
            [holder.join().unwrap(), waiter.join().unwrap(), writer.join().unwrap()]
        });
        println!("s17 gate: holder {:?}, waiting launch {:?}, global write {:?}", outcomes[0], outcomes[1], outcomes[2]);
        for outcome in &outcomes {
            assert!(outcome.as_ref().is_ok_and(|s| !s.contains("Err")), "{outcome:?}");
        }
    }
    context.synchronize().unwrap();
    let values = a.to_vec().unwrap();
    // Thread 2's kernel ran before the write (it was queued holding nothing the write needed,
    // or after it: either value is a value the global held); thread 1's ran after thread 2's
    // work and saw 1 or 9 likewise. What matters is that both ran.
    assert!(values.iter().all(|v| *v == 1 || *v == 9), "{values:?}");
    println!("s17 gate: ok ({values:?})");
}

/// Session 17, found with item 1: `Stream::begin_capture` and `Stream::wait_event` wait for the
/// stream's `hold_off_capture` stretches on other threads. Inside `will_use_for`'s work holding
/// a half of a split buffer, that waited for a stretch whose own work waited for the held record
/// (thread 1 opens a stretch on `x`, then declares the other half; thread 2, holding the record,
/// begins capturing `x`): a deadlock. Both calls are now refused there
/// (`Error::WaitWhileDeclarationHeld`), and the stretch's work goes on once the record is let go.
///
/// Before the fix (expected): `HUNG`. After: `s17 stretch: begin_capture Err(WaitWhileDeclarationHeld ..)`.
#[test]
fn s17_a_capture_begun_inside_will_use_for_does_not_wait_for_a_stretch() {
    const NAME: &str = "s17_a_capture_begun_inside_will_use_for_does_not_wait_for_a_stretch";
    let Some(context) = gpu_or_skip(NAME) else { return };
    if !in_child(NAME) {
        let (stdout, _) = child_output(NAME);
        assert!(stdout.contains("s17 stretch: ok"), "{stdout}");
        return;
    }
    let x = Stream::non_blocking(&context).unwrap();
    let y = Stream::non_blocking(&context).unwrap();
    let mut a = DeviceBuffer::<u32>::zeroed(&context, 2).unwrap();
    let event = ferrocuda_host::Event::new(&context).unwrap();
    event.record(&y).unwrap();
    let (mut a1, mut a2) = a.split_at_mut(1);
    let (holding_tx, holding_rx) = mpsc::channel::<()>();
    let (begun, waited, stretch) = std::thread::scope(|scope| {
        let (x, y, event) = (&x, &y, &event);
        let holder = scope.spawn(move || {
            y.will_use_for(&[BufferAccess::write(&mut a2)], || {
                holding_tx.send(()).unwrap();
                // Thread 1's stretch is open and its declaration waits for `a`'s record.
                std::thread::sleep(Duration::from_millis(300));
                (x.begin_capture(), x.wait_event(event))
            })
            .unwrap()
        });
        holding_rx.recv().unwrap();
        let stretch = scope.spawn(move || {
            let _stretch = x.hold_off_capture("s17 stretch").unwrap();
            x.enqueue("the other half, inside a stretch", &[BufferAccess::write(&mut a1)], |_| Ok::<_, Error>(()))
        });
        let (begun, waited) = holder.join().unwrap();
        (begun, waited, stretch.join().unwrap())
    });
    println!("s17 stretch: begin_capture {begun:?}; wait_event {waited:?}; the stretch's declaration {stretch:?}");
    assert!(matches!(&begun, Err(Error::WaitWhileDeclarationHeld { operation }) if operation == "Stream::begin_capture"), "{begun:?}");
    assert!(matches!(&waited, Err(Error::WaitWhileDeclarationHeld { operation }) if operation == "Stream::wait_event"), "{waited:?}");
    assert!(stretch.is_ok(), "{stretch:?}");
    // Outside the work both are fine again.
    let graph = x.capture(|_| Ok(())).unwrap();
    drop(graph);
    x.wait_event(&event).unwrap();
    context.synchronize().unwrap();
    println!("s17 stretch: ok");
}

/// G16S-4 (audit 2026-11-28d review3): a buffer's release looks for captures that involve it
/// twice: first without the streams' gates (`Context::release_after_streams`), then under them
/// (`usage::release`). A `begin_capture` of one of its streams between the two made the second
/// look see a capture, which it took for another library's: the memory was leaked for the
/// process's life, with a message about a foreign capture, and counted nowhere. Now a capture of
/// ferrocuda's found there postpones the release until the context's captures end.
///
/// The race is a few microseconds wide: 2000 rounds, each dropping a 1 MiB buffer last used on
/// `s` on one thread while another begins capturing `s`, then ending the capture. The child
/// prints how the releases went (freed at once, or postponed and freed at the end of the
/// capture); the parent requires no foreign-capture message on its standard error, no leak
/// counted (`leaked_releases`), no release left pending after the last capture, and the pool's
/// memory back after a trim (no leaked megabytes).
///
/// Before the fix (expected, when the race hits): "outside ferrocuda's knowledge" on standard
/// error and memory missing. After: `g16s-4: ... leaked 0, pending 0`.
#[test]
fn g16s_4_a_buffer_dropped_while_its_stream_begins_capturing_is_freed_after_the_capture() {
    const NAME: &str = "g16s_4_a_buffer_dropped_while_its_stream_begins_capturing_is_freed_after_the_capture";
    let Some(context) = gpu_or_skip(NAME) else { return };
    if !in_child(NAME) {
        let (stdout, stderr) = child_output(NAME);
        assert!(!stderr.contains("outside ferrocuda's knowledge"), "a release met ferrocuda's own capture and leaked as a foreign one:\n{stderr}");
        assert!(stdout.contains("leaked 0, pending 0"), "{stdout}");
        return;
    }
    const ROUNDS: usize = 2000;
    const ELEMENTS: usize = 1 << 18; // 1 MiB
    let s = Stream::non_blocking(&context).unwrap();
    let leaked_before = ferrocuda_host::leaked_releases();
    let free_before = free_memory(&context);
    let (mut postponed, mut at_once) = (0usize, 0usize);
    for _ in 0..ROUNDS {
        let buffer = DeviceBuffer::<u32>::zeroed_async(&s, ELEMENTS).unwrap();
        let start = Barrier::new(2);
        std::thread::scope(|scope| {
            let (start, s) = (&start, &s);
            scope.spawn(move || {
                start.wait();
                drop(buffer);
            });
            start.wait();
            s.begin_capture().unwrap();
        });
        // The drop has returned: its release was either done or postponed until the capture ends.
        if context.deferred_releases() > 0 {
            postponed += 1;
        } else {
            at_once += 1;
        }
        drop(s.end_capture().unwrap());
    }
    context.synchronize().unwrap();
    let (leaked, pending) = (ferrocuda_host::leaked_releases() - leaked_before, context.deferred_releases());
    let free_after = free_memory(&context);
    println!(
        "g16s-4: {ROUNDS} rounds, releases postponed for the capture {postponed}, freed at once {at_once}; free memory {} MiB before, {} MiB after",
        free_before >> 20,
        free_after >> 20
    );
    // A leak of a fraction of the rounds' buffers would show as that many MiB; the pool may
    // keep a little (allow 64 MiB of 2000).
    assert!(free_after + (64 << 20) >= free_before, "{} MiB fewer free after the rounds", (free_before - free_after) >> 20);
    println!("g16s-4: leaked {leaked}, pending {pending}");
}

/// The device's free memory after the context's work and a trim of its default memory pool to 0.
fn free_memory(context: &Context) -> usize {
    context.synchronize().unwrap();
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: plain queries and a trim of the current device's default pool; the context is bound.
    unsafe {
        context.bind_to_thread().unwrap();
        let mut device = 0;
        driver::context::get_device(&mut device).unwrap();
        let mut pool = std::ptr::null_mut();
        driver::device::get_default_mem_pool(&mut pool, device).unwrap();
        assert_eq!(sys::cuMemPoolTrimTo(pool, 0), sys::CUresult::CUDA_SUCCESS);
        driver::memory::get_info(&mut free, &mut total).unwrap();
    }
    free
}
