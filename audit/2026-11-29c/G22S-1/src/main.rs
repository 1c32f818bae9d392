//! G22S-1: a kernel crate enables a nightly feature outside `KERNEL_CRATE_FEATURES`, through
//! the safe `KernelBuilder::cfg`. Prints REFUSED for the plain build (session 22's fix working)
//! and BUILT for the same crate built with the crafted cfg (the fix bypassed).
//!
//! Run (from this folder): `cargo run --release -- <scratch dir>` (default /tmp/g22s-1).

use std::path::PathBuf;

use ferrocuda_builder::{KernelBuilder, strip_ansi};

fn main() {
    let scratch = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "/tmp/g22s-1".into()));
    let krate = scratch.join("kernel");
    std::fs::create_dir_all(krate.join("src")).unwrap();
    std::fs::write(
        krate.join("Cargo.toml"),
        "[package]\nname = \"g22s1-kernel\"\nversion = \"0.0.0\"\nedition = \"2024\"\n[lib]\ncrate-type = [\"rlib\"]\n[workspace]\n",
    )
    .unwrap();
    // Safe code: no `unsafe` anywhere; `never_type` stands for any feature (`specialization`,
    // `rustc_attrs`, `lang_items`, ... : the ones session 22's note calls unsound or made to
    // get around the language's checks).
    std::fs::write(
        krate.join("src/lib.rs"),
        "#![no_std]\n#![forbid(unsafe_code)]\n#![feature(abi_ptx, never_type)]\n\
         #[panic_handler]\nfn p(_: &core::panic::PanicInfo) -> ! { loop {} }\n\
         pub fn never() -> Option<!> { None }\n",
    )
    .unwrap();
    let target = scratch.join("target");
    let plain = KernelBuilder::new(&krate).out_dir(&krate).target_dir(&target).build();
    match plain {
        Err(e) if strip_ansi(&e.to_string()).contains("not in the list of allowed features") => println!("plain build: REFUSED (E0725), as session 22 intends"),
        Err(e) => println!("plain build: failed otherwise:\n{}", strip_ansi(&e.to_string())),
        Ok(_) => println!("plain build: BUILT (the allow-list is not applied at all)"),
    }
    // The cfg string holds the unit separator: the inner cargo splits CARGO_ENCODED_RUSTFLAGS
    // on it, and RUSTFLAGS come after `cargo rustc -- <args>` on rustc's command line, so this
    // -Zallow-features replaces the builder's.
    let crafted =
        KernelBuilder::new(&krate).out_dir(&krate).target_dir(&target).cfg("g22s1\u{1f}-Zallow-features=abi_ptx,asm_experimental_arch,never_type").build();
    match crafted {
        Ok(_) => println!("crafted cfg: BUILT: a feature outside KERNEL_CRATE_FEATURES was enabled by the kernel crate"),
        Err(e) => println!("crafted cfg: failed:\n{}", strip_ansi(&e.to_string())),
    }
}
