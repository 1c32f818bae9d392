//! The call graph of a PTX module, to find kernels whose stack depth no one can bound: those
//! that reach a recursive function (audit P10) or call through a function pointer or a `dyn`
//! method (audit 2026-11-27b, Q4).
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
//! Indirect calls (`call %rd, (..), prototype`: a `dyn` method or a function pointer) are worse:
//! ptxas leaves the frames of indirectly called functions out of the kernel's "cumulative stack
//! size" altogether (the audit's `fnptr_recurse`: 24 bytes cumulative, with 176-byte frames
//! called through the pointer) and says nothing. So the graph also follows each indirect call to
//! every function that can be its target: a function whose address the module takes (its name
//! used other than as a direct call's target or in its own header: `mov.b64 %rd, f`, a vtable's
//! `generic(f)`) and whose parameter and return sizes match the call's prototype (PTX requires
//! the callee to match the prototype; sizes are compared, not type names, so the set is a
//! superset). A kernel that reaches an indirect call with at least one possible target is
//! reported ([`indirect_call_kernels`]); one that reaches a cycle through such calls is
//! recursive ([`recursive_kernels`], with [`Recursion::through_indirect_call`]). An indirect
//! call with no possible target in the module (the detailed panic handler's formatting has
//! some: `core::fmt`'s `dyn Write` calls whose implementations were never instantiated) cannot
//! run and is ignored.

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
    /// Whether a call of the cycle is indirect (a function pointer or a `dyn` method, audit
    /// 2026-11-27b Q4): the chain then names the possible target the cycle goes through.
    pub through_indirect_call: bool,
}

/// A kernel that reaches a call through a function pointer or a `dyn` method with a possible
/// target in the module (audit 2026-11-27b, Q4): ptxas leaves the target's frames out of the
/// kernel's stack size, so they run on whatever the context's stack limit leaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndirectCall {
    /// The kernel (PTX entry).
    pub kernel: String,
    /// The direct calls from the kernel to the function that makes the indirect call.
    pub chain: Vec<String>,
    /// The functions the call can reach: address taken, parameter and return sizes matching
    /// the call's prototype.
    pub targets: Vec<String>,
}

/// The byte sizes of a function's (or a call prototype's) return and parameter values, in
/// order; `None` for one that could not be read (it matches every size).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Shape {
    returns: Vec<Option<u64>>,
    params: Vec<Option<u64>>,
}

impl Shape {
    fn matches(&self, other: &Shape) -> bool {
        let same = |a: &[Option<u64>], b: &[Option<u64>]| a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.is_none() || y.is_none() || x == y);
        same(&self.returns, &other.returns) && same(&self.params, &other.params)
    }
}

/// The module's functions (`.entry` and `.func` with a body): each one's direct callees, the
/// prototype of each of its indirect calls (`None`: unknown, any target), which are entries,
/// each `.func`'s shape and which functions have their address taken.
#[derive(Debug, Default)]
struct Graph {
    callees: BTreeMap<String, BTreeSet<String>>,
    indirect: BTreeMap<String, Vec<Option<Shape>>>,
    entries: Vec<String>,
    shapes: BTreeMap<String, Shape>,
    address_taken: BTreeSet<String>,
}

impl Graph {
    /// The functions an indirect call of prototype `shape` can reach.
    fn targets(&self, shape: Option<&Shape>) -> BTreeSet<String> {
        self.address_taken
            .iter()
            .filter(|f| match (shape, self.shapes.get(*f)) {
                (Some(call), Some(callee)) => call.matches(callee),
                _ => true,
            })
            .cloned()
            .collect()
    }

    /// The direct callees of `f` and the possible targets of its indirect calls; the second
    /// set holds the targets that are not also direct callees.
    fn successors(&self, f: &str) -> (BTreeSet<String>, BTreeSet<String>) {
        let mut all = self.callees.get(f).cloned().unwrap_or_default();
        let mut indirect_only = BTreeSet::new();
        for shape in self.indirect.get(f).into_iter().flatten() {
            for target in self.targets(shape.as_ref()) {
                if all.insert(target.clone()) {
                    indirect_only.insert(target);
                }
            }
        }
        (all, indirect_only)
    }
}

/// The kernels of `ptx` that reach a recursive function (directly or through other
/// functions, direct calls or indirect ones to a possible target), each with one call chain
/// that shows the cycle.
pub fn recursive_kernels(ptx: &str) -> Vec<Recursion> {
    let graph = parse(ptx);
    let mut found = Vec::new();
    for entry in &graph.entries {
        let mut chain = vec![entry.clone()];
        let mut indirect_edges = vec![false];
        let mut done = BTreeSet::new();
        if let Some(cycle_start) = find_cycle(&graph, &mut chain, &mut indirect_edges, &mut done) {
            let start = chain.iter().position(|f| *f == cycle_start).unwrap_or(0);
            // The edges into chain[start + 1..] and the closing edge (recorded last).
            let through_indirect_call = indirect_edges[start + 1..].iter().any(|&i| i);
            found.push(Recursion { kernel: entry.clone(), chain, cycle_start, through_indirect_call });
        }
    }
    found
}

/// The kernels of `ptx` that reach an indirect call with a possible target (through direct
/// calls and through other indirect calls), each with the chain of calls to the first such
/// call found and that call's possible targets.
pub fn indirect_call_kernels(ptx: &str) -> Vec<IndirectCall> {
    let graph = parse(ptx);
    let mut found = Vec::new();
    for entry in &graph.entries {
        // Breadth-first, so that the chain reported is a shortest one.
        let mut parent: BTreeMap<String, String> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([entry.clone()]);
        let mut seen = BTreeSet::from([entry.clone()]);
        while let Some(f) = queue.pop_front() {
            let targets: BTreeSet<String> = graph.indirect.get(&f).into_iter().flatten().flat_map(|shape| graph.targets(shape.as_ref())).collect();
            if !targets.is_empty() {
                let mut chain = vec![f.clone()];
                while let Some(p) = parent.get(chain.last().map(String::as_str).unwrap_or_default()) {
                    chain.push(p.clone());
                }
                chain.reverse();
                found.push(IndirectCall { kernel: entry.clone(), chain, targets: targets.into_iter().collect() });
                break;
            }
            for callee in graph.callees.get(&f).into_iter().flatten() {
                if seen.insert(callee.clone()) {
                    parent.insert(callee.clone(), f.clone());
                    queue.push_back(callee.clone());
                }
            }
        }
    }
    found
}

/// Depth-first from the last function of `chain`: the function a call returns to along the
/// chain (a cycle), with `chain` extended to the caller that closes it. `indirect_edges[i]`
/// says whether the call into `chain[i]` is only indirect; the closing call's is pushed last.
fn find_cycle(graph: &Graph, chain: &mut Vec<String>, indirect_edges: &mut Vec<bool>, done: &mut BTreeSet<String>) -> Option<String> {
    let current = chain.last().cloned().unwrap_or_default();
    let (successors, indirect_only) = graph.successors(&current);
    for callee in &successors {
        if chain.contains(callee) {
            indirect_edges.push(indirect_only.contains(callee));
            return Some(callee.clone());
        }
        if done.contains(callee) || !graph.callees.contains_key(callee) {
            continue;
        }
        chain.push(callee.clone());
        indirect_edges.push(indirect_only.contains(callee));
        if let Some(start) = find_cycle(graph, chain, indirect_edges, done) {
            return Some(start);
        }
        chain.pop();
        indirect_edges.pop();
        done.insert(callee.clone());
    }
    None
}

fn is_name_char(c: char) -> bool {
    ferrocuda_types::ptx::is_identifier_char(c) || c == '.'
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
    let text: String = ferrocuda_types::ptx::without_comments(ptx).collect();
    let mut graph = Graph::default();
    // Per name: how often it is a header's name (declarations too) or a direct call's target;
    // any other use takes its address.
    let mut named_in_headers: BTreeMap<String, usize> = BTreeMap::new();
    let mut direct_calls: BTreeMap<String, usize> = BTreeMap::new();
    let mut rest = text.as_str();
    loop {
        // The next `.func` or `.entry` directive at top level.
        let next = [".func", ".entry"].iter().filter_map(|k| find_keyword(rest, k).map(|at| (at, *k))).min();
        let Some((at, keyword)) = next else { break };
        let after_keyword = &rest[at + keyword.len()..];
        let Some((name, after)) = header_name(after_keyword) else {
            rest = after_keyword;
            continue;
        };
        *named_in_headers.entry(name.clone()).or_default() += 1;
        if keyword == ".func" {
            graph.shapes.entry(name.clone()).or_insert_with(|| header_shape(after_keyword, after));
        }
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
        let mut prototypes: BTreeMap<String, Shape> = BTreeMap::new();
        let mut indirect_prototypes: Vec<Option<String>> = Vec::new();
        let callees = graph.callees.entry(name.clone()).or_default();
        for statement in body.split(';') {
            if let Some((label, shape)) = call_prototype(statement) {
                prototypes.insert(label, shape);
            } else if let Some(target) = call_target(statement) {
                *direct_calls.entry(target.clone()).or_default() += 1;
                callees.insert(target);
            } else if let Some(prototype) = indirect_call(statement) {
                indirect_prototypes.push(prototype);
            }
        }
        if !indirect_prototypes.is_empty() {
            let shapes = indirect_prototypes.into_iter().map(|p| p.and_then(|p| prototypes.get(&p).cloned())).collect();
            graph.indirect.insert(name.clone(), shapes);
        }
        if keyword == ".entry" {
            graph.entries.push(name);
        }
        rest = &body_start[(end + 1).min(body_start.len())..];
    }
    // A `.func` named anywhere else (`mov.b64 %rd1, f;`, `generic(f)` in a global's
    // initialiser) has its address taken.
    for (name, headers) in &named_in_headers {
        if !graph.shapes.contains_key(name) {
            continue;
        }
        // Debug sections (at the end of the module) name functions in their tables.
        let code = text.split("\n.section").next().unwrap_or_default();
        let uses = count_word(code, name);
        if uses > headers + direct_calls.get(name).copied().unwrap_or(0) {
            graph.address_taken.insert(name.clone());
        }
    }
    graph
}

/// How often `word` occurs in `text` as a whole name (not part of a longer one).
fn count_word(text: &str, word: &str) -> usize {
    let mut count = 0;
    let mut from = 0;
    while let Some(i) = text[from..].find(word) {
        let at = from + i;
        let before_ok = !text[..at].ends_with(is_name_char);
        let after_ok = !text[at + word.len()..].starts_with(is_name_char);
        if before_ok && after_ok {
            count += 1;
        }
        from = at + word.len();
    }
    count
}

/// The byte size of one parameter declaration (`.param .b32 name`, `.param .align 16 .b8
/// name[16]`, a prototype's `.param .b64 _`): its fundamental type's width times its array
/// length; `None` if it cannot be read.
fn param_size(declaration: &str) -> Option<u64> {
    let mut size = None;
    let mut count = 1u64;
    for token in declaration.split_whitespace() {
        if let Some(kind) = token.strip_prefix('.') {
            let bits = kind.trim_start_matches(|c: char| c.is_ascii_alphabetic());
            let letters = &kind[..kind.len() - bits.len()];
            if matches!(letters, "b" | "u" | "s" | "f")
                && let Ok(bits) = bits.parse::<u64>()
            {
                size = Some(bits.div_ceil(8));
            }
        } else if let Some(open) = token.find('[') {
            let close = token[open..].find(']')? + open;
            count *= token[open + 1..close].trim().parse::<u64>().ok()?;
        }
    }
    size.map(|s| s * count)
}

/// The sizes of a parenthesised parameter list (`(.param .b32 a, .param .b64 b)`).
fn list_sizes(list: &str) -> Vec<Option<u64>> {
    let inner = list.trim().trim_start_matches('(').trim_end_matches(')');
    if inner.trim().is_empty() {
        return Vec::new();
    }
    inner.split(',').map(param_size).collect()
}

/// The text of the first parenthesised group of `text` (with its parentheses) and the rest.
fn paren_group(text: &str) -> Option<(&str, &str)> {
    let text = text.trim_start();
    if !text.starts_with('(') {
        return None;
    }
    let close = text.find(')')?;
    Some((&text[..=close], &text[close + 1..]))
}

/// A `.func`'s shape from its header: `after_keyword` starts after `.func` (an optional return
/// list, the name), `after_name` after the name (the parameter list).
fn header_shape(after_keyword: &str, after_name: &str) -> Shape {
    let returns = match paren_group(after_keyword) {
        Some((list, _)) => list_sizes(list),
        None => Vec::new(),
    };
    let params = match paren_group(after_name) {
        Some((list, _)) => list_sizes(list),
        None => Vec::new(),
    };
    Shape { returns, params }
}

/// A call prototype (`prototype_0 : .callprototype (.param .b32 _) _ (.param .b64 _);`, the
/// return list optional): its label and shape.
fn call_prototype(statement: &str) -> Option<(String, Shape)> {
    let statement = statement.rsplit(['{', '}']).next().unwrap_or(statement).trim();
    let (label, rest) = statement.split_once(':')?;
    let rest = rest.trim().strip_prefix(".callprototype")?;
    let (returns, rest) = match paren_group(rest) {
        Some((list, rest)) => (list_sizes(list), rest),
        None => (Vec::new(), rest),
    };
    let rest = rest.trim_start().strip_prefix('_')?;
    let params = paren_group(rest).map(|(list, _)| list_sizes(list)).unwrap_or_default();
    Some((label.trim().to_string(), Shape { returns, params }))
}

/// An indirect call (`call (retval0), %rd4, (param0), prototype_4`): `Some(prototype label)`,
/// or `Some(None)` when it names none that can be read (a target list, or nothing).
fn indirect_call(statement: &str) -> Option<Option<String>> {
    let rest = call_operands(statement)?;
    if !rest.starts_with('%') {
        return None;
    }
    let last = rest.rsplit(',').next().unwrap_or_default().trim();
    Some((!last.is_empty() && !last.ends_with(')') && last.chars().all(is_name_char)).then(|| last.to_string()))
}

/// The operands of a `call` statement from its target on (`call.uni (retval0), name, (param0)`:
/// `name, (param0)`), after a label or a `{` before the instruction, the modifiers (`.uni`) and
/// the return-value group; `None` for other statements. The one parse [`call_target`] and
/// [`indirect_call`] share.
fn call_operands(statement: &str) -> Option<&str> {
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
    Some(rest)
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
    let rest = call_operands(statement)?;
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
        assert_eq!(
            found,
            vec![Recursion {
                kernel: "recurse".into(),
                chain: vec!["recurse".into(), "_R4deep".into()],
                cycle_start: "_R4deep".into(),
                through_indirect_call: false
            }]
        );
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

    /// The shape of the audit's `fnptr_recurse` (2026-11-27b, Q4): two functions whose
    /// addresses the kernel takes (`mov.b64`), each calling through the pointer it is given.
    const FNPTR: &str = r#"
.func  (.param .b32 func_retval0) _R6deep_a(
	.param .b32 _R6deep_a_param_0,
	.param .b32 _R6deep_a_param_1,
	.param .b64 _R6deep_a_param_2
)
;
.func  (.param .b32 func_retval0) _R6deep_b(.param .b32 _R6deep_b_param_0, .param .b32 _R6deep_b_param_1, .param .b64 _R6deep_b_param_2);
.visible .entry fnptr_recurse(
	.param .u32 fnptr_recurse_param_0
)
{
	mov.b64 	%rd12, _R6deep_a;
	mov.b64 	%rd13, _R6deep_b;
	{ // callseq 4, 0
	.param .b32 retval0;
	prototype_4 : .callprototype (.param .b32 _) _ (.param .b32 _, .param .b32 _, .param .b64 _);
	call (retval0), %rd17, (param0, param1, param2), prototype_4;
	} // callseq 4
	ret;
}
.func  (.param .b32 func_retval0) _R6deep_a(
	.param .b32 _R6deep_a_param_0,
	.param .b32 _R6deep_a_param_1,
	.param .b64 _R6deep_a_param_2
)
{
	ld.param.b64 	%rd2, [_R6deep_a_param_2];
	{ // callseq 0, 0
	prototype_0 : .callprototype (.param .b32 _) _ (.param .b32 _, .param .b32 _, .param .b64 _);
	call (retval0), %rd2, (param0, param1, param2), prototype_0;
	} // callseq 0
	ret;
}
.func  (.param .b32 func_retval0) _R6deep_b(.param .b32 _R6deep_b_param_0, .param .b32 _R6deep_b_param_1, .param .b64 _R6deep_b_param_2)
{
	ret;
}
.visible .entry direct_only(.param .u64 p)
{
	{ call.uni (retval0), _R6deep_b, (param0, param1, param2); }
	ret;
}
.visible .entry mismatched(.param .u64 p)
{
	{ // callseq 9, 0
	prototype_9 : .callprototype (.param .b32 _) _ (.param .b64 _, .param .b32 _);
	call (retval0), %rd5, (param0, param1), prototype_9;
	}
	ret;
}
"#;

    /// Regression (audit 2026-11-27b, Q4): recursion through a function pointer passed the
    /// builder and faulted an H100 (`CUDA_ERROR_ILLEGAL_ADDRESS`): indirect calls were not
    /// followed. Now an indirect call reaches every address-taken function of its prototype's
    /// shape, so the cycle `deep_a -> deep_a` is found, marked as going through an indirect
    /// call; `deep_b` (no calls) closes none.
    #[test]
    fn q4_recursion_through_a_function_pointer_is_found() {
        let found = recursive_kernels(FNPTR);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].kernel, "fnptr_recurse");
        assert_eq!(found[0].chain, ["fnptr_recurse", "_R6deep_a"]);
        assert_eq!(found[0].cycle_start, "_R6deep_a");
        assert!(found[0].through_indirect_call);
    }

    /// Q4's class: ptxas leaves indirectly called frames out of a kernel's stack size, so any
    /// indirect call with a possible target is reported, with its targets; a kernel that only
    /// calls directly, or whose indirect call matches no address-taken function's shape (the
    /// detailed panic handler's `dyn Write` calls), is not.
    #[test]
    fn q4_an_indirect_call_with_a_possible_target_is_reported_with_its_targets() {
        let found = indirect_call_kernels(FNPTR);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].kernel, "fnptr_recurse");
        assert_eq!(found[0].chain, ["fnptr_recurse"]);
        assert_eq!(found[0].targets, ["_R6deep_a", "_R6deep_b"]);
        // Through a direct call first: the chain names it.
        let through = FNPTR.replace("prototype_4 : .callprototype (.param .b32 _) _ (.param .b32 _, .param .b32 _, .param .b64 _);\n\tcall (retval0), %rd17, (param0, param1, param2), prototype_4;", "call.uni (retval0), _R6deep_a, (param0, param1, param2);");
        let found = indirect_call_kernels(&through);
        let k = found.iter().find(|f| f.kernel == "fnptr_recurse").expect("still reaches deep_a's indirect call");
        assert_eq!(k.chain, ["fnptr_recurse", "_R6deep_a"]);
        assert_eq!(recursive_kernels(&through)[0].chain, ["fnptr_recurse", "_R6deep_a"]);
        // Nothing takes an address: indirect calls have no target.
        let no_address = FNPTR.replace("mov.b64 \t%rd12, _R6deep_a;", "").replace("mov.b64 \t%rd13, _R6deep_b;", "");
        assert!(indirect_call_kernels(&no_address).is_empty());
        assert!(recursive_kernels(&no_address).is_empty());
    }

    #[test]
    fn shapes_of_headers_and_prototypes_are_read() {
        assert_eq!(param_size(".param .b32 x"), Some(4));
        assert_eq!(param_size(".param .align 16 .b8 x[16]"), Some(16));
        assert_eq!(param_size(".param .b64 _"), Some(8));
        assert_eq!(param_size(".param .weird x"), None);
        let (label, shape) = call_prototype("\n\tprototype_4 : .callprototype (.param .b32 _) _ (.param .b32 _, .param .b64 _)").unwrap();
        assert_eq!(label, "prototype_4");
        assert_eq!(shape, Shape { returns: vec![Some(4)], params: vec![Some(4), Some(8)] });
        let (_, no_return) = call_prototype("p : .callprototype _ (.param .b64 _)").unwrap();
        assert_eq!(no_return, Shape { returns: vec![], params: vec![Some(8)] });
        assert_eq!(indirect_call("call (retval0), %rd4, (param0), prototype_4"), Some(Some("prototype_4".into())));
        assert_eq!(indirect_call("call %rd4, (param0)"), Some(None), "no prototype: any target");
        assert_eq!(indirect_call("call.uni _R5panic, (param0)"), None);
        assert!(Shape { returns: vec![None], params: vec![] }.matches(&Shape { returns: vec![Some(4)], params: vec![] }));
        assert!(!Shape { returns: vec![Some(4)], params: vec![] }.matches(&Shape { returns: vec![Some(8)], params: vec![] }));
    }
}
