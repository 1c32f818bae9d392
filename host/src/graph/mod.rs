//! CUDA graphs: work recorded once by stream capture ([`Stream::capture`]), instantiated, and
//! replayed many times with one launch each.
//!
//! Driver reference: [graph management](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__GRAPH.html).

use std::any::Any;
use std::sync::Arc;

use cudarc::driver::sys;

use crate::context::{Context, Handle};
use crate::driver;
use crate::error::Result;

mod exec;
pub use exec::GraphExec;

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
        let _bound = self.context.bind()?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: writes one handle, owned by the returned GraphExec; flags 0 = default.
        unsafe { driver::graph::instantiate_with_flags(&mut raw, self.raw, 0) }?;
        Ok(GraphExec::new(raw, self.context.clone(), self.modules.clone()))
    }

    /// The raw `CUgraph`.
    pub fn raw(&self) -> sys::CUgraph {
        self.raw
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        let (graph, modules) = (Handle(self.raw), std::mem::take(&mut self.modules));
        // A graph is a host-side template: destroying it queues nothing and touches no capture
        // (the executable graphs made from it stay valid), so a running capture, even one that
        // never ends (P5), does not hold it back.
        self.context.release_outside_captures(move |context| {
            if let Ok(_bound) = context.bind() {
                // SAFETY: owned by us, destroyed once; executable graphs made from it stay valid.
                let _ = unsafe { driver::graph::destroy(graph.into_inner()) };
            }
            drop(modules);
        });
    }
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph").field("raw", &self.raw).finish()
    }
}
