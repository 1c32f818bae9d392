//! The call graph of a PTX module, to find kernels whose stack depth no one can bound: those
//! that reach a recursive function (audit P10).
//!
//! A GPU thread's stack is a fixed size per context (`CU_LIMIT_STACK_SIZE`, 1 KiB by default).
//! For a kernel without recursion, ptxas computes the deepest call chain's stack, and the
//! driver reserves it at launch. A recursive kernel's depth depends on its data: ptxas says
//! "Stack size for entry function '..' cannot be statically determined", the driver reserves
//! only the context's limit, and a deeper recursion runs off the end of the stack: on an H100,
//! `CUDA_ERROR_ILLEGAL_ADDRESS`, with nothing that names the stack. No launch check can catch
//! it (the depth is known only while the kernel runs), so the builder refuses such kernels
//! unless the build script vouches for them ([`crate::KernelBuilder::allow_recursion`]).
//!
//! The graph follows direct calls (`call.uni name, (..)`, what rustc emits for Rust calls).
//! Indirect calls (through a `dyn` method or a function pointer: `call %rd, (..), prototype`)
//! are not followed; ptxas still reports a kernel whose stack they make unbounded, and the
//! builder forwards that warning.

use std::collections::{BTreeMap, BTreeSet};

/// A kernel that reaches a recursive function: the entry and the call chain from it to the
/// first function that calls back into the chain (the cycle closes at the chain's last
/// element calling the element named `cycle_start`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recursion {
    /// The kernel (PTX entry) that reaches the cycle.
    pub kernel: String,
    /// The call chain from the kernel to the last function of the cycle.
    pub chain: Vec<String>,
    /// The function of the chain that the last one calls again.
    pub cycle_start: String,
}

/// The module's functions (`.entry` and `.func` with a body): each one's direct callees, and
/// which are entries.
#[derive(Debug, Default)]
struct Graph {
    callees: BTreeMap<String, BTreeSet<String>>,
    entries: Vec<String>,
}

/// The kernels of `ptx` that reach a recursive function (directly or through other
/// functions), each with one call chain that shows the cycle.
pub fn recursive_kernels(ptx: &str) -> Vec<Recursion> {
    let graph = parse(ptx);
    let mut found = Vec::new();
    for entry in &graph.entries {
        let mut chain = vec![entry.clone()];
        let mut done = BTreeSet::new();
        if let Some(cycle_start) = find_cycle(&graph, &mut chain, &mut done) {
            found.push(Recursion { kernel: entry.clone(), chain, cycle_start });
        }
    }
    found
}

/// Depth-first from the last function of `chain`: the function a call returns to along the
/// chain (a cycle), with `chain` extended to the caller that closes it.
fn find_cycle(graph: &Graph, chain: &mut Vec<String>, done: &mut BTreeSet<String>) -> Option<String> {
    let current = chain.last().cloned().unwrap_or_default();
    for callee in graph.callees.get(&current).into_iter().flatten() {
        if chain.contains(callee) {
            return Some(callee.clone());
        }
        if done.contains(callee) || !graph.callees.contains_key(callee) {
            continue;
        }
        chain.push(callee.clone());
        if let Some(start) = find_cycle(graph, chain, done) {
            return Some(start);
        }
        chain.pop();
        done.insert(callee.clone());
    }
    None
}

/// The text with `//` and `/* */` comments blanked out.
fn without_comments(ptx: &str) -> String {
    let mut out = String::with_capacity(ptx.len());
    let mut rest = ptx;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("//") {
            let end = after.find('\n').unwrap_or(after.len());
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix("/*") {
            let end = after.find("*/").map_or(after.len(), |e| e + 2);
            rest = &after[end..];
            out.push(' ');
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '.')
}

/// The name after a `.func`/`.entry` keyword: an optional return-parameter list in
/// parentheses, then the identifier. Returns the name and the rest of the text after it.
fn header_name(after_keyword: &str) -> Option<(String, &str)> {
    let mut rest = after_keyword.trim_start();
    if rest.starts_with('(') {
        let close = rest.find(')')?;
        rest = rest[close + 1..].trim_start();
    }
    let end = rest.find(|c: char| !is_name_char(c)).unwrap_or(rest.len());
    if end == 0 {
        return None;
    }
    Some((rest[..end].to_string(), &rest[end..]))
}

fn parse(ptx: &str) -> Graph {
    let text = without_comments(ptx);
    let mut graph = Graph::default();
    let mut rest = text.as_str();
    loop {
        // The next `.func` or `.entry` directive at top level.
        let next = [".func", ".entry"].iter().filter_map(|k| find_keyword(rest, k).map(|at| (at, *k))).min();
        let Some((at, keyword)) = next else { break };
        let Some((name, after)) = header_name(&rest[at + keyword.len()..]) else {
            rest = &rest[at + keyword.len()..];
            continue;
        };
        // A definition has a body (`{`) before the next `;`; a declaration does not.
        let brace = after.find('{');
        let semicolon = after.find(';');
        let Some(open) = brace.filter(|&b| semicolon.is_none_or(|s| b < s)) else {
            rest = after;
            continue;
        };
        let body_start = &after[open + 1..];
        let mut depth = 1usize;
        let mut end = body_start.len();
        for (i, c) in body_start.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i;
                        break;
                    }
                }
                _ => {}
            }
        }
        let body = &body_start[..end];
        let callees = graph.callees.entry(name.clone()).or_default();
        for statement in body.split(';') {
            if let Some(target) = call_target(statement) {
                callees.insert(target);
            }
        }
        if keyword == ".entry" {
            graph.entries.push(name);
        }
        rest = &body_start[(end + 1).min(body_start.len())..];
    }
    graph
}

/// The byte offset of `keyword` as a whole directive (not part of a longer name).
fn find_keyword(text: &str, keyword: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = text[from..].find(keyword) {
        let at = from + i;
        let before_ok = at == 0 || text[..at].ends_with(|c: char| c.is_whitespace());
        let after_ok = text[at + keyword.len()..].starts_with(|c: char| c.is_whitespace() || c == '(');
        if before_ok && after_ok {
            return Some(at);
        }
        from = at + keyword.len();
    }
    None
}

/// The direct callee of a `call` statement (`call.uni (retval0), name, (param0);` or
/// `call name, (..)`); `None` for other statements and indirect calls.
fn call_target(statement: &str) -> Option<String> {
    let statement = statement.trim();
    // A label or a `{` before the instruction on the same statement.
    let statement = statement.rsplit(['{', '}']).next().unwrap_or(statement).trim();
    let statement = match statement.rfind(':') {
        Some(colon) if !statement[..colon].contains(' ') && !statement[..colon].contains('(') => statement[colon + 1..].trim(),
        _ => statement,
    };
    let rest = statement.strip_prefix("call")?;
    if !rest.starts_with(['.', ' ', '\t', '\n', '(']) {
        return None;
    }
    // Modifiers (`.uni`).
    let mut rest = rest.trim_start();
    while let Some(after) = rest.strip_prefix('.') {
        let end = after.find(|c: char| !c.is_ascii_alphanumeric()).unwrap_or(after.len());
        rest = after[end..].trim_start();
    }
    if rest.starts_with('(') {
        let close = rest.find(')')?;
        rest = rest[close + 1..].trim_start().strip_prefix(',')?.trim_start();
    }
    let end = rest.find(|c: char| !is_name_char(c) && c != '%').unwrap_or(rest.len());
    let target = &rest[..end];
    if target.is_empty() || target.starts_with('%') {
        return None;
    }
    Some(target.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const RECURSIVE: &str = r#"
.version 8.0
.target sm_90
.address_size 64

	// .globl	recurse
.func  (.param .b32 func_retval0) _R4deep(
	.param .b32 _R4deep_param_0,
	.param .b32 _R4deep_param_1
)
;
.visible .global .align 8 .b8 __ferrocuda_fingerprint_recurse[8] = {1, 2, 3, 4, 5, 6, 7, 8};
.visible .entry recurse(
	.param .u32 recurse_param_0,
	.param .u64 .ptr .align 1 recurse_param_1
)
{
	.reg .b32 	%r<4>;
	{ // callseq 0, 0
	.param .b32 param0;
	st.param.b32 	[param0], %r1;
	.param .b32 retval0;
	call.uni (retval0), 
	_R4deep, 
	(
	param0
	);
	ld.param.b32 	%r2, [retval0];
	} // callseq 0
	ret;
}
.func  (.param .b32 func_retval0) _R4deep(
	.param .b32 _R4deep_param_0,
	.param .b32 _R4deep_param_1
)
{
	.reg .b32 	%r<9>;
$L__BB1_2:
	{ // callseq 1, 0
	.param .b32 param0;
	.param .b32 retval0;
	call.uni (retval0), _R4deep, (param0, param1);
	} // callseq 1
	ret;
}
.visible .entry flat(
	.param .u64 flat_param_0
)
{
	{ // callseq 2, 0
	call.uni _R5panic, (param0, param1, param2);
	}
	ret;
}
.func _R5panic(
	.param .b64 _R5panic_param_0
)
{
	{ // callseq 3, 0
	call.uni _R6helper, (param0);
	}
	ret;
}
.func _R6helper(
	.param .b64 _R6helper_param_0
)
{
	{ // callseq 4, 0
	call (retval0), %rd4, (param0), prototype_4;
	}
	ret;
}
"#;

    /// Regression (audit P10): depth-10 recursion of 128-byte frames faulted on an H100 with
    /// `CUDA_ERROR_ILLEGAL_ADDRESS`, and the build said nothing. The builder now finds the
    /// cycle (through a multi-line `call`, past a forward declaration) and names the chain.
    #[test]
    fn p10_a_kernel_that_reaches_a_recursive_function_is_found_with_its_chain() {
        let found = recursive_kernels(RECURSIVE);
        assert_eq!(found, vec![Recursion { kernel: "recurse".into(), chain: vec!["recurse".into(), "_R4deep".into()], cycle_start: "_R4deep".into() }]);
    }

    #[test]
    fn calls_are_parsed_in_every_form_rustc_writes() {
        assert_eq!(call_target("call.uni _R5panic, (param0, param1)").as_deref(), Some("_R5panic"));
        assert_eq!(call_target("\n\tcall.uni (retval0), \n\t_R4deep, \n\t(\n\tparam0\n\t)").as_deref(), Some("_R4deep"));
        assert_eq!(call_target("}\n call _R1f, (p)").as_deref(), Some("_R1f"));
        assert_eq!(call_target("call (retval0), %rd4, (param0), prototype_4"), None, "indirect calls are not followed");
        assert_eq!(call_target("callseq"), None);
        assert_eq!(call_target("st.param.b32 [param0], %r1"), None);
    }

    #[test]
    fn mutual_recursion_through_another_function_is_found() {
        let ptx = ".visible .entry k() { call.uni a, (p); ret; }\n.func a() { call.uni b, (p); ret; }\n.func b() { call.uni a, (p); ret; }\n";
        let found = recursive_kernels(ptx);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].chain, ["k", "a", "b"]);
        assert_eq!(found[0].cycle_start, "a");
        let flat = ".visible .entry k() { call.uni a, (p); call.uni a, (p); ret; }\n.func a() { call.uni b, (p); ret; }\n.func b() { ret; }\n";
        assert!(recursive_kernels(flat).is_empty(), "a function called twice is no cycle");
    }
}
