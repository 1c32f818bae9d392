//! [`Backend`] on the CPU executor: the library's kernels and this crate's own run thread by
//! thread on host vectors (with the executor's race and bounds checks); the GEMMs, which the
//! library runs on cuBLAS, are a plain host loop here (`f64` accumulation).

use std::ops::Range;

use bytemuck::Pod;
use ferrocuda_device::cpu::CpuExecutor;
use ferrocuda_kernels::attention::Attention;
use ferrocuda_kernels::cpu;
use ferrocuda_kernels::gemm::GemmShape;
use ferrocuda_kernels::rows::{AdamW, Rows};
use gpt2_kernels::{Elem, Heads};

use crate::Result;
use crate::backend::{Act, Backend, In};
use crate::own::grid;

/// The CPU executor backend.
#[derive(Default)]
pub struct Cpu {
    executor: CpuExecutor,
    /// Run the attention on the sm_90 kernels (emulated) where they take the shape.
    sm90_attention: bool,
}

impl Cpu {
    /// A backend on a fresh executor.
    pub fn new() -> Cpu {
        Cpu { executor: CpuExecutor::new(), sm90_attention: false }
    }

    /// A backend whose attention takes the sm_90 kernels of `ferrocuda-kernels-hopper` (TMA,
    /// `wgmma`), run by the CPU executor with the Hopper instructions emulated, where they take
    /// the shape: the forward for bf16 with head dim 64 (GPT-2's), the backward for bf16/f16
    /// with head dim 64 or 128. These are the GPU's paths on an H100/H200 (forward always,
    /// backward in eager steps); the default here is the `mma.sync` path (what the GPU's CUDA
    /// graph of the backward takes).
    pub fn with_sm90_attention() -> Cpu {
        Cpu { executor: CpuExecutor::new(), sm90_attention: true }
    }
}

/// The sm_90 attention forward (`ferrocuda_kernels_hopper::attention`, the instance `kernel`
/// that `hopper_kernel` chose) on the CPU executor with TMA and `wgmma` emulated: the maps,
/// grid, block and shared memory the GPU launcher uses (`[B·H, S, D]` bf16 maps, box `[64,
/// 128, 1]`, 128-byte swizzle), head dim 64.
fn attention_forward_sm90<T: Act>(q: &[T], k: &[T], v: &[T], out: &mut [T], lse: &mut [f32], shape: Attention, kernel: &str) -> Result<()> {
    use ferrocuda_device::tma::TensorMap as DeviceMap;
    use ferrocuda_host::{LaunchConfig, TensorDataType, TensorMap, TensorSwizzle, TiledLayout};
    use ferrocuda_kernels_hopper::attention::{BM, BOX, THREADS, attention_body, shared_bytes};
    let (d, seq, heads) = (shape.head_dim as u32, shape.seq_q as u32, (shape.batch * shape.heads_q) as u32);
    let len = (heads * seq * d) as usize;
    if std::mem::size_of::<T>() != 2 || d != 64 || [q.len(), k.len(), v.len(), out.len()].iter().any(|&n| n != len) || lse.len() != (heads * seq) as usize {
        return Err(format!("the emulated sm_90 attention forward takes bf16 [B, H, S, 64] operands, not {shape:?} ({} elements)", q.len()).into());
    }
    let (overlap, pingpong, stages) = (!kernel.contains("serial"), kernel.contains("pingpong"), if kernel.ends_with("_s3") { 3 } else { 2 });
    let causal = shape.causal;
    if !matches!((causal, overlap, pingpong, stages), (true, true, true, 2) | (false, true, true, 2) | (false, true, false, 2)) {
        return Err(format!("the emulated sm_90 attention forward has no instance {kernel}").into());
    }
    let dims = [d as u64, seq as u64, heads as u64];
    let strides = [2 * d as u64, 2 * d as u64 * seq as u64];
    let layout = TiledLayout { data_type: TensorDataType::Bf16, dims: &dims, strides_bytes: &strides, box_dims: &BOX, swizzle: TensorSwizzle::B128 };
    let mut maps = Vec::with_capacity(3);
    for x in [q, k, v] {
        maps.push(Box::new(DeviceMap(TensorMap::emulated(x.as_ptr() as u64, &layout)?.words())));
    }
    // O as 32-bit words (the kernel's paired stores; a `[T]` may be only 2-byte aligned).
    let mut words = vec![0u32; len / 2];
    let scale_log2 = shape.scale.unwrap_or(1.0 / (d as f32).sqrt()) * std::f32::consts::LOG2_E;
    let pointers = [
        &*maps[0] as *const DeviceMap as usize,
        &*maps[1] as *const DeviceMap as usize,
        &*maps[2] as *const DeviceMap as usize,
        words.as_mut_ptr() as usize,
        lse.as_mut_ptr() as usize,
    ];
    let config = LaunchConfig::new((seq.div_ceil(BM), heads), THREADS).with_shared_bytes(shared_bytes(d, stages));
    let body = || {
        let [qm, km, vm, o, l] = pointers;
        let (qm, km, vm, o, l) = (qm as *const DeviceMap, km as *const DeviceMap, vm as *const DeviceMap, o as *mut u32, l as *mut f32);
        // SAFETY: the kernel's contract: the emulated maps describe q, k, v (`[B·H, S, 64]`
        // bf16, box [64, 128, 1], 128-byte swizzle; lengths checked above), `o` holds B·H·S·64
        // bf16 as words and `l` B·H·S f32, all alive until `run` returns; the grid, block and
        // shared memory are the kernel's (`BM` rows a block, `THREADS`, `shared_bytes`).
        unsafe {
            match (causal, pingpong) {
                (true, _) => attention_body::<64, true, true, true, 2>(qm, km, vm, o, l, seq, scale_log2),
                (false, true) => attention_body::<64, false, true, true, 2>(qm, km, vm, o, l, seq, scale_log2),
                (false, false) => attention_body::<64, false, true, false, 2>(qm, km, vm, o, l, seq, scale_log2),
            }
        }
    };
    CpuExecutor::new().with_race_detection(false).run("attention_forward (sm_90, emulated)", config, &body).map_err(|e| format!("{e}"))?;
    bytemuck::cast_slice_mut::<T, u8>(out).copy_from_slice(bytemuck::cast_slice::<u32, u8>(&words));
    Ok(())
}

/// Two disjoint mutable ranges of one vector.
pub(crate) fn two_mut<E>(v: &mut [E], a: Range<usize>, b: Range<usize>) -> (&mut [E], &mut [E]) {
    assert!(a.end <= b.start || b.end <= a.start, "ranges {a:?} and {b:?} overlap");
    if a.start < b.start {
        let (lo, hi) = v.split_at_mut(b.start);
        (&mut lo[a], &mut hi[..b.end - b.start])
    } else {
        let (lo, hi) = v.split_at_mut(a.start);
        (&mut hi[..a.end - a.start], &mut lo[b])
    }
}

/// Row-major `c = op(a) op(b) (+ bias) + beta c` on the host, as `gemm::gemm` defines it.
fn host_gemm<A: Elem, O: Elem>(a: &[A], b: &[A], c: &mut [O], s: GemmShape, bias: Option<&[O]>, beta: f32) -> Result<()> {
    let (m, n, k) = (s.m, s.n, s.k);
    if s.batch != 1 || a.len() != m * k || b.len() != k * n || c.len() != m * n {
        return Err(format!("host GEMM: operands {} {} {} do not fit {s:?}", a.len(), b.len(), c.len()).into());
    }
    let a: Vec<f64> = a.iter().map(|x| x.widen() as f64).collect();
    let b: Vec<f64> = b.iter().map(|x| x.widen() as f64).collect();
    for i in 0..m {
        for j in 0..n {
            let mut sum = 0.0f64;
            for p in 0..k {
                let x = if s.transpose_a { a[p * m + i] } else { a[i * k + p] };
                let y = if s.transpose_b { b[j * k + p] } else { b[p * n + j] };
                sum += x * y;
            }
            if let Some(bias) = bias {
                sum += bias[j].widen() as f64;
            }
            let old = if beta != 0.0 { beta as f64 * c[i * n + j].widen() as f64 } else { 0.0 };
            c[i * n + j] = O::narrow((sum + old) as f32);
        }
    }
    Ok(())
}

impl Backend for Cpu {
    type Buf<E: Pod + Send + Sync + 'static> = Vec<E>;

    fn zeros<E: Pod + Send + Sync + 'static>(&self, n: usize) -> Result<Vec<E>> {
        Ok(vec![E::zeroed(); n])
    }
    fn upload<E: Pod + Send + Sync + 'static>(&self, data: &[E]) -> Result<Vec<E>> {
        Ok(data.to_vec())
    }
    fn download<E: Pod + Send + Sync + 'static>(&self, buf: &Vec<E>) -> Result<Vec<E>> {
        Ok(buf.clone())
    }
    fn copy_in<E: Pod + Send + Sync + 'static>(&self, buf: &mut Vec<E>, data: &[E]) -> Result<()> {
        buf.copy_from_slice(data);
        Ok(())
    }
    fn synchronize(&self) -> Result<()> {
        Ok(())
    }

    type Graph = ();
    fn capture(&self, _: &mut dyn FnMut() -> Result<()>) -> Result<Option<()>> {
        Ok(None)
    }
    fn replay(&self, _: &()) -> Result<()> {
        Err("the CPU executor records no graphs".into())
    }

    fn encoder_forward<T: Act>(
        &self,
        tokens: &Vec<u32>,
        params: &Vec<T>,
        wte: Range<usize>,
        wpe: Range<usize>,
        out: &mut Vec<T>,
        seq: usize,
        channels: usize,
    ) -> Result<()> {
        Ok(T::encoder_forward_cpu(&self.executor, grid(out.len()), tokens, &params[wte], &params[wpe], out, seq as u32, channels as u32)?)
    }
    fn encoder_backward<T: Act>(
        &self,
        tokens: &Vec<u32>,
        dout: &Vec<T>,
        grads: &mut Vec<f32>,
        wte: Range<usize>,
        wpe: Range<usize>,
        batch: usize,
        seq: usize,
        channels: usize,
    ) -> Result<()> {
        let (dwte, dwpe) = two_mut(grads, wte, wpe);
        T::encoder_backward_wte_cpu(&self.executor, grid(dout.len()), tokens, dout, dwte, channels as u32)?;
        let dwpe = &mut dwpe[..seq * channels];
        Ok(T::encoder_backward_wpe_cpu(&self.executor, grid(dwpe.len()), dout, dwpe, batch as u32)?)
    }
    fn layernorm<T: Act>(
        &self,
        x: &Vec<T>,
        params: &Vec<T>,
        w: Range<usize>,
        b: Range<usize>,
        out: &mut Vec<T>,
        mean: &mut Vec<f32>,
        rstd: &mut Vec<f32>,
        shape: Rows,
    ) -> Result<()> {
        Ok(cpu::layernorm(&self.executor, x, &params[w], &params[b], out, mean, rstd, shape, 1e-5)?)
    }
    fn add_layernorm<T: Act>(
        &self,
        x: &Vec<T>,
        residual: &Vec<T>,
        params: &Vec<T>,
        w: Range<usize>,
        b: Range<usize>,
        out: &mut Vec<T>,
        sum: &mut Vec<T>,
        mean: &mut Vec<f32>,
        rstd: &mut Vec<f32>,
        shape: Rows,
    ) -> Result<()> {
        Ok(cpu::add_layernorm(&self.executor, x, residual, &params[w], &params[b], out, sum, mean, rstd, shape, 1e-5)?)
    }
    fn layernorm_backward<T: Act>(
        &self,
        dout: &Vec<T>,
        x: &Vec<T>,
        params: &Vec<T>,
        w: Range<usize>,
        mean: &Vec<f32>,
        rstd: &Vec<f32>,
        dresidual: Option<&Vec<T>>,
        dx: &mut Vec<T>,
        grads: &mut Vec<f32>,
        dw: Range<usize>,
        db: Range<usize>,
        shape: Rows,
    ) -> Result<()> {
        let (dw, db) = two_mut(grads, dw, db);
        Ok(cpu::layernorm_backward(&self.executor, dout, x, &params[w], mean, rstd, dresidual.map(|d| &d[..]), dx, dw, db, shape)?)
    }
    fn matmul<T: Act>(&self, a: In<'_, Self, T>, b: In<'_, Self, T>, c: &mut Vec<T>, shape: GemmShape, bias: Option<In<'_, Self, T>>) -> Result<()> {
        host_gemm(&a.0[a.1], &b.0[b.1], c, shape, bias.map(|(buf, r)| &buf[r]), 0.0)
    }
    fn matmul_f32<T: Act>(&self, a: In<'_, Self, T>, b: In<'_, Self, T>, c: &mut Vec<f32>, c_range: Range<usize>, shape: GemmShape, beta: f32) -> Result<()> {
        host_gemm(&a.0[a.1], &b.0[b.1], &mut c[c_range], shape, None, beta)
    }
    fn bias_grad<T: Act>(&self, dout: &Vec<T>, grads: &mut Vec<f32>, range: Range<usize>, rows: usize, cols: usize) -> Result<()> {
        let chunks = rows.div_ceil(gpt2_kernels::ROWS_PER_CHUNK as usize).max(1);
        let mut partial = vec![0.0f32; chunks * cols];
        T::column_partials_cpu(&self.executor, &dout[..rows * cols], &mut partial, rows as u32, cols as u32)?;
        match crate::own::sum_split_grid(cols) {
            Some(config) => gpt2_kernels::sum_partials_split::launch_cpu(&self.executor, config, &partial, &mut grads[range], chunks as u32)?,
            None => gpt2_kernels::sum_partials::launch_cpu(&self.executor, grid(cols), &partial, &mut grads[range], chunks as u32)?,
        }
        Ok(())
    }
    fn gelu<T: Act>(&self, x: &Vec<T>, out: &mut Vec<T>) -> Result<()> {
        Ok(cpu::gelu(&self.executor, x, out)?)
    }
    fn gelu_backward<T: Act>(&self, x: &Vec<T>, dout: &Vec<T>, dx: &mut Vec<T>) -> Result<()> {
        Ok(cpu::gelu_backward(&self.executor, x, dout, dx)?)
    }
    fn split_heads<T: Act>(&self, src: &Vec<T>, dst: &mut Vec<T>, heads: Heads) -> Result<()> {
        Ok(T::split_heads_cpu(&self.executor, src, dst, heads)?)
    }
    fn merge_heads<T: Act>(&self, q: &Vec<T>, k: &Vec<T>, v: &Vec<T>, dst: &mut Vec<T>, heads: Heads, parts: u32) -> Result<()> {
        Ok(T::merge_heads_cpu(&self.executor, q, k, v, dst, heads, parts)?)
    }
    fn attention_forward<T: Act>(&self, q: &Vec<T>, k: &Vec<T>, v: &Vec<T>, out: &mut Vec<T>, lse: &mut Vec<f32>, shape: Attention) -> Result<()> {
        if self.sm90_attention
            && shape.head_dim == 64
            && let Some(kernel) = ferrocuda_kernels::attention::hopper_kernel::<T>(&shape, 90)
        {
            return attention_forward_sm90(q, k, v, out, lse, shape, kernel);
        }
        Ok(cpu::attention_forward(&self.executor, q, k, v, out, lse, shape)?)
    }
    fn attention_backward<T: Act>(
        &self,
        q: &Vec<T>,
        k: &Vec<T>,
        v: &Vec<T>,
        out: &Vec<T>,
        dout: &Vec<T>,
        lse: &Vec<f32>,
        dq: &mut Vec<T>,
        dk: &mut Vec<T>,
        dv: &mut Vec<T>,
        shape: Attention,
    ) -> Result<()> {
        if self.sm90_attention && ferrocuda_kernels::attention::hopper_backward_kernel::<T>(&shape, 90).is_some() {
            return Ok(cpu::attention_backward_sm90(&self.executor, cpu::Backward { q, k, v, out, dout, lse, dq, dk, dv }, shape)?);
        }
        Ok(cpu::attention_backward(&self.executor, cpu::Backward { q, k, v, out, dout, lse, dq, dk, dv }, shape)?)
    }
    fn cross_entropy<T: Act>(&self, logits: &Vec<T>, targets: &Vec<u32>, losses: &mut Vec<f32>, dlogits: &mut Vec<T>, shape: Rows, dloss: f32) -> Result<()> {
        Ok(cpu::cross_entropy(&self.executor, logits, targets, losses, dlogits, shape, dloss)?)
    }
    fn global_norm_squared(&self, grads: &Vec<f32>, total: &mut Vec<f32>) -> Result<()> {
        total.fill(0.0);
        Ok(cpu::sum_of_squares(&self.executor, grads, total)?)
    }
    fn clip(&self, grads: &mut Vec<f32>, norm_squared: &Vec<f32>, max_norm: f32) -> Result<()> {
        Ok(cpu::clip_by_global_norm(&self.executor, grads, norm_squared, max_norm)?)
    }
    fn adamw(&self, master: &mut Vec<f32>, grads: &Vec<f32>, m: &mut Vec<f32>, v: &mut Vec<f32>, range: Range<usize>, hyper: AdamW, step: u32) -> Result<()> {
        let r = range;
        Ok(cpu::adamw(&self.executor, &mut master[r.clone()], &grads[r.clone()], &mut m[r.clone()], &mut v[r], hyper, step, 1.0)?)
    }
    fn cast_params<T: Act>(&self, master: &Vec<f32>, params: &mut Vec<T>) -> Result<()> {
        Ok(T::cast_from_f32_cpu(&self.executor, grid(params.len()), master, params)?)
    }
}
