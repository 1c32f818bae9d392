//! Device panics reported to the host with their details.
//!
//! ferrocuda-device's panic handler writes a record (kernel, file, line, column, message,
//! block, thread) into page-locked host memory before it traps; this module owns that memory
//! and tells every loaded module where it is (the module global `__ferrocuda_panic_slot`).
//! A trap poisons the whole process's CUDA state, so one record per process is enough: the
//! first panic is the one every later error reports, as [`Error::KernelPanic`](crate::Error).

use std::ffi::c_void;
use std::fmt;
use std::sync::OnceLock;

use cudarc::driver::sys;

use crate::driver::check;
use crate::error::DriverError;

/// The device's record, field for field (ferrocuda-device's `panic::PanicRecord`).
#[repr(C)]
struct PanicRecord {
    state: u32,
    line: u32,
    column: u32,
    block: [u32; 3],
    thread: [u32; 3],
    kernel: [u8; 64],
    file: [u8; 192],
    message: [u8; 256],
}

/// `state` once the device finished writing the record.
const RECORD_COMPLETE: u32 = 2;

/// Where a kernel panicked, as its first panicking thread reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelPanic {
    /// The kernel's name (empty if the module was not built by `#[kernel]`).
    pub kernel: String,
    /// Source file of the panic.
    pub file: String,
    /// Source line.
    pub line: u32,
    /// Source column.
    pub column: u32,
    /// The panic message (messages with arguments show a note instead: see ferrocuda-device).
    pub message: String,
    /// `blockIdx` of the thread.
    pub block: [u32; 3],
    /// `threadIdx` of the thread.
    pub thread: [u32; 3],
}

impl fmt::Display for KernelPanic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [bx, by, bz] = self.block;
        let [tx, ty, tz] = self.thread;
        write!(
            f,
            "kernel `{}` panicked at {}:{}:{}, block ({bx}, {by}, {bz}), thread ({tx}, {ty}, {tz}): {}",
            self.kernel, self.file, self.line, self.column, self.message
        )
    }
}

impl std::error::Error for KernelPanic {}

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
        check("cuMemHostAlloc", unsafe { sys::cuMemHostAlloc(&mut host, size, flags) }).ok()?;
        // SAFETY: the allocation is `size` bytes; zero means "no panic yet".
        unsafe { std::ptr::write_bytes(host.cast::<u8>(), 0, size) };
        let mut device = 0;
        // SAFETY: `host` was allocated with DEVICEMAP above.
        check("cuMemHostGetDevicePointer", unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device, host, 0) }).ok()?;
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
    let found = unsafe { sys::cuModuleGetGlobal_v2(&mut address, &mut size, module, c"__ferrocuda_panic_slot".as_ptr()) };
    if found != sys::CUresult::CUDA_SUCCESS || size != 8 {
        return Ok(());
    }
    if let Some(slot) = slot() {
        let value = slot.device;
        // SAFETY: copies 8 bytes into the 8-byte global found above.
        check("cuMemcpyHtoD", unsafe { sys::cuMemcpyHtoD_v2(address, (&value as *const u64).cast(), 8) })?;
    }
    Ok(())
}

/// The panic a kernel recorded, if one did.
pub(crate) fn recorded() -> Option<KernelPanic> {
    let slot = SLOT.get()?.as_ref()?;
    // SAFETY: the record is valid host memory; the device writes `state` last, after a
    // system-scope fence, so the fields are complete once it reads RECORD_COMPLETE.
    unsafe {
        if std::ptr::addr_of!((*slot.host).state).read_volatile() != RECORD_COMPLETE {
            return None;
        }
        let record = slot.host.read_volatile();
        let text = crate::module::nul_terminated_text;
        Some(KernelPanic {
            kernel: text(&record.kernel),
            file: text(&record.file),
            line: record.line,
            column: record.column,
            message: text(&record.message),
            block: record.block,
            thread: record.thread,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_has_the_devices_layout() {
        // Offsets of ferrocuda-device's PanicRecord (repr(C)): checked there against this list.
        assert_eq!(std::mem::offset_of!(PanicRecord, kernel), 36);
        assert_eq!(std::mem::offset_of!(PanicRecord, file), 100);
        assert_eq!(std::mem::offset_of!(PanicRecord, message), 292);
        assert_eq!(std::mem::size_of::<PanicRecord>(), 548);
    }

    #[test]
    fn a_report_reads_like_the_device_line() {
        let report = KernelPanic {
            kernel: "square_checked".into(),
            file: "gpu-kernels/src/lib.rs".into(),
            line: 42,
            column: 9,
            message: "index out of bounds".into(),
            block: [1, 0, 0],
            thread: [8, 0, 0],
        };
        assert_eq!(report.to_string(), "kernel `square_checked` panicked at gpu-kernels/src/lib.rs:42:9, block (1, 0, 0), thread (8, 0, 0): index out of bounds");
    }
}
