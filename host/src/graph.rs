//! CUDA graphs: work recorded once by stream capture ([`Stream::capture`]), instantiated, and
//! replayed many times with one launch each.
//!
//! Driver reference: [graph management](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__GRAPH.html).

use std::any::Any;
use std::sync::Arc;

use cudarc::driver::sys;

use crate::context::Context;
use crate::driver;
use crate::error::Result;
use crate::stream::Stream;

/// A recorded graph of work (kernels, copies, memsets, host callbacks), not yet runnable:
/// [`Graph::instantiate`] makes a [`GraphExec`].
pub struct Graph {
    raw: sys::CUgraph,
    context: Context,
    /// Explicitly loaded modules whose kernels the graph holds (U5: a graph node pointing at
    /// an unloaded module crashes `instantiate`).
    modules: Vec<Arc<dyn Any + Send + Sync>>,
}

// SAFETY: a CUgraph may move between threads. It is not `Sync`: the driver's graph thread
// safety rules forbid using one graph object from several threads at once, even through
// calls that look read-only (instantiation, node counts).
unsafe impl Send for Graph {}

impl Graph {
    /// Takes ownership of a graph handle made in `context`, keeping `modules` loaded.
    pub(crate) fn from_raw(raw: sys::CUgraph, context: Context, modules: Vec<Arc<dyn Any + Send + Sync>>) -> Self {
        Graph { raw, context, modules }
    }

    /// How many nodes (kernels, copies, ...) the graph holds.
    pub fn node_count(&self) -> Result<usize> {
        let mut count = 0;
        // SAFETY: with a null node array the driver only writes the count.
        unsafe { driver::graph::get_nodes(self.raw, std::ptr::null_mut(), &mut count) }?;
        Ok(count)
    }

    /// Makes an executable graph. The graph itself may be dropped afterwards.
    pub fn instantiate(&self) -> Result<GraphExec> {
        self.context.bind_to_thread()?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: writes one handle, owned by the returned GraphExec; flags 0 = default.
        unsafe { driver::graph::instantiate_with_flags(&mut raw, self.raw, 0) }?;
        Ok(GraphExec { raw, context: self.context.clone(), _modules: self.modules.clone() })
    }

    /// The raw `CUgraph`.
    pub fn raw(&self) -> sys::CUgraph {
        self.raw
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        if self.context.bind_to_thread().is_ok() {
            // SAFETY: owned by us, destroyed once; executable graphs made from it stay valid.
            let _ = unsafe { driver::graph::destroy(self.raw) };
        }
    }
}

/// An instantiated graph: launch it on a stream as often as needed.
pub struct GraphExec {
    raw: sys::CUgraphExec,
    context: Context,
    /// As for [`Graph`]: the modules of its kernels stay loaded while it lives.
    _modules: Vec<Arc<dyn Any + Send + Sync>>,
}

// SAFETY: as for `Graph`: it may move between threads, but is not used from two at once
// (not `Sync`), as the driver's graph thread-safety rules require.
unsafe impl Send for GraphExec {}

impl GraphExec {
    /// Queues one replay of the whole graph on `stream`.
    ///
    /// # Safety
    /// The graph's kernels and copies use the device addresses that were captured. Every
    /// buffer (device, pinned host) that the captured work touched must still be alive, and
    /// not be freed until this replay has finished, and the replay is not ordered with other
    /// streams' work on those buffers (work queued inside a capture is not tracked): order it
    /// yourself (synchronise, or `stream.will_use(..)` the buffers before this call). Holding
    /// the buffers for as long as the `GraphExec` lives, and using them on `stream` only, is
    /// enough. The modules of captured kernels are kept loaded by the graph itself (the
    /// embedded ones live as long as the context).
    pub unsafe fn launch(&self, stream: &Stream) -> Result<()> {
        self.context.bind_to_thread()?;
        // SAFETY: both handles are alive; the caller guarantees the captured memory is.
        unsafe { driver::graph::launch(self.raw, stream.raw()) }?;
        Ok(())
    }

    /// The raw `CUgraphExec`.
    pub fn raw(&self) -> sys::CUgraphExec {
        self.raw
    }
}

impl Drop for GraphExec {
    fn drop(&mut self) {
        if self.context.bind_to_thread().is_ok() {
            // SAFETY: owned by us, destroyed once; replays already queued still complete.
            let _ = unsafe { driver::graph::exec_destroy(self.raw) };
        }
    }
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph").field("raw", &self.raw).finish()
    }
}

impl std::fmt::Debug for GraphExec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphExec").field("raw", &self.raw).finish()
    }
}
