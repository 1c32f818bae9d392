//! The device-panic handshake between ferrocuda-device's panic handler and the host: the
//! record a panicking thread fills in page-locked host memory, and the module globals that
//! point to it. Defined once, here, for both sides.

/// The module global (`u64`, device memory) the host fills with the device address of the
/// process's [`PanicRecord`]; 0 means nobody listens and a panic is only printed.
pub const PANIC_SLOT_SYMBOL: &str = "__ferrocuda_panic_slot";

/// [`PANIC_SLOT_SYMBOL`] as a C string, for `cuModuleGetGlobal`.
pub const PANIC_SLOT_SYMBOL_C: &core::ffi::CStr = c"__ferrocuda_panic_slot";

/// The module global (`u32`) the first panicking thread swaps from 0 to 1 before it writes
/// the record; later panics of the launch only trap.
pub const PANIC_CLAIMED_SYMBOL: &str = "__ferrocuda_panic_claimed";

/// [`PanicRecord::state`] before any panic.
pub const RECORD_EMPTY: u32 = 0;

/// [`PanicRecord::state`] once the device finished writing the record (written last, after a
/// system-scope fence).
pub const RECORD_COMPLETE: u32 = 2;

/// [`PanicRecord::state`] once the device finished writing a record without its message: the
/// default, cheap panic handler of ferrocuda-device does not keep the messages of core's panics
/// (see its `panic` module; `KernelBuilder::panic_messages(true)` keeps them).
pub const RECORD_COMPLETE_WITHOUT_MESSAGE: u32 = 3;

/// [`PanicRecord::state`] once the device finished writing a record whose message is a
/// template to format with the recorded arguments (`kernel_panic!` under the cheap panic
/// handler): [`PanicRecord::message`] holds the format string, [`PanicRecord::arg_kinds`] and
/// [`PanicRecord::args`] the values (see [`crate::panic_format`]).
pub const RECORD_COMPLETE_WITH_ARGUMENTS: u32 = 4;

/// The value slots of a [`PanicRecord`]: the most arguments `kernel_panic!` keeps.
pub const PANIC_RECORD_ARGS: usize = 4;

/// The message a report shows when the record has none ([`RECORD_COMPLETE_WITHOUT_MESSAGE`]).
pub const MESSAGE_NOT_KEPT: &str =
    "(message not kept by the cheap panic handler: build the kernels with KernelBuilder::panic_messages(true) for it, or use ferrocuda_device::kernel_panic!)";

/// What a panicking thread leaves for the host. `repr(C)`: the device writes it, the host
/// reads it (the layout is asserted by the tests below).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PanicRecord {
    /// [`RECORD_EMPTY`], or [`RECORD_COMPLETE`] / [`RECORD_COMPLETE_WITHOUT_MESSAGE`] once
    /// written.
    pub state: u32,
    /// Source line.
    pub line: u32,
    /// Source column.
    pub column: u32,
    /// `blockIdx` of the panicking thread.
    pub block: [u32; 3],
    /// `threadIdx` of the panicking thread.
    pub thread: [u32; 3],
    /// The kernel's name, NUL-terminated (empty if unknown).
    pub kernel: [u8; 64],
    /// The source file, NUL-terminated.
    pub file: [u8; 192],
    /// The panic message, NUL-terminated, cut to fit (not written under
    /// [`RECORD_COMPLETE_WITHOUT_MESSAGE`]); under [`RECORD_COMPLETE_WITH_ARGUMENTS`] the format
    /// string, NUL-terminated, followed by the text of each string argument, NUL-terminated.
    pub message: [u8; 256],
    /// How many of [`args`](Self::args) are set (under [`RECORD_COMPLETE_WITH_ARGUMENTS`]).
    pub arg_count: u32,
    /// The kind of each argument (`crate::panic_format::ARG_*`).
    pub arg_kinds: [u32; PANIC_RECORD_ARGS],
    /// The bits of each argument (for a string, the offset of its text in `message`).
    pub args: [u64; PANIC_RECORD_ARGS],
}

impl PanicRecord {
    /// An empty record (state [`RECORD_EMPTY`], all zero).
    pub const EMPTY: PanicRecord = PanicRecord {
        state: RECORD_EMPTY,
        line: 0,
        column: 0,
        block: [0; 3],
        thread: [0; 3],
        kernel: [0; 64],
        file: [0; 192],
        message: [0; 256],
        arg_count: 0,
        arg_kinds: [0; PANIC_RECORD_ARGS],
        args: [0; PANIC_RECORD_ARGS],
    };

    /// True once the device finished writing it (with or without its message).
    pub fn is_complete(&self) -> bool {
        matches!(self.state, RECORD_COMPLETE | RECORD_COMPLETE_WITHOUT_MESSAGE | RECORD_COMPLETE_WITH_ARGUMENTS)
    }
}

impl core::fmt::Debug for PanicRecord {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PanicRecord")
            .field("state", &self.state)
            .field("line", &self.line)
            .field("block", &self.block)
            .field("thread", &self.thread)
            .finish_non_exhaustive()
    }
}

/// The text of a NUL-terminated byte field, up to the first NUL (lossy UTF-8), trimmed.
#[cfg(feature = "std")]
fn field_text(buffer: &[u8]) -> std::string::String {
    std::string::String::from_utf8_lossy(until_nul(buffer)).trim().into()
}

/// `buffer` up to its first NUL.
#[cfg(feature = "std")]
fn until_nul(buffer: &[u8]) -> &[u8] {
    let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
    &buffer[..end]
}

/// The message of a [`RECORD_COMPLETE_WITH_ARGUMENTS`] record: its template formatted with its
/// arguments (a string argument's text is read at its offset in the message field; an offset
/// outside it reads as empty).
#[cfg(feature = "std")]
fn formatted_message(record: &PanicRecord) -> std::string::String {
    use crate::panic_format::{Arg, Message};
    use std::vec::Vec;
    let template = std::string::String::from_utf8_lossy(until_nul(&record.message));
    let text_at = |offset: u64| {
        let tail = record.message.get(offset as usize..).unwrap_or_default();
        core::str::from_utf8(until_nul(tail)).unwrap_or("(not UTF-8)")
    };
    let count = (record.arg_count as usize).min(PANIC_RECORD_ARGS);
    let args: Vec<Arg<'_>> = (0..count).filter_map(|k| Arg::from_raw(record.arg_kinds[k], record.args[k], text_at)).collect();
    Message::format(&template, &args).as_str().trim().into()
}

/// Where a kernel panicked, as its first panicking thread reported it: the one report type
/// of both back ends (a GPU's [`PanicRecord`], the CPU executor's caught panic).
#[cfg(feature = "std")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelPanic {
    /// The kernel's name (empty if the module was not built by `#[kernel]`).
    pub kernel: std::string::String,
    /// Source file of the panic.
    pub file: std::string::String,
    /// Source line.
    pub line: u32,
    /// Source column.
    pub column: u32,
    /// The panic message. Kernels built with the default, cheap panic handler keep only the
    /// messages of `kernel_panic!` and show [`MESSAGE_NOT_KEPT`] for the others; with
    /// `panic_messages(true)`, messages with arguments show a note instead (see
    /// ferrocuda-device's `panic` module).
    pub message: std::string::String,
    /// `blockIdx` of the thread.
    pub block: [u32; 3],
    /// `threadIdx` of the thread.
    pub thread: [u32; 3],
}

#[cfg(feature = "std")]
impl KernelPanic {
    /// The report of a complete record; `None` while it is not [`complete`](PanicRecord::is_complete).
    pub fn from_record(record: &PanicRecord) -> Option<Self> {
        if !record.is_complete() {
            return None;
        }
        Some(KernelPanic {
            kernel: field_text(&record.kernel),
            file: field_text(&record.file),
            line: record.line,
            column: record.column,
            message: match record.state {
                RECORD_COMPLETE_WITHOUT_MESSAGE => MESSAGE_NOT_KEPT.into(),
                RECORD_COMPLETE_WITH_ARGUMENTS => formatted_message(record),
                _ => field_text(&record.message),
            },
            block: record.block,
            thread: record.thread,
        })
    }
}

#[cfg(feature = "std")]
impl core::fmt::Display for KernelPanic {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let [bx, by, bz] = self.block;
        let [tx, ty, tz] = self.thread;
        write!(
            f,
            "kernel `{}` panicked at {}:{}:{}, block ({bx}, {by}, {bz}), thread ({tx}, {ty}, {tz}): {}",
            self.kernel, self.file, self.line, self.column, self.message
        )
    }
}

#[cfg(feature = "std")]
impl std::error::Error for KernelPanic {}

/// The module-local `.global` table of kernel names that the device's panic report reads
/// (audit 2026-11-29b, G22R-1's escalation): the device library declares it empty, and
/// ferrocuda-builder fills it with every entry of the module: a `u64` record count, then per
/// entry its [`kernel_name_id`] and its name (cut to [`KERNEL_NAME_BYTES`]` - 1` bytes,
/// NUL-padded), little-endian. The kernel tag in shared memory holds a [`kernel_name_id`],
/// never an address: a corrupted tag can make the report name another kernel of the module
/// or none, never bytes elsewhere.
pub const KERNEL_NAMES_SYMBOL: &str = "__ferrocuda_kernel_names";

/// Bytes of a name in [`KERNEL_NAMES_SYMBOL`]'s records, NUL included (a record is the `u64`
/// id followed by the name): the size of [`PanicRecord::kernel`].
pub const KERNEL_NAME_BYTES: usize = 64;

/// Bytes of one record of the names table: the id and the name.
pub const KERNEL_NAME_RECORD_BYTES: usize = 8 + KERNEL_NAME_BYTES;

/// The number a `#[kernel]` entry stores in the kernel tag for the PTX symbol `symbol`
/// (FNV-1a, 64 bits; never 0, which the report reads as "no tag"). The macro and the builder
/// both compute it from the symbol, so they agree without sharing state.
pub const fn kernel_name_id(symbol: &str) -> u64 {
    let bytes = symbol.as_bytes();
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    let mut i = 0;
    while i < bytes.len() {
        hash = (hash ^ bytes[i] as u64).wrapping_mul(0x0000_0100_0000_01b3);
        i += 1;
    }
    if hash == 0 { 1 } else { hash }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layout both the device's panic handler and the host's reader rely on (it used to
    /// be asserted twice, on two copies of the struct).
    #[test]
    fn the_record_has_a_fixed_c_layout() {
        assert_eq!(core::mem::offset_of!(PanicRecord, line), 4);
        assert_eq!(core::mem::offset_of!(PanicRecord, block), 12);
        assert_eq!(core::mem::offset_of!(PanicRecord, thread), 24);
        assert_eq!(core::mem::offset_of!(PanicRecord, kernel), 36);
        assert_eq!(core::mem::offset_of!(PanicRecord, file), 100);
        assert_eq!(core::mem::offset_of!(PanicRecord, message), 292);
        assert_eq!(core::mem::offset_of!(PanicRecord, arg_count), 548);
        assert_eq!(core::mem::offset_of!(PanicRecord, arg_kinds), 552);
        assert_eq!(core::mem::offset_of!(PanicRecord, args), 568);
        assert_eq!(core::mem::size_of::<PanicRecord>(), 600);
        assert_eq!(PANIC_SLOT_SYMBOL_C.to_bytes(), PANIC_SLOT_SYMBOL.as_bytes());
    }

    #[cfg(feature = "std")]
    #[test]
    fn a_report_reads_like_the_device_line() {
        let mut record = PanicRecord::EMPTY;
        assert!(KernelPanic::from_record(&record).is_none());
        record.kernel[..14].copy_from_slice(b"square_checked");
        record.file[..22].copy_from_slice(b"gpu-kernels/src/lib.rs");
        record.message[..19].copy_from_slice(b"index out of bounds");
        (record.line, record.column, record.block, record.thread) = (42, 9, [1, 0, 0], [8, 0, 0]);
        record.state = RECORD_COMPLETE;
        let report = KernelPanic::from_record(&record).unwrap();
        use std::string::ToString;
        assert_eq!(
            report.to_string(),
            "kernel `square_checked` panicked at gpu-kernels/src/lib.rs:42:9, block (1, 0, 0), thread (8, 0, 0): index out of bounds"
        );
    }

    /// The cheap handler's record (issue 20): complete without a message, reported with the
    /// note that says how to get it, never with whatever the message field holds.
    #[cfg(feature = "std")]
    #[test]
    fn a_record_without_its_message_says_how_to_keep_it() {
        let mut record = PanicRecord::EMPTY;
        record.kernel[..6].copy_from_slice(b"divide");
        record.file[..10].copy_from_slice(b"src/lib.rs");
        record.message[..5].copy_from_slice(b"stale");
        (record.line, record.column, record.block, record.thread) = (7, 3, [0, 2, 0], [5, 1, 0]);
        record.state = RECORD_COMPLETE_WITHOUT_MESSAGE;
        assert!(record.is_complete());
        let report = KernelPanic::from_record(&record).unwrap();
        assert_eq!((report.kernel.as_str(), report.file.as_str(), report.line, report.column), ("divide", "src/lib.rs", 7, 3));
        assert_eq!((report.block, report.thread), ([0, 2, 0], [5, 1, 0]));
        assert_eq!(report.message, MESSAGE_NOT_KEPT);
        record.state = 1;
        assert!(KernelPanic::from_record(&record).is_none(), "a state that is neither complete value is not a report");
    }

    /// `kernel_panic!` under the cheap handler (issue 20): the device records the template, the
    /// text of string arguments after it, and the raw values; the host formats them.
    #[cfg(feature = "std")]
    #[test]
    fn a_template_record_is_formatted_with_its_arguments() {
        use crate::panic_format::{ARG_FLOAT, ARG_SIGNED, ARG_STR, ARG_UNSIGNED};
        let mut record = PanicRecord::EMPTY;
        let template = b"value {} at {} of {} over {}: {} {}\0name\0";
        record.message[..template.len()].copy_from_slice(template);
        record.arg_count = 4;
        record.arg_kinds = [ARG_SIGNED, ARG_UNSIGNED, ARG_STR, ARG_FLOAT];
        let name_at = template.iter().position(|&b| b == 0).unwrap() as u64 + 1;
        record.args = [(-7i64) as u64, 3, name_at, 2.5f64.to_bits()];
        record.state = RECORD_COMPLETE_WITH_ARGUMENTS;
        let report = KernelPanic::from_record(&record).unwrap();
        assert_eq!(report.message, "value -7 at 3 of name over 2.5: {?} {?}");
        // A string offset outside the field reads as empty instead of failing.
        record.args[2] = 1000;
        assert_eq!(KernelPanic::from_record(&record).unwrap().message, "value -7 at 3 of  over 2.5: {?} {?}");
        // More arguments than slots are not read.
        record.arg_count = 99;
        assert!(KernelPanic::from_record(&record).is_some());
    }
}
