//! The code issue 23's additions compile to, checked without a GPU on the fixture kernels of
//! tests/kernels/src/port_gaps.rs: the PTX (always) and the SASS of the sm_90 cubin (where
//! the build had `ptxas` and `nvdisasm` is installed). Each test guards one performance
//! property a CUDA port relies on.

#[path = "common/ptx.rs"]
mod ptx_text;
use ptx_text::opcodes;

use ferrocuda_builder::{Arch, pinned_ptx_isa};

fn ptx(arch: u32) -> &'static str {
    test_kernels::KERNELS.ptx_for(arch).unwrap_or_else(|| panic!("test_kernels is built for sm_{arch}"))
}

/// The body of `.entry name` up to its closing brace.
fn entry_body(arch: u32, name: &str) -> &'static str {
    ptx_text::entry_body(ptx(arch), name)
}

fn count(arch: u32, name: &str, op: &str) -> usize {
    opcodes(entry_body(arch, name)).iter().filter(|&&o| o == op).count()
}

/// The SASS of `kernel` in the sm_90 cubin, or `None` (printed) without a cubin or nvdisasm.
fn sass(kernel: &str) -> Option<String> {
    static LISTING: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let listing = LISTING.get_or_init(|| {
        let Some(&(_, cubin)) = test_kernels::KERNELS.cubins.iter().find(|(arch, _)| *arch == 90) else {
            eprintln!("SKIPPED the SASS checks: no sm_90 cubin (ptxas was not found at build time)");
            return None;
        };
        let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/test-scratch/port-gaps-sass");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("test_kernels.sm_90.cubin");
        std::fs::write(&path, cubin).unwrap();
        let output = ["nvdisasm", "/usr/local/cuda/bin/nvdisasm"]
            .iter()
            .find_map(|tool| std::process::Command::new(tool).arg("-c").arg(&path).output().ok().filter(|o| o.status.success()));
        match output {
            Some(output) => Some(String::from_utf8_lossy(&output.stdout).into_owned()),
            None => {
                eprintln!("SKIPPED the SASS checks: nvdisasm not found");
                None
            }
        }
    });
    let listing = listing.as_ref()?;
    let start = listing.find(&format!(".text.{kernel}:")).unwrap_or_else(|| panic!("no SASS for {kernel}"));
    let rest = &listing[start..];
    Some(rest[..rest[1..].find(".text.").map(|e| e + 1).unwrap_or(rest.len())].to_string())
}

/// SASS instructions of a function listing whose opcode (with its modifiers) is `op`.
fn sass_count(listing: &str, op: &str) -> usize {
    listing
        .lines()
        // `@!PT` instructions never run (ptxas's padding).
        .filter(|line| !line.contains("@!PT"))
        .filter_map(|line| line.split("*/").nth(1))
        .map(str::trim)
        .map(|rest| {
            let mut words = rest.split_whitespace();
            let first = words.next().unwrap_or("");
            if first.starts_with('@') { words.next().unwrap_or("") } else { first }
        })
        .filter(|&o| o == op)
        .count()
}

/// Regression (issue 23): rustc declared `.version 6.3` for sm_75 (7.0 for sm_80, 7.8 for
/// sm_90), so `tanh.approx` and the cache-eviction hints did not assemble; the builder now
/// declares the ISA it pins per architecture.
#[test]
fn n23_modules_declare_the_pinned_ptx_isa() {
    for (arch, expected) in [(80, pinned_ptx_isa(Arch::SM_80)), (90, pinned_ptx_isa(Arch::SM_90))] {
        let declared = format!(".version {}.{}\n", expected.0, expected.1);
        assert!(ptx(arch).contains(&declared), "sm_{arch}: expected {declared:?} in the header:\n{}", &ptx(arch)[..300.min(ptx(arch).len())]);
    }
    assert_eq!(pinned_ptx_isa(Arch::SM_80), (7, 8));
    assert_eq!(pinned_ptx_isa(Arch::SM_90), (8, 3));
}

#[test]
fn shared_vector_accesses_are_single_16_byte_instructions() {
    let name = "shared_x4_rotate";
    assert_eq!(count(80, name, "st.shared.v4.b32"), 1, "{}", entry_body(80, name));
    assert_eq!(count(80, name, "ld.shared.v4.b32"), 1);
    assert_eq!(count(80, name, "st.shared.v2.b64"), 1);
    assert_eq!(count(80, name, "ld.shared.v2.b64"), 1);
    for op in ["st.shared.f32", "ld.shared.f32", "st.shared.f64", "ld.shared.f64", "ld.u32", "st.u32", "ld.f32", "st.f32"] {
        assert_eq!(count(80, name, op), 0, "{op} in {name}: the vectors were split or went generic");
    }
    // Every shared_array! is 16-byte aligned (CUDA's __align__(16)), whatever its element.
    let arrays: Vec<&str> = ptx(80).lines().filter(|l| l.contains(".shared") && l.contains("__ferrocuda_shared_")).collect();
    assert!(!arrays.is_empty());
    for line in &arrays {
        assert!(line.contains(".align 16"), "a shared_array! that is not 16-byte aligned: {line}");
    }
    let Some(listing) = sass(name) else { return };
    // One f32x4, one f64x2, and two reads of the kernel tag: one in the panic handler (core's
    // bounds check of `x[i]`), one in the outputs' bounds report (`out[i]`, a `kernel_panic!`
    // that keeps the index and length, one copy per kernel: `global::out_of_bounds`).
    assert_eq!(sass_count(&listing, "LDS.128"), 4, "{listing}");
    assert!(sass_count(&listing, "STS.128") >= 2, "the two vector stores (plus the kernel tag):\n{listing}");
    assert_eq!(
        sass_count(&listing, "LDS") + sass_count(&listing, "STS") + sass_count(&listing, "LDS.64") + sass_count(&listing, "STS.64"),
        0,
        "narrow shared accesses:\n{listing}"
    );
}

/// docs/performance.md, "Patterns": four back-to-back scalar stores to consecutive, 16-byte
/// aligned shared words become one `STS.128` (ptxas merges them; the PTX keeps four).
#[test]
fn four_consecutive_scalar_shared_stores_merge_into_one_sts128() {
    let name = "shared_four_scalar_stores";
    assert_eq!(count(80, name, "st.shared.f32"), 4, "{}", entry_body(80, name));
    let Some(listing) = sass(name) else { return };
    assert_eq!(sass_count(&listing, "STS"), 0, "32-bit shared stores left unmerged:\n{listing}");
    // One for the four floats, one for the kernel tag (the kernel can panic: `x[i]`).
    assert_eq!(sass_count(&listing, "STS.128"), 2, "{listing}");
}

#[test]
fn cache_hints_are_the_hinted_global_instructions_with_no_state_space_test_left() {
    let name = "cache_hint_copy";
    let body = entry_body(80, name);
    for op in [
        "ld.global.ca.b32",
        "ld.global.cg.b32",
        "ld.global.cs.b32",
        "ld.global.lu.b32",
        "ld.global.L1::evict_first.b32",
        "ld.global.L1::evict_last.b32",
        "ld.global.L1::no_allocate.b32",
        "st.global.cg.b32",
        "st.global.cs.b32",
        "st.global.wt.b32",
        "st.global.L1::evict_first.b32",
        "st.global.L1::evict_last.b32",
        "st.global.L1::no_allocate.b32",
    ] {
        assert_eq!(count(80, name, op), 1, "{op} in {name}:\n{body}");
    }
    // The safety test (is the address global?) folds away for kernel parameters: no
    // `isspacep`, and no fallback load or store.
    assert!(!body.contains("isspacep"), "{body}");
    for fallback in ["ld.global.nc.f32", "ld.f32", "st.global.f32", "st.f32", "ld.global.f32"] {
        assert_eq!(count(80, name, fallback), 0, "{fallback} (the plain fallback) in {name}");
    }
    let wide = entry_body(80, "cache_hint_wide");
    for op in ["ld.global.cs.v4.b32", "st.global.cs.v4.b32", "ld.global.L2::cache_hint.b64", "st.global.L2::cache_hint.b64"] {
        assert_eq!(count(80, "cache_hint_wide", op), 1, "{op}:\n{wide}");
    }
    assert_eq!(count(80, "cache_hint_wide", "createpolicy.fractional.L2::evict_last.b64"), 1);
    assert_eq!(count(80, "cache_hint_wide", "createpolicy.fractional.L2::evict_first.b64"), 1);
    assert!(!wide.contains("isspacep"), "{wide}");
    let Some(listing) = sass(name) else { return };
    // Global (LDG/STG) with the hint, never generic LD/ST or a QSPC test.
    for op in ["LDG.E.EF", "LDG.E.LU", "LDG.E.EL", "LDG.E.NA", "STG.E.EF", "STG.E.EL", "STG.E.NA"] {
        assert!(sass_count(&listing, op) >= 1, "{op} missing:\n{listing}");
    }
    assert_eq!(sass_count(&listing, "LD.E") + sass_count(&listing, "ST.E") + sass_count(&listing, "QSPC.E.G"), 0, "{listing}");
    let Some(wide_sass) = sass("cache_hint_wide") else { return };
    assert_eq!(sass_count(&wide_sass, "LDG.E.128.EF") + sass_count(&wide_sass, "LDG.E.EF.128"), 1, "{wide_sass}");
}

#[test]
fn fast_math_methods_are_single_approximate_instructions() {
    let name = "fast_math_ops";
    let body = entry_body(80, name);
    // log10(x) and powf(x, y) share one lg2 of x (LLVM reuses the pure asm's result).
    for (op, n) in [("sqrt.approx.ftz.f32", 1), ("rsqrt.approx.ftz.f32", 1), ("tanh.approx.f32", 1), ("ex2.approx.ftz.f32", 3), ("lg2.approx.ftz.f32", 1)] {
        assert_eq!(count(80, name, op), n, "{op}:\n{body}");
    }
    // fast_div, fast_tan's quotient and the denormal check: `.ftz`, never a precise division.
    assert_eq!(count(80, name, "div.approx.ftz.f32"), 3, "{body}");
    for precise in ["div.rn.f32", "sqrt.rn.f32", "div.full.f32", "div.approx.f32"] {
        assert_eq!(count(80, name, precise), 0, "{precise} in {name}");
    }
}

#[test]
fn block_collectives_use_two_barriers_each_and_16_byte_reads_of_the_partials() {
    let name = "block_collectives_256";
    let body = entry_body(80, name);
    // sum, sum_x4, max, min, inclusive, exclusive, and twice_sum's two: 8 collectives, 2 barriers each.
    let barriers = count(80, name, "barrier.sync") + count(80, name, "bar.sync");
    assert_eq!(barriers, 16, "{body}");
    // any/all: one bar.red each, no scratch.
    assert_eq!(body.matches("barrier.red.or.pred").count(), 1, "{body}");
    assert_eq!(body.matches("barrier.red.and.pred").count(), 1, "{body}");
    // sum_x4 reads the 8 warps' partials as two 16-byte loads.
    assert_eq!(count(80, name, "ld.shared.v4.b32"), 2, "{body}");
    // No local memory: the collectives live in registers and their scratch.
    assert!(!body.contains(".local"), "{body}");
}

/// Soundness of the safe cache hints: a reference into a thread's local array must not get a
/// hinted `ld.global`/`st.global` (the wrong state space; `.cs` on local memory means "last
/// use"). The state-space test is folded to "not global" for the array (a plain local load)
/// and to "global" for the output (the hinted store).
#[test]
fn a_cache_hint_on_a_local_reference_is_a_plain_access() {
    let name = "cache_hint_local";
    let body = entry_body(80, name);
    assert_eq!(count(80, name, "ld.global.cs.b32"), 0, "a hinted global load of a local address:\n{body}");
    assert_eq!(count(80, name, "st.global.cs.b32"), 1, "the output keeps its hint:\n{body}");
    assert_eq!(count(80, name, "ld.local.b32"), 1, "the plain local load:\n{body}");
}
