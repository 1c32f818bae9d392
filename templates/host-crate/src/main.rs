//! Runs the kernels of `my-kernels` on the GPU, or on the CPU executor when there is none.

use ferrocuda::cpu::CpuExecutor;
use ferrocuda::{Context, DeviceBuffer, Error, LaunchConfig, Stream};
use my_kernels::{Affine, BLOCK, affine, block_sums};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n = 1000;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let p = Affine { scale: 2.0, offset: 1.0 };
    let grid = (n as u32).div_ceil(BLOCK);
    let config = LaunchConfig::for_elements(n, BLOCK);

    let (y, sums) = match Context::primary(0) {
        Ok(context) => {
            let stream = Stream::new(&context)?;
            let x_gpu = DeviceBuffer::from_slice(&context, &x)?;
            let mut y_gpu = DeviceBuffer::<f32>::zeroed(&context, n)?;
            let mut sums_gpu = DeviceBuffer::<f32>::zeroed(&context, grid as usize)?;
            affine::launch(&stream, config, p, &x_gpu, &mut y_gpu)?;
            block_sums::launch(&stream, (grid, BLOCK), &x_gpu, &mut sums_gpu)?;
            stream.synchronize()?;
            (y_gpu.to_vec()?, sums_gpu.to_vec()?)
        }
        Err(Error::NoDriver | Error::NoDevice { .. }) => {
            println!("no GPU: running on the CPU executor");
            let executor = CpuExecutor::new();
            let (mut y, mut sums) = (vec![0.0f32; n], vec![0.0f32; grid as usize]);
            affine::launch_cpu(&executor, config, p, &x, &mut y)?;
            block_sums::launch_cpu(&executor, (grid, BLOCK), &x, &mut sums)?;
            (y, sums)
        }
        Err(error) => return Err(error.into()),
    };
    println!("y[999] = {} (want 1999), sum = {} (want 499500)", y[999], sums.iter().sum::<f32>());
    Ok(())
}
