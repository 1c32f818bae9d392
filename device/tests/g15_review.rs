//! Held-out review of session 15's device additions (audit/2026-11-28c/FINDINGS.md):
//! `SharedSliceX4` (dynamic shared memory as 16-byte vector regions) and
//! `RuntimeBlockReduce::reduce_broadcast` / `sum_broadcast`, attacked on the CPU executor, which
//! must report what a GPU would hide (races, reads of unwritten shared memory, stale partials).
//!
//! Each test is an attack; it asserts what the executor does with it (an error naming the
//! mistake, a panic at the check, or the right values where the attack is a legal use).
//! Kernel bodies are closures given to `CpuExecutor::run`, the call every generated
//! `name::launch_cpu` makes with the kernel's body.

use std::sync::atomic::{AtomicU32, Ordering};

use ferrocuda_device::block::RuntimeBlockReduce;
use ferrocuda_device::cpu::{CpuError, CpuExecutor, LaunchConfig};
use ferrocuda_device::shared::dynamic_shared;
use ferrocuda_device::shared_vector::dynamic_shared_x4;
use ferrocuda_device::sync::sync_threads;
use ferrocuda_device::thread::{block_size, rank_in_block, thread_idx_x};
use ferrocuda_device::{block_scratch, shared_array};

fn panic_message(result: Result<(), CpuError>) -> String {
    match result {
        Err(CpuError::KernelPanic(p)) => p.message,
        other => panic!("expected a kernel panic, got {other:?}"),
    }
}

fn expect_race(result: Result<(), CpuError>, what: &str) {
    match result {
        Err(CpuError::SharedMemoryRace(_)) => {}
        other => panic!("{what}: expected a SharedMemoryRace, got {other:?}"),
    }
}

// ---- G15 attack 1: SharedSliceX4 -------------------------------------------------------------

/// Two carves of the same dynamic shared memory give two live handles to the same bytes (as
/// two `dynamic_shared()` calls do: the library allows aliasing and relies on the race
/// detector, not on ownership). A 16-byte store through one handle and a 4-byte load of the
/// same memory through the other, by another thread with no barrier, is a reported race in
/// both schedules; with a barrier between them it is legal and reads the stored value.
#[test]
fn g15_1_two_carves_of_one_dynamic_memory_alias_and_an_unordered_access_is_a_race() {
    for barrier in [false, true] {
        for executor in [CpuExecutor::new(), CpuExecutor::deterministic()] {
            let config = LaunchConfig::new(1u32, 64u32).with_shared_bytes(4 * 16);
            let seen = AtomicU32::new(0);
            let result = executor.run("g15_1_alias", config, &|| {
                let ([a, _], _) = dynamic_shared_x4::<u32>().carve::<2>(2);
                let (_, b) = dynamic_shared_x4::<u32>().split_at(0);
                let t = thread_idx_x();
                if t == 0 {
                    a.set(1, [7, 8, 9, 10]);
                }
                if barrier {
                    sync_threads();
                }
                if t == 33 {
                    // Element 7 of the same memory, through the second handle, as scalars.
                    seen.store(b.to_scalars().get(7), Ordering::Relaxed);
                }
            });
            if barrier {
                result.unwrap();
                assert_eq!(seen.load(Ordering::Relaxed), 10);
            } else {
                expect_race(result, "x4 store vs aliased scalar load, no barrier");
            }
        }
    }
}

/// Two threads storing 16 bytes to one vector of a region between the same barriers: a race
/// (write after write), reported whichever runs first.
#[test]
fn g15_1_two_threads_writing_one_vector_is_a_race() {
    for executor in [CpuExecutor::new(), CpuExecutor::deterministic()] {
        let config = LaunchConfig::new(1u32, 64u32).with_shared_bytes(16);
        expect_race(
            executor.run("g15_1_ww", config, &|| {
                let region = dynamic_shared_x4::<f32>();
                if thread_idx_x().is_multiple_of(32) {
                    region.set(0, [thread_idx_x() as f32; 4]);
                }
            }),
            "two 16-byte stores of one vector",
        );
    }
}

/// A 16-byte read of a vector no thread of the block wrote is `UninitialisedSharedRead` (a GPU
/// returns what an earlier kernel left there), also when only part of the vector was written.
#[test]
fn g15_1_an_x4_read_of_unwritten_or_partly_written_memory_is_reported() {
    for partly in [false, true] {
        let config = LaunchConfig::new(1u32, 32u32).with_shared_bytes(32);
        let result = CpuExecutor::new().run("g15_1_uninit", config, &|| {
            let region = dynamic_shared_x4::<u32>();
            if partly && thread_idx_x() == 0 {
                // Elements 4..7 of vector 1: element 7 is left unwritten.
                let scalars = region.to_scalars();
                for k in 4..7 {
                    scalars.set(k, 1);
                }
            }
            sync_threads();
            if thread_idx_x() == 0 {
                let _ = region.get(1);
            }
        });
        match result {
            Err(CpuError::UninitialisedSharedRead(_)) => {}
            other => panic!("partly = {partly}: expected UninitialisedSharedRead, got {other:?}"),
        }
    }
}

/// Edge lengths: `carve::<0>` takes nothing; zero-length regions all start where the rest
/// starts and any index into them panics; no dynamic shared memory gives an empty slice
/// whose carve of one vector panics at the carve; `split_at(len)` is legal, `len + 1` panics;
/// a huge `each` whose `N * each * 16` would wrap `u32` (not `usize`) is refused by the
/// vector count, not wrapped into a small region.
#[test]
fn g15_1_zero_lengths_empty_memory_and_huge_lengths_are_refused_at_the_cut() {
    let executor = CpuExecutor::new();
    executor
        .run("g15_1_zero", LaunchConfig::new(1u32, 1u32).with_shared_bytes(3 * 16), &|| {
            let all = dynamic_shared_x4::<i32>();
            let ([], rest) = all.carve::<0>(5);
            assert_eq!((rest.len(), rest.shared_address()), (3, all.shared_address()));
            let (regions, rest) = all.carve::<4>(0);
            for r in regions {
                assert!(r.is_empty());
                assert_eq!(r.shared_address(), all.shared_address());
            }
            assert_eq!(rest.len(), 3);
            let (whole, empty) = all.split_at(3);
            assert_eq!((whole.len(), empty.len()), (3, 0));
            assert_eq!(empty.shared_address(), all.shared_address() + 48);
        })
        .unwrap();
    let message = panic_message(executor.run("g15_1_zero_index", LaunchConfig::new(1u32, 1u32).with_shared_bytes(3 * 16), &|| {
        let ([r], _) = dynamic_shared_x4::<i32>().carve::<1>(0);
        let _ = r.get(0);
    }));
    assert!(message.contains("out of bounds"), "{message}");
    let message = panic_message(executor.run("g15_1_no_dynamic", LaunchConfig::new(1u32, 1u32), &|| {
        let all = dynamic_shared_x4::<f32>();
        assert!(all.is_empty());
        let _ = all.carve::<1>(1);
    }));
    assert!(message.contains("from 0 vectors"), "{message}");
    let message = panic_message(executor.run("g15_1_split_past", LaunchConfig::new(1u32, 1u32).with_shared_bytes(48), &|| {
        let _ = dynamic_shared_x4::<f32>().split_at(4);
    }));
    assert!(message.contains("split point 4 beyond"), "{message}");
    // 2^28 vectors of 16 bytes are 2^32 bytes: as a u32 offset that would be 0.
    let message = panic_message(executor.run("g15_1_huge", LaunchConfig::new(1u32, 1u32).with_shared_bytes(48), &|| {
        let _ = dynamic_shared_x4::<f32>().carve::<2>(1 << 28);
    }));
    assert!(message.contains("more dynamic shared memory"), "{message}");
}

/// Static `shared_array!`s of sizes that are not multiples of 16 beside the dynamic memory:
/// every region of the carve, and every static array, starts 16-byte aligned, and the
/// `to_x4` check of a `SharedSlice` cut at a non-multiple of 4 panics (the same answer on a
/// GPU, where the dynamic memory follows the static arrays at a 16-byte boundary: the
/// address modulo 16 is the offset's, on both back ends).
#[test]
fn g15_1_regions_beside_odd_sized_static_arrays_stay_aligned() {
    CpuExecutor::new()
        .run("g15_1_static", LaunchConfig::new(1u32, 32u32).with_shared_bytes(5 * 16 + 12), &|| {
            let odd = shared_array![u32; 3];
            let pair = shared_array![f64; 1];
            assert_eq!(odd.shared_address() % 16, 0);
            assert_eq!(pair.shared_address() % 16, 0);
            let ([a, b], rest) = dynamic_shared_x4::<f32>().carve::<2>(2);
            for r in [a, b, rest] {
                assert_eq!(r.shared_address() % 16, 0);
            }
            let t = thread_idx_x() as usize;
            if t < 2 {
                a.set(t, [t as f32; 4]);
                b.set(t, [-(t as f32); 4]);
            }
            if t == 0 {
                odd.set(2, 5);
            }
            sync_threads();
            if t < 2 {
                assert_eq!(a.get(t), [t as f32; 4]);
                assert_eq!(b.get(t), [-(t as f32); 4]);
            }
            assert_eq!(odd.get(2), 5);
        })
        .unwrap();
    let message = panic_message(CpuExecutor::new().run("g15_1_to_x4_misaligned", LaunchConfig::new(1u32, 1u32).with_shared_bytes(64), &|| {
        let (_, tail) = dynamic_shared::<f32>().split_at(2);
        let _ = tail.to_x4();
    }));
    assert!(message.contains("not 16-byte aligned"), "{message}");
}

/// A region handle kept past its launch (in a `static`: the handle is `Send`, it holds no
/// pointer) and used by a later launch's thread resolves against that thread's block, as on a
/// GPU: no access to the first launch's (freed) arena; the read of memory the new block never
/// wrote is reported, not answered with the first launch's values. Outside a GPU thread an
/// access panics by name.
#[test]
fn g15_1_a_region_kept_past_its_launch_is_an_address_not_a_pointer() {
    use ferrocuda_device::shared_vector::SharedSliceX4;
    use std::sync::Mutex;
    static KEPT: Mutex<Option<SharedSliceX4<u32>>> = Mutex::new(None);
    let executor = CpuExecutor::deterministic();
    executor
        .run("g15_1_keep", LaunchConfig::new(1u32, 1u32).with_shared_bytes(16), &|| {
            let region = dynamic_shared_x4::<u32>();
            region.set(0, [1, 2, 3, 4]);
            *KEPT.lock().unwrap() = Some(region);
        })
        .unwrap();
    let kept = KEPT.lock().unwrap().expect("kept by the first launch");
    let result = executor.run("g15_1_reuse", LaunchConfig::new(1u32, 1u32).with_shared_bytes(16), &|| {
        let _ = kept.get(0);
    });
    assert!(matches!(result, Err(CpuError::UninitialisedSharedRead(_))), "expected UninitialisedSharedRead, got {result:?}");
    let outside = std::panic::catch_unwind(|| kept.get(0));
    assert!(outside.is_err(), "a shared access outside a kernel must panic");
}

// ---- G15 attack 2: reduce_broadcast ------------------------------------------------------------

/// Some warps skip a broadcast but meet its two barriers at `sync_threads` calls elsewhere
/// (legal on sm_70+, where barrier 0 is one barrier whatever the call site): on a GPU the
/// skipping warps' slots keep the partials of the previous collective and warp 0 folds them
/// in (a wrong value, silently). The CPU executor reports it.
#[test]
fn g15_2_a_broadcast_skipped_by_warps_that_meet_its_barriers_elsewhere_is_reported() {
    let result = CpuExecutor::new().run("g15_2_skip", LaunchConfig::new(1u32, 128u32), &|| {
        let reduce = RuntimeBlockReduce::new(block_scratch!(u32));
        let _ = reduce.sum_broadcast(1, |t| t);
        if rank_in_block() < 64 {
            let _ = reduce.sum_broadcast(2, |t| t);
        } else {
            sync_threads();
            sync_threads();
        }
    });
    // The executor's partials barrier is a counting one (`bar.red.popc`), which PTX says must
    // not be mixed with `bar.sync` on one barrier: reported as such, naming both sets of threads.
    assert!(matches!(result, Err(CpuError::MixedBarriers(_))), "a broadcast that half the block skips must be reported, got {result:?}");
}

/// `then` calling a block collective (it runs in thread 0 alone): on a GPU a hang (thread 0
/// waits in a shuffle or barrier the others never reach); reported on the CPU executor.
#[test]
fn g15_2_a_collective_nested_in_then_is_reported() {
    for threads in [32u32, 64, 100] {
        let result = CpuExecutor::new().with_watchdog(std::time::Duration::from_secs(20)).run("g15_2_nested", LaunchConfig::new(1u32, threads), &|| {
            let outer = RuntimeBlockReduce::new(block_scratch!(f32));
            let inner = RuntimeBlockReduce::new(block_scratch!(f32));
            let _ = outer.sum_broadcast(1.0f32, |t| inner.sum_broadcast(t, |u| u));
        });
        // Before G15-2b's check: one warp, the others' hand-off shuffle met thread 0's first
        // inner shuffle and they exited (`ExitedLaneShuffle` at thread 0's next one); larger
        // blocks, thread 0 waited in a shuffle while its warp waited at the barrier
        // (`WarpDeadlock`). Now the first collective inside `then` panics, naming it.
        let message = panic_message(result);
        assert!(message.contains("called inside the `then` of `reduce_broadcast`"), "{threads} threads: {message}");
    }
}

/// `then` panicking: the launch ends with the panic, naming its message (a GPU traps).
#[test]
fn g15_2_then_panicking_ends_the_launch_with_its_message() {
    let message = panic_message(CpuExecutor::new().run("g15_2_panic", LaunchConfig::new(1u32, 96u32), &|| {
        let reduce = RuntimeBlockReduce::new(block_scratch!(u32));
        let _ = reduce.sum_broadcast(1u32, |t| -> u32 { panic!("then saw {t}") });
    }));
    assert!(message.contains("then saw 96"), "{message}");
}

/// `then` reading shared memory every thread wrote before the call, and writing shared memory
/// every thread reads after it: both ordered by the broadcast's two barriers (no race, the
/// right values), at block sizes with one warp, whole warps and a partial last warp.
#[test]
fn g15_2_then_reading_and_writing_shared_state_is_ordered_by_the_two_barriers() {
    for threads in [32u32, 64, 96, 100, 1024] {
        let wrong = AtomicU32::new(0);
        let result = CpuExecutor::new().run("g15_2_state", LaunchConfig::new(2u32, threads), &|| {
            let before = shared_array![u32; 1024];
            let after = shared_array![u32; 1];
            let reduce = RuntimeBlockReduce::new(block_scratch!(u32));
            let r = rank_in_block();
            before.set(r as usize, r);
            let n = block_size();
            let got = reduce.sum_broadcast(1, |total| {
                // Thread 0 reads every thread's write: ordered by the partials' barrier (one
                // warp: by the warp's shuffles, which do not order shared memory; see below).
                let last = if n > 32 { before.get(n as usize - 1) } else { n - 1 };
                after.set(0, total + last);
                total
            });
            if n > 32 {
                if after.get(0) != 2 * n - 1 {
                    wrong.fetch_add(1, Ordering::Relaxed);
                }
            } else if got != n {
                wrong.fetch_add(1, Ordering::Relaxed);
            }
        });
        if let Err(error) = result {
            panic!("{threads} threads: {error}");
        }
        assert_eq!(wrong.load(Ordering::Relaxed), 0, "{threads} threads");
    }
}

/// G15-2: in a block of one warp the hand-off was a shuffle, which orders no shared memory:
/// `then` reading what other lanes wrote before the call was a race there, which the executor
/// reported. Since session 18 a block of one warp passes the partials' barrier too (one path for
/// every block size), which orders those writes before `then`: no race, and `then` sees them
/// (whole and partial warp).
#[test]
fn g15_2_in_one_warp_then_reading_other_lanes_shared_writes_is_ordered_by_the_partials_barrier() {
    for threads in [32u32, 20] {
        let seen = AtomicU32::new(0);
        CpuExecutor::new()
            .run("g15_2_one_warp", LaunchConfig::new(1u32, threads), &|| {
                let before = shared_array![u32; 32];
                let reduce = RuntimeBlockReduce::new(block_scratch!(u32));
                before.set(rank_in_block() as usize, 1 + rank_in_block());
                let got = reduce.sum_broadcast(1, |total| total + before.get(threads as usize - 1));
                if got == threads + threads {
                    seen.fetch_add(1, Ordering::Relaxed);
                }
            })
            .unwrap_or_else(|e| panic!("{threads} threads: {e}"));
        assert_eq!(seen.load(Ordering::Relaxed), threads, "{threads} threads: every thread gets thread 0's `then`, which saw the last lane's write");
    }
}

/// Back-to-back broadcasts of one type from different reducers and element types, a
/// `max_then_sum_all` (no trailing barrier either) between them, and a `reduce_all` after:
/// every value right, no race, at whole-warp and partial-warp sizes.
#[test]
fn g15_2_broadcasts_interleaved_with_other_unbarriered_collectives_stay_ordered() {
    for threads in [64u32, 160, 200, 1024] {
        let wrong = AtomicU32::new(0);
        let result = CpuExecutor::new().run("g15_2_mix", LaunchConfig::new(1u32, threads), &|| {
            let floats = RuntimeBlockReduce::new(block_scratch!(f32));
            let doubles = RuntimeBlockReduce::new(block_scratch!(f64));
            let n = block_size() as f32;
            for round in 0..2 {
                let a = floats.sum_broadcast(1.0f32, |t| t + round as f32);
                let b = doubles.sum_broadcast(1.0f64, |t| t as f32 * 2.0);
                let (m, s) = floats.max_then_sum_all(rank_in_block() as f32, |m| m - rank_in_block() as f32);
                let c = floats.reduce_broadcast(rank_in_block() as f32, f32::max, |t| t + 1.0);
                let d = floats.reduce_all(1.0f32, |x, y| x + y);
                let want_s: f32 = (0..block_size()).map(|r| (n - 1.0) - r as f32).sum();
                if a != n + round as f32 || b != 2.0 * n || m != n - 1.0 || (s - want_s).abs() > 1e-3 * want_s.max(1.0) || c != n || d != n {
                    wrong.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        if let Err(error) = result {
            panic!("{threads} threads: {error}");
        }
        assert_eq!(wrong.load(Ordering::Relaxed), 0, "{threads} threads");
    }
}

/// Thread 0 (the one that runs `then`) returned before the broadcast: in a block of one warp
/// the hand-off shuffle reads an exited lane, in a larger block the partials' barrier counts
/// a missing thread; both are reported (a GPU hands out a stale slot or an undefined value).
#[test]
fn g15_2_thread_0_returning_before_a_broadcast_is_reported() {
    for threads in [32u32, 20, 64, 100] {
        let result = CpuExecutor::new().run("g15_2_no_thread_0", LaunchConfig::new(1u32, threads), &|| {
            let reduce = RuntimeBlockReduce::new(block_scratch!(u32));
            let _ = reduce.sum_broadcast(1, |t| t);
            if rank_in_block() == 0 {
                return;
            }
            let _ = reduce.sum_broadcast(1, |t| t);
        });
        match result {
            // Whole warps fold by butterfly (lane 16 reads lane 0); the hand-off shuffle reads it.
            Err(CpuError::ExitedLaneShuffle(_)) if threads <= 64 => {}
            // A partial last warp folds downward (lane 0 only reads): the barrier's count says it.
            Err(CpuError::KernelPanic(p)) if p.message.contains("did not reach this block collective") => {}
            other => panic!("{threads} threads: thread 0 missing from a broadcast must be reported, got {other:?}"),
        }
    }
}

/// G15-2b: a warp collective inside `then` in a block of one warp. `then` runs in lane 0 while
/// lanes 1..31 wait in the hand-off shuffle; lane 0's shuffle meets theirs (sm_70+ matches
/// warp collectives by kind and mask, not call site), so lanes 1..31 return lane 0's shuffle
/// operand and lane 0 returns the default: different values, no report, on a GPU and (before
/// the fix) on the CPU executor (thread 0 got 0, the others 132). Now a panic naming `then`.
#[test]
fn g15_2b_a_warp_shuffle_inside_then_is_reported() {
    for threads in [32u32, 20, 64] {
        let message = panic_message(CpuExecutor::new().run("g15_2b_shuffle", LaunchConfig::new(1u32, threads), &|| {
            let reduce = RuntimeBlockReduce::new(block_scratch!(u32));
            let _ = reduce.sum_broadcast(1u32, |t| ferrocuda_device::warp::shuffle(t + 100, 5));
        }));
        assert!(message.contains("`shuffle` called inside the `then` of `reduce_broadcast`"), "{threads} threads: {message}");
    }
    // Outside `then` the same shuffle is legal, and a `then` that panics leaves no trace on the
    // worker: a later launch on the same executor calls collectives freely.
    let executor = CpuExecutor::deterministic();
    let _ = executor.run("g15_2b_panics", LaunchConfig::new(1u32, 32u32), &|| {
        let reduce = RuntimeBlockReduce::new(block_scratch!(u32));
        let _ = reduce.sum_broadcast(1u32, |_| -> u32 { panic!("inside then") });
    });
    executor
        .run("g15_2b_after", LaunchConfig::new(1u32, 32u32), &|| {
            let reduce = RuntimeBlockReduce::new(block_scratch!(u32));
            let s = reduce.sum_broadcast(1u32, |t| t);
            assert_eq!(ferrocuda_device::warp::shuffle(s + rank_in_block(), 5), 37);
        })
        .unwrap();
}

/// G15-2c: warps that skip a collective and wait at `sync_threads_count` instead. On a GPU the
/// collective's partials barrier is `sync_threads` (barrier 0) and `sync_threads_count` is
/// barrier 1: the two halves never meet, a hang. The CPU executor's partials barrier was a
/// `sync_threads_count` (to count returned threads, G13R-2), so there they met, every thread
/// "arrived", and warp 0 folded the skipping warps' stale partials of the previous call: the
/// 64 threads that called it got 128, silently, where the GPU hangs. Now the partials barrier is a
/// kind of its own: `MixedBarriers`, naming it.
#[test]
fn g15_2c_a_collective_skipped_by_warps_waiting_at_sync_threads_count_is_reported() {
    use ferrocuda_device::sync::sync_threads_count;
    let sums = std::sync::Mutex::new(Vec::new());
    let result = CpuExecutor::deterministic().run("g15_2c", LaunchConfig::new(1u32, 128u32), &|| {
        let reduce = RuntimeBlockReduce::new(block_scratch!(u32));
        let _ = reduce.sum_broadcast(1, |t| t);
        if rank_in_block() < 64 {
            let got = reduce.sum_broadcast(1, |t| t);
            sums.lock().unwrap().push(got);
        } else {
            let _ = sync_threads_count(true);
            sync_threads();
        }
    });
    match result {
        Err(CpuError::MixedBarriers(mixed)) => {
            let names = format!("{} / {}", mixed.first_kind, mixed.second_kind);
            assert!(names.contains("partials barrier") && names.contains("sync_threads_count"), "{names}");
        }
        other => panic!("expected MixedBarriers (a GPU hangs), got {other:?} with sums {:?}", sums.lock().unwrap()),
    }
}

/// G15-2d: warps at two *different* block collectives meet at the partials barrier (the same
/// `sync_threads` on a GPU, the same kind on the executor before the fix), and each collective
/// folds the other half's stale partials of its own previous call: a wrong value (the 64
/// callers of each got 128), silently, on a GPU and on the CPU executor (every thread arrived,
/// every slot was written earlier and is ordered by barriers). Now the executor's partials
/// barrier is keyed by the scratch's address: `MixedBarriers`.
#[test]
fn g15_2d_two_different_collectives_meeting_at_the_partials_barrier_are_reported() {
    let sums = std::sync::Mutex::new(Vec::new());
    let result = CpuExecutor::deterministic().run("g15_2d", LaunchConfig::new(1u32, 128u32), &|| {
        let a = RuntimeBlockReduce::new(block_scratch!(u32));
        let b = RuntimeBlockReduce::new(block_scratch!(u32));
        let _ = a.sum_broadcast(1, |t| t);
        let _ = b.sum_all(1);
        let got = if rank_in_block() < 64 { a.sum_broadcast(1, |t| t) } else { b.sum_all(1) };
        sums.lock().unwrap().push(got);
    });
    match result {
        Err(CpuError::MixedBarriers(mixed)) => assert!(mixed.first_kind.contains("same scratch"), "{}", mixed.first_kind),
        other => panic!("two collectives met at one barrier: expected MixedBarriers, got {other:?} with sums {:?}", sums.lock().unwrap()),
    }
}
