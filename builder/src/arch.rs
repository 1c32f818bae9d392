//! GPU architectures, the `ferrocuda_sm` cfg values they set, and the check-cfg line that
//! declares those values to cargo.

use std::fmt;
use std::str::FromStr;

use crate::BuildError;

/// Architectures the builder knows, oldest first; building for one sets `ferrocuda_sm = "N"`
/// for it and every older one, so `#[cfg(ferrocuda_sm = "90")]` reads "sm_90 or newer".
pub const KNOWN_ARCHS: &[u32] = &[70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 103, 120, 121];

/// The PTX architecture built when none is given: the oldest one CUDA 13's `ptxas` accepts
/// (it rejects `sm_70` and `sm_72`), so the PTX runs on every GPU a CUDA 13 driver supports.
pub const DEFAULT_PTX_ARCH: Arch = Arch::SM_75;

/// Cubins compiled when no architecture is given (and `ptxas` is found): A100 and H100/H200
/// start without a JIT step; other GPUs JIT-compile the [`DEFAULT_PTX_ARCH`] PTX.
pub const DEFAULT_CUBIN_ARCHS: &[Arch] = &[Arch::SM_80, Arch::SM_90];

/// A GPU architecture (`sm_XY`), at least `sm_70`, optionally arch-specific (`sm_90a`).
///
/// An arch-specific target (`a` suffix) enables instructions that only that exact GPU
/// generation has (`wgmma`, `setmaxnreg` on sm_90a); its PTX and cubins run on that generation
/// alone. It orders just after its plain twin (`sm_90 < sm_90a < sm_100`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Arch(u32, bool);

impl Arch {
    /// `sm_70` (V100). CUDA 13's `ptxas` and drivers no longer compile for it.
    pub const SM_70: Arch = Arch(70, false);
    /// `sm_75` (T4, RTX 20): the oldest architecture CUDA 13 compiles for, and the default PTX
    /// target; its PTX is JIT-compiled by the driver for every newer GPU.
    pub const SM_75: Arch = Arch(75, false);
    /// `sm_80` (A100).
    pub const SM_80: Arch = Arch(80, false);
    /// `sm_90` (H100, H200).
    pub const SM_90: Arch = Arch(90, false);
    /// `sm_90a`: H100/H200 with the Hopper-only instructions (`wgmma`, `setmaxnreg`). Its
    /// device build also sets `ferrocuda_sm = "90a"` and emits PTX ISA 8.3.
    pub const SM_90A: Arch = Arch(90, true);

    /// The number after `sm_` (70 for `sm_70`, 90 for `sm_90a`).
    pub fn number(self) -> u32 {
        self.0
    }

    /// Whether this is an arch-specific target (`sm_90a`).
    pub fn is_arch_specific(self) -> bool {
        self.1
    }

    /// `ferrocuda_sm` values for this architecture: itself and every older known one.
    pub fn cfg_values(self) -> impl Iterator<Item = u32> {
        KNOWN_ARCHS.iter().copied().filter(move |&n| n <= self.0)
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sm_{}{}", self.0, if self.1 { "a" } else { "" })
    }
}

impl FromStr for Arch {
    type Err = BuildError;

    /// Accepts `sm_90`, `compute_90` or `90`, each with an optional `a` suffix (`sm_90a`).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let digits = text.trim_start_matches("sm_").trim_start_matches("compute_");
        let bad = || BuildError::BadArch { given: text.to_string() };
        let (digits, specific) = match digits.strip_suffix('a') {
            Some(digits) => (digits, true),
            None => (digits, false),
        };
        let number: u32 = digits.parse().map_err(|_| bad())?;
        if number < 70 || (specific && number < 90) {
            return Err(bad());
        }
        Ok(Arch(number, specific))
    }
}

/// How floating-point `a * b + c` is compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FmaContraction {
    /// Fuse into `fma.rn` where the source multiplies then adds (nvcc's default, `--fmad=true`).
    Fast,
    /// Keep separate `mul.rn` and `add.rn` (bit-identical to the CPU, half the FP32 throughput).
    Off,
}

/// The build-script lines that declare the cfgs a kernel crate may test, so that neither its
/// host build nor its device build warns about `unexpected_cfgs`: `ferrocuda_sm` with every
/// known architecture (and any the build asks for), `ferrocuda_device` and
/// `ferrocuda_fast_math` ([`crate::KernelBuilder::fast_math`]).
pub fn check_cfg_lines(extra: &[Arch]) -> Vec<String> {
    let mut numbers: Vec<u32> = KNOWN_ARCHS.iter().copied().chain(extra.iter().map(|a| a.number())).collect();
    numbers.sort_unstable();
    numbers.dedup();
    let mut values: Vec<String> = numbers.iter().map(|n| format!("\"{n}\"")).collect();
    // Arch-specific targets (sm_90a) set `ferrocuda_sm = "90a"` too.
    values.push("\"90a\"".to_string());
    vec![
        format!("cargo::rustc-check-cfg=cfg(ferrocuda_sm, values({}))", values.join(", ")),
        "cargo::rustc-check-cfg=cfg(ferrocuda_device)".to_string(),
        "cargo::rustc-check-cfg=cfg(ferrocuda_fast_math)".to_string(),
        // Set by `KernelBuilder::panic_messages(true)`: the device library's detailed panic handler.
        "cargo::rustc-check-cfg=cfg(ferrocuda_panic_messages)".to_string(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_parses_and_rejects() {
        assert_eq!("sm_90".parse::<Arch>().unwrap(), Arch::SM_90);
        assert_eq!("compute_80".parse::<Arch>().unwrap(), Arch::SM_80);
        assert_eq!("75".parse::<Arch>().unwrap().to_string(), "sm_75");
        let err = "sm_61".parse::<Arch>().unwrap_err().to_string();
        assert!(err.contains("sm_61") && err.contains("sm_70"), "{err}");
        assert!("gfx90a".parse::<Arch>().is_err());
        assert_eq!("sm_90a".parse::<Arch>().unwrap(), Arch::SM_90A);
        assert_eq!(Arch::SM_90A.to_string(), "sm_90a");
        assert!(Arch::SM_90 < Arch::SM_90A && Arch::SM_90A < "sm_100".parse().unwrap());
        assert!("sm_80a".parse::<Arch>().is_err());
    }

    #[test]
    fn arch_cfgs_include_every_older_arch() {
        let values: Vec<u32> = Arch::SM_80.cfg_values().collect();
        assert_eq!(values, vec![70, 72, 75, 80]);
    }

    /// Regression: kernel crates warned `unexpected cfg condition name: ferrocuda_sm` unless
    /// they copied the workspace's check-cfg list.
    #[test]
    fn check_cfg_declares_every_value_the_build_can_set() {
        let lines = check_cfg_lines(&["sm_95".parse().unwrap()]);
        assert!(lines[0].starts_with("cargo::rustc-check-cfg=cfg(ferrocuda_sm, values(\"70\", \"72\""), "{}", lines[0]);
        for n in KNOWN_ARCHS.iter().chain([&95]) {
            assert!(lines[0].contains(&format!("\"{n}\"")), "{n} missing: {}", lines[0]);
        }
        assert_eq!(lines[1], "cargo::rustc-check-cfg=cfg(ferrocuda_device)");
    }
}
