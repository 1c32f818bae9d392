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

use ferrocuda_types::ptx::{is_identifier_char, without_comments};

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
    /// The data the image defines, each with whether it is visible outside its module (PTX
    /// `.visible`/`.weak`/`.common` `.global`/`.const` variables; a cubin's `OBJECT` symbols of
    /// global or weak binding): the visible ones are the only globals `Module::global` hands
    /// out (audit 2026-11-28h G20R-5). `None`: the image's declarations cannot be read (a fatbin).
    data: Option<HashMap<Box<str>, Data>>,
    /// The `.global` data the loader named host-writable (`JitOptions::host_writable_globals`).
    pub(crate) host_writable: Vec<Box<str>>,
}

/// What an image says of one variable it defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Data {
    /// Visible outside its module (external linkage).
    visible: bool,
    /// In the constant state space (`.const`, a cubin's `.nv.constant*` sections).
    constant_space: bool,
}

impl ImageSymbols {
    /// Scans `image` (PTX text when `is_ptx`, else a cubin or fatbin).
    pub(crate) fn scan(image: &[u8], is_ptx: bool) -> Self {
        if !is_ptx && !image.starts_with(b"\x7fELF") {
            return ImageSymbols::default();
        }
        let mut names = HashSet::new();
        let identifier = |b: &u8| is_identifier_char(char::from(*b));
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
        let (entries, data) = if is_ptx {
            // Declarations in comments declare nothing.
            let code: String = without_comments(&String::from_utf8_lossy(image)).collect();
            (ptx_entries(&code), Some(ptx_data(&code)))
        } else {
            (HashMap::new(), elf_data(image))
        };
        ImageSymbols { names: Some(names), entries, data, host_writable: Vec::new() }
    }

    /// Whether `name` is data the image declares visible outside its module, the only kind
    /// `Module::global` hands out (G20R-5): the compiler's own data of a `#[kernel]` crate
    /// (panic `Location`s, string literals, constant tables, vtables: module-internal
    /// `.global`s the kernels' code was compiled trusting never to change) is not.
    pub(crate) fn host_accessible(&self, name: &str) -> HostAccess {
        match self.data.as_ref().map(|data| data.get(name)) {
            // Writable only when the loader named it, `.const` data too (session 23): the image
            // cannot tell data the code reads from data whose value it assumed, in either space.
            Some(Some(Data { visible: true, constant_space })) => {
                HostAccess::Visible { writable: self.host_writable.iter().any(|n| &**n == name), constant: *constant_space }
            }
            Some(Some(Data { visible: false, .. })) => HostAccess::Refused(
                "it is module-internal data of the image (no `.visible`: the compiler's own constants, panic locations, tables and vtables are such data, and the kernels' code trusts them never to change)",
            ),
            Some(None) => HostAccess::Absent,
            None => HostAccess::Refused(
                "the image is a fatbin, whose declarations ferrocuda cannot read to tell a global the device code made visible from the compiler's module-internal data",
            ),
        }
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

/// Each `.entry NAME(...)` of PTX text (comments left out) and the number of `.param`
/// declarations in its parameter list (a kernel without parameters has `()` or no list at all).
fn ptx_entries(code: &str) -> HashMap<Box<str>, usize> {
    let mut entries = HashMap::new();
    let mut rest = code;
    while let Some(at) = rest.find(".entry") {
        rest = &rest[at + ".entry".len()..];
        let name: String = rest.trim_start().chars().take_while(|&c| is_identifier_char(c)).collect();
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

/// What [`ImageSymbols::host_accessible`] says of a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HostAccess {
    /// Data the image declares visible outside its module: may be handed out; writable by the
    /// host only when the loader named it (`JitOptions::host_writable_globals`), `.const` data
    /// included (session 23).
    Visible {
        /// Whether [`Global::write`](crate::Global::write) may change it.
        writable: bool,
        /// In the constant state space (for the refusal's message).
        constant: bool,
    },
    /// Not handed out, for the reason given.
    Refused(&'static str),
    /// The image (read) defines no data of that name.
    Absent,
}

/// The variables PTX text (comments left out) defines in `.global` or `.const` space, each with
/// whether it has external linkage: a statement that starts with `.visible`, `.weak` or `.common`
/// (module-internal data has no linkage directive; `.extern` data is defined elsewhere, not here).
fn ptx_data(code: &str) -> HashMap<Box<str>, Data> {
    let mut data = HashMap::new();
    // Lines too: `.version` and `.target` end without a `;`.
    for statement in code.split([';', '{', '}', '\n']) {
        let mut words = statement.split_whitespace().peekable();
        let visible = matches!(words.peek(), Some(&(".visible" | ".weak" | ".common")));
        if visible {
            words.next();
        }
        let constant_space = match words.next() {
            Some(".global") => false,
            Some(".const") => true,
            _ => continue,
        };
        // `.align N`, the type and vector modifiers, then the name (with `[n]`, `=` after it).
        let mut after_align = false;
        for word in words {
            if std::mem::take(&mut after_align) {
                continue;
            }
            if word == ".align" {
                after_align = true;
                continue;
            }
            if word.starts_with('.') {
                continue;
            }
            let name: String = word.chars().take_while(|&c| is_identifier_char(c) || c == '%').collect();
            if !name.is_empty() {
                data.insert(name.into(), Data { visible, constant_space });
            }
            break;
        }
    }
    data
}

/// A 64-bit ELF cubin's data symbols (`STT_OBJECT`), each with whether its binding is global
/// or weak, read from its `.symtab` (module-internal data is `STB_LOCAL`). `None` when the
/// image is not one whose symbol table can be read; every read is bounds-checked (a malformed
/// image gives `None` or fewer names, never a panic).
fn elf_data(image: &[u8]) -> Option<HashMap<Box<str>, Data>> {
    let u16_at = |at: usize| image.get(at..at.checked_add(2)?).map(|b| u16::from_le_bytes([b[0], b[1]]) as usize);
    let u32_at = |at: usize| image.get(at..at.checked_add(4)?).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize);
    let u64_at = |at: usize| image.get(at..at.checked_add(8)?).and_then(|b| usize::try_from(u64::from_le_bytes(b.try_into().expect("8 bytes"))).ok());
    if !image.starts_with(b"\x7fELF") || image.get(4) != Some(&2) || image.get(5) != Some(&1) {
        return None;
    }
    let (section_table, entry_size, count) = (u64_at(0x28)?, u16_at(0x3A)?, u16_at(0x3C)?);
    if entry_size < 0x40 {
        return None;
    }
    // Section header fields: sh_type at 4, sh_offset at 0x18, sh_size at 0x20, sh_link at 0x28,
    // sh_entsize at 0x38.
    let section = |index: usize| section_table.checked_add(index.checked_mul(entry_size)?);
    // Section names (e_shstrndx at 0x3E, sh_name at 0): constant-space data lives in
    // `.nv.constant*` sections.
    let names_header = section(u16_at(0x3E)?)?;
    let (names, names_size) = (u64_at(names_header + 0x18)?, u64_at(names_header + 0x20)?);
    let names = image.get(names..names.checked_add(names_size)?)?;
    let constant_section = |index: usize| -> Option<bool> {
        let name = names.get(u32_at(section(index)?)?..)?;
        Some(name.starts_with(b".nv.constant"))
    };
    let mut data = HashMap::new();
    for index in 0..count {
        let header = section(index)?;
        const SHT_SYMTAB: usize = 2;
        if u32_at(header + 4)? != SHT_SYMTAB {
            continue;
        }
        let (symbols, size, link, symbol_size) = (u64_at(header + 0x18)?, u64_at(header + 0x20)?, u32_at(header + 0x28)?, u64_at(header + 0x38)?);
        let strings_header = section(link)?;
        let (strings, strings_size) = (u64_at(strings_header + 0x18)?, u64_at(strings_header + 0x20)?);
        let strings = image.get(strings..strings.checked_add(strings_size)?)?;
        if symbol_size < 24 {
            return None;
        }
        for symbol in (0..size / symbol_size).map(|n| symbols + n * symbol_size) {
            // Elf64_Sym: st_name (u32), st_info (u8: binding << 4 | type).
            // st_shndx (u16) at 6.
            let (name, info, index) = (u32_at(symbol)?, *image.get(symbol + 4)?, u16_at(symbol + 6)?);
            const STT_OBJECT: u8 = 1;
            const STB_GLOBAL: u8 = 1;
            const STB_WEAK: u8 = 2;
            if info & 0xf != STT_OBJECT {
                continue;
            }
            let name = strings.get(name..)?;
            let name = &name[..name.iter().position(|b| *b == 0)?];
            let visible = matches!(info >> 4, STB_GLOBAL | STB_WEAK);
            let constant_space = constant_section(index).unwrap_or(false);
            // A name defined twice (cannot happen in one image) stays visible (and constant)
            // only if both are.
            let entry = data.entry(String::from_utf8_lossy(name).into()).or_insert(Data { visible, constant_space });
            entry.visible &= visible;
            entry.constant_space &= constant_space;
        }
    }
    Some(data)
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

    /// G20R-5 (audit 2026-11-28h): `Module::global` handed out the compiler's own
    /// module-internal data (a `#[kernel]` crate's panic `Location`s, string literals, tables),
    /// past G14-1's name prefix. Only data the image declares visible is handed out; what it
    /// defines without linkage is refused, and a name it does not define is absent.
    #[test]
    fn g20r5_module_internal_ptx_data_is_not_host_accessible() {
        let ptx = ".version 8.0\n.target sm_80\n.address_size 64\n\
            // .visible .global .u32 IN_A_COMMENT;\n\
            /* .visible .global .u32 IN_A_BLOCK; */\n\
            .global .align 1 .b8 anon_$_47_$_0[20] = {100, 101};\n\
            .global .align 8 .u64 anon_$_7b_$_12[3] = {generic(anon_$_47_$_0), 19, 38654705872};\n\
            .const .align 4 .b8 internal_table[16] = {1, 0, 0, 0};\n\
            .visible .global .align 4 .u32 FILL = 1;\n\
            .visible .const .align 4 .b8 TABLE[16] = {1, 0, 0, 0};\n\
            .weak .global .align 8 .u64 weak_one;\n\
            .extern .global .align 8 .u64 defined_elsewhere;\n\
            .visible .global .align 8 .u64 __ferrocuda_panic_slot;\n\
            .visible .entry k(.param .u64 k_param_0) { .reg .b64 %rd<2>; ld.global.u64 %rd1, [FILL]; ret; }\n";
        let symbols = ImageSymbols::scan(ptx.as_bytes(), true);
        for visible in ["FILL", "TABLE", "weak_one", "__ferrocuda_panic_slot"] {
            assert!(matches!(symbols.host_accessible(visible), HostAccess::Visible { .. }), "{visible}");
        }
        for internal in ["anon_$_47_$_0", "anon_$_7b_$_12", "internal_table"] {
            assert!(matches!(symbols.host_accessible(internal), HostAccess::Refused(r) if r.contains("module-internal")), "{internal}");
        }
        for absent in ["IN_A_COMMENT", "IN_A_BLOCK", "defined_elsewhere", "k", "NOPE", "%rd1"] {
            assert_eq!(symbols.host_accessible(absent), HostAccess::Absent, "{absent}");
        }
    }

    /// Session 21 (G20R-5's residual): rustc declares an immutable `#[unsafe(no_mangle)]
    /// static` exactly as a `static mut` (`.visible .global`), though the kernels' code assumed
    /// its value (folded it, or dropped bounds checks from a table's known entries), so a
    /// visible `.global` is read-only to the host unless the loader names it
    /// (`JitOptions::host_writable_globals`, under the load's contract). Session 23: `.const`
    /// data too (nvcc folds a `const`-qualified `extern __constant__` and declares it as a
    /// mutable one, session 22), where it used to be writable without a name.
    #[test]
    fn g21_immutable_statics_are_read_only_unless_the_loader_names_them() {
        // What rustc 1.95 writes for `static IMM: u32 = 5;` and `static mut MUTV: u32 = 6;`
        // (both `#[unsafe(no_mangle)] pub`), sm_90: one declaration form for both.
        let ptx = ".version 8.7\n.target sm_90\n.address_size 64\n\
            .visible .global .align 4 .b8 IMM[4] = {5};\n\
            .visible .global .align 4 .b8 MUTV[4] = {6};\n\
            .visible .const .align 64 .b8 MAP[128];\n\
            .visible .entry k(.param .u64 k_param_0) { ret; }\n";
        let mut symbols = ImageSymbols::scan(ptx.as_bytes(), true);
        assert_eq!(symbols.host_accessible("IMM"), HostAccess::Visible { writable: false, constant: false });
        assert_eq!(symbols.host_accessible("MUTV"), HostAccess::Visible { writable: false, constant: false }, "the image cannot tell it from IMM");
        symbols.host_writable = vec!["MUTV".into()];
        assert_eq!(symbols.host_accessible("MUTV"), HostAccess::Visible { writable: true, constant: false });
        assert_eq!(symbols.host_accessible("IMM"), HostAccess::Visible { writable: false, constant: false });
        // A name the loader lists is still refused if the image keeps it module-internal.
        // (`.const` data: `s23_const_data_is_writable_only_when_the_loader_names_it`.)
        let internal = ".global .align 4 .b8 anon_$_1_$_0[4] = {5};\n";
        let mut symbols = ImageSymbols::scan(internal.as_bytes(), true);
        symbols.host_writable = vec!["anon_$_1_$_0".into()];
        assert!(matches!(symbols.host_accessible("anon_$_1_$_0"), HostAccess::Refused(_)));
    }

    /// Session 23 (the stricter option of session 22's `.const` residual): nvcc 13.0 folds a
    /// `const`-qualified `extern __constant__ const int t[4]` read at a constant index into an
    /// immediate and declares it `.visible .const .align 4 .b8 t[16]`, as a mutable
    /// `__constant__` (session 22, measured), so a host write reaches only the uses that still
    /// load it. `.const` data was writable without a name, leaning on the load's contract; now
    /// it is read-only unless the loader names it (`JitOptions::host_writable_globals`), like a
    /// `.global`, and the refusal says it is `.const` data (`Error::GlobalReadOnly`).
    #[test]
    fn s23_const_data_is_writable_only_when_the_loader_names_it() {
        let ptx = ".version 8.7\n.target sm_90\n.address_size 64\n\
            .visible .const .align 4 .b8 t[16] = {1, 0, 0, 0, 2};\n\
            .visible .const .align 64 .b8 MAP[128];\n\
            .visible .entry k(.param .u64 k_param_0) { ret; }\n";
        let mut symbols = ImageSymbols::scan(ptx.as_bytes(), true);
        assert_eq!(symbols.host_accessible("t"), HostAccess::Visible { writable: false, constant: true }, "a folded `const` table looks like this");
        assert_eq!(symbols.host_accessible("MAP"), HostAccess::Visible { writable: false, constant: true }, "`.const` data needs a name now");
        symbols.host_writable = vec!["MAP".into()];
        assert_eq!(symbols.host_accessible("MAP"), HostAccess::Visible { writable: true, constant: true });
        assert_eq!(symbols.host_accessible("t"), HostAccess::Visible { writable: false, constant: true });
        let message = crate::Error::GlobalReadOnly { name: "t".into(), module: "m".into(), constant: true }.to_string();
        assert!(message.contains("`.const`") && message.contains("host_writable_globals([\"t\"])"), "{message}");
        let message = crate::Error::GlobalReadOnly { name: "IMM".into(), module: "m".into(), constant: false }.to_string();
        assert!(message.contains("static mut") && message.contains("host_writable_globals([\"IMM\"])"), "{message}");
    }

    /// A 64-bit little-endian ELF with a `.symtab` of the given `(name, st_info)` symbols and
    /// its `.strtab`, laid out as a cubin is (section headers at the end).
    fn elf_with_symbols(symbols: &[(&str, u8)]) -> Vec<u8> {
        let mut strtab = vec![0u8];
        let mut symtab = vec![0u8; 24]; // the null symbol
        for (name, info) in symbols {
            let at = strtab.len() as u32;
            strtab.extend_from_slice(name.as_bytes());
            strtab.push(0);
            let mut symbol = [0u8; 24];
            symbol[..4].copy_from_slice(&at.to_le_bytes());
            symbol[4] = *info;
            symtab.extend_from_slice(&symbol);
        }
        let mut image = vec![0u8; 0x40];
        image[..6].copy_from_slice(b"\x7fELF\x02\x01");
        let strtab_at = image.len();
        image.extend_from_slice(&strtab);
        let symtab_at = image.len();
        image.extend_from_slice(&symtab);
        let headers_at = image.len();
        let header = |kind: u32, offset: usize, size: usize, link: u32, entry: u64| {
            let mut h = [0u8; 64];
            h[4..8].copy_from_slice(&kind.to_le_bytes());
            h[0x18..0x20].copy_from_slice(&(offset as u64).to_le_bytes());
            h[0x20..0x28].copy_from_slice(&(size as u64).to_le_bytes());
            h[0x28..0x2C].copy_from_slice(&link.to_le_bytes());
            h[0x38..0x40].copy_from_slice(&entry.to_le_bytes());
            h
        };
        image.extend_from_slice(&header(0, 0, 0, 0, 0));
        image.extend_from_slice(&header(3, strtab_at, strtab.len(), 0, 0));
        image.extend_from_slice(&header(2, symtab_at, symtab.len(), 1, 24));
        image[0x28..0x30].copy_from_slice(&(headers_at as u64).to_le_bytes());
        image[0x3A..0x3C].copy_from_slice(&64u16.to_le_bytes());
        image[0x3C..0x3E].copy_from_slice(&3u16.to_le_bytes());
        image
    }

    /// G20R-5 for a cubin: `STB_LOCAL` data (the compiler's) is refused, global and weak data
    /// is handed out, functions are not data; a malformed symbol table never panics; a fatbin
    /// hands out nothing (its declarations cannot be read).
    #[test]
    fn g20r5_module_internal_cubin_data_is_not_host_accessible() {
        const LOCAL_OBJECT: u8 = 1;
        const GLOBAL_OBJECT: u8 = 0x11;
        const WEAK_OBJECT: u8 = 0x21;
        const GLOBAL_FUNC: u8 = 0x12;
        let image = elf_with_symbols(&[("anon_$_7b_$_12", LOCAL_OBJECT), ("FILL", GLOBAL_OBJECT), ("weak_one", WEAK_OBJECT), ("square_checked", GLOBAL_FUNC)]);
        assert_eq!(crate::module::image::check_binary_image(&image), Ok(()));
        let symbols = ImageSymbols::scan(&image, false);
        assert_eq!(symbols.host_accessible("FILL"), HostAccess::Visible { writable: false, constant: false });
        assert_eq!(symbols.host_accessible("weak_one"), HostAccess::Visible { writable: false, constant: false });
        assert!(matches!(symbols.host_accessible("anon_$_7b_$_12"), HostAccess::Refused(_)));
        assert_eq!(symbols.host_accessible("square_checked"), HostAccess::Absent);
        assert_eq!(symbols.host_accessible("NOPE"), HostAccess::Absent);
        for cut in (0..image.len()).step_by(7) {
            let _ = ImageSymbols::scan(&image[..cut], false).host_accessible("FILL");
        }
        let fatbin = [0x50u8, 0xed, 0x55, 0xba, 1, 0, 0x10, 0];
        assert!(matches!(ImageSymbols::scan(&fatbin, false).host_accessible("FILL"), HostAccess::Refused(r) if r.contains("fatbin")));
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
        assert_eq!(symbols.param_count("in_a_comment_is_harmless"), None, "an `.entry` in a comment declares nothing");
    }

    /// A `/*` or `//` in a string literal (a `.file` path) starts no comment: the declarations
    /// after it are still read (a comment taken from there would hide every one of them).
    #[test]
    fn ptx_strings_start_no_comment() {
        let ptx = ".version 8.0\n.target sm_80\n.address_size 64\n\
            .file 1 \"/src/*/lib.rs\"\n\
            .file 2 \"/rustc//library/core.rs\"\n\
            .visible .global .align 4 .u32 FILL = 1;\n\
            .visible .entry k(.param .u64 k_param_0) { ret; }\n";
        let symbols = ImageSymbols::scan(ptx.as_bytes(), true);
        assert_eq!(symbols.host_accessible("FILL"), HostAccess::Visible { writable: false, constant: false });
        assert_eq!(symbols.param_count("k"), Some(1));
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
