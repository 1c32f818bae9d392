//! The builder's errors. Each message says what to do next.

use std::fmt;
use std::path::PathBuf;

use crate::Arch;

/// What to tell a user who has no device toolchain.
pub(crate) const INSTALL_HINT: &str = "\
install one of:
  - Debian/Ubuntu packages: `sudo apt-get install rustc-web cargo-web rust-web-src`
    (or run `scripts/install-device-toolchain.sh`, which does that and installs ptxas);
  - with rustup: `rustup component add rust-src` (the library sources for the toolchain you
    build with), or `rustup toolchain install nightly --component rust-src`;
  - or point FERROCUDA_DEVICE_RUSTC (and FERROCUDA_DEVICE_CARGO) at a rustc whose sysroot has rust-src";

/// Why a device build failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// No rustc with the library sources for `-Zbuild-std` was found.
    NoDeviceToolchain {
        /// Each place tried, and why it did not fit.
        tried: Vec<String>,
    },
    /// The kernel crate did not compile; `diagnostics` is rustc's own output.
    Compile {
        /// The architecture being built.
        arch: Arch,
        /// The inner cargo's stderr: the user's file, line and message.
        diagnostics: String,
    },
    /// The device build succeeded but the PTX is not where rustc was told to write it.
    MissingPtx {
        /// The architecture being built.
        arch: Arch,
        /// Where `--emit=asm=` asked for it.
        expected: PathBuf,
        /// The toolchain that ran ([`crate::DeviceToolchain::describe`]).
        toolchain: String,
        /// Code files the build wrote instead (at most 20).
        produced: Vec<PathBuf>,
    },
    /// `ptxas` rejected the PTX.
    Ptxas {
        /// The cubin architecture.
        arch: Arch,
        /// What `ptxas` printed.
        log: String,
    },
    /// A kernel reaches a recursive function, so its stack depth is not bounded: a GPU thread's
    /// stack is fixed per context (1 KiB by default), and a deeper recursion faults
    /// (`CUDA_ERROR_ILLEGAL_ADDRESS`, audit P10). Refused unless the build script vouches for
    /// it with [`KernelBuilder::allow_recursion`](crate::KernelBuilder::allow_recursion).
    RecursiveKernel {
        /// The architecture whose PTX shows it.
        arch: Arch,
        /// The kernel (PTX entry).
        kernel: String,
        /// The calls from the kernel to the function that calls back into the chain (PTX
        /// symbols).
        chain: Vec<String>,
        /// The function of the chain called again.
        cycle_start: String,
        /// Whether the cycle goes through a call by function pointer or `dyn` method (audit
        /// 2026-11-27b, Q4); the chain then names the possible target it reaches.
        through_indirect_call: bool,
    },
    /// A kernel calls through a function pointer or a `dyn` method that can reach a function
    /// of the module (audit 2026-11-27b, Q4): ptxas leaves the frames of indirectly called
    /// functions out of the kernel's stack size, so they run on whatever the context's stack
    /// limit (1 KiB by default) leaves, and a deep enough chain faults
    /// (`CUDA_ERROR_ILLEGAL_ADDRESS`). Refused unless the build script vouches for it with
    /// [`KernelBuilder::allow_recursion`](crate::KernelBuilder::allow_recursion).
    IndirectCall {
        /// The architecture whose PTX shows it.
        arch: Arch,
        /// The kernel (PTX entry).
        kernel: String,
        /// The direct calls from the kernel to the function that makes the indirect call.
        chain: Vec<String>,
        /// The functions the call can reach (PTX symbols).
        targets: Vec<String>,
    },
    /// An architecture that is not `sm_70` or newer.
    BadArch {
        /// What was asked for.
        given: String,
    },
    /// A `KernelBuilder::cfg` that is not `name` or `name="value"` (G22S-1: the flags travel to
    /// the device rustc in one `\x1f`-separated variable, so a cfg holding a separator added any
    /// rustc flag, `-Zallow-features` included).
    BadCfg {
        /// What was given.
        given: String,
    },
    /// A cubin was asked for an architecture older than every PTX architecture.
    CubinWithoutPtx {
        /// The cubin architecture.
        arch: Arch,
    },
    /// Neither `out_dir` was set nor `OUT_DIR` (not running in a build script).
    NoOutDir,
    /// The crate directory has no `[package]` with a name.
    NotACrate {
        /// The manifest that was read.
        manifest: PathBuf,
    },
    /// The kernel crate makes a name that `#[kernel]`'s generated code resolves (`core`,
    /// `ferrocuda_device`, `ferrocuda_host`, ..) another crate (G19R-1).
    RenamedRuntime {
        /// The kernel crate's manifest.
        manifest: PathBuf,
        /// Which dependency or `extern crate` item, as a sentence.
        problem: String,
    },
    /// The running build script was compiled for another package of the same name: cargo gave
    /// two packages of one name, built into one target directory, one build directory.
    BuildScriptOfAnotherCrate {
        /// The package name both have.
        package: String,
        /// The crate directory the build script names (`KernelBuilder::new`'s argument).
        compiled_for: PathBuf,
        /// The package cargo ran it for (`CARGO_MANIFEST_DIR` at run time).
        running_for: PathBuf,
    },
    /// A file or process operation failed.
    Io {
        /// What was being done.
        what: String,
        /// The underlying error.
        source: std::io::Error,
    },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoDeviceToolchain { tried } => {
                writeln!(f, "no Rust toolchain that can build for nvptx64-nvidia-cuda was found (it needs the library sources, rust-src). Tried:")?;
                for t in tried {
                    writeln!(f, "  - {t}")?;
                }
                write!(f, "To fix it, {INSTALL_HINT}")
            }
            Self::Compile { arch, diagnostics } => {
                write!(f, "the kernel crate failed to compile for {arch}:\n{}", diagnostics.trim_end())?;
                for note in crate::gated_module_notes(*arch, diagnostics) {
                    write!(f, "\n{note}")?;
                }
                if let Some(note) = crate::inner_build::refused_feature_note(diagnostics) {
                    write!(f, "\n{note}")?;
                }
                Ok(())
            }
            Self::MissingPtx { arch, expected, toolchain, produced } => {
                writeln!(f, "the device build for {arch} with {toolchain} finished but wrote no PTX at {} (asked for with --emit=asm=).", expected.display())?;
                if produced.is_empty() {
                    writeln!(f, "It wrote no .s/.ptx/.ll/.bc/.o files in its target directory.")?;
                } else {
                    writeln!(f, "Code files it wrote:")?;
                    for path in produced {
                        writeln!(f, "  {}", path.display())?;
                    }
                }
                write!(f, "Please report this with that version. To use another toolchain, {INSTALL_HINT}")
            }
            Self::Ptxas { arch, log } if log.contains("is not defined for option 'gpu-name'") => write!(
                f,
                "this ptxas cannot compile for {arch} (CUDA 13 dropped sm_70 and sm_72): remove `.cubin_arch({arch})`, \
                 or point FERROCUDA_PTXAS at an older toolkit's ptxas; the PTX itself still runs there through the driver's JIT"
            ),
            Self::Ptxas { arch, log } if !resource_overflows(log).is_empty() => {
                // A kernel over a hardware limit is the kernel's doing, not the compiler's: name
                // the kernel, the limit and the remedy.
                for overflow in resource_overflows(log) {
                    writeln!(f, "{}", overflow.explain(*arch))?;
                }
                write!(f, "(ptxas said:)\n{}", log.trim_end())
            }
            Self::Ptxas { arch, log } if crate::ptx_isa::missing_architecture(log).is_some() => {
                let (feature, needs) = crate::ptx_isa::missing_architecture(log).unwrap_or_default();
                write!(
                    f,
                    "the kernels use {feature}, which needs sm_{needs} or newer, but this PTX is built for {arch}: \
                     build the kernel crate for sm_{needs} (`KernelBuilder::arch(\"sm_{needs}\".parse().unwrap())`), \
                     or keep that code out of older builds with `#[cfg(ferrocuda_sm = \"{needs}\")]`\n(ptxas said:)\n{}",
                    log.trim_end()
                )
            }
            Self::Ptxas { arch, log } if crate::ptx_isa::missing_isa(log).is_some() => {
                let ((feature, (major, minor)), declared) = (crate::ptx_isa::missing_isa(log).unwrap_or_default(), crate::ptx_isa::pinned_ptx_isa(*arch));
                write!(
                    f,
                    "the kernels use {feature}, which needs PTX ISA {major}.{minor}, newer than the module declares for {arch} \
                     (by default {}.{}): raise it with `KernelBuilder::ptx_isa({major}, {minor})`\n(ptxas said:)\n{}",
                    declared.0,
                    declared.1,
                    log.trim_end()
                )
            }
            Self::Ptxas { arch, log } if log.contains("Duplicate definition of variable '__ferrocuda_shared_") => write!(
                f,
                "ptxas rejected the PTX for {arch}: two `shared_array!`s got one site (one `.shared` variable name). Each expansion of \
                 `shared_array!` gets its own site, so this means two copies of the `shared_array!` macro numbered their sites apart \
                 (for example two versions of ferrocuda-device with the same crate name and version): build the kernel crate \
                 against one ferrocuda-device.\n(ptxas said:)\n{}",
                log.trim_end()
            ),
            Self::Ptxas { arch, log } => write!(
                f,
                "ptxas rejected the PTX for {arch} (set FERROCUDA_PTXAS to another ptxas to compare; a PTX that ptxas rejects is a code-generation bug worth reporting):\n{}",
                log.trim_end()
            ),
            Self::RecursiveKernel { arch, kernel, chain, cycle_start, through_indirect_call } => write!(
                f,
                "kernel `{kernel}` is recursive ({arch} PTX: {} -> {cycle_start}{}): a GPU thread's stack is fixed per context (1 KiB by \
                 default, `Limit::StackSize`), and how deep a recursion goes is known only while it runs, so a deep one runs off the \
                 stack and faults with CUDA_ERROR_ILLEGAL_ADDRESS, with nothing naming the stack. Write the recursion as a loop (with \
                 an explicit stack in a local array of fixed size), or, if every launch provably stays within a stack limit that the \
                 host sets with `Context::set_limit(Limit::StackSize, bytes)`, vouch for it in the build script: \
                 `unsafe {{ builder.allow_recursion(\"{kernel}\") }}`",
                chain.join(" -> "),
                if *through_indirect_call { ", through a call by function pointer or `dyn` method, which can reach it" } else { "" }
            ),
            Self::IndirectCall { arch, kernel, chain, targets } => write!(
                f,
                "kernel `{kernel}` calls through a function pointer or a `dyn` method ({arch} PTX: {} -> indirect call, which can reach \
                 {}): ptxas leaves the frames of functions called this way out of the kernel's stack size, so they run on what the \
                 context's stack limit leaves (1 KiB per thread by default, `Limit::StackSize`), and a deep enough chain (or a \
                 recursion through the pointer) faults with CUDA_ERROR_ILLEGAL_ADDRESS, with nothing naming the stack. Call the \
                 functions directly (a `match` over an enum or a generic parameter instead of a function pointer or `dyn Trait`), or, \
                 if every launch provably stays within a stack limit that the host sets with \
                 `Context::set_limit(Limit::StackSize, bytes)` (the frames are in `ptxas -v`), vouch for it in the build script: \
                 `unsafe {{ builder.allow_recursion(\"{kernel}\") }}`",
                chain.join(" -> "),
                targets.join(", ")
            ),
            Self::BadArch { given } => write!(f, "`{given}` is not a supported GPU architecture: use sm_70 or newer, e.g. `sm_80` or `sm_90`"),
            Self::BadCfg { given } => write!(
                f,
                "KernelBuilder::cfg({given:?}) is not a cfg: give `name` or `name=\"value\"` (a name of letters, digits and `_`; a value without quotes, \
                 backslashes or control characters)"
            ),
            Self::CubinWithoutPtx { arch } => write!(f, "a cubin for {arch} needs PTX for {arch} or older: add `.arch(...)` with an older architecture"),
            Self::NoOutDir => write!(f, "OUT_DIR is not set: call the builder from a build script, or give it `.out_dir(...)`"),
            Self::NotACrate { manifest } => write!(f, "{} has no [package] name: point KernelBuilder::new at the kernel crate's directory", manifest.display()),
            Self::RenamedRuntime { manifest, problem } => write!(
                f,
                "{}: {problem}. The code `#[kernel]` generates reaches core, ferrocuda-device and ferrocuda-host through these names, and \
                 the checks that keep a safe launch sound rest on them being those crates: depend on the real packages under their own \
                 names (`ferrocuda-device = {{ .. }}`), and give a crate of your own another name",
                manifest.display()
            ),
            Self::BuildScriptOfAnotherCrate { package, compiled_for, running_for } => {
                f.write_str(&crate::same_name::explain(package, compiled_for, running_for))
            }
            Self::Io { what, source } => write!(f, "{what}: {source}"),
        }
    }
}

/// A kernel over one of ptxas's per-kernel limits (audit finding E4), from lines like
/// `ptxas error   : Entry function 'k' uses too much shared data (0x13890 bytes, 0xc000 max)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResourceOverflow {
    /// The kernel (the PTX entry's name).
    pub kernel: String,
    /// What ran out: `parameter space`, `shared data` or `local data`.
    pub what: String,
    /// Bytes used.
    pub used: u64,
    /// Bytes allowed.
    pub max: u64,
}

impl ResourceOverflow {
    /// What to tell the kernel's author.
    fn explain(&self, arch: Arch) -> String {
        let remedy = match self.what.as_str() {
            "parameter space" => {
                "pass big data in a device buffer (a `&[T]` parameter, or a struct in a one-element buffer) \
                 instead of by value, or take fewer parameters"
            }
            "shared data" => {
                "declare the big arrays with `dynamic_shared::<T>()` and size them at launch \
                 (`LaunchConfig::with_shared_bytes`; above 48 KiB also `Function::set_max_dynamic_shared_bytes`)"
            }
            _ => "make the kernel's local arrays smaller, or keep the data in shared or global memory",
        };
        format!("kernel `{}` uses {} bytes of {}, over the limit of {} bytes for {arch}: {remedy}", self.kernel, self.used, self.what, self.max)
    }
}

/// The resource overflows ptxas reported in `log` (empty when it failed for another reason).
pub(crate) fn resource_overflows(log: &str) -> Vec<ResourceOverflow> {
    let hex = |text: &str| u64::from_str_radix(text.trim().trim_start_matches("0x"), 16).ok();
    log.lines()
        .filter_map(|line| {
            let rest = &line[line.find("Entry function '")? + "Entry function '".len()..];
            let (kernel, rest) = rest.split_once('\'')?;
            let rest = rest.trim_start().strip_prefix("uses too much ")?;
            let (what, rest) = rest.split_once(" (")?;
            let (used, rest) = rest.split_once(" bytes, ")?;
            let (max, _) = rest.split_once(" max")?;
            Some(ResourceOverflow { kernel: kernel.to_string(), what: what.to_string(), used: hex(used)?, max: hex(max)? })
        })
        .collect()
}

impl BuildError {
    /// A `ptxas` error saying it cannot compile for that architecture at all.
    pub fn is_unsupported_arch(&self) -> bool {
        matches!(self, Self::Ptxas { log, .. } if log.contains("is not defined for option 'gpu-name'"))
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (audit E4): a kernel over ptxas's parameter or shared-memory limit was
    /// reported as a code-generation bug; the message now names the kernel, the limit and what
    /// to do instead.
    #[test]
    fn ptxas_resource_overflows_name_the_kernel_the_limit_and_the_remedy() {
        let log = "ptxas error   : Entry function 'many_slices' uses too much parameter space (0x12d0 bytes, 0x1100 max).\n\
                   ptxas error   : Entry function 'big_shared' uses too much shared data (0x13890 bytes, 0xc000 max)\n";
        let overflows = resource_overflows(log);
        assert_eq!(overflows.len(), 2);
        assert_eq!(overflows[0], ResourceOverflow { kernel: "many_slices".into(), what: "parameter space".into(), used: 0x12d0, max: 0x1100 });
        let text = BuildError::Ptxas { arch: Arch::SM_90, log: log.into() }.to_string();
        assert!(text.contains("kernel `many_slices` uses 4816 bytes of parameter space, over the limit of 4352 bytes for sm_90"), "{text}");
        assert!(
            text.contains("kernel `big_shared` uses 80016 bytes of shared data, over the limit of 49152 bytes") && text.contains("dynamic_shared"),
            "{text}"
        );
        assert!(!text.contains("code-generation bug"), "{text}");
        let other = BuildError::Ptxas { arch: Arch::SM_90, log: "ptxas fatal   : Unresolved label".into() }.to_string();
        assert!(other.contains("code-generation bug"), "{other}");
    }

    /// Regression (issue 23): an instruction the target lacks read as a ptxas bug ("set
    /// FERROCUDA_PTXAS to another ptxas") instead of naming the architecture it needs.
    #[test]
    fn an_instruction_newer_than_the_target_names_the_architecture_it_needs() {
        let log =
            "ptxas k.ptx, line 8; error   : Modifier '.L2::cache_hint' requires .target sm_80 or higher\nptxas fatal   : Ptx assembly aborted due to errors";
        let text = BuildError::Ptxas { arch: Arch::SM_75, log: log.into() }.to_string();
        assert!(text.contains("Modifier '.L2::cache_hint', which needs sm_80 or newer, but this PTX is built for sm_75"), "{text}");
        assert!(text.contains("ferrocuda_sm = \"80\"") && !text.contains("FERROCUDA_PTXAS"), "{text}");
        let log = "ptxas k.ptx, line 3; error   : Feature 'tanh' requires PTX ISA .version 8.8 or later";
        let text = BuildError::Ptxas { arch: Arch::SM_75, log: log.into() }.to_string();
        assert!(text.contains("needs PTX ISA 8.8") && text.contains("KernelBuilder::ptx_isa(8, 8)"), "{text}");
    }

    /// Regression (audit N9): two `shared_array!`s with one site name were reported as a
    /// code-generation bug.
    #[test]
    fn n9_a_duplicate_shared_array_site_is_explained() {
        let log = "ptxas /tmp/x.sm_90.ptx, line 11; error   : Duplicate definition of variable '__ferrocuda_shared_7849955388371688246'\n\
                   ptxas fatal   : Ptx assembly aborted due to errors\n";
        let text = BuildError::Ptxas { arch: Arch::SM_90, log: log.into() }.to_string();
        assert!(text.contains("two `shared_array!`s got one site") && text.contains("one ferrocuda-device"), "{text}");
        assert!(text.contains("__ferrocuda_shared_7849955388371688246") && !text.contains("code-generation bug"), "{text}");
    }
}
