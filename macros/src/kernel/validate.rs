//! Checks on a parsed kernel that need the whole signature or the body: reserved names,
//! instance symbols, shared arrays in generic kernels, and device-only hints (E5).

use proc_macro2::{TokenStream, TokenTree};
use quote::quote_spanned;
use syn::Ident;
use syn::ext::IdentExt;

use super::expand::symbol_text;
use super::parse::Kernel;

/// Items of the launcher module a parameter must not be named after: a parameter pattern with
/// such a name would be read as the constant.
const LAUNCHER_CONSTANTS: &[&str] = &["SYMBOL", "SIGNATURE", "FINGERPRINT"];

/// Every error the checks find, combined.
pub fn check(kernel: &Kernel) -> syn::Result<()> {
    let mut errors: Vec<syn::Error> = Vec::new();
    for param in &kernel.params {
        let name = param.name.unraw().to_string();
        if name.starts_with("__ferrocuda") {
            errors.push(syn::Error::new(
                param.name.span(),
                "names starting with `__ferrocuda` are reserved for the code #[kernel] generates; rename the parameter",
            ));
        } else if LAUNCHER_CONSTANTS.contains(&name.as_str()) {
            errors.push(syn::Error::new(
                param.name.span(),
                format!("a kernel parameter cannot be named `{name}`: the kernel's launcher module defines a constant of that name; rename the parameter"),
            ));
        }
        if mentions_self(&param.ty) {
            errors.push(syn::Error::new_spanned(
                &param.ty,
                "a kernel is a free function: `Self` has no meaning here. Move the kernel out of the `impl` or trait",
            ));
        }
    }
    if let Some((type_param, instances)) = &kernel.generic {
        let mut seen: Vec<String> = Vec::new();
        for instance in instances {
            let symbol = symbol_text(&instance.symbol);
            if seen.contains(&symbol) {
                errors.push(syn::Error::new(
                    instance.symbol.span(),
                    format!("two instances have the PTX symbol `{symbol}` (the kernel's name and the type's last path segment); list each type once, or rename one type"),
                ));
            }
            seen.push(symbol);
        }
        if let Some(span) = shared_array_of(&kernel.function.block, type_param) {
            errors.push(syn::Error::new(
                span,
                format!(
                    "`shared_array!` cannot use the kernel's type parameter `{type_param}`: a shared array's size and type are fixed where it is \
                     declared, once for all instances. Use `dynamic_shared::<{type_param}>()` (sized at launch) or a concrete element type"
                ),
            ));
        }
    }
    let mut errors = errors.into_iter();
    match errors.next() {
        None => Ok(()),
        Some(mut first) => {
            errors.for_each(|e| first.combine(e));
            Err(first)
        }
    }
}

fn mentions_self(ty: &syn::Type) -> bool {
    fn walk(tokens: TokenStream) -> bool {
        tokens.into_iter().any(|t| match t {
            TokenTree::Ident(i) => i == "Self",
            TokenTree::Group(g) => walk(g.stream()),
            _ => false,
        })
    }
    walk(quote::quote!(#ty))
}

/// The span of a `shared_array![..]` whose tokens mention `type_param`, if any.
fn shared_array_of(block: &syn::Block, type_param: &Ident) -> Option<proc_macro2::Span> {
    fn walk(tokens: TokenStream, type_param: &Ident) -> Option<proc_macro2::Span> {
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        for (k, tree) in trees.iter().enumerate() {
            match tree {
                TokenTree::Ident(i) if i == "shared_array" => {
                    let bang = matches!(trees.get(k + 1), Some(TokenTree::Punct(p)) if p.as_char() == '!');
                    if let (true, Some(TokenTree::Group(g))) = (bang, trees.get(k + 2))
                        && contains(g.stream(), type_param)
                    {
                        return Some(i.span());
                    }
                }
                TokenTree::Group(g) => {
                    if let Some(span) = walk(g.stream(), type_param) {
                        return Some(span);
                    }
                }
                _ => {}
            }
        }
        None
    }
    fn contains(tokens: TokenStream, type_param: &Ident) -> bool {
        tokens.into_iter().any(|t| match t {
            TokenTree::Ident(i) => i == *type_param,
            TokenTree::Group(g) => contains(g.stream(), type_param),
            _ => false,
        })
    }
    walk(quote::quote!(#block), type_param)
}

/// Host-only things in a kernel body, reported on the device build only (where rustc's own
/// message would be "cannot find crate `std`"): the kernel is compiled for the GPU without
/// `std` or `alloc`. Bodies that mention `target_arch` (code gated per target) are left alone.
pub fn device_hints(block: &syn::Block) -> TokenStream {
    const HOST_ONLY: &[(&str, bool, &str)] = &[
        ("std", false, "`std` does not exist on the GPU (kernels are `no_std`)"),
        ("alloc", false, "`alloc` does not exist on the GPU (kernels have no heap)"),
        ("vec", true, "`vec!` allocates, and kernels have no heap: use a fixed-size array or an output slice"),
        ("format", true, "`format!` allocates, and kernels have no heap: use `ferrocuda_device::println!`"),
        ("String", false, "`String` allocates, and kernels have no heap"),
        ("Vec", false, "`Vec` allocates, and kernels have no heap: use a fixed-size array or an output slice"),
        ("Box", false, "`Box` allocates, and kernels have no heap"),
    ];
    let tokens = quote::quote!(#block);
    if contains_ident(tokens.clone(), "target_arch") {
        return TokenStream::new();
    }
    let mut found: Vec<(proc_macro2::Span, &str)> = Vec::new();
    fn walk(tokens: TokenStream, found: &mut Vec<(proc_macro2::Span, &'static str)>, table: &'static [(&'static str, bool, &'static str)]) {
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        for (k, tree) in trees.iter().enumerate() {
            match tree {
                TokenTree::Ident(i) => {
                    let is_macro = matches!(trees.get(k + 1), Some(TokenTree::Punct(p)) if p.as_char() == '!');
                    let is_path = matches!(trees.get(k + 1), Some(TokenTree::Punct(p)) if p.as_char() == ':');
                    let after_path = k > 0 && matches!(trees.get(k - 1), Some(TokenTree::Punct(p)) if p.as_char() == ':');
                    for (name, macro_only, message) in table {
                        let crate_name = *name == "std" || *name == "alloc";
                        let hit = i == name
                            && match (macro_only, crate_name) {
                                (true, _) => is_macro,
                                (false, true) => is_path && !after_path,
                                (false, false) => !is_macro && !after_path,
                            };
                        if hit && found.len() < 3 {
                            found.push((i.span(), message));
                        }
                    }
                }
                TokenTree::Group(g) => walk(g.stream(), found, table),
                _ => {}
            }
        }
    }
    walk(tokens, &mut found, HOST_ONLY);
    found
        .into_iter()
        .map(|(span, message)| {
            let text = format!(
                "{message}. This kernel is compiled for the GPU without `std` or `alloc`; keep host-only code outside kernels, or gate it with \
                 `#[cfg(not(target_arch = \"nvptx64\"))]`"
            );
            quote_spanned!(span=> #[cfg(target_arch = "nvptx64")] ::core::compile_error!(#text);)
        })
        .collect()
}

fn contains_ident(tokens: TokenStream, name: &str) -> bool {
    tokens.into_iter().any(|t| match t {
        TokenTree::Ident(i) => i == name,
        TokenTree::Group(g) => contains_ident(g.stream(), name),
        _ => false,
    })
}
