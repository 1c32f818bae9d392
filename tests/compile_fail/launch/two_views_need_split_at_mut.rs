use ferrocuda::{Context, DeviceBuffer, Stream, LaunchConfig};
use gpu_kernels::saxpy;

fn main() -> ferrocuda::Result<()> {
    let context = Context::primary(0)?;
    let stream = Stream::new(&context)?;
    let config = LaunchConfig::for_elements(4, 32);
    let x = DeviceBuffer::from_slice(&context, &[1.0f32; 4])?;
    let mut y = DeviceBuffer::from_slice(&context, &[1.0f32; 8])?;
    let mut first = y.slice_mut(0..4);
    let mut second = y.slice_mut(4..8);
    saxpy::launch(&stream, config, 2.0, &x, &mut first)?;
    saxpy::launch(&stream, config, 2.0, &x, &mut second)
}
