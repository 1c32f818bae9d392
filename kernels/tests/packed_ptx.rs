//! The packed row kernels' code, checked on the embedded PTX and `ptxas -v` figures (no GPU):
//! their fast path is one 16-byte load per input chunk and one 16-byte store per output chunk
//! (`.v4.b32`, what makes them fast; a regression to 2- or 4-byte accesses would still pass
//! every value test), and no kernel spills.

use ferrocuda_kernels_device::KERNELS;

const PACKED: [&str; 23] = [
    "adamw_step_packed",
    "rmsnorm_forward_packed16",
    "layernorm_forward_packed16",
    "layernorm_backward_fused_packed",
    "rmsnorm_backward_fused_packed",
    "sum_of_squares_packed",
    "silu_and_mul_forward_packed",
    "silu_and_mul_backward_packed",
    "rotary_embedding_packed",
    "rmsnorm_forward_packed",
    "add_rmsnorm_forward_packed",
    "layernorm_forward_packed",
    "add_layernorm_forward_packed",
    "norm_backward_packed",
    "softmax_forward_packed",
    "gelu_forward_packed",
    "gelu_backward_packed",
    "norm_backward_weights_partial_packed",
    // Session 14 (2): the same bodies compiled for one block shape (`reqntid`).
    "softmax_forward_packed_t512",
    "rmsnorm_forward_packed_t96",
    "rmsnorm_forward_packed_t128",
    "add_rmsnorm_forward_packed_t512",
    "layernorm_forward_packed16_t256",
];

/// Spills this test knows of, with why they are accepted (none since issue 31's session 12:
/// layer norm's 16-column kernel spilled 12 bytes on sm_80 for the half types, from its
/// element-by-element paths, now rolled loops). Anything that spills fails.
const KNOWN_SPILLS: [(&str, u32); 0] = [];

/// The PTX of entry `name` in the newest embedded PTX.
fn entry(name: &str) -> String {
    let (_, ptx) = KERNELS.ptx.last().expect("the kernels crate embeds PTX");
    let start = ptx.find(&format!(".entry {name}(")).unwrap_or_else(|| panic!("no entry {name} in the PTX"));
    let body = &ptx[start..];
    let end = body.find("\n}\n").map_or(body.len(), |e| e + 3);
    body[..end].to_string()
}

#[test]
fn packed_kernels_move_16_bytes_per_access_and_do_not_spill() {
    for kernel in PACKED {
        for ty in ["f32", "bf16", "f16"] {
            let name = format!("{kernel}_{ty}");
            let ptx = entry(&name);
            assert!(ptx.contains("ld.global.L1::evict_first.v4.b32"), "{name}: no 16-byte load of the streamed input");
            // A reduction (`sum_of_squares_packed`) stores one atomic add a block, no chunks.
            if !kernel.starts_with("sum_of_squares") {
                assert!(ptx.contains(".v4.b32 \t[") || ptx.contains(".v4.b32 ["), "{name}: no 16-byte store");
            }
            // `_packed_t<threads>`: the same body as `_packed`, under `reqntid(threads)`.
            if (kernel.ends_with("forward_packed") || kernel.contains("forward_packed_t")) && kernel.contains("norm") {
                assert!(ptx.contains("ld.global.L1::evict_last.v4.b32"), "{name}: the weight is not read 16 bytes at a time");
            }
        }
    }
    // `_packed` and not `_packed_`: the 16-columns-a-thread kernels (`*_packed16_*`) escaped
    // this check before (found by s11-rows: layer norm's spills on sm_80, below).
    let resources: Vec<_> = KERNELS.resources.iter().filter(|r| r.kernel.contains("_packed")).collect();
    // ptxas ran where the build found one (the figures are empty without it).
    for r in &resources {
        if KNOWN_SPILLS.contains(&(r.kernel, r.arch)) {
            continue;
        }
        assert_eq!((r.spill_stores, r.spill_loads), (0, 0), "{} spills on sm_{}", r.kernel, r.arch);
    }
    eprintln!("packed kernels with ptxas figures: {}", resources.len());
}

/// Issue 31: registers a thread of the row kernels whose count set their gap to nvcc's CUDA C++
/// twins (kernels/bench/rows_twins.cu, `nvcc -O3 -arch=sm_90`, CUDA 13.0), on sm_90, at or
/// below the twin's: with more, fewer blocks fit an SM and fewer loads are in flight (session
/// 11 on an H100: the rotary embedding at 56 registers ran at 0.82x the twin's 32, the
/// 16-column layer norm at 64 at 0.85x the twin's 48, the 16-column RMSNorm at 48 at 0.95x
/// the twin's 40 at 8192 columns). Their element-by-element paths for misaligned views
/// had set the counts; they now run as rolled loops beside 16-byte-only fast paths. The rotary
/// embedding holds the twin's 32 (session 16): its walk addressed from `u32` chunk indices
/// (36 registers) under a cap of 32 (`launch_bounds(256, 8)`: eight blocks an SM) ran at 0.984x
/// the twin on an H200, against 0.93 at 36 and 0.78 for session 15's form at 40 (which spilled
/// 24 bytes under the cap: session 14 had measured that form's 32-register variant slower).
/// The layer norm's `reqntid(256)` form (session 14 (2), the library's pick at 4096 columns)
/// holds the same 48.
const TWIN_REGISTERS: [(&str, u32); 5] = [
    ("rotary_embedding_packed_bf16", 32),
    ("rotary_embedding_packed_f16", 32),
    ("layernorm_forward_packed16_bf16", 48),
    ("layernorm_forward_packed16_t256_bf16", 48),
    ("rmsnorm_forward_packed16_bf16", 40),
];

#[test]
fn i31_row_kernels_hold_no_more_registers_than_their_cuda_twins() {
    let sm90: Vec<_> = KERNELS.resources.iter().filter(|r| r.arch == 90).collect();
    if sm90.is_empty() {
        // The build found no ptxas (the packed kernels' test above says the same).
        eprintln!("no sm_90 ptxas figures: register counts not checked");
        return;
    }
    for (kernel, twin) in TWIN_REGISTERS {
        let r = sm90.iter().find(|r| r.kernel == kernel).unwrap_or_else(|| panic!("no sm_90 ptxas figures for {kernel}"));
        assert!(r.registers <= twin, "{kernel}: {} registers a thread on sm_90, more than the CUDA C++ twin's {twin}", r.registers);
        assert_eq!((r.stack_frame, r.spill_stores), (0, 0), "{kernel}: local memory on sm_90");
    }
}

/// Issue 31: the warp-per-row kernels compute a lane's columns `lane + 32 (j + u)` in `u32`
/// (`MAX_COLS`), so the PTX compares them in 32 bits; the 64-bit compares left are the few
/// checks of whole rows. With `usize` columns each of a chunk's 8 elements took a 64-bit add
/// and compare (two SASS instructions each where the CUDA twin's `unsigned` takes one): 12 to
/// 47 `setp.*.u64` an entry, and cross-entropy ran at 0.92x its twin (fused: 0.88x, 40
/// registers for the twin's 32).
#[test]
fn i31_warp_row_kernels_compare_columns_in_32_bits() {
    let kernels = [
        "cross_entropy_forward",
        "cross_entropy_forward_backward",
        "softmax_forward",
        "rmsnorm_forward",
        "add_rmsnorm_forward",
        "layernorm_forward",
        "add_layernorm_forward",
        "layernorm_backward",
        "rmsnorm_backward",
    ];
    for kernel in kernels {
        for ty in ["f32", "bf16", "f16"] {
            let name = format!("{kernel}_{ty}");
            let wide = entry(&name).lines().filter(|l| l.trim_start().starts_with("setp.") && (l.contains(".u64") || l.contains(".s64"))).count();
            assert!(wide < 8, "{name}: {wide} 64-bit compares (setp.*.u64), one per element of a chunk or more: columns are back in usize");
        }
    }
}

/// Issue 31 (s13-rows): the 16-column layer norm reads the row's first value (its shift) in
/// the 16-byte path after `x`'s two 16-byte loads, before the block reduction's first shuffle,
/// so the three loads are in flight together, as in nvcc's twin. It used to be read before the
/// branch between the 16-byte and element paths, where LLVM put its widening next to the load:
/// the branch waited for the load, and `x`'s loads left one DRAM round trip later (SASS: the
/// shift's `LDG.E.U16` at instruction 22, its `SHF.L.U32` at 78, `x`'s `LDG.E.EF.128` at 1026;
/// measured 0.907x the twin on an H100).
#[test]
fn i31_layernorm16_reads_its_shift_with_the_row_not_before_it() {
    for ty in ["f32", "bf16", "f16", "t256_f32", "t256_bf16", "t256_f16"] {
        let name = format!("layernorm_forward_packed16_{ty}");
        let ptx = entry(&name);
        let lines: Vec<&str> = ptx.lines().map(str::trim).collect();
        let first_x = lines.iter().position(|l| l.contains("ld.global.L1::evict_first.v4")).unwrap_or_else(|| panic!("{name}: no 16-byte load of x"));
        let shuffle =
            lines[first_x..].iter().position(|l| l.starts_with("shfl.")).map(|k| first_x + k).unwrap_or_else(|| panic!("{name}: no shuffle after x's loads"));
        let scalar_load = |l: &&str| {
            let l = l.split_once(' ').filter(|(p, _)| p.starts_with('@')).map_or(*l, |(_, rest)| rest.trim_start());
            l.starts_with("ld.global.nc.") && !l.contains(".v2") && !l.contains(".v4")
        };
        assert!(
            lines[first_x..shuffle].iter().any(scalar_load),
            "{name}: the shift is not read between x's 16-byte loads and the reduction (read before the path branch, it delays x's loads by a round trip)"
        );
    }
}

/// Issue 31, session 14 (2): the row kernels the host launches with one block size only are
/// compiled for it (`#[kernel(reqntid(n))]`, PTX `.reqntid n, 1, 1`), so that the block
/// reduction's run-time tests of the block's shape fold away: no read of `%ntid` or of
/// `%tid.y`/`%tid.z` is left (the any-block `softmax_forward_packed` reads `%ntid.y` and
/// `%tid.y`; on sm_90 its 16-byte path at 4096 columns runs 238 SASS instructions a thread,
/// the `reqntid(512)` kernel's 167, nvcc's twin's 221). A kernel that lost the attribute, or
/// whose block-shape tests came back, fails here.
#[test]
fn s14_one_block_size_kernels_are_compiled_for_their_block() {
    let fixed = [
        ("softmax_forward_packed_t512", 512),
        ("rmsnorm_forward_packed_t96", 96),
        ("rmsnorm_forward_packed_t128", 128),
        ("add_rmsnorm_forward_packed_t512", 512),
        ("layernorm_forward_packed16_t256", 256),
        // The chunk-grid kernels: always 256 threads (`chunk_grid`).
        ("silu_and_mul_forward_packed", 256),
        ("silu_and_mul_backward_packed", 256),
        ("gelu_forward_packed", 256),
        ("gelu_backward_packed", 256),
        ("cross_entropy_backward_packed", 256),
        ("adamw_step_packed", 256),
    ];
    for (kernel, threads) in fixed {
        for ty in ["f32", "bf16", "f16"] {
            let name = format!("{kernel}_{ty}");
            let ptx = entry(&name);
            assert!(ptx.contains(&format!(".reqntid {threads}, 1, 1")), "{name}: not compiled for blocks of {threads} (`reqntid`)");
            for register in ["%ntid.", "%tid.y", "%tid.z"] {
                assert!(!ptx.contains(register), "{name}: reads {register}: the block's shape is tested at run time again");
            }
        }
    }
    // The rotary embedding: `f32` for blocks of 256; the 16-bit instances at most 256 threads and
    // eight blocks an SM (their cap of 32 registers; session 16).
    assert!(entry("rotary_embedding_packed_f32").contains(".reqntid 256, 1, 1"), "rotary_embedding_packed_f32: not `reqntid(256)`");
    for ty in ["bf16", "f16"] {
        let ptx = entry(&format!("rotary_embedding_packed_{ty}"));
        assert!(ptx.contains(".maxntid 256, 1, 1") && ptx.contains(".minnctapersm 8"), "rotary_embedding_packed_{ty}: not `launch_bounds(256, 8)`");
    }
    // The any-block kernel still tests it (the check above can fail).
    assert!(entry("softmax_forward_packed_bf16").contains("%ntid."), "softmax_forward_packed_bf16 no longer reads the block's shape: update this test");
}
