//! `#[kernel]`: parse -> validate -> expand, with a fallback item on error.

mod expand;
mod parse;

use proc_macro2::TokenStream;
use quote::quote;

pub fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let function: syn::ItemFn = match syn::parse2(item.clone()) {
        Ok(f) => f,
        Err(e) => return e.to_compile_error(),
    };
    match parse::Kernel::from_fn(attr, &function) {
        Ok(kernel) => expand::kernel(&kernel),
        Err(error) => {
            // The error, plus the function unchanged for the host so that one mistake does
            // not cascade into "cannot find function" errors everywhere it is used.
            let errors = error.to_compile_error();
            quote! {
                #errors
                #[cfg(not(target_arch = "nvptx64"))]
                #[allow(dead_code)]
                #function
            }
        }
    }
}
