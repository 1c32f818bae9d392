//! [`kernel_panic!`](crate::kernel_panic): a panic whose message keeps its integer, float,
//! `bool` and string arguments on the GPU.
//!
//! `panic!("value {} at {}", v, i)` on the GPU cannot show its values: formatting it needs
//! `core::fmt`, whose indirect calls make ptxas give every kernel of the module 255 registers.
//! `kernel_panic!` keeps them, so the host's `KernelPanic` carries `value 7 at 3`:
//!
//! ```ignore
//! if x[i] > limit {
//!     ferrocuda_device::kernel_panic!("value {} at {} is over the limit {}", x[i], i, limit);
//! }
//! ```
//!
//! With the cheap panic handler (the default, see [`crate::panic`]) nothing is formatted on the
//! GPU: the panicking thread copies the format string (and any string argument) into the
//! host's record and stores each value's kind and bits beside it, in registers (no stack
//! frame), and the host formats the message. With the detailed handler
//! (`KernelBuilder::panic_messages(true)`) the GPU formats it with the same formatter
//! ([`Message`], a 256-byte buffer on the panicking thread's stack) to print it.
//!
//! Placeholders: `{}` and `{:?}` (the same), `{{`/`}}` for braces; any other `{...}` takes the
//! next argument and ignores its spec. Arguments, at most [`MAX_ARGS`] (more is a compile
//! error): integers, `f32`/`f64` (fixed notation with up to 6 decimals, trailing zeros
//! dropped, exponent form beyond 1e16), `bool`, `&str`. On the host (CPU executor) the same
//! text is formatted and passed to `panic!`.

pub use ferrocuda_types::panic_format::{Arg, MESSAGE_CAPACITY, Message};

/// The most arguments a [`kernel_panic!`](crate::kernel_panic) keeps (the record's value slots).
pub const MAX_ARGS: usize = ferrocuda_types::PANIC_RECORD_ARGS;

/// Panics with a message whose arguments survive on the GPU (see the [module docs](self)).
#[macro_export]
macro_rules! kernel_panic {
    ($format:literal $(, $arg:expr)* $(,)?) => {{
        $crate::__kernel_panic_at_most_4_arguments!($($arg),*);
        let args = [$($crate::panic_args::Arg::from($arg)),*];
        $crate::panic_args::__panic_with($format, &args, $crate::__private::core::panic::Location::caller())
    }};
}

/// Used by [`kernel_panic!`](crate::kernel_panic): a compile error for more than [`MAX_ARGS`]
/// arguments, when the macro expands (a `const` assertion would wait for code generation,
/// which `cargo check` never reaches).
#[doc(hidden)]
#[macro_export]
macro_rules! __kernel_panic_at_most_4_arguments {
    () => {};
    ($a:expr) => {};
    ($a:expr, $b:expr) => {};
    ($a:expr, $b:expr, $c:expr) => {};
    ($a:expr, $b:expr, $c:expr, $d:expr) => {};
    ($($more:expr),*) => {
        compile_error!("kernel_panic! keeps at most 4 arguments (the value slots of the panic record): format the rest into fewer, or split the check")
    };
}

/// Used by [`kernel_panic!`](crate::kernel_panic) with the cheap panic handler: records the
/// template and the raw arguments, then traps. Inlined into the panicking site so that the
/// arguments stay in registers (an out-of-line call would pass them through the stack).
#[doc(hidden)]
#[cfg(all(target_arch = "nvptx64", not(ferrocuda_panic_messages)))]
#[inline(always)]
pub fn __panic_with<const N: usize>(format: &'static str, args: &[Arg<'_>; N], location: &'static core::panic::Location<'static>) -> ! {
    const { assert!(N <= MAX_ARGS, "kernel_panic! keeps at most 4 arguments") };
    crate::panic::__report_template(format, args, location)
}

/// Used by [`kernel_panic!`](crate::kernel_panic) with the detailed panic handler: formats the
/// message on the GPU (to print it) and reports it.
#[doc(hidden)]
#[cfg(all(target_arch = "nvptx64", ferrocuda_panic_messages))]
#[inline(never)]
#[cold]
pub fn __panic_with<const N: usize>(format: &'static str, args: &[Arg<'_>; N], location: &'static core::panic::Location<'static>) -> ! {
    const { assert!(N <= MAX_ARGS, "kernel_panic! keeps at most 4 arguments") };
    let message = Message::format(format, args);
    crate::panic::__report(message.as_str().as_bytes(), location)
}

/// Used by [`kernel_panic!`](crate::kernel_panic): on the host, an ordinary `panic!` with the
/// same text (the CPU executor reports it like any kernel panic).
#[doc(hidden)]
#[cfg(not(target_arch = "nvptx64"))]
#[track_caller]
pub fn __panic_with<const N: usize>(format: &'static str, args: &[Arg<'_>; N], _location: &'static core::panic::Location<'static>) -> ! {
    const { assert!(N <= MAX_ARGS, "kernel_panic! keeps at most 4 arguments") };
    panic!("{}", Message::format(format, args).as_str())
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;

    fn format(text: &str, args: &[Arg<'_>]) -> String {
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
