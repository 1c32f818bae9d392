//! The CPU executor's emulation of the Hopper instructions of `mbarrier`, `tma`, `wgmma` and
//! `warpgroup`: correctness, not speed, so that kernels using them run in tests without a GPU.
//!
//! - An mbarrier is its 8 bytes of the block's shared memory: bit 63 the phase, bits 48..63
//!   the arrival count per phase, bits 32..48 the pending arrivals, bits 0..32 the pending
//!   transaction bytes (signed). A thread whose `try_wait` fails yields to the other threads of
//!   its block (through the executor's `activemask` pass), so spin-waits make progress.
//! - A TMA copy happens at once, when issued, and then completes its bytes on the barrier; a
//!   TMA store writes global memory at once, so its commit and waits have nothing to do.
//!   Tensor maps for the executor are made by `ferrocuda_host::TensorMap::emulated` (the
//!   driver's encoding is opaque): [`EmulatedMap`] is their layout.
//! - A `wgmma` is computed at once by each thread for its own accumulators, reading A and B
//!   through the descriptors with the swizzle applied to shared-memory addresses as the
//!   hardware does (`address ^ ((address >> 7) & mask) << 4`); so the copy engine's swizzled
//!   tiles and the descriptors' K steps meet as they do on the GPU.
//!   Only operands with the 128-byte swizzle are emulated, K-major (what
//!   `Descriptor::k_major_128b` describes) or MN-major (`Descriptor::n_major_128b`); others
//!   panic with a message.

use crate::emu;

/// First word of an emulated tensor map.
pub const EMULATED_MAP_MAGIC: u64 = 0x6665_7272_6f54_4d41; // "ferroTMA"

/// The layout of a tensor map made for the CPU executor (128 bytes, as `CUtensorMap`).
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EmulatedMap {
    /// [`EMULATED_MAP_MAGIC`].
    pub magic: u64,
    /// Address of element 0 (a host address under the executor).
    pub address: u64,
    /// Dimensions used (1..=5).
    pub rank: u32,
    /// Bytes per element.
    pub element_bytes: u32,
    /// 0 none, 1 = 32-byte, 2 = 64-byte, 3 = 128-byte swizzle.
    pub swizzle: u32,
    /// Unused.
    pub reserved: u32,
    /// Elements per dimension, innermost first.
    pub dims: [u32; 5],
    /// Box size per dimension.
    pub box_dims: [u32; 5],
    /// Byte strides of dimensions 1..rank (dimension 0 is contiguous).
    pub strides: [u64; 4],
    /// Unused.
    pub padding: [u32; 2],
}

const _: () = assert!(core::mem::size_of::<EmulatedMap>() == 128);

const PHASE: u64 = 1 << 63;

fn barrier_word(address: u32) -> *mut u64 {
    emu::shared_pointer::<u64>(address)
}

/// A pointer to `size_of::<T>()` bytes at `address` in the shared memory of cluster block
/// `rank` (bounds and alignment checked).
fn peer_pointer<T>(rank: u32, address: u32) -> *mut T {
    emu::cluster_peer_pointer::<T>(rank, address)
}

fn decode(word: u64) -> (u64, u64, u64, i32) {
    (word >> 63, (word >> 48) & 0x7fff, (word >> 32) & 0xffff, word as u32 as i32)
}

fn encode(phase: u64, count: u64, pending: u64, tx: i32) -> u64 {
    (phase << 63) | (count << 48) | (pending << 32) | tx as u32 as u64
}

/// `mbarrier.init`.
pub(crate) fn mbarrier_init(address: u32, count: u32) {
    assert!((1..0x8000).contains(&count), "mbarrier.init: count {count} out of range (the executor supports 1..32768)");
    // SAFETY: the pointer is in bounds and aligned (checked by `shared_pointer`); the block's
    // threads run one at a time on this OS thread.
    unsafe { *barrier_word(address) = encode(0, count as u64, count as u64, 0) };
}

/// Arrivals and transaction bytes (`tx` may be negative: bytes delivered).
pub(crate) fn mbarrier_update(address: u32, arrivals: u64, tx: i32) {
    update_word(barrier_word(address), address, arrivals, tx);
}

/// As [`mbarrier_update`] on the barrier at `address` of cluster block `rank` (a remote
/// `mbarrier.arrive.shared::cluster`, or a multicast copy's `complete_tx`).
pub(crate) fn mbarrier_update_peer(rank: u32, address: u32, arrivals: u64, tx: i32) {
    update_word(peer_pointer::<u64>(rank, address), address, arrivals, tx);
}

fn update_word(word: *mut u64, address: u32, arrivals: u64, tx: i32) {
    // SAFETY: as in `mbarrier_init`.
    let (phase, count, pending, old_tx) = decode(unsafe { *word });
    assert!(count > 0, "mbarrier at shared address {address:#x} used before mbarrier.init");
    assert!(pending >= arrivals, "mbarrier at {address:#x}: more arrivals than its count ({count}) in one phase");
    let (pending, tx) = (pending - arrivals, old_tx + tx);
    let next = if pending == 0 && tx == 0 { encode(phase ^ 1, count, count, 0) } else { encode(phase, count, pending, tx) };
    // SAFETY: as in `mbarrier_init`.
    unsafe { *word = next };
}

/// `mbarrier.try_wait.parity`: whether the phase of parity `parity` has completed; yields to
/// the block's other threads when not.
pub(crate) fn mbarrier_try_wait(address: u32, parity: u32) -> bool {
    // SAFETY: as in `mbarrier_init`.
    let word = unsafe { *barrier_word(address) };
    let done = ((word & PHASE) >> 63) != (parity & 1) as u64;
    FAILED_WAITS.with(|failed| {
        if done {
            failed.set(0);
        } else {
            // No thread of any block on this worker completed a wait for this long: a
            // deadlock (a barrier nobody will complete), not a slow producer.
            let count = failed.get() + 1;
            failed.set(count);
            assert!(count < STUCK_AFTER, "mbarrier wait at shared address {address:#x} (parity {parity}): no mbarrier wait succeeded in {STUCK_AFTER} tries; the barrier's phase never completes (count or expected bytes wrong?)");
        }
    });
    if !done {
        // Let the other threads run (the producer this thread waits for among them).
        emu::warp_active_mask();
    }
    done
}

/// Failed `try_wait`s in a row on this worker thread, for the deadlock report.
const STUCK_AFTER: u64 = 2_000_000;

std::thread_local! {
    static FAILED_WAITS: core::cell::Cell<u64> = const { core::cell::Cell::new(0) };
}

/// The swizzled shared-memory address of logical `address` (`mode` as in [`EmulatedMap`] /
/// the descriptor: 0 none, 32/64/128-byte).
fn swizzle(address: u32, mode: u32) -> u32 {
    let mask = match mode {
        0 => return address,
        1 => 1,
        2 => 3,
        _ => 7,
    };
    address ^ (((address >> 7) & mask) << 4)
}

/// `cp.async.bulk.tensor` (global to shared) done at once, then `complete_tx` on `bar`.
pub(crate) fn tma_load(map: *const u64, dst: u32, bar: u32, coords: &[i32]) {
    tma_load_to(map, dst, bar, coords, None);
}

/// `cp.async.bulk.tensor ... .multicast::cluster`: the box lands at `dst` in every cluster block
/// whose bit is set in `mask`, and completes its bytes on `bar` in each of them.
pub(crate) fn tma_load_multicast(map: *const u64, dst: u32, bar: u32, coords: &[i32], mask: u16) {
    for rank in 0..16 {
        if mask & (1 << rank) != 0 {
            tma_load_to(map, dst, bar, coords, Some(rank));
        }
    }
}

fn tma_load_to(map: *const u64, dst: u32, bar: u32, coords: &[i32], peer: Option<u32>) {
    let bytes = for_each_box_byte(map, coords, |global, offset| {
        // Out of bounds: zero fill, as `OOB_FILL_NONE`.
        // SAFETY: `global` lies inside the array the map describes (checked by the walk).
        let value = global.map_or(0, |g| unsafe { *g });
        let byte_pointer = match peer {
            None => emu::shared_pointer::<u8>(dst + offset),
            Some(peer) => peer_pointer::<u8>(peer, dst + offset),
        };
        // SAFETY: the pointer functions check the bounds of each byte.
        unsafe { *byte_pointer = value };
    });
    match peer {
        None => mbarrier_update(bar, 0, -(bytes as i32)),
        Some(peer) => mbarrier_update_peer(peer, bar, 0, -(bytes as i32)),
    }
}

/// `cp.async.bulk.tensor` (shared to global) done at once: the box at `src` is written to the
/// array at `coords`, its elements outside the array skipped (as the hardware does).
pub(crate) fn tma_store(map: *const u64, src: u32, coords: &[i32]) {
    for_each_box_byte(map, coords, |global, offset| {
        if let Some(g) = global {
            // SAFETY: `shared_pointer` checks bounds; `g` lies inside the array the map
            // describes (checked by the walk), which the store's contract lets this write.
            unsafe { *g = *emu::shared_pointer::<u8>(src + offset) };
        }
    });
}

/// `cp.reduce.async.bulk ... .add.f32` done at once: each f32 at `src..src + bytes` in shared
/// memory added atomically to the f32 at the same offset from `dst`.
pub(crate) fn bulk_reduce_add_f32(dst: *mut f32, src: u32, bytes: u32) {
    assert!(
        bytes.is_multiple_of(16) && src.is_multiple_of(16) && (dst as usize).is_multiple_of(16),
        "cp.reduce.async.bulk: 16-byte aligned addresses and a multiple of 16 bytes"
    );
    for i in 0..bytes / 4 {
        // SAFETY: `shared_pointer` checks bounds and alignment.
        let value = unsafe { *emu::shared_pointer::<f32>(src + 4 * i) };
        // SAFETY: the caller's contract: `dst` holds `bytes / 4` f32 that only atomic adds
        // touch while the kernel runs.
        unsafe { crate::atomic::Atomic::from_ptr(dst.add(i as usize)).add(value) };
    }
}

/// `cp.async.bulk.global.shared::cta` done at once: the bytes at `src..src + bytes` in shared
/// memory written to `dst..dst + bytes`.
pub(crate) fn bulk_store(dst: *mut u8, src: u32, bytes: u32) {
    assert!(
        bytes.is_multiple_of(16) && src.is_multiple_of(16) && (dst as usize).is_multiple_of(16),
        "cp.async.bulk: 16-byte aligned addresses and a multiple of 16 bytes"
    );
    for i in 0..bytes {
        // SAFETY: `shared_pointer` checks bounds; the caller's contract: `dst` holds `bytes`
        // bytes that this copy may write.
        unsafe { *dst.add(i as usize) = *emu::shared_pointer::<u8>(src + i) };
    }
}

/// Walks the box of the (emulated) tensor map at `map` whose first element is at `coords`,
/// byte by byte in shared-memory order: calls `visit(global, offset)` with the byte's address
/// in the array (`None` outside it) and its swizzled offset from the box's shared-memory start.
/// Returns the box's size in bytes.
fn for_each_box_byte(map: *const u64, coords: &[i32], mut visit: impl FnMut(Option<*mut u8>, u32)) -> u32 {
    // SAFETY: the caller of the public function vouched for the map's address.
    let map = unsafe { *(map as *const EmulatedMap) };
    assert_eq!(map.magic, EMULATED_MAP_MAGIC, "the CPU executor needs tensor maps made by ferrocuda_host::TensorMap::emulated");
    assert_eq!(coords.len(), map.rank as usize, "a {}-D copy through a {}-D tensor map", coords.len(), map.rank);
    let rank = map.rank as usize;
    let esize = map.element_bytes as usize;
    let row_elems = map.box_dims[0] as usize;
    let rows: usize = map.box_dims[1..rank].iter().map(|&b| b as usize).product();
    let mut offset = 0u32;
    for row in 0..rows {
        // Coordinates of this box row in dimensions 1.. (dimension 1 fastest).
        let mut rest = row;
        let mut base: Option<u64> = Some(map.address);
        for (d, &coord) in coords.iter().enumerate().skip(1) {
            let i = (rest % map.box_dims[d] as usize) as i64 + coord as i64;
            rest /= map.box_dims[d] as usize;
            if i < 0 || i >= map.dims[d] as i64 {
                base = None;
            } else if let Some(b) = base {
                base = Some(b + i as u64 * map.strides[d - 1]);
            }
        }
        for e in 0..row_elems {
            let x = coords[0] as i64 + e as i64;
            let target = swizzle(offset, map.swizzle);
            let element = match base {
                Some(b) if x >= 0 && x < map.dims[0] as i64 => Some(b + x as u64 * esize as u64),
                _ => None,
            };
            for byte in 0..esize {
                visit(element.map(|e| (e + byte as u64) as *mut u8), target + byte as u32);
            }
            offset += esize as u32;
        }
    }
    offset
}

/// One 16-bit element of a K-major, 128-byte-swizzled operand: row `row`, element `k`.
fn operand(descriptor: u64, row: u32, k: u32) -> u16 {
    let start = ((descriptor & 0x3fff) << 4) as u32;
    let stride = (((descriptor >> 32) & 0x3fff) << 4) as u32;
    let mode = (descriptor >> 62) as u32;
    assert_eq!(mode, 1, "the CPU executor emulates wgmma operands with the 128-byte swizzle only (Descriptor::k_major_128b)");
    let logical = start + (row / 8) * stride + (row % 8) * 128 + 2 * k;
    // SAFETY: `shared_pointer` checks bounds and alignment.
    unsafe { *emu::shared_pointer::<u16>(swizzle(logical, 3)) }
}

/// One 16-bit element of an N-major (`imm-trans-b = 1`), 128-byte-swizzled B operand: column
/// `n`, element `k`. 64 N-elements per 128-byte K row, 8 K rows per 1024-byte atom; the next 8
/// K rows lie SBO further, the next 64 N-elements LBO further (CUTLASS's canonical MN-major
/// `Swizzle<3,4,3> o ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO))`).
fn operand_n_major(descriptor: u64, n: u32, k: u32) -> u16 {
    let start = ((descriptor & 0x3fff) << 4) as u32;
    let leading = (((descriptor >> 16) & 0x3fff) << 4) as u32;
    let stride = (((descriptor >> 32) & 0x3fff) << 4) as u32;
    let mode = (descriptor >> 62) as u32;
    assert_eq!(mode, 1, "the CPU executor emulates N-major wgmma operands with the 128-byte swizzle only (Descriptor::n_major_128b)");
    let logical = start + (n / 64) * leading + (k / 8) * stride + (k % 8) * 128 + 2 * (n % 64);
    // SAFETY: `shared_pointer` checks bounds and alignment.
    unsafe { *emu::shared_pointer::<u16>(swizzle(logical, 3)) }
}

/// `wgmma.mma_async` m64nNk16 (f32 accumulators), for the calling thread's accumulators.
pub(crate) fn wgmma(acc: &mut [f32], n: u32, a: u64, b: u64, accumulate: bool, element: fn(u16) -> f32) {
    wgmma_ss_with(acc, n, accumulate, element, |row, k| operand(a, row, k), |col, k| operand(b, col, k));
}

/// [`wgmma`] with both operands MN-major (`imm-trans-a = 1`, `imm-trans-b = 1`): A's element
/// `(row, k)` and B's `(col, k)` read as [`operand_n_major`] reads an N-major B.
pub(crate) fn wgmma_mn_major(acc: &mut [f32], n: u32, a: u64, b: u64, accumulate: bool, element: fn(u16) -> f32) {
    wgmma_ss_with(acc, n, accumulate, element, |row, k| operand_n_major(a, row, k), |col, k| operand_n_major(b, col, k));
}

/// The SS `wgmma` with A's element `(row, k)` read by `a_at` and B's `(col, k)` by `b_at`.
fn wgmma_ss_with(acc: &mut [f32], n: u32, accumulate: bool, element: fn(u16) -> f32, a_at: impl Fn(u32, u32) -> u16, b_at: impl Fn(u32, u32) -> u16) {
    let t = crate::thread::thread_idx_x() % 128;
    let (warp, lane) = (t / 32, t % 32);
    for i in 0..n / 8 {
        for half in 0..2 {
            let row = 16 * warp + lane / 4 + 8 * half;
            for j in 0..2 {
                let col = 8 * i + 2 * (lane % 4) + j;
                let mut sum = 0.0f32;
                for k in 0..16 {
                    sum += element(a_at(row, k)) * element(b_at(col, k));
                }
                let slot = &mut acc[(4 * i + 2 * half + j) as usize];
                *slot = if accumulate { *slot + sum } else { sum };
            }
        }
    }
}

/// `elect.sync` with the full mask: a warp collective of the executor (the lowest live lane
/// is elected once every live lane arrives; a divergent use is reported, as a GPU hangs).
#[track_caller]
pub(crate) fn elect_one() -> bool {
    emu::warp_elect()
}

/// Every bf16/f16 bit pattern as f32, for [`wgmma`].
pub(crate) fn bf16(bits: u16) -> f32 {
    f32::from_bits((bits as u32) << 16)
}

/// f16 bits as f32, for [`wgmma`].
pub(crate) fn f16(bits: u16) -> f32 {
    ::half::f16::from_bits(bits).to_f32()
}

/// The A fragments of each warp (keyed by block context address and warp) for [`wgmma_rs`].
type WarpFragments = std::collections::HashMap<(usize, u32), [[u32; 4]; 32]>;

std::thread_local! {
    static A_FRAGMENTS: core::cell::RefCell<WarpFragments> = core::cell::RefCell::new(WarpFragments::new());
}

/// The running warp: its block (the executor's identity for it) and warp index.
fn warp_key() -> (usize, u32) {
    (emu::block_identity(), emu::rank() / 32)
}

/// `wgmma.mma_async` m64nNk16 with A from registers: the warp's A fragments (the `mma.m16n8k16`
/// A layout, one per warp for its 16 rows) are gathered with two warp syncs, then each thread
/// computes its own accumulators.
pub(crate) fn wgmma_rs(acc: &mut [f32], n: u32, a: [u32; 4], b: u64, accumulate: bool, element: fn(u16) -> f32) {
    wgmma_rs_with(acc, n, a, accumulate, element, |col, k| operand(b, col, k));
}

/// [`wgmma_rs`] with B N-major (`imm-trans-b = 1`).
pub(crate) fn wgmma_rs_n_major(acc: &mut [f32], n: u32, a: [u32; 4], b: u64, accumulate: bool, element: fn(u16) -> f32) {
    wgmma_rs_with(acc, n, a, accumulate, element, |col, k| operand_n_major(b, col, k));
}

/// The RS `wgmma` with B's element `(col, k)` read by `b_at`.
fn wgmma_rs_with(acc: &mut [f32], n: u32, a: [u32; 4], accumulate: bool, element: fn(u16) -> f32, b_at: impl Fn(u32, u32) -> u16) {
    let key = warp_key();
    let lane = emu::lane_id();
    A_FRAGMENTS.with(|slots| slots.borrow_mut().entry(key).or_insert([[0; 4]; 32])[lane as usize] = a);
    emu::warp_sync(crate::warp::FULL_MASK);
    let all = A_FRAGMENTS.with(|slots| slots.borrow()[&key]);
    emu::warp_sync(crate::warp::FULL_MASK);
    // Row r (0..16) of the warp's slice, element k (0..16), as in `crate::mma`.
    let a_at = |r: u32, k: u32| {
        let word = all[((r % 8) * 4 + (k % 8) / 2) as usize][((r / 8) + 2 * (k / 8)) as usize];
        element(if k.is_multiple_of(2) { word as u16 } else { (word >> 16) as u16 })
    };
    for i in 0..n / 8 {
        for half in 0..2 {
            let r = lane / 4 + 8 * half;
            for j in 0..2 {
                let col = 8 * i + 2 * (lane % 4) + j;
                let mut sum = 0.0f32;
                for k in 0..16 {
                    sum += a_at(r, k) * element(b_at(col, k));
                }
                let slot = &mut acc[(4 * i + 2 * half + j) as usize];
                *slot = if accumulate { *slot + sum } else { sum };
            }
        }
    }
}

/// `barrier.sync id, threads` (`wait`) or `barrier.arrive id, threads`: one arrival; with
/// `wait`, yields to the block's other threads until the phase completes. The state lives in
/// the running block (fresh for every block, as on a GPU), which also tells the race detector
/// what a completed phase orders (audit P7).
pub(crate) fn named_barrier(id: u32, threads: u32, wait: bool) {
    let phase = emu::named_barrier_arrive(id, threads, wait);
    let mut tries = 0u64;
    while wait && emu::named_barrier_completed(id) == phase {
        tries += 1;
        assert!(tries < STUCK_AFTER, "named barrier {id} ({threads} threads): the phase never completes (wrong count, or a role that never arrives)");
        // Let the other threads run.
        emu::warp_active_mask();
    }
}
