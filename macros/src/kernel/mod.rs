//! `#[kernel]`: parse -> validate -> expand, with a fallback (the host function plus stub
//! launcher modules) on error.

mod expand;
mod fallback;
mod lower;
mod parse;
mod paths;
#[cfg(test)]
mod tests;
mod validate;

use proc_macro2::TokenStream;
use quote::quote;

pub fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let function: syn::ItemFn = match syn::parse2(item.clone()) {
        Ok(f) => f,
        Err(e) => return not_a_function(item, e),
    };
    let hints = validate::device_hints(&function.block);
    let result = parse::Kernel::from_fn(attr.clone(), &function).and_then(|kernel| validate::check(&kernel).map(|()| kernel));
    match result {
        Ok(kernel) => {
            let expanded = expand::kernel(&kernel);
            quote!(#hints #expanded)
        }
        Err(error) => {
            // The error, plus the function unchanged for the host and stub launchers, so that
            // one mistake does not cascade into "cannot find `saxpy::launch`" everywhere.
            let errors = error.to_compile_error();
            let fallback = fallback::items(&attr, &function);
            quote! {
                #errors
                #hints
                #fallback
            }
        }
    }
}

/// `#[kernel]` on something that is not a free function with a body.
fn not_a_function(item: TokenStream, error: syn::Error) -> TokenStream {
    if let Ok(method) = syn::parse2::<syn::TraitItemFn>(item.clone())
        && method.default.is_none()
    {
        return syn::Error::new_spanned(
            &method.sig,
            "#[kernel] marks a free `pub fn` with a body; a trait method cannot be a kernel (the GPU launches free functions by name)",
        )
        .to_compile_error();
    }
    // The item is not emitted again: it does not parse, and rustc would report it twice.
    syn::Error::new(error.span(), format!("#[kernel] marks a `pub fn` with a body ({error})")).to_compile_error()
}
