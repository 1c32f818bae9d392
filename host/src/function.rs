//! Kernels as loaded functions: attributes, shared-memory and cache settings, occupancy.
//!
//! Get one from a launcher (`saxpy::function(&context)?`) or a module
//! (`module.function("saxpy")?`).

use std::any::Any;
use std::sync::Arc;

use cudarc::driver::sys;

use crate::LaunchConfig;
use crate::context::Context;
use crate::driver;
use crate::error::{Error, Result};

/// One kernel loaded into a context. Keeps its context (and its module) alive.
#[derive(Clone)]
pub struct Function {
    raw: sys::CUfunction,
    name: String,
    context: Context,
    /// The module the function lives in, when it is not the context's embedded one.
    _module: Option<Arc<dyn Any + Send + Sync>>,
}

// SAFETY: a CUfunction may be used from any thread that binds its context; every use binds it.
unsafe impl Send for Function {}
// SAFETY: as above; setters are driver calls the driver serialises.
unsafe impl Sync for Function {}

/// What the driver reports about a compiled kernel (`cuFuncGetAttribute`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FunctionAttributes {
    /// Most threads per block this kernel can be launched with (registers may lower it below
    /// the device's limit).
    pub max_threads_per_block: u32,
    /// Registers per thread.
    pub registers: u32,
    /// Statically declared shared memory per block, in bytes.
    pub static_shared_bytes: u32,
    /// Constant memory the kernel uses, in bytes.
    pub const_bytes: u32,
    /// Local memory per thread, in bytes (stack, spills).
    pub local_bytes: u32,
    /// Dynamic shared memory a launch may ask for (raise it with
    /// [`Function::set_max_dynamic_shared_bytes`]).
    pub max_dynamic_shared_bytes: u32,
    /// The virtual architecture the kernel's PTX targets (e.g. 80 for `.target sm_80`).
    pub ptx_version: u32,
    /// Architecture of the binary that runs (e.g. 90 for sm_90).
    pub binary_version: u32,
}

/// Preferred split of on-chip memory between L1 cache and shared memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CachePreference {
    /// No preference (the default).
    None,
    /// More shared memory.
    Shared,
    /// More L1 cache.
    L1,
    /// Equal L1 and shared memory.
    Equal,
}

impl Function {
    pub(crate) fn new(raw: sys::CUfunction, name: String, context: Context, module: Option<Arc<dyn Any + Send + Sync>>) -> Self {
        Function { raw, name, context, _module: module }
    }

    /// The kernel `symbol` of an embedded module (`my_kernels::KERNELS`) as loaded into
    /// `context`, loading the module if needed: for attributes, occupancy and launches by
    /// symbol. A `#[kernel]` launcher gives the same as `name::function(&context)`.
    ///
    /// # Errors
    /// [`Error::CallInHostCallback`](crate::Error::CallInHostCallback) inside a stream host
    /// callback (audit 2026-11-28d review3, G16S-2: the lock of the context's loaded crates is
    /// held across loads, which may wait for the callback); the load's errors.
    pub fn from_embedded(context: &Context, module: &'static crate::EmbeddedModule, symbol: &'static str) -> Result<Function> {
        crate::context::refuse_in_host_callback(module)?;
        let _bound = context.bind()?;
        let raw = context.embedded_function(module, symbol)?;
        Ok(Function::new(raw, symbol.to_string(), context.clone(), None))
    }

    /// The kernel's symbol.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The raw `CUfunction`.
    pub fn raw(&self) -> sys::CUfunction {
        self.raw
    }

    /// The context the function is loaded in.
    pub fn context(&self) -> &Context {
        &self.context
    }

    fn attribute(&self, attribute: sys::CUfunction_attribute) -> Result<u32> {
        let mut value = 0;
        // SAFETY: writes one int; the function is alive (its module is kept alive).
        unsafe { driver::function::get_attribute(&mut value, attribute, self.raw) }?;
        Ok(value as u32)
    }

    /// All attributes at once.
    /// ([driver API](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__EXEC.html))
    pub fn attributes(&self) -> Result<FunctionAttributes> {
        use sys::CUfunction_attribute::*;
        let _bound = self.context.bind()?;
        Ok(FunctionAttributes {
            max_threads_per_block: self.attribute(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            registers: self.attribute(CU_FUNC_ATTRIBUTE_NUM_REGS)?,
            static_shared_bytes: self.attribute(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?,
            const_bytes: self.attribute(CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES)?,
            local_bytes: self.attribute(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)?,
            max_dynamic_shared_bytes: self.attribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)?,
            ptx_version: self.attribute(CU_FUNC_ATTRIBUTE_PTX_VERSION)?,
            binary_version: self.attribute(CU_FUNC_ATTRIBUTE_BINARY_VERSION)?,
        })
    }

    /// Lets launches of this kernel ask for up to `bytes` of dynamic shared memory (above the
    /// default 48 KiB, up to the device's opt-in limit less the kernel's static shared memory).
    ///
    /// # Errors
    /// [`Error::InvalidLaunch`] with [`LaunchProblem::SharedMemoryTotalTooLarge`] when the
    /// kernel's static shared memory plus `bytes` exceed the block's limit (audit 2026-11-27c,
    /// F7; the driver's answer would be a bare `CUDA_ERROR_INVALID_VALUE`).
    ///
    /// [`LaunchProblem::SharedMemoryTotalTooLarge`]: crate::LaunchProblem::SharedMemoryTotalTooLarge
    pub fn set_max_dynamic_shared_bytes(&self, bytes: u32) -> Result<()> {
        let _bound = self.context.bind()?;
        let static_bytes = self.attribute(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?;
        LaunchConfig::new(1u32, 1u32)
            .with_shared_bytes(bytes)
            .validate_total_shared(static_bytes, self.context.limits())
            .map_err(|problem| Error::InvalidLaunch { kernel: self.name.clone(), problem })?;
        let attribute = sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
        // SAFETY: sets one attribute of a live function.
        unsafe { driver::function::set_attribute(self.raw, attribute, bytes as i32) }?;
        Ok(())
    }

    /// Sets the preferred L1/shared memory split for this kernel.
    pub fn set_cache_preference(&self, preference: CachePreference) -> Result<()> {
        use sys::CUfunc_cache::*;
        let _bound = self.context.bind()?;
        let config = match preference {
            CachePreference::None => CU_FUNC_CACHE_PREFER_NONE,
            CachePreference::Shared => CU_FUNC_CACHE_PREFER_SHARED,
            CachePreference::L1 => CU_FUNC_CACHE_PREFER_L1,
            CachePreference::Equal => CU_FUNC_CACHE_PREFER_EQUAL,
        };
        // SAFETY: sets the cache configuration of a live function.
        unsafe { driver::function::set_cache_config(self.raw, config) }?;
        Ok(())
    }

    /// How many blocks of `block_threads` threads (with `dynamic_shared_bytes` each) fit on one
    /// SM at once.
    pub fn max_active_blocks_per_sm(&self, block_threads: u32, dynamic_shared_bytes: usize) -> Result<u32> {
        let _bound = self.context.bind()?;
        let mut blocks = 0;
        // SAFETY: writes one int.
        unsafe { driver::function::occupancy_max_active_blocks_per_multiprocessor(&mut blocks, self.raw, block_threads as i32, dynamic_shared_bytes) }?;
        Ok(blocks as u32)
    }

    /// The block size that maximises occupancy with `dynamic_shared_bytes` per block, and the
    /// smallest grid that reaches it: `(block, min_grid)`.
    pub fn suggested_block_size(&self, dynamic_shared_bytes: usize) -> Result<(u32, u32)> {
        let _bound = self.context.bind()?;
        let (mut min_grid, mut block) = (0, 0);
        // SAFETY: writes two ints; no block-size callback.
        unsafe { driver::function::occupancy_max_potential_block_size(&mut min_grid, &mut block, self.raw, None, dynamic_shared_bytes, 0) }?;
        Ok((block as u32, min_grid as u32))
    }

    /// A 1-D configuration covering `n` elements (one per thread) with the block size the
    /// occupancy API suggests for this kernel.
    pub fn config_for_elements(&self, n: usize) -> Result<LaunchConfig> {
        let (block, _) = self.suggested_block_size(0)?;
        Ok(LaunchConfig::for_elements(n, block.max(1)))
    }
}

impl std::fmt::Debug for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Function").field("name", &self.name).field("raw", &self.raw).finish()
    }
}
