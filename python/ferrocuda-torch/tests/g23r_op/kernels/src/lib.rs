//! The kernel of the G23R op crate (tests/g23r_op): the template's `scale_add`.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]

use ferrocuda_device::global::{DisjointSlice, unique_index};
use ferrocuda_device::kernel;

// The PTX built by build.rs, loaded by the launchers on first use.
ferrocuda_device::embed_kernels!();

/// `out[i] = alpha * x[i] + y[i]`, one element per thread.
#[kernel]
pub fn scale_add(alpha: f32, x: &[f32], y: &[f32], mut out: DisjointSlice<f32>) {
    let i = unique_index();
    if let (Some(out_i), Some(&x_i), Some(&y_i)) = (out.get_mut(i), x.get(i.get()), y.get(i.get())) {
        *out_i = alpha * x_i + y_i;
    }
}
