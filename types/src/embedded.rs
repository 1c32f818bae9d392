//! The artifacts of one kernel crate as `embed_kernels!()` embeds them: what the builder
//! writes and the host loads.

use core::fmt;

/// What `ptxas -v` reported for one kernel of one cubin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KernelResources {
    /// The cubin's architecture number (90 for sm_90).
    pub arch: u32,
    /// The kernel's symbol.
    pub kernel: &'static str,
    /// Registers per thread.
    pub registers: u32,
    /// Bytes of spill stores.
    pub spill_stores: u32,
    /// Bytes of spill loads.
    pub spill_loads: u32,
    /// Stack frame bytes per thread.
    pub stack_frame: u32,
    /// Static shared memory bytes per block.
    pub shared_bytes: u32,
}

/// The builder's generated `RESOURCES` rows: (arch, kernel, registers, spill stores, spill
/// loads, stack frame, shared bytes). Converted by [`KernelResources::from_tuples`].
pub type ResourceTuple = (u32, &'static str, u32, u32, u32, u32, u32);

impl KernelResources {
    /// All zero, no kernel.
    pub const EMPTY: KernelResources = KernelResources { arch: 0, kernel: "", registers: 0, spill_stores: 0, spill_loads: 0, stack_frame: 0, shared_bytes: 0 };

    /// One row of the builder's generated table.
    pub const fn from_tuple(row: ResourceTuple) -> Self {
        let (arch, kernel, registers, spill_stores, spill_loads, stack_frame, shared_bytes) = row;
        KernelResources { arch, kernel, registers, spill_stores, spill_loads, stack_frame, shared_bytes }
    }

    /// The builder's whole generated table, at compile time (`N` = `rows.len()`):
    /// `embed_kernels!()` uses it until the builder writes `KernelResources` itself.
    pub const fn from_tuples<const N: usize>(rows: &[ResourceTuple]) -> [KernelResources; N] {
        let mut out = [KernelResources::EMPTY; N];
        let mut i = 0;
        while i < N && i < rows.len() {
            out[i] = KernelResources::from_tuple(rows[i]);
            i += 1;
        }
        out
    }
}

/// What an [`EmbeddedModule`] holds: the PTX and cubins of one kernel crate and what the
/// builder recorded about them. Plain data anyone may build; only an [`EmbeddedModule`] is
/// loaded, and making one of images is `unsafe` ([`EmbeddedModule::new`]).
#[derive(Debug)]
pub struct EmbeddedImages {
    /// The kernel crate.
    pub crate_name: &'static str,
    /// `rustc --version` of the device toolchain.
    pub toolchain: &'static str,
    /// PTX text per architecture number (70 for sm_70), oldest first.
    pub ptx: &'static [(u32, &'static str)],
    /// Cubins per architecture number.
    pub cubins: &'static [(u32, &'static [u8])],
    /// `ptxas -v` per cubin and kernel.
    pub resources: &'static [KernelResources],
    /// Whether the device build checks integer overflow (a panic, as in a host build with
    /// `overflow-checks`; the builder's `KernelBuilder::overflow_checks`, audit 2026-11-27b Q11).
    pub device_overflow_checks: bool,
    /// `|x| x + 1` as compiled by the kernel crate's host build (`embed_kernels!()` expands it
    /// there): it panics for 255 exactly when that build checks overflow. The CPU executor
    /// compares it with `device_overflow_checks` before running a kernel, so that both builds
    /// of a kernel give the same result for the same profile.
    pub host_overflow_probe: fn(u8) -> u8,
}

/// The PTX and cubins of one kernel crate, as the builder produced them: the static that
/// `embed_kernels!()` defines as `crate::KERNELS`, which the crate's typed launchers load and
/// launch from. Its fields are read through [`EmbeddedImages`] (`KERNELS.ptx`, ...).
///
/// Loading one runs its code on the GPU, with the launchers' checks as the only guard, and
/// those checks read tables the images themselves carry (a module without them passes). So
/// making one of images is `unsafe`, as `ferrocuda_host::Module::load_ptx` is, and only `embed_kernels!()`
/// does it, from the builder's output (audit 2026-11-28, G13-3: with public fields, safe code
/// wrote its own `KERNELS` of hand-made PTX, and a safe launcher ran it: a store past its
/// output). A module without images ([`EmbeddedModule::without_images`]) loads nothing and is
/// safe to make. It cannot be changed after it is made (no `DerefMut`).
#[derive(Debug)]
pub struct EmbeddedModule {
    images: EmbeddedImages,
    /// Private: only [`EmbeddedModule::new`] and [`EmbeddedModule::without_images`] make one.
    _made_by_a_constructor: (),
}

impl EmbeddedModule {
    /// A module of `images`, for a crate's launchers to load and launch from.
    ///
    /// # Safety
    /// `images` are the builder's output for the crate whose `#[kernel]` launchers use this
    /// module (what `embed_kernels!()` passes): every kernel in them was compiled from that
    /// crate's `#[kernel]` functions, with the tables the builder writes. Device code from
    /// anywhere else runs unchecked on the GPU, as through `Module::load_ptx`.
    pub const unsafe fn new(images: EmbeddedImages) -> Self {
        EmbeddedModule { images, _made_by_a_constructor: () }
    }

    /// A module with no image: a crate's `KERNELS` where nothing is loaded (its launchers fail
    /// to find their kernels on a GPU; the CPU executor runs them from their host build).
    pub const fn without_images(crate_name: &'static str) -> Self {
        let images =
            EmbeddedImages { crate_name, toolchain: "", ptx: &[], cubins: &[], resources: &[], device_overflow_checks: false, host_overflow_probe: |x| x };
        EmbeddedModule { images, _made_by_a_constructor: () }
    }
}

impl core::ops::Deref for EmbeddedModule {
    type Target = EmbeddedImages;

    fn deref(&self) -> &EmbeddedImages {
        &self.images
    }
}

/// Which image of a module a device runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Image {
    /// A cubin built for exactly this architecture.
    Cubin(u32),
    /// PTX for an older or equal architecture, JIT-compiled by the driver.
    Ptx(u32),
}

impl fmt::Display for Image {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Image::Cubin(arch) => write!(f, "cubin sm_{arch}"),
            Image::Ptx(arch) => write!(f, "PTX sm_{arch}, JIT-compiled by the driver"),
        }
    }
}

impl EmbeddedImages {
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

    /// The cubin for `arch`, if built.
    pub fn cubin_for(&self, arch: u32) -> Option<&'static [u8]> {
        self.cubins.iter().find(|&&(a, _)| a == arch).map(|&(_, bytes)| bytes)
    }

    /// The largest stack (local memory per thread) that `ptxas -v` reported for `kernel` in
    /// any cubin of the module; `None` when no cubin was built (no `ptxas` at build time).
    pub fn largest_stack(&self, kernel: &str) -> Option<u64> {
        self.resources.iter().filter(|r| r.kernel == kernel).map(|r| r.stack_frame as u64).max()
    }

    /// The kernel's static shared memory per block, the most `ptxas -v` reported over the
    /// cubins built (`None` without `ptxas` at build time).
    pub fn static_shared_bytes(&self, kernel: &str) -> Option<u32> {
        self.resources.iter().filter(|r| r.kernel == kernel).map(|r| r.shared_bytes).max()
    }

    /// What `ptxas -v` reported for `kernel` in the cubin for `arch`, if built.
    pub fn resources_of(&self, kernel: &str, arch: u32) -> Option<&'static KernelResources> {
        self.resources.iter().find(|r| r.kernel == kernel && r.arch == arch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROWS: &[ResourceTuple] = &[(90, "saxpy", 16, 0, 0, 0, 0), (90, "reduce", 24, 4, 4, 8, 1024)];
    static RESOURCES: [KernelResources; ROWS.len()] = KernelResources::from_tuples(ROWS);
    // SAFETY: a test module, never loaded.
    static MODULE: EmbeddedModule = unsafe {
        EmbeddedModule::new(EmbeddedImages {
            crate_name: "k",
            toolchain: "rustc",
            ptx: &[(70, "ptx70"), (80, "ptx80")],
            cubins: &[(90, &[1, 2, 3])],
            resources: &RESOURCES,
            device_overflow_checks: false,
            host_overflow_probe: |x| x.wrapping_add(1),
        })
    };

    #[test]
    fn picks_exact_cubin_then_newest_older_ptx() {
        assert_eq!(MODULE.pick_image(90), Some(Image::Cubin(90)));
        assert_eq!(MODULE.pick_image(89), Some(Image::Ptx(80)));
        assert_eq!(MODULE.pick_image(75), Some(Image::Ptx(70)));
        assert_eq!(MODULE.pick_image(100), Some(Image::Ptx(80)));
        assert_eq!(MODULE.pick_image(61), None);
    }

    #[test]
    fn resource_rows_become_named_fields() {
        let reduce = MODULE.resources_of("reduce", 90).unwrap();
        assert_eq!((reduce.registers, reduce.spill_stores, reduce.stack_frame, reduce.shared_bytes), (24, 4, 8, 1024));
        assert!(MODULE.resources_of("reduce", 80).is_none());
    }
}
