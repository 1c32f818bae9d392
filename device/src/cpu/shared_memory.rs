//! A block's shared memory on the CPU: an arena of bytes addressed by 32-bit offsets (the
//! "shared-window addresses" the device library passes around), poisoned at every block start,
//! with an optional shadow entry per 2 bytes (the smallest shared-memory element, a 16-bit
//! float) for data-race detection.
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

/// Bytes per shadow entry: the size of the smallest [`SharedElement`](crate::shared::SharedElement)
/// (`bf16`, `f16`). Coarser entries would report two threads writing neighbouring 16-bit
/// elements of one word, which is no race on a GPU, as one.
const GRANULE: u32 = 2;

/// What the race detector keeps of one 2-byte granule: its last write, and the reads since then
/// that no later read is known to be ordered after (one, or a set of them: audit N8 found
/// that keeping only the last reader misses a broadcast-then-update race).
#[derive(Clone, Copy, Default)]
struct Shadow {
    writer: Access,
    /// The one read since the last write (when `readers` holds no reads).
    reader: Access,
    /// 0, or 1 + the index of this word's set of reads in `SharedMemory::reader_sets`.
    readers: u32,
    /// The one atomic access since the last write (when `atomics` holds none): atomics do not
    /// race with each other, but each races with a plain access of another thread that
    /// nothing orders (audit 2026-11-27c, F3).
    atomic: Access,
    /// 0, or 1 + the index of this word's set of atomic accesses in `SharedMemory::reader_sets`.
    atomics: u32,
    /// The block (`SharedMemory::generation`) in which the granule was last written, by a
    /// store, an atomic or an unrecorded write (cp.async, TMA, mbarrier): a read of a granule
    /// not written in the running block reads what an earlier kernel left there (audit
    /// 2026-11-27b, Q6).
    written: u32,
}

/// One access: who (a thread of the cluster), in which epochs, at which of its own warp-sync
/// clock ticks.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct Access {
    /// `cluster rank * 1024 + rank + 1` of the accessing thread (0: none).
    thread: u32,
    /// The accessing thread's block's barrier epoch.
    epoch: u32,
    /// The cluster barrier epoch (orders the accesses of different blocks).
    cluster_epoch: u32,
    /// The thread's own component of its warp clock when it accessed.
    clock: u32,
    /// How many named-barrier arrivals the thread had made before it accessed.
    named: u32,
}

/// Threads per block, in an access's thread number.
const BLOCK_THREADS: u32 = 1024;

impl Access {
    fn block(self) -> u32 {
        (self.thread - 1) / BLOCK_THREADS
    }
    fn rank(self) -> u32 {
        (self.thread - 1) % BLOCK_THREADS
    }
}

/// The reads of one word since its last write by threads that do not order each other.
#[derive(Default)]
struct ReaderSet {
    /// Each read (a thread's repeated reads in one run are one entry).
    reads: Vec<Access>,
    /// Prune the reads ordered before a new one when there are more than this.
    prune_at: usize,
}

/// What the race check needs to know about the accessing thread.
pub(crate) struct RaceCheck<'a> {
    /// Its block's rank in the cluster.
    pub(crate) block: u32,
    /// Its rank in its block.
    pub(crate) rank: u32,
    /// Its block's barrier epoch and the cluster's (`SharedMemory::epochs` of its block).
    pub(crate) epochs: (u32, u32),
    /// The thread's warp clock: entry `l` is the last tick of lane `l` of its warp that is
    /// ordered before this thread's next access by completed `sync_warp`s (its own entry is
    /// its own clock).
    pub(crate) clock: &'a [Cell<u32>],
    /// How many named-barrier arrivals the thread has made.
    pub(crate) named: u32,
    /// The barrier epoch in which thread `rank` of this block exited (`None`: it has not).
    pub(crate) exited_in: &'a dyn Fn(u32) -> Option<u32>,
    /// How many of thread `rank`'s named-barrier arrivals completed phases have ordered
    /// before this thread's access.
    pub(crate) named_seen: &'a dyn Fn(u32) -> u32,
}

impl RaceCheck<'_> {
    fn now(&self) -> Access {
        Access {
            thread: self.block * BLOCK_THREADS + self.rank + 1,
            epoch: self.epochs.0,
            cluster_epoch: self.epochs.1,
            clock: self.clock[(self.rank % ferrocuda_types::WARP_SIZE) as usize].get(),
            named: self.named,
        }
    }

    /// Whether the earlier access `before` is ordered before this thread's access: it is
    /// none, or by this thread; by a thread of this block with a block barrier between (an
    /// earlier epoch, which the accessing thread reached: a thread that exited in that epoch
    /// never arrived at the barrier that ended it, audit P9), or by a lane of this warp that a
    /// completed `sync_warp` with this thread ordered before it (warp clocks), or before one
    /// of its named-barrier arrivals that a completed phase this thread waited for covers
    /// (audit P7); or by a thread of another block of the cluster with a cluster barrier
    /// between.
    fn ordered_after(&self, before: Access) -> bool {
        let now = self.now();
        let warp = ferrocuda_types::WARP_SIZE;
        if before.thread == 0 || before.thread == now.thread {
            return true;
        }
        if before.block() != self.block {
            return before.cluster_epoch != now.cluster_epoch;
        }
        let barrier_between = before.epoch != now.epoch && (self.exited_in)(before.rank()) != Some(before.epoch);
        barrier_between
            || (before.rank() / warp == self.rank / warp && before.clock <= self.clock[(before.rank() % warp) as usize].get())
            || before.named < (self.named_seen)(before.rank())
    }
}

/// A detected race: two accesses to `address` by different threads with no barrier between.
pub(crate) struct Race {
    pub(crate) address: u32,
    pub(crate) kind: RaceKind,
    /// `(cluster rank, rank)` of the thread of the earlier access.
    pub(crate) first: (u32, u32),
    /// `(cluster rank, rank)` of the thread whose access revealed the race.
    pub(crate) second: (u32, u32),
}

/// Where each array lives: shared by the arenas of one worker's cluster.
struct Layout {
    dynamic_bytes: u32,
    /// End of the memory handed out so far (dynamic + static sites).
    end: Cell<u32>,
    /// `(site, address, bytes, align)` of each `shared_array!` site reached.
    sites: RefCell<Vec<(u64, u32, usize, usize)>>,
    /// Cluster barrier epoch: advanced at every cluster barrier and every block start, so
    /// that accesses by different blocks are ordered only by a cluster barrier between them.
    cluster_epoch: Cell<u32>,
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
    /// Advanced at every block start: granules whose `Shadow::written` is another value have
    /// not been written by the running block.
    generation: Cell<u32>,
    /// Every thread of the block running in this arena has exited (its distributed shared
    /// memory may no longer be accessed).
    exited: Cell<bool>,
    /// The last access by a thread of another block: `(cluster epoch, its block's cluster
    /// rank, its rank)`.
    peer_access: Cell<Option<(u32, u32, u32)>>,
}

impl SharedMemory {
    /// `count` arenas with one layout (one per block of a cluster), each with room for
    /// `dynamic_bytes` plus CUDA's static limit; `race_detection` adds the shadow entries.
    pub(crate) fn group(count: usize, dynamic_bytes: u32, race_detection: bool) -> Vec<Self> {
        let dynamic = (dynamic_bytes as usize).next_multiple_of(16);
        let bytes = dynamic + STATIC_SHARED_LIMIT;
        let layout = Rc::new(Layout { dynamic_bytes, end: Cell::new(dynamic as u32), sites: RefCell::new(Vec::new()), cluster_epoch: Cell::new(0) });
        (0..count)
            .map(|_| SharedMemory {
                arena: UnsafeCell::new(vec![Chunk([SHARED_POISON_BYTE; 16]); bytes / 16].into_boxed_slice()),
                layout: layout.clone(),
                shadow: race_detection.then(|| (0..bytes / GRANULE as usize).map(|_| Cell::new(Shadow::default())).collect()),
                reader_sets: RefCell::new(Vec::new()),
                epoch: Cell::new(0),
                generation: Cell::new(0),
                exited: Cell::new(false),
                peer_access: Cell::new(None),
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
        self.next_cluster_epoch();
        // Never 0, the value of a granule no block has written.
        self.generation.set(self.generation.get().wrapping_add(1).max(1));
        self.exited.set(false);
        self.peer_access.set(None);
    }

    /// A barrier opened: accesses after it are ordered after those before it.
    pub(crate) fn next_epoch(&self) {
        self.epoch.set(self.epoch.get().wrapping_add(1));
    }

    /// A cluster barrier opened (call once per cluster barrier; with `next_epoch` for each
    /// block): accesses of every block after it are ordered after all those before it.
    pub(crate) fn next_cluster_epoch(&self) {
        let epoch = &self.layout.cluster_epoch;
        epoch.set(epoch.get().wrapping_add(1));
    }

    /// This block's barrier epoch and the cluster's, for a `RaceCheck` of its threads.
    pub(crate) fn epochs(&self) -> (u32, u32) {
        (self.epoch.get(), self.layout.cluster_epoch.get())
    }

    /// Every thread of the block has exited. Returns the last access by another block's
    /// thread (`(cluster rank, rank)`) if it was since the last cluster barrier: nothing
    /// ordered it before this exit, so on a GPU it may come after it (audit N6).
    pub(crate) fn mark_exited(&self) -> Option<(u32, u32)> {
        self.exited.set(true);
        let cluster_epoch = self.layout.cluster_epoch.get();
        self.peer_access.get().filter(|&(epoch, ..)| epoch == cluster_epoch).map(|(_, block, rank)| (block, rank))
    }

    /// Thread `rank` of the cluster's block `block` accesses this (another block's) memory.
    pub(crate) fn note_peer_access(&self, block: u32, rank: u32) {
        self.peer_access.set(Some((self.layout.cluster_epoch.get(), block, rank)));
    }

    /// Whether every thread of the block has exited.
    pub(crate) fn has_exited(&self) -> bool {
        self.exited.get()
    }

    pub(crate) fn dynamic_bytes(&self) -> u32 {
        self.layout.dynamic_bytes
    }

    /// The address of the `shared_array!` at `site`, handed out on first use. A site reached
    /// again with another size or alignment is an error (a generic function's array, whose
    /// type depends on its instance: one site has one array, as on the GPU).
    pub(crate) fn static_array(&self, site: u64, bytes: usize, align: usize) -> Result<u32, SharedFault> {
        let layout = &self.layout;
        let mut sites = layout.sites.borrow_mut();
        if let Some(&(_, address, first_bytes, first_align)) = sites.iter().find(|(s, ..)| *s == site) {
            if (first_bytes, first_align) != (bytes, align) {
                return Err(SharedFault::SiteMismatch { first_bytes, first_align });
            }
            return Ok(address);
        }
        let start = (layout.end.get() as usize).next_multiple_of(align.max(4));
        let static_used = start + bytes - (layout.dynamic_bytes as usize).next_multiple_of(16);
        if static_used > STATIC_SHARED_LIMIT {
            return Err(SharedFault::StaticLimit { needed: static_used, limit: STATIC_SHARED_LIMIT });
        }
        // Static and dynamic together have one limit per block (F7); a GPU refuses the launch.
        let max = super::CPU_LIMITS.max_shared_per_block;
        if static_used as u64 + layout.dynamic_bytes as u64 > max as u64 {
            return Err(SharedFault::TotalLimit { static_bytes: static_used as u32, dynamic_bytes: layout.dynamic_bytes, max });
        }
        layout.end.set((start + bytes) as u32);
        sites.push((site, start as u32, bytes, align));
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

    /// Whether accesses are checked for data races (the shadow exists).
    pub(crate) fn race_detection(&self) -> bool {
        self.shadow.is_some()
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

    /// The first granule of `bytes` at `address` that the running block has not written yet
    /// (its address), with race detection; `None` when all have been written, or without it.
    pub(crate) fn unwritten(&self, address: u32, bytes: usize) -> Option<u32> {
        let shadow = self.shadow.as_ref()?;
        let generation = self.generation.get();
        (address / GRANULE..(address + bytes as u32).div_ceil(GRANULE)).find(|&g| shadow[g as usize].get().written != generation).map(|g| g * GRANULE)
    }

    /// Marks `bytes` at `address` as written by the running block (a write the race detector
    /// does not record: an atomic, a cp.async, TMA or mbarrier body on the CPU).
    pub(crate) fn mark_written(&self, address: u32, bytes: usize) {
        let Some(shadow) = self.shadow.as_ref() else { return };
        let generation = self.generation.get();
        let end = (self.layout.end.get() / GRANULE) as usize;
        for granule in address / GRANULE..(address + bytes as u32).div_ceil(GRANULE) {
            if let Some(cell) = shadow.get(granule as usize).filter(|_| (granule as usize) < end) {
                let mut entry = cell.get();
                entry.written = generation;
                cell.set(entry);
            }
        }
    }

    /// Where `address` lies: `(true, offset)` in the dynamic shared memory, `(false, offset)`
    /// in the `shared_array!` that holds it (the offset from the array's start, and the
    /// array's bytes in `.2`), for error messages.
    pub(crate) fn describe(&self, address: u32) -> (bool, u32, usize) {
        if address < self.layout.dynamic_bytes {
            return (true, address, self.layout.dynamic_bytes as usize);
        }
        let sites = self.layout.sites.borrow();
        match sites.iter().find(|&&(_, start, bytes, _)| address >= start && ((address - start) as usize) < bytes) {
            Some(&(_, start, bytes, _)) => (false, address - start, bytes),
            None => (false, address, 0),
        }
    }

    /// Records an access of `bytes` at `address` by the thread `check` describes (of this
    /// block, or of another block of the cluster through distributed shared memory),
    /// returning the first race it reveals.
    ///
    /// FastTrack's scheme: a write must be ordered after the word's last write and after
    /// every read and atomic access of it since; a read after its last write and the atomics
    /// since; an atomic after the last write and the reads since (atomics never race with
    /// each other: PTX's memory model calls two atomic accesses "morally strong", and only
    /// accesses that are not race; a plain store racing an atomic is a data race, F3). See
    /// `RaceCheck::ordered_after` for what orders two accesses. The reads (and the atomics)
    /// since the last write are one access while each is ordered after the one before (a
    /// later write ordered after the last is then ordered after all), else a set, from which
    /// the accesses ordered before a newer one are pruned.
    #[inline]
    pub(crate) fn record_access(&self, address: u32, bytes: usize, kind: AccessKind, check: &RaceCheck<'_>) -> Option<Race> {
        let shadow = self.shadow.as_ref()?;
        let now = check.now();
        let mut race = None;
        for granule in address / GRANULE..(address + bytes as u32).div_ceil(GRANULE) {
            let cell = &shadow[granule as usize];
            let mut entry = cell.get();
            let mut found = |kind, before: Access| {
                if race.is_none() {
                    race = Some(Race { address: granule * GRANULE, kind, first: (before.block(), before.rank()), second: (check.block, check.rank) });
                }
            };
            if !check.ordered_after(entry.writer) {
                found(
                    match kind {
                        AccessKind::Read => RaceKind::ReadAfterWrite,
                        AccessKind::Write => RaceKind::WriteAfterWrite,
                        AccessKind::Atomic => RaceKind::AtomicAfterWrite,
                    },
                    entry.writer,
                );
            }
            let mut sets = self.reader_sets.borrow_mut();
            // A plain access must be ordered after the atomics since the last write; a write or
            // an atomic after the reads since.
            if kind != AccessKind::Atomic
                && let Some(before) = unordered(entry.atomic, entry.atomics, &sets, check)
            {
                found(if kind == AccessKind::Write { RaceKind::WriteAfterAtomic } else { RaceKind::ReadAfterAtomic }, before);
            }
            if kind != AccessKind::Read
                && let Some(before) = unordered(entry.reader, entry.readers, &sets, check)
            {
                found(if kind == AccessKind::Write { RaceKind::WriteAfterRead } else { RaceKind::AtomicAfterRead }, before);
            }
            match kind {
                AccessKind::Write => {
                    for index in [entry.readers, entry.atomics] {
                        if index != 0 {
                            sets[index as usize - 1].reads.clear();
                        }
                    }
                    entry.writer = now;
                    entry.reader = Access::default();
                    entry.atomic = Access::default();
                    entry.written = self.generation.get();
                }
                AccessKind::Read => add_unordered(&mut entry.reader, &mut entry.readers, &mut sets, now, check),
                AccessKind::Atomic => {
                    add_unordered(&mut entry.atomic, &mut entry.atomics, &mut sets, now, check);
                    entry.written = self.generation.get();
                }
            }
            cell.set(entry);
        }
        race
    }
}

/// What a recorded shared-memory access does.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum AccessKind {
    /// A plain load.
    Read,
    /// A plain store.
    Write,
    /// An atomic read-modify-write (`atom.shared`).
    Atomic,
}

/// The first of the accesses kept as `single` (or, when `index` names a non-empty set, in
/// that set) that the access `check` describes is not ordered after.
fn unordered(single: Access, index: u32, sets: &[ReaderSet], check: &RaceCheck<'_>) -> Option<Access> {
    match index {
        0 => None,
        index => Some(&sets[index as usize - 1]).filter(|set| !set.reads.is_empty()),
    }
    .map_or_else(|| (!check.ordered_after(single)).then_some(single), |set| set.reads.iter().copied().find(|&read| !check.ordered_after(read)))
}

/// Adds the access `now` to the accesses of one kind since the last write (`single`, or the
/// set `index` names once two of them are unordered).
fn add_unordered(single: &mut Access, index: &mut u32, sets: &mut Vec<ReaderSet>, now: Access, check: &RaceCheck<'_>) {
    let set = match *index {
        0 => None,
        i => Some(&mut sets[i as usize - 1]).filter(|set| !set.reads.is_empty()),
    };
    match set {
        Some(set) => {
            match set.reads.last_mut() {
                Some(last) if last.thread == now.thread => *last = now,
                _ => set.reads.push(now),
            }
            if set.reads.len() > set.prune_at {
                set.reads.retain(|&read| read == now || !check.ordered_after(read));
                set.prune_at = (2 * set.reads.len()).max(64);
            }
        }
        None if check.ordered_after(*single) => *single = now,
        None => {
            // A second access that the first does not order: keep both.
            if *index == 0 {
                sets.push(ReaderSet::default());
                *index = sets.len() as u32;
            }
            let set = &mut sets[*index as usize - 1];
            set.reads.extend([*single, now]);
            set.prune_at = 64;
            *single = Access::default();
        }
    }
}
