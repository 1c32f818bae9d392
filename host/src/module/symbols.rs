//! Which of ferrocuda's own globals (`__ferrocuda_*`: the panic slot, each kernel's
//! fingerprint, layout and type tables, the unbounded-stack marks) a module image can hold,
//! read from the image before it is loaded, so the host asks the driver only for globals that
//! exist, and how many parameters each kernel of PTX text declares (the driver tells that only by
//! failing a call).
//!
//! Why: a lookup of a missing global (`cuModuleGetGlobal` answering `CUDA_ERROR_NOT_FOUND`) is
//! harmless to the program, but compute-sanitizer's default (`--report-api-errors explicit`)
//! reports every such answer as an error ("Program hit CUDA_ERROR_NOT_FOUND ... on CUDA API
//! call to cuModuleGetGlobal_v2"), and counts it in its ERROR SUMMARY: every ferrocuda program
//! checked with memcheck read dozens of errors that were not its own (issue 30; session 11's
//! ports2 memcheck log had 30). The probes stay: they are how a module without the globals (one
//! not built by `#[kernel]`) is told apart; they are skipped only when the image shows the name
//! cannot be there.
//!
//! What can be read: PTX text declares every global by its name, and an ELF cubin keeps every
//! symbol's name in its string table, so a name that appears nowhere in such an image is not a
//! global of it. A fatbin may hold compressed images, so for a fatbin (or anything else)
//! nothing is ruled out and the driver is asked, as before. A name that appears only in a
//! comment is "possible": the driver is asked, which is correct, only noisy.

use std::collections::{HashMap, HashSet};

/// The prefix of every global the host looks up without knowing whether it exists.
const OURS: &[u8] = b"__ferrocuda_";

/// True for a name of ferrocuda's own (the `__ferrocuda_` prefix: the device panic handler's
/// record address and claim flag, the launch checks' tables), which `Module::global` never
/// hands out: a safe write of `__ferrocuda_panic_slot` aimed the panic handler's stores at any
/// address (audit 2026-11-28b G14-1).
pub(crate) fn is_reserved(name: &str) -> bool {
    name.as_bytes().starts_with(OURS)
}

/// The `__ferrocuda_*` names an image holds, when its format lets them be read, and the
/// parameter count of each kernel of a PTX image.
#[derive(Debug, Default)]
pub(crate) struct ImageSymbols {
    /// `None`: the image's names cannot be read (a fatbin), so any name may be a global.
    names: Option<HashSet<Box<str>>>,
    /// Each `.entry` of a PTX image and its number of `.param`s (empty for other images).
    entries: HashMap<Box<str>, usize>,
}

impl ImageSymbols {
    /// Scans `image` (PTX text when `is_ptx`, else a cubin or fatbin).
    pub(crate) fn scan(image: &[u8], is_ptx: bool) -> Self {
        if !is_ptx && !image.starts_with(b"\x7fELF") {
            return ImageSymbols::default();
        }
        let mut names = HashSet::new();
        let identifier = |b: &u8| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'$';
        let mut at = 0;
        while at < image.len() {
            if !identifier(&image[at]) {
                at += 1;
                continue;
            }
            let end = image[at..].iter().position(|b| !identifier(b)).map_or(image.len(), |n| at + n);
            let word = &image[at..end];
            if word.starts_with(OURS) {
                names.insert(String::from_utf8_lossy(word).into());
            }
            at = end;
        }
        let entries = if is_ptx { ptx_entries(image) } else { HashMap::new() };
        ImageSymbols { names: Some(names), entries }
    }

    /// The number of parameters of the kernel `symbol`, when the image is PTX text that
    /// declares it (the driver tells it only by failing a call for the index past the last).
    pub(crate) fn param_count(&self, symbol: &str) -> Option<usize> {
        self.entries.get(symbol).copied()
    }

    /// Whether `name` may be a global of the image: `false` only when the image was read and
    /// does not name it.
    pub(crate) fn may_hold(&self, name: &str) -> bool {
        self.names.as_ref().is_none_or(|names| !name.as_bytes().starts_with(OURS) || names.contains(name))
    }

    /// Whether the image was read, so that [`ImageSymbols::may_hold`] answers for it.
    pub(crate) fn is_known(&self) -> bool {
        self.names.is_some()
    }
}

/// Each `.entry NAME(...)` of PTX text and the number of `.param` declarations in its
/// parameter list (a kernel without parameters has `()` or no list at all).
fn ptx_entries(ptx: &[u8]) -> HashMap<Box<str>, usize> {
    let text = String::from_utf8_lossy(ptx);
    let mut entries = HashMap::new();
    let mut rest: &str = &text;
    while let Some(at) = rest.find(".entry") {
        rest = &rest[at + ".entry".len()..];
        let name: String = rest.trim_start().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '$').collect();
        if name.is_empty() {
            continue;
        }
        let after = rest.trim_start()[name.len()..].trim_start();
        let count = match after.strip_prefix('(') {
            Some(list) => list.find(')').map_or(0, |end| list[..end].matches(".param").count()),
            None => 0,
        };
        entries.insert(name.into(), count);
    }
    entries
}

#[cfg(test)]
mod tests {
    use super::*;

    /// G14-1 (audit 2026-11-28b): the panic handler's globals and the check tables are
    /// ferrocuda's; a user's global of another name is not.
    #[test]
    fn g14_1_ferrocudas_own_globals_are_reserved() {
        for ours in [crate::PANIC_SLOT_SYMBOL, "__ferrocuda_panic_claimed", "__ferrocuda_layout_saxpy", "__ferrocuda_fingerprint_saxpy", "__ferrocuda_types_k"]
        {
            assert!(is_reserved(ours), "{ours}");
        }
        for theirs in ["FILL", "VERSION", "hopper_const_map_a", "_ferrocuda_x", "my__ferrocuda_x", ""] {
            assert!(!is_reserved(theirs), "{theirs}");
        }
    }

    const PTX: &str = ".version 8.0\n.target sm_80\n.address_size 64\n\
        .visible .global .align 8 .u64 __ferrocuda_panic_slot;\n\
        .visible .global .align 8 .b8 __ferrocuda_layout_saxpy[48] = {1, 0};\n\
        .visible .global .align 8 .u64 __ferrocuda_fingerprint_saxpy = 77;\n\
        .visible .entry saxpy(.param .u64 saxpy_param_0) { ret; }\n";

    /// A PTX image holds exactly the names it declares; other `__ferrocuda_` names are ruled
    /// out, and names of other prefixes are never ruled out (a user's `Module::global`).
    #[test]
    fn ptx_text_rules_out_only_our_names_it_does_not_declare() {
        let symbols = ImageSymbols::scan(PTX.as_bytes(), true);
        assert!(symbols.is_known());
        for present in ["__ferrocuda_panic_slot", "__ferrocuda_layout_saxpy", "__ferrocuda_fingerprint_saxpy"] {
            assert!(symbols.may_hold(present), "{present}");
        }
        for absent in ["__ferrocuda_types_saxpy", "__ferrocuda_unbounded_stack_saxpy", "__ferrocuda_layout_sax", "__ferrocuda_layout_saxpy2"] {
            assert!(!symbols.may_hold(absent), "{absent}");
        }
        assert!(symbols.may_hold("my_table"), "a name of another prefix is always asked for");
        assert_eq!(symbols.param_count("saxpy"), Some(1));
        assert_eq!(symbols.param_count("other"), None);
    }

    /// The parameter count of each entry of PTX text, as `ptxas` and the driver read it.
    #[test]
    fn ptx_entries_count_their_params() {
        let ptx = "// .entry in_a_comment_is_harmless\n\
            .visible .entry three(\n\t.param .u64 three_param_0,\n\t.param .align 8 .b8 three_param_1[16],\n\t.param .u32 three_param_2\n)\n{ ret; }\n\
            .visible .entry none()\n{ ret; }\n\
            .entry bare\n{ ret; }\n";
        let symbols = ImageSymbols::scan(ptx.as_bytes(), true);
        assert_eq!(symbols.param_count("three"), Some(3));
        assert_eq!(symbols.param_count("none"), Some(0));
        assert_eq!(symbols.param_count("bare"), Some(0));
    }

    /// An ELF cubin's string table (names between NULs) is read the same way.
    #[test]
    fn elf_string_table_names_are_read() {
        let mut image = b"\x7fELF\x02\x01\x01\0\0\0".to_vec();
        image.extend_from_slice(b"\0.strtab\0__ferrocuda_panic_slot\0__ferrocuda_types_k\0k\0");
        let symbols = ImageSymbols::scan(&image, false);
        assert!(symbols.is_known());
        assert!(symbols.may_hold("__ferrocuda_panic_slot"));
        assert!(symbols.may_hold("__ferrocuda_types_k"));
        assert!(!symbols.may_hold("__ferrocuda_layout_k"));
    }

    /// A fatbin (compressed entries possible) and anything unrecognised rule nothing out.
    #[test]
    fn a_fatbin_rules_nothing_out() {
        let fatbin = [0x50u8, 0xed, 0x55, 0xba, 1, 0, 0x10, 0];
        let symbols = ImageSymbols::scan(&fatbin, false);
        assert!(!symbols.is_known());
        assert!(symbols.may_hold("__ferrocuda_panic_slot"));
        assert!(symbols.may_hold("__ferrocuda_layout_anything"));
    }
}
