//! The backend-neutral API: [`Collectives`], implemented by NCCL communicators on a stream
//! ([`crate::nccl::OnStream`]) and by the thread backend ([`crate::HostComm`]), and grouped
//! calls ([`group`]).
//!
//! Code written against [`Collectives`] runs unchanged on GPUs through NCCL and on the CPU,
//! threads standing in for ranks, which is how CI exercises multi-rank code.

use std::cell::RefCell;

use crate::element::{Element, ReduceOp};
use crate::error::Result;

/// Collective and point-to-point operations of one rank of a group.
///
/// Every rank must call the same collectives in the same order with matching lengths (as
/// with NCCL and MPI); a rank that does not leaves the others waiting (NCCL: until the
/// timeout, see [`crate::nccl::Config::timeout`]; the thread backend reports the mismatch).
///
/// Buffers are the backend's own: device views ([`ferrocuda_host::DeviceView`] /
/// [`ferrocuda_host::DeviceViewMut`]) for NCCL, host slices for the thread backend.
pub trait Collectives {
    /// Memory an operation reads.
    type Src<'a, T: Element>;
    /// Memory an operation writes.
    type Dst<'a, T: Element>;
    /// Whether operations inside a [`group`] are queued and run at its end (thread backend)
    /// rather than issued at once and completed together by the backend (NCCL).
    #[doc(hidden)]
    const DEFERS_GROUPED_OPS: bool;

    /// This rank, in `0..world_size()`.
    fn rank(&self) -> usize;
    /// The number of ranks.
    fn world_size(&self) -> usize;

    /// `recv = send(rank 0) op send(rank 1) op ...` on every rank; equal lengths everywhere.
    fn all_reduce<T: Element>(&self, send: Self::Src<'_, T>, recv: Self::Dst<'_, T>, op: ReduceOp) -> Result<()>;
    /// [`Collectives::all_reduce`] with `buf` as both input and output.
    fn all_reduce_in_place<T: Element>(&self, buf: Self::Dst<'_, T>, op: ReduceOp) -> Result<()>;
    /// Copies `root`'s `buf` into every other rank's `buf` (same length everywhere).
    fn broadcast<T: Element>(&self, buf: Self::Dst<'_, T>, root: usize) -> Result<()>;
    /// Like [`Collectives::all_reduce`], but only `root`'s `recv` receives the result (the
    /// other ranks' `recv` is left alone).
    fn reduce<T: Element>(&self, send: Self::Src<'_, T>, recv: Self::Dst<'_, T>, op: ReduceOp, root: usize) -> Result<()>;
    /// `recv = send(rank 0) ++ send(rank 1) ++ ...`: `recv.len() == world_size() * send.len()`.
    fn all_gather<T: Element>(&self, send: Self::Src<'_, T>, recv: Self::Dst<'_, T>) -> Result<()>;
    /// Reduces `send` over ranks and gives rank `r` the `r`-th of `world_size()` equal chunks:
    /// `send.len() == world_size() * recv.len()`.
    fn reduce_scatter<T: Element>(&self, send: Self::Src<'_, T>, recv: Self::Dst<'_, T>, op: ReduceOp) -> Result<()>;
    /// Sends `buf` to `peer`, which must post a [`Collectives::recv`] of the same length from
    /// this rank. Pair sends and receives that could wait for each other inside a [`group`].
    fn send<T: Element>(&self, buf: Self::Src<'_, T>, peer: usize) -> Result<()>;
    /// Receives from `peer` into `buf`.
    fn recv<T: Element>(&self, buf: Self::Dst<'_, T>, peer: usize) -> Result<()>;

    /// Starts a group (`ncclGroupStart`); use [`group`] or [`Collectives::group`]. Callable
    /// only by this crate (`GroupToken` cannot be named outside it): a group begun by hand left
    /// NCCL recording operations that the door took as queued (audit 2026-11-27f F12-1).
    #[doc(hidden)]
    fn group_begin(token: GroupToken) -> Result<()>;
    /// Ends a group (`ncclGroupEnd`); see [`Collectives::group_begin`].
    #[doc(hidden)]
    fn group_end(token: GroupToken) -> Result<()>;

    /// Runs `body`, whose operations (issued through the [`Grouped`] it gets) complete
    /// together at the end, as between `ncclGroupStart` and `ncclGroupEnd`: sends and receives
    /// that would wait for each other one by one (a ring exchange, an all-to-all) do not.
    ///
    /// The buffers of grouped operations are borrowed for `'a`, which outlives the group, so
    /// none can be freed before the group has issued its work.
    fn group<'g, 'a: 'g, R>(&'g self, body: impl FnOnce(&Grouped<'_, 'g, 'a, Self>) -> R) -> Result<R>
    where
        Self: Sized,
    {
        group(std::slice::from_ref(self), |members| body(&members[0]))
    }
}

/// The proof that a call of [`Collectives::group_begin`] / [`Collectives::group_end`] comes from
/// this crate's [`group`]: a type outside code cannot name, so it cannot make one (F12-1).
#[doc(hidden)]
pub struct GroupToken(pub(crate) ());

thread_local! {
    /// True while a [`Grouped`] member issues its operation on this thread: the one way an
    /// operation may be issued while the thread's NCCL group is open (F12-1).
    static ISSUING_MEMBER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// True while a [`Grouped`] member of the running [`group`] issues an operation on this thread.
pub(crate) fn issuing_member() -> bool {
    ISSUING_MEMBER.with(std::cell::Cell::get)
}

/// Runs `op` marked as a [`Grouped`] member's operation (restored on unwind too).
fn as_member<R>(op: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            ISSUING_MEMBER.with(|m| m.set(self.0));
        }
    }
    let _restore = Restore(ISSUING_MEMBER.with(|m| m.replace(true)));
    op()
}

/// A queued operation of a group (thread backend), with whether it is a send.
type Deferred<'g> = (bool, Box<dyn FnOnce() -> Result<()> + 'g>);

/// One communicator's handle inside a [`group`]: the same operations as [`Collectives`], with
/// buffers borrowed for the group's `'a`.
pub struct Grouped<'q, 'g, 'a, C: Collectives> {
    comm: &'g C,
    queue: &'q RefCell<Vec<Deferred<'g>>>,
    _buffers: std::marker::PhantomData<&'a ()>,
}

/// Runs `body` as one group over several communicators (one per GPU when one thread drives
/// several GPUs, which NCCL requires to be grouped): `members[i]` issues operations on
/// `comms[i]`. Every operation completes together at the end; the first error is returned
/// (after the group was ended either way).
pub fn group<'g, 'a: 'g, C: Collectives, R>(comms: &'g [C], body: impl FnOnce(&[Grouped<'_, 'g, 'a, C>]) -> R) -> Result<R> {
    /// Ends the group if `body` or a queued operation panics, so the thread's NCCL group
    /// state is not left open.
    struct EndOnUnwind<C: Collectives>(bool, std::marker::PhantomData<C>);
    impl<C: Collectives> Drop for EndOnUnwind<C> {
        fn drop(&mut self) {
            if self.0 {
                let _ = C::group_end(GroupToken(()));
            }
        }
    }
    let queue = RefCell::new(Vec::new());
    C::group_begin(GroupToken(()))?;
    let mut guard = EndOnUnwind::<C>(true, std::marker::PhantomData);
    let members: Vec<Grouped<'_, 'g, 'a, C>> = comms.iter().map(|comm| Grouped { comm, queue: &queue, _buffers: std::marker::PhantomData }).collect();
    let result = body(&members);
    drop(members);
    // Sends first: they never wait (the thread backend buffers them), so every receive that
    // follows finds its message, whatever the order the ranks queued them in.
    let queued = queue.into_inner();
    let (sends, others): (Vec<_>, Vec<_>) = queued.into_iter().partition(|(is_send, _)| *is_send);
    let mut outcome = Ok(());
    for (_, op) in sends.into_iter().chain(others) {
        if let Err(e) = as_member(op)
            && outcome.is_ok()
        {
            outcome = Err(e);
        }
    }
    guard.0 = false;
    let end = C::group_end(GroupToken(()));
    outcome?;
    end?;
    Ok(result)
}

impl<'q, 'g, 'a: 'g, C: Collectives> Grouped<'q, 'g, 'a, C> {
    fn submit(&self, is_send: bool, op: impl FnOnce(&'g C) -> Result<()> + 'g) -> Result<()> {
        if C::DEFERS_GROUPED_OPS {
            let comm = self.comm;
            self.queue.borrow_mut().push((is_send, Box::new(move || op(comm))));
            Ok(())
        } else {
            as_member(|| op(self.comm))
        }
    }

    /// The communicator this member issues on.
    pub fn comm(&self) -> &'g C {
        self.comm
    }
    /// [`Collectives::all_reduce`], completed at the group's end.
    pub fn all_reduce<T: Element>(&self, send: C::Src<'a, T>, recv: C::Dst<'a, T>, op: ReduceOp) -> Result<()> {
        self.submit(false, move |c| c.all_reduce(send, recv, op))
    }
    /// [`Collectives::all_reduce_in_place`], completed at the group's end.
    pub fn all_reduce_in_place<T: Element>(&self, buf: C::Dst<'a, T>, op: ReduceOp) -> Result<()> {
        self.submit(false, move |c| c.all_reduce_in_place(buf, op))
    }
    /// [`Collectives::broadcast`], completed at the group's end.
    pub fn broadcast<T: Element>(&self, buf: C::Dst<'a, T>, root: usize) -> Result<()> {
        self.submit(false, move |c| c.broadcast(buf, root))
    }
    /// [`Collectives::reduce`], completed at the group's end.
    pub fn reduce<T: Element>(&self, send: C::Src<'a, T>, recv: C::Dst<'a, T>, op: ReduceOp, root: usize) -> Result<()> {
        self.submit(false, move |c| c.reduce(send, recv, op, root))
    }
    /// [`Collectives::all_gather`], completed at the group's end.
    pub fn all_gather<T: Element>(&self, send: C::Src<'a, T>, recv: C::Dst<'a, T>) -> Result<()> {
        self.submit(false, move |c| c.all_gather(send, recv))
    }
    /// [`Collectives::reduce_scatter`], completed at the group's end.
    pub fn reduce_scatter<T: Element>(&self, send: C::Src<'a, T>, recv: C::Dst<'a, T>, op: ReduceOp) -> Result<()> {
        self.submit(false, move |c| c.reduce_scatter(send, recv, op))
    }
    /// [`Collectives::send`], completed at the group's end.
    pub fn send<T: Element>(&self, buf: C::Src<'a, T>, peer: usize) -> Result<()> {
        self.submit(true, move |c| c.send(buf, peer))
    }
    /// [`Collectives::recv`], completed at the group's end.
    pub fn recv<T: Element>(&self, buf: C::Dst<'a, T>, peer: usize) -> Result<()> {
        self.submit(false, move |c| c.recv(buf, peer))
    }
}
