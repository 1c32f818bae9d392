//! What a kernel with a mistake still expands to: stub launcher modules with the right names
//! and any arguments, so the one real error is not followed by "cannot find `saxpy::launch`"
//! at every call site. The stubs are never run (the crate does not compile).

use proc_macro2::TokenStream;
use quote::quote;
use syn::{Ident, ItemFn};

use super::paths;

/// The function for the host with its body replaced (its signature is what callers need;
/// errors inside the body are reported once the signature is fixed), and stub modules for the
/// kernel's symbols: the function's name, or each instance's. Inside an `impl` (a `self`
/// parameter) no module can be emitted, so only the function is.
pub fn items(attr: &TokenStream, function: &ItemFn) -> TokenStream {
    let (attrs, vis, sig) = (&function.attrs, &function.vis, &function.sig);
    let host_function = quote! {
        #[cfg(not(target_arch = "nvptx64"))]
        #[allow(dead_code, unused_variables, unused_mut, clippy::diverging_sub_expression)]
        #(#attrs)*
        #vis #sig {
            ::core::unreachable!("the kernel did not compile")
        }
    };
    if sig.receiver().is_some() {
        return host_function;
    }
    let arity = sig.inputs.len();
    let stubs: TokenStream = symbols(attr, function).into_iter().map(|symbol| stub(&symbol, arity)).collect();
    quote!(#host_function #stubs)
}

/// The launcher modules the kernel would have had, as far as the attribute can be read.
fn symbols(attr: &TokenStream, function: &ItemFn) -> Vec<Ident> {
    let base = &function.sig.ident;
    match super::parse::instance_symbols(attr.clone(), base) {
        Some(symbols) if !symbols.is_empty() => symbols,
        _ => vec![base.clone()],
    }
}

fn stub(symbol: &Ident, arity: usize) -> TokenStream {
    let fc = paths::host();
    let cpu = paths::cpu();
    let args: Vec<TokenStream> = (0..arity)
        .map(|k| {
            let name = quote::format_ident!("_arg{}", k);
            quote!(#name: impl ::core::marker::Sized)
        })
        .collect();
    let text = super::expand::symbol_text(symbol);
    quote! {
        #[cfg(not(target_arch = "nvptx64"))]
        #[allow(dead_code, unused_variables, clippy::too_many_arguments)]
        #[doc(hidden)]
        pub mod #symbol {
            pub const SYMBOL: &str = #text;
            pub const FINGERPRINT: u64 = 0;
            pub const SIGNATURE: #fc::KernelSignature = #fc::KernelSignature { symbol: SYMBOL, param_sizes: &[], canonical: "", fingerprint: 0, layout: &[], param_names: &[], type_names: &[], type_keys: &[] };
            pub fn launch(stream: &#fc::Stream, config: impl ::core::convert::Into<#fc::LaunchConfig>, #(#args),*) -> ::core::result::Result<(), #fc::Error> {
                ::core::unreachable!("the kernel did not compile")
            }
            pub fn launch_on_current_context(config: impl ::core::convert::Into<#fc::LaunchConfig>, #(#args),*) -> ::core::result::Result<(), #fc::Error> {
                ::core::unreachable!("the kernel did not compile")
            }
            pub fn launch_in(module: &#fc::Module, stream: &#fc::Stream, config: impl ::core::convert::Into<#fc::LaunchConfig>, #(#args),*) -> ::core::result::Result<(), #fc::Error> {
                ::core::unreachable!("the kernel did not compile")
            }
            pub fn launch_cpu(executor: &#cpu::CpuExecutor, config: impl ::core::convert::Into<#cpu::LaunchConfig>, #(#args),*) -> ::core::result::Result<(), #cpu::CpuError> {
                ::core::unreachable!("the kernel did not compile")
            }
            pub fn function(context: &#fc::Context) -> ::core::result::Result<#fc::Function, #fc::Error> {
                ::core::unreachable!("the kernel did not compile")
            }
        }
    }
}
