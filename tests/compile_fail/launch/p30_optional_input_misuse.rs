// Issue 30: an optional input (`finished: Option<&[u8]>`) takes `Some(&buffer)` of its element
// type or `None`: a buffer of another element type, a buffer without `Some`, and host data are
// refused.
use ferrocuda::{Context, DeviceBuffer, LaunchConfig, Stream};
use test_kernels::optional_inputs::p30_active_rows;

fn main() -> ferrocuda::Result<()> {
    let context = Context::primary(0)?;
    let stream = Stream::new(&context)?;
    let config = LaunchConfig::for_elements(64, 64);
    let mut active = DeviceBuffer::<u32>::zeroed(&context, 64)?;
    let floats = DeviceBuffer::<f32>::zeroed(&context, 64)?;
    p30_active_rows::launch(&stream, config, Some(&floats), &mut active, 64)?;
    let flags = DeviceBuffer::<u8>::zeroed(&context, 64)?;
    p30_active_rows::launch(&stream, config, &flags, &mut active, 64)?;
    let host = vec![0u8; 64];
    p30_active_rows::launch(&stream, config, Some(&host), &mut active, 64)
}
