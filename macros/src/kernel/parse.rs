//! Reading and checking a `#[kernel]` function's signature and attribute arguments.

use proc_macro2::{Group, TokenStream, TokenTree};
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{FnArg, GenericParam, Ident, ItemFn, Pat, ReturnType, Token, Type};

/// How one parameter crosses from host to device.
#[derive(Clone)]
pub enum ParamKind {
    /// A primitive passed by value: an integer, float, `bool` or `NonZero` integer. The
    /// `TokenStream` is the type's absolute path (`::core::primitive::u32`,
    /// `::core::num::NonZeroU32`): the generated code checks that the written type is that
    /// type, so an alias named like a primitive (`type f64 = &'static u64`) is refused (N5).
    Scalar { primitive: TokenStream },
    /// Any other type passed by value: must be a `#[repr(C)]` bytemuck `Pod` struct or array
    /// (checked on the host by a trait bound spanned at the type).
    Value,
    /// `&[T]`: read-only device slice (pointer + length), `T: Pod`.
    Slice { elem: Type },
    /// `Option<&[T]>`: an optional read-only device slice, CUDA's `const T*` that may be
    /// `nullptr`. The same two PTX parameters as `&[T]`; `None` travels as the null address
    /// (the entry's pointer is an `Option<&[T; 0]>`, whose `None` is null), so the kernel's one
    /// test of the `Option` is nvcc's null test, and safe code cannot read through `None`.
    OptionalSlice { elem: Type },
    /// An output (pointer + length): `DisjointSlice<T>`, `DisjointChunks<T, N>`,
    /// `DisjointPlanes<T, P>`, `PerBlock<T>` or `AtomicSlice<T>`, built on the device through
    /// its `KernelOutput` impl (which the generated code requires of the type).
    Output { elem: Type },
    /// `*const T` / `*mut T`: a raw device pointer; the launcher is `unsafe`.
    Pointer { elem: Type, mutable: bool },
    /// `&TensorMap` (`ferrocuda_device::tma::TensorMap`, checked by a trait bound): a TMA
    /// tensor map in global memory, for loads. The GPU launchers take a `&DeviceTensorMap` and
    /// declare the map's copy (read) and the memory behind it (read or write, as the map was
    /// made). `&StoreMap` (`store`): a map the kernel may store through; the launchers take
    /// `&mut DeviceTensorMap` and refuse a map not made for writes. The CPU launcher takes the
    /// device type itself and is `unsafe` (an emulated map holds a raw host address). `elem` is
    /// the referenced type as written.
    TensorMap { elem: Type, store: bool },
}

#[derive(Clone)]
pub struct Param {
    pub name: Ident,
    pub mutable: bool,
    pub ty: Type,
    pub kind: ParamKind,
    /// For a row-major matrix output named in `#[kernel(cols(name = value))]`: the row width
    /// the output is built with, a `u32` expression that is the same in every thread (a
    /// by-value parameter, or a constant evaluated at compile time).
    pub cols: Option<TokenStream>,
    /// The constant widths of `cols`, each bound to its own `const` item outside any
    /// generated code (Q3): `(position in the shape, the item's name, the user's expression)`.
    /// The width is then that item's name in `cols`, and part of the kernel's layout (Q2).
    pub width_consts: Vec<(usize, Ident, syn::Expr)>,
}

/// One instance of a generic kernel: the type for its type parameter, its PTX symbol and the
/// name of its launcher module (the same, unless `name = ".."` gives the PTX base name).
pub struct Instance {
    pub ty: Type,
    pub symbol: Ident,
    pub module: Ident,
}

pub struct Kernel<'a> {
    pub function: &'a ItemFn,
    pub params: Vec<Param>,
    /// For a generic kernel: its type parameter and the instances to build.
    pub generic: Option<(Ident, Vec<Instance>)>,
    /// `launch_bounds(threads, min_blocks)` / `reqntid(threads)`: the arguments of the
    /// `ferrocuda_device::launch_bounds!` marker emitted for each entry point.
    pub bounds: Option<TokenStream>,
    /// `cluster_dims(x[, y[, z]])`: the compiled cluster shape (missing dimensions are 1).
    pub cluster: Option<[TokenStream; 3]>,
    /// `same_len(a, b, ..)` groups: slice parameters whose lengths the launchers check equal,
    /// so that the device code uses one length for all of them (one bounds check covers all).
    pub same_len: Vec<Vec<Ident>>,
    /// `name = "ptx_name"`: the kernel's PTX symbol (a generic kernel's base name) instead of
    /// the function's name, e.g. for two kernels of one name in two modules (P13). The launcher
    /// module keeps the function's name.
    pub ptx_name: Option<Ident>,
    /// `ftz`: nvcc's `-ftz=true` for this kernel (the builder gives its `f32` instructions
    /// `.ftz`, from a comment the entry writes).
    pub ftz: bool,
}

impl Kernel<'_> {
    /// The PTX symbol of a plain kernel (a generic kernel's base name): `name = ".."` or the
    /// function's name.
    pub fn ptx_base(&self) -> &Ident {
        self.ptx_name.as_ref().unwrap_or(&self.function.sig.ident)
    }

    /// True when a parameter is a raw pointer, which makes the launcher `unsafe`.
    pub fn has_raw_pointers(&self) -> bool {
        self.params.iter().any(|p| matches!(p.kind, ParamKind::Pointer { .. }))
    }
}

const SCALARS: &[&str] = &["bool", "i8", "i16", "i32", "i64", "isize", "u8", "u16", "u32", "u64", "usize", "f32", "f64"];
/// `core::num`'s non-zero integers: by value, so that division by them has no panic path.
const NON_ZERO: &[&str] =
    &["NonZeroU8", "NonZeroU16", "NonZeroU32", "NonZeroU64", "NonZeroUsize", "NonZeroI8", "NonZeroI16", "NonZeroI32", "NonZeroI64", "NonZeroIsize"];
/// The output parameter types of `ferrocuda_device::global` (element type first).
pub const OUTPUTS: &[&str] = &[
    "DisjointSlice",
    "DisjointChunks",
    "DisjointPlanes",
    "PerBlock",
    "UncheckedSlice",
    "AtomicSlice",
    "DisjointMatrix",
    "PerBlockTile",
    "PerThreadTile",
    "PerWarpRow",
];
/// The row-major matrix outputs, whose row width `#[kernel(cols(name = ..))]` must give.
pub const MATRIX_OUTPUTS: &[&str] = &["DisjointMatrix", "PerBlockTile", "PerThreadTile", "PerWarpRow"];
/// Owning or pointer-holding standard types that can never be copied to a GPU.
const HOST_ONLY: &[&str] = &["String", "str", "Vec", "Box", "Rc", "Arc", "Option", "Result", "HashMap", "BTreeMap", "VecDeque", "Cell", "RefCell"];
const ALLOWED: &str = "kernel parameters may be integer, float or bool scalars, `#[repr(C)]` `bytemuck::Pod` structs or arrays by value, \
                       `core::num::NonZero*` integers, `&[T]` (read-only input), `Option<&[T]>` (an optional input, `None` a null pointer), the outputs `DisjointSlice<T>` (each thread its own elements), \
                       `DisjointChunks<T, N>` (each thread its own chunks of N), `DisjointPlanes<T, P>` (structure of arrays), `PerBlock<T>` \
                       (one element per block), `UncheckedSlice<T>` (`unsafe` accesses only), `AtomicSlice<T>` (atomic access from any thread), the row-major \
                       matrices `DisjointMatrix<T>` (thread (x, y) its element (y, x)), `PerBlockTile<T, ..>` (a tile per block), `PerThreadTile<T, ..>` (a micro-tile per thread) and `PerWarpRow<T>` \
                       (a row per warp), whose width `#[kernel(cols(name = ..))]` gives, `&TensorMap` / `&StoreMap` (TMA tensor maps for loads / stores, from \
                       `ferrocuda_device::tma`, passed as a `DeviceTensorMap` whose memory the launch declares), or raw device pointers `*const T` / `*mut T`";
/// Why `&mut [T]` is refused, and what to write instead (audit finding U2).
const NO_MUT_SLICE: &str = "a kernel cannot take `&mut [T]`: every GPU thread would get the same `&mut`, which the compiler assumes \
                            nobody else touches (it then reuses values across `sync_threads()`), and plain writes of one element from \
                            several threads race. Write `mut out: DisjointSlice<T>` and store through `out.get_mut(unique_index())` \
                            (each thread its own elements), or `out: AtomicSlice<T>` for elements that threads share (counters, \
                            flags, values read after a barrier); both from `ferrocuda_device::global`. The host launcher still takes `&mut buffer`.";

/// `#[kernel]`, `#[kernel(instances(f32, f64))]`, `#[kernel(launch_bounds(256, 2))]`,
/// `#[kernel(reqntid(256))]`, `#[kernel(cluster_dims(2))]`, comma-separated.
#[derive(Default)]
struct Attribute {
    instances: Option<(Ident, Vec<Type>)>,
    bounds: Option<TokenStream>,
    cluster: Option<[TokenStream; 3]>,
    same_len: Vec<Vec<Ident>>,
    cols: Vec<(Ident, syn::Expr)>,
    name: Option<Ident>,
    ftz: bool,
}

impl Parse for Attribute {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut attribute = Attribute::default();
        while !input.is_empty() {
            let key: Ident = input.parse()?;
            if key == "name" {
                // `name = "ptx_name"`: the PTX symbol, an identifier (it names the entry point).
                input.parse::<Token![=]>()?;
                let literal: syn::LitStr = input.parse()?;
                let value = literal.value();
                let valid = syn::parse_str::<Ident>(&value).is_ok() && !value.starts_with("__ferrocuda");
                if !valid {
                    return Err(syn::Error::new(
                        literal.span(),
                        "`name = \"..\"` gives the kernel's PTX symbol: an identifier that is not a Rust keyword and does not start with \
                         `__ferrocuda`, e.g. `name = \"scale_rows\"`",
                    ));
                }
                attribute.name = Some(Ident::new(&value, literal.span()));
                if !input.is_empty() {
                    input.parse::<Token![,]>()?;
                }
                continue;
            }
            if key == "ftz" {
                // `ftz`: nvcc's `-ftz=true` for this kernel, a word without arguments.
                attribute.ftz = true;
                if !input.is_empty() {
                    input.parse::<Token![,]>()?;
                }
                continue;
            }
            let content;
            syn::parenthesized!(content in input);
            if key == "instances" {
                let types: Punctuated<Type, Token![,]> = content.parse_terminated(Type::parse, Token![,])?;
                if types.is_empty() {
                    return Err(syn::Error::new(key.span(), "`instances()` needs at least one type, e.g. `instances(f32, f64)`"));
                }
                attribute.instances = Some((key, types.into_iter().collect()));
            } else if key == "launch_bounds" || key == "reqntid" {
                let values: Punctuated<syn::Expr, Token![,]> = content.parse_terminated(syn::Expr::parse, Token![,])?;
                let values: Vec<_> = values.into_iter().collect();
                check_bounds(&key, &values)?;
                attribute.bounds = Some(match (key.to_string().as_str(), values.as_slice()) {
                    ("launch_bounds", [threads]) => quote::quote!(#threads, 0),
                    ("launch_bounds", [threads, min_blocks]) => quote::quote!(#threads, #min_blocks),
                    ("reqntid", [threads]) => quote::quote!(reqntid #threads),
                    // `.reqntid` + `.minnctapersm` (session 23: CUDA's `__launch_bounds__(N, k)`
                    // for a kernel that is always launched with exactly `N` threads).
                    ("reqntid", [threads, min_blocks]) => quote::quote!(reqntid #threads, #min_blocks),
                    _ => {
                        return Err(syn::Error::new(
                            key.span(),
                            "write `launch_bounds(max_threads)`, `launch_bounds(max_threads, min_blocks_per_sm)`, `reqntid(threads)` or \
                             `reqntid(threads, min_blocks_per_sm)`",
                        ));
                    }
                });
            } else if key == "cluster_dims" {
                let values: Punctuated<syn::Expr, Token![,]> = content.parse_terminated(syn::Expr::parse, Token![,])?;
                let values: Vec<syn::Expr> = values.into_iter().collect();
                if values.is_empty() || values.len() > 3 {
                    return Err(syn::Error::new(key.span(), "write `cluster_dims(x)`, `cluster_dims(x, y)` or `cluster_dims(x, y, z)` (blocks per cluster)"));
                }
                check_cluster_dims(&key, &values)?;
                let mut dims: Vec<TokenStream> = values.iter().map(|v| quote::quote!(#v)).collect();
                dims.resize(3, quote::quote!(1u32));
                attribute.cluster = Some([dims[0].clone(), dims[1].clone(), dims[2].clone()]);
            } else if key == "same_len" {
                let names: Punctuated<Ident, Token![,]> = content.parse_terminated(Ident::parse, Token![,])?;
                if names.len() < 2 {
                    return Err(syn::Error::new(key.span(), "write `same_len(a, b, ..)` with at least two slice parameters"));
                }
                attribute.same_len.push(names.into_iter().collect());
            } else if key == "cols" {
                let pairs: Punctuated<syn::MetaNameValue, Token![,]> = content.parse_terminated(syn::MetaNameValue::parse, Token![,])?;
                if pairs.is_empty() {
                    return Err(syn::Error::new(key.span(), "write `cols(output = width, ..)`: each matrix output's row width, a `u32` parameter or constant"));
                }
                for pair in pairs {
                    let Some(name) = pair.path.get_ident() else {
                        return Err(syn::Error::new_spanned(&pair.path, "`cols(..)` names an output parameter: `cols(out = cols)`"));
                    };
                    attribute.cols.push((name.clone(), pair.value));
                }
            } else {
                return Err(syn::Error::new(
                    key.span(),
                    "unknown #[kernel] argument; expected `instances(T1, T2, ..)`, `launch_bounds(max_threads[, min_blocks])`, `reqntid(threads)`, \
                     `cluster_dims(x[, y[, z]])`, `same_len(a, b, ..)`, `cols(output = width, ..)`, `ftz` or `name = \"ptx_name\"`",
                ));
            }
            if !input.is_empty() {
                input.parse::<Token![,]>()?;
            }
        }
        Ok(attribute)
    }
}

impl<'a> Kernel<'a> {
    pub fn from_fn(attr: TokenStream, function: &'a ItemFn) -> syn::Result<Self> {
        let mut errors: Vec<syn::Error> = Vec::new();
        let attribute = match syn::parse2::<Attribute>(attr) {
            Ok(a) => a,
            Err(e) => {
                errors.push(e);
                Attribute::default()
            }
        };
        let bounds = attribute.bounds.clone();
        let cluster = attribute.cluster.clone();
        let same_len = attribute.same_len.clone();
        let ptx_name = attribute.name.clone();
        let ftz = attribute.ftz;
        let sig = &function.sig;
        if !matches!(function.vis, syn::Visibility::Public(_)) {
            errors.push(syn::Error::new(sig.fn_token.span, "a kernel must be `pub fn`: the host launches it from outside the crate"));
        }
        if let Some(token) = &sig.asyncness {
            errors.push(syn::Error::new_spanned(token, "a kernel cannot be `async`"));
        }
        if let Some(token) = &sig.constness {
            errors.push(syn::Error::new_spanned(token, "a kernel cannot be `const`"));
        }
        if let Some(abi) = &sig.abi {
            errors.push(syn::Error::new_spanned(abi, "leave out the ABI: #[kernel] gives the function the PTX kernel ABI itself"));
        }
        if let ReturnType::Type(_, ty) = &sig.output {
            errors.push(syn::Error::new_spanned(
                ty,
                "a kernel returns nothing: write results into an output parameter, `mut out: DisjointSlice<T>` (each thread its own elements, \
                 `out.get_mut(unique_index())`) or `out: AtomicSlice<T>` (elements threads share), from `ferrocuda_device::global`",
            ));
        }
        if let Some(variadic) = &sig.variadic {
            errors.push(syn::Error::new_spanned(variadic, "a kernel cannot be variadic"));
        }
        let generic = match check_generics(function, attribute.instances, ptx_name.as_ref()) {
            Ok(g) => g,
            Err(e) => {
                errors.push(e);
                None
            }
        };

        let mut params = Vec::new();
        for input in &sig.inputs {
            match parse_param(input) {
                Ok(param) => params.push(param),
                Err(e) => errors.push(e),
            }
        }

        // A raw pointer's validity, and a tensor map's box and swizzle (the kernel's TMA copies
        // write a box of the map's size into shared memory it sized for one layout; the map is
        // opaque to the kernel), are what a type cannot check: only such kernels may be unsafe.
        if let Some(token) = &sig.unsafety
            && !params.iter().any(|p| matches!(p.kind, ParamKind::Pointer { .. } | ParamKind::TensorMap { .. }))
        {
            errors.push(syn::Error::new_spanned(
                token,
                "only a kernel with raw pointer or tensor map parameters may be `unsafe fn`: slices and values are checked by their types",
            ));
        }

        for group in &same_len {
            for (i, name) in group.iter().enumerate() {
                let is_slice = params.iter().any(|p| p.name == *name && matches!(p.kind, ParamKind::Slice { .. } | ParamKind::Output { .. }));
                let is_optional = params.iter().any(|p| p.name == *name && matches!(p.kind, ParamKind::OptionalSlice { .. }));
                if is_optional {
                    errors.push(syn::Error::new(
                        name.span(),
                        format!(
                            "`{name}` is an optional input: it has no length when it is `None`, so it cannot share one. Bound it \
                             in the kernel instead (`{name}.and_then(|x| x.get(..n))` once, then index below `n`)"
                        ),
                    ));
                } else if !is_slice {
                    errors.push(syn::Error::new(name.span(), format!("`same_len` names slice parameters (`&[T]` or an output); `{name}` is not one")));
                } else if group[..i].contains(name) {
                    errors.push(syn::Error::new(name.span(), format!("`{name}` is named twice in `same_len`")));
                }
            }
        }

        check_cols(&function.sig.ident, &attribute.cols, &mut params, &mut errors);

        let mut errors = errors.into_iter();
        match errors.next() {
            None => Ok(Kernel { function, params, generic, bounds, cluster, same_len, ptx_name, ftz }),
            Some(mut first) => {
                errors.for_each(|e| first.combine(e));
                Err(first)
            }
        }
    }
}

/// Attaches each `cols(name = value)` width to its output: a value that is a single name of a
/// by-value `u32` parameter is that parameter (the GPU copies it to every thread unchanged;
/// the output is built before the body runs), anything else must be a constant expression
/// (`const { .. }`, so a per-thread value does not compile). Every matrix output needs one,
/// nothing else may have one.
fn check_cols(kernel: &Ident, cols: &[(Ident, syn::Expr)], params: &mut [Param], errors: &mut Vec<syn::Error>) {
    for (i, (name, value)) in cols.iter().enumerate() {
        let mut consts = Vec::new();
        if cols[..i].iter().any(|(other, _)| other == name) {
            errors.push(syn::Error::new(name.span(), format!("`{name}` is named twice in `cols`")));
            continue;
        }
        let width = match value {
            // `(rows, cols)`: the shape of a 3-D output (`DisjointSlice<T, Cells3d>`);
            // `(cols, a, b)`: `PermutedRows`'s width and radices.
            syn::Expr::Tuple(tuple) if (2..=3).contains(&tuple.elems.len()) => {
                let parts: Vec<_> = tuple.elems.iter().enumerate().map(|(k, part)| width_value(kernel, name, k, part, params, &mut consts, errors)).collect();
                let Some(parts) = parts.into_iter().collect::<Option<Vec<_>>>() else { continue };
                quote::quote!((#(#parts),*))
            }
            _ => match width_value(kernel, name, 0, value, params, &mut consts, errors) {
                Some(width) => width,
                None => continue,
            },
        };
        match params.iter_mut().find(|p| p.name == *name) {
            Some(p) if matches!(p.kind, ParamKind::Output { .. }) && (is_matrix_output(&p.ty) || is_partitioned_output(&p.ty)) => {
                p.cols = Some(width);
                p.width_consts = consts;
            }
            Some(p) => errors.push(syn::Error::new(
                name.span(),
                format!(
                    "`cols` gives the row width of a matrix output (`DisjointMatrix`, `PerBlockTile`, `PerThreadTile`, `PerWarpRow`, \
                     `DisjointSlice<T, P>` for `P` = `BlockRows`, `RotaryPairs<..>`, `Handoff`; `(rows, cols)` for `Cells3d`, `(cols, tile)` for `RowTiles`, \
                     `(cols, a, b)` for `PermutedRows`); `{}` is not one",
                    p.name
                ),
            )),
            None => errors.push(syn::Error::new(name.span(), format!("`cols` names an output parameter; the kernel has no parameter `{name}`"))),
        }
    }
    for p in params.iter() {
        if p.cols.is_none() && matches!(p.kind, ParamKind::Output { .. }) && is_matrix_output(&p.ty) {
            let name = &p.name;
            errors.push(syn::Error::new_spanned(
                &p.ty,
                format!(
                    "a row-major matrix output needs its row width, the same in every thread: add `cols({name} = width)` to `#[kernel(..)]`, \
                     with `width` a by-value `u32` parameter or a constant"
                ),
            ));
        }
    }
}

/// The `u32` expression of one width in `cols(..)`: a by-value `u32` parameter's name, or a
/// constant evaluated at compile time, bound to a `const` item of its own (pushed to `consts`;
/// the width is then the item's name). `None` (with the error pushed) for a parameter of
/// another type.
fn width_value(
    kernel: &Ident,
    name: &Ident,
    position: usize,
    value: &syn::Expr,
    params: &[Param],
    consts: &mut Vec<(usize, Ident, syn::Expr)>,
    errors: &mut Vec<syn::Error>,
) -> Option<TokenStream> {
    let width_param = match value {
        syn::Expr::Path(path) if path.qself.is_none() && path.attrs.is_empty() => path.path.get_ident().cloned(),
        _ => None,
    };
    match width_param.as_ref().and_then(|w| params.iter().find(|p| p.name == *w)) {
        Some(p) if matches!(&p.kind, ParamKind::Scalar { primitive } if primitive.to_string().ends_with("u32")) => {
            let w = &p.name;
            Some(quote::quote!(#w))
        }
        Some(p) => {
            let w = &p.name;
            errors.push(syn::Error::new_spanned(
                value,
                format!("the width of `{name}` must be a `u32`: `{w}` is not a `u32` by-value parameter (declare `{w}: u32`, or write a constant)"),
            ));
            None
        }
        None => {
            let item = quote::format_ident!("__FERROCUDA_COLS_{}_{}_{}", kernel.unraw(), name.unraw(), position);
            consts.push((position, item.clone(), value.clone()));
            Some(quote::quote!(#item))
        }
    }
}

/// True for `DisjointSlice<T, P>` written with its partition: whether `P` takes a shape
/// from `cols(..)` is the type's to say (a missing or extra width fails the trait check the
/// launchers make, naming the attribute).
fn is_partitioned_output(ty: &Type) -> bool {
    match ty {
        Type::Group(group) => is_partitioned_output(&group.elem),
        Type::Paren(paren) => is_partitioned_output(&paren.elem),
        Type::Path(path) => path
            .path
            .segments
            .last()
            .is_some_and(|s| s.ident == "DisjointSlice" && matches!(&s.arguments, syn::PathArguments::AngleBracketed(a) if a.args.len() >= 2)),
        _ => false,
    }
}

/// True if the type's last path segment names a row-major matrix output.
fn is_matrix_output(ty: &Type) -> bool {
    match ty {
        Type::Group(group) => is_matrix_output(&group.elem),
        Type::Paren(paren) => is_matrix_output(&paren.elem),
        Type::Path(path) => path.path.segments.last().is_some_and(|s| MATRIX_OUTPUTS.contains(&s.ident.to_string().as_str())),
        _ => false,
    }
}

/// A generic kernel needs `instances(..)` and exactly one type parameter; a plain one none.
fn check_generics(function: &ItemFn, instances: Option<(Ident, Vec<Type>)>, ptx_name: Option<&Ident>) -> syn::Result<Option<(Ident, Vec<Instance>)>> {
    let generics = &function.sig.generics;
    let type_params: Vec<&syn::TypeParam> = generics.type_params().collect();
    for param in &generics.params {
        match param {
            GenericParam::Type(_) => {}
            GenericParam::Lifetime(l) => return Err(syn::Error::new_spanned(l, "leave out lifetimes on kernels")),
            GenericParam::Const(c) => {
                return Err(syn::Error::new_spanned(c, "const generic kernels are not supported; use a type parameter with `instances(..)`"));
            }
        }
    }
    match (type_params.as_slice(), instances) {
        ([], None) => Ok(None),
        ([], Some((key, _))) => {
            Err(syn::Error::new(key.span(), "`instances(..)` is for a generic kernel: add a type parameter, e.g. `pub fn scale<T: Copy>(..)`"))
        }
        ([param], Some((_, types))) => {
            let base = &function.sig.ident;
            let ptx_base = ptx_name.unwrap_or(base);
            let instances =
                types.into_iter().map(|ty| Instance { symbol: instance_symbol(ptx_base, &ty), module: instance_symbol(base, &ty), ty }).collect::<Vec<_>>();
            Ok(Some((param.ident.clone(), instances)))
        }
        ([_], None) => Err(syn::Error::new_spanned(
            generics,
            "a generic kernel needs explicit instances, e.g. `#[kernel(instances(f32, f64))]`: each becomes its own PTX kernel (`name_f32`, `name_f64`)",
        )),
        (_, _) => Err(syn::Error::new_spanned(generics, "a generic kernel may have one type parameter")),
    }
}

/// `scale` + `f32` -> `scale_f32`; a path type uses its last segment (`my::Pair` -> `scale_Pair`).
/// A raw kernel name loses its `r#` (`r#type` + `f32` -> `type_f32`).
pub fn instance_symbol(base: &Ident, ty: &Type) -> Ident {
    use syn::ext::IdentExt;
    let text = match ty {
        Type::Path(p) if p.qself.is_none() => p.path.segments.last().map(|s| s.ident.unraw().to_string()).unwrap_or_default(),
        other => quote::quote!(#other).to_string(),
    };
    let cleaned: String = text.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    let base: String = base.unraw().to_string();
    // Only ASCII letters, digits and `_` after an identifier: always a valid identifier (a
    // keyword cannot end in `_x`).
    Ident::new(&format!("{base}_{}", cleaned.trim_matches('_')), ty.span())
}

/// The instance symbols an attribute names, if it parses (for the fallback's stubs).
pub fn instance_symbols(attr: TokenStream, base: &Ident) -> Option<Vec<Ident>> {
    let attribute = syn::parse2::<Attribute>(attr).ok()?;
    let (_, types) = attribute.instances?;
    Some(types.iter().map(|ty| instance_symbol(base, ty)).collect())
}

fn parse_param(input: &FnArg) -> syn::Result<Param> {
    let typed = match input {
        FnArg::Receiver(r) => {
            return Err(syn::Error::new_spanned(
                r,
                "a kernel is a free function: it cannot take `self`. Move it out of the `impl` (the GPU launches free functions by name)",
            ));
        }
        FnArg::Typed(t) => t,
    };
    if let Some(attribute) = typed.attrs.first() {
        return Err(syn::Error::new_spanned(
            attribute,
            "#[kernel] parameters cannot have attributes (`#[cfg]` included): the device entry, the launchers and the CPU launcher \
             must all see the same parameters. Pass the value always (and ignore it where unused), or write one kernel per configuration",
        ));
    }
    let (name, mutable) = match &*typed.pat {
        Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => (p.ident.clone(), p.mutability.is_some()),
        other => return Err(syn::Error::new_spanned(other, "kernel parameters must be plain names (`x: &[f32]`), not patterns")),
    };
    let kind = classify(&typed.ty)?;
    Ok(Param { name, mutable, ty: (*typed.ty).clone(), kind, cols: None, width_consts: Vec::new() })
}

pub fn classify(ty: &Type) -> syn::Result<ParamKind> {
    match ty {
        Type::Group(group) => classify(&group.elem),
        Type::Paren(paren) => classify(&paren.elem),
        Type::Path(path) if path.qself.is_none() && scalar_path(ty).is_some() => Ok(ParamKind::Scalar { primitive: scalar_path(ty).unwrap_or_default() }),
        Type::Path(path) if path.qself.is_none() => {
            let Some(last) = path.path.segments.last() else {
                return Err(syn::Error::new_spanned(ty, format!("`{}` cannot be a kernel parameter; {ALLOWED}", type_text(ty))));
            };
            let name = last.ident.to_string();
            if OUTPUTS.contains(&name.as_str()) {
                // The output's lifetime is the launch's borrow of the buffer: elided, the body is
                // generic over it and cannot keep the output past the launch (G13-1).
                if let syn::PathArguments::AngleBracketed(args) = &last.arguments
                    && let Some(syn::GenericArgument::Lifetime(lifetime)) = args.args.iter().find(|a| matches!(a, syn::GenericArgument::Lifetime(_)))
                {
                    return Err(syn::Error::new_spanned(
                        lifetime,
                        format!(
                            "leave out lifetimes on kernel parameters: an output lives for its launch only, so write `{name}<T..>` \
                             (the elided lifetime is the launch's borrow of the buffer)"
                        ),
                    ));
                }
                let elem = first_type_argument(last).ok_or_else(|| {
                    syn::Error::new_spanned(ty, format!("write `{name}<T..>` with the element type first, e.g. `{name}<f32>` (`DisjointChunks<f32, 4>`)"))
                })?;
                check_element(&elem)?;
                return Ok(ParamKind::Output { elem });
            }
            if name == "Option"
                && let Some(inner) = first_type_argument(last)
                && let Some(kind) = optional_input(ty, &inner)?
            {
                return Ok(kind);
            }
            if name == "Option" || name == "Result" {
                return Err(syn::Error::new_spanned(
                    ty,
                    format!(
                        "`{}` is not plain data (its layout is Rust's own, and a GPU thread cannot be handed one): pass the value and a flag \
                         (`value: f32, present: bool`) or a `#[repr(C)]` `bytemuck::Pod` struct; for an optional input (CUDA's `const T*` \
                         that may be `nullptr`) write `Option<&[T]>`; {ALLOWED}",
                        type_text(ty)
                    ),
                ));
            }
            if HOST_ONLY.contains(&name.as_str()) {
                return Err(syn::Error::new_spanned(ty, format!("`{}` lives in host memory and cannot be a kernel parameter; {ALLOWED}", type_text(ty))));
            }
            Ok(ParamKind::Value)
        }
        Type::Array(_) => Ok(ParamKind::Value),
        Type::Ptr(pointer) => {
            let elem = (*pointer.elem).clone();
            if matches!(elem, Type::Ptr(_) | Type::Reference(_) | Type::Slice(_)) {
                return Err(syn::Error::new_spanned(&pointer.elem, format!("a raw pointer parameter must point to plain data; {ALLOWED}")));
            }
            Ok(ParamKind::Pointer { elem, mutable: pointer.mutability.is_some() })
        }
        Type::Reference(reference) => {
            if let Some(lifetime) = &reference.lifetime {
                return Err(syn::Error::new_spanned(lifetime, "leave out lifetimes on kernel parameters"));
            }
            let slice = match &*reference.elem {
                Type::Slice(slice) => slice,
                Type::Path(path)
                    if path.qself.is_none()
                        && path.path.segments.last().is_some_and(|s| (s.ident == "TensorMap" || s.ident == "StoreMap") && s.arguments.is_empty()) =>
                {
                    if reference.mutability.is_some() {
                        return Err(syn::Error::new_spanned(
                            ty,
                            "a kernel never writes its tensor maps: write `&TensorMap` (loads) or `&StoreMap` (stores through the map, \
                             whose memory the host then borrows exclusively)",
                        ));
                    }
                    let store = path.path.segments.last().is_some_and(|s| s.ident == "StoreMap");
                    return Ok(ParamKind::TensorMap { elem: (*reference.elem).clone(), store });
                }
                Type::Reference(_) => return Err(syn::Error::new_spanned(ty, format!("a reference to a reference cannot be a kernel parameter; {ALLOWED}"))),
                Type::Array(array) => {
                    let elem = &array.elem;
                    return Err(syn::Error::new_spanned(
                        ty,
                        format!(
                            "a reference to an array cannot be a kernel parameter: pass the array by value (`{}`, copied to every thread) or a \
                             slice (`&[{}]`, read from device memory)",
                            type_text(&reference.elem),
                            type_text(elem)
                        ),
                    ));
                }
                Type::Path(path) if path.qself.is_none() && !path.path.get_ident().is_some_and(|i| SCALARS.contains(&i.to_string().as_str())) => {
                    return Err(syn::Error::new_spanned(
                        ty,
                        format!(
                            "a reference to a single value cannot be a kernel parameter: pass `{0}` by value. If `{0}` is a type alias of a \
                             slice, write the slice type (`&[T]`) itself: #[kernel] reads parameter types as written and cannot see through aliases",
                            type_text(&reference.elem)
                        ),
                    ));
                }
                _ => {
                    return Err(syn::Error::new_spanned(
                        ty,
                        format!("a reference to a single value cannot be a kernel parameter: pass it by value; {ALLOWED}"),
                    ));
                }
            };
            if reference.mutability.is_some() {
                return Err(syn::Error::new_spanned(ty, NO_MUT_SLICE));
            }
            let elem = (*slice.elem).clone();
            check_element(&elem)?;
            Ok(ParamKind::Slice { elem })
        }
        other => Err(syn::Error::new_spanned(other, format!("`{}` cannot be a kernel parameter; {ALLOWED}", type_text(other)))),
    }
}

/// `Option<&[T]>` (`inner` is `&[T]`): an optional input. `Ok(None)` for an `Option` of
/// something else that is not a reference (the caller's "not plain data" error follows); an
/// error for the references that cannot be optional inputs, saying what to write.
fn optional_input(ty: &Type, inner: &Type) -> syn::Result<Option<ParamKind>> {
    let inner = match inner {
        Type::Group(group) => &*group.elem,
        Type::Paren(paren) => &*paren.elem,
        other => other,
    };
    let Type::Reference(reference) = inner else { return Ok(None) };
    if let Some(lifetime) = &reference.lifetime {
        return Err(syn::Error::new_spanned(lifetime, "leave out lifetimes on kernel parameters: write `Option<&[T]>`"));
    }
    let Type::Slice(slice) = &*reference.elem else {
        return Err(syn::Error::new_spanned(
            ty,
            format!(
                "an optional input is a slice: write `Option<&[{0}]>` (CUDA's `const {0}*` that may be `nullptr`) and read element `i` \
                 with `x.and_then(|x| x.get(i))`; one value is element 0",
                type_text(&reference.elem)
            ),
        ));
    };
    if reference.mutability.is_some() {
        return Err(syn::Error::new_spanned(
            ty,
            "a kernel cannot take `Option<&mut [T]>`: an optional input is read-only (`Option<&[T]>`). For an output the kernel \
             may be given or not, take an output type (`DisjointSlice<T>`, `AtomicSlice<T>`, ..) and let the host pass an empty \
             buffer for none (its accesses then find no element)",
        ));
    }
    let elem = (*slice.elem).clone();
    check_element(&elem)?;
    Ok(Some(ParamKind::OptionalSlice { elem }))
}

/// `T` of `Name<T, ..>`, if the first generic argument is a type.
fn first_type_argument(segment: &syn::PathSegment) -> Option<Type> {
    match &segment.arguments {
        syn::PathArguments::AngleBracketed(args) => match args.args.first() {
            Some(syn::GenericArgument::Type(t)) => Some(t.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// The absolute path of the primitive (or `core::num` non-zero integer) a type is written as,
/// if it is written as one: `u32` -> `::core::primitive::u32`, `NonZeroU32` or
/// `core::num::NonZeroU32` -> `::core::num::NonZeroU32`, `NonZero<u32>` ->
/// `::core::num::NonZero<::core::primitive::u32>`. Only the spelling is read here; the
/// generated code then requires the written type to *be* that type.
pub fn scalar_path(ty: &Type) -> Option<TokenStream> {
    scalar_path_in(ty, &quote::quote!(::core))
}

/// [`scalar_path`] with `core` named by `core` (the device entry's `__ferrocuda_core`).
pub fn scalar_path_in(ty: &Type, core: &TokenStream) -> Option<TokenStream> {
    let ty = match ty {
        Type::Group(group) => &*group.elem,
        other => other,
    };
    let Type::Path(path) = ty else { return None };
    if path.qself.is_some() {
        return None;
    }
    if let Some(ident) = path.path.get_ident() {
        let name = ident.to_string();
        if SCALARS.contains(&name.as_str()) {
            return Some(quote::quote!(#core::primitive::#ident));
        }
    }
    let last = path.path.segments.last()?;
    let name = last.ident.to_string();
    let ident = &last.ident;
    if NON_ZERO.contains(&name.as_str()) && last.arguments.is_empty() {
        return Some(quote::quote!(#core::num::#ident));
    }
    if name == "NonZero"
        && let Some(Type::Path(inner)) = first_type_argument(last)
        && let Some(integer) = inner.path.get_ident()
        && SCALARS.contains(&integer.to_string().as_str())
        && !matches!(integer.to_string().as_str(), "bool" | "f32" | "f64")
    {
        return Some(quote::quote!(#core::num::NonZero<#core::primitive::#integer>));
    }
    None
}

/// Slice elements: plain data (`Pod` is checked by the compiler; this catches the obvious).
fn check_element(elem: &Type) -> syn::Result<()> {
    match elem {
        Type::Reference(_) | Type::Slice(_) | Type::Ptr(_) | Type::TraitObject(_) | Type::ImplTrait(_) => {
            Err(syn::Error::new_spanned(elem, format!("slice elements must be plain data (`bytemuck::Pod`); {ALLOWED}")))
        }
        Type::Path(path) if path.qself.is_none() && path.path.segments.last().is_some_and(|s| HOST_ONLY.contains(&s.ident.to_string().as_str())) => {
            Err(syn::Error::new_spanned(
                elem,
                format!("`{}` lives in host memory and cannot be a slice element: elements must be plain data (`bytemuck::Pod`)", type_text(elem)),
            ))
        }
        _ => Ok(()),
    }
}

/// Replaces the type parameter `name` by `with` everywhere in `ty` (token-level, so it also
/// reaches inside paths such as `Pair<T>` and arrays `[T; 4]`).
pub fn substitute(ty: &Type, name: &Ident, with: &Type) -> Type {
    fn walk(tokens: TokenStream, name: &Ident, with: &TokenStream) -> TokenStream {
        tokens
            .into_iter()
            .flat_map(|tree| -> Vec<TokenTree> {
                match tree {
                    TokenTree::Ident(ident) if ident == *name => {
                        // Parenthesise-free: a type is a single token group when re-parsed below.
                        vec![TokenTree::Group(Group::new(proc_macro2::Delimiter::None, with.clone()))]
                    }
                    TokenTree::Group(group) => {
                        let mut new = Group::new(group.delimiter(), walk(group.stream(), name, with));
                        new.set_span(group.span());
                        vec![TokenTree::Group(new)]
                    }
                    other => vec![other],
                }
            })
            .collect()
    }
    let replaced = walk(quote::quote!(#ty), name, &quote::quote!(#with));
    syn::parse2(replaced).unwrap_or_else(|_| ty.clone())
}

impl Param {
    /// This parameter with the generic type `name` replaced by `with`.
    pub fn instantiate(&self, name: &Ident, with: &Type) -> Param {
        let kind = match &self.kind {
            ParamKind::Scalar { primitive } => ParamKind::Scalar { primitive: primitive.clone() },
            ParamKind::Value => ParamKind::Value,
            ParamKind::Slice { elem } => ParamKind::Slice { elem: substitute(elem, name, with) },
            ParamKind::OptionalSlice { elem } => ParamKind::OptionalSlice { elem: substitute(elem, name, with) },
            ParamKind::Output { elem } => ParamKind::Output { elem: substitute(elem, name, with) },
            ParamKind::Pointer { elem, mutable } => ParamKind::Pointer { elem: substitute(elem, name, with), mutable: *mutable },
            ParamKind::TensorMap { elem, store } => ParamKind::TensorMap { elem: elem.clone(), store: *store },
        };
        // A bare `T` parameter is classified as a by-value type: after substitution it may be a
        // primitive, which needs no `Pod` check.
        let ty = substitute(&self.ty, name, with);
        let kind = match (&kind, scalar_path(&ty)) {
            (ParamKind::Value, Some(primitive)) => ParamKind::Scalar { primitive },
            _ => kind,
        };
        Param { name: self.name.clone(), mutable: self.mutable, ty, kind, cols: self.cols.clone(), width_consts: self.width_consts.clone() }
    }
}

/// A type as the user wrote it, without the token spacing of `TokenStream::to_string`.
pub fn type_text(ty: &Type) -> String {
    let spaced = quote::quote!(#ty).to_string();
    spaced
        .replace(" < ", "<")
        .replace("< ", "<")
        .replace(" >", ">")
        .replace(" ,", ",")
        .replace("& ", "&")
        .replace(" ;", ";")
        .replace(" :: ", "::")
        .replace(":: ", "::")
        .replace("* const ", "*const ")
        .replace("* mut ", "*mut ")
}

/// The value of an integer literal argument (`256`, `256u32`), or `None` for any other
/// expression (a constant: checked by the marker's own `const` assertion instead).
fn literal_value(expr: &syn::Expr) -> Option<u64> {
    match expr {
        syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Int(int), .. }) => int.base10_parse::<u64>().ok(),
        syn::Expr::Group(group) => literal_value(&group.expr),
        syn::Expr::Paren(paren) => literal_value(&paren.expr),
        _ => None,
    }
}

/// The largest block (`launch_bounds`, `reqntid`) a GPU runs: 1024 threads.
const MAX_BLOCK_THREADS: u64 = 1024;
/// The most blocks one SM holds (sm_70 to sm_90): a larger `min_blocks_per_sm` cannot be met.
const MAX_BLOCKS_PER_SM: u64 = 32;
/// The most threads one SM holds (sm_70 to sm_90): `max_threads * min_blocks_per_sm` above it
/// cannot be met.
const MAX_THREADS_PER_SM: u64 = 2048;
/// The most blocks in a cluster that every sm_90 GPU runs (`MAX_PORTABLE_CLUSTER_BLOCKS`; the
/// launchers refuse more).
const MAX_CLUSTER_BLOCKS: u64 = 8;

/// `launch_bounds(max_threads[, min_blocks_per_sm])` / `reqntid(threads)` with literal values
/// (E6, audit 2026-11-27e): each within what a GPU can run, with the error at the value. A
/// value ptxas rejects (`reqntid(0)`) used to stop the build as "a code-generation bug"; one it
/// drops (`launch_bounds(0)`) disappeared silently; one nothing can meet built a kernel that
/// never launches.
fn check_bounds(key: &Ident, values: &[syn::Expr]) -> syn::Result<()> {
    let form = if key == "reqntid" { "reqntid(threads)" } else { "launch_bounds(max_threads, ..)" };
    let threads = values.first().and_then(|v| literal_value(v).map(|n| (v, n)));
    if let Some((value, n)) = threads
        && !(1..=MAX_BLOCK_THREADS).contains(&n)
    {
        let hint = if n == 0 && key == "launch_bounds" { "; for no bound, leave `launch_bounds` out" } else { "" };
        return Err(syn::Error::new_spanned(
            value,
            format!("`{form}`: {n} threads is outside 1..={MAX_BLOCK_THREADS} (a block has at least 1 and at most {MAX_BLOCK_THREADS} threads){hint}"),
        ));
    }
    if let Some(min_blocks) = values.get(1)
        && let Some(m) = literal_value(min_blocks)
    {
        if !(1..=MAX_BLOCKS_PER_SM).contains(&m) {
            return Err(syn::Error::new_spanned(
                min_blocks,
                format!(
                    "`launch_bounds(max_threads, min_blocks_per_sm)`: {m} blocks per SM is outside 1..={MAX_BLOCKS_PER_SM} (an SM \
                     holds at most {MAX_BLOCKS_PER_SM} blocks); for no minimum, write `launch_bounds(max_threads)`"
                ),
            ));
        }
        if let Some((_, n)) = threads
            && n * m > MAX_THREADS_PER_SM
        {
            return Err(syn::Error::new_spanned(
                min_blocks,
                format!(
                    "`launch_bounds({n}, {m})`: {m} blocks of {n} threads are {} threads, more than the {MAX_THREADS_PER_SM} one SM \
                     holds, so the minimum can never be met; lower `min_blocks_per_sm` to at most {}",
                    n * m,
                    MAX_THREADS_PER_SM / n
                ),
            ));
        }
    }
    Ok(())
}

/// `cluster_dims(x[, y[, z]])` with literal values (E6): each dimension at least 1, and at
/// most [`MAX_CLUSTER_BLOCKS`] blocks in all (`cluster_dims(0)` and `cluster_dims(16)` built
/// kernels whose every launch was refused).
fn check_cluster_dims(key: &Ident, values: &[syn::Expr]) -> syn::Result<()> {
    for value in values {
        if literal_value(value) == Some(0) {
            return Err(syn::Error::new_spanned(value, "`cluster_dims(..)`: a cluster dimension of 0 blocks; each dimension is at least 1"));
        }
    }
    let dims: Option<Vec<u64>> = values.iter().map(literal_value).collect();
    if let Some(dims) = dims {
        let blocks: u64 = dims.iter().product();
        if blocks > MAX_CLUSTER_BLOCKS {
            return Err(syn::Error::new(
                key.span(),
                format!(
                    "`cluster_dims(..)`: a cluster of {blocks} blocks is more than the portable limit of {MAX_CLUSTER_BLOCKS} \
                     (every launch of it would be refused); use at most {MAX_CLUSTER_BLOCKS} blocks per cluster"
                ),
            ));
        }
    }
    Ok(())
}
