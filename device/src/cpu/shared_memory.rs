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

/// The last write and the last read of one 2-byte granule: who, in which barrier epoch, after
/// how many `sync_warp`s of its warp.
#[derive(Clone, Copy, Default)]
struct Shadow {
    writer: Access,
    reader: Access,
}

#[derive(Clone, Copy, Default)]
struct Access {
    /// Rank + 1 (0: none).
    thread: u32,
    epoch: u32,
    warp_syncs: u32,
}

/// What the race check needs to know about the accessing thread.
pub(crate) struct RaceCheck<'a> {
    pub(crate) rank: u32,
    pub(crate) warp_syncs: &'a [Cell<u32>],
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
    /// Barrier epoch: advanced at every barrier and every block start, so that shadow entries
    /// of earlier epochs (or blocks) never match.
    epoch: Cell<u32>,
}

impl SharedMemory {
    /// `count` arenas with one layout (one per block of a cluster), each with room for
    /// `dynamic_bytes` plus CUDA's static limit; `race_detection` adds the shadow entries.
    pub(crate) fn group(count: usize, dynamic_bytes: u32, race_detection: bool) -> Vec<Self> {
        let dynamic = (dynamic_bytes as usize).next_multiple_of(16);
        let bytes = dynamic + STATIC_SHARED_LIMIT;
        let layout = Rc::new(Layout { dynamic_bytes, end: Cell::new(dynamic as u32), sites: RefCell::new(Vec::new()) });
        (0..count)
            .map(|_| SharedMemory {
                arena: UnsafeCell::new(vec![Chunk([SHARED_POISON_BYTE; 16]); bytes / 16].into_boxed_slice()),
                layout: layout.clone(),
                shadow: race_detection.then(|| (0..bytes / GRANULE as usize).map(|_| Cell::new(Shadow::default())).collect()),
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
    #[inline]
    pub(crate) fn record_access(&self, address: u32, bytes: usize, write: bool, check: &RaceCheck<'_>) -> Option<Race> {
        let shadow = self.shadow.as_ref()?;
        let epoch = self.epoch.get();
        let warp = check.rank / ferrocuda_types::WARP_SIZE;
        let now = Access { thread: check.rank + 1, epoch, warp_syncs: check.warp_syncs[warp as usize].get() };
        // Is the earlier access `before` unordered with the current one?
        let unordered = |before: Access| {
            before.thread != 0
                && before.thread != now.thread
                && before.epoch == epoch
                && !((before.thread - 1) / ferrocuda_types::WARP_SIZE == warp && now.warp_syncs > before.warp_syncs)
        };
        let mut race = None;
        for granule in address / GRANULE..(address + bytes as u32).div_ceil(GRANULE) {
            let cell = &shadow[granule as usize];
            let mut entry = cell.get();
            let conflict = if unordered(entry.writer) {
                Some((if write { RaceKind::WriteAfterWrite } else { RaceKind::ReadAfterWrite }, entry.writer))
            } else if write && unordered(entry.reader) {
                Some((RaceKind::WriteAfterRead, entry.reader))
            } else {
                None
            };
            if let (None, Some((kind, before))) = (&race, conflict) {
                race = Some(Race { address: granule * GRANULE, kind, first: before.thread - 1, second: check.rank });
            }
            if write {
                entry.writer = now;
            } else {
                entry.reader = now;
            }
            cell.set(entry);
        }
        race
    }
}
