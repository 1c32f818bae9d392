//! The inner cargo that compiles a kernel crate for `nvptx64-nvidia-cuda`.
//!
//! Nothing here depends on where cargo keeps its intermediate files (that layout changed in
//! cargo 1.100): the PTX is written where we ask (`--emit=asm=<absolute path>`, given to the
//! final rustc only), and the sources read come from the dep-info file cargo documents beside
//! the final artifact (see [`crate::dep_info`]).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use crate::{Arch, BuildError, DeviceToolchain, TARGET};

/// One kernel crate's device build, for one architecture at a time.
pub(crate) struct InnerBuild<'a> {
    pub toolchain: &'a DeviceToolchain,
    pub manifest: &'a Path,
    pub crate_name: &'a str,
    pub release: bool,
    /// Integer overflow checks (`KernelBuilder::overflow_checks`), for every crate of the build.
    pub overflow_checks: bool,
}

impl InnerBuild<'_> {
    fn profile_dir(&self) -> &'static str {
        if self.release { "release" } else { "debug" }
    }

    /// The dep-info file cargo writes beside the final artifact in `target_dir`.
    pub fn dep_info_file(&self, target_dir: &Path) -> PathBuf {
        target_dir.join(TARGET).join(self.profile_dir()).join(format!("{}.d", self.crate_name))
    }

    /// The inner cargo command. `rustflags` reach every crate of the build (`core` included, so
    /// `-Ctarget-cpu` is the same everywhere: rustc >= 1.101 refuses a mix); `--emit` reaches
    /// only the kernel crate.
    pub fn command(&self, target_dir: &Path, rustflags: &[String], asm: &Path) -> Command {
        let mut command = Command::new(&self.toolchain.cargo);
        command
            .args(["rustc", "--lib", "--crate-type", "cdylib", "--target", TARGET, "-Zbuild-std=core"])
            .arg("--manifest-path")
            .arg(self.manifest)
            .arg("--target-dir")
            .arg(target_dir)
            .args(["--color", "always"]);
        if self.release {
            command.arg("--release");
        }
        let mut emit = std::ffi::OsString::from("--emit=asm=");
        emit.push(asm);
        command.args(["--", "-Clinker=/bin/true"]).arg(emit).arg(allow_features()).arg(crate_identity(self.manifest));
        clean_environment(&mut command);
        let profile = if self.release { "RELEASE" } else { "DEV" };
        command
            .env("RUSTC", &self.toolchain.rustc)
            .env("RUSTC_BOOTSTRAP", "1")
            .env("CARGO_ENCODED_RUSTFLAGS", rustflags.join("\x1f"))
            .env(format!("CARGO_PROFILE_{profile}_PANIC"), "abort")
            .env(format!("CARGO_PROFILE_{profile}_LTO"), "fat")
            .env(format!("CARGO_PROFILE_{profile}_CODEGEN_UNITS"), "1")
            .env(format!("CARGO_PROFILE_{profile}_OVERFLOW_CHECKS"), if self.overflow_checks { "true" } else { "false" });
        crate::env::own_libraries(&mut command, &self.toolchain.rustc);
        command
    }

    /// Runs the build for `arch` in `target_dir` and returns the PTX that rustc wrote to `asm`
    /// (an absolute path without commas; any older file there is removed first) and the
    /// build's warnings (see [`diagnostics`]).
    pub fn run(&self, arch: Arch, target_dir: &Path, rustflags: &[String], asm: &Path) -> Result<(String, Vec<String>), BuildError> {
        if asm.to_string_lossy().contains(',') || !asm.is_absolute() {
            return Err(BuildError::Io {
                what: format!("choosing where the PTX goes ({}): rustc's --emit needs an absolute path without commas; set .out_dir(...)", asm.display()),
                source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
            });
        }
        let _ = std::fs::remove_file(asm);
        let started = SystemTime::now();
        let mut command = self.command(target_dir, rustflags, asm);
        let output = command.output().map_err(|e| BuildError::Io { what: format!("running {}", self.toolchain.cargo.display()), source: e })?;
        let diagnostics = String::from_utf8_lossy(&output.stderr).into_owned();
        if !output.status.success() {
            return Err(BuildError::Compile { arch, diagnostics });
        }
        let warnings = self::diagnostics(&diagnostics);
        match std::fs::read_to_string(asm) {
            Ok(ptx) => {
                let _ = std::fs::remove_file(asm); // the caller keeps the cleaned copy
                Ok((ptx, warnings))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(BuildError::MissingPtx {
                arch,
                expected: asm.to_path_buf(),
                toolchain: self.toolchain.describe(),
                produced: files_written_since(target_dir, started),
            }),
            Err(e) => Err(BuildError::Io { what: format!("reading the PTX {}", asm.display()), source: e }),
        }
    }
}

/// `-Cmetadata=ferrocuda-<hash of the manifest's absolute path>` for the kernel crate only.
///
/// Cargo names a package's build directory and fingerprint by a hash of its name, version and
/// path *relative to its workspace root*, so two kernel crates of one name, each the root of its
/// own workspace (a template copied twice, two checkouts), built into one target directory get
/// one build directory. Had the second's sources older timestamps than the first's build, cargo
/// would call it up to date and emit no PTX for it. `cargo rustc`'s extra arguments are part of
/// that fingerprint, so this one, different for each crate's path, makes the switch a rebuild
/// of the kernel crate alone (`core` and the device library stay shared). rustc takes several
/// `-C metadata` values and mixes them all into the crate's symbol hashes; kernel entry points
/// are `#[no_mangle]` and keep their names.
fn crate_identity(manifest: &Path) -> String {
    let path = std::path::absolute(manifest).unwrap_or_else(|_| manifest.to_path_buf());
    let path = path.canonicalize().unwrap_or(path);
    // The host/device contract's FNV-1a fingerprint: stable across Rust versions and runs
    // (std's `DefaultHasher` promises neither).
    let hash = ferrocuda_types::fingerprint(&path.to_string_lossy());
    format!("-Cmetadata=ferrocuda-{hash:016x}")
}

/// The unstable language features a kernel crate may enable: what `#[kernel]` entry points
/// (`extern "ptx-kernel"`) and the device library's inline assembly need, the ones every kernel
/// crate of this project declares (`#![cfg_attr(target_arch = "nvptx64", no_std,
/// feature(abi_ptx, asm_experimental_arch))]`).
///
/// `RUSTC_BOOTSTRAP=1` is set for the device build only because `-Zbuild-std=core` needs it
/// (there is no stable way to build `core` for `nvptx64`); it would otherwise open every nightly
/// feature to the kernel crate, some of them unsound by design (`specialization`) or made to
/// get around the language's checks (`rustc_attrs`, `lang_items`, `negative_impls`), so that
/// safe kernel code could break what the launchers and the kernel model rely on (session 22).
/// `-Zallow-features` limits the kernel crate to this list: rustc refuses any other feature
/// (E0725), and the builder's error says why ([`crate::BuildError::Compile`]).
///
/// It reaches the kernel crate only (`cargo rustc`'s arguments after `--`): `core` needs its own
/// features, and cargo has no flag for "every crate but the standard library's" (its own
/// `-Zallow-features` does not reach rustc). The kernel crate's dependencies are therefore not
/// restricted: `ferrocuda-device` enables `stdarch_nvptx`, `asm_experimental_arch`,
/// `trivial_bounds` and `link_llvm_intrinsics` (reviewed with the crate), and a dependency of
/// the user's own with `#![feature(..)]` is the user's to review, like any `unsafe` in it.
pub const KERNEL_CRATE_FEATURES: &[&str] = &["abi_ptx", "asm_experimental_arch"];

/// The rustc flag that limits the kernel crate to [`KERNEL_CRATE_FEATURES`].
fn allow_features() -> String {
    format!("-Zallow-features={}", KERNEL_CRATE_FEATURES.join(","))
}

/// What rustc says when a crate enables a feature `-Zallow-features` does not list (E0725).
const FEATURE_REFUSED: &str = "is not in the list of allowed features";

/// The builder's note for a kernel crate whose `#![feature(..)]` was refused: which features are
/// allowed and why the others are not. `None` when `diagnostics` has no such refusal.
pub(crate) fn refused_feature_note(diagnostics: &str) -> Option<String> {
    if !diagnostics.contains(FEATURE_REFUSED) {
        return None;
    }
    Some(format!(
        "note: a kernel crate may enable only the unstable features {} (`ferrocuda_builder::KERNEL_CRATE_FEATURES`). The device \
         build sets RUSTC_BOOTSTRAP=1 only to build `core` for nvptx64 (-Zbuild-std), not to open nightly Rust to kernel code: \
         other features can break, from safe code, what the launchers and the kernel model rely on. Remove the `#![feature(..)]` \
         (or move code that needs it into a dependency of the kernel crate, which you review yourself)",
        KERNEL_CRATE_FEATURES.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", ")
    ))
}

/// Code-like files (`.s`, `.ptx`, `.ll`, `.bc`, `.o`) under `dir` written at or after `since`,
/// at most 20, for the message of a build that produced no PTX where asked.
pub(crate) fn files_written_since(dir: &Path, since: SystemTime) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| ["s", "ptx", "ll", "bc", "o"].iter().any(|x| e == *x))
                && meta.modified().is_ok_and(|m| m >= since)
                && found.len() < 20
            {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// Removes what the outer cargo set for its build script, so the inner cargo starts clean.
fn clean_environment(command: &mut Command) {
    const KEEP: &[&str] = &["CARGO_HOME", "CARGO_NET_", "CARGO_HTTP_", "CARGO_REGISTRIES_", "CARGO_REGISTRY_"];
    const DROP: &[&str] = &[
        "RUSTFLAGS",
        "RUSTDOCFLAGS",
        "RUSTC",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTDOC",
        "RUSTUP_TOOLCHAIN",
        "TARGET",
        "HOST",
        "OUT_DIR",
        "OPT_LEVEL",
        "PROFILE",
        "DEBUG",
        "NUM_JOBS",
        "RUSTC_LINKER",
    ];
    for (key, _) in std::env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        let cargo_var = key.starts_with("CARGO") && !KEEP.iter().any(|k| key.starts_with(k));
        if cargo_var || DROP.contains(&key) || key.starts_with("DEP_") {
            command.env_remove(key);
        }
    }
}

/// The diagnostics in the inner cargo's output (human-rendered, colours removed), one string
/// each with every line rustc printed for it: `warning: ..` or `warning[E0133]: ..`, the
/// `-->` location, the source excerpt, `= note:`/`= help:` lines, and free-standing `note:`
/// diagnostics. Cargo's own progress lines and its "generated N warnings" summary are left
/// out, and so is rustc's note that `+ptx83` (which the builder sets for arch-specific targets)
/// is unstable: LLVM understands it.
pub(crate) fn diagnostics(output: &str) -> Vec<String> {
    let plain = strip_ansi(output);
    let mut found: Vec<String> = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    let finish = |block: Option<Vec<&str>>, found: &mut Vec<String>| {
        let Some(mut lines) = block else { return };
        while lines.last().is_some_and(|l| l.trim().is_empty()) {
            lines.pop();
        }
        let Some(first) = lines.first() else { return };
        // Cargo's "warning: `k` (lib) generated 2 warnings (run `cargo fix` ..)".
        let summary = first.starts_with("warning: `") && first.contains(" generated ") && first.contains(" warning");
        if summary || first.contains("`ptx83`") {
            return;
        }
        let text = lines.join("\n");
        if !found.contains(&text) {
            found.push(text);
        }
    };
    for line in plain.lines() {
        if starts_diagnostic(line) {
            finish(current.take(), &mut found);
            current = Some(vec![line]);
        } else if line.trim().is_empty() || is_cargo_status(line) {
            finish(current.take(), &mut found);
        } else if let Some(block) = current.as_mut() {
            block.push(line);
        }
    }
    finish(current.take(), &mut found);
    found
}

/// `warning: ..`, `warning[E0133]: ..`, `note: ..`, `help: ..` at the start of a line (an
/// `error` cannot be among a successful build's diagnostics, but is accepted too).
fn starts_diagnostic(line: &str) -> bool {
    ["warning", "error", "note", "help"].iter().any(|kind| {
        let Some(rest) = line.strip_prefix(kind) else { return false };
        rest.starts_with(": ") || (rest.starts_with('[') && rest.find("]: ").is_some_and(|end| rest[1..end].chars().all(|c| c.is_ascii_alphanumeric())))
    })
}

/// Cargo's progress lines (`   Compiling k v0.0.0 (..)`, `    Finished ..`).
fn is_cargo_status(line: &str) -> bool {
    let trimmed = line.trim_start();
    line.len() > trimmed.len()
        && ["Compiling ", "Finished ", "Checking ", "Fresh ", "Running ", "Blocking ", "Locking ", "Updating ", "Downloaded ", "Downloading ", "Adding "]
            .iter()
            .any(|status| trimmed.starts_with(status))
}

/// The most diagnostics a build script forwards in full, and the most lines of each: a crate
/// with hundreds of warnings should not bury the outer build's output.
const FORWARD_DIAGNOSTICS: usize = 30;
const FORWARD_LINES: usize = 40;

/// `cargo:warning=` lines that show `warnings` (from [`diagnostics`], already deduplicated)
/// to the user of the outer build: every line of each diagnostic, the first marked as the
/// device build's, then a count of what was left out.
pub(crate) fn cargo_warning_lines(warnings: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for warning in warnings.iter().take(FORWARD_DIAGNOSTICS) {
        let lines: Vec<&str> = warning.lines().collect();
        for (k, line) in lines.iter().take(FORWARD_LINES).enumerate() {
            if k == 0 {
                out.push(format!("cargo:warning=device build: {line}"));
            } else {
                out.push(format!("cargo:warning={line}"));
            }
        }
        if lines.len() > FORWARD_LINES {
            out.push(format!("cargo:warning=  ({} more lines of this diagnostic)", lines.len() - FORWARD_LINES));
        }
    }
    if warnings.len() > FORWARD_DIAGNOSTICS {
        out.push(format!(
            "cargo:warning=device build: {} more warnings not shown ({} in all; `KernelBuilder::build()` returns every one in `Artifacts::warnings`)",
            warnings.len() - FORWARD_DIAGNOSTICS,
            warnings.len()
        ));
    }
    out
}

/// Removes ANSI colour sequences (the inner cargo colours its output for the user's terminal).
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for end in chars.by_ref() {
                if end.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolchainSource;

    fn toolchain() -> DeviceToolchain {
        DeviceToolchain {
            rustc: "/tc/rustc".into(),
            cargo: "/tc/cargo".into(),
            sysroot: "/tc".into(),
            version: "rustc 1.101.0-nightly".into(),
            source: ToolchainSource::RustupNightly,
        }
    }

    /// What the inner cargo printed for a kernel crate with an `unsafe fn` kernel dereferencing
    /// a raw pointer without an `unsafe` block (edition 2024), plus two plain warnings, the
    /// `+ptx83` note and cargo's own lines.
    const OUTPUT: &str = "\
   Compiling k v0.0.0 (/k)
warning: unstable feature specified for `-Ctarget-feature`: `ptx83`
  |
  = note: this feature is not stably supported; its behavior can change in the future

warning[E0133]: dereference of raw pointer is unsafe and requires unsafe block
 --> src/lib.rs:9:5
  |
9 |     *p = 1;
  |     ^^^^^^ dereference of raw pointer
  |
  = note: for more information, see <https://doc.rust-lang.org/edition-guide/rust-2024/unsafe-op-in-unsafe-fn.html>
  = note: raw pointers may be null, dangling or unaligned; they can violate aliasing rules and cause data races: all of these are undefined behavior
note: an unsafe function restricts its caller, but its body is safe by default
 --> src/lib.rs:8:1
  |
8 | pub unsafe fn k(p: *mut u32) {
  | ^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  = note: `#[warn(unsafe_op_in_unsafe_fn)]` (part of `#[warn(rust_2024_compatibility)]`) on by default

warning: unused variable: `x`
 --> src/lib.rs:12:9
  |
12 |     let x = 1;
  |         ^ help: if this is intentional, prefix it with an underscore: `_x`

warning: feature `asm_experimental_arch` is declared but not used
 --> src/lib.rs:1:63
  |
1 | #![cfg_attr(target_arch = \"nvptx64\", no_std, feature(abi_ptx, asm_experimental_arch))]
  |                                                               ^^^^^^^^^^^^^^^^^^^^^

warning: `k` (lib) generated 3 warnings (run `cargo fix --lib -p k` to apply 1 suggestion)
    Finished `release` profile [optimized] target(s) in 0.87s
";

    /// Regression (P1, audit 2026-11-27): only lines beginning `warning:` were forwarded, and
    /// only their first line, so `warning[E0133]` (an unsafe operation in an `unsafe fn`) never
    /// reached the user. Every diagnostic is kept whole: codes, location, excerpt, notes.
    #[test]
    fn p1_coded_warnings_and_their_notes_are_kept_whole() {
        let found = diagnostics(OUTPUT);
        assert_eq!(found.len(), 4, "{found:#?}");
        let coded = &found[0];
        assert!(coded.starts_with("warning[E0133]: dereference of raw pointer is unsafe and requires unsafe block\n --> src/lib.rs:9:5"), "{coded}");
        assert!(coded.contains("9 |     *p = 1;") && coded.contains("= note: raw pointers may be null"), "{coded}");
        // The free-standing note that follows is its own diagnostic, kept too.
        assert!(found[1].starts_with("note: an unsafe function restricts its caller") && found[1].contains("#[warn(unsafe_op_in_unsafe_fn)]"), "{}", found[1]);
        assert!(found[2].starts_with("warning: unused variable: `x`") && found[2].contains("help: if this is intentional"), "{}", found[2]);
        assert!(found[3].starts_with("warning: feature `asm_experimental_arch`"), "{}", found[3]);
        // Neither cargo's lines nor the +ptx83 note.
        assert!(!found.iter().any(|w| w.contains("Compiling") || w.contains("generated 3 warnings") || w.contains("ptx83")), "{found:#?}");
        // Colours do not matter.
        let coloured = OUTPUT.replace("warning[E0133]", "\x1b[1m\x1b[33mwarning[E0133]\x1b[0m");
        assert_eq!(diagnostics(&coloured), found);
    }

    /// Each diagnostic becomes `cargo:warning` lines, every line of it, once; a flood is cut
    /// to [`FORWARD_DIAGNOSTICS`] with a count of the rest.
    #[test]
    fn p1_forwarded_warnings_show_every_line_once_and_a_flood_is_cut() {
        let found = diagnostics(OUTPUT);
        let lines = cargo_warning_lines(&found);
        assert_eq!(lines[0], "cargo:warning=device build: warning[E0133]: dereference of raw pointer is unsafe and requires unsafe block");
        assert_eq!(lines[1], "cargo:warning= --> src/lib.rs:9:5");
        assert!(lines.iter().any(|l| l.contains("= note: for more information, see")), "{lines:#?}");
        assert_eq!(lines.len(), found.iter().map(|w| w.lines().count()).sum::<usize>());
        // The same output from two architectures' builds: deduplicated before forwarding.
        let twice = diagnostics(&format!("{OUTPUT}{OUTPUT}"));
        assert_eq!(twice, found);
        // A flood: 100 different warnings.
        let flood: Vec<String> = (0..100).map(|k| format!("warning: unused variable: `x{k}`\n --> src/lib.rs:{k}:9")).collect();
        let lines = cargo_warning_lines(&flood);
        assert_eq!(lines.len(), FORWARD_DIAGNOSTICS * 2 + 1, "{lines:#?}");
        assert!(lines.last().unwrap().contains("70 more warnings not shown (100 in all"), "{lines:#?}");
    }

    #[test]
    fn strip_ansi_removes_colours() {
        assert_eq!(strip_ansi("\x1b[1m\x1b[91merror\x1b[0m: x"), "error: x");
    }

    /// Regression (issue 11): the builder read the PTX from `<target>/.../deps/<crate>.s`,
    /// which cargo 1.100's build-directory layout moved. The path is now ours: `--emit=asm=`
    /// after `--` (the final crate only), with target-cpu in the encoded RUSTFLAGS.
    #[test]
    fn the_ptx_path_is_chosen_by_us_and_passed_to_the_final_rustc_only() {
        let tc = toolchain();
        let build = InnerBuild { toolchain: &tc, manifest: Path::new("/k/Cargo.toml"), crate_name: "k", release: true, overflow_checks: false };
        let command = build.command(Path::new("/t/sm_80"), &["-Ctarget-cpu=sm_80".into(), "--cfg".into(), "x".into()], Path::new("/out/k.sm_80.s"));
        let args: Vec<String> = command.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        let separator = args.iter().position(|a| a == "--").expect("a -- separator");
        assert_eq!(&args[separator + 1..separator + 4], ["-Clinker=/bin/true", "--emit=asm=/out/k.sm_80.s", "-Zallow-features=abi_ptx,asm_experimental_arch"]);
        assert!(args[separator + 4].starts_with("-Cmetadata=ferrocuda-") && args.len() == separator + 5, "{args:?}");
        assert!(!args[..separator].iter().any(|a| a.contains("emit") || a.contains("target-cpu")), "{args:?}");
        let env: Vec<(String, String)> =
            command.get_envs().filter_map(|(k, v)| Some((k.to_string_lossy().into_owned(), v?.to_string_lossy().into_owned()))).collect();
        assert!(env.contains(&("CARGO_ENCODED_RUSTFLAGS".into(), "-Ctarget-cpu=sm_80\x1f--cfg\x1fx".into())), "{env:?}");
        assert!(env.contains(&("CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS".into(), "false".into())), "Q11: the profile's overflow checks are explicit: {env:?}");
        assert!(env.contains(&("RUSTC".into(), "/tc/rustc".into())) && env.contains(&("RUSTC_BOOTSTRAP".into(), "1".into())), "{env:?}");
        assert_eq!(build.dep_info_file(Path::new("/t/sm_80")), Path::new("/t/sm_80/nvptx64-nvidia-cuda/release/k.d"));
    }

    /// Two kernel crates of one name in one target directory (session 23's fixtorch: the
    /// template's `my-kernels` and a copy of it) get different device-build fingerprints, so
    /// cargo never takes one's build for the other's.
    #[test]
    fn s24_kernel_crates_of_one_name_at_two_paths_get_different_identities() {
        let (a, b) = (crate_identity(Path::new("/a/my-kernels/Cargo.toml")), crate_identity(Path::new("/b/my-kernels/Cargo.toml")));
        assert_ne!(a, b);
        assert_eq!(a, crate_identity(Path::new("/a/my-kernels/Cargo.toml")), "stable for one path");
        assert_eq!(a.len(), "-Cmetadata=ferrocuda-".len() + 16, "{a}");
    }

    /// Session 22: `RUSTC_BOOTSTRAP=1` (for `-Zbuild-std`) opened every nightly feature to the
    /// kernel crate; rustc now gets `-Zallow-features` for it, and a refusal gets a note that
    /// says which features are allowed and why (the device build of a fixture that enables
    /// `never_type` is `s22_a_kernel_crate_feature_outside_the_list_is_refused`, builder/tests/device_features.rs).
    #[test]
    fn s22_kernel_crate_features_are_limited_and_a_refusal_says_why() {
        assert_eq!(allow_features(), "-Zallow-features=abi_ptx,asm_experimental_arch");
        let rustc = "error[E0725]: the feature `never_type` is not in the list of allowed features\n --> src/lib.rs:2:22";
        let note = refused_feature_note(rustc).expect("a note for a refused feature");
        assert!(note.contains("`abi_ptx`, `asm_experimental_arch`") && note.contains("RUSTC_BOOTSTRAP=1") && note.contains("Remove"), "{note}");
        assert_eq!(refused_feature_note("error[E0308]: mismatched types"), None);
        let error = crate::BuildError::Compile { arch: crate::Arch::SM_80, diagnostics: rustc.into() };
        assert!(error.to_string().contains("KERNEL_CRATE_FEATURES"), "{error}");
    }

    #[test]
    fn a_missing_ptx_names_the_toolchain_and_what_it_wrote() {
        let dir = std::env::temp_dir().join(format!("ferrocuda-missing-ptx-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("t/nvptx64-nvidia-cuda/release/build/k/1234/out")).unwrap();
        let since = SystemTime::now() - std::time::Duration::from_secs(1);
        let stray = dir.join("t/nvptx64-nvidia-cuda/release/build/k/1234/out/k.s");
        std::fs::write(&stray, "").unwrap();
        std::fs::write(dir.join("t/unrelated.json"), "").unwrap();
        assert_eq!(files_written_since(&dir.join("t"), since), vec![stray.clone()]);
        let error = BuildError::MissingPtx { arch: Arch::SM_80, expected: dir.join("out/k.sm_80.s"), toolchain: toolchain().describe(), produced: vec![stray] };
        let message = error.to_string();
        assert!(message.contains("rustc 1.101.0-nightly from rustup nightly (/tc/rustc)"), "{message}");
        assert!(message.contains("1234/out/k.s") && message.contains("k.sm_80.s"), "{message}");
    }

    #[test]
    fn a_relative_or_comma_path_is_refused_before_running_anything() {
        let tc = toolchain();
        let build = InnerBuild { toolchain: &tc, manifest: Path::new("/k/Cargo.toml"), crate_name: "k", release: true, overflow_checks: false };
        for bad in ["rel/k.s", "/a,b/k.s"] {
            let error = build.run(Arch::SM_80, Path::new("/t"), &[], Path::new(bad)).unwrap_err().to_string();
            assert!(error.contains("absolute path without commas"), "{error}");
        }
    }
}
