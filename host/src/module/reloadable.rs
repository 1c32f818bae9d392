//! Hot reload: a module that can be replaced at run time.

use std::sync::RwLock;

use crate::KernelSignature;
use crate::context::Context;
use crate::error::Result;
use crate::module::Module;
use crate::module::jit::JitOptions;

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
    ///
    /// # Safety
    /// As for [`Module::load_ptx`], for this PTX and every PTX reloaded later.
    pub unsafe fn load_ptx(context: &Context, name: &str, ptx: &str, options: JitOptions, expected: &[&'static KernelSignature]) -> Result<Self> {
        // SAFETY: forwarded to the caller.
        let module = unsafe { Module::load_ptx_checked(context, name, ptx, &options, expected) }?;
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
    ///
    /// # Safety
    /// As for [`Module::load_ptx`].
    pub unsafe fn reload_ptx(&self, ptx: &str) -> Result<()> {
        let old = self.current();
        // SAFETY: forwarded to the caller.
        let new = unsafe { Module::load_ptx_checked(old.context(), old.name(), ptx, &self.options, &self.expected) }?;
        let replaced = std::mem::replace(&mut *self.current.write().unwrap_or_else(|p| p.into_inner()), new);
        // Dropped outside the lock: the last handle of a module waits for its queued work.
        drop(replaced);
        drop(old);
        self.generation.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        Ok(())
    }
}
