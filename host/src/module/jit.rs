//! Options for the driver's JIT compiler.

use crate::error::{Error, Result};

/// How the driver picks between PTX and binary code inside a fatbin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JitFallback {
    /// Prefer compiling the PTX when no exactly matching binary is found.
    PreferPtx,
    /// Prefer a compatible binary over compiling PTX.
    PreferBinary,
}

/// Options for the driver's JIT compiler (`cuModuleLoadDataEx`). The info and error logs are
/// always captured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JitOptions {
    pub(crate) optimization_level: Option<u32>,
    pub(crate) max_registers: Option<u32>,
    pub(crate) target: Option<u32>,
    pub(crate) fallback: Option<JitFallback>,
    pub(crate) line_info: bool,
    pub(crate) verbose: bool,
    /// The `.global` data the loader states the host may write ([`JitOptions::host_writable_globals`]).
    pub(crate) host_writable: Vec<String>,
}

impl JitOptions {
    /// The driver's defaults (optimisation level 4, target from the context).
    pub fn new() -> Self {
        Self::default()
    }

    /// Optimisation level 0 (none) to 4 (the default, most).
    #[must_use]
    pub fn optimization_level(mut self, level: u32) -> Self {
        self.optimization_level = Some(level);
        self
    }

    /// At most `registers` registers per thread.
    #[must_use]
    pub fn max_registers(mut self, registers: u32) -> Self {
        self.max_registers = Some(registers);
        self
    }

    /// Compile for architecture `arch` (e.g. 90) instead of the context's device.
    #[must_use]
    pub fn target(mut self, arch: u32) -> Self {
        self.target = Some(arch);
        self
    }

    /// How to choose between PTX and binary code.
    #[must_use]
    pub fn fallback(mut self, fallback: JitFallback) -> Self {
        self.fallback = Some(fallback);
        self
    }

    /// Keep line information (for profilers and `compute-sanitizer`).
    #[must_use]
    pub fn line_info(mut self, on: bool) -> Self {
        self.line_info = on;
        self
    }

    /// Ask the JIT for a verbose info log (registers, spills, ... per kernel); see
    /// [`Module::info_log`](crate::Module::info_log).
    #[must_use]
    pub fn verbose(mut self, on: bool) -> Self {
        self.verbose = on;
        self
    }

    /// Names the variables of the image (`.global` or `.const`) that the device code lets the
    /// host change ([`Global::write`](crate::Global::write)); every other one is read-only to
    /// the host.
    ///
    /// Why the loader says it: an image does not. rustc writes an immutable
    /// `#[unsafe(no_mangle)] static` and a `static mut` as the same `.visible .global`
    /// declaration (measured, rustc 1.95, sm_90), while the code of the first was compiled
    /// assuming its value never changes (folded into the code, or bounds checks dropped from a
    /// constant table's known entries), so a host write of it would reach some uses and not
    /// others (session 21, the residual of audit 2026-11-28h G20R-5). Name only a `static mut`,
    /// a `static` of an `UnsafeCell` type, or a CUDA C++ `__device__` variable that is not
    /// `const`, or a `__constant__` variable that is not `const`: the unsafe load call's
    /// contract covers this list. `.const` data (`__constant__`, `.visible .const` in PTX) must
    /// be named too (session 23; it used to be writable without a name): nvcc folds the values
    /// of a `const`-qualified `__constant__` into the code like an immutable `static`'s, under
    /// the same declaration as a mutable one (session 22, measured, nvcc 13.0, `-rdc`, sm_90:
    /// `extern __constant__ const int t[4]` read at a constant index compiled to an immediate,
    /// beside `.visible .const .align 4 .b8 t[16]`, which a non-`const` table also gets).
    #[must_use]
    pub fn host_writable_globals<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.host_writable.extend(names.into_iter().map(Into::into));
        self
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if let Some(level) = self.optimization_level
            && level > 4
        {
            return Err(Error::InvalidJitOption(format!("optimization level {level} is out of range; use 0 (none) to 4 (most)")));
        }
        if let Some(0) = self.max_registers {
            return Err(Error::InvalidJitOption("max_registers(0) leaves no registers; use at least 16, or leave it out".into()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jit_options_out_of_range_are_refused_with_the_range() {
        let message = JitOptions::new().optimization_level(5).validate().unwrap_err().to_string();
        assert!(message.contains("optimization level 5") && message.contains("0 (none) to 4"), "{message}");
        assert!(JitOptions::new().max_registers(0).validate().is_err());
        assert!(JitOptions::new().optimization_level(0).max_registers(32).line_info(true).validate().is_ok());
    }
}
