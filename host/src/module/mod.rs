//! Modules: PTX (JIT-compiled by the driver, with its logs captured) or cubins/fatbins,
//! loaded explicitly with JIT options, checked against the kernels the host expects,
//! reloadable at run time, with typed access to their globals.

pub(crate) mod checks;
mod global;
mod image;
pub(crate) mod jit;
pub(crate) mod raw;
mod reloadable;
pub(crate) mod symbols;

use std::ffi::CString;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, RwLock};

use bytemuck::Pod;
use cudarc::driver::sys;

use crate::KernelSignature;
use crate::context::{Context, Handle};
use crate::driver;
use crate::error::{Error, Result};
use crate::function::Function;
use crate::memory::usage::{Access, BufferAccess, BufferUsage};
pub use global::Global;
pub use jit::{JitFallback, JitOptions};
pub(crate) use raw::{RawModule, check_ptx_supported};
pub use reloadable::ReloadableModule;

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
    /// The use of the module's global variables by stream work (S1): every launch of one of
    /// its kernels reads them, [`Global::write`] writes them.
    globals: BufferUsage,
    /// Held shared by launches and [`Global::read`], exclusively by [`Global::write`], around
    /// their declaration and queuing: a write's declaration cannot fall between another
    /// thread's declaration and its launch (the fast path then stays sound across threads).
    globals_gate: RwLock<()>,
}

// SAFETY: the module handle is used with its context bound; mutable state is behind a Mutex.
unsafe impl Send for ModuleInner {}
// SAFETY: as above.
unsafe impl Sync for ModuleInner {}

impl Module {
    /// JIT-compiles `ptx` into `context` with `options`; `name` labels errors. A PTX ISA or
    /// target the driver/device cannot handle is refused before the driver sees it, and a
    /// failed compilation's error carries the JIT error log.
    ///
    /// # Safety
    /// The typed launchers (`name::launch_in(&module, ..)`) trust the module's kernels to
    /// take the parameters their signature says (U7: a kernel with the right name and
    /// parameter sizes but other element types writes out of bounds). Kernels built by
    /// `#[kernel]` carry a fingerprint of their full signature that `launch_in` checks, so for
    /// PTX built by this project's builder that is checked; for any other kernel the caller
    /// vouches that each one launched through a typed launcher has that launcher's signature
    /// and keeps what a `#[kernel]` of that signature promises, which the launcher is safe
    /// because of: it only reads its `&[T]` inputs, writes an output only where the output
    /// type lets the writing thread (its own elements of a `DisjointSlice`, atomically for an
    /// `AtomicSlice`, `UncheckedSlice`'s rule), never past a slice's length, and touches no
    /// other memory. A stub whose parameters are raw pointers (`*const T`, `*mut T`) has
    /// `unsafe` launchers, whose contract then states what the kernel touches (audit
    /// 2026-11-28c, G15-4: a foreign kernel with a slice stub's parameter list that writes its
    /// input keeps the letter of "has that launcher's signature", and its safe launches would
    /// race with every reader of that input). Every `.global` named in
    /// [`JitOptions::host_writable_globals`] is one the device code lets the host change (a
    /// `static mut`, a `static` of an `UnsafeCell` type, a non-const `__device__` variable):
    /// its code does not assume its value (session 21); a `.const` variable named there is not a
    /// `const`-qualified `__constant__` (nvcc folds its values into the code, and declares it
    /// exactly as a mutable `__constant__`: session 22; since session 23 unnamed `.const` data
    /// is read-only to the host, see [`JitOptions::host_writable_globals`]).
    pub unsafe fn load_ptx(context: &Context, name: &str, ptx: &str, options: &JitOptions) -> Result<Self> {
        let _bound = context.bind()?;
        context.refuse_after_timeout(|| format!("Module::load_ptx(`{name}`)"))?;
        check_ptx_supported(name, ptx, context.device())?;
        let (raw, info_log) = RawModule::load_with(name, ptx.as_bytes(), true, options, &context.inner.panic_record)?;
        Ok(Self::wrap(context, name, raw, info_log))
    }

    /// Loads a cubin or fatbin image into `context` (fatbins may JIT their PTX with `options`).
    /// The image's header is checked first (a truncated image would be read past its end);
    /// PTX text goes to [`Module::load_ptx`].
    ///
    /// # Safety
    /// The driver trusts the image: section and program-header contents pointing outside it
    /// crash the process inside the driver (U6), and nothing short of the driver itself could
    /// check them. The image must be a well-formed cubin or fatbin (e.g. made by `ptxas` or
    /// `nvcc`, not altered since), and its kernels must have the signatures their typed
    /// launchers say, and the globals named host-writable in `options` be so, as for
    /// [`Module::load_ptx`].
    pub unsafe fn load_binary(context: &Context, name: &str, image: &[u8], options: &JitOptions) -> Result<Self> {
        image::check_binary_image(image).map_err(|reason| Error::InvalidImage { module: name.to_string(), reason })?;
        let _bound = context.bind()?;
        context.refuse_after_timeout(|| format!("Module::load_binary(`{name}`)"))?;
        let (raw, info_log) = RawModule::load_with(name, image, false, options, &context.inner.panic_record)?;
        Ok(Self::wrap(context, name, raw, info_log))
    }

    /// [`Module::load_ptx`], then [`Module::check_kernels`].
    ///
    /// # Safety
    /// As for [`Module::load_ptx`].
    pub unsafe fn load_ptx_checked(context: &Context, name: &str, ptx: &str, options: &JitOptions, expected: &[&KernelSignature]) -> Result<Self> {
        // SAFETY: forwarded to the caller.
        let module = unsafe { Self::load_ptx(context, name, ptx, options) }?;
        module.check_kernels(expected)?;
        Ok(module)
    }

    fn wrap(context: &Context, name: &str, raw: RawModule, info_log: String) -> Self {
        Module {
            inner: Arc::new(ModuleInner {
                raw: Some(raw),
                context: context.clone(),
                name: name.to_string(),
                info_log,
                functions: Mutex::new(Vec::new()),
                globals: BufferUsage::idle(context),
                globals_gate: RwLock::new(()),
            }),
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

    /// A handle that keeps the module loaded (for graphs that captured its kernels).
    pub(crate) fn keep_alive(&self) -> Arc<dyn std::any::Any + Send + Sync> {
        self.inner.clone()
    }

    /// Runs `f` with the access of stream work to the module's globals, holding the gate for
    /// `access` (shared for a read, exclusive for a write) while `f` declares and queues it.
    /// Refused inside a door call's work ([`Error::NestedDoorCall`](crate::Error::NestedDoorCall),
    /// G15R-6): the gate is held across a door call, so its holder may wait for that work.
    /// For `Global::read`/`write`, whose door calls declare only the globals (no shared record:
    /// the gate's holder waits for no record); a launch takes the gate inside its door call,
    /// after its arguments' records ([`Module::globals_for_launch`], session 17).
    pub(crate) fn with_globals<R>(&self, access: Access, operation: &str, f: impl FnOnce(BufferAccess<'_>) -> crate::Result<R>) -> crate::Result<R> {
        crate::stream::refuse_inside_door_work(operation)?;
        let globals = BufferAccess::new(Some(&self.inner.globals), access, "module globals");
        let gate = &self.inner.globals_gate;
        match access {
            Access::Read => {
                let _shared = gate.read().unwrap_or_else(|p| p.into_inner());
                f(globals)
            }
            Access::Write => {
                let _exclusive = gate.write().unwrap_or_else(|p| p.into_inner());
                f(globals)
            }
        }
    }

    /// The module's globals gate and the read access of a launch to its globals, for the
    /// launch's door call ([`Stream::enqueue_gated`]), which takes the gate shared after the
    /// arguments' records and declares the read under it (S1, session 17).
    pub(crate) fn globals_for_launch(&self) -> (&std::sync::RwLock<()>, BufferAccess<'_>) {
        (&self.inner.globals_gate, BufferAccess::new(Some(&self.inner.globals), Access::Read, "module globals"))
    }

    fn raw(&self) -> &RawModule {
        self.inner.raw.as_ref().expect("a Module handle is never observed after unload")
    }

    /// The kernel `symbol`, for attributes and occupancy.
    pub fn function(&self, symbol: &str) -> Result<Function> {
        let _bound = self.inner.context.bind()?;
        let raw = self.raw().function(&self.inner.name, symbol)?;
        Ok(Function::new(raw, symbol.to_string(), self.inner.context.clone(), Some(self.inner.clone())))
    }

    /// Checks that every kernel in `expected` is in the module with the parameter sizes its
    /// launcher passes (`cuFuncGetParamInfo`, CUDA 12.4+; older drivers check names only).
    pub fn check_kernels(&self, expected: &[&KernelSignature]) -> Result<()> {
        let _bound = self.inner.context.bind()?;
        // The checks read module memory and may load the kernels' code (E2): not after a timeout.
        self.inner.context.refuse_after_timeout(|| format!("Module::check_kernels of module `{}`", self.inner.name))?;
        for signature in expected {
            let function = self.raw().function(&self.inner.name, signature.symbol)?;
            checks::check_fingerprint(self.raw(), signature, &self.inner.name)?;
            checks::check_layout(self.raw(), signature, &self.inner.name)?;
            checks::check_params(self.raw(), function, signature, &self.inner.name)?;
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
        // A first use reads module memory and may load the kernel's code lazily, both of which
        // may wait for the context's work (E2): not after a timeout.
        self.inner.context.refuse_after_timeout(|| format!("the first launch of `{}` of module `{}` (its checks)", signature.symbol, self.inner.name))?;
        let function = self.raw().function(&self.inner.name, signature.symbol)?;
        checks::check_fingerprint(self.raw(), signature, &self.inner.name)?;
        checks::check_layout(self.raw(), signature, &self.inner.name)?;
        checks::check_params(self.raw(), function, signature, &self.inner.name)?;
        crate::panic_report::note_if_unbounded_stack(self.raw().raw, &self.raw().symbols, function, signature.symbol);
        functions.push((signature, function));
        Ok(function)
    }

    /// A typed view of the global (or `__constant__`) variable `name`, which must have exactly
    /// the size of `T` (use an array type for an array).
    ///
    /// # Errors
    /// [`Error::ReservedGlobal`] for a name starting with `__ferrocuda_`: ferrocuda's own
    /// globals (the device panic handler's record address and claim flag, the launch checks'
    /// tables) are never handed out, since writing the record address would aim the panic
    /// handler's stores anywhere (audit 2026-11-28b G14-1); [`Error::ModuleInternalGlobal`] for
    /// a name the image does not declare visible outside the module (`.visible` in PTX, a
    /// global-binding data symbol in a cubin), and for any name of a fatbin: the allow-list is
    /// the data the device code declared host-accessible, since a `#[kernel]` crate's module
    /// also holds the compiler's own data (panic locations, string literals, constant tables,
    /// vtables) that its code trusts never to change (audit 2026-11-28h G20R-5);
    /// [`Error::GlobalNotFound`]; [`Error::GlobalSizeMismatch`].
    ///
    /// Device code declares such a global with external linkage and interior mutability:
    /// `#[unsafe(no_mangle)] static mut NAME: T = ..;`. The handle reads any visible global;
    /// [`Global::write`] changes only the globals the loader named with
    /// [`JitOptions::host_writable_globals`](crate::JitOptions::host_writable_globals), and
    /// refuses the others with [`Error::GlobalReadOnly`]: an immutable `static` is declared in
    /// PTX and cubins exactly as a `static mut`, and its code may assume its value (folded
    /// into the code, or a table's known entries used to drop bounds checks), so only the
    /// loader, who knows the source, can say which is which (session 21, G20R-5's residual).
    /// The same holds of `.const` (`__constant__`) data, which must be named too (session 23:
    /// nvcc folds a `const`-qualified `extern __constant__` and declares it as a mutable one).
    pub fn global<T: Pod>(&self, name: &str) -> Result<Global<'_, T>> {
        if symbols::is_reserved(name) {
            return Err(Error::ReservedGlobal { name: name.into(), module: self.inner.name.clone() });
        }
        let (writable, constant) = match self.raw().symbols.host_accessible(name) {
            symbols::HostAccess::Visible { writable, constant } => (writable, constant),
            symbols::HostAccess::Refused(reason) => return Err(Error::ModuleInternalGlobal { name: name.into(), module: self.inner.name.clone(), reason }),
            // Not asked for: a failed lookup is an error in compute-sanitizer's report.
            symbols::HostAccess::Absent => return Err(Error::GlobalNotFound { name: name.into(), module: self.inner.name.clone() }),
        };
        let _bound = self.inner.context.bind()?;
        let symbol = CString::new(name).map_err(|_| Error::GlobalNotFound { name: name.into(), module: self.inner.name.clone() })?;
        if !self.raw().symbols.may_hold(name) {
            // Not asked for: a failed lookup is an error in compute-sanitizer's report.
            return Err(Error::GlobalNotFound { name: name.into(), module: self.inner.name.clone() });
        }
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
        Ok(Global { address, module: self, writable, constant, name: name.into(), _value: PhantomData })
    }

    /// Unloads the module now, reporting errors, once queued work in its context finished. If
    /// clones or [`Function`]s of it are still alive, it is unloaded when the last one drops.
    pub fn unload(self) -> Result<()> {
        let Some(mut inner) = Arc::into_inner(self.inner) else { return Ok(()) };
        if inner.context.is_capturing() || crate::context::hand_off_releases() {
            // Synchronising would invalidate the capture (S2) or be refused (a host callback,
            // a door call's work, G15R-6): unloaded later.
            drop(inner);
            return Ok(());
        }
        inner.context.synchronize()?;
        // `cuModuleUnload` unloads from the current context: bound around it (a created
        // context is current only during ferrocuda's calls, G20R-4).
        let _bound = inner.context.bind()?;
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
        // Inside a capture the synchronisation would invalidate it (S2): `release` postpones
        // the unload until the capture ends (and out of host callbacks).
        let Some(raw) = self.raw.take() else { return };
        let raw = Handle(raw);
        self.context.release(crate::context::Released::Module, move |context| {
            // Bound across the wait and the unload (`cuModuleUnload` works on the current
            // context; a created context is current only inside ferrocuda's calls, G20R-4).
            if let Ok(_bound) = context.bind()
                && context.synchronize_queued_work().is_ok()
            {
                drop(raw.into_inner());
            } else {
                // The context is unusable; unloading would fail, and leaking is harmless then.
                std::mem::forget(raw.into_inner());
            }
        });
    }
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Module").field("name", &self.inner.name).finish()
    }
}
