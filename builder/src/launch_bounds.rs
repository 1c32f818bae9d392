//! Launch bounds (`.maxntid`, `.minnctapersm`, `.reqntid`) for kernels, by post-processing the
//! PTX: rustc has no attribute for them, so the device library's
//! `ferrocuda_device::launch_bounds!` (and `#[kernel(launch_bounds(..))]`) emits a marker global
//!
//! ```text
//! .visible .global .align 4 .b8 __ferrocuda_launch_bounds__<kernel>[12] = {<threads u32 LE>, <min blocks>, <kind>};
//! ```
//!
//! and [`apply_launch_bounds`] turns it into the directives of `<kernel>`'s `.entry` and
//! removes the marker. `kind` 0 is `.maxntid threads, 1, 1` (plus `.minnctapersm min_blocks`
//! when it is not 0), 1 is `.reqntid threads, 1, 1` (the block size must be exactly that).
//! With a bound ptxas caps registers at `65536 / (threads * min_blocks)` (rounded down to its
//! allocation granularity), as nvcc does for `__launch_bounds__`; `setmaxnreg` needs it.

use crate::ptx_text::{function_header, is_identifier_char};

/// The prefix of the marker global's name; the kernel's name follows it.
pub const MARKER_PREFIX: &str = "__ferrocuda_launch_bounds__";

/// One kernel's bounds, read from its marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bounds {
    threads: u32,
    min_blocks: u32,
    required: bool,
}

/// Rewrites `ptx`: each kernel with a launch-bounds marker gets its directives; the markers
/// are removed. PTX without markers is returned unchanged.
pub fn apply_launch_bounds(ptx: &str) -> String {
    if !ptx.contains(MARKER_PREFIX) {
        return ptx.to_string();
    }
    let mut bounds = Vec::new();
    let mut kept = Vec::new();
    for line in ptx.lines() {
        match parse_marker(line) {
            Some((kernel, b)) => bounds.push((kernel, b)),
            None => kept.push(line),
        }
    }
    let mut out = String::with_capacity(ptx.len() + 64 * bounds.len());
    let mut pending: Option<Bounds> = None;
    for line in kept {
        let trimmed = line.trim_start();
        if let Some((name, true)) = function_header(trimmed) {
            pending = bounds.iter().find(|(kernel, _)| *kernel == name).map(|(_, b)| *b);
        }
        // The entry's body starts at its first `{` line: the directives go right before it.
        if let Some(b) = pending
            && trimmed == "{"
        {
            if b.required {
                out += &format!(".reqntid {}, 1, 1\n", b.threads);
            } else {
                out += &format!(".maxntid {}, 1, 1\n", b.threads);
            }
            if b.min_blocks > 0 {
                out += &format!(".minnctapersm {}\n", b.min_blocks);
            }
            pending = None;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// `(kernel, bounds)` when `line` declares a marker global (as bytes or as 32-bit words).
fn parse_marker(line: &str) -> Option<(String, Bounds)> {
    let start = line.find(MARKER_PREFIX)?;
    let trimmed = line.trim_start();
    if !(trimmed.starts_with(".visible .global") || trimmed.starts_with(".global") || trimmed.starts_with(".visible .const") || trimmed.starts_with(".const")) {
        return None;
    }
    let rest = &line[start + MARKER_PREFIX.len()..];
    let kernel: String = rest.chars().take_while(|&c| is_identifier_char(c)).collect();
    let mut values: Vec<u64> = line.split_once('{')?.1.split_once('}')?.0.split(',').map(|v| v.trim().parse().ok()).collect::<Option<_>>()?;
    // LLVM leaves trailing zero bytes out of initialisers (`{128, 1, 0, 0, 1}` for 384, 1, 0).
    values.resize(values.len().max(12), 0);
    let words: Vec<u32> = if line.contains(".b8 ") || line.contains(".u8 ") {
        // Bytes, little-endian words.
        values.chunks(4).map(|c| c.iter().rev().fold(0u32, |acc, &b| (acc << 8) | b as u32)).collect()
    } else {
        values.iter().map(|&v| v as u32).collect()
    };
    let [threads, min_blocks, kind] = words.get(..3)?.try_into().ok()?;
    Some((kernel, Bounds { threads, min_blocks, required: kind == 1 }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX: &str = "\
.version 8.3
.target sm_90a
.visible .global .align 4 .b8 __ferrocuda_launch_bounds__gemm[12] = {128, 1, 0, 0, 1};
.visible .global .align 4 .u32 __ferrocuda_launch_bounds__exact[3] = {256, 0, 1};

.visible .entry gemm(
\t.param .u64 .ptr .align 1 gemm_param_0
)
{
\tret;
}
.visible .entry exact()
{
\tret;
}
.visible .entry other()
{
\tret;
}
";

    #[test]
    fn launch_bounds_markers_become_entry_directives() {
        let out = apply_launch_bounds(PTX);
        assert!(!out.contains(MARKER_PREFIX), "{out}");
        assert!(out.contains("gemm_param_0\n)\n.maxntid 384, 1, 1\n.minnctapersm 1\n{"), "{out}");
        assert!(out.contains(".entry exact()\n.reqntid 256, 1, 1\n{"), "{out}");
        assert!(out.contains(".entry other()\n{"), "{out}");
        assert_eq!(out.matches(".maxntid").count() + out.matches(".reqntid").count(), 2);
    }

    #[test]
    fn ptx_without_markers_is_unchanged() {
        let plain = ".version 8.0\n.visible .entry k()\n{\n\tret;\n}\n";
        assert_eq!(apply_launch_bounds(plain), plain);
    }
}
