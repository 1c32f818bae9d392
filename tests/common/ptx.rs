//! Reading PTX text in tests: one kernel's body and its instructions' opcodes. Included by the
//! tests that need it (`#[path = "common/ptx.rs"] mod ptx_text;`).
#![allow(dead_code)]

/// The body of `.entry name` in `ptx`, up to its closing brace.
///
/// # Panics
/// When `ptx` has no such entry, naming it.
pub fn entry_body<'p>(ptx: &'p str, name: &str) -> &'p str {
    let start = ptx.find(&format!(".entry {name}(")).unwrap_or_else(|| panic!("no .entry {name} in the PTX"));
    let end = start + ptx[start..].find("\n}").expect("an entry ends with a closing brace");
    &ptx[start..end]
}

/// The opcodes of the body's instructions (`@%p1 ld.global.cs.b32 %r1, [%rd2];` gives
/// `ld.global.cs.b32`), inline-asm instructions included.
pub fn opcodes(body: &str) -> Vec<&str> {
    body.lines()
        .map(str::trim)
        .filter(|line| {
            !line.is_empty() && !line.starts_with("//") && !line.starts_with('.') && !line.ends_with(':') && !line.starts_with('{') && !line.starts_with('}')
        })
        .map(|line| {
            let mut words = line.split_whitespace();
            let first = words.next().unwrap_or("");
            if first.starts_with('@') { words.next().unwrap_or("") } else { first }
        })
        .map(|op| op.trim_end_matches(';'))
        .collect()
}

/// The SASS listing (`nvdisasm -c`) of `cubin`, written under `target/test-scratch/<scratch>`,
/// or `None` (printed) without nvdisasm.
pub fn sass_listing(cubin: &[u8], scratch: &str) -> Option<String> {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/test-scratch").join(scratch);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("kernels.cubin");
    std::fs::write(&path, cubin).unwrap();
    let output = ["nvdisasm", "/usr/local/cuda/bin/nvdisasm"]
        .iter()
        .find_map(|tool| std::process::Command::new(tool).arg("-c").arg(&path).output().ok().filter(|o| o.status.success()));
    match output {
        Some(output) => Some(String::from_utf8_lossy(&output.stdout).into_owned()),
        None => {
            eprintln!("SKIPPED the SASS checks: nvdisasm not found");
            None
        }
    }
}

/// The SASS of `kernel` in a listing of [`sass_listing`].
///
/// # Panics
/// When the listing has no such function, naming it.
pub fn sass_function<'l>(listing: &'l str, kernel: &str) -> &'l str {
    let start = listing.find(&format!(".text.{kernel}:")).unwrap_or_else(|| panic!("no SASS for {kernel}"));
    let rest = &listing[start..];
    &rest[..rest[1..].find(".text.").map(|e| e + 1).unwrap_or(rest.len())]
}

/// The SASS instructions of a function listing, each as its opcode with modifiers and its
/// operands (`("STS.128", "[UR4+0x10], R4")`); `@!PT` padding left out, guards dropped.
pub fn sass_instructions(listing: &str) -> Vec<(&str, &str)> {
    listing
        .lines()
        .filter(|line| !line.contains("@!PT"))
        .filter_map(|line| line.split("*/").nth(1))
        .map(|rest| rest.trim().trim_end_matches(';').trim())
        .map(|rest| if rest.starts_with('@') { rest.split_once(' ').map_or("", |(_, r)| r.trim()) } else { rest })
        .filter(|rest| !rest.is_empty())
        .map(|rest| rest.split_once(' ').unwrap_or((rest, "")))
        .collect()
}
