//! Printing from a kernel: [`println!`](crate::println) and [`print!`](crate::print), CUDA's
//! `printf` with Rust's formatting.
//!
//! On the GPU the text is formatted by `core::fmt` into a 512-byte buffer on the thread's stack
//! (longer output is cut) and handed to `vprintf` as one `%s`, so one call prints one unbroken
//! line even when many threads print. A plain string with no arguments skips the formatting.
//! Cost: the formatting code (a few KiB of PTX) and a stack buffer, only in kernels that print;
//! the driver's printf FIFO (1 MiB by default) holds the output until the host synchronises.

use core::fmt;

/// Prints to the host's stdout from a kernel, like `std::println!`.
#[macro_export]
macro_rules! println {
    () => { $crate::print::__print(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::print::__print(format_args!("{}\n", format_args!($($arg)*))) };
}

/// Prints to the host's stdout from a kernel, like `std::print!`.
#[macro_export]
macro_rules! print {
    ($($arg:tt)*) => { $crate::print::__print(format_args!($($arg)*)) };
}

#[cfg_attr(not(target_arch = "nvptx64"), allow(dead_code))]
/// A fixed buffer that `core::fmt` writes into, cutting what does not fit (on a char boundary).
pub(crate) struct FixedBuffer<const N: usize> {
    bytes: [u8; N],
    len: usize,
}

#[cfg_attr(not(target_arch = "nvptx64"), allow(dead_code))]
impl<const N: usize> FixedBuffer<N> {
    pub(crate) const fn new() -> Self {
        FixedBuffer { bytes: [0; N], len: 0 }
    }

    /// The text so far, NUL-terminated (room for the NUL is always kept).
    pub(crate) fn as_c_str(&mut self) -> *const u8 {
        self.bytes[self.len.min(N - 1)] = 0;
        self.bytes.as_ptr()
    }

    #[allow(dead_code)]
    pub(crate) fn as_str(&self) -> &str {
        core::str::from_utf8(&self.bytes[..self.len]).unwrap_or("")
    }
}

impl<const N: usize> fmt::Write for FixedBuffer<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = N - 1 - self.len;
        let mut take = s.len().min(room);
        while !s.is_char_boundary(take) {
            take -= 1;
        }
        self.bytes[self.len..self.len + take].copy_from_slice(&s.as_bytes()[..take]);
        self.len += take;
        Ok(())
    }
}

#[doc(hidden)]
#[inline(never)]
pub fn __print(args: fmt::Arguments<'_>) {
    #[cfg(target_arch = "nvptx64")]
    {
        #[repr(C)]
        struct Args {
            len: u32,
            text: *const u8,
        }
        if let Some(text) = args.as_str() {
            // No arguments: print the string itself (`%.*s` needs no NUL terminator).
            let args = Args { len: text.len() as u32, text: text.as_ptr() };
            // SAFETY: the format's conversions match `Args`.
            unsafe { core::arch::nvptx::vprintf(c"%.*s".as_ptr().cast(), (&args as *const Args).cast()) };
            return;
        }
        let mut buffer = FixedBuffer::<512>::new();
        let _ = fmt::write(&mut buffer, args);
        let args = Args { len: buffer.len as u32, text: buffer.as_c_str() };
        // SAFETY: as above.
        unsafe { core::arch::nvptx::vprintf(c"%.*s".as_ptr().cast(), (&args as *const Args).cast()) };
    }
    #[cfg(not(target_arch = "nvptx64"))]
    crate::emu::print(args);
}
