//! A block's shared memory on the CPU: an arena of bytes addressed by 32-bit offsets (the
//! "shared-window addresses" the device library passes around), poisoned at every block start,
//! with an optional shadow word per 4 bytes for data-race detection.
//!
//! Layout: the dynamic shared memory first (offset 0, 16-byte aligned), then each
//! `shared_array!` site in the order the first block reaches them. One arena serves every block
//! a worker runs (sites keep their offsets); it is re-poisoned, not reallocated, per block.
//! The blocks of a thread-block cluster have one arena each, sharing one layout, so that an
//! array's address means the same array in every block of the cluster.

use std::cell::{Cell, RefCell, UnsafeCell};
use std::rc::Rc;

use super::error::RaceKind;
use super::hooks::{SharedFault, SharedWindow};

/// The byte every block's shared memory starts filled with: reading before writing gives
/// `0xffff_ffff` for integers and NaN for floats, which tests can see.
pub const SHARED_POISON_BYTE: u8 = 0xff;

/// CUDA's limit on static shared memory per block (`__shared__` arrays): 48 KiB.
pub const STATIC_SHARED_LIMIT: usize = 48 * 1024;

#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct Chunk([u8; 16]);

/// What the race detector keeps of one 4-byte word: its last write, and the reads since then
/// in the current barrier epoch (one, or a set of them: audit N8 found that keeping only the
/// last reader misses a broadcast-then-update race).
#[derive(Clone, Copy, Default)]
struct Shadow {
    writer: Access,
    /// The one read since the last write (when `readers` holds no set of this epoch).
    reader: Access,
    /// 0, or 1 + the index of this word's set of readers in `SharedMemory::reader_sets`
    /// (which holds readers of one epoch: valid while its epoch is the current one).
    readers: u32,
}

/// One access: who, in which barrier epoch, at which of its own warp-sync clock ticks.
#[derive(Clone, Copy, Default)]
struct Access {
    /// Rank + 1 (0: none).
    thread: u32,
    epoch: u32,
    /// The thread's own component of its warp clock when it accessed.
    clock: u32,
}

/// The reads of one word in one epoch by two or more threads that do not order each other.
#[derive(Default)]
struct ReaderSet {
    epoch: u32,
    /// `(rank + 1, clock)` of each read (a thread's repeated reads in one run are one entry).
    reads: Vec<(u32, u32)>,
}

/// What the race check needs to know about the accessing thread.
pub(crate) struct RaceCheck<'a> {
    pub(crate) rank: u32,
    /// The thread's warp clock: entry `l` is the last tick of lane `l` of its warp that is
    /// ordered before this thread's next access by completed `sync_warp`s (its own entry is
    /// its own clock).
    pub(crate) clock: &'a [Cell<u32>],
}

impl RaceCheck<'_> {
    fn now(&self, epoch: u32) -> Access {
        Access { thread: self.rank + 1, epoch, clock: self.clock[(self.rank % ferrocuda_types::WARP_SIZE) as usize].get() }
    }

    /// Whether the earlier access `before` (by thread `rank + 1`, with its clock tick) is
    /// ordered before this thread's access in `epoch`: it is none, from an earlier epoch
    /// (a barrier lies between), by this thread, or by a lane of this warp that a completed
    /// `sync_warp` with this thread ordered after it.
    fn ordered_after(&self, before_thread: u32, before_epoch: u32, before_clock: u32, epoch: u32) -> bool {
        let warp = ferrocuda_types::WARP_SIZE;
        before_thread == 0
            || before_epoch != epoch
            || before_thread == self.rank + 1
            || ((before_thread - 1) / warp == self.rank / warp && before_clock <= self.clock[((before_thread - 1) % warp) as usize].get())
    }
}

/// A detected race: two accesses to `address` by different threads with no barrier between.
pub(crate) struct Race {
    pub(crate) address: u32,
    pub(crate) kind: RaceKind,
    pub(crate) first: u32,
    pub(crate) second: u32,
}

/// Where each array lives: shared by the arenas of one worker's cluster.
struct Layout {
    dynamic_bytes: u32,
    /// End of the memory handed out so far (dynamic + static sites).
    end: Cell<u32>,
    /// `(site, address)` of each `shared_array!` site reached.
    sites: RefCell<Vec<(u64, u32)>>,
}

pub(crate) struct SharedMemory {
    arena: UnsafeCell<Box<[Chunk]>>,
    layout: Rc<Layout>,
    shadow: Option<Box<[Cell<Shadow>]>>,
    /// The sets of readers of words read by several unordered threads in one epoch.
    reader_sets: RefCell<Vec<ReaderSet>>,
    /// Barrier epoch: advanced at every barrier and every block start, so that shadow entries
    /// of earlier epochs (or blocks) never match.
    epoch: Cell<u32>,
}

impl SharedMemory {
    /// `count` arenas with one layout (one per block of a cluster), each with room for
    /// `dynamic_bytes` plus CUDA's static limit; `race_detection` adds the shadow words.
    pub(crate) fn group(count: usize, dynamic_bytes: u32, race_detection: bool) -> Vec<Self> {
        let dynamic = (dynamic_bytes as usize).next_multiple_of(16);
        let bytes = dynamic + STATIC_SHARED_LIMIT;
        let layout = Rc::new(Layout { dynamic_bytes, end: Cell::new(dynamic as u32), sites: RefCell::new(Vec::new()) });
        (0..count)
            .map(|_| SharedMemory {
                arena: UnsafeCell::new(vec![Chunk([SHARED_POISON_BYTE; 16]); bytes / 16].into_boxed_slice()),
                layout: layout.clone(),
                shadow: race_detection.then(|| (0..bytes / 4).map(|_| Cell::new(Shadow::default())).collect()),
                reader_sets: RefCell::new(Vec::new()),
                epoch: Cell::new(0),
            })
            .collect()
    }

    /// Prepares the arena for a new block: poisoned, and a fresh epoch.
    pub(crate) fn begin_block(&self) {
        let end = self.layout.end.get() as usize;
        // SAFETY: no GPU thread of any block runs now (blocks start between runs), so nothing
        // else accesses the arena.
        let arena = unsafe { &mut *self.arena.get() };
        for chunk in &mut arena[..end.div_ceil(16)] {
            *chunk = Chunk([SHARED_POISON_BYTE; 16]);
        }
        self.next_epoch();
    }

    /// A barrier opened: accesses after it are ordered after those before it.
    pub(crate) fn next_epoch(&self) {
        self.epoch.set(self.epoch.get().wrapping_add(1));
    }

    pub(crate) fn dynamic_bytes(&self) -> u32 {
        self.layout.dynamic_bytes
    }

    /// The address of the `shared_array!` at `site`, handed out on first use.
    pub(crate) fn static_array(&self, site: u64, bytes: usize, align: usize) -> Result<u32, SharedFault> {
        let layout = &self.layout;
        let mut sites = layout.sites.borrow_mut();
        if let Some(&(_, address)) = sites.iter().find(|(s, _)| *s == site) {
            return Ok(address);
        }
        let start = (layout.end.get() as usize).next_multiple_of(align.max(4));
        let static_used = start + bytes - (layout.dynamic_bytes as usize).next_multiple_of(16);
        if static_used > STATIC_SHARED_LIMIT {
            return Err(SharedFault::StaticLimit { needed: static_used, limit: STATIC_SHARED_LIMIT });
        }
        layout.end.set((start + bytes) as u32);
        sites.push((site, start as u32));
        Ok(start as u32)
    }

    /// A pointer to `bytes` bytes at `address`, checked to be inside the memory handed out and
    /// aligned to `align`.
    #[inline]
    pub(crate) fn pointer(&self, address: u32, bytes: usize, align: usize) -> Result<*mut u8, SharedFault> {
        let end = self.layout.end.get() as usize;
        if !(address as usize).is_multiple_of(align) {
            return Err(SharedFault::Misaligned);
        }
        if address as usize + bytes > end {
            return Err(SharedFault::OutOfBounds { end });
        }
        // SAFETY: in bounds (checked); the arena is not reallocated while a block runs.
        Ok(unsafe { (*self.arena.get()).as_mut_ptr().cast::<u8>().add(address as usize) })
    }

    /// This arena as the intrinsics see it (valid while `self` lives: the arena and the layout
    /// are never reallocated).
    pub(crate) fn window(&self) -> SharedWindow {
        // SAFETY: called when a block is entered, between resumes, so no GPU thread is in the
        // middle of an access and the short-lived `&mut` made here aliases nothing; the
        // intrinsics use only the raw pointer afterwards.
        let base = unsafe { (*self.arena.get()).as_mut_ptr().cast::<u8>() };
        SharedWindow { base, end: &self.layout.end, recorded: self.shadow.is_some() }
    }

    /// Records an access of `bytes` at `address`, returning the first race it reveals.
    ///
    /// FastTrack's scheme, with block barriers as epochs: a write must be ordered after the
    /// word's last write and after every read of it since; a read after its last write. Two
    /// accesses are ordered when a barrier lies between them, or when they are by one thread,
    /// or by two lanes of a warp that a completed `sync_warp` joined in between (warp clocks).
    /// The read state is one read while each read is ordered after the one before (a later
    /// write ordered after the last is then ordered after all), else the set of reads.
    #[inline]
    pub(crate) fn record_access(&self, address: u32, bytes: usize, write: bool, check: &RaceCheck<'_>) -> Option<Race> {
        let shadow = self.shadow.as_ref()?;
        let epoch = self.epoch.get();
        let now = check.now(epoch);
        let ordered = |a: Access| check.ordered_after(a.thread, a.epoch, a.clock, epoch);
        let mut race = None;
        for word in address / 4..(address + bytes as u32).div_ceil(4) {
            let cell = &shadow[word as usize];
            let mut entry = cell.get();
            let mut found = |kind, thread: u32| {
                if race.is_none() {
                    race = Some(Race { address: word * 4, kind, first: thread - 1, second: check.rank });
                }
            };
            if !ordered(entry.writer) {
                found(if write { RaceKind::WriteAfterWrite } else { RaceKind::ReadAfterWrite }, entry.writer.thread);
            }
            let mut sets = self.reader_sets.borrow_mut();
            let set = match entry.readers {
                0 => None,
                index => Some(&mut sets[index as usize - 1]).filter(|set| set.epoch == epoch),
            };
            if write {
                match set {
                    Some(set) => {
                        if let Some(&(thread, _)) = set.reads.iter().find(|&&(thread, clock)| !check.ordered_after(thread, epoch, clock, epoch)) {
                            found(RaceKind::WriteAfterRead, thread);
                        }
                        set.epoch = epoch.wrapping_sub(1);
                    }
                    None if !ordered(entry.reader) => found(RaceKind::WriteAfterRead, entry.reader.thread),
                    None => {}
                }
                entry.writer = now;
                entry.reader = Access::default();
            } else {
                match set {
                    Some(set) => match set.reads.last_mut() {
                        Some(last) if last.0 == now.thread => last.1 = now.clock,
                        _ => set.reads.push((now.thread, now.clock)),
                    },
                    None if ordered(entry.reader) => entry.reader = now,
                    None => {
                        // A second read that the first does not order: keep both.
                        let reads = vec![(entry.reader.thread, entry.reader.clock), (now.thread, now.clock)];
                        if entry.readers == 0 {
                            sets.push(ReaderSet::default());
                            entry.readers = sets.len() as u32;
                        }
                        sets[entry.readers as usize - 1] = ReaderSet { epoch, reads };
                    }
                }
            }
            cell.set(entry);
        }
        race
    }
}
