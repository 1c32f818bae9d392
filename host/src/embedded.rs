//! Kernels embedded at build time (`embed_kernels!()`): PTX per architecture and, where
//! `ptxas` was available, cubins. Loaded implicitly, once per context, on first launch. The
//! shape of the artifacts ([`EmbeddedModule`]) is defined in ferrocuda-types.

use cudarc::driver::sys;

use crate::device::Device;

use crate::error::{Error, Result};
use crate::module::checks::{CheckTables, check_layout_in};
use crate::module::raw::{RawModule, check_ptx_supported};
use crate::panic_report::ContextRecord;
use crate::{EmbeddedModule, Image, KernelSignature};

/// An embedded module loaded into one context, with the functions looked up so far.
pub(crate) struct LoadedEmbedded {
    source: *const EmbeddedModule,
    image: Image,
    /// Each function looked up, and whether its layout was checked against its launcher's
    /// (the launch path checks once per function and context; the attributes path does not).
    functions: Vec<(&'static str, sys::CUfunction, bool)>,
    /// The kernels' check globals, read at load (the first-launch checks read no device memory).
    tables: CheckTables,
    module: RawModule,
}

impl LoadedEmbedded {
    /// Loads `module` into the current context, whose panic record is `record` (G22S-2).
    pub(crate) fn load(module: &'static EmbeddedModule, device: Device, record: &ContextRecord) -> Result<Self> {
        let arch = device.arch()?;
        let image = module.pick_image(arch).ok_or_else(|| Error::NoCompatibleImage {
            module: module.crate_name.to_string(),
            device: device.name().unwrap_or_default(),
            arch,
            built: module.ptx.iter().map(|(a, _)| format!("PTX sm_{a}")).collect::<Vec<_>>().join(", "),
        })?;
        let raw = match image {
            Image::Cubin(a) => {
                let bytes = module.cubin_for(a).unwrap_or_default();
                RawModule::load(module.crate_name, bytes, false, record)?
            }
            Image::Ptx(a) => {
                let ptx = module.ptx_for(a).unwrap_or_default();
                check_ptx_supported(module.crate_name, ptx, device)?;
                RawModule::load(module.crate_name, ptx.as_bytes(), true, record)?
            }
        };
        // Every kernel's code and check tables now, before any of its kernels runs: a lazy
        // load, or a read of module memory, at a kernel's first launch would wait while the
        // context's earlier work runs, which may never end (P12, s9-p12).
        let every = raw.load_every_function();
        let tables = CheckTables::read(&raw, every.as_deref());
        Ok(LoadedEmbedded { source: module, image, functions: Vec::new(), tables, module: raw })
    }

    pub(crate) fn is(&self, module: &'static EmbeddedModule) -> bool {
        std::ptr::eq(self.source, module)
    }

    pub(crate) fn image(&self) -> Image {
        self.image
    }

    pub(crate) fn function(&mut self, symbol: &'static str) -> Result<sys::CUfunction> {
        self.lookup(symbol).map(|(f, _)| f)
    }

    /// The function of `signature`, for a launch: on its first launch in this context, its
    /// layout in the module (the device build's resolved types and `cols(..)` widths) is
    /// compared with the launcher's (Q1, Q2); later launches find it checked.
    pub(crate) fn launch_function(&mut self, signature: &'static KernelSignature) -> Result<sys::CUfunction> {
        let (f, index) = self.lookup(signature.symbol)?;
        if !self.functions[index].2 {
            // SAFETY of the source pointer: it came from a `&'static EmbeddedModule`.
            let name = unsafe { &*self.source }.crate_name;
            let (raw, tables) = (&self.module, &self.tables);
            check_layout_in(&mut |global| tables.global(raw, global), signature, name)?;
            crate::panic_report::note_if_unbounded_stack(raw.raw, &raw.symbols, f, signature.symbol);
            self.functions[index].2 = true;
        }
        Ok(f)
    }

    /// The function `symbol` and its index in `functions`, looked up on first use.
    fn lookup(&mut self, symbol: &'static str) -> Result<(sys::CUfunction, usize)> {
        if let Some(index) = self.functions.iter().position(|(s, _, _)| *s == symbol) {
            return Ok((self.functions[index].1, index));
        }
        // SAFETY of the source pointer: it came from a `&'static EmbeddedModule`.
        let name = unsafe { &*self.source }.crate_name;
        let f = self.module.function(name, symbol)?;
        self.functions.push((symbol, f, false));
        Ok((f, self.functions.len() - 1))
    }
}
