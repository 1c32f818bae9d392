//! A one-shot all-reduce (sum of `f32`) in Rust kernels, reading the other GPUs' buffers
//! directly over NVLink (or PCIe) with peer access: one kernel launch per GPU per call, no
//! NCCL. For small messages it avoids NCCL's protocol overheads; for large ones each GPU
//! reads every peer's whole buffer, so NCCL's ring/tree wins (see BENCHMARKS.md).
//!
//! Either one process drives every GPU ([`PeerGroup::new`]: peer access, one thread per GPU
//! or one for all, launches are asynchronous), or each GPU has its own process on this host
//! ([`PeerGroup::across_processes`]: the buffers are shared through CUDA IPC handles that an
//! NCCL all-gather distributes).
//!
//! ```ignore
//! let ranks = PeerGroup::new(&contexts, 1 << 20)?;       // enables peer access both ways
//! // each rank (thread): input and output are views of this rank's buffers
//! ranks[r].all_reduce(&streams[r], x.slice(..), y.slice_mut(..))?;
//! ```

use std::sync::Arc;

use ferrocuda_collectives_kernels::{MAX_BLOCKS, MAX_RANKS, VECTOR, flag_words, one_shot_all_reduce_f32};
use ferrocuda_host::{BufferUsage, Context, DeviceBuffer, DevicePtr, DeviceView, DeviceViewMut, LaunchConfig, Stream, sys};

use crate::Collectives;
use crate::nccl::Communicator;

use crate::error::{Error, Result, check_len};
use crate::tracking::reading_writing;

/// Threads per block of the peer kernels.
const THREADS: u32 = 512;

/// Everything the kernels of all ranks share: per GPU a staging buffer (two halves), a flag
/// array, a pointer table and a status word.
///
/// One process driving every GPU: entry `i` of each vector is GPU `i`'s. One process per GPU
/// ([`PeerGroup::across_processes`]): one entry, this process's GPU, and the peers' buffers
/// mapped through CUDA IPC (`opened`).
struct Shared {
    contexts: Vec<Context>,
    staging: Vec<DeviceBuffer<f32>>,
    flags: Vec<DeviceBuffer<u32>>,
    tables: Vec<DeviceBuffer<u64>>,
    status: Vec<DeviceBuffer<u32>>,
    max_blocks: Vec<u32>,
    /// Across processes: this process's staging buffer and flags, in memory that CUDA IPC can
    /// export (the vectors `staging` and `flags` are then empty).
    exported: Vec<IpcMemory>,
    /// Peer allocations mapped with `cuIpcOpenMemHandle` (closed on drop).
    opened: Vec<u64>,
    /// Across processes: whether every rank passed [`PeerRank::finish`]'s barrier, after
    /// which no peer reads this process's buffers any more. Without it they are leaked, not
    /// freed, since a peer's kernel might still read them.
    peers_done: bool,
}

impl Drop for Shared {
    fn drop(&mut self) {
        // A rank's buffers are read by every other GPU's kernels: wait for all GPUs before any
        // buffer is freed (each buffer's own drop waits only for its own context). After a
        // reported timeout (a peer kernel that never ends) that wait would hang for good (P12),
        // and a failed one (a capture still running, a fault) leaves peers' kernels perhaps
        // running: then leave everything to the process's exit instead of freeing it.
        let why_not = if self.contexts.iter().any(Context::timed_out) {
            Some("a timeout was reported for work that may still be running".to_string())
        } else {
            self.contexts.iter().find_map(|context| context.synchronize().err()).map(|error| error.to_string())
        };
        if let Some(why_not) = why_not {
            // Not silent (audit 2026-11-27b's note: the leak used to go unreported).
            eprintln!(
                "ferrocuda-collectives: the peer all-reduce's buffers are left to the process's exit, not freed: its GPUs' \
                 work could not be waited for ({why_not})"
            );
            std::mem::take(&mut self.staging).into_iter().for_each(std::mem::forget);
            std::mem::take(&mut self.flags).into_iter().for_each(std::mem::forget);
            std::mem::take(&mut self.tables).into_iter().for_each(std::mem::forget);
            std::mem::take(&mut self.status).into_iter().for_each(std::mem::forget);
            std::mem::take(&mut self.exported).into_iter().for_each(std::mem::forget);
            return;
        }
        if self.opened.is_empty() && self.peers_done {
            return;
        }
        // The first GPU's context current for the closes, then the caller's again (session 21:
        // a created context is not left current on the user's thread, G20R-4's class).
        let _current = self.contexts.first().and_then(|context| context.push_current().ok());
        for &address in &self.opened {
            // SAFETY: mapped by cuIpcOpenMemHandle in `across_processes`, closed once, after
            // this GPU's work (the only user of the mapping here) has finished.
            unsafe { sys::cuIpcCloseMemHandle(address) };
        }
        if !self.peers_done {
            // Peers may still read these through their mappings: never free them.
            std::mem::take(&mut self.staging).into_iter().for_each(std::mem::forget);
            std::mem::take(&mut self.flags).into_iter().for_each(std::mem::forget);
            std::mem::take(&mut self.exported).into_iter().for_each(std::mem::forget);
        }
    }
}

/// Creates the ranks of a peer all-reduce.
pub struct PeerGroup;

impl PeerGroup {
    /// Sets up a one-shot all-reduce over `contexts` (one per GPU, at most 8) for up to
    /// `capacity` `f32` per call: enables peer access between every pair and allocates
    /// `2 * capacity` floats of staging per GPU. Returns one [`PeerRank`] per GPU (they may be
    /// moved to one thread each).
    #[allow(clippy::new_ret_no_self)] // it makes the group's ranks, one per GPU
    pub fn new(contexts: &[Context], capacity: usize) -> Result<Vec<PeerRank>> {
        let world = contexts.len();
        if world == 0 || world > MAX_RANKS as usize {
            return Err(Error::BadRank { operation: "PeerGroup::new (ranks)", rank: world, world_size: MAX_RANKS as usize + 1 });
        }
        if capacity > (u32::MAX / 2) as usize {
            return Err(Error::Length { operation: "PeerGroup::new", what: "capacity", expected: (u32::MAX / 2) as usize, got: capacity });
        }
        for (i, a) in contexts.iter().enumerate() {
            for (j, b) in contexts.iter().enumerate() {
                if i != j {
                    a.enable_peer_access(b)?;
                }
            }
        }
        let mut shared = Shared {
            contexts: contexts.to_vec(),
            staging: vec![],
            flags: vec![],
            tables: vec![],
            status: vec![],
            max_blocks: vec![],
            exported: vec![],
            opened: vec![],
            peers_done: true,
        };
        for context in contexts {
            // Padded to whole vectors so that every staging half starts 16-byte aligned.
            let padded = capacity.div_ceil(VECTOR as usize) * VECTOR as usize;
            shared.staging.push(DeviceBuffer::zeroed(context, 2 * padded.max(VECTOR as usize))?);
            shared.flags.push(DeviceBuffer::zeroed(context, flag_words(world as u32))?);
            shared.status.push(DeviceBuffer::zeroed(context, 1)?);
            let sms = context.device().multiprocessor_count()?;
            // Two blocks per SM: all of them resident at once even next to other work, so a
            // block never waits for a peer block that cannot be scheduled (NVLink saturates
            // well before this many blocks).
            shared.max_blocks.push((2 * sms).clamp(1, MAX_BLOCKS));
        }
        let padded = capacity.div_ceil(VECTOR as usize) * VECTOR as usize;
        let mut table: Vec<u64> = shared.staging.iter().map(|b| b.device_ptr()).collect();
        table.extend(shared.flags.iter().map(|b| b.device_ptr()));
        for context in contexts {
            shared.tables.push(DeviceBuffer::from_slice(context, &table)?);
        }
        let shared = Arc::new(shared);
        Ok((0..world)
            .map(|rank| PeerRank {
                state: BufferUsage::for_library_state(&contexts[rank]),
                shared: shared.clone(),
                rank,
                slot: rank,
                world,
                epoch: 0,
                capacity,
                half: padded as u32,
                spin_limit: 0,
                poisoned: false,
            })
            .collect())
    }

    /// One process per GPU, all on this host: sets up this process's rank of a peer
    /// all-reduce over the ranks of `comm` (every rank must call it). Each rank allocates its
    /// staging buffer and flags, exports them as CUDA IPC handles, gathers everyone's handles
    /// with an NCCL all-gather on `stream`, and maps the peers' (`cuIpcOpenMemHandle`, peer
    /// access enabled lazily).
    ///
    /// End with [`PeerRank::finish`] on every rank: it waits until no peer can still read this
    /// rank's buffers before they are freed (without it they are leaked, never freed under a
    /// peer).
    pub fn across_processes(comm: &Communicator, stream: &Stream, capacity: usize) -> Result<PeerRank> {
        let (rank, world, context) = (comm.rank(), comm.world_size(), comm.context().clone());
        if world > MAX_RANKS as usize {
            return Err(Error::BadRank { operation: "PeerGroup::across_processes (ranks)", rank: world, world_size: MAX_RANKS as usize + 1 });
        }
        if capacity > (u32::MAX / 2) as usize {
            return Err(Error::Length { operation: "PeerGroup::across_processes", what: "capacity", expected: (u32::MAX / 2) as usize, got: capacity });
        }
        let padded = capacity.div_ceil(VECTOR as usize) * VECTOR as usize;
        // cuMemAlloc'd memory, which CUDA IPC can export: a `DeviceBuffer` comes from the
        // stream-ordered pool, which `cuIpcGetMemHandle` refuses (CUDA_ERROR_INVALID_VALUE,
        // issue 34).
        let staging = IpcMemory::zeroed(&context, 2 * padded.max(VECTOR as usize) * size_of::<f32>())?;
        let flags = IpcMemory::zeroed(&context, flag_words(world as u32) * size_of::<u32>())?;
        // The zeroing ran on the legacy stream: done before any peer can see the handles.
        context.synchronize()?;
        let mut mine = [0u8; 2 * IPC_HANDLE];
        for (i, address) in [staging.address, flags.address].into_iter().enumerate() {
            let handle = ipc_export(&context, address)?;
            mine[i * IPC_HANDLE..(i + 1) * IPC_HANDLE].copy_from_slice(&handle);
        }
        let send = DeviceBuffer::from_slice(&context, &mine)?;
        let mut everyone = DeviceBuffer::<u8>::zeroed(&context, world * mine.len())?;
        comm.on(stream)?.all_gather(send.slice(..), everyone.slice_mut(..))?;
        comm.synchronize(stream)?;
        let everyone = everyone.to_vec()?;
        let own = [staging.address, flags.address];
        let status = DeviceBuffer::zeroed(&context, 1)?;
        let max_blocks = (2 * context.device().multiprocessor_count()?).clamp(1, MAX_BLOCKS);
        // Owned by `shared` before any peer mapping is opened: if a later step fails, its drop
        // leaks them (peers already have the handles) instead of freeing them.
        let mut shared = Shared {
            contexts: vec![context.clone()],
            staging: vec![],
            flags: vec![],
            tables: vec![],
            status: vec![status],
            max_blocks: vec![max_blocks],
            exported: vec![staging, flags],
            opened: vec![],
            peers_done: false,
        };
        let mut table = vec![0u64; 2 * world];
        for q in 0..world {
            for kind in 0..2 {
                table[kind * world + q] = if q == rank {
                    own[kind]
                } else {
                    let start = (q * 2 + kind) * IPC_HANDLE;
                    let address = ipc_open(&context, &everyone[start..start + IPC_HANDLE])?;
                    shared.opened.push(address);
                    address
                };
            }
        }
        shared.tables.push(DeviceBuffer::from_slice(&context, &table)?);
        Ok(PeerRank {
            state: BufferUsage::for_library_state(&context),
            shared: Arc::new(shared),
            rank,
            slot: 0,
            world,
            epoch: 0,
            capacity,
            half: padded as u32,
            spin_limit: 0,
            poisoned: false,
        })
    }
}

/// Device memory that CUDA IPC can export: a `cuMemAlloc` allocation (the stream-ordered
/// pool's memory, which `DeviceBuffer`s use, cannot be exported with `cuIpcGetMemHandle`).
/// Freed with `cuMemFree` on drop; [`Shared`]'s drop forgets it instead while a peer process
/// may still read it.
struct IpcMemory {
    context: Context,
    address: u64,
}

impl IpcMemory {
    /// `bytes` (at least 1) of zeroed device memory of `context`. The zeroing is queued on the
    /// legacy default stream: synchronise the context before other streams use the memory.
    fn zeroed(context: &Context, bytes: usize) -> Result<Self> {
        let _current = context.push_current()?;
        let bytes = bytes.max(1);
        let mut address = 0;
        // SAFETY: writes the address of a new allocation of `bytes` bytes of this context.
        cuda("cuMemAlloc", unsafe { sys::cuMemAlloc_v2(&mut address, bytes) })?;
        let memory = Self { context: context.clone(), address };
        // Untracked memory of its own (no `BufferAccess` to declare): the caller synchronises
        // the context before anything else uses it.
        Stream::default_of(context).enqueue("cuMemsetD8Async", &[], |stream| {
            // SAFETY: the allocation above holds `bytes` bytes and lives until `memory` drops.
            cuda("cuMemsetD8Async", unsafe { sys::cuMemsetD8Async(address, 0, bytes, stream.get()) })
        })?;
        Ok(memory)
    }
}

impl Drop for IpcMemory {
    fn drop(&mut self) {
        if let Ok(_current) = self.context.push_current() {
            // SAFETY: allocated by cuMemAlloc in `zeroed` and freed once, here. `Shared`'s drop
            // synchronised this context first and drops an `IpcMemory` only once no peer
            // process maps it any more (it forgets it otherwise).
            unsafe { sys::cuMemFree_v2(self.address) };
        }
    }
}

/// Bytes of a `CUipcMemHandle`.
const IPC_HANDLE: usize = 64;

/// `cuIpcGetMemHandle`: the handle other processes map `address` (a `cuMemAlloc` allocation) with.
fn ipc_export(context: &Context, address: u64) -> Result<[u8; IPC_HANDLE]> {
    let _current = context.push_current()?;
    let mut handle = sys::CUipcMemHandle { reserved: [0; IPC_HANDLE] };
    // SAFETY: writes one handle for a live allocation of this context.
    cuda("cuIpcGetMemHandle", unsafe { sys::cuIpcGetMemHandle(&mut handle, address) })?;
    Ok(handle.reserved.map(|b| b as u8))
}

/// `cuIpcOpenMemHandle` with lazy peer access: maps another process's allocation here.
fn ipc_open(context: &Context, bytes: &[u8]) -> Result<u64> {
    let _current = context.push_current()?;
    let mut handle = sys::CUipcMemHandle { reserved: [0; IPC_HANDLE] };
    for (to, from) in handle.reserved.iter_mut().zip(bytes) {
        *to = *from as _;
    }
    let mut address = 0;
    let flags = sys::CUipcMem_flags::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as u32;
    // SAFETY: writes one device address; the handle came from a peer's cuIpcGetMemHandle.
    cuda("cuIpcOpenMemHandle", unsafe { sys::cuIpcOpenMemHandle_v2(&mut address, handle, flags) })?;
    Ok(address)
}

/// A driver result as this crate's error.
fn cuda(call: &'static str, code: sys::CUresult) -> Result<()> {
    if code == sys::CUresult::CUDA_SUCCESS { Ok(()) } else { Err(ferrocuda_host::Error::Driver(ferrocuda_host::DriverError { call, code }).into()) }
}

/// One GPU's side of a peer all-reduce (see [`PeerGroup::new`]).
pub struct PeerRank {
    shared: Arc<Shared>,
    rank: usize,
    /// This rank's entry in `shared`'s vectors.
    slot: usize,
    world: usize,
    epoch: u32,
    capacity: usize,
    /// Elements per staging half (capacity rounded up to whole vectors).
    half: u32,
    spin_limit: u32,
    poisoned: bool,
    /// The record of this rank's staging halves and flags (read and written by every call's
    /// kernel): each call declares it written, so a call on another stream of this GPU waits
    /// for the previous one, as the kernel's two-halves argument needs (audit 2026-11-28,
    /// G13-2: calls on two streams ran at once, and one overwrote the staging half the other
    /// was still summing).
    state: BufferUsage,
}

impl PeerRank {
    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    pub fn world_size(&self) -> usize {
        self.world
    }

    /// The most elements one call reduces.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// This rank's context.
    pub fn context(&self) -> &Context {
        &self.shared.contexts[self.slot]
    }

    /// Bounds how long the kernel waits for a peer: after `polls` polls of a flag it gives up
    /// and records it, which [`PeerRank::check`] reports (0, the default, waits forever).
    ///
    /// A give-up ends the whole group, not one call: the rank that gave up tells its peers,
    /// and from then on every call's kernel on every rank writes NaN to its output and records
    /// the give-up, which each rank's [`PeerRank::check`] reports; make a new group to go on.
    /// A rank that is merely late thus gets an error, never a sum made with another call's
    /// data (audit 2026-11-28h G20R-1: the rank that gave up used to carry on, run ahead and
    /// overwrite a staging half its late peer had not read yet).
    #[must_use]
    pub fn spin_limit(mut self, polls: u32) -> Self {
        self.spin_limit = polls;
        self
    }

    /// `output = sum over ranks of input` (every rank gets the same bits: ranks are summed in
    /// order 0, 1, ...). Queued on `stream` (of this rank's context); every rank must make the
    /// same calls with the same lengths. `input` and `output` must start 16-byte aligned (a
    /// whole buffer always does).
    pub fn all_reduce(&mut self, stream: &Stream, input: DeviceView<'_, f32>, mut output: DeviceViewMut<'_, f32>) -> Result<()> {
        const OPERATION: &str = "PeerRank::all_reduce";
        if self.poisoned {
            return Err(self.poisoned_error(OPERATION));
        }
        check_len(OPERATION, "output", input.len(), output.len())?;
        if input.len() > self.capacity {
            return Err(Error::Length { operation: OPERATION, what: "input (more than the capacity)", expected: self.capacity, got: input.len() });
        }
        let context = &self.shared.contexts[self.slot];
        if stream.context().raw() != context.raw() {
            return Err(Error::WrongDevice {
                operation: OPERATION,
                what: "stream",
                expected: context.device().ordinal(),
                got: stream.context().device().ordinal(),
            });
        }
        for (what, address) in [("input", input.as_device_ptr().address()), ("output", output.as_device_ptr().address())] {
            if address % 16 != 0 {
                return Err(Error::Misaligned { operation: OPERATION, what, address, alignment: 16 });
            }
        }
        if input.is_empty() {
            return Ok(());
        }
        let (input_ptr, output_address) = (input.as_device_ptr(), output.as_device_ptr().address());
        let n = input.len() as u32;
        let blocks = n.div_ceil(THREADS * VECTOR).clamp(1, self.shared.max_blocks[self.slot]);
        self.epoch = self.epoch.wrapping_add(1);
        let config = LaunchConfig::new(blocks, THREADS);
        // SAFETY: the tables hold 2 * world valid addresses (staging halves of `half` elements,
        // 16-byte aligned; flag arrays of flag_words(world)), peer access is enabled between
        // all GPUs, n <= capacity <= half, input/output hold n elements of this GPU, aligned
        // (checked above); the epoch advances by one per call on every rank as long as every
        // rank makes the same calls (the documented contract; a missing rank makes the others
        // wait, bounded by spin_limit). The buffers stay alive while any kernel may run
        // (Shared's drop synchronises every GPU first).
        // This rank's staging and flags are declared too (written): a call on another stream
        // waits for the previous call (G13-2), which the two-halves argument above assumes.
        reading_writing(stream, &input, &mut output, &self.state, || unsafe {
            one_shot_all_reduce_f32::launch(
                stream,
                config,
                self.rank as u32,
                self.world_size() as u32,
                n,
                self.half,
                self.epoch,
                self.spin_limit,
                self.shared.status[self.slot].as_device_ptr(),
                self.shared.tables[self.slot].as_device_ptr(),
                input_ptr,
                DevicePtr::from_address(output_address),
            )
        })??;
        Ok(())
    }

    /// Ends a rank made by [`PeerGroup::across_processes`]: once every rank's peer kernels
    /// are done (a barrier: an NCCL all-reduce on `stream`, then a synchronisation), no peer
    /// reads this rank's buffers any more, so they are freed. Every rank must call it.
    pub fn finish(self, comm: &Communicator, stream: &Stream) -> Result<()> {
        let context = comm.context();
        context.synchronize()?;
        let mut token = DeviceBuffer::<u32>::zeroed(context, 1)?;
        comm.on(stream)?.all_reduce_in_place(token.slice_mut(..), crate::ReduceOp::Sum)?;
        comm.synchronize(stream)?;
        let mut shared = self.shared;
        // A rank of `PeerGroup::new` shares its state with the other ranks of this process
        // (and frees nothing unsafe anyway); a rank of `across_processes` owns its own.
        if let Some(shared) = Arc::get_mut(&mut shared) {
            shared.peers_done = true;
        }
        drop(shared);
        Ok(())
    }

    /// Reads the status word: fails with [`Error::GroupPoisoned`] (and refuses later calls
    /// with it) if a kernel of this rank gave up waiting for a peer, or found the group ended
    /// by a rank that did (see [`PeerRank::spin_limit`]): the outputs of the calls since are
    /// NaN, not sums. Synchronises the context first.
    pub fn check(&mut self) -> Result<()> {
        self.shared.contexts[self.slot].synchronize()?;
        let status = self.shared.status[self.slot].to_vec()?;
        if status[0] != 0 {
            self.poisoned = true;
            return Err(self.poisoned_error("PeerRank::check"));
        }
        Ok(())
    }

    /// The error of a group that is over (G20R-1), for `operation`.
    fn poisoned_error(&self, operation: &'static str) -> Error {
        poisoned(operation, self.rank, self.spin_limit)
    }
}

/// [`Error::GroupPoisoned`] for `rank`, whose kernels wait `spin_limit` polls (0: for ever).
/// The status word says only that the group is over; a rank that waits for ever cannot have
/// given up itself, so a peer did.
fn poisoned(operation: &'static str, rank: usize, spin_limit: u32) -> Error {
    let cause = if spin_limit == 0 {
        "a peer's kernel gave up waiting (its spin_limit ran out) and ended the group"
    } else {
        "this rank's kernel gave up waiting for a peer (spin_limit ran out), or a peer's did, which ends the group"
    };
    Error::GroupPoisoned { operation, rank, cause }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// G20R-1's poison used to be reported as `Error::Timeout` ("the communicator was aborted:
    /// make a new one"), an NCCL communicator's words for a peer group that has none. It is its
    /// own error, which says that the outputs are NaN and that a new group is needed, and it
    /// tells a rank that waits for ever that a peer gave up.
    #[test]
    fn g20r1_poison_is_group_poisoned_and_says_what_to_do() {
        for (spin_limit, who) in [(0, "a peer's kernel gave up"), (4096, "this rank's kernel gave up")] {
            let error = poisoned("PeerRank::check", 1, spin_limit);
            assert!(matches!(error, Error::GroupPoisoned { operation: "PeerRank::check", rank: 1, .. }), "{error:?}");
            let text = error.to_string();
            for needed in [who, "rank 1", "NaN", "PeerGroup::new", "every later call fails"] {
                assert!(text.contains(needed), "`{needed}` missing from: {text}");
            }
            assert!(!text.contains("communicator was aborted"), "{text}");
        }
    }
}
