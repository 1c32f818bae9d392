//! Session 23's soundness round ("sound"), host API only (no kernel crate). They skip without a
//! GPU and fail under `REQUIRE_GPU=1`.
//!
//! - G23S-1: session 22 made every internal bind (`Context::bind`) of another context push onto
//!   the driver's context stack, the stack `Context::push_current`'s guards pop; a guard dropped
//!   inside a door call's `work` (`Stream::enqueue`, where the door's bind is live) popped the
//!   door's push instead of its own, and one made inside `work` and returned out of it left the
//!   door's push on the stack for good. Either way a context stayed current on the thread after
//!   every guard was gone (a created one, for the CUDA runtime of other libraries to allocate
//!   in: G20R-4's class).
//! - s23 `.const`: `.const` data is writable by the host only when the loader names it.
//!
//! Run: `REQUIRE_GPU=1 cargo test --release -p ferrocuda-host --test gpu_s23_sound -- --nocapture --test-threads=1`.

use cudarc::driver::sys;
use ferrocuda_host::{Context, Error, JitOptions, Module, SchedulePolicy, Stream};

mod common;
use common::gpu_or_skip;

/// The thread's current driver context (null: none).
fn current_raw() -> sys::CUcontext {
    let mut raw = std::ptr::null_mut();
    // SAFETY: writes one handle.
    assert_eq!(unsafe { sys::cuCtxGetCurrent(&mut raw) }, sys::CUresult::CUDA_SUCCESS);
    raw
}

/// G23S-1, first way: a guard made before a door call and dropped inside its `work`. On a new
/// thread (no current context), with the door's stream in one created context and the guard's
/// in another: inside `work` the door's context must stay current after the drop, and after
/// the call no context may be left current.
#[test]
fn g23s_1_a_guard_dropped_inside_door_work_pops_its_own_push() {
    let Some(_primary) = gpu_or_skip("g23s_1_a_guard_dropped_inside_door_work_pops_its_own_push") else { return };
    let door = Context::create(0, SchedulePolicy::Auto).unwrap();
    let guarded = Context::create(0, SchedulePolicy::Auto).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            assert!(current_raw().is_null());
            let stream = Stream::non_blocking(&door).unwrap();
            let guard = guarded.push_current().unwrap();
            assert_eq!(current_raw(), guarded.raw());
            let inside = stream
                .enqueue("g23s_1", &[], |_raw| {
                    let before = current_raw();
                    drop(guard);
                    Ok::<_, Error>((before, current_raw()))
                })
                .unwrap();
            println!(
                "G23S-1 drop inside work: current before {:?}, after the drop {:?} (door {:?}, guard {:?})",
                inside.0,
                inside.1,
                door.raw(),
                guarded.raw()
            );
            assert_eq!(inside.0, door.raw(), "the door binds its stream's context for `work`");
            assert_eq!(inside.1, door.raw(), "the guard's drop popped the door's push instead of its own");
            assert!(current_raw().is_null(), "a context was left current after the door call and the guard: {:?}", current_raw());
        })
        .join()
        .unwrap();
    });
}

/// G23S-1, second way: a guard made inside `work` and returned out of the door call. It stays
/// in force after the call (its context current), and its drop leaves no context current.
#[test]
fn g23s_1_a_guard_returned_out_of_door_work_leaves_nothing_current() {
    let Some(_primary) = gpu_or_skip("g23s_1_a_guard_returned_out_of_door_work_leaves_nothing_current") else { return };
    let door = Context::create(0, SchedulePolicy::Auto).unwrap();
    let guarded = Context::create(0, SchedulePolicy::Auto).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            assert!(current_raw().is_null());
            let stream = Stream::non_blocking(&door).unwrap();
            let guard = stream.enqueue("g23s_1", &[], |_raw| guarded.push_current()).unwrap();
            let after_call = current_raw();
            drop(guard);
            let after_drop = current_raw();
            println!(
                "G23S-1 guard out of work: after the call {after_call:?}, after its drop {after_drop:?} (door {:?}, guard {:?})",
                door.raw(),
                guarded.raw()
            );
            assert_eq!(after_call, guarded.raw(), "the guard returned out of the call is no longer in force");
            assert!(after_drop.is_null(), "the door's push was left on the stack: {after_drop:?} current after every guard");
            // Nested the other way too: a guard over the door's context itself.
            let guard = door.push_current().unwrap();
            let inner = stream.enqueue("g23s_1", &[], |_raw| guarded.push_current()).unwrap();
            drop(guard);
            assert_eq!(current_raw(), guarded.raw(), "the innermost live guard's context is current");
            drop(inner);
            assert!(current_raw().is_null(), "{:?}", current_raw());
        })
        .join()
        .unwrap();
    });
}

/// PTX with one visible `.const` table and an empty kernel.
const CONST_PTX: &str = ".version 7.0\n.target sm_70\n.address_size 64\n\
    .visible .const .align 4 .b8 CT[16] = {1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0};\n\
    .visible .entry s23_k()\n{\n\tret;\n}\n";

/// Session 23: `.const` data is read-only to the host unless the loader names it (it used to be
/// writable without a name; nvcc folds a `const`-qualified `__constant__` and declares it as a
/// mutable one, session 22). The refusal says it is `.const` data and how to name it.
#[test]
fn s23_const_data_is_written_only_when_the_loader_names_it() {
    let Some(context) = gpu_or_skip("s23_const_data_is_written_only_when_the_loader_names_it") else { return };
    // SAFETY: the kernel is never launched; `CT` is read by nothing on the device.
    let module = unsafe { Module::load_ptx(&context, "s23_const", CONST_PTX, &JitOptions::new()) }.unwrap();
    let table = module.global::<[u32; 4]>("CT").unwrap();
    assert_eq!(table.read().unwrap(), [1, 2, 3, 4]);
    assert!(!table.is_writable());
    match table.write(&[9; 4]) {
        Err(error @ Error::GlobalReadOnly { constant: true, .. }) => {
            let message = error.to_string();
            println!("S23 CONST REFUSED: {message}");
            assert!(message.contains("`.const`") && message.contains("host_writable_globals([\"CT\"])"), "{message}");
        }
        other => panic!("an unnamed `.const` global was not refused: {other:?}"),
    }
    assert_eq!(table.read().unwrap(), [1, 2, 3, 4]);
    // SAFETY: as above; `CT` is named because nothing assumes its value.
    let named = unsafe { Module::load_ptx(&context, "s23_const_named", CONST_PTX, &JitOptions::new().host_writable_globals(["CT"])) }.unwrap();
    let table = named.global::<[u32; 4]>("CT").unwrap();
    table.write(&[5, 6, 7, 8]).unwrap();
    assert_eq!(table.read().unwrap(), [5, 6, 7, 8]);
    println!("S23 CONST NAMED written");
}
