//! Device panics reported to the host with their details.
//!
//! ferrocuda-device's panic handler writes a record (kernel, file, line, column, block,
//! thread, and the message when it keeps one) into page-locked host memory before it traps; this module owns that memory
//! and tells every loaded module where it is (the module global `__ferrocuda_panic_slot`).
//! A trap poisons the whole process's CUDA state, so one record per process is enough: the
//! first panic is the one every later error reports, as [`Error::KernelPanic`](crate::Error).

use std::ffi::c_void;
use std::sync::OnceLock;

use cudarc::driver::sys;

use crate::driver;
use crate::driver::DriverError;
use crate::error::Error;
use crate::module::symbols::ImageSymbols;
use crate::{KernelPanic, PANIC_SLOT_SYMBOL_C, PanicRecord};

/// The process's record: host pointer and the address kernels write to.
struct Slot {
    host: *mut PanicRecord,
    device: u64,
}

// SAFETY: the pointer is to page-locked memory that lives as long as the process; it is only
// read (volatile) by the host.
unsafe impl Send for Slot {}
// SAFETY: as above.
unsafe impl Sync for Slot {}

static SLOT: OnceLock<Option<Slot>> = OnceLock::new();

/// Allocates the record (once per process, in the current context, portable to all of them).
fn slot() -> Option<&'static Slot> {
    SLOT.get_or_init(|| {
        let size = std::mem::size_of::<PanicRecord>();
        let mut host: *mut c_void = std::ptr::null_mut();
        let flags = sys::CU_MEMHOSTALLOC_PORTABLE | sys::CU_MEMHOSTALLOC_DEVICEMAP;
        // SAFETY: writes one pointer to `size` bytes of page-locked memory (never freed: the
        // record must outlive every context, and a poisoned process could not free it anyway).
        unsafe { driver::memory::host_alloc(&mut host, size, flags) }.ok()?;
        // SAFETY: the allocation is `size` bytes; zero means "no panic yet".
        unsafe { std::ptr::write_bytes(host.cast::<u8>(), 0, size) };
        let mut device = 0;
        // SAFETY: `host` was allocated with DEVICEMAP above.
        unsafe { driver::memory::host_get_device_pointer(&mut device, host, 0) }.ok()?;
        Some(Slot { host: host.cast(), device })
    })
    .as_ref()
}

/// Points `module`'s `__ferrocuda_panic_slot` at the record, if the module has one (modules
/// not built with ferrocuda-device do not, and then panics are only printed). The module's
/// context must be current. A synchronous copy: not allowed while the thread captures a graph.
pub(crate) fn install(module: sys::CUmodule, symbols: &ImageSymbols) -> Result<(), DriverError> {
    if !symbols.may_hold(crate::PANIC_SLOT_SYMBOL) {
        return Ok(());
    }
    let (mut address, mut size) = (0, 0);
    // SAFETY: looks a global up by a NUL-terminated name; writes its address and size.
    let found = unsafe { driver::module::get_global(&mut address, &mut size, module, PANIC_SLOT_SYMBOL_C.as_ptr()) };
    if found.is_err() || size != 8 {
        return Ok(());
    }
    if let Some(slot) = slot() {
        let value = slot.device;
        // SAFETY: copies 8 bytes into the 8-byte global found above.
        unsafe { driver::memory::memcpy_htod(address, (&value as *const u64).cast(), 8) }?;
    }
    Ok(())
}

/// The error for a failed driver call that may be the first to notice a kernel fault: a
/// sticky error after a device panic becomes [`Error::KernelPanic`] with the record the
/// panicking thread left (read from the process's panic record); any other driver error
/// stays [`Error::Driver`].
#[cold]
pub(crate) fn with_kernel_panic(error: DriverError) -> Error {
    if error.is_sticky()
        && let Some(report) = recorded()
    {
        return Error::KernelPanic { report: Box::new(report), source: error };
    }
    if error.is_sticky()
        && let Some(kernels) = unbounded_stack_kernels()
    {
        return Error::StackLimitFault { kernels, source: error };
    }
    Error::Driver(error)
}

/// Kernels whose stack the build could not bound (the builder's `allow_recursion`: the PTX
/// global `__ferrocuda_unbounded_stack_<kernel>`), as first launched in this process: each
/// `(kernel, the context's stack limit then, ptxas's stack for the kernel)`. Read only when a
/// fault is reported (Q4).
static UNBOUNDED_STACK: std::sync::Mutex<Vec<(String, usize, i32)>> = std::sync::Mutex::new(Vec::new());

/// The PTX global the builder adds for a kernel it lets reach recursion or an indirect call.
pub(crate) const UNBOUNDED_STACK_PREFIX: &str = "__ferrocuda_unbounded_stack_";

/// On the first launch of `symbol` (a function of the loaded module `raw`, in the current
/// context): if the builder marked it as having an unbounded stack, notes it with the
/// context's stack limit, for the message of a later fault (Q4). One global lookup; nothing
/// else for unmarked kernels.
#[cold]
pub(crate) fn note_if_unbounded_stack(raw: sys::CUmodule, symbols: &ImageSymbols, function: sys::CUfunction, symbol: &str) {
    let global = format!("{UNBOUNDED_STACK_PREFIX}{symbol}");
    if !symbols.may_hold(&global) {
        return;
    }
    let Ok(name) = std::ffi::CString::new(global) else { return };
    let (mut address, mut bytes) = (0, 0);
    // SAFETY: looks a global up by a NUL-terminated name in a loaded module.
    if unsafe { crate::driver::module::get_global(&mut address, &mut bytes, raw, name.as_ptr()) }.is_err() {
        return;
    }
    let mut limit = 0usize;
    // SAFETY: writes one usize; the module's context is current (a launch is being made).
    let _ = unsafe { crate::driver::context::get_limit(&mut limit, cudarc::driver::sys::CUlimit::CU_LIMIT_STACK_SIZE) };
    let mut local = 0;
    // SAFETY: writes one int; the function belongs to the current context.
    let _ =
        unsafe { crate::driver::function::get_attribute(&mut local, cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, function) };
    let mut list = UNBOUNDED_STACK.lock().unwrap_or_else(|e| e.into_inner());
    match list.iter_mut().find(|(k, ..)| k == symbol) {
        Some(entry) => *entry = (symbol.to_string(), limit, local),
        None => list.push((symbol.to_string(), limit, local)),
    }
}

/// The kernels noted by [`note_if_unbounded_stack`], as a sentence; `None` if none.
fn unbounded_stack_kernels() -> Option<String> {
    let list = UNBOUNDED_STACK.lock().unwrap_or_else(|e| e.into_inner());
    (!list.is_empty()).then(|| {
        list.iter()
            .map(|(kernel, limit, local)| {
                format!("`{kernel}` (stack limit set: {limit} bytes per thread; ptxas counted {local} bytes, without the recursive or indirect calls)")
            })
            .collect::<Vec<_>>()
            .join(", ")
    })
}

/// The panic a kernel recorded, if one did.
pub(crate) fn recorded() -> Option<KernelPanic> {
    let slot = SLOT.get()?.as_ref()?;
    // SAFETY: the record is valid host memory; the device writes `state` last, after a
    // system-scope fence, so the fields are complete once it reads a complete state (with a
    // message, without one, or with a template and its arguments) (`from_record` checks it on the copy, which was read after `state`).
    unsafe {
        let state = std::ptr::addr_of!((*slot.host).state).read_volatile();
        if !matches!(state, crate::RECORD_COMPLETE | crate::RECORD_COMPLETE_WITHOUT_MESSAGE | crate::RECORD_COMPLETE_WITH_ARGUMENTS) {
            return None;
        }
        KernelPanic::from_record(&slot.host.read_volatile())
    }
}

/// Disposes of the payload of a panic that `catch_unwind` caught (in a host callback's
/// trampoline, on the release thread) and describes it for the message (": <text>" for a
/// `&str` or `String` payload, else nothing). Dropping the payload runs user code (its `Drop`),
/// which may panic again: that second panic is caught too and its payload leaked (E7, audit
/// 2026-11-27e: inside the `extern "C"` trampoline, called by the driver's thread, it aborted
/// the process with only Rust's "failed to initiate panic"; on the release thread it would end
/// the thread, and every later release handed to it would be lost).
pub(crate) fn dispose_of_caught_panic(payload: Box<dyn std::any::Any + Send>) -> String {
    let text = payload.downcast_ref::<&str>().map(|s| (*s).to_string()).or_else(|| payload.downcast_ref::<String>().cloned());
    let mut described = text.map(|t| format!(": {t}")).unwrap_or_default();
    if let Err(second) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(payload))) {
        // Not dropped: its `Drop` could panic as well. A leak of one box.
        std::mem::forget(second);
        described.push_str(" (dropping its panic payload panicked too; that was caught, and the payload leaked)");
    }
    described
}

#[cfg(test)]
mod caught_panic_tests {
    use super::dispose_of_caught_panic;

    /// A payload whose `Drop` panics.
    struct Bomb;
    impl Drop for Bomb {
        fn drop(&mut self) {
            panic!("the payload's drop panics");
        }
    }

    /// E7 (audit 2026-11-27e): a callback whose panic payload panics when dropped aborted the
    /// process with no message (the drop ran inside the `extern "C"` trampoline). The payload
    /// is now dropped under a second `catch_unwind` (and leaked if that panics): no abort, and
    /// the message says what happened; a plain payload is described and dropped.
    #[test]
    fn e7_a_panic_payload_that_panics_when_dropped_is_caught_and_reported() {
        let caught = std::panic::catch_unwind(|| std::panic::panic_any(Bomb)).unwrap_err();
        let described = dispose_of_caught_panic(caught);
        assert!(described.contains("dropping its panic payload panicked too"), "{described}");
        let caught = std::panic::catch_unwind(|| panic!("plain {}", 7)).unwrap_err();
        assert_eq!(dispose_of_caught_panic(caught), ": plain 7");
        let caught = std::panic::catch_unwind(|| std::panic::panic_any(5u32)).unwrap_err();
        assert_eq!(dispose_of_caught_panic(caught), "");
    }
}
