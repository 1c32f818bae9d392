//! [`GraphExec`]: an instantiated graph, launched as often as needed.

use std::any::Any;
use std::sync::Arc;

use cudarc::driver::sys;

use crate::context::{Context, Handle};
use crate::driver;
use crate::error::Result;
use crate::stream::Stream;

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
    /// Takes ownership of an executable graph made in `context`, keeping `modules` loaded.
    pub(crate) fn new(raw: sys::CUgraphExec, context: Context, modules: Vec<Arc<dyn Any + Send + Sync>>) -> Self {
        GraphExec { raw, context, _modules: modules }
    }

    /// Queues one replay of the whole graph on `stream`.
    ///
    /// # Safety
    /// The graph's kernels and copies use the device addresses that were captured. Every
    /// buffer (device, pinned host) that the captured work touched must still be alive, and
    /// not be freed until this replay has finished, and the replay is not ordered with other
    /// streams' work on those buffers (work queued inside a capture is not tracked): order it
    /// yourself (synchronise, or `stream.will_use(..)` the buffers before this call). Holding
    /// the buffers for as long as the `GraphExec` lives, and using them on `stream` only, is
    /// enough. The same holds for the globals of the captured kernels' modules: a
    /// [`Global::write`](crate::Global::write) is ordered after the module's tracked launches,
    /// not after a replay (audit 2026-11-28d review, G16R-9): synchronise the replay before
    /// writing one. Library values whose work was captured (a cuFFT [`Plan`](crate::cufft::Plan),
    /// a [`Cublas`](crate::Cublas) or [`CublasLt`](crate::CublasLt) handle, an NCCL
    /// communicator) must outlive the replay too: the captured calls use their work areas,
    /// which are freed when they drop (G16R-9). The modules of captured kernels are kept loaded
    /// by the graph itself (the embedded ones live as long as the context).
    ///
    /// "The captured work" of a graph made by [`Stream::capture`] is all the work queued on
    /// the captured streams by the code that ran on the capturing thread while its closure
    /// ran, through any handle: the closure's own calls and everything they run on that thread,
    /// including tasks of an executor polled there and jobs a work-stealing `join` ran there
    /// while it waited (audit 2026-11-28c review2 G15R-3). A graph made with
    /// [`Stream::begin_capture`] holds only work queued through the `Stream` value that began
    /// the capture (and clones made from it during the capture) on that thread, and through
    /// the streams it forked into the capture.
    pub unsafe fn launch(&self, stream: &Stream) -> Result<()> {
        let graph = self.raw;
        // SAFETY: both handles are alive; the caller guarantees the captured memory is.
        stream.enqueue("cuGraphLaunch", &[], |s| Ok(unsafe { driver::graph::launch(graph, s.get()) }?))
    }

    /// The raw `CUgraphExec`.
    pub fn raw(&self) -> sys::CUgraphExec {
        self.raw
    }
}

impl Drop for GraphExec {
    fn drop(&mut self) {
        let (graph, modules) = (Handle(self.raw), std::mem::take(&mut self._modules));
        self.context.release(crate::context::Released::GraphExec, move |context| {
            if let Ok(_bound) = context.bind() {
                // SAFETY: owned by us, destroyed once; replays already queued still complete.
                let _ = unsafe { driver::graph::exec_destroy(graph.into_inner()) };
            }
            drop(modules);
        });
    }
}

impl std::fmt::Debug for GraphExec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphExec").field("raw", &self.raw).finish()
    }
}
