//! The per-thread current context: a guard that pushes one and pops it again.
//!
//! Guards may be dropped in any order (F4, audit 2026-11-27c): the driver's context stack is
//! kept in step with the guards still alive. Dropping the innermost guard pops its context;
//! dropping one that others were pushed above removes its own entry from under them (the
//! contexts above are popped and pushed back), and the guard above it inherits what it was to
//! restore. The context current on the thread is then always the innermost live guard's (or,
//! with none left, the one current before the first), and [`Context::current`] agrees.

use std::cell::{Cell, RefCell};
use std::marker::PhantomData;
use std::sync::Weak;

use cudarc::driver::sys;

use super::{CURRENT, Context, ContextInner};
use crate::driver;

/// Keeps a context current on this thread (see [`Context::push_current`]); dropping it pops
/// the context and restores the one that was current before. Guards nest, and may be dropped
/// out of order: the context of the innermost guard still alive stays current.
#[must_use = "the context is popped again as soon as the guard drops"]
pub struct CurrentGuard {
    pub(super) _context: Context,
    /// This guard's entry in [`GUARDS`].
    pub(super) id: u64,
    /// The driver's context stack is per thread: the guard must drop where it was made.
    pub(super) _not_send: PhantomData<*const ()>,
}

/// One live guard of this thread: its id and the context current before it was pushed.
struct Entry<P = Weak<ContextInner>> {
    id: u64,
    previous: P,
}

thread_local! {
    /// This thread's live guards, innermost last (one per context this thread's guards pushed
    /// onto the driver's stack, in the same order).
    static GUARDS: RefCell<Vec<Entry>> = const { RefCell::new(Vec::new()) };
    static NEXT_ID: Cell<u64> = const { Cell::new(0) };
}

impl CurrentGuard {
    /// Records a guard whose context was just pushed; `previous` is what its drop restores.
    pub(super) fn pushed(context: Context, previous: Weak<ContextInner>) -> CurrentGuard {
        let id = NEXT_ID.with(|n| {
            let id = n.get();
            n.set(id + 1);
            id
        });
        GUARDS.with(|g| g.borrow_mut().push(Entry { id, previous }));
        CurrentGuard { _context: context, id, _not_send: PhantomData }
    }
}

impl Drop for CurrentGuard {
    fn drop(&mut self) {
        let removed = GUARDS.with(|g| remove_entry(&mut g.borrow_mut(), self.id));
        let Some(Removed { above, previous }) = removed else { return };
        if above == 0 {
            let mut popped = std::ptr::null_mut();
            // SAFETY: balances the push in `push_current` (on this thread: the guard is !Send).
            let _ = unsafe { driver::context::pop_current(&mut popped) };
            CURRENT.with(|c| *c.borrow_mut() = previous);
        } else {
            // Guards pushed after this one are still alive: their contexts stay on top, this
            // guard's entry goes from under them; the current context does not change.
            // SAFETY: pops `above + 1` entries of this thread's stack, which its guards pushed,
            // and pushes back all but the lowest (the one this guard's push made), in order.
            unsafe { remove_from_stack(above) };
        }
    }
}

/// What [`remove_entry`] found: how many live guards were pushed after the removed one, and
/// what the removed one was to restore (already handed to the guard above it, if any).
#[derive(Debug)]
struct Removed<P> {
    above: usize,
    previous: P,
}

/// Removes guard `id` from `guards`; the guard pushed right after it, if any, now restores
/// what `id` would have restored. `None` if `id` is not there (cannot happen: each guard
/// drops once, on its thread).
fn remove_entry<P: Default>(guards: &mut Vec<Entry<P>>, id: u64) -> Option<Removed<P>> {
    let index = guards.iter().position(|e| e.id == id)?;
    let entry = guards.remove(index);
    let above = guards.len() - index;
    if above == 0 {
        Some(Removed { above, previous: entry.previous })
    } else {
        guards[index].previous = entry.previous;
        Some(Removed { above, previous: P::default() })
    }
}

/// Removes the stack entry `above` entries below the top of this thread's context stack,
/// keeping the ones above it in order.
///
/// # Safety
/// The top `above + 1` entries of the calling thread's stack are this thread's guards' pushes.
unsafe fn remove_from_stack(above: usize) {
    let mut kept: Vec<sys::CUcontext> = Vec::with_capacity(above);
    for _ in 0..above {
        let mut popped = std::ptr::null_mut();
        // SAFETY: the caller's contract: a guard's push is there to pop.
        if unsafe { driver::context::pop_current(&mut popped) }.is_err() {
            break;
        }
        kept.push(popped);
    }
    let mut removed = std::ptr::null_mut();
    // SAFETY: as above: the dropped guard's own push.
    let _ = unsafe { driver::context::pop_current(&mut removed) };
    for context in kept.into_iter().rev() {
        // SAFETY: a context just popped from this stack, kept alive by the live guard that
        // pushed it (its `_context`), pushed back where it was.
        let _ = unsafe { driver::context::push_current(context) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// F4: the bookkeeping of out-of-order drops. Guards a, b, c pushed in that order (the
    /// contexts current before each: "before a", "before b", "before c"); b dropped first is
    /// removed from under c, and c inherits b's restore target; then a (under c), then c,
    /// whose drop pops the driver's stack and restores what was current before a.
    #[test]
    fn f4_guards_dropped_out_of_order_hand_their_restore_target_to_the_guard_above() {
        let mut guards = vec![Entry { id: 1, previous: "before a" }, Entry { id: 2, previous: "before b" }, Entry { id: 3, previous: "before c" }];
        let b = remove_entry(&mut guards, 2).unwrap();
        assert_eq!(b.above, 1, "c was pushed after b: b's entry is removed from under it, nothing becomes current");
        assert_eq!(guards[1].previous, "before b", "c now restores what b would have restored");
        let a = remove_entry(&mut guards, 1).unwrap();
        assert_eq!(a.above, 1);
        assert_eq!(guards[0].previous, "before a", "c now restores what a would have restored");
        let c = remove_entry(&mut guards, 3).unwrap();
        assert_eq!(c.above, 0, "c is the innermost: its drop pops the driver's stack");
        assert_eq!(c.previous, "before a", "the context current before all three comes back");
        assert!(guards.is_empty());
        assert!(remove_entry(&mut guards, 3).is_none());
    }

    /// In order, each drop pops and restores its own target.
    #[test]
    fn f4_guards_dropped_in_order_pop_and_restore_their_own_target() {
        let mut guards = vec![Entry { id: 7, previous: "before a" }, Entry { id: 8, previous: "before b" }];
        let b = remove_entry(&mut guards, 8).unwrap();
        assert_eq!((b.above, b.previous), (0, "before b"));
        let a = remove_entry(&mut guards, 7).unwrap();
        assert_eq!((a.above, a.previous), (0, "before a"));
    }
}
