//! `device_print!`: Rust format strings turned into one `vprintf` call at compile time, so that
//! printing from a kernel needs no `core::fmt` (whose indirect calls make ptxas give every kernel
//! of the module 255 registers).
//!
//! Input: `$crate_path, newline, "format", args...`. Output: on the GPU a `Printf` builder fed
//! with literal pieces and typed arguments (`PrintfArg` picks `%d`/`%llu`/`%g`/... per type);
//! on the host `format_args!` with the same string.

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Expr, LitBool, LitStr, Token};

struct Input {
    krate: syn::Path,
    newline: bool,
    format: LitStr,
    args: Vec<Expr>,
}

impl Parse for Input {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let krate: syn::Path = input.parse()?;
        input.parse::<Token![,]>()?;
        let newline: LitBool = input.parse()?;
        input.parse::<Token![,]>()?;
        let format: LitStr = input.parse()?;
        let args = if input.parse::<Option<Token![,]>>()?.is_some() {
            Punctuated::<Expr, Token![,]>::parse_terminated(input)?.into_iter().collect()
        } else {
            Vec::new()
        };
        Ok(Input { krate, newline: newline.value, format, args })
    }
}

/// One `{...}` of the format string.
struct Placeholder {
    argument: Argument,
    left: bool,
    zero: bool,
    width: Option<u32>,
    precision: Option<u32>,
    /// `' '` default, `'x'`, `'X'`, `'e'`.
    kind: char,
}

enum Argument {
    Next,
    Index(usize),
    Name(String),
}

enum Piece {
    Literal(String),
    Placeholder(Placeholder),
}

fn parse_format(text: &str, span: Span) -> syn::Result<Vec<Piece>> {
    let error = |m: String| syn::Error::new(span, m);
    let mut pieces = Vec::new();
    let mut literal = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                literal.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                literal.push('}');
            }
            '}' => return Err(error("unmatched `}` in the format string (write `}}` for a brace)".into())),
            '{' => {
                let mut inside = String::new();
                loop {
                    match chars.next() {
                        Some('}') => break,
                        Some(ch) => inside.push(ch),
                        None => return Err(error("unclosed `{` in the format string".into())),
                    }
                }
                if !literal.is_empty() {
                    pieces.push(Piece::Literal(std::mem::take(&mut literal)));
                }
                pieces.push(Piece::Placeholder(parse_placeholder(&inside).map_err(error)?));
            }
            other => literal.push(other),
        }
    }
    if !literal.is_empty() {
        pieces.push(Piece::Literal(literal));
    }
    Ok(pieces)
}

fn parse_placeholder(inside: &str) -> Result<Placeholder, String> {
    let (name, spec) = inside.split_once(':').unwrap_or((inside, ""));
    let argument = match name.trim() {
        "" => Argument::Next,
        n if n.chars().all(|c| c.is_ascii_digit()) => Argument::Index(n.parse().map_err(|_| format!("bad argument index `{n}`"))?),
        n if n.chars().all(|c| c.is_alphanumeric() || c == '_') => Argument::Name(n.to_string()),
        n => return Err(format!("`{{{n}}}`: only `{{}}`, `{{0}}` and `{{name}}` arguments can be printed on the device")),
    };
    let mut rest = spec;
    let mut left = false;
    if let Some(r) = rest.strip_prefix('<') {
        left = true;
        rest = r;
    } else if let Some(r) = rest.strip_prefix('>') {
        rest = r;
    }
    let mut zero = false;
    if let Some(r) = rest.strip_prefix('0') {
        zero = true;
        rest = r;
    }
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    rest = &rest[digits.len()..];
    let width = if digits.is_empty() { None } else { Some(digits.parse().map_err(|_| "bad width".to_string())?) };
    let mut precision = None;
    if let Some(r) = rest.strip_prefix('.') {
        let digits: String = r.chars().take_while(|c| c.is_ascii_digit()).collect();
        if digits.is_empty() {
            return Err("a precision needs digits, like `{:.3}`".into());
        }
        precision = Some(digits.parse().map_err(|_| "bad precision".to_string())?);
        rest = &r[digits.len()..];
    }
    let kind = match rest {
        "" | "?" => ' ',
        "x" => 'x',
        "X" => 'X',
        "e" => 'e',
        other => {
            return Err(format!(
                "the format spec `{{:{spec}}}` is not supported on the device (`{other}`); supported: `{{}}`, `{{:?}}`, `{{:x}}`, `{{:X}}`, `{{:e}}`, width, `0`, `<`/`>`, `.precision`"
            ));
        }
    };
    Ok(Placeholder { argument, left, zero, width, precision, kind })
}

pub fn expand(input: TokenStream) -> TokenStream {
    let input: Input = match syn::parse2(input) {
        Ok(i) => i,
        Err(e) => return e.to_compile_error(),
    };
    let pieces = match parse_format(&input.format.value(), input.format.span()) {
        Ok(p) => p,
        Err(e) => return e.to_compile_error(),
    };
    let krate = &input.krate;
    let mut next = 0usize;
    let mut steps = Vec::new();
    for piece in &pieces {
        match piece {
            Piece::Literal(text) => steps.push(quote!(__printf.literal(#text);)),
            Piece::Placeholder(p) => {
                let value = match &p.argument {
                    Argument::Next => {
                        let Some(arg) = input.args.get(next) else {
                            return syn::Error::new(
                                input.format.span(),
                                format!("the format string has more placeholders than the {} argument(s) given", input.args.len()),
                            )
                            .to_compile_error();
                        };
                        next += 1;
                        quote!(#arg)
                    }
                    Argument::Index(i) => match input.args.get(*i) {
                        Some(arg) => quote!(#arg),
                        None => return syn::Error::new(input.format.span(), format!("argument {i} does not exist")).to_compile_error(),
                    },
                    Argument::Name(name) => {
                        let ident = syn::Ident::new(name, input.format.span());
                        quote!(#ident)
                    }
                };
                let (left, zero, kind) = (p.left, p.zero, p.kind);
                let width = match p.width {
                    Some(w) => quote!(::core::option::Option::Some(#w)),
                    None => quote!(::core::option::Option::None),
                };
                let precision = match p.precision {
                    Some(w) => quote!(::core::option::Option::Some(#w)),
                    None => quote!(::core::option::Option::None),
                };
                steps.push(quote! {
                    #krate::print::PrintfArg::push_to(&(#value), &mut __printf, #krate::print::Spec {
                        left: #left, zero: #zero, width: #width, precision: #precision, kind: #kind,
                    });
                });
            }
        }
    }
    if input.newline {
        steps.push(quote!(__printf.literal("\n");));
    }
    let format = &input.format;
    let args = &input.args;
    let host = if input.newline {
        quote!(#krate::print::__print(::core::format_args!("{}\n", ::core::format_args!(#format #(, #args)*))))
    } else {
        quote!(#krate::print::__print(::core::format_args!(#format #(, #args)*)))
    };
    quote! {{
        #[cfg(target_arch = "nvptx64")]
        {
            let mut __printf = #krate::print::Printf::new();
            #(#steps)*
            __printf.print();
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            #host;
        }
    }}
}
