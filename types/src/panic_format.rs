//! The small formatter of ferrocuda-device's `kernel_panic!`: `{}` placeholders replaced by
//! integer, float, `bool` and string arguments, without `core::fmt` (whose indirect calls make
//! ptxas give every kernel of a module 255 registers). Shared by both sides: the device (its
//! detailed panic handler, and the CPU executor) formats with it, and the host formats with it
//! the template and raw values that the cheap panic handler records ([`crate::PanicRecord`]).
//!
//! Placeholders: `{}` and `{:?}` (the same), `{{`/`}}` for braces; any other `{...}` takes the
//! next argument and ignores its spec; a placeholder without an argument shows `{?}`.
//! Arguments: integers, `f32`/`f64` (fixed notation with up to 6 decimals, trailing zeros
//! dropped, exponent form beyond 1e16), `bool`, `&str`.

/// One argument of ferrocuda-device's `kernel_panic!`, converted without `core::fmt`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arg<'a> {
    /// Any unsigned integer.
    Unsigned(u64),
    /// Any signed integer.
    Signed(i64),
    /// `f32` or `f64`.
    Float(f64),
    /// `bool`.
    Bool(bool),
    /// A string.
    Str(&'a str),
}

macro_rules! from_ints {
    ($variant:ident as $wide:ty: $($t:ty),*) => {$(
        impl From<$t> for Arg<'_> {
            #[inline(always)]
            fn from(value: $t) -> Self {
                Arg::$variant(value as $wide)
            }
        }
    )*};
}
from_ints!(Unsigned as u64: u8, u16, u32, u64, usize);
from_ints!(Signed as i64: i8, i16, i32, i64, isize);

impl From<f32> for Arg<'_> {
    #[inline(always)]
    fn from(value: f32) -> Self {
        Arg::Float(value as f64)
    }
}
impl From<f64> for Arg<'_> {
    #[inline(always)]
    fn from(value: f64) -> Self {
        Arg::Float(value)
    }
}
impl From<bool> for Arg<'_> {
    #[inline(always)]
    fn from(value: bool) -> Self {
        Arg::Bool(value)
    }
}
impl<'a> From<&'a str> for Arg<'a> {
    #[inline(always)]
    fn from(value: &'a str) -> Self {
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
    pub fn format(format: &str, args: &[Arg<'_>]) -> Message {
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
        self.push_fixed(magnitude);
    }

    /// Fixed notation of a finite `magnitude` >= 0 below 1e16: 6 decimals rounded, trailing
    /// zeros dropped. Its own function, so that no formatting function calls itself: the
    /// builder refuses kernels whose call graph has a cycle (issue 29, P10), and a panic
    /// message with a float would otherwise make every kernel that can print one recursive.
    fn push_fixed(&mut self, magnitude: f64) {
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
        self.push_fixed(magnitude);
        self.push(b'e');
        self.push_arg(Arg::Signed(exponent));
    }

    fn push_arg(&mut self, arg: Arg<'_>) {
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

/// How an [`Arg`] is recorded in a [`crate::PanicRecord`] (`arg_kinds`): no argument.
pub const ARG_NONE: u32 = 0;
/// An [`Arg::Unsigned`]: the value in `args`.
pub const ARG_UNSIGNED: u32 = 1;
/// An [`Arg::Signed`]: the value's two's-complement bits in `args`.
pub const ARG_SIGNED: u32 = 2;
/// An [`Arg::Float`]: the `f64`'s bits in `args`.
pub const ARG_FLOAT: u32 = 3;
/// An [`Arg::Bool`]: 0 or 1 in `args`.
pub const ARG_BOOL: u32 = 4;
/// An [`Arg::Str`]: `args` holds the offset, in the record's `message` field, of the string's
/// copy (NUL-terminated, after the template's NUL).
pub const ARG_STR: u32 = 5;

impl Arg<'_> {
    /// The kind and bits a panic record keeps for a number or a `bool` ([`ARG_STR`] with 0 for
    /// a string, whose text is copied separately).
    #[inline(always)]
    pub fn raw(&self) -> (u32, u64) {
        match *self {
            Arg::Unsigned(v) => (ARG_UNSIGNED, v),
            Arg::Signed(v) => (ARG_SIGNED, v as u64),
            Arg::Float(v) => (ARG_FLOAT, v.to_bits()),
            Arg::Bool(v) => (ARG_BOOL, v as u64),
            Arg::Str(_) => (ARG_STR, 0),
        }
    }

    /// The argument a record's kind and bits stand for; `text` gives the string at an
    /// [`ARG_STR`] offset. `None` for [`ARG_NONE`] or an unknown kind.
    pub fn from_raw<'a>(kind: u32, bits: u64, text: impl FnOnce(u64) -> &'a str) -> Option<Arg<'a>> {
        Some(match kind {
            ARG_UNSIGNED => Arg::Unsigned(bits),
            ARG_SIGNED => Arg::Signed(bits as i64),
            ARG_FLOAT => Arg::Float(f64::from_bits(bits)),
            ARG_BOOL => Arg::Bool(bits != 0),
            ARG_STR => Arg::Str(text(bits)),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn format(text: &str, args: &[Arg<'_>]) -> Message {
        Message::format(text, args)
    }

    #[test]
    fn integers_floats_bools_and_strings_are_substituted_in_order() {
        let args = [Arg::from(7u32), Arg::from(3usize), Arg::from(-5i32), Arg::from(2.5f32), Arg::from(true), Arg::from("s")];
        assert_eq!(format("value {} at {:?} over {}: {} {} {}", &args).as_str(), "value 7 at 3 over -5: 2.5 true s");
        assert_eq!(format("{} {}", &[Arg::from(i64::MIN)]).as_str(), "-9223372036854775808 {?}");
    }

    #[test]
    fn raw_kinds_and_bits_round_trip() {
        for arg in [Arg::from(u64::MAX), Arg::from(-3i8), Arg::from(-0.5f64), Arg::from(false), Arg::from(true)] {
            let (kind, bits) = arg.raw();
            assert_eq!(Arg::from_raw(kind, bits, |_| ""), Some(arg));
        }
        assert_eq!(Arg::from("x").raw().0, ARG_STR);
        assert_eq!(Arg::from_raw(ARG_STR, 4, |offset| if offset == 4 { "text" } else { "" }), Some(Arg::Str("text")));
        assert_eq!(Arg::from_raw(ARG_NONE, 0, |_| ""), None);
        assert_eq!(Arg::from_raw(99, 0, |_| ""), None);
    }
}
