//! `__shared_site!()`: a number naming one expansion of `shared_array!` (audit N9).
//!
//! `shared_array!` used to name its site by `file!()`, `line!()` and `column!()`, which are the
//! position of the outermost macro call: two arrays expanded from one call of a user's
//! `macro_rules!` got one name, so the CPU executor aliased them and ptxas refused the PTX
//! (two `.shared` variables of one name). Each call of this macro instead returns a new number
//! for the crate being compiled: a counter of this compilation's calls, hashed with the
//! crate's name and version (so that two crates linked into one PTX module never share one).
//! Macro expansion runs from scratch in every compilation, in source order, so the numbers are
//! the same from one build to the next.

use std::sync::atomic::{AtomicU64, Ordering};

use proc_macro2::{Literal, TokenStream};

/// Calls so far in this compilation.
static CALLS: AtomicU64 = AtomicU64::new(0);

/// A `u64` literal no other call in this compilation (of this or another crate) returns.
pub(crate) fn expand(input: TokenStream) -> TokenStream {
    if !input.is_empty() {
        return quote::quote!(::core::compile_error!("`__shared_site!()` takes no arguments"));
    }
    let call = CALLS.fetch_add(1, Ordering::Relaxed);
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in [var("CARGO_CRATE_NAME"), var("CARGO_PKG_VERSION"), call.to_string()] {
        for byte in part.bytes().chain([0xff]) {
            hash = (hash ^ byte as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
    proc_macro2::TokenTree::Literal(Literal::u64_suffixed(hash)).into()
}
