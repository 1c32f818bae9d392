//! Unit tests of the expansion helpers, and a property test: the macro never panics and
//! always produces parseable tokens, whatever signature it is given.

use proc_macro2::TokenStream;
use quote::quote;

use super::expand;

/// Expands `#[kernel(attr)] item` and checks the output is a valid list of items.
fn expand_ok(attr: TokenStream, item: TokenStream) -> String {
    let out = expand(attr, item.clone());
    let file: Result<syn::File, _> = syn::parse2(out.clone());
    assert!(file.is_ok(), "expansion of {item} is not valid items: {:?}\n{out}", file.err());
    out.to_string()
}

#[test]
fn raw_identifiers_get_their_unraw_symbol() {
    let out = expand_ok(
        quote!(),
        quote!(
            pub fn r#type(mut out: DisjointSlice<u32>) {}
        ),
    );
    assert!(out.contains("pub const SYMBOL : & str = \"type\""), "{out}");
    assert!(out.contains("pub mod r#type"), "{out}");
    let generic = expand_ok(
        quote!(instances(f32)),
        quote!(
            pub fn r#match<T: Pod>(x: &[T]) {}
        ),
    );
    assert!(generic.contains("pub mod match_f32"), "{generic}");
    assert!(generic.contains("\"match_f32\""), "{generic}");
}

#[test]
fn generated_names_cannot_be_spelled_by_users() {
    let out = expand(
        quote!(),
        quote!(
            pub fn hygiene(x: &[u32], __ferrocuda_x_arg: u32, out: AtomicSlice<u32>) {}
        ),
    )
    .to_string();
    assert!(out.contains("reserved for the code #[kernel] generates"), "{out}");
    let out = expand(
        quote!(),
        quote!(
            pub fn k(SYMBOL: u32) {}
        ),
    )
    .to_string();
    assert!(out.contains("cannot be named `SYMBOL`"), "{out}");
    // `stream`, `config`, `module`, `executor` are fine: the generated ones are hygienic.
    let out = expand_ok(
        quote!(),
        quote!(
            pub fn k(stream: u32, config: u32, module: u32, executor: u32, params: u32) {}
        ),
    );
    assert!(!out.contains("compile_error"), "{out}");
}

#[test]
fn mutable_slices_are_refused_with_the_replacements_named() {
    let out = expand(
        quote!(),
        quote!(
            pub fn stale_read(flags: &mut [u32]) {}
        ),
    )
    .to_string();
    assert!(out.contains("DisjointSlice") && out.contains("AtomicSlice") && out.contains("compile_error"), "{out}");
}

#[test]
fn specific_messages_for_common_mistakes() {
    let cases: &[(TokenStream, &str)] = &[
        (
            quote!(
                pub fn k(x: Option<f32>) {}
            ),
            "is not plain data",
        ),
        (
            quote!(
                pub fn k(x: &[f32; 4]) {}
            ),
            "a reference to an array",
        ),
        (
            quote!(
                pub fn k(x: &V) {}
            ),
            "cannot see through aliases",
        ),
        (
            quote!(
                pub fn k(&self) {}
            ),
            "Move it out of the `impl`",
        ),
        (
            quote!(
                pub fn k(x: Self) {}
            ),
            "Move the kernel out of the `impl`",
        ),
        (
            quote!(
                fn k(x: u32);
            ),
            "a trait method cannot be a kernel",
        ),
        (
            quote!(
                pub fn k(x: &[String]) {}
            ),
            "cannot be a slice element",
        ),
        (
            quote!(
                pub fn k(x: DisjointSlice) {}
            ),
            "with the element type",
        ),
    ];
    for (item, message) in cases {
        let out = expand(quote!(), item.clone()).to_string();
        assert!(out.contains(message), "{item}: expected {message:?} in\n{out}");
    }
    let out = expand(
        quote!(instances(f32)),
        quote!(
            pub fn k<T: Pod>(out: DisjointSlice<T>) {
                let s = shared_array![T; 32];
            }
        ),
    )
    .to_string();
    assert!(out.contains("`shared_array!` cannot use the kernel's type parameter `T`"), "{out}");
    let out = expand(
        quote!(instances(a::X, b::X)),
        quote!(
            pub fn k<T: Pod>(out: DisjointSlice<T>) {}
        ),
    )
    .to_string();
    assert!(out.contains("two instances have the PTX symbol `k_X`"), "{out}");
}

#[test]
fn launch_bounds_become_one_marker_per_entry() {
    let out = expand_ok(
        quote!(instances(f32, f64), launch_bounds(256, 2)),
        quote!(
            pub fn k<T: Pod>(out: DisjointSlice<T>) {}
        ),
    );
    assert!(out.contains("launch_bounds ! (k_f32 , 256 , 2)") && out.contains("launch_bounds ! (k_f64 , 256 , 2)"), "{out}");
    let out = expand_ok(
        quote!(reqntid(128)),
        quote!(
            pub fn k(out: DisjointSlice<f32>) {}
        ),
    );
    assert!(out.contains("launch_bounds ! (reqntid k , 128)"), "{out}");
    let out = expand(
        quote!(launch_bounds(1, 2, 3)),
        quote!(
            pub fn k(out: DisjointSlice<f32>) {}
        ),
    )
    .to_string();
    assert!(out.contains("write `launch_bounds(max_threads)`"), "{out}");
}

/// Session 23 (issue 30, tenth port's gap 6): `reqntid(threads, min_blocks)` is `.reqntid` with
/// `.minnctapersm`: the marker carries both, while the entry's block-shape assumption and the
/// launchers' requirement take the thread count alone.
#[test]
fn reqntid_with_min_blocks_marks_both_and_assumes_the_count_alone() {
    let out = expand_ok(
        quote!(reqntid(256, 4)),
        quote!(
            pub fn k(out: DisjointSlice<f32>) {}
        ),
    );
    assert!(out.contains("launch_bounds ! (reqntid k , 256 , 4)"), "{out}");
    assert!(out.contains("__FERROCUDA_REQNTID : __ferrocuda_core :: primitive :: u32 = 256 ;"), "the assumption is of 256 threads: {out}");
    assert!(out.contains("LaunchRequirements :: reqntid (256)"), "the launchers require 256 threads: {out}");
    let out = expand(
        quote!(reqntid(256, 4, 1)),
        quote!(
            pub fn k(out: DisjointSlice<f32>) {}
        ),
    )
    .to_string();
    assert!(out.contains("`reqntid(threads, min_blocks_per_sm)`"), "{out}");
}

#[test]
fn cluster_dims_become_a_marker_per_entry_and_the_launchers_constant() {
    let out = expand_ok(
        quote!(instances(f32, f64), cluster_dims(2)),
        quote!(
            pub fn k<T: Pod>(out: DisjointSlice<T>) {}
        ),
    );
    assert!(out.contains("cluster_dims ! (k_f32 , 2 , 1u32 , 1u32)") && out.contains("cluster_dims ! (k_f64 , 2 , 1u32 , 1u32)"), "{out}");
    assert!(
        out.contains("CLUSTER_DIMS : :: core :: option :: Option < :: ferrocuda_host :: __private :: Dim3 > = :: core :: option :: Option :: Some"),
        "{out}"
    );
    assert!(out.contains("compiled_cluster (self :: SYMBOL"), "the launchers apply it: {out}");
    let out = expand_ok(
        quote!(),
        quote!(
            pub fn k(out: DisjointSlice<f32>) {}
        ),
    );
    assert!(!out.contains("compiled_cluster"), "a kernel without cluster dims keeps its launch path: {out}");
    assert!(
        !out.contains("cluster_dims !")
            && out.contains("CLUSTER_DIMS : :: core :: option :: Option < :: ferrocuda_host :: __private :: Dim3 > = :: core :: option :: Option :: None"),
        "{out}"
    );
    for bad in [quote!(cluster_dims()), quote!(cluster_dims(1, 2, 3, 4))] {
        let out = expand(
            bad,
            quote!(
                pub fn k(out: DisjointSlice<f32>) {}
            ),
        )
        .to_string();
        assert!(out.contains("write `cluster_dims(x)`"), "{out}");
    }
}

#[test]
fn errors_keep_stub_launchers() {
    let out = expand_ok(
        quote!(),
        quote!(
            pub fn saxpy(a: f32, x: &[f32], y: &mut [f32]) {}
        ),
    );
    assert!(out.contains("compile_error"), "{out}");
    assert!(out.contains("pub mod saxpy") && out.contains("pub fn launch"), "no stub launcher: {out}");
    let out = expand_ok(
        quote!(instances(f32, f64)),
        quote!(
            pub fn scale<T>(x: &mut [T]) {}
        ),
    );
    assert!(out.contains("pub mod scale_f32") && out.contains("pub mod scale_f64"), "{out}");
}

#[test]
fn device_only_hints_for_host_code_in_a_kernel() {
    let out = expand_ok(
        quote!(),
        quote!(
            pub fn k(out: AtomicSlice<u32>) {
                let v = vec![1u32];
                let s = std::env::var("X");
            }
        ),
    );
    assert!(out.contains("`vec!` allocates") && out.contains("`std` does not exist on the GPU"), "{out}");
    // Gated code is the user's business.
    let out = expand_ok(
        quote!(),
        quote!(
            pub fn k(out: AtomicSlice<u32>) {
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    let v = vec![1u32];
                }
            }
        ),
    );
    assert!(!out.contains("allocates"), "{out}");
}

#[test]
fn fingerprint_covers_element_types_and_the_unraw_symbol() {
    let a = expand_ok(
        quote!(instances(u32, u64)),
        quote!(
            pub fn ones<T: Pod>(out: DisjointSlice<T>) {}
        ),
    );
    let canonical = |s: &str| ferrocuda_types::fingerprint(s).to_string() + "u64";
    assert!(a.contains(&canonical("ones_u32(DisjointSlice < u32 >)")), "{a}");
    assert!(a.contains(&canonical("ones_u64(DisjointSlice < u64 >)")), "{a}");
    let b = expand_ok(
        quote!(),
        quote!(
            pub fn r#type(x: &[f32]) {}
        ),
    );
    assert!(b.contains(&canonical("type(& [f32])")) && b.contains("\"__ferrocuda_fingerprint_type\""), "{b}");
}

/// A small deterministic generator (no dependency): xorshift.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

/// Thousands of random signatures (good and bad types, names, attributes, qualifiers): the
/// expansion never panics and its output always parses as items.
#[test]
fn never_panics_on_random_signatures() {
    const NAMES: &[&str] = &[
        "x",
        "y",
        "out",
        "r#type",
        "r#match",
        "stream",
        "config",
        "module",
        "executor",
        "SYMBOL",
        "__ferrocuda_x_ptr",
        "__x_arg",
        "self",
        "_",
        "T",
        "params",
        "launch",
    ];
    const TYPES: &[&str] = &[
        "f32",
        "u32",
        "bool",
        "usize",
        "T",
        "Self",
        "&[f32]",
        "&[T]",
        "&mut [f32]",
        "&mut [T]",
        "&[f32; 4]",
        "[f32; 4]",
        "[T; 2]",
        "&V",
        "&&[f32]",
        "*const f32",
        "*mut T",
        "*mut *mut u8",
        "DisjointSlice<f32>",
        "DisjointSlice<T>",
        "DisjointSlice",
        "DisjointSlice<f32, u32>",
        "AtomicSlice<u32>",
        "AtomicSlice<T>",
        "Option<f32>",
        "String",
        "&[String]",
        "Vec<u8>",
        "&'a [f32]",
        "(f32, f32)",
        "fn()",
        "impl Copy",
        "dyn Copy",
        "!",
        "_",
        "my::Pair<T>",
        "<T as X>::Y",
        "&mut f32",
        "&str",
        "&[&str]",
        "&[[u8; 3]]",
        "DisjointSlice<&f32>",
        "AtomicSlice<[u32; 2]>",
    ];
    const ATTRS: &[&str] = &[
        "",
        "",
        "launch_bounds(256, 2)",
        "reqntid(32), instances(f32)",
        "launch_bounds()",
        "instances(f32)",
        "instances(f32, f64)",
        "instances(u32, u32)",
        "instances()",
        "instance(f32)",
        "instances(a::X, b::X)",
        "instances([f32; 4], (u8, u8))",
        "nonsense",
        "instances(f32) extra",
    ];
    const PREFIX: &[&str] = &["pub fn", "pub fn", "pub unsafe fn", "fn", "pub async fn", "pub const fn", "pub extern \"C\" fn"];
    const GENERICS: &[&str] = &["", "", "<T: Pod>", "<T>", "<T, U>", "<'a>", "<const N: usize>"];
    const NAMES_FN: &[&str] = &["k", "r#type", "saxpy", "r#match", "launch"];
    const RETURNS: &[&str] = &["", "", "-> u32"];
    const BODIES: &[&str] = &["{}", "{ let s = shared_array![T; 4]; }", "{ let v = vec![1]; }", "{ std::process::exit(0) }"];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..3000 {
        let count = (rng.next() % 5) as usize;
        let params: Vec<String> = (0..count)
            .map(|_| {
                let mutability = if rng.next().is_multiple_of(4) { "mut " } else { "" };
                format!("{mutability}{}: {}", rng.pick(NAMES), rng.pick(TYPES))
            })
            .collect();
        let item =
            format!("{} {}{}({}) {} {}", rng.pick(PREFIX), rng.pick(NAMES_FN), rng.pick(GENERICS), params.join(", "), rng.pick(RETURNS), rng.pick(BODIES));
        let attr = rng.pick(ATTRS);
        let (Ok(item), Ok(attr)) = (item.parse::<TokenStream>(), attr.parse::<TokenStream>()) else { continue };
        let out = std::panic::catch_unwind(|| expand(attr.clone(), item.clone()));
        let out = out.unwrap_or_else(|_| panic!("#[kernel({attr})] {item} panicked"));
        assert!(syn::parse2::<syn::File>(out.clone()).is_ok(), "#[kernel({attr})] {item} expanded to tokens that do not parse:\n{out}");
    }
}

mod helpers {
    use syn::{Ident, Type, parse_quote};

    use super::super::lower::{generated, lower};
    use super::super::parse::{Param, ParamKind, classify, instance_symbol, substitute, type_text};

    fn kind(ty: Type) -> &'static str {
        match classify(&ty) {
            Ok(ParamKind::Scalar { .. }) => "scalar",
            Ok(ParamKind::Value) => "value",
            Ok(ParamKind::Slice { .. }) => "input",
            Ok(ParamKind::OptionalSlice { .. }) => "optional input",
            Ok(ParamKind::Output { .. }) => "output",
            Ok(ParamKind::Pointer { .. }) => "pointer",
            Ok(ParamKind::TensorMap { .. }) => "tensor map",
            Err(_) => "error",
        }
    }

    /// G13-1: an output lives for its launch only; its lifetime (the launch's borrow) is left
    /// out, so the kernel body is generic over it. A written lifetime, `'static` or any other,
    /// is refused with the rule; the elided forms are outputs.
    #[test]
    fn g13_1_an_output_written_with_a_lifetime_is_refused() {
        for ty in [parse_quote!(AtomicSlice<'static, u32>), parse_quote!(DisjointSlice<'a, f32>), parse_quote!(global::PerWarpRow<'_, f32>)] {
            let error = classify(&ty).err().unwrap_or_else(|| panic!("`{}` was accepted", type_text(&ty)));
            assert!(error.to_string().starts_with("leave out lifetimes on kernel parameters"), "{error}");
        }
        assert_eq!(kind(parse_quote!(AtomicSlice<u32>)), "output");
        assert_eq!(kind(parse_quote!(DisjointSlice<f32, BlockRows>)), "output");
    }

    #[test]
    fn classify_sorts_every_parameter_kind() {
        assert_eq!(kind(parse_quote!(f32)), "scalar");
        assert_eq!(kind(parse_quote!(Pair)), "value");
        assert_eq!(kind(parse_quote!([f32; 4])), "value");
        assert_eq!(kind(parse_quote!(&[f32])), "input");
        assert_eq!(kind(parse_quote!(&TensorMap)), "tensor map");
        assert_eq!(kind(parse_quote!(&ferrocuda_device::tma::TensorMap)), "tensor map");
        assert_eq!(kind(parse_quote!(&mut TensorMap)), "error");
        assert_eq!(kind(parse_quote!(&StoreMap)), "tensor map");
        assert_eq!(kind(parse_quote!(&mut StoreMap)), "error");
        assert_eq!(kind(parse_quote!(&TensorMap<u8>)), "error");
        assert_eq!(kind(parse_quote!(DisjointSlice<f32>)), "output");
        assert_eq!(kind(parse_quote!(ferrocuda_device::global::DisjointSlice<u8>)), "output");
        assert_eq!(kind(parse_quote!(DisjointChunks<u8, 4>)), "output");
        assert_eq!(kind(parse_quote!(DisjointPlanes<f32, 24>)), "output");
        assert_eq!(kind(parse_quote!(PerBlock<[u32; 3]>)), "output");
        assert_eq!(kind(parse_quote!(UncheckedSlice<f32>)), "output");
        assert_eq!(kind(parse_quote!(AtomicSlice<u32>)), "output");
        assert_eq!(kind(parse_quote!(NonZeroU32)), "scalar");
        assert_eq!(kind(parse_quote!(core::num::NonZeroU64)), "scalar");
        assert_eq!(kind(parse_quote!(NonZero<u32>)), "scalar");
        assert_eq!(kind(parse_quote!(*mut f32)), "pointer");
        assert_eq!(kind(parse_quote!(Option<&[u8]>)), "optional input");
        assert_eq!(kind(parse_quote!(core::option::Option<&[F4]>)), "optional input");
        for bad in [parse_quote!(&mut [f32]), parse_quote!(&f32), parse_quote!(Option<u32>), parse_quote!(&[&str]), parse_quote!(DisjointSlice)] {
            assert_eq!(kind(bad), "error");
        }
    }

    /// Issue 30: `Option<&[T]>` is the one optional kind; each other `Option` of a reference
    /// is refused with what to write (an optional output, a single value, a lifetime).
    #[test]
    fn p30_only_an_optional_slice_is_an_optional_input() {
        for (ty, message) in [
            (parse_quote!(Option<&mut [f32]>), "a kernel cannot take `Option<&mut [T]>`"),
            (parse_quote!(Option<&f32>), "an optional input is a slice: write `Option<&[f32]>`"),
            (parse_quote!(Option<&'static [f32]>), "leave out lifetimes"),
            (parse_quote!(Option<f32>), "for an optional input (CUDA's `const T*` that may be `nullptr`) write `Option<&[T]>`"),
            (parse_quote!(Option<&[&str]>), "slice elements must be plain data"),
        ] {
            let ty: Type = ty;
            let error = classify(&ty).err().unwrap_or_else(|| panic!("`{}` was accepted", type_text(&ty)));
            assert!(error.to_string().contains(message), "`{}`: {error}", type_text(&ty));
        }
    }

    #[test]
    fn instance_symbols_are_valid_identifiers() {
        let base: Ident = parse_quote!(r#type);
        assert_eq!(instance_symbol(&base, &parse_quote!(f32)).to_string(), "type_f32");
        assert_eq!(instance_symbol(&parse_quote!(scale), &parse_quote!(my::Pair<T>)).to_string(), "scale_Pair");
        assert_eq!(instance_symbol(&parse_quote!(scale), &parse_quote!([f32; 4])).to_string(), "scale_f32___4");
        assert_eq!(instance_symbol(&parse_quote!(scale), &parse_quote!(())).to_string(), "scale_");
    }

    #[test]
    fn substitution_reaches_inside_types() {
        let t: Ident = parse_quote!(T);
        let with: Type = parse_quote!(f64);
        let text = |ty: Type| type_text(&substitute(&ty, &t, &with)).replace(' ', "");
        assert_eq!(text(parse_quote!(DisjointSlice<T>)), "DisjointSlice<f64>");
        assert_eq!(text(parse_quote!([T; 2])), "[f64;2]");
        assert_eq!(text(parse_quote!(Tuple)), "Tuple");
    }

    #[test]
    fn generated_names_are_prefixed_unraw_and_mixed_site() {
        let name = generated(&parse_quote!(r#type), "ptr");
        assert_eq!(name.to_string(), "__ferrocuda_type_ptr");
        // (Hygiene itself shows only inside rustc: gpu_kernels::kernel_model::hygiene takes
        // parameters named `stream`, `config`, `module`, `executor`, `params` and runs.)
    }

    #[test]
    fn every_slice_kind_is_two_ptx_parameters_and_values_one() {
        let param = |ty: Type| {
            let kind = classify(&ty).expect("a valid parameter");
            Param { name: parse_quote!(x), mutable: false, ty, kind, cols: None, width_consts: Vec::new() }
        };
        for ty in [parse_quote!(&[f32]), parse_quote!(DisjointSlice<f32>), parse_quote!(DisjointChunks<f32, 2>), parse_quote!(AtomicSlice<f32>)] {
            let lowered = lower(&param(ty));
            assert_eq!((lowered.entry_params.len(), lowered.launch_pointers.len(), lowered.param_sizes.len()), (2, 2, 2));
        }
        for ty in [parse_quote!(f32), parse_quote!(Pair), parse_quote!(*const f32)] {
            let lowered = lower(&param(ty));
            assert_eq!((lowered.entry_params.len(), lowered.launch_pointers.len(), lowered.param_sizes.len()), (1, 1, 1));
        }
    }

    /// N5: a scalar's spelling only picks the primitive the generated code then requires the
    /// written type to be; the check names the absolute path, so a local `f64` alias or a
    /// shadowing `usize` import is compared with the real primitive.
    #[test]
    fn n5_a_scalar_is_checked_against_the_absolute_primitive() {
        let param = |ty: Type| {
            let kind = classify(&ty).expect("a valid parameter");
            Param { name: parse_quote!(x), mutable: false, ty, kind, cols: None, width_consts: Vec::new() }
        };
        for (ty, primitive) in [
            (parse_quote!(f64), "::core::primitive::f64"),
            (parse_quote!(usize), "::core::primitive::usize"),
            (parse_quote!(NonZeroU32), "::core::num::NonZeroU32"),
            (parse_quote!(NonZero<u64>), "::core::num::NonZero<::core::primitive::u64>"),
        ] {
            // The check is the bound of the launch parameter's constructor (G17R-2's residual).
            let check = lower(&param(ty)).launch_pointers.iter().map(|c| c.to_string().replace(' ', "")).collect::<String>();
            assert!(check.contains("KernelParam::scalar::<"), "{check}");
            assert!(check.contains(primitive), "{check} should name {primitive}");
        }
        // A struct by value is checked `Pod` (`KernelValue`).
        let check = lower(&param(parse_quote!(Pair))).launch_pointers.iter().map(|c| c.to_string().replace(' ', "")).collect::<String>();
        assert!(check.contains("KernelParam::value::<Pair>"), "{check}");
    }
}

/// N14: generated code names `::core::primitive` types, never a bare `usize`/`u64` that a
/// crate could shadow.
#[test]
fn n14_generated_code_names_primitives_by_absolute_path() {
    let out = expand_ok(
        quote!(),
        quote!(
            pub fn k(n: u32, x: &[f32], mut y: DisjointSlice<f32>, p: *const f32) {}
        ),
    );
    let tokens: Vec<&str> = out.split_whitespace().collect();
    for (i, word) in tokens.iter().enumerate() {
        if matches!(*word, "usize" | "u64") {
            assert_eq!(tokens[i - 1], "::", "bare `{word}` in the expansion: {out}");
            assert_eq!(tokens[i - 2], "primitive", "`{word}` not under `::core::primitive`: {out}");
        }
    }
}

/// N14: an attribute on a parameter (`#[cfg]` kept the parameter in one build and not in
/// another, giving E0061 at `#[kernel]`) is refused with a message naming it.
#[test]
fn n14_attributes_on_parameters_are_refused() {
    let out = expand(
        quote!(),
        quote!(
            pub fn k(#[cfg(feature = "extra")] extra: u32, mut y: DisjointSlice<f32>) {}
        ),
    )
    .to_string();
    assert!(out.contains("parameters cannot have attributes"), "{out}");
}

/// N14: the "returns nothing" message names the output types the macro accepts, not the
/// `&mut [T]` it refuses.
#[test]
fn n14_the_return_value_message_names_the_output_types() {
    let out = expand(
        quote!(),
        quote!(
            pub fn k(x: &[f32]) -> f32 {
                x[0]
            }
        ),
    )
    .to_string();
    assert!(out.contains("DisjointSlice<T>") && out.contains("AtomicSlice<T>"), "{out}");
    assert!(!out.contains("`&mut [T]` parameter"), "{out}");
}

/// Issue 21: a `&TensorMap` (or `&StoreMap`) parameter is one PTX pointer; the GPU launchers
/// take a `DeviceTensorMap` (`&mut`, checked to be made for writes, for a store map) and
/// declare both the map's copy and the memory behind it to the door; the CPU launcher (which
/// takes a raw emulated map) is `unsafe`.
#[test]
fn a_tensor_map_parameter_declares_its_memory_and_makes_the_cpu_launcher_unsafe() {
    let out = expand_ok(
        quote!(),
        quote!(
            pub fn copy_box(src: &TensorMap, dst: &StoreMap, n: u32) {}
        ),
    );
    let compact: String = out.split_whitespace().collect();
    assert!(compact.contains("src:&::ferrocuda_host::__private::DeviceTensorMap<'_>"), "{out}");
    // Both accesses from the `MapArg` made of the real map, as its address is (G17R-2's residual).
    assert!(
        compact.contains(
            "__ferrocuda_src_map.map_access(\"src\"),__ferrocuda_src_map.memory_access(\"src\"),__ferrocuda_dst_map.map_access(\"dst\"),__ferrocuda_dst_map.memory_access(\"dst\")"
        ),
        "{out}"
    );
    assert!(compact.contains("KernelParam::tensor_map(&__ferrocuda_src_map)"), "{out}");
    assert!(compact.contains("BufferAccess<'_>;4usize]") || compact.contains("BufferAccess<'_>;4]"), "{out}");
    assert!(compact.contains("require_tensor_map::<TensorMap>()"), "{out}");
    assert!(compact.contains("require_store_map::<StoreMap>()"), "{out}");
    assert!(compact.contains("dst:&mut::ferrocuda_host::__private::DeviceTensorMap<'_>"), "a store map is borrowed exclusively: {out}");
    assert!(compact.contains("MapArg::store(dst,self::SYMBOL,\"dst\")?"), "a store map must be checked for writes: {out}");
    assert!(compact.contains("pubunsafefnlaunch_cpu"), "the CPU launcher must be unsafe: {out}");
    assert!(!compact.contains("pubunsafefnlaunch("), "the GPU launcher stays safe: {out}");
    assert!(compact.contains("param_sizes:&[::core::mem::size_of::<::core::primitive::u64>(),::core::mem::size_of::<::core::primitive::u64>(),"), "{out}");
}

/// The contents of every `unsafe { .. }` block in `tokens` (at any depth).
fn unsafe_blocks(tokens: TokenStream) -> Vec<TokenStream> {
    use proc_macro2::{Delimiter, TokenTree};
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    let mut found = Vec::new();
    for (k, tree) in trees.iter().enumerate() {
        if let TokenTree::Group(group) = tree {
            let after_unsafe = k > 0 && matches!(&trees[k - 1], TokenTree::Ident(i) if i == "unsafe");
            if after_unsafe && group.delimiter() == Delimiter::Brace {
                found.push(group.stream());
            }
            found.extend(unsafe_blocks(group.stream()));
        }
    }
    found
}

fn idents(tokens: TokenStream) -> Vec<String> {
    tokens
        .into_iter()
        .flat_map(|t| match t {
            proc_macro2::TokenTree::Ident(i) => vec![i.to_string()],
            proc_macro2::TokenTree::Group(g) => idents(g.stream()),
            _ => vec![],
        })
        .collect()
}

/// Regression (P1, audit 2026-11-27): a plain kernel's body was pasted into the generated
/// `unsafe extern "ptx-kernel" fn`, and a `cols(..)` width expression into the generated
/// `unsafe { .. }` that builds the output (device and CPU launcher alike). Now no token the user
/// wrote (body, attribute expressions, types, the instance type) is inside any `unsafe` block
/// the macro writes, in every form; only parameter names appear there, as plain variables, and
/// only the `unsafe fn` kernel's call is in one. The body is the user's own function, emitted
/// once for both sides, and each entry calls it.
#[test]
fn p1_no_user_written_token_is_inside_generated_unsafe() {
    let body = quote!({
        let user_body_marker = UserBodyType::user_call();
        user_body_marker.touch();
    });
    let forms: Vec<(TokenStream, TokenStream)> = vec![
        (quote!(), quote!(pub fn plain(x: &[UserElem], mut out: DisjointSlice<UserElem>) #body)),
        (quote!(instances(UserInstance, f32)), quote!(pub fn generic<T: Pod>(x: &[T], mut out: DisjointSlice<T>) #body)),
        (quote!(cluster_dims(user_cluster_x())), quote!(pub fn cluster(mut out: DisjointSlice<u32>) #body)),
        (quote!(launch_bounds(user_threads(), user_blocks())), quote!(pub fn bounded(mut out: DisjointSlice<u32>) #body)),
        (quote!(cols(out = user_width_call())), quote!(pub fn matrix(mut out: DisjointMatrix<UserElem>) #body)),
        (quote!(cols(out = width), same_len(x, out)), quote!(pub fn matrix_param(width: u32, x: &[u32], mut out: DisjointMatrix<u32>) #body)),
        (quote!(), quote!(pub unsafe fn raw(p: *mut UserElem, v: UserValue) #body)),
        (quote!(), quote!(pub fn optional(x: Option<&[UserElem]>, mut out: DisjointSlice<u32>) #body)),
    ];
    let user_words = [
        "user_body_marker",
        "UserBodyType",
        "user_call",
        "touch",
        "UserElem",
        "UserInstance",
        "user_cluster_x",
        "user_threads",
        "user_blocks",
        "user_width_call",
        "UserValue",
    ];
    for (attr, item) in forms {
        let out = expand(attr.clone(), item.clone());
        assert!(syn::parse2::<syn::File>(out.clone()).is_ok(), "{out}");
        let blocks = unsafe_blocks(out.clone());
        assert!(!blocks.is_empty(), "the rebuilds of {item} are `unsafe`");
        for block in &blocks {
            let words = idents(block.clone());
            for user in user_words {
                assert!(!words.iter().any(|w| w == user), "`{user}` inside generated `unsafe {{ {block} }}` for #[kernel({attr})] {item}");
            }
        }
        // The body appears exactly once: in the user's function, not in an entry.
        let text = out.to_string();
        assert_eq!(text.matches("user_body_marker . touch").count(), 1, "{text}");
        // No `unsafe extern` entry holds a block with the body.
        assert!(!text.contains("#[allow(unused_unsafe)]"), "{text}");
    }
}

/// P13: `name = ".."` gives the PTX symbol (a generic kernel's base name) while the launcher
/// module keeps the function's name, so two kernels named alike in two modules can both be
/// entries of one PTX module. The name must be an identifier.
#[test]
fn p13_a_kernel_name_sets_the_ptx_symbol_and_keeps_the_launcher_module() {
    let out = expand_ok(
        quote!(name = "k_rows"),
        quote!(
            pub fn k(mut out: DisjointSlice<u32>) {}
        ),
    );
    assert!(out.contains("pub mod k {"), "{out}");
    assert!(out.contains("pub const SYMBOL : & str = \"k_rows\""), "{out}");
    assert!(out.contains("extern \"ptx-kernel\" fn k_rows ("), "{out}");
    assert!(out.contains("\"__ferrocuda_fingerprint_k_rows\""), "{out}");
    assert!(out.contains("macro_rules ! ptx_entry_k_rows_is_defined_by_two_kernels_rename_one"), "{out}");
    assert!(out.contains("let __ferrocuda_kernel = self :: k ;"), "{out}");

    let generic = expand_ok(
        quote!(instances(f32), name = "scaled", launch_bounds(128)),
        quote!(
            pub fn scale<T: Pod>(mut out: DisjointSlice<T>) {}
        ),
    );
    assert!(generic.contains("pub mod scale_f32 {"), "{generic}");
    assert!(generic.contains("pub const SYMBOL : & str = \"scaled_f32\""), "{generic}");
    assert!(generic.contains("launch_bounds ! (scaled_f32 , 128 , 0)"), "{generic}");

    for bad in [quote!(name = "type"), quote!(name = "1st"), quote!(name = "__ferrocuda_k"), quote!(name = "a-b")] {
        let out = expand(
            bad.clone(),
            quote!(
                pub fn k(mut out: DisjointSlice<u32>) {}
            ),
        )
        .to_string();
        assert!(out.contains("gives the kernel's PTX symbol: an identifier"), "#[kernel({bad})]: {out}");
    }
}

/// Q1, Q2: the layout of each parameter is emitted as constant expressions of the resolved
/// types (not of their spelling): in the launcher's `SIGNATURE` and as the device global
/// `__ferrocuda_layout_<symbol>`, three words per parameter, with the constant widths.
#[test]
fn q1_q2_layout_is_computed_from_the_types_on_each_build() {
    let out = expand_ok(
        quote!(cols(out = 8)),
        quote!(
            pub fn k(x: &[Elem], n: u32, mut out: DisjointMatrix<Elem>) {}
        ),
    );
    assert!(out.contains("\"__ferrocuda_layout_k\""), "{out}");
    assert!(out.contains("static LAYOUT : [:: core :: primitive :: u64 ; 9usize]"), "{out}");
    assert!(out.contains(":: core :: mem :: size_of :: < Elem > () as :: core :: primitive :: u64"), "{out}");
    assert!(out.contains(":: core :: mem :: align_of :: < Elem > () as :: core :: primitive :: u64"), "{out}");
    assert!(out.contains("(__FERROCUDA_COLS_k_out_0 as :: core :: primitive :: u64) << 0u32"), "{out}");
    assert!(out.contains("param_names : & [\"x\" , \"n\" , \"out\"]"), "{out}");
    // One layout in the device global, one in the launcher's signature.
    assert_eq!(out.matches(":: core :: mem :: size_of :: < Elem > ()").count(), 4, "{out}");
}

/// Q3: a constant `cols(..)` width is bound in a `const` item of its own, beside the kernel,
/// so the user's expression is never inside the generated `unsafe fn` entry; the entry and
/// the launchers name the item.
#[test]
fn q3_a_constant_width_is_a_const_item_outside_the_entry() {
    let out = expand_ok(
        quote!(cols(out = WIDTH * 2)),
        quote!(
            pub fn k(mut out: DisjointMatrix<u32>) {}
        ),
    );
    assert!(out.contains("const __FERROCUDA_COLS_k_out_0 : :: core :: primitive :: u32 = WIDTH * 2 ;"), "{out}");
    assert_eq!(out.matches("WIDTH * 2").count(), 1, "the expression appears once, in its const item: {out}");
    let entry = &out[out.find("extern \"ptx-kernel\"").expect("an entry")..];
    assert!(entry.contains("__FERROCUDA_COLS_k_out_0"), "{entry}");
    // A width given by a parameter stays that parameter, and is not part of the layout.
    let by_param = expand_ok(
        quote!(cols(out = n)),
        quote!(
            pub fn k(n: u32, mut out: DisjointMatrix<u32>) {}
        ),
    );
    assert!(!by_param.contains("__FERROCUDA_COLS"), "{by_param}");
}

/// E6 (audit 2026-11-27e): attribute values outside what a GPU can run are compile errors at
/// the value, naming the limit (`reqntid(0)` used to reach ptxas and be reported as a
/// code-generation bug; `launch_bounds(0)` vanished; `cluster_dims(0)` and `(16)` built kernels
/// no launch accepts). Values at the limits still expand.
#[test]
fn e6_kernel_attribute_values_outside_what_a_gpu_runs_are_compile_errors() {
    let item = || {
        quote!(
            pub fn k(out: DisjointSlice<f32>) {}
        )
    };
    let refused = |attr: TokenStream, expected: &str| {
        let out = expand(attr.clone(), item()).to_string();
        assert!(out.contains("compile_error") && out.contains(expected), "{attr}: {out}");
    };
    refused(quote!(reqntid(0)), "0 threads is outside 1..=1024");
    refused(quote!(launch_bounds(0)), "for no bound, leave `launch_bounds` out");
    refused(quote!(launch_bounds(4096)), "4096 threads is outside 1..=1024");
    refused(quote!(launch_bounds(128, 0)), "0 blocks per SM is outside 1..=32");
    refused(quote!(launch_bounds(128, 64)), "64 blocks per SM is outside 1..=32");
    refused(quote!(launch_bounds(1024, 4)), "more than the 2048 one SM holds");
    refused(quote!(cluster_dims(0)), "a cluster dimension of 0 blocks");
    refused(quote!(cluster_dims(16)), "a cluster of 16 blocks is more than the portable limit of 8");
    refused(quote!(cluster_dims(2, 2, 4)), "a cluster of 16 blocks");
    for attr in
        [quote!(reqntid(1024)), quote!(launch_bounds(1024, 2)), quote!(launch_bounds(64, 32)), quote!(cluster_dims(2, 2, 2)), quote!(launch_bounds(THREADS))]
    {
        let out = expand_ok(attr.clone(), item());
        assert!(!out.contains("compile_error"), "{attr}: {out}");
    }
}

/// Session 24: `ftz` (a word, combined with other arguments) makes the entry write the builder's
/// marker first; without it there is none. `cols(out = (t, t, nh))`: three widths for a
/// `PermutedRows` output, passed as the shape tuple, a constant third width rotated into the
/// layout word.
#[test]
fn s24_ftz_marks_the_entry_and_cols_take_three_widths() {
    let item = quote!(
        pub fn k(mut out: DisjointSlice<f32, PermutedRows>, t: u32, nh: u32) {}
    );
    let flushed = expand_ok(quote!(cols(out = (t, t, nh)), ftz), item.clone());
    let entry = &flushed[flushed.find("extern \"ptx-kernel\"").expect("an entry")..];
    assert!(entry.contains("__flush_denormals ()"), "{entry}");
    assert!(flushed.contains("(t , t , nh)"), "{flushed}");
    let plain = expand_ok(quote!(cols(out = (t, t, 4))), item);
    assert!(!plain.contains("__flush_denormals"), "{plain}");
    assert!(plain.contains("(__FERROCUDA_COLS_k_out_2 as :: core :: primitive :: u64) . wrapping_mul (0x9e37_79b9_7f4a_7c15)"), "{plain}");
}

/// G24S-2 (audit 2026-11-29g): the layout word of a three-width `cols(..)` ORed a rotated third
/// width over the first two, so `(4, 1, 65536)` and `(4, 0, 65536)` gave one word and a
/// `cfg`-chosen radix passed the host/device comparison. The words are now XORed with the third
/// multiplied by an odd constant; this is the word the generated expression computes.
#[test]
fn g24s2_the_reviews_colliding_width_triples_now_give_different_layout_words() {
    let item = quote!(
        pub fn k(mut out: DisjointSlice<f32, PermutedRows>) {}
    );
    let out = expand_ok(quote!(cols(out = (4, 1, 65536))), item);
    assert!(out.contains("^ (__FERROCUDA_COLS_k_out_2 as :: core :: primitive :: u64) . wrapping_mul"), "{out}");
    let word = |w: [u64; 3]| w[0] ^ (w[1] << 32) ^ w[2].wrapping_mul(0x9e37_79b9_7f4a_7c15);
    assert_ne!(word([4, 1, 65536]), word([4, 0, 65536]));
    assert_ne!(word([4, 1, 0]), word([4, 0, 0]));
}
