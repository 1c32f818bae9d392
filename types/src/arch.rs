//! [`Arch`]: a GPU architecture number as a type (`sm_90` is `Arch(90)`).

use core::fmt;

/// A GPU architecture: the compute capability as one number, major * 10 + minor (90 for
/// sm_90, 80 for sm_80). Displayed as `sm_90`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(transparent)]
pub struct Arch(pub u32);

impl Arch {
    /// Volta (V100).
    pub const SM_70: Arch = Arch(70);
    /// Ampere (A100).
    pub const SM_80: Arch = Arch(80);
    /// Hopper (H100, H200).
    pub const SM_90: Arch = Arch(90);

    /// The architecture of compute capability `major.minor`.
    pub const fn from_compute_capability(major: u32, minor: u32) -> Self {
        Arch(major * 10 + minor)
    }

    /// The number (90 for sm_90).
    pub const fn number(self) -> u32 {
        self.0
    }

    /// `(major, minor)`, e.g. `(9, 0)`.
    pub const fn compute_capability(self) -> (u32, u32) {
        (self.0 / 10, self.0 % 10)
    }
}

impl From<u32> for Arch {
    fn from(number: u32) -> Self {
        Arch(number)
    }
}

impl From<Arch> for u32 {
    fn from(arch: Arch) -> Self {
        arch.0
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sm_{}", self.0)
    }
}
