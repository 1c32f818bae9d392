//! Line and debug information through the whole device build (issue 15), without a GPU: the
//! planted-oob fixture crate (tests/fixtures/planted-oob) built with the builder's defaults
//! (line information) and with `debug_info(true)`. The GPU half, compute-sanitizer naming
//! `src/lib.rs:22`, is in the tools helper's device run script.
//! Skips (printed) without the device toolchain or ptxas; `REQUIRE_PTXAS=1` makes that a failure.

use std::path::{Path, PathBuf};

use ferrocuda_builder::{Arch, Artifacts, BuildEnv, DeviceToolchain, KernelBuilder, find_ptxas};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/planted-oob")
}

fn tools_or_skip(test: &str) -> bool {
    if DeviceToolchain::find(&BuildEnv::process()).is_ok() && find_ptxas(&BuildEnv::process()).is_some() {
        return true;
    }
    assert!(std::env::var_os("REQUIRE_PTXAS").is_none(), "{test}: REQUIRE_PTXAS=1 but the device toolchain or ptxas is missing");
    println!("skipping {test}: no device toolchain or no ptxas (run scripts/install-device-toolchain.sh)");
    false
}

/// Builds the fixture for sm_80 (PTX and cubin) into a directory of its own; the inner target
/// directory is shared with other builds of the fixture so the `core` build is reused.
fn build(debug_info: bool) -> Artifacts {
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/ferrocuda-device/planted_oob_test");
    let out = std::env::temp_dir().join(format!("planted-oob-{}-{debug_info}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    KernelBuilder::new(fixture())
        .arch(Arch::SM_80)
        .cubin_arch(Arch::SM_80)
        .debug_info(debug_info)
        .target_dir(target.join(if debug_info { "debug" } else { "lines" }))
        .out_dir(&out)
        .build()
        .unwrap_or_else(|e| panic!("building the fixture: {e}"))
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[test]
fn default_build_keeps_rust_lines_in_ptx_and_cubin() {
    if !tools_or_skip("default_build_keeps_rust_lines_in_ptx_and_cubin") {
        return;
    }
    let artifacts = build(false);
    let ptx = std::fs::read_to_string(&artifacts.ptx[0].1).unwrap();
    let file = ptx.lines().find(|l| l.contains(".file") && l.contains("planted-oob/src/lib.rs")).expect("a .file entry for the fixture's lib.rs");
    let number = file.split_whitespace().nth(1).unwrap();
    // The planted write is on line 22 of src/lib.rs.
    assert!(ptx.contains(&format!(".loc\t{number} 22 ")), "no .loc for lib.rs:22 in\n{ptx}");
    assert!(!ptx.contains(".debug_info") && ptx.contains(".target sm_80\n"));
    let cubin = std::fs::read(&artifacts.cubins[0].path).unwrap();
    assert!(contains(&cubin, ".debug_line") && !contains(&cubin, ".debug_info"), "a -lineinfo cubin has a line table and no full debug info");
}

#[test]
fn debug_info_build_carries_dwarf_through_ptxas() {
    if !tools_or_skip("debug_info_build_carries_dwarf_through_ptxas") {
        return;
    }
    let artifacts = build(true);
    let ptx = std::fs::read_to_string(&artifacts.ptx[0].1).unwrap();
    assert!(ptx.contains(".target sm_80, debug") && ptx.contains(".section\t.debug_info"), "full DWARF expected in the PTX");
    let cubin = std::fs::read(&artifacts.cubins[0].path).unwrap();
    assert!(contains(&cubin, ".debug_info") && contains(&cubin, ".debug_line"), "ptxas -g should keep the DWARF");
    // Variable locations exist only with full debug information.
    assert!(contains(&cubin, ".debug_loc"), "ptxas -g should keep the variable locations");
}

/// The text of each `.func`/`.entry` definition whose header line contains `name`.
fn definitions<'p>(ptx: &'p str, name: &str) -> Vec<&'p str> {
    let mut found = Vec::new();
    let mut rest = ptx;
    while let Some(at) = rest.find(name) {
        let line_start = rest[..at].rfind('\n').map_or(0, |n| n + 1);
        let header = &rest[line_start..];
        let line = header.lines().next().unwrap_or_default();
        let is_definition = (line.contains(".func") || line.contains(".entry")) && !header.split("\n}").next().unwrap_or_default().contains("\n;");
        let end = header.find("\n}").map_or(header.len(), |e| e + 2);
        if is_definition {
            found.push(&header[..end]);
        }
        rest = &rest[at + name.len()..];
    }
    found
}

/// A `call` whose target is a register (`call (retval0), %rd4, (...)`): an indirect call.
fn indirect_calls(text: &str) -> usize {
    text.lines()
        .map(str::trim)
        .filter_map(|l| l.strip_prefix("call.uni").or_else(|| l.strip_prefix("call")))
        .filter(|rest| {
            let rest = rest.trim_start();
            let target = if rest.starts_with('(') { rest.split_once("),").map_or("", |(_, t)| t.trim_start()) } else { rest };
            target.starts_with('%')
        })
        .count()
}

/// `kernel_panic!` keeps its arguments without `core::fmt`: under the cheap panic handler (the
/// default) nothing in the module formats (the host formats the recorded template and values),
/// no indirect call is left, and the kernel has no stack frame.
#[test]
fn kernel_panic_formats_without_core_fmt() {
    if !tools_or_skip("kernel_panic_formats_without_core_fmt") {
        return;
    }
    let artifacts = build(false);
    let ptx = std::fs::read_to_string(&artifacts.ptx[0].1).unwrap();
    // The check itself works on an indirect call as ptxas prints one.
    assert_eq!(indirect_calls("\tcall (retval0), %rd38, (param0, param1, param2), prototype_14;\n\tcall.uni f, (param0);"), 1);
    // The cheap panic handler (issue 20) never reads a panic's message, so even
    // `over_limit_std_panic`'s `panic!("{}", ..)` leaves core::fmt, and its indirect calls,
    // out of the module (the detailed handler kept them).
    assert_eq!(indirect_calls(&ptx), 0, "core::fmt's indirect calls are in the module");
    assert!(definitions(&ptx, "Message6format").is_empty(), "kernel_panic! formats on the GPU");
    let resources = &artifacts.cubins[0].resources;
    let kernel = |name: &str| resources.iter().find(|r| r.kernel == name).unwrap_or_else(|| panic!("no {name} in {resources:?}"));
    assert!(kernel("over_limit").registers <= 32, "over_limit uses {} registers", kernel("over_limit").registers);
    assert_eq!(kernel("over_limit").stack_frame, 0, "kernel_panic!'s values go through the stack");
}
