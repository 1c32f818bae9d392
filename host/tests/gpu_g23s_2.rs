//! G23S-2 (audit 2026-11-29e, review2): the guards' list of `push_current` guards and binds
//! (host/src/context/current.rs) must not lose step with the thread's driver stack when something
//! other than a guard or bind changes it. The review's three cases, adapted to the fix: (a) and
//! (b), `Context::primary` and `Context::bind_to_thread` inside a live guard, are refused
//! (`Error::BindInsideGuard`) and the stack is left as it was; (c) another library's
//! `cuCtxSetCurrent` (here the raw call, standing for cudarc's own binds) replaces the top guard's
//! push with a context that another thread then destroys: the out-of-order drop of the guard
//! below no longer pops that context and pushes it back by name (the review's run ended in
//! "double free or corruption" at the next drop); every drop finds its push gone and leaves the
//! stack alone. Each case runs on a fresh thread (an empty stack). They skip without a GPU and
//! fail under `REQUIRE_GPU=1`.
//!
//! Run: `REQUIRE_GPU=1 cargo test --release -p ferrocuda-host --test gpu_g23s_2 -- --nocapture --test-threads=1`.

use cudarc::driver::sys;
use ferrocuda_host::{Context, Error, SchedulePolicy, Stream};

mod common;
use common::gpu_or_skip;

/// The thread's current driver context (null: none).
fn current_raw() -> sys::CUcontext {
    let mut raw = std::ptr::null_mut();
    // SAFETY: writes one handle.
    assert_eq!(unsafe { sys::cuCtxGetCurrent(&mut raw) }, sys::CUresult::CUDA_SUCCESS);
    raw
}

fn created() -> Context {
    Context::create(0, SchedulePolicy::Auto).unwrap()
}

/// (a) `Context::primary` inside a guard: refused (it used to replace the guard's push with the
/// primary context, which the guard does not hold), the guard's context still current, and the
/// caller's B current after the guard. Outside every guard it still makes the context current.
#[test]
fn g23s_2_a_primary_inside_a_guard_is_refused_and_the_stack_kept() {
    let Some(_primary) = gpu_or_skip("g23s_2_a_primary_inside_a_guard_is_refused_and_the_stack_kept") else { return };
    std::thread::spawn(|| {
        let (b, y) = (created(), created());
        let gb = b.push_current().unwrap();
        let g = y.push_current().unwrap();
        let refused = Context::primary(0);
        println!("G23S-2 a: Context::primary inside a guard: {:?}", refused.as_ref().map(|p| p.raw()));
        assert!(matches!(refused, Err(Error::BindInsideGuard { .. })), "{refused:?}");
        assert!(refused.unwrap_err().to_string().contains("push_current"), "the error says what to use");
        assert_eq!(current_raw(), y.raw(), "the refusal changed the thread's stack");
        drop(g);
        assert_eq!(current_raw(), b.raw(), "the caller's context is not current after the guard");
        drop(gb);
        assert!(current_raw().is_null());
        let p = Context::primary(0).unwrap();
        assert_eq!(current_raw(), p.raw(), "outside every guard `Context::primary` makes the context current");
        println!("G23S-2 a: held (current = B (the caller's) after the guard)");
    })
    .join()
    .unwrap();
}

/// (b) `bind_to_thread` of a created context inside a guard, then its last handle dropped: the
/// bind is refused, the destroy pops nothing of the guards', and the guard's drop pops its own
/// push (the caller's B current after, where the review saw none). The same refusal holds inside
/// a door call's `work` (a bind of ferrocuda's own).
#[test]
fn g23s_2_b_created_context_bound_inside_a_guard_then_dropped() {
    let Some(_primary) = gpu_or_skip("g23s_2_b_created_context_bound_inside_a_guard_then_dropped") else { return };
    std::thread::spawn(|| {
        let (b, y, x) = (created(), created(), created());
        let gb = b.push_current().unwrap();
        let g = y.push_current().unwrap();
        let refused = x.bind_to_thread();
        assert!(matches!(refused, Err(Error::BindInsideGuard { .. })), "{refused:?}");
        assert!(y.bind_to_thread().is_ok(), "binding the context already current changes nothing and is allowed");
        assert_eq!(current_raw(), y.raw());
        drop(x); // destroyed: not current, so pushed by its teardown and popped by the destroy
        assert_eq!(current_raw(), y.raw(), "the destroy popped the guard's push");
        drop(g);
        assert_eq!(current_raw(), b.raw(), "the caller's context is not current after the guard");
        drop(gb);
        assert!(current_raw().is_null());
        let door = created();
        let stream = Stream::non_blocking(&door).unwrap();
        let inside = stream.enqueue("g23s_2_b", &[], |_raw| Ok::<_, Error>((b.bind_to_thread(), current_raw()))).unwrap();
        assert!(matches!(inside.0, Err(Error::BindInsideGuard { .. })), "{:?}", inside.0);
        assert_eq!(inside.1, door.raw());
        assert!(current_raw().is_null(), "the door call left a context current");
        println!("G23S-2 b: held (current = B (the caller's) after the guard)");
    })
    .join()
    .unwrap();
}

/// (c) The review's out-of-order case, with the replacement made by another library
/// (`cuCtxSetCurrent`, which ferrocuda cannot refuse): g1 (Y), g2 (W), then X set current in
/// place of g2's push and destroyed on another thread. Dropping g1 out of order used to pop X
/// and push it back by name; now the drop sees that the top is not g2's recorded W and leaves
/// the stack alone, and so do g2's and gb's drops (nothing of theirs is on top). The thread's
/// stack stays as the other library left it: X (destroyed) on top, the driver's to answer
/// `CUDA_ERROR_CONTEXT_IS_DESTROYED` for.
#[test]
fn g23s_2_c_out_of_order_drop_after_a_foreign_replacement_names_nothing() {
    let Some(_primary) = gpu_or_skip("g23s_2_c_out_of_order_drop_after_a_foreign_replacement_names_nothing") else { return };
    std::thread::spawn(|| {
        let (b, y, w, x) = (created(), created(), created(), created());
        let x_raw = x.raw();
        let gb = b.push_current().unwrap();
        let g1 = y.push_current().unwrap();
        let g2 = w.push_current().unwrap();
        // SAFETY: x is alive; this stands for another library's bind (cudarc's `bind_to_thread`).
        assert_eq!(unsafe { sys::cuCtxSetCurrent(x_raw) }, sys::CUresult::CUDA_SUCCESS);
        let q = std::thread::spawn(move || {
            drop(x);
            created()
        })
        .join()
        .unwrap();
        println!("G23S-2 c: a new context reused the destroyed one's address: {}", q.raw() == x_raw);
        drop(g1);
        let after_g1 = current_raw();
        println!("G23S-2 c: after g1's out-of-order drop, current = {after_g1:?} (X {x_raw:?}, W {:?})", w.raw());
        assert_eq!(after_g1, x_raw, "the stack was changed under the other library's entry");
        drop(g2);
        assert_eq!(current_raw(), x_raw, "g2's drop popped an entry that is not its own");
        drop(gb);
        assert_eq!(current_raw(), x_raw, "gb's drop popped an entry that is not its own");
        println!("G23S-2 c: held (no drop popped or named the destroyed X; the process is alive)");
    })
    .join()
    .unwrap();
}

/// (c) with the replacement still alive and in step again before the drops (the other library
/// restored g2's context): out-of-order drops then work as before (G23S-1's F4 case).
#[test]
fn g23s_2_c_out_of_order_drops_in_step_still_remove_from_under() {
    let Some(_primary) = gpu_or_skip("g23s_2_c_out_of_order_drops_in_step_still_remove_from_under") else { return };
    std::thread::spawn(|| {
        let (b, y, w) = (created(), created(), created());
        let gb = b.push_current().unwrap();
        let g1 = y.push_current().unwrap();
        let g2 = w.push_current().unwrap();
        drop(g1);
        assert_eq!(current_raw(), w.raw(), "the innermost live guard's context is not current");
        drop(g2);
        assert_eq!(current_raw(), b.raw(), "g1's entry was not taken from under g2");
        drop(gb);
        assert!(current_raw().is_null());
    })
    .join()
    .unwrap();
}
