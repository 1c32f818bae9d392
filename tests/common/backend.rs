//! One test body, two back ends: the GPU (when present) and the CPU executor (always).
//!
//! A test written against [`Backend`] uploads with [`Backend::upload`], launches with
//! [`launch_on!`] (the kernel's `launch` on the GPU, its `launch_cpu` on the CPU), and reads
//! results back with [`Backend::download`]; the checks are then the same code for both.
#![allow(dead_code)]

use bytemuck::Pod;
use ferrocuda::{Context, DeviceBuffer, Stream};
use ferrocuda_device::cpu::CpuExecutor;

/// Where a test's kernels run.
pub enum Backend {
    /// Device 0 and a stream on it.
    Gpu { context: Context, stream: Stream },
    /// The CPU executor.
    Cpu(CpuExecutor),
}

/// A buffer of the backend: device memory or a host vector.
pub enum Buf<T: Pod> {
    Gpu(DeviceBuffer<T>),
    Cpu(Vec<T>),
}

impl Backend {
    /// The GPU, or `None` with the skip printed (a failure under `REQUIRE_GPU=1`).
    pub fn gpu_or_skip(test: &str) -> Option<Backend> {
        let context = crate::common::gpu_or_skip(test)?;
        let stream = Stream::new(&context).expect("a stream on device 0");
        Some(Backend::Gpu { context, stream })
    }

    /// The CPU executor, one worker per core.
    pub fn cpu() -> Backend {
        Backend::Cpu(CpuExecutor::new())
    }

    /// "gpu" or "cpu", for messages.
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Gpu { .. } => "gpu",
            Backend::Cpu(_) => "cpu",
        }
    }

    /// A buffer holding a copy of `host`.
    pub fn upload<T: Pod>(&self, host: &[T]) -> Buf<T> {
        match self {
            Backend::Gpu { context, .. } => Buf::Gpu(DeviceBuffer::from_slice(context, host).expect("upload")),
            Backend::Cpu(_) => Buf::Cpu(host.to_vec()),
        }
    }

    /// A buffer of `len` zeros.
    pub fn zeroed<T: Pod>(&self, len: usize) -> Buf<T> {
        match self {
            Backend::Gpu { context, .. } => Buf::Gpu(DeviceBuffer::zeroed(context, len).expect("allocation")),
            Backend::Cpu(_) => Buf::Cpu(vec![T::zeroed(); len]),
        }
    }

    /// The buffer's contents, after the launches before it have finished.
    pub fn download<T: Pod>(&self, buffer: &Buf<T>) -> Vec<T> {
        match (self, buffer) {
            (Backend::Gpu { stream, .. }, Buf::Gpu(b)) => {
                stream.synchronize().expect("the kernel failed");
                b.to_vec().expect("download")
            }
            (Backend::Cpu(_), Buf::Cpu(v)) => v.clone(),
            _ => panic!("a buffer of one backend read through the other"),
        }
    }
}

/// A launch argument, as each backend's launcher takes it.
pub trait KernelArg {
    /// For `name::launch`.
    type Gpu;
    /// For `name::launch_cpu`.
    type Cpu;
    fn gpu(self) -> Self::Gpu;
    fn cpu(self) -> Self::Cpu;
}

impl<'a, T: Pod> KernelArg for &'a Buf<T> {
    type Gpu = &'a DeviceBuffer<T>;
    type Cpu = &'a [T];
    fn gpu(self) -> Self::Gpu {
        match self {
            Buf::Gpu(b) => b,
            Buf::Cpu(_) => panic!("a CPU buffer passed to a GPU launch"),
        }
    }
    fn cpu(self) -> Self::Cpu {
        match self {
            Buf::Cpu(v) => v,
            Buf::Gpu(_) => panic!("a GPU buffer passed to a CPU launch"),
        }
    }
}

impl<'a, T: Pod> KernelArg for &'a mut Buf<T> {
    type Gpu = &'a mut DeviceBuffer<T>;
    type Cpu = &'a mut [T];
    fn gpu(self) -> Self::Gpu {
        match self {
            Buf::Gpu(b) => b,
            Buf::Cpu(_) => panic!("a CPU buffer passed to a GPU launch"),
        }
    }
    fn cpu(self) -> Self::Cpu {
        match self {
            Buf::Cpu(v) => v,
            Buf::Gpu(_) => panic!("a GPU buffer passed to a CPU launch"),
        }
    }
}

/// An optional input (`Option<&[T]>`): `Some(&buf)` or `None`, as each launcher takes it.
impl<'a, T: Pod> KernelArg for Option<&'a Buf<T>> {
    type Gpu = Option<&'a dyn ferrocuda::DeviceRead<T>>;
    type Cpu = Option<&'a [T]>;
    fn gpu(self) -> Self::Gpu {
        self.map(|b| b.gpu() as &dyn ferrocuda::DeviceRead<T>)
    }
    fn cpu(self) -> Self::Cpu {
        self.map(|b| b.cpu())
    }
}

macro_rules! by_value {
    ($($t:ty),*) => {$(
        impl KernelArg for $t {
            type Gpu = $t;
            type Cpu = $t;
            fn gpu(self) -> $t { self }
            fn cpu(self) -> $t { self }
        }
    )*};
}
by_value!(bool, u32, i32, u64, i64, f32, f64, usize, core::num::NonZeroU32);
by_value!(ferrocuda_device::half::bf16, ferrocuda_device::half::f16);

/// `launch_on!(backend, path::to::kernel, config, args..)`: the kernel's `launch` on the
/// backend's stream, or its `launch_cpu` on the executor; errors as text.
macro_rules! launch_on {
    ($backend:expr, $($kernel:ident)::+, $config:expr $(, $arg:expr)* $(,)?) => {{
        use $crate::backend::KernelArg as _;
        match $backend {
            $crate::backend::Backend::Gpu { stream, .. } => $($kernel)::+::launch(stream, $config $(, ($arg).gpu())*).map_err(|e| e.to_string()),
            $crate::backend::Backend::Cpu(executor) => $($kernel)::+::launch_cpu(executor, $config $(, ($arg).cpu())*).map_err(|e| e.to_string()),
        }
    }};
}
pub(crate) use launch_on;

/// Declares (in the test file that invokes it) `cpu::name` and `gpu::name` tests for each body `name(&Backend)`.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod cpu {
            $(#[test] fn $name() { super::$name(&super::Backend::cpu()) })*
        }
        mod gpu {
            $(#[test] fn $name() {
                if let Some(backend) = super::Backend::gpu_or_skip(concat!("gpu::", stringify!($name))) {
                    super::$name(&backend)
                }
            })*
        }
    };
}
pub(crate) use on_both_backends;
