//! `.pragma "nounroll"` where ptxas reads it: the first statement of its loop's header block.
//!
//! The device library marks loops that must stay rolled for ptxas (`unroll::rolled`, the round
//! loops of `unroll::counted`) with an inline-asm `.pragma "nounroll"` at the top of the loop
//! body, as nvcc marks the loops it unrolled itself. In rustc's PTX (line tables on, the
//! builder's default) the block's label is followed by a debug label (`$L__tmpN:`) and a `.loc`
//! before the pragma, and ptxas 13.0 then treats the pragma as belonging to another block and
//! unrolls the loop anyway (session 23: `unroll::counted::<4>`'s round loop unrolled a second
//! time, by 4, 119 `LDG` in a kernel where the pragma right after the label gives 35; nvcc's PTX
//! without its pragmas 204 `LDG` against 84 with them). [`hoist_nounroll_pragmas`] moves each
//! such pragma up to directly after its block's label, past debug labels, `.loc` lines and
//! comments only (none of them an instruction, so nothing else moves).

/// `ptx` with every `.pragma "nounroll";` that follows a block label (`$L__BB..:`) with only debug
/// labels, `.loc`/`.file` lines, comments and blank lines between moved to directly after that
/// label. Pragmas after an instruction, or in a block without a label, are left where they are.
pub(crate) fn hoist_nounroll_pragmas(ptx: &str) -> String {
    let mut out: Vec<&str> = Vec::with_capacity(ptx.lines().count());
    // Index in `out` of the current block's label while only trivia has followed it.
    let mut label_at: Option<usize> = None;
    for line in ptx.lines() {
        let t = line.trim();
        if t == ".pragma \"nounroll\";" {
            if let Some(at) = label_at {
                out.insert(at + 1, line);
                // The pragma is now the block's first statement; what follows stays trivia-only
                // after it (a second pragma goes after the first).
                label_at = Some(at + 1);
                continue;
            }
            out.push(line);
            continue;
        }
        if is_block_label(t) {
            label_at = Some(out.len());
        } else if !is_trivia(t) {
            label_at = None;
        }
        out.push(line);
    }
    let mut text = out.join("\n");
    if ptx.ends_with('\n') {
        text.push('\n');
    }
    text
}

/// A basic block's label as LLVM's NVPTX back end names them (`$L__BB3_7:`).
fn is_block_label(t: &str) -> bool {
    t.starts_with("$L__BB") && t.ends_with(':')
}

/// Lines that are no statement of the block: debug labels (`$L__tmp12:`, referenced only by the
/// debug sections), `.loc`/`.file` directives, comments (LLVM's `// begin inline asm` markers)
/// and blank lines.
fn is_trivia(t: &str) -> bool {
    t.is_empty() || t.starts_with("//") || t.starts_with(".loc") || t.starts_with(".file") || (t.starts_with("$L__tmp") && t.ends_with(':'))
}

#[cfg(test)]
mod tests {
    use super::hoist_nounroll_pragmas;

    /// rustc's shape (line tables on): label, debug label, `.loc`, the inline-asm markers around
    /// the pragma. The pragma moves to right after the label; nothing else changes order.
    #[test]
    fn a_pragma_after_debug_labels_moves_to_its_block_label() {
        let ptx = "\tmov.b32 %r1, 0;\n$L__BB17_6:\n$L__tmp781:\n\t.loc\t31 205 9\n\t// begin inline asm\n\t.pragma \"nounroll\";\n\t// end inline asm\n$L__tmp782:\n\tld.global.nc.b32 %r14, [%rd60+-8];\n\t@%p10 bra $L__BB17_6;\n";
        let want = "\tmov.b32 %r1, 0;\n$L__BB17_6:\n\t.pragma \"nounroll\";\n$L__tmp781:\n\t.loc\t31 205 9\n\t// begin inline asm\n\t// end inline asm\n$L__tmp782:\n\tld.global.nc.b32 %r14, [%rd60+-8];\n\t@%p10 bra $L__BB17_6;\n";
        assert_eq!(hoist_nounroll_pragmas(ptx), want);
    }

    /// A pragma after an instruction of its block, or in a block without a label, stays; a
    /// module without pragmas is unchanged byte for byte.
    #[test]
    fn a_pragma_after_an_instruction_or_without_a_label_stays() {
        let after_instruction = "$L__BB1_2:\n\tadd.s32 %r1, %r1, 1;\n\t.pragma \"nounroll\";\n";
        assert_eq!(hoist_nounroll_pragmas(after_instruction), after_instruction);
        let no_label = "{\n\t.loc\t1 2 3\n\t.pragma \"nounroll\";\n}\n";
        assert_eq!(hoist_nounroll_pragmas(no_label), no_label);
        let none = "$L__BB0_1:\n$L__tmp1:\n\tret;\n}";
        assert_eq!(hoist_nounroll_pragmas(none), none);
    }

    /// Already first: unchanged. Two pragmas in one header keep their order.
    #[test]
    fn pragmas_already_first_or_two_in_a_row_keep_their_order() {
        let first = "$L__BB2_3:\n\t.pragma \"nounroll\";\n$L__tmp9:\n\tret;\n";
        assert_eq!(hoist_nounroll_pragmas(first), first);
        let two = "$L__BB2_3:\n$L__tmp9:\n\t.pragma \"nounroll\";\n\t.loc\t1 1 1\n\t.pragma \"nounroll\";\n\tret;\n";
        let want = "$L__BB2_3:\n\t.pragma \"nounroll\";\n\t.pragma \"nounroll\";\n$L__tmp9:\n\t.loc\t1 1 1\n\tret;\n";
        assert_eq!(hoist_nounroll_pragmas(two), want);
    }
}
