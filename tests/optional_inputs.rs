//! Issue 30's optional inputs (`Option<&[T]>`, CUDA's `const T*` that may be `nullptr`) on
//! both back ends (the fixture kernels of tests/kernels/src/optional_inputs.rs): each body runs
//! on the CPU executor (`cpu::name`, always) and on the GPU (`gpu::name`, skipped without one,
//! a failure under `REQUIRE_GPU=1`) against the host; then what the `Option` compiles to.

#[path = "common/backend.rs"]
mod backend;
mod common;
#[path = "common/ptx.rs"]
mod ptx_text;

use backend::{Backend, launch_on, on_both_backends};
use test_kernels::optional_inputs;

on_both_backends!(
    p30_optional_bias_is_added_when_given_and_skipped_when_none,
    p30_finished_rows_read_as_vllm_reads_them,
    p30_finished_rows_cut_once_read_as_vllm_reads_them,
    g16d_a1_an_empty_optional_input_is_some_on_both_backends,
);

/// `Some(&bias)` adds the bias; `None` (the null pointer) leaves `x`; a shorter bias adds
/// nothing past its end.
fn p30_optional_bias_is_added_when_given_and_skipped_when_none(backend: &Backend) {
    let n = 1000usize;
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.25).collect();
    let b: Vec<f32> = (0..n).map(|i| 1000.0 + i as f32).collect();
    let (input, bias, short) = (backend.upload(&x), backend.upload(&b), backend.upload(&b[..10]));
    let config = (n.div_ceil(128) as u32, 128u32);
    let mut out = backend.zeroed::<f32>(n);
    launch_on!(backend, optional_inputs::p30_add_optional_bias, config, &input, Some(&bias), &mut out).unwrap();
    let with = backend.download(&out);
    let mut out = backend.zeroed::<f32>(n);
    launch_on!(backend, optional_inputs::p30_add_optional_bias, config, &input, None, &mut out).unwrap();
    let without = backend.download(&out);
    let mut out = backend.zeroed::<f32>(n);
    launch_on!(backend, optional_inputs::p30_add_optional_bias, config, &input, Some(&short), &mut out).unwrap();
    let shorter = backend.download(&out);
    for i in 0..n {
        assert_eq!(with[i], x[i] + b[i], "{}: element {i} with the bias", backend.name());
        assert_eq!(without[i], x[i], "{}: element {i} without a bias", backend.name());
        let expected = if i < 10 { x[i] + b[i] } else { x[i] };
        assert_eq!(shorter[i], expected, "{}: element {i} with a 10-element bias", backend.name());
    }
}

/// The host's `finished ? !finished[row] : true` (rows past a shorter `finished`: active).
fn active(finished: Option<&[u8]>, rows: usize) -> Vec<u32> {
    (0..rows).map(|r| finished.is_none_or(|f| f.get(r).is_none_or(|&b| b == 0)) as u32).collect()
}

fn p30_finished_rows_read_as_vllm_reads_them(backend: &Backend) {
    let rows = 777usize;
    let flags: Vec<u8> = (0..rows).map(|r| (r % 3 == 0) as u8 * (1 + r as u8 % 5)).collect();
    let (finished, short) = (backend.upload(&flags), backend.upload(&flags[..100]));
    let config = (rows.div_ceil(64) as u32 + 1, 64u32);
    for (given, host) in [(Some(&finished), Some(&flags[..])), (None, None), (Some(&short), Some(&flags[..100]))] {
        let mut out = backend.zeroed::<u32>(rows);
        launch_on!(backend, optional_inputs::p30_active_rows, config, given, &mut out, rows as u32).unwrap();
        assert_eq!(backend.download(&out), active(host, rows), "{}: finished {:?}", backend.name(), host.map(<[u8]>::len));
    }
}

/// The cut form (`get(..rows)` once): a `finished` shorter than `rows` counts as none.
fn p30_finished_rows_cut_once_read_as_vllm_reads_them(backend: &Backend) {
    let rows = 777usize;
    let flags: Vec<u8> = (0..rows + 5).map(|r| (r % 4 == 1) as u8).collect();
    let (finished, short) = (backend.upload(&flags), backend.upload(&flags[..100]));
    let config = (rows.div_ceil(64) as u32, 64u32);
    for (given, host) in [(Some(&finished), Some(&flags[..])), (None, None), (Some(&short), None)] {
        let mut out = backend.zeroed::<u32>(rows);
        launch_on!(backend, optional_inputs::p30_active_rows_cut, config, given, &mut out, rows as u32).unwrap();
        assert_eq!(backend.download(&out), active(host, rows), "{}: finished {:?}", backend.name(), host.map(<[u8]>::len));
    }
}

/// Audit 2026-11-28d review 2, attack A1 (held): `None` is the null pointer, so an empty
/// buffer passed as `Some` must not reach the kernel as null (it would read as `None` on the
/// GPU and `Some(&[])` on the CPU executor). The launcher gives an empty slice the dangling
/// aligned address (`SliceArg::valid_ptr`), so both back ends see `Some` of length 0.
fn g16d_a1_an_empty_optional_input_is_some_on_both_backends(backend: &Backend) {
    let (empty, three) = (backend.upload::<f32>(&[]), backend.upload(&[1.0f32, 2.0, 3.0]));
    for (given, expected) in [(Some(&empty), 1u32), (None, 0), (Some(&three), 4)] {
        let mut out = backend.zeroed::<u32>(1);
        launch_on!(backend, optional_inputs::g16d_optional_presence, (1u32, 1u32), given, &mut out).unwrap();
        assert_eq!(backend.download(&out), vec![expected], "{}: given {:?}", backend.name(), given.map(|_| "buffer"));
    }
}

/// `None` needs no type annotation at either launcher (the GPU launcher takes an
/// `Option<&dyn DeviceRead<T>>`): this compiles, and runs on the CPU executor.
#[test]
fn p30_none_needs_no_annotation() {
    let executor = ferrocuda::cpu::CpuExecutor::new();
    let mut out = vec![7u32; 64];
    optional_inputs::p30_active_rows::launch_cpu(&executor, (1u32, 64u32), None, &mut out, 64).unwrap();
    assert_eq!(out, vec![1u32; 64]);
    // The GPU launcher's signature, named without running it.
    let _gpu: fn(&ferrocuda::Stream, ferrocuda::LaunchConfig, &mut ferrocuda::DeviceBuffer<u32>, u32) -> Result<(), ferrocuda::Error> =
        |stream, config, out, rows| optional_inputs::p30_active_rows::launch(stream, config, None, out, rows);
}

fn ptx() -> &'static str {
    test_kernels::KERNELS.ptx_for(90).expect("test_kernels is built for sm_90")
}

/// The registers in `body` that hold the null address (`mov.b64 %rdA, 0;` and its
/// `cvta.to.global.u64 %rdB, %rdA;`).
fn null_registers(body: &str) -> Vec<String> {
    let mut nulls: Vec<String> = Vec::new();
    for line in body.lines().map(str::trim) {
        let words: Vec<&str> = line.trim_end_matches(';').split([' ', '\t', ',']).filter(|w| !w.is_empty()).collect();
        match words.as_slice() {
            ["mov.b64" | "mov.u64", dst, "0"] => nulls.push(dst.to_string()),
            ["cvta.to.global.u64", dst, src] if nulls.iter().any(|n| n == src) => nulls.push(dst.to_string()),
            _ => {}
        }
    }
    nulls
}

/// What the `Option` compiles to: the optional pointer keeps its alignment in the PTX
/// signature, `Some`'s loads stay `ld.global.nc` (the no-alias, read-only reference of a
/// `&[T]`), and the kernel tests the pointer against null once. With the slice cut to `rows`
/// once (`get(..rows)`), the load below `rows` has no bounds check of its own: one null test
/// and one `ld.global.nc.b8`, as nvcc's `finished ? !finished[row] : true`.
#[test]
fn p30_an_optional_input_is_one_null_test_and_a_nc_load() {
    for kernel in ["p30_add_optional_bias", "p30_active_rows", "p30_active_rows_cut"] {
        let body = ptx_text::entry_body(ptx(), kernel);
        let nulls = null_registers(body);
        assert!(!nulls.is_empty(), "{kernel}: the null address is in the body:\n{body}");
        let tests = ptx_text::opcodes(body).len();
        assert!(tests > 0);
        let null_tests = body.lines().filter(|l| l.trim_start().starts_with("setp.") && nulls.iter().any(|n| l.contains(&format!("{n};")))).count();
        assert_eq!(null_tests, 1, "{kernel}: one null test:\n{body}");
        assert!(body.contains("ld.global.nc."), "{kernel}: `Some`'s load is ld.global.nc:\n{body}");
    }
    let body = ptx_text::entry_body(ptx(), "p30_active_rows_cut");
    assert!(body.contains(".param .u64 .ptr .align 1 p30_active_rows_cut_param_0"), "{body}");
    // `finished`'s length (parameter 1) is compared with `rows` (parameter 4) and nothing else:
    // no `row < len` per element.
    let length = loaded_register(body, "p30_active_rows_cut_param_1");
    let rows = loaded_register(body, "p30_active_rows_cut_param_4");
    let rows_wide: Vec<String> = body
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("cvt.u64.u32") && l.trim_end_matches(';').ends_with(&format!(" {rows}")))
        .filter_map(|l| l.split_whitespace().nth(1).map(|r| r.trim_end_matches(',').to_string()))
        .collect();
    let uses: Vec<&str> = body.lines().map(str::trim).filter(|l| l.starts_with("setp.") && mentions(l, &length)).collect();
    assert_eq!(uses.len(), 1, "the length is compared once:\n{body}");
    assert!(rows_wide.iter().any(|r| mentions(uses[0], r)), "with `rows`: {}\n{body}", uses[0]);
}

/// The register `ld.param` loads `param` into.
fn loaded_register(body: &str, param: &str) -> String {
    let line = body
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("ld.param") && l.contains(&format!("[{param}]")))
        .unwrap_or_else(|| panic!("{param} is loaded:\n{body}"));
    line.split_whitespace().nth(1).unwrap().trim_end_matches(',').to_string()
}

/// Whether an instruction names `register` as an operand (not as a prefix of a longer one).
fn mentions(line: &str, register: &str) -> bool {
    line.split([' ', '\t', ',', ';', '[', ']']).any(|w| w == register)
}
