//! `launch!(kernel<<<grid, block, shared, stream>>>(args))`.

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};
use quote::quote;
use syn::Expr;
use syn::parse::Parser;
use syn::punctuated::Punctuated;

pub fn expand(input: TokenStream) -> TokenStream {
    match parse(input) {
        Ok(call) => call.expand(),
        Err(e) => e.to_compile_error(),
    }
}

struct LaunchCall {
    kernel: TokenStream,
    config: Vec<Expr>,
    args: TokenStream,
}

const USAGE: &str = "expected `launch!(kernel<<<grid, block>>>(args))`, optionally `<<<grid, block, shared_bytes, &stream>>>`";

fn parse(input: TokenStream) -> syn::Result<LaunchCall> {
    let tokens: Vec<TokenTree> = input.into_iter().collect();
    let is_punct = |t: &TokenTree, c: char| matches!(t, TokenTree::Punct(p) if p.as_char() == c);
    let triple = |at: usize, c: char| at + 2 < tokens.len() && (0..3).all(|k| is_punct(&tokens[at + k], c));
    let whole = || tokens.iter().cloned().collect::<TokenStream>();

    let open = (0..tokens.len()).find(|&i| triple(i, '<')).ok_or_else(|| syn::Error::new_spanned(whole(), USAGE))?;
    let close = (open + 3..tokens.len()).find(|&i| triple(i, '>')).ok_or_else(|| syn::Error::new_spanned(whole(), USAGE))?;
    if open == 0 {
        return Err(syn::Error::new_spanned(whole(), USAGE));
    }
    let kernel: TokenStream = tokens[..open].iter().cloned().collect();
    let config_tokens: TokenStream = tokens[open + 3..close].iter().cloned().collect();
    let config: Vec<Expr> = Punctuated::<Expr, syn::Token![,]>::parse_terminated.parse2(config_tokens.clone())?.into_iter().collect();
    if !(2..=4).contains(&config.len()) {
        return Err(syn::Error::new_spanned(
            config_tokens,
            "the launch configuration is `<<<grid, block>>>`, `<<<grid, block, shared_bytes>>>` or `<<<grid, block, shared_bytes, &stream>>>`",
        ));
    }
    let args = match &tokens[close + 3..] {
        [TokenTree::Group(g)] if g.delimiter() == Delimiter::Parenthesis => g.stream(),
        _ => return Err(syn::Error::new_spanned(whole(), USAGE)),
    };
    // `>>>` must be three separate puncts, not the tail of `>>=` or similar.
    if let TokenTree::Punct(p) = &tokens[close + 2]
        && p.spacing() == Spacing::Joint
    {
        return Err(syn::Error::new_spanned(whole(), USAGE));
    }
    Ok(LaunchCall { kernel, config, args })
}

impl LaunchCall {
    fn expand(&self) -> TokenStream {
        let LaunchCall { kernel, config, args } = self;
        let (grid, block) = (&config[0], &config[1]);
        let shared = config.get(2).map(|s| quote!(#s)).unwrap_or(quote!(0));
        let settings = quote!((#grid, #block, #shared));
        match config.get(3) {
            Some(stream) => quote!(#kernel::launch(#stream, #settings, #args)),
            None => quote!(#kernel::launch_on_current_context(#settings, #args)),
        }
    }
}
