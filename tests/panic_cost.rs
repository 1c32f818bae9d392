//! What a reachable panic path costs a kernel (issue 20, part 3), pinned on ptxas's figures
//! and the SASS, without a GPU: the fixture tests/fixtures/panic-cost has three kernels with
//! bounds or divisor checks (a 2-D stencil, a layernorm row, a division by a parameter), each
//! beside a panic-free twin, and the division again with `kernel_panic!`s that keep their
//! values. With the default (cheap) panic handler, the checked kernel of each pair has no
//! local-memory stack frame and at most the registers and SASS instructions [`PAIRS`] allows
//! more than its twin; before, each had a 640-byte frame, 34-49 more registers and ~2,000
//! more instructions (docs/performance.md).
//! The detailed handler (`panic_messages(true)`) still has its frame, and the build's resource
//! table reports it (issue 23: it used to show the last callee's 0).
//!
//! Skips (printed) without the device toolchain, ptxas or nvdisasm; `REQUIRE_PTXAS=1` makes
//! that a failure.

use std::path::{Path, PathBuf};
use std::process::Command;

use ferrocuda_builder::{Arch, Artifacts, BuildEnv, DeviceToolchain, KernelBuilder, KernelResources, find_ptxas};

/// The checked kernel, its panic-free twin, and the registers and SASS instructions (NOPs not
/// counted) its panic paths may add. The cheap handler needs 24 registers of its own (sm_90,
/// ptxas 13.0): a kernel that already uses that many pays nothing, a 12-register kernel pays
/// 12; `kernel_panic!`'s values take 8 more (32, the count under which an SM still runs its
/// full 2,048 threads). The instructions are the handler compiled into the kernel (~240), once
/// per `kernel_panic!` site (~490 each, inlined so that the values stay in registers).
const PAIRS: [(&str, &str, u32, usize); 4] = [
    ("stencil_checked", "stencil_unchecked", 12, 400),
    ("layernorm_checked", "layernorm_unchecked", 0, 400),
    ("divide_checked", "divide_unchecked", 12, 400),
    ("divide_reported", "divide_unchecked", 20, 1100),
];

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/panic-cost")
}

fn nvdisasm() -> Option<PathBuf> {
    let ptxas = find_ptxas(&BuildEnv::process())?;
    let beside = ptxas.parent().map(|dir| dir.join("nvdisasm"));
    let on_path = std::env::var_os("PATH").into_iter().flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>()).map(|dir| dir.join("nvdisasm"));
    beside.into_iter().chain(on_path).find(|p| p.is_file())
}

fn tools_or_skip(test: &str) -> bool {
    if DeviceToolchain::find(&BuildEnv::process()).is_ok() && find_ptxas(&BuildEnv::process()).is_some() && nvdisasm().is_some() {
        return true;
    }
    assert!(std::env::var_os("REQUIRE_PTXAS").is_none(), "{test}: REQUIRE_PTXAS=1 but the device toolchain, ptxas or nvdisasm is missing");
    println!("skipping {test}: no device toolchain, ptxas or nvdisasm (run scripts/install-device-toolchain.sh)");
    false
}

/// Builds the fixture for sm_90 (PTX and cubin) with the cheap or the detailed panic handler,
/// into directories of its own (the inner target directory keeps `core` between runs).
fn build(detailed: bool) -> Artifacts {
    let mode = if detailed { "detailed" } else { "cheap" };
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/ferrocuda-device/panic_cost_test").join(mode);
    let out = std::env::temp_dir().join(format!("panic-cost-{}-{mode}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    KernelBuilder::new(fixture())
        .arch(Arch::SM_90)
        .cubin_arch(Arch::SM_90)
        .panic_messages(detailed)
        .target_dir(target)
        .out_dir(&out)
        .build()
        .unwrap_or_else(|e| panic!("building the fixture: {e}"))
}

fn resources<'a>(artifacts: &'a Artifacts, kernel: &str) -> &'a KernelResources {
    let all = &artifacts.cubins[0].resources;
    all.iter().find(|r| r.kernel == kernel).unwrap_or_else(|| panic!("no {kernel} in {all:?}"))
}

/// SASS instructions of each kernel's `.text.<kernel>` section (which holds the functions
/// ptxas compiled into it), NOPs left out.
fn sass_sizes(cubin: &Path) -> Vec<(String, usize)> {
    let output = Command::new(nvdisasm().unwrap()).arg("-c").arg(cubin).output().unwrap();
    assert!(output.status.success(), "nvdisasm: {}", String::from_utf8_lossy(&output.stderr));
    let mut sizes: Vec<(String, usize)> = Vec::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix(".section").map(str::trim_start).and_then(|r| r.strip_prefix(".text.")) {
            sizes.push((rest.split(',').next().unwrap_or_default().to_string(), 0));
        } else if let Some((_, count)) = sizes.last_mut() {
            // An instruction line: `/*0120*/  IMAD.MOV.U32 R1, RZ, RZ, c[0x0][0x28] ;`.
            if trimmed.starts_with("/*") && trimmed.contains("*/") && trimmed.ends_with(';') && !trimmed.contains(" NOP") {
                *count += 1;
            }
        }
    }
    sizes
}

fn sass_size(sizes: &[(String, usize)], kernel: &str) -> usize {
    sizes.iter().find(|(name, _)| name == kernel).unwrap_or_else(|| panic!("no .text.{kernel} in {sizes:?}")).1
}

/// The cheap handler (the default): no stack frame, a few registers, a few hundred
/// instructions, and nothing of core::fmt or vprintf left in the module.
#[test]
fn n20_a_panic_path_costs_no_stack_frame_and_a_few_registers() {
    if !tools_or_skip("n20_a_panic_path_costs_no_stack_frame_and_a_few_registers") {
        return;
    }
    let artifacts = build(false);
    let sizes = sass_sizes(&artifacts.cubins[0].path);
    let mut figures = String::new();
    for (checked, twin, extra_registers, extra_sass) in PAIRS {
        let (c, t) = (resources(&artifacts, checked), resources(&artifacts, twin));
        let (c_sass, t_sass) = (sass_size(&sizes, checked), sass_size(&sizes, twin));
        figures += &format!(
            "{checked}: {} registers, {} bytes stack, {c_sass} SASS; {twin}: {}, {}, {t_sass}\n",
            c.registers, c.stack_frame, t.registers, t.stack_frame
        );
        assert_eq!((c.stack_frame, c.spill_stores, c.spill_loads), (0, 0, 0), "{checked} has local memory:\n{figures}");
        assert!(c.registers <= t.registers + extra_registers, "{checked} uses too many registers:\n{figures}");
        assert!(c_sass <= t_sass + extra_sass, "{checked} has too many SASS instructions:\n{figures}");
    }
    println!("{figures}");
    // The checks are there (each checked kernel can trap), and nothing formats or prints: not
    // even `kernel_panic!`, whose message the host formats.
    let ptx = std::fs::read_to_string(&artifacts.ptx[0].1).unwrap();
    for (checked, ..) in PAIRS {
        assert!(ptx.contains(&format!("__ferrocuda_fingerprint_{checked}")), "no {checked} in the PTX");
    }
    assert!(ptx.contains("trap;"), "the checked kernels lost their panic paths");
    assert!(!ptx.contains("vprintf"), "the cheap handler prints");
    assert!(!ptx.contains("Display3fmt"), "core::fmt's Display is still referenced: a panic site's arguments are alive");
    assert!(!ptx.contains("Message6format"), "kernel_panic! formats on the GPU");
}

/// The detailed handler keeps its message and its printed line, for the old price, and the
/// build's resource table shows that price (issue 23).
#[test]
fn n20_the_detailed_handler_costs_what_the_resource_table_says() {
    if !tools_or_skip("n20_the_detailed_handler_costs_what_the_resource_table_says") {
        return;
    }
    let artifacts = build(true);
    let ptx = std::fs::read_to_string(&artifacts.ptx[0].1).unwrap();
    assert!(ptx.contains("vprintf"), "the detailed handler prints the report");
    for (checked, twin, ..) in PAIRS {
        let (c, t) = (resources(&artifacts, checked), resources(&artifacts, twin));
        assert!(c.stack_frame >= 512, "{checked}: the detailed handler's ~600-byte frame is not in the table: {c:?}");
        assert_eq!(t.stack_frame, 0, "{twin}: {t:?}");
    }
}
