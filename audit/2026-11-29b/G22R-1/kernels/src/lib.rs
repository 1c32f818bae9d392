//! G22R-1: `shared_array!` evaluates its length (and type) twice, in two scopes. The `.shared`
//! declaration's size is computed inside a generated `mod __ferrocuda_shared_site { use
//! super::*; .. }`, where the kernel function's own local items (a `const`, a `type`) are not
//! in scope: the glob import finds the *module-level* item of the same name instead. The
//! handle's length (`SharedArray<T, { $len }>`) is computed in the kernel body, where the local
//! item shadows it. So the GPU array is declared with the module-level length and the safe,
//! bounds-checked handle indexes up to the local one: `set`/`get` (and the library's own
//! collectives built on the macro: `multi_block_reduce!`, `block_scratch!`) access shared
//! memory outside the declared array. The CPU executor sizes the array from the body's
//! expression alone, so it sees nothing wrong.
//!
//! Safe code only. Nothing here is adversarial: a local `const` that shadows a module-level
//! one of the same name is ordinary Rust.
#![cfg_attr(target_arch = "nvptx64", no_std, feature(abi_ptx, asm_experimental_arch))]

use ferrocuda_device::global::DisjointSlice;
use ferrocuda_device::sync::sync_threads;
use ferrocuda_device::thread::thread_idx_x;
use ferrocuda_device::{kernel, multi_block_reduce, shared_array};

ferrocuda_device::embed_kernels!();

/// A module-level constant (say, another kernel's tile length).
#[allow(dead_code)]
const LEN: usize = 1;
/// A module-level constant named like the reduction width below.
#[allow(dead_code)]
const WIDTH: usize = 1;

/// 32 threads. `big` is declared with a local `LEN` of 36, but its `.shared` symbol gets the
/// module-level `LEN` (1 element, 4 bytes; 16 with the alignment); `guard`, a 32-element array
/// every thread fills with 7, follows it (sm_80 SASS: `big` at 0x0, `guard` at 0x10). Thread 0
/// writes 0xdead into `big[1..36]` (in bounds for the handle), then every thread reads
/// `guard[t]` back. CPU executor: `out[t] == 7` everywhere, no error. GPU: `big[4..36]` is
/// `guard`, so `out[t] == 0xdead`, silently, inside the block's shared allocation.
#[kernel]
pub fn g22r1_shadowed_len(mut out: DisjointSlice<u32>) {
    const LEN: usize = 36;
    let big = shared_array![u32; LEN];
    let guard = shared_array![u32; 32];
    shadowed_body(big, guard, LEN, &mut out);
}

/// As [`g22r1_shadowed_len`] with `LEN = 256` and `guard` declared first (SASS: `guard` at 0x0,
/// `big` at 0x80, the kernel's static shared section 0x90 bytes): thread 0's in-bounds writes
/// reach byte 0x47c, past the block's static shared memory.
#[kernel]
pub fn g22r1_shadowed_len_far(mut out: DisjointSlice<u32>) {
    const LEN: usize = 256;
    let guard = shared_array![u32; 32];
    let big = shared_array![u32; LEN];
    shadowed_body(big, guard, LEN, &mut out);
}

#[inline(always)]
fn shadowed_body<const N: usize>(
    big: ferrocuda_device::shared::SharedArray<u32, N>,
    guard: ferrocuda_device::shared::SharedArray<u32, 32>,
    len: usize,
    out: &mut DisjointSlice<u32>,
) {
    let t = thread_idx_x() as usize;
    if t < 32 {
        guard.set(t, 7);
    }
    sync_threads();
    if t == 0 {
        let mut i = 1;
        while i < len {
            big.set(i, 0xdead);
            i += 1;
        }
    }
    sync_threads();
    if let Some(o) = out.get_mut(ferrocuda_device::global::unique_index()) {
        *o = if t < 32 { guard.get(t) } else { 0 };
    }
}

/// The library's own collective over the same macro: `multi_block_reduce!(f32; WIDTH)` with a
/// local `WIDTH = 8` declares `33 * 1` slots (the module-level `WIDTH`) and the reducer uses
/// `33 * 8`: every warp's lane 0 stores its 8 partials at `warp * 8 + k`, and thread 0 the
/// hand-off at `256 + k`, past the declared 132 bytes. `guard` is read back as above.
#[kernel]
pub fn g22r1_multi_block_reduce(mut out: DisjointSlice<f32>) {
    const WIDTH: usize = 8;
    let guard = shared_array![f32; 32];
    let reduce = multi_block_reduce!(f32; WIDTH);
    let t = thread_idx_x() as usize;
    if t < 32 {
        guard.set(t, 7.0);
    }
    sync_threads();
    let sums = reduce.sum_all([1.0; WIDTH]);
    sync_threads();
    if let Some(o) = out.get_mut(ferrocuda_device::global::unique_index()) {
        *o = if t < 32 { guard.get(t) } else { sums[0] };
    }
}

/// The escalation: a kernel that can panic keeps its name for the panic report in shared
/// memory (`__ferrocuda_kernel_tag`: the name's address and the address XOR a public constant),
/// and the panic handler copies the bytes at that address into the host's record. `big` is
/// declared with the module-level `LEN` (1 `u64`, 16 bytes with the alignment) and used with the
/// local 4; thread 0 fills `big[1..4]` with `(secret, secret ^ KEY)` pairs at every 16-byte
/// boundary, so whichever 16-byte slot ptxas gave the tag after `big` holds a valid-looking
/// tag for `secret`, an address the launch was never given (a by-value `u64`). Then the
/// kernel panics: the host's `KernelPanic` names the kernel with the bytes at `secret`.
#[kernel]
pub fn g22r1_tag(mut out: DisjointSlice<u32>, secret: u64, boom: u32) {
    const LEN: usize = 4;
    const KEY: u64 = 0x6665_7272_6f63_7564;
    let big = shared_array![u64; LEN];
    // Every thread's entry store of the tag is done before this barrier; thread 0's stores
    // after it are the last to touch the tag.
    sync_threads();
    if thread_idx_x() == 0 {
        let mut i = 1;
        while i < LEN {
            big.set(i, if i % 2 == 0 { secret } else { secret ^ KEY });
            i += 1;
        }
    }
    sync_threads();
    if let Some(o) = out.get_mut(ferrocuda_device::global::unique_index()) {
        *o = big.get(0) as u32;
    }
    if boom == 7 {
        panic!("g22r1_tag: the kernel panics on purpose");
    }
}
