// Issue 30 (session 18's `PerThreadShared`): `per_thread::<0>()` would give every thread a
// region of no slots: refused at compile time (session 19) instead of `None` at run time (a
// constant of the instance, so the call is reached from `main` here).
use ferrocuda_device::shared::dynamic_shared;

fn main() {
    let _ = dynamic_shared::<u32>().per_thread::<0>();
}
