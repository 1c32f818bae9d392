macro_rules! site {
    [$ty:ty; $len:expr] => {{
        mod __site {
            #[allow(unused_imports)]
            use super::*;
            pub(super) const BYTES: usize = core::mem::size_of::<$ty>() * ($len);
        }
        (__site::BYTES, core::mem::size_of::<$ty>() * ($len))
    }};
}
mod sizes { pub const TILE: usize = 256; }
mod small { pub const TILE: usize = 1; }
#[allow(unused_imports)]
use small::TILE;
fn main() {
    use sizes::TILE;
    let (inner, outer) = site![f32; TILE];
    println!("function-local `use`: declared bytes (inner module) = {inner}, handle's bytes (outer) = {outer}");
}
