//! The PTX `#[kernel]` generates for each parameter kind: structs by value, generic instances,
//! raw pointers, bools; read-only slices load through the non-coherent cache (`ld.global.nc`)
//! in every kind of kernel, raw pointers do not. And each launcher's `SIGNATURE` matches the
//! parameter sizes in the PTX, which is what the stale-module check relies on.

#[path = "common/ptx.rs"]
mod ptx_text;

use gpu_kernels::saxpy;
use test_kernels::launch_kinds::{add_one_raw, affine, empty, mark_blocks, scale_into_f32, scale_into_f64};

/// The example kernels' and the test kernels' sm_80 modules, one after the other.
fn ptx() -> &'static str {
    static BOTH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BOTH.get_or_init(|| {
        let examples = gpu_kernels::KERNELS.ptx_for(80).expect("gpu_kernels is built for sm_80");
        let fixtures = test_kernels::KERNELS.ptx_for(80).expect("test_kernels is built for sm_80");
        format!("{examples}\n{fixtures}")
    })
}

/// The parameter declarations of `.entry name(...)`, trimmed.
fn entry_params(name: &str) -> Vec<String> {
    let ptx = ptx();
    let start = ptx.find(&format!(".entry {name}(")).unwrap_or_else(|| panic!("no .entry {name} in the PTX"));
    let end = start + ptx[start..].find(')').unwrap();
    ptx[start..end].lines().skip(1).map(|l| l.trim().trim_end_matches(',').to_string()).filter(|l| !l.is_empty()).collect()
}

fn entry_body(name: &str) -> &'static str {
    ptx_text::entry_body(ptx(), name)
}

/// Byte size of a PTX parameter declaration: `.param .u64 ...` or `.param .align 4 .b8 x[12]`.
fn param_size(declaration: &str) -> usize {
    if let Some(open) = declaration.rfind('[') {
        return declaration[open + 1..declaration.len() - 1].parse().unwrap();
    }
    let ty = declaration.split_whitespace().nth(1).unwrap();
    ty[2..].parse::<usize>().unwrap() / 8
}

#[test]
fn a_struct_is_passed_by_value_as_an_aligned_byte_array() {
    let params = entry_params("affine");
    assert_eq!(params[0], ".param .align 4 .b8 affine_param_0[12]", "{params:?}");
    assert_eq!(params.len(), 5, "{params:?}");
}

#[test]
fn generic_instances_have_stable_symbols_and_their_own_types() {
    let f32_params = entry_params("scale_into_f32");
    let f64_params = entry_params("scale_into_f64");
    assert_eq!(f32_params[0], ".param .f32 scale_into_f32_param_0");
    assert_eq!(f64_params[0], ".param .f64 scale_into_f64_param_0");
    assert!(entry_body("scale_into_f32").contains("mul.f32") || entry_body("scale_into_f32").contains("mul.rn.f32"));
    assert!(entry_body("scale_into_f64").contains("mul.f64") || entry_body("scale_into_f64").contains("mul.rn.f64"));
}

#[test]
fn read_only_slices_use_the_non_coherent_cache_in_struct_and_generic_kernels() {
    for kernel in ["affine", "scale_into_f32"] {
        let body = entry_body(kernel);
        assert_eq!(body.matches("ld.global.nc.").count(), 1, "{kernel}: x[i] should be one ld.global.nc:\n{body}");
    }
    assert_eq!(entry_body("scale_into_f64").matches("ld.global.nc.b64").count(), 1);
    // Raw pointers carry no aliasing promise: plain loads.
    let body = entry_body("add_one_raw");
    assert!(!body.contains("ld.global.nc") && body.contains("ld.global."), "{body}");
}

#[test]
fn signatures_match_the_ptx_parameter_sizes() {
    let cases = [
        ("saxpy", saxpy::SIGNATURE),
        ("affine", affine::SIGNATURE),
        ("scale_into_f32", scale_into_f32::SIGNATURE),
        ("scale_into_f64", scale_into_f64::SIGNATURE),
        ("add_one_raw", add_one_raw::SIGNATURE),
        ("mark_blocks", mark_blocks::SIGNATURE),
        ("empty", empty::SIGNATURE),
    ];
    for (name, signature) in cases {
        assert_eq!(signature.symbol, name);
        let sizes: Vec<usize> = entry_params(name).iter().map(|p| param_size(p)).collect();
        assert_eq!(sizes, signature.param_sizes, "{name}: PTX {:?}", entry_params(name));
    }
}
