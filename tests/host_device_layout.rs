//! Regression tests for audit 2026-11-27b Q1 and Q2: a kernel whose host and device builds see
//! different types (a `cfg`-chosen type alias, `u32` on the host and `u64` on the device) or
//! different `cols(..)` widths (`cfg_attr`) has the same signature *tokens* on both sides, so
//! its token fingerprint matched and the GPU wrote 8-byte elements over a 4-byte view. Each
//! build now computes its parameters' layout (element size, alignment, constant widths) from
//! its own resolved types; the device module holds the device build's
//! (`__ferrocuda_layout_<symbol>`), and the first launch of the kernel compares it with the
//! launcher's and refuses the launch, naming the parameter.
//!
//! The first two tests read the embedded PTX (no GPU). The last launches: it skips (printed)
//! without a GPU and fails under `REQUIRE_GPU=1`.

mod common;

use ferrocuda::{DeviceBuffer, Dim3, Error, LAYOUT_SYMBOL_PREFIX, LaunchConfig, Stream, TYPES_SYMBOL_PREFIX};
use test_kernels::host_device_layout::{
    F1Elem, F1Pair, f1_field_type_by_cfg, f1_generic_F1Pair, f1_generic_u32, f1_permuted_fields, g17r_1_cfg_width_parameters, g17r_1_width_parameters,
    g17r_4::g17r_4_cfg_map_type, q1_cfg_alias, q1_same_size_alias, q2_cfg_width,
};

/// The `u64` words of the device global `name` in `ptx`: a `.b8` array of little-endian
/// bytes (or of 64-bit words), whose initializer leaves out trailing zeros.
fn global_words(ptx: &str, name: &str) -> Vec<u64> {
    let declared = format!("{name}[");
    let line = ptx.lines().find(|l| l.contains(".global") && l.contains(&declared)).unwrap_or_else(|| panic!("no global {name} in the PTX"));
    let start = line.find(&declared).unwrap() + declared.len();
    let count: usize = line[start..start + line[start..].find(']').unwrap()].parse().unwrap();
    let mut values: Vec<u64> = line[line.find('{').expect("an initializer") + 1..line.rfind('}').expect("an initializer")]
        .split(',')
        .map(|v| {
            let v = v.trim();
            v.strip_prefix("0x").map(|h| u64::from_str_radix(h, 16).unwrap()).unwrap_or_else(|| v.parse().unwrap())
        })
        .collect();
    values.resize(count, 0);
    if line.contains(".b8") { values.chunks(8).map(|bytes| bytes.iter().rev().fold(0, |word, &b| word << 8 | b)).collect() } else { values }
}

fn device_layout(symbol: &str) -> Vec<u64> {
    let ptx = test_kernels::KERNELS.ptx_for(90).expect("test_kernels is built for sm_90");
    global_words(ptx, &format!("{LAYOUT_SYMBOL_PREFIX}{symbol}"))
}

/// Q1: the device module holds the device build's layout (`u64`: 8 bytes, align 8), the
/// launcher the host build's (`u32`: 4 and 4), though the token fingerprints are equal.
#[test]
fn q1_a_cfg_alias_gives_the_device_module_another_layout_than_the_launcher() {
    assert_eq!(q1_cfg_alias::SIGNATURE.layout, &[4, 4, 0, 4, 4, 0]);
    assert_eq!(device_layout("q1_cfg_alias"), [8, 8, 0, 8, 8, 0]);
    assert_eq!(q1_cfg_alias::SIGNATURE.param_names, &["x", "out"]);
}

/// Q2: the constant width of `cols(..)` is part of the layout: 8 in the host build, 16 in
/// the device build.
#[test]
fn q2_a_cfg_attr_width_gives_the_device_module_another_layout_than_the_launcher() {
    assert_eq!(q2_cfg_width::SIGNATURE.layout, &[4, 4, 8]);
    assert_eq!(device_layout("q2_cfg_width"), [4, 4, 16]);
}

/// The rest of Q1 (same size): `u32` on the host and `f32` on the device have one layout, so
/// the layout check passed them; each build now also records its element types' names. The
/// device module holds the key of `f32` for `out`, the launcher the name `u32`.
#[test]
fn q1_same_size_cfg_types_have_one_layout_but_two_type_names() {
    assert_eq!(q1_same_size_alias::SIGNATURE.layout, &[4, 4, 0, 4, 4, 0]);
    assert_eq!(device_layout("q1_same_size_alias"), [4, 4, 0, 4, 4, 0], "the layout cannot tell them apart");
    let ptx = test_kernels::KERNELS.ptx_for(90).unwrap();
    let device = global_words(ptx, &format!("{TYPES_SYMBOL_PREFIX}q1_same_size_alias"));
    // Primitives have fixed keys (`LayoutKey`, F1), which the table holds instead of the name
    // keys; each differs from the other type's.
    use ferrocuda_device::LayoutKey;
    // (An output's key is its element's with its partition's mixed in: G13R-4.)
    use ferrocuda_device::__private::args::output_key;
    use ferrocuda_device::global::{DisjointMatrix, DisjointSlice};
    assert_eq!(device, [u32::LAYOUT_KEY, output_key::<DisjointSlice<f32>>()]);
    assert_ne!(u32::LAYOUT_KEY, f32::LAYOUT_KEY);
    assert_eq!(host_keys(&q1_same_size_alias::SIGNATURE), [u32::LAYOUT_KEY, output_key::<DisjointSlice<u32>>()]);
    let host: Vec<&str> = q1_same_size_alias::SIGNATURE.type_names.iter().map(|f| f.unwrap()()).collect();
    assert_eq!(host, ["u32", "u32"]);
    // A kernel whose builds agree has equal tables (q1_cfg_alias differs in layout already).
    let agree = global_words(ptx, &format!("{TYPES_SYMBOL_PREFIX}q2_cfg_width"));
    assert_eq!(agree, [output_key::<DisjointMatrix<u32>>()]);
}

/// The host build's keys of a launcher's parameter types (`SIGNATURE.type_keys`).
fn host_keys(signature: &ferrocuda::KernelSignature) -> Vec<u64> {
    signature.type_keys.iter().map(|k| k.map_or(0, |f| f())).collect()
}

/// The device build's keys of a kernel's parameter types (its module's type table).
fn device_keys(symbol: &str) -> Vec<u64> {
    let ptx = test_kernels::KERNELS.ptx_for(90).expect("test_kernels is built for sm_90");
    global_words(ptx, &format!("{TYPES_SYMBOL_PREFIX}{symbol}"))
}

/// F1 (audit 2026-11-27c), the reviewer's three shapes: a struct whose fields a `cfg`
/// permutes (by value, r1), whose field type it changes (slice elements, r2), and a generic
/// kernel's instance over the permuted struct (r3). Name, size and alignment agree, so the
/// earlier checks passed them; the structural keys (`LayoutKey`) differ between the launcher
/// and the device module, which the first launch compares. A kernel whose builds agree
/// (the `u32` instance) has equal keys.
#[test]
fn f1_structs_whose_fields_a_cfg_changes_have_other_keys_in_the_device_module() {
    use ferrocuda_device::LayoutKey;
    assert_eq!(f1_permuted_fields::SIGNATURE.layout, &[8, 4, 0, 4, 4, 0]);
    assert_eq!(device_layout("f1_permuted_fields"), [8, 4, 0, 4, 4, 0], "the layout cannot tell them apart");
    let (host, device) = (host_keys(&f1_permuted_fields::SIGNATURE), device_keys("f1_permuted_fields"));
    assert_eq!(host[0], F1Pair::LAYOUT_KEY);
    assert_ne!(host[0], device[0], "r1: permuted fields give the same key");
    assert_eq!(host[1], device[1], "the u32 output agrees");
    let (host, device) = (host_keys(&f1_field_type_by_cfg::SIGNATURE), device_keys("f1_field_type_by_cfg"));
    assert_eq!(host[0], F1Elem::LAYOUT_KEY);
    assert_ne!(host[0], device[0], "r2: a field of another type gives the same key");
    assert_ne!(host[1], device[1]);
    let (host, device) = (host_keys(&f1_generic_F1Pair::SIGNATURE), device_keys("f1_generic_F1Pair"));
    assert_ne!(host, device, "r3: the generic instance over the permuted struct");
    assert_eq!(host_keys(&f1_generic_u32::SIGNATURE), device_keys("f1_generic_u32"), "the u32 instance agrees");
}

fn refused(result: Result<(), Error>, parameter: &str, what: &str) {
    match result {
        Err(Error::KernelSignatureMismatch { detail, .. }) => {
            assert!(detail.contains(&format!("parameter `{parameter}`")) && detail.contains(what), "{detail}");
            assert!(detail.contains("must see the same types"), "{detail}");
        }
        other => panic!("expected KernelSignatureMismatch naming `{parameter}`, got {other:?}"),
    }
}

/// Q1, Q2 on the GPU: the first launch of each kernel is refused before anything runs, and
/// stays refused (the check is made once per function and context, and a failed check is not
/// cached as passed); the buffers are untouched.
#[test]
fn q1_q2_gpu_launches_of_kernels_whose_builds_disagree_are_refused() {
    let Some(context) = common::gpu_or_skip("q1_q2_gpu_launches_of_kernels_whose_builds_disagree_are_refused") else { return };
    let stream = Stream::new(&context).unwrap();
    let x = DeviceBuffer::from_slice(&context, &[1u32; 64]).unwrap();
    let mut buf = DeviceBuffer::<u32>::zeroed(&context, 128).unwrap();
    for _ in 0..2 {
        refused(q1_cfg_alias::launch(&stream, LaunchConfig::for_elements(64, 64), &x, &mut buf.slice_mut(..64)), "x", "8 bytes, align 8, in the device build");
    }
    let mut matrix = DeviceBuffer::<u32>::zeroed(&context, 64).unwrap();
    let config = LaunchConfig::new(Dim3 { x: 1, y: 1, z: 1 }, Dim3 { x: 8, y: 8, z: 1 });
    refused(q2_cfg_width::launch(&stream, config, &mut matrix), "out", "(16, 0) in the device build");
    // Same size, another type: refused by the type names.
    refused(q1_same_size_alias::launch(&stream, LaunchConfig::for_elements(64, 64), &x, &mut buf.slice_mut(..64)), "out", "`u32` in the host build");
    // F1: structs whose fields a cfg changes, refused by their layout keys.
    let mut out = DeviceBuffer::<u32>::zeroed(&context, 64).unwrap();
    refused(f1_permuted_fields::launch(&stream, LaunchConfig::for_elements(64, 64), F1Pair { a: 1, b: 2 }, &mut out), "p", "F1Pair` in the host build");
    let elems = DeviceBuffer::from_slice(&context, &[F1Elem { v: 3 }; 64]).unwrap();
    let mut elems_out = DeviceBuffer::<F1Elem>::zeroed(&context, 64).unwrap();
    refused(f1_field_type_by_cfg::launch(&stream, LaunchConfig::for_elements(64, 64), &elems, &mut elems_out), "x", "F1Elem` in the host build");
    let pairs = DeviceBuffer::from_slice(&context, &[F1Pair { a: 1, b: 2 }; 64]).unwrap();
    let mut pairs_out = DeviceBuffer::<F1Pair>::zeroed(&context, 64).unwrap();
    refused(f1_generic_F1Pair::launch(&stream, LaunchConfig::for_elements(64, 64), &pairs, &mut pairs_out), "x", "F1Pair` in the host build");
    // The instance whose builds agree runs.
    let mut bumped = DeviceBuffer::<u32>::zeroed(&context, 64).unwrap();
    f1_generic_u32::launch(&stream, LaunchConfig::for_elements(64, 64), &x, &mut bumped).unwrap();
    stream.synchronize().unwrap();
    assert!(bumped.to_vec().unwrap().iter().all(|&v| v == 2), "the agreeing instance ran");
    assert!(out.to_vec().unwrap().iter().all(|&v| v == 0), "nothing ran");
    assert!(elems_out.to_vec().unwrap().iter().all(|e| e.v == 0), "nothing ran");
    assert!(pairs_out.to_vec().unwrap().iter().all(|p| *p == F1Pair::default()), "nothing ran");
    stream.synchronize().unwrap();
    assert!(buf.to_vec().unwrap().iter().all(|&v| v == 0), "nothing ran");
    assert!(matrix.to_vec().unwrap().iter().all(|&v| v == 0), "nothing ran");
}

/// G13R-4 and G13R-5 (audit 2026-11-28): an output's key mixes in its partition's, and a
/// `same_len` member's its group's number, in both builds alike: a kernel whose builds agree
/// (a `same_len` group, a per-thread output, a matrix output) has the launcher's keys in its
/// module's type table.
#[test]
fn g13r_builds_that_agree_have_equal_keys_with_partitions_and_same_len_groups() {
    use test_kernels::kernel_model::saxpy_safe;
    assert_eq!(host_keys(&saxpy_safe::SIGNATURE), device_keys("saxpy_safe"));
    assert_eq!(host_keys(&q2_cfg_width::SIGNATURE), device_keys("q2_cfg_width"));
    // The group's mark is there: `x` and `y` do not have their plain keys.
    use ferrocuda_device::LayoutKey;
    assert_ne!(host_keys(&saxpy_safe::SIGNATURE)[1], f32::LAYOUT_KEY);
}

/// G17R-1 (audit 2026-11-28e): a `GridSlices` output's `(n, stride)` named by parameters in
/// another order by the device build (`cfg_attr`). Layout and signature text agree (widths from
/// parameters count 0); the output's type key now holds which parameter gives each width, so
/// the device module's key differs from the launcher's. A kernel whose builds agree has equal
/// keys.
#[test]
fn g17r_1_width_parameters_a_cfg_attr_swaps_give_the_device_module_another_key() {
    let (host, device) = (host_keys(&g17r_1_cfg_width_parameters::SIGNATURE), device_keys("g17r_1_cfg_width_parameters"));
    assert_eq!(device_layout("g17r_1_cfg_width_parameters"), g17r_1_cfg_width_parameters::SIGNATURE.layout, "the layout cannot tell them apart");
    assert_ne!(host[0], device[0], "the output's key must hold which parameter gives each width");
    assert_eq!(host[1..], device[1..], "the width parameters themselves agree");
    assert_eq!(host_keys(&g17r_1_width_parameters::SIGNATURE), device_keys("g17r_1_width_parameters"), "builds that agree");
}

/// G17R-1 on the GPU: one slice, the host's `n = 1` and `stride = 1024`, in a one-element view
/// at the start of a 1024-element buffer (4 blocks of 256 threads). The device build's order
/// makes `n = 1024`: before the fix the launch was accepted and 1023 elements past the view were
/// written (said here as a count, printed either way); now it is refused and nothing runs. The
/// kernel whose builds agree runs and writes the view only.
#[test]
fn g17r_1_gpu_a_grid_slices_kernel_whose_width_parameters_differ_is_refused() {
    let Some(context) = common::gpu_or_skip("g17r_1_gpu_a_grid_slices_kernel_whose_width_parameters_differ_is_refused") else { return };
    let stream = Stream::new(&context).unwrap();
    let config = LaunchConfig::new(Dim3 { x: 4, y: 1, z: 1 }, Dim3 { x: 256, y: 1, z: 1 });
    let mut buf = DeviceBuffer::<u32>::zeroed(&context, 1024).unwrap();
    let result = g17r_1_cfg_width_parameters::launch(&stream, config, &mut buf.slice_mut(..1), 1, 1024);
    stream.synchronize().unwrap();
    let written = buf.to_vec().unwrap();
    let past = written[1..].iter().filter(|&&v| v != 0).count();
    println!("G17R-1: the launch gave {result:?}; elements written past the one-element view: {past} of 1023");
    refused(result, "dst", "");
    assert_eq!(past, 0, "the device build wrote past the view");
    let mut agreeing = DeviceBuffer::<u32>::zeroed(&context, 1024).unwrap();
    g17r_1_width_parameters::launch(&stream, config, &mut agreeing.slice_mut(..1), 1, 1024).unwrap();
    stream.synchronize().unwrap();
    let written = agreeing.to_vec().unwrap();
    assert_eq!((written[0], written[1..].iter().filter(|&&v| v != 0).count()), (7, 0), "the agreeing kernel writes its one element");
}

/// G17R-4 (audit 2026-11-28e): a `&TensorMap` parameter that the device build resolves to a
/// 4 KiB type of its own (`use G17rWide as TensorMap` under `cfg(target_arch = "nvptx64")`). The
/// layout held 0 and 0 and the type table 0 for a tensor map, so nothing told the builds apart;
/// now the map type's size, alignment and key are compared like any element type's.
#[test]
fn g17r_4_a_cfg_chosen_tensor_map_type_gives_the_device_module_another_layout() {
    let host = g17r_4_cfg_map_type::SIGNATURE.layout;
    let device = device_layout("g17r_4_cfg_map_type");
    assert_eq!(&host[..3], &[128, 64, 0], "the host build's map: 128 bytes, 64-byte aligned");
    assert_eq!(&device[..3], &[4096, 64, 0], "the device build's type");
    let (host, device) = (host_keys(&g17r_4_cfg_map_type::SIGNATURE), device_keys("g17r_4_cfg_map_type"));
    assert_ne!(host[0], device[0]);
    assert_ne!(device[0], 0, "a tensor map's key is in the device table");
}

/// G17R-4 on the GPU: before the fix the launch was accepted and each thread read the word
/// 4000 bytes past the start of the map's 128-byte copy; now the first launch is refused.
#[test]
fn g17r_4_gpu_a_kernel_whose_tensor_map_type_differs_is_refused() {
    let Some(context) = common::gpu_or_skip("g17r_4_gpu_a_kernel_whose_tensor_map_type_differs_is_refused") else { return };
    let stream = Stream::new(&context).unwrap();
    let data = DeviceBuffer::<u32>::zeroed(&context, 64 * 64).unwrap();
    let map = ferrocuda::TensorMap::tiled_2d(&data, ferrocuda::TensorDataType::U32, 64, 64, 8, 8, ferrocuda::TensorSwizzle::None)
        .unwrap()
        .to_device(&context)
        .unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(&context, 64).unwrap();
    let result = g17r_4_cfg_map_type::launch(&stream, LaunchConfig::for_elements(64, 64), &map, &mut out);
    stream.synchronize().unwrap();
    println!("G17R-4: the launch gave {result:?}; out[0] = {:#x}", out.to_vec().unwrap()[0]);
    refused(result, "map", "");
}
