//! Audit 2026-11-29b, G22R-1: the panic report's kernel name on the GPU after the fix. The tag
//! in shared memory holds the kernel's id, looked up in the module's names table; the review's
//! `gpu-tag` shape rewrote the tag with `(secret, secret ^ key)` through a shadowed
//! `shared_array!` length, and the report copied the bytes at `secret`. The shadowing is now a
//! compile error (tests/compile_fail/seams/g22r_1_*.rs), so `g22r_1_forged_tag` stands for any
//! other shared-memory bug with an explicit out-of-bounds `set_unchecked`.

use ferrocuda_device::global::{DisjointSlice, unique_index};
use ferrocuda_device::sync::sync_threads;
use ferrocuda_device::thread::{block_idx_x, thread_idx_x};
use ferrocuda_device::{kernel, multi_block_reduce, shared_array};

/// The tag's check-word constant (device/src/panic.rs), as the review's repro used it.
const TAG_KEY: u64 = 0x6665_7272_6f63_7564;

/// Shared arrays of every kind, then thread 3 of block 1 panics when `boom == 7`: the report
/// must name this kernel, its file and line, the block and the thread.
#[kernel]
pub fn g22r_1_named_panic(mut out: DisjointSlice<u32>, boom: u32) {
    let tile = shared_array![u64; 4];
    let reduce = multi_block_reduce!(f32; 2);
    let t = thread_idx_x() as usize;
    if t < 4 {
        tile.set(t, t as u64);
    }
    let [s, _] = reduce.sum_all([1.0, 2.0]);
    sync_threads();
    if boom == 7 && block_idx_x() == 1 && t == 3 {
        panic!("g22r_1_named_panic: on purpose"); // G22R1:named
    }
    if let Some(o) = out.get_mut(unique_index()) {
        *o = tile.get(t % 4) as u32 + s as u32;
    }
}

/// The review's `gpu-tag` shape with the out-of-bounds store written out: `big` is one `u64`
/// (16 bytes with the alignment) and thread 0 writes `secret ^ key`, `secret`, `secret ^ key`
/// at bytes 8, 16 and 24 (`unsafe`: past the array; the review's SASS put the tag at 0x10,
/// right after `big`), so the tag holds a forged pair. `out[0..4]` gets the tag as the panic
/// report reads it (its two words, split in halves), so the host can tell whether the forgery
/// reached it. Then the kernel panics: the report must name no kernel (the id `secret` is not
/// in the table), never the bytes at `secret`.
#[kernel]
pub fn g22r_1_forged_tag(mut out: DisjointSlice<u32>, secret: u64, boom: u32) {
    let big = shared_array![u64; 1];
    // Every thread's entry store of the tag is done before this barrier.
    sync_threads();
    if thread_idx_x() == 0 {
        let mut i = 1;
        while i < 4 {
            // SAFETY: none; this is the shared-memory bug under test (a store past `big`,
            // inside the block's shared window, where the tag may lie).
            unsafe { big.set_unchecked(i, if i % 2 == 0 { secret } else { secret ^ TAG_KEY }) };
            i += 1;
        }
    }
    sync_threads();
    let (name, check) = read_tag();
    if let Some(o) = out.get_mut(unique_index()) {
        *o = match thread_idx_x() {
            0 => name as u32,
            1 => (name >> 32) as u32,
            2 => check as u32,
            3 => (check >> 32) as u32,
            _ => big.get(0) as u32,
        };
    }
    if boom == 7 {
        panic!("g22r_1_forged_tag: on purpose");
    }
}

/// The kernel tag's two words, read as the panic report reads them.
#[inline(always)]
fn read_tag() -> (u64, u64) {
    #[cfg(target_arch = "nvptx64")]
    {
        let (name, check): (u64, u64);
        // SAFETY: reads this block's tag in shared memory (the report's exact load).
        unsafe {
            core::arch::asm!(
                "{{ .reg .u32 t; mov.u32 t, __ferrocuda_kernel_tag; ld.shared.v2.u64 {{{n}, {c}}}, [t]; }}",
                n = out(reg64) name, c = out(reg64) check, options(nostack, readonly),
            );
        }
        (name, check)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    (0, 0)
}
