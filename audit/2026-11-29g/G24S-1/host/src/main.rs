//! G24S-1 repro: `g24s1-host math` prints the arithmetic (no GPU); `g24s1-host cpu` launches
//! on the CPU executor under `timeout` (2^32 threads: it does not finish; the launch checks
//! pass); `g24s1-host gpu` launches on the GPU and reads back row 0.
//! GPU exit codes: 0 = REPRODUCED, 1 = NOT REPRODUCED, 2 = SKIPPED (no GPU).

use ferrocuda_device::cpu::{CpuExecutor, LaunchConfig as CpuConfig};
use ferrocuda_host::{Context, Device, DeviceBuffer, LaunchConfig, Stream};
use g24s1_kernels::{RADIX_A, g24s1_wrapped_row, g24s2_radix_by_cfg};

// Found by a search (audit/2026-11-29g/G24S-1/search.py): radices a b = 4 273 383 312 (within
// u32), thread index I near 2^32, whose row (q a b + y a + x) is past 2^33 - 2^32.
const A: u32 = 198;
const B: u32 = 21_582_744;
const I: u32 = 4_294_964_491;
const COLS: u32 = 2_158_408_403;
/// Elements of the output: row 0 (`COLS`) and the wrapped row's end.
const LEN: usize = 2_158_560_649;
const BLOCK: u32 = 256;
/// The grid covers `I` (at most u32::MAX threads: the launch checks refuse more).
const GRID: u32 = (I as u64 + 1).div_ceil(BLOCK as u64) as u32;

/// The library's arithmetic (`permuted` and `row_mut` in device/src/global/permuted_rows.rs).
fn math() -> u64 {
    let group = A * B;
    let (q, r) = (I / group, I % group);
    let (x, y) = (r / B, r % B);
    let row = u64::from(q) * u64::from(group) + u64::from(y * A + x);
    let start = row.wrapping_mul(u64::from(COLS));
    println!("a b = {group} (<= u32::MAX {}), thread {I}: q {q} x {x} y {y} row {row} (2^32 = {})", u32::MAX, 1u64 << 32);
    println!(
        "row * cols = {} (exact), wraps in u64 to start {start}; start + cols = {} <= len {LEN}: {}",
        u128::from(row) * u128::from(COLS),
        start + u64::from(COLS),
        start + u64::from(COLS) <= LEN as u64
    );
    println!("thread 0 owns [0, {COLS}); thread {I} is handed [{start}, {}): overlap {}", start + u64::from(COLS), start < u64::from(COLS));
    start
}

/// G24S-2: the host build's radix `a` is 1, the device build's 0; the layout words agree.
fn g24s2(gpu: bool) -> i32 {
    let word = |c: u32, a: u32, b: u32| u64::from(c) | u64::from(a) << 32 | u64::from(b).rotate_left(16);
    println!("G24S-2 host RADIX_A = {RADIX_A}; layout word host (4, 1, 65536) = {:#x}, device (4, 0, 65536) = {:#x}", word(4, 1, 65536), word(4, 0, 65536));
    let mut host = vec![0u8; 4 * 65536];
    let r = g24s2_radix_by_cfg::launch_cpu(&CpuExecutor::new(), CpuConfig::new(256u32, 256u32), &mut host);
    println!("G24S-2 CPU executor (a = 1): {r:?}; rows written: {}", host.chunks(4).filter(|r| r[0] != 0).count());
    if !gpu {
        return 0;
    }
    if !matches!(Device::count(), Ok(n) if n >= 1) {
        println!("SKIPPED g24s2 gpu: no GPU");
        return 2;
    }
    let context = Context::primary(0).unwrap();
    let stream = Stream::new(&context).unwrap();
    let mut out = DeviceBuffer::<u8>::zeroed(&context, 4 * 65536).unwrap();
    let launched = g24s2_radix_by_cfg::launch(&stream, LaunchConfig::new(256u32, 256u32), &mut out);
    println!("G24S-2 GPU launch (the host's checks, a = 1): {launched:?}");
    let r = launched.and_then(|()| stream.synchronize());
    println!("G24S-2 GPU synchronize: {r:?}");
    match r {
        Ok(()) => {
            println!("NOT REPRODUCED g24s2: the kernel ran (expected the device build's `assert_unchecked(group != 0)` path)");
            1
        }
        Err(e) => {
            println!("REPRODUCED g24s2: the launch passed the host's checks and the device build ran a path its own assumptions rule out (a = 0): {e}");
            0
        }
    }
}

fn main() {
    let which = std::env::args().nth(1).unwrap_or_else(|| "math".into());
    if which == "cpu2" || which == "gpu2" {
        std::process::exit(g24s2(which == "gpu2"));
    }
    let start = math();
    if which == "cpu" {
        let mut out = vec![0u8; LEN];
        let r = g24s1_wrapped_row::launch_cpu(&CpuExecutor::new(), CpuConfig::new(GRID, BLOCK), &mut out, COLS, A, B, start as u32);
        println!("CPU executor: {r:?}; element {start}: {}, {}: {}", out[start as usize], start + 1, out[start as usize + 1]);
        return;
    }
    if which != "gpu" {
        return;
    }
    if !matches!(Device::count(), Ok(n) if n >= 1) {
        println!("SKIPPED g24s1 gpu: no GPU");
        std::process::exit(2);
    }
    let context = Context::primary(0).unwrap();
    let stream = Stream::new(&context).unwrap();
    let mut out = DeviceBuffer::<u8>::zeroed(&context, LEN).unwrap();
    let r = g24s1_wrapped_row::launch(&stream, LaunchConfig::new(GRID, BLOCK), &mut out, COLS, A, B, start as u32).and_then(|()| stream.synchronize());
    println!("GPU launch: {r:?}");
    if r.is_err() {
        println!("NOT REPRODUCED g24s1: the launch was refused or failed");
        std::process::exit(1);
    }
    let back = out.to_vec().unwrap();
    let (s, n) = (start as usize, back.iter().filter(|&&v| v != 0).count());
    println!("element {s} (thread 0's row, index {s}): {}; element {} (thread 0's row): {}; nonzero elements: {n}", back[s], s + 1, back[s + 1]);
    if back[s + 1] == 3 {
        println!(
            "REPRODUCED g24s1: thread {I} wrote inside row 0, which `PermutedRows` gives to thread 0 alone (two `&mut [u8]` over one element: a data race on element {s})"
        );
        std::process::exit(0);
    }
    println!("NOT REPRODUCED g24s1");
    std::process::exit(1);
}
