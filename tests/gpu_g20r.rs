//! GPU regression tests of the held-out review of session 20 (audit/2026-11-28h/FINDINGS.md),
//! named for the findings (`g20r<n>_...`): G20R-4 (a created context left current on the
//! thread) and G20R-5 (the compiler's own module data handed to safe code). G20R-1 needs two
//! GPUs: `collectives/tests/gpu_peer_lengths.rs`. They skip without a GPU and fail under
//! `REQUIRE_GPU=1`.
//!
//! Run: `REQUIRE_GPU=1 cargo test --release --test gpu_g20r -- --nocapture --test-threads=1`.

mod common;

use std::process::Command;

use ferrocuda::{Context, DeviceBuffer, Error, JitOptions, LaunchConfig, Module, SchedulePolicy, Stream, sys};
use gpu_kernels::saxpy;
use test_kernels::square_checked;

/// The thread's current driver context (null: none).
fn current_raw() -> sys::CUcontext {
    let mut raw = std::ptr::null_mut();
    // SAFETY: writes one handle.
    assert_eq!(unsafe { sys::cuCtxGetCurrent(&mut raw) }, sys::CUresult::CUDA_SUCCESS);
    raw
}

/// Buffers, a stream, a launch, a copy back and a synchronisation in `context`.
fn work_in(context: &Context) -> ferrocuda::Result<Vec<f32>> {
    let stream = Stream::new(context)?;
    let x = DeviceBuffer::from_slice(context, &[1.0f32; 1000])?;
    let mut y = DeviceBuffer::from_slice(context, &[2.0f32; 1000])?;
    saxpy::launch(&stream, LaunchConfig::for_elements(1000, 256), 3.0, &x, &mut y)?;
    stream.synchronize()?;
    context.synchronize()?;
    let _ = context.memory_info()?;
    y.to_vec()
}

/// G20R-4: `Context::create` made its context current on the calling thread, and every later
/// ferrocuda call with it bound it again and left it current. The CUDA runtime (PyTorch,
/// cuDNN, any C++ library on that thread) uses the current context for its own allocations,
/// so they landed in ferrocuda's created context, which its safe drop destroys. Now a created
/// context is never left current: after `create`, after work in it and after its drop, the
/// thread's current context is the one it was before (the primary one here, and none when
/// there was none).
#[test]
fn g20r4_a_created_context_is_never_left_current() {
    let Some(primary) = common::gpu_or_skip("g20r4_a_created_context_is_never_left_current") else { return };
    // As after the runtime's first call (torch's): the primary context is current.
    primary.bind_to_thread().unwrap();
    let before = current_raw();
    assert_eq!(before, primary.raw());

    let created = Context::create(0, SchedulePolicy::Auto).unwrap();
    assert_ne!(created.raw(), primary.raw());
    assert_eq!(current_raw(), before, "Context::create left its context current");
    assert_eq!(work_in(&created).unwrap(), vec![5.0f32; 1000]);
    assert_eq!(current_raw(), before, "work in a created context left it current");
    // A buffer of the created context, made and dropped, and the context's drop.
    let kept = DeviceBuffer::<u8>::zeroed(&created, 1 << 20).unwrap();
    assert_eq!(current_raw(), before);
    drop(kept);
    assert_eq!(current_raw(), before, "a buffer's release left the created context current");
    drop(created);
    assert_eq!(current_raw(), before, "the created context's teardown did not restore the current context");
    // The primary context still works from this thread.
    assert_eq!(work_in(&primary).unwrap(), vec![5.0f32; 1000]);

    // With no context current at all (a fresh thread of a program that has not used the
    // runtime), none is left current either.
    std::thread::spawn(|| {
        assert!(current_raw().is_null(), "a new thread starts without a current context");
        let created = Context::create(0, SchedulePolicy::Auto).unwrap();
        assert!(current_raw().is_null(), "Context::create made its context current on a thread that had none");
        assert_eq!(work_in(&created).unwrap(), vec![5.0f32; 1000]);
        assert!(current_raw().is_null(), "work in a created context left it current on a thread that had none");
        // `push_current` still makes it current on request, and restores what was before.
        {
            let _guard = created.push_current().unwrap();
            assert_eq!(current_raw(), created.raw());
            assert_eq!(work_in(&created).unwrap(), vec![5.0f32; 1000]);
            assert_eq!(current_raw(), created.raw(), "a ferrocuda call unbound a context pushed by the caller");
        }
        assert!(current_raw().is_null());
        drop(created);
        assert!(current_raw().is_null());
    })
    .join()
    .unwrap();
}

/// Session 21, G20R-4's class for borrowed contexts: `Context::from_raw` of a context that is
/// not primary made it current, and every ferrocuda call with it left it current, so another
/// library's runtime allocations on the thread went into a context its owner destroys. Now a
/// borrowed context is bound for ferrocuda's calls only, like a created one.
#[test]
fn g21_a_borrowed_context_is_never_left_current() {
    let Some(primary) = common::gpu_or_skip("g21_a_borrowed_context_is_never_left_current") else { return };
    primary.bind_to_thread().unwrap();
    let before = current_raw();
    let owner = Context::create(0, SchedulePolicy::Auto).unwrap();
    // SAFETY: `owner` (the keep-alive) keeps the context alive while the borrowed handle lives.
    let borrowed = unsafe { Context::from_raw(owner.raw(), owner.clone()) }.unwrap();
    assert!(!borrowed.is_primary());
    assert_eq!(current_raw(), before, "Context::from_raw left the borrowed context current");
    assert_eq!(work_in(&borrowed).unwrap(), vec![5.0f32; 1000]);
    assert_eq!(current_raw(), before, "work in a borrowed context left it current");
    drop(borrowed);
    assert_eq!(current_raw(), before, "the borrowed handle's teardown left a context current");
    drop(owner);
    assert_eq!(current_raw(), before);
}

/// Session 21: the guard that binds a created context for a ferrocuda call restored the
/// context current before it by naming it (`cuCtxSetCurrent(previous)`). When that context's
/// owner had destroyed it meanwhile (here: before the call, from another thread, while it was
/// current on this one), the restore passed a dangling handle to the driver, which refused it,
/// and ferrocuda's created context stayed current (G20R-4 again), or, had a new context taken
/// the address, made a stranger's context current. Now the guard pushes and pops: the driver's
/// own stack brings the previous entry back, destroyed or not, and ferrocuda's context is never
/// left current. What the driver then reports for the destroyed context is printed.
#[test]
fn g21_the_bind_guard_never_restores_a_destroyed_context_by_name() {
    let Some(_primary) = common::gpu_or_skip("g21_the_bind_guard_never_restores_a_destroyed_context_by_name") else { return };
    std::thread::spawn(|| {
        let foreign = Context::create(0, SchedulePolicy::Auto).unwrap();
        let foreign_raw = foreign.raw();
        // The foreign context current on this thread (as another library's would be); its last
        // handle goes to another thread, which destroys it while it is current here.
        foreign.bind_to_thread().unwrap();
        assert_eq!(current_raw(), foreign_raw);
        std::thread::spawn(move || drop(foreign)).join().unwrap();
        assert_eq!(current_raw(), foreign_raw, "the driver keeps a destroyed context current on the threads it was current on");
        let mine = Context::create(0, SchedulePolicy::Auto).unwrap();
        let result = work_in(&mine);
        let after = current_raw();
        println!(
            "g21: work in the created context: {:?}; current after: {after:?} (the destroyed one: {foreign_raw:?}, ferrocuda's: {:?})",
            result.as_ref().map(|v| v[0]),
            mine.raw()
        );
        assert_eq!(result.unwrap(), vec![5.0f32; 1000]);
        assert_ne!(after, mine.raw(), "ferrocuda's created context was left current after restoring a destroyed context failed");
        assert!(after.is_null() || after == foreign_raw, "a context other than the one current before the call is current: {after:?}");
        if after == foreign_raw {
            // SAFETY: no arguments; acts on the current context (the destroyed one).
            let code = unsafe { sys::cuCtxSynchronize() };
            println!("g21: cuCtxSynchronize on the destroyed context: {code:?}");
            assert_ne!(code, sys::CUresult::CUDA_SUCCESS, "the destroyed context answered as if alive");
        }
        drop(mine);
        // The teardown of ferrocuda's context pops it too: the thread is as before the call.
        assert_eq!(current_raw(), after, "the created context's teardown changed the current context");
    })
    .join()
    .unwrap();
}

const CHILD: &str = "FERROCUDA_G20R_CHILD";

/// The module-internal data names (`anon_$...`) of an image: PTX words or cubin strings.
fn internal_names(image: &[u8]) -> Vec<String> {
    let mut names: Vec<String> = image
        .split(|b| !(b.is_ascii_alphanumeric() || *b == b'_' || *b == b'$'))
        .filter(|w| w.starts_with(b"anon_$"))
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// G20R-5: `Module::global` refused only ferrocuda's `__ferrocuda_` names (G14-1) and handed
/// out the compiler's own module-internal data of a `#[kernel]` crate: a safe write of a
/// bounds check's panic `Location` made the device panic handler copy any device memory into
/// the panic report. Now every module-internal global, of a cubin and of PTX, is refused
/// (`Error::ModuleInternalGlobal`), and the panic report names the real source file. A
/// `.visible` global is still handed out.
#[test]
fn g20r5_the_compilers_constants_are_not_handed_to_safe_code() {
    const TEST: &str = "g20r5_the_compilers_constants_are_not_handed_to_safe_code";
    if std::env::var(CHILD).is_ok_and(|name| name == TEST) {
        return g20r5_child();
    }
    if common::gpu_or_skip(TEST).is_none() {
        return;
    }
    // In a child: the launch ends with a device panic, which poisons the process.
    let output = Command::new(std::env::current_exe().unwrap()).args([TEST, "--exact", "--nocapture", "--test-threads=1"]).env(CHILD, TEST).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    println!("child output:\n{text}");
    assert!(!text.contains("G20R-5 HANDED OUT"), "module-internal data was handed to safe code:\n{text}");
    assert!(text.contains("G20R-5 REFUSED cubin") || text.contains("G20R-5 NO CUBIN"), "{text}");
    assert!(text.contains("G20R-5 REFUSED ptx"), "{text}");
    assert!(text.contains("G20R-5 VISIBLE 7 -> 9"), "a `.visible` global named host-writable is no longer handed out:\n{text}");
    assert!(text.contains("G21 READ-ONLY refused, still 5"), "a `.global` not named host-writable was written:\n{text}");
    assert!(text.contains("G20R-5 PANIC") && text.contains("tests/kernels/src/lib.rs"), "the panic report does not name the real file:\n{text}");
    assert!(text.contains("G20R-5 CHILD DONE"), "the child did not finish:\n{text}");
}

fn g20r5_child() {
    let context = Context::primary(0).unwrap();
    let arch = context.device().arch().unwrap();
    let images = &test_kernels::KERNELS;
    let ptx_arch = [arch, 90, 80, 75, 70].into_iter().find(|&a| a <= arch && images.ptx_for(a).is_some()).expect("test_kernels has PTX for this GPU");
    let ptx = images.ptx_for(ptx_arch).unwrap();
    // The cubin for this GPU, if built, loaded under its contract: this project's own build,
    // launched only through its own typed launcher.
    match images.cubin_for(arch) {
        Some(cubin) => {
            // SAFETY: as above: the contract of `Module::load_binary` holds.
            let module = unsafe { Module::load_binary(&context, "g20r5_cubin", cubin, &JitOptions::new()) }.unwrap();
            refuse_all(&module, "cubin", &internal_names(cubin));
        }
        None => println!("G20R-5 NO CUBIN for sm_{arch}"),
    }
    // The PTX, with one global the device code declares visible appended (as a kernel crate's
    // `#[unsafe(no_mangle)] static mut` is).
    // Session 21: a second visible global, not named host-writable, as an immutable
    // `#[unsafe(no_mangle)] static` is declared (the same form as a `static mut`).
    let with_visible = format!("{ptx}\n.visible .global .align 4 .u32 G20R5_VISIBLE = 7;\n.visible .global .align 4 .u32 G21_IMMUTABLE = 5;\n");
    // SAFETY: this project's own PTX plus two globals no kernel reads, of which only the one
    // named host-writable is written; launched only through its own typed launcher
    // (`launch_in` checks the fingerprint).
    let options = JitOptions::new().host_writable_globals(["G20R5_VISIBLE"]);
    let module = unsafe { Module::load_ptx(&context, "g20r5_ptx", &with_visible, &options) }.unwrap();
    refuse_all(&module, "ptx", &internal_names(ptx.as_bytes()));
    let visible = module.global::<u32>("G20R5_VISIBLE").unwrap();
    let was = visible.read().unwrap();
    visible.write(&9).unwrap();
    println!("G20R-5 VISIBLE {was} -> {}", visible.read().unwrap());
    let immutable = module.global::<u32>("G21_IMMUTABLE").unwrap();
    match immutable.write(&9) {
        Err(Error::GlobalReadOnly { .. }) => println!("G21 READ-ONLY refused, still {}", immutable.read().unwrap()),
        other => println!("G21 READ-ONLY written: {other:?}"),
    }

    // The bounds check's panic reports where it is: threads 40..64 index past 40 outputs.
    let stream = Stream::non_blocking(&context).unwrap();
    let x = DeviceBuffer::from_slice(&context, &(0..64u32).collect::<Vec<_>>()).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(&context, 40).unwrap();
    square_checked::launch_in(&module, &stream, LaunchConfig::from((2u32, 32u32)), &x, &mut out).unwrap();
    let error = stream.synchronize().unwrap_err();
    println!("G20R-5 PANIC {error}");
    println!("G20R-5 CHILD DONE");
}

/// Asks `module` for each name as a `Location`-sized global and prints what happened.
fn refuse_all(module: &Module, kind: &str, names: &[String]) {
    assert!(!names.is_empty(), "no module-internal data found in the {kind} image: the test would prove nothing");
    let mut refused = 0;
    for name in names {
        // Every size the compiler's data has here is tried through the size check's error too.
        match module.global::<[u64; 3]>(name) {
            Err(Error::ModuleInternalGlobal { .. }) => refused += 1,
            Ok(_) => println!("G20R-5 HANDED OUT {kind} {name}"),
            Err(Error::GlobalSizeMismatch { .. }) => println!("G20R-5 HANDED OUT {kind} {name} (found by the driver, refused by size only)"),
            Err(other) => println!("G20R-5 OTHER {kind} {name}: {other}"),
        }
    }
    println!("G20R-5 REFUSED {kind}: {refused} of {} module-internal names", names.len());
    assert_eq!(refused, names.len());
}
