//! Where a kernel panicked: a process-wide panic hook (installed once, chained to the one
//! before it) that, while a GPU thread runs on this OS thread, keeps the location and message
//! for the executor's error instead of printing them. Elsewhere it defers to the previous hook.

use std::cell::{Cell, RefCell};
use std::sync::Once;

/// A panic seen by the hook while a GPU thread ran.
pub(crate) struct CapturedPanic {
    pub(crate) file: String,
    pub(crate) line: u32,
    pub(crate) column: u32,
    pub(crate) message: String,
}

thread_local! {
    /// Set while the threads of a failed block are unwound (G14-4): a panic then is a
    /// destructor's (which aborts the process while unwinding) or a body's that caught the
    /// cancellation, and the hook says which error ended the block before anything is lost.
    static ENDING: RefCell<Option<String>> = const { RefCell::new(None) };
    static CAPTURING: Cell<bool> = const { Cell::new(false) };
    static CAPTURED: RefCell<Option<CapturedPanic>> = const { RefCell::new(None) };
}

/// Installs the hook (once per process).
pub(crate) fn install() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !CAPTURING.with(Cell::get) {
                return previous(info);
            }
            if let Some(first) = ENDING.with(|e| e.borrow().clone()) {
                // Said now: if this is a destructor's panic, the process aborts when it
                // returns, and the launch's error would be lost with it (audit N13).
                eprintln!(
                    "ferrocuda CPU executor: a thread of a failed block panicked while it was unwound (a destructor that \
                     panics during the unwinding aborts the process): {info}\nthe launch's error: {first}"
                );
            }
            let (file, line, column) = info.location().map(|l| (l.file().to_owned(), l.line(), l.column())).unwrap_or_else(|| ("<unknown>".into(), 0, 0));
            let message = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(a panic with a non-string payload)".into());
            CAPTURED.with(|c| *c.borrow_mut() = Some(CapturedPanic { file, line, column, message }));
        }));
    });
}

/// The panic captured on this OS thread since the last call, if any.
pub(crate) fn take() -> Option<CapturedPanic> {
    CAPTURED.with(|c| c.borrow_mut().take())
}

/// Panics on this OS thread are captured while this guard lives (a GPU thread is running).
pub(crate) struct Capturing(());

impl Capturing {
    pub(crate) fn begin() -> Self {
        CAPTURING.with(|c| c.set(true));
        Capturing(())
    }
}

impl Drop for Capturing {
    fn drop(&mut self) {
        CAPTURING.with(|c| c.set(false));
    }
}

/// Runs `f`, catching a panic in it without printing it (the hook captures it, and the capture
/// is dropped); the capturing state of this OS thread is restored afterwards.
pub(crate) fn silently<R>(f: impl FnOnce() -> R + std::panic::UnwindSafe) -> std::thread::Result<R> {
    install();
    let before = CAPTURING.with(|c| c.replace(true));
    let kept = CAPTURED.with(|c| c.borrow_mut().take());
    let result = std::panic::catch_unwind(f);
    CAPTURED.with(|c| *c.borrow_mut() = kept);
    CAPTURING.with(|c| c.set(before));
    result
}

/// While the threads of a failed block are unwound (G14-4): a panic then is said on stderr
/// with `first`, the launch's error (the process aborts if it is a destructor's).
pub(crate) struct Ending(());

impl Ending {
    pub(crate) fn begin(first: String) -> Self {
        ENDING.with(|e| *e.borrow_mut() = Some(first));
        Ending(())
    }
}

impl Drop for Ending {
    fn drop(&mut self) {
        ENDING.with(|e| *e.borrow_mut() = None);
    }
}
