//! G23S-2 (audit 2026-11-29e, review2): the guards' list (`host/src/context/current.rs`)
//! counts the pushes of `push_current` guards and, since G23S-1, of `Context::bind`; it does
//! not count two edits that ferrocuda itself makes to the thread's driver stack:
//! - `Bound::keep` (`Context::bind_to_thread`, and so every `Context::primary`): pops the bind
//!   and `cuCtxSetCurrent`s, which REPLACES the top entry, a live guard's own push;
//! - the teardown of a created context that is current on the thread: `cuCtxDestroy` pops it.
//!
//! After either, the list and the stack disagree, and a guard's drop pops an entry that is not
//! its own (the caller's context, below all the guards), or `remove_from_stack` pops a context
//! no guard holds and pushes it back BY NAME (`cuCtxPushCurrent(handle)`) after it was
//! destroyed on another thread: the G21 rule ("never name a context the guard does not hold")
//! and the guards' invariant ("the context current on the thread is the innermost live
//! guard's, or with none left the one current before the first") both break.
//!
//! Safe code only, apart from the observation (`cuCtxGetCurrent` through cudarc's safe
//! `result::ctx::get_current`). Each case runs on a fresh thread (an empty driver stack).
//! Build (from the worktree root, reusing the host crate's release build):
//!   cp audit/2026-11-29e/G23S-2/g23s_2.rs host/examples/g23s_2.rs
//!   cargo build --release -p ferrocuda-host --example g23s_2
//! Run: target/release/examples/g23s_2   (prints `G23S-2 <case>: UNSOUND|held ...` per case)

use ferrocuda_host::{Context, SchedulePolicy};

fn current() -> usize {
    cudarc::driver::result::ctx::get_current().ok().flatten().map_or(0, |c| c as usize)
}

fn verdict(case: &str, expected: usize, got: usize, names: &[(&str, usize)]) {
    let name = |v: usize| names.iter().find(|(_, r)| *r == v).map_or(format!("{v:#x}"), |(n, _)| (*n).to_string());
    if expected == got {
        println!("G23S-2 {case}: held (current = {})", name(got));
    } else {
        println!("G23S-2 {case}: UNSOUND: current = {} where the guards' invariant says {}", name(got), name(expected));
    }
}

/// (a) `Context::primary` inside a guard, then the primary handle dropped (released to 0).
fn primary_inside_a_guard() -> ferrocuda_host::Result<()> {
    let b = Context::create(0, SchedulePolicy::Auto)?; // "the caller's context" (another library's)
    let y = Context::create(0, SchedulePolicy::Auto)?;
    let gb = b.push_current()?;
    let g = y.push_current()?;
    let p = Context::primary(0)?; // bind_to_thread: replaces g's entry (Y) with P
    let p_raw = p.raw() as usize;
    drop(p); // released; if the release pops P, g's drop below pops B
    drop(g);
    verdict(
        "a: primary inside a guard, dropped",
        b.raw() as usize,
        current(),
        &[("B (the caller's)", b.raw() as usize), ("Y", y.raw() as usize), ("P (released)", p_raw), ("none", 0)],
    );
    drop(gb);
    Ok(())
}

/// (b) `bind_to_thread` of a created context inside a guard, then its last handle dropped on
/// this thread: `cuCtxDestroy` pops it, and the guard's drop pops the caller's context.
fn created_bound_inside_a_guard_then_dropped() -> ferrocuda_host::Result<()> {
    let b = Context::create(0, SchedulePolicy::Auto)?;
    let y = Context::create(0, SchedulePolicy::Auto)?;
    let x = Context::create(0, SchedulePolicy::Auto)?;
    let x_raw = x.raw() as usize;
    let gb = b.push_current()?;
    let g = y.push_current()?;
    x.bind_to_thread()?; // [B, X]: g's entry replaced
    drop(x); // destroyed, popped: [B]
    drop(g); // pops B
    verdict(
        "b: created context bound inside a guard, dropped",
        b.raw() as usize,
        current(),
        &[("B (the caller's)", b.raw() as usize), ("Y", y.raw() as usize), ("X (destroyed)", x_raw), ("none", 0)],
    );
    drop(gb);
    Ok(())
}

/// (c) Guards dropped out of order after a bind_to_thread replaced the top guard's entry with a
/// context that another thread then destroys: `remove_from_stack` pops the destroyed handle and
/// pushes it back by name; it stays current under the live guard g2 (whose context is W).
fn out_of_order_renames_a_destroyed_context() -> ferrocuda_host::Result<()> {
    let b = Context::create(0, SchedulePolicy::Auto)?;
    let y = Context::create(0, SchedulePolicy::Auto)?;
    let w = Context::create(0, SchedulePolicy::Auto)?;
    let x = Context::create(0, SchedulePolicy::Auto)?;
    let x_raw = x.raw() as usize;
    let gb = b.push_current()?;
    let g1 = y.push_current()?;
    let g2 = w.push_current()?;
    x.bind_to_thread()?; // [B, Y, X]: g2's entry replaced
    // X destroyed on another thread (it stays on this thread's stack, as the driver keeps it);
    // a context made there right after may take its address (then it is the one re-pushed).
    let q = std::thread::spawn(move || {
        drop(x);
        Context::create(0, SchedulePolicy::Auto).ok()
    })
    .join()
    .expect("drop thread");
    let reused = q.as_ref().is_some_and(|q| q.raw() as usize == x_raw);
    drop(g1); // out of order: pops "g2's" entry (X, destroyed) and pushes it back by name
    let names = [("B", b.raw() as usize), ("Y", y.raw() as usize), ("W (g2's)", w.raw() as usize), ("X (destroyed)", x_raw), ("none", 0)];
    let got = current();
    println!("G23S-2 c: a new context reused the destroyed one's address: {reused}");
    verdict("c: out-of-order drop under g2 after X destroyed elsewhere", w.raw() as usize, got, &names);
    drop(g2);
    verdict("c': after g2", b.raw() as usize, current(), &names);
    drop(gb);
    Ok(())
}

fn on_fresh_thread(f: fn() -> ferrocuda_host::Result<()>) {
    match std::thread::spawn(f).join() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => println!("G23S-2: error: {e}"),
        Err(_) => println!("G23S-2: the case panicked"),
    }
}

fn main() {
    if !ferrocuda_host::driver_present() {
        println!("G23S-2: skipped: no CUDA driver");
        if std::env::var_os("REQUIRE_GPU").is_some() {
            std::process::exit(1);
        }
        return;
    }
    on_fresh_thread(primary_inside_a_guard);
    on_fresh_thread(created_bound_inside_a_guard_then_dropped);
    on_fresh_thread(out_of_order_renames_a_destroyed_context);
}
