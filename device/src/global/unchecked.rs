//! [`UncheckedSlice`]: an output whose element ownership the kernel's own `unsafe` code
//! states ([`Unchecked`]).

use super::LaunchRequirements;
use super::slice::{DisjointSlice, Partition};

/// A kernel output written only through `unsafe` accesses, for index patterns no witness
/// expresses and for launches of any shape: [`get_unchecked_mut`](DisjointSlice::get_unchecked_mut),
/// [`write_unchecked`](DisjointSlice::write_unchecked), [`as_mut_slice`](DisjointSlice::as_mut_slice),
/// [`as_mut_ptr`](DisjointSlice::as_mut_ptr). Each access's contract: the element is in
/// bounds and **no other thread of the launch reads or writes it at any time during the
/// launch**; the kernel's `// SAFETY:` comment says why.
///
/// No launcher checks the launch's shape for this output: when that argument derives
/// ownership from some indices alone (`blockIdx.x` and `threadIdx.x`, say), the kernel must
/// itself do nothing, uniformly, in a launch where the others vary (`block_dim().y != 1`,
/// `grid_dim().y != 1`, ...), or two blocks or threads own one element (audit 2026-11-28f,
/// G18R-1).
pub type UncheckedSlice<'a, T> = DisjointSlice<'a, T, Unchecked>;

/// The partition of [`UncheckedSlice`]: no safe access at all (only the `unsafe` escape
/// hatch every partition has), so it needs nothing of the launch and mixing it with
/// witnesses is impossible.
pub struct Unchecked;

// SAFETY: it hands out nothing in safe code; the `unsafe` methods carry the contract.
unsafe impl Partition for Unchecked {
    const KEY: u64 = super::slice::partition_key("Unchecked", &[]);
    const REQUIREMENTS: LaunchRequirements = LaunchRequirements::NONE;
    type Shape = ();
}
