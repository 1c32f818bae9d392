//! Kernels for issue 30's optional inputs (`Option<&[T]>`, CUDA's `const T*` that may be
//! `nullptr`): `tests/optional_inputs.rs` runs each on the CPU executor and the GPU against the
//! host, and pins what the `Option` compiles to (one null test).

use ferrocuda_device::global::{DisjointSlice, unique_index};
use ferrocuda_device::kernel;

/// `out[i] = x[i] + bias[i]`, or `x[i]` when there is no bias (`nullptr`): the optional bias of
/// a linear layer's epilogue.
#[kernel(same_len(x, out))]
pub fn p30_add_optional_bias(x: &[f32], bias: Option<&[f32]>, mut out: DisjointSlice<f32>) {
    let i = unique_index();
    if let Some(o) = out.get_mut(i) {
        let b = match bias {
            Some(bias) => bias.get(i.get()).copied().unwrap_or(0.0),
            None => 0.0,
        };
        *o = x[i] + b;
    }
}

/// vLLM's `const bool row_is_active = finished ? !finished[row] : true;` for rows below
/// `rows`: `active[row]` is 1 for an active row, 0 for a finished one. A row past the end of a
/// shorter `finished` counts as active (the bounds check of `get`).
#[kernel]
pub fn p30_active_rows(finished: Option<&[u8]>, mut active: DisjointSlice<u32>, rows: u32) {
    let i = unique_index();
    if i.get() >= rows as usize {
        return;
    }
    let row_is_active = finished.is_none_or(|f| f.get(i.get()).is_none_or(|&b| b == 0));
    if let Some(a) = active.get_mut(i) {
        *a = row_is_active as u32;
    }
}

/// The same with `finished` cut to `rows` once (`get(..rows)`, one comparison of two launch
/// parameters, the same in every thread): then `f[row]` below `rows` needs no check of its
/// own, and the kernel's per-thread work is nvcc's, one null test and one load. A `finished`
/// shorter than `rows` counts as none.
#[kernel]
pub fn p30_active_rows_cut(finished: Option<&[u8]>, mut active: DisjointSlice<u32>, rows: u32) {
    let i = unique_index();
    let finished = finished.and_then(|f| f.get(..rows as usize));
    if i.get() >= rows as usize {
        return;
    }
    let row_is_active = match finished {
        Some(f) => f.get(i.get()).is_none_or(|&b| b == 0),
        None => true,
    };
    if let Some(a) = active.get_mut(i) {
        *a = row_is_active as u32;
    }
}

/// Audit 2026-11-28d review 2 (G16D attack A1): what the kernel sees of an optional input,
/// `out[0]` = 0 for `None`, `1 + len` for `Some`: an empty buffer or view passed as `Some` must
/// stay `Some(&[])` on the GPU (not the null pointer, which the entry rebuilds as `None`), as
/// on the CPU executor.
#[kernel]
pub fn g16d_optional_presence(x: Option<&[f32]>, mut out: DisjointSlice<u32>) {
    let i = unique_index();
    if let Some(o) = out.get_mut(i) {
        *o = match x {
            Some(x) => 1 + x.len() as u32,
            None => 0,
        };
    }
}
