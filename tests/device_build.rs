//! The device build: toolchain discovery and its errors, the PTX the builder produced for the
//! example kernels (`gpu_kernels`) and the test kernels (`test_kernels`), `ptxas` acceptance,
//! and a broken kernel crate reported with file and line.

#[path = "common/ptx.rs"]
mod ptx_text;
use ptx_text::entry_body;

use std::path::{Path, PathBuf};

use ferrocuda_builder::{Arch, BuildEnv, BuildError, DeviceToolchain, KernelBuilder, ToolchainSource, find_ptxas};

/// The two sm_80 modules, one after the other (for looking kernels up by name).
fn ptx() -> &'static str {
    static BOTH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BOTH.get_or_init(|| modules().map(|(_, ptx)| ptx).collect::<Vec<_>>().join("\n"))
}

/// Each sm_80 module by crate: the example kernels and the test fixtures.
fn modules() -> impl Iterator<Item = (&'static str, &'static str)> {
    [("gpu_kernels", gpu_kernels::KERNELS.ptx_for(80)), ("test_kernels", test_kernels::KERNELS.ptx_for(80))]
        .into_iter()
        .map(|(name, ptx)| (name, ptx.unwrap_or_else(|| panic!("{name} is built for sm_80"))))
}

/// The parameter lines of `.entry name(...)`.
fn entry_params(ptx: &str, name: &str) -> Vec<String> {
    let start = ptx.find(&format!(".entry {name}(")).unwrap_or_else(|| panic!("no .entry {name} in the PTX"));
    let end = start + ptx[start..].find(')').unwrap();
    ptx[start..end].lines().skip(1).map(|l| l.trim().trim_end_matches(',').to_string()).collect()
}

#[test]
fn every_kernel_is_an_entry_with_slices_as_pointer_and_length() {
    let ptx = ptx();
    assert_eq!(
        entry_params(ptx, "saxpy"),
        [
            "                .param .f32 saxpy_param_0",
            ".param .u64 .ptr .align 4 saxpy_param_1",
            ".param .u64 saxpy_param_2",
            ".param .u64 .ptr .align 4 saxpy_param_3",
            ".param .u64 saxpy_param_4"
        ]
        .map(|s| s.trim().to_string())
    );
    assert_eq!(entry_params(ptx, "sum_f32").len(), 4);
    assert_eq!(entry_params(ptx, "square_checked").len(), 4);
}

#[test]
fn read_only_slices_use_the_non_coherent_cache_and_outputs_do_not() {
    let body = entry_body(ptx(), "saxpy");
    assert_eq!(body.matches("ld.global.nc.").count(), 1, "x[i] should be one ld.global.nc:\n{body}");
    assert!(body.contains("st.global."), "y[i] should be a global store:\n{body}");
}

#[test]
fn multiply_add_is_fused_by_default() {
    let body = entry_body(ptx(), "saxpy");
    assert!(body.contains("fma.rn.f32"), "a * x + y should be one fma:\n{body}");
    assert!(!body.contains("mul.rn.f32"), "unfused multiply in:\n{body}");
}

#[test]
fn ptx_carries_line_info_but_no_dwarf_sections() {
    let ptx = ptx();
    assert!(ptx.contains("\t.loc\t") && ptx.contains("gpu-kernels/src/lib.rs"), "no line info");
    assert!(!ptx.contains(".section\t.debug"), "DWARF sections would make ptxas fail");
    assert!(ptx.lines().any(|l| l == ".target sm_80"), "target line");
}

#[test]
fn ptx_passes_ptxas_for_current_architectures() {
    let Some(ptxas) = find_ptxas(&BuildEnv::process()) else {
        assert!(std::env::var("REQUIRE_PTXAS").as_deref() != Ok("1"), "REQUIRE_PTXAS=1 but no ptxas was found");
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "SKIPPED ptx_passes_ptxas_for_current_architectures: no ptxas on PATH, CUDA_PATH or FERROCUDA_PTXAS");
        return;
    };
    let dir = scratch("ptxas");
    for arch in [Arch::SM_80, Arch::SM_90] {
        let mut names = Vec::new();
        for (name, ptx) in modules() {
            let ptx_file = dir.join(format!("{name}.ptx"));
            std::fs::write(&ptx_file, ptx).unwrap();
            let cubin = dir.join(format!("{name}.{arch}.cubin"));
            let resources = ferrocuda_builder::compile_cubin(&ptxas, &ptx_file, arch, true, &cubin).unwrap();
            assert!(resources.iter().all(|r| r.registers > 0 && r.spill_stores == 0), "{resources:?}");
            names.extend(resources.into_iter().map(|r| r.kernel));
        }
        for kernel in ["saxpy", "sum_f32", "square_checked"] {
            assert!(names.iter().any(|n| n == kernel), "{kernel} missing from ptxas's report for {arch}: {names:?}");
        }
    }
}

#[test]
fn an_explicit_toolchain_that_does_not_exist_is_an_error_that_says_what_to_install() {
    let env = BuildEnv::fixed([("FERROCUDA_DEVICE_RUSTC", "/nonexistent/rustc")]);
    let message = DeviceToolchain::find(&env).unwrap_err().to_string();
    assert!(message.contains("FERROCUDA_DEVICE_RUSTC=/nonexistent/rustc: not installed"), "{message}");
    assert!(message.contains("apt-get install rustc-web cargo-web rust-web-src"), "{message}");
    assert!(message.contains("rustup toolchain install nightly --component rust-src"), "{message}");
}

#[test]
fn a_toolchain_without_library_sources_is_rejected() {
    let dir = scratch("fake-toolchain");
    let rustc = dir.join("rustc");
    std::fs::write(&rustc, format!("#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'rustc 9.9.9 (fake)'; else echo '{}'; fi\n", dir.display())).unwrap();
    std::fs::write(dir.join("cargo"), "#!/bin/sh\n").unwrap();
    make_executable(&rustc);
    // Running a script just written can fail with ETXTBSY while another test thread forks
    // (the child briefly holds the write descriptor): retry that, and only that.
    let mut error = String::new();
    for _ in 0..20 {
        error = DeviceToolchain::probe(&rustc, &dir.join("cargo"), ToolchainSource::EnvOverride).unwrap_err();
        if !error.contains("Text file busy") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(error.contains("rustc 9.9.9 (fake) has no library sources"), "{error}");
}

#[test]
fn the_installed_toolchain_is_found() {
    let found = DeviceToolchain::find(&BuildEnv::process()).expect("the tests run after a device build, so a toolchain exists");
    assert!(found.library_sources().join("core").is_dir());
    eprintln!("device toolchain: {} ({:?})", found.version, found.source);
}

#[test]
fn a_broken_kernel_crate_fails_with_the_users_file_and_line() {
    let dir = scratch("broken-kernels");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"broken-kernels\"\nversion = \"0.0.0\"\nedition = \"2024\"\n[lib]\ncrate-type = [\"rlib\"]\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("src/lib.rs"),
        "#![no_std]\n#![feature(abi_ptx)]\n#[panic_handler]\nfn p(_: &core::panic::PanicInfo) -> ! { loop {} }\n\n#[unsafe(no_mangle)]\npub unsafe extern \"ptx-kernel\" fn k(out: *mut u32) {\n    let value: u32 = \"not a number\";\n    unsafe { *out = value };\n}\n",
    )
    .unwrap();
    // A target directory shared between runs keeps `core` built once.
    let target = workspace().join("target/ferrocuda-test-device");
    let error = KernelBuilder::new(&dir).out_dir(&dir).target_dir(&target).build().unwrap_err();
    let message = ferrocuda_builder::strip_ansi(&error.to_string());
    assert!(matches!(error, BuildError::Compile { .. }), "{message}");
    assert!(message.contains("error[E0308]: mismatched types"), "{message}");
    assert!(message.contains("src/lib.rs:8:22"), "no file:line:column in:\n{message}");
}

/// Issue 13 ("first-try traps"): every `#[kernel]` prologue stored the kernel-name tag for
/// panic reports (`st.shared.v2.u64` to `__ferrocuda_kernel_tag`, one `STS.128` per thread);
/// the builder now removes the store from kernels that cannot reach the panic report
/// (builder/src/kernel_tag.rs). Kernels that can panic keep it, so reports still name them.
#[test]
fn only_kernels_that_can_panic_store_the_kernel_tag() {
    const STORE: &str = "mov.u32 t, __ferrocuda_kernel_tag; st.shared.v2.u64";
    let (examples, fixtures) = (gpu_kernels::KERNELS.ptx_for(80).unwrap(), test_kernels::KERNELS.ptx_for(80).unwrap());
    // No panic path (no call at all): no store.
    for (ptx, kernel) in
        [(examples, "saxpy"), (examples, "saxpy_x4"), (examples, "matmul_128x128"), (fixtures, "empty"), (fixtures, "affine"), (fixtures, "mark_blocks")]
    {
        let body = entry_body(ptx, kernel);
        assert!(!body.contains("call") && !body.contains("trap;"), "{kernel} has a panic path now:\n{body}");
        assert!(!body.contains("__ferrocuda_kernel_tag"), "{kernel} cannot panic but stores the kernel tag:\n{body}");
    }
    // The panic fixtures (tests/gpu_fault.rs, gpu_contexts.rs, cpu_executor.rs) and a bounds
    // check in an example keep it.
    for (ptx, kernel) in [(fixtures, "square_checked"), (fixtures, "panic_formatted"), (examples, "sum_f32")] {
        let body = entry_body(ptx, kernel);
        assert_eq!(body.matches(STORE).count(), 1, "{kernel} can panic, so its report needs the tag:\n{body}");
    }
    // Over whole modules: an entry that calls nothing (these modules' only callees are panic
    // paths and vprintf) has no store unless it reads the tag itself (a `kernel_panic!`,
    // whose recording is inlined at its site); one that calls something keeps its store.
    const READ: &str = "mov.u32 t, __ferrocuda_kernel_tag; ld.shared.v2.u64";
    for (name, ptx) in modules() {
        let (mut kept, mut removed) = (0, 0);
        for part in ptx.split(".visible .entry ").skip(1) {
            let kernel = &part[..part.find('(').unwrap()];
            let body = entry_body(ptx, kernel);
            let stores = body.contains(STORE);
            let calls = body.lines().any(|l| l.trim_start().starts_with("call"));
            if stores {
                kept += 1;
                assert!(calls || body.contains(READ), "{name}::{kernel} keeps the tag store without any call or read:\n{body}");
            } else {
                removed += 1;
                assert!(!body.contains("__ferrocuda_kernel_tag"), "{name}::{kernel}: the tag in another shape:\n{body}");
            }
        }
        eprintln!("{name}: {kept} entries keep the kernel tag store, {removed} have none");
        assert!(kept > 0 && removed > 0, "{name}: {kept} kept, {removed} without");
        // The report still reads the tag, so the 16-byte declaration stays in these modules,
        // 16-byte aligned for its one vector store (with `.align 8` a kernel faulted with
        // CUDA_ERROR_MISALIGNED_ADDRESS on an H100: tests/cpu_gpu_rules.rs).
        assert!(ptx.contains(".shared .align 16 .u64 __ferrocuda_kernel_tag[2];"), "{name}");
    }

    // SASS, where the build made cubins and nvdisasm is installed: saxpy's prologue has no
    // shared store at all, square_checked keeps its STS.128.
    let Some(&(arch, cubin)) = test_kernels::KERNELS.cubins.first() else {
        eprintln!("SKIPPED the SASS check: no cubin (ptxas was not found at build time)");
        return;
    };
    let path = scratch("kernel-tag-sass").join(format!("test_kernels.sm_{arch}.cubin"));
    std::fs::write(&path, cubin).unwrap();
    let sass = ["nvdisasm", "/usr/local/cuda/bin/nvdisasm"]
        .iter()
        .find_map(|tool| std::process::Command::new(tool).arg("-c").arg(&path).output().ok().filter(|o| o.status.success()));
    let Some(output) = sass else {
        eprintln!("SKIPPED the SASS check: nvdisasm not found");
        return;
    };
    let sass = String::from_utf8_lossy(&output.stdout);
    let function = |kernel: &str| {
        let start = sass.find(&format!(".text.{kernel}:")).unwrap_or_else(|| panic!("no SASS for {kernel}"));
        let rest = &sass[start..];
        rest[..rest[1..].find(".text.").map(|e| e + 1).unwrap_or(rest.len())].to_string()
    };
    for kernel in ["affine", "empty", "mark_blocks"] {
        let body = function(kernel);
        assert!(!body.contains("STS"), "sm_{arch} {kernel}: a shared store in a kernel that cannot panic:\n{body}");
    }
    let checked = function("square_checked");
    assert!(checked.contains("STS.128"), "sm_{arch} square_checked: the tag store is gone:\n{checked}");
}

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A fresh directory under `target/` for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = workspace().join("target/test-scratch").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn shared_memory_uses_the_shared_state_space_and_two_arrays_do_not_alias() {
    let body = entry_body(ptx(), "shared_two_arrays");
    assert!(body.contains("st.shared.f32") && body.contains("ld.shared.f32"), "shared accesses must be ld/st.shared:\n{body}");
    // The kernel's only generic or global accesses are its slice input and output.
    let declared: Vec<&str> =
        body.lines().filter_map(|l| l.trim().strip_prefix("mov.u32").map(str::trim)).filter(|l| l.contains("__ferrocuda_shared_")).collect();
    assert_eq!(declared.len(), 2, "two arrays, two addresses: {declared:?}");
    let names: std::collections::BTreeSet<&str> = declared.iter().map(|l| l.rsplit(' ').next().unwrap().trim_end_matches(';')).collect();
    assert_eq!(names.len(), 2, "the two shared_array! sites must be distinct arrays: {declared:?}");
    for name in names {
        // 16-byte aligned whatever the element (CUDA's `__align__(16)`, issue 23), so its
        // vector accesses need no check.
        assert!(ptx().lines().any(|l| l.starts_with(".shared .align 16 .b8 ") && l.contains(&format!("{name}[1024]"))), "{name} is a 1 KiB .shared array");
    }
    let histogram = entry_body(ptx(), "histogram_256");
    assert!(histogram.contains("atom.shared.add.u32"), "shared-memory atomics:\n{histogram}");
    let dynamic = entry_body(ptx(), "dynamic_shared_sum");
    assert!(dynamic.contains("%dynamic_smem_size") && dynamic.contains("__ferrocuda_dynamic_shared"), "dynamic shared memory");
}

#[test]
fn atomics_warp_operations_and_barriers_compile_to_their_instructions() {
    let atomics = entry_body(ptx(), "atomics");
    for instruction in [
        "atom.relaxed.gpu.global.add.u32",
        "atom.relaxed.sys.global.add.u32",
        "atom.relaxed.gpu.global.max.u32",
        "atom.relaxed.gpu.global.min.u32",
        "atom.relaxed.gpu.global.cas.b32",
        "atom.relaxed.gpu.global.exch.b32",
        "atom.relaxed.gpu.global.add.f32",
        "atom.relaxed.gpu.global.add.f64",
    ] {
        assert!(atomics.contains(instruction), "missing {instruction}");
    }
    // Float max/min (issue 30, D5): the integer atomics on the bits, one per sign.
    let extrema = entry_body(ptx(), "atomic_float_extrema");
    for instruction in [
        "atom.relaxed.gpu.global.max.s32",
        "atom.relaxed.gpu.global.min.u32",
        "atom.relaxed.gpu.global.min.s32",
        "atom.relaxed.gpu.global.max.u32",
        "atom.relaxed.gpu.global.max.s64",
        "atom.relaxed.gpu.global.min.u64",
    ] {
        assert!(extrema.contains(instruction), "atomic_float_extrema: missing {instruction}");
    }
    let warp = entry_body(ptx(), "warp_ops");
    for instruction in [
        "shfl.sync.idx.b32",
        "shfl.sync.up.b32",
        "shfl.sync.down.b32",
        "shfl.sync.bfly.b32",
        "vote.sync.ballot.b32",
        "vote.sync.all.pred",
        "vote.sync.any.pred",
        "match.any.sync.b32",
        "bar.warp.sync",
    ] {
        assert!(warp.contains(instruction), "missing {instruction}");
    }
    let masks = entry_body(ptx(), "warp_masks_and_block_atomics");
    for instruction in ["activemask.b32", "match.all.sync.b32", "atom.relaxed.cta.global.add.u32", "fence.sc.cta", "fence.sc.gpu"] {
        assert!(masks.contains(instruction), "missing {instruction}");
    }
    let barriers = entry_body(ptx(), "barrier_votes");
    for instruction in ["barrier.red.popc.u32", "barrier.red.and.pred", "barrier.red.or.pred"] {
        assert!(barriers.contains(instruction), "missing {instruction}");
    }
}

/// `bar.sync`/`bar.red` are the `.aligned` barriers: every thread must execute the same
/// instruction. LLVM copies a barrier into both arms of `if tid == 0 { .. }` (rustc marks
/// nothing convergent), and with the aligned form warp 0 then arrives twice: the Hopper TMA
/// probes hung on an H100 and an H200. The device library emits only the non-aligned forms.
#[test]
fn block_barriers_are_never_the_aligned_form_that_llvm_may_duplicate() {
    for (module, ptx) in modules() {
        for line in ptx.lines().map(str::trim) {
            let aligned =
                line.starts_with("bar.sync") || line.starts_with("bar.red") || line.starts_with("bar.arrive") || line.contains("barrier.sync.aligned");
            assert!(!aligned, "{module}: aligned block barrier `{line}`");
        }
    }
    assert!(ptx().contains("barrier.sync 0;"), "the block barrier's PTX changed");
}

#[test]
fn device_printing_and_panics_do_not_inflate_registers() {
    // A reachable indirect call (core::fmt) would make ptxas give kernels 255 registers; the
    // device println! and panic handler use none. The panic path costs ~50 registers.
    let resources: Vec<_> = gpu_kernels::KERNELS.resources.iter().chain(test_kernels::KERNELS.resources).collect();
    if resources.is_empty() {
        assert!(std::env::var("REQUIRE_PTXAS").as_deref() != Ok("1"), "REQUIRE_PTXAS=1 but the kernels were built without ptxas");
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "SKIPPED device_printing_and_panics_do_not_inflate_registers: built without ptxas");
        return;
    }
    for &&ferrocuda::KernelResources { arch, kernel, registers, spill_stores, .. } in &resources {
        // Register blocking keeps 8 x 8 accumulators per thread on purpose (~120 registers);
        // tests/example_kernels_ptx.rs holds the SGEMMs to 128 and checks they have no panic path.
        // `p11_register_heavy` keeps 96 accumulators live on purpose: a kernel whose registers
        // limit its block size (tests/gpu_rules.rs).
        if kernel.starts_with("matmul_128x128") || kernel.starts_with("sgemm_pipelined") || kernel == "p11_register_heavy" {
            continue;
        }
        assert!(registers <= 96 && spill_stores == 0, "sm_{arch} {kernel}: {registers} registers, {spill_stores} bytes spilled");
    }
    let print = entry_body(ptx(), "print_lines");
    assert!(print.contains("vprintf"), "println! is one vprintf call");
}

/// Regression: `dynamic_shared_sum` (launched with 1024 threads per block by cpu_device_lib)
/// reached 75 registers after the kernel model's `AtomicSlice` bounds check formatted its
/// panic message with `core::fmt` and the panic handler called a second non-inlined function;
/// over 64 registers a 1024-thread block cannot launch (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES).
#[test]
fn a_kernel_launched_with_1024_threads_fits_in_64_registers() {
    let resources: Vec<_> = test_kernels::KERNELS.resources.iter().filter(|r| r.kernel == "dynamic_shared_sum").collect();
    if resources.is_empty() {
        assert!(std::env::var("REQUIRE_PTXAS").as_deref() != Ok("1"), "REQUIRE_PTXAS=1 but the kernels were built without ptxas");
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "SKIPPED a_kernel_launched_with_1024_threads_fits_in_64_registers: built without ptxas");
        return;
    }
    for r in resources {
        assert!(r.registers <= 64, "sm_{} dynamic_shared_sum: {} registers; 1024 threads per block need <= 64", r.arch, r.registers);
    }
}

#[test]
fn code_for_newer_gpus_is_built_only_for_them() {
    let sm80 = test_kernels::KERNELS.ptx_for(80).unwrap();
    let sm90 = test_kernels::KERNELS.ptx_for(90).unwrap();
    assert!(sm90.contains(".entry cluster_ring_exchange("), "the sm_90 build has the cluster kernel");
    assert!(!sm80.contains("cluster_ring_exchange"), "the sm_80 build must not");
    // `#[kernel(cluster_dims(2))]` reaches the PTX as the entry's `.reqnctapercluster`, and its
    // marker is gone from both builds.
    let entry = &sm90[sm90.find(".entry compiled_cluster_shape(").expect("the sm_90 build has the compiled-cluster kernel")..];
    let body = &entry[..entry.find('{').unwrap()];
    assert!(body.contains(".reqnctapercluster 2, 1, 1"), "no cluster directive:\n{body}");
    assert!(!sm90.contains("__ferrocuda_cluster_dims__") && !sm80.contains("__ferrocuda_cluster_dims__"), "a marker was left in the PTX");
    assert!(!sm80.contains(".reqnctapercluster"), "sm_80 has no clusters");
    assert!(sm80.contains(".entry mma_m16n8k16_f16(") && sm80.contains("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"), "tensor-core mma on sm_80");
}

/// Issue 11: the module the main job ships held every test fixture (845 KiB of PTX, 9.2 s of
/// JIT on an H100). The example module now has the example kernels only.
#[test]
fn the_example_module_holds_no_test_fixtures() {
    let examples = gpu_kernels::KERNELS.ptx_for(80).unwrap();
    for kernel in ["saxpy", "sum_f32", "matmul_128x128"] {
        assert!(examples.contains(&format!(".entry {kernel}(")), "{kernel} missing from the example module");
    }
    for fixture in ["square_checked", "mark_blocks", "shared_two_arrays", "atomics", "matmul_tiled"] {
        assert!(!examples.contains(&format!(".entry {fixture}(")), "test fixture {fixture} is in the example module");
    }
    eprintln!("example module: {} KiB of sm_80 PTX; test module: {} KiB", examples.len() / 1024, test_kernels::KERNELS.ptx_for(80).unwrap().len() / 1024);
}

/// The instructions of a PTX body: no directives, labels, comments or braces.
fn instructions(body: &str) -> Vec<&str> {
    body.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with(['.', '/', '{', '}', '(', ')']) && !l.ends_with(':') && !l.starts_with("$L"))
        .collect()
}

/// The instructions of the first loop of a body: from its label to the branch back to it.
fn first_loop(body: &str) -> Vec<&str> {
    let lines: Vec<&str> = body.lines().map(str::trim).collect();
    for (start, line) in lines.iter().enumerate() {
        if let Some(label) = line.strip_suffix(':')
            && let Some(end) = lines[start..].iter().position(|l| l.contains("bra") && l.ends_with(&format!("{label};")))
        {
            return lines[start..start + end + 1].iter().flat_map(|l| instructions(l)).collect();
        }
    }
    panic!("no loop in:\n{body}")
}

/// Issue 20, part 2: the safe way is the fast way. A safe 1-D kernel (`unique_index()`, a
/// `DisjointSlice`, `same_len` so one check covers both slices) compiles to no more
/// instructions than its unchecked twin written as CUDA C++ would be (but for the one widening
/// of the index to the slice's `usize` length), and has no panic path;
/// the hot loop of a safe grid-stride kernel is no longer than its twin's.
#[test]
fn safe_1d_kernels_are_no_longer_than_their_unchecked_twins() {
    let ptx = ptx();
    let (safe, unchecked) = (entry_body(ptx, "saxpy_safe"), entry_body(ptx, "saxpy_unchecked"));
    let (s, u) = (instructions(safe), instructions(unchecked));
    // The twin compares its u32 index with a u32 `n`; the safe kernel widens the index once
    // (`cvt.u64.u32`) to compare it with the slice's `usize` length: one instruction more. Until
    // the twin's body became its own `unsafe fn` called from the entry (P1, issue 29), its PTX
    // also carried a redundant `bra.uni` (block layout, which ptxas redoes) that hid this; the
    // SASS of both kernels is unchanged (sm_80: safe 20 instructions, twin 16;
    // bench/results/p1-generated-code-ptx-before-after.txt), and so is the safe kernel's PTX.
    assert!(s.len() <= u.len() + 1, "saxpy_safe has {} instructions, its unchecked twin {}:\n{safe}\n\n{unchecked}", s.len(), u.len());
    assert!(s.len() <= 24, "saxpy_safe grew to {} instructions:\n{safe}", s.len());
    // The index is one 32-bit multiply-add, as CUDA's `blockIdx.x * blockDim.x + threadIdx.x`.
    assert_eq!(s.iter().filter(|l| l.starts_with("mad.lo.s32") || l.starts_with("mad.lo.u32")).count(), 1, "{safe}");
    for body in [safe, entry_body(ptx, "scale_loop_safe")] {
        assert!(!body.contains("call") && !body.contains("trap"), "a panic path in a safe kernel:\n{body}");
    }
    let (safe, unchecked) = (entry_body(ptx, "scale_loop_safe"), entry_body(ptx, "scale_loop_unchecked"));
    let (s, u) = (first_loop(safe), first_loop(unchecked));
    assert!(s.len() <= u.len(), "the safe grid-stride loop has {} instructions, its unchecked twin's {}:\n{s:#?}\n{u:#?}", s.len(), u.len());
    // Outside the loop, the safe kernel may spend one instruction clamping the length.
    assert!(instructions(safe).len() <= instructions(unchecked).len() + 1, "{safe}\n\n{unchecked}");
}

/// Issue 20, part 2, for the 2-D outputs: the safe-style kernels whose outputs are
/// `PerWarpRow`s (layernorm, softmax: one warp per row) compile to no more instructions than
/// their `unsafe` twins (`gpu_kernels::unchecked`, `UncheckedSlice`/`get_unchecked_mut`
/// outputs and `get_unchecked` inputs), and none has a panic path or a local-memory frame. The
/// transpose's write phase (after its barrier) through a `PerBlockTile` is no longer than the
/// twin's `write_unchecked` stores; before the barrier it checks its tile against the output
/// once, where the twin checked the thread's position (a few instructions either way).
#[test]
fn safe_2d_kernels_are_no_longer_than_their_unchecked_twins() {
    let ptx = ptx();
    for kernel in ["layernorm_768", "softmax_rows_1024"] {
        let twin = format!("{kernel}_unchecked");
        let (safe, unchecked) = (entry_body(ptx, kernel), entry_body(ptx, &twin));
        let (s, u) = (instructions(safe).len(), instructions(unchecked).len());
        assert!(s <= u, "{kernel} has {s} instructions, its unsafe twin {u}:\n{safe}\n\n{unchecked}");
    }
    for kernel in ["layernorm_768", "softmax_rows_1024", "softmax_online", "transpose_32", "stencil_5pt"] {
        let body = entry_body(ptx, kernel);
        assert!(!body.contains("trap;") && !body.contains("call"), "a panic path in the safe kernel {kernel}:\n{body}");
        assert!(!body.contains("ld.local") && !body.contains("st.local"), "{kernel} uses local memory:\n{body}");
    }
    let (safe, unchecked) = (entry_body(ptx, "transpose_32"), entry_body(ptx, "transpose_32_unchecked"));
    let after_barrier = |body: &'static str| instructions(&body[body.find("barrier.sync").expect("the transpose's barrier")..]).len();
    let (s, u) = (after_barrier(safe), after_barrier(unchecked));
    assert!(s <= u, "the transpose's write phase has {s} instructions, its unsafe twin's {u}:\n{safe}\n\n{unchecked}");
    let (s, u) = (instructions(safe).len(), instructions(unchecked).len());
    assert!(s <= u + 4, "transpose_32 has {s} instructions, its unsafe twin {u}:\n{safe}\n\n{unchecked}");
}

/// Issue 20 for the GEMM epilogues: `matmul_128x128` and `sgemm_pipelined` write C through a
/// `PerThreadTile` (checked once per tile in the prologue); from their last barrier on (the
/// K loop's tail and the epilogue) they compile to no more instructions than their `unsafe`
/// twins (`UncheckedSlice` C), the 64 elements of C in sixteen 16-byte stores and no other
/// global store; the tile check costs at most 8 instructions in the whole kernel; no panic
/// path, no local memory.
#[test]
fn safe_gemm_epilogues_are_no_longer_than_their_unchecked_twins() {
    let ptx = ptx();
    let after_last_barrier = |body: &'static str| instructions(&body[body.rfind("barrier.sync").expect("a K-loop barrier")..]);
    for kernel in ["matmul_128x128", "sgemm_pipelined"] {
        let twin = format!("{kernel}_unchecked");
        let (safe, unchecked) = (entry_body(ptx, kernel), entry_body(ptx, &twin));
        let (s, u) = (after_last_barrier(safe), after_last_barrier(unchecked));
        assert!(s.len() <= u.len(), "{kernel}: {} instructions from the last barrier on, its unsafe twin {}:\n{safe}\n\n{unchecked}", s.len(), u.len());
        let stores: Vec<&&str> = s.iter().filter(|l| l.starts_with("st.global")).collect();
        assert!(stores.len() == 16 && stores.iter().all(|l| l.starts_with("st.global.v4.")), "{kernel}: C's stores {stores:#?}");
        let (s, u) = (instructions(safe).len(), instructions(unchecked).len());
        println!("{kernel}: {s} instructions, its unsafe twin {u}");
        assert!(s <= u + 8, "{kernel} has {s} instructions, its unsafe twin {u}:\n{safe}\n\n{unchecked}");
        assert!(!safe.contains("trap;") && !safe.contains("call"), "a panic path in {kernel}:\n{safe}");
        assert!(!safe.contains("ld.local") && !safe.contains("st.local"), "{kernel} uses local memory:\n{safe}");
    }
}

/// The bounds-checked stencil reads its 10 x 3 neighbourhood through one `window` checked once:
/// on that path its 26 loads follow one another with no compare between them (the edge path,
/// for threads at the grid's border, checks each read).
#[test]
fn the_safe_stencil_reads_its_window_without_a_check_per_load() {
    let body = entry_body(ptx(), "stencil_5pt");
    let lines: Vec<&str> = instructions(body);
    let loads: Vec<usize> = lines.iter().enumerate().filter(|(_, l)| l.starts_with("ld.global.nc.")).map(|(i, _)| i).collect();
    // The longest run of loads with no compare or branch between consecutive ones.
    let mut best = 1;
    let mut run = 1;
    for pair in loads.windows(2) {
        let between = &lines[pair[0] + 1..pair[1]];
        if between.iter().any(|l| l.starts_with("setp") || l.starts_with('@') || l.starts_with("bra")) {
            run = 1;
        } else {
            run += 1;
            best = best.max(run);
        }
    }
    assert_eq!(best, 26, "the window's 26 loads should run without a check between them:\n{body}");
}
