//! `cargo ferrocuda-inspect ...`: cargo passes the subcommand's name as the first argument.

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "ferrocuda-inspect") {
        args.remove(0);
    }
    std::process::exit(ferrocuda_inspect::cli::main(args));
}
