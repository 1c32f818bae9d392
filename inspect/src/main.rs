//! `ferrocuda-inspect`: see the crate docs of `ferrocuda_inspect` and docs/inspect.md.

fn main() {
    std::process::exit(ferrocuda_inspect::cli::main(std::env::args().skip(1).collect()));
}
