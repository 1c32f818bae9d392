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

/// The modules of `ferrocuda_device` that exist only in device builds for a newer
/// architecture (left out of older ones by `#[cfg(ferrocuda_sm = "NN")]`), with the oldest
/// architecture that has them. A device build that fails because it names one of them gets a
/// note saying which architecture it needs ([`gated_module_notes`]); rustc alone says only
/// "could not find `tma` in `ferrocuda_device`" and shows the cfg. Kept equal to
/// `device/src/lib.rs` by a test.
pub const ARCH_GATED_MODULES: &[(&str, Arch)] = &[
    ("cluster", Arch::SM_90),
    ("cp_async", Arch::SM_80),
    ("grid_dependency", Arch::SM_90),
    ("hopper", Arch::SM_90),
    ("ldmatrix", Arch::SM_75),
    ("mbarrier", Arch::SM_90),
    ("mma", Arch::SM_80),
    ("named_barrier", Arch::SM_90),
    ("pipeline", Arch::SM_90),
    ("tma", Arch::SM_90),
    ("warpgroup", Arch::SM_90),
    ("wgmma", Arch::SM_90A),
];

/// Whether a build for `arch` has what one for `needed` has (`sm_90a` needs an `a` build).
fn covers(arch: Arch, needed: Arch) -> bool {
    arch.number() >= needed.number() && (!needed.is_arch_specific() || arch == needed)
}

/// For a failed device build for `arch` whose compiler output is `diagnostics`: one note per
/// [`ARCH_GATED_MODULES`] module the output names (`ferrocuda_device::tma`, or "`tma` in
/// `ferrocuda_device`") that this build lacks, naming the architecture it needs and the two
/// ways out.
pub fn gated_module_notes(arch: Arch, diagnostics: &str) -> Vec<String> {
    let text = crate::strip_ansi(diagnostics);
    let mentions = |module: &str| {
        let in_crate = format!("`{module}` in `ferrocuda_device`");
        let in_hopper = format!("`{module}` in `hopper`");
        let paths = [format!("ferrocuda_device::{module}"), format!("ferrocuda_device::hopper::{module}")];
        text.contains(&in_crate)
            || text.contains(&in_hopper)
            || paths.iter().any(|path| {
                text.match_indices(path.as_str()).any(|(at, _)| {
                    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
                    !text[at + path.len()..].starts_with(ident) && !text[..at].ends_with(ident)
                })
            })
    };
    ARCH_GATED_MODULES
        .iter()
        .filter(|&&(module, needed)| !covers(arch, needed) && mentions(module))
        .map(|&(module, needed)| {
            let cfg = if needed.is_arch_specific() { format!("{}a", needed.number()) } else { needed.number().to_string() };
            let constant = if needed.is_arch_specific() { format!("SM_{}A", needed.number()) } else { format!("SM_{}", needed.number()) };
            format!(
                "note: `ferrocuda_device::{module}` needs {needed}{newer}, and this device build targets {arch}: the module is left out of \
                 builds for older GPUs. Build the kernel crate for {needed} (`KernelBuilder::arch(Arch::{constant})`), or use the \
                 module only under `#[cfg(ferrocuda_sm = \"{cfg}\")]`.",
                newer = if needed.is_arch_specific() { "" } else { " or newer" },
            )
        })
        .collect()
}

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

    /// The table is the device library's own list: every `pub mod` of `device/src/lib.rs`
    /// gated by `ferrocuda_sm` and every module it re-exports from `hopper` under its old
    /// name (`pub use hopper::tma;`), with the same architecture.
    #[test]
    fn the_gated_module_table_matches_the_device_library() {
        let lib = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../device/src/lib.rs")).unwrap();
        let lines: Vec<&str> = lib.lines().collect();
        let mut gated = Vec::new();
        for pair in lines.windows(2) {
            let module = pair[1].strip_prefix("pub mod ").or_else(|| pair[1].strip_prefix("pub use hopper::"));
            let (Some(cfg), Some(module)) = (pair[0].split("ferrocuda_sm = \"").nth(1), module) else { continue };
            let number = cfg.split('"').next().unwrap();
            let arch: Arch = format!("sm_{number}").parse().unwrap();
            gated.push((module.trim_end_matches(';').to_string(), arch));
        }
        let table: Vec<(String, Arch)> = ARCH_GATED_MODULES.iter().map(|&(m, a)| (m.to_string(), a)).collect();
        assert_eq!(gated, table);
    }

    #[test]
    fn a_module_named_through_hopper_gets_the_same_note() {
        let rustc = "error[E0433]: cannot find `wgmma` in `hopper`\n  |  use ferrocuda_device::hopper::wgmma;";
        let notes = gated_module_notes(Arch::SM_90, rustc);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("`ferrocuda_device::wgmma` needs sm_90a"), "{notes:?}");
        assert!(
            gated_module_notes(Arch::SM_80, "error[E0432]: unresolved import `ferrocuda_device::hopper`")
                .iter()
                .any(|n| n.contains("`ferrocuda_device::hopper` needs sm_90"))
        );
    }

    #[test]
    fn a_build_naming_a_module_its_architecture_lacks_gets_a_note_naming_the_one_it_needs() {
        let rustc = "error[E0433]: cannot find `cluster` in `ferrocuda_device`\n  |  *out = ferrocuda_device::cluster::block_rank();\n\
                     error[E0432]: unresolved import `ferrocuda_device::wgmma`";
        let notes = gated_module_notes(Arch::SM_80, rustc);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].contains("`ferrocuda_device::cluster` needs sm_90 or newer, and this device build targets sm_80"), "{}", notes[0]);
        assert!(notes[0].contains("KernelBuilder::arch(Arch::SM_90)") && notes[0].contains("#[cfg(ferrocuda_sm = \"90\")]"), "{}", notes[0]);
        assert!(notes[1].contains("`ferrocuda_device::wgmma` needs sm_90a, and") && notes[1].contains("Arch::SM_90A"), "{}", notes[1]);
        // sm_90 has `cluster` but not `wgmma`; sm_90a has both; a longer name is another item.
        assert_eq!(gated_module_notes(Arch::SM_90, rustc).len(), 1);
        assert!(gated_module_notes(Arch::SM_90A, rustc).is_empty());
        assert!(gated_module_notes(Arch::SM_75, "ferrocuda_device::mma_helpers").is_empty());
        assert!(gated_module_notes(Arch::SM_75, "my_ferrocuda_device::tma").is_empty());
        // Shown with the compile error.
        let error = BuildError::Compile { arch: Arch::SM_75, diagnostics: rustc.to_string() };
        assert!(error.to_string().ends_with("`#[cfg(ferrocuda_sm = \"90a\")]`."), "{error}");
    }

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
