//! Panics in kernels: the first panicking thread of a launch records where and why in a
//! [`PanicRecord`] that the host mapped into the module, prints the same line through
//! `vprintf`, and traps. The host's next synchronisation then returns an error carrying the
//! kernel, file, line, column, message, block and thread (`Error::KernelPanic` in
//! ferrocuda-host), not just "launch failed".
//!
//! The handshake with the host, through two module globals:
//! - `__ferrocuda_panic_slot` (`u64`, device memory; `ferrocuda_types::PANIC_SLOT_SYMBOL`): the device address of a `PanicRecord` in
//!   page-locked host memory, written by the host when it loads the module; 0 means nobody
//!   listens, and the panic is only printed.
//! - `__ferrocuda_panic_claimed` (`u32`, device memory): the first thread to swap it from 0 to 1
//!   writes the record; later panics of the launch only trap. (After a trap the context is
//!   unusable, so it is never reset.)
//!
//! The record lives in host memory because the context cannot be read after a trap.
//! The kernel's name comes from a shared-memory tag, `__ferrocuda_kernel_tag`, that every
//! `#[kernel]` entry writes ([`__enter_kernel`]) and only the report reads. That store costs
//! an `STS.128` per thread, so ferrocuda-builder removes it from the PTX of each kernel that
//! cannot reach the report (no panic path left after optimisation), and the tag's declaration
//! when nothing in the module names it any more (builder/src/kernel_tag.rs). The pass
//! recognises the exact inline-assembly text of the store below (any other mention of the tag
//! counts as a read, and a store in another shape is left alone): change the two together.

/// What a panicking thread leaves for the host, and the value of its `state` once complete:
/// one definition shared with the host (ferrocuda-types), so the layout cannot drift.
pub use ferrocuda_types::{PanicRecord, RECORD_COMPLETE};

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
    // leaves it unset).
    core::arch::global_asm!(".shared .align 8 .u64 __ferrocuda_kernel_tag[2];");
    const TAG_KEY: u64 = 0x6665_7272_6f63_7564;

    /// Records the running kernel's name (a NUL-terminated string) for panic reports; every
    /// thread writes the same value, once, at kernel entry. The builder deletes this store from
    /// kernels that cannot panic (see the module docs), matching its text exactly.
    #[doc(hidden)]
    #[inline(always)]
    pub fn __enter_kernel(name: &'static core::ffi::CStr) {
        let name = name.as_ptr() as u64;
        // SAFETY: writes this block's tag in shared memory.
        unsafe {
            core::arch::asm!(
                "{{ .reg .u32 t; mov.u32 t, __ferrocuda_kernel_tag; st.shared.v2.u64 [t], {{{n}, {c}}}; }}",
                n = in(reg64) name, c = in(reg64) name ^ TAG_KEY, options(nostack),
            );
        }
    }

    fn kernel_name() -> &'static [u8] {
        let (name, check): (u64, u64);
        // SAFETY: reads this block's tag in shared memory.
        unsafe {
            core::arch::asm!(
                "{{ .reg .u32 t; mov.u32 t, __ferrocuda_kernel_tag; ld.shared.v2.u64 {{{n}, {c}}}, [t]; }}",
                n = out(reg64) name, c = out(reg64) check, options(nostack, readonly),
            );
        }
        if name == 0 || check != name ^ TAG_KEY {
            return b"";
        }
        // SAFETY: the tag was written by `__enter_kernel` from a `&'static CStr`: readable up to
        // and including its NUL (no `strlen` on the device, so count here; names are short).
        unsafe {
            let start = name as *const u8;
            let mut len = 0;
            while len < 63 && *start.add(len) != 0 {
                len += 1;
            }
            core::slice::from_raw_parts(start, len)
        }
    }

    /// Copies `text` into the host's record field `out` (volatile: the host reads it), cut to
    /// fit, NUL-terminated.
    ///
    /// # Safety
    /// `out` points at a writable field of `out_len` bytes.
    #[inline(always)]
    unsafe fn write_field(out: *mut u8, out_len: usize, text: &[u8]) {
        let n = text.len().min(out_len - 1);
        for (i, &byte) in text[..n].iter().enumerate() {
            // SAFETY: i < n < out_len.
            unsafe { out.add(i).write_volatile(byte) };
        }
        // SAFETY: n < out_len.
        unsafe { out.add(n).write_volatile(0) };
    }

    // Kept small on purpose: ptxas charges the registers of this cold path to every kernel
    // that can panic, so it builds nothing on the stack it does not need, formats nothing, and
    // prints with `%.*s` straight from the strings.
    #[panic_handler]
    #[inline(never)]
    #[cold]
    fn panic(info: &PanicInfo) -> ! {
        let (file, line, column) = info.location().map(|l| (l.file(), l.line(), l.column())).unwrap_or(("<unknown>", 0, 0));
        // Only a message without arguments is kept: formatting one would pull `core::fmt`
        // (indirect calls) into the module, and ptxas then gives every kernel 255 registers.
        // `kernel_panic!` (panic_args.rs) keeps integer and float arguments.
        let message = info.message().as_str().unwrap_or("(formatted message; its arguments are not available on the GPU: use ferrocuda_device::kernel_panic!)");
        report(message.as_bytes(), file, line, column)
    }

    /// Records and prints a panic of this thread, then traps: what `kernel_panic!` calls.
    #[doc(hidden)]
    #[inline(never)]
    #[cold]
    pub fn __report(message: &[u8], file: &str, line: u32, column: u32) -> ! {
        report(message, file, line, column)
    }

    /// The body of the panic handler and of [`__report`], inlined into each so that the panic
    /// handler stays one function: a call from it to a second non-inlined function raised the
    /// register count ptxas gives every kernel with a panic path (52 to 75 for
    /// `dynamic_shared_sum`, which then no longer launched with 1024 threads).
    #[inline(always)]
    fn report(message: &[u8], file: &str, line: u32, column: u32) -> ! {
        use crate::thread::*;
        let kernel = kernel_name();
        let block = [block_idx_x(), block_idx_y(), block_idx_z()];
        let thread = [thread_idx_x(), thread_idx_y(), thread_idx_z()];

        // SAFETY: a module global, updated atomically.
        let first = unsafe { crate::atomic::Atomic::from_ptr(core::ptr::addr_of_mut!(__ferrocuda_panic_claimed)) }.compare_exchange(0, 1) == 0;
        if !first {
            // SAFETY: ends this thread's kernel with an error.
            unsafe { core::arch::nvptx::trap() }
        }
        // SAFETY: the host wrote the slot before any launch (or left it 0).
        let slot = unsafe { core::ptr::addr_of!(__ferrocuda_panic_slot).read_volatile() } as *mut PanicRecord;
        if !slot.is_null() {
            // SAFETY: the slot points at a mapped, page-locked PanicRecord that only this thread
            // writes (it won the claim). `state` goes last, after a system-scope fence.
            unsafe {
                let r = &raw mut *slot;
                (&raw mut (*r).line).write_volatile(line);
                (&raw mut (*r).column).write_volatile(column);
                (&raw mut (*r).block).write_volatile(block);
                (&raw mut (*r).thread).write_volatile(thread);
                write_field((&raw mut (*r).kernel).cast(), 64, kernel);
                write_field((&raw mut (*r).file).cast(), 192, file.as_bytes());
                write_field((&raw mut (*r).message).cast(), 256, message);
                crate::sync::fence_system();
                (&raw mut (*r).state).write_volatile(RECORD_COMPLETE);
                crate::sync::fence_system();
            }
        }
        // Device printf cannot take `%.*s` precision arguments, so the strings are copied
        // NUL-terminated onto the stack and printed with `%s`.
        let (mut kernel_text, mut file_text, mut message_text) = ([0u8; 64], [0u8; 192], [0u8; 256]);
        // SAFETY: each buffer is as long as the length given.
        unsafe {
            write_field(kernel_text.as_mut_ptr(), 64, kernel);
            write_field(file_text.as_mut_ptr(), 192, file.as_bytes());
            write_field(message_text.as_mut_ptr(), 256, message);
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
        let args = Args { kernel: kernel_text.as_ptr(), file: file_text.as_ptr(), line, column, block, thread, message: message_text.as_ptr() };
        // SAFETY: the format's conversions match `Args` (C varargs layout); strings end in NUL.
        unsafe {
            core::arch::nvptx::vprintf(
                c"kernel `%s` panicked at %s:%u:%u, block (%u, %u, %u), thread (%u, %u, %u): %s\n".as_ptr().cast(),
                (&args as *const Args).cast(),
            );
            core::arch::nvptx::trap()
        }
    }
}

#[cfg(target_arch = "nvptx64")]
pub use device::{__enter_kernel, __report};

/// On the host (CPU executor) the kernel name comes from the executor itself.
#[cfg(not(target_arch = "nvptx64"))]
#[doc(hidden)]
#[inline(always)]
pub fn __enter_kernel(_name: &'static core::ffi::CStr) {}
