// G19R-3 (audit 2026-11-28g): session 18 bounded `SliceArg::input`/`output` by the real
// `DeviceRead`/`DeviceWrite` (g17r_2_runtime_renamed_forges_no_slice), but with the runtime
// renamed, `__private::SliceArg` itself was the crate's own: its `input` returned a *real*
// `SliceArg` from the real, safe `SliceArg::from_parts`, with the real, public fields `ptr` and
// `len` set at will, and the real `KernelParam::slice_address`/`slice_len` and `launch_embedded`
// took it (the GPU read a gigabyte at 0xdead_0000). Now `from_parts` is `unsafe` and the fields
// are the host crate's own: refused.
extern crate self as ferrocuda_host;

pub mod __private {
    pub use ::ferrocuda::__private::*;

    /// The generated launcher's `SliceArg::input::<T, _>(x)`, made the crate's own.
    pub struct SliceArg;
    impl SliceArg {
        pub fn input<T, B: ?Sized>(_memory: &B) -> ::ferrocuda::__private::SliceArg<'static> {
            let mut arg = ::ferrocuda::__private::SliceArg::from_parts::<T>(0, 0);
            arg.ptr = 0xdead_0000;
            arg.len = 1 << 28;
            arg
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
