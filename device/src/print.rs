//! Printing from a kernel: [`println!`](crate::println) and [`print!`](macro@crate::print), CUDA's
//! `printf` with Rust's format strings.
//!
//! The format string is compiled into one `vprintf` call by a procedural macro: each `{}`
//! becomes the C conversion for its argument's type (`%lld`, `%llu`, `%g`, ...; strings are copied into the format), and
//! the arguments are packed as C varargs in a buffer on the thread's stack. No `core::fmt` runs
//! on the GPU: its indirect calls would make ptxas give every kernel in the module 255
//! registers. One call prints one unbroken line even when many threads print.
//!
//! Supported: `{}`, `{:?}` (the same), `{0}`, `{name}`, `{:x}`, `{:X}`, `{:e}`, width, `0`
//! padding, `<`/`>` alignment, `.precision`; argument types: integers, floats, `bool`, `char`
//! `&str` (copied into the format string). Floats without a precision print like C's `%g` (6 significant digits);
//! `{:.3}` gives `%.3f`. Other specs are a compile error. Cost: a few dozen instructions per
//! call and ~0.5 KiB of stack in the printing thread; the driver's printf FIFO (1 MiB by
//! default, see `Context::set_limit`) holds the output until the host synchronises.
//!
//! On the host (CPU executor) the same macros print through `std`.

/// Prints to the host's stdout from a kernel, like `std::println!`.
#[macro_export]
macro_rules! println {
    () => { $crate::__private::device_print!($crate, true, "") };
    ($format:literal $($rest:tt)*) => { $crate::__private::device_print!($crate, true, $format $($rest)*) };
}

/// Prints to the host's stdout from a kernel, like `std::print!`.
#[macro_export]
macro_rules! print {
    ($format:literal $($rest:tt)*) => { $crate::__private::device_print!($crate, false, $format $($rest)*) };
}

/// How one argument is to be shown (from its `{:...}` spec).
#[doc(hidden)]
#[derive(Clone, Copy)]
pub struct Spec {
    pub left: bool,
    pub zero: bool,
    pub width: Option<u32>,
    pub precision: Option<u32>,
    /// `' '`, `'x'`, `'X'` or `'e'`.
    pub kind: char,
}

const FORMAT_BYTES: usize = 256;
const ARG_WORDS: usize = 32;

/// A `vprintf` call being assembled: the C format string and the packed arguments.
#[doc(hidden)]
pub struct Printf {
    format: [u8; FORMAT_BYTES],
    format_len: usize,
    args: [u64; ARG_WORDS],
    /// Bytes of `args` used.
    args_len: usize,
    /// Set when something did not fit: the call then prints a notice instead.
    overflow: bool,
}

impl Default for Printf {
    fn default() -> Self {
        Self::new()
    }
}

impl Printf {
    /// An empty call.
    #[inline(always)]
    pub fn new() -> Self {
        Printf { format: [0; FORMAT_BYTES], format_len: 0, args: [0; ARG_WORDS], args_len: 0, overflow: false }
    }

    fn push_byte(&mut self, byte: u8) {
        // One byte stays free for the terminating NUL.
        if self.format_len + 1 < FORMAT_BYTES {
            self.format[self.format_len] = byte;
            self.format_len += 1;
        } else {
            self.overflow = true;
        }
    }

    fn push_number(&mut self, mut n: u32) {
        let mut digits = [0u8; 10];
        let mut count = 0;
        loop {
            digits[count] = b'0' + (n % 10) as u8;
            count += 1;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        while count > 0 {
            count -= 1;
            self.push_byte(digits[count]);
        }
    }

    /// Literal text (`%` is escaped).
    #[inline(always)]
    pub fn literal(&mut self, text: &str) {
        for &byte in text.as_bytes() {
            if byte == b'%' {
                self.push_byte(b'%');
            }
            self.push_byte(byte);
        }
    }

    /// `%[-][0][width][.precision]<length><conversion>`.
    fn conversion(&mut self, spec: &Spec, precision: Option<u32>, length: &str, conversion: u8) {
        self.push_byte(b'%');
        if spec.left {
            self.push_byte(b'-');
        }
        if spec.zero {
            self.push_byte(b'0');
        }
        if let Some(width) = spec.width {
            self.push_number(width);
        }
        if let Some(precision) = precision {
            self.push_byte(b'.');
            self.push_number(precision);
        }
        for &b in length.as_bytes() {
            self.push_byte(b);
        }
        self.push_byte(conversion);
    }

    /// Appends `value` to the argument buffer, aligned to its size as C varargs are.
    fn push_arg<const N: usize>(&mut self, bytes: [u8; N]) {
        let offset = self.args_len.next_multiple_of(N);
        if offset + N > ARG_WORDS * 8 {
            self.overflow = true;
            return;
        }
        for (i, b) in bytes.into_iter().enumerate() {
            let (word, shift) = ((offset + i) / 8, ((offset + i) % 8) * 8);
            self.args[word] |= (b as u64) << shift;
        }
        self.args_len = offset + N;
    }

    /// A signed integer (`%lld`, or `%llx` for hex specs).
    #[inline(always)]
    pub fn signed(&mut self, value: i64, spec: &Spec) {
        let conversion = match spec.kind {
            'x' => b'x',
            'X' => b'X',
            _ => b'd',
        };
        self.conversion(spec, None, "ll", conversion);
        self.push_arg(value.to_le_bytes());
    }

    /// An unsigned integer (`%llu`, `%llx`, `%llX`).
    #[inline(always)]
    pub fn unsigned(&mut self, value: u64, spec: &Spec) {
        let conversion = match spec.kind {
            'x' => b'x',
            'X' => b'X',
            _ => b'u',
        };
        self.conversion(spec, None, "ll", conversion);
        self.push_arg(value.to_le_bytes());
    }

    /// A float (`%g`, `%.Nf` with a precision, `%e`).
    #[inline(always)]
    pub fn float(&mut self, value: f64, spec: &Spec) {
        let conversion = match (spec.kind, spec.precision) {
            ('e', _) => b'e',
            (_, Some(_)) => b'f',
            _ => b'g',
        };
        self.conversion(spec, spec.precision, "", conversion);
        self.push_arg(value.to_le_bytes());
    }

    /// A string, copied into the format itself (`%` escaped) and padded to the width: device
    /// printf does not take `%.*s` precision arguments reliably after other arguments.
    #[inline(always)]
    pub fn string(&mut self, text: &str, spec: &Spec) {
        let mut len = spec.precision.map_or(text.len(), |p| (p as usize).min(text.len()));
        while !text.is_char_boundary(len) {
            len -= 1;
        }
        let text = &text[..len];
        let padding = spec.width.map_or(0, |w| (w as usize).saturating_sub(text.chars().count()));
        if !spec.left {
            (0..padding).for_each(|_| self.push_byte(b' '));
        }
        self.literal(text);
        if spec.left {
            (0..padding).for_each(|_| self.push_byte(b' '));
        }
    }

    /// Prints the assembled line.
    #[inline(always)]
    pub fn print(mut self) {
        if self.overflow {
            self = Printf::new();
            self.literal("(device println!: line too long or too many arguments)\n");
        }
        self.format[self.format_len] = 0;
        #[cfg(target_arch = "nvptx64")]
        // SAFETY: a NUL-terminated format whose conversions match the packed arguments.
        unsafe {
            core::arch::nvptx::vprintf(self.format.as_ptr(), self.args.as_ptr().cast());
        }
    }
}

/// A value that [`println!`](crate::println) can print on the device.
pub trait PrintfArg {
    #[doc(hidden)]
    fn push_to(&self, printf: &mut Printf, spec: Spec);
}

macro_rules! printf_int {
    ($method:ident, $as:ty: $($t:ty),*) => {$(
        impl PrintfArg for $t {
            #[inline(always)]
            fn push_to(&self, printf: &mut Printf, spec: Spec) {
                printf.$method(*self as $as, &spec)
            }
        }
    )*};
}
printf_int!(signed, i64: i8, i16, i32, i64, isize);
printf_int!(unsigned, u64: u8, u16, u32, u64, usize);

impl PrintfArg for f32 {
    #[inline(always)]
    fn push_to(&self, printf: &mut Printf, spec: Spec) {
        printf.float(*self as f64, &spec)
    }
}

impl PrintfArg for f64 {
    #[inline(always)]
    fn push_to(&self, printf: &mut Printf, spec: Spec) {
        printf.float(*self, &spec)
    }
}

impl PrintfArg for bool {
    #[inline(always)]
    fn push_to(&self, printf: &mut Printf, spec: Spec) {
        printf.string(if *self { "true" } else { "false" }, &spec)
    }
}

impl PrintfArg for str {
    #[inline(always)]
    fn push_to(&self, printf: &mut Printf, spec: Spec) {
        printf.string(self, &spec)
    }
}

impl PrintfArg for char {
    #[inline(always)]
    fn push_to(&self, printf: &mut Printf, spec: Spec) {
        let mut bytes = [0u8; 4];
        printf.string(self.encode_utf8(&mut bytes), &spec)
    }
}

impl<T: PrintfArg + ?Sized> PrintfArg for &T {
    #[inline(always)]
    fn push_to(&self, printf: &mut Printf, spec: Spec) {
        (**self).push_to(printf, spec)
    }
}

#[doc(hidden)]
#[inline(never)]
pub fn __print(args: core::fmt::Arguments<'_>) {
    #[cfg(not(target_arch = "nvptx64"))]
    crate::cpu::hooks::print(args);
    #[cfg(target_arch = "nvptx64")]
    let _ = args;
}
