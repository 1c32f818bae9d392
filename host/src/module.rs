//! Modules: PTX (JIT-compiled by the driver, with its logs captured) or cubins/fatbins,
//! loaded explicitly with JIT options, checked against the kernels the host expects,
//! reloadable at run time, with typed access to their globals.

use std::ffi::{CString, c_void};
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, RwLock};

use bytemuck::Pod;
use cudarc::driver::sys;

use crate::context::Context;
use crate::driver::{self, driver_version};
use crate::error::{Error, Result};
use crate::function::Function;
use crate::KernelSignature;
use crate::ptx_version::PtxHeader;

/// How the driver picks between PTX and binary code inside a fatbin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JitFallback {
    /// Prefer compiling the PTX when no exactly matching binary is found.
    PreferPtx,
    /// Prefer a compatible binary over compiling PTX.
    PreferBinary,
}

/// Options for the driver's JIT compiler (`cuModuleLoadDataEx`). The info and error logs are
/// always captured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JitOptions {
    optimization_level: Option<u32>,
    max_registers: Option<u32>,
    target: Option<u32>,
    fallback: Option<JitFallback>,
    line_info: bool,
    verbose: bool,
}

impl JitOptions {
    /// The driver's defaults (optimisation level 4, target from the context).
    pub fn new() -> Self {
        Self::default()
    }

    /// Optimisation level 0 (none) to 4 (the default, most).
    #[must_use]
    pub fn optimization_level(mut self, level: u32) -> Self {
        self.optimization_level = Some(level);
        self
    }

    /// At most `registers` registers per thread.
    #[must_use]
    pub fn max_registers(mut self, registers: u32) -> Self {
        self.max_registers = Some(registers);
        self
    }

    /// Compile for architecture `arch` (e.g. 90) instead of the context's device.
    #[must_use]
    pub fn target(mut self, arch: u32) -> Self {
        self.target = Some(arch);
        self
    }

    /// How to choose between PTX and binary code.
    #[must_use]
    pub fn fallback(mut self, fallback: JitFallback) -> Self {
        self.fallback = Some(fallback);
        self
    }

    /// Keep line information (for profilers and `compute-sanitizer`).
    #[must_use]
    pub fn line_info(mut self, on: bool) -> Self {
        self.line_info = on;
        self
    }

    /// Ask the JIT for a verbose info log (registers, spills, ... per kernel); see
    /// [`Module::info_log`].
    #[must_use]
    pub fn verbose(mut self, on: bool) -> Self {
        self.verbose = on;
        self
    }

    fn validate(&self) -> Result<()> {
        if let Some(level) = self.optimization_level
            && level > 4
        {
            return Err(Error::InvalidJitOption(format!("optimization level {level} is out of range; use 0 (none) to 4 (most)")));
        }
        if let Some(0) = self.max_registers {
            return Err(Error::InvalidJitOption("max_registers(0) leaves no registers; use at least 16, or leave it out".into()));
        }
        Ok(())
    }
}

const LOG_SIZE: usize = 16 * 1024;

/// A loaded module; unloaded on drop. Its context must be alive, and current, when it drops
/// (the owners ensure that).
pub(crate) struct RawModule {
    raw: sys::CUmodule,
}

impl RawModule {
    /// Loads PTX text (JIT) or a cubin into the current context with default options.
    pub(crate) fn load(name: &str, image: &[u8], is_ptx: bool) -> Result<Self> {
        Self::load_with(name, image, is_ptx, &JitOptions::default()).map(|(module, _)| module)
    }

    /// Loads PTX text (JIT) or a cubin/fatbin into the current context, returning the module
    /// and the JIT's info log; a failure carries the error log. `name` labels errors.
    pub(crate) fn load_with(name: &str, image: &[u8], is_ptx: bool, options: &JitOptions) -> Result<(Self, String)> {
        options.validate()?;
        let owned;
        let data: *const c_void = if is_ptx {
            owned = CString::new(image.iter().copied().take_while(|&b| b != 0).collect::<Vec<u8>>()).expect("NULs were removed");
            owned.as_ptr().cast()
        } else {
            image.as_ptr().cast()
        };
        let mut info_log = vec![0u8; LOG_SIZE];
        let mut error_log = vec![0u8; LOG_SIZE];
        use sys::CUjit_option::*;
        let mut keys = vec![CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES];
        // Option values are passed in pointer-sized slots: integers by value.
        let mut values: Vec<*mut c_void> = vec![info_log.as_mut_ptr().cast(), LOG_SIZE as *mut c_void, error_log.as_mut_ptr().cast(), LOG_SIZE as *mut c_void];
        let mut add = |key, value: usize| {
            keys.push(key);
            values.push(value as *mut c_void);
        };
        if let Some(level) = options.optimization_level {
            add(CU_JIT_OPTIMIZATION_LEVEL, level as usize);
        }
        if let Some(registers) = options.max_registers {
            add(CU_JIT_MAX_REGISTERS, registers as usize);
        }
        match options.target {
            Some(arch) => add(CU_JIT_TARGET, arch as usize),
            None => add(CU_JIT_TARGET_FROM_CUCONTEXT, 0),
        }
        if let Some(fallback) = options.fallback {
            let value = match fallback {
                JitFallback::PreferPtx => sys::CUjit_fallback::CU_PREFER_PTX,
                JitFallback::PreferBinary => sys::CUjit_fallback::CU_PREFER_BINARY,
            };
            add(CU_JIT_FALLBACK_STRATEGY, value as usize);
        }
        if options.line_info {
            add(CU_JIT_GENERATE_LINE_INFO, 1);
        }
        if options.verbose {
            add(CU_JIT_LOG_VERBOSE, 1);
        }
        let mut raw = std::ptr::null_mut();
        // SAFETY: the image and the log buffers outlive the call; every option value follows
        // cuModuleLoadDataEx's contract for its key.
        let loaded = unsafe { driver::module::load_data_ex(&mut raw, data, keys.len() as u32, keys.as_mut_ptr(), values.as_mut_ptr()) };
        if let Err(source) = loaded {
            return Err(Error::ModuleLoad { module: name.to_string(), source, log: nul_terminated_text(&error_log) });
        }
        let module = RawModule { raw };
        // (On failure `module` is dropped, which unloads it.)
        crate::panic_report::install(raw)?;
        Ok((module, nul_terminated_text(&info_log)))
    }

    /// Looks up a kernel by symbol.
    pub(crate) fn function(&self, module_name: &str, symbol: &str) -> Result<sys::CUfunction> {
        let name = CString::new(symbol).map_err(|_| Error::KernelNotFound { kernel: symbol.into(), module: module_name.into() })?;
        let mut function = std::ptr::null_mut();
        // SAFETY: the module is loaded; writes one handle.
        match unsafe { driver::module::get_function(&mut function, self.raw, name.as_ptr()) } {
            Err(e) if e.code == sys::CUresult::CUDA_ERROR_NOT_FOUND => {
                return Err(Error::KernelNotFound { kernel: symbol.into(), module: module_name.into() });
            }
            other => other?,
        }
        Ok(function)
    }

    /// Unloads, reporting the driver's answer (Drop cannot).
    fn unload(mut self) -> Result<()> {
        let raw = std::mem::replace(&mut self.raw, std::ptr::null_mut());
        // SAFETY: loaded by us; `self` is disarmed above so it is unloaded once.
        unsafe { driver::module::unload(raw) }?;
        Ok(())
    }
}

impl Drop for RawModule {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            // SAFETY: loaded by us and unloaded once; the owning context is current (see owners).
            let _ = unsafe { driver::module::unload(self.raw) };
        }
    }
}

/// The text of a NUL-terminated byte buffer (a JIT log, a panic record field), trimmed.
pub(crate) fn nul_terminated_text(buffer: &[u8]) -> String {
    let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
    String::from_utf8_lossy(&buffer[..end]).trim().to_string()
}

/// Checks PTX text against the context's driver and device before the driver JIT-compiles
/// it, so an unsupported PTX ISA or architecture is reported as such.
pub(crate) fn check_ptx_supported(name: &str, ptx: &str, context: &Context) -> Result<()> {
    let Some(header) = PtxHeader::parse(ptx) else {
        return Ok(()); // Let the driver's own error (and log) describe malformed PTX.
    };
    header.check(name, driver_version()?, context.device().arch()?)
}

/// Checks that `image` is a whole 64-bit ELF cubin or a whole fatbin, from the sizes in its
/// header.
fn check_binary_image(image: &[u8]) -> std::result::Result<(), String> {
    let u16_at = |at: usize| image.get(at..at + 2).map(|b| u16::from_le_bytes([b[0], b[1]]) as u64);
    let u64_at = |at: usize| image.get(at..at + 8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
    if image.starts_with(b"\x7fELF") {
        // ELF64: the program and section header tables (e_phoff at 0x20 with e_phentsize and
        // e_phnum at 0x36/0x38; e_shoff at 0x28 with e_shentsize and e_shnum at 0x3A/0x3C)
        // must lie inside the image.
        if image.get(4) != Some(&2) {
            return Err("a 32-bit ELF; CUDA cubins are 64-bit".into());
        }
        let tables = [(u64_at(0x20), u16_at(0x36), u16_at(0x38), "program"), (u64_at(0x28), u16_at(0x3A), u16_at(0x3C), "section")];
        for (offset, entry, count, what) in tables {
            let (Some(offset), Some(entry), Some(count)) = (offset, entry, count) else {
                return Err(format!("the ELF header is truncated ({} bytes)", image.len()));
            };
            let end = offset.saturating_add(entry.saturating_mul(count));
            if end > image.len() as u64 {
                return Err(format!("the ELF is truncated: its {what} headers end at byte {end}, the image has {}", image.len()));
            }
        }
        return Ok(());
    }
    const FATBIN_MAGIC: [u8; 4] = 0xBA55_ED50u32.to_le_bytes();
    if image.starts_with(&FATBIN_MAGIC) {
        let (Some(header), Some(size)) = (u16_at(6), u64_at(8)) else {
            return Err(format!("the fatbin header is truncated ({} bytes)", image.len()));
        };
        let end = header.saturating_add(size);
        if end > image.len() as u64 {
            return Err(format!("the fatbin is truncated: it declares {end} bytes, the image has {}", image.len()));
        }
        return Ok(());
    }
    if image.starts_with(b"//") || image.windows(8).take(4096).any(|w| w == b".version") {
        return Err("it looks like PTX text; load it with `Module::load_ptx`".into());
    }
    Err("it is neither a cubin (ELF) nor a fatbin; build one with `ptxas -arch=sm_XX` or `nvcc -fatbin`".into())
}

/// An explicitly loaded module: PTX JIT-compiled with [`JitOptions`], or a cubin/fatbin.
/// Cloning shares it; it is unloaded when the last clone (and the last [`Function`] from it)
/// is dropped, after the work queued in its context has finished.
#[derive(Clone)]
pub struct Module {
    inner: Arc<ModuleInner>,
}

struct ModuleInner {
    /// `None` only after an explicit unload.
    raw: Option<RawModule>,
    context: Context,
    name: String,
    info_log: String,
    /// Kernels looked up and checked for typed launchers, by signature (two crates may have
    /// kernels of one name with different parameters: each is checked).
    functions: Mutex<Vec<(&'static KernelSignature, sys::CUfunction)>>,
}

// SAFETY: the module handle is used with its context bound; mutable state is behind a Mutex.
unsafe impl Send for ModuleInner {}
// SAFETY: as above.
unsafe impl Sync for ModuleInner {}

impl Module {
    /// JIT-compiles `ptx` into `context` with `options`; `name` labels errors. A PTX ISA or
    /// target the driver/device cannot handle is refused before the driver sees it, and a
    /// failed compilation's error carries the JIT error log.
    pub fn load_ptx(context: &Context, name: &str, ptx: &str, options: &JitOptions) -> Result<Self> {
        context.bind_to_thread()?;
        check_ptx_supported(name, ptx, context)?;
        let (raw, info_log) = RawModule::load_with(name, ptx.as_bytes(), true, options)?;
        Ok(Self::wrap(context, name, raw, info_log))
    }

    /// Loads a cubin or fatbin image into `context` (fatbins may JIT their PTX with `options`).
    /// The image's header is checked first (the driver trusts the sizes in it, so a truncated
    /// image would be read past its end); PTX text goes to [`Module::load_ptx`].
    pub fn load_binary(context: &Context, name: &str, image: &[u8], options: &JitOptions) -> Result<Self> {
        check_binary_image(image).map_err(|reason| Error::InvalidImage { module: name.to_string(), reason })?;
        context.bind_to_thread()?;
        let (raw, info_log) = RawModule::load_with(name, image, false, options)?;
        Ok(Self::wrap(context, name, raw, info_log))
    }

    /// [`Module::load_ptx`], then [`Module::check_kernels`].
    pub fn load_ptx_checked(context: &Context, name: &str, ptx: &str, options: &JitOptions, expected: &[&KernelSignature]) -> Result<Self> {
        let module = Self::load_ptx(context, name, ptx, options)?;
        module.check_kernels(expected)?;
        Ok(module)
    }

    fn wrap(context: &Context, name: &str, raw: RawModule, info_log: String) -> Self {
        Module {
            inner: Arc::new(ModuleInner { raw: Some(raw), context: context.clone(), name: name.to_string(), info_log, functions: Mutex::new(Vec::new()) }),
        }
    }

    /// The name given at load time.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The JIT compiler's info log (empty for a cubin, and often for PTX).
    pub fn info_log(&self) -> &str {
        &self.inner.info_log
    }

    /// The context it is loaded in.
    pub fn context(&self) -> &Context {
        &self.inner.context
    }

    fn raw(&self) -> &RawModule {
        self.inner.raw.as_ref().expect("a Module handle is never observed after unload")
    }

    /// The kernel `symbol`, for attributes and occupancy.
    pub fn function(&self, symbol: &str) -> Result<Function> {
        self.inner.context.bind_to_thread()?;
        let raw = self.raw().function(&self.inner.name, symbol)?;
        Ok(Function::new(raw, symbol.to_string(), self.inner.context.clone(), Some(self.inner.clone())))
    }

    /// Checks that every kernel in `expected` is in the module with the parameter sizes its
    /// launcher passes (`cuFuncGetParamInfo`, CUDA 12.4+; older drivers check names only).
    pub fn check_kernels(&self, expected: &[&KernelSignature]) -> Result<()> {
        self.inner.context.bind_to_thread()?;
        for signature in expected {
            let function = self.raw().function(&self.inner.name, signature.symbol)?;
            check_params(function, signature, &self.inner.name)?;
        }
        Ok(())
    }

    /// The kernel of `signature`, looked up and checked on first use, then cached (the typed
    /// launchers' path: `name::launch_in(&module, ..)`). The context must be bound.
    pub(crate) fn checked_function(&self, signature: &'static KernelSignature) -> Result<sys::CUfunction> {
        let mut functions = self.inner.functions.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(&(_, f)) = functions.iter().find(|(s, _)| std::ptr::eq(*s, signature) || *s == signature) {
            return Ok(f);
        }
        let function = self.raw().function(&self.inner.name, signature.symbol)?;
        check_params(function, signature, &self.inner.name)?;
        functions.push((signature, function));
        Ok(function)
    }

    /// A typed view of the global (or `__constant__`) variable `name`, which must have exactly
    /// the size of `T` (use an array type for an array).
    pub fn global<T: Pod>(&self, name: &str) -> Result<Global<'_, T>> {
        self.inner.context.bind_to_thread()?;
        let symbol = CString::new(name).map_err(|_| Error::GlobalNotFound { name: name.into(), module: self.inner.name.clone() })?;
        let (mut address, mut bytes) = (0, 0);
        // SAFETY: writes an address and a size for a loaded module.
        match unsafe { driver::module::get_global(&mut address, &mut bytes, self.raw().raw, symbol.as_ptr()) } {
            Err(e) if e.code == sys::CUresult::CUDA_ERROR_NOT_FOUND => {
                return Err(Error::GlobalNotFound { name: name.into(), module: self.inner.name.clone() });
            }
            other => other?,
        }
        if bytes != std::mem::size_of::<T>() {
            return Err(Error::GlobalSizeMismatch {
                name: name.into(),
                module: self.inner.name.clone(),
                bytes,
                type_name: std::any::type_name::<T>(),
                type_bytes: std::mem::size_of::<T>(),
            });
        }
        Ok(Global { address, module: self, _value: PhantomData })
    }

    /// Unloads the module now, reporting errors, once queued work in its context finished. If
    /// clones or [`Function`]s of it are still alive, it is unloaded when the last one drops.
    pub fn unload(self) -> Result<()> {
        let Some(mut inner) = Arc::into_inner(self.inner) else { return Ok(()) };
        inner.context.synchronize()?;
        match inner.raw.take() {
            Some(raw) => raw.unload(),
            None => Ok(()),
        }
    }
}

impl Drop for ModuleInner {
    fn drop(&mut self) {
        // Kernels of this module may still be queued or running (a hot reload swaps modules
        // while launches are in flight): let them finish before the code goes away. Errors
        // cannot be reported from Drop; a faulted context reports them on its next call.
        if self.raw.is_some() && self.context.synchronize().is_ok() {
            self.raw.take();
        } else if let Some(raw) = self.raw.take() {
            // The context is unusable; unloading would fail, and leaking is harmless then.
            std::mem::forget(raw);
        }
    }
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Module").field("name", &self.inner.name).finish()
    }
}

/// Compares the kernel's PTX parameters with what its launcher passes.
fn check_params(function: sys::CUfunction, signature: &KernelSignature, module: &str) -> Result<()> {
    const PARAM_INFO: (u32, u32) = (12, 4);
    if driver_version()? < PARAM_INFO {
        return Ok(()); // cuFuncGetParamInfo does not exist before CUDA 12.4.
    }
    let mismatch = |detail: String| Error::KernelSignatureMismatch { kernel: signature.symbol.to_string(), module: module.to_string(), detail };
    let mut found = Vec::new();
    loop {
        let (mut offset, mut size) = (0, 0);
        // SAFETY: writes two sizes; an index past the last parameter returns an error.
        let info = unsafe { driver::function::get_param_info(function, found.len(), &mut offset, &mut size) };
        if info.is_err() || found.len() > 4096 {
            break;
        }
        found.push(size);
    }
    let expected = signature.param_sizes;
    if found.len() != expected.len() {
        return Err(mismatch(format!("the module's kernel has {} parameters, the launcher passes {} (sizes in bytes: module {found:?}, launcher {expected:?})", found.len(), expected.len())));
    }
    if let Some(i) = (0..found.len()).find(|&i| found[i] != expected[i]) {
        return Err(mismatch(format!("parameter {i} is {} bytes in the module but {} bytes in the launcher", found[i], expected[i])));
    }
    Ok(())
}

/// A typed global variable of a [`Module`]; reads and writes are synchronous copies ordered
/// on the legacy default stream, like [`DeviceBuffer`](crate::DeviceBuffer)'s.
pub struct Global<'m, T> {
    address: sys::CUdeviceptr,
    module: &'m Module,
    _value: PhantomData<T>,
}

impl<T> std::fmt::Debug for Global<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Global").field("address", &format_args!("{:#x}", self.address)).field("type", &std::any::type_name::<T>()).finish()
    }
}

impl<T: Pod> Global<'_, T> {
    /// The current value.
    pub fn read(&self) -> Result<T> {
        self.module.inner.context.bind_to_thread()?;
        let mut value = T::zeroed();
        // SAFETY: the global holds size_of::<T>() bytes (checked at creation); T accepts any bytes.
        unsafe { driver::memory::memcpy_dtoh((&mut value as *mut T).cast(), self.address, std::mem::size_of::<T>()) }?;
        Ok(value)
    }

    /// Sets the value; launches queued after this see it.
    pub fn write(&self, value: &T) -> Result<()> {
        self.module.inner.context.bind_to_thread()?;
        // SAFETY: the global holds size_of::<T>() bytes (checked at creation).
        unsafe { driver::memory::memcpy_htod(self.address, (value as *const T).cast(), std::mem::size_of::<T>()) }?;
        Ok(())
    }

    /// The device address.
    pub fn device_ptr(&self) -> u64 {
        self.address
    }
}

/// A module that can be replaced at run time (hot reload). [`ReloadableModule::current`]
/// hands out the module of the moment; a reload swaps in a new one, and the old one stays
/// loaded until its last handle is dropped and the work queued before then has finished, so
/// launches in flight are not invalidated.
pub struct ReloadableModule {
    current: RwLock<Module>,
    expected: Vec<&'static KernelSignature>,
    options: JitOptions,
    generation: std::sync::atomic::AtomicU64,
}

impl ReloadableModule {
    /// Loads `ptx` and checks it has the `expected` kernels; reloads use the same options and
    /// checks.
    pub fn load_ptx(context: &Context, name: &str, ptx: &str, options: JitOptions, expected: &[&'static KernelSignature]) -> Result<Self> {
        let module = Module::load_ptx_checked(context, name, ptx, &options, expected)?;
        Ok(ReloadableModule { current: RwLock::new(module), expected: expected.to_vec(), options, generation: 0.into() })
    }

    /// The module of the moment (a cheap clone of a shared handle).
    pub fn current(&self) -> Module {
        self.current.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// How many reloads succeeded.
    pub fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Loads new PTX text and, if it compiles and has the expected kernels, swaps it in. On
    /// error the current module stays.
    pub fn reload_ptx(&self, ptx: &str) -> Result<()> {
        let old = self.current();
        let new = Module::load_ptx_checked(old.context(), old.name(), ptx, &self.options, &self.expected)?;
        let replaced = std::mem::replace(&mut *self.current.write().unwrap_or_else(|p| p.into_inner()), new);
        // Dropped outside the lock: the last handle of a module waits for its queued work.
        drop(replaced);
        drop(old);
        self.generation.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jit_options_out_of_range_are_refused_with_the_range() {
        let message = JitOptions::new().optimization_level(5).validate().unwrap_err().to_string();
        assert!(message.contains("optimization level 5") && message.contains("0 (none) to 4"), "{message}");
        assert!(JitOptions::new().max_registers(0).validate().is_err());
        assert!(JitOptions::new().optimization_level(0).max_registers(32).line_info(true).validate().is_ok());
    }

    #[test]
    fn binary_images_are_checked_against_their_own_sizes() {
        let mut elf = vec![0u8; 0x40];
        elf[..5].copy_from_slice(b"\x7fELF\x02");
        elf[0x28..0x30].copy_from_slice(&0x40u64.to_le_bytes()); // section headers right after
        elf[0x3A..0x3C].copy_from_slice(&64u16.to_le_bytes());
        elf[0x3C..0x3E].copy_from_slice(&2u16.to_le_bytes());
        let message = check_binary_image(&elf).unwrap_err();
        assert!(message.contains("section headers end at byte 192, the image has 64"), "{message}");
        elf.resize(192, 0);
        assert_eq!(check_binary_image(&elf), Ok(()));

        let mut fatbin = 0xBA55_ED50u32.to_le_bytes().to_vec();
        fatbin.extend_from_slice(&[1, 0, 16, 0]);
        fatbin.extend_from_slice(&100u64.to_le_bytes());
        assert!(check_binary_image(&fatbin).unwrap_err().contains("declares 116 bytes, the image has 16"));
        fatbin.resize(116, 0);
        assert_eq!(check_binary_image(&fatbin), Ok(()));

        assert!(check_binary_image(b"//\n.version 7.0\n").unwrap_err().contains("load it with `Module::load_ptx`"));
        assert!(check_binary_image(b"not a cubin at all").unwrap_err().contains("neither a cubin (ELF) nor a fatbin"));
    }

    #[test]
    fn logs_stop_at_the_nul() {
        assert_eq!(nul_terminated_text(b"ptxas info: 1 register\n\0garbage"), "ptxas info: 1 register");
    }
}
