//! GPU time of kernels by CUDA events, after warm-up, as the median of several runs.

use ferrocuda_host::{DeviceBuffer, Event, Module, Result, Stream};

/// Which implementation of a kernel to launch: the Rust one embedded in `gpu-kernels`, or its
/// CUDA C++ twin from the NVRTC-compiled module (same symbol, same parameters).
#[derive(Clone, Copy)]
pub enum Implementation<'m> {
    /// `gpu_kernels::examples::NAME::launch` (the crate's own cubin/PTX).
    Rust,
    /// `gpu_kernels::examples::NAME::launch_in(&module, ..)` on the CUDA C++ module.
    CudaCpp(&'m Module),
    /// `gpu_kernels::unchecked::NAME_unchecked::launch`: the `unsafe` twin of a safe-style
    /// kernel (issue 20's speed rows), for the kernels that have one.
    RustUnchecked,
}

impl Implementation<'_> {
    /// The label used in the table and the JSON.
    pub fn label(&self) -> &'static str {
        match self {
            Implementation::Rust => "Rust (ferrocuda)",
            Implementation::CudaCpp(_) => "CUDA C++ (NVRTC)",
            Implementation::RustUnchecked => UNSAFE_TWIN,
        }
    }
}

/// The label of the `unsafe` Rust twins' rows.
pub const UNSAFE_TWIN: &str = "Rust unsafe twin";

/// Launches `$kernel` (a module of `gpu_kernels::examples`) from the implementation chosen;
/// `$kernel | $twin` also launches the `unsafe` twin `gpu_kernels::unchecked::$twin`.
#[macro_export]
macro_rules! launch_with {
    ($implementation:expr, $kernel:ident | $twin:ident, $stream:expr, $config:expr, $($arg:expr),* $(,)?) => {
        match $implementation {
            $crate::twins::timing::Implementation::RustUnchecked => $crate::unchecked::$twin::launch($stream, $config, $($arg),*),
            other => $crate::launch_with!(other, $kernel, $stream, $config, $($arg),*),
        }
    };
    ($implementation:expr, $kernel:ident, $stream:expr, $config:expr, $($arg:expr),* $(,)?) => {
        match $implementation {
            $crate::twins::timing::Implementation::Rust => $crate::examples::$kernel::launch($stream, $config, $($arg),*),
            $crate::twins::timing::Implementation::CudaCpp(module) => $crate::examples::$kernel::launch_in(module, $stream, $config, $($arg),*),
            $crate::twins::timing::Implementation::RustUnchecked => unreachable!("{} has no unsafe twin", stringify!($kernel)),
        }
    };
}

/// Warm-up and timed runs per measurement.
#[derive(Clone, Copy, Debug)]
pub struct Runs {
    /// Untimed launches first (module load, caches, clocks).
    pub warmup: usize,
    /// Timed launches; the median is reported.
    pub timed: usize,
}

/// Brackets the launch inside a measured step with two events on one stream.
pub struct Stopwatch {
    stream: Stream,
    start: Event,
    end: Event,
}

impl Stopwatch {
    /// A stopwatch for work queued on `stream`.
    pub fn new(stream: &Stream) -> Result<Self> {
        Ok(Stopwatch { stream: stream.clone(), start: Event::new(stream.context())?, end: Event::new(stream.context())? })
    }

    /// Marks the start: call it after any untimed preparation (zeroing an output), right
    /// before the launch.
    pub fn start(&self) -> Result<()> {
        self.start.record(&self.stream)
    }

    fn stop_ms(&self) -> Result<f64> {
        self.end.record(&self.stream)?;
        self.end.synchronize()?;
        Ok(self.start.elapsed_ms(&self.end)? as f64)
    }
}

/// Times `step` for each implementation, interleaved run by run so that clock or thermal
/// drift hits all alike. `step` queues any preparation, calls `stopwatch.start()`, then
/// launches. Returns the run times in milliseconds, one vector per implementation.
pub fn measure<T: Copy, E: From<ferrocuda_host::Error>>(
    stream: &Stream,
    runs: Runs,
    implementations: &[T],
    mut step: impl FnMut(T, &Stopwatch) -> std::result::Result<(), E>,
) -> std::result::Result<Vec<Vec<f64>>, E> {
    let stopwatch = Stopwatch::new(stream)?;
    for &implementation in implementations {
        for _ in 0..runs.warmup {
            step(implementation, &stopwatch)?;
        }
    }
    stream.synchronize()?;
    let mut times = vec![Vec::with_capacity(runs.timed); implementations.len()];
    for _ in 0..runs.timed {
        for (i, &implementation) in implementations.iter().enumerate() {
            step(implementation, &stopwatch)?;
            times[i].push(stopwatch.stop_ms()?);
        }
    }
    Ok(times)
}

/// The median of `times` (the mean of the middle two for an even count).
pub fn median(times: &[f64]) -> f64 {
    let mut sorted = times.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len().is_multiple_of(2) { (sorted[mid - 1] + sorted[mid]) / 2.0 } else { sorted[mid] }
}

/// Device-to-device copy bandwidth (`cuMemcpyDtoDAsync` of `bytes`), counting bytes read plus
/// bytes written, in GB/s (10^9): the ceiling the memory-bound kernels are compared with.
pub fn copy_bandwidth_gbps(stream: &Stream, bytes: usize, runs: Runs) -> Result<(f64, f64)> {
    let len = bytes / 4;
    let source = DeviceBuffer::<u32>::zeroed(stream.context(), len)?;
    let mut target = DeviceBuffer::<u32>::zeroed(stream.context(), len)?;
    let times = measure(stream, runs, &[()], |(), stopwatch| -> Result<()> {
        stopwatch.start()?;
        target.copy_from_device_async(&source, stream)
    })?;
    let ms = median(&times[0]);
    Ok((2.0 * bytes as f64 / (ms * 1e-3) / 1e9, ms))
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
    }
}
