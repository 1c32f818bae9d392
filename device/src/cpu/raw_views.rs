//! What the race detector sees of the `unsafe` escape hatches of the output types
//! (`as_mut_slice`, `as_mut_ptr`): a GPU thread that takes a raw view of an output gets a
//! **private mirror** of it, and the elements it changed there are recorded as its writes.
//!
//! A raw slice or pointer cannot be instrumented: the kernel reads and writes it with plain
//! loads and stores. So, under the CPU executor with race detection, the view handed out is
//! not the output itself but a copy of it that only this GPU thread sees (the mirror), made
//! when the thread first takes a view of that output, aligned like the output modulo 128
//! bytes. From then on every access of that output by the thread, checked or raw, goes to its
//! mirror (the checked accessors ask the executor which memory to use), so the thread sees its
//! own writes in program order. When the thread returns, each element whose bytes differ from
//! the copy made at the start is recorded as a write by that thread in the launch's claims
//! (the same shadow the checked accessors use) and copied to the output.
//!
//! Precision, argued:
//! - **No false positives**: an element is recorded only if this thread changed it, and the
//!   contract of the escape hatches is exactly that such an element is this thread's alone.
//!   Taking a view of the whole output is not an access (the elements belonging to other
//!   threads are untouched, so never recorded).
//! - **Writes are seen** by value: two threads changing one element through raw views, or one
//!   through a raw view and another through any checked accessor (read or write), is a
//!   [`GlobalMemoryRace`](super::GlobalMemoryRace), whichever order they run in, since both
//!   claims meet in the shadow. A write that stores the value already there is not seen (it
//!   changes nothing this launch could observe, except as a race with a writer, which the
//!   other writer's own claim still reports if it is recorded).
//! - **Reads through a raw view are not seen** (no instruction of a plain load can be
//!   recorded); a thread reading through a raw view an element another thread writes reads
//!   the value from before its view was taken. Read other threads' results through an
//!   `AtomicSlice`, as the contract says.
//! - **The copy races with nobody** (audit 2026-11-28, G13R-3). Other blocks, on other
//!   workers, write their own elements while a mirror is made, so a plain copy of the whole
//!   output was a data race of the executor itself (reached from the safe `as_mut_ptr`). The
//!   copy now reads an element only when no other thread can be writing it:
//!   - for the plain partitions, element by element under the race detector's claim of the
//!     element (`OutputShadow::copy_for_mirror`): the copy holds the claim word for the one
//!     read (a checked access that wants to claim the element meanwhile waits the few
//!     nanoseconds), so a thread that claims the element after it writes after the read; an
//!     element another thread has already claimed for writing is not read at all (this thread
//!     may not touch it: its mirror holds zeros there, and the baseline the same zeros);
//!   - for the outputs whose elements every thread accesses atomically (`AtomicSlice`, a
//!     `Handoff` and its last block's output), with relaxed atomic loads of the same words
//!     ([`copy_atomic_words`]);
//!   - views past the budget (below) are the output itself and their accesses are recorded
//!     nowhere, so the first of them closes the budget and waits for the copies in flight
//!     ([`MirrorBudget::start_copy`]): no copy runs beside an unchecked view.
//! - **Cost**: one copy and one comparison of the output per thread that takes a view (two
//!   atomic operations on the claims per element for the plain partitions). So mirrors are
//!   bounded: a launch copies at most [`MIRROR_BUDGET`] bytes into mirrors; past that, views
//!   are the output itself, unchecked, and the executor says so once on standard error (and
//!   counts them: [`unchecked_raw_views`](super::unchecked_raw_views)).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// Bytes a launch may copy into mirrors (256 MiB) before raw views go unchecked.
pub const MIRROR_BUDGET: usize = 256 << 20;

/// Alignment kept between an output and its mirror: the address modulo this is the same.
const MIRROR_ALIGN: usize = 128;

/// Raw views handed out unchecked (past [`MIRROR_BUDGET`]) since the process started.
pub(crate) static UNCHECKED_VIEWS: AtomicU64 = AtomicU64::new(0);

/// One GPU thread's mirror of one output.
pub(crate) struct Mirror {
    /// The output's first byte and its length in bytes.
    pub(crate) start: usize,
    pub(crate) bytes: usize,
    pub(crate) element_bytes: usize,
    /// The copy the thread uses, with `MIRROR_ALIGN` bytes of slack to match the alignment.
    storage: Box<[u8]>,
    offset: usize,
    /// The output's bytes when the mirror was made.
    baseline: Box<[u8]>,
}

impl Mirror {
    /// A mirror of the `bytes` bytes at `start`, whose first contents `copy` writes into the
    /// slice it is given (the output's bytes as this thread may see them: see
    /// [`copy_atomic_words`] and `OutputShadow::copy_for_mirror`). The output is read once, by
    /// `copy`: other blocks, on other workers, may be writing their own elements meanwhile,
    /// and a second read could see an element change between the baseline and the mirror (a
    /// write this thread never made).
    pub(crate) fn new(start: usize, bytes: usize, element_bytes: usize, copy: impl FnOnce(&mut [u8])) -> Self {
        let mut baseline = vec![0u8; bytes].into_boxed_slice();
        copy(&mut baseline);
        let mut storage = vec![0u8; bytes + MIRROR_ALIGN].into_boxed_slice();
        let here = storage.as_ptr() as usize;
        let offset = (start % MIRROR_ALIGN + MIRROR_ALIGN - here % MIRROR_ALIGN) % MIRROR_ALIGN;
        storage[offset..offset + bytes].copy_from_slice(&baseline);
        Mirror { start, bytes, element_bytes, storage, offset, baseline }
    }

    /// The mirror's address of the output's byte at `address`, if the mirror covers
    /// `address..address + bytes`.
    pub(crate) fn translate(&mut self, address: usize, bytes: usize) -> Option<usize> {
        let inside = address >= self.start && address.checked_add(bytes).is_some_and(|end| end <= self.start + self.bytes);
        inside.then(|| self.storage.as_mut_ptr().expose_provenance() + self.offset + (address - self.start))
    }

    /// The elements this thread changed: each index is passed to `record` (which returns
    /// false to stop at a race), then copied to the output.
    ///
    /// # Safety
    /// The output is still valid for writes, and no other OS thread accesses the changed
    /// elements (the contract of the raw view).
    pub(crate) unsafe fn flush(&mut self, mut record: impl FnMut(usize) -> bool) {
        let eb = self.element_bytes.max(1);
        let mirror = &self.storage[self.offset..self.offset + self.bytes];
        for (i, (now, before)) in mirror.chunks(eb).zip(self.baseline.chunks_mut(eb)).enumerate() {
            if now != before {
                if !record(i) {
                    return;
                }
                // SAFETY: in bounds of the output; the element is this thread's (its claim
                // was just recorded without a conflict).
                unsafe { core::ptr::copy_nonoverlapping(now.as_ptr(), (self.start + i * eb) as *mut u8, now.len()) };
                before.copy_from_slice(now);
            }
        }
    }
}

/// Copies the `into.len()` bytes at `start` with relaxed atomic loads of `word` bytes (2, 4
/// or 8; `start` and the length multiples of it): how a mirror reads an output whose elements
/// other threads access only atomically, in words of that size (`AtomicSlice`, a
/// `Handoff`), so that the copy never races with them (audit 2026-11-28, G13R-3: a plain
/// read racing an atomic write is a data race too).
///
/// # Safety
/// `start` is valid for reads of `into.len()` bytes, aligned to `word`, and every concurrent
/// write of those bytes is an atomic access of `word`-byte words at `word`-aligned addresses.
pub(crate) unsafe fn copy_atomic_words(start: usize, word: usize, into: &mut [u8]) {
    use core::sync::atomic::{AtomicU16, AtomicU32, AtomicU64};
    for (i, chunk) in into.chunks_mut(word).enumerate() {
        let at = start + i * word;
        // SAFETY: inside the output, aligned to `word`; every other access is atomic of this
        // size (the caller).
        match word {
            2 => chunk.copy_from_slice(&unsafe { AtomicU16::from_ptr(at as *mut u16) }.load(Ordering::Relaxed).to_ne_bytes()),
            4 => chunk.copy_from_slice(&unsafe { AtomicU32::from_ptr(at as *mut u32) }.load(Ordering::Relaxed).to_ne_bytes()),
            8 => chunk.copy_from_slice(&unsafe { AtomicU64::from_ptr(at as *mut u64) }.load(Ordering::Relaxed).to_ne_bytes()),
            _ => unreachable!("atomic words are 2, 4 or 8 bytes"),
        }
    }
}

/// How many bytes of a launch's budget are spent, and the mirror copies in flight.
pub(crate) struct MirrorBudget {
    spent: AtomicUsize,
    warned: AtomicUsize,
    /// Mirror copies reading outputs now.
    copying: AtomicUsize,
    /// Set by the first view past the budget: from then on no copy starts (G13R-3).
    closed: AtomicBool,
}

/// A mirror copy in flight (see [`MirrorBudget::start_copy`]); ends when dropped.
pub(crate) struct CopyTicket<'b>(&'b MirrorBudget);

impl Drop for CopyTicket<'_> {
    fn drop(&mut self) {
        self.0.copying.fetch_sub(1, Ordering::SeqCst);
    }
}

impl MirrorBudget {
    pub(crate) fn new() -> Self {
        MirrorBudget { spent: AtomicUsize::new(0), warned: AtomicUsize::new(0), copying: AtomicUsize::new(0), closed: AtomicBool::new(false) }
    }

    /// Starts a mirror's copy of `bytes` bytes of an output: `Some` while the budget allows
    /// (the copy may read the output until the ticket drops), `None` past it: the view is
    /// then the output itself, unchecked (counted, and said once per launch).
    ///
    /// An unchecked view's plain accesses are recorded nowhere, so a copy reading the output
    /// at the same time would race with them (G13R-3). The first view past the budget
    /// therefore closes the budget (no copy starts after it) and waits for the copies in
    /// flight before it is handed out: in the single order of these sequentially consistent
    /// operations, a copy either is counted before the close (and waited for) or sees it.
    pub(crate) fn start_copy(&self, kernel: &str, bytes: usize) -> Option<CopyTicket<'_>> {
        self.copying.fetch_add(1, Ordering::SeqCst);
        let ticket = CopyTicket(self);
        if !self.closed.load(Ordering::SeqCst) && self.take(bytes) {
            return Some(ticket);
        }
        drop(ticket);
        self.closed.store(true, Ordering::SeqCst);
        while self.copying.load(Ordering::SeqCst) > 0 {
            std::thread::yield_now();
        }
        self.unchecked(kernel);
        None
    }

    /// Takes `bytes` of the budget; false past it (nothing taken).
    fn take(&self, bytes: usize) -> bool {
        let before = self.spent.fetch_add(bytes, Ordering::Relaxed);
        if before.saturating_add(bytes) <= MIRROR_BUDGET {
            return true;
        }
        self.spent.fetch_sub(bytes, Ordering::Relaxed);
        false
    }

    /// Counts a view handed out unchecked, and says so once per launch.
    fn unchecked(&self, kernel: &str) {
        UNCHECKED_VIEWS.fetch_add(1, Ordering::Relaxed);
        if self.warned.swap(1, Ordering::Relaxed) == 0 {
            eprintln!(
                "ferrocuda CPU executor: kernel `{kernel}` took raw views (as_mut_slice/as_mut_ptr) of outputs past the race detector's \
                 budget of {MIRROR_BUDGET} bytes of mirrors; the views past it (and every view after the first of them) are not checked \
                 for races. Run the kernel on a smaller problem under the CPU executor to check them, or use the checked accessors."
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole output, copied with plain reads (for the tests: nothing writes it meanwhile).
    fn plain(start: usize) -> impl FnOnce(&mut [u8]) {
        // SAFETY: (tests) `start` is valid for the bytes copied, and nothing writes them.
        move |into| into.copy_from_slice(unsafe { core::slice::from_raw_parts(start as *const u8, into.len()) })
    }

    #[test]
    fn a_mirror_keeps_the_outputs_alignment_and_flushes_only_changed_elements() {
        let mut output = vec![1u32, 2, 3, 4];
        let start = output.as_mut_ptr() as usize;
        let mut mirror = Mirror::new(start, 16, 4, plain(start));
        let at = mirror.translate(start + 8, 4).expect("inside");
        assert_eq!(at % MIRROR_ALIGN, (start + 8) % MIRROR_ALIGN);
        assert_eq!(mirror.translate(start + 16, 4), None);
        // SAFETY: inside the mirror, aligned like the output.
        unsafe { *(at as *mut u32) = 30 };
        assert_eq!(output[2], 3, "the output is untouched until the flush");
        let mut seen = Vec::new();
        // SAFETY: `output` is alive and only used here.
        unsafe {
            mirror.flush(|i| {
                seen.push(i);
                true
            })
        };
        assert_eq!((seen, output), (vec![2], vec![1, 2, 30, 4]));
    }

    #[test]
    fn past_the_budget_views_go_unchecked_and_are_counted() {
        let budget = MirrorBudget::new();
        let first = budget.start_copy("k", MIRROR_BUDGET - 8);
        assert!(first.is_some());
        drop(first);
        assert!(budget.start_copy("k", 8).is_some(), "exactly the budget fits");
        let before = UNCHECKED_VIEWS.load(Ordering::Relaxed);
        assert!(budget.start_copy("k", 1).is_none());
        assert!(budget.start_copy("k", 1).is_none());
        assert!(UNCHECKED_VIEWS.load(Ordering::Relaxed) >= before + 2, "each unchecked view is counted");
        assert!(MirrorBudget::new().start_copy("k", 1).is_some(), "the budget is per launch");
    }

    /// G13R-3: the first view past the budget closes it: no copy starts after it (even one
    /// that would fit), and it is handed out only once the copies in flight have ended, so no
    /// copy reads the output beside an unchecked view's plain accesses.
    #[test]
    fn g13r_3_an_unchecked_view_waits_for_the_copies_in_flight_and_stops_new_ones() {
        use std::sync::atomic::AtomicBool;
        let budget = MirrorBudget::new();
        let in_flight = budget.start_copy("k", MIRROR_BUDGET - 4).expect("fits");
        let handed_out = AtomicBool::new(false);
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| {
                let view = budget.start_copy("k", 64);
                handed_out.store(true, Ordering::SeqCst);
                view.is_none()
            });
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert!(!handed_out.load(Ordering::SeqCst), "an unchecked view was handed out while a copy was in flight");
            drop(in_flight);
            assert!(waiter.join().unwrap(), "past the budget: unchecked");
        });
        assert!(budget.start_copy("k", 1).is_none(), "closed: no copy starts after an unchecked view, even one that fits");
    }

    /// G13R-3: a mirror of an output whose elements other threads change atomically copies it
    /// with atomic loads of the same words, while a writer keeps storing; nothing is seen as
    /// changed by this thread (it was the regression of a double read, with plain reads then).
    #[test]
    fn g13r_3_a_mirror_of_an_atomic_output_copies_with_atomic_loads_beside_a_writer() {
        use std::sync::atomic::{AtomicBool, AtomicU32};
        let output: Vec<AtomicU32> = (0..4096).map(AtomicU32::new).collect();
        let start = output.as_ptr() as usize;
        let stop = AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let mut value = 0;
                while !stop.load(Ordering::Relaxed) {
                    value += 1;
                    output[0].store(value, Ordering::Relaxed);
                    output[4095].store(value, Ordering::Relaxed);
                }
            });
            let mut changed = 0;
            for _ in 0..2000 {
                // SAFETY: `output` lives through the scope, 4-byte aligned; the writer's
                // accesses are atomic 4-byte stores.
                let mut mirror = Mirror::new(start, 4096 * 4, 4, |into| unsafe { copy_atomic_words(start, 4, into) });
                // Nothing written: nothing is flushed (no write-back to the writer's elements).
                // SAFETY: as above; nothing is written back (`record` refuses).
                unsafe {
                    mirror.flush(|_| {
                        changed += 1;
                        false
                    })
                };
            }
            // Stop the writer before asserting, so a failure ends the scope.
            stop.store(true, Ordering::Relaxed);
            assert_eq!(changed, 0, "the mirror saw writes it did not make");
        });
    }
}
