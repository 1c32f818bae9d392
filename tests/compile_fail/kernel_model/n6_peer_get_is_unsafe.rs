// A kernel crate in miniature: `#[kernel]` on the host needs a `KERNELS` static to launch from.
use ferrocuda_device::kernel;

pub static KERNELS: ferrocuda::EmbeddedModule =
    ferrocuda::EmbeddedModule::without_images("t");

// Audit N6: a safe `cluster::peer_get` of a block that had exited faulted the kernel. No safe
// shape rules that out (an exiting thread releases the cluster barrier), so it is `unsafe`.
use ferrocuda_device::global::{DisjointSlice, unique_index};
use ferrocuda_device::{cluster, shared_array};

#[kernel]
pub fn exited_peer(mut out: DisjointSlice<u32>) {
    let values = shared_array![u32; 32];
    values.set(0, 1);
    cluster::sync();
    if cluster::block_rank() == 1 {
        return;
    }
    out[unique_index()] = cluster::peer_get(&values, 1, 0);
}

fn main() {}
