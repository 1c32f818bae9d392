//! The bundled kernels on the GPU, checked against CPU references. Skip (printed) without a
//! GPU; fail under `REQUIRE_GPU=1`.

mod common;

use ferrocuda::{DeviceBuffer, Error, LaunchConfig, LaunchProblem, Stream, launch};
use gpu_kernels::{saxpy, sum_f32};

/// Regression: with a non-blocking stream, the kernel could start before the synchronous
/// (pageable, legacy-stream) upload of `y` had landed, and read zeros.
#[test]
fn saxpy_matches_the_cpu_for_awkward_sizes() {
    let Some(context) = common::gpu_or_skip("saxpy_matches_the_cpu_for_awkward_sizes") else { return };
    let stream = Stream::new(&context).unwrap();
    for n in [0usize, 1, 31, 255, 256, 257, 1 << 20, (1 << 20) + 3] {
        let x_host: Vec<f32> = (0..n).map(|i| i as f32 * 0.25 - 7.0).collect();
        let y_host: Vec<f32> = (0..n).map(|i| (i % 13) as f32).collect();
        let x = DeviceBuffer::from_slice(&context, &x_host).unwrap();
        let mut y = DeviceBuffer::from_slice(&context, &y_host).unwrap();
        let config = LaunchConfig::for_elements(n, 128);
        saxpy::launch(&stream, config, -1.5, &x, &mut y).unwrap();
        stream.synchronize().unwrap();
        let got = y.to_vec().unwrap();
        for i in 0..n {
            assert_eq!(got[i], (-1.5f32).mul_add(x_host[i], y_host[i]), "n = {n}, i = {i}");
        }
    }
}

#[test]
fn saxpy_writes_only_within_the_shorter_input() {
    let Some(context) = common::gpu_or_skip("saxpy_writes_only_within_the_shorter_input") else { return };
    let x = DeviceBuffer::from_slice(&context, &[1.0f32; 10]).unwrap();
    let mut y = DeviceBuffer::from_slice(&context, &[1.0f32; 20]).unwrap();
    launch!(saxpy<<<1, 32>>>(2.0, &x, &mut y)).unwrap();
    context.synchronize().unwrap();
    let got = y.to_vec().unwrap();
    assert_eq!(&got[..10], &[3.0; 10]);
    assert_eq!(&got[10..], &[1.0; 10]);
}

#[test]
fn sum_matches_the_cpu() {
    let Some(context) = common::gpu_or_skip("sum_matches_the_cpu") else { return };
    let stream = Stream::new(&context).unwrap();
    for n in [1usize, 33, 1000, 1 << 22] {
        let x_host: Vec<f32> = (0..n).map(|i| ((i * 31) % 97) as f32 - 48.0).collect();
        let x = DeviceBuffer::from_slice(&context, &x_host).unwrap();
        let mut out = DeviceBuffer::<f32>::zeroed(&context, 1).unwrap();
        launch!(sum_f32<<<64, 256, 0, &stream>>>(&x, &mut out)).unwrap();
        stream.synchronize().unwrap();
        let expected: f64 = x_host.iter().map(|&v| v as f64).sum();
        let got = out.to_vec().unwrap()[0] as f64;
        // Integers below 2^24 in every partial sum: the f32 result is exact.
        assert_eq!(got, expected, "n = {n}");
    }
}

#[test]
fn oversized_block_is_refused_before_the_driver_sees_it() {
    let Some(context) = common::gpu_or_skip("oversized_block_is_refused_before_the_driver_sees_it") else { return };
    let x = DeviceBuffer::from_slice(&context, &[0.0f32; 4]).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&context, 4).unwrap();
    let error = launch!(saxpy<<<1, 4096>>>(1.0, &x, &mut y)).unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, Error::InvalidLaunch { problem: LaunchProblem::BlockAxisTooLarge { size: 4096, .. }, .. }), "{message}");
    assert!(message.contains("cannot launch `saxpy`") && message.contains("block dimension x = 4096"), "{message}");
    let error = launch!(saxpy<<<0, 32>>>(1.0, &x, &mut y)).unwrap_err();
    assert!(error.to_string().contains("zero dimension"), "{error}");
}

#[test]
fn the_embedded_module_loads_the_best_image_for_the_device() {
    let Some(context) = common::gpu_or_skip("the_embedded_module_loads_the_best_image_for_the_device") else { return };
    let arch = context.device().arch().unwrap();
    let image = context.embedded_image(&gpu_kernels::KERNELS).unwrap();
    let expected = gpu_kernels::KERNELS.pick_image(arch).unwrap().to_string();
    assert_eq!(image, expected);
    eprintln!("device sm_{arch} runs {image}");
}
