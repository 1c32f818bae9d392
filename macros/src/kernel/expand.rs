//! Generating the device entry point and the host launcher.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};

use super::parse::{Kernel, ParamKind};

pub fn kernel(kernel: &Kernel) -> TokenStream {
    let device = device_entry(kernel);
    let host = host_side(kernel);
    quote! { #device #host }
}

/// `#[no_mangle] extern "ptx-kernel" fn name(...)`: slices arrive as (pointer, length) and are
/// rebuilt before the body runs.
fn device_entry(kernel: &Kernel) -> TokenStream {
    let function = kernel.function;
    let name = &function.sig.ident;
    let attrs = &function.attrs;
    let body = &function.block;
    let mut params = Vec::new();
    let mut rebuild = Vec::new();
    for p in &kernel.params {
        let (ident, ty) = (&p.name, &p.ty);
        let mutability = p.mutable.then(|| quote!(mut));
        match &p.kind {
            ParamKind::Scalar => params.push(quote!(#mutability #ident: #ty)),
            ParamKind::Slice { elem } => {
                let (ptr, len) = (format_ident!("__{}_ptr", ident), format_ident!("__{}_len", ident));
                // `&[T; 0]`: no-alias and read-only like `&[T]`, yet valid for an empty slice.
                params.push(quote!(#ptr: &[#elem; 0], #len: usize));
                rebuild.push(quote! {
                    // SAFETY: the host launcher passed a device allocation of `len` elements.
                    let #mutability #ident: &[#elem] = unsafe { ::core::slice::from_raw_parts(#ptr.as_ptr(), #len) };
                });
            }
            ParamKind::SliceMut { elem } => {
                let (ptr, len) = (format_ident!("__{}_ptr", ident), format_ident!("__{}_len", ident));
                params.push(quote!(#ptr: &mut [#elem; 0], #len: usize));
                rebuild.push(quote! {
                    // SAFETY: the host launcher passed an exclusively borrowed device allocation.
                    let #mutability #ident: &mut [#elem] = unsafe { ::core::slice::from_raw_parts_mut(#ptr.as_mut_ptr(), #len) };
                });
            }
        }
    }
    quote! {
        #[cfg(target_arch = "nvptx64")]
        #(#attrs)*
        #[unsafe(no_mangle)]
        #[allow(improper_ctypes_definitions)]
        pub unsafe extern "ptx-kernel" fn #name(#(#params),*) {
            #(#rebuild)*
            #body
        }
    }
}

/// The function itself (for the host and the CPU executor) and `mod name { fn launch(..) }`.
fn host_side(kernel: &Kernel) -> TokenStream {
    let function = kernel.function;
    let name = &function.sig.ident;
    let symbol = name.to_string();
    let fc = quote!(::ferrocuda_device::__private::host);

    let mut launch_params = Vec::new();
    let mut arg_names = Vec::new();
    let mut prepare = Vec::new();
    let mut pointers = Vec::new();
    for p in &kernel.params {
        let (ident, ty) = (&p.name, &p.ty);
        arg_names.push(ident.clone());
        match &p.kind {
            ParamKind::Scalar => {
                launch_params.push(quote!(#ident: #ty));
                pointers.push(quote!(#fc::param_ptr(&#ident)));
            }
            ParamKind::Slice { elem } | ParamKind::SliceMut { elem } => {
                let reference = if matches!(p.kind, ParamKind::SliceMut { .. }) { quote!(&mut) } else { quote!(&) };
                launch_params.push(quote_spanned!(elem_span(elem)=> #ident: #reference #fc::DeviceSlice<#elem>));
                let arg = format_ident!("__{}_arg", ident);
                prepare.push(quote!(let #arg = #fc::SliceArg::new(&*#ident);));
                pointers.push(quote!(#fc::param_ptr(&#arg.ptr)));
                pointers.push(quote!(#fc::param_ptr(&#arg.len)));
            }
        }
    }
    let count = pointers.len();
    let doc = format!("Typed launcher of the `{symbol}` kernel (PTX symbol `{symbol}`).");
    quote! {
        #[cfg(not(target_arch = "nvptx64"))]
        #[allow(dead_code)]
        #function

        #[cfg(not(target_arch = "nvptx64"))]
        #[doc = #doc]
        pub mod #name {
            #[allow(unused_imports)]
            use super::*;

            /// The kernel's symbol in the PTX module.
            pub const SYMBOL: &str = #symbol;

            /// Launches the kernel on `stream` with `config` (grid, block, dynamic shared memory).
            ///
            /// The launch is asynchronous: errors of the kernel itself come back from the
            /// stream's next synchronisation.
            #[inline]
            pub fn launch(
                stream: &#fc::Stream,
                config: impl ::core::convert::Into<#fc::LaunchConfig>,
                #(#launch_params),*
            ) -> ::core::result::Result<(), #fc::Error> {
                #(#prepare)*
                let mut params: [*mut ::core::ffi::c_void; #count] = [#(#pointers),*];
                // SAFETY: `params` follows the PTX signature generated from the same function:
                // each slice is a live device allocation of its length, outputs are exclusive.
                unsafe { #fc::launch_embedded(&crate::KERNELS, SYMBOL, stream, config.into(), &mut params) }
            }

            /// Launches on the default stream of the calling thread's current context.
            #[inline]
            pub fn launch_on_current_context(
                config: impl ::core::convert::Into<#fc::LaunchConfig>,
                #(#launch_params),*
            ) -> ::core::result::Result<(), #fc::Error> {
                let stream = #fc::Stream::current_default()?;
                launch(&stream, config, #(#arg_names),*)
            }
        }
    }
}

fn elem_span(elem: &syn::Type) -> proc_macro2::Span {
    syn::spanned::Spanned::span(elem)
}
