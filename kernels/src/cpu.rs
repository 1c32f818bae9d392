//! The calls of [`rows`](crate::rows) and [`attention`](crate::attention) on the CPU
//! executor, on host slices: the same kernels, the same shape checks, the same errors. The
//! executor runs every GPU thread (with barriers, warp shuffles and atomics) and reports races
//! and panics, so these are how the crate is tested without a GPU, and how a program can test
//! its own use of the kernels. Slow: keep shapes small.
//!
//! ```
//! use ferrocuda_device::cpu::CpuExecutor;
//! use ferrocuda_kernels::{cpu, rows::Rows};
//! let executor = CpuExecutor::new();
//! let x = [1.0f32, 2.0, 3.0, 4.0];
//! let mut out = [0.0f32; 4];
//! cpu::softmax(&executor, &x, &mut out, Rows { rows: 1, cols: 4 })?;
//! assert!((out.iter().sum::<f32>() - 1.0).abs() < 1e-6);
//! # Ok::<(), ferrocuda_kernels::KernelsError>(())
//! ```

use ferrocuda_device::cpu::CpuExecutor;

use crate::attention::{Attention, AttentionBackward};
use crate::launchers::CpuLaunchers;
use crate::{Element, Result, warp_per_row};

// The row calls: written once in `rows.rs` (`row_op!`), for a stream there and for the CPU
// executor here.
pub use crate::rows::{
    adamw_cpu as adamw, add_layernorm_cpu as add_layernorm, add_rmsnorm_cpu as add_rmsnorm, clip_by_global_norm_cpu as clip_by_global_norm,
    cross_entropy_backward_cpu as cross_entropy_backward, cross_entropy_cpu as cross_entropy, cross_entropy_forward_cpu as cross_entropy_forward,
    gelu_backward_cpu as gelu_backward, gelu_cpu as gelu, layernorm_backward_cpu as layernorm_backward, layernorm_cpu as layernorm,
    rmsnorm_backward_cpu as rmsnorm_backward, rmsnorm_cpu as rmsnorm, rotary_embedding_cpu as rotary_embedding,
    silu_and_mul_backward_cpu as silu_and_mul_backward, silu_and_mul_cpu as silu_and_mul, softmax_cpu as softmax, sum_of_squares_cpu as sum_of_squares,
};

/// [`attention::attention_forward`](crate::attention::attention_forward) on the CPU executor.
pub fn attention_forward<T: Element>(executor: &CpuExecutor, q: &[T], k: &[T], v: &[T], out: &mut [T], lse: &mut [f32], shape: Attention) -> Result<()> {
    let (head_dim, kernel_shape) = shape.check_forward([q.len(), k.len(), v.len(), out.len(), lse.len()])?;
    if shape.q_rows() == 0 {
        return Ok(());
    }
    if crate::attention::uses_tensor_cores::<T>(&shape) {
        let config = crate::attention::mma_config(&shape);
        let tile_width = ferrocuda_kernels_device::attention::MMA_ROWS * head_dim;
        return Ok(<T as CpuLaunchers>::attention_forward_mma(executor, config, q, k, v, out, lse, tile_width, head_dim, kernel_shape)?);
    }
    Ok(<T as CpuLaunchers>::attention_forward(executor, warp_per_row(shape.q_rows()), q, k, v, out, lse, head_dim, kernel_shape)?)
}

/// The operands of the backward calls on the CPU executor: host slices
/// ([`AttentionBackward`], the struct of the GPU calls, over `&[T]`, `&[f32]` and `&mut [T]`).
pub type Backward<'a, T> = AttentionBackward<&'a [T], &'a [f32], &'a mut [T]>;

/// [`AttentionBackward::check_lengths`] on host slices.
fn check_lengths<T>(operands: &Backward<'_, T>, shape: &Attention) -> Result<()> {
    operands.check_lengths(shape, |x| x.len(), |x| x.len(), |x| x.len())
}

/// [`attention::attention_backward`](crate::attention::attention_backward) on the CPU
/// executor.
///
/// ```
/// use ferrocuda_device::cpu::CpuExecutor;
/// use ferrocuda_kernels::attention::{Attention, Layout};
/// use ferrocuda_kernels::cpu::{self, Backward};
/// let shape = Attention { batch: 1, heads_q: 1, heads_kv: 1, seq_q: 4, seq_kv: 4, head_dim: 32, layout: Layout::Bhsd, causal: true, scale: None };
/// let executor = CpuExecutor::new();
/// let q: Vec<f32> = (0..shape.q_len()).map(|i| (i % 7) as f32 / 7.0).collect();
/// let (mut out, mut lse) = (vec![0.0f32; shape.q_len()], vec![0.0f32; shape.q_rows()]);
/// cpu::attention_forward(&executor, &q, &q, &q, &mut out, &mut lse, shape)?;
/// let (mut dq, mut dk, mut dv) = (vec![0.0f32; shape.q_len()], vec![0.0f32; shape.kv_len()], vec![0.0f32; shape.kv_len()]);
/// let dout = vec![1.0f32; shape.q_len()];
/// cpu::attention_backward(&executor, Backward { q: &q, k: &q, v: &q, out: &out, dout: &dout, lse: &lse, dq: &mut dq, dk: &mut dk, dv: &mut dv }, shape)?;
/// assert!(dv.iter().all(|x| x.is_finite()));
/// # Ok::<(), ferrocuda_kernels::KernelsError>(())
/// ```
pub fn attention_backward<T: Element>(executor: &CpuExecutor, operands: Backward<'_, T>, shape: Attention) -> Result<()> {
    let (head_dim, kernel_shape) = shape.check()?;
    check_lengths(&operands, &shape)?;
    let AttentionBackward { q, k, v, out, dout, lse, dq, dk, dv } = operands;
    let mut delta = vec![0.0f32; shape.q_rows()];
    if crate::attention::backward_uses_tensor_cores::<T>(&shape) {
        let (dkv_config, dq_config) = crate::attention::backward_mma_configs(&shape);
        if shape.q_rows() > 0 {
            <T as CpuLaunchers>::attention_backward_delta(executor, warp_per_row(shape.q_rows()), out, dout, &mut delta, head_dim)?;
            <T as CpuLaunchers>::attention_backward_dq_mma(executor, dq_config, q, k, v, dout, lse, &delta, dq, head_dim, kernel_shape)?;
        }
        if shape.kv_rows() > 0 {
            <T as CpuLaunchers>::attention_backward_dkv_mma(executor, dkv_config, q, k, v, dout, lse, &delta, dk, dv, head_dim, kernel_shape)?;
        }
        return Ok(());
    }
    if shape.q_rows() > 0 {
        <T as CpuLaunchers>::attention_backward_dq(executor, warp_per_row(shape.q_rows()), q, k, v, out, dout, lse, dq, &mut delta, head_dim, kernel_shape)?;
    }
    if shape.kv_rows() > 0 {
        <T as CpuLaunchers>::attention_backward_dkv(executor, warp_per_row(shape.kv_rows()), q, k, v, dout, lse, &delta, dk, dv, head_dim, kernel_shape)?;
    }
    Ok(())
}

/// The sm_90 backward of [`attention::attention_backward`](crate::attention::attention_backward)
/// (`ferrocuda-kernels-hopper`'s TMA and `wgmma` kernel, with its two small kernels) on the CPU
/// executor, the Hopper instructions emulated: how it is tested without a GPU. For the shapes
/// [`hopper_backward_kernel`](crate::attention::hopper_backward_kernel) takes on sm_90 (others
/// are refused); slow (every `wgmma` is computed element by element): keep shapes tiny.
pub fn attention_backward_sm90<T: Element>(executor: &CpuExecutor, operands: Backward<'_, T>, shape: Attention) -> Result<()> {
    let kernel = crate::attention::hopper_backward_kernel::<T>(&shape, 90).unwrap_or("(none)");
    attention_backward_sm90_kernel(executor, kernel, operands, shape)
}

/// Blocks of the sm_90 backward's persistent instances on the CPU executor (the GPU runs one
/// per SM): three, so that in the tests' shapes each block takes several key blocks of
/// different heads (`_dyn`: as many as the shared counter hands them).
const PERSISTENT_BLOCKS: usize = 3;

/// [`attention_backward_sm90`] with the kernel instance named (one of
/// [`hopper_backward_kernels`](crate::attention::hopper_backward_kernels)`(shape, 90)`, or of the
/// [`hopper_backward_trial_kernels`](crate::attention::hopper_backward_trial_kernels)). The
/// `_dyn` trial instances hand their work units between threads through a shared word published
/// by an mbarrier phase, which the executor's race detector does not order: run them on an
/// executor `with_race_detection(false)`.
pub fn attention_backward_sm90_kernel<T: Element>(executor: &CpuExecutor, kernel: &str, operands: Backward<'_, T>, shape: Attention) -> Result<()> {
    use ferrocuda_host::{LaunchConfig, TensorDataType, TensorMap, TensorSwizzle, TiledLayout};
    use ferrocuda_kernels_hopper::attention_backward::{
        CpuBackwardArgs, MAP_WORDS, Problem, STATS_BOX, THREADS, backward_kernel, blocks_x, padded_seq, shared_bytes,
    };
    let (head_dim, kernel_shape) = shape.check()?;
    check_lengths(&operands, &shape)?;
    let AttentionBackward { q, k, v, out, dout, lse, dq, dk, dv } = operands;
    let Some(names) = crate::hopper::backward_instances::<T>(&shape, 90) else {
        return Err(crate::error::unsupported("shape", format!("{shape:?}"), "one the sm_90 backward takes (hopper_backward_kernel)"));
    };
    let Some(&kernel) = names.iter().find(|&&name| name == kernel) else {
        return Err(crate::error::unsupported("kernel", kernel, format!("one of {names:?}")));
    };
    let (early, persistent) = (!kernel.contains("_late"), kernel.contains("_persistent"));
    let seq_pad = padded_seq(shape.seq_q as u32);
    let rows = shape.batch * shape.heads_q * seq_pad as usize;
    let (mut lse2, mut delta) = (vec![0.0f32; rows], vec![0.0f32; rows]);
    <T as CpuLaunchers>::attention_backward_prep(executor, crate::hopper::prep_grid(rows), out, dout, lse, &mut lse2, &mut delta, head_dim, kernel_shape)?;
    // 16-byte aligned, as the kernel's bulk adds need (a `Vec<f32>` is only 4-byte aligned).
    let mut dq_raw = vec![0.0f32; rows * shape.head_dim + 3];
    // The `_red_cvt` instances' arrival counters (zeroed, as the GPU path's scratch).
    let mut dq_count = vec![0u32; ferrocuda_kernels_hopper::attention_backward::dq_count_len(rows)];
    // dQ's bits, which those instances write themselves.
    let mut dq_bits = vec![0u16; shape.q_len()];
    let skip = dq_raw.as_ptr().align_offset(16);
    let dq_acc = &mut dq_raw[skip..skip + rows * shape.head_dim];
    // 32-bit words for the kernel's paired stores (a `[T]` may be only 2-byte aligned).
    let (mut dk_words, mut dv_words) = (vec![0u32; shape.kv_len() / 2], vec![0u32; shape.kv_len() / 2]);
    let data_type = if T::F16 { TensorDataType::F16 } else { TensorDataType::Bf16 };
    // The six maps' words, one after the other from a 64-byte aligned start (a map's alignment).
    let mut maps_raw = vec![0u64; MAP_WORDS + 7];
    let skip = maps_raw.as_ptr().align_offset(64);
    let maps = &mut maps_raw[skip..skip + MAP_WORDS];
    for (i, x) in [q, k, v, dout].into_iter().enumerate() {
        let (heads, seq) = if i == 0 || i == 3 { (shape.heads_q, shape.seq_q) } else { (shape.heads_kv, shape.seq_kv) };
        let (dims, strides, box_dims) = crate::hopper::backward_map_dims(&shape, heads, seq);
        let layout = TiledLayout { data_type, dims: &dims, strides_bytes: &strides, box_dims, swizzle: TensorSwizzle::B128 };
        maps[16 * i..16 * i + 16].copy_from_slice(&TensorMap::emulated(x.as_ptr() as u64, &layout)?.words());
    }
    let stats_dims = [rows as u64];
    let stats = TiledLayout { data_type: TensorDataType::F32, dims: &stats_dims, strides_bytes: &[], box_dims: &STATS_BOX, swizzle: TensorSwizzle::None };
    for (i, x) in [&lse2, &delta].into_iter().enumerate() {
        maps[64 + 16 * i..80 + 16 * i].copy_from_slice(&TensorMap::emulated(x.as_ptr() as u64, &stats)?.words());
    }
    let problem = Problem {
        seq_q: shape.seq_q as u32,
        seq_kv: shape.seq_kv as u32,
        heads_q: shape.heads_q as u32,
        heads_kv: shape.heads_kv as u32,
        bshd: (shape.layout == crate::attention::Layout::Bshd) as u32,
        scale: kernel_shape.scale,
        batch: shape.batch as u32,
    };
    // The `_dyn` instances' work-unit counter (zeroed, as `attention_backward_store_maps` does on
    // a GPU).
    let mut counter = [0u32];
    // The persistent instances on `PERSISTENT_BLOCKS` blocks (fewer than the key blocks of all
    // heads in the tests' shapes: each block takes several, across heads), as on a GPU's SMs.
    let grid = if persistent {
        let units = shape.seq_kv.div_ceil(128) * shape.batch * shape.heads_kv;
        (units.min(PERSISTENT_BLOCKS) as u32, 1)
    } else {
        (blocks_x(shape.seq_kv as u32, shape.causal && early), (shape.batch * shape.heads_kv) as u32)
    };
    let config = LaunchConfig::new(grid, THREADS).with_shared_bytes(shared_bytes(head_dim));
    let args = CpuBackwardArgs {
        maps: maps.as_ptr().cast(),
        map_words: maps,
        q: bytemuck::cast_slice(q),
        k: bytemuck::cast_slice(k),
        v: bytemuck::cast_slice(v),
        dout: bytemuck::cast_slice(dout),
        lse2: &lse2,
        delta: &delta,
        dq_acc: &mut *dq_acc,
        dk: bytemuck::cast_slice_mut(&mut dk_words),
        dv: bytemuck::cast_slice_mut(&mut dv_words),
        problem,
        next: &mut counter,
        dq: &mut dq_bits,
        dq_count: &mut dq_count,
    };
    let Some(instance) = backward_kernel(kernel) else { unreachable!("backward_instances names kernels of ferrocuda-kernels-hopper") };
    // SAFETY: the kernel's contract (the maps; it checks the rest): the emulated maps describe
    // q, k, v, dout in the shape's layout (box and swizzle from `backward_map_dims`), and lse2
    // and delta (`B·Hq·seq_pad` f32, written by the prep launch), the slices passed beside them,
    // alive until the launch returns.
    unsafe { (instance.launch_cpu)(executor, config, args) }?;
    if instance.converts_dq {
        bytemuck::cast_slice_mut::<T, u16>(dq).copy_from_slice(&dq_bits);
        // The reset protocol: a launch that completes leaves the accumulator and the counters zeroed.
        assert!(
            dq_acc.iter().all(|&x| x == 0.0) && dq_count.iter().all(|&c| c == 0),
            "{kernel} left its dQ accumulator or arrival counters nonzero (the in-kernel conversion's reset protocol)"
        );
    } else {
        <T as CpuLaunchers>::attention_backward_dq_convert(executor, crate::hopper::dq_convert_grid(&shape), &*dq_acc, dq, head_dim, kernel_shape)?;
    }
    for (words, out) in [(&dk_words, dk), (&dv_words, dv)] {
        // Both are 16-bit types here (bf16, f16): the words' bytes are the elements' bytes.
        bytemuck::cast_slice_mut::<T, u8>(out).copy_from_slice(bytemuck::cast_slice::<u32, u8>(words));
    }
    Ok(())
}

/// [`gemm::hopper_gemm_bf16`](crate::gemm::hopper_gemm_bf16) on the CPU executor, the Hopper
/// instructions (TMA, `wgmma`, mbarriers, `setmaxnreg`) emulated: the same kernel and the same
/// shape checks (`c = a · bᵀ`, `a` `m x k`, `b` `n x k`, row-major bf16), on host slices, with
/// [`HopperSchedule::PLAIN`](crate::gemm::HopperSchedule::PLAIN)'s tile order.
/// `grid` blocks (at least 1; fewer than the output tiles makes each block walk several, as
/// the persistent grid on a GPU does). Slow (every `wgmma` is computed element by element):
/// keep shapes tiny.
#[allow(clippy::too_many_arguments)] // the operands and the shape spelled out, as on the GPU
pub fn hopper_gemm_bf16(
    executor: &CpuExecutor,
    a: &[half::bf16],
    b: &[half::bf16],
    c: &mut [half::bf16],
    m: usize,
    n: usize,
    k: usize,
    grid: u32,
) -> Result<()> {
    hopper_gemm_bf16_with(executor, crate::gemm::HopperSchedule::PLAIN, a, b, c, m, n, k, grid)
}

/// [`hopper_gemm_bf16`] with the sm_90 schedule `schedule` (its kernel and tile order; the
/// grid is `grid` blocks, rounded up to an even number for a cluster schedule, which runs in
/// emulated clusters of two blocks and falls back to the plain kernel for an odd number of
/// M tiles, as on the GPU).
#[allow(clippy::too_many_arguments)] // the operands and the shape spelled out, as on the GPU
pub fn hopper_gemm_bf16_with(
    executor: &CpuExecutor,
    schedule: crate::gemm::HopperSchedule,
    a: &[half::bf16],
    b: &[half::bf16],
    c: &mut [half::bf16],
    m: usize,
    n: usize,
    k: usize,
    grid: u32,
) -> Result<()> {
    use crate::gemm::HopperStore;
    use ferrocuda_device::tma::TensorMap as DeviceMap;
    use ferrocuda_host::{LaunchConfig, TensorDataType, TensorMap, TensorSwizzle, TiledLayout};
    use ferrocuda_kernels_hopper::gemm::{
        BM, BOX_A, BOX_B, BOX_B_HALF, BOX_C, SHARED_BYTES, STORE_STAGES, STORE3_STAGES, THREADS, gemm_bf16_tn, gemm_bf16_tn_cluster2, gemm_bf16_tn_store,
        gemm_bf16_tn_store_cluster2, gemm_bf16_tn_store3, gemm_bf16_tn_store3_cluster2, store_shared_bytes,
    };
    let shape = crate::gemm::GemmShape { transpose_b: true, ..crate::gemm::GemmShape::new(m, n, k) };
    if let Some((parameter, value, problem)) = crate::gemm::hopper_gemm_refusal(shape) {
        return Err(crate::error::unsupported(parameter, value, problem));
    }
    crate::error::expect_len("a", a.len(), m * k, || format!("m {m} x k {k}"))?;
    crate::error::expect_len("b", b.len(), n * k, || format!("n {n} x k {k}"))?;
    crate::error::expect_len("c", c.len(), m * n, || format!("m {m} x n {n}"))?;
    let cluster = schedule.cluster && m.div_ceil(BM as usize).is_multiple_of(2);
    // A copy-engine store needs `n % 8 == 0` (the output below is 16-byte aligned); otherwise
    // the direct stores run, as on the GPU.
    let store = if n.is_multiple_of(8) { schedule.store } else { HopperStore::Direct };
    let map = |address: u64, inner: usize, rows: usize, box_dims: &[u32; 2]| -> Result<Box<DeviceMap>> {
        let dims = [inner as u64, rows as u64];
        let layout = TiledLayout { data_type: TensorDataType::Bf16, dims: &dims, strides_bytes: &[2 * inner as u64], box_dims, swizzle: TensorSwizzle::B128 };
        Ok(Box::new(DeviceMap(TensorMap::emulated(address, &layout)?.words())))
    };
    let (a_map, b_map) = (map(a.as_ptr() as u64, k, m, &BOX_A)?, map(b.as_ptr() as u64, k, n, if cluster { &BOX_B_HALF } else { &BOX_B })?);
    // 16-byte words for the kernels' paired (4-byte) and copy-engine (16-byte aligned) stores
    // (a `[bf16]` may be only 2-byte aligned).
    let mut words = vec![0u128; (m * n).div_ceil(8)];
    bytemuck::cast_slice_mut::<u128, u8>(&mut words)[..2 * m * n].copy_from_slice(bytemuck::cast_slice::<half::bf16, u8>(c));
    let grid = if cluster { grid.max(1).next_multiple_of(2) } else { grid.max(1) };
    let shared = match store {
        HopperStore::Direct => SHARED_BYTES,
        HopperStore::Tma => store_shared_bytes(STORE_STAGES),
        HopperStore::Tma3 => store_shared_bytes(STORE3_STAGES),
    };
    let config = LaunchConfig::new(grid, THREADS).with_shared_bytes(shared);
    let out = &mut bytemuck::cast_slice_mut::<u128, half::bf16>(&mut words)[..m * n];
    let c_map = map(out.as_ptr() as u64, n, m, &BOX_C)?;
    let (m, n, k, group) = (m as u32, n as u32, k as u32, schedule.group);
    // SAFETY (every arm): the emulated maps describe exactly `a` (`m x k`), `b` (`n x k`) and
    // `out` (`m x n`, 16-byte aligned) as the kernels need (bf16, boxes `BOX_A`, `BOX_B` or
    // `BOX_B_HALF` for the cluster kernels, `BOX_C`, 128-byte swizzle) and live until the
    // launch returns; a cluster kernel runs only with even M tiles (checked above), a
    // copy-engine store only with `n % 8 == 0`.
    unsafe {
        match (store, cluster) {
            (HopperStore::Direct, false) => gemm_bf16_tn::launch_cpu(executor, config, &a_map, &b_map, a, b, out, m, n, k, group),
            (HopperStore::Direct, true) => gemm_bf16_tn_cluster2::launch_cpu(executor, config, &a_map, &b_map, a, b, out, m, n, k, group),
            (HopperStore::Tma, false) => gemm_bf16_tn_store::launch_cpu(executor, config, &a_map, &b_map, &c_map, a, b, out, m, n, k, group),
            (HopperStore::Tma, true) => gemm_bf16_tn_store_cluster2::launch_cpu(executor, config, &a_map, &b_map, &c_map, a, b, out, m, n, k, group),
            (HopperStore::Tma3, false) => gemm_bf16_tn_store3::launch_cpu(executor, config, &a_map, &b_map, &c_map, a, b, out, m, n, k, group),
            (HopperStore::Tma3, true) => gemm_bf16_tn_store3_cluster2::launch_cpu(executor, config, &a_map, &b_map, &c_map, a, b, out, m, n, k, group),
        }
    }?;
    c.copy_from_slice(&bytemuck::cast_slice::<u128, half::bf16>(&words)[..m as usize * n as usize]);
    Ok(())
}
