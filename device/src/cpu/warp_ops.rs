//! Warp collectives on the CPU: a warp operation completes when every live lane its mask
//! names has arrived (shuffles, votes, match, `sync_warp`), and `activemask` answers with the
//! lanes that arrived together.

use super::block::{BlockContext, ThreadState};
use super::error::{CpuError, ExitedLaneShuffle, MissingLaneShuffle};
use super::hooks::WarpOp;
use ferrocuda_types::WARP_SIZE;

/// Two lanes wait in the same collective: the same operation (a shuffle reading any lane).
pub(crate) fn same_collective(a: WarpOp, b: WarpOp) -> bool {
    core::mem::discriminant(&a) == core::mem::discriminant(&b)
}

impl BlockContext<'_> {
    /// Completes every warp operation whose lanes have all arrived; their ranks go to
    /// `runnable` in rank order.
    pub(crate) fn complete_warp_ops(&self, runnable: &mut Vec<u32>) {
        for warp in 0..self.warps {
            let (base, lanes) = self.warp_range(warp);
            let lane = |l: u32| &self.threads[base + l as usize];
            // `waiting`: lanes in a collective; `asking`: lanes at `activemask`.
            let (mut waiting, mut asking, mut live) = (0u32, 0u32, 0u32);
            for l in 0..lanes {
                match lane(l).state.get() {
                    ThreadState::AtWarp { op: WarpOp::ActiveMask, .. } => {
                        asking |= 1 << l;
                        live |= 1 << l;
                    }
                    ThreadState::AtWarp { .. } => {
                        waiting |= 1 << l;
                        live |= 1 << l;
                    }
                    ThreadState::Exited => {}
                    _ => live |= 1 << l,
                }
            }
            if waiting | asking == 0 {
                continue;
            }
            let mut done = 0u32;
            for l in 0..lanes {
                if waiting & (1 << l) == 0 || done & (1 << l) != 0 {
                    continue;
                }
                let ThreadState::AtWarp { op, mask, .. } = lane(l).state.get() else { continue };
                // The lanes this operation waits for: those of its mask that have not exited.
                let group = (mask | 1 << l) & live;
                // Each waits in the same operation with the same mask, or none can go on: on a
                // GPU every `.sync` instruction waits for the other lanes of its mask to
                // execute that same instruction (audit N7). Such a group stays waiting; if
                // nothing else completes, the block is stuck and `report_stuck` names it.
                let same = |m: u32| matches!(lane(m).state.get(), ThreadState::AtWarp { op: o, mask: k, .. } if same_collective(o, op) && k == mask);
                if group & !waiting == 0 && group & done == 0 && (0..lanes).filter(|&m| group & (1 << m) != 0).all(same) {
                    if let Err(error) = self.complete_group(warp, base, lanes, group, live) {
                        self.fail(error);
                        return;
                    }
                    done |= group;
                }
            }
            for l in 0..lanes {
                if asking & (1 << l) != 0 {
                    lane(l).reply.set(asking as u64);
                }
            }
            done |= asking;
            runnable.extend((0..lanes).filter(|l| done & (1 << l) != 0).map(|l| base as u32 + l));
        }
    }

    /// A `sync_warp` of the lanes in `group` completed: each member's accesses so far are
    /// ordered before every member's next ones (and nothing is ordered for the lanes outside
    /// the group: audit N8). Each member's clock becomes the join of the members' clocks,
    /// then each ticks its own entry.
    fn join_warp_clocks(&self, base: usize, lanes: u32, group: u32) {
        let members = || (0..lanes).filter(move |l| group & (1 << l) != 0);
        let mut joined = [0u32; WARP_SIZE as usize];
        for m in members() {
            for (j, c) in joined.iter_mut().zip(self.warp_clock((base as u32) + m)) {
                *j = (*j).max(c.get());
            }
        }
        for m in members() {
            let clock = self.warp_clock(base as u32 + m);
            for (c, j) in clock.iter().zip(joined) {
                c.set(j);
            }
            clock[m as usize].set(joined[m as usize] + 1);
        }
    }

    /// Computes each lane's result of the warp operation of the lanes in `group` (`live`: the
    /// warp's lanes that have not exited). A shuffle reading a lane that has exited is an
    /// error: CUDA leaves its result undefined (a GPU gave 0 where this executor used to give
    /// the lane's own value).
    fn complete_group(&self, warp: u32, base: usize, lanes: u32, group: u32, live: u32) -> Result<(), CpuError> {
        let state = |l: u32| match self.threads[base + l as usize].state.get() {
            ThreadState::AtWarp { op, value, .. } => (op, value),
            _ => unreachable!("every lane of a completing group waits at a warp operation"),
        };
        let members = || (0..lanes).filter(move |l| group & (1 << l) != 0);
        let exited_reads: Vec<(u32, u32)> = members()
            .filter_map(|l| match state(l).0 {
                WarpOp::Shuffle { source } if source < lanes && live & (1 << source) == 0 => Some((l, source)),
                _ => None,
            })
            .collect();
        if !exited_reads.is_empty() {
            return Err(CpuError::ExitedLaneShuffle(ExitedLaneShuffle {
                kernel: self.kernel().to_owned(),
                block: self.block_idx,
                warp,
                readers: exited_reads.iter().map(|&(l, _)| l).collect(),
                exited: {
                    let mut sources: Vec<u32> = exited_reads.iter().map(|&(_, s)| s).collect();
                    sources.sort_unstable();
                    sources.dedup();
                    sources
                },
            }));
        }
        // A source inside the 32-lane segment but past the block's end (a partial last warp,
        // D5) is no lane at all: an inactive source, whose value CUDA leaves undefined (an
        // H200 gave 0); PTX's out-of-range rule (the `c` clamp and segment mask, already
        // applied to `source`) does not cover it. Reported like an exited source.
        let missing_reads: Vec<(u32, u32)> = members()
            .filter_map(|l| match state(l).0 {
                WarpOp::Shuffle { source } if source >= lanes => Some((l, source)),
                _ => None,
            })
            .collect();
        if !missing_reads.is_empty() {
            let mut missing: Vec<u32> = missing_reads.iter().map(|&(_, s)| s).collect();
            missing.sort_unstable();
            missing.dedup();
            return Err(CpuError::MissingLaneShuffle(MissingLaneShuffle {
                kernel: self.kernel().to_owned(),
                block: self.block_idx,
                warp,
                lanes,
                readers: missing_reads.iter().map(|&(l, _)| l).collect(),
                missing,
            }));
        }
        let mut synced = false;
        for l in members() {
            let (op, value) = state(l);
            let reply = match op {
                // Every source is a live member here (checked above), or the lane itself when
                // PTX's out-of-range rule applies.
                WarpOp::Shuffle { source } => {
                    if source < lanes && group & (1 << source) != 0 {
                        state(source).1 as u32 as u64
                    } else {
                        value as u32 as u64
                    }
                }
                WarpOp::Ballot => members().filter(|&m| state(m).1 != 0).fold(0u64, |b, m| b | 1 << m),
                WarpOp::MatchAny => members().filter(|&m| state(m).1 == value).fold(0u64, |b, m| b | 1 << m),
                WarpOp::Sync => {
                    synced = true;
                    0
                }
                // The lowest lane of the group (the live lanes of the full mask).
                WarpOp::Elect => (members().next() == Some(l)) as u64,
                WarpOp::ActiveMask => unreachable!("`activemask` completes on its own"),
            };
            self.threads[base + l as usize].reply.set(reply);
        }
        if synced {
            self.join_warp_clocks(base, lanes, group);
        }
        Ok(())
    }
}
