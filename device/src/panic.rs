//! The device panic handler: prints where the panic happened, and in which block and thread,
//! through `vprintf`, then traps. The host sees the trap as a launch failure at its next
//! synchronisation, and the printed line on stdout.

use core::panic::PanicInfo;

const TEXT_CAP: usize = 160;

/// `vprintf`'s argument buffer: each argument aligned to its size, as C varargs are packed.
#[repr(C)]
struct PanicArgs {
    file: *const u8,
    line: u32,
    column: u32,
    block: [u32; 3],
    thread: [u32; 3],
    message: *const u8,
}

/// Copies `text` into `buffer` as a NUL-terminated C string (truncated to fit).
fn c_string<'b>(text: &str, buffer: &'b mut [u8; TEXT_CAP]) -> &'b [u8; TEXT_CAP] {
    let n = text.len().min(TEXT_CAP - 1);
    buffer[..n].copy_from_slice(&text.as_bytes()[..n]);
    buffer[n] = 0;
    buffer
}

#[panic_handler]
fn panic(info: &PanicInfo) -> ! {
    use crate::thread::*;
    let (mut file_buf, mut message_buf) = ([0u8; TEXT_CAP], [0u8; TEXT_CAP]);
    let (file, line, column) = info.location().map(|l| (l.file(), l.line(), l.column())).unwrap_or(("<unknown>", 0, 0));
    let message = info.message().as_str().unwrap_or("(formatted message not shown on the device)");
    let args = PanicArgs {
        file: c_string(file, &mut file_buf).as_ptr(),
        line,
        column,
        block: [block_idx_x(), block_idx_y(), block_idx_z()],
        thread: [thread_idx_x(), thread_idx_y(), thread_idx_z()],
        message: c_string(message, &mut message_buf).as_ptr(),
    };
    // SAFETY: the format's conversions match `PanicArgs` field by field; strings are NUL-terminated.
    unsafe {
        core::arch::nvptx::vprintf(
            c"kernel panicked at %s:%u:%u, block (%u, %u, %u), thread (%u, %u, %u): %s\n".as_ptr().cast(),
            (&args as *const PanicArgs).cast(),
        );
        core::arch::nvptx::trap()
    }
}
