//! [`kernel_panic!`](crate::kernel_panic): a panic whose message keeps its integer, float and
//! `bool` arguments on the GPU.
//!
//! `panic!("value {} at {}", v, i)` on the GPU reports only "(formatted message; its arguments
//! are not available on the GPU)": formatting it needs `core::fmt`, whose indirect calls make
//! ptxas give every kernel of the module 255 registers. `kernel_panic!` formats instead with
//! the small formatter below (direct calls only, a 256-byte buffer on the panicking thread's
//! stack), so the host's `KernelPanic` and the printed line carry `value 7 at 3`:
//!
//! ```ignore
//! if x[i] > limit {
//!     ferrocuda_device::kernel_panic!("value {} at {} is over the limit {}", x[i], i, limit);
//! }
//! ```
//!
//! Placeholders: `{}` and `{:?}` (the same), `{{`/`}}` for braces; any other `{...}` takes the
//! next argument and ignores its spec. Arguments: integers, `f32`/`f64` (fixed notation with
//! up to 6 decimals, trailing zeros dropped, exponent form beyond 1e16), `bool`, `&'static str`.
//! On the host (CPU executor) the same text is formatted and passed to `panic!`.

/// One argument of [`kernel_panic!`](crate::kernel_panic), converted without `core::fmt`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arg {
    /// Any unsigned integer.
    Unsigned(u64),
    /// Any signed integer.
    Signed(i64),
    /// `f32` or `f64`.
    Float(f64),
    /// `bool`.
    Bool(bool),
    /// A static string.
    Str(&'static str),
}

macro_rules! from_ints {
    ($variant:ident as $wide:ty: $($t:ty),*) => {$(
        impl From<$t> for Arg {
            #[inline(always)]
            fn from(value: $t) -> Self {
                Arg::$variant(value as $wide)
            }
        }
    )*};
}
from_ints!(Unsigned as u64: u8, u16, u32, u64, usize);
from_ints!(Signed as i64: i8, i16, i32, i64, isize);

impl From<f32> for Arg {
    #[inline(always)]
    fn from(value: f32) -> Self {
        Arg::Float(value as f64)
    }
}
impl From<f64> for Arg {
    #[inline(always)]
    fn from(value: f64) -> Self {
        Arg::Float(value)
    }
}
impl From<bool> for Arg {
    #[inline(always)]
    fn from(value: bool) -> Self {
        Arg::Bool(value)
    }
}
impl From<&'static str> for Arg {
    #[inline(always)]
    fn from(value: &'static str) -> Self {
        Arg::Str(value)
    }
}

/// Capacity of a formatted message (the host's record keeps 255 bytes of it).
pub const MESSAGE_CAPACITY: usize = 255;

/// A formatted panic message, cut at [`MESSAGE_CAPACITY`] bytes.
pub struct Message {
    bytes: [u8; MESSAGE_CAPACITY],
    len: usize,
}

impl Message {
    /// `format` with each placeholder replaced by the next of `args` (see the module docs).
    #[inline(never)]
    pub fn format(format: &str, args: &[Arg]) -> Message {
        let mut message = Message { bytes: [0; MESSAGE_CAPACITY], len: 0 };
        let text = format.as_bytes();
        let (mut i, mut next) = (0, 0);
        while i < text.len() {
            let c = text[i];
            if (c == b'{' || c == b'}') && text.get(i + 1) == Some(&c) {
                message.push(c);
                i += 2;
            } else if c == b'{' {
                while i < text.len() && text[i] != b'}' {
                    i += 1;
                }
                i += 1;
                match args.get(next) {
                    Some(arg) => message.push_arg(*arg),
                    None => message.push_str("{?}"),
                }
                next += 1;
            } else {
                message.push(c);
                i += 1;
            }
        }
        message
    }

    /// The text (ASCII and whole UTF-8 sequences of the format and string arguments; a cut
    /// inside a sequence is dropped).
    pub fn as_str(&self) -> &str {
        match core::str::from_utf8(&self.bytes[..self.len]) {
            Ok(text) => text,
            // SAFETY: `valid_up_to` bytes are valid UTF-8.
            Err(error) => unsafe { core::str::from_utf8_unchecked(&self.bytes[..error.valid_up_to()]) },
        }
    }

    fn push(&mut self, byte: u8) {
        if self.len < MESSAGE_CAPACITY {
            self.bytes[self.len] = byte;
            self.len += 1;
        }
    }

    fn push_str(&mut self, text: &str) {
        for &byte in text.as_bytes() {
            self.push(byte);
        }
    }

    fn push_unsigned(&mut self, mut value: u64) {
        let mut digits = [0u8; 20];
        let mut n = 0;
        loop {
            digits[n] = b'0' + (value % 10) as u8;
            n += 1;
            value /= 10;
            if value == 0 {
                break;
            }
        }
        while n > 0 {
            n -= 1;
            self.push(digits[n]);
        }
    }

    fn push_float(&mut self, value: f64) {
        if value.is_nan() {
            return self.push_str("NaN");
        }
        if value < 0.0 || (value == 0.0 && value.is_sign_negative()) {
            self.push(b'-');
        }
        let magnitude = if value < 0.0 { -value } else { value };
        if magnitude == f64::INFINITY {
            return self.push_str("inf");
        }
        if magnitude >= 1e16 || (magnitude != 0.0 && magnitude < 1e-6) {
            return self.push_exponent(magnitude);
        }
        // Fixed notation, 6 decimals rounded, trailing zeros dropped.
        let scaled = magnitude * 1e6 + 0.5;
        let whole = scaled as u64;
        let (integer, mut fraction) = (whole / 1_000_000, whole % 1_000_000);
        self.push_unsigned(integer);
        if fraction != 0 {
            self.push(b'.');
            let mut width = 6;
            while fraction % 10 == 0 {
                fraction /= 10;
                width -= 1;
            }
            let mut divisor = 10u64.pow(width - 1);
            while divisor > 0 {
                self.push(b'0' + (fraction / divisor % 10) as u8);
                divisor /= 10;
            }
        }
    }

    /// `d.dddddde±N` for very large or very small magnitudes (no `core::fmt`, no libm).
    fn push_exponent(&mut self, mut magnitude: f64) {
        let mut exponent = 0i64;
        while magnitude >= 10.0 {
            magnitude /= 10.0;
            exponent += 1;
        }
        while magnitude < 1.0 {
            magnitude *= 10.0;
            exponent -= 1;
        }
        self.push_float(magnitude);
        self.push(b'e');
        self.push_arg(Arg::Signed(exponent));
    }

    fn push_arg(&mut self, arg: Arg) {
        match arg {
            Arg::Unsigned(v) => self.push_unsigned(v),
            Arg::Signed(v) => {
                if v < 0 {
                    self.push(b'-');
                }
                self.push_unsigned(v.unsigned_abs());
            }
            Arg::Float(v) => self.push_float(v),
            Arg::Bool(v) => self.push_str(if v { "true" } else { "false" }),
            Arg::Str(s) => self.push_str(s),
        }
    }
}

/// Panics with a message whose arguments survive on the GPU (see the [module docs](self)).
#[macro_export]
macro_rules! kernel_panic {
    ($format:literal $(, $arg:expr)* $(,)?) => {{
        let message = $crate::panic_args::Message::format($format, &[$($crate::panic_args::Arg::from($arg)),*]);
        $crate::panic_args::__panic_with(&message, ::core::panic::Location::caller())
    }};
}

/// Used by [`kernel_panic!`](crate::kernel_panic): reports `message` as a panic at `location`.
#[doc(hidden)]
#[cfg(target_arch = "nvptx64")]
#[inline(never)]
#[cold]
pub fn __panic_with(message: &Message, location: &'static core::panic::Location<'static>) -> ! {
    crate::panic::__report(message.as_str().as_bytes(), location)
}

/// Used by [`kernel_panic!`](crate::kernel_panic): on the host, an ordinary `panic!` with the
/// same text (the CPU executor reports it like any kernel panic).
#[doc(hidden)]
#[cfg(not(target_arch = "nvptx64"))]
#[track_caller]
pub fn __panic_with(message: &Message, _location: &'static core::panic::Location<'static>) -> ! {
    panic!("{}", message.as_str())
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;

    fn format(text: &str, args: &[Arg]) -> String {
        Message::format(text, args).as_str().to_string()
    }

    #[test]
    fn integers_floats_bools_and_strings_are_substituted_in_order() {
        let args = [Arg::from(7u32), Arg::from(3usize), Arg::from(-5i32), Arg::from(2.5f32), Arg::from(true), Arg::from("s")];
        assert_eq!(format("value {} at {:?} over {}: {} {} {}", &args), "value 7 at 3 over -5: 2.5 true s");
        assert_eq!(format("{{literal}} {}", &[Arg::from(u64::MAX)]), "{literal} 18446744073709551615");
        assert_eq!(format("{} {}", &[Arg::from(i64::MIN)]), "-9223372036854775808 {?}");
    }

    #[test]
    fn floats_print_like_display_for_common_values() {
        let cases: [(f64, &str); 9] = [
            (3.0, "3"),
            (0.1, "0.1"),
            (-1.25, "-1.25"),
            (1.0 / 3.0, "0.333333"),
            (0.0, "0"),
            (123456.5, "123456.5"),
            (f64::NAN, "NaN"),
            (f64::NEG_INFINITY, "-inf"),
            (2.5e20, "2.5e20"),
        ];
        for (value, want) in cases {
            assert_eq!(format("{}", &[Arg::from(value)]), want, "{value}");
        }
        assert_eq!(format("{}", &[Arg::from(1.5e-9)]), "1.5e-9");
    }

    #[test]
    fn long_messages_are_cut_at_the_capacity() {
        let long = "x".repeat(300);
        let leaked: &'static str = Box::leak(long.into_boxed_str());
        assert_eq!(format("{}", &[Arg::from(leaked)]).len(), MESSAGE_CAPACITY);
    }

    #[test]
    fn the_macro_panics_with_the_formatted_text_on_the_host() {
        let caught = std::panic::catch_unwind(|| crate::kernel_panic!("value {} at {} is over the limit {}", 7u32, 3usize, 5u32)).unwrap_err();
        assert_eq!(caught.downcast_ref::<String>().map(String::as_str), Some("value 7 at 3 is over the limit 5"));
    }
}
