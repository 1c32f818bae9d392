// U6: the driver trusts a cubin's contents (a malformed one crashes inside the driver), so
// loading one is `unsafe` with a contract.
use ferrocuda::{Context, JitOptions, Module};

fn main() -> ferrocuda::Result<()> {
    let context = Context::primary(0)?;
    let _module = Module::load_binary(&context, "m", b"\x7fELF", &JitOptions::new())?;
    Ok(())
}
