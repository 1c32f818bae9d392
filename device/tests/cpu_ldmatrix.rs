//! `ldmatrix`/`stmatrix` (x4) on the CPU executor against the PTX ISA's fragment layout
//! ("Warp-level matrix load instruction: ldmatrix", "... store instruction: stmatrix"),
//! computed here independently of the emulation: lanes `8i..8i+7` give the row addresses of
//! matrix `i`; register `r` of lane `l` holds row `l / 4`, elements `2(l % 4)` (low half) and
//! `2(l % 4) + 1` (high half) of matrix `r`, of the transposed matrix with `.trans`.
//!
//! Two warps, each with its own 1 KiB of shared memory, and rows placed out of order with
//! 32-byte strides, so that a wrong lane-to-row, register-to-matrix or warp mapping reads
//! other values.

use std::sync::atomic::{AtomicU32, Ordering};

use ferrocuda_device::cpu::{CpuError, CpuExecutor, LaunchConfig};
use ferrocuda_device::ldmatrix;
use ferrocuda_device::shared::SharedElement;
use ferrocuda_device::sync::sync_threads;
use ferrocuda_device::thread::thread_idx_x;
use ferrocuda_device::tma::dynamic_shared_address;

const WARPS: u32 = 2;
/// Shared memory per warp: 32 rows at a 32-byte stride.
const WARP_BYTES: u32 = 32 * 32;

/// The element (row, column) of matrix `m` of warp `w`.
fn element(w: u32, m: u32, row: u32, col: u32) -> u16 {
    (w * 1024 + m * 64 + row * 8 + col) as u16 ^ 0xa5a5
}

/// The shared-memory offset of row `row` of matrix `m` in a warp's region: the 32 rows in a
/// scrambled order (`* 7` is a permutation modulo 32).
fn row_offset(m: u32, row: u32) -> u32 {
    ((m * 8 + row) * 7 % 32) * 32
}

/// The row address lane `lane` of warp `w` passes: row `lane % 8` of matrix `lane / 8`.
fn row_address(w: u32, lane: u32) -> u32 {
    dynamic_shared_address() + w * WARP_BYTES + row_offset(lane / 8, lane % 8)
}

fn pair(low: u16, high: u16) -> u32 {
    low as u32 | (high as u32) << 16
}

fn config() -> LaunchConfig {
    LaunchConfig::new(1u32, 32 * WARPS).with_shared_bytes(WARPS * WARP_BYTES)
}

#[test]
fn ldmatrix_x4_and_trans_give_the_ptx_fragment_layout() {
    let plain: Vec<AtomicU32> = (0..32 * WARPS * 4).map(|_| AtomicU32::new(0)).collect();
    let trans: Vec<AtomicU32> = (0..32 * WARPS * 4).map(|_| AtomicU32::new(0)).collect();
    let body = || {
        let t = thread_idx_x();
        let (w, lane) = (t / 32, t % 32);
        // Each thread writes one row (8 elements) of its warp's four matrices with plain stores.
        let (m, row) = (lane / 8, lane % 8);
        for c in 0..4 {
            let address = dynamic_shared_address() + w * WARP_BYTES + row_offset(m, row) + 4 * c;
            // SAFETY: inside the launch's shared memory, 4-byte aligned.
            unsafe { u32::store_shared(address, pair(element(w, m, row, 2 * c), element(w, m, row, 2 * c + 1))) };
        }
        sync_threads();
        // SAFETY: all 32 lanes of each warp, 16-byte aligned rows inside the shared memory.
        let (p, q) = unsafe { (ldmatrix::load_x4(row_address(w, lane)), ldmatrix::load_x4_trans(row_address(w, lane))) };
        for r in 0..4 {
            plain[(4 * t + r) as usize].store(p[r as usize], Ordering::Relaxed);
            trans[(4 * t + r) as usize].store(q[r as usize], Ordering::Relaxed);
        }
    };
    for executor in [CpuExecutor::deterministic(), CpuExecutor::new()] {
        executor.run("ldmatrix_layout", config(), &body).unwrap();
        for w in 0..WARPS {
            for l in 0..32 {
                let (group, c) = (l / 4, l % 4);
                for r in 0..4 {
                    let i = (4 * (32 * w + l) + r) as usize;
                    let expected = pair(element(w, r, group, 2 * c), element(w, r, group, 2 * c + 1));
                    assert_eq!(plain[i].load(Ordering::Relaxed), expected, "ldmatrix.x4: warp {w} lane {l} register {r}");
                    let expected = pair(element(w, r, 2 * c, group), element(w, r, 2 * c + 1, group));
                    assert_eq!(trans[i].load(Ordering::Relaxed), expected, "ldmatrix.x4.trans: warp {w} lane {l} register {r}");
                }
            }
        }
    }
}

#[test]
fn stmatrix_x4_writes_the_ptx_fragment_layout() {
    let memory: Vec<AtomicU32> = (0..WARPS * WARP_BYTES / 4).map(|_| AtomicU32::new(0)).collect();
    // Register `r` of lane `l` of warp `w`.
    let register = |w: u32, l: u32, r: u32| w << 24 | l << 8 | r | 0x5000_0000;
    let body = || {
        let t = thread_idx_x();
        let (w, lane) = (t / 32, t % 32);
        let value = [0, 1, 2, 3].map(|r| register(w, lane, r));
        // The rows fill half of each 32-byte stride, and the dump below reads every word: zero
        // them all first (a read of shared memory no thread wrote is an error, audit Q6).
        for k in 0..WARPS * WARP_BYTES / 4 / (32 * WARPS) {
            // SAFETY: inside the launch's shared memory, 4-byte aligned.
            unsafe { u32::store_shared(dynamic_shared_address() + 4 * (t + 32 * WARPS * k), 0) };
        }
        sync_threads();
        // SAFETY: all 32 lanes of each warp, 16-byte aligned rows inside the shared memory.
        unsafe { ldmatrix::store_x4(row_address(w, lane), value) };
        sync_threads();
        for k in 0..WARPS * WARP_BYTES / 4 / (32 * WARPS) {
            let word = t + 32 * WARPS * k;
            // SAFETY: inside the launch's shared memory, 4-byte aligned.
            let v = unsafe { u32::load_shared(dynamic_shared_address() + 4 * word) };
            memory[word as usize].store(v, Ordering::Relaxed);
        }
    };
    for executor in [CpuExecutor::deterministic(), CpuExecutor::new()] {
        executor.run("stmatrix_layout", config(), &body).unwrap();
        for w in 0..WARPS {
            for m in 0..4 {
                for row in 0..8 {
                    for c in 0..4 {
                        let word = (w * WARP_BYTES + row_offset(m, row) + 4 * c) / 4;
                        let expected = register(w, 4 * row + c, m);
                        assert_eq!(memory[word as usize].load(Ordering::Relaxed), expected, "warp {w} matrix {m} row {row} columns {}..", 2 * c);
                    }
                }
            }
        }
    }
}

#[test]
fn ldmatrix_without_the_whole_warp_is_an_error() {
    let body = || {
        let lane = thread_idx_x();
        if lane < 16 {
            // SAFETY: a broken contract (half the warp) that the executor reports.
            let _ = unsafe { ldmatrix::load_x4(dynamic_shared_address() + 16 * lane) };
        }
    };
    let error = CpuExecutor::deterministic().run("half_warp_ldmatrix", LaunchConfig::new(1u32, 32u32).with_shared_bytes(512), &body).unwrap_err();
    assert!(matches!(error, CpuError::KernelPanic(_)), "{error}");
    let message = error.to_string();
    assert!(message.contains("ldmatrix.x4 is a collective of all 32 lanes") && message.contains("0x0000ffff"), "{message}");
}
