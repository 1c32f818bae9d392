//! Kernels embedded at build time (`embed_kernels!()`): PTX per architecture and, where
//! `ptxas` was available, cubins. Loaded implicitly, once per context, on first launch. The
//! shape of the artifacts ([`EmbeddedModule`]) is defined in ferrocuda-types.

use cudarc::driver::sys;

use crate::device::Device;

use crate::error::{Error, Result};
use crate::module::raw::{RawModule, check_ptx_supported};
use crate::{EmbeddedModule, Image};

/// An embedded module loaded into one context, with the functions looked up so far.
pub(crate) struct LoadedEmbedded {
    source: *const EmbeddedModule,
    image: Image,
    functions: Vec<(&'static str, sys::CUfunction)>,
    module: RawModule,
}

impl LoadedEmbedded {
    pub(crate) fn load(module: &'static EmbeddedModule, device: Device) -> Result<Self> {
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
                RawModule::load(module.crate_name, bytes, false)?
            }
            Image::Ptx(a) => {
                let ptx = module.ptx_for(a).unwrap_or_default();
                check_ptx_supported(module.crate_name, ptx, device)?;
                RawModule::load(module.crate_name, ptx.as_bytes(), true)?
            }
        };
        Ok(LoadedEmbedded { source: module, image, functions: Vec::new(), module: raw })
    }

    pub(crate) fn is(&self, module: &'static EmbeddedModule) -> bool {
        std::ptr::eq(self.source, module)
    }

    pub(crate) fn image(&self) -> Image {
        self.image
    }

    pub(crate) fn function(&mut self, symbol: &'static str) -> Result<sys::CUfunction> {
        if let Some(&(_, f)) = self.functions.iter().find(|(s, _)| *s == symbol) {
            return Ok(f);
        }
        // SAFETY of the source pointer: it came from a `&'static EmbeddedModule`.
        let name = unsafe { &*self.source }.crate_name;
        let f = self.module.function(name, symbol)?;
        self.functions.push((symbol, f));
        Ok(f)
    }
}
