//! The sm_90 attention forward: the FlashAttention-3-class kernels of
//! `ferrocuda-kernels-hopper` (TMA into mbarrier rings, `wgmma`, a producer and two consumer
//! warpgroups), behind the same checked call as every other path.
//!
//! Those kernels are `#[kernel]`s whose typed launchers (found by name: `forward_kernel`,
//! `backward_kernel`) declare every operand to the stream's door themselves (session 19: Q, K,
//! V beside the tensor maps, O and LSE as `UncheckedSlice`s, the maps' memory as a slice) and
//! whose entries check their launch and every length; what they cannot check is the maps'
//! contents (a box and swizzle the copy engine obeys, an address it reads), so the launchers
//! are `unsafe` for that alone. This module is the one place that launches them. Before it
//! does, it checks what the maps need and the caller cannot be trusted with:
//! - the shape is one they compute ([`hopper_kernel`]: bf16, `[B, H, S, D]`, D 64, 128 or 256, as
//!   many key/value heads as query heads, `seq_q == seq_kv`, at most 65535 heads in all), on an
//!   sm_90 GPU (their image is `sm_90a`);
//! - every operand holds exactly the shape's elements (checked by the caller,
//!   `attention::attention_forward`, before it gets here) and Q, K, V start 16-byte aligned
//!   (TMA's rule; a misaligned view takes the tensor-core path instead);
//! - the tensor maps are built here, from those checked addresses and the shape, and copied
//!   to device memory on the same stream just before the launch, which passes them beside the
//!   memory they describe;
//! - the stream is not being captured into a graph: the maps are copied from this call's stack,
//!   which a replayed graph would read after it is gone (and the module may not be loaded
//!   inside a capture), so a capturing stream takes the tensor-core path.

use std::marker::PhantomData;

use ferrocuda_host::__private::SliceArg;
use ferrocuda_host::{BufferAccess, DeviceBuffer, DeviceRead, DeviceWrite, LaunchConfig, Stream, TensorDataType, TensorMap, TensorSwizzle, TiledLayout, sys};
use ferrocuda_kernels_hopper::attention::{
    BM, BOX, BOX_D256, ForwardArgs, STAGES, STAGES_DEEP, THREADS, forward_kernel, shared_bytes, shared_bytes_d256, shared_bytes_ostage, shared_bytes_q2,
};
use ferrocuda_kernels_hopper::attention_backward::{GpuBackwardArgs, Problem, backward_kernel, dq_count_len, store_maps};
use half::bf16;

use crate::attention::{Attention, Backward, Layout};
use crate::launchers::Launchers;
use crate::{Element, Result};

/// Largest grid `y` (one block row per batch x head).
const MAX_HEADS: usize = 65_535;

/// The kernel of `ferrocuda-kernels-hopper` that [`attention_forward`](crate::attention::attention_forward)
/// runs for `shape` on a GPU of compute capability `arch` (`90` for sm_90), or `None` when
/// the shape or the GPU is not one those kernels take: `T` bf16, [`Layout::Bhsd`], `head_dim`
/// 64, 128 or 256, `heads_q == heads_kv`, `seq_q == seq_kv`, `batch * heads` at most 65535, and
/// `arch == 90`. The schedule (`_pingpong`, `_pingpong_s3`, the plain `overlap` one, or a
/// `_persistent` form) is the one session 14's H200 runs of every schedule favour at that
/// length (`bench/results/s14-attn/`, docs/kernels/attention.md). D 256 has one schedule
/// (session 22: 64-key tiles, each consumer's intra-warpgroup overlap), `attention_d256` or
/// `attention_d256_causal` (their `_serial` forms are offered by [`hopper_forward_instances`]).
pub fn hopper_kernel<T: Element>(shape: &Attention, arch: u32) -> Option<&'static str> {
    let fits = T::HOPPER
        && arch == 90
        && shape.layout == Layout::Bhsd
        && matches!(shape.head_dim, 64 | 128 | 256)
        && shape.heads_q == shape.heads_kv
        && shape.seq_q == shape.seq_kv
        && shape.seq_q > 0
        && shape.seq_q <= u32::MAX as usize
        && shape.batch.checked_mul(shape.heads_q).is_some_and(|h| (1..=MAX_HEADS).contains(&h));
    if !fits {
        return None;
    }
    let s = shape.seq_q;
    // The schedules measured fastest at each length in session 14's run (one H200, every
    // schedule beside cuDNN in one job: bench/results/s14-attn/run1-h200, "fwd all"), after
    // the overlap fix: the persistent kernels (a block per SM taking query tiles) for short
    // sequences, where a tile's prologue and epilogue weigh most, and for causal D 128 up to 2k
    // (0.83 / 0.90 / 0.975x cuDNN at 512 / 1k / 2k against 0.68 / 0.82 / 0.91 one tile per
    // block); the 3-deep rings at D 128 from 2k to 4k; the plain overlap kernel at D 64 from
    // 1k up (no ping-pong: D 64 is bound by the exponentials, not by the tensor cores).
    // Session 16 (one H200, bench/results/s16-attn/run1-h200 .. run3-h200): the persistent
    // kernel with two Q buffers (`_q2`) for causal D 64 above 512 (1.02-1.06x / 1.03-1.10x the
    // one-buffer kernel at 1k / 2k, two runs); for causal D 128 up to 2k the persistent kernel
    // without the ping-pong turns (1.03x / 1.05x / 1.01x the ping-pong one at 512 / 1k / 2k).
    // Session 21 (one H200, two calls, bench/results/s21-attn/run1-h200, run2-h200): the
    // persistent twins at D 128 S 1k without the mask (538 against 514-515 TFLOP/s, 1.05x, in
    // both calls) and at D 64 S 2k (444-445 against 424-425, 1.05x in both).
    // Session 24 (one H200, two runs in one call, bench/results/s24-attn/mid-h200): at D 128
    // without the mask up to S 1k the chained kernel writing O through shared memory in whole
    // rows (`_chain_ostg`: 1.11x / 1.05x the chained one at S 512 / 1k in both runs, 0.95-0.96
    // / 0.96-0.975x cuDNN).
    Some(match (shape.head_dim, shape.causal) {
        (256, false) => "attention_d256",
        (256, true) => "attention_d256_causal",
        (64, false) if s <= 2048 => "attention_d64_persistent",
        (64, false) => "attention_d64",
        (64, true) if s <= 512 => "attention_d64_causal_pingpong_persistent",
        (64, true) if s <= 2048 => "attention_d64_causal_pingpong_persistent_q2",
        (64, true) => "attention_d64_causal_pingpong",
        (_, false) if s <= 1024 => "attention_d128_pingpong_persistent_chain_ostg",
        (_, false) if (2048..=4096).contains(&s) => "attention_d128_pingpong_s3",
        (_, false) => "attention_d128_pingpong",
        (_, true) if s <= 2048 => "attention_d128_causal_persistent",
        (_, true) if s <= 4096 => "attention_d128_causal_pingpong_s3",
        (_, true) => "attention_d128_causal_pingpong",
    })
}

/// The one-tile-per-block kernels of the forward and their persistent twins (the same
/// schedule on a grid of at most one block per SM, each block taking query tiles until all are
/// done: `ferrocuda_kernels_hopper::attention::attention_body_persistent`).
const FORWARD_TWINS: [[&str; 2]; 11] = [
    ["attention_d64", "attention_d64_persistent"],
    ["attention_d64_pingpong", "attention_d64_pingpong_persistent"],
    ["attention_d64_causal_pingpong", "attention_d64_causal_pingpong_persistent"],
    ["attention_d128_pingpong", "attention_d128_pingpong_persistent"],
    ["attention_d128_causal_pingpong", "attention_d128_causal_pingpong_persistent"],
    ["attention_d128_pingpong_s3", "attention_d128_pingpong_s3_persistent"],
    ["attention_d128_causal_pingpong_s3", "attention_d128_causal_pingpong_s3_persistent"],
    // (After the pairs above: a pick of `_persistent` finds its one-tile twin first.)
    ["attention_d64_causal_pingpong_persistent_q2", "attention_d64_causal_pingpong_persistent"],
    ["attention_d128_causal", "attention_d128_causal_persistent"],
    // Session 23: the chained ping-pong kernel (a pick of it finds its one-tile twin here).
    ["attention_d128_pingpong", "attention_d128_pingpong_persistent_chain"],
    // Session 24: the chained kernel storing O through shared memory, beside the chained one.
    ["attention_d128_pingpong_persistent_chain", "attention_d128_pingpong_persistent_chain_ostg"],
];

/// The instances of the sm_90 forward for `shape` on `arch`, for benchmarks and tests that
/// compare them: [`hopper_kernel`]'s pick first, then its twin (the persistent form of a
/// one-tile-per-block kernel, or the other way round). `None` for D 256, whose one kernel has
/// no twin.
pub fn hopper_kernels<T: Element>(shape: &Attention, arch: u32) -> Option<[&'static str; 2]> {
    let picked = hopper_kernel::<T>(shape, arch)?;
    let pair = FORWARD_TWINS.iter().find(|pair| pair.contains(&picked))?;
    Some(if pair[0] == picked { *pair } else { [pair[1], pair[0]] })
}

/// Every overlapped sm_90 forward instance (the `_serial` ones aside, but for D 256's) of `ferrocuda-kernels-hopper`, by
/// head dimension and mask: the schedules that [`hopper_forward_instances`] offers for a shape.
const FORWARD_INSTANCES: [&str; 49] = [
    "attention_d64",
    "attention_d64_persistent",
    "attention_d64_persistent_q2",
    "attention_d64_pingpong",
    "attention_d64_pingpong_persistent",
    "attention_d64_s3",
    "attention_d64_pingpong_s3",
    "attention_d64_poly4",
    "attention_d64_poly6",
    "attention_d64_causal",
    "attention_d64_causal_pingpong",
    "attention_d64_causal_pingpong_persistent",
    "attention_d64_causal_pingpong_persistent_q2",
    "attention_d64_causal_s3",
    "attention_d64_causal_pingpong_s3",
    "attention_d64_causal_pingpong_poly4",
    "attention_d64_causal_pingpong_poly6",
    "attention_d64_causal_pingpong_persistent_poly4",
    "attention_d64_causal_pingpong_persistent_poly6",
    "attention_d128",
    "attention_d128_pingpong",
    "attention_d128_pingpong_persistent",
    "attention_d128_pingpong_persistent_q2",
    "attention_d128_persistent",
    "attention_d128_persistent_q2",
    "attention_d128_s3",
    "attention_d128_pingpong_s3",
    "attention_d128_pingpong_s3_persistent",
    "attention_d128_causal",
    "attention_d128_causal_pingpong",
    "attention_d128_causal_pingpong_persistent",
    "attention_d128_causal_pingpong_persistent_q2",
    "attention_d128_causal_persistent",
    "attention_d128_causal_persistent_q2",
    "attention_d128_causal_s3",
    "attention_d128_causal_pingpong_s3",
    "attention_d128_causal_pingpong_s3_persistent",
    // Session 23: the persistent ping-pong kernels with the work items chained (each consumer
    // issues the next item's first scores behind this item's last P·V).
    "attention_d128_pingpong_persistent_chain",
    "attention_d128_pingpong_persistent_chain_s3",
    "attention_d128_causal_pingpong_persistent_chain",
    // Session 24: the chained ping-pong kernel writing O through shared memory (whole rows, 16
    // bytes a lane, or one bulk copy a row).
    "attention_d128_pingpong_persistent_chain_ostg",
    "attention_d128_pingpong_persistent_chain_obulk",
    // Session 24's trials for the final call: the other persistent picks storing O through
    // shared memory (whole rows, 16 bytes a lane).
    "attention_d128_causal_persistent_ostg",
    "attention_d64_persistent_ostg",
    "attention_d64_causal_pingpong_persistent_ostg",
    "attention_d256",
    "attention_d256_causal",
    // (D 256's serial schedules, offered for comparison: no other D 256 schedule exists.)
    "attention_d256_serial",
    "attention_d256_causal_serial",
];

/// Every overlapped sm_90 forward instance that computes `shape` on `arch` (same head dimension
/// and mask as [`hopper_kernel`]'s pick, any schedule: one-tile-per-block or persistent,
/// ping-pong or not, 2- or 3-deep rings), the pick first; empty when the sm_90 path does not
/// take the shape. For benchmarks that time every schedule (`BENCH_FWD_ALL=1` in
/// `bench_attention`) and for [`attention_forward_sm90`](crate::attention::attention_forward_sm90).
pub fn hopper_forward_instances<T: Element>(shape: &Attention, arch: u32) -> Vec<&'static str> {
    let Some(picked) = hopper_kernel::<T>(shape, arch) else {
        return Vec::new();
    };
    let prefix = format!("attention_d{}{}", shape.head_dim, if shape.causal { "_causal" } else { "" });
    let mut names = vec![picked];
    names.extend(FORWARD_INSTANCES.iter().copied().filter(|name| {
        let rest = name.strip_prefix(prefix.as_str());
        *name != picked && rest.is_some_and(|rest| shape.causal || !rest.starts_with("_causal"))
    }));
    names
}

/// Runs `kernel` (from [`hopper_forward_instances`]) for `shape`. Returns `Ok(false)`, queueing nothing,
/// when an input is not 16-byte aligned or `stream` is being captured (the caller then takes
/// another path).
///
/// The caller has checked every operand's length against `shape` (`q`, `out`:
/// `shape.q_len()`, `k`, `v`: `shape.kv_len()`, `lse`: `shape.q_rows()`), and that
/// `kernel` is one of [`hopper_kernels`] for this shape and the stream's GPU.
#[allow(clippy::too_many_arguments)]
pub(crate) fn attention_forward<T: Element>(
    stream: &Stream,
    kernel: &'static str,
    q: &(impl DeviceRead<T> + ?Sized),
    k: &(impl DeviceRead<T> + ?Sized),
    v: &(impl DeviceRead<T> + ?Sized),
    out: &mut (impl DeviceWrite<T> + ?Sized),
    lse: &mut (impl DeviceWrite<f32> + ?Sized),
    shape: Attention,
) -> Result<bool> {
    let (head_dim, seq_len, heads) = (shape.head_dim as u64, shape.seq_q as u64, (shape.batch * shape.heads_q) as u64);
    let len = (heads * seq_len * head_dim) as usize;
    let inputs = [q.kernel_arg(), k.kernel_arg(), v.kernel_arg()];
    // Defence in depth: the caller's checks, again, where the unsafe launch relies on them.
    assert!(inputs.iter().all(|a| a.len() == len) && out.kernel_arg().len() == len && lse.kernel_arg().len() == (heads * seq_len) as usize);
    if inputs.iter().any(|a| !a.ptr().is_multiple_of(16)) || !out.kernel_arg().ptr().is_multiple_of(4) {
        return Ok(false);
    }
    // The maps are copied from this stack frame, and the work counter lives in a buffer freed
    // on return: no capture may record this call (audit 2026-11-28, S1). A capture running or
    // starting takes the other path; until the stretch ends none can start on `stream`.
    let Some(_stretch) = outside_capture(stream, "attention_forward (sm_90)")? else { return Ok(false) };
    let context = stream.context();
    // A capture of this same call later takes the tensor-core path (above), and no module can
    // load inside a capture: load that path's module now, while loading is allowed (a captured
    // forward after a warm-up call failed with ModuleNotLoadedInCapture on an H200).
    context.embedded_image(&ferrocuda_kernels_device::KERNELS)?;
    // The map's box follows D (below): only the D 256 instances take D 256 (their box has 64
    // rows, the others' 128), as `hopper_forward_instances` names them.
    assert_eq!(kernel.starts_with("attention_d256"), head_dim == 256, "{kernel} for head_dim {head_dim}");
    let Some(instance) = forward_kernel(kernel) else {
        return Err(crate::error::unsupported("kernel", kernel, "an sm_90 forward instance (hopper_forward_instances)"));
    };
    let function = (instance.function)(context)?;
    let stages = if kernel.contains("_s3") { STAGES_DEEP } else { STAGES };
    // The `_q2` kernels (persistent, two Q buffers) take one more tile and 40 bytes.
    let shared = if head_dim == 256 {
        shared_bytes_d256()
    } else if kernel.ends_with("_q2") {
        shared_bytes_q2(head_dim as u32, stages)
    } else if kernel.ends_with("_ostg") || kernel.ends_with("_obulk") {
        // Session 24: the O staging buffer after the barriers.
        shared_bytes_ostage(head_dim as u32, stages)
    } else {
        shared_bytes(head_dim as u32, stages)
    };
    function.set_max_dynamic_shared_bytes(shared)?;
    // The persistent kernels: a block per SM at most, taking the `⌈S/128⌉·B·H` query tiles
    // one after the other (the next from a counter, zeroed below with the maps' buffer).
    let persistent = kernel.contains("_persistent");
    let items = u32::try_from((seq_len as u32).div_ceil(BM) as u64 * heads).ok();
    let grid = match items {
        _ if !persistent => ((seq_len as u32).div_ceil(BM), heads as u32),
        Some(items) => (items.min(context.device().multiprocessor_count()?).max(1), 1),
        None => return Ok(false),
    };
    // The maps: `[B·H, S, D]` bf16 (dimensions innermost first), boxes of 64 columns x 128
    // rows x 1 head (D 256: 64 rows, `BOX_D256`), 128-byte swizzle, as the kernels' contract asks.
    let dims = [head_dim, seq_len, heads];
    let strides = [2 * head_dim, 2 * head_dim * seq_len];
    let box_dims = if head_dim == 256 { &BOX_D256 } else { &BOX };
    let layout = TiledLayout { data_type: TensorDataType::Bf16, dims: &dims, strides_bytes: &strides, box_dims, swizzle: TensorSwizzle::B128 };
    // The maps are encoded with the stream's context current; the caller's current context
    // comes back when `_current` drops (session 21: a created context is not left current on
    // the caller's thread, where another library's runtime would allocate in it, G20R-4).
    let _current = context.push_current()?;
    let mut words = [[0u64; 16]; 3];
    for (word, input) in words.iter_mut().zip(&inputs) {
        // SAFETY: `input.ptr()` is 16-byte aligned (checked above) device memory of the stream's
        // context (the door refuses the launch below otherwise) holding exactly `len =
        // B·H·S·D` elements (checked), the array the layout describes; it stays allocated
        // while `q`/`k`/`v` are borrowed, and the launch that copies through the map declares
        // a read of it, so the memory's release and later writers wait for the kernel.
        *word = unsafe { TensorMap::encode_tiled(input.ptr(), &layout) }?.words();
    }
    // Three maps, then (persistent kernels) the work counter: the first word after them,
    // zeroed here and not touched by the maps' copy.
    let mut maps = DeviceBuffer::<u64>::zeroed_async(stream, 4 * 16)?;
    let maps_ptr = maps.device_ptr();
    stream.enqueue("attention_forward (sm_90): maps", &[BufferAccess::write(&mut maps)], |raw| -> Result<()> {
        let map_bytes = std::mem::size_of_val(&words);
        // SAFETY: `maps` holds 4 x 128 bytes of device memory of this context, declared written
        // above; the source is `words` on this stack frame, which the driver has consumed when
        // the call returns (a pageable host-to-device copy is staged before it returns).
        check("cuMemcpyHtoDAsync", unsafe { sys::cuMemcpyHtoDAsync_v2(maps_ptr, words.as_ptr().cast(), map_bytes, raw.get()) })
    })?;
    // The launch declares every operand itself: the maps' words and Q, K, V (read), O, LSE and
    // the counter (written), so it is ordered after every earlier use of them and their
    // release waits for it.
    let whole = maps.kernel_arg_mut();
    let map_words = Part::<u64>::of::<u64>(whole, 0, 48);
    let mut counter = Part::<u32>::of::<u64>(whole, 48, 1);
    let (q, k, v) = (Same::<bf16>::of(q), Same::<bf16>::of(k), Same::<bf16>::of(v));
    let (mut out, mut lse) = (Part::<bf16>::all(out), Part::<f32>::all(lse));
    let args = ForwardArgs {
        maps: ferrocuda_host::DevicePtr::from_address(map_words.0.ptr()),
        map_words: &map_words,
        q: &q,
        k: &k,
        v: &v,
        o: &mut out,
        lse: &mut lse,
        seq_len: seq_len as u32,
        scale_log2: shape.scale.unwrap_or(1.0 / (head_dim as f32).sqrt()) * std::f32::consts::LOG2_E,
        heads: heads as u32,
        next: &mut counter,
    };
    let config = LaunchConfig::new(grid, THREADS).with_shared_bytes(shared);
    // SAFETY: the kernel's contract (`ferrocuda_kernels_hopper::attention`), which is the maps
    // alone (the kernel checks everything else and writes nothing otherwise): `map_words`
    // holds, copied above in stream order, maps of exactly Q, K and V as `[B·H, S, D]` bf16
    // (the addresses and lengths checked above), box `BOX` (D 256, whose instances are the
    // only ones taking D 256: `BOX_D256`), 128-byte swizzle, and nothing
    // writes them during the launch.
    unsafe { (instance.launch)(stream, config, args) }?;
    // `maps` is freed in stream order after the kernel (its use was recorded by the door).
    drop(maps);
    Ok(true)
}

/// An operand of element type `T` as the same memory of `U`, a type of the same size and
/// alignment (bf16 or f16 as a kernel's `bf16` or `u16`: one table of instances takes one
/// type), read-only.
pub(crate) struct Same<'a, U>(SliceArg<'a>, PhantomData<fn() -> U>);

impl<'a, U> Same<'a, U> {
    /// `x`'s memory, as `U`s.
    pub(crate) fn of<T>(x: &'a (impl DeviceRead<T> + ?Sized)) -> Same<'a, U> {
        // At run time: the generic callers are instantiated for every element type, and take
        // this path for the 16-bit ones only.
        assert!(size_of::<T>() == size_of::<U>() && align_of::<T>() == align_of::<U>(), "an operand retyped to another size");
        Same(x.kernel_arg(), PhantomData)
    }
}

// SAFETY: the memory, length (same element size) and use tracking of a `DeviceRead<T>`
// operand, borrowed for `'a`; every bit pattern is a valid `U` (the kernels' `bf16` or `u16`
// for the operands' bf16 or f16, `f32` for `f32`).
unsafe impl<U> DeviceRead<U> for Same<'_, U> {
    fn kernel_arg(&self) -> SliceArg<'_> {
        self.0
    }
}

/// A driver result as this crate's error.
fn check(call: &'static str, code: sys::CUresult) -> Result<()> {
    if code == sys::CUresult::CUDA_SUCCESS { Ok(()) } else { Err(ferrocuda_host::Error::from(ferrocuda_host::DriverError { call, code }).into()) }
}

/// The kernel of `ferrocuda_kernels_hopper::attention_backward` that
/// [`attention_backward`](crate::attention::attention_backward) runs for `shape` on a GPU of
/// compute capability `arch`, or `None` when it takes another path: `T` bf16 or f16,
/// `head_dim` 64 or 128, either layout, grouped-query heads, any lengths (at least one query
/// and one key), causal or not, `batch * heads_kv` at most 65535, fewer than 2^31 padded
/// query rows in all, and `arch == 90`.
///
/// Session 17 (one H200, two runs, `bench/results/s17-attn/`): for bf16 at D 64 without the mask
/// and at most 8 query steps per key block (`⌈seq_q / 64⌉ · heads_q / heads_kv`, S 512 in the
/// benchmark's shapes), the persistent form of the `_red` schedule,
/// `attention_backward_d64_bf16_red_persistent` (1.04x it in both runs; at 16 steps, S 1k,
/// 0.99-1.00x, so not there).
///
/// Session 24 (one H200, two runs in one call, `bench/results/s24-attn/mid-h200`): for bf16 at
/// D 128 the schedule storing dK and dV through shared memory, one bulk copy a row (`_obulk`:
/// without the mask 1.13 / 1.06 / 1.03-1.06 / 1.02-1.03x the bulk schedule at S 512 / 1k / 2k /
/// 4k, with it 1.14 / 1.12 / 1.07 / 1.02-1.07x `_late`, in both runs).
pub fn hopper_backward_kernel<T: Element>(shape: &Attention, arch: u32) -> Option<&'static str> {
    let base = backward_schedule::<T>(shape, arch)?;
    let steps = shape.seq_q.div_ceil(64) * (shape.heads_q / shape.heads_kv);
    Some(match base {
        "attention_backward_d64_bf16_red" if steps <= 8 => "attention_backward_d64_bf16_red_persistent",
        "attention_backward_d128_bf16" => "attention_backward_d128_bf16_obulk",
        "attention_backward_d128_causal_bf16_late" => "attention_backward_d128_causal_bf16_late_obulk",
        _ => base,
    })
}

/// [`hopper_backward_kernel`]'s schedule with one block per key block (or pair of them): the
/// pick before session 17, and the row of [`hopper_backward_kernels`]' table.
fn backward_schedule<T: Element>(shape: &Attention, arch: u32) -> Option<&'static str> {
    let fits = T::HOPPER_BACKWARD
        && arch == 90
        && (shape.head_dim == 64 || shape.head_dim == 128)
        && shape.heads_kv > 0
        && shape.heads_q.is_multiple_of(shape.heads_kv)
        && shape.seq_q > 0
        && shape.seq_kv > 0
        && shape.seq_q <= (u32::MAX / 2) as usize
        && shape.seq_kv <= (u32::MAX / 2) as usize
        // The padded lse/delta rows are addressed with i32 TMA coordinates.
        && shape.batch.checked_mul(shape.heads_q).and_then(|r| r.checked_mul(shape.seq_q.div_ceil(64) * 64)).is_some_and(|r| r < i32::MAX as usize)
        && shape.batch.checked_mul(shape.heads_kv).is_some_and(|h| (1..=MAX_HEADS).contains(&h));
    if !fits {
        return None;
    }
    // D 64: the `_red` schedule (the consumers add their smaller dQ tiles themselves), 3-6%
    // faster than the bulk one there on an H200; D 128: the bulk one, 1.2-1.3x the `_red` one,
    // and with the causal mask its `_late` form (dV and dK after the exchange, one key block
    // per block), 1-4% faster there than the early, paired one (bench/results/s11-bwd-run1-h200,
    // s11-bwd-run2-h200).
    Some(match (shape.head_dim, shape.causal, T::F16) {
        (64, false, false) => "attention_backward_d64_bf16_red",
        (64, true, false) => "attention_backward_d64_causal_bf16_red",
        (_, false, false) => "attention_backward_d128_bf16",
        (_, true, false) => "attention_backward_d128_causal_bf16_late",
        (64, false, true) => "attention_backward_d64_f16_red",
        (64, true, true) => "attention_backward_d64_causal_f16_red",
        (_, false, true) => "attention_backward_d128_f16",
        (_, true, true) => "attention_backward_d128_causal_f16_late",
    })
}

/// The instances of the sm_90 backward for `shape` on `arch`, for benchmarks and tests that
/// compare them, [`hopper_backward_kernel`]'s first (where that is a persistent one, it stands
/// in the place of its one-block-per-key-block form, which is then among the
/// [`hopper_backward_trial_kernels`]): the bulk one (no suffix: the consumers
/// hand their `dQ` tiles to a warp that adds them with the copy engine; dV and dK issued
/// before `dSᵀ` is exchanged; staggered query walks, or with the causal mask two key blocks
/// per block), `_red` (each consumer adds its `dQ` tile itself with `red.global.add.v4.f32`;
/// the one picked at D 64) and `_late` (bulk `dQ`, but dV and dK issued after the exchange, no
/// stagger, one key block per block: session 10's order; the one picked at D 128 with the
/// causal mask).
pub fn hopper_backward_kernels<T: Element>(shape: &Attention, arch: u32) -> Option<[&'static str; 3]> {
    const TWINS: [[&str; 3]; 8] = [
        ["attention_backward_d64_bf16_red", "attention_backward_d64_bf16", "attention_backward_d64_bf16_late"],
        ["attention_backward_d64_causal_bf16_red", "attention_backward_d64_causal_bf16", "attention_backward_d64_causal_bf16_late"],
        ["attention_backward_d128_bf16", "attention_backward_d128_bf16_red", "attention_backward_d128_bf16_late"],
        ["attention_backward_d128_causal_bf16_late", "attention_backward_d128_causal_bf16", "attention_backward_d128_causal_bf16_red"],
        ["attention_backward_d64_f16_red", "attention_backward_d64_f16", "attention_backward_d64_f16_late"],
        ["attention_backward_d64_causal_f16_red", "attention_backward_d64_causal_f16", "attention_backward_d64_causal_f16_late"],
        ["attention_backward_d128_f16", "attention_backward_d128_f16_red", "attention_backward_d128_f16_late"],
        ["attention_backward_d128_causal_f16_late", "attention_backward_d128_causal_f16", "attention_backward_d128_causal_f16_red"],
    ];
    let base = backward_schedule::<T>(shape, arch)?;
    let picked = hopper_backward_kernel::<T>(shape, arch)?;
    let row = TWINS.iter().find(|names| names[0] == base).copied()?;
    Some([picked, row[1], row[2]])
}

/// The sm_90 backward's trial instance for `shape` on `arch`, if it has one, for benchmarks and
/// tests beside [`hopper_backward_kernels`]; `attention_backward_sm90` runs it by name:
/// - bf16, D 128, causal (where [`hopper_backward_kernel`] picks `_late`):
///   `attention_backward_d128_causal_bf16_late_lpt`, the `_late` schedule with its blocks
///   longest walk first within groups of heads
///   (`ferrocuda_kernels_hopper::attention::longest_first`: the grid ends with its shortest
///   walks; session 12: slower than the pick);
/// - bf16 without the mask (session 17): the persistent form of the schedule,
///   `attention_backward_d128_bf16_persistent` (bulk `dQ`; 0.96-0.98x the pick on an H200, not
///   picked) or `attention_backward_d64_bf16_red_persistent` (the pick at up to 8 steps a key
///   block; otherwise 0.99-1.00x): a grid of at most one block per SM, each block taking key
///   blocks `block, block + grid, ..` of all heads in turn, the next one's first Q and dO tiles
///   loaded during this one's last steps and its K and V while this one's dK and dV are stored
///   (the one-block-per-key-block grid pays a block's start and end per 128 keys: 8 steps at
///   S 512); where that is the pick, the one-block-per-key-block `attention_backward_d64_bf16_red`.
pub fn hopper_backward_trial_kernel<T: Element>(shape: &Attention, arch: u32) -> Option<&'static str> {
    hopper_backward_trial_kernels::<T>(shape, arch).first().copied()
}

/// Every trial instance of the sm_90 backward for `shape` on `arch`, [`hopper_backward_trial_kernel`]'s
/// first: for bf16 without the mask also the persistent form that takes its key blocks from a
/// counter (`_persistent_dyn`: a block that falls behind takes fewer) instead of in turn.
/// Where [`hopper_backward_kernel`] picks the persistent `_red` schedule (bf16, D 64, short
/// walks), its one-block-per-key-block form `attention_backward_d64_bf16_red` is the first trial.
/// Last, for bf16 D 128 without the mask and D 64 with or without it, `_red_cvt` (session 20):
/// the `_red` schedule converting dQ in the kernel (the last warp to add to its rows of a tile
/// converts them; no conversion kernel; 0.39-0.65x `_red` at D 64 on an H200: the per-step
/// fence costs more than the pass it saves); then `_cvt` (session 21): the bulk schedule (the
/// D 128 pick's, or with the causal mask `_late`'s) converting dQ in the kernel, where the
/// adding warp waits for its bulk reductions one (`_cvt`) or two (`_cvt2`) steps late and
/// arrives once per tile share, so the consumers never fence (the last arrival converts the
/// share; no conversion kernel). Session 24: dK and dV stored through shared memory in whole
/// rows: for bf16 D 128 the pick is the `_obulk` form (one bulk copy a row), so the schedule it
/// stands for (the bulk one, or `_late` with the mask) is the first trial and `_ostg` (16 bytes
/// a lane) the last; at D 64 the `_red` schedule's `_obulk` form is the last trial.
pub fn hopper_backward_trial_kernels<T: Element>(shape: &Attention, arch: u32) -> Vec<&'static str> {
    let picked = hopper_backward_kernel::<T>(shape, arch);
    match backward_schedule::<T>(shape, arch) {
        // Session 24: the `_obulk` forms are the picks; the schedules they stand for come first.
        Some(base @ "attention_backward_d128_causal_bf16_late") => vec![
            base,
            "attention_backward_d128_causal_bf16_late_lpt",
            "attention_backward_d128_causal_bf16_late_cvt2",
            "attention_backward_d128_causal_bf16_late_ostg",
        ],
        Some(base @ "attention_backward_d128_bf16") => vec![
            base,
            "attention_backward_d128_bf16_persistent",
            "attention_backward_d128_bf16_persistent_dyn",
            "attention_backward_d128_bf16_red_cvt",
            "attention_backward_d128_bf16_cvt",
            "attention_backward_d128_bf16_cvt2",
            "attention_backward_d128_bf16_ostg",
        ],
        Some(base @ "attention_backward_d64_bf16_red") if picked != Some(base) => {
            vec![
                base,
                "attention_backward_d64_bf16_red_persistent_dyn",
                "attention_backward_d64_bf16_red_cvt",
                "attention_backward_d64_bf16_cvt2",
                "attention_backward_d64_bf16_red_obulk",
            ]
        }
        Some("attention_backward_d64_bf16_red") => vec![
            "attention_backward_d64_bf16_red_persistent",
            "attention_backward_d64_bf16_red_persistent_dyn",
            "attention_backward_d64_bf16_red_cvt",
            "attention_backward_d64_bf16_cvt2",
            "attention_backward_d64_bf16_red_obulk",
        ],
        Some("attention_backward_d64_causal_bf16_red") => {
            vec!["attention_backward_d64_causal_bf16_red_cvt", "attention_backward_d64_causal_bf16_late_cvt2", "attention_backward_d64_causal_bf16_red_obulk"]
        }
        _ => vec![],
    }
}

/// Every sm_90 backward instance that may run `shape` on `arch` by name: [`hopper_backward_kernels`]
/// and the [`hopper_backward_trial_kernels`].
pub(crate) fn backward_instances<T: Element>(shape: &Attention, arch: u32) -> Option<Vec<&'static str>> {
    let mut names = hopper_backward_kernels::<T>(shape, arch)?.to_vec();
    names.extend(hopper_backward_trial_kernels::<T>(shape, arch));
    Some(names)
}

/// The 4-D tensor map layout of a `[B, H, S, D]` or `[B, S, H, D]` operand with `heads` heads
/// and `seq` positions (dims innermost first; the kernel's coordinates follow the same order).
pub(crate) fn backward_map_dims(shape: &Attention, heads: usize, seq: usize) -> ([u64; 4], [u64; 3], &'static [u32; 4]) {
    use ferrocuda_kernels_hopper::attention_backward::{BOX_BHSD, BOX_BSHD};
    let (d, h, s, b) = (shape.head_dim as u64, heads as u64, seq as u64, shape.batch as u64);
    match shape.layout {
        Layout::Bhsd => ([d, s, h, b], [2 * d, 2 * d * s, 2 * d * s * h], &BOX_BHSD),
        Layout::Bshd => ([d, h, s, b], [2 * d, 2 * d * h, 2 * d * h * s], &BOX_BSHD),
    }
}

/// The launch of the backward's prep over `rows` padded rows (a multiple of 64): a thread per
/// row in blocks of [`PREP_THREADS`](ferrocuda_kernels_device::attention_backward::PREP_THREADS)
/// (its launch bounds), so each warp holds 32 rows of one head and reads them together.
pub(crate) fn prep_grid(rows: usize) -> ferrocuda_host::LaunchConfig {
    use ferrocuda_kernels_device::attention_backward::PREP_THREADS;
    ferrocuda_host::LaunchConfig::new(rows.div_ceil(PREP_THREADS as usize).clamp(1, 1 << 22) as u32, PREP_THREADS)
}

/// Most chunks of 8 dQ elements the conversion's grid covers (a thread per chunk, up to 2^20
/// blocks of 256: [`crate::chunk_grid`]); larger outputs take another path.
const DQ_CONVERT_CHUNKS: usize = (1 << 20) * crate::BLOCK as usize;

/// The launch of dQ's conversion: a thread per chunk of 8 elements.
pub(crate) fn dq_convert_grid(shape: &Attention) -> ferrocuda_host::LaunchConfig {
    crate::chunk_grid(shape.q_len() / 8)
}

/// `f32` elements of the tensor maps at the start of the sm_90 backward's scratch (six maps of
/// 128 bytes, then 128 bytes for the `_dyn` instances' work-unit counter).
const MAP_F32S: usize = 2 * ferrocuda_kernels_hopper::attention_backward::MAPS_AREA_WORDS;

/// The length of the `f32` scratch area with which the sm_90 backward runs on memory its
/// caller owns (`attention::attention_backward_with_scratch`): the six tensor maps, the padded `lse·log2 e` and
/// `delta` rows (`B·Hq·⌈seq_q/64⌉·64` each), the `dQ` accumulator (`head_dim` times that) and
/// the `_red_cvt` trial instances' arrival counters (eight per 64 rows; session 20).
pub fn backward_scratch_len_sm90(shape: &Attention) -> usize {
    let rows = shape.batch * shape.heads_q * shape.seq_q.div_ceil(64) * 64;
    MAP_F32S + rows * (2 + shape.head_dim) + dq_count_len(rows)
}

/// A part of memory this module holds mutably borrowed for a whole call (the backward's
/// scratch, the forward's maps buffer, an output), as a kernel argument of `U`s: the memory's own use
/// tracking, another address and length inside it.
pub(crate) struct Part<'a, U = f32>(SliceArg<'a>, PhantomData<fn() -> U>);

impl<'a, U> Part<'a, U> {
    /// All of output `x`, as `U`s (of the size of `T`s: bf16 or f16 as a kernel's `bf16` or
    /// `u16`, one type for every instance of a table).
    pub(crate) fn all<T>(x: &'a mut (impl DeviceWrite<T> + ?Sized)) -> Part<'a, U> {
        let whole = x.kernel_arg_mut();
        Part::of::<T>(whole, 0, whole.len())
    }

    /// Elements `start .. start + len` of `whole` (the slice argument of a `W` buffer), as
    /// `U`s: checked to lie inside it, to be whole `U`s and aligned for them.
    pub(crate) fn of<W>(whole: SliceArg<'a>, start: usize, len: usize) -> Part<'a, U> {
        // SAFETY: every caller passes the slice argument of a `W` buffer (`Part::all`'s `T`,
        // the scratch's `f32`s, the maps' `u64`s), and every `U` this module names is plain data
        // (`f32`, `u32`, `u64`, the 16-bit floats' bits: any bits valid).
        let part = unsafe { whole.part_as::<W, U>(start, len) };
        Part(part.expect("a part of the scratch outside it, or not of whole aligned elements"), PhantomData)
    }
}

// SAFETY: a `Part` is made (`Part::of`, `Part::all`) from the slice argument of device memory
// that this module holds mutably borrowed for the whole call, and lies inside it, of whole
// aligned `U`s (plain data: `f32`, `u32`, `u64`, the 16-bit floats' bits, any bits valid); its use tracking is that memory's. The
// parts of one call do not overlap.
unsafe impl<U> DeviceRead<U> for Part<'_, U> {
    fn kernel_arg(&self) -> SliceArg<'_> {
        self.0
    }
}
// SAFETY: as above; each part is the only live value giving access to its elements.
unsafe impl<U> DeviceWrite<U> for Part<'_, U> {
    fn kernel_arg_mut(&mut self) -> SliceArg<'_> {
        self.0
    }
}

/// Runs the sm_90 backward (`kernel`, from [`hopper_backward_kernel`]): the padded `lse`/`delta`
/// rows, the tensor maps, the kernel, dQ's conversion. Its scratch is `scratch` when that is at
/// least [`backward_scratch_len_sm90`] long and 128-byte aligned (then nothing is allocated and
/// the call may be recorded into a CUDA graph), otherwise one allocation on `stream`. Returns
/// `Ok(false)`, queueing nothing, when an input is not 16-byte aligned, an output not 4-byte
/// aligned, or `stream` is being captured without such a scratch (the caller then takes
/// another path).
///
/// The caller has checked every operand's length against `shape`.
pub(crate) fn attention_backward<T: Element>(
    stream: &Stream,
    kernel: &'static str,
    operands: &mut Backward<'_, T>,
    scratch: Option<&mut (impl DeviceWrite<f32> + ?Sized)>,
    shape: Attention,
) -> Result<bool> {
    use ferrocuda_kernels_device::attention_backward::hopper_padded_seq;
    use ferrocuda_kernels_hopper::attention_backward::{MAP_WORDS, STATS_BOX, THREADS, blocks_x, padded_seq, shared_bytes};
    let (head_dim, kernel_shape) = shape.check()?;
    let (q, k, v, out, dout, lse) = (operands.q, operands.k, operands.v, operands.out, operands.dout, operands.lse);
    let (dq, dk, dv) = (&mut *operands.dq, &mut *operands.dk, &mut *operands.dv);
    let inputs = [q.kernel_arg(), k.kernel_arg(), v.kernel_arg(), dout.kernel_arg()];
    // Defence in depth: the caller's checks, again, where the unsafe launch relies on them.
    let lens = [shape.q_len(), shape.kv_len(), shape.kv_len(), shape.q_len()];
    assert!(inputs.iter().zip(lens).all(|(a, len)| a.len() == len));
    assert!(dk.kernel_arg_mut().len() == shape.kv_len() && dv.kernel_arg_mut().len() == shape.kv_len());
    if inputs.iter().any(|a| !a.ptr().is_multiple_of(16))
        || !dk.kernel_arg_mut().ptr().is_multiple_of(4)
        || !dv.kernel_arg_mut().ptr().is_multiple_of(4)
        // The instances converting dQ themselves write it two elements at a time.
        || !dq.kernel_arg_mut().ptr().is_multiple_of(4)
        || shape.q_len() / 8 > DQ_CONVERT_CHUNKS
    {
        return Ok(false);
    }
    let need = backward_scratch_len_sm90(&shape);
    let given = scratch.filter(|s| {
        let arg = s.kernel_arg();
        arg.len() >= need && arg.ptr().is_multiple_of(128)
    });
    // Without the caller's scratch, one allocated here and freed on return: no capture may
    // record the call then (S1); a capture running or starting takes the other path.
    let _stretch = match given {
        Some(_) => None,
        None => match outside_capture(stream, "attention_backward (sm_90)")? {
            Some(stretch) => Some(stretch),
            None => return Ok(false),
        },
    };
    let (seq_q, seq_kv) = (shape.seq_q as u32, shape.seq_kv as u32);
    // The persistent instances: at most a block per SM, each taking the `⌈seq_kv/128⌉ · B·Hkv`
    // key blocks `block, block + grid, ..`; the others a block per key block (or pair).
    let grid = if kernel.contains("_persistent") {
        let Some(units) = u32::try_from(seq_kv.div_ceil(128) as u64 * (shape.batch * shape.heads_kv) as u64).ok() else { return Ok(false) };
        (units.min(stream.context().device().multiprocessor_count()?).max(1), 1)
    } else {
        (blocks_x(seq_kv, shape.causal && !kernel.contains("_late")), (shape.batch * shape.heads_kv) as u32)
    };
    let seq_pad = padded_seq(seq_q);
    debug_assert_eq!(seq_pad, hopper_padded_seq(seq_q));
    let rows = shape.batch * shape.heads_q * seq_pad as usize;
    let context = stream.context();
    // The fallback's module too, while loading is allowed (see `attention_forward`).
    context.embedded_image(&ferrocuda_kernels_device::KERNELS)?;
    let Some(instance) = backward_kernel(kernel) else {
        return Err(crate::error::unsupported("kernel", kernel, "an sm_90 backward instance (hopper_backward_kernels)"));
    };
    let function = (instance.function)(context)?;
    let shared = shared_bytes(head_dim);
    function.set_max_dynamic_shared_bytes(shared)?;
    // The scratch: the caller's, or one allocation (zeroed: the dQ accumulator must start at 0).
    let mut owned = None;
    let zero_here = given.is_some();
    let whole = match given {
        Some(s) => s.kernel_arg_mut(),
        None => owned.insert(DeviceBuffer::<f32>::zeroed_async(stream, need)?).kernel_arg_mut(),
    };
    if zero_here {
        // The accumulator and the counters after it, one range (a part of its own, gone before
        // the call's parts are made: they do not overlap).
        let mut zeroed = Part::<u32>::of::<f32>(whole, MAP_F32S + 2 * rows, rows * shape.head_dim + dq_count_len(rows));
        let (pa, words) = (zeroed.0.ptr(), zeroed.0.len());
        stream.enqueue("attention_backward (sm_90): zero dQ", &[zeroed.kernel_arg_mut().write("dq_acc")], |raw| {
            // SAFETY: `words` 32-bit words of device memory of this context at `pa` (a part of
            // the caller's scratch, held mutably borrowed, 4-byte aligned), declared written
            // above.
            check("cuMemsetD32Async", unsafe { sys::cuMemsetD32Async(pa, 0, words, raw.get()) })
        })?;
    }
    let (mut maps_area, mut lse2, mut delta, mut dq_acc, mut dq_count) = (
        Part::<u64>::of::<f32>(whole, 0, MAP_F32S),
        Part::<f32>::of::<f32>(whole, MAP_F32S, rows),
        Part::<f32>::of::<f32>(whole, MAP_F32S + rows, rows),
        Part::<f32>::of::<f32>(whole, MAP_F32S + 2 * rows, rows * shape.head_dim),
        Part::<u32>::of::<f32>(whole, MAP_F32S + (2 + shape.head_dim) * rows, dq_count_len(rows)),
    );
    <T as Launchers>::attention_backward_prep(stream, prep_grid(rows), out, dout, lse, &mut lse2, &mut delta, head_dim, kernel_shape)?;
    let data_type = if T::F16 { TensorDataType::F16 } else { TensorDataType::Bf16 };
    // The maps are encoded with the stream's context current; the caller's current context
    // comes back when `_current` drops (session 21: a created context is not left current on
    // the caller's thread, where another library's runtime would allocate in it, G20R-4).
    let _current = context.push_current()?;
    let mut words = [[0u64; 16]; 6];
    for (i, (word, input)) in words.iter_mut().zip(&inputs).enumerate() {
        let (heads, seq) = if i == 0 || i == 3 { (shape.heads_q, shape.seq_q) } else { (shape.heads_kv, shape.seq_kv) };
        let (dims, strides, box_dims) = backward_map_dims(&shape, heads, seq);
        let layout = TiledLayout { data_type, dims: &dims, strides_bytes: &strides, box_dims, swizzle: TensorSwizzle::B128 };
        // SAFETY: `input.ptr()` is 16-byte aligned (checked above) device memory of the stream's
        // context (the door refuses the launch below otherwise) holding exactly the elements
        // of the shape the layout describes (checked), allocated while the operand is
        // borrowed; the launch that copies through the map declares a read of it.
        *word = unsafe { TensorMap::encode_tiled(input.ptr(), &layout) }?.words();
    }
    let stats_dims = [rows as u64];
    let stats = TiledLayout { data_type: TensorDataType::F32, dims: &stats_dims, strides_bytes: &[], box_dims: &STATS_BOX, swizzle: TensorSwizzle::None };
    for (word, part) in words[4..].iter_mut().zip([&lse2, &delta]) {
        // SAFETY: a part of the scratch (16-byte aligned: 128-byte aligned scratch, offsets
        // multiples of 64 f32) of `rows` f32, the 1-D array the layout describes, held while
        // the launch runs, whose read the launch declares.
        *word = unsafe { TensorMap::encode_tiled(part.0.ptr(), &stats) }?.words();
    }
    let mut flat: [u64; MAP_WORDS] = [0; MAP_WORDS];
    for (i, w) in words.iter().flatten().enumerate() {
        flat[i] = *w;
    }
    // The maps, as the parameters of a one-warp kernel (a graph replays them as recorded),
    // with the `_dyn` instances' counter zeroed after them.
    store_maps(stream, &mut maps_area, flat)?;
    // Every operand is declared by the launch itself: the maps' words, Q, K, V, dO, lse2 and
    // delta (read), dQ's accumulator, dK, dV and the counter (written).
    let map_words = Part::<u64>::of::<f32>(whole, 0, 2 * MAP_WORDS);
    let mut counter = Part::<u32>::of::<f32>(whole, 2 * MAP_WORDS, 1);
    let (q, k, v, dout) = (Same::<u16>::of(q), Same::<u16>::of(k), Same::<u16>::of(v), Same::<u16>::of(dout));
    let (mut dk, mut dv) = (Part::<u16>::all(dk), Part::<u16>::all(dv));
    let converts_dq = instance.converts_dq;
    let mut dq_bits = Part::<u16>::all(&mut *dq);
    let args = GpuBackwardArgs {
        maps: ferrocuda_host::DevicePtr::from_address(map_words.0.ptr()),
        map_words: &map_words,
        q: &q,
        k: &k,
        v: &v,
        dout: &dout,
        lse2: &lse2,
        delta: &delta,
        dq_acc: &mut dq_acc,
        dk: &mut dk,
        dv: &mut dv,
        problem: Problem {
            seq_q,
            seq_kv,
            heads_q: shape.heads_q as u32,
            heads_kv: shape.heads_kv as u32,
            bshd: (shape.layout == Layout::Bshd) as u32,
            scale: kernel_shape.scale,
            batch: shape.batch as u32,
        },
        next: &mut counter,
        dq: &mut dq_bits,
        dq_count: &mut dq_count,
    };
    let config = LaunchConfig::new(grid, THREADS).with_shared_bytes(shared);
    // SAFETY: the kernel's contract (`ferrocuda_kernels_hopper::attention_backward`), which is
    // the maps alone (the kernel checks the launch, the problem and every operand's length
    // and alignment, and writes nothing otherwise): `map_words` holds, written by the launch
    // above in stream order, maps of exactly Q, K, V, dO (the addresses and lengths checked
    // above) in the layout, box and swizzle it needs, and of lse2 and delta (`B·Hq·seq_pad`
    // f32, the parts passed beside them) as 1-D f32 arrays with 64-element boxes; nothing
    // writes them during the launch.
    unsafe { (instance.launch)(stream, config, args) }?;
    // The `_red_cvt` instances convert dQ themselves (the last warp to add to a tile's rows).
    if !converts_dq {
        <T as Launchers>::attention_backward_dq_convert(stream, dq_convert_grid(&shape), &dq_acc, dq, head_dim, kernel_shape)?;
    }
    // `owned` (if any) is freed in stream order after these launches (their uses are recorded).
    drop(owned);
    Ok(true)
}

/// A [`Stream::hold_off_capture`] stretch for a call that uses memory living only for the call,
/// or `None` when the stream is being captured (or a capture of it is starting), for the
/// caller to take its capture-safe path.
fn outside_capture<'s>(stream: &'s Stream, operation: &'static str) -> Result<Option<ferrocuda_host::NoCapture<'s>>> {
    match stream.hold_off_capture(operation) {
        Ok(stretch) => Ok(Some(stretch)),
        Err(ferrocuda_host::Error::CallMemoryInCapture { .. }) => Ok(None),
        Err(error) => Err(error.into()),
    }
}
