//! `#[derive(LayoutKey)]`: the structural key of a struct that kernels take (audit 2026-11-27c,
//! F1); see `ferrocuda_device::layout_key`.

use proc_macro2::TokenStream;
use quote::quote;

/// `impl LayoutKey for S` with the key of `S`'s name, size and alignment and, per field, the
/// field's name, offset, size and its type's key. Structs only, without generic parameters.
pub fn derive(item: TokenStream) -> TokenStream {
    let input: syn::DeriveInput = match syn::parse2(item) {
        Ok(input) => input,
        Err(error) => return error.to_compile_error(),
    };
    let name = &input.ident;
    if !input.generics.params.is_empty() {
        return syn::Error::new_spanned(
            &input.generics,
            "`#[derive(LayoutKey)]` takes structs without generic parameters: implement `LayoutKey` by hand for a generic one",
        )
        .to_compile_error();
    }
    let syn::Data::Struct(data) = &input.data else {
        return syn::Error::new_spanned(name, "`#[derive(LayoutKey)]` takes structs (the plain-data structs that kernels take)").to_compile_error();
    };
    let key = quote!(::ferrocuda_device::__private::layout_key);
    let fields = data.fields.iter().enumerate().map(|(index, field)| {
        let ty = &field.ty;
        let (member, label) = match &field.ident {
            Some(ident) => (quote!(#ident), ident.to_string()),
            None => {
                let index = syn::Index::from(index);
                (quote!(#index), index.index.to_string())
            }
        };
        quote! {
            hash = #key::field(
                hash,
                #label,
                #key::offset_of!(Self, #member),
                #key::size_of::<#ty>(),
                <#ty as ::ferrocuda_device::LayoutKey>::LAYOUT_KEY,
            );
        }
    });
    let text = name.to_string();
    quote! {
        // SAFETY: the key is computed from the struct's name, size and alignment and each field's
        // name, offset, size and key, as `LayoutKey` asks (through the device crate's own paths
        // to `size_of`/`offset_of`: `::core` may be another crate, G17R-2).
        unsafe impl ::ferrocuda_device::LayoutKey for #name {
            const LAYOUT_KEY: ::core::primitive::u64 = {
                let mut hash = #key::start(#text, #key::size_of::<Self>(), #key::align_of::<Self>());
                #(#fields)*
                hash
            };
        }
    }
}
