// G17R-2's class (session 18): with the runtime renamed, the launcher's `DeviceRead` was the
// crate's own trait, and the slice argument (address and length) came from its method: any
// address and length reached the real launch (`SliceArg::from_parts` is safe), and the GPU
// read there. The generated launcher now makes the argument with `SliceArg::input`, bounded by
// the real `DeviceRead` (an `unsafe` trait), so a value of the crate's own trait is refused.
extern crate self as ferrocuda_host;

pub mod __private {
    pub use ::ferrocuda::__private::*;
    pub trait DeviceRead<T> {
        fn kernel_arg(&self) -> ::ferrocuda::__private::SliceArg<'_>;
    }
}

/// Claims a gigabyte at an address of its choosing.
pub struct Forged;
impl __private::DeviceRead<f32> for Forged {
    fn kernel_arg(&self) -> ::ferrocuda::__private::SliceArg<'_> {
        ::ferrocuda::__private::SliceArg::from_parts::<f32>(0xdead_0000, 1 << 28)
    }
}

pub static KERNELS: ferrocuda::EmbeddedModule = ferrocuda::EmbeddedModule::without_images("t");

mod kernels {
    #[ferrocuda_device::kernel]
    pub fn reads(x: &[f32]) {
        let _ = x;
    }
}

pub fn gpu(stream: &ferrocuda::Stream) {
    kernels::reads::launch(stream, (1u32, 1u32), &Forged).unwrap();
}

fn main() {}
