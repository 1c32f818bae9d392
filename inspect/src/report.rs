//! The resource table: one row per kernel, and the difference of two tables.

use std::fmt::Write as _;

use ferrocuda_builder::KernelResources;

use crate::occupancy::{KernelNeeds, Occupancy, SmLimits, occupancy};
use crate::ptx::{LaunchBounds, PtxModule};

/// Everything `inspect` reports about one kernel.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelRow {
    /// The kernel's symbol.
    pub kernel: String,
    /// `ptxas -v`'s figures (`None` when `ptxas` did not report this kernel).
    pub resources: Option<KernelResources>,
    /// Whether the kernel uses dynamic shared memory (sized at launch).
    pub dynamic_shared: bool,
    /// Launch bounds from the PTX.
    pub bounds: LaunchBounds,
    /// The block size the occupancy is computed for.
    pub block: u32,
    /// Theoretical occupancy at `block` threads (`None` without figures or SM limits).
    pub occupancy: Option<Occupancy>,
}

/// The rows of every kernel in `module`, in module order.
///
/// `block` is the block size for the occupancy (a kernel with `.reqntid` uses its own);
/// `dynamic_shared` is the dynamic shared memory a launch of a kernel that uses it would ask
/// for.
pub fn rows(module: &PtxModule, resources: &[KernelResources], limits: Option<&SmLimits>, block: u32, dynamic_shared: u32) -> Vec<KernelRow> {
    module
        .kernels()
        .map(|kernel| {
            let resources = resources.iter().find(|r| r.kernel == kernel.name).cloned();
            let bounds = module.launch_bounds(&kernel.name);
            let uses_dynamic = module.uses_dynamic_shared(&kernel.name);
            let block = bounds.required_threads.map_or(block, |[x, y, z]| x * y * z);
            let occupancy = match (&resources, limits) {
                (Some(r), Some(limits)) => Some(match bounds.max_block_threads() {
                    Some(max) if block > max => Occupancy::CannotLaunch("block over the kernel's launch bounds"),
                    _ => occupancy(
                        limits,
                        KernelNeeds {
                            registers: r.registers,
                            static_shared: r.shared_bytes,
                            dynamic_shared: if uses_dynamic { dynamic_shared } else { 0 },
                            block_threads: block,
                        },
                    ),
                }),
                _ => None,
            };
            KernelRow { kernel: kernel.name.clone(), resources, dynamic_shared: uses_dynamic, bounds, block, occupancy }
        })
        .collect()
}

const HEADER: [&str; 8] = ["kernel", "regs", "spill st/ld", "smem", "local", "dyn smem", "bounds", "occupancy"];

fn cells(row: &KernelRow, dynamic_shared: u32) -> [String; 8] {
    let (regs, spills, smem, local) = match &row.resources {
        Some(r) => (r.registers.to_string(), format!("{}/{}", r.spill_stores, r.spill_loads), r.shared_bytes.to_string(), r.stack_frame.to_string()),
        None => ("?".into(), "?".into(), "?".into(), "?".into()),
    };
    let dynamic = if row.dynamic_shared { format!("yes ({dynamic_shared})") } else { "-".into() };
    let occupancy = row.occupancy.map_or("?".into(), |o| o.to_string());
    [row.kernel.clone(), regs, spills, smem, local, dynamic, row.bounds.to_string(), occupancy]
}

/// The table as text: a title line, a header and one aligned line per kernel.
pub fn format_table(title: &str, rows: &[KernelRow], dynamic_shared: u32) -> String {
    let lines: Vec<[String; 8]> = std::iter::once(HEADER.map(String::from)).chain(rows.iter().map(|r| cells(r, dynamic_shared))).collect();
    let mut out = format!("{title}\n");
    out += &aligned(&lines);
    out
}

fn aligned<const N: usize>(lines: &[[String; N]]) -> String {
    let widths: Vec<usize> = (0..N).map(|c| lines.iter().map(|l| l[c].chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for line in lines {
        let mut text = String::new();
        for (c, cell) in line.iter().enumerate() {
            // Numbers right-aligned, text left-aligned.
            let numeric = c > 0 && c < 5;
            if numeric {
                let _ = write!(text, "{cell:>w$}  ", w = widths[c]);
            } else {
                let _ = write!(text, "{cell:<w$}  ", w = widths[c]);
            }
        }
        out += text.trim_end();
        out.push('\n');
    }
    out
}

/// The kernels whose figures differ between `before` and `after`, and those only in one.
/// Returns the text and the number of kernels that differ.
pub fn format_diff(before: &[KernelRow], after: &[KernelRow], dynamic_shared: u32) -> (String, usize) {
    let mut lines: Vec<[String; 8]> = vec![HEADER.map(String::from)];
    let mut changed = 0;
    for a in before {
        let ca = cells(a, dynamic_shared);
        match after.iter().find(|b| b.kernel == a.kernel) {
            Some(b) => {
                let cb = cells(b, dynamic_shared);
                if ca != cb {
                    changed += 1;
                    let mut line = ca.clone();
                    for c in 1..8 {
                        if ca[c] != cb[c] {
                            line[c] = format!("{} -> {}", ca[c], cb[c]);
                        }
                    }
                    lines.push(line);
                }
            }
            None => {
                changed += 1;
                let mut line = ca;
                line[0] = format!("- {}", line[0]);
                lines.push(line);
            }
        }
    }
    for b in after.iter().filter(|b| !before.iter().any(|a| a.kernel == b.kernel)) {
        changed += 1;
        let mut line = cells(b, dynamic_shared);
        line[0] = format!("+ {}", line[0]);
        lines.push(line);
    }
    if changed == 0 {
        return (format!("no differences in {} kernels\n", before.len()), 0);
    }
    let mut out = aligned(&lines);
    let _ = writeln!(out, "{changed} of {} kernels differ (- only before, + only after)", before.len().max(after.len()));
    (out, changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resources(kernel: &str, registers: u32, shared_bytes: u32) -> KernelResources {
        KernelResources { kernel: kernel.into(), registers, shared_bytes, ..Default::default() }
    }

    const PTX: &str = ".version 8.0\n.target sm_90\n.extern .shared .align 16 .b8 dyn[];\n\
.visible .entry a()\n{\n\tret;\n}\n\
.visible .entry b()\n.maxntid 128, 1, 1\n{\n\tmov.u64 %rd1, dyn;\n\tret;\n}\n";

    #[test]
    fn rows_combine_ptxas_figures_bounds_and_occupancy() {
        let module = PtxModule::parse(PTX);
        let h100 = SmLimits::for_arch(90).unwrap();
        let rows = rows(&module, &[resources("a", 10, 0), resources("b", 128, 1024)], Some(&h100), 256, 4096);
        assert_eq!(rows.len(), 2);
        assert!(matches!(rows[0].occupancy, Some(Occupancy::Fits { blocks: 8, .. })));
        assert!(rows[1].dynamic_shared);
        assert_eq!(rows[1].occupancy, Some(Occupancy::CannotLaunch("block over the kernel's launch bounds")));
        let table = format_table("t", &rows, 4096);
        assert!(table.contains("max=128") && table.contains("yes (4096)") && table.contains("100% (8 blk, warps)"), "{table}");
    }

    #[test]
    fn diff_shows_changed_added_and_removed_kernels() {
        let module = PtxModule::parse(PTX);
        let before = rows(&module, &[resources("a", 10, 0), resources("b", 40, 0)], None, 128, 0);
        let mut after = rows(&module, &[resources("a", 12, 0), resources("b", 40, 0)], None, 128, 0);
        assert_eq!(format_diff(&before, &before, 0).1, 0);
        after[1].kernel = "c".into();
        let (text, changed) = format_diff(&before, &after, 0);
        assert_eq!(changed, 3, "{text}");
        assert!(text.contains("10 -> 12") && text.contains("- b") && text.contains("+ c"), "{text}");
    }
}
