//! Contexts owned by another library: the device's primary context (which PyTorch, candle and
//! cudarc use) or one it created.

use std::any::Any;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::sync::Arc;

use cudarc::driver::sys;

use super::problem;
use crate::context::{Context, ContextInner};
use crate::device::Device;
use crate::driver;
use crate::error::Result;
use crate::loader::init;

/// A context another library owns, usable for `'a` like a [`Context`] of ferrocuda's (it
/// dereferences to one).
///
/// A device's primary context is retained (as [`Context::primary`] does), so it stays valid as
/// long as anything made in it lives. Another context is only borrowed: when this value drops,
/// nothing made in it through ferrocuda (streams, buffers, modules, events, graphs, clones of
/// the [`Context`]) may still be alive, and the process aborts with a message if something is,
/// since the owner may destroy the context right after.
pub struct BorrowedContext<'a> {
    /// Taken (once) by `drop`.
    context: ManuallyDrop<Context>,
    _owner: PhantomData<&'a ()>,
}

impl<'a> BorrowedContext<'a> {
    /// Borrows the context `raw`. It is not made current on this thread, whatever its kind
    /// (see [`Context::from_raw`]).
    ///
    /// # Safety
    /// `raw` is a live CUDA context, and its owner neither destroys nor resets it (nor, for a
    /// primary context, resets the device's primary context) before the returned value and
    /// everything made in it through ferrocuda are dropped.
    /// A leaked value (`mem::forget`) never drops, and never checks that nothing made in the
    /// context survives: the owner must then never destroy or reset the context.
    pub unsafe fn new(raw: sys::CUcontext) -> Result<Self> {
        // SAFETY: forwarded (`raw` is live).
        let context = unsafe { adopt(raw, None) }?;
        Ok(BorrowedContext { context: ManuallyDrop::new(context), _owner: PhantomData })
    }

    /// True when the context is its device's primary context (then retained, see the type's
    /// docs).
    pub fn is_primary(&self) -> bool {
        self.context.is_primary()
    }
}

impl Deref for BorrowedContext<'_> {
    type Target = Context;
    fn deref(&self) -> &Context {
        &self.context
    }
}

impl Drop for BorrowedContext<'_> {
    fn drop(&mut self) {
        // SAFETY: taken once, here; `self.context` is not used again.
        let context = unsafe { ManuallyDrop::take(&mut self.context) };
        if context.is_primary() {
            return; // retained: our handles keep it valid
        }
        // Inside a host callback its state (modules, the wait for its work) cannot be released
        // (CUDA refuses every call there) before the owner may destroy it, right after this
        // drop: only stopping is sound (audit 2026-11-28d review3, G16S-5).
        if crate::context::in_host_callback() {
            eprintln!(
                "ferrocuda: a BorrowedContext was dropped inside a stream host callback, where CUDA refuses every call: what \
                 ferrocuda holds in the context cannot be released before its owner may destroy it, so the process stops here. \
                 Drop the borrow outside the callback (send it to another thread)."
            );
            std::process::abort();
        }
        // Atomic with the weak handles' upgrades (another thread's `Context::current()`):
        // either this is the last handle and the context's state goes now, before its owner
        // may destroy it, or another handle lives on.
        if let Some(inner) = Arc::into_inner(context.inner) {
            drop(inner); // waits for its work, unloads its modules; never destroys it
            return;
        }
        // Returning would let the owner destroy the context under live handles (a
        // use-after-free in the driver); unwinding would too. Only stopping is sound.
        eprintln!(
            "ferrocuda: a BorrowedContext was dropped while ferrocuda handles made in it (streams, buffers, modules, events, \
             graphs or Context clones) were still alive; its owner may destroy the context now, so the process stops here. \
             Drop everything made in a borrowed context before the borrow ends."
        );
        std::process::abort();
    }
}

impl Context {
    /// A [`Context`] for the context `raw` another library owns, kept alive by `keep_alive`
    /// (for example an `Arc` of the owner's context object), which is dropped with the last
    /// ferrocuda handle that uses the context. A primary context is retained like
    /// [`Context::primary`] (`keep_alive` is then dropped right away). Neither kind is made
    /// current: ferrocuda's calls bind the context for their own driver calls and make the
    /// context current before them current again (the CUDA runtime of another library would
    /// allocate in a borrowed context, and its owner destroys it; a primary context left
    /// current would move another library's current device: session 22);
    /// [`Context::push_current`] makes it current for your own.
    ///
    /// # Safety
    /// `raw` is a live CUDA context that stays valid (not destroyed, not reset) while
    /// `keep_alive` lives.
    pub unsafe fn from_raw(raw: sys::CUcontext, keep_alive: impl Any + Send + Sync) -> Result<Context> {
        // SAFETY: forwarded.
        unsafe { adopt(raw, Some(Arc::new(keep_alive))) }
    }
}

/// `raw` as a ferrocuda [`Context`]: the retained primary context when it is one, else a
/// borrowed handle (never destroyed here) holding `keep_alive`.
///
/// # Safety
/// `raw` is a live context, valid while the returned handle is used (see the callers).
unsafe fn adopt(raw: sys::CUcontext, keep_alive: Option<Arc<dyn Any + Send + Sync>>) -> Result<Context> {
    init()?;
    if raw.is_null() {
        return Err(problem("a borrowed context cannot be null: pass the owner's CUcontext (cuCtxGetCurrent, or `CudaContext::cu_ctx`)"));
    }
    let device = device_of(raw)?;
    if is_active_primary(device)? {
        // Retained, not made current (session 22: borrowing changes no thread's current context).
        let primary = Context::retain_primary(device.ordinal())?;
        if primary.raw() == raw {
            return Ok(primary);
        }
    }
    // Not made current here (G20R-4's class, session 21): the owner's context stays off this
    // thread unless it was on it; every ferrocuda call binds it for its own driver calls and
    // pops it again (`Context::bind`).
    Ok(Context { inner: ContextInner::borrowed(raw, device, keep_alive)? })
}

/// The device of context `raw` (made current for the query, then the previous one restored).
fn device_of(raw: sys::CUcontext) -> Result<Device> {
    // SAFETY: `raw` is live (the caller's contract); popped right below.
    unsafe { driver::context::push_current(raw) }?;
    let mut device = 0;
    // SAFETY: writes one device handle for the current context (pushed above).
    let queried = unsafe { driver::context::get_device(&mut device) };
    let mut popped = std::ptr::null_mut();
    // SAFETY: balances the push above.
    unsafe { driver::context::pop_current(&mut popped) }?;
    queried?;
    Device::all()?
        .into_iter()
        .find(|d| d.raw() == device)
        .ok_or_else(|| problem(format!("the borrowed context's device ({device}) is not among the driver's devices")))
}

/// True when `device`'s primary context exists now (a live primary context is active; asking
/// does not create one, unlike retaining it).
fn is_active_primary(device: Device) -> Result<bool> {
    let (mut flags, mut active) = (0, 0);
    // SAFETY: writes one uint and one int.
    unsafe { driver::context::primary_get_state(device.raw(), &mut flags, &mut active) }?;
    Ok(active != 0)
}
