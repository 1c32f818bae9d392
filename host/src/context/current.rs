//! The per-thread current context: a guard that pushes one and pops it again.

use std::marker::PhantomData;
use std::sync::Weak;

use super::{CURRENT, Context, ContextInner};
use crate::driver;

/// Keeps a context current on this thread (see [`Context::push_current`]); dropping it pops
/// the context and restores the one that was current before.
#[must_use = "the context is popped again as soon as the guard drops"]
pub struct CurrentGuard {
    pub(super) _context: Context,
    pub(super) previous: Weak<ContextInner>,
    /// The driver's context stack is per thread: the guard must drop where it was made.
    pub(super) _not_send: PhantomData<*const ()>,
}

impl Drop for CurrentGuard {
    fn drop(&mut self) {
        let mut popped = std::ptr::null_mut();
        // SAFETY: balances the push in `push_current` (on this thread: the guard is !Send).
        let _ = unsafe { driver::context::pop_current(&mut popped) };
        let previous = std::mem::take(&mut self.previous);
        CURRENT.with(|c| *c.borrow_mut() = previous);
    }
}
