//! The `ferrocuda-inspect` binary end to end, without a GPU: on a hand-written PTX module
//! (needs `ptxas`) and on the workspace's `gpu-kernels` crate (needs the device toolchain too).
//! A missing tool is a printed skip, or a failure under `REQUIRE_PTXAS=1` (CI).

use std::path::{Path, PathBuf};
use std::process::Command;

use ferrocuda_builder::{BuildEnv, DeviceToolchain, find_ptxas};

const BIN: &str = env!("CARGO_BIN_EXE_ferrocuda-inspect");

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/two_kernels.ptx")
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// Runs the binary; returns (exit status, stdout, stderr).
fn inspect(args: &[&str]) -> (i32, String, String) {
    let output = Command::new(BIN).args(args).output().expect("running ferrocuda-inspect");
    (output.status.code().unwrap_or(-1), String::from_utf8_lossy(&output.stdout).into_owned(), String::from_utf8_lossy(&output.stderr).into_owned())
}

fn have_ptxas(test: &str) -> bool {
    if find_ptxas(&BuildEnv::process()).is_some() {
        return true;
    }
    assert!(std::env::var_os("REQUIRE_PTXAS").is_none(), "{test}: REQUIRE_PTXAS=1 but no ptxas found");
    println!("skipping {test}: no ptxas (run scripts/install-device-toolchain.sh)");
    false
}

fn have_device_toolchain(test: &str) -> bool {
    if DeviceToolchain::find(&BuildEnv::process()).is_ok() {
        return true;
    }
    assert!(std::env::var_os("REQUIRE_PTXAS").is_none(), "{test}: REQUIRE_PTXAS=1 but no device toolchain found");
    println!("skipping {test}: no device toolchain (run scripts/install-device-toolchain.sh)");
    false
}

/// The table line of `kernel`, split into cells (two spaces or more between cells).
fn row(table: &str, kernel: &str) -> Vec<String> {
    let line = table.lines().find(|l| l.split_whitespace().next() == Some(kernel)).unwrap_or_else(|| panic!("no row for {kernel} in\n{table}"));
    line.split("  ").map(str::trim).filter(|c| !c.is_empty()).map(String::from).collect()
}

#[test]
fn list_reports_ptxas_figures_bounds_dynamic_shared_and_occupancy() {
    if !have_ptxas("list_reports_ptxas_figures_bounds_dynamic_shared_and_occupancy") {
        return;
    }
    let fixture = fixture();
    let (status, out, err) = inspect(&[fixture.to_str().unwrap(), "--arch", "sm_86", "--block", "128", "--dyn-smem", "100000"]);
    assert_eq!(status, 0, "{err}");
    assert!(out.starts_with(&format!("{}: 2 kernels, sm_86", fixture.display())), "{out}");
    // bounded: 512 bytes static + 100000 dynamic + 1 KiB reserved fit once in 100 KiB: 4 of 48 warps.
    let bounded = row(&out, "bounded");
    assert_eq!(bounded[3], "512", "{out}");
    assert_eq!(bounded[5], "yes (100000)", "{out}");
    assert_eq!(bounded[6], "max=128,minb=4", "{out}");
    assert_eq!(bounded[7], "8% (1 blk, smem)", "{out}");
    let registers: u32 = bounded[1].parse().unwrap();
    assert!((1..=255).contains(&registers), "{out}");
    // plain: no dynamic shared memory, so --dyn-smem does not apply; 12 blocks of 4 warps.
    let plain = row(&out, "plain");
    assert_eq!((plain[3].as_str(), plain[5].as_str(), plain[6].as_str(), plain[7].as_str()), ("0", "-", "-", "100% (12 blk, warps)"), "{out}");
    // A block over .maxntid cannot launch.
    let (_, out, _) = inspect(&[fixture.to_str().unwrap(), "--block", "256"]);
    assert_eq!(row(&out, "bounded")[6..], ["max=128,minb=4", "no launch: block over the kernel's launch bounds"], "{out}");
}

#[test]
fn ptx_prints_the_kernel_with_its_callees_only() {
    let (status, out, err) = inspect(&["ptx", "bounded", fixture().to_str().unwrap()]);
    assert_eq!(status, 0, "{err}");
    assert!(out.contains(".visible .entry bounded(") && out.contains("twice(") && out.contains(".shared .align 4 .b8 tile[512];"), "{out}");
    assert!(!out.contains(".entry plain"), "{out}");
    let (status, _, err) = inspect(&["ptx", "missing", fixture().to_str().unwrap()]);
    assert_eq!(status, 1);
    assert!(err.contains("no kernel `missing`; the kernels are: bounded, plain"), "{err}");
}

#[test]
fn extracted_ptx_is_accepted_by_ptxas() {
    if !have_ptxas("extracted_ptx_is_accepted_by_ptxas") {
        return;
    }
    let (_, out, _) = inspect(&["ptx", "bounded", fixture().to_str().unwrap()]);
    let dir = std::env::temp_dir().join(format!("inspect-extract-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ptx = dir.join("bounded.ptx");
    std::fs::write(&ptx, out).unwrap();
    let (status, table, err) = inspect(&[ptx.to_str().unwrap()]);
    assert_eq!(status, 0, "{err}");
    assert!(table.contains(": 1 kernels") && table.contains("bounded"), "{table}");
}

#[test]
fn diff_shows_what_changed_between_two_builds() {
    if !have_ptxas("diff_shows_what_changed_between_two_builds") {
        return;
    }
    let original = std::fs::read_to_string(fixture()).unwrap();
    let dir = std::env::temp_dir().join(format!("inspect-diff-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let changed = dir.join("changed.ptx");
    std::fs::write(&changed, original.replace(".maxntid 128, 1, 1", ".maxntid 256, 1, 1").replace("tile[512]", "tile[2048]")).unwrap();
    let (status, out, err) = inspect(&["diff", fixture().to_str().unwrap(), changed.to_str().unwrap()]);
    assert_eq!(status, 0, "{err}");
    assert!(out.contains("512 -> 2048") && out.contains("max=128,minb=4 -> max=256,minb=4"), "{out}");
    assert!(out.contains("1 of 2 kernels differ") && !out.lines().any(|l| l.starts_with("plain")), "{out}");
    let (_, same, _) = inspect(&["diff", fixture().to_str().unwrap(), fixture().to_str().unwrap()]);
    assert!(same.contains("no differences in 2 kernels"), "{same}");
}

/// The workspace's example kernels, built through ferrocuda-builder's library API (the inner
/// target directory is the one gpu-kernels' own build uses, so this is quick after a build).
#[test]
fn lists_and_disassembles_the_example_kernel_crate() {
    if !have_ptxas("lists_and_disassembles_the_example_kernel_crate") || !have_device_toolchain("lists_and_disassembles_the_example_kernel_crate") {
        return;
    }
    // The example kernels are the root package's library (`gpu_kernels`, in gpu-kernels/src).
    let crate_dir = workspace();
    let (status, out, err) = inspect(&[crate_dir.to_str().unwrap(), "--arch", "sm_90"]);
    assert_eq!(status, 0, "{err}");
    assert!(out.starts_with("gpu_kernels: ") && out.contains("sm_90 from gpu_kernels.sm_90.ptx"), "{out}");
    let saxpy = row(&out, "saxpy");
    let registers: u32 = saxpy[1].parse().unwrap();
    assert!((8..=32).contains(&registers), "saxpy should need few registers:\n{out}");
    assert_eq!(saxpy[2], "0/0", "{out}");
    assert!(saxpy[7].starts_with("100% (8 blk"), "{out}");
    // Dynamic shared memory is shown for the kernels that declare it (test fixtures).
    let (status, fixtures, err) = inspect(&[workspace().join("tests/kernels").to_str().unwrap(), "--arch", "sm_90", "--allow-recursion", "q4_fnptr_recurse"]);
    assert_eq!(status, 0, "{err}");
    assert_eq!(row(&fixtures, "dynamic_shared_sum")[5], "yes (0)", "{fixtures}");
    assert_eq!(row(&fixtures, "histogram_256")[5], "-", "{fixtures}");

    // The same build read back from its artifact list, without rebuilding.
    let out_dir = workspace().join("target/ferrocuda-inspect/gpu_kernels");
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).map(|t| t.join("ferrocuda-inspect/gpu_kernels")).unwrap_or(out_dir);
    let (status, again, err) = inspect(&[target.to_str().unwrap(), "--arch", "sm_90"]);
    assert_eq!(status, 0, "{err}");
    assert_eq!(row(&again, "saxpy"), saxpy);

    let (status, ptx, err) = inspect(&["ptx", "saxpy", target.to_str().unwrap()]);
    assert_eq!(status, 0, "{err}");
    assert!(ptx.contains(".visible .entry saxpy(") && ptx.contains("fma.rn.f32"), "{ptx}");

    let (status, sass, err) = inspect(&["sass", "saxpy", target.to_str().unwrap()]);
    if status != 0 && err.contains("neither nvdisasm nor cuobjdump") {
        println!("skipping the SASS check: {err}");
        return;
    }
    assert_eq!(status, 0, "{err}");
    assert!(sass.contains("FFMA") && sass.contains("gpu-kernels/src/lib.rs"), "SASS with Rust line info expected:\n{sass}");
}
