//! Device panics reported to the host with their details.
//!
//! ferrocuda-device's panic handler writes a record (kernel, file, line, column, block,
//! thread, and the message when it keeps one) into page-locked host memory before it traps; this module owns that memory
//! and tells every loaded module where it is (the module global `__ferrocuda_panic_slot`).
//!
//! **One record per context** (audit 2026-11-29c, G22S-2). Page-locked memory belongs to the
//! context it was allocated in and dies with it (`cuCtxDestroy`, or the primary context's
//! reset when its last reference is released), whatever `CU_MEMHOSTALLOC_PORTABLE` says about
//! which contexts may use it. The record used to be one per process, allocated in whichever
//! context happened to load the first module: when that context died first, every later kernel
//! panic, in any context, wrote freed memory, and the host read it. Now each context
//! ([`ContextRecord`], a field of the context's shared state) allocates its own record, with
//! itself bound, at its first module load that has a panic slot, and points only its own
//! modules at it; the record is freed by the context's teardown after the context-wide
//! synchronisation and after its modules are unloaded, before the context is released or
//! destroyed. Every module keeps its context alive (an explicit `Module` holds a `Context`, the
//! embedded ones are the context's own), so no kernel that can write a record runs after it
//! is freed; and the host reads records only through [`RECORDS`], under its lock, from which
//! the teardown removes a record before freeing it.
//!
//! A fault poisons the whole process on the drivers measured (`Context::recover`'s docs), so
//! the error that first notices it may come from another context: [`recorded`] reads the
//! current context's records first, then every other live one, then the first complete record
//! a teardown freed (kept as a copy).

use std::ffi::c_void;
use std::sync::{Mutex, OnceLock};

use cudarc::driver::sys;

use crate::driver;
use crate::driver::DriverError;
use crate::error::Error;
use crate::module::symbols::ImageSymbols;
use crate::{KernelPanic, PANIC_SLOT_SYMBOL_C, PanicRecord};

/// One context's record: host pointer and the address its kernels write to. Not `Drop`: it is
/// freed by [`ContextRecord::free`] in the context's teardown, or left (still registered) with
/// a context that is itself left to the end of the process.
struct Record {
    host: *mut PanicRecord,
    device: u64,
}

// SAFETY: the pointer is to page-locked memory that lives until its context's teardown frees it
// (after unregistering it); the host only reads it (volatile), under `RECORDS`'s lock.
unsafe impl Send for Record {}
// SAFETY: as above.
unsafe impl Sync for Record {}

/// A context's panic record, allocated at the context's first module load that needs one.
pub(crate) struct ContextRecord {
    /// The context the record is allocated in (its key in [`RECORDS`]).
    context: sys::CUcontext,
    /// `None` inside once the allocation failed (panics of this context are then only printed
    /// by the device, as for a module without a slot).
    record: OnceLock<Option<Record>>,
}

// SAFETY: `context` is only compared and stored in the registry, never used for a call.
unsafe impl Send for ContextRecord {}
// SAFETY: as above; the record is behind a `OnceLock`.
unsafe impl Sync for ContextRecord {}

/// A registered record: the raw context it belongs to and its host address (as integers: the
/// registry only compares the first and reads through the second under its lock).
struct Registered {
    context: usize,
    host: usize,
}

/// Every live record of the process. A record is added when allocated and removed, under this
/// lock, before it is freed: [`recorded`] reads records only while holding it.
static RECORDS: Mutex<Vec<Registered>> = Mutex::new(Vec::new());

/// The first complete record a teardown freed, as a copy: the process stays poisoned after the
/// context that recorded the panic is gone, and later errors still name the panic.
static FREED_PANIC: Mutex<Option<KernelPanic>> = Mutex::new(None);

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl ContextRecord {
    /// The record slot of context `context` (nothing allocated yet).
    pub(crate) fn new(context: sys::CUcontext) -> Self {
        ContextRecord { context, record: OnceLock::new() }
    }

    /// The device address of this context's record, allocating it on first use. The context
    /// must be current (a module is being loaded into it).
    fn device_address(&self) -> Option<u64> {
        if self.record.get().is_none() {
            // The allocation belongs to the current context: only ever this one's (a load binds
            // its context; checked, since a record made elsewhere would die with that context).
            let mut current = std::ptr::null_mut();
            // SAFETY: writes one handle.
            if unsafe { driver::context::get_current(&mut current) }.is_err() || current != self.context {
                return None;
            }
        }
        self.record.get_or_init(|| allocate(self.context)).as_ref().map(|record| record.device)
    }

    /// Frees the record, if one was allocated: unregistered first (so no host read can reach
    /// it), then, when `context_bound`, given back to the driver (else left to the context's
    /// destruction, which frees its page-locked memory).
    ///
    /// # Safety
    /// No kernel that may write the record runs or can still be launched: the context's work
    /// has finished (a context-wide synchronisation returned, or the context faulted) and the
    /// context has no handle left (its modules are unloaded or can no longer be launched). The
    /// context is not yet destroyed or released.
    pub(crate) unsafe fn free(&mut self, context_bound: bool) {
        let Some(Some(record)) = self.record.take() else { return };
        {
            let mut records = lock(&RECORDS);
            records.retain(|r| r.host != record.host as usize);
            // A panic recorded here may be the cause of the process's poisoned state: keep it
            // for the errors of other contexts (read under the registry's lock, as above).
            // SAFETY: the record is alive (freed below) and no kernel writes it any more.
            if let Some(report) = unsafe { read(record.host) } {
                let mut freed = lock(&FREED_PANIC);
                if freed.is_none() {
                    *freed = Some(report);
                }
            }
        }
        if context_bound {
            // SAFETY: allocated by `cuMemHostAlloc` in this context, freed once (taken above).
            let _ = unsafe { driver::memory::free_host(record.host.cast()) };
        }
    }
}

/// Allocates a record in the current context (`context`) and registers it.
fn allocate(context: sys::CUcontext) -> Option<Record> {
    let size = std::mem::size_of::<PanicRecord>();
    let mut host: *mut c_void = std::ptr::null_mut();
    // DEVICEMAP: kernels reach it at a device address. PORTABLE changes nothing for its
    // lifetime (it dies with this context all the same, G22S-2); kept as measured since
    // session 3, where records have been written and read on every GPU run.
    let flags = sys::CU_MEMHOSTALLOC_PORTABLE | sys::CU_MEMHOSTALLOC_DEVICEMAP;
    // SAFETY: writes one pointer to `size` bytes of page-locked memory, freed by the
    // context's teardown (`ContextRecord::free`).
    unsafe { driver::memory::host_alloc(&mut host, size, flags) }.ok()?;
    // SAFETY: the allocation is `size` bytes; zero means "no panic yet".
    unsafe { std::ptr::write_bytes(host.cast::<u8>(), 0, size) };
    let mut device = 0;
    // SAFETY: `host` was allocated with DEVICEMAP above, in the current context.
    if unsafe { driver::memory::host_get_device_pointer(&mut device, host, 0) }.is_err() {
        // SAFETY: allocated above, never handed out.
        let _ = unsafe { driver::memory::free_host(host) };
        return None;
    }
    lock(&RECORDS).push(Registered { context: context as usize, host: host as usize });
    Some(Record { host: host.cast(), device })
}

/// Points `module`'s `__ferrocuda_panic_slot` at `record`'s memory, if the module has one
/// (modules not built with ferrocuda-device do not, and then panics are only printed); the
/// record is allocated here at its context's first such module. The module's context, whose
/// record `record` is, must be current. A synchronous copy: not allowed while the thread
/// captures a graph.
pub(crate) fn install(module: sys::CUmodule, symbols: &ImageSymbols, record: &ContextRecord) -> Result<(), DriverError> {
    if !symbols.may_hold(crate::PANIC_SLOT_SYMBOL) {
        return Ok(());
    }
    let (mut address, mut size) = (0, 0);
    // SAFETY: looks a global up by a NUL-terminated name; writes its address and size.
    let found = unsafe { driver::module::get_global(&mut address, &mut size, module, PANIC_SLOT_SYMBOL_C.as_ptr()) };
    if found.is_err() || size != 8 {
        return Ok(());
    }
    if let Some(value) = record.device_address() {
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

/// The panic a kernel recorded, if one did: the current context's record first, then any
/// other live record (a fault poisons the whole process, so the error that notices it may come
/// from another context), then the first complete record a teardown freed.
pub(crate) fn recorded() -> Option<KernelPanic> {
    let mut current = std::ptr::null_mut();
    // SAFETY: writes one handle (null when none is current).
    let _ = unsafe { driver::context::get_current(&mut current) };
    recorded_in(current as usize)
}

/// [`recorded`], with `current` (a raw context) read first.
fn recorded_in(current: usize) -> Option<KernelPanic> {
    let records = lock(&RECORDS);
    let (mine, others): (Vec<&Registered>, Vec<&Registered>) = records.iter().partition(|r| r.context == current);
    for registered in mine.into_iter().chain(others) {
        // SAFETY: a registered record is alive: its teardown unregisters it (under this lock,
        // held here) before freeing it.
        if let Some(report) = unsafe { read(registered.host as *const PanicRecord) } {
            return Some(report);
        }
    }
    drop(records);
    lock(&FREED_PANIC).clone()
}

/// The report of the record at `host`, if it is complete.
///
/// # Safety
/// `host` points to a live record (page-locked, `size_of::<PanicRecord>()` bytes).
unsafe fn read(host: *const PanicRecord) -> Option<KernelPanic> {
    // SAFETY: the record is valid host memory (the caller's contract); the device writes
    // `state` last, after a system-scope fence, so the fields are complete once it reads a
    // complete state (with a message, without one, or with a template and its arguments)
    // (`from_record` checks it on the copy, which was read after `state`).
    unsafe {
        let state = std::ptr::addr_of!((*host).state).read_volatile();
        if !matches!(state, crate::RECORD_COMPLETE | crate::RECORD_COMPLETE_WITHOUT_MESSAGE | crate::RECORD_COMPLETE_WITH_ARGUMENTS) {
            return None;
        }
        KernelPanic::from_record(&host.read_volatile())
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
mod record_tests {
    use super::*;

    /// A record in ordinary host memory, registered under `context` as `allocate` does (no
    /// driver: the test frees it with `free(false)`, which only unregisters).
    fn fake(context: usize, kernel: &str) -> (ContextRecord, *mut PanicRecord) {
        let mut record = PanicRecord::EMPTY;
        record.kernel[..kernel.len()].copy_from_slice(kernel.as_bytes());
        record.file[..6].copy_from_slice(b"lib.rs");
        record.line = 7;
        let host = Box::into_raw(Box::new(record));
        lock(&RECORDS).push(Registered { context, host: host as usize });
        let slot = ContextRecord::new(context as sys::CUcontext);
        assert!(slot.record.set(Some(Record { host, device: 0 })).is_ok());
        (slot, host)
    }

    /// G22S-2 (audit 2026-11-29c): the panic record was one per process, allocated in the
    /// context current at the first module load and freed with it, then written by every
    /// later panic and read by the host. Records are now per context, and a record leaves the
    /// registry, the host's only way to read one, before its context's teardown frees it; a
    /// panic it held is kept as a copy. The current context's record is read first. (The GPU
    /// half, a context that dies before another's panic: `tests/g22s_2.rs`.)
    #[test]
    fn g22s_2_a_record_is_unregistered_before_its_context_frees_it() {
        // Contexts that no driver handed out (the registry only compares them).
        let (a, b) = (0x6a22_5200usize, 0x6a22_5201usize);
        let (mut slot_a, host_a) = fake(a, "kernel_a");
        let (mut slot_b, host_b) = fake(b, "kernel_b");
        // SAFETY: the fakes are live boxes, written only here.
        unsafe {
            (*host_a).state = crate::RECORD_COMPLETE_WITHOUT_MESSAGE;
            (*host_b).state = crate::RECORD_COMPLETE_WITHOUT_MESSAGE;
        }
        assert_eq!(recorded_in(a).unwrap().kernel, "kernel_a", "the current context's record comes first");
        assert_eq!(recorded_in(b).unwrap().kernel, "kernel_b", "the current context's record comes first");
        // SAFETY: nothing writes the fakes; `free(false)` does not call the driver.
        unsafe { slot_a.free(false) };
        assert!(!lock(&RECORDS).iter().any(|r| r.host == host_a as usize), "a freed record stayed readable");
        assert!(slot_a.record.get().is_none(), "the slot still names the freed record");
        assert_eq!(recorded_in(a).unwrap().kernel, "kernel_b", "another context's live record is read after the current one's");
        // SAFETY: as above.
        unsafe { slot_b.free(false) };
        assert!(!lock(&RECORDS).iter().any(|r| r.host == host_b as usize));
        // Both gone: the first complete record freed is kept as a copy (the process stays
        // poisoned after the context that recorded the panic is gone). Other tests of this
        // binary free no complete record, so it is this test's.
        assert_eq!(recorded_in(a).expect("the freed panic was not kept").kernel, "kernel_a", "the first freed panic is kept");
        // SAFETY: unregistered above; the boxes are freed once, here.
        unsafe { drop((Box::from_raw(host_a), Box::from_raw(host_b))) };
    }
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
