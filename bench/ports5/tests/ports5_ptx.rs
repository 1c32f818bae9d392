//! What the fifth held-out port found in the generated code, pinned on the PTX the kernel
//! crates embed (no GPU, no ptxas needed; the register and stack figures when the build had
//! ptxas). bench/ports5/RESULTS.md has the SASS tables (`scripts/ports5-sass.py`).

use ferrocuda_ports5_llmc as llmc;
use ferrocuda_ports5_vllm as vllm;

/// The body of `.entry name(` in `ptx`.
fn entry<'a>(ptx: &'a str, name: &str) -> &'a str {
    let start = ptx.find(&format!(".entry {name}(")).unwrap_or_else(|| panic!("no entry {name} in the PTX"));
    let rest = &ptx[start..];
    let end = rest[1..].find(".entry ").map_or(rest.len(), |e| e + 1);
    &rest[..end]
}

fn vllm_ptx() -> &'static str {
    vllm::KERNELS.ptx_for(90).expect("the vLLM ports are built for sm_90")
}

fn llmc_ptx() -> &'static str {
    llmc::KERNELS.ptx_for(90).expect("the llm.c ports are built for sm_90")
}

/// The trap the port found: the device library's precise `f32::tanh` was a correctly rounded
/// division of two series below 1 (`div.rn.f32`: FCHK and a slow-path CALL in the SASS, 226
/// instructions against nvcc's 65 in vLLM's `gelu_tanh_and_mul`), not nvcc's branch-free
/// `tanhf`. The library now computes nvcc's sequence (one `ex2.approx`, one `rcp.approx`, no
/// division), so the first try as written and the fixed variant (the port's own `tanh_nvcc`)
/// compile alike.
#[test]
fn p30_ports5_library_tanh_is_nvccs_branch_free_sequence_without_division() {
    for name in ["gelu_tanh_and_mul_kernel", "gelu_tanh_and_mul_kernel_fixed"] {
        let body = entry(vllm_ptx(), name);
        assert!(!body.contains("div.rn") && !body.contains("div.approx"), "{name} divides:\n{body}");
        assert!(body.contains("ex2.approx") && body.contains("rcp.approx"), "{name}'s tanh is not ex2 + rcp:\n{body}");
    }
}

/// llm.c's `load128cs`/`store128`: `cache::load(.., Load::Streaming)` of the 16-byte `X128` is
/// one `ld.global.cs.v4` (`LDG.E.EF.128`, nvcc's `__ldcs` of an `int4`), `vector::store16` one
/// 16-byte store.
#[test]
fn p30_ports5_residual_moves_16_bytes_per_access_with_the_streaming_hint() {
    let body = entry(llmc_ptx(), "residual_forward_kernel2");
    assert_eq!(body.matches("ld.global.cs.v4.b32").count(), 2, "{body}");
    assert_eq!(body.matches("st.global.v2.b64").count() + body.matches("st.global.v4.b32").count(), 1, "{body}");
}

/// vLLM's `SHFL_XOR_SYNC_WIDTH(v, mask, 16)`: `warp::shuffle_xor_within::<16, _>` passes
/// CUDA's `c` operand for width 16 (0x101f = 4127), and the AtomicSlice outputs are relaxed
/// stores (`st.relaxed.gpu`), no read-modify-write.
#[test]
fn p30_ports5_topk_shuffles_within_16_lanes_and_stores_relaxed() {
    let body = entry(vllm_ptx(), "topk_gating_softmax_64");
    assert!(body.contains("shfl.sync.bfly.b32"), "{body}");
    assert!(body.contains("4127"), "no width-16 shuffle operand (0x101f) in:\n{body}");
    assert!(body.contains("st.relaxed.gpu.global"), "{body}");
    assert!(!body.contains("atom."), "{body}");
}

/// No port keeps a panic path (a `call` in its entry) or local memory.
#[test]
fn p30_ports5_no_port_has_a_panic_path_or_local_memory() {
    let ports = [
        (llmc_ptx(), "residual_forward_kernel2"),
        (llmc_ptx(), "crossentropy_forward_kernel1"),
        (llmc_ptx(), "crossentropy_softmax_backward_kernel1"),
        (llmc_ptx(), "copy_and_cast_kernel"),
        (vllm_ptx(), "gelu_tanh_and_mul_kernel"),
        (vllm_ptx(), "gelu_tanh_and_mul_kernel_fixed"),
        (vllm_ptx(), "rms_norm_static_fp8_quant_kernel"),
        (vllm_ptx(), "apply_repetition_penalties_kernel"),
        (vllm_ptx(), "apply_repetition_penalties_kernel_tiles"),
        (vllm_ptx(), "apply_repetition_penalties_kernel_unchecked"),
        (vllm_ptx(), "apply_repetition_penalties_kernel_rowtiles"),
        (vllm_ptx(), "topk_gating_softmax_64"),
    ];
    for (ptx, name) in ports {
        let body = entry(ptx, name);
        assert!(!body.contains("call.uni") && !body.contains("call "), "{name} keeps a call (a panic path?)");
        assert!(!body.contains(".local"), "{name} uses local memory");
        let module = if std::ptr::eq(ptx, llmc_ptx()) { &llmc::KERNELS } else { &vllm::KERNELS };
        if let Some(r) = module.resources_of(name, 90) {
            assert_eq!((r.stack_frame, r.spill_stores), (0, 0), "{name}: stack or spills");
        }
    }
}

/// vLLM's FP8 conversion: one `cvt.rn.satfinite.e4m3x2.f32` per value (`half::fp8::e4m3`).
#[test]
fn p30_ports5_fp8_is_the_hardware_conversion() {
    let body = entry(vllm_ptx(), "rms_norm_static_fp8_quant_kernel");
    assert!(body.contains("cvt.rn.satfinite.e4m3x2.f32"), "{body}");
}

/// The row-tile partition added after the port (`DisjointSlice<f32, RowTiles>`, the safe form
/// of `_unchecked` on vLLM's own launch) checks once per block, never per element: its nine
/// compares are five per block (the penalty's row, the row inside the buffer, the tile's start
/// inside the row, the masks sliced to the tile, the thread's first column) and four per
/// element, the source's own (the prompt mask, the output mask, the logit's sign, the loop's
/// end). `_unchecked` keeps two more per element (its `i < len` and the output mask's `get`).
/// The masks are read through `.nc`, the output mask only where the prompt's is 0.
#[test]
fn p30_ports5_rowtiles_has_no_check_per_element() {
    let body = entry(vllm_ptx(), "apply_repetition_penalties_kernel_rowtiles");
    assert_eq!(body.matches("setp.").count(), 9, "{body}");
    assert_eq!(body.matches("ld.global.nc.b8").count(), 2, "{body}");
    let unchecked = entry(vllm_ptx(), "apply_repetition_penalties_kernel_unchecked");
    assert_eq!(unchecked.matches("setp.").count(), 11, "{unchecked}");
}

/// After the port (issue 30): vLLM's `finished ? !finished[thread_row] : true` as an
/// `Option<&[u8]>` cut to `num_rows` once. The parameter is compared with null once, its byte
/// is one `ld.global.nc` (the `&[T]` no-alias read), and its length once, with `num_rows` (not
/// per row: the row is below `num_rows` already).
#[test]
fn p30_ports5_topk_finished_is_one_null_test_and_one_nc_byte_load() {
    let body = entry(vllm_ptx(), "topk_gating_softmax_64_finished");
    let lines: Vec<&str> = body.lines().map(str::trim).collect();
    let word = |l: &str, i: usize| l.split_whitespace().nth(i).map(|w| w.trim_end_matches([',', ';']).to_string());
    // `mov.b64 %rdA, 0;` then `cvta.to.global.u64 %rdB, %rdA;`: the null address.
    let mut nulls: Vec<String> = lines.iter().filter(|l| l.starts_with("mov.b64") && l.ends_with(", 0;")).filter_map(|l| word(l, 1)).collect();
    let converted: Vec<String> = lines
        .iter()
        .filter(|l| l.starts_with("cvta.to.global.u64") && nulls.iter().any(|n| l.ends_with(&format!("{n};"))))
        .filter_map(|l| word(l, 1))
        .collect();
    nulls.extend(converted);
    let null_tests = lines.iter().filter(|l| l.starts_with("setp.") && nulls.iter().any(|n| l.ends_with(&format!("{n};")))).count();
    assert_eq!(null_tests, 1, "one null test:\n{body}");
    assert_eq!(body.matches("ld.global.nc.b8").count() + body.matches("ld.global.nc.u8").count(), 1, "one byte load of `finished`:\n{body}");
    let length = lines
        .iter()
        .find(|l| l.starts_with("ld.param") && l.contains("topk_gating_softmax_64_finished_param_3]"))
        .and_then(|l| word(l, 1))
        .unwrap_or_else(|| panic!("`finished`'s length is loaded:\n{body}"));
    let compares = lines.iter().filter(|l| l.starts_with("setp.") && l.split([' ', ',', ';']).any(|w| w == length)).count();
    assert_eq!(compares, 1, "`finished`'s length compared once:\n{body}");
}
