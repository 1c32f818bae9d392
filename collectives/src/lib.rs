//! Collectives for ferrocuda: all-reduce, broadcast, reduce, all-gather, reduce-scatter,
//! send/recv and grouped calls over several GPUs and hosts.
//!
//! - [`nccl`]: NCCL, loaded at run time, on ferrocuda's `DeviceBuffer` views and `Stream`s;
//!   communicators for one thread driving several GPUs ([`nccl::Communicator::init_all`]) and
//!   for one process per GPU ([`nccl::Communicator::from_env`], with a [`Rendezvous`] on a
//!   file or a TCP address), timeouts that abort a hung communicator.
//! - [`ThreadGroup`]: the same [`Collectives`] API on host slices, threads standing in for
//!   ranks, so multi-rank code is tested without GPUs.
//! - [`peer`]: a one-shot all-reduce written in Rust (`ferrocuda-collectives-kernels`) that
//!   reads the other GPUs' buffers over NVLink, for small messages.
//!
//! See `docs/collectives.md` for how to run on one host and across hosts.

mod api;
mod element;
mod error;
pub mod nccl;
pub mod peer;
pub mod rendezvous;
mod thread_group;
mod tracking;

pub use api::{Collectives, Grouped, group};
pub use element::{DataType, Element, ReduceOp, reduce_into};
pub use error::{Error, Result};
pub use rendezvous::{Launch, Rendezvous};
pub use thread_group::{HostComm, ThreadGroup};
