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
#[allow(dead_code)]
const LEN: usize = 1;
#[allow(dead_code)]
type E = u8;
fn main() {
    const LEN: usize = 1024;
    type E = u64;
    let (inner, outer) = site![E; LEN];
    println!("declared bytes (inner module) = {inner}, handle's bytes (outer) = {outer}");
}
