//! Contexts. The default is the device's primary context, the one runtime-API libraries
//! (cuBLAS, cuFFT, ...) also use, so work and memory can be shared with them.

use std::cell::RefCell;
use std::sync::{Arc, Mutex, Weak};

use cudarc::driver::sys;

use crate::device::Device;
use crate::driver::{check, init};
use crate::embedded::{EmbeddedModule, LoadedEmbedded};
use crate::error::Result;
use crate::launch::DeviceLimits;

thread_local! {
    /// The ferrocuda context last bound on this thread (weak: binding does not keep it alive).
    static CURRENT: RefCell<Weak<ContextInner>> = const { RefCell::new(Weak::new()) };
}

/// A CUDA context; cloning shares it. Streams, buffers and modules keep their context alive.
#[derive(Clone)]
pub struct Context {
    inner: Arc<ContextInner>,
}

pub(crate) struct ContextInner {
    raw: sys::CUcontext,
    device: Device,
    limits: DeviceLimits,
    /// Embedded modules loaded into this context, loaded on first launch (runtime-API style).
    embedded: Mutex<Vec<LoadedEmbedded>>,
}

// SAFETY: a CUcontext may be used from any thread once made current there; every use binds it.
unsafe impl Send for ContextInner {}
// SAFETY: as above; the mutable state is behind a Mutex.
unsafe impl Sync for ContextInner {}

impl Context {
    /// Retains the primary context of device `ordinal` and makes it current on this thread.
    pub fn primary(ordinal: usize) -> Result<Self> {
        init()?;
        let device = Device::get(ordinal)?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: writes one context handle; released in Drop.
        check("cuDevicePrimaryCtxRetain", unsafe { sys::cuDevicePrimaryCtxRetain(&mut raw, device.raw()) })?;
        let limits = match device.launch_limits() {
            Ok(limits) => limits,
            Err(e) => {
                // SAFETY: balances the retain above.
                unsafe { sys::cuDevicePrimaryCtxRelease_v2(device.raw()) };
                return Err(e);
            }
        };
        let context = Context { inner: Arc::new(ContextInner { raw, device, limits, embedded: Mutex::new(Vec::new()) }) };
        context.bind_to_thread()?;
        Ok(context)
    }

    /// The context last bound on this thread, if it is still alive.
    pub fn current() -> Option<Self> {
        CURRENT.with(|c| c.borrow().upgrade()).map(|inner| Context { inner })
    }

    /// Makes this context current on the calling thread (no driver call when it already is).
    pub fn bind_to_thread(&self) -> Result<()> {
        let mut current = std::ptr::null_mut();
        // SAFETY: writes one handle.
        check("cuCtxGetCurrent", unsafe { sys::cuCtxGetCurrent(&mut current) })?;
        if current != self.inner.raw {
            // SAFETY: the context is alive (we hold it).
            check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(self.inner.raw) })?;
        }
        CURRENT.with(|c| {
            let mut c = c.borrow_mut();
            if !std::ptr::eq(c.as_ptr(), Arc::as_ptr(&self.inner)) {
                *c = Arc::downgrade(&self.inner);
            }
        });
        Ok(())
    }

    /// The device of this context.
    pub fn device(&self) -> Device {
        self.inner.device
    }

    /// The launch limits of the device.
    pub fn limits(&self) -> &DeviceLimits {
        &self.inner.limits
    }

    /// The raw `CUcontext`.
    pub fn raw(&self) -> sys::CUcontext {
        self.inner.raw
    }

    /// Waits until all work in this context is done; reports a kernel fault if one happened.
    pub fn synchronize(&self) -> Result<()> {
        self.bind_to_thread()?;
        // SAFETY: no arguments.
        check("cuCtxSynchronize", unsafe { sys::cuCtxSynchronize() })?;
        Ok(())
    }

    /// Free and total device memory in bytes.
    pub fn memory_info(&self) -> Result<(usize, usize)> {
        self.bind_to_thread()?;
        let (mut free, mut total) = (0, 0);
        // SAFETY: writes two sizes.
        check("cuMemGetInfo", unsafe { sys::cuMemGetInfo_v2(&mut free, &mut total) })?;
        Ok((free, total))
    }

    /// The function `symbol` of `module`, loading the module into this context on first use.
    pub(crate) fn embedded_function(&self, module: &'static EmbeddedModule, symbol: &'static str) -> Result<sys::CUfunction> {
        self.with_embedded(module, |loaded| loaded.function(symbol))
    }

    /// Runs `f` on `module` as loaded into this context, loading it first if needed.
    fn with_embedded<R>(&self, module: &'static EmbeddedModule, f: impl FnOnce(&mut LoadedEmbedded) -> Result<R>) -> Result<R> {
        let mut loaded = self.inner.embedded.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let index = match loaded.iter().position(|l| l.is(module)) {
            Some(index) => index,
            None => {
                loaded.push(LoadedEmbedded::load(module, self)?);
                loaded.len() - 1
            }
        };
        f(&mut loaded[index])
    }

    /// Which image of `module` this context runs ("cubin sm_90" or "PTX sm_70, JIT"), loading
    /// it if needed.
    pub fn embedded_image(&self, module: &'static EmbeddedModule) -> Result<String> {
        self.bind_to_thread()?;
        self.with_embedded(module, |loaded| Ok(loaded.image().to_string()))
    }
}

impl Drop for ContextInner {
    fn drop(&mut self) {
        // Modules first, while the context still exists; errors cannot be reported from Drop.
        // SAFETY: the context is still retained here.
        unsafe { sys::cuCtxSetCurrent(self.raw) };
        self.embedded.get_mut().unwrap_or_else(|p| p.into_inner()).clear();
        // SAFETY: balances the retain in `Context::primary`.
        unsafe { sys::cuDevicePrimaryCtxRelease_v2(self.device.raw()) };
    }
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").field("raw", &self.inner.raw).field("device", &self.inner.device.ordinal()).finish()
    }
}
