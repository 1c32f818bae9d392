//! What the CPU executor checks against the kernel crate's embedded module before it runs a
//! kernel: that the host build it runs and the device build agree about integer overflow
//! (audit 2026-11-27b, Q11), and that the kernel's stack fits a GPU thread (Q7).

use std::sync::Mutex;

use ferrocuda_types::{EmbeddedModule, LaunchConfig, LaunchProblem, MAX_LOCAL_BYTES_PER_THREAD};

use super::error::CpuError;
use super::panic_capture;

/// Whether `probe` (`|x| x + 1`, compiled by a kernel crate's host build) panics for 255: that
/// build checks integer overflow. Asked once per probe and process; the panic is caught and
/// kept off stderr by the executor's panic hook.
pub(crate) fn host_checks_overflow(probe: fn(u8) -> u8) -> bool {
    static KNOWN: Mutex<Vec<(usize, bool)>> = Mutex::new(Vec::new());
    let key = probe as usize;
    if let Some(&(_, checks)) = KNOWN.lock().unwrap_or_else(|e| e.into_inner()).iter().find(|(k, _)| *k == key) {
        return checks;
    }
    let checks = panic_capture::silently(|| probe(std::hint::black_box(255))).is_err();
    KNOWN.lock().unwrap_or_else(|e| e.into_inner()).push((key, checks));
    checks
}

/// The checks of `kernel` (a symbol of `module`) before the CPU executor runs it:
/// - Q11: the kernel crate's host build (which the executor runs) and its device build (which a
///   GPU runs) check integer overflow alike, so that both give the same result (a panic, or the
///   wrapped value) for the same profile;
/// - Q7: the kernel's stack, as `ptxas -v` reported it at build time, is less than a GPU
///   thread's local-memory limit (a GPU refuses the launch). Without `ptxas` at build time
///   there is no figure, and nothing is checked: the host build's frames are another size.
/// - F7: the kernel's static shared memory (`ptxas -v`) plus `config`'s dynamic shared memory
///   fit one block (without `ptxas` the executor checks it when a `shared_array!` is reached).
///
/// # Errors
/// [`CpuError::OverflowChecksDiffer`], or [`CpuError::InvalidConfig`] with
/// [`LaunchProblem::LocalMemoryTooLarge`] or [`LaunchProblem::SharedMemoryTotalTooLarge`].
pub fn check_module(kernel: &str, module: &EmbeddedModule, config: &LaunchConfig) -> Result<(), CpuError> {
    let host = host_checks_overflow(module.host_overflow_probe);
    if host != module.device_overflow_checks {
        return Err(CpuError::OverflowChecksDiffer { kernel: kernel.to_owned(), host, device: module.device_overflow_checks });
    }
    if let Some(bytes) = module.largest_stack(kernel).filter(|&bytes| bytes >= MAX_LOCAL_BYTES_PER_THREAD) {
        let problem = LaunchProblem::LocalMemoryTooLarge { bytes, limit: MAX_LOCAL_BYTES_PER_THREAD, reserve: None };
        return Err(CpuError::InvalidConfig { kernel: kernel.to_owned(), problem });
    }
    if let Some(static_bytes) = module.static_shared_bytes(kernel) {
        config.validate_total_shared(static_bytes, &super::CPU_LIMITS).map_err(|problem| CpuError::InvalidConfig { kernel: kernel.to_owned(), problem })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use ferrocuda_types::{EmbeddedImages, KernelResources};

    use super::*;

    fn wrapping(x: u8) -> u8 {
        x.wrapping_add(1)
    }
    fn checked(x: u8) -> u8 {
        x.checked_add(1).expect("attempt to add with overflow")
    }

    static BIG: [KernelResources; 2] = [
        KernelResources { arch: 90, kernel: "big", registers: 32, spill_stores: 0, spill_loads: 0, stack_frame: 524_288, shared_bytes: 0 },
        KernelResources { arch: 90, kernel: "small", registers: 32, spill_stores: 0, spill_loads: 0, stack_frame: 4096, shared_bytes: 0 },
    ];

    fn one() -> LaunchConfig {
        LaunchConfig::new(1u32, 32u32)
    }

    fn module(device_overflow_checks: bool, host_overflow_probe: fn(u8) -> u8) -> EmbeddedModule {
        module_of(&BIG, device_overflow_checks, host_overflow_probe)
    }

    fn module_of(resources: &'static [KernelResources], device_overflow_checks: bool, host_overflow_probe: fn(u8) -> u8) -> EmbeddedModule {
        let images = EmbeddedImages { crate_name: "k", toolchain: "", ptx: &[], cubins: &[], resources, device_overflow_checks, host_overflow_probe };
        // SAFETY: a test module with no image, never loaded on a GPU.
        unsafe { EmbeddedModule::new(images) }
    }

    /// Q11: a host build that checks overflow beside a device build that wraps (or the other
    /// way round) is refused by name; alike, the kernel runs.
    #[test]
    fn q11_host_and_device_builds_that_disagree_about_overflow_are_refused() {
        assert!(!host_checks_overflow(wrapping));
        assert!(host_checks_overflow(checked));
        let error = check_module("small", &module(false, checked), &one()).unwrap_err();
        assert_eq!(error, CpuError::OverflowChecksDiffer { kernel: "small".into(), host: true, device: false });
        let message = error.to_string();
        assert!(message.contains("overflow_checks(true)") && message.contains("wraps"), "{message}");
        assert!(matches!(check_module("small", &module(true, wrapping), &one()), Err(CpuError::OverflowChecksDiffer { host: false, device: true, .. })));
        check_module("small", &module(false, wrapping), &one()).unwrap();
        check_module("small", &module(true, checked), &one()).unwrap();
    }

    /// Q7: a kernel whose `ptxas` stack is 512 KiB (the audit's `big_stack`, which an H100
    /// refused) is refused on the CPU executor too, with the limit named; a kernel without a
    /// figure (no cubin) or with a small stack runs.
    #[test]
    fn q7_a_kernel_whose_stack_a_gpu_refuses_is_refused() {
        let error = check_module("big", &module(false, wrapping), &one()).unwrap_err();
        let CpuError::InvalidConfig { problem: LaunchProblem::LocalMemoryTooLarge { bytes: 524_288, limit, reserve: None }, .. } = &error else {
            panic!("{error:?}")
        };
        assert_eq!(*limit, 512 * 1024);
        let message = error.to_string();
        assert!(message.contains("524288 bytes (512 KiB) of local memory per thread") && message.contains("shared memory"), "{message}");
        check_module("small", &module(false, wrapping), &one()).unwrap();
        check_module("unknown", &module(false, wrapping), &one()).unwrap();
    }

    /// F7: a kernel whose `ptxas` static shared memory plus the launch's dynamic shared memory
    /// exceed the block's limit is refused before it runs, naming both parts.
    #[test]
    fn f7_static_shared_memory_from_ptxas_plus_dynamic_over_the_limit_is_refused_at_launch() {
        static SHARED: [KernelResources; 1] =
            [KernelResources { arch: 90, kernel: "r22", registers: 32, spill_stores: 0, spill_loads: 0, stack_frame: 0, shared_bytes: 48000 }];
        let module = module_of(&SHARED, false, wrapping);
        let error = check_module("r22", &module, &one().with_shared_bytes(190 * 1024)).unwrap_err();
        assert!(
            matches!(
                &error,
                CpuError::InvalidConfig { problem: LaunchProblem::SharedMemoryTotalTooLarge { static_bytes: 48000, dynamic_bytes: 194560, max: 232448 }, .. }
            ),
            "{error:?}"
        );
        check_module("r22", &module, &one().with_shared_bytes(184448)).unwrap();
    }
}
