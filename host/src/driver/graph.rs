//! Graphs: node queries, instantiation, launch, destruction.
//!
//! Reference: <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__GRAPH.html>.

use super::entries;
#[allow(unused_imports)]
use super::prelude::*;

entries! {
    destroy = cuGraphDestroy(h_graph: sys::CUgraph);
    exec_destroy = cuGraphExecDestroy(h_graph_exec: sys::CUgraphExec);
    get_nodes = cuGraphGetNodes(h_graph: sys::CUgraph, nodes: *mut sys::CUgraphNode, num_nodes: *mut usize);
    instantiate_with_flags = cuGraphInstantiateWithFlags(ph_graph_exec: *mut sys::CUgraphExec, h_graph: sys::CUgraph, flags: c_ulonglong);
    launch = cuGraphLaunch(h_graph_exec: sys::CUgraphExec, h_stream: sys::CUstream);
}
