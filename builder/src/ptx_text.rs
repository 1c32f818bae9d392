//! Reading PTX text line by line: the little the builder's post-processing passes
//! (`kernel_tag`, `launch_bounds`) need to recognise, shared so that both read function headers
//! the same way.

/// `(name, is_entry)` when `line` starts a function at module scope:
/// `.visible .entry k(`, `.func  (.param .b32 func_retval0) f(`, `.extern .func vprintf`...
pub(crate) fn function_header(line: &str) -> Option<(String, bool)> {
    let mut rest = line;
    for linkage in [".visible ", ".weak ", ".extern "] {
        rest = rest.strip_prefix(linkage).unwrap_or(rest).trim_start();
    }
    let (entry, rest) = if let Some(rest) = rest.strip_prefix(".entry") { (true, rest) } else { (false, rest.strip_prefix(".func")?) };
    if !rest.starts_with([' ', '\t', '(']) && !rest.is_empty() {
        return None;
    }
    let mut rest = rest.trim_start();
    // A `.func`'s return parameters come before its name.
    if rest.starts_with('(') {
        rest = rest[rest.find(')')? + 1..].trim_start();
    }
    let name: String = rest.chars().take_while(|&c| is_identifier_char(c)).collect();
    (!name.is_empty()).then_some((name, entry))
}

/// PTX identifiers: letters, digits, `_`, `$` (the first character is not a digit), read as the
/// host reads them.
pub(crate) use ferrocuda_types::ptx::is_identifier_char;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn function_headers_of_entries_and_funcs_are_recognised() {
        assert_eq!(function_header(".visible .entry saxpy("), Some(("saxpy".into(), true)));
        assert_eq!(function_header(".entry empty()"), Some(("empty".into(), true)));
        assert_eq!(function_header(".weak .entry weak_kernel("), Some(("weak_kernel".into(), true)));
        assert_eq!(function_header(".func  (.param .b32 func_retval0) _RNvXs8_fmt("), Some(("_RNvXs8_fmt".into(), false)));
        assert_eq!(function_header(".extern .func  (.param .b32 func_retval0) vprintf"), Some(("vprintf".into(), false)));
        assert_eq!(function_header(".funcs"), None);
        assert_eq!(function_header(".entryfoo("), None, "a longer word is not `.entry`");
        assert_eq!(function_header("\tret;"), None);
        assert_eq!(function_header(".visible .global .align 4 .b8 marker[12];"), None);
    }
}
