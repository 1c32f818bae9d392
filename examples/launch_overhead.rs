//! CPU time per kernel launch: raw `cuLaunchKernel` against ferrocuda's typed launchers, on
//! the same kernels, in the same run.
//!
//! Kernels with 0 (`empty`), 2 (`saxpy`) and 8 (`eight_buffers`) slice arguments: each slice
//! argument of a typed launch is checked for its context and ordered with the buffer's other
//! streams (a lock and a pointer compare when all work stays on one stream).
//!
//! Two measurements per variant:
//! - "batched": 500 launches, then a synchronisation that is not counted, repeated: the
//!   launch queue never fills, so the submit time is the CPU cost of a launch;
//! - "100k in a row": 100 000 launches submitted back to back (submit time; once the queue
//!   is full this is paced by the GPU), then the drain time until the stream is idle.
//!
//! Borrowed handles (`ferrocuda::borrowed`, docs/interop.md) add three saxpy rows: the same
//! stream wrapped as another library's (`Stream::from_raw`), a `BorrowedStream` (ferrocuda's
//! stream joined to the owner's; own buffers), and borrowed device memory (`BorrowedSlice`)
//! on our stream. Each should be within 0.3 µs of the typed saxpy row.
//!
//! `cargo run --release --example launch_overhead`

use std::ffi::c_void;
use std::time::{Duration, Instant};

use ferrocuda::{BorrowedSlice, BorrowedSliceMut, BorrowedStream, Context, DeviceBuffer, JitOptions, LaunchConfig, Module, Stream, sys};
use gpu_kernels::saxpy;
use test_kernels::launch_kinds::{eight_buffers, empty};

const LAUNCHES: usize = 100_000;
const BATCH: usize = 500;
const ROUNDS: usize = 3;

fn main() -> std::process::ExitCode {
    ferrocuda_test_support::exit_code(run())
}

fn run() -> ferrocuda::Result<()> {
    let context = Context::primary(0)?;
    let device = context.device();
    let (major, minor) = ferrocuda::driver_version()?;
    println!("device: {} (sm_{}), driver CUDA {major}.{minor}", device.name()?, device.arch()?);
    let stream = Stream::non_blocking(&context)?;
    let config = LaunchConfig::new(1u32, 32u32);

    // The raw baseline launches the very function the typed launcher uses.
    let empty_raw = empty::function(&context)?.raw();
    let saxpy_raw = saxpy::function(&context)?.raw();
    let x = DeviceBuffer::from_slice(&context, &[1.0f32; 32])?;
    let mut y = DeviceBuffer::from_slice(&context, &[2.0f32; 32])?;
    let (x_ptr, y_ptr, n, a) = (x.device_ptr(), y.device_ptr(), 32usize, 2.0f32);

    // The baseline's stream handle, taken once through the door with nothing declared (the
    // raw launches below touch only `x` and `y`, which nothing else uses meanwhile).
    let raw_stream = stream.enqueue("raw baseline", &[], |s| Ok::<_, ferrocuda::Error>(s.get()))?;
    let raw_launch = |function: sys::CUfunction, params: *mut *mut c_void| {
        // SAFETY: the function is loaded in the bound context; `params` matches its signature.
        let code = unsafe { sys::cuLaunchKernel(function, 1, 1, 1, 32, 1, 1, 0, raw_stream, params, std::ptr::null_mut()) };
        assert_eq!(code, sys::CUresult::CUDA_SUCCESS);
    };
    let mut saxpy_params: [*mut c_void; 5] = [
        (&a as *const f32).cast_mut().cast(),
        (&x_ptr as *const u64).cast_mut().cast(),
        (&n as *const usize).cast_mut().cast(),
        (&y_ptr as *const u64).cast_mut().cast(),
        (&n as *const usize).cast_mut().cast(),
    ];
    let saxpy_params_ptr = saxpy_params.as_mut_ptr();
    // SAFETY: the PTX/cubin is this project's own build (kernels built by #[kernel], whose
    // fingerprints `launch_in` checks), or a module that is never launched through a typed launcher.
    let module = unsafe { Module::load_ptx(&context, "gpu_kernels (explicit)", gpu_kernels::KERNELS.ptx_for(80).expect("sm_80 PTX"), &JitOptions::new()) }?;
    let mut y2 = DeviceBuffer::from_slice(&context, &[2.0f32; 32])?;
    let eight_raw = eight_buffers::function(&context)?.raw();
    let inputs: Vec<DeviceBuffer<f32>> = (0..4).map(|_| DeviceBuffer::from_slice(&context, &[1.0f32; 32])).collect::<Result<_, _>>()?;
    let mut outputs: Vec<DeviceBuffer<f32>> = (0..4).map(|_| DeviceBuffer::zeroed(&context, 32)).collect::<Result<_, _>>()?;
    let eight_ptrs: Vec<u64> = inputs.iter().chain(outputs.iter()).map(|b| b.device_ptr()).collect();
    let mut eight_params: Vec<*mut c_void> = Vec::new();
    for ptr in &eight_ptrs {
        eight_params.push((ptr as *const u64).cast_mut().cast());
        eight_params.push((&n as *const usize).cast_mut().cast());
    }
    let eight_params_ptr = eight_params.as_mut_ptr();
    let [i0, i1, i2, i3] = &inputs[..] else { unreachable!() };
    // Borrowed handles: `stream` itself as another library's stream; a BorrowedStream of it
    // (with buffers of its own, so that no launch waits for the other stream); and memory
    // borrowed by address, as from another library.
    // SAFETY: `stream`'s own handle, kept alive by the clone held with it.
    let wrapped = unsafe { Stream::from_raw(&context, raw_stream, stream.clone()) }?;
    // SAFETY: `stream` outlives the borrow (dropped at the end of `run`, after it).
    let borrowed_stream = unsafe { BorrowedStream::new(&context, raw_stream) }?;
    let mut y5 = DeviceBuffer::from_slice(&context, &[2.0f32; 32])?;
    let (x3, mut y3) = (DeviceBuffer::from_slice(&context, &[1.0f32; 32])?, DeviceBuffer::from_slice(&context, &[2.0f32; 32])?);
    let (x4, y4) = (DeviceBuffer::from_slice(&context, &[1.0f32; 32])?, DeviceBuffer::from_slice(&context, &[2.0f32; 32])?);
    // SAFETY: 32 floats of live allocations that nothing else touches while they are borrowed
    // (`x4`, `y4` are dropped after the borrows, at the end of `run`).
    let (bx, mut by) = unsafe { (BorrowedSlice::<f32>::new(&stream, x4.device_ptr(), 32)?, BorrowedSliceMut::<f32>::new(&stream, y4.device_ptr(), 32)?) };
    let [o0, o1, o2, o3] = &mut outputs[..] else { unreachable!() };

    type Variant<'a> = (&'static str, Box<dyn FnMut() + 'a>);
    let mut variants: Vec<Variant> = vec![
        ("empty, raw cuLaunchKernel", Box::new(|| raw_launch(empty_raw, std::ptr::null_mut()))),
        ("empty, typed empty::launch", Box::new(|| empty::launch(&stream, config).unwrap())),
        ("saxpy, raw cuLaunchKernel", Box::new(|| raw_launch(saxpy_raw, saxpy_params_ptr))),
        ("saxpy, typed saxpy::launch", Box::new(|| saxpy::launch(&stream, config, 2.0, &x, &mut y).unwrap())),
        ("saxpy, typed launch_in(module)", Box::new(|| saxpy::launch_in(&module, &stream, config, 2.0, &x, &mut y2).unwrap())),
        ("8 buffers, raw cuLaunchKernel", Box::new(|| raw_launch(eight_raw, eight_params_ptr))),
        ("8 buffers, typed launch", Box::new(|| eight_buffers::launch(&stream, config, i0, i1, i2, i3, o0, o1, o2, o3).unwrap())),
        ("saxpy, Stream::from_raw", Box::new(|| saxpy::launch(&wrapped, config, 2.0, &x, &mut y5).unwrap())),
        ("saxpy, BorrowedStream", Box::new(|| saxpy::launch(&borrowed_stream, config, 2.0, &x3, &mut y3).unwrap())),
        ("saxpy, borrowed memory", Box::new(|| saxpy::launch(&stream, config, 2.0, &bx, &mut by).unwrap())),
    ];

    // Warm-up: loads, lazy driver state.
    for (_, launch) in &mut variants {
        for _ in 0..1000 {
            launch();
        }
    }
    context.synchronize()?;

    let mut batched = vec![Vec::new(); variants.len()];
    let mut straight = vec![Vec::new(); variants.len()];
    // Rounds interleave the variants so that drift on the machine hits all alike.
    for _ in 0..ROUNDS {
        for (i, (_, launch)) in variants.iter_mut().enumerate() {
            let mut submit = Duration::ZERO;
            for _ in 0..LAUNCHES / BATCH {
                let start = Instant::now();
                for _ in 0..BATCH {
                    launch();
                }
                submit += start.elapsed();
                context.synchronize()?;
            }
            batched[i].push(micros_per_launch(submit));

            let start = Instant::now();
            for _ in 0..LAUNCHES {
                launch();
            }
            let submit = start.elapsed();
            let drain_start = Instant::now();
            context.synchronize()?;
            straight[i].push((micros_per_launch(submit), drain_start.elapsed()));
        }
    }

    println!("{LAUNCHES} launches per measurement, best of {ROUNDS} rounds (µs per launch, CPU wall time)");
    println!("{:<30} {:>16} {:>18} {:>12}", "variant", "batched submit", "100k-row submit", "100k drain");
    for (i, (name, _)) in variants.iter().enumerate() {
        let best_batched = batched[i].iter().copied().fold(f64::INFINITY, f64::min);
        let (best_straight, drain) = straight[i].iter().copied().min_by(|a, b| a.0.total_cmp(&b.0)).unwrap();
        println!("{name:<30} {best_batched:>16.3} {best_straight:>18.3} {:>10.1}ms", drain.as_secs_f64() * 1e3);
    }
    let best = |i: usize| batched[i].iter().copied().fold(f64::INFINITY, f64::min);
    println!(
        "typed - raw (batched): 0 buffers (empty) {:+.3} µs, 2 buffers (saxpy) {:+.3} µs, 8 buffers {:+.3} µs",
        best(1) - best(0),
        best(3) - best(2),
        best(6) - best(5)
    );
    println!(
        "borrowed - typed saxpy (batched): Stream::from_raw {:+.3} µs, BorrowedStream {:+.3} µs, borrowed memory {:+.3} µs",
        best(7) - best(3),
        best(8) - best(3),
        best(9) - best(3)
    );
    Ok(())
}

fn micros_per_launch(elapsed: Duration) -> f64 {
    elapsed.as_secs_f64() * 1e6 / LAUNCHES as f64
}
