//! Reading a PTX module as rustc's NVPTX backend writes it: its kernels (`.entry`), functions
//! (`.func`), module-level variables, launch-bound directives and who references whom.

use std::collections::{BTreeSet, HashMap};

/// One `.entry` or `.func` definition (declarations without a body are not kept).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    /// Its symbol.
    pub name: String,
    /// `true` for a kernel (`.entry`).
    pub is_entry: bool,
    /// The first and one-past-last line of the definition, header to closing brace.
    pub lines: (usize, usize),
    /// Performance-tuning directives between the parameter list and the body
    /// (`.maxntid 256, 1, 1`, `.reqntid ..`, `.minnctapersm ..`, `.maxnreg ..`, cluster ones).
    pub directives: Vec<String>,
    /// Every identifier of the body (used to find calls and variables).
    referenced: BTreeSet<String>,
}

/// A module-level variable (`.shared`, `.global`, `.const`, `.extern .shared`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variable {
    /// Its symbol.
    pub name: String,
    /// The whole declaration line.
    pub declaration: String,
    /// `true` for `.extern .shared ... []`: dynamic shared memory, sized at launch.
    pub is_dynamic_shared: bool,
}

/// A parsed PTX module.
#[derive(Debug, Clone)]
pub struct PtxModule {
    lines: Vec<String>,
    /// `.version`, `.target`, `.address_size`.
    pub header: Vec<String>,
    /// Kernels and functions, in module order.
    pub functions: Vec<Function>,
    /// Module-level variables, in module order.
    pub variables: Vec<Variable>,
    /// `.file` directives (the source files that `.loc` lines name).
    pub files: Vec<String>,
}

/// Launch bounds of one kernel, from its PTX directives.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LaunchBounds {
    /// `.maxntid x, y, z`: the largest block the kernel was compiled for.
    pub max_threads: Option<[u32; 3]>,
    /// `.reqntid x, y, z`: the only block shape the kernel accepts.
    pub required_threads: Option<[u32; 3]>,
    /// `.minnctapersm n`: blocks per SM the compiler was asked to fit.
    pub min_blocks_per_sm: Option<u32>,
    /// `.maxnreg n`: register cap per thread.
    pub max_registers: Option<u32>,
}

impl LaunchBounds {
    /// The most threads per block the kernel accepts (product of `.reqntid` or `.maxntid`).
    pub fn max_block_threads(&self) -> Option<u32> {
        self.required_threads.or(self.max_threads).map(|[x, y, z]| x * y * z)
    }
}

impl std::fmt::Display for LaunchBounds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dims = |d: [u32; 3]| match d {
            [x, 1, 1] => x.to_string(),
            [x, y, 1] => format!("{x}x{y}"),
            [x, y, z] => format!("{x}x{y}x{z}"),
        };
        let mut parts = Vec::new();
        if let Some(d) = self.required_threads {
            parts.push(format!("req={}", dims(d)));
        }
        if let Some(d) = self.max_threads {
            parts.push(format!("max={}", dims(d)));
        }
        if let Some(n) = self.min_blocks_per_sm {
            parts.push(format!("minb={n}"));
        }
        if let Some(n) = self.max_registers {
            parts.push(format!("maxreg={n}"));
        }
        if parts.is_empty() { f.write_str("-") } else { f.write_str(&parts.join(",")) }
    }
}

const BOUND_DIRECTIVES: &[&str] =
    &[".maxntid", ".reqntid", ".minnctapersm", ".maxnreg", ".maxclusterrank", ".reqnctapercluster", ".explicitcluster", ".noreturn"];

impl PtxModule {
    /// Parses `text`. Unknown lines are kept for [`PtxModule::extract`] but otherwise ignored.
    pub fn parse(text: &str) -> Self {
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        let mut module = PtxModule { lines: Vec::new(), header: Vec::new(), functions: Vec::new(), variables: Vec::new(), files: Vec::new() };
        let mut i = 0;
        while i < lines.len() {
            let line = lines[i].trim();
            if line.starts_with(".version") || line.starts_with(".target") || line.starts_with(".address_size") {
                module.header.push(line.to_string());
                i += 1;
            } else if line.starts_with(".file") {
                module.files.push(line.to_string());
                i += 1;
            } else if let Some((name, is_entry)) = function_header(line) {
                i = module.read_function(&lines, i, name, is_entry);
            } else {
                if let Some(variable) = variable_declaration(line) {
                    module.variables.push(variable);
                }
                i += 1;
            }
        }
        module.lines = lines;
        module
    }

    /// Reads the function starting at line `start`; returns the line after it.
    fn read_function(&mut self, lines: &[String], start: usize, name: String, is_entry: bool) -> usize {
        let mut i = start;
        let mut directives = Vec::new();
        // Header: up to the body's `{` or a declaration's `;`.
        loop {
            let Some(line) = lines.get(i) else { return i };
            let line = line.trim();
            if BOUND_DIRECTIVES.iter().any(|d| line.starts_with(d)) {
                directives.push(line.trim_end_matches(';').to_string());
            }
            if line == "{" {
                break;
            }
            if line.ends_with(';') && !line.starts_with(".param") {
                return i + 1; // a declaration (prototype), no body
            }
            i += 1;
        }
        let mut depth = 0i32;
        let mut referenced = BTreeSet::new();
        while let Some(line) = lines.get(i) {
            let code = line.split("//").next().unwrap_or_default();
            depth += code.matches('{').count() as i32 - code.matches('}').count() as i32;
            referenced.extend(identifiers(code).map(str::to_string));
            i += 1;
            if depth <= 0 {
                break;
            }
        }
        self.functions.push(Function { name, is_entry, lines: (start, i), directives, referenced });
        i
    }

    /// The kernels (`.entry`), in module order.
    pub fn kernels(&self) -> impl Iterator<Item = &Function> {
        self.functions.iter().filter(|f| f.is_entry)
    }

    /// The kernel or function called `name`.
    pub fn function(&self, name: &str) -> Option<&Function> {
        self.functions.iter().find(|f| f.name == name)
    }

    /// `name` and every function it reaches through calls (or takes the address of), in module
    /// order.
    pub fn reachable(&self, name: &str) -> Vec<&Function> {
        let by_name: HashMap<&str, &Function> = self.functions.iter().map(|f| (f.name.as_str(), f)).collect();
        let mut seen = BTreeSet::new();
        let mut stack = vec![name];
        while let Some(current) = stack.pop() {
            let Some(function) = by_name.get(current) else { continue };
            if !seen.insert(current) {
                continue;
            }
            for callee in &function.referenced {
                if by_name.contains_key(callee.as_str()) && !seen.contains(callee.as_str()) {
                    stack.push(callee);
                }
            }
        }
        self.functions.iter().filter(|f| seen.contains(f.name.as_str())).collect()
    }

    /// Module-level variables used by `name` or anything it reaches.
    pub fn variables_used_by(&self, name: &str) -> Vec<&Variable> {
        let functions = self.reachable(name);
        self.variables.iter().filter(|v| functions.iter().any(|f| f.referenced.contains(&v.name))).collect()
    }

    /// Whether kernel `name` (or a function it calls) uses dynamic shared memory.
    pub fn uses_dynamic_shared(&self, name: &str) -> bool {
        self.variables_used_by(name).iter().any(|v| v.is_dynamic_shared)
    }

    /// The launch bounds of kernel `name` (all `None` when it has none or is not found).
    pub fn launch_bounds(&self, name: &str) -> LaunchBounds {
        let mut bounds = LaunchBounds::default();
        let Some(function) = self.function(name) else { return bounds };
        for directive in &function.directives {
            let (key, args) = directive.split_once(char::is_whitespace).unwrap_or((directive, ""));
            let numbers: Vec<u32> = args.split(',').filter_map(|n| n.trim().parse().ok()).collect();
            let dims = || [numbers.first().copied().unwrap_or(1), numbers.get(1).copied().unwrap_or(1), numbers.get(2).copied().unwrap_or(1)];
            match key {
                ".maxntid" => bounds.max_threads = Some(dims()),
                ".reqntid" => bounds.required_threads = Some(dims()),
                ".minnctapersm" => bounds.min_blocks_per_sm = numbers.first().copied(),
                ".maxnreg" => bounds.max_registers = numbers.first().copied(),
                _ => {}
            }
        }
        bounds
    }

    /// A PTX text with the module header, the variables kernel `name` uses, the kernel,
    /// every function it reaches and the `.file` table: enough to read, and to feed to `ptxas`
    /// on its own.
    /// `None` when there is no kernel or function of that name.
    pub fn extract(&self, name: &str) -> Option<String> {
        self.function(name)?;
        let mut text = String::new();
        for line in &self.header {
            text += line;
            text.push('\n');
        }
        text.push('\n');
        for variable in self.variables_used_by(name) {
            text += &variable.declaration;
            text.push('\n');
        }
        for function in self.reachable(name) {
            text.push('\n');
            for line in &self.lines[function.lines.0..function.lines.1] {
                text += line;
                text.push('\n');
            }
        }
        if !self.files.is_empty() {
            text.push('\n');
        }
        for file in &self.files {
            text += file;
            text.push('\n');
        }
        Some(text)
    }
}

/// `Some((name, is_entry))` when `line` starts a `.entry` or `.func` (definition or prototype).
fn function_header(line: &str) -> Option<(String, bool)> {
    let mut rest = line;
    for linkage in [".visible ", ".weak ", ".extern "] {
        rest = rest.strip_prefix(linkage).map(str::trim_start).unwrap_or(rest);
    }
    let (mut rest, is_entry) = if let Some(r) = rest.strip_prefix(".entry") {
        (r.trim_start(), true)
    } else if let Some(r) = rest.strip_prefix(".func") {
        (r.trim_start(), false)
    } else {
        return None;
    };
    if rest.starts_with('(') {
        // The return-value parameter list of a `.func`.
        let close = rest.find(')')?;
        rest = rest[close + 1..].trim_start();
    }
    let name: String = rest.chars().take_while(|&c| is_ident_char(c)).collect();
    (!name.is_empty()).then_some((name, is_entry))
}

fn variable_declaration(line: &str) -> Option<Variable> {
    let is_extern = line.starts_with(".extern ");
    let rest = line.trim_start_matches(".visible ").trim_start_matches(".extern ").trim_start_matches(".weak ");
    if !(rest.starts_with(".shared") || rest.starts_with(".global") || rest.starts_with(".const")) {
        return None;
    }
    let before_init = line.split('=').next().unwrap_or(line).trim_end_matches(';');
    let last = before_init.split_whitespace().last()?;
    let name: String = last.chars().take_while(|&c| is_ident_char(c)).collect();
    let is_dynamic_shared = is_extern && rest.starts_with(".shared") && last.ends_with("[]");
    Some(Variable { name, declaration: line.to_string(), is_dynamic_shared })
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '$'
}

fn identifiers(code: &str) -> impl Iterator<Item = &str> {
    code.split(|c: char| !is_ident_char(c)).filter(|w| w.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_' || c == '$'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODULE: &str = "//\n.version 7.0\n.target sm_80\n.address_size 64\n\n\
.shared .align 4 .b8 tile[1024];\n\
.extern .shared .align 16 .b8 __ferrocuda_dynamic_shared[];\n\
.global .align 1 .b8 unused_global[4] = {1, 2, 3, 4};\n\
.func helper_decl\n(\n\t.param .b64 helper_decl_param_0\n)\n;\n.func panic_decl\n(\n\t.param .b64 p\n)\n.noreturn;\n\
.visible .entry bounded(\n\t.param .u64 bounded_param_0\n)\n.maxntid 128, 1, 1\n.minnctapersm 2\n{\n\t.reg .b32 %r<3>;\n\tmov.u32 %r1, tile;\n\tcall.uni helper, (\n\tparam0\n\t);\n\tret;\n}\n\
.visible .entry plain()\n.reqntid 32, 4, 1\n{\n\tmov.u64 %rd1, __ferrocuda_dynamic_shared;\n\t{ // inner scope\n\t.reg .b32 t;\n\t}\n\tret;\n}\n\
.func  (.param .b32 func_retval0) helper(\n\t.param .b64 helper_param_0\n)\n{\n\tcall.uni leaf, ();\n\tret;\n}\n\
.func leaf()\n.noreturn\n{\n\ttrap;\n}\n\
.func unused()\n{\n\tret;\n}\n\t.file\t1 \"/src/k.rs\"\n";

    #[test]
    fn finds_kernels_functions_and_skips_prototypes() {
        let m = PtxModule::parse(MODULE);
        let names: Vec<_> = m.functions.iter().map(|f| (f.name.as_str(), f.is_entry)).collect();
        assert_eq!(names, [("bounded", true), ("plain", true), ("helper", false), ("leaf", false), ("unused", false)]);
        assert_eq!(m.kernels().count(), 2);
        assert_eq!(m.header, [".version 7.0", ".target sm_80", ".address_size 64"]);
    }

    #[test]
    fn reads_launch_bounds() {
        let m = PtxModule::parse(MODULE);
        let bounded = m.launch_bounds("bounded");
        assert_eq!(bounded.max_threads, Some([128, 1, 1]));
        assert_eq!(bounded.min_blocks_per_sm, Some(2));
        assert_eq!(bounded.to_string(), "max=128,minb=2");
        let plain = m.launch_bounds("plain");
        assert_eq!(plain.required_threads, Some([32, 4, 1]));
        assert_eq!(plain.max_block_threads(), Some(128));
        assert_eq!(m.launch_bounds("helper"), LaunchBounds::default());
        assert_eq!(LaunchBounds::default().to_string(), "-");
    }

    #[test]
    fn follows_calls_transitively_and_finds_dynamic_shared() {
        let m = PtxModule::parse(MODULE);
        let reached: Vec<_> = m.reachable("bounded").iter().map(|f| f.name.as_str()).collect();
        assert_eq!(reached, ["bounded", "helper", "leaf"]);
        assert!(!m.uses_dynamic_shared("bounded"));
        assert!(m.uses_dynamic_shared("plain"));
        let vars: Vec<_> = m.variables_used_by("bounded").iter().map(|v| v.name.as_str()).collect();
        assert_eq!(vars, ["tile"]);
    }

    #[test]
    fn extract_keeps_the_kernel_its_callees_and_variables_only() {
        let m = PtxModule::parse(MODULE);
        let text = m.extract("bounded").unwrap();
        assert!(text.starts_with(".version 7.0\n.target sm_80\n"));
        assert!(text.contains(".shared .align 4 .b8 tile[1024];"));
        assert!(text.contains(".visible .entry bounded(") && text.contains(".func leaf()"));
        assert!(!text.contains("plain") && !text.contains("unused") && !text.contains("unused_global"));
        assert!(text.ends_with("\n.file\t1 \"/src/k.rs\"\n"), "{text}");
        assert!(m.extract("missing").is_none());
    }
}
