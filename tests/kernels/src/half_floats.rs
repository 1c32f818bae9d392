//! Kernels on the `half` crate's `bf16`/`f16` (as `ferrocuda_device::half` re-exports them):
//! 16-bit slices in and out, a 16-bit by-value parameter, the conversions, the packed pairs,
//! shared memory and shuffles. `tests/cpu_half_floats.rs` runs each on the CPU executor and
//! the GPU and compares every output with the software twins (`half::soft`).

use ferrocuda_device::global::{AtomicSlice, DisjointChunks, DisjointSlice, unique_index};
use ferrocuda_device::half::{Bf16x2, F16x2, F32ToHalf, HalfFloat, bf16, f16};
use ferrocuda_device::math::DeviceFloat;
use ferrocuda_device::sync::sync_threads;
use ferrocuda_device::thread::thread_idx_x;
use ferrocuda_device::{kernel, shared_array, warp};

/// `out[i] = x[i] * scale + bias[i]`, widened to f32 (one `fma.rn.f32`) and rounded back once: the shape of a
/// bf16 epilogue, with bf16 slices in, a bf16 by value and a bf16 slice out.
#[kernel]
pub fn scale_bf16(x: &[bf16], scale: bf16, bias: &[bf16], mut out: DisjointSlice<bf16>) {
    let i = unique_index();
    if i.get() < x.len() {
        out[i] = DeviceFloat::mul_add(x[i].widen(), scale.widen(), bias[i].widen()).to_bf16();
    }
}

/// Each `f32` rounded to bf16 and f16 (`cvt.rn`), and the 16-bit values widened back.
#[kernel]
pub fn round_and_widen(x: &[f32], mut to_bf16: DisjointSlice<bf16>, mut to_f16: DisjointSlice<f16>, mut widened: DisjointSlice<f32>) {
    let i = unique_index();
    if i.get() < x.len() {
        let (b, h) = (x[i].to_bf16(), f16::from_f32_rn(x[i]));
        to_bf16[i] = b;
        to_f16[i] = h;
        // Even threads widen their bf16, odd ones their f16 (both exact).
        widened[i] = if i.get().is_multiple_of(2) { b.widen() } else { h.widen() };
    }
}

/// Packed bf16 pairs: per pair `i`, `out[4i..4i+4] = [from_f32s(x, y), a*b + c, a + b, a * b]`.
#[kernel]
pub fn packed_bf16(xy: &[f32], a: &[Bf16x2], b: &[Bf16x2], c: &[Bf16x2], mut out: DisjointChunks<Bf16x2, 4>) {
    let i = unique_index();
    if i.get() < a.len() {
        let (x, y, a, b, c) = (xy[2 * i.get()], xy[2 * i.get() + 1], a[i], b[i], c[i]);
        *out.get_mut(i).expect("4 pairs per thread") = [Bf16x2::from_f32s(x, y), a.fma(b, c), a + b, a * b];
    }
}

/// [`packed_bf16`] on f16 pairs.
#[kernel]
pub fn packed_f16(xy: &[f32], a: &[F16x2], b: &[F16x2], c: &[F16x2], mut out: DisjointChunks<F16x2, 4>) {
    let i = unique_index();
    if i.get() < a.len() {
        let (x, y, a, b, c) = (xy[2 * i.get()], xy[2 * i.get() + 1], a[i], b[i], c[i]);
        *out.get_mut(i).expect("4 pairs per thread") = [F16x2::from_f32s(x, y), a.fma(b, c), a + b, a * b];
    }
}

/// Scalar 16-bit arithmetic as CUDA's `__nv_bfloat16`/`__half` operators compile it: per
/// element `i`, `out[6i..6i+6] = [a + b, a - b, a * b, a * b + c, max(a, b), min(a, b)]`
/// (`add_rn`, `sub_rn`, `mul_rn`, `fma_rn`, `max_num`, `min_num`), and the packed maxima and
/// minima of the pairs `(a, b)` and `(b, c)` in `pairs[2i..2i+2]`.
#[kernel]
pub fn scalar_bf16(a: &[bf16], b: &[bf16], c: &[bf16], mut out: DisjointChunks<bf16, 6>, mut pairs: DisjointChunks<Bf16x2, 2>) {
    let i = unique_index();
    if i.get() < a.len() {
        let (a, b, c) = (a[i], b[i], c[i]);
        *out.get_mut(i).expect("6 values per thread") = [a.add_rn(b), a.sub_rn(b), a.mul_rn(b), a.fma_rn(b, c), a.max_num(b), a.min_num(b)];
        let (x, y) = (Bf16x2::new(a, b), Bf16x2::new(b, c));
        *pairs.get_mut(i).expect("2 pairs per thread") = [x.max_num(y), x.min_num(y)];
    }
}

/// [`scalar_bf16`] on `f16`.
#[kernel]
pub fn scalar_f16(a: &[f16], b: &[f16], c: &[f16], mut out: DisjointChunks<f16, 6>, mut pairs: DisjointChunks<F16x2, 2>) {
    let i = unique_index();
    if i.get() < a.len() {
        let (a, b, c) = (a[i], b[i], c[i]);
        *out.get_mut(i).expect("6 values per thread") = [a.add_rn(b), a.sub_rn(b), a.mul_rn(b), a.fma_rn(b, c), a.max_num(b), a.min_num(b)];
        let (x, y) = (F16x2::new(a, b), F16x2::new(b, c));
        *pairs.get_mut(i).expect("2 pairs per thread") = [x.max_num(y), x.min_num(y)];
    }
}

/// Shared memory and shuffles of 16-bit floats: each block of 64 writes its bf16 and f16
/// inputs to shared arrays, and after a barrier thread `t` reads element `63 - t`; then a
/// butterfly shuffle swaps neighbours' pairs. Launch with blocks of 64 over whole blocks.
/// `out_bf16[i] = x[block + 63 - t]`, `out_f16[i] = h[...]` likewise,
/// `out_pairs[i] = pair of lane ^ 1`, `out_sum[i]` = the warp's sum of pairs.
#[kernel]
pub fn shared_and_shuffled(
    x: &[bf16],
    h: &[f16],
    mut out_bf16: DisjointSlice<bf16>,
    mut out_f16: DisjointSlice<f16>,
    mut out_pairs: DisjointSlice<Bf16x2>,
    mut out_sum: DisjointSlice<F16x2>,
) {
    let staged = shared_array![bf16; 64];
    let staged_h = shared_array![f16; 64];
    let t = thread_idx_x() as usize;
    let i = unique_index();
    staged.set(t, x[i]);
    staged_h.set(t, h[i]);
    sync_threads();
    out_bf16[i] = staged.get(63 - t);
    out_f16[i] = staged_h.get(63 - t);
    let pair = Bf16x2::new(x[i], warp::shuffle_xor(x[i], 2));
    out_pairs[i] = warp::shuffle_xor(pair, 1);
    out_sum[i] = warp::reduce_sum(F16x2::new(h[i], f16::from_f32_rn(1.0)));
}

/// Each thread writes one f16 of a shared array and reads it back, with no barrier: no race,
/// though neighbouring threads write the two halves of one 32-bit word. With `same_element`
/// every thread writes element 0 instead: a race the CPU executor must report.
#[kernel]
pub fn neighbouring_halves(same_element: bool, mut out: DisjointSlice<f16>) {
    let staged = shared_array![f16; 64];
    let t = thread_idx_x() as usize;
    let slot = if same_element { 0 } else { t };
    staged.set(slot, (t as f32).to_f16());
    out[unique_index()] = staged.get(slot);
}

/// Atomic adds of f16 and f16 pairs (`atom.add.noftz.f16`, `.f16x2`): thread `i` adds `x[i]`
/// to `sums[i % 4]` and `pairs[i]` to `pair_sums[i % 4]`.
#[kernel]
pub fn atomic_f16_sums(x: &[f16], pairs: &[F16x2], sums: AtomicSlice<f16>, pair_sums: AtomicSlice<F16x2>) {
    let i = unique_index();
    if i.get() < x.len() {
        sums.add(i.get() % 4, x[i]);
        pair_sums.add(i.get() % 4, pairs[i]);
    }
}

/// bf16 atomics (`atom.add.noftz.bf16`, `.bf16x2`) need sm_90: the sm_80 PTX leaves this
/// module out.
#[cfg_attr(target_arch = "nvptx64", cfg(ferrocuda_sm = "90"))]
pub mod sm90 {
    use ferrocuda_device::global::{AtomicSlice, unique_index};
    use ferrocuda_device::half::{Bf16x2, bf16};
    use ferrocuda_device::kernel;

    /// [`atomic_f16_sums`](super::atomic_f16_sums) on bf16.
    #[kernel]
    pub fn atomic_bf16_sums(x: &[bf16], pairs: &[Bf16x2], sums: AtomicSlice<bf16>, pair_sums: AtomicSlice<Bf16x2>) {
        let i = unique_index();
        if i.get() < x.len() {
            sums.add(i.get() % 4, x[i]);
            pair_sums.add(i.get() % 4, pairs[i]);
        }
    }
}
