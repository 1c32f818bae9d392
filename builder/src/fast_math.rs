//! Fast math's divisions flush denormals, as nvcc's `--use_fast_math` does (it implies
//! `-ftz=true`): under `KernelBuilder::fast_math(true)`, LLVM lowers `f32` `x / y` to
//! `div.approx.f32` and `1.0 / y` to `rcp.approx.f32` (`-nvptx-prec-divf32=0`), and it would
//! write the `.ftz` forms only for a function whose `denormal-fp-math-f32` is `preserve-sign`,
//! which rustc cannot ask for. Without `.ftz`, ptxas wraps each in a denormal range check and a
//! rescaling (`FSETP.GEU`, `FSEL` and two `FMUL` around the `MUFU.RCP`), where nvcc's are the
//! bare `MUFU.RCP` (and `FMUL`): llm.c's GELU backward, eight `1.0f / (c * c)` a thread, ran at
//! 0.85x nvcc's with them (issue 30, bench/ports2/RESULTS.md). So the builder gives them the
//! `.ftz` nvcc gives them, in fast-math builds only.

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
}
