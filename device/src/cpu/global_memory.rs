//! The race detector of kernel outputs in global memory: which GPU thread of the launch took
//! each element of an output parameter, and whether it wrote it.
//!
//! The rule it checks is the output types' contract (`ferrocuda_device::global`): an element
//! of an output belongs to **one thread for the whole launch**. Two threads that both take an
//! element, one of them to write it, break it, whatever barriers lie between: the element is
//! handed out as a `&mut T`, which the compiler may assume nobody else changes, so a value
//! read before a `sync_threads()` is reused after it (audit findings U2 and N1, seen on an
//! H100). Barriers, warp syncs and cluster syncs therefore order nothing here, by design;
//! threads hand data to each other through an `AtomicSlice` (whose accesses are never
//! recorded) or shared memory. The shadow lives for one launch: the next launch starts clean.
//!
//! The shadow state of an element is exact for this rule: nobody, one reader, one writer
//! (which may also have read it), or two or more readers, of which two are kept so that a
//! later writer can name a reader other than itself. So the first access that breaks the
//! rule is reported, with both threads, in any order the threads run in.
//!
//! Each output buffer gets a dense array of claims (one word per element), made when a
//! thread first takes an element of it and found again by the address range it covers (so
//! views of one buffer made at other offsets share it); a claim is updated with one
//! compare-and-swap, since the blocks of a launch run on several worker threads at once. A
//! one-entry cache per worker finds the buffer of consecutive accesses without a lock.

use std::cell::Cell;
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};

use super::error::RaceKind;
use super::raw_views::MirrorBudget;

/// A GPU thread of the launch: its block's linear index times the block's threads plus its
/// rank in the block.
pub(crate) type LaunchThread = u64;

/// Who has taken an element so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Claim {
    /// Read by this thread only.
    Read(LaunchThread),
    /// Written (and maybe read) by this thread only.
    Written(LaunchThread),
    /// Read by two or more threads (two of them), written by none.
    ReadShared(LaunchThread, LaunchThread),
}

/// An access that breaks the rule: its kind, and the other thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Conflict {
    pub(crate) kind: RaceKind,
    pub(crate) other: LaunchThread,
}

impl Claim {
    /// The claim after `thread` reads (`write == false`) or writes the element, or the
    /// conflict that access is.
    fn after(self, thread: LaunchThread, write: bool) -> Result<Claim, Conflict> {
        let conflict = |kind, other| Err(Conflict { kind, other });
        match (self, write) {
            (Claim::Written(owner), _) if owner == thread => Ok(self),
            (Claim::Written(owner), true) => conflict(RaceKind::WriteAfterWrite, owner),
            (Claim::Written(owner), false) => conflict(RaceKind::ReadAfterWrite, owner),
            (Claim::Read(reader), false) if reader == thread => Ok(self),
            (Claim::Read(reader), false) => Ok(Claim::ReadShared(reader, thread)),
            (Claim::Read(reader), true) if reader == thread => Ok(Claim::Written(thread)),
            (Claim::Read(reader), true) => conflict(RaceKind::WriteAfterRead, reader),
            (Claim::ReadShared(..), false) => Ok(self),
            // The two kept readers differ, so one of them is another thread than the writer.
            (Claim::ReadShared(a, b), true) => conflict(RaceKind::WriteAfterRead, if a != thread { a } else { b }),
        }
    }
}

impl Claim {
    const READ: u64 = 1 << 62;
    const WRITTEN: u64 = 2 << 62;
    const SHARED: u64 = 3 << 62;
    /// Threads named in a shared-read claim (31 bits each; a launch of more threads than
    /// that, which would run for hours here, may name a wrong reader in its report).
    const SHORT: u64 = (1 << 31) - 1;

    /// The word a mirror's copy holds in place of an element's claim while it reads the
    /// element (`OutputShadow::copy_for_mirror`); no claim encodes to it.
    const COPYING: u64 = u64::MAX;

    /// The claim as one word (0: nobody; never [`Claim::COPYING`]).
    fn encode(claim: Option<Claim>) -> u64 {
        match claim {
            None => 0,
            Some(Claim::Read(t)) => Self::READ | t,
            Some(Claim::Written(t)) => Self::WRITTEN | t,
            // Both readers' short names all ones would be `COPYING`: name the second one less.
            Some(Claim::ReadShared(a, b)) => {
                let (a, b) = (a & Self::SHORT, b & Self::SHORT);
                Self::SHARED | a | (if a == Self::SHORT && b == Self::SHORT { b - 1 } else { b }) << 31
            }
        }
    }

    fn decode(word: u64) -> Option<Claim> {
        let t = word & !(3 << 62);
        match word & (3 << 62) {
            0 => None,
            Self::READ => Some(Claim::Read(t)),
            Self::WRITTEN => Some(Claim::Written(t)),
            _ => Some(Claim::ReadShared(t & Self::SHORT, t >> 31)),
        }
    }
}

/// The claims on the elements of one output buffer.
struct Buffer {
    start: usize,
    end: usize,
    element_bytes: usize,
    claims: Box<[AtomicU64]>,
}

impl Buffer {
    fn new(start: usize, elements: usize, element_bytes: usize) -> Self {
        // Zeroed memory (mapped lazily for big buffers), seen as atomics: same layout.
        let zeros = vec![0u64; elements].into_boxed_slice();
        // SAFETY: `AtomicU64` has the size, alignment and bit validity of `u64`.
        let claims = unsafe { Box::from_raw(Box::into_raw(zeros) as *mut [AtomicU64]) };
        Buffer { start, end: start + elements * element_bytes, element_bytes, claims }
    }

    /// Element `index` of the view at `base`, if this buffer holds the whole view.
    fn slot(&self, base: usize, elements: usize, element_bytes: usize) -> Option<usize> {
        let fits = element_bytes == self.element_bytes
            && base >= self.start
            && (base - self.start).is_multiple_of(element_bytes)
            && elements.checked_mul(element_bytes).and_then(|b| b.checked_add(base)).is_some_and(|end| end <= self.end);
        fits.then(|| (base - self.start) / element_bytes)
    }
}

/// A number per launch, so that a worker's cache never finds a buffer of an earlier launch.
static LAUNCHES: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The buffer this worker used last: `(launch, buffer)`.
    static LAST: Cell<(u64, *const Buffer)> = const { Cell::new((0, core::ptr::null())) };
}

/// The claims on every output element taken during one launch.
pub(crate) struct OutputShadow {
    launch: u64,
    /// Boxed, never removed before the launch ends: the cache keeps pointers to them, which
    /// must survive the vector's growth.
    #[allow(clippy::vec_box, reason = "the worker caches point at the buffers")]
    buffers: RwLock<Vec<Box<Buffer>>>,
    /// What the launch's raw views may copy into mirrors (`raw_views`).
    pub(crate) mirrors: MirrorBudget,
}

impl OutputShadow {
    pub(crate) fn new() -> Self {
        OutputShadow { launch: LAUNCHES.fetch_add(1, Ordering::Relaxed), buffers: RwLock::new(Vec::new()), mirrors: MirrorBudget::new() }
    }

    /// The buffer that holds the view of `elements` elements at `base`, and the view's first
    /// element in it (registering the view as a new buffer if none holds it).
    fn buffer(&self, base: usize, elements: usize, element_bytes: usize) -> (&Buffer, usize) {
        let (launch, last) = LAST.with(Cell::get);
        if launch == self.launch {
            // SAFETY: a buffer of this launch, which is still running (it owns `self`), and
            // buffers are only dropped with the launch.
            let buffer = unsafe { &*last };
            if let Some(first) = buffer.slot(base, elements, element_bytes) {
                return (buffer, first);
            }
        }
        let find = |buffers: &[Box<Buffer>]| buffers.iter().find_map(|b| b.slot(base, elements, element_bytes).map(|first| (&**b as *const Buffer, first)));
        let found = find(&self.buffers.read().unwrap_or_else(|e| e.into_inner()));
        let (pointer, first) = found.unwrap_or_else(|| {
            let mut buffers = self.buffers.write().unwrap_or_else(|e| e.into_inner());
            find(&buffers).unwrap_or_else(|| {
                buffers.push(Box::new(Buffer::new(base, elements, element_bytes)));
                (&**buffers.last().expect("just pushed") as *const Buffer, 0)
            })
        });
        LAST.with(|l| l.set((self.launch, pointer)));
        // SAFETY: as above: owned by `self`, boxed, never removed while `self` lives.
        (unsafe { &*pointer }, first)
    }

    /// Records that `thread` reads or writes element `index` of the output view of
    /// `elements` elements of `element_bytes` bytes at `base`; returns the conflict if another
    /// thread of the launch has taken it in a way this access breaks. An index past the view
    /// (an out-of-bounds `get_unchecked_mut`, undefined behaviour in itself) is not recorded.
    pub(crate) fn record(&self, base: usize, elements: usize, element_bytes: usize, index: usize, thread: LaunchThread, write: bool) -> Option<Conflict> {
        if index >= elements || element_bytes == 0 {
            return None;
        }
        let (buffer, first) = self.buffer(base, elements, element_bytes);
        let cell = &buffer.claims[first + index];
        let mut word = cell.load(Ordering::Acquire);
        loop {
            if word == Claim::COPYING {
                // A mirror's copy is reading the element (a few nanoseconds): its read must come
                // before whatever this thread does with the element after claiming it.
                core::hint::spin_loop();
                word = cell.load(Ordering::Acquire);
                continue;
            }
            let next = match Claim::decode(word) {
                None if write => Claim::Written(thread),
                None => Claim::Read(thread),
                Some(claim) => match claim.after(thread, write) {
                    Ok(next) => next,
                    Err(conflict) => return Some(conflict),
                },
            };
            let next = Claim::encode(Some(next));
            if next == word {
                return None;
            }
            match cell.compare_exchange_weak(word, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return None,
                Err(current) => word = current,
            }
        }
    }
}

impl OutputShadow {
    /// Copies the output view of `elements` elements of `element_bytes` bytes at `base` into
    /// `into` (its bytes) for thread `me`'s mirror, without racing with any other thread's
    /// access (audit 2026-11-28, G13R-3). Every other thread's plain access of an element
    /// goes through its claim here first (`record`, by the checked accessors and by a mirror's
    /// write-back), so for each element the copy:
    /// - skips it (zeros) when another thread has claimed it for writing: that thread may be
    ///   storing to it at any moment with no further step here, and this thread may not touch
    ///   it (the raw view's contract; a write of it is still caught at the write-back);
    /// - otherwise puts [`Claim::COPYING`] in place of the claim word (compare-and-swap,
    ///   acquire), reads the element, and puts the claim back (release). A thread that claims
    ///   the element later sees the word back first (its compare-and-swap reads it, acquire),
    ///   so its accesses come after the read; one that tries meanwhile waits in `record`.
    ///   Readers need not wait for it (reads do not race), but taking the word keeps the rule
    ///   simple: no element is read while its claim could change.
    ///
    /// What the rule does not cover: a thread that already broke the rule (its access was
    /// reported as a race) may go on storing, and an unchecked view past the mirror budget
    /// records nothing (`MirrorBudget::start_copy` keeps copies and those views apart).
    ///
    /// # Safety
    /// `base` is valid for reads of the view's bytes for the whole launch, and `into` is as
    /// long as the view.
    pub(crate) unsafe fn copy_for_mirror(&self, base: usize, elements: usize, element_bytes: usize, me: LaunchThread, into: &mut [u8]) {
        if elements == 0 || element_bytes == 0 {
            return;
        }
        let (buffer, first) = self.buffer(base, elements, element_bytes);
        for (i, element) in into.chunks_mut(element_bytes).enumerate().take(elements) {
            let cell = &buffer.claims[first + i];
            let mut word = cell.load(Ordering::Acquire);
            loop {
                if word == Claim::COPYING {
                    // Another thread's copy of the same element.
                    core::hint::spin_loop();
                    word = cell.load(Ordering::Acquire);
                    continue;
                }
                if matches!(Claim::decode(word), Some(Claim::Written(owner)) if owner != me) {
                    element.fill(0);
                    break;
                }
                match cell.compare_exchange_weak(word, Claim::COPYING, Ordering::Acquire, Ordering::Acquire) {
                    Ok(_) => {
                        // SAFETY: inside the view (the caller); no other thread writes the
                        // element now: none has it claimed for writing, and a claim has to
                        // wait for the word this copy holds.
                        unsafe { core::ptr::copy_nonoverlapping((base + i * element_bytes) as *const u8, element.as_mut_ptr(), element_bytes) };
                        cell.store(word, Ordering::Release);
                        break;
                    }
                    Err(now) => word = now,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_thread_may_read_and_write_its_element_as_often_as_it_likes() {
        let shadow = OutputShadow::new();
        for write in [false, true, false, true, true] {
            assert_eq!(shadow.record(0x1000, 4, 4, 0, 7, write), None);
        }
    }

    #[test]
    fn readers_share_an_element_until_someone_writes_it() {
        let shadow = OutputShadow::new();
        assert_eq!(shadow.record(0x1000, 4, 4, 0, 1, false), None);
        assert_eq!(shadow.record(0x1000, 4, 4, 0, 2, false), None);
        assert_eq!(shadow.record(0x1000, 4, 4, 0, 3, false), None);
        // The writer is one of the readers: the conflict names another reader.
        assert_eq!(shadow.record(0x1000, 4, 4, 0, 1, true), Some(Conflict { kind: RaceKind::WriteAfterRead, other: 2 }));
        assert_eq!(shadow.record(0x1000, 4, 4, 0, 2, true), Some(Conflict { kind: RaceKind::WriteAfterRead, other: 1 }));
    }

    #[test]
    fn a_written_element_is_its_writers_alone() {
        let shadow = OutputShadow::new();
        assert_eq!(shadow.record(0x2000, 4, 4, 0, 5, true), None);
        assert_eq!(shadow.record(0x2000, 4, 4, 0, 6, false), Some(Conflict { kind: RaceKind::ReadAfterWrite, other: 5 }));
        assert_eq!(shadow.record(0x2000, 4, 4, 0, 6, true), Some(Conflict { kind: RaceKind::WriteAfterWrite, other: 5 }));
        // A read then a write by another thread.
        assert_eq!(shadow.record(0x2000, 4, 4, 1, 5, false), None);
        assert_eq!(shadow.record(0x2000, 4, 4, 1, 6, true), Some(Conflict { kind: RaceKind::WriteAfterRead, other: 5 }));
        // Neighbouring elements are independent.
        assert_eq!(shadow.record(0x2000, 4, 4, 2, 6, true), None);
    }

    #[test]
    fn a_view_inside_a_buffer_meets_the_whole_buffers_claims() {
        let shadow = OutputShadow::new();
        assert_eq!(shadow.record(0x3000, 8, 4, 2, 1, true), None);
        // Elements 2..4 of the buffer as a view of 2 at 0x3008: its element 0 is element 2.
        assert_eq!(shadow.record(0x3008, 2, 4, 0, 2, true), Some(Conflict { kind: RaceKind::WriteAfterWrite, other: 1 }));
        assert_eq!(shadow.record(0x3008, 2, 4, 1, 2, true), None);
        assert_eq!(shadow.record(0x3000, 8, 4, 3, 1, false), Some(Conflict { kind: RaceKind::ReadAfterWrite, other: 2 }));
        // Past the view: not recorded.
        assert_eq!(shadow.record(0x3000, 8, 4, 8, 1, true), None);
    }

    #[test]
    fn claims_round_trip_through_their_word() {
        for claim in [None, Some(Claim::Read(5)), Some(Claim::Written(1 << 40)), Some(Claim::ReadShared(3, (1 << 31) - 2))] {
            assert_eq!(Claim::decode(Claim::encode(claim)), claim);
        }
    }

    /// G13R-3: the mirror's copy reads the elements nobody has claimed, those this thread has
    /// and those others only read; it skips (zeros) those another thread has claimed for
    /// writing, which that thread may be storing to with no further step here.
    #[test]
    fn g13r_3_the_mirror_copy_skips_elements_another_thread_writes() {
        let shadow = OutputShadow::new();
        let output = [11u32, 12, 13, 14, 15];
        let base = output.as_ptr() as usize;
        assert_eq!(shadow.record(base, 5, 4, 1, 7, true), None, "mine, written");
        assert_eq!(shadow.record(base, 5, 4, 2, 8, true), None, "another thread's, written");
        assert_eq!(shadow.record(base, 5, 4, 3, 8, false), None, "another thread's, read");
        let mut into = [0xffu8; 20];
        // SAFETY: `output` is valid for its 20 bytes and nothing writes it.
        unsafe { shadow.copy_for_mirror(base, 5, 4, 7, &mut into) };
        let copied: Vec<u32> = into.chunks(4).map(|c| u32::from_ne_bytes(c.try_into().unwrap())).collect();
        assert_eq!(copied, [11, 12, 0, 14, 15]);
        // The claims are as they were: the copy is not an access.
        assert_eq!(shadow.record(base, 5, 4, 0, 9, true), None, "nobody's before the copy, still nobody's");
        assert_eq!(shadow.record(base, 5, 4, 3, 8, true), None, "the reader may still write its element");
        assert_eq!(shadow.record(base, 5, 4, 2, 7, false), Some(Conflict { kind: RaceKind::ReadAfterWrite, other: 8 }));
    }

    /// G13R-3, the race itself: writers claim their elements and then store to them with plain
    /// stores (as the checked accessors do) while mirrors are copied on another thread. A copy
    /// either skips an element (its writer claimed it first) or reads it before its writer's
    /// claim, so it never sees a written value; the old copy (one plain read of the whole
    /// output) read elements while their writers stored to them, a data race that shows
    /// written (or torn) values, and fails the assertion below.
    #[test]
    fn g13r_3_a_mirror_copy_never_reads_an_element_while_its_writer_stores() {
        const N: usize = 1 << 14;
        for _round in 0..4 {
            let shadow = OutputShadow::new();
            let mut output = vec![0u32; N];
            let base = output.as_mut_ptr() as usize;
            std::thread::scope(|scope| {
                for writer in 0..2u64 {
                    let shadow = &shadow;
                    scope.spawn(move || {
                        // Each writer its own half, claimed then stored, element by element.
                        for i in (writer as usize * N / 2)..((writer as usize + 1) * N / 2) {
                            assert_eq!(shadow.record(base, N, 4, i, 100 + writer, true), None);
                            // SAFETY: element `i` is this writer's (claimed above, no other
                            // writer); the copies read it only before the claim.
                            unsafe { (base as *mut u32).add(i).write(0xdead_0000 | i as u32) };
                        }
                    });
                }
                let mut into = vec![0u8; N * 4];
                for _ in 0..8 {
                    // SAFETY: `output` lives through the scope.
                    unsafe { shadow.copy_for_mirror(base, N, 4, 1, &mut into) };
                    for (i, c) in into.chunks(4).enumerate() {
                        let v = u32::from_ne_bytes(c.try_into().unwrap());
                        assert!(v == 0, "element {i}: the copy read {v:#x}, a value its writer stored after claiming it");
                    }
                }
            });
            assert!(output.iter().enumerate().all(|(i, &v)| v == 0xdead_0000 | i as u32), "every writer's store landed");
        }
    }
}
