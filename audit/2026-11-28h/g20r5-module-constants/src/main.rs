//! G20R-5: `Module::global` + `Global::write` (safe) rewrite the compiler's read-only data in a
//! `#[kernel]` module: here the `core::panic::Location` of a safe kernel's bounds check. Only
//! ferrocuda's own `__ferrocuda_*` globals are refused (G14-1); the rest of the module's
//! `.global` data (locations, string literals, constant tables, vtables) is data that Rust
//! compiled the kernel's code to trust as immutable. With the location's file pointer aimed at
//! a buffer the launch was never given, the safe kernel's panic copies that buffer's bytes into
//! the panic report: a read of memory outside the launch, from safe calls.
//!
//! The one `unsafe` is `Module::load_binary` of the crate's own cubin, made by the project's
//! builder and unaltered, whose kernels have their launchers' signatures (its contract, met).
//! Exit 0 = REPRODUCED, 1 = not, 2 = SKIPPED (no GPU).

use ferrocuda_host::{Context, Device, DeviceBuffer, Error, JitOptions, LaunchConfig, Module, Stream};
use test_kernels::square_checked;

const SECRET: &[u8; 32] = b"SECRET-BYTES-NOT-LENT-TO-KERNEL!";

/// `(name, line_col word)` of every `.global .u64 NAME[3] = {generic(STR), LEN, X}` whose STR
/// is `file`: the panic locations in that file.
fn locations(ptx: &str, file: &str) -> Vec<(String, u64)> {
    let mut strings = std::collections::HashMap::new();
    for line in ptx.lines().filter(|l| l.starts_with(".global .align 1 .b8 ")) {
        let Some((head, body)) = line.split_once(" = {") else { continue };
        let name = head.trim_start_matches(".global .align 1 .b8 ").split('[').next().unwrap().to_string();
        let bytes: Vec<u8> = body.trim_end_matches("};").split(',').filter_map(|b| b.trim().parse().ok()).collect();
        strings.insert(name, String::from_utf8_lossy(&bytes).trim_end_matches('\0').to_string());
    }
    let mut out = Vec::new();
    for line in ptx.lines().filter(|l| l.starts_with(".global .align 8 .u64 ") && l.contains("[3] = {generic(")) {
        let name = line.trim_start_matches(".global .align 8 .u64 ").split('[').next().unwrap().to_string();
        let inner = line.split("{generic(").nth(1).unwrap();
        let target = inner.split(')').next().unwrap();
        let rest: Vec<&str> = inner.split("),").nth(1).unwrap_or("").trim_end_matches("};").split(',').map(str::trim).collect();
        if strings.get(target).is_some_and(|s| s == file)
            && let Some(word) = rest.get(1).and_then(|w| w.parse::<u64>().ok())
        {
            out.push((name, word));
        }
    }
    out
}

fn main() {
    if !matches!(Device::count(), Ok(n) if n >= 1) {
        println!("SKIPPED g20r5: no GPU");
        std::process::exit(2);
    }
    let context = Context::primary(0).unwrap();
    let stream = Stream::new(&context).unwrap();
    let arch = context.device().arch().unwrap();
    let kernels = &test_kernels::KERNELS;
    let (Some(ptx), Some(cubin)) = (kernels.ptx_for(arch), kernels.cubin_for(arch)) else {
        println!("SKIPPED g20r5: no sm_{arch} image of test-kernels");
        std::process::exit(2);
    };
    // SAFETY: the crate's own cubin, made by the project's builder (ptxas) and not altered since;
    // every kernel in it was built by `#[kernel]` and has its launchers' signature (and the
    // fingerprint `launch_in` checks): `Module::load_binary`'s contract.
    let module = unsafe { Module::load_binary(&context, "test_kernels", cubin, &JitOptions::new()) }.unwrap();

    let secret = DeviceBuffer::from_slice(&context, SECRET).unwrap();
    let address = secret.as_device_ptr().address();
    let found = locations(ptx, "tests/kernels/src/lib.rs");
    println!("sm_{arch}: {} panic locations of tests/kernels/src/lib.rs in the module", found.len());
    let mut written = 0;
    for (name, word) in &found {
        match module.global::<[u64; 3]>(name) {
            // Safe: a global of a loaded module, of its exact size, not a `__ferrocuda_` one.
            Ok(global) => match global.write(&[address, SECRET.len() as u64, *word]) {
                Ok(()) => written += 1,
                Err(e) => println!("write {name}: {e}"),
            },
            Err(e) => println!("global {name}: {e}"),
        }
    }
    println!("rewrote {written} of them to point at a buffer of the program's that no launch is given");

    // The safe kernel's own bounds check panics (64 inputs, 40 outputs), as in tests/gpu_fault.rs.
    let x = DeviceBuffer::from_slice(&context, &(0..64u32).collect::<Vec<_>>()).unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(&context, 40).unwrap();
    square_checked::launch_in(&module, &stream, LaunchConfig::from((2u32, 32u32)), &x, &mut out).unwrap();
    match stream.synchronize() {
        Err(Error::KernelPanic { report, .. }) => {
            println!("panic report: kernel `{}`, file {:?}, line {}", report.kernel, report.file, report.line);
            if report.file.as_bytes().starts_with(&SECRET[..16]) {
                println!("REPRODUCED g20r5: the safe kernel's panic read {} bytes of a buffer outside its launch (the report's file name)", report.file.len());
                std::process::exit(0);
            }
        }
        other => println!("synchronize: {other:?}"),
    }
    println!("NOT REPRODUCED g20r5");
    std::process::exit(1);
}
