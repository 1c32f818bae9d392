//! Kernels embedded at build time (`embed_kernels!()`): PTX per architecture and, where
//! `ptxas` was available, cubins. Loaded implicitly, once per context, on first launch.

use cudarc::driver::sys;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::module::{RawModule, check_ptx_supported};

/// The PTX and cubins of one kernel crate, as the builder produced them.
#[derive(Debug)]
pub struct EmbeddedModule {
    /// The kernel crate.
    pub crate_name: &'static str,
    /// `rustc --version` of the device toolchain.
    pub toolchain: &'static str,
    /// PTX text per architecture number (70 for sm_70), oldest first.
    pub ptx: &'static [(u32, &'static str)],
    /// Cubins per architecture number.
    pub cubins: &'static [(u32, &'static [u8])],
    /// `ptxas -v` per cubin and kernel: (arch, kernel, registers, spill stores, spill loads,
    /// stack frame, shared bytes).
    pub resources: &'static [(u32, &'static str, u32, u32, u32, u32, u32)],
}

/// Which image of a module a device runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Image {
    /// A cubin built for exactly this architecture.
    Cubin(u32),
    /// PTX for an older or equal architecture, JIT-compiled by the driver.
    Ptx(u32),
}

impl std::fmt::Display for Image {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Image::Cubin(arch) => write!(f, "cubin sm_{arch}"),
            Image::Ptx(arch) => write!(f, "PTX sm_{arch}, JIT-compiled by the driver"),
        }
    }
}

impl EmbeddedModule {
    /// The image to load on a device of architecture `arch` (90 for sm_90): the cubin for
    /// exactly that architecture, else the newest PTX not newer than it.
    pub fn pick_image(&self, arch: u32) -> Option<Image> {
        if self.cubins.iter().any(|&(a, _)| a == arch) {
            return Some(Image::Cubin(arch));
        }
        self.ptx.iter().map(|&(a, _)| a).filter(|&a| a <= arch).max().map(Image::Ptx)
    }

    /// The PTX text for `arch`, if built.
    pub fn ptx_for(&self, arch: u32) -> Option<&'static str> {
        self.ptx.iter().find(|&&(a, _)| a == arch).map(|&(_, text)| text)
    }
}

/// An embedded module loaded into one context, with the functions looked up so far.
pub(crate) struct LoadedEmbedded {
    source: *const EmbeddedModule,
    image: Image,
    functions: Vec<(&'static str, sys::CUfunction)>,
    module: RawModule,
}

impl LoadedEmbedded {
    pub(crate) fn load(module: &'static EmbeddedModule, context: &Context) -> Result<Self> {
        let device = context.device();
        let arch = device.arch()?;
        let image = module.pick_image(arch).ok_or_else(|| Error::NoCompatibleImage {
            module: module.crate_name.to_string(),
            device: device.name().unwrap_or_default(),
            arch,
            built: module.ptx.iter().map(|(a, _)| format!("PTX sm_{a}")).collect::<Vec<_>>().join(", "),
        })?;
        let raw = match image {
            Image::Cubin(a) => {
                let bytes = module.cubins.iter().find(|&&(b, _)| b == a).map(|&(_, bytes)| bytes).unwrap_or_default();
                RawModule::load(module.crate_name, bytes, false)?
            }
            Image::Ptx(a) => {
                let ptx = module.ptx_for(a).unwrap_or_default();
                check_ptx_supported(module.crate_name, ptx, context)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    static MODULE: EmbeddedModule = EmbeddedModule {
        crate_name: "k",
        toolchain: "rustc",
        ptx: &[(70, "ptx70"), (80, "ptx80")],
        cubins: &[(90, &[1, 2, 3])],
        resources: &[],
    };

    #[test]
    fn picks_exact_cubin_then_newest_older_ptx() {
        assert_eq!(MODULE.pick_image(90), Some(Image::Cubin(90)));
        assert_eq!(MODULE.pick_image(89), Some(Image::Ptx(80)));
        assert_eq!(MODULE.pick_image(75), Some(Image::Ptx(70)));
        assert_eq!(MODULE.pick_image(100), Some(Image::Ptx(80)));
        assert_eq!(MODULE.pick_image(61), None);
    }
}
