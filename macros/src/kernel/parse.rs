//! Reading and checking a `#[kernel]` function's signature.

use proc_macro2::TokenStream;
use syn::spanned::Spanned;
use syn::{FnArg, Ident, ItemFn, Pat, ReturnType, Type};

/// How one parameter crosses from host to device.
pub enum ParamKind {
    /// Passed by value: an integer, float or `bool`.
    Scalar,
    /// `&[T]`: read-only device slice (pointer + length).
    Slice { elem: Type },
    /// `&mut [T]`: writable device slice (pointer + length).
    SliceMut { elem: Type },
}

pub struct Param {
    pub name: Ident,
    pub mutable: bool,
    pub ty: Type,
    pub kind: ParamKind,
}

pub struct Kernel<'a> {
    pub function: &'a ItemFn,
    pub params: Vec<Param>,
}

const SCALARS: &[&str] = &["bool", "i8", "i16", "i32", "i64", "isize", "u8", "u16", "u32", "u64", "usize", "f32", "f64"];
const ALLOWED: &str = "kernel parameters may be integer, float or bool scalars, `&[T]` (read-only input) or `&mut [T]` (output)";

impl<'a> Kernel<'a> {
    pub fn from_fn(attr: TokenStream, function: &'a ItemFn) -> syn::Result<Self> {
        let mut errors: Vec<syn::Error> = Vec::new();
        if !attr.is_empty() {
            errors.push(syn::Error::new_spanned(&attr, "#[kernel] takes no arguments"));
        }
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
        if !sig.generics.params.is_empty() {
            errors.push(syn::Error::new_spanned(&sig.generics, "generic kernels are not supported yet: write one kernel per type"));
        }
        if let ReturnType::Type(_, ty) = &sig.output {
            errors.push(syn::Error::new_spanned(ty, "a kernel returns nothing: write results into a `&mut [T]` parameter"));
        }
        if let Some(variadic) = &sig.variadic {
            errors.push(syn::Error::new_spanned(variadic, "a kernel cannot be variadic"));
        }

        let mut params = Vec::new();
        for input in &sig.inputs {
            match parse_param(input) {
                Ok(param) => params.push(param),
                Err(e) => errors.push(e),
            }
        }

        let mut errors = errors.into_iter();
        match errors.next() {
            None => Ok(Kernel { function, params }),
            Some(mut first) => {
                errors.for_each(|e| first.combine(e));
                Err(first)
            }
        }
    }
}

fn parse_param(input: &FnArg) -> syn::Result<Param> {
    let typed = match input {
        FnArg::Receiver(r) => return Err(syn::Error::new_spanned(r, "a kernel is a free function: it cannot take `self`")),
        FnArg::Typed(t) => t,
    };
    let (name, mutable) = match &*typed.pat {
        Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => (p.ident.clone(), p.mutability.is_some()),
        other => return Err(syn::Error::new_spanned(other, "kernel parameters must be plain names (`x: &[f32]`), not patterns")),
    };
    let kind = classify(&typed.ty)?;
    Ok(Param { name, mutable, ty: (*typed.ty).clone(), kind })
}

fn classify(ty: &Type) -> syn::Result<ParamKind> {
    match ty {
        Type::Path(path) if path.qself.is_none() && path.path.get_ident().is_some_and(|i| SCALARS.contains(&i.to_string().as_str())) => {
            Ok(ParamKind::Scalar)
        }
        Type::Reference(reference) => {
            if let Some(lifetime) = &reference.lifetime {
                return Err(syn::Error::new_spanned(lifetime, "leave out lifetimes on kernel parameters"));
            }
            let Type::Slice(slice) = &*reference.elem else {
                let what = if matches!(&*reference.elem, Type::Reference(_)) { "a reference to a reference" } else { "a reference to a single value" };
                return Err(syn::Error::new_spanned(ty, format!("{what} cannot be a kernel parameter; {ALLOWED}")));
            };
            let elem = (*slice.elem).clone();
            if matches!(elem, Type::Reference(_) | Type::Slice(_)) {
                return Err(syn::Error::new_spanned(&slice.elem, format!("slice elements must be plain data; {ALLOWED}")));
            }
            Ok(if reference.mutability.is_some() { ParamKind::SliceMut { elem } } else { ParamKind::Slice { elem } })
        }
        other => Err(syn::Error::new(other.span(), format!("`{}` cannot be a kernel parameter; {ALLOWED}", quote::quote!(#other)))),
    }
}
