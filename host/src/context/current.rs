//! The per-thread current context: a guard that pushes one and pops it again.
//!
//! Guards may be dropped in any order (F4, audit 2026-11-27c): the driver's context stack is
//! kept in step with the guards still alive. Dropping the innermost guard pops its context;
//! dropping one that others were pushed above removes its own entry from under them (the
//! contexts above are popped and pushed back), and the guard above it inherits what it was to
//! restore. The context current on the thread is then always the innermost live guard's (or,
//! with none left, the one current before the first), and [`Context::current`] agrees.
//!
//! The pushes of ferrocuda's own binds ([`Context::bind`](super::Context::bind), a `Bound`)
//! are entries of the same list (G23S-1, session 23). Since session 22 every bind of another
//! context pushes onto the driver's stack, and user code runs while one lives (the `work` of
//! [`Stream::enqueue`](crate::Stream::enqueue)): a guard made before and dropped inside it
//! popped the bind's entry instead of its own, leaving its own context current after the
//! door; a guard made inside and returned out of it stayed above the bind's entry, which the
//! bind then left on the stack for good. Counted here, a bind's entry is stepped over by a
//! guard's drop and taken from under a live guard by the bind's drop, as guards' entries are.

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

/// One live guard (or bind) of this thread: its id and the context current before it was
/// pushed, for [`Context::current`] (`None`: a bind's, which does not restore it, or a guard's
/// that inherited that from a bind taken from under it).
struct Entry<P = Option<Weak<ContextInner>>> {
    id: u64,
    previous: P,
}

thread_local! {
    /// This thread's live guards, innermost last (one per context this thread's guards pushed
    /// onto the driver's stack, in the same order).
    static GUARDS: RefCell<Vec<Entry>> = const { RefCell::new(Vec::new()) };
    static NEXT_ID: Cell<u64> = const { Cell::new(0) };
}

/// Records an entry just pushed onto this thread's driver stack; returns its id.
fn record_push(previous: Option<Weak<ContextInner>>) -> u64 {
    let id = NEXT_ID.with(|n| {
        let id = n.get();
        n.set(id + 1);
        id
    });
    // `try_with`: a bind made from another thread-local's destructor, after this list is gone,
    // goes unrecorded (and its drop pops it as before the list counted binds).
    let _ = GUARDS.try_with(|g| g.borrow_mut().push(Entry { id, previous }));
    id
}

impl CurrentGuard {
    /// Records a guard whose context was just pushed; `previous` is what its drop restores.
    pub(super) fn pushed(context: Context, previous: Weak<ContextInner>) -> CurrentGuard {
        let id = record_push(Some(previous));
        CurrentGuard { _context: context, id, _not_send: PhantomData }
    }
}

/// Records the push of a `Bound` (G23S-1); returns its id for [`bind_popped`] or
/// [`bind_dropped`].
pub(super) fn bind_pushed() -> u64 {
    record_push(None)
}

/// Forgets the entry of bind `id`, whose push was just popped again (`Bound::keep`, right
/// after the bind: nothing was pushed above it).
pub(super) fn bind_popped(id: u64) {
    let _ = GUARDS.try_with(|g| g.borrow_mut().retain(|e| e.id != id));
}

/// The drop of bind `id`, which pushed `pushed`: pops it when it is the innermost entry and
/// still current (code inside the bind that made another context current in its place, a
/// kept nested bind or `cuCtxSetCurrent`, keeps it); takes it from under the guards pushed
/// inside the bind and still alive (G23S-1: a guard returned out of a door call's `work`).
pub(super) fn bind_dropped(id: u64, pushed: sys::CUcontext) {
    // Not found (the list was gone when it was pushed or is now): popped as the innermost.
    let removed = GUARDS.try_with(|g| remove_entry(&mut g.borrow_mut(), id)).ok().flatten();
    let Removed { above, previous } = removed.unwrap_or(Removed { above: 0, previous: None });
    if above > 0 {
        // SAFETY: the `above` entries over this bind's are pushes of this thread's live guards
        // and binds (all recorded), over this bind's own push.
        unsafe { remove_from_stack(above) };
        return;
    }
    let mut current = std::ptr::null_mut();
    // SAFETY: writes one handle.
    let known = unsafe { driver::context::get_current(&mut current) }.is_ok();
    if known && current == pushed {
        let mut popped = std::ptr::null_mut();
        // SAFETY: pops the entry this bind pushed on this thread (the guard is !Send); the
        // driver makes the entry below it current, without ferrocuda naming that context (see
        // `Context::bind`: it may have been destroyed meanwhile).
        let _ = unsafe { driver::context::pop_current(&mut popped) };
        // A guard dropped from under this bind handed it what to restore.
        if let Some(previous) = previous {
            let _ = CURRENT.try_with(|c| *c.borrow_mut() = previous);
        }
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
            if let Some(previous) = previous {
                CURRENT.with(|c| *c.borrow_mut() = previous);
            }
        } else {
            // Guards or binds pushed after this one are still alive (a bind: this guard is
            // dropped inside a door call's `work`, G23S-1): their contexts stay on top, this
            // guard's entry goes from under them; the current context does not change.
            // SAFETY: pops `above + 1` entries of this thread's stack, which its guards and
            // binds pushed, and pushes back all but the lowest (the one this guard's push
            // made), in order.
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

/// Removes guard (or bind) `id` from `guards`; the entry pushed right after it, if any, now
/// restores what `id` would have restored. `None` if `id` is not there (cannot happen: each
/// guard drops once, on its thread).
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
/// The top `above + 1` entries of the calling thread's stack are this thread's guards' and
/// binds' pushes, each of a context kept alive by its guard or bind's caller.
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
        // pushed it (its `_context`), or by the caller of the live bind that did, pushed back
        // where it was.
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

    /// G23S-1: a bind's push (previous `None`: it restores no [`Context::current`]) in the same
    /// list as the guards'. A guard made before a bind and dropped inside it is removed from
    /// under the bind (which inherits the guard's target, the driver stack's entry popped is
    /// the guard's own); a guard made inside a bind and outliving it has the bind's entry
    /// removed from under it, and inherits "restore nothing".
    #[test]
    fn g23s_1_binds_are_counted_with_the_guards() {
        let mut guards = vec![Entry { id: 1, previous: Some("before g") }, Entry { id: 2, previous: None }];
        let g = remove_entry(&mut guards, 1).unwrap();
        assert_eq!(g.above, 1, "the bind's push is over the guard's: stepped over, not popped");
        assert_eq!(guards[0].previous, Some("before g"), "the bind now restores what the guard would have");
        let bind = remove_entry(&mut guards, 2).unwrap();
        assert_eq!((bind.above, bind.previous), (0, Some("before g")));
        let mut guards = vec![Entry { id: 3, previous: None }, Entry { id: 4, previous: Some("the bind's context") }];
        let bind = remove_entry(&mut guards, 3).unwrap();
        assert_eq!(bind.above, 1, "the guard made inside the bind is still alive: the bind's push goes from under it");
        assert_eq!(guards[0].previous, None);
        let g = remove_entry(&mut guards, 4).unwrap();
        assert_eq!((g.above, g.previous), (0, None));
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
