//! cuFFT on ferrocuda's contexts, streams and buffers: typed plans for complex-to-complex,
//! real-to-complex and complex-to-real transforms in 1, 2 or 3 dimensions, batched, in single
//! and double precision.
//!
//! ```no_run
//! use ferrocuda_host::cufft::{C2C, Complex, Plan};
//! use ferrocuda_host::{Context, DeviceBuffer, Stream};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let context = Context::primary(0)?;
//! let stream = Stream::new(&context)?;
//! let signal = vec![Complex::new(1.0f32, 0.0); 1024 * 8];
//! let input = DeviceBuffer::from_slice(&context, &signal)?;
//! let mut spectrum = DeviceBuffer::<Complex<f32>>::zeroed(&context, signal.len())?;
//! let plan = Plan::<C2C>::new(&context, &[1024], 8)?; // eight 1-D transforms of 1024 points
//! plan.forward(&stream, &input, &mut spectrum)?;
//! stream.synchronize()?;
//! # Ok(()) }
//! ```
//!
//! cuFFT's conventions hold: transforms are unnormalised (forward then inverse multiplies by
//! the number of points), the last dimension is the contiguous one, and a real-to-complex
//! transform of `[.., n]` points gives `[.., n / 2 + 1]` complex values (the rest is their
//! conjugate mirror). Work is queued on the stream given to each call, like a kernel launch,
//! through [`Stream::enqueue`]: each call declares the buffers it reads and writes (a
//! complex-to-real transform writes its input too) and the plan's work area, so that other
//! streams' work, host copies and the buffers' drops are ordered with it (N2), and a plan used
//! on one stream then on another waits for its earlier use (N3). Calls on one plan from
//! several threads take turns (a lock around setting the stream and executing, S4). Dropping a
//! plan waits for the streams that used it; inside a capture or a host callback its
//! destruction is postponed (N12, see [`Context::deferred_releases`]).
//!
//! The library is loaded at run time: `libcufft.so` and its versioned names through the
//! loader's search path, then `$CUDA_PATH/lib64`, `$CUDA_HOME/lib64` and
//! `/usr/local/cuda/lib64` (CUDA 13 ships cuFFT as `libcufft.so.12`). Without it, plan
//! creation returns [`FftError::LibraryNotFound`] with every place tried.
//!
//! Layers, as elsewhere in this crate: `cudarc::cufft::sys` (raw bindings) -> [`call`]
//! (the status check) -> [`Plan`] (RAII, typed).

use std::marker::PhantomData;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use bytemuck::{Pod, Zeroable};
use cudarc::cufft::sys;

use crate::memory::usage::{Access, BufferAccess, BufferUsage};
use crate::stream::{RawStream, UsedStreams};
use crate::{Context, DeviceBuffer, Error, Stream};

/// A complex number as cuFFT stores it (`cufftComplex` for `f32`, `cufftDoubleComplex` for `f64`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Complex<T> {
    /// Real part.
    pub re: T,
    /// Imaginary part.
    pub im: T,
}

impl<T> Complex<T> {
    /// `re + i im`.
    pub const fn new(re: T, im: T) -> Self {
        Self { re, im }
    }
}

// SAFETY: `#[repr(C)]` with two fields of the same `Pod` float type: no padding, every bit
// pattern valid, all-zero is `0 + 0i`.
unsafe impl Zeroable for Complex<f32> {}
// SAFETY: as above.
unsafe impl Pod for Complex<f32> {}
// SAFETY: as above.
unsafe impl Zeroable for Complex<f64> {}
// SAFETY: as above.
unsafe impl Pod for Complex<f64> {}

/// Why a cuFFT operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FftError {
    /// cuFFT's shared library was not found.
    #[error(
        "cuFFT not found (tried {tried:?}): install the CUDA toolkit's cuFFT (libcufft.so.12 for CUDA 12 and 13) and add its directory to LD_LIBRARY_PATH, or set CUDA_PATH"
    )]
    LibraryNotFound {
        /// Every name and path tried.
        tried: Vec<String>,
    },
    /// A cuFFT call returned an error status.
    #[error("{call} failed: {status:?}")]
    Cufft {
        /// The cuFFT function.
        call: &'static str,
        /// Its status.
        status: sys::cufftResult,
    },
    /// A plan shape cuFFT does not take.
    #[error(
        "a cuFFT plan needs 1 to 3 dimensions of at least 1 point each and a batch of at least 1 (got shape {shape:?}, batch {batch}); sizes must fit in an i32"
    )]
    BadShape {
        /// The dimensions given.
        shape: Vec<usize>,
        /// The batch given.
        batch: usize,
    },
    /// A buffer shorter than the transform reads or writes.
    #[error("the {which} buffer holds {len} elements but this plan needs {needed}: allocate batch x points ({needed})")]
    BufferTooShort {
        /// `"input"` or `"output"`.
        which: &'static str,
        /// Its length.
        len: usize,
        /// What the plan needs.
        needed: usize,
    },
    /// A buffer or stream of another context than the plan's.
    #[error("the {what} belongs to another context than the plan: create the plan with the buffers' context")]
    OtherContext {
        /// `"stream"`, `"input buffer"` or `"output buffer"`.
        what: &'static str,
    },
    /// A driver call around cuFFT failed (binding the context).
    #[error(transparent)]
    Driver(Box<Error>),
}

impl From<Error> for FftError {
    fn from(error: Error) -> Self {
        FftError::Driver(Box::new(error))
    }
}

// ---- Loading the library --------------------------------------------------------------------

/// Finds and loads cuFFT once. cudarc's bindings open the library by its versioned names
/// through the loader's search path; when it lives elsewhere (`/usr/local/cuda/lib64` without
/// `LD_LIBRARY_PATH`), loading it here by full path first makes those names resolve to the
/// already-loaded library (the dynamic loader matches loaded objects by soname).
fn ensure_loaded() -> Result<(), FftError> {
    // The library opened, once per process: no handle of any context (plans are per stream and
    // hold their context; G22S-2's audit, docs/host-safety.md).
    static LOADED: OnceLock<Result<(), Vec<String>>> = OnceLock::new();
    let result = LOADED.get_or_init(|| {
        let mut tried = Vec::new();
        for candidate in candidates() {
            // SAFETY: loading cuFFT runs its initialisers, which have no preconditions.
            match unsafe { libloading::Library::new(&candidate) } {
                Ok(library) => {
                    // Kept loaded for the life of the process, as cudarc keeps its own handle.
                    std::mem::forget(library);
                    // Checks that cudarc's own lookup now succeeds (the probe tries cudarc's names).
                    if crate::loader::library_present(crate::loader::CudaLibrary::Cufft) {
                        return Ok(());
                    }
                    tried.push(format!("{candidate} (loaded, but not under a name cudarc looks for)"));
                }
                Err(_) => tried.push(candidate),
            }
        }
        Err(tried)
    });
    result.clone().map_err(|tried| FftError::LibraryNotFound { tried })
}

/// Versioned names first (newest cuFFT of CUDA 12/13 first), then full paths.
fn candidates() -> Vec<String> {
    let names = ["libcufft.so.12", "libcufft.so.13", "libcufft.so.11", "libcufft.so"];
    let mut dirs: Vec<PathBuf> = ["CUDA_PATH", "CUDA_HOME"].iter().filter_map(std::env::var_os).map(|root| PathBuf::from(root).join("lib64")).collect();
    dirs.push("/usr/local/cuda/lib64".into());
    dirs.push("/usr/local/cuda/targets/x86_64-linux/lib".into());
    let mut all: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    for dir in dirs {
        all.extend(names.iter().map(|n| dir.join(n)).filter(|p| p.exists()).map(|p| p.display().to_string()));
    }
    all
}

/// Whether cuFFT can be loaded on this machine (no GPU needed to ask).
pub fn cufft_present() -> bool {
    ensure_loaded().is_ok()
}

/// cuFFT's version (`cufftGetVersion`, e.g. 12000 for cuFFT 12.0).
pub fn cufft_version() -> Result<i32, FftError> {
    ensure_loaded()?;
    let mut version = 0;
    // SAFETY: writes one int.
    call("cufftGetVersion", unsafe { sys::cufftGetVersion(&mut version) })?;
    Ok(version)
}

// ---- One checked call -----------------------------------------------------------------------

/// Turns a cuFFT status into a `Result` naming the call.
pub fn call(call: &'static str, status: sys::cufftResult) -> Result<(), FftError> {
    if status == sys::cufftResult::CUFFT_SUCCESS { Ok(()) } else { Err(FftError::Cufft { call, status }) }
}

// ---- Transform kinds ------------------------------------------------------------------------

mod sealed {
    pub trait Sealed {}
}

/// A cuFFT transform kind: its element types and cuFFT's type code. Implemented by
/// [`C2C`], [`R2C`], [`C2R`] (single precision) and [`Z2Z`], [`D2Z`], [`Z2D`] (double).
pub trait Transform: sealed::Sealed {
    /// What the transform reads.
    type Input: Pod;
    /// What it writes.
    type Output: Pod;
    /// cuFFT's type code.
    const TYPE: sys::cufftType;
    /// `true` when the input is real (R2C, D2Z): the output's last dimension is `n / 2 + 1`.
    const REAL_INPUT: bool;
    /// `true` when the output is real (C2R, Z2D): the input's last dimension is `n / 2 + 1`.
    const REAL_OUTPUT: bool;
}

macro_rules! transforms {
    ($($(#[$doc:meta])* $name:ident: $input:ty => $output:ty, $code:ident, $real_in:expr, $real_out:expr;)*) => {$(
        $(#[$doc])*
        #[derive(Debug)]
        pub enum $name {}
        impl sealed::Sealed for $name {}
        impl Transform for $name {
            type Input = $input;
            type Output = $output;
            const TYPE: sys::cufftType = sys::cufftType::$code;
            const REAL_INPUT: bool = $real_in;
            const REAL_OUTPUT: bool = $real_out;
        }
    )*};
}

transforms! {
    /// Complex to complex, `f32` (`CUFFT_C2C`): [`Plan::forward`] and [`Plan::inverse`].
    C2C: Complex<f32> => Complex<f32>, CUFFT_C2C, false, false;
    /// Real to complex, `f32` (`CUFFT_R2C`): [`Plan::forward`].
    R2C: f32 => Complex<f32>, CUFFT_R2C, true, false;
    /// Complex to real, `f32` (`CUFFT_C2R`): [`Plan::inverse`] (overwrites its input).
    C2R: Complex<f32> => f32, CUFFT_C2R, false, true;
    /// Complex to complex, `f64` (`CUFFT_Z2Z`).
    Z2Z: Complex<f64> => Complex<f64>, CUFFT_Z2Z, false, false;
    /// Real to complex, `f64` (`CUFFT_D2Z`).
    D2Z: f64 => Complex<f64>, CUFFT_D2Z, true, false;
    /// Complex to real, `f64` (`CUFFT_Z2D`, overwrites its input).
    Z2D: Complex<f64> => f64, CUFFT_Z2D, false, true;
}

// ---- Plans -----------------------------------------------------------------------------------

/// A cuFFT plan for `batch` transforms of `shape` (1 to 3 dimensions, the last contiguous),
/// made in one context and run on that context's streams. Destroyed on drop.
pub struct Plan<T: Transform> {
    handle: sys::cufftHandle,
    context: Context,
    shape: Vec<usize>,
    batch: usize,
    /// The streams that used the plan's work area: every execution writes it.
    work_area: BufferUsage,
    /// Held from an execution's declaration to its queuing: cuFFT keeps one stream per plan,
    /// so setting it and executing must not interleave with another thread's (S4), and a
    /// declaration must not fall between another thread's declaration and its execution.
    turn: Mutex<()>,
    _kind: PhantomData<T>,
}

impl<T: Transform> std::fmt::Debug for Plan<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plan").field("type", &T::TYPE).field("shape", &self.shape).field("batch", &self.batch).finish()
    }
}

impl<T: Transform> Plan<T> {
    /// A plan for `batch` contiguous transforms of `shape` points each (`cufftPlanMany`).
    ///
    /// # Errors
    /// [`FftError::BadShape`], [`FftError::LibraryNotFound`], or cuFFT's own status
    /// (`CUFFT_ALLOC_FAILED` when its work area does not fit, ...).
    pub fn new(context: &Context, shape: &[usize], batch: usize) -> Result<Self, FftError> {
        let bad = || FftError::BadShape { shape: shape.to_vec(), batch };
        if shape.is_empty() || shape.len() > 3 || shape.contains(&0) || batch == 0 {
            return Err(bad());
        }
        let mut dims: Vec<i32> = shape.iter().map(|&n| i32::try_from(n)).collect::<Result<_, _>>().map_err(|_| bad())?;
        let batch_i32 = i32::try_from(batch).map_err(|_| bad())?;
        ensure_loaded()?;
        let _bound = context.bind()?;
        // cuFFT loads its kernels into the context, which may wait for its work (E2).
        context.refuse_after_timeout(|| "cufft::Plan::new (cufftPlanMany)".to_string())?;
        let mut handle: sys::cufftHandle = 0;
        // SAFETY: `dims` holds `shape.len()` ints; null embeds mean contiguous data, for which
        // cuFFT ignores the strides and distances.
        call("cufftPlanMany", unsafe {
            sys::cufftPlanMany(&mut handle, dims.len() as i32, dims.as_mut_ptr(), std::ptr::null_mut(), 1, 0, std::ptr::null_mut(), 1, 0, T::TYPE, batch_i32)
        })?;
        Ok(Plan {
            handle,
            context: context.clone(),
            shape: shape.to_vec(),
            batch,
            work_area: BufferUsage::idle(context),
            turn: Mutex::new(()),
            _kind: PhantomData,
        })
    }

    /// The dimensions of one transform.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// How many transforms one call runs.
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// Elements of [`Transform::Input`] one call reads: `batch` x points (x `n/2+1` of the
    /// last dimension for a complex-to-real transform).
    pub fn input_len(&self) -> usize {
        lengths::<T>(&self.shape, self.batch).0
    }

    /// Elements of [`Transform::Output`] one call writes.
    pub fn output_len(&self) -> usize {
        lengths::<T>(&self.shape, self.batch).1
    }

    /// Checks contexts and lengths.
    fn check(&self, stream: &Stream, input: &DeviceBuffer<T::Input>, output: &DeviceBuffer<T::Output>) -> Result<(), FftError> {
        let own = self.context.raw();
        for (what, context) in [("stream", stream.context()), ("input buffer", input.context()), ("output buffer", output.context())] {
            if context.raw() != own {
                return Err(FftError::OtherContext { what });
            }
        }
        for (which, len, needed) in [("input", input.len(), self.input_len()), ("output", output.len(), self.output_len())] {
            if len < needed {
                return Err(FftError::BufferTooShort { which, len, needed });
            }
        }
        Ok(())
    }

    /// Checks an execution's arguments and takes the plan's turn (held from the declaration
    /// to the queuing: cuFFT keeps one stream per plan, S4). Returns the handle, the two device
    /// addresses, what the execution touches (`input`, read, or written by a transform that
    /// overwrites it; `output` and the work area, written) and the turn.
    #[allow(clippy::type_complexity)]
    fn prepare<'a>(
        &'a self,
        stream: &Stream,
        input: &'a DeviceBuffer<T::Input>,
        output: &'a mut DeviceBuffer<T::Output>,
    ) -> Result<(sys::cufftHandle, *mut std::ffi::c_void, *mut std::ffi::c_void, [BufferAccess<'a>; 3], std::sync::MutexGuard<'a, ()>), FftError> {
        self.check(stream, input, output)?;
        let (input_ptr, output_ptr) = (input.device_ptr() as usize as *mut std::ffi::c_void, output.device_ptr() as usize as *mut std::ffi::c_void);
        let input_access = if T::REAL_OUTPUT { Access::Write } else { Access::Read };
        let accesses = [
            BufferAccess::new(Some(input.usage()), input_access, "input"),
            BufferAccess::write(output),
            BufferAccess::new(Some(&self.work_area), Access::Write, "cuFFT work area"),
        ];
        // The turn is held across the execution's door call: inside another door call's work
        // its holder may be waiting for this thread (G15R-6).
        Stream::refuse_inside_door_work("a cuFFT execution")?;
        let turn = self.turn.lock().unwrap_or_else(|p| p.into_inner());
        Ok((self.handle, input_ptr, output_ptr, accesses, turn))
    }
}

/// Inside the door: puts the plan on the stream, then runs the execution `exec` named `name`.
fn run(handle: sys::cufftHandle, raw: RawStream<'_>, name: &'static str, exec: impl FnOnce() -> sys::cufftResult) -> Result<(), FftError> {
    // SAFETY: the plan and the stream are live and of the same context (checked by `prepare`).
    call("cufftSetStream", unsafe { sys::cufftSetStream(handle, raw.get() as sys::cudaStream_t) })?;
    call(name, exec())
}

/// (input, output) elements of `batch` transforms of `shape` of kind `T`.
fn lengths<T: Transform>(shape: &[usize], batch: usize) -> (usize, usize) {
    let points: usize = shape.iter().product();
    let half = match shape.split_last() {
        Some((last, rest)) => rest.iter().product::<usize>() * (last / 2 + 1),
        None => 0,
    };
    let input = batch * if T::REAL_OUTPUT { half } else { points };
    let output = batch * if T::REAL_INPUT { half } else { points };
    (input, output)
}

const FORWARD: i32 = -1;
const INVERSE: i32 = 1;

impl Plan<C2C> {
    /// `output = FFT(input)` (sign -1), queued on `stream`.
    pub fn forward(&self, stream: &Stream, input: &DeviceBuffer<Complex<f32>>, output: &mut DeviceBuffer<Complex<f32>>) -> Result<(), FftError> {
        let (handle, i, o, accesses, _turn) = self.prepare(stream, input, output)?;
        // SAFETY: both buffers are live device allocations of this plan's context, at least as
        // long as the plan reads and writes (checked), and distinct (one is borrowed mutably);
        // declared to the door, so their drops and other streams' work wait for the transform.
        stream.enqueue("cufftExecC2C", &accesses, |raw| run(handle, raw, "cufftExecC2C", || unsafe { sys::cufftExecC2C(handle, i.cast(), o.cast(), FORWARD) }))
    }
    /// `output = IFFT(input)` (sign +1, unnormalised), queued on `stream`.
    pub fn inverse(&self, stream: &Stream, input: &DeviceBuffer<Complex<f32>>, output: &mut DeviceBuffer<Complex<f32>>) -> Result<(), FftError> {
        let (handle, i, o, accesses, _turn) = self.prepare(stream, input, output)?;
        // SAFETY: both buffers are live device allocations of this plan's context, at least as
        // long as the plan reads and writes (checked), and distinct (one is borrowed mutably);
        // declared to the door, so their drops and other streams' work wait for the transform.
        stream.enqueue("cufftExecC2C", &accesses, |raw| run(handle, raw, "cufftExecC2C", || unsafe { sys::cufftExecC2C(handle, i.cast(), o.cast(), INVERSE) }))
    }
}

impl Plan<Z2Z> {
    /// `output = FFT(input)` (sign -1), queued on `stream`.
    pub fn forward(&self, stream: &Stream, input: &DeviceBuffer<Complex<f64>>, output: &mut DeviceBuffer<Complex<f64>>) -> Result<(), FftError> {
        let (handle, i, o, accesses, _turn) = self.prepare(stream, input, output)?;
        // SAFETY: both buffers are live device allocations of this plan's context, at least as
        // long as the plan reads and writes (checked), and distinct (one is borrowed mutably);
        // declared to the door, so their drops and other streams' work wait for the transform.
        stream.enqueue("cufftExecZ2Z", &accesses, |raw| run(handle, raw, "cufftExecZ2Z", || unsafe { sys::cufftExecZ2Z(handle, i.cast(), o.cast(), FORWARD) }))
    }
    /// `output = IFFT(input)` (sign +1, unnormalised), queued on `stream`.
    pub fn inverse(&self, stream: &Stream, input: &DeviceBuffer<Complex<f64>>, output: &mut DeviceBuffer<Complex<f64>>) -> Result<(), FftError> {
        let (handle, i, o, accesses, _turn) = self.prepare(stream, input, output)?;
        // SAFETY: both buffers are live device allocations of this plan's context, at least as
        // long as the plan reads and writes (checked), and distinct (one is borrowed mutably);
        // declared to the door, so their drops and other streams' work wait for the transform.
        stream.enqueue("cufftExecZ2Z", &accesses, |raw| run(handle, raw, "cufftExecZ2Z", || unsafe { sys::cufftExecZ2Z(handle, i.cast(), o.cast(), INVERSE) }))
    }
}

impl Plan<R2C> {
    /// The non-redundant half spectrum of real `input`, queued on `stream`.
    pub fn forward(&self, stream: &Stream, input: &DeviceBuffer<f32>, output: &mut DeviceBuffer<Complex<f32>>) -> Result<(), FftError> {
        let (handle, i, o, accesses, _turn) = self.prepare(stream, input, output)?;
        // SAFETY: both buffers are live device allocations of this plan's context, at least as
        // long as the plan reads and writes (checked), and distinct (one is borrowed mutably);
        // declared to the door, so their drops and other streams' work wait for the transform.
        stream.enqueue("cufftExecR2C", &accesses, |raw| run(handle, raw, "cufftExecR2C", || unsafe { sys::cufftExecR2C(handle, i.cast(), o.cast()) }))
    }
}

impl Plan<D2Z> {
    /// The non-redundant half spectrum of real `input`, queued on `stream`.
    pub fn forward(&self, stream: &Stream, input: &DeviceBuffer<f64>, output: &mut DeviceBuffer<Complex<f64>>) -> Result<(), FftError> {
        let (handle, i, o, accesses, _turn) = self.prepare(stream, input, output)?;
        // SAFETY: both buffers are live device allocations of this plan's context, at least as
        // long as the plan reads and writes (checked), and distinct (one is borrowed mutably);
        // declared to the door, so their drops and other streams' work wait for the transform.
        stream.enqueue("cufftExecD2Z", &accesses, |raw| run(handle, raw, "cufftExecD2Z", || unsafe { sys::cufftExecD2Z(handle, i.cast(), o.cast()) }))
    }
}

impl Plan<C2R> {
    /// The real signal of a half spectrum (unnormalised), queued on `stream`. cuFFT uses the
    /// input as scratch space, so it is taken mutably and its contents are undefined after.
    pub fn inverse(&self, stream: &Stream, input: &mut DeviceBuffer<Complex<f32>>, output: &mut DeviceBuffer<f32>) -> Result<(), FftError> {
        let input = &*input;
        let (handle, i, o, accesses, _turn) = self.prepare(stream, input, output)?;
        // SAFETY: both buffers are live device allocations of this plan's context, at least as
        // long as the plan reads and writes (checked), and distinct (one is borrowed mutably);
        // declared to the door, so their drops and other streams' work wait for the transform.
        stream.enqueue("cufftExecC2R", &accesses, |raw| run(handle, raw, "cufftExecC2R", || unsafe { sys::cufftExecC2R(handle, i.cast(), o.cast()) }))
    }
}

impl Plan<Z2D> {
    /// The real signal of a half spectrum (unnormalised); overwrites `input` like [`Plan::<C2R>::inverse`].
    pub fn inverse(&self, stream: &Stream, input: &mut DeviceBuffer<Complex<f64>>, output: &mut DeviceBuffer<f64>) -> Result<(), FftError> {
        let input = &*input;
        let (handle, i, o, accesses, _turn) = self.prepare(stream, input, output)?;
        // SAFETY: both buffers are live device allocations of this plan's context, at least as
        // long as the plan reads and writes (checked), and distinct (one is borrowed mutably);
        // declared to the door, so their drops and other streams' work wait for the transform.
        stream.enqueue("cufftExecZ2D", &accesses, |raw| run(handle, raw, "cufftExecZ2D", || unsafe { sys::cufftExecZ2D(handle, i.cast(), o.cast()) }))
    }
}

impl<T: Transform> Drop for Plan<T> {
    fn drop(&mut self) {
        // cufftDestroy frees the plan's work area, which executions still queued use: wait for
        // the streams that ran the plan first. Inside a capture that would invalidate it, and
        // in a host callback CUDA is refused: `release` postpones it then (N12).
        let (handle, streams) = (self.handle, UsedStreams::hold(self.work_area.take_streams()));
        self.context.release(crate::context::Released::CufftPlan, move |context| {
            // Released outside captures only (`Context::release`), so a failed wait for the
            // whole context (a stream that ran the plan is gone) is a fault: left, said.
            let streams = match streams.resolve(context) {
                Ok(streams) => streams,
                Err((error, _)) => {
                    crate::memory::leaks::leaked_after_failed_wait("cuFFT plan", &error);
                    return;
                }
            };
            let _bound = match streams.iter().try_for_each(Stream::host_wait).and_then(|()| context.bind()) {
                Ok(bound) => bound,
                Err(error) => {
                    // Work still running after a reported timeout, or a faulted context: the
                    // plan is left to the context's teardown (said once, counted).
                    crate::memory::leaks::leaked_after_failed_wait("cuFFT plan", &error);
                    return;
                }
            };
            // cufftDestroy waits for the whole device, not only the plan's streams (F12-2).
            if !crate::memory::leaks::may_release("cuFFT plan", context.timed_out(), "cufftDestroy (it waits for the whole device)") {
                return;
            }
            // SAFETY: the handle came from cufftPlanMany and is destroyed once, after its work.
            let _ = unsafe { sys::cufftDestroy(handle) };
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_lengths_follow_cuffts_layout() {
        assert_eq!(lengths::<C2C>(&[1024], 8), (8192, 8192));
        assert_eq!(lengths::<R2C>(&[16, 10], 3), (480, 3 * 16 * 6));
        assert_eq!(lengths::<C2R>(&[4, 4, 7], 1), (4 * 4 * 4, 112));
        assert_eq!(lengths::<D2Z>(&[9], 2), (18, 10));
    }

    #[test]
    fn complex_is_two_packed_floats() {
        assert_eq!(std::mem::size_of::<Complex<f32>>(), 8);
        assert_eq!(std::mem::size_of::<Complex<f64>>(), 16);
        let value = Complex::new(1.0f32, -2.0);
        let bytes: &[u8] = bytemuck::bytes_of(&value);
        assert_eq!(bytes[..4], 1.0f32.to_ne_bytes());
        assert_eq!(bytes[4..], (-2.0f32).to_ne_bytes());
    }

    #[test]
    fn candidates_try_versioned_names_before_paths() {
        let candidates = candidates();
        assert_eq!(candidates[0], "libcufft.so.12");
        assert!(candidates.iter().all(|c| c.contains("libcufft.so")));
    }
}
