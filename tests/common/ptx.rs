//! Reading PTX text in tests: one kernel's body and its instructions' opcodes. Included by the
//! tests that need it (`#[path = "common/ptx.rs"] mod ptx_text;`).
#![allow(dead_code)]

/// The body of `.entry name` in `ptx`, up to its closing brace.
///
/// # Panics
/// When `ptx` has no such entry, naming it.
pub fn entry_body<'p>(ptx: &'p str, name: &str) -> &'p str {
    let start = ptx.find(&format!(".entry {name}(")).unwrap_or_else(|| panic!("no .entry {name} in the PTX"));
    let end = start + ptx[start..].find("\n}").expect("an entry ends with a closing brace");
    &ptx[start..end]
}

/// The opcodes of the body's instructions (`@%p1 ld.global.cs.b32 %r1, [%rd2];` gives
/// `ld.global.cs.b32`), inline-asm instructions included.
pub fn opcodes(body: &str) -> Vec<&str> {
    body.lines()
        .map(str::trim)
        .filter(|line| {
            !line.is_empty() && !line.starts_with("//") && !line.starts_with('.') && !line.ends_with(':') && !line.starts_with('{') && !line.starts_with('}')
        })
        .map(|line| {
            let mut words = line.split_whitespace();
            let first = words.next().unwrap_or("");
            if first.starts_with('@') { words.next().unwrap_or("") } else { first }
        })
        .map(|op| op.trim_end_matches(';'))
        .collect()
}
