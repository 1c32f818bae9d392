//! Fills the module's kernel-names table, which the device's panic report reads the running
//! kernel's name from (audit 2026-11-29b, G22R-1).
//!
//! Every `#[kernel]` entry stores its symbol's [`kernel_name_id`] in the shared-memory kernel
//! tag; the panic report looks the id up in `__ferrocuda_kernel_names`, a module-local
//! `.global` array that the device library declares empty (a record count of 0). This pass
//! replaces that exact declaration with one holding a record per `.entry` of the module: the
//! id and the name. The tag used to hold the name's address, which the report copied bytes
//! from: a shared-memory store out of bounds (G22R-1's, from safe code) could point it at any
//! device memory. Now the report reads nothing but this table, below the count written with it.
//!
//! When the declaration is not there in exactly that shape (a module built without ferrocuda's
//! device library, or another version of it), nothing changes: the report then names no
//! kernel, and the host reports the panic without a name.

use ferrocuda_types::{KERNEL_NAME_BYTES, KERNEL_NAMES_SYMBOL, kernel_name_id};

use crate::ptx_text::function_header;

/// The declaration device/src/panic.rs emits (`global_asm!`), which this pass replaces.
fn empty_declaration() -> String {
    format!(".global .align 8 .b8 {KERNEL_NAMES_SYMBOL}[8];")
}

/// The table's bytes for `symbols` (little-endian, as the GPU reads them): the record count,
/// then per symbol its id and its name, cut to `KERNEL_NAME_BYTES - 1` bytes, NUL-padded.
pub fn kernel_names_table<'a>(symbols: impl IntoIterator<Item = &'a str>) -> Vec<u8> {
    let symbols: Vec<&str> = symbols.into_iter().collect();
    let mut table = (symbols.len() as u64).to_le_bytes().to_vec();
    for symbol in symbols {
        table.extend_from_slice(&kernel_name_id(symbol).to_le_bytes());
        let name = &symbol.as_bytes()[..symbol.len().min(KERNEL_NAME_BYTES - 1)];
        table.extend_from_slice(name);
        table.resize(table.len() + KERNEL_NAME_BYTES - name.len(), 0);
    }
    table
}

/// Rewrites `ptx` with the names table filled in for its `.entry` functions. PTX without the
/// device library's empty declaration is returned unchanged.
pub fn fill_kernel_names(ptx: &str) -> String {
    let declaration = empty_declaration();
    let lines: Vec<&str> = ptx.lines().collect();
    let Some(at) = lines.iter().position(|line| line.trim() == declaration) else {
        return ptx.to_string();
    };
    let entries: Vec<String> = lines
        .iter()
        .filter_map(|line| function_header(line.split("//").next().unwrap_or("").trim()))
        .filter(|(_, entry)| *entry)
        .map(|(name, _)| name)
        .collect();
    let table = kernel_names_table(entries.iter().map(String::as_str));
    let bytes: Vec<String> = table.iter().map(|b| b.to_string()).collect();
    let filled = format!(".global .align 8 .b8 {KERNEL_NAMES_SYMBOL}[{}] = {{{}}};", table.len(), bytes.join(", "));
    let mut out = String::with_capacity(ptx.len() + filled.len());
    for (index, line) in lines.iter().enumerate() {
        out.push_str(if index == at { &filled } else { line });
        out.push('\n');
    }
    if !ptx.ends_with('\n') {
        out.pop();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODULE: &str = ".version 8.0\n.target sm_80\n.address_size 64\n\n.global .align 8 .b8 __ferrocuda_kernel_names[8];\n\n// .entry commented_out(\n.visible .entry saxpy(\n.param .u64 p\n)\n{\nret;\n}\n.entry second()\n{\nret;\n}\n.func helper()\n{\nret;\n}\n";

    #[test]
    fn g22r_1_the_table_lists_every_entry_by_id_and_name() {
        let out = fill_kernel_names(MODULE);
        let line = out.lines().find(|l| l.contains(KERNEL_NAMES_SYMBOL)).unwrap();
        let table = kernel_names_table(["saxpy", "second"]);
        assert_eq!(table.len(), 8 + 2 * (8 + KERNEL_NAME_BYTES));
        assert!(line.starts_with(&format!(".global .align 8 .b8 __ferrocuda_kernel_names[{}] = {{2, 0, 0, 0, 0, 0, 0, 0, ", table.len())), "{line}");
        assert_eq!(table[8..16], kernel_name_id("saxpy").to_le_bytes());
        assert_eq!(&table[16..22], b"saxpy\0");
        assert_eq!(table[80..88], kernel_name_id("second").to_le_bytes());
        assert_eq!(&table[88..95], b"second\0");
        // Everything else is unchanged.
        assert_eq!(out.replace(line, &empty_declaration()), MODULE);
    }

    #[test]
    fn g22r_1_a_long_name_is_cut_and_stays_nul_terminated() {
        let long = "k".repeat(100);
        let table = kernel_names_table([long.as_str()]);
        assert_eq!(table.len(), 8 + 8 + KERNEL_NAME_BYTES);
        assert_eq!(table[16 + KERNEL_NAME_BYTES - 1], 0);
        assert!(table[16..16 + KERNEL_NAME_BYTES - 1].iter().all(|&b| b == b'k'));
    }

    #[test]
    fn g22r_1_a_module_without_the_declaration_is_unchanged() {
        let ptx = MODULE.replace(".global .align 8 .b8 __ferrocuda_kernel_names[8];\n", "");
        assert_eq!(fill_kernel_names(&ptx), ptx);
    }
}
