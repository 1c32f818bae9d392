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
//! The map is keyed by the element's address (so views of one buffer made at different
//! offsets meet in it) and split into shards with a lock each, since the blocks of a launch
//! run on several worker threads at once.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Mutex;

use super::error::RaceKind;

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

/// Fibonacci hashing of an address: addresses of consecutive elements spread over shards.
#[derive(Default)]
struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_usize(&mut self, address: usize) {
        self.0 = (address as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type Shard = Mutex<HashMap<usize, Claim, BuildHasherDefault<AddressHasher>>>;

const SHARDS: usize = 64;

/// The claims on every output element taken during one launch.
pub(crate) struct OutputShadow {
    shards: Box<[Shard]>,
}

impl OutputShadow {
    pub(crate) fn new() -> Self {
        OutputShadow { shards: (0..SHARDS).map(|_| Mutex::default()).collect() }
    }

    /// Records that `thread` reads or writes the element at `address`; returns the conflict
    /// if another thread of the launch has taken it in a way this access breaks.
    pub(crate) fn record(&self, address: usize, thread: LaunchThread, write: bool) -> Option<Conflict> {
        let shard = (address as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58;
        let mut claims = self.shards[shard as usize].lock().unwrap_or_else(|e| e.into_inner());
        match claims.entry(address) {
            Entry::Vacant(entry) => {
                entry.insert(if write { Claim::Written(thread) } else { Claim::Read(thread) });
                None
            }
            Entry::Occupied(mut entry) => match entry.get().after(thread, write) {
                Ok(next) => {
                    entry.insert(next);
                    None
                }
                Err(conflict) => Some(conflict),
            },
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
            assert_eq!(shadow.record(0x1000, 7, write), None);
        }
    }

    #[test]
    fn readers_share_an_element_until_someone_writes_it() {
        let shadow = OutputShadow::new();
        assert_eq!(shadow.record(0x1000, 1, false), None);
        assert_eq!(shadow.record(0x1000, 2, false), None);
        assert_eq!(shadow.record(0x1000, 3, false), None);
        // The writer is one of the readers: the conflict names another reader.
        assert_eq!(shadow.record(0x1000, 1, true), Some(Conflict { kind: RaceKind::WriteAfterRead, other: 2 }));
        assert_eq!(shadow.record(0x1000, 2, true), Some(Conflict { kind: RaceKind::WriteAfterRead, other: 1 }));
    }

    #[test]
    fn a_written_element_is_its_writers_alone() {
        let shadow = OutputShadow::new();
        assert_eq!(shadow.record(0x2000, 5, true), None);
        assert_eq!(shadow.record(0x2000, 6, false), Some(Conflict { kind: RaceKind::ReadAfterWrite, other: 5 }));
        assert_eq!(shadow.record(0x2000, 6, true), Some(Conflict { kind: RaceKind::WriteAfterWrite, other: 5 }));
        // A read then a write by another thread.
        assert_eq!(shadow.record(0x2004, 5, false), None);
        assert_eq!(shadow.record(0x2004, 6, true), Some(Conflict { kind: RaceKind::WriteAfterRead, other: 5 }));
        // Neighbouring elements are independent.
        assert_eq!(shadow.record(0x2008, 6, true), None);
    }
}
