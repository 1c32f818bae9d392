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
//! - **Cost**: one copy and one comparison of the output per thread that takes a view. So
//!   mirrors are bounded: a launch copies at most [`MIRROR_BUDGET`] bytes into mirrors; past
//!   that, views are the output itself, unchecked, and the executor says so once on standard
//!   error (and counts them: [`unchecked_raw_views`](super::unchecked_raw_views)).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

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
    /// A mirror of the `bytes` bytes at `start`.
    ///
    /// # Safety
    /// `start` is valid for reads of `bytes` bytes.
    pub(crate) unsafe fn new(start: usize, bytes: usize, element_bytes: usize) -> Self {
        // SAFETY: as the caller guarantees. Read once: other blocks, on other workers, may be
        // writing their own elements meanwhile, and a second read could see an element change
        // between the baseline and the mirror (a write this thread never made).
        let baseline: Box<[u8]> = unsafe { core::slice::from_raw_parts(start as *const u8, bytes) }.into();
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

/// How many bytes of a launch's budget are spent.
pub(crate) struct MirrorBudget {
    spent: AtomicUsize,
    warned: AtomicUsize,
}

impl MirrorBudget {
    pub(crate) fn new() -> Self {
        MirrorBudget { spent: AtomicUsize::new(0), warned: AtomicUsize::new(0) }
    }

    /// Takes `bytes` of the budget; false (counted, and said once per launch) past it.
    pub(crate) fn take(&self, kernel: &str, bytes: usize) -> bool {
        let before = self.spent.fetch_add(bytes, Ordering::Relaxed);
        if before.saturating_add(bytes) <= MIRROR_BUDGET {
            return true;
        }
        self.spent.fetch_sub(bytes, Ordering::Relaxed);
        UNCHECKED_VIEWS.fetch_add(1, Ordering::Relaxed);
        if self.warned.swap(1, Ordering::Relaxed) == 0 {
            eprintln!(
                "ferrocuda CPU executor: kernel `{kernel}` took raw views (as_mut_slice/as_mut_ptr) of outputs past the race detector's \
                 budget of {MIRROR_BUDGET} bytes of mirrors; the views past it are not checked for races. Run the kernel on a smaller \
                 problem under the CPU executor to check them, or use the checked accessors."
            );
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mirror_keeps_the_outputs_alignment_and_flushes_only_changed_elements() {
        let mut output = vec![1u32, 2, 3, 4];
        let start = output.as_mut_ptr() as usize;
        // SAFETY: `output` is valid for its 16 bytes.
        let mut mirror = unsafe { Mirror::new(start, 16, 4) };
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
        assert!(budget.take("k", MIRROR_BUDGET - 8));
        assert!(budget.take("k", 8), "exactly the budget fits");
        let before = UNCHECKED_VIEWS.load(Ordering::Relaxed);
        assert!(!budget.take("k", 1));
        assert!(!budget.take("k", 1));
        assert!(UNCHECKED_VIEWS.load(Ordering::Relaxed) >= before + 2, "each unchecked view is counted");
        assert!(MirrorBudget::new().take("k", 1), "the budget is per launch");
    }

    /// Regression: the mirror and its baseline were two reads of the output, so an element
    /// another worker's block wrote between them looked changed by this thread, a false race
    /// (seen on `sgemm_pipelined` with several workers).
    #[test]
    fn a_mirror_made_while_another_thread_writes_the_output_sees_no_write_of_its_own() {
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
                // SAFETY: `output` lives through the scope (reads race with the writer's
                // atomic stores only on the two elements it owns, as other blocks' do).
                let mut mirror = unsafe { Mirror::new(start, 4096 * 4, 4) };
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
