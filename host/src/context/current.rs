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
//!
//! Every entry records the raw context it pushed, and no drop trusts the count alone (G23S-2,
//! audit 2026-11-29e): something other than a guard or bind may have changed the stack meanwhile
//! (a `cuCtxSetCurrent` of cudarc's or another library's replaces the top entry; a context
//! destroyed on this thread pops itself). A drop pops an entry only while the context on top is
//! the one that entry recorded, and re-pushes only recorded contexts it has just popped, each
//! kept alive by its live guard (its `_context`) or by the caller of its live bind: a context
//! no entry holds is never named. On a mismatch the stack is left as it is (the guard's own
//! push, if still there, stays below what replaced it: the driver's to track, as any context
//! another library leaves on the thread). [`Context::bind_to_thread`] (and so
//! [`Context::primary`]) is refused while any entry is alive (it would replace the innermost
//! entry's push with a context no entry holds); a created context destroyed while current pops
//! an entry no guard recorded for it, and a guard whose push it replaced pops nothing.

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
    /// The context this entry pushed (kept alive by the guard, or by the bind's caller): what
    /// must be on top of the driver's stack for a drop to pop it (G23S-2).
    pushed: sys::CUcontext,
    previous: P,
}

thread_local! {
    /// This thread's live guards, innermost last (one per context this thread's guards pushed
    /// onto the driver's stack, in the same order).
    static GUARDS: RefCell<Vec<Entry>> = const { RefCell::new(Vec::new()) };
    static NEXT_ID: Cell<u64> = const { Cell::new(0) };
}

/// Records an entry just pushed onto this thread's driver stack; returns its id.
fn record_push(pushed: sys::CUcontext, previous: Option<Weak<ContextInner>>) -> u64 {
    let id = NEXT_ID.with(|n| {
        let id = n.get();
        n.set(id + 1);
        id
    });
    // `try_with`: a bind made from another thread-local's destructor, after this list is gone,
    // goes unrecorded (and its drop pops it as before the list counted binds).
    let _ = GUARDS.try_with(|g| g.borrow_mut().push(Entry { id, pushed, previous }));
    id
}

impl CurrentGuard {
    /// Records a guard whose context was just pushed; `previous` is what its drop restores.
    pub(super) fn pushed(context: Context, previous: Weak<ContextInner>) -> CurrentGuard {
        let id = record_push(context.raw(), Some(previous));
        CurrentGuard { _context: context, id, _not_send: PhantomData }
    }
}

/// Records the push of a `Bound` (G23S-1); returns its id for [`bind_popped`] or
/// [`bind_dropped`].
pub(super) fn bind_pushed(pushed: sys::CUcontext) -> u64 {
    record_push(pushed, None)
}

/// True while a guard or bind of this thread is alive: then [`Context::bind_to_thread`] is
/// refused (G23S-2: its `cuCtxSetCurrent` would replace the innermost entry's push).
pub(super) fn entries_alive() -> bool {
    GUARDS.try_with(|g| !g.borrow().is_empty()).unwrap_or(false)
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
    let Removed { above, own: _, previous } = removed.unwrap_or(Removed { above: Vec::new(), own: pushed, previous: None });
    let mut stack = DriverStack;
    if !above.is_empty() {
        // SAFETY: `above` are the recorded pushes of this thread's live guards and binds over
        // this bind's, each kept alive by its guard or its bind's caller.
        unsafe { remove_from_stack(&mut stack, &above, pushed) };
        return;
    }
    // Pops only its own push (code inside the bind that made another context current in its
    // place, a `cuCtxSetCurrent`, keeps it); the driver makes the entry below current, without
    // ferrocuda naming that context (see `Context::bind`: it may have been destroyed meanwhile).
    if pop_own(&mut stack, pushed) {
        // A guard dropped from under this bind handed it what to restore.
        if let Some(previous) = previous {
            let _ = CURRENT.try_with(|c| *c.borrow_mut() = previous);
        }
    }
}

impl Drop for CurrentGuard {
    fn drop(&mut self) {
        let removed = GUARDS.with(|g| remove_entry(&mut g.borrow_mut(), self.id));
        let Some(Removed { above, own, previous }) = removed else { return };
        let mut stack = DriverStack;
        if above.is_empty() {
            // Balances the push in `push_current` (on this thread: the guard is !Send), only
            // while that push is still on top (G23S-2: replaced by a `cuCtxSetCurrent`, or
            // popped by a destroy, it is not this guard's to pop, and what is there instead,
            // the caller's context, stays).
            pop_own(&mut stack, own);
            if let Some(previous) = previous {
                CURRENT.with(|c| *c.borrow_mut() = previous);
            }
        } else {
            // Guards or binds pushed after this one are still alive (a bind: this guard is
            // dropped inside a door call's `work`, G23S-1): their contexts stay on top, this
            // guard's entry goes from under them; the current context does not change.
            // SAFETY: `above` are the recorded pushes of the live guards and binds over this
            // one, each kept alive by its guard or its bind's caller.
            unsafe { remove_from_stack(&mut stack, &above, own) };
        }
    }
}

/// The operations on the calling thread's driver context stack that a drop makes: the driver's
/// ([`DriverStack`]), or a list in the unit tests (G23S-2's cases driven without a driver).
trait ContextStack {
    /// The context on top (null: none); `None` when the driver could not say.
    fn top(&mut self) -> Option<sys::CUcontext>;
    /// Pops the top entry; true when it did.
    fn pop(&mut self) -> bool;
    /// Pushes `context`; true when it did.
    ///
    /// # Safety
    /// `context` is alive.
    unsafe fn push(&mut self, context: sys::CUcontext) -> bool;
}

/// The calling thread's driver context stack.
struct DriverStack;

impl ContextStack for DriverStack {
    fn top(&mut self) -> Option<sys::CUcontext> {
        let mut current = std::ptr::null_mut();
        // SAFETY: writes one handle.
        unsafe { driver::context::get_current(&mut current) }.ok().map(|()| current)
    }

    fn pop(&mut self) -> bool {
        let mut popped = std::ptr::null_mut();
        // SAFETY: pops this thread's top entry, which the caller checked is the one it recorded.
        unsafe { driver::context::pop_current(&mut popped) }.is_ok()
    }

    unsafe fn push(&mut self, context: sys::CUcontext) -> bool {
        // SAFETY: the caller's contract: `context` is alive.
        unsafe { driver::context::push_current(context) }.is_ok()
    }
}

/// Pops the top entry of `stack` only if it holds `own` (never null: an entry always pushed a
/// context); true when popped.
fn pop_own(stack: &mut impl ContextStack, own: sys::CUcontext) -> bool {
    !own.is_null() && stack.top() == Some(own) && stack.pop()
}

/// What [`remove_entry`] found: how many live guards were pushed after the removed one, and
/// what the removed one was to restore (already handed to the guard above it, if any).
#[derive(Debug)]
struct Removed<P> {
    /// The contexts recorded by the entries pushed after the removed one, lowest first.
    above: Vec<sys::CUcontext>,
    /// The context the removed entry pushed.
    own: sys::CUcontext,
    previous: P,
}

/// Removes guard (or bind) `id` from `guards`; the entry pushed right after it, if any, now
/// restores what `id` would have restored. `None` if `id` is not there (cannot happen: each
/// guard drops once, on its thread).
fn remove_entry<P: Default>(guards: &mut Vec<Entry<P>>, id: u64) -> Option<Removed<P>> {
    let index = guards.iter().position(|e| e.id == id)?;
    let entry = guards.remove(index);
    let above: Vec<sys::CUcontext> = guards[index..].iter().map(|e| e.pushed).collect();
    if above.is_empty() {
        Some(Removed { above, own: entry.pushed, previous: entry.previous })
    } else {
        guards[index].previous = entry.previous;
        Some(Removed { above, own: entry.pushed, previous: P::default() })
    }
}

/// Removes the entry `own` from under the entries `above` (recorded, lowest first) of `stack`,
/// keeping them in order; true when it was removed.
///
/// Checked at every step (G23S-2): an entry is popped only while the context on top is the one
/// it recorded, and only those popped are pushed back, by the handle their entry recorded. On
/// the first mismatch (something else changed the stack: a `cuCtxSetCurrent` replaced an
/// entry, a destroy popped one) nothing more is popped, what was popped goes back, and the
/// stack is left as it was: no context that an entry does not hold alive is ever popped into
/// ferrocuda's hands and named again (a context destroyed by another thread, or a new one that
/// took its address).
///
/// # Safety
/// Each context in `above` is kept alive by the live guard (or the caller of the live bind)
/// whose entry recorded it.
unsafe fn remove_from_stack(stack: &mut impl ContextStack, above: &[sys::CUcontext], own: sys::CUcontext) -> bool {
    let mut kept = 0;
    for &expected in above.iter().rev() {
        if expected.is_null() || stack.top() != Some(expected) || !stack.pop() {
            break;
        }
        kept += 1;
    }
    let removed = kept == above.len() && pop_own(stack, own);
    for &context in &above[above.len() - kept..] {
        // SAFETY: a recorded context just popped from this stack (it was on top), kept alive by
        // its entry's guard or bind's caller (the caller's contract), pushed back where it was.
        let _ = unsafe { stack.push(context) };
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake context handle (never dereferenced: the stacks here are lists).
    fn ctx(n: usize) -> sys::CUcontext {
        std::ptr::without_provenance_mut(n)
    }

    /// A driver context stack without a driver: a list, bottom first, that also records every
    /// context pushed by name (to check that only recorded, live entries are ever named).
    struct ListStack {
        entries: Vec<sys::CUcontext>,
        named: Vec<sys::CUcontext>,
    }

    impl ListStack {
        fn new(entries: &[usize]) -> ListStack {
            ListStack { entries: entries.iter().map(|&n| ctx(n)).collect(), named: Vec::new() }
        }
        fn is(&self, entries: &[usize]) -> bool {
            self.entries == entries.iter().map(|&n| ctx(n)).collect::<Vec<_>>()
        }
    }

    impl ContextStack for ListStack {
        fn top(&mut self) -> Option<sys::CUcontext> {
            Some(self.entries.last().copied().unwrap_or(std::ptr::null_mut()))
        }
        fn pop(&mut self) -> bool {
            self.entries.pop().is_some()
        }
        unsafe fn push(&mut self, context: sys::CUcontext) -> bool {
            self.named.push(context);
            self.entries.push(context);
            true
        }
    }

    // The contexts of the G23S-2 cases: B the caller's (below every guard), Y and W guards',
    // X one that replaced a guard's entry (a `cuCtxSetCurrent`) and that no guard holds.
    const B: usize = 0xb0;
    const Y: usize = 0xc0;
    const W: usize = 0xd0;
    const X: usize = 0xe0;

    /// G23S-2 (a), (b): the innermost guard pops only its own push. Its entry replaced on the
    /// driver's stack (by a `cuCtxSetCurrent`: [B, X]) or popped from it (by a destroy: [B]),
    /// the drop leaves the stack alone: the caller's B is not popped.
    #[test]
    fn g23s_2_the_innermost_guard_pops_only_its_own_push() {
        let mut guards = vec![Entry { id: 1, pushed: ctx(Y), previous: "before g" }];
        let g = remove_entry(&mut guards, 1).unwrap();
        assert_eq!((g.above.len(), g.own), (0, ctx(Y)));
        let mut replaced = ListStack::new(&[B, X]);
        assert!(!pop_own(&mut replaced, g.own), "popped an entry that is not the guard's");
        assert!(replaced.is(&[B, X]));
        let mut popped_by_a_destroy = ListStack::new(&[B]);
        assert!(!pop_own(&mut popped_by_a_destroy, g.own), "popped the caller's context");
        assert!(popped_by_a_destroy.is(&[B]));
        let mut intact = ListStack::new(&[B, Y]);
        assert!(pop_own(&mut intact, g.own));
        assert!(intact.is(&[B]), "the guard's own push was not popped");
        assert!(!pop_own(&mut ListStack::new(&[]), std::ptr::null_mut()), "a null entry pops nothing");
    }

    /// G23S-2 (c): guards g1 (Y) and g2 (W); g2's entry replaced by X, which another thread
    /// then destroys. g1 dropped first: the top (X) is not g2's recorded W, so nothing is popped
    /// and nothing is pushed by name (X, destroyed, was pushed back before).
    #[test]
    fn g23s_2_out_of_order_drops_never_name_an_unrecorded_context() {
        let mut guards = vec![Entry { id: 1, pushed: ctx(Y), previous: "before g1" }, Entry { id: 2, pushed: ctx(W), previous: "before g2" }];
        let g1 = remove_entry(&mut guards, 1).unwrap();
        assert_eq!((g1.above.clone(), g1.own), (vec![ctx(W)], ctx(Y)));
        let mut stack = ListStack::new(&[B, Y, X]);
        // SAFETY: a list, no driver.
        assert!(!unsafe { remove_from_stack(&mut stack, &g1.above, g1.own) });
        assert!(stack.is(&[B, Y, X]), "the stack was changed on a mismatch");
        assert!(stack.named.is_empty(), "named {:?}", stack.named);
        // g2's drop (now innermost) leaves X alone too.
        let g2 = remove_entry(&mut guards, 2).unwrap();
        assert!(!pop_own(&mut stack, g2.own));
        assert!(stack.is(&[B, Y, X]));
        // In step, the same drops take g1's entry from under g2's and re-push W only.
        let mut guards = vec![Entry { id: 1, pushed: ctx(Y), previous: "before g1" }, Entry { id: 2, pushed: ctx(W), previous: "before g2" }];
        let g1 = remove_entry(&mut guards, 1).unwrap();
        let mut stack = ListStack::new(&[B, Y, W]);
        // SAFETY: a list, no driver.
        assert!(unsafe { remove_from_stack(&mut stack, &g1.above, g1.own) });
        assert!(stack.is(&[B, W]));
        assert_eq!(stack.named, vec![ctx(W)]);
    }

    /// G23S-2: a mismatch below the entries above (the dropped guard's own push replaced, the
    /// ones above it intact) puts back what was popped, by the recorded handles, and stops.
    #[test]
    fn g23s_2_a_mismatch_under_intact_entries_puts_them_back_and_stops() {
        let mut stack = ListStack::new(&[B, X, W, Y]);
        // SAFETY: a list, no driver.
        assert!(!unsafe { remove_from_stack(&mut stack, &[ctx(W), ctx(Y)], ctx(Y)) });
        assert!(stack.is(&[B, X, W, Y]), "order or content changed");
        assert_eq!(stack.named, vec![ctx(W), ctx(Y)], "only the recorded, popped entries are pushed back, in order");
        // A mismatch in the middle: only the top entry was popped and comes back.
        let mut stack = ListStack::new(&[B, Y, X, W]);
        // SAFETY: a list, no driver.
        assert!(!unsafe { remove_from_stack(&mut stack, &[ctx(Y), ctx(W)], ctx(Y)) });
        assert!(stack.is(&[B, Y, X, W]));
        assert_eq!(stack.named, vec![ctx(W)]);
    }

    /// F4: the bookkeeping of out-of-order drops. Guards a, b, c pushed in that order (the
    /// contexts current before each: "before a", "before b", "before c"); b dropped first is
    /// removed from under c, and c inherits b's restore target; then a (under c), then c,
    /// whose drop pops the driver's stack and restores what was current before a.
    #[test]
    fn f4_guards_dropped_out_of_order_hand_their_restore_target_to_the_guard_above() {
        let mut guards = vec![
            Entry { id: 1, pushed: ctx(1), previous: "before a" },
            Entry { id: 2, pushed: ctx(2), previous: "before b" },
            Entry { id: 3, pushed: ctx(3), previous: "before c" },
        ];
        let b = remove_entry(&mut guards, 2).unwrap();
        assert_eq!(b.above.len(), 1, "c was pushed after b: b's entry is removed from under it, nothing becomes current");
        assert_eq!(guards[1].previous, "before b", "c now restores what b would have restored");
        let a = remove_entry(&mut guards, 1).unwrap();
        assert_eq!(a.above.len(), 1);
        assert_eq!(guards[0].previous, "before a", "c now restores what a would have restored");
        let c = remove_entry(&mut guards, 3).unwrap();
        assert_eq!(c.above.len(), 0, "c is the innermost: its drop pops the driver's stack");
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
        let mut guards = vec![Entry { id: 1, pushed: ctx(1), previous: Some("before g") }, Entry { id: 2, pushed: ctx(2), previous: None }];
        let g = remove_entry(&mut guards, 1).unwrap();
        assert_eq!(g.above.len(), 1, "the bind's push is over the guard's: stepped over, not popped");
        assert_eq!(guards[0].previous, Some("before g"), "the bind now restores what the guard would have");
        let bind = remove_entry(&mut guards, 2).unwrap();
        assert_eq!((bind.above.len(), bind.previous), (0, Some("before g")));
        let mut guards = vec![Entry { id: 3, pushed: ctx(3), previous: None }, Entry { id: 4, pushed: ctx(4), previous: Some("the bind's context") }];
        let bind = remove_entry(&mut guards, 3).unwrap();
        assert_eq!(bind.above.len(), 1, "the guard made inside the bind is still alive: the bind's push goes from under it");
        assert_eq!(guards[0].previous, None);
        let g = remove_entry(&mut guards, 4).unwrap();
        assert_eq!((g.above.len(), g.previous), (0, None));
    }

    /// In order, each drop pops and restores its own target.
    #[test]
    fn f4_guards_dropped_in_order_pop_and_restore_their_own_target() {
        let mut guards = vec![Entry { id: 7, pushed: ctx(7), previous: "before a" }, Entry { id: 8, pushed: ctx(8), previous: "before b" }];
        let b = remove_entry(&mut guards, 8).unwrap();
        assert_eq!((b.above.len(), b.previous), (0, "before b"));
        let a = remove_entry(&mut guards, 7).unwrap();
        assert_eq!((a.above.len(), a.previous), (0, "before a"));
    }
}
