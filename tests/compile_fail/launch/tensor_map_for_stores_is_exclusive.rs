// Issue 21: a map for TMA stores (`tiled_mut`) borrows its buffer exclusively, like `&mut
// buffer`: nothing else may read or write the buffer while the map lives.
use ferrocuda::{Context, DeviceBuffer, TensorDataType, TensorMap, TensorSwizzle};

fn main() -> ferrocuda::Result<()> {
    let context = Context::primary(0)?;
    let mut buffer = DeviceBuffer::<u32>::zeroed(&context, 1024)?;
    let map = TensorMap::tiled_mut(&mut buffer, TensorDataType::U32, &[1024], &[256], TensorSwizzle::None)?.to_device(&context)?;
    let _copy = buffer.to_vec()?;
    println!("{map:?}");
    Ok(())
}
