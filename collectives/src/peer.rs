//! A one-shot all-reduce (sum of `f32`) in Rust kernels, reading the other GPUs' buffers
//! directly over NVLink (or PCIe) with peer access: one kernel launch per GPU per call, no
//! NCCL. For small messages it avoids NCCL's protocol overheads; for large ones each GPU
//! reads every peer's whole buffer, so NCCL's ring/tree wins (see BENCHMARKS.md).
//!
//! All GPUs must be driven by this process (peer pointers are process-local); use one
//! thread per GPU, or one thread for all (launches are asynchronous).
//!
//! ```ignore
//! let ranks = PeerGroup::new(&contexts, 1 << 20)?;       // enables peer access both ways
//! // each rank (thread): input and output are views of this rank's buffers
//! ranks[r].all_reduce(&streams[r], x.slice(..), y.slice_mut(..))?;
//! ```

use std::sync::Arc;

use ferrocuda_collectives_kernels::{MAX_BLOCKS, MAX_RANKS, VECTOR, one_shot_all_reduce_f32};
use ferrocuda_host::{Context, DeviceBuffer, DevicePtr, DeviceView, DeviceViewMut, LaunchConfig, Stream};

use crate::error::{Error, Result, check_len};
use crate::tracking::{will_read, will_write};

/// Threads per block of the peer kernels.
const THREADS: u32 = 512;

/// Everything the kernels of all ranks share: per GPU a staging buffer (two halves), a flag
/// array, a pointer table and a status word.
struct Shared {
    contexts: Vec<Context>,
    staging: Vec<DeviceBuffer<f32>>,
    flags: Vec<DeviceBuffer<u32>>,
    tables: Vec<DeviceBuffer<u64>>,
    status: Vec<DeviceBuffer<u32>>,
    max_blocks: Vec<u32>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        // A rank's buffers are read by every other GPU's kernels: wait for all GPUs before any
        // buffer is freed (each buffer's own drop waits only for its own context).
        for context in &self.contexts {
            let _ = context.synchronize();
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
        let mut shared = Shared { contexts: contexts.to_vec(), staging: vec![], flags: vec![], tables: vec![], status: vec![], max_blocks: vec![] };
        for context in contexts {
            // Padded to whole vectors so that every staging half starts 16-byte aligned.
            let padded = capacity.div_ceil(VECTOR as usize) * VECTOR as usize;
            shared.staging.push(DeviceBuffer::zeroed(context, 2 * padded.max(VECTOR as usize))?);
            shared.flags.push(DeviceBuffer::zeroed(context, world * MAX_BLOCKS as usize)?);
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
        Ok((0..world).map(|rank| PeerRank { shared: shared.clone(), rank, epoch: 0, capacity, half: padded as u32, spin_limit: 0, poisoned: false }).collect())
    }
}

/// One GPU's side of a peer all-reduce (see [`PeerGroup::new`]).
pub struct PeerRank {
    shared: Arc<Shared>,
    rank: usize,
    epoch: u32,
    capacity: usize,
    /// Elements per staging half (capacity rounded up to whole vectors).
    half: u32,
    spin_limit: u32,
    poisoned: bool,
}

impl PeerRank {
    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    pub fn world_size(&self) -> usize {
        self.shared.contexts.len()
    }

    /// The most elements one call reduces.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// This rank's context.
    pub fn context(&self) -> &Context {
        &self.shared.contexts[self.rank]
    }

    /// Bounds how long the kernel waits for a peer: after `polls` polls of a flag it gives up
    /// and records it, which [`PeerRank::check`] reports (0, the default, waits forever).
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
            return Err(Error::Aborted { operation: OPERATION });
        }
        check_len(OPERATION, "output", input.len(), output.len())?;
        if input.len() > self.capacity {
            return Err(Error::Length { operation: OPERATION, what: "input (more than the capacity)", expected: self.capacity, got: input.len() });
        }
        let context = &self.shared.contexts[self.rank];
        if stream.context().raw() != context.raw() {
            return Err(Error::WrongDevice { operation: OPERATION, what: "stream", expected: context.device().ordinal(), got: stream.context().device().ordinal() });
        }
        for (what, address) in [("input", input.as_device_ptr().address()), ("output", output.as_device_ptr().address())] {
            if address % 16 != 0 {
                return Err(Error::Misaligned { operation: OPERATION, what, address, alignment: 16 });
            }
        }
        if input.is_empty() {
            return Ok(());
        }
        will_read(stream, &input)?;
        will_write(stream, &mut output)?;
        let n = input.len() as u32;
        let blocks = n.div_ceil(THREADS * VECTOR).clamp(1, self.shared.max_blocks[self.rank]);
        self.epoch = self.epoch.wrapping_add(1);
        let config = LaunchConfig::new(blocks, THREADS);
        // SAFETY: the tables hold 2 * world valid addresses (staging halves of `half` elements,
        // 16-byte aligned; flag arrays of world * MAX_BLOCKS), peer access is enabled between
        // all GPUs, n <= capacity <= half, input/output hold n elements of this GPU, aligned
        // (checked above); the epoch advances by one per call on every rank as long as every
        // rank makes the same calls (the documented contract; a missing rank makes the others
        // wait, bounded by spin_limit). The buffers stay alive while any kernel may run
        // (Shared's drop synchronises every GPU first).
        unsafe {
            one_shot_all_reduce_f32::launch(
                stream,
                config,
                self.rank as u32,
                self.world_size() as u32,
                n,
                self.half,
                self.epoch,
                self.spin_limit,
                self.shared.status[self.rank].as_device_ptr(),
                self.shared.tables[self.rank].as_device_ptr(),
                input.as_device_ptr(),
                DevicePtr::from_address(output.as_device_ptr().address()),
            )
        }?;
        Ok(())
    }

    /// Reads the status word: fails with [`Error::Timeout`] (and refuses later calls) if a
    /// kernel gave up waiting for a peer (see [`PeerRank::spin_limit`]). Synchronises the
    /// context first.
    pub fn check(&mut self) -> Result<()> {
        self.shared.contexts[self.rank].synchronize()?;
        let status = self.shared.status[self.rank].to_vec()?;
        if status[0] != 0 {
            self.poisoned = true;
            return Err(Error::Timeout { operation: "PeerRank::all_reduce (a peer did not launch its side)", after: std::time::Duration::ZERO });
        }
        Ok(())
    }
}
