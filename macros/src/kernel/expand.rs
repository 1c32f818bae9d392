//! Generating the device entry points and the host launchers from the per-kind lowerings.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::Ident;
use syn::ext::IdentExt;
use syn::spanned::Spanned;

use super::lower::{Lowered, generated, lower};
use super::parse::{Kernel, Param};
use super::paths;

pub fn kernel(kernel: &Kernel) -> TokenStream {
    let mut out = kernel_items(kernel);
    let cfgs = kernel.function.attrs.iter().filter(|a| a.path().is_ident("cfg") || a.path().is_ident("cfg_attr"));
    // One PTX name per crate (P13): a PTX module is flat, so two kernels of one crate may not
    // share an entry symbol, whichever modules they are in (`a::k` and `b::k`, or an instance
    // `a_b` + `u32` beside `a` + `b_u32`). Each entry claims its symbol as a `#[macro_export]`
    // macro, which lives at the crate root: a second claim is a name-resolution error, on the
    // host build as on the device build, before any symbol is emitted, and it points at both
    // kernels (the macro is spanned at each kernel's name).
    for symbol in entry_symbols(kernel) {
        let text = symbol_text(symbol);
        let claim = format_ident!("ptx_entry_{}_is_defined_by_two_kernels_rename_one", text, span = symbol.span());
        let cfgs = cfgs.clone();
        // Spanned at the kernel's name (an instance's: its type in `instances(..)`), where
        // rustc's "defined multiple times" and "previous definition" then point.
        out.extend(quote::quote_spanned! {symbol.span()=>
            #(#cfgs)*
            #[doc(hidden)]
            #[macro_export]
            macro_rules! #claim { () => {}; }
        });
    }
    // Launch bounds: one marker per entry point, turned into `.maxntid`/`.minnctapersm`/
    // `.reqntid` by ferrocuda-builder (see `ferrocuda_device::launch_bounds!`).
    if let Some(bounds) = &kernel.bounds {
        let marker = paths::launch_bounds();
        for symbol in entry_symbols(kernel) {
            let args = match bounds.clone().into_iter().next() {
                Some(proc_macro2::TokenTree::Ident(word)) if word == "reqntid" => {
                    let rest: TokenStream = bounds.clone().into_iter().skip(1).collect();
                    quote!(reqntid #symbol, #rest)
                }
                _ => quote!(#symbol, #bounds),
            };
            out.extend(quote!(#marker(#args);));
        }
    }
    // Cluster dims: one marker per entry point, turned into `.reqnctapercluster` by
    // ferrocuda-builder (see `ferrocuda_device::cluster_dims!`).
    if let Some([x, y, z]) = &kernel.cluster {
        let marker = paths::cluster_dims();
        for symbol in entry_symbols(kernel) {
            out.extend(quote!(#marker(#symbol, #x, #y, #z);));
        }
    }
    out
}

/// The PTX symbols of the kernel's entry points: its own name, or one per generic instance.
fn entry_symbols<'k>(kernel: &'k Kernel) -> Vec<&'k Ident> {
    match &kernel.generic {
        None => vec![kernel.ptx_base()],
        Some((_, instances)) => instances.iter().map(|i| &i.symbol).collect(),
    }
}

fn kernel_items(kernel: &Kernel) -> TokenStream {
    // A width parameter named only in `cols(..)` is used by the generated code, not by the
    // body: the body marks it used, so the user gets no unused-variable warning for it.
    let mut with_widths;
    let function = if kernel.params.iter().any(|p| p.cols.is_some()) {
        with_widths = kernel.function.clone();
        // A width is a parameter's name or a constant; a shape `(rows, cols)` is two of them.
        let widths = kernel.params.iter().filter_map(|p| p.cols.as_ref()).flat_map(|w| match syn::parse2::<syn::ExprTuple>(w.clone()) {
            Ok(tuple) => tuple.elems.into_iter().filter_map(|e| syn::parse2::<Ident>(quote::quote!(#e)).ok()).collect::<Vec<_>>(),
            Err(_) => syn::parse2::<Ident>(w.clone()).ok().into_iter().collect(),
        });
        // Constant widths are `const` items (see below), not parameters: nothing to mark.
        let uses: Vec<syn::Stmt> = widths.filter(|w| kernel.params.iter().any(|p| p.name == *w)).map(|w| syn::parse_quote!(let _ = &#w;)).collect();
        with_widths.block.stmts.splice(0..0, uses);
        &with_widths
    } else {
        kernel.function
    };
    let unsafe_fn = function.sig.unsafety.is_some();
    // An `unsafe fn` kernel's launchers are `unsafe`: its `# Safety` contract (raw pointers'
    // validity, or what a tensor map's opaque box and swizzle must be) is the launch's.
    let is_unsafe = kernel.has_raw_pointers() || unsafe_fn;
    // `#[cfg]`/`#[cfg_attr]` on the kernel apply to everything generated for it (a kernel gated
    // with `#[cfg_attr(target_arch = "nvptx64", cfg(ferrocuda_sm = "90"))]` has no entry on
    // other architectures); every other attribute stays on the user's function.
    let cfgs: Vec<&syn::Attribute> = function.attrs.iter().filter(|a| a.path().is_ident("cfg") || a.path().is_ident("cfg_attr")).collect();
    // The user's function, on both sides, exactly as written (plus the width uses above): the
    // device entry points call it, so its body is type-checked as the safe (or `unsafe`) `fn`
    // the user wrote, never inside generated `unsafe` (P1). Inlined into each entry on the
    // device; the host keeps it for the CPU executor.
    let inline =
        if function.attrs.iter().any(|a| a.path().is_ident("inline")) { quote!() } else { quote!(#[cfg_attr(target_arch = "nvptx64", inline(always))]) };
    let mut out = quote! {
        #inline
        #[allow(dead_code)]
        #function
    };
    // Each constant `cols(..)` width in a `const` item of its own, beside the kernel (Q3): the
    // user's expression is type-checked there, outside any generated `unsafe` (the device
    // entry is an `unsafe fn`, whose body would let an unsafe call through with a warning), on
    // each build from that build's attribute; the entry, the launchers and the layout name it.
    for param in &kernel.params {
        for (_, item, value) in &param.width_consts {
            out.extend(quote! {
                #(#cfgs)*
                #[doc(hidden)]
                #[allow(non_upper_case_globals, dead_code)]
                const #item: ::core::primitive::u32 = #value;
            });
        }
    }
    let name = &function.sig.ident;
    match &kernel.generic {
        None => {
            let lowered: Vec<Lowered> = kernel.params.iter().map(lower).collect();
            let entry =
                Entry { symbol: kernel.ptx_base(), module: name, params: &kernel.params, lowered: &lowered, call: quote!(self::#name), unsafe_fn, cfgs: &cfgs };
            out.extend(device_entry(&entry, &kernel.same_len, kernel.bounds.as_ref(), kernel.ftz));
            out.extend(host_launcher(&entry, quote!(super::#name), is_unsafe, kernel.cluster.as_ref(), &kernel.same_len, kernel.bounds.as_ref()));
        }
        Some((type_param, instances)) => {
            for instance in instances {
                let params: Vec<Param> = kernel.params.iter().map(|p| p.instantiate(type_param, &instance.ty)).collect();
                let lowered: Vec<Lowered> = params.iter().map(lower).collect();
                let ty = &instance.ty;
                let entry = Entry {
                    symbol: &instance.symbol,
                    module: &instance.module,
                    params: &params,
                    lowered: &lowered,
                    call: quote!(self::#name::<#ty>),
                    unsafe_fn,
                    cfgs: &cfgs,
                };
                out.extend(device_entry(&entry, &kernel.same_len, kernel.bounds.as_ref(), kernel.ftz));
                out.extend(host_launcher(&entry, quote!(super::#name::<#ty>), is_unsafe, kernel.cluster.as_ref(), &kernel.same_len, kernel.bounds.as_ref()));
            }
        }
    }
    out
}

/// One PTX entry point: a plain kernel's, or one instance of a generic kernel's.
struct Entry<'a> {
    /// Its PTX symbol.
    symbol: &'a Ident,
    /// The name of its launcher module: the function's name (an instance's: with the type's),
    /// whatever `name = ".."` gives the PTX symbol.
    module: &'a Ident,
    params: &'a [Param],
    lowered: &'a [Lowered],
    /// The path of the user's function (`self::name` or `self::name::<Type>`).
    call: TokenStream,
    /// The user's function is an `unsafe fn` (a kernel with raw pointer parameters may be).
    unsafe_fn: bool,
    /// The kernel's `#[cfg]`/`#[cfg_attr]` attributes.
    cfgs: &'a [&'a syn::Attribute],
}

/// The PTX symbol of a kernel: its name without `r#`.
pub fn symbol_text(symbol: &Ident) -> String {
    symbol.unraw().to_string()
}

/// `#[no_mangle] extern "ptx-kernel" fn symbol(...)`: slices arrive as (pointer, length) and
/// are rebuilt, then the user's function is called with the kernel's own parameters.
///
/// What the entry itself contains is generated code only: the kernel-name tag, the rebuilt
/// parameters (each `unsafe` block there holds generated tokens alone: no user-written type or
/// expression), and the call. The user's body is never pasted here (P1): it stays in the user's
/// function, type-checked as the `fn` they wrote. The entry and the fingerprint sit in an
/// anonymous `const` block, so the entry's name (the PTX symbol, often the user function's own
/// name) does not clash with the user's function, which the entry reaches as `self::name`.
fn device_entry(entry: &Entry, same_len: &[Vec<Ident>], bounds: Option<&TokenStream>, ftz: bool) -> TokenStream {
    let Entry { symbol, params, lowered, call, unsafe_fn, cfgs, .. } = entry;
    // `reqntid(n)`: the block is `(n, 1, 1)` in every launch (PTX `.reqntid`: a GPU refuses any
    // other; so do the launchers), so the entry tells the compiler, and `blockDim.x` is the
    // constant `n` in the kernel (issue 30: a `BlockRows` loop striding by it unrolls as nvcc's
    // over llm.c's `constexpr BlockSize`). The count is a const argument of the device crate's
    // `__assume_reqntid`, which also writes the comment the builder turns into the entry's
    // `.reqntid` (session 21): the assumption and the directive come from one call, whatever the
    // separate `launch_bounds!` marker was renamed to. The user's expression is a `const` item
    // outside the `unsafe` block (P1).
    let block_shape = bounds.and_then(|b| {
        let mut tokens = b.clone().into_iter();
        match tokens.next() {
            Some(proc_macro2::TokenTree::Ident(word)) if word == "reqntid" => {
                let threads = reqntid_threads(tokens.collect());
                let thread = paths::thread();
                let count = format_ident!("__FERROCUDA_REQNTID", span = Span::mixed_site());
                Some(quote! {
                    const #count: __ferrocuda_core::primitive::u32 = #threads;
                    // SAFETY: the builder gives this entry `.reqntid` from the call's own comment,
                    // so every launch of it has this block shape.
                    unsafe { #thread::__assume_reqntid::<#count>() };
                })
            }
            _ => None,
        }
    });
    // `ftz`: the entry's comment asks the builder for nvcc's `-ftz=true` in this kernel (its
    // `f32` instructions get `.ftz`: issue 30, the eleventh port's fused variance).
    let flush = ftz.then(|| {
        let thread = paths::thread();
        quote!(#thread::__flush_denormals();)
    });
    // The outputs' launch requirements, which every launcher checked before the kernel ran
    // (`check_requirements`): the entry tells the compiler, so a 1-D kernel's `blockDim.y`/`.z`
    // are 1 and the block collectives' run-time tests of the block's shape fold away (issue 30,
    // session 16).
    //
    // The requirements come from the output types through the device crate's `OutputSet` (an
    // `unsafe trait` there), not from a value computed here (session 19, G18S-1): the entry
    // names its paths in the kernel's crate, which can rename `ferrocuda_device`, and a value
    // computed through such a path could be one that no launch was checked against.
    let launch_shape = {
        let outputs: Vec<&syn::Type> = params.iter().filter_map(output_type).collect();
        (!outputs.is_empty()).then(|| {
            let args = paths::args();
            // The output types are named outside the `unsafe` block: they are the user's, and
            // the block holds generated tokens alone (P1). More than eight are nested.
            let value = format_ident!("__ferrocuda_outputs", span = Span::mixed_site());
            let set = output_set(&outputs);
            quote! {
                let #value = __ferrocuda_core::marker::PhantomData::<#set>;
                // SAFETY: every launch was checked against the outputs' `REQUIREMENTS` before
                // the kernel ran (the host's launch itself, from the outputs' parameters).
                unsafe { #args::__assume_outputs_launch(#value) };
            }
        })
    };
    let entry_params = lowered.iter().flat_map(|l| l.entry_params.iter());
    // `same_len(a, b)`: the launchers checked the lengths equal, so every slice of the group is
    // rebuilt with the first one's length, one value, and one bounds check covers them all.
    let shared_lengths = same_len.iter().flat_map(|group| {
        let first = generated(&group[0], "len");
        group[1..].iter().map(move |name| {
            let len = generated(name, "len");
            quote!(let #len: __ferrocuda_core::primitive::usize = #first;)
        })
    });
    // By-value parameters first (their rebuild names nothing else): an output's `cols(..)`
    // width may be one of them, and its rebuild reads it.
    let rebuild = lowered.iter().filter(|l| l.by_value).chain(lowered.iter().filter(|l| !l.by_value)).map(|l| &l.entry_rebuild);
    let names = params.iter().map(|p| &p.name);
    // The function is named (its path holds the instance's type, user-written) outside any
    // `unsafe`; only the call of an `unsafe fn` kernel is in an `unsafe` block, which then holds
    // generated names alone.
    let kernel = format_ident!("__ferrocuda_kernel", span = Span::mixed_site());
    let call_it = if *unsafe_fn {
        quote! {
            // SAFETY: the entry point is itself `unsafe` to launch, with the kernel's contract
            // (the host launchers of a kernel with raw pointers are `unsafe fn`s).
            unsafe { #kernel(#(#names),*) }
        }
    } else {
        quote!(#kernel(#(#names),*))
    };
    // The kernel's name, for panic reports (one shared-memory store per thread at entry).
    // Identifiers contain no NUL, so the C string always exists.
    // The kernel tag holds the symbol's id, which the panic report looks up in the module's
    // names table (filled by ferrocuda-builder), never an address (audit 2026-11-29b, G22R-1).
    let name = proc_macro2::Literal::u64_suffixed(ferrocuda_types::kernel_name_id(&symbol_text(symbol)));
    let panic = paths::panic();
    // The full-signature fingerprint as a module global, which the host compares with its
    // launcher's before the first launch from an explicitly loaded module (U7).
    let fingerprint = fingerprint_literal(&canonical_signature(symbol, params, same_len, *unsafe_fn));
    let fingerprint_symbol = format!("{}{}", ferrocuda_types::FINGERPRINT_SYMBOL_PREFIX, symbol_text(symbol));
    // The parameters' layout as this (device) build resolves their types (Q1, Q2), which the
    // host compares with its launcher's on the kernel's first launch from a module.
    let layout = layout(params);
    let layout_global = (!params.is_empty()).then(|| {
        let layout_symbol = format!("{}{}", ferrocuda_types::LAYOUT_SYMBOL_PREFIX, symbol_text(symbol));
        let words = params.len() * ferrocuda_types::LAYOUT_WORDS;
        quote! {
            #[unsafe(export_name = #layout_symbol)]
            #[used]
            static LAYOUT: [::core::primitive::u64; #words] = [#(#layout),*];
        }
    });
    // The parameters' element types' structural keys as this build computes them: two
    // `cfg`-chosen types of one size and alignment (`u32`, `f32`), or a struct whose fields a
    // `cfg` reorders or retypes, have one layout but two keys.
    let type_keys = params.iter().map(|p| match (param_elem(p), output_type(p)) {
        // An output: its element's key with its partition's mixed in (audit 2026-11-28,
        // G13R-4: a `cfg`-chosen partition alias gave the device another map than the one
        // whose launch requirements the host checked).
        (Some(t), Some(ty)) => {
            quote_spanned!(t.span()=> ::ferrocuda_device::__private::args::output_key::<#ty>())
        }
        // The type's `LayoutKey` (its fields' names, offsets and types: audit 2026-11-27c F1),
        // required of every element and by-value type.
        // Spanned at the parameter's type: a type without a key is an error there.
        (Some(t), None) => quote_spanned!(t.span()=> ::ferrocuda_device::__private::key_of::<#t>()),
        (None, _) => quote!(0u64),
    });
    // A member of a `same_len(..)` group: its group's number mixed in (G13R-5), as the launcher;
    // an output whose `cols(..)` names width parameters: which parameter gives each width
    // (G17R-1), as the launcher.
    let type_keys = type_keys.zip(params.iter()).map(|(key, p)| {
        let marks = same_len_mark(p, same_len).into_iter().chain(width_marks(p, params));
        marks.fold(key, |key, mark| quote!(::ferrocuda_device::__private::layout_key::mix(#key, #mark)))
    });
    let types_global = (!params.is_empty()).then(|| {
        let types_symbol = format!("{}{}", ferrocuda_types::TYPES_SYMBOL_PREFIX, symbol_text(symbol));
        let count = params.len();
        quote! {
            #[unsafe(export_name = #types_symbol)]
            #[used]
            static TYPES: [::core::primitive::u64; #count] = [#(#type_keys),*];
        }
    });
    // `core` as the entry names it: the real one, loaded by name, whatever `::core` is in the
    // kernel's crate (session 21; `paths::device_core`).
    let core_item = paths::device_core_item();
    quote! {
        #(#cfgs)*
        #[cfg(target_arch = "nvptx64")]
        const _: () = {
            #core_item

            #[unsafe(export_name = #fingerprint_symbol)]
            #[used]
            static FINGERPRINT: ::core::primitive::u64 = #fingerprint;

            #layout_global
            #types_global

            #[unsafe(no_mangle)]
            #[allow(improper_ctypes_definitions, non_snake_case)]
            pub unsafe extern "ptx-kernel" fn #symbol(#(#entry_params),*) {
                #panic::__enter_kernel(#name);
                #flush
                #block_shape
                #launch_shape
                #(#shared_lengths)*
                #(#rebuild)*
                let #kernel = #call;
                #call_it
            }
        };
    }
}

/// The tuple of an entry's output types for `OutputSet` (tuples of up to eight, nested beyond).
fn output_set(outputs: &[&syn::Type]) -> TokenStream {
    fn grouped(items: Vec<TokenStream>) -> TokenStream {
        if items.len() <= 8 { quote!((#(#items,)*)) } else { grouped(items.chunks(8).map(|chunk| quote!((#(#chunk,)*))).collect()) }
    }
    grouped(outputs.iter().map(|ty| quote!(#ty)).collect())
}

/// The canonical text of a kernel's signature, `symbol(type,type,..)`, from which the
/// fingerprint is made (host constant and device global alike; see ferrocuda-types). The
/// types are the kernel's own (`DisjointSlice < f32 >`, `& [f32]`), so element types count.
/// `same_len(..)` groups follow (`k(..);same_len(x,y)`; nothing when there are none, so other
/// kernels keep their fingerprints): the device entry rebuilds a group's slices with the first
/// one's length, trusting the launchers' comparison, so a group given to the device build alone
/// (`cfg_attr`) must not pass the first launch (audit 2026-11-28, G13R-5). An `unsafe fn`
/// kernel's text starts with `unsafe ` (nothing for a safe one, so other kernels keep their
/// fingerprints): its launchers are `unsafe` and its entry calls it trusting their callers, so a
/// safe function of the same signature in the host build (two `cfg`-gated functions; a tensor
/// map kernel's tokens are the same either way) must not pass the first launch with a safe
/// launcher (audit 2026-11-28e, G17R-3).
pub fn canonical_signature(symbol: &Ident, params: &[Param], same_len: &[Vec<Ident>], unsafe_fn: bool) -> String {
    let types: Vec<String> = params
        .iter()
        .map(|p| {
            let ty = &p.ty;
            quote!(#ty).to_string().split_whitespace().collect::<Vec<_>>().join(" ")
        })
        .collect();
    let groups: String =
        same_len.iter().map(|group| format!(";same_len({})", group.iter().map(|name| name.unraw().to_string()).collect::<Vec<_>>().join(","))).collect();
    let unsafety = if unsafe_fn { "unsafe " } else { "" };
    format!("{unsafety}{}({}){groups}", symbol_text(symbol), types.join(","))
}

/// The [`ferrocuda_types::LAYOUT_WORDS`] words of each parameter, as `u64` constant
/// expressions that each build evaluates from its own resolved types (the same words as
/// `ferrocuda_types::layout_words`): the element's (or by-value type's) size and alignment, and
/// the constant `cols(..)` widths (a width given by a parameter is passed at launch: 0).
pub fn layout(params: &[Param]) -> Vec<TokenStream> {
    params
        .iter()
        .flat_map(|p| {
            let (size, align) = match param_elem(p) {
                Some(t) => (quote!(::core::mem::size_of::<#t>() as ::core::primitive::u64), quote!(::core::mem::align_of::<#t>() as ::core::primitive::u64)),
                None => (quote!(0u64), quote!(0u64)),
            };
            // Widths 0 and 1 in the low and high halves; a third (`PermutedRows`'s
            // `(cols, a, b)`) multiplied by an odd constant and XORed over them (both builds
            // compute the same word). Three widths do not fit one word one-to-one; the OR of a
            // rotated third made small collisions ((4, 1, 65536) and (4, 0, 65536): audit
            // 2026-11-29g, G24S-2), which the mixing moves out of reach of plain values, and
            // the device checks the radices itself, so a collision is a missed diagnostic, not
            // unsoundness.
            let widths = p.width_consts.iter().map(|(position, item, _)| match *position as u32 {
                position @ 0..=1 => {
                    let shift = 32 * position;
                    quote!((#item as ::core::primitive::u64) << #shift)
                }
                _ => quote!((#item as ::core::primitive::u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            });
            [size, align, quote!(0u64 #(^ #widths)*)]
        })
        .collect()
}

/// The type a parameter's layout and type name describe: a slice's or an output's element, a
/// raw pointer's pointee, a by-value parameter's own type, a tensor map parameter's map type
/// (`TensorMap` or `StoreMap`, as each build resolves the written name: audit 2026-11-28e,
/// G17R-4, a `cfg`-chosen `use .. as TensorMap` gave the device build a 4 KiB type read and
/// written through the address of the map's 128 bytes, and a tensor map was in no compared
/// table). Always `Some`; an `Option` for the callers' sake.
fn param_elem(p: &Param) -> Option<&syn::Type> {
    use super::parse::ParamKind;
    match &p.kind {
        ParamKind::Scalar { .. } | ParamKind::Value => Some(&p.ty),
        ParamKind::Slice { elem }
        | ParamKind::OptionalSlice { elem }
        | ParamKind::Output { elem }
        | ParamKind::Pointer { elem, .. }
        | ParamKind::TensorMap { elem, .. } => Some(elem),
    }
}

/// The full type of an output parameter (`DisjointSlice<T, P>`), whose partition is part of
/// the key the first launch compares; `None` for the other kinds.
fn output_type(p: &Param) -> Option<&syn::Type> {
    matches!(p.kind, super::parse::ParamKind::Output { .. }).then_some(&p.ty)
}

/// Per parameter, `Some(core::any::type_name::<elem>)` (the host build's name of the type the
/// layout describes) or `None` for a tensor map: [`ferrocuda_types::KernelSignature::type_names`].
fn type_names(params: &[Param]) -> Vec<TokenStream> {
    params
        .iter()
        .map(|p| match param_elem(p) {
            Some(t) => quote!(::core::option::Option::Some(::core::any::type_name::<#t> as fn() -> &'static ::core::primitive::str)),
            None => quote!(::core::option::Option::None),
        })
        .collect()
}

/// Per parameter, `Some(key)` of its element (or value) type as the host build computes it:
/// its `LayoutKey` (required; the device table's rule), or `None` for a tensor map: [`ferrocuda_types::KernelSignature::type_keys`].
fn type_keys(params: &[Param], same_len: &[Vec<Ident>]) -> Vec<TokenStream> {
    params
        .iter()
        .map(|p| {
            let marks: Vec<proc_macro2::Literal> = same_len_mark(p, same_len).into_iter().chain(width_marks(p, params)).collect();
            match param_elem(p) {
                // A member of a `same_len(..)` group, or an output with width parameters: the key
                // with the marks mixed in, as the device table (G13R-5, G17R-1).
                Some(t) if !marks.is_empty() => {
                    let key = match output_type(p) {
                        Some(ty) => quote!(::ferrocuda_device::__private::args::output_key::<#ty>()),
                        None => quote!(::ferrocuda_device::__private::key_of::<#t>()),
                    };
                    let key = marks.iter().fold(key, |key, mark| quote!(::ferrocuda_device::__private::layout_key::mix(#key, #mark)));
                    quote_spanned!(t.span()=> ::core::option::Option::Some(
                        (|| #key) as fn() -> ::core::primitive::u64
                    ))
                }
                Some(t) => match_type_key(p, t),
                None => quote!(::core::option::Option::None),
            }
        })
        .collect()
}

/// The launcher's key of a parameter outside any `same_len` group (see [`type_keys`]).
fn match_type_key(p: &Param, t: &syn::Type) -> TokenStream {
    match output_type(p) {
        // An output: its element's key with its partition's (G13R-4), as the device table.
        Some(ty) => quote_spanned!(t.span()=> ::core::option::Option::Some(
            ::ferrocuda_device::__private::args::output_key::<#ty> as fn() -> ::core::primitive::u64
        )),
        None => quote_spanned!(t.span()=> ::core::option::Option::Some(
            ::ferrocuda_device::__private::key_of::<#t> as fn() -> ::core::primitive::u64
        )),
    }
}

/// The number (from 1) of the `same_len(..)` group `p` belongs to, as a `u64` literal: part of
/// the parameter's type key in both builds, so that a group given to one build alone
/// (`cfg_attr`) is refused at the first launch (audit 2026-11-28, G13R-5: the device entry
/// rebuilds a group's slices with the first one's length, trusting the launchers' check).
fn same_len_mark(p: &Param, same_len: &[Vec<Ident>]) -> Option<proc_macro2::Literal> {
    let group = same_len.iter().position(|group| group.contains(&p.name))?;
    Some(proc_macro2::Literal::u64_suffixed(0x5a3e_1e40_0000_0000 | (group as u64 + 1)))
}

/// For an output whose `cols(..)` names by-value parameters, one mark per such width: its
/// position in `cols(..)` (0, or 1 for the second of a pair) and the parameter's number, as
/// `u64` literals mixed into the output's type key in both builds. The layout holds constant
/// widths only (a width parameter counts 0 there), and the device entry builds the output with
/// the parameter its own build names, trusting the launch-time bound the launcher checked with
/// the parameter the host build names: a `cfg_attr` that gives `cols(dst = (stride, n))` to the
/// device and `cols(dst = (n, stride))` to the host must not pass the first launch (audit
/// 2026-11-28e, G17R-1: a `GridSlices` output written `stride - n` elements past its end).
fn width_marks(p: &Param, params: &[Param]) -> Vec<proc_macro2::Literal> {
    let Some(cols) = &p.cols else { return Vec::new() };
    let parts: Vec<TokenStream> = match syn::parse2::<syn::ExprTuple>(cols.clone()) {
        Ok(tuple) => tuple.elems.iter().map(|e| quote!(#e)).collect(),
        Err(_) => vec![cols.clone()],
    };
    parts
        .into_iter()
        .enumerate()
        .filter_map(|(position, part)| {
            let name = syn::parse2::<Ident>(part).ok()?;
            let index = params.iter().position(|q| q.name == name)?;
            Some(proc_macro2::Literal::u64_suffixed(0x3c01_5000_0000_0000 | (position as u64) << 32 | (index as u64 + 1)))
        })
        .collect()
}

/// The fingerprint of `canonical` as a `u64` literal.
fn fingerprint_literal(canonical: &str) -> proc_macro2::Literal {
    proc_macro2::Literal::u64_suffixed(ferrocuda_types::fingerprint(canonical))
}

/// `pub mod symbol { SYMBOL, SIGNATURE, FINGERPRINT, launch, launch_on_current_context, launch_in, launch_cpu, function }`.
///
/// `entry` is the kernel's (or instance's) entry point, `host_fn` the path of the user's function
/// as seen from the launcher module (`super::name`), `is_unsafe` whether the launchers are
/// `unsafe fn`s (raw pointer parameters), `bounds` the kernel's launch-bounds arguments (a
/// launch requirement, P11).
fn host_launcher(
    entry: &Entry,
    host_fn: TokenStream,
    is_unsafe: bool,
    cluster: Option<&[TokenStream; 3]>,
    same_len: &[Vec<Ident>],
    bounds: Option<&TokenStream>,
) -> TokenStream {
    let Entry { symbol, module: launcher, params, lowered, unsafe_fn, .. } = *entry;
    let fc = paths::host();
    let label = |name: &Ident| name.unraw().to_string();
    let gpu_lengths: Vec<TokenStream> = same_len
        .iter()
        .map(|group| {
            let pairs = group.iter().map(|name| {
                let (text, arg) = (label(name), generated(name, "arg"));
                quote!((#text, #arg.len()))
            });
            quote!(#fc::check_same_len(self::SYMBOL, &[#(#pairs),*])?;)
        })
        .collect::<Vec<_>>();
    let cpu_lengths: Vec<TokenStream> = same_len
        .iter()
        .map(|group| {
            let pairs = group.iter().map(|name| {
                let text = label(name);
                quote!((#text, #name.len()))
            });
            quote!(&[#(#pairs),*])
        })
        .collect();
    let kernels = paths::kernels();
    let text = symbol_text(symbol);
    let canonical = canonical_signature(symbol, params, same_len, unsafe_fn);
    let fingerprint = fingerprint_literal(&canonical);
    let layout = layout(params);
    let type_names = type_names(params);
    let type_keys = type_keys(params, same_len);
    let param_names = params.iter().map(|p| label(&p.name));
    // Generated parameters: mixed-site names, so user parameters called `stream`, `config`,
    // `module` or `executor` are different variables.
    let (stream, config, module, params_array, buffers) = (
        Ident::new("stream", Span::mixed_site()),
        Ident::new("config", Span::mixed_site()),
        Ident::new("module", Span::mixed_site()),
        Ident::new("params", Span::mixed_site()),
        Ident::new("buffers", Span::mixed_site()),
    );
    let accesses: Vec<&TokenStream> = lowered.iter().flat_map(|l| l.buffer_access.iter()).collect();
    let buffer_count = accesses.len();

    let launch_params: Vec<&TokenStream> = lowered.iter().map(|l| &l.launch_param).collect();
    let prepare = lowered.iter().map(|l| &l.launch_prepare);
    // A `same_len(..)` member after the first passes its length with the group's relation,
    // which the real launch checks itself (session 19, G18S-1: `check_same_len` below is
    // reached through a path the kernel's crate can rename, and the device entry rebuilds the
    // member with the first one's length).
    let mut same_len_prepare = Vec::new();
    let mut pointers: Vec<TokenStream> = Vec::new();
    for (l, p) in lowered.iter().zip(params.iter()) {
        let mut own = l.launch_pointers.clone();
        if let Some(group) = same_len.iter().find(|group| group[1..].contains(&p.name))
            && own.len() == 2
        {
            let (first, relation) = (&group[0], generated(&p.name, "same_len"));
            let (first_label, first_arg, member_label, member_arg) = (label(first), generated(first, "arg"), label(&p.name), generated(&p.name, "arg"));
            same_len_prepare.push(quote!(let #relation = #fc::SameLen::new((#first_label, &#first_arg), (#member_label, &#member_arg));));
            own[1] = quote!(#fc::KernelParam::same_len(&#relation));
        }
        pointers.extend(own);
    }
    let sizes = lowered.iter().flat_map(|l| l.param_sizes.iter());
    let checks = lowered.iter().flat_map(|l| l.checks.iter());
    let arg_names: Vec<TokenStream> = launch_params.iter().map(|p| param_name(p)).collect();
    let count = pointers.len();
    let doc = format!(
        "Typed launcher of the `{name}` kernel (PTX symbol `{text}`): `{launcher}::launch(&stream, config, ..)`, \
         `launch!({launcher}<<<grid, block>>>(..))`, or `{launcher}::launch_in(&module, ..)` for an explicitly loaded module.",
        name = launcher.unraw()
    );
    let (unsafety, safety_doc) = if is_unsafe {
        (
            quote!(unsafe),
            quote! {
                ///
                /// # Safety
                /// The kernel is `unsafe`: its own `# Safety` contract must hold for this launch.
                /// Raw device pointers among its parameters must each point to device memory of
                /// this context that stays allocated, and is valid for the kernel's reads and
                /// writes (with no other writer), until the kernel has finished.
            },
        )
    } else {
        (quote!(), quote!())
    };
    let prepare: Vec<&TokenStream> = prepare.collect();
    let launch_checks: Vec<&TokenStream> = lowered.iter().map(|l| &l.launch_check).collect();
    let cluster_dims = match cluster {
        Some([x, y, z]) => quote!(::core::option::Option::Some(#fc::Dim3 { x: #x, y: #y, z: #z })),
        None => quote!(::core::option::Option::None),
    };
    // Only a kernel compiled for a cluster shape checks its configuration against it: the
    // launch path of every other kernel stays as it was.
    let config_value = match cluster {
        Some(_) => quote!(#fc::compiled_cluster(self::SYMBOL, #config.into(), self::CLUSTER_DIMS)?),
        None => quote!(#config.into()),
    };
    let args = paths::args();
    let requirements = lowered.iter().filter_map(|l| l.requirements.as_ref());
    let bounds_requirement = bounds.map(bounds_requirement);
    // One body for `launch` and `launch_in` (`module`: `None` for the embedded module), so that
    // the bounds on each parameter's `KernelParam` report a refused type once.
    let launch_body = {
        quote! {
            let #config: #fc::LaunchConfig = #config_value;
            // Before anything else: what the outputs' witnesses rely on (a 1-D launch of at
            // most u32::MAX threads for per-thread outputs).
            #fc::check_requirements(self::SYMBOL, &#config, self::REQUIREMENTS)?;
            #(#prepare)*
            // Each output's launch-time bound (its partition's fact about shape, launch and
            // buffer), before anything is queued.
            #(#launch_checks)*
            #(#gpu_lengths)*
            // Each parameter made by a constructor of the type the real launch takes (G17R-2's
            // residual): what it is on the GPU is that constructor's bound, not a check made
            // through a path this crate could have renamed.
            #(#same_len_prepare)*
            let #params_array: [#fc::KernelParam<'_>; #count] = [#(#pointers),*];
            // Each buffer parameter and how the kernel uses it: the host orders the stream
            // after other streams' work on it and refuses another context's buffer.
            let #buffers: [#fc::BufferAccess<'_>; #buffer_count] = [#(#accesses),*];
            match #module {
                // SAFETY: the parameter array follows the PTX signature generated from the same
                // function: each slice is a live device allocation of its length, outputs are
                // borrowed exclusively for the call, raw pointers are vouched for by the caller of
                // this `unsafe fn`.
                ::core::option::Option::None => unsafe { #fc::launch_embedded(&#kernels, &self::SIGNATURE, #stream, #config, &#params_array, &#buffers) },
                // SAFETY: as above.
                ::core::option::Option::Some(#module) => unsafe { #fc::launch_in_module(#module, &self::SIGNATURE, #stream, #config, &#params_array, &#buffers) },
            }
        }
    };
    let launch_fn = format_ident!("__ferrocuda_launch", span = Span::mixed_site());
    let cpu_unsafe = is_unsafe || params.iter().any(|p| matches!(p.kind, super::parse::ParamKind::TensorMap { .. }));
    let cpu = cpu_launcher(lowered, host_fn, unsafe_fn, cpu_unsafe, cluster.is_some(), &cpu_lengths);
    quote! {
        #[cfg(not(target_arch = "nvptx64"))]
        #[doc = #doc]
        #[allow(non_snake_case, reason = "a generic kernel's instance is named after its type (`scale_Pair`)")]
        pub mod #launcher {
            #[allow(unused_imports)]
            use super::*;

            /// The kernel's symbol in the PTX module.
            pub const SYMBOL: &str = #text;

            /// The cluster shape the kernel was compiled for (`#[kernel(cluster_dims(..))]`,
            /// `.reqnctapercluster` in its PTX): the launchers use it when the configuration
            /// names no cluster and refuse another. `None`: clusters come from the
            /// configuration alone.
            pub const CLUSTER_DIMS: ::core::option::Option<#fc::Dim3> = #cluster_dims;

            /// The fingerprint of the kernel's full signature (element types included), also
            /// stored in the device module as `__ferrocuda_fingerprint_<symbol>`.
            pub const FINGERPRINT: ::core::primitive::u64 = #fingerprint;

            /// What the host expects of the kernel in a module: its symbol, the byte size of
            /// each PTX parameter (a slice is two: pointer and length) and the fingerprint of
            /// its full signature.
            pub const SIGNATURE: #fc::KernelSignature = #fc::KernelSignature {
                symbol: self::SYMBOL,
                param_sizes: &[#(#sizes),*],
                canonical: #canonical,
                fingerprint: self::FINGERPRINT,
                layout: &[#(#layout),*],
                param_names: &[#(#param_names),*],
                type_names: &[#(#type_names),*],
                type_keys: &[#(#type_keys),*],
            };

            /// What the kernel's output parameters require of a launch configuration (every
            /// launcher checks it before the kernel runs): `LINEAR_THREADS` for a per-thread
            /// output (`DisjointSlice`, `DisjointChunks`, `DisjointPlanes`).
            pub const REQUIREMENTS: #args::LaunchRequirements = #args::LaunchRequirements::NONE #(.and(#requirements))* #bounds_requirement;

            #[allow(dead_code)]
            const _: fn() = || { #(#checks)* };

            /// Launches the kernel on `stream` with `config` (grid, block, dynamic shared
            /// memory, optional cluster), loading the crate's embedded module into the
            /// stream's context on first use.
            ///
            /// The launch is asynchronous: errors of the kernel itself come back from the
            /// stream's next synchronisation.
            #safety_doc
            #[inline]
            #[allow(clippy::too_many_arguments)]
            pub #unsafety fn launch(
                #stream: &#fc::Stream,
                #config: impl ::core::convert::Into<#fc::LaunchConfig>,
                #(#launch_params),*
            ) -> ::core::result::Result<(), #fc::Error> {
                // SAFETY: forwarded from this function's own contract.
                #[allow(unused_unsafe)]
                unsafe { self::#launch_fn(::core::option::Option::None, #stream, #config, #(#arg_names),*) }
            }

            /// Launches on the default stream of the calling thread's current context.
            #safety_doc
            #[inline]
            #[allow(clippy::too_many_arguments)]
            pub #unsafety fn launch_on_current_context(
                #config: impl ::core::convert::Into<#fc::LaunchConfig>,
                #(#launch_params),*
            ) -> ::core::result::Result<(), #fc::Error> {
                let #stream = #fc::Stream::current_default()?;
                // SAFETY: forwarded from this function's own contract.
                #[allow(unused_unsafe)]
                unsafe { self::launch(&#stream, #config, #(#arg_names),*) }
            }

            /// Launches the kernel from an explicitly loaded `module` (JIT options, hot
            /// reload) instead of the embedded one. The first launch checks that the module
            /// has this kernel with the parameter sizes in [`SIGNATURE`].
            #safety_doc
            #[inline]
            #[allow(clippy::too_many_arguments)]
            pub #unsafety fn launch_in(
                #module: &#fc::Module,
                #stream: &#fc::Stream,
                #config: impl ::core::convert::Into<#fc::LaunchConfig>,
                #(#launch_params),*
            ) -> ::core::result::Result<(), #fc::Error> {
                // SAFETY: forwarded from this function's own contract.
                #[allow(unused_unsafe)]
                unsafe { self::#launch_fn(::core::option::Option::Some(#module), #stream, #config, #(#arg_names),*) }
            }

            /// `launch` (`module` `None`) and `launch_in`.
            #[inline(always)]
            #[allow(clippy::too_many_arguments)]
            #unsafety fn #launch_fn(
                #module: ::core::option::Option<&#fc::Module>,
                #stream: &#fc::Stream,
                #config: impl ::core::convert::Into<#fc::LaunchConfig>,
                #(#launch_params),*
            ) -> ::core::result::Result<(), #fc::Error> {
                #launch_body
            }

            #cpu

            /// The kernel as loaded into `context` (from the embedded module): attributes,
            /// occupancy, shared memory and cache settings.
            pub fn function(context: &#fc::Context) -> ::core::result::Result<#fc::Function, #fc::Error> {
                #fc::embedded_function(&#kernels, self::SYMBOL, context)
            }
        }
    }
}

/// The thread count of `reqntid`'s arguments after the word (`threads` or `threads,
/// min_blocks`): the first expression.
fn reqntid_threads(args: TokenStream) -> TokenStream {
    use syn::parse::Parser;
    match syn::punctuated::Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated.parse2(args.clone()) {
        Ok(values) => values.into_iter().next().map_or(args, |threads| quote!(#threads)),
        Err(_) => args,
    }
}

/// `.and(LaunchRequirements::launch_bounds(max))` or `.and(LaunchRequirements::reqntid(n))`
/// from the arguments of the kernel's launch-bounds marker (`max, min_blocks` or `reqntid n`):
/// a GPU refuses a larger block (`.maxntid`) or another one (`.reqntid`), so every launcher,
/// `launch_cpu` included, refuses it first with the bound named (audit P11).
fn bounds_requirement(bounds: &TokenStream) -> TokenStream {
    use syn::parse::Parser;
    let args = paths::args();
    let mut tokens = bounds.clone().into_iter().peekable();
    if matches!(tokens.peek(), Some(proc_macro2::TokenTree::Ident(word)) if word == "reqntid") {
        let threads = reqntid_threads(tokens.skip(1).collect());
        return quote!(.and(#args::LaunchRequirements::reqntid(#threads)));
    }
    let parsed = syn::punctuated::Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated.parse2(bounds.clone());
    match parsed.ok().and_then(|values| values.into_iter().next()) {
        Some(max) => quote!(.and(#args::LaunchRequirements::launch_bounds(#max))),
        None => quote!(),
    }
}

/// The name of a `name: type` parameter (its first token).
fn param_name(param: &TokenStream) -> TokenStream {
    param.clone().into_iter().take(1).collect()
}

/// `launch_cpu(&executor, config, args..)`: runs the host copy of the kernel (`host_fn`) on the
/// CPU executor, every GPU thread calling it with its own copy of the parameters.
///
/// `unsafe_fn`: the kernel function is an `unsafe fn` (its call needs an `unsafe` block, which
/// holds generated names only); `is_unsafe`: the launcher is (raw pointers or tensor maps).
fn cpu_launcher(lowered: &[Lowered], host_fn: TokenStream, unsafe_fn: bool, is_unsafe: bool, compiled_cluster: bool, same_len: &[TokenStream]) -> TokenStream {
    let args = paths::args();
    let cpu = paths::cpu();
    let kernels = paths::kernels();
    let (executor, config, body) =
        (Ident::new("executor", Span::mixed_site()), Ident::new("config", Span::mixed_site()), format_ident!("__ferrocuda_body", span = Span::mixed_site()));
    let config_value =
        if compiled_cluster { quote!(#cpu::compiled_cluster(self::SYMBOL, #config.into(), self::CLUSTER_DIMS)?) } else { quote!(#config.into()) };
    let launch_params = lowered.iter().map(|l| &l.cpu_param);
    let prepare = lowered.iter().map(|l| &l.cpu_prepare);
    let cpu_checks = lowered.iter().map(|l| &l.cpu_check);
    let rebuild = lowered.iter().map(|l| &l.cpu_rebuild);
    let names: Vec<TokenStream> = lowered.iter().map(|l| param_name(&l.cpu_param)).collect();
    // As on the device: the kernel function is named outside any `unsafe`, and only an
    // `unsafe fn` kernel's call is in an `unsafe` block (of generated names alone).
    let kernel = format_ident!("__ferrocuda_kernel", span = Span::mixed_site());
    let call = if unsafe_fn {
        quote! {
            // SAFETY: forwarded from this function's own contract (an `unsafe fn` kernel has
            // raw pointer parameters, so this launcher is `unsafe` too).
            unsafe { #kernel(#(#names),*) }
        }
    } else {
        quote!(#kernel(#(#names),*))
    };
    let (unsafety, safety_doc) = if is_unsafe {
        (
            quote!(unsafe),
            quote! {
                ///
                /// # Safety
                /// The kernel takes raw pointers or tensor maps: on the CPU they are host
                /// pointers (an emulated map, `TensorMap::emulated`, holds one), each valid for
                /// the kernel's reads and writes (with no other writer) until this returns.
            },
        )
    } else {
        (quote!(), quote!())
    };
    quote! {
        /// Runs the kernel on the CPU executor with `config`: every thread of the grid calls the
        /// kernel function with these arguments, as on a GPU, with CUDA's block barriers, warp
        /// operations, shared memory and atomics. Returns when the grid has finished, with a
        /// structured error for a panic, a barrier some threads never reach, or a shared-memory
        /// data race.
        #safety_doc
        #[allow(clippy::too_many_arguments)]
        pub #unsafety fn launch_cpu(
            #executor: &#cpu::CpuExecutor,
            #config: impl ::core::convert::Into<#cpu::LaunchConfig>,
            #(#launch_params),*
        ) -> ::core::result::Result<(), #cpu::CpuError> {
            let #config: #cpu::LaunchConfig = #config_value;
            // Before anything else, as on the GPU: what the outputs' witnesses rely on.
            if let ::core::result::Result::Err(__ferrocuda_problem) = #config.check_requirements(self::REQUIREMENTS) {
                return ::core::result::Result::Err(#cpu::CpuError::InvalidConfig { kernel: ::std::string::ToString::to_string(self::SYMBOL), problem: __ferrocuda_problem });
            }
            #(
                if let ::core::result::Result::Err(__ferrocuda_problem) = #args::same_lengths(#same_len) {
                    return ::core::result::Result::Err(#cpu::CpuError::InvalidConfig { kernel: ::std::string::ToString::to_string(self::SYMBOL), problem: __ferrocuda_problem });
                }
            )*
            // The host build this runs and the device build agree about integer overflow (Q11),
            // the kernel's stack (ptxas) fits a GPU thread (Q7), and its static shared memory
            // (ptxas) with the launch's dynamic shared memory fits a block (F7).
            #cpu::__private::check_module(self::SYMBOL, &#kernels, &#config)?;
            // Each output's launch-time bound, as the GPU launchers check it.
            #(#cpu_checks)*
            #(#prepare)*
            let #body = move || {
                #(#rebuild)*
                let #kernel = #host_fn;
                #call
            };
            #executor.run(self::SYMBOL, #config, &#body)
        }
    }
}
