// Session 20 (item 3, G19R-3's class): with the runtime renamed, `__private::SliceArg` is the
// crate's own, and its `input` returned the real `SliceArg::absent()`, a null address of length
// 0, for a plain `&[f32]` parameter: the real `KernelParam::slice_address` took it and the device
// entry rebuilt a reference from null (UB even at length 0). Now an absent optional input is
// an `OptionalSliceArg`, a type of its own that only the optional constructors
// (`optional_slice_address`) take; `SliceArg::absent` is gone: refused.
extern crate self as ferrocuda_host;

pub mod __private {
    pub use ::ferrocuda::__private::*;

    /// The generated launcher's `SliceArg::input::<T, _>(x)`, made the crate's own.
    pub struct SliceArg;
    impl SliceArg {
        pub fn input<T, B: ?Sized>(_memory: &B) -> ::ferrocuda::__private::OptionalSliceArg<'static> {
            ::ferrocuda::__private::OptionalSliceArg::absent()
        }
    }
}

pub static KERNELS: ferrocuda::EmbeddedModule = ferrocuda::EmbeddedModule::without_images("t");

mod kernels {
    #[ferrocuda_device::kernel]
    pub fn reads(x: &[f32]) {
        let _ = x;
    }
}

pub fn gpu(stream: &ferrocuda::Stream, one: &ferrocuda::DeviceBuffer<f32>) {
    kernels::reads::launch(stream, (1u32, 1u32), one).unwrap();
}

fn main() {}
