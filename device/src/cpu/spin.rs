//! Telling a spin-wait from a wait that ends (audit 2026-11-27c, F2).
//!
//! A GPU thread that polls atomics yields after [`POLLS_BEFORE_YIELD`] of them (P8), so that
//! a writer of its block can run. Each such run is a window; a thread *spins* when its windows
//! keep repeating the same few `(address, value)` pairs (at most [`SPIN_PAIRS`]), none of its
//! accesses changes memory, and so it has gone on for [`SPIN_WINDOWS`] windows and at least
//! [`SPIN_TIME`]: `while flag.load(0) == 0 {}`, or a grid barrier's `while counter.load(0) <
//! blocks {}`. A loop that reads many addresses, sees values change, or writes is not a spin.
//!
//! The scheduler uses it to end a launch whose running threads all spin with a
//! [`CrossBlockWait`](super::CrossBlockWait) instead of running for ever (or until a watchdog
//! calls it a hang). Limit: a thread that checks one flag between long stretches of plain work
//! for longer than [`SPIN_TIME`] (an early-exit flag another block sets), with every other
//! thread of its block waiting, looks like a spin too.
//!
//! [`POLLS_BEFORE_YIELD`]: super::block::POLLS_BEFORE_YIELD

use std::time::{Duration, Instant};

/// Distinct `(address, value)` pairs a spin's window may hold.
pub(crate) const SPIN_PAIRS: usize = 8;
/// Windows of the same unchanged values before a thread counts as spinning.
pub(crate) const SPIN_WINDOWS: u32 = 4;
/// How long a thread must have spun before the scheduler may end its launch.
pub(crate) const SPIN_TIME: Duration = Duration::from_millis(100);

/// What a thread's atomic accesses since it last waited (other than to poll) look like.
#[derive(Default)]
pub(crate) struct Spin {
    /// The distinct pairs of the current window.
    current: Vec<(usize, u64)>,
    /// The current window has more than [`SPIN_PAIRS`] of them, or changed memory.
    busy: bool,
    /// The pairs of the last window that looked like a spin.
    previous: Vec<(usize, u64)>,
    /// Consecutive windows with the same unchanged pairs.
    same: u32,
    /// When the first of those windows began.
    since: Option<Instant>,
}

impl Spin {
    /// One atomic access of `address`, which held `value`, `changed` by it or not.
    #[inline]
    pub(crate) fn record(&mut self, address: usize, value: u64, changed: bool) {
        if self.busy {
            return;
        }
        if changed {
            self.busy = true;
        } else if !self.current.contains(&(address, value)) {
            if self.current.len() == SPIN_PAIRS {
                self.busy = true;
            } else {
                self.current.push((address, value));
            }
        }
    }

    /// The window ended (the thread yields to poll).
    pub(crate) fn end_window(&mut self) {
        let repeated = !self.busy && !self.current.is_empty() && same_pairs(&self.current, &self.previous);
        if repeated {
            self.same += 1;
        } else {
            self.same = 0;
            self.since = (!self.busy && !self.current.is_empty()).then(Instant::now);
        }
        std::mem::swap(&mut self.previous, &mut self.current);
        if self.busy {
            self.previous.clear();
        }
        self.current.clear();
        self.busy = false;
    }

    /// The thread waited for something else (a barrier, a warp operation): not a spin.
    pub(crate) fn reset(&mut self) {
        self.current.clear();
        self.previous.clear();
        self.busy = false;
        self.same = 0;
        self.since = None;
    }

    /// Whether the thread spins (see the module).
    pub(crate) fn spinning(&self) -> bool {
        self.same >= SPIN_WINDOWS && self.since.is_some_and(|t| t.elapsed() >= SPIN_TIME)
    }

    /// The pairs it polls.
    pub(crate) fn polled(&self) -> Vec<(usize, u64)> {
        self.previous.clone()
    }
}

/// Whether two windows hold the same pairs (in any order).
fn same_pairs(a: &[(usize, u64)], b: &[(usize, u64)]) -> bool {
    a.len() == b.len() && a.iter().all(|p| b.contains(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(spin: &mut Spin, pairs: &[(usize, u64, bool)]) {
        for _ in 0..8 {
            for &(a, v, c) in pairs {
                spin.record(a, v, c);
            }
        }
        spin.end_window();
    }

    /// A poll of one unchanged flag spins after the windows and the time; a changed value, a
    /// write, or many addresses start over.
    #[test]
    fn f2_repeated_unchanged_polls_spin_and_anything_else_does_not() {
        let mut spin = Spin::default();
        for _ in 0..=SPIN_WINDOWS {
            window(&mut spin, &[(0x10, 0, false)]);
        }
        assert!(!spin.spinning(), "not before the time");
        spin.since = Some(Instant::now() - SPIN_TIME);
        assert!(spin.spinning());
        assert_eq!(spin.polled(), vec![(0x10, 0)]);
        window(&mut spin, &[(0x10, 1, false)]);
        assert!(!spin.spinning(), "the value changed");
        for _ in 0..=SPIN_WINDOWS {
            window(&mut spin, &[(0x10, 1, false), (0x20, 5, true)]);
        }
        spin.since = spin.since.map(|_| Instant::now() - SPIN_TIME);
        assert!(!spin.spinning(), "it writes");
        let many: Vec<(usize, u64, bool)> = (0..16).map(|i| (i * 4, 0, false)).collect();
        for _ in 0..=SPIN_WINDOWS {
            window(&mut spin, &many);
        }
        spin.since = spin.since.map(|_| Instant::now() - SPIN_TIME);
        assert!(!spin.spinning(), "a read of many addresses");
        for _ in 0..=SPIN_WINDOWS {
            window(&mut spin, &[(0x10, 0, false), (0x14, 3, false)]);
        }
        spin.since = Some(Instant::now() - SPIN_TIME);
        assert!(spin.spinning(), "two flags in turn");
        spin.reset();
        assert!(!spin.spinning());
    }
}
