//! The one error type of every call.

use ferrocuda_device::cpu::CpuError;

/// What went wrong in a call of this crate. Shape problems are found before anything is
/// queued, and name the operand.
#[derive(Debug, thiserror::Error)]
pub enum KernelsError {
    /// An operand has the wrong number of elements for the shape of the call.
    #[error("`{operand}` has {got} elements but the call needs {expected}")]
    Shape {
        /// The parameter's name, as in the function's signature.
        operand: &'static str,
        /// What the shape asks for (a count and where it comes from, e.g. `"4096 (rows 4 x cols 1024)"`).
        expected: String,
        /// What was passed.
        got: usize,
    },
    /// A shape parameter that no kernel of this crate supports.
    #[error("`{parameter}` = {value} is not supported: {problem}")]
    Unsupported {
        /// The parameter's name.
        parameter: &'static str,
        /// Its value.
        value: String,
        /// What is supported instead.
        problem: String,
    },
    /// The GPU side (driver, launch, cuBLAS) refused or failed.
    #[error(transparent)]
    Gpu(#[from] ferrocuda_host::Error),
    /// The CPU executor reported a problem (a panic, a race, a bad configuration).
    #[error(transparent)]
    Cpu(#[from] CpuError),
}

/// The result of every call.
pub type Result<T, E = KernelsError> = std::result::Result<T, E>;

/// `Ok` when `got == expected`, else a [`KernelsError::Shape`] for `operand` explaining
/// `expected` with `why`.
pub(crate) fn expect_len(operand: &'static str, got: usize, expected: usize, why: impl FnOnce() -> String) -> Result<()> {
    if got == expected { Ok(()) } else { Err(KernelsError::Shape { operand, expected: format!("{expected} ({})", why()), got }) }
}

/// `Ok` when `got >= expected` (buffers may be longer, e.g. one scalar slot).
pub(crate) fn expect_at_least(operand: &'static str, got: usize, expected: usize, why: impl FnOnce() -> String) -> Result<()> {
    if got >= expected { Ok(()) } else { Err(KernelsError::Shape { operand, expected: format!("at least {expected} ({})", why()), got }) }
}

/// A [`KernelsError::Unsupported`].
pub(crate) fn unsupported(parameter: &'static str, value: impl ToString, problem: impl Into<String>) -> KernelsError {
    KernelsError::Unsupported { parameter, value: value.to_string(), problem: problem.into() }
}
