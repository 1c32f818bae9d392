//! Reading and checking a `#[kernel]` function's signature and attribute arguments.

use proc_macro2::{Group, TokenStream, TokenTree};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{FnArg, GenericParam, Ident, ItemFn, Pat, ReturnType, Token, Type};

/// How one parameter crosses from host to device.
#[derive(Clone)]
pub enum ParamKind {
    /// A primitive passed by value: an integer, float or `bool`.
    Scalar,
    /// Any other type passed by value: must be a `#[repr(C)]` bytemuck `Pod` struct or array
    /// (checked on the host by a trait bound spanned at the type).
    Value,
    /// `&[T]`: read-only device slice (pointer + length).
    Slice { elem: Type },
    /// `&mut [T]`: writable device slice (pointer + length).
    SliceMut { elem: Type },
    /// `*const T` / `*mut T`: a raw device pointer; the launcher is `unsafe`.
    Pointer { elem: Type, mutable: bool },
}

#[derive(Clone)]
pub struct Param {
    pub name: Ident,
    pub mutable: bool,
    pub ty: Type,
    pub kind: ParamKind,
}

/// One instance of a generic kernel: the type for its type parameter and its PTX symbol.
pub struct Instance {
    pub ty: Type,
    pub symbol: Ident,
}

pub struct Kernel<'a> {
    pub function: &'a ItemFn,
    pub params: Vec<Param>,
    /// For a generic kernel: its type parameter and the instances to build.
    pub generic: Option<(Ident, Vec<Instance>)>,
    /// `launch_bounds(threads, min_blocks)` / `reqntid(threads)`: the arguments of the
    /// `ferrocuda_device::launch_bounds!` marker emitted for each entry point.
    pub bounds: Option<TokenStream>,
}

impl Kernel<'_> {
    /// True when a parameter is a raw pointer, which makes the launcher `unsafe`.
    pub fn has_raw_pointers(&self) -> bool {
        self.params.iter().any(|p| matches!(p.kind, ParamKind::Pointer { .. }))
    }
}

const SCALARS: &[&str] = &["bool", "i8", "i16", "i32", "i64", "isize", "u8", "u16", "u32", "u64", "usize", "f32", "f64"];
/// Owning or pointer-holding standard types that can never be copied to a GPU.
const HOST_ONLY: &[&str] = &["String", "str", "Vec", "Box", "Rc", "Arc", "Option", "Result", "HashMap", "BTreeMap", "VecDeque", "Cell", "RefCell"];
const ALLOWED: &str = "kernel parameters may be integer, float or bool scalars, `#[repr(C)]` `bytemuck::Pod` structs by value, \
                       `&[T]` (read-only input), `&mut [T]` (output), or raw device pointers `*const T` / `*mut T`";

/// `#[kernel]`, `#[kernel(instances(f32, f64))]`, `#[kernel(launch_bounds(256, 2))]`,
/// `#[kernel(reqntid(256))]`, comma-separated.
#[derive(Default)]
struct Attribute {
    instances: Option<(Ident, Vec<Type>)>,
    bounds: Option<TokenStream>,
}

impl Parse for Attribute {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut attribute = Attribute::default();
        while !input.is_empty() {
            let key: Ident = input.parse()?;
            let content;
            syn::parenthesized!(content in input);
            if key == "instances" {
                let types: Punctuated<Type, Token![,]> = content.parse_terminated(Type::parse, Token![,])?;
                if types.is_empty() {
                    return Err(syn::Error::new(key.span(), "`instances()` needs at least one type, e.g. `instances(f32, f64)`"));
                }
                attribute.instances = Some((key, types.into_iter().collect()));
            } else if key == "launch_bounds" || key == "reqntid" {
                let values: Punctuated<syn::Expr, Token![,]> = content.parse_terminated(syn::Expr::parse, Token![,])?;
                let values: Vec<_> = values.into_iter().collect();
                attribute.bounds = Some(match (key.to_string().as_str(), values.as_slice()) {
                    ("launch_bounds", [threads]) => quote::quote!(#threads, 0),
                    ("launch_bounds", [threads, min_blocks]) => quote::quote!(#threads, #min_blocks),
                    ("reqntid", [threads]) => quote::quote!(reqntid #threads),
                    _ => {
                        return Err(syn::Error::new(key.span(), "write `launch_bounds(max_threads)`, `launch_bounds(max_threads, min_blocks_per_sm)` or `reqntid(threads)`"));
                    }
                });
            } else {
                return Err(syn::Error::new(
                    key.span(),
                    "unknown #[kernel] argument; expected `instances(T1, T2, ..)`, `launch_bounds(max_threads[, min_blocks])` or `reqntid(threads)`",
                ));
            }
            if !input.is_empty() {
                input.parse::<Token![,]>()?;
            }
        }
        Ok(attribute)
    }
}

impl<'a> Kernel<'a> {
    pub fn from_fn(attr: TokenStream, function: &'a ItemFn) -> syn::Result<Self> {
        let mut errors: Vec<syn::Error> = Vec::new();
        let attribute = match syn::parse2::<Attribute>(attr) {
            Ok(a) => a,
            Err(e) => {
                errors.push(e);
                Attribute::default()
            }
        };
        let bounds = attribute.bounds.clone();
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
        if let ReturnType::Type(_, ty) = &sig.output {
            errors.push(syn::Error::new_spanned(ty, "a kernel returns nothing: write results into a `&mut [T]` parameter"));
        }
        if let Some(variadic) = &sig.variadic {
            errors.push(syn::Error::new_spanned(variadic, "a kernel cannot be variadic"));
        }
        let generic = match check_generics(function, attribute.instances) {
            Ok(g) => g,
            Err(e) => {
                errors.push(e);
                None
            }
        };

        let mut params = Vec::new();
        for input in &sig.inputs {
            match parse_param(input) {
                Ok(param) => params.push(param),
                Err(e) => errors.push(e),
            }
        }

        if let Some(token) = &sig.unsafety
            && !params.iter().any(|p| matches!(p.kind, ParamKind::Pointer { .. }))
        {
            errors.push(syn::Error::new_spanned(token, "only a kernel with raw pointer parameters may be `unsafe fn`: slices and values are checked by their types"));
        }

        let mut errors = errors.into_iter();
        match errors.next() {
            None => Ok(Kernel { function, params, generic, bounds }),
            Some(mut first) => {
                errors.for_each(|e| first.combine(e));
                Err(first)
            }
        }
    }
}

/// A generic kernel needs `instances(..)` and exactly one type parameter; a plain one none.
fn check_generics(function: &ItemFn, instances: Option<(Ident, Vec<Type>)>) -> syn::Result<Option<(Ident, Vec<Instance>)>> {
    let generics = &function.sig.generics;
    let type_params: Vec<&syn::TypeParam> = generics.type_params().collect();
    for param in &generics.params {
        match param {
            GenericParam::Type(_) => {}
            GenericParam::Lifetime(l) => return Err(syn::Error::new_spanned(l, "leave out lifetimes on kernels")),
            GenericParam::Const(c) => return Err(syn::Error::new_spanned(c, "const generic kernels are not supported; use a type parameter with `instances(..)`")),
        }
    }
    match (type_params.as_slice(), instances) {
        ([], None) => Ok(None),
        ([], Some((key, _))) => Err(syn::Error::new(key.span(), "`instances(..)` is for a generic kernel: add a type parameter, e.g. `pub fn scale<T: Copy>(..)`")),
        ([param], Some((_, types))) => {
            let base = &function.sig.ident;
            let instances = types.into_iter().map(|ty| Instance { symbol: instance_symbol(base, &ty), ty }).collect::<Vec<_>>();
            Ok(Some((param.ident.clone(), instances)))
        }
        ([_], None) => Err(syn::Error::new_spanned(
            generics,
            "a generic kernel needs explicit instances, e.g. `#[kernel(instances(f32, f64))]`: each becomes its own PTX kernel (`name_f32`, `name_f64`)",
        )),
        (_, _) => Err(syn::Error::new_spanned(generics, "a generic kernel may have one type parameter")),
    }
}

/// `scale` + `f32` -> `scale_f32`; a path type uses its last segment (`my::Pair` -> `scale_Pair`).
fn instance_symbol(base: &Ident, ty: &Type) -> Ident {
    let text = match ty {
        Type::Path(p) if p.qself.is_none() => p.path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default(),
        other => quote::quote!(#other).to_string(),
    };
    let cleaned: String = text.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    Ident::new(&format!("{base}_{}", cleaned.trim_matches('_')), ty.span())
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
        Type::Path(path) if path.qself.is_none() => {
            let last = path.path.segments.last().expect("a path has a segment");
            if HOST_ONLY.contains(&last.ident.to_string().as_str()) {
                return Err(syn::Error::new_spanned(ty, format!("`{}` lives in host memory and cannot be a kernel parameter; {ALLOWED}", type_text(ty))));
            }
            Ok(ParamKind::Value)
        }
        Type::Array(_) => Ok(ParamKind::Value),
        Type::Ptr(pointer) => {
            let elem = (*pointer.elem).clone();
            if matches!(elem, Type::Ptr(_) | Type::Reference(_) | Type::Slice(_)) {
                return Err(syn::Error::new_spanned(&pointer.elem, format!("a raw pointer parameter must point to plain data; {ALLOWED}")));
            }
            Ok(ParamKind::Pointer { elem, mutable: pointer.mutability.is_some() })
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
            if matches!(elem, Type::Reference(_) | Type::Slice(_) | Type::Ptr(_)) {
                return Err(syn::Error::new_spanned(&slice.elem, format!("slice elements must be plain data; {ALLOWED}")));
            }
            Ok(if reference.mutability.is_some() { ParamKind::SliceMut { elem } } else { ParamKind::Slice { elem } })
        }
        other => Err(syn::Error::new(other.span(), format!("`{}` cannot be a kernel parameter; {ALLOWED}", type_text(other)))),
    }
}

/// Replaces the type parameter `name` by `with` everywhere in `ty` (token-level, so it also
/// reaches inside paths such as `Pair<T>` and arrays `[T; 4]`).
pub fn substitute(ty: &Type, name: &Ident, with: &Type) -> Type {
    fn walk(tokens: TokenStream, name: &Ident, with: &TokenStream) -> TokenStream {
        tokens
            .into_iter()
            .flat_map(|tree| -> Vec<TokenTree> {
                match tree {
                    TokenTree::Ident(ident) if ident == *name => {
                        // Parenthesise-free: a type is a single token group when re-parsed below.
                        vec![TokenTree::Group(Group::new(proc_macro2::Delimiter::None, with.clone()))]
                    }
                    TokenTree::Group(group) => {
                        let mut new = Group::new(group.delimiter(), walk(group.stream(), name, with));
                        new.set_span(group.span());
                        vec![TokenTree::Group(new)]
                    }
                    other => vec![other],
                }
            })
            .collect()
    }
    let replaced = walk(quote::quote!(#ty), name, &quote::quote!(#with));
    syn::parse2(replaced).unwrap_or_else(|_| ty.clone())
}

impl Param {
    /// This parameter with the generic type `name` replaced by `with`.
    pub fn instantiate(&self, name: &Ident, with: &Type) -> Param {
        let kind = match &self.kind {
            ParamKind::Scalar => ParamKind::Scalar,
            ParamKind::Value => ParamKind::Value,
            ParamKind::Slice { elem } => ParamKind::Slice { elem: substitute(elem, name, with) },
            ParamKind::SliceMut { elem } => ParamKind::SliceMut { elem: substitute(elem, name, with) },
            ParamKind::Pointer { elem, mutable } => ParamKind::Pointer { elem: substitute(elem, name, with), mutable: *mutable },
        };
        // A bare `T` parameter is classified as a by-value type: after substitution it may be a
        // primitive, which needs no `Pod` check.
        let ty = substitute(&self.ty, name, with);
        let kind = match (&kind, &ty) {
            (ParamKind::Value, Type::Group(g)) if is_scalar(&g.elem) => ParamKind::Scalar,
            (ParamKind::Value, t) if is_scalar(t) => ParamKind::Scalar,
            _ => kind,
        };
        Param { name: self.name.clone(), mutable: self.mutable, ty, kind }
    }
}

fn is_scalar(ty: &Type) -> bool {
    matches!(ty, Type::Path(p) if p.qself.is_none() && p.path.get_ident().is_some_and(|i| SCALARS.contains(&i.to_string().as_str())))
}

/// A type as the user wrote it, without the token spacing of `TokenStream::to_string`.
fn type_text(ty: &Type) -> String {
    let spaced = quote::quote!(#ty).to_string();
    spaced.replace(" < ", "<").replace("< ", "<").replace(" >", ">").replace(" ,", ",").replace("& ", "&").replace(" ;", ";")
}
