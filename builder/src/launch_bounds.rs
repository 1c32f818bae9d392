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
//!
//! The same pass handles `ferrocuda_device::cluster_dims!` (and `#[kernel(cluster_dims(..))]`):
//! a marker `__ferrocuda_cluster_dims__<kernel>` of three u32 becomes `.reqnctapercluster x, y, z`
//! (CUDA C++'s `__cluster_dims__`), after the launch bounds of the same entry.
//!
//! And an entry whose body holds the comment `// ferrocuda.reqntid N` (written by the device
//! crate's `thread::__assume_reqntid::<N>`, which `#[kernel(reqntid(n))]` calls and which also
//! tells the compiler the block is `(N, 1, 1)`) gets `.reqntid N, 1, 1` whatever the markers
//! say: the assumption and the directive that makes it true come from one call, so a kernel
//! crate that renamed the marker away cannot keep the one without the other (session 21).

use crate::ptx_text::{function_header, is_identifier_char};

/// The prefix of the launch-bounds marker global's name; the kernel's name follows it.
pub const MARKER_PREFIX: &str = "__ferrocuda_launch_bounds__";
/// The comment `ferrocuda_device::thread::__assume_reqntid::<N>` writes into an entry's body;
/// `N` follows it.
pub const REQNTID_COMMENT: &str = "// ferrocuda.reqntid ";

/// The prefix of the cluster-dims marker (`ferrocuda_device::cluster_dims!`): three u32, the
/// cluster's x, y and z, become `.reqnctapercluster x, y, z`.
pub const CLUSTER_MARKER_PREFIX: &str = "__ferrocuda_cluster_dims__";

/// One kernel's bounds, read from its marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bounds {
    threads: u32,
    min_blocks: u32,
    required: bool,
}

/// The directives one kernel gets.
#[derive(Debug, Clone, Copy, Default)]
struct Directives {
    bounds: Option<Bounds>,
    cluster: Option<[u32; 3]>,
}

impl Directives {
    /// The directive lines, in the order the PTX ISA lists them.
    fn text(&self) -> String {
        let mut text = String::new();
        if let Some(b) = self.bounds {
            if b.required {
                text += &format!(".reqntid {}, 1, 1\n", b.threads);
            } else {
                text += &format!(".maxntid {}, 1, 1\n", b.threads);
            }
            if b.min_blocks > 0 {
                text += &format!(".minnctapersm {}\n", b.min_blocks);
            }
        }
        if let Some([x, y, z]) = self.cluster {
            text += &format!(".reqnctapercluster {x}, {y}, {z}\n");
        }
        text
    }
}

/// Rewrites `ptx`: each kernel with a launch-bounds or cluster-dims marker gets its
/// directives; the markers are removed. PTX without markers is returned unchanged.
pub fn apply_launch_bounds(ptx: &str) -> String {
    if !ptx.contains(MARKER_PREFIX) && !ptx.contains(CLUSTER_MARKER_PREFIX) && !ptx.contains(REQNTID_COMMENT) {
        return ptx.to_string();
    }
    let mut directives: Vec<(String, Directives)> = Vec::new();
    /// The directives of `kernel`, added empty when it has none yet.
    fn of(directives: &mut Vec<(String, Directives)>, kernel: String) -> &mut Directives {
        let i = directives.iter().position(|(k, _)| *k == kernel).unwrap_or_else(|| {
            directives.push((kernel, Directives::default()));
            directives.len() - 1
        });
        &mut directives[i].1
    }
    let mut kept = Vec::new();
    for line in ptx.lines() {
        if let Some((kernel, [threads, min_blocks, kind])) = parse_marker(line, MARKER_PREFIX) {
            of(&mut directives, kernel).bounds = Some(Bounds { threads, min_blocks, required: kind == 1 });
        } else if let Some((kernel, dims)) = parse_marker(line, CLUSTER_MARKER_PREFIX) {
            of(&mut directives, kernel).cluster = Some(dims);
        } else {
            kept.push(line);
        }
    }
    // The entries whose bodies assume a block shape (`__assume_reqntid`): `.reqntid` from the
    // comment, replacing what a marker gave (a marker and the comment agree for `#[kernel]`).
    for (kernel, threads) in reqntid_comments(&kept) {
        let bounds = &mut of(&mut directives, kernel).bounds;
        let min_blocks = bounds.map_or(0, |b| b.min_blocks);
        *bounds = Some(Bounds { threads, min_blocks, required: true });
    }
    let mut out = String::with_capacity(ptx.len() + 64 * directives.len());
    let mut pending: Option<Directives> = None;
    for line in kept {
        let trimmed = line.trim_start();
        if let Some((name, true)) = function_header(trimmed) {
            pending = directives.iter().find(|(kernel, _)| *kernel == name).map(|(_, d)| *d);
        }
        // The entry's body starts at its first `{` line: the directives go right before it.
        if let Some(d) = pending
            && trimmed == "{"
        {
            out += &d.text();
            pending = None;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// `(entry, N)` for each `// ferrocuda.reqntid N` comment in an entry's body. Two different
/// counts in one entry give the larger (an entry the compiler was told two shapes of is the
/// author's own `unsafe`; the launch then fails its assumption of the other one).
fn reqntid_comments(lines: &[&str]) -> Vec<(String, u32)> {
    let mut found: Vec<(String, u32)> = Vec::new();
    let mut entry: Option<String> = None;
    for line in lines {
        let trimmed = line.trim_start();
        if let Some((name, is_entry)) = function_header(trimmed) {
            entry = is_entry.then_some(name);
        } else if let Some(count) = trimmed.strip_prefix(REQNTID_COMMENT)
            && let Some(name) = &entry
            && let Ok(threads) = count.trim().parse::<u32>()
        {
            match found.iter_mut().find(|(kernel, _)| kernel == name) {
                Some((_, known)) => *known = (*known).max(threads),
                None => found.push((name.clone(), threads)),
            }
        }
    }
    found
}

/// `(kernel, [three u32])` when `line` declares a marker global named `prefix<kernel>` (as
/// bytes or as 32-bit words).
fn parse_marker(line: &str, prefix: &str) -> Option<(String, [u32; 3])> {
    let start = line.find(prefix)?;
    let trimmed = line.trim_start();
    if !(trimmed.starts_with(".visible .global") || trimmed.starts_with(".global") || trimmed.starts_with(".visible .const") || trimmed.starts_with(".const")) {
        return None;
    }
    let rest = &line[start + prefix.len()..];
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
    Some((kernel, words.get(..3)?.try_into().ok()?))
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
    fn cluster_markers_become_reqnctapercluster_beside_launch_bounds() {
        let ptx = PTX.replace(
            ".visible .global .align 4 .u32 __ferrocuda_launch_bounds__exact[3] = {256, 0, 1};",
            ".visible .global .align 4 .u32 __ferrocuda_launch_bounds__exact[3] = {256, 0, 1};\n\
             .visible .global .align 4 .b8 __ferrocuda_cluster_dims__gemm[12] = {2, 0, 0, 0, 1, 0, 0, 0, 1};\n\
             .visible .global .align 4 .u32 __ferrocuda_cluster_dims__other[3] = {4, 2, 1};",
        );
        let out = apply_launch_bounds(&ptx);
        assert!(!out.contains(CLUSTER_MARKER_PREFIX) && !out.contains(MARKER_PREFIX), "{out}");
        assert!(out.contains("gemm_param_0\n)\n.maxntid 384, 1, 1\n.minnctapersm 1\n.reqnctapercluster 2, 1, 1\n{"), "{out}");
        assert!(out.contains(".entry exact()\n.reqntid 256, 1, 1\n{"), "{out}");
        assert!(out.contains(".entry other()\n.reqnctapercluster 4, 2, 1\n{"), "{out}");
        assert_eq!(out.matches(".reqnctapercluster").count(), 2);
    }

    /// Session 21: the entry's own `__assume_reqntid` comment gives `.reqntid`, with no marker
    /// (a kernel crate that renamed `launch_bounds!` away) and over a marker that says otherwise.
    #[test]
    fn s21_an_entry_that_assumes_its_block_shape_gets_reqntid_without_a_marker() {
        let ptx = PTX
            .replace(".entry other()\n{\n\tret;", ".entry other()\n{\n\t// begin inline asm\n\t// ferrocuda.reqntid 128\n\t// end inline asm\n\tret;")
            .replace(
                ".entry gemm(\n\t.param .u64 .ptr .align 1 gemm_param_0\n)\n{\n",
                ".entry gemm(\n\t.param .u64 .ptr .align 1 gemm_param_0\n)\n{\n\t// ferrocuda.reqntid 64\n",
            );
        let out = apply_launch_bounds(&ptx);
        assert!(out.contains(".entry other()\n.reqntid 128, 1, 1\n{"), "{out}");
        // The marker said `.maxntid 384` with a minimum of 1 block: the comment's count wins.
        assert!(out.contains("gemm_param_0\n)\n.reqntid 64, 1, 1\n.minnctapersm 1\n{"), "{out}");
        assert!(out.contains(".entry exact()\n.reqntid 256, 1, 1\n{"), "{out}");
        assert!(!out.contains(".maxntid"), "{out}");
        let alone = ".version 8.0\n.visible .entry k()\n{\n\t// ferrocuda.reqntid 32\n\tret;\n}\n";
        assert!(apply_launch_bounds(alone).contains(".entry k()\n.reqntid 32, 1, 1\n{"));
    }

    #[test]
    fn ptx_without_markers_is_unchanged() {
        let plain = ".version 8.0\n.visible .entry k()\n{\n\tret;\n}\n";
        assert_eq!(apply_launch_bounds(plain), plain);
    }
}
