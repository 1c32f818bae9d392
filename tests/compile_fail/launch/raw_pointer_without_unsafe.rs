use ferrocuda::{Context, DeviceBuffer, Stream, LaunchConfig};
use test_kernels::launch_kinds::add_one_raw;

fn main() -> ferrocuda::Result<()> {
    let context = Context::primary(0)?;
    let stream = Stream::new(&context)?;
    let x = DeviceBuffer::from_slice(&context, &[1.0f32; 4])?;
    let out = DeviceBuffer::<f32>::zeroed(&context, 4)?;
    add_one_raw::launch(&stream, LaunchConfig::for_elements(4, 32), 4, x.as_device_ptr(), out.as_device_ptr())
}
