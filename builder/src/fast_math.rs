//! Fast math's divisions flush denormals, as nvcc's `--use_fast_math` does (it implies
//! `-ftz=true`): under `KernelBuilder::fast_math(true)`, LLVM lowers `f32` `x / y` to
//! `div.approx.f32` and `1.0 / y` to `rcp.approx.f32` (`-nvptx-prec-divf32=0`), and it would
//! write the `.ftz` forms only for a function whose `denormal-fp-math-f32` is `preserve-sign`,
//! which rustc cannot ask for. Without `.ftz`, ptxas wraps each in a denormal range check and a
//! rescaling (`FSETP.GEU`, `FSEL` and two `FMUL` around the `MUFU.RCP`), where nvcc's are the
//! bare `MUFU.RCP` (and `FMUL`): llm.c's GELU backward, eight `1.0f / (c * c)` a thread, ran at
//! 0.85x nvcc's with them (issue 30, bench/ports2/RESULTS.md). So the builder gives them the
//! `.ftz` nvcc gives them, in fast-math builds only.
//!
//! And nvcc's `-ftz=true` for the rest of `f32` arithmetic, opt-in (issue 30, the eleventh
//! port's L1): [`KernelBuilder::ftz`](crate::KernelBuilder::ftz) for a whole crate, or
//! `#[kernel(ftz)]` for one kernel. With `.ftz` on `add`/`sub`/`mul` as on nvcc's, ptxas fuses
//! fast math's division (`MUFU.RCP` + `FMUL.FTZ`) with the next add as it does nvcc's
//! (`x / c - y` becomes `FFMA.FTZ x, rcp(c), -y`): it fuses a multiply and an add only when
//! both flush alike.

use std::collections::BTreeSet;

/// `ptx` with every `div.approx.f32` and `rcp.approx.f32` instruction written
/// `div.approx.ftz.f32` / `rcp.approx.ftz.f32`; everything else (the `.ftz` forms already there,
/// the precise `div.rn`/`rcp.rn`, `f64`, comments and names) unchanged.
pub fn flush_approximate_divisions(ptx: &str) -> String {
    let mut out = String::with_capacity(ptx.len() + 64);
    for line in ptx.split_inclusive('\n') {
        let body = line.trim_start();
        let indent = &line[..line.len() - body.len()];
        // An instruction is `[@p] opcode operands;`: the opcode is the first word after an
        // optional guard predicate.
        let (guard, rest) = match body.strip_prefix('@') {
            Some(after) => match after.find(char::is_whitespace) {
                Some(end) => {
                    let rest = after[end..].trim_start();
                    (&body[..body.len() - rest.len()], rest)
                }
                None => ("", body),
            },
            None => ("", body),
        };
        let rewritten = [("div.approx.f32", "div.approx.ftz.f32"), ("rcp.approx.f32", "rcp.approx.ftz.f32")]
            .iter()
            .find_map(|(from, to)| rest.strip_prefix(from).filter(|after| after.starts_with([' ', '\t'])).map(|after| format!("{indent}{guard}{to}{after}")));
        out.push_str(rewritten.as_deref().unwrap_or(line));
    }
    out
}

/// The comment `ferrocuda_device::thread::__flush_denormals` writes into the body of a kernel
/// declared `#[kernel(ftz)]`: [`flush_denormals_in_marked_kernels`] gives that entry (and the
/// `.func`s only such entries call) nvcc's `-ftz=true` arithmetic.
pub const FTZ_COMMENT: &str = "// ferrocuda.ftz";

/// The `f32` instructions that take PTX's `.ftz` (flush subnormal inputs and results to
/// sign-preserving zero), as nvcc's `-ftz=true` writes them: the arithmetic (`add`, `sub`, `mul`,
/// `fma`, `mad`, `div`, `rcp`, `sqrt`, `rsqrt`), `min`/`max`/`abs`/`neg`, the comparison
/// `setp` and the SFU approximations (`ex2`, `lg2`, `sin`, `cos`). Not `cvt` (its `.ftz`
/// applies to some conversions only), `set` (LLVM does not write it), atomics, loads, stores
/// or moves.
const FTZ_OPCODES: [&str; 16] = ["add", "sub", "mul", "fma", "mad", "div", "rcp", "sqrt", "rsqrt", "min", "max", "abs", "neg", "setp", "ex2", "lg2"];
/// `sin`/`cos` are `.approx` only; kept apart so the list above reads as the ISA's sections.
const FTZ_SFU_OPCODES: [&str; 2] = ["sin", "cos"];

/// `opcode` (the dotted instruction name, `add.rn.f32`) with `.ftz` inserted where the ISA puts
/// it, or `None` when it is not an `f32` instruction that takes one or already has it.
fn with_ftz(opcode: &str) -> Option<String> {
    let parts: Vec<&str> = opcode.split('.').collect();
    let (&name, rest) = parts.split_first()?;
    if !(FTZ_OPCODES.contains(&name) || FTZ_SFU_OPCODES.contains(&name)) || rest.last() != Some(&"f32") || rest.contains(&"ftz") {
        return None;
    }
    // `.ftz` comes after the rounding mode (and a comparison's operators), before `.sat`,
    // `.NaN`, `.xorsign` and the type: `add.rn.ftz.sat.f32`, `min.ftz.NaN.f32`, `setp.lt.ftz.f32`.
    let at = rest.iter().position(|p| matches!(*p, "sat" | "NaN" | "xorsign" | "f32"))?;
    let mut out = vec![name];
    out.extend_from_slice(&rest[..at]);
    out.push("ftz");
    out.extend_from_slice(&rest[at..]);
    Some(out.join("."))
}

/// `line` with its instruction's `.ftz` added ([`with_ftz`]); `None` when nothing changes.
fn flush_line(line: &str) -> Option<String> {
    let body = line.trim_start();
    let indent = &line[..line.len() - body.len()];
    // `[@p] opcode operands;`: the opcode is the first word after an optional guard predicate.
    let (guard, rest) = match body.strip_prefix('@') {
        Some(after) => {
            let end = after.find(char::is_whitespace)?;
            let rest = after[end..].trim_start();
            (&body[..body.len() - rest.len()], rest)
        }
        None => ("", body),
    };
    let end = rest.find(char::is_whitespace)?;
    let flushed = with_ftz(&rest[..end])?;
    Some(format!("{indent}{guard}{flushed}{}", &rest[end..]))
}

/// `ptx` with every `f32` instruction that takes `.ftz` written with it: nvcc's `-ftz=true` for
/// the whole module ([`KernelBuilder::ftz`](crate::KernelBuilder::ftz)). Comments, names,
/// directives, `f64`/`f16` instructions and the `.ftz` forms already there are unchanged.
pub fn flush_denormals(ptx: &str) -> String {
    let mut out = String::with_capacity(ptx.len() + 1024);
    for line in ptx.split_inclusive('\n') {
        match flush_line(line) {
            Some(flushed) => out.push_str(&flushed),
            None => out.push_str(line),
        }
    }
    out
}

/// One function definition of a module: its lines `[start, end)` (header to closing brace).
struct Span {
    name: String,
    entry: bool,
    start: usize,
    end: usize,
    marked: bool,
    callees: Vec<String>,
}

/// The callee a `call` instruction names (`call.uni (retval0), f, (param0);`), if any.
fn callee(code: &str) -> Option<String> {
    let mut words = code.trim_start();
    if words.starts_with('@') {
        words = words.split_once(char::is_whitespace)?.1.trim_start();
    }
    let (opcode, operands) = words.split_once(char::is_whitespace)?;
    if opcode != "call" && !opcode.starts_with("call.") {
        return None;
    }
    let mut operands = operands.trim_start();
    if operands.starts_with('(') {
        operands = operands[operands.find(')')? + 1..].trim_start().trim_start_matches(',').trim_start();
    }
    let name: String = operands.chars().take_while(|&c| crate::ptx_text::is_identifier_char(c)).collect();
    (!name.is_empty()).then_some(name)
}

/// The function definitions of `lines`, by brace depth (PTX has no strings; comments stripped).
fn spans(lines: &[&str]) -> Vec<Span> {
    let mut spans = Vec::new();
    let mut depth = 0usize;
    let mut header: Option<Span> = None;
    let mut current: Option<Span> = None;
    for (index, line) in lines.iter().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        if depth == 0 {
            if let Some((name, entry)) = crate::ptx_text::function_header(code.trim()) {
                header = Some(Span { name, entry, start: index, end: index, marked: false, callees: Vec::new() });
            }
            if header.is_some() && !code.contains('{') && code.trim().ends_with(';') {
                header = None;
            }
        } else if let Some(span) = current.as_mut() {
            span.marked |= line.trim_start().starts_with(FTZ_COMMENT);
            if let Some(name) = callee(code) {
                span.callees.push(name);
            }
        }
        for c in code.chars() {
            match c {
                '{' => {
                    if depth == 0 {
                        current = header.take();
                    }
                    depth += 1;
                }
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0
                        && let Some(mut span) = current.take()
                    {
                        span.end = index + 1;
                        spans.push(span);
                    }
                }
                _ => {}
            }
        }
    }
    spans
}

/// `ptx` with nvcc's `-ftz=true` arithmetic ([`flush_denormals`]) in the kernels declared
/// `#[kernel(ftz)]` (entries whose body holds [`FTZ_COMMENT`]) and in the `.func`s that only
/// such kernels reach (a `.func` that another kernel also calls keeps IEEE arithmetic for both:
/// a kernel without `ftz` never flushes). Everything else is unchanged.
pub fn flush_denormals_in_marked_kernels(ptx: &str) -> String {
    if !ptx.contains(FTZ_COMMENT) {
        return ptx.to_owned();
    }
    let lines: Vec<&str> = ptx.split_inclusive('\n').collect();
    let spans = spans(&lines);
    let reach = |marked: bool| {
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        let mut stack: Vec<&str> = spans.iter().filter(|s| s.entry && s.marked == marked).map(|s| s.name.as_str()).collect();
        while let Some(name) = stack.pop() {
            if seen.insert(name) {
                for s in spans.iter().filter(|s| s.name == name) {
                    stack.extend(s.callees.iter().map(String::as_str));
                }
            }
        }
        seen
    };
    let (flushing, ieee) = (reach(true), reach(false));
    let mut flush = vec![false; lines.len()];
    for span in spans.iter().filter(|s| flushing.contains(s.name.as_str()) && !ieee.contains(s.name.as_str())) {
        flush[span.start..span.end].iter_mut().for_each(|f| *f = true);
    }
    let mut out = String::with_capacity(ptx.len() + 1024);
    for (line, flush) in lines.iter().zip(flush) {
        match flush.then(|| flush_line(line)).flatten() {
            Some(flushed) => out.push_str(&flushed),
            None => out.push_str(line),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approximate_divisions_and_reciprocals_get_ftz() {
        let ptx = "\tdiv.approx.f32 \t%r1, %r2, %r3;\n\trcp.approx.f32 \t%r4, %r5;\n\t@%p1 div.approx.f32 %r6, %r7, %r8;\n";
        assert_eq!(
            flush_approximate_divisions(ptx),
            "\tdiv.approx.ftz.f32 \t%r1, %r2, %r3;\n\trcp.approx.ftz.f32 \t%r4, %r5;\n\t@%p1 div.approx.ftz.f32 %r6, %r7, %r8;\n"
        );
    }

    #[test]
    fn other_instructions_names_and_comments_are_left_alone() {
        let ptx = "\tdiv.approx.ftz.f32 \t%r1, %r2, %r3;\n\tdiv.rn.f32 \t%r1, %r2, %r3;\n\trcp.rn.f64 \t%fd1, %fd2;\n\
                   \tdiv.full.f32 %r1, %r2, %r3;\n\t// div.approx.f32 in a comment\n.func div.approx.f32_like()\n\
                   \tmov.b32 %r1, %r2; // rcp.approx.f32\n\trcp.approx.ftz.f64 %fd1, %fd2;\n";
        assert_eq!(flush_approximate_divisions(ptx), ptx);
    }

    #[test]
    fn the_last_line_without_a_newline_is_kept() {
        assert_eq!(flush_approximate_divisions("\trcp.approx.f32 %r1, %r2;"), "\trcp.approx.ftz.f32 %r1, %r2;");
        assert_eq!(flush_approximate_divisions(""), "");
    }

    #[test]
    fn s24_ftz_goes_where_the_isa_puts_it() {
        let ptx = "\tadd.f32 \t%f1, %f2, %f3;\n\tsub.rn.f32 %f1, %f2, %f3;\n\t@!%p2 mul.f32 %f1, %f2, %f3;\n\tfma.rn.f32 %f1, %f2, %f3, %f4;\n\
                   \tadd.rn.sat.f32 %f1, %f2, %f3;\n\tmin.NaN.f32 %f1, %f2, %f3;\n\tmax.f32 %f1, %f2, %f3;\n\tsetp.lt.f32 %p1, %f1, %f2;\n\
                   \tsetp.gt.and.f32 %p1, %f1, %f2, %p3;\n\tdiv.rn.f32 %f1, %f2, %f3;\n\tdiv.approx.f32 %f1, %f2, %f3;\n\tsqrt.approx.f32 %f1, %f2;\n\
                   \tneg.f32 %f1, %f2;\n\tabs.f32 %f1, %f2;\n\tex2.approx.f32 %f1, %f2;\n\tsin.approx.f32 %f1, %f2;\n";
        let want = "\tadd.ftz.f32 \t%f1, %f2, %f3;\n\tsub.rn.ftz.f32 %f1, %f2, %f3;\n\t@!%p2 mul.ftz.f32 %f1, %f2, %f3;\n\tfma.rn.ftz.f32 %f1, %f2, %f3, %f4;\n\
                    \tadd.rn.ftz.sat.f32 %f1, %f2, %f3;\n\tmin.ftz.NaN.f32 %f1, %f2, %f3;\n\tmax.ftz.f32 %f1, %f2, %f3;\n\tsetp.lt.ftz.f32 %p1, %f1, %f2;\n\
                    \tsetp.gt.and.ftz.f32 %p1, %f1, %f2, %p3;\n\tdiv.rn.ftz.f32 %f1, %f2, %f3;\n\tdiv.approx.ftz.f32 %f1, %f2, %f3;\n\tsqrt.approx.ftz.f32 %f1, %f2;\n\
                    \tneg.ftz.f32 %f1, %f2;\n\tabs.ftz.f32 %f1, %f2;\n\tex2.approx.ftz.f32 %f1, %f2;\n\tsin.approx.ftz.f32 %f1, %f2;\n";
        assert_eq!(flush_denormals(ptx), want);
    }

    #[test]
    fn s24_ftz_leaves_other_types_atomics_and_text_alone() {
        let ptx = "\tadd.f64 %fd1, %fd2, %fd3;\n\tadd.s32 %r1, %r2, %r3;\n\tadd.rn.f16 %h1, %h2, %h3;\n\tadd.ftz.f32 %f1, %f2, %f3;\n\
                   \tatom.global.add.f32 %f1, [%rd1], %f2;\n\tred.global.add.f32 [%rd1], %f2;\n\tld.global.nc.f32 %f1, [%rd1];\n\
                   \tcvt.rn.f32.f64 %f1, %fd1;\n\tmov.f32 %f1, 0f3F800000;\n\ttanh.approx.f32 %f1, %f2;\n\t// add.f32 in a comment\n\
                   \tmad.lo.s32 %r1, %r2, %r3, %r4;\n\tadd.f32x2 %rd1, %rd2, %rd3;\n.func add.f32_like()\n\tadd.f32";
        assert_eq!(flush_denormals(ptx), ptx);
    }

    const TWO_KERNELS: &str = ".visible .func  (.param .b32 func_retval0) shared_helper(\n\t.param .b32 p\n)\n{\n\tmul.f32 %f1, %f2, %f3;\n}\n\
        .func  (.param .b32 func_retval0) ftz_only_helper(\n\t.param .b32 p\n)\n{\n\tsub.f32 %f1, %f2, %f3;\n\tcall.uni (retval0), leaf, (param0);\n}\n\
        .func  (.param .b32 func_retval0) leaf(\n\t.param .b32 p\n)\n{\n\tfma.rn.f32 %f1, %f2, %f3, %f4;\n}\n\
        .visible .entry flushing(\n\t.param .u64 a\n)\n{\n\t// begin inline asm\n\t// ferrocuda.ftz\n\t// end inline asm\n\tadd.f32 %f1, %f2, %f3;\n\
        \t{ // callseq 0, 0\n\tcall.uni (retval0), shared_helper, (param0);\n\t} // callseq 0\n\tcall.uni (retval0), ftz_only_helper, (param0);\n\tret;\n}\n\
        .visible .entry ieee(\n\t.param .u64 a\n)\n{\n\tadd.f32 %f1, %f2, %f3;\n\tcall.uni (retval0), shared_helper, (param0);\n\tret;\n}\n";

    /// `#[kernel(ftz)]`: the marked entry and the `.func`s only marked entries reach flush; an
    /// unmarked kernel and a `.func` it shares with a marked one keep IEEE arithmetic.
    #[test]
    fn s24_only_marked_kernels_and_their_own_funcs_flush() {
        let out = flush_denormals_in_marked_kernels(TWO_KERNELS);
        let function = |name: &str| {
            let start = out.find(&format!("{name}(")).unwrap();
            out[start..start + out[start..].find("\n}\n").unwrap()].to_string()
        };
        assert!(function("flushing").contains("add.ftz.f32"), "{out}");
        assert!(function("ftz_only_helper").contains("sub.ftz.f32"), "{out}");
        assert!(function("leaf").contains("fma.rn.ftz.f32"), "{out}");
        assert!(function("shared_helper").contains("\tmul.f32"), "{out}");
        assert!(function("ieee").contains("\tadd.f32"), "{out}");
        assert_eq!(out.matches(".ftz.").count(), 3, "{out}");
        // Without a marked kernel nothing changes.
        let unmarked = TWO_KERNELS.replace("// ferrocuda.ftz", "// something else");
        assert_eq!(flush_denormals_in_marked_kernels(&unmarked), unmarked);
    }
}
