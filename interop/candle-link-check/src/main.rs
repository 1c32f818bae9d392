//! ferrocuda-host and cudarc with `dynamic-linking` (what candle-core 0.11 asks for) in one
//! binary. It prints one line per check and exits non-zero when a check fails:
//!
//! - both see the same linked driver: ferrocuda's probe finds it, and `cuInit` through
//!   ferrocuda and through cudarc gives the same answer (`CUDA_ERROR_STUB_LIBRARY` on the link
//!   stubs of scripts/check-candle-link.sh; success on a GPU machine);
//! - ferrocuda's cuBLAS, cuBLASLt and cuFFT probes find the linked libraries, and cuFFT answers;
//! - on a GPU: a cudarc context and stream borrowed by ferrocuda (`borrowed::cudarc`), a
//!   ferrocuda buffer in cudarc's context, cuBLAS and cuBLASLt handles on cudarc's stream, and
//!   a cudarc slice lent to ferrocuda at its address;
//! - with `--features candle`: a candle tensor computed in the same binary.

use std::process::ExitCode;

use cudarc::driver::{CudaContext, DevicePtr};
use ferrocuda_host::{Cublas, CublasLt, DeviceBuffer, borrowed, cufft};

fn main() -> ExitCode {
    let mut failures = 0;
    let mut check = |what: &str, ok: bool, detail: String| {
        println!("{} {what}: {detail}", if ok { "ok  " } else { "FAIL" });
        failures += usize::from(!ok);
    };

    let present = ferrocuda_host::driver_present();
    check("ferrocuda finds the linked driver library", present, format!("driver_present() = {present}"));
    let ours = ferrocuda_host::init();
    let theirs = cudarc::driver::result::init();
    // The same `CUresult` through both.
    let same = match (&ours, &theirs) {
        (Ok(()), Ok(())) => true,
        (Err(ferrocuda_host::Error::Driver(e)), Err(t)) => e.code == t.0,
        _ => false,
    };
    check("cuInit through ferrocuda and through cudarc agree", same, format!("ferrocuda: {ours:?}; cudarc: {theirs:?}"));

    // ferrocuda's cuBLAS(Lt) and cuFFT wrappers, linked too (cudarc links cuBLAS(Lt); cuFFT,
    // which cudarc's `dynamic-linking` leaves out, this crate's build script names).
    let libraries = [("cuBLAS", Cublas::is_available()), ("cuBLASLt", CublasLt::is_available()), ("cuFFT", cufft::cufft_present())];
    check("ferrocuda finds the linked cuBLAS, cuBLASLt and cuFFT", libraries.iter().all(|(_, present)| *present), format!("{libraries:?}"));
    let version = cufft::cufft_version();
    let answered = matches!(version, Ok(_) | Err(cufft::FftError::Cufft { .. }));
    check("cuFFT answers through the linked library", answered, format!("cufft_version() = {version:?}"));

    if ours.is_ok() && theirs.is_ok() {
        match on_the_gpu() {
            Ok(detail) => check("cudarc's context, stream and slice used by ferrocuda", true, detail),
            Err(e) => check("cudarc's context, stream and slice used by ferrocuda", false, e),
        }
    }

    #[cfg(feature = "candle")]
    {
        let device = candle_core::Device::cuda_if_available(0).unwrap_or(candle_core::Device::Cpu);
        let sum = candle_core::Tensor::arange(0f32, 4f32, &device).and_then(|t| t.sum_all()).and_then(|t| t.to_scalar::<f32>());
        check("candle computes in the same binary", matches!(sum, Ok(6.0)), format!("sum(0..4) on {device:?} = {sum:?}"));
    }

    if failures == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

/// cudarc's context and stream as ferrocuda's; a ferrocuda buffer round trip in that context;
/// a cudarc slice lent to ferrocuda at cudarc's own address.
fn on_the_gpu() -> Result<String, String> {
    let ctx = CudaContext::new(0).map_err(|e| format!("cudarc context: {e:?}"))?;
    let cu_stream = ctx.default_stream();
    let context = borrowed::cudarc::context(&ctx).map_err(|e| e.to_string())?;
    let stream = borrowed::cudarc::stream(&cu_stream).map_err(|e| e.to_string())?;
    let data: Vec<f32> = (0..1024).map(|i| i as f32).collect();
    let buffer = DeviceBuffer::from_slice(&context, &data).map_err(|e| e.to_string())?;
    let back = buffer.to_vec().map_err(|e| e.to_string())?;
    if back != data {
        return Err("a ferrocuda buffer in cudarc's context came back different".into());
    }
    let x = cu_stream.clone_htod(&data).map_err(|e| format!("cudarc copy: {e:?}"))?;
    let (theirs, sync) = x.device_ptr(&cu_stream);
    let (ours, len) = borrowed::cudarc::scope(|scope| scope.slice(&x, &cu_stream).map(|xs| (xs.device_ptr(), xs.len()))).map_err(|e| e.to_string())?;
    drop(sync);
    if (ours, len) != (theirs, data.len()) {
        return Err(format!("lent slice at {ours:#x} x {len}, cudarc's at {theirs:#x} x {}", data.len()));
    }
    Cublas::new(&stream).map_err(|e| e.to_string())?;
    CublasLt::new(&stream).map_err(|e| e.to_string())?;
    stream.synchronize().map_err(|e| e.to_string())?;
    if context.raw() != ctx.cu_ctx() {
        return Err("ferrocuda's context is not cudarc's".into());
    }
    Ok(format!("context {:?} shared; buffer round trip and lent slice at {ours:#x} agree", ctx.cu_ctx()))
}
