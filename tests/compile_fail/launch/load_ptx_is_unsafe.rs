// U7: a typed launcher trusts a module's kernel to have its signature, so loading arbitrary
// PTX is `unsafe` with a contract (kernels built by #[kernel] are checked by fingerprint).
use ferrocuda::{Context, JitOptions, Module};

fn main() -> ferrocuda::Result<()> {
    let context = Context::primary(0)?;
    let _module = Module::load_ptx(&context, "m", ".version 8.0\n.target sm_80\n", &JitOptions::new())?;
    Ok(())
}
