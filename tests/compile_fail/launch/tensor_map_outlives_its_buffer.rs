// Issue 21: a tensor map borrows its buffer, so the buffer cannot be dropped while the map (or
// its device copy, which kernels read) lives: the memory behind a map is tracked like a buffer.
use ferrocuda::{Context, DeviceBuffer, TensorDataType, TensorMap, TensorSwizzle};

fn main() -> ferrocuda::Result<()> {
    let context = Context::primary(0)?;
    let buffer = DeviceBuffer::<u32>::zeroed(&context, 1024)?;
    let map = TensorMap::tiled(&buffer, TensorDataType::U32, &[1024], &[256], TensorSwizzle::None)?.to_device(&context)?;
    drop(buffer);
    println!("{map:?}");
    Ok(())
}
