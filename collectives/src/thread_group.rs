//! The thread backend: ranks are threads of this process and buffers are host slices, with
//! the same semantics as NCCL's collectives (reductions in rank order), so multi-rank code
//! runs in CI without GPUs.
//!
//! Stricter than NCCL where it can be: every collective checks that all ranks called the same
//! operation with matching lengths, and a rank that fails (returns or panics while others still
//! wait for it) makes the others' pending calls fail with [`Error::PeerFailed`] instead of
//! hanging; every wait also ends with [`Error::Timeout`] after [`ThreadGroup::timeout`].

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::api::Collectives;
use crate::element::{Element, ReduceOp, reduce_into};
use crate::error::{Error, Result, check_len, check_rank};

/// Starts groups of ranks on threads: `ThreadGroup::new(4).run(|comm| ...)`.
#[derive(Debug, Clone)]
pub struct ThreadGroup {
    world_size: usize,
    timeout: Duration,
}

impl ThreadGroup {
    /// A group of `world_size` ranks (at least 1), each wait bounded by 60 s.
    pub fn new(world_size: usize) -> Self {
        assert!(world_size > 0, "a thread group needs at least one rank");
        ThreadGroup { world_size, timeout: Duration::from_secs(60) }
    }

    /// How long one collective or receive may wait for the other ranks before it fails with
    /// [`Error::Timeout`].
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Runs `body` once per rank, each on its own thread, and returns the results in rank
    /// order. A panic in any rank is re-raised here once every rank has ended (the others see
    /// [`Error::PeerFailed`] from calls that needed the panicking rank).
    pub fn run<R: Send>(&self, body: impl Fn(&HostComm) -> R + Sync) -> Vec<R> {
        let shared = Arc::new(Shared::new(self.world_size, self.timeout));
        let outcomes: Vec<std::thread::Result<R>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..self.world_size)
                .map(|rank| {
                    let comm = HostComm { rank, shared: shared.clone() };
                    let body = &body;
                    std::thread::Builder::new()
                        .name(format!("rank-{rank}"))
                        .spawn_scoped(scope, move || {
                            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(&comm)));
                            comm.shared.leave(rank, outcome.is_err());
                            outcome
                        })
                        .expect("could not spawn a rank's thread")
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or_else(Err)).collect()
        });
        let mut results = Vec::with_capacity(outcomes.len());
        for outcome in outcomes {
            match outcome {
                Ok(r) => results.push(r),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        results
    }
}

/// One rank of a [`ThreadGroup`]: [`Collectives`] over host slices.
pub struct HostComm {
    rank: usize,
    shared: Arc<Shared>,
}

/// What every rank of a collective call must agree on.
#[derive(Debug, Clone, PartialEq)]
struct Call {
    operation: &'static str,
    element: &'static str,
    op: Option<ReduceOp>,
    root: Option<usize>,
}

/// One rank's contribution to a collective.
struct Contribution {
    call: Call,
    data: Vec<u8>,
}

struct State {
    /// Completed collectives so far.
    generation: u64,
    /// Contributions to the collective in progress, by rank.
    slots: Vec<Option<Contribution>>,
    /// The contributions of the last completed collective, for the ranks to read.
    completed: Arc<Vec<Contribution>>,
    /// Ranks whose body has ended (returned or panicked).
    left: Vec<bool>,
    /// The ranks in the order they left: errors name the first missing one, the cause (the
    /// others left because of it).
    left_order: Vec<usize>,
    /// The first rank whose body panicked: named by the errors of the others.
    first_panic: Option<usize>,
    /// Point-to-point messages by (from, to).
    mailboxes: HashMap<(usize, usize), VecDeque<Vec<u8>>>,
}

struct Shared {
    world_size: usize,
    timeout: Duration,
    state: Mutex<State>,
    changed: Condvar,
}

impl Shared {
    fn new(world_size: usize, timeout: Duration) -> Self {
        Shared {
            world_size,
            timeout,
            state: Mutex::new(State {
                generation: 0,
                slots: (0..world_size).map(|_| None).collect(),
                completed: Arc::new(Vec::new()),
                left: vec![false; world_size],
                left_order: Vec::new(),
                first_panic: None,
                mailboxes: HashMap::new(),
            }),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn leave(&self, rank: usize, panicked: bool) {
        let mut state = self.lock();
        state.left[rank] = true;
        state.left_order.push(rank);
        if panicked && state.first_panic.is_none() {
            state.first_panic = Some(rank);
        }
        drop(state);
        self.changed.notify_all();
    }

    /// Waits on the condition variable until something changes or `deadline` passes; the
    /// flag is true once the deadline has passed.
    fn wait<'s>(&self, state: MutexGuard<'s, State>, deadline: Instant) -> (MutexGuard<'s, State>, bool) {
        let now = Instant::now();
        if now >= deadline {
            return (state, true);
        }
        let (state, _) = self.changed.wait_timeout(state, deadline - now).unwrap_or_else(|poisoned| poisoned.into_inner());
        (state, false)
    }

    /// Deposits this rank's contribution and returns everyone's once all ranks have made
    /// theirs, after checking that they all made the same call.
    fn exchange(&self, rank: usize, call: Call, data: Vec<u8>) -> Result<Arc<Vec<Contribution>>> {
        let operation = call.operation;
        let deadline = Instant::now() + self.timeout;
        let mut state = self.lock();
        let generation = state.generation;
        state.slots[rank] = Some(Contribution { call, data });
        if state.slots.iter().all(Option::is_some) {
            let contributions: Vec<Contribution> = state.slots.iter_mut().map(|s| s.take().expect("checked above")).collect();
            state.completed = Arc::new(contributions);
            state.generation += 1;
            self.changed.notify_all();
        } else {
            while state.generation == generation {
                if let Some(&gone) = state.left_order.iter().find(|&&r| state.slots[r].is_none()) {
                    state.slots[rank] = None;
                    return Err(Error::PeerFailed { operation, rank: state.first_panic.unwrap_or(gone) });
                }
                let (next, expired) = self.wait(state, deadline);
                state = next;
                if expired && state.generation == generation {
                    state.slots[rank] = None;
                    return Err(Error::Timeout { operation, after: self.timeout });
                }
            }
        }
        let completed = state.completed.clone();
        drop(state);
        let mine = &completed[rank].call;
        if let Some((other, theirs)) = completed.iter().enumerate().find(|(_, c)| c.call != *mine) {
            return Err(Error::Rendezvous {
                method: "thread group".into(),
                message: format!(
                    "rank {rank} called {mine:?} while rank {other} called {:?}: every rank must make the same calls in the same order",
                    theirs.call
                ),
            });
        }
        Ok(completed)
    }
}

fn bytes<T: Element>(data: &[T]) -> Vec<u8> {
    bytemuck::cast_slice(data).to_vec()
}

fn elements<T: Element>(data: &[u8]) -> Vec<T> {
    let len = data.len() / std::mem::size_of::<T>();
    let mut out = vec![T::zeroed(); len];
    bytemuck::cast_slice_mut::<T, u8>(&mut out).copy_from_slice(&data[..len * std::mem::size_of::<T>()]);
    out
}

impl HostComm {
    fn call<T: Element>(operation: &'static str, op: Option<ReduceOp>, root: Option<usize>) -> Call {
        Call { operation, element: std::any::type_name::<T>(), op, root }
    }

    /// Every rank's data as `T`s, all of `len` elements (else a length error naming the rank).
    fn gather_equal<T: Element>(&self, operation: &'static str, call: Call, mine: &[T]) -> Result<Vec<Vec<T>>> {
        let all = self.shared.exchange(self.rank, call, bytes(mine))?;
        all.iter().map(|c| elements::<T>(&c.data)).map(|v| check_len(operation, "another rank's buffer", mine.len(), v.len()).map(|()| v)).collect()
    }
}

impl Collectives for HostComm {
    type Src<'a, T: Element> = &'a [T];
    type Dst<'a, T: Element> = &'a mut [T];
    const DEFERS_GROUPED_OPS: bool = true;

    fn rank(&self) -> usize {
        self.rank
    }

    fn world_size(&self) -> usize {
        self.shared.world_size
    }

    fn all_reduce<T: Element>(&self, send: &[T], recv: &mut [T], op: ReduceOp) -> Result<()> {
        check_len("all_reduce", "recv", send.len(), recv.len())?;
        let all = self.gather_equal("all_reduce", Self::call::<T>("all_reduce", Some(op), None), send)?;
        let inputs: Vec<&[T]> = all.iter().map(Vec::as_slice).collect();
        reduce_into(&inputs, op, recv);
        Ok(())
    }

    fn all_reduce_in_place<T: Element>(&self, buf: &mut [T], op: ReduceOp) -> Result<()> {
        let all = self.gather_equal("all_reduce", Self::call::<T>("all_reduce", Some(op), None), buf)?;
        let inputs: Vec<&[T]> = all.iter().map(Vec::as_slice).collect();
        reduce_into(&inputs, op, buf);
        Ok(())
    }

    fn broadcast<T: Element>(&self, buf: &mut [T], root: usize) -> Result<()> {
        check_rank("broadcast", root, self.world_size())?;
        let all = self.gather_equal("broadcast", Self::call::<T>("broadcast", None, Some(root)), buf)?;
        buf.copy_from_slice(&all[root]);
        Ok(())
    }

    fn reduce<T: Element>(&self, send: &[T], recv: &mut [T], op: ReduceOp, root: usize) -> Result<()> {
        check_rank("reduce", root, self.world_size())?;
        if self.rank == root {
            check_len("reduce", "recv", send.len(), recv.len())?;
        }
        let all = self.gather_equal("reduce", Self::call::<T>("reduce", Some(op), Some(root)), send)?;
        if self.rank == root {
            let inputs: Vec<&[T]> = all.iter().map(Vec::as_slice).collect();
            reduce_into(&inputs, op, recv);
        }
        Ok(())
    }

    fn all_gather<T: Element>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        check_len("all_gather", "recv", send.len() * self.world_size(), recv.len())?;
        let all = self.gather_equal("all_gather", Self::call::<T>("all_gather", None, None), send)?;
        for (chunk, part) in recv.chunks_exact_mut(send.len().max(1)).zip(&all) {
            chunk.copy_from_slice(part);
        }
        Ok(())
    }

    fn reduce_scatter<T: Element>(&self, send: &[T], recv: &mut [T], op: ReduceOp) -> Result<()> {
        let n = recv.len();
        check_len("reduce_scatter", "send", n * self.world_size(), send.len())?;
        let all = self.gather_equal("reduce_scatter", Self::call::<T>("reduce_scatter", Some(op), None), send)?;
        let inputs: Vec<&[T]> = all.iter().map(|v| &v[self.rank * n..(self.rank + 1) * n]).collect();
        reduce_into(&inputs, op, recv);
        Ok(())
    }

    fn send<T: Element>(&self, buf: &[T], peer: usize) -> Result<()> {
        check_rank("send", peer, self.world_size())?;
        self.shared.lock().mailboxes.entry((self.rank, peer)).or_default().push_back(bytes(buf));
        self.shared.changed.notify_all();
        Ok(())
    }

    fn recv<T: Element>(&self, buf: &mut [T], peer: usize) -> Result<()> {
        check_rank("recv", peer, self.world_size())?;
        let deadline = Instant::now() + self.shared.timeout;
        let mut state = self.shared.lock();
        loop {
            if let Some(message) = state.mailboxes.get_mut(&(peer, self.rank)).and_then(VecDeque::pop_front) {
                drop(state);
                let data = elements::<T>(&message);
                check_len("recv", "the message (the sender's buffer)", buf.len(), data.len())?;
                buf.copy_from_slice(&data);
                return Ok(());
            }
            if state.left[peer] {
                return Err(Error::PeerFailed { operation: "recv", rank: state.first_panic.unwrap_or(peer) });
            }
            let (next, expired) = self.shared.wait(state, deadline);
            state = next;
            if expired && state.mailboxes.get(&(peer, self.rank)).is_none_or(VecDeque::is_empty) {
                return Err(Error::Timeout { operation: "recv", after: self.shared.timeout });
            }
        }
    }

    fn group_begin(_: crate::api::GroupToken) -> Result<()> {
        Ok(())
    }

    fn group_end(_: crate::api::GroupToken) -> Result<()> {
        Ok(())
    }
}
