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
pub(crate) fn install(module: sys::CUmodule) -> Result<(), DriverError> {
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
    Error::Driver(error)
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
