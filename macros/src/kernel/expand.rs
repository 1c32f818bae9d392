//! Generating the device entry points and the host launchers.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Ident, Type};

use super::parse::{Kernel, Param, ParamKind};

/// Absolute path of the host runtime as seen from a kernel crate.
fn host_path() -> TokenStream {
    quote!(::ferrocuda_device::__private::host)
}

pub fn kernel(kernel: &Kernel) -> TokenStream {
    let mut out = kernel_items(kernel);
    // Launch bounds: one marker per entry point, turned into `.maxntid`/`.minnctapersm`/
    // `.reqntid` by ferrocuda-builder (see `ferrocuda_device::launch_bounds!`).
    if let Some(bounds) = &kernel.bounds {
        let symbols: Vec<&Ident> = match &kernel.generic {
            None => vec![&kernel.function.sig.ident],
            Some((_, instances)) => instances.iter().map(|i| &i.symbol).collect(),
        };
        for symbol in symbols {
            let args = match bounds.clone().into_iter().next() {
                Some(proc_macro2::TokenTree::Ident(word)) if word == "reqntid" => {
                    let rest: TokenStream = bounds.clone().into_iter().skip(1).collect();
                    quote!(reqntid #symbol, #rest)
                }
                _ => quote!(#symbol, #bounds),
            };
            out.extend(quote!(::ferrocuda_device::launch_bounds!(#args);));
        }
    }
    out
}

fn kernel_items(kernel: &Kernel) -> TokenStream {
    let function = kernel.function;
    match &kernel.generic {
        None => {
            let device = device_entry(&function.sig.ident, &kernel.params, EntryBody::Inline(&function.block), &function.attrs);
            let ident = &function.sig.ident;
            let host = host_launcher(&function.sig.ident, &kernel.params, kernel.has_raw_pointers(), quote!(super::#ident));
            quote! {
                #device
                #[cfg(not(target_arch = "nvptx64"))]
                #[allow(dead_code)]
                #function
                #host
            }
        }
        Some((type_param, instances)) => {
            let name = &function.sig.ident;
            let mut out = quote! {
                // The generic function itself, on both sides: each device instance calls it
                // (inlined), the host keeps it for the CPU executor.
                #[cfg_attr(target_arch = "nvptx64", inline(always))]
                #[allow(dead_code)]
                #function
            };
            for instance in instances {
                let params: Vec<Param> = kernel.params.iter().map(|p| p.instantiate(type_param, &instance.ty)).collect();
                let ty = &instance.ty;
                let call = EntryBody::Call(quote!(#name::<#ty>));
                let doc = format!("The `{}` instance of the generic kernel `{name}`.", quote!(#ty));
                out.extend(device_entry(&instance.symbol, &params, call, &[syn::parse_quote!(#[doc = #doc])]));
                out.extend(host_launcher(&instance.symbol, &params, kernel.has_raw_pointers(), quote!(super::#name::<#ty>)));
            }
            out
        }
    }
}

enum EntryBody<'a> {
    /// A plain kernel: its body becomes the entry's body.
    Inline(&'a syn::Block),
    /// An instance of a generic kernel: the entry calls the generic function.
    Call(TokenStream),
}

/// `#[no_mangle] extern "ptx-kernel" fn symbol(...)`: slices arrive as (pointer, length) and
/// are rebuilt before the body runs.
fn device_entry(symbol: &Ident, params: &[Param], body: EntryBody, attrs: &[syn::Attribute]) -> TokenStream {
    let mut entry_params = Vec::new();
    let mut rebuild = Vec::new();
    let mut names = Vec::new();
    for p in params {
        let (ident, ty) = (&p.name, &p.ty);
        names.push(ident.clone());
        let mutability = p.mutable.then(|| quote!(mut));
        match &p.kind {
            ParamKind::Scalar | ParamKind::Value | ParamKind::Pointer { .. } => entry_params.push(quote!(#mutability #ident: #ty)),
            ParamKind::Slice { elem } => {
                let (ptr, len) = (format_ident!("__{}_ptr", ident), format_ident!("__{}_len", ident));
                // `&[T; 0]`: no-alias and read-only like `&[T]`, yet valid for an empty slice.
                entry_params.push(quote!(#ptr: &[#elem; 0], #len: usize));
                rebuild.push(quote! {
                    // SAFETY: the host launcher passed a device allocation of `len` elements.
                    let #mutability #ident: &[#elem] = unsafe { ::core::slice::from_raw_parts(#ptr.as_ptr(), #len) };
                });
            }
            ParamKind::SliceMut { elem } => {
                let (ptr, len) = (format_ident!("__{}_ptr", ident), format_ident!("__{}_len", ident));
                entry_params.push(quote!(#ptr: &mut [#elem; 0], #len: usize));
                rebuild.push(quote! {
                    // SAFETY: the host launcher passed an exclusively borrowed device allocation.
                    let #mutability #ident: &mut [#elem] = unsafe { ::core::slice::from_raw_parts_mut(#ptr.as_mut_ptr(), #len) };
                });
            }
        }
    }
    let body = match body {
        EntryBody::Inline(block) => quote!(#block),
        // The generic function may be an `unsafe fn` (raw pointer parameters); the entry
        // point is itself unsafe to call, with the same contract.
        EntryBody::Call(path) => quote!(#[allow(unused_unsafe)] unsafe { #path(#(#names),*) }),
    };
    // The kernel's name, for panic reports (one shared-memory store per thread at entry).
    let name = proc_macro2::Literal::c_string(&std::ffi::CString::new(symbol.to_string()).expect("identifiers have no NUL"));
    quote! {
        #[cfg(target_arch = "nvptx64")]
        #(#attrs)*
        #[unsafe(no_mangle)]
        #[allow(improper_ctypes_definitions)]
        pub unsafe extern "ptx-kernel" fn #symbol(#(#entry_params),*) {
            ::ferrocuda_device::panic::__enter_kernel(#name);
            #(#rebuild)*
            #body
        }
    }
}

/// `pub mod symbol { SYMBOL, SIGNATURE, launch, launch_on_current_context, launch_in, function }`.
fn host_launcher(symbol: &Ident, params: &[Param], is_unsafe: bool, host_fn: TokenStream) -> TokenStream {
    let fc = host_path();
    let symbol_text = symbol.to_string();

    let mut launch_params = Vec::new();
    let mut arg_names = Vec::new();
    let mut prepare = Vec::new();
    let mut pointers = Vec::new();
    let mut sizes = Vec::new();
    let mut checks = Vec::new();
    for p in params {
        let (ident, ty) = (&p.name, &p.ty);
        arg_names.push(ident.clone());
        match &p.kind {
            ParamKind::Scalar => {
                launch_params.push(quote!(#ident: #ty));
                pointers.push(quote!(#fc::param_ptr(&#ident)));
                sizes.push(quote!(::core::mem::size_of::<#ty>()));
            }
            ParamKind::Value => {
                launch_params.push(quote!(#ident: #ty));
                pointers.push(quote!(#fc::param_ptr(&#ident)));
                sizes.push(quote!(::core::mem::size_of::<#ty>()));
                // Spanned at the user's type, so a non-`Pod` struct is reported there.
                checks.push(quote_spanned!(type_span(ty)=> #fc::require_kernel_value::<#ty>();));
            }
            ParamKind::Slice { elem } => {
                launch_params.push(quote_spanned!(type_span(elem)=> #ident: &(impl #fc::DeviceRead<#elem> + ?::core::marker::Sized)));
                let arg = format_ident!("__{}_arg", ident);
                prepare.push(quote!(let #arg = #fc::DeviceRead::<#elem>::kernel_arg(#ident);));
                pointers.push(quote!(#fc::param_ptr(&#arg.ptr)));
                pointers.push(quote!(#fc::param_ptr(&#arg.len)));
                sizes.push(quote!(::core::mem::size_of::<u64>()));
                sizes.push(quote!(::core::mem::size_of::<usize>()));
            }
            ParamKind::SliceMut { elem } => {
                launch_params.push(quote_spanned!(type_span(elem)=> #ident: &mut (impl #fc::DeviceWrite<#elem> + ?::core::marker::Sized)));
                let arg = format_ident!("__{}_arg", ident);
                prepare.push(quote!(let #arg = #fc::DeviceWrite::<#elem>::kernel_arg_mut(#ident);));
                pointers.push(quote!(#fc::param_ptr(&#arg.ptr)));
                pointers.push(quote!(#fc::param_ptr(&#arg.len)));
                sizes.push(quote!(::core::mem::size_of::<u64>()));
                sizes.push(quote!(::core::mem::size_of::<usize>()));
            }
            ParamKind::Pointer { elem, .. } => {
                launch_params.push(quote_spanned!(type_span(elem)=> #ident: #fc::DevicePtr<#elem>));
                pointers.push(quote!(#fc::param_ptr(&#ident)));
                sizes.push(quote!(::core::mem::size_of::<u64>()));
            }
        }
    }
    let count = pointers.len();
    let doc = format!(
        "Typed launcher of the `{symbol_text}` kernel (PTX symbol `{symbol_text}`): `{symbol_text}::launch(&stream, config, ..)`, \
         `launch!({symbol_text}<<<grid, block>>>(..))`, or `{symbol_text}::launch_in(&module, ..)` for an explicitly loaded module."
    );
    let (unsafety, safety_doc, call_unsafe) = if is_unsafe {
        (
            quote!(unsafe),
            quote! {
                ///
                /// # Safety
                /// The kernel takes raw device pointers: each must point to device memory of
                /// this context that stays allocated, and is valid for the kernel's reads and
                /// writes (with no other writer), until the kernel has finished.
            },
            quote!(unsafe),
        )
    } else {
        (quote!(), quote!(), quote!())
    };
    let launch_call = |path: TokenStream| {
        quote! {
            #(#prepare)*
            let mut params: [*mut ::core::ffi::c_void; #count] = [#(#pointers),*];
            // SAFETY: `params` follows the PTX signature generated from the same function: each
            // slice is a live device allocation of its length, outputs are borrowed exclusively
            // for the call, raw pointers are vouched for by the caller of this `unsafe fn`.
            unsafe { #path }
        }
    };
    let embedded = launch_call(quote!(#fc::launch_embedded(&crate::KERNELS, SYMBOL, stream, config.into(), &mut params)));
    let in_module = launch_call(quote!(#fc::launch_in_module(module, &SIGNATURE, stream, config.into(), &mut params)));
    let cpu = cpu_launcher(params, host_fn, is_unsafe);
    quote! {
        #[cfg(not(target_arch = "nvptx64"))]
        #[doc = #doc]
        pub mod #symbol {
            #[allow(unused_imports)]
            use super::*;

            /// The kernel's symbol in the PTX module.
            pub const SYMBOL: &str = #symbol_text;

            /// What the host expects of the kernel in a module: its symbol and the byte size
            /// of each PTX parameter (a slice is two: pointer and length).
            pub const SIGNATURE: #fc::KernelSignature = #fc::KernelSignature { symbol: SYMBOL, param_sizes: &[#(#sizes),*] };

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
                stream: &#fc::Stream,
                config: impl ::core::convert::Into<#fc::LaunchConfig>,
                #(#launch_params),*
            ) -> ::core::result::Result<(), #fc::Error> {
                #embedded
            }

            /// Launches on the default stream of the calling thread's current context.
            #safety_doc
            #[inline]
            #[allow(clippy::too_many_arguments)]
            pub #unsafety fn launch_on_current_context(
                config: impl ::core::convert::Into<#fc::LaunchConfig>,
                #(#launch_params),*
            ) -> ::core::result::Result<(), #fc::Error> {
                let stream = #fc::Stream::current_default()?;
                // SAFETY: forwarded from this function's own contract.
                #[allow(unused_unsafe)]
                #call_unsafe { launch(&stream, config, #(#arg_names),*) }
            }

            /// Launches the kernel from an explicitly loaded `module` (JIT options, hot
            /// reload) instead of the embedded one. The first launch checks that the module
            /// has this kernel with the parameter sizes in [`SIGNATURE`].
            #safety_doc
            #[inline]
            #[allow(clippy::too_many_arguments)]
            pub #unsafety fn launch_in(
                module: &#fc::Module,
                stream: &#fc::Stream,
                config: impl ::core::convert::Into<#fc::LaunchConfig>,
                #(#launch_params),*
            ) -> ::core::result::Result<(), #fc::Error> {
                #in_module
            }

            #cpu

            /// The kernel as loaded into `context` (from the embedded module): attributes,
            /// occupancy, shared memory and cache settings.
            pub fn function(context: &#fc::Context) -> ::core::result::Result<#fc::Function, #fc::Error> {
                #fc::embedded_function(&crate::KERNELS, SYMBOL, context)
            }
        }
    }
}

/// `launch_cpu(&executor, config, args..)`: runs the host copy of the kernel (`host_fn`) on the
/// CPU executor, every GPU thread calling it with the same arguments, as the GPU's threads do.
fn cpu_launcher(params: &[Param], host_fn: TokenStream, is_unsafe: bool) -> TokenStream {
    let cpu = quote!(::ferrocuda_device::cpu);
    let mut launch_params = Vec::new();
    let mut prepare = Vec::new();
    let mut rebuild = Vec::new();
    let mut names = Vec::new();
    for p in params {
        let (ident, ty) = (&p.name, &p.ty);
        names.push(ident.clone());
        let parts = format_ident!("__{}_cpu", ident);
        match &p.kind {
            ParamKind::Scalar | ParamKind::Value => {
                launch_params.push(quote!(#ident: #ty));
                // Copied into each thread's call, as the GPU copies parameters to every thread.
                rebuild.push(quote!(let #ident: #ty = #ident;));
            }
            ParamKind::Slice { elem } => {
                launch_params.push(quote!(#ident: &[#elem]));
                prepare.push(quote!(let #parts = #cpu::__private::SliceParts::new(#ident);));
                rebuild.push(quote! {
                    // SAFETY: the slice is borrowed by this launch until every thread is done.
                    let #ident: &[#elem] = unsafe { #parts.get() };
                });
            }
            ParamKind::SliceMut { elem } => {
                launch_params.push(quote!(#ident: &mut [#elem]));
                prepare.push(quote!(let #parts = #cpu::__private::SlicePartsMut::new(#ident);));
                rebuild.push(quote! {
                    // SAFETY: the slice is exclusively borrowed by this launch until every thread
                    // is done; as on a GPU, the kernel's threads write disjoint elements or use
                    // atomics.
                    let #ident: &mut [#elem] = unsafe { #parts.get() };
                });
            }
            ParamKind::Pointer { .. } => {
                launch_params.push(quote!(#ident: #ty));
                prepare.push(quote!(let #parts = #cpu::__private::RawPointer::new(#ident);));
                rebuild.push(quote!(let #ident: #ty = #parts.get();));
            }
        }
    }
    let (unsafety, safety_doc) = if is_unsafe {
        (
            quote!(unsafe),
            quote! {
                ///
                /// # Safety
                /// The kernel takes raw pointers: on the CPU they are host pointers, each valid
                /// for the kernel's reads and writes (with no other writer) until this returns.
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
            executor: &#cpu::CpuExecutor,
            config: impl ::core::convert::Into<#cpu::LaunchConfig>,
            #(#launch_params),*
        ) -> ::core::result::Result<(), #cpu::CpuError> {
            #(#prepare)*
            let __body = move || {
                #(#rebuild)*
                // SAFETY: for an `unsafe` kernel, forwarded from this function's own contract.
                #[allow(unused_unsafe)]
                unsafe { #host_fn(#(#names),*) }
            };
            executor.run(SYMBOL, config.into(), &__body)
        }
    }
}

fn type_span(ty: &Type) -> Span {
    ty.span()
}
