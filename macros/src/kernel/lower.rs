//! One lowering per parameter kind: how a kernel parameter crosses from the host launcher
//! (and the CPU launcher) to the device entry. The device entry, the GPU launchers and the CPU
//! launcher are all assembled from these descriptions, so each kind's ABI is stated once.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Ident, Type};

use super::parse::{Param, ParamKind};
use super::paths;

/// What one parameter becomes on each side.
pub struct Lowered {
    /// Parameters of the PTX entry (`name: ty`).
    pub entry_params: Vec<TokenStream>,
    /// Statement in the entry that rebuilds the kernel's own parameter from them.
    pub entry_rebuild: TokenStream,
    /// A by-value parameter (its rebuild comes first in the entry: outputs' widths read it).
    pub by_value: bool,
    /// Parameter of the GPU launchers (`name: ty`).
    pub launch_param: TokenStream,
    /// Statement in the GPU launchers before the parameter array is built.
    pub launch_prepare: TokenStream,
    /// Pointers to each PTX parameter's value, in order.
    pub launch_pointers: Vec<TokenStream>,
    /// Byte size of each PTX parameter, in order.
    pub param_sizes: Vec<TokenStream>,
    /// For a buffer parameter: its `BufferAccess` (read or write) for the host's stream
    /// ordering and context checks; a tensor map has two (its copy, the memory behind it).
    pub buffer_access: Vec<TokenStream>,
    /// Compile-time checks (spanned at the user's type).
    pub checks: Vec<TokenStream>,
    /// For an output: what it requires of the launch configuration (a constant
    /// `LaunchRequirements`), which every launcher checks before the kernel runs.
    pub requirements: Option<TokenStream>,
    /// For an output: the GPU launchers' check of its launch-time bound
    /// (`KernelOutput::check_launch`), a statement after `launch_prepare`.
    pub launch_check: TokenStream,
    /// The same check in the CPU launcher, before `cpu_prepare` (it reads the slice's length).
    pub cpu_check: TokenStream,
    /// Parameter of the CPU launcher.
    pub cpu_param: TokenStream,
    /// Statement in the CPU launcher, before the per-thread body.
    pub cpu_prepare: TokenStream,
    /// Statement in the per-thread body that rebuilds the kernel's parameter.
    pub cpu_rebuild: TokenStream,
}

/// A name only generated code can spell: `__ferrocuda_<param>_<what>`, with mixed-site
/// hygiene (user parameters named `__ferrocuda*` are rejected besides).
pub fn generated(param: &Ident, what: &str) -> Ident {
    use syn::ext::IdentExt;
    format_ident!("__ferrocuda_{}_{}", param.unraw(), what, span = Span::mixed_site())
}

/// How a device slice (pointer + length) travels: stated once for every slice kind.
struct SliceAbi {
    /// The PTX entry's pointer parameter type.
    device_pointer: TokenStream,
    /// `SliceArg::input::<T, _>(x)` or `SliceArg::output::<T, _>(x)` (a real `DeviceRead` /
    /// `DeviceWrite` impl makes it, G17R-2).
    host_argument: TokenStream,
    /// The launcher's parameter type.
    host_type: TokenStream,
    /// True if the kernel writes the buffer.
    writes: bool,
    /// The CPU launcher's parameter type and the parts type built from it.
    cpu_type: TokenStream,
    cpu_parts: TokenStream,
}

pub fn lower(param: &Param) -> Lowered {
    let (name, ty) = (&param.name, &param.ty);
    let mutability = param.mutable.then(|| quote!(mut));
    let (host, args) = (paths::host(), paths::args());
    // Every by-value parameter is checked by what its type is, not how it is spelled (N5):
    // a primitive's spelling must name the primitive itself, anything else must be `Pod`.
    // The check is the bound of the constructor of the launch's parameter (`KernelParam`, the
    // type the real launch takes), not a separate call (G17R-2's residual, session 18: a crate
    // that renames the runtime replaced the separate check and reached the real launch).
    // Spanned at the user's type, so the error is reported there.
    //
    // The device entry takes a by-value struct as `MaybeUninit<T>` (same size, alignment and
    // ABI, so the same PTX parameter) and makes the `T` only through the device crate's own
    // `by_value`, bounded there by `Pod`, so that the device build's type is plain data whatever
    // the cross-build tables say (audit 2026-11-28g, G19R-1: with `key_of` renamed to return 0,
    // a by-value `&'static mut u32` in the device build took a host integer as an address). A
    // renamed `ferrocuda_device` gets its own function there, which cannot make a `T` of a
    // `MaybeUninit<T>` without `unsafe`. A parameter written like a primitive is taken as the
    // primitive the macro names by its full path (`::core::primitive::u32`) and handed on by
    // `scalar`, bounded by the device crate's `DeviceScalar`: an identity, so the PTX parameter
    // keeps the primitive's LLVM attributes (`noundef`, a `bool`'s range: `MaybeUninit` lost
    // them, and one loop of a test kernel was versioned anew), and the spelling must name that
    // primitive in the device build too.
    let raw = generated(name, "raw");
    let by_value = |pointer: TokenStream, entry_type: TokenStream, rebuild: TokenStream| Lowered {
        entry_params: vec![quote!(#raw: #entry_type)],
        entry_rebuild: quote_spanned! {ty.span()=>
            let #mutability #name: #ty = #args::#rebuild::<#ty>(#raw);
        },
        by_value: true,
        launch_param: quote!(#name: #ty),
        launch_prepare: quote!(),
        launch_pointers: vec![pointer],
        param_sizes: vec![quote!(::core::mem::size_of::<#ty>())],
        buffer_access: Vec::new(),
        checks: vec![],
        requirements: None,
        launch_check: quote!(),
        cpu_check: quote!(),
        cpu_param: quote!(#name: #ty),
        cpu_prepare: quote!(),
        // Copied into each thread's call, as the GPU copies parameters to every thread: a safe
        // copy bounded by `Copy` in the host crate, not `unsafe { ::core::ptr::read }` trusting
        // the checks above, which are made through paths the user's crate can rename (audit
        // 2026-11-28e, G17R-2: a non-`Copy` type duplicated into every thread, a double free).
        // Through a call rather than a plain `let`, so that a refused type gives no error about
        // the launcher's closure (c05's E0525).
        cpu_rebuild: quote_spanned! {ty.span()=>
            let #mutability #name: #ty = #host::copy_param::<#ty>(&#name);
        },
    };
    // The entry names `core` as `__ferrocuda_core`, the real one whatever `::core` is in the
    // kernel's crate (session 21, `paths::device_core`).
    let core = paths::device_core();
    match &param.kind {
        ParamKind::Scalar { primitive } => {
            let entry_type = super::parse::scalar_path_in(ty, &core).unwrap_or_else(|| primitive.clone());
            by_value(quote_spanned!(ty.span()=> #host::KernelParam::scalar::<#ty, #primitive>(&#name)), entry_type, quote!(scalar))
        }
        ParamKind::Value => {
            by_value(quote_spanned!(ty.span()=> #host::KernelParam::value::<#ty>(&#name)), quote!(#core::mem::MaybeUninit<#ty>), quote!(by_value))
        }
        ParamKind::Pointer { elem, .. } => {
            let parts = generated(name, "cpu");
            Lowered {
                entry_params: vec![quote!(#mutability #name: #ty)],
                entry_rebuild: quote!(),
                by_value: false,
                launch_param: quote_spanned!(elem.span()=> #name: #host::DevicePtr<#elem>),
                launch_prepare: quote!(),
                // SAFETY: pointer parameters make the kernel and its launcher `unsafe` (the caller's
                // promise covers the address); `device_ptr` is `unsafe` so that no safe code can
                // put an address in a slice parameter's place (G19R-3).
                launch_pointers: vec![quote!(unsafe { #host::KernelParam::device_ptr(&#name) })],
                param_sizes: vec![quote!(::core::mem::size_of::<::core::primitive::u64>())],
                // Raw pointers are the caller's business (the launcher is `unsafe`).
                buffer_access: Vec::new(),
                checks: vec![],
                requirements: None,
                launch_check: quote!(),
                cpu_check: quote!(),
                cpu_param: quote!(#name: #ty),
                cpu_prepare: quote!(let #parts = #args::PointerParts::new(#name);),
                cpu_rebuild: quote!(let #mutability #name: #ty = #parts.get();),
            }
        }
        ParamKind::TensorMap { elem, store } => {
            let arg = generated(name, "map");
            let label = {
                use syn::ext::IdentExt;
                name.unraw().to_string()
            };
            // A store map is borrowed exclusively for the launch and must be made for writes.
            let (launch_param, launch_prepare, check) = if *store {
                (
                    quote_spanned!(ty.span()=> #name: &mut #host::DeviceTensorMap<'_>),
                    quote!(let #arg = #host::MapArg::store(#name, self::SYMBOL, #label)?;),
                    quote_spanned!(elem.span()=> #args::require_store_map::<#elem>();),
                )
            } else {
                (
                    quote_spanned!(ty.span()=> #name: &#host::DeviceTensorMap<'_>),
                    quote!(let #arg = #host::MapArg::load(#name);),
                    quote_spanned!(elem.span()=> #args::require_tensor_map::<#elem>();),
                )
            };
            Lowered {
                // A reference to the map in global memory: the PTX parameter is its address.
                entry_params: vec![quote!(#mutability #name: #ty)],
                entry_rebuild: quote!(),
                by_value: false,
                launch_param,
                launch_prepare,
                launch_pointers: vec![quote!(#host::KernelParam::tensor_map(&#arg))],
                param_sizes: vec![quote!(::core::mem::size_of::<::core::primitive::u64>())],
                // The map's own copy is read; the memory behind it as the map was made. Both from
                // the `MapArg` made of the real map, as its address is (G17R-2's residual).
                buffer_access: vec![quote!(#arg.map_access(#label)), quote!(#arg.memory_access(#label))],
                checks: vec![check],
                requirements: None,
                launch_check: quote!(),
                cpu_check: quote!(),
                cpu_param: quote!(#name: #ty),
                cpu_prepare: quote!(),
                cpu_rebuild: quote!(),
            }
        }
        ParamKind::Slice { elem } => {
            let (input_args, elem_span) = (args.clone(), elem.span());
            slice(
                param,
                elem,
                SliceAbi {
                    // `&[T; 0]`: no-alias and read-only like `&[T]` (so loads become
                    // `ld.global.nc`), yet valid for an empty slice.
                    device_pointer: quote!(&[#elem; 0]),
                    host_argument: quote!(#host::SliceArg::input::<#elem, _>(#name)),
                    host_type: quote_spanned!(elem.span()=> &(impl #host::DeviceRead<#elem> + ?::core::marker::Sized)),
                    writes: false,
                    cpu_type: quote!(&[#elem]),
                    cpu_parts: quote!(#args::InputParts),
                },
                None,
                // The device crate's `input`, bounded by `Pod` there (session 21: the entry called
                // `core::slice::from_raw_parts` itself, for whatever element the device build chose).
                // Spanned at the element type: a refused element is reported there.
                move |pointer, len, _| quote_spanned!(elem_span=> #input_args::input(#pointer, #len)),
                // Safe: `InputParts<'a, T>` gives the slice back for the launch's borrow `'a` only.
                |parts, _| quote!(#parts.get()),
            )
        }
        ParamKind::OptionalSlice { elem } => optional_slice(param, elem),
        ParamKind::Output { elem } => {
            let abi = SliceAbi {
                // A shared reference to an empty `UnsafeCell`: no `noalias` and no `readonly`
                // (interior mutability), so nothing is cached across barriers, while the PTX
                // parameter keeps the element's alignment (`.ptr .align N`).
                device_pointer: quote!(&#core::cell::UnsafeCell<[#elem; 0]>),
                host_argument: quote!(#host::SliceArg::output::<#elem, _>(#name)),
                host_type: quote_spanned!(elem.span()=> &mut (impl #host::DeviceWrite<#elem> + ?::core::marker::Sized)),
                writes: true,
                cpu_type: quote!(&mut [#elem]),
                cpu_parts: quote!(#args::OutputParts),
            };
            // A matrix output gets its width (`cols(..)`, the same in every thread), every other
            // output `()`; the check says which the type is, spanned at the user's type.
            let (check, shape) = match &param.cols {
                Some(width) => (quote_spanned!(ty.span()=> #args::require_matrix_output::<#ty, #elem>();), width.clone()),
                None => {
                    (quote_spanned!(ty.span()=> #args::require_output::<#ty, #elem>();), quote!(<<#ty as #args::KernelOutput>::Shape as #args::NoShape>::NONE))
                }
            };
            // The shape (a width parameter or the user's constant expression) is bound before
            // the `unsafe` block that builds the output, so no user-written expression is ever
            // type-checked inside generated `unsafe` (P1); the output's type comes from the
            // `let`'s annotation, so no user-written type is named inside it either.
            let device_args = args.clone();
            // The output's launch-time bound, in both launchers (after `REQUIREMENTS`): the
            // same shape expression as the entry's, evaluated on the host from the launch's
            // arguments (width parameters) or the constant items.
            let (config, label) = (Ident::new("config", Span::mixed_site()), {
                use syn::ext::IdentExt;
                name.unraw().to_string()
            });
            let (arg, shape_var, facts, launch_shape) =
                (generated(name, "arg"), generated(name, "check_shape"), generated(name, "output"), generated(name, "launch_shape"));
            let shape_for_launch = shape.clone();
            let launch_check = quote! {
                let #shape_var = #shape;
                #host::check_output_shape(self::SYMBOL, #args::check_output_launch(#label, &#config, #arg.len(), #shape_var, ::core::marker::PhantomData::<#ty>))?;
            };
            let cpu_check = quote! {
                let #shape_var = #shape;
                if let ::core::result::Result::Err(__ferrocuda_problem) = #args::check_output_launch(#label, &#config, #name.len(), #shape_var, ::core::marker::PhantomData::<#ty>) {
                    return ::core::result::Result::Err(::ferrocuda_device::cpu::CpuError::InvalidConfig {
                        kernel: ::std::string::ToString::to_string(self::SYMBOL),
                        problem: __ferrocuda_problem,
                    });
                }
            };
            let mut lowered = slice(
                param,
                elem,
                abi,
                Some(shape),
                // The parameter itself, typed by the output's element and bounded by `Pod` in the
                // device crate's `output` (session 21: no `.get()` of a `core` type the kernel's
                // crate could make its own, no cast).
                move |pointer, len, shape| quote!(#device_args::output(#pointer, #len, #shape)),
                // SAFETY (in the generated block): the slice is borrowed by this launch until
                // every thread is done, the launch was checked against the outputs'
                // `REQUIREMENTS`, and the shape is one value for every thread. The output's
                // lifetime is the borrow's (`OutputOf<'a>`, G13-1).
                move |parts, shape| quote!(unsafe { #parts.output(#shape) }),
            );
            // The output's facts travel in its address parameter (session 19, G18S-1): the real
            // launch checks the output type's `REQUIREMENTS` and launch-time bound for this
            // buffer and shape itself, whatever the check above was renamed to. The same shape
            // expression as the check's and the entry's; the output type last, as a marker, as
            // in `check_output_launch`.
            lowered.launch_prepare.extend(quote! {
                let #launch_shape = #shape_for_launch;
                let #facts = #host::OutputArg::new(&#arg, #label, #launch_shape, ::core::marker::PhantomData::<#ty>);
            });
            lowered.launch_pointers[0] = quote!(#host::KernelParam::output_address(&#facts));
            lowered.checks.push(check);
            lowered.requirements = Some(quote!(<#ty as #args::KernelOutput>::REQUIREMENTS));
            lowered.launch_check = launch_check;
            lowered.cpu_check = cpu_check;
            lowered
        }
    }
}

/// The slice ABI: a pointer and a `usize` length on the device; the launcher's prepared
/// argument (`ptr`, `len`) on the host; a parts value shared by the CPU executor's threads.
///
/// `shape`, when given, is the user's expression for the output's shape: it is bound to a
/// generated variable *outside* the `unsafe` blocks, and `rebuild`/`cpu_rebuild` get that
/// variable (P1: no user-written expression is expanded inside generated `unsafe`).
/// `cpu_rebuild` writes its own `unsafe` block where it needs one (an output; an input's
/// `InputParts::get` is safe).
fn slice(
    param: &Param,
    elem: &Type,
    abi: SliceAbi,
    shape: Option<TokenStream>,
    rebuild: impl Fn(&Ident, &Ident, &Ident) -> TokenStream,
    cpu_rebuild: impl Fn(&Ident, &Ident) -> TokenStream,
) -> Lowered {
    let (name, ty) = (&param.name, &param.ty);
    let mutability = param.mutable.then(|| quote!(mut));
    let (host, args) = (paths::host(), paths::args());
    let (pointer, len, arg, parts) = (generated(name, "ptr"), generated(name, "len"), generated(name, "arg"), generated(name, "cpu"));
    let shape_var = generated(name, "shape");
    let bind_shape = shape.map(|shape| quote!(let #shape_var = #shape;));
    let SliceAbi { device_pointer, host_argument, host_type, writes, cpu_type, cpu_parts } = abi;
    let core = paths::device_core();
    let label = {
        use syn::ext::IdentExt;
        name.unraw().to_string()
    };
    let buffer_access = if writes { quote!(#arg.write(#label)) } else { quote!(#arg.read(#label)) };
    let device_rebuild = rebuild(&pointer, &len, &shape_var);
    let cpu_value = cpu_rebuild(&parts, &shape_var);
    Lowered {
        entry_params: vec![quote!(#pointer: #device_pointer), quote!(#len: #core::primitive::usize)],
        entry_rebuild: quote! {
            #bind_shape
            // SAFETY: the host launcher passed a device allocation of `len` elements, borrowed
            // (exclusively, for outputs) until the kernel has finished, and checked the
            // launch against the outputs' `REQUIREMENTS`.
            let #mutability #name: #ty = unsafe { #device_rebuild };
        },
        by_value: false,
        launch_param: quote!(#name: #host_type),
        launch_prepare: quote!(let #arg = #host_argument;),
        launch_pointers: vec![quote!(#host::KernelParam::slice_address(&#arg)), quote!(#host::KernelParam::slice_len(&#arg))],
        param_sizes: vec![quote!(::core::mem::size_of::<::core::primitive::u64>()), quote!(::core::mem::size_of::<::core::primitive::usize>())],
        buffer_access: vec![buffer_access],
        checks: vec![quote_spanned!(elem.span()=> #args::require_pod::<#elem>();)],
        requirements: None,
        launch_check: quote!(),
        cpu_check: quote!(),
        cpu_param: quote!(#name: #cpu_type),
        cpu_prepare: quote!(let #parts = #cpu_parts::new(#name);),
        cpu_rebuild: quote! {
            #bind_shape
            let #mutability #name: #ty = #cpu_value;
        },
    }
}

/// `Option<&[T]>`: an optional input, the slice ABI (pointer, length) with `None` as the null
/// address and length 0.
///
/// On the device the pointer is an `Option<&[T; 0]>`: null is its `None` (Rust guarantees the
/// null-pointer niche of `Option<&T>`), and `Some` is the same no-alias, read-only reference
/// as `&[T]`'s, so loads stay `ld.global.nc`. The kernel gets `None` or the rebuilt slice; the
/// test the kernel makes of the `Option` is the PTX's one null test. The launchers take an
/// `Option<&dyn DeviceRead<T>>` (a trait object, so that `None` needs no type annotation) and
/// declare the read of `Some` buffers only; the CPU launcher takes an `Option<&[T]>`.
fn optional_slice(param: &Param, elem: &Type) -> Lowered {
    let (name, ty) = (&param.name, &param.ty);
    let mutability = param.mutable.then(|| quote!(mut));
    let (host, args) = (paths::host(), paths::args());
    let (pointer, len, arg, parts) = (generated(name, "ptr"), generated(name, "len"), generated(name, "arg"), generated(name, "cpu"));
    let present = generated(name, "present");
    let core = paths::device_core();
    // The device crate's `input`, bounded by `Pod` (as a plain slice's), spanned at the element.
    let input = quote_spanned!(elem.span()=> #args::input(#present, #len));
    let buffer = generated(name, "buffer");
    let label = {
        use syn::ext::IdentExt;
        name.unraw().to_string()
    };
    Lowered {
        entry_params: vec![quote!(#pointer: #core::option::Option<&[#elem; 0]>), quote!(#len: #core::primitive::usize)],
        entry_rebuild: quote! {
            let #mutability #name: #ty = match #pointer {
                #core::option::Option::Some(#present) => #core::option::Option::Some(
                    // SAFETY: a non-null pointer is a device allocation of `len` elements that the
                    // host launcher borrowed until the kernel has finished (`SliceArg`).
                    unsafe { #input },
                ),
                #core::option::Option::None => #core::option::Option::None,
            };
        },
        by_value: false,
        launch_param: quote_spanned!(elem.span()=> #name: ::core::option::Option<&dyn #host::DeviceRead<#elem>>),
        launch_prepare: quote! {
            let #arg = match #name {
                ::core::option::Option::Some(#buffer) => #host::OptionalSliceArg::present(#host::SliceArg::input::<#elem, _>(#buffer)),
                ::core::option::Option::None => #host::OptionalSliceArg::absent(),
            };
        },
        // The optional constructors: only they take a null address (a plain slice's never does).
        launch_pointers: vec![quote!(#host::KernelParam::optional_slice_address(&#arg)), quote!(#host::KernelParam::optional_slice_len(&#arg))],
        param_sizes: vec![quote!(::core::mem::size_of::<::core::primitive::u64>()), quote!(::core::mem::size_of::<::core::primitive::usize>())],
        // `None` has no memory: its access is an untracked no-op.
        buffer_access: vec![quote!(#arg.read(#label))],
        checks: vec![quote_spanned!(elem.span()=> #args::require_pod::<#elem>();)],
        requirements: None,
        launch_check: quote!(),
        cpu_check: quote!(),
        cpu_param: quote!(#name: ::core::option::Option<&[#elem]>),
        cpu_prepare: quote!(let #parts = ::core::option::Option::map(#name, #args::InputParts::new);),
        // Safe: `InputParts<'a, T>` gives the slice back for the launch's borrow `'a` only.
        cpu_rebuild: quote! {
            let #mutability #name: #ty = ::core::option::Option::map(::core::option::Option::as_ref(&#parts), #args::InputParts::get);
        },
    }
}
