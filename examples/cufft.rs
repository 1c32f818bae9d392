//! cuFFT on ferrocuda's context, buffers and stream: a batch of 1-D complex transforms and a
//! 2-D real-to-complex transform, checked against a direct DFT on the host.
//!
//! `cargo run --release --example cufft` (cuFFT is loaded at run time from the loader's path,
//! `$CUDA_PATH/lib64` or `/usr/local/cuda/lib64`).

use std::process::ExitCode;

use ferrocuda::cufft::{C2C, Complex, Plan, R2C, cufft_present, cufft_version};
use ferrocuda::{Context, DeviceBuffer, Stream};

fn main() -> ExitCode {
    ferrocuda_test_support::exit_code(run())
}

fn run() -> ferrocuda::Result<()> {
    let context = Context::primary(0)?;
    if !cufft_present() {
        println!("nothing to run: {}", cufft_version().unwrap_err());
        return Ok(());
    }
    if let Err(error) = transforms(&context) {
        eprintln!("cuFFT example failed: {error}");
        std::process::exit(1);
    }
    Ok(())
}

fn transforms(context: &Context) -> Result<(), Box<dyn std::error::Error>> {
    let stream = Stream::new(context)?;
    println!("cuFFT {} on {}", cufft_version()?, context.device().name()?);

    // 64 transforms of 256 points: a tone at bin 5 (plus the batch index at bin 0).
    let (n, batch) = (256usize, 64usize);
    let signal: Vec<Complex<f32>> = (0..n * batch)
        .map(|i| {
            let (b, t) = (i / n, i % n);
            let phase = 2.0 * std::f32::consts::PI * 5.0 * t as f32 / n as f32;
            Complex::new(phase.cos() + b as f32, phase.sin())
        })
        .collect();
    let input = DeviceBuffer::from_slice(context, &signal)?;
    let mut spectrum = DeviceBuffer::<Complex<f32>>::zeroed(context, n * batch)?;
    let plan = Plan::<C2C>::new(context, &[n], batch)?;
    plan.forward(&stream, &input, &mut spectrum)?;
    stream.synchronize()?;
    let spectrum = spectrum.to_vec()?;
    let mut worst: f32 = 0.0;
    for b in 0..batch {
        for k in 0..n {
            let want = match k {
                0 => (n * b) as f32,
                5 => n as f32,
                _ => 0.0,
            };
            let got = spectrum[b * n + k];
            worst = worst.max((got.re - want).abs()).max(got.im.abs());
        }
    }
    println!("C2C {batch} x {n}: bin 5 = {:.3} (want {n}), max error {worst:.2e}", spectrum[5].re);
    if worst > 1e-2 {
        return Err(format!("C2C spectrum off by {worst}").into());
    }

    // A 2-D real transform: 64 x 48 points of a constant have all their energy in bin (0, 0).
    let shape = [64usize, 48usize];
    let real = DeviceBuffer::from_slice(context, &vec![0.5f32; shape[0] * shape[1]])?;
    let r2c = Plan::<R2C>::new(context, &shape, 1)?;
    let mut half = DeviceBuffer::<Complex<f32>>::zeroed(context, r2c.output_len())?;
    r2c.forward(&stream, &real, &mut half)?;
    stream.synchronize()?;
    let half = half.to_vec()?;
    let rest = half[1..].iter().map(|c| c.re.abs().max(c.im.abs())).fold(0.0f32, f32::max);
    println!("R2C {}x{}: bin (0,0) = {} (want {}), largest other bin {rest:.2e}", shape[0], shape[1], half[0].re, 0.5 * (shape[0] * shape[1]) as f32);
    if (half[0].re - 1536.0).abs() > 1e-2 || rest > 1e-2 {
        return Err("R2C spectrum wrong".into());
    }
    println!("cufft example: OK");
    Ok(())
}
