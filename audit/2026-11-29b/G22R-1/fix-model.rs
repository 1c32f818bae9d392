#![allow(dead_code)]
struct Arr<T, const N: usize>(core::marker::PhantomData<T>);
macro_rules! site {
    [$ty:ty; $len:expr] => {{
        mod m {
            #[allow(unused_imports)]
            use super::*;
            pub(super) type __FerrocudaSharedT = $ty;
            pub(super) const __FERROCUDA_SHARED_LEN: usize = $len;
        }
        let h: Arr<$ty, { $len }> = Arr::<m::__FerrocudaSharedT, { m::__FERROCUDA_SHARED_LEN }>(core::marker::PhantomData);
        h
    }};
}
const LEN: usize = 1;
type E = u8;
fn fine() { let _ = site![E; LEN * 4]; }
#[cfg(shadow)]
fn shadowed() { const LEN: usize = 1024; let _ = site![E; LEN]; }
#[cfg(shadow_ty)]
fn shadowed_ty() { type E = u64; let _ = site![E; LEN]; }
fn main() { fine(); }
