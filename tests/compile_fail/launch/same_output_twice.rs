use ferrocuda::{Context, DeviceBuffer, Stream, LaunchConfig};
use test_kernels::launch_kinds::split_sign;

fn main() -> ferrocuda::Result<()> {
    let context = Context::primary(0)?;
    let stream = Stream::new(&context)?;
    let x = DeviceBuffer::from_slice(&context, &[1.0f32; 4])?;
    let mut out = DeviceBuffer::<f32>::zeroed(&context, 4)?;
    split_sign::launch(&stream, LaunchConfig::for_elements(4, 32), &x, &mut out, &mut out)
}
