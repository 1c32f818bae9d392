use ferrocuda::{Context, DeviceBuffer, Stream, LaunchConfig};
use gpu_kernels::saxpy;

fn main() -> ferrocuda::Result<()> {
    let context = Context::primary(0)?;
    let stream = Stream::new(&context)?;
    let config = LaunchConfig::for_elements(4, 32);
    let x = DeviceBuffer::from_slice(&context, &[1.0f64; 4])?;
    let mut y = DeviceBuffer::from_slice(&context, &[1.0f32; 4])?;
    saxpy::launch(&stream, config, 2.0, &x, &mut y)
}
