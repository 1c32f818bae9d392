//! Removes the kernel-name tag store from kernels that can never read it back, by
//! post-processing the PTX.
//!
//! Every `#[kernel]` entry starts with `ferrocuda_device::panic::__enter_kernel`, which stores
//! a 16-byte tag (the kernel's name and a check word) into the module's shared variable
//! `__ferrocuda_kernel_tag`: one `st.shared.v2.u64` (an `STS.128`) per thread. The only reader
//! of the tag is the device library's panic report (`kernel_name()` in device/src/panic.rs, an
//! `ld.shared.v2.u64` of the same variable), which names the kernel in the record the host
//! reads. The tag is per block and lives only for the launch, so a store that no code of the
//! launch can read is dead, and [`remove_dead_kernel_tags`] deletes it:
//!
//! - an entry keeps its store when its body, or any `.func` it calls directly or transitively,
//!   mentions the tag other than by the exact store (the report's load is such a mention);
//! - an indirect call (through a register, with a `.callprototype`) may reach anything, so it
//!   keeps the store, and so does a call to a function the module only declares (other than
//!   CUDA's system calls, which cannot see this module's shared memory);
//! - when nothing in the module mentions the tag any more, its `.shared` declaration goes too
//!   (ptxas counts it as 16 bytes of static shared memory of each kernel that uses it).
//!
//! Module-local `.shared` variables cannot be named by another module, so this module's call
//! graph is the whole story. The pass only deletes text it recognises (the exact store that
//! `__enter_kernel` emits, in an entry; a module-local declaration): if either changes shape,
//! the store counts as a reader and nothing is removed. The registers that fed the store stay
//! behind unused, which PTX allows (ptxas drops the dead moves).

use crate::ptx_text::{function_header, is_identifier_char};

/// The shared variable holding the running kernel's tag (device/src/panic.rs).
pub const TAG_SYMBOL: &str = "__ferrocuda_kernel_tag";

/// CUDA's PTX system calls that may be declared `.extern` and called: they run outside this
/// module and cannot name its shared variables.
const SYSTEM_CALLS: [&str; 4] = ["vprintf", "malloc", "free", "__assertfail"];

/// One function definition (`.entry` or `.func` with a body) of the module.
#[derive(Debug, Default)]
struct Function {
    name: String,
    entry: bool,
    /// Names of directly called functions.
    callees: Vec<String>,
    /// Calls something the pass cannot name (a register target, or a target it cannot parse).
    indirect_call: bool,
    /// Mentions the tag other than by a recognised store in an entry.
    reads_tag: bool,
    /// Line indices of the recognised tag stores (entries only).
    stores: Vec<usize>,
}

/// Rewrites `ptx`: each `.entry` that can never read the kernel tag loses its tag store, and
/// the tag's declaration goes when nothing mentions it any more. See the module docs for why
/// that is sound. PTX with nothing to remove is returned unchanged.
pub fn remove_dead_kernel_tags(ptx: &str) -> String {
    if !ptx.contains(TAG_SYMBOL) {
        return ptx.to_string();
    }
    let lines: Vec<&str> = ptx.lines().collect();
    let Some(module) = parse(&lines) else {
        return ptx.to_string();
    };

    let mut dropped = vec![false; lines.len()];
    for function in module.functions.iter().filter(|f| f.entry && !f.stores.is_empty()) {
        if may_read_tag(&module.functions, function) {
            continue;
        }
        for &store in &function.stores {
            dropped[store] = true;
            // The `// begin inline asm` / `// end inline asm` pair around it, when it is there.
            if store > 0 && store + 1 < lines.len() && lines[store - 1].trim() == "// begin inline asm" && lines[store + 1].trim() == "// end inline asm" {
                dropped[store - 1] = true;
                dropped[store + 1] = true;
            }
        }
    }
    if !dropped.contains(&true) {
        return ptx.to_string();
    }
    // The declaration goes only when no other line names the tag any more.
    let still_named = lines.iter().enumerate().any(|(i, line)| !dropped[i] && i != module.declaration && line.contains(TAG_SYMBOL));
    if !still_named {
        dropped[module.declaration] = true;
    }

    let mut out = String::with_capacity(ptx.len());
    for (line, _) in lines.iter().zip(&dropped).filter(|(_, dropped)| !**dropped) {
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The parts of a module the pass needs.
#[derive(Debug)]
struct Module {
    functions: Vec<Function>,
    /// The line of the tag's module-local `.shared` declaration.
    declaration: usize,
}

/// Splits `lines` into function definitions by brace depth (comments stripped; PTX has no
/// strings). `None` when the tag is not declared exactly once as a module-local `.shared`
/// variable, or is named at module scope in any other way: then the pass changes nothing.
fn parse(lines: &[&str]) -> Option<Module> {
    let mut functions = Vec::new();
    let mut declaration = None;
    let mut depth = 0usize;
    // A function header seen at module scope, waiting for its body's `{`.
    let mut header: Option<Function> = None;
    // The function whose body is open (its braces start at depth 1).
    let mut current: Option<Function> = None;
    for (index, line) in lines.iter().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        let trimmed = code.trim();
        if depth == 0 {
            if code.contains(TAG_SYMBOL) {
                if !trimmed.starts_with(".shared ") || declaration.is_some() {
                    return None;
                }
                declaration = Some(index);
            }
            if let Some((name, entry)) = function_header(trimmed) {
                header = Some(Function { name, entry, ..Function::default() });
            }
            if header.is_some() && !trimmed.contains('{') && trimmed.ends_with(';') {
                // A declaration (prototype) without a body.
                header = None;
            }
        } else if let Some(function) = current.as_mut() {
            if code.contains(TAG_SYMBOL) {
                if function.entry && is_tag_store(trimmed) {
                    function.stores.push(index);
                } else {
                    function.reads_tag = true;
                }
            }
            match call_target(trimmed) {
                Some(Some(target)) => function.callees.push(target),
                Some(None) => function.indirect_call = true,
                None => {}
            }
        }
        // A mention inside another module-scope block (a debug section) is no run-time read;
        // it keeps the declaration (`still_named` above).
        for c in code.chars() {
            match c {
                '{' => {
                    if depth == 0 {
                        current = header.take();
                    }
                    depth += 1;
                }
                '}' => {
                    depth = depth.checked_sub(1)?;
                    if depth == 0 {
                        functions.extend(current.take());
                    }
                }
                _ => {}
            }
        }
    }
    Some(Module { functions, declaration: declaration? })
}

/// For a call instruction, `Some(Some(callee))` when it names its target and `Some(None)` when
/// it does not (a call through a register); `None` for any other line.
fn call_target(line: &str) -> Option<Option<String>> {
    let mut words = line.trim_start();
    // A guard predicate: `@%p1 call ...` or `@!%p1 call ...`.
    if words.starts_with('@') {
        words = words.split_once(char::is_whitespace)?.1.trim_start();
    }
    let (opcode, operands) = words.split_once(char::is_whitespace).unwrap_or((words, ""));
    if opcode != "call" && !opcode.starts_with("call.") {
        return None;
    }
    let mut operands = operands.trim_start();
    // Return parameters come first: `call.uni (retval0), vprintf, (param0, param1);`.
    if operands.starts_with('(') {
        let Some(close) = operands.find(')') else { return Some(None) };
        operands = operands[close + 1..].trim_start().trim_start_matches(',').trim_start();
    }
    let target: String = operands.chars().take_while(|&c| is_identifier_char(c) || c == '%').collect();
    Some((!target.is_empty() && !target.starts_with('%')).then_some(target))
}

/// Whether `line` is exactly the store `__enter_kernel` emits:
/// `{ .reg .u32 t; mov.u32 t, __ferrocuda_kernel_tag; st.shared.v2.u64 [t], {%rdA, %rdB}; }`.
fn is_tag_store(line: &str) -> bool {
    let Some(operands) =
        line.strip_prefix("{ .reg .u32 t; mov.u32 t, __ferrocuda_kernel_tag; st.shared.v2.u64 [t], {").and_then(|rest| rest.strip_suffix("}; }"))
    else {
        return false;
    };
    let registers: Vec<&str> = operands.split(',').map(str::trim).collect();
    registers.len() == 2 && registers.iter().all(|r| r.len() > 1 && r.starts_with('%') && r[1..].chars().all(is_identifier_char))
}

/// Whether code reachable from `entry` (itself and the `.func`s it calls, transitively) may
/// read the tag.
fn may_read_tag(functions: &[Function], entry: &Function) -> bool {
    let mut seen = vec![entry.name.as_str()];
    let mut pending = vec![entry];
    while let Some(function) = pending.pop() {
        if function.reads_tag || function.indirect_call {
            return true;
        }
        for callee in &function.callees {
            if seen.contains(&callee.as_str()) {
                continue;
            }
            seen.push(callee);
            match functions.iter().find(|f| &f.name == callee) {
                Some(defined) => pending.push(defined),
                // Declared only: CUDA's system calls are harmless, anything else is unknown.
                None if SYSTEM_CALLS.contains(&callee.as_str()) => {}
                None => return true,
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    const DECLARATION: &str = ".shared .align 16 .u64 __ferrocuda_kernel_tag[2];";
    const STORE: &str = "{ .reg .u32 t; mov.u32 t, __ferrocuda_kernel_tag; st.shared.v2.u64 [t], {%rd1, %rd2}; }";
    const LOAD: &str = "{ .reg .u32 t; mov.u32 t, __ferrocuda_kernel_tag; ld.shared.v2.u64 {%rd1, %rd2}, [t]; }";

    /// An entry whose prologue stores the tag, then runs `body`.
    fn entry(name: &str, body: &str) -> String {
        format!(
            ".visible .entry {name}(\n\t.param .u64 {name}_param_0\n)\n{{\n\t.reg .b64 \t%rd<4>;\n\n\tmov.b64 \t%rd3, name_{name};\n\tcvta.global.u64 \t%rd1, %rd3;\n\txor.b64 \t%rd2, %rd1, 7378429400337053028;\n\t// begin inline asm\n\t{STORE}\n\t// end inline asm\n{body}\tret;\n\n}}\n"
        )
    }

    /// A module: the tag's declaration, a prototype of the panic report, then `items`.
    fn module(items: &[String]) -> String {
        let mut ptx = format!(
            ".version 8.0\n.target sm_80\n.address_size 64\n\n.extern .func  (.param .b32 func_retval0) vprintf\n(\n\t.param .b64 vprintf_param_0,\n\t.param .b64 vprintf_param_1\n)\n;\n.func report\n(\n\t.param .b64 report_param_0\n)\n;\n{DECLARATION}\n\n"
        );
        for item in items {
            ptx += item;
        }
        ptx
    }

    /// The panic report: reads the tag, prints, traps.
    fn report() -> String {
        format!(
            ".func report(\n\t.param .b64 report_param_0\n)\n{{\n\t.reg .b32 \t%r<2>;\n\t.reg .b64 \t%rd<3>;\n\t// begin inline asm\n\t{LOAD}\n\t// end inline asm\n\t{{ // callseq 0, 0\n\t.param .b64 param0;\n\t.param .b64 param1;\n\t.param .b32 retval0;\n\tst.param.b64 \t[param0], %rd1;\n\tst.param.b64 \t[param1], %rd2;\n\tcall.uni (retval0), vprintf, (param0, param1);\n\t}} // callseq 0\n\ttrap;\n\n}}\n"
        )
    }

    /// A `.func` that only forwards to `report` (a `core::panicking` function, say).
    fn forwarder(name: &str) -> String {
        format!(
            ".func {name}(\n\t.param .b64 {name}_param_0\n)\n{{\n\t.reg .b64 \t%rd<2>;\n\t{{ // callseq 1, 0\n\t.param .b64 param0;\n\tst.param.b64 \t[param0], %rd1;\n\tcall.uni report, (param0);\n\t}} // callseq 1\n\ttrap;\n\n}}\n"
        )
    }

    const PANIC_CALL: &str = "\t@%p1 bra \t$L__BB0_2;\n\t{ // callseq 2, 0\n\t.param .b64 param0;\n\tst.param.b64 \t[param0], %rd1;\n\tcall.uni bounds_check, (param0);\n\t} // callseq 2\n$L__BB0_2:\n";

    fn stores_in(ptx: &str, kernel: &str) -> usize {
        let start = ptx.find(&format!(".entry {kernel}(")).unwrap();
        let end = start + ptx[start..].find("\n}").unwrap();
        ptx[start..end].matches("st.shared.v2.u64").count()
    }

    #[test]
    fn an_entry_that_cannot_panic_loses_its_tag_store_and_the_declaration_goes() {
        let ptx = module(&[report(), entry("saxpy", "\tfma.rn.f32 \t%r1, %r2, %r3, %r4;\n")]);
        let out = remove_dead_kernel_tags(&ptx);
        assert_eq!(stores_in(&out, "saxpy"), 0, "{out}");
        assert!(!out.contains("inline asm\n\t// end"), "the empty asm markers go too:\n{out}");
        // The report still reads the tag, so the declaration stays.
        assert!(out.contains(DECLARATION), "{out}");
        // Only the three lines of the store block went.
        assert_eq!(out.lines().count(), ptx.lines().count() - 3);

        // Without the report nothing names the tag any more.
        let ptx = module(&[entry("saxpy", ""), entry("empty", "")]);
        let out = remove_dead_kernel_tags(&ptx);
        assert!(!out.contains(TAG_SYMBOL), "{out}");
        assert_eq!(out.lines().count(), ptx.lines().count() - 7);
    }

    #[test]
    fn an_entry_calling_a_func_that_reaches_the_reader_keeps_its_store() {
        let ptx = module(&[report(), forwarder("bounds_check"), entry("checked", PANIC_CALL), entry("unchecked", "")]);
        let out = remove_dead_kernel_tags(&ptx);
        assert_eq!(stores_in(&out, "checked"), 1, "{out}");
        assert_eq!(stores_in(&out, "unchecked"), 0, "{out}");
        assert!(out.contains(DECLARATION));
    }

    #[test]
    fn an_entry_with_the_read_inlined_keeps_its_store() {
        let inlined = format!("\t@%p1 bra \t$L__BB0_2;\n\t// begin inline asm\n\t{LOAD}\n\t// end inline asm\n\ttrap;\n$L__BB0_2:\n");
        let ptx = module(&[entry("inlined", &inlined)]);
        assert_eq!(remove_dead_kernel_tags(&ptx), ptx);
    }

    #[test]
    fn an_indirect_call_or_an_unknown_external_function_keeps_the_store() {
        let indirect = "\tprototype_0 : .callprototype (.param .b32 _) _ (.param .b64 _);\n\tcall (retval0), %rd3, (param0), prototype_0;\n";
        let ptx = module(&[entry("indirect", indirect)]);
        assert_eq!(remove_dead_kernel_tags(&ptx), ptx);
        // ... also when the indirect call is one call away.
        let fmt = ".func  (.param .b32 func_retval0) fmt(\n\t.param .b64 fmt_param_0\n)\n{\n\tprototype_1 : .callprototype (.param .b32 _) _ (.param .b64 _);\n\tcall (retval0), %rd3, (param0), prototype_1;\n\tret;\n\n}\n";
        let ptx = module(&[fmt.to_string(), entry("formats", "\tcall.uni (retval0), fmt, (param0);\n")]);
        assert_eq!(remove_dead_kernel_tags(&ptx), ptx);
        // A function the module only declares might do anything; vprintf is a system call.
        let ptx = module(&[entry("external", "\tcall.uni elsewhere, (param0);\n")]);
        assert_eq!(remove_dead_kernel_tags(&ptx), ptx);
        let ptx = module(&[entry("prints", "\tcall.uni (retval0), vprintf, (param0, param1);\n")]);
        assert_eq!(stores_in(&remove_dead_kernel_tags(&ptx), "prints"), 0);
    }

    #[test]
    fn the_declaration_goes_only_when_nothing_names_the_tag() {
        // One kernel can panic: its store names the tag, so the declaration stays.
        let ptx = module(&[report(), forwarder("bounds_check"), entry("checked", PANIC_CALL)]);
        assert_eq!(remove_dead_kernel_tags(&ptx), ptx, "nothing to remove");
        let ptx = module(&[forwarder("bounds_check"), entry("checked", PANIC_CALL), entry("plain", "")]);
        // `bounds_check` calls `report`, which is declared but not defined here: unknown.
        let out = remove_dead_kernel_tags(&ptx);
        assert_eq!((stores_in(&out, "checked"), stores_in(&out, "plain")), (1, 0), "{out}");
        assert!(out.contains(DECLARATION));
    }

    #[test]
    fn unexpected_text_leaves_the_ptx_unchanged() {
        let expected = module(&[entry("saxpy", "")]);
        // The store in another shape (a new register class, another instruction order).
        for changed in [
            "{ .reg .u32 t; mov.u32 t, __ferrocuda_kernel_tag; st.shared.v2.b64 [t], {%rd1, %rd2}; }",
            "{ .reg .u64 t; mov.u64 t, __ferrocuda_kernel_tag; st.shared.v2.u64 [t], {%rd1, %rd2}; }",
            "{ .reg .u32 t; mov.u32 t, __ferrocuda_kernel_tag; st.shared.v2.u64 [t], {%rd1, %rd2, %rd3}; }",
        ] {
            let ptx = expected.replace(STORE, changed);
            assert_eq!(remove_dead_kernel_tags(&ptx), ptx, "{changed}");
        }
        // A tag that other modules could name, or none declared here.
        for declaration in [".visible .shared .align 16 .u64 __ferrocuda_kernel_tag[2];", ".extern .shared .align 16 .u64 __ferrocuda_kernel_tag[2];", ""] {
            let ptx = expected.replace(DECLARATION, declaration);
            assert_eq!(remove_dead_kernel_tags(&ptx), ptx, "{declaration:?}");
        }
        // No tag at all.
        let plain = ".version 8.0\n.visible .entry k()\n{\n\tret;\n}\n";
        assert_eq!(remove_dead_kernel_tags(plain), plain);
    }

    #[test]
    fn calls_are_parsed() {
        assert_eq!(call_target("call.uni _RNvNtCs_panic_fmt, (param0, param1, param2);"), Some(Some("_RNvNtCs_panic_fmt".into())));
        assert_eq!(call_target("call.uni (retval0), vprintf, (param0, param1);"), Some(Some("vprintf".into())));
        assert_eq!(call_target("@%p1 call.uni f, ();"), Some(Some("f".into())));
        assert_eq!(call_target("call (retval0), %rd32, (param0, param1, param2), prototype_134;"), Some(None));
        assert_eq!(call_target("callx %r1;"), None);
        assert_eq!(call_target("// callseq 0"), None);
    }
}
