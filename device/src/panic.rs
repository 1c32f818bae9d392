//! Panics in kernels: the first panicking thread of a launch records where it panicked in a
//! [`PanicRecord`] that the host mapped into the module, and traps. The host's next
//! synchronisation then returns an error carrying the kernel, file, line, column, block, thread
//! and message (`Error::KernelPanic` in ferrocuda-host), not just "launch failed".
//!
//! ## Cheap by default
//!
//! A reachable panic path (a bounds check, a division by a parameter, an `unwrap`) is in almost
//! every safe kernel, so what the handler costs is charged to every kernel: ptxas compiles the
//! handler into each kernel that can reach it, and gives the kernel the registers and stack
//! frame of its most demanding path. The default handler therefore
//! - formats nothing and prints nothing: no `vprintf` and no buffers on the stack, so no local
//!   memory (formatting or printing cost a 592-640-byte stack frame, 30-50 registers and
//!   1,300-2,000 SASS instructions in every kernel with a bounds check);
//! - never reads the panic's message (`PanicInfo::message`): reading it keeps each panic site's
//!   `fmt::Arguments` alive, and with them the addresses of core's `Display` implementations,
//!   which ptxas then compiles into every kernel (about 1,000 instructions and 50 registers);
//!   unread, LLVM deletes the arguments at every site;
//! - copies the file name and the kernel's name with one byte loop (32-bit counter), and writes
//!   line, column, block and thread with plain stores.
//!
//! What it records is the report of today without the message of core's own panics (the record's
//! state says the message was not kept, and the host says so). Messages of
//! [`kernel_panic!`](crate::kernel_panic) are kept, values included, still without formatting
//! on the GPU: the format string is copied and the values are stored raw
//! (`__report_template`), and the host formats them. Building the kernels with `KernelBuilder::panic_messages(true)` (the cfg
//! `ferrocuda_panic_messages`) brings back the detailed handler: messages without arguments
//! ("attempt to divide by zero") in the record, and the report printed by the device through
//! `vprintf`, for the price above. docs/performance.md has the figures of both.
//!
//! ## The handshake with the host, through two module globals
//! - `__ferrocuda_panic_slot` (`u64`, device memory; `ferrocuda_types::PANIC_SLOT_SYMBOL`): the
//!   device address of a `PanicRecord` in page-locked host memory, written by the host when it
//!   loads the module; 0 means nobody listens.
//! - `__ferrocuda_panic_claimed` (`u32`, device memory): 0, then [`CLAIMED`] once the first
//!   panicking thread swapped it (atomically: one winner however many threads panic at once),
//!   then [`WRITTEN`] when the winner has finished the record. Every other panicking thread
//!   waits for [`WRITTEN`] before it traps: a trap ends the whole launch, and a loser that
//!   trapped at once could cut the winner's record short. (After a trap the context is
//!   unusable, so the flag is never reset.)
//!
//! The record lives in host memory because the context cannot be read after a trap.
//! The kernel's name comes from a shared-memory tag, `__ferrocuda_kernel_tag`, that every
//! `#[kernel]` entry writes ([`__enter_kernel`]) and only the report reads: the kernel's
//! [`kernel_name_id`](ferrocuda_types::kernel_name_id) and a check word, which the report looks
//! up in the module's names table, `__ferrocuda_kernel_names` (filled by ferrocuda-builder).
//! The tag never holds an address: shared memory is what a kernel's own shared-memory bug can
//! overwrite (audit 2026-11-29b, G22R-1 rewrote the tag with `(secret, secret ^ key)` and the
//! report copied the bytes of a buffer the launch was never given), so the worst a corrupted
//! tag can do is name another kernel of the module, or none. That store costs
//! an `STS.128` per thread, so ferrocuda-builder removes it from the PTX of each kernel that
//! cannot reach the report (no panic path left after optimisation), and the tag's declaration
//! when nothing in the module names it any more (builder/src/kernel_tag.rs). The pass
//! recognises the exact inline-assembly text of the store below (any other mention of the tag
//! counts as a read, and a store in another shape is left alone): change the two together.

/// What a panicking thread leaves for the host, and the value of its `state` once complete:
/// one definition shared with the host (ferrocuda-types), so the layout cannot drift.
pub use ferrocuda_types::{PANIC_RECORD_ARGS, PanicRecord, RECORD_COMPLETE, RECORD_COMPLETE_WITH_ARGUMENTS, RECORD_COMPLETE_WITHOUT_MESSAGE};

/// `__ferrocuda_panic_claimed` once a thread won the right to write the record.
pub const CLAIMED: u32 = 1;

/// `__ferrocuda_panic_claimed` once the winner has written the record (or found nobody
/// listening): the other panicking threads may trap.
pub const WRITTEN: u32 = 2;

/// The kernel tag's size: it is written with one `st.shared.v2.u64` and read with one
/// `ld.shared.v2.u64`, 16-byte accesses.
const TAG_BYTES: usize = 16;

/// The kernel tag's declared alignment. A vector access must be aligned to its whole width on
/// the GPU: with `.align 8`, ptxas placed the tag at offset 8 after a 4-byte `shared_array!`
/// and every launch of a kernel that can panic faulted with `CUDA_ERROR_MISALIGNED_ADDRESS`
/// before the kernel's code ran (issue 30). Tied to the access width at compile time.
const TAG_ALIGN: usize = 16;
const _: () = assert!(TAG_ALIGN >= TAG_BYTES && TAG_ALIGN.is_power_of_two(), "the kernel tag's 16-byte access needs 16-byte alignment");

#[cfg(target_arch = "nvptx64")]
mod device {
    use super::*;
    use core::panic::PanicInfo;

    /// Where the host wants the record (see the module docs).
    #[unsafe(no_mangle)]
    #[used]
    static mut __ferrocuda_panic_slot: u64 = 0;

    /// Set by the first panicking thread.
    #[unsafe(no_mangle)]
    #[used]
    static mut __ferrocuda_panic_claimed: u32 = 0;

    // The running kernel's name and a check word: shared memory starts with garbage, so the
    // name is trusted only when `check == name ^ TAG_KEY` (a kernel not made by `#[kernel]`
    // leaves it unset). Aligned to the width of its one access (`TAG_BYTES`, below): with
    // `.align 8`, ptxas placed it after a small `shared_array!` and every launch of a kernel that
    // can panic faulted with CUDA_ERROR_MISALIGNED_ADDRESS (issue 30 item 1, issue 29's ping-pong).
    core::arch::global_asm!(".shared .align {align} .u64 __ferrocuda_kernel_tag[2];", align = const TAG_ALIGN);
    const TAG_KEY: u64 = 0x6665_7272_6f63_7564;

    /// Records the running kernel's [`kernel_name_id`](ferrocuda_types::kernel_name_id) for
    /// panic reports; every thread writes the same value, once, at kernel entry. The builder
    /// deletes this store from kernels that cannot panic (see the module docs), matching its
    /// text exactly.
    #[doc(hidden)]
    #[inline(always)]
    pub fn __enter_kernel(id: u64) {
        // SAFETY: writes this block's tag in shared memory.
        unsafe {
            core::arch::asm!(
                "{{ .reg .u32 t; mov.u32 t, __ferrocuda_kernel_tag; st.shared.v2.u64 [t], {{{n}, {c}}}; }}",
                n = in(reg64) id, c = in(reg64) id ^ TAG_KEY, options(nostack),
            );
        }
    }

    // The names of the module's kernels, which the report copies from (audit 2026-11-29b,
    // G22R-1): declared empty here (a record count of 0), and filled by ferrocuda-builder with
    // every entry of the module (builder/src/kernel_names.rs, which replaces this exact line).
    // Module-local: no other module and no host name can reach it (`__ferrocuda_` globals are
    // refused by `Module::global`).
    core::arch::global_asm!(".global .align 8 .b8 __ferrocuda_kernel_names[8];");

    /// The name of the kernel whose id `__enter_kernel` recorded for this block
    /// (NUL-terminated, inside the names table), or `c""` when the tag is unset, fails its
    /// check word, or holds an id the table does not list.
    ///
    /// The tag lives in shared memory, which a shared-memory bug of the kernel can overwrite
    /// (G22R-1 did, from safe code): it must not be able to make the report read anything but
    /// the table. So the tag holds an id, never an address, and the only memory read here is
    /// the table's, record by record, below the count the builder wrote with it.
    #[inline(always)]
    fn kernel_name() -> *const u8 {
        let (id, check): (u64, u64);
        // SAFETY: reads this block's tag in shared memory.
        unsafe {
            core::arch::asm!(
                "{{ .reg .u32 t; mov.u32 t, __ferrocuda_kernel_tag; ld.shared.v2.u64 {{{n}, {c}}}, [t]; }}",
                n = out(reg64) id, c = out(reg64) check, options(nostack, readonly),
            );
        }
        if id == 0 || check != id ^ TAG_KEY {
            return c"".as_ptr().cast();
        }
        let table: *const u8;
        // SAFETY: the generic address of the module's names table (declared above).
        unsafe {
            core::arch::asm!(
                "{{ .reg .u64 g; mov.u64 g, __ferrocuda_kernel_names; cvta.global.u64 {p}, g; }}",
                p = out(reg64) table, options(pure, nomem, nostack),
            );
        }
        // SAFETY: the table starts with its record count, written with it by the builder.
        let count = unsafe { table.cast::<u64>().read_volatile() };
        // One pointer walks the records up to the end the count gives (fewer live registers
        // than an index: the handler's registers are every panicking kernel's). Wrapping
        // arithmetic, as in `copy_field`: a checked operation could panic inside the handler.
        let mut record = table.wrapping_add(8);
        let end = record.wrapping_add((count as usize).wrapping_mul(ferrocuda_types::KERNEL_NAME_RECORD_BYTES));
        while record < end {
            // SAFETY: a record below the count: its id, then its NUL-terminated name.
            if unsafe { record.cast::<u64>().read_volatile() } == id {
                return record.wrapping_add(8);
            }
            record = record.wrapping_add(ferrocuda_types::KERNEL_NAME_RECORD_BYTES);
        }
        c"".as_ptr().cast()
    }

    /// Copies `text` (its first `len` bytes, or up to its first NUL if that comes sooner) into
    /// the host's record field `out` of `capacity` bytes, cut to fit, NUL-terminated (volatile:
    /// the host reads it). A byte loop with a 32-bit count: with a `usize` count (and the
    /// string's length computed first) the handler needed 6-8 more registers, which small
    /// kernels pay (measured on tests/fixtures/panic-cost). Speed does not matter: it runs once.
    ///
    /// # Safety
    /// `out` points at a writable field of `capacity` (>= 1) bytes; `text` is readable up to
    /// `len` bytes or its first NUL.
    /// Returns the number of bytes copied before the NUL. Its arithmetic wraps (the values stay
    /// far below the limits): in a build with overflow checks a checked operation here could
    /// panic inside the panic handler, a cycle the builder refuses as recursion (seen with
    /// nightly 1.97's core).
    #[inline(always)]
    unsafe fn copy_field(out: *mut u8, capacity: u32, text: *const u8, len: usize) -> u32 {
        let last = capacity.wrapping_sub(1);
        let limit = if len < last as usize { len as u32 } else { last };
        let mut i = 0u32;
        loop {
            // SAFETY: i < limit <= len, and the loop stops at the first NUL.
            let byte = if i < limit { unsafe { text.add(i as usize).read_volatile() } } else { 0 };
            // SAFETY: i <= limit < capacity.
            unsafe { out.add(i as usize).write_volatile(byte) };
            if byte == 0 {
                return i;
            }
            i = i.wrapping_add(1);
        }
    }

    /// The panic handler of every kernel. It must not read `info.message()` unless the detailed
    /// mode asks for it (see the module docs: that alone costs ~1,000 instructions a kernel).
    #[panic_handler]
    #[cold]
    fn panic(info: &PanicInfo) -> ! {
        // Core's panics always have a location; a missing one is reported at this file.
        let location = info.location().unwrap_or(core::panic::Location::caller());
        #[cfg(not(ferrocuda_panic_messages))]
        let message = Text::NotKept;
        // Only a message without arguments is kept: formatting one would pull `core::fmt`
        // (indirect calls) into the module, and ptxas then gives every kernel 255 registers.
        #[cfg(ferrocuda_panic_messages)]
        let message = Text::Plain(
            info.message()
                .as_str()
                .unwrap_or("(formatted message; its arguments are not available on the GPU: use ferrocuda_device::kernel_panic!)")
                .as_bytes(),
        );
        record_and_trap(message, location.file(), location.line(), location.column())
    }

    /// Records a panic of this thread with its message, then traps: what `kernel_panic!` calls
    /// under the detailed handler.
    #[doc(hidden)]
    #[inline(never)]
    #[cold]
    pub fn __report(message: &[u8], location: &core::panic::Location<'_>) -> ! {
        record_and_trap(Text::Plain(message), location.file(), location.line(), location.column())
    }

    /// Records a panic of this thread with a template and its raw arguments, then traps: what
    /// `kernel_panic!` calls under the cheap handler. Inlined, so that the arguments stay in
    /// registers.
    #[doc(hidden)]
    #[inline(always)]
    pub fn __report_template(format: &str, args: &[ferrocuda_types::panic_format::Arg<'_>], location: &core::panic::Location<'_>) -> ! {
        record_and_trap(Text::Template(format, args), location.file(), location.line(), location.column())
    }

    /// What a record's message is made of.
    #[derive(Clone, Copy)]
    enum Text<'a> {
        /// Not kept (core's panics under the cheap handler).
        NotKept,
        /// The message itself.
        Plain(&'a [u8]),
        /// A format string and its arguments, formatted by the host.
        Template(&'a str, &'a [ferrocuda_types::panic_format::Arg<'a>]),
    }

    /// The body of the panic handler and of [`__report`], inlined into each so that the panic
    /// handler stays one function: a call from it to a second non-inlined function raised the
    /// register count ptxas gives every kernel with a panic path.
    ///
    /// The first thread to claim `__ferrocuda_panic_claimed` writes the record (`state` last,
    /// after a system-scope fence) and marks it [`WRITTEN`]; every other panicking thread waits
    /// for that mark, then all trap.
    #[inline(always)]
    fn record_and_trap(message: Text<'_>, file: &str, line: u32, column: u32) -> ! {
        use crate::thread::*;
        // SAFETY: a module global, only ever accessed atomically.
        let claim = unsafe { crate::atomic::Atomic::from_ptr(core::ptr::addr_of_mut!(__ferrocuda_panic_claimed)) };
        if claim.compare_exchange(0, CLAIMED) != 0 {
            // Another thread writes the record: trapping now could end the launch before it
            // is complete. (Threads of one warp make progress independently on sm_70+.)
            while claim.load() != WRITTEN {}
            // SAFETY: ends this thread's kernel with an error.
            unsafe { core::arch::nvptx::trap() }
        }
        let kernel = kernel_name();
        #[cfg(ferrocuda_panic_messages)]
        if let Text::Plain(text) = message {
            detailed::print(kernel, file, line, column, text);
        }
        // SAFETY: the host wrote the slot before any launch (or left it 0).
        let slot = unsafe { core::ptr::addr_of!(__ferrocuda_panic_slot).read_volatile() } as *mut PanicRecord;
        if !slot.is_null() {
            // SAFETY: the slot points at a mapped, page-locked PanicRecord that only this thread
            // writes (it won the claim); the strings are readable up to their length or NUL.
            // One store per field: writing `[u32; 3]` at once went through the stack.
            unsafe {
                let r = &raw mut *slot;
                copy_field((&raw mut (*r).kernel).cast(), 64, kernel, usize::MAX);
                copy_field((&raw mut (*r).file).cast(), 192, file.as_ptr(), file.len());
                let state = match message {
                    Text::NotKept => RECORD_COMPLETE_WITHOUT_MESSAGE,
                    Text::Plain(text) => {
                        copy_field((&raw mut (*r).message).cast(), 256, text.as_ptr(), text.len());
                        RECORD_COMPLETE
                    }
                    Text::Template(format, args) => {
                        write_template(r, format, args);
                        RECORD_COMPLETE_WITH_ARGUMENTS
                    }
                };
                (&raw mut (*r).line).write_volatile(line);
                (&raw mut (*r).column).write_volatile(column);
                (&raw mut (*r).block[0]).write_volatile(block_idx_x());
                (&raw mut (*r).block[1]).write_volatile(block_idx_y());
                (&raw mut (*r).block[2]).write_volatile(block_idx_z());
                (&raw mut (*r).thread[0]).write_volatile(thread_idx_x());
                (&raw mut (*r).thread[1]).write_volatile(thread_idx_y());
                (&raw mut (*r).thread[2]).write_volatile(thread_idx_z());
                crate::sync::fence_system();
                (&raw mut (*r).state).write_volatile(state);
                crate::sync::fence_system();
            }
        }
        claim.store(WRITTEN);
        // SAFETY: ends this thread's kernel with an error.
        unsafe { core::arch::nvptx::trap() }
    }

    /// Writes `format` (NUL-terminated) into the record's message field, each string argument's
    /// text after it, and each argument's kind and bits (for a string: its text's offset) into
    /// the value slots; `ferrocuda_types::KernelPanic` formats them.
    ///
    /// # Safety
    /// `r` points at the record, which only this thread writes.
    #[inline(always)]
    unsafe fn write_template(r: *mut PanicRecord, format: &str, args: &[ferrocuda_types::panic_format::Arg<'_>]) {
        use ferrocuda_types::panic_format::Arg;
        // SAFETY (every access below): `r` is the record; offsets stay inside its fields.
        unsafe {
            let message: *mut u8 = (&raw mut (*r).message).cast();
            let mut used = copy_field(message, 256, format.as_ptr(), format.len()).wrapping_add(1);
            let count = if args.len() < PANIC_RECORD_ARGS { args.len() } else { PANIC_RECORD_ARGS };
            for (k, arg) in args[..count].iter().enumerate() {
                let (kind, mut bits) = arg.raw();
                if let Arg::Str(text) = *arg {
                    // The text follows the previous one; without room it reads as empty.
                    bits = used as u64;
                    if used < 256 {
                        used = used.wrapping_add(copy_field(message.add(used as usize), 256u32.wrapping_sub(used), text.as_ptr(), text.len())).wrapping_add(1);
                    }
                }
                (&raw mut (*r).arg_kinds[k]).write_volatile(kind);
                (&raw mut (*r).args[k]).write_volatile(bits);
            }
            (&raw mut (*r).arg_count).write_volatile(count as u32);
        }
    }

    /// The detailed mode's printed report (`KernelBuilder::panic_messages(true)`).
    #[cfg(ferrocuda_panic_messages)]
    mod detailed {
        /// Prints the report line (the host's `KernelPanic` text) through `vprintf`.
        /// Device printf cannot take `%.*s` precision arguments, so the strings are copied
        /// NUL-terminated onto the stack and printed with `%s`: the ~600-byte stack frame this
        /// mode costs.
        #[inline(always)]
        pub(super) fn print(kernel: *const u8, file: &str, line: u32, column: u32, message: &[u8]) {
            use crate::thread::*;
            let (mut kernel_text, mut file_text, mut message_text) = ([0u8; 64], [0u8; 192], [0u8; 256]);
            // SAFETY: each buffer is as long as the capacity given; the kernel name is
            // NUL-terminated, the others are read up to their length.
            unsafe {
                super::copy_field(kernel_text.as_mut_ptr(), 64, kernel, usize::MAX);
                super::copy_field(file_text.as_mut_ptr(), 192, file.as_ptr(), file.len());
                super::copy_field(message_text.as_mut_ptr(), 256, message.as_ptr(), message.len());
            }
            #[repr(C)]
            struct Args {
                kernel: *const u8,
                file: *const u8,
                line: u32,
                column: u32,
                block: [u32; 3],
                thread: [u32; 3],
                message: *const u8,
            }
            let args = Args {
                kernel: kernel_text.as_ptr(),
                file: file_text.as_ptr(),
                line,
                column,
                block: [block_idx_x(), block_idx_y(), block_idx_z()],
                thread: [thread_idx_x(), thread_idx_y(), thread_idx_z()],
                message: message_text.as_ptr(),
            };
            // SAFETY: the format's conversions match `Args` (C varargs layout); strings end in NUL.
            unsafe {
                core::arch::nvptx::vprintf(
                    c"kernel `%s` panicked at %s:%u:%u, block (%u, %u, %u), thread (%u, %u, %u): %s\n".as_ptr().cast(),
                    (&args as *const Args).cast(),
                );
            }
        }
    }
}

#[cfg(target_arch = "nvptx64")]
pub use device::{__enter_kernel, __report, __report_template};

/// On the host (CPU executor) the kernel name comes from the executor itself.
#[cfg(not(target_arch = "nvptx64"))]
#[doc(hidden)]
#[inline(always)]
pub fn __enter_kernel(_id: u64) {}
