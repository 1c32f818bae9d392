//! SASS (the GPU's machine code) of one kernel, through NVIDIA's `nvdisasm` or `cuobjdump`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A disassembler that was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disassembler {
    /// `nvdisasm` (cubins only; prints every function, `inspect` keeps the kernel's sections).
    Nvdisasm(PathBuf),
    /// `cuobjdump -sass` (selects the kernel by name itself).
    Cuobjdump(PathBuf),
}

/// Finds `nvdisasm` (`FERROCUDA_NVDISASM`, `PATH`, beside `ptxas`, `$CUDA_PATH/bin`,
/// `$CUDA_HOME/bin`, `/usr/local/cuda/bin`), then `cuobjdump` in the same places.
pub fn find_disassembler(ptxas: Option<&Path>) -> Option<Disassembler> {
    if let Some(explicit) = std::env::var_os("FERROCUDA_NVDISASM") {
        return Some(Disassembler::Nvdisasm(explicit.into()));
    }
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    // A ptxas that is a symlink into a pip-installed CUDA (nvidia/cu13/bin) has its siblings there.
    if let Some(ptxas) = ptxas {
        let real = ptxas.canonicalize().unwrap_or_else(|_| ptxas.to_path_buf());
        dirs.extend(real.parent().map(Path::to_path_buf));
        dirs.extend(ptxas.parent().map(Path::to_path_buf));
    }
    for var in ["CUDA_PATH", "CUDA_HOME"] {
        dirs.extend(std::env::var_os(var).map(|root| PathBuf::from(root).join("bin")));
    }
    dirs.push("/usr/local/cuda/bin".into());
    let find = |name: &str| dirs.iter().map(|d| d.join(name)).find(|p| p.is_file());
    find("nvdisasm").map(Disassembler::Nvdisasm).or_else(|| find("cuobjdump").map(Disassembler::Cuobjdump))
}

/// Disassembles `kernel` from `cubin`, with source lines (`//## File "...", line N`) where the
/// cubin has line information. Returns the listing, or what the tool printed on failure.
pub fn disassemble(tool: &Disassembler, cubin: &Path, kernel: &str) -> Result<String, String> {
    let output = match tool {
        Disassembler::Nvdisasm(path) => Command::new(path).args(["-c", "-g"]).arg(cubin).output(),
        Disassembler::Cuobjdump(path) => Command::new(path).args(["-sass", "-fun", kernel]).arg(cubin).output(),
    };
    let output = output.map_err(|e| format!("cannot run the disassembler: {e}"))?;
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).into_owned());
    }
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    match tool {
        Disassembler::Nvdisasm(_) => kernel_sections(&text, kernel).ok_or_else(|| format!("no kernel `{kernel}` in {}", cubin.display())),
        Disassembler::Cuobjdump(_) => Ok(text),
    }
}

/// The `.text.<kernel>` section of an `nvdisasm` listing, plus the sections of the functions
/// it calls that were not inlined (`CALL.REL ... \`(name)` or `CALL.ABS ... name`).
pub fn kernel_sections(listing: &str, kernel: &str) -> Option<String> {
    let sections = split_sections(listing);
    let mut wanted = vec![kernel.to_string()];
    let mut out = String::new();
    let mut i = 0;
    while i < wanted.len() {
        let name = wanted[i].clone();
        i += 1;
        let Some((_, body)) = sections.iter().find(|(n, _)| *n == name) else { continue };
        for callee in callees(body) {
            if !wanted.contains(&callee) && sections.iter().any(|(n, _)| *n == callee) {
                wanted.push(callee);
            }
        }
        out += body;
    }
    (!out.is_empty()).then_some(out)
}

/// `(function name, section text)` for each `.section .text.<name>` of the listing.
fn split_sections(listing: &str) -> Vec<(String, String)> {
    let mut sections: Vec<(String, String)> = Vec::new();
    for line in listing.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with(".section") {
            let name = trimmed.split_whitespace().nth(1).and_then(|s| s.split(',').next()).unwrap_or_default();
            if let Some(function) = name.strip_prefix(".text.") {
                sections.push((function.to_string(), String::new()));
                continue;
            }
            sections.push((String::new(), String::new()));
            continue;
        }
        if let Some((_, body)) = sections.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    sections.retain(|(name, _)| !name.is_empty());
    for (name, body) in &mut sections {
        *body = format!("\t.section\t.text.{name}\n{body}");
    }
    sections
}

fn callees(body: &str) -> Vec<String> {
    body.lines()
        .filter(|l| l.contains("CALL."))
        .filter_map(|l| {
            let start = l.find("`(")? + 2;
            let end = l[start..].find(')')? + start;
            Some(l[start..end].to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LISTING: &str = "\t.headerflags\t@\"EF_CUDA_SM90\"\n\
\t.section\t.text.saxpy,\"ax\",@progbits\n\
saxpy:\n\
        /*0000*/                   LDC R1, c[0x0][0x28] ;\n\
        /*0010*/                   CALL.REL.NOINC `(helper) ;\n\
\t.section\t.nv.info.saxpy,\"\",@\"SHT_CUDA_INFO\"\n\
\t.byte 0x04\n\
\t.section\t.text.other,\"ax\",@progbits\n\
other:\n\
        /*0000*/                   EXIT ;\n\
\t.section\t.text.helper,\"ax\",@progbits\n\
helper:\n\
        /*0000*/                   RET.REL.NODEC R20 `(saxpy) ;\n";

    #[test]
    fn keeps_the_kernel_and_its_callees() {
        let sass = kernel_sections(LISTING, "saxpy").unwrap();
        assert!(sass.contains("LDC R1") && sass.contains("helper:") && sass.contains("RET.REL"));
        assert!(!sass.contains("other:") && !sass.contains(".nv.info") && !sass.contains("0x04"));
        assert!(kernel_sections(LISTING, "missing").is_none());
    }
}
