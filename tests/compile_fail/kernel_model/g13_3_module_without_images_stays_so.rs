// Audit 2026-11-28, G13-3: a module without images is safe to make (it loads nothing), and it
// stays without images: `EmbeddedModule` derefs to its `EmbeddedImages` for reading only, so
// hand-made PTX cannot be put into one (and leaked into a `&'static` to load).
const HAND_MADE_PTX: &str = ".version 7.8\n.target sm_80\n.address_size 64\n";

fn main() {
    let mut module = ferrocuda::EmbeddedModule::without_images("t");
    module.ptx = &[(80, HAND_MADE_PTX)];
    let module: &'static ferrocuda::EmbeddedModule = Box::leak(Box::new(module));
    let _ = module.crate_name;
}
