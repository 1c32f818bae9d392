//! The NCCL backend: communicators on ferrocuda contexts, operations on ferrocuda streams.
//!
//! libnccl is loaded at run time (`libnccl.so.2`, or `FERROCUDA_NCCL_LIB`), so building needs
//! no NCCL and a program without it gets [`crate::Error::NcclNotFound`] from the first call.
//! Keep NVLink multicast off on shared machines: `NCCL_NVLS_ENABLE=0` (this crate never
//! creates multicast objects itself).

mod comm;
mod exit_guard;
mod ffi;

pub use comm::{Communicator, Config, DEFAULT_DROP_TIMEOUT, OnStream, UniqueId, is_available, version};
