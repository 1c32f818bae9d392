//! Audit 2026-11-27d, CPU-executor cases. Safe code only. `d_cpu [case]` (all by default).
#![forbid(unsafe_code)]

use d_kernels::{fill, partial_sync, partial_warp, per_block_xy};
use ferrocuda::LaunchConfig;
use ferrocuda::cpu::CpuExecutor;
use ferrocuda_kernels::attention::{Attention, Layout};
use ferrocuda_kernels::gemm::{self, GemmShape};
use ferrocuda_kernels::rows::{Rope, Rows};
use ferrocuda_kernels::{IGNORE_TARGET, cpu};
use half::bf16;

fn shape(heads_q: usize, heads_kv: usize, seq_q: usize, seq_kv: usize, d: usize, layout: Layout, causal: bool) -> Attention {
    Attention { batch: 1, heads_q, heads_kv, seq_q, seq_kv, head_dim: d, layout, causal, scale: None }
}

fn vals(n: usize, seed: u32) -> Vec<f32> {
    (0..n).map(|i| (((i as u32).wrapping_mul(2654435761).wrapping_add(seed) >> 20) as f32 / 4096.0) - 0.5).collect()
}

fn summary(v: &[f32]) -> String {
    let nan = v.iter().filter(|x| x.is_nan()).count();
    let nine = v.iter().filter(|&&x| x == 9.0).count();
    let zero = v.iter().filter(|&&x| x == 0.0).count();
    format!("len {} nan {nan} zero {zero} untouched(9.0) {nine} first {:?}", v.len(), v.first())
}

/// Runs the forward and backward for f32 (portable path) and bf16 (tensor cores where the shape
/// allows) on the executor; prints what each output holds. Outputs start at 9.0.
fn attn(label: &str, s: Attention) {
    let e = CpuExecutor::new();
    let (ql, kl, rows) = (s.q_len(), s.kv_len(), s.q_rows());
    let (q, k, v, dout) = (vals(ql, 1), vals(kl, 2), vals(kl, 3), vals(ql, 4));
    // f32
    let (mut o, mut lse) = (vec![9.0f32; ql], vec![9.0f32; rows]);
    let f = cpu::attention_forward(&e, &q, &k, &v, &mut o, &mut lse, s);
    let (mut dq, mut dk, mut dv) = (vec![9.0f32; ql], vec![9.0f32; kl], vec![9.0f32; kl]);
    let b = cpu::attention_backward(&e, &q, &k, &v, &o, &dout, &lse, &mut dq, &mut dk, &mut dv, s);
    println!("  [{label}] f32: fwd {:?} out {} lse {}", f.map_err(|e| e.to_string()), summary(&o), summary(&lse));
    println!("  [{label}] f32: bwd {:?} dq {} dk {} dv {}", b.map_err(|e| e.to_string()), summary(&dq), summary(&dk), summary(&dv));
    // bf16
    let h = |x: &[f32]| x.iter().map(|&v| bf16::from_f32(v)).collect::<Vec<_>>();
    let w = |x: &[bf16]| x.iter().map(|v| v.to_f32()).collect::<Vec<_>>();
    let (qb, kb, vb, db) = (h(&q), h(&k), h(&v), h(&dout));
    let (mut ob, mut lseb) = (h(&vec![9.0; ql]), vec![9.0f32; rows]);
    let f = cpu::attention_forward(&e, &qb, &kb, &vb, &mut ob, &mut lseb, s);
    let (mut dqb, mut dkb, mut dvb) = (h(&vec![9.0; ql]), h(&vec![9.0; kl]), h(&vec![9.0; kl]));
    let b = cpu::attention_backward(&e, &qb, &kb, &vb, &ob, &db, &lseb, &mut dqb, &mut dkb, &mut dvb, s);
    println!(
        "  [{label}] bf16 (fwd tensor cores: {}, bwd tensor cores: {}): fwd {:?} out {} lse {}",
        ferrocuda_kernels::attention::uses_tensor_cores::<bf16>(&s),
        ferrocuda_kernels::attention::backward_uses_tensor_cores::<bf16>(&s),
        f.map_err(|e| e.to_string()),
        summary(&w(&ob)),
        summary(&lseb)
    );
    println!("  [{label}] bf16: bwd {:?} dq {} dk {} dv {}", b.map_err(|e| e.to_string()), summary(&w(&dqb)), summary(&w(&dkb)), summary(&w(&dvb)));
}

/// Runs this program again with `args` (for cases that may abort the process).
fn child(args: &[&str]) {
    let out = std::process::Command::new(std::env::current_exe().unwrap()).args(args).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with("###")).collect();
    println!("  child {args:?}: status {:?}; output: {}", out.status.code(), lines.join(" | ").chars().take(600).collect::<String>());
}

fn main() {
    if std::env::args().nth(1).as_deref() == Some("stack-child") {
        let bytes: usize = std::env::args().nth(2).unwrap().parse().unwrap();
        let mut out = vec![0u32; 64];
        let r = fill::launch_cpu(&CpuExecutor::new().with_stack_size(bytes), LaunchConfig::new(1u32, 64u32), 3, &mut out);
        println!("with_stack_size({bytes}): {:?} out[0] {}", r.map_err(|e| e.to_string()), out[0]);
        return;
    }
    let only = std::env::args().nth(1);
    let run = |name: &str| only.as_deref().is_none_or(|o| o == name);
    if run("c1") {
        println!("### c1 attention with no query heads (heads_q 0, heads_kv 1): dK, dV must be written (zeros)");
        attn("c1", shape(0, 1, 16, 16, 64, Layout::Bhsd, false));
    }
    if run("c2") {
        println!("### c2 attention with no keys (seq_kv 0): the paths must agree");
        attn("c2", shape(1, 1, 16, 0, 64, Layout::Bhsd, false));
    }
    if run("c3") {
        println!("### c3 attention with no queries (seq_q 0), causal, Bshd");
        attn("c3", shape(2, 1, 0, 16, 64, Layout::Bshd, true));
    }
    if run("c4") {
        println!("### c4 causal, seq_q 16 > seq_kv 5, GQA 4/2, Bshd, D 64");
        attn("c4", shape(4, 2, 16, 5, 64, Layout::Bshd, true));
    }
    if run("c5") {
        println!("### c5 layer norm backward with rows 0: dweight, dbias are 'written' (zeros)");
        let e = CpuExecutor::new();
        for cols in [768usize, 7] {
            let sh = Rows { rows: 0, cols };
            let (mut dx, mut dw, mut db) = (vec![], vec![9.0f32; cols], vec![9.0f32; cols]);
            let w = vec![1.0f32; cols];
            let r = cpu::layernorm_backward(&CpuExecutor::new(), &[], &[], &w, &[], &[], None, &mut dx, &mut dw, &mut db, sh);
            println!("  cols {cols}: {:?} dweight {} dbias {}", r.map_err(|e| e.to_string()), summary(&dw), summary(&db));
            let (mut dx, mut dw) = (vec![], vec![9.0f32; cols]);
            let r = cpu::rmsnorm_backward(&e, &[], &[], &w, &[], None, &mut dx, &mut dw, sh);
            println!("  rmsnorm cols {cols}: {:?} dweight {}", r.map_err(|e| e.to_string()), summary(&dw));
        }
    }
    if run("c6") {
        println!("### c6 cross-entropy: targets vocab, u32::MAX - 1, IGNORE_TARGET");
        let e = CpuExecutor::new();
        let (rows, vocab) = (3usize, 50usize);
        let logits = vals(rows * vocab, 5);
        let targets = [vocab as u32, u32::MAX - 1, IGNORE_TARGET];
        let (mut losses, mut dl) = (vec![9.0f32; rows], vec![9.0f32; rows * vocab]);
        let r = cpu::cross_entropy(&e, &logits, &targets, &mut losses, &mut dl, Rows { rows, cols: vocab }, 1.0);
        println!(
            "  {:?} losses {:?}; dlogits rows: {} / {} / {}",
            r.map_err(|e| e.to_string()),
            losses,
            summary(&dl[..vocab]),
            summary(&dl[vocab..2 * vocab]),
            summary(&dl[2 * vocab..])
        );
    }
    if run("c7") {
        println!("### c7 rotary: positions max_positions and u32::MAX");
        let e = CpuExecutor::new();
        let s = Rope { tokens: 2, heads: 1, head_dim: 8, rotary_dim: 8, max_positions: 4 };
        let x = vals(16, 6);
        let (cos, sin) = (vec![1.0f32; 16], vec![0.0f32; 16]);
        let mut out = vec![9.0f32; 16];
        let r = cpu::rotary_embedding(&e, &x, &[4, u32::MAX], &cos, &sin, &mut out, s, false);
        println!("  {:?} out {}", r.map_err(|e| e.to_string()), summary(&out));
    }
    if run("c8") {
        println!("### c8 gemm::plan with m x k overflowing usize, and batch x extent overflowing");
        let p = gemm::plan::<f32, f32>(GemmShape::new(1 << 40, 1, 1 << 40), 0, 0, 0, None).map(|_| ()).map_err(|e| e.to_string());
        println!("  m 2^40 k 2^40: {p:?}");
        let p = gemm::plan::<f32, f32>(GemmShape { batch: 1 << 62, ..GemmShape::new(4, 4, 4) }, 0, 0, 0, None).map(|_| ()).map_err(|e| e.to_string());
        println!("  batch 2^62: {p:?}");
        let p = gemm::plan::<f32, f32>(GemmShape::new(0, 4, 4), 0, 16, 0, None).map(|_| ()).map_err(|e| e.to_string());
        println!("  m 0: {p:?}");
    }
    if run("c9") {
        println!("### c9 PerBlock over a 2-D grid (3 x 2 blocks), 6 elements");
        let e = CpuExecutor::new();
        let mut out = vec![9u32; 6];
        let r = per_block_xy::launch_cpu(&e, LaunchConfig::new((3u32, 2u32), 32u32), &mut out);
        println!("  {:?} out {:?}", r.map_err(|e| e.to_string()), out);
    }
    if run("c10") {
        println!("### c10 DisjointSlice kernel: for_elements(usize::MAX) (clamped grid) and a 2-D grid");
        let e = CpuExecutor::new();
        let mut out = vec![0u32; 8];
        let r = fill::launch_cpu(&e, LaunchConfig::for_elements(usize::MAX, 1024), 1, &mut out);
        println!("  for_elements(usize::MAX, 1024): {:?}", r.map_err(|e| e.to_string()));
        let r = fill::launch_cpu(&e, LaunchConfig::new((2u32, 2u32), 2u32), 1, &mut out);
        println!("  grid (2, 2): {:?} out {:?}", r.map_err(|e| e.to_string()), out);
    }
    if run("c12") {
        println!("### c12 barriers in a 48-thread block: sync_warp(u32::MAX), sync_threads_count(true), (t odd)");
        for mode in 0..3u32 {
            let mut out = vec![0xffff_ffffu32; 48];
            let r =
                partial_sync::launch_cpu(&CpuExecutor::new().with_watchdog(std::time::Duration::from_secs(5)), LaunchConfig::new(1u32, 48u32), mode, &mut out);
            println!("  mode {mode}: {:?} out[0] {} out[40] {}", r.map_err(|e| e.to_string()), out[0], out[40]);
        }
    }
    if run("c13") {
        println!("### c13 CPU executor stacks of 0, 1 and 4096 bytes (child processes)");
        for bytes in ["0", "1", "4096"] {
            child(&["stack-child", bytes]);
        }
    }
    if run("c14") {
        println!("### c14 CPU executor: dynamic shared memory of u32::MAX bytes; a block of 2048 threads");
        let mut out = vec![0u32; 64];
        let r = fill::launch_cpu(&CpuExecutor::new(), LaunchConfig::new(1u32, 64u32).with_shared_bytes(u32::MAX), 1, &mut out);
        println!("  shared u32::MAX: {:?}", r.map_err(|e| e.to_string()));
        let mut out = vec![0u32; 4096];
        let r = fill::launch_cpu(&CpuExecutor::new(), LaunchConfig::new(2u32, 2048u32), 1, &mut out);
        println!("  block 2048: {:?}", r.map_err(|e| e.to_string()));
    }
    if run("c15") {
        println!("### c15 row calls with shapes at the limits: rows 2^26, cols 0, cols > u32::MAX, a short operand");
        let e = CpuExecutor::new();
        let w = vec![1.0f32; 8];
        let r = cpu::rmsnorm(&e, &[], &w, &mut [], &mut [], Rows { rows: 1 << 26, cols: 8 }, 1e-5);
        println!("  rows 2^26: {:?}", r.map_err(|e| e.to_string()));
        let r = cpu::rmsnorm(&e, &[], &w, &mut [], &mut [], Rows { rows: 1, cols: 0 }, 1e-5);
        println!("  cols 0: {:?}", r.map_err(|e| e.to_string()));
        let r = cpu::rmsnorm(&e, &[], &w, &mut [], &mut [], Rows { rows: 1, cols: 1 << 33 }, 1e-5);
        println!("  cols 2^33: {:?}", r.map_err(|e| e.to_string()));
        let x = vec![1.0f32; 15];
        let (mut out, mut rstd) = (vec![0.0f32; 16], vec![0.0f32; 2]);
        let r = cpu::rmsnorm(&e, &x, &w, &mut out, &mut rstd, Rows { rows: 2, cols: 8 }, 1e-5);
        println!("  x one short: {:?}", r.map_err(|e| e.to_string()));
    }
    if run("c16") {
        println!("### c16 auto traits that D1/D2 rely on (compile-time)");
        fn send<T: Send>() {}
        fn sync<T: Sync>() {}
        send::<ferrocuda::DeviceViewMut<'static, u32>>();
        send::<ferrocuda::DeviceView<'static, u32>>();
        sync::<ferrocuda::DeviceBuffer<u32>>();
        send::<ferrocuda::Stream>();
        sync::<ferrocuda::Stream>();
        send::<std::sync::Arc<cudarc::driver::CudaStream>>();
        println!("  DeviceViewMut: Send; DeviceView: Send; DeviceBuffer: Sync; Stream: Send + Sync; Arc<cudarc CudaStream>: Send (compiles)");
    }
    if run("c17") {
        println!("### c17 attention shapes the kernels refuse: heads_q not a multiple of heads_kv, head_dim 48, 2^26 rows");
        let e = CpuExecutor::new();
        for s in [
            shape(3, 2, 4, 4, 64, Layout::Bshd, false),
            shape(1, 1, 4, 4, 48, Layout::Bhsd, false),
            Attention { batch: 1 << 20, ..shape(64, 64, 1, 1, 64, Layout::Bhsd, false) },
        ] {
            let r = cpu::attention_forward::<f32>(&e, &[], &[], &[], &mut [], &mut [], s);
            println!("  {:?}", r.map_err(|e| e.to_string()));
        }
    }
    if run("c11") {
        println!("### c11 warp operations in the partial warp of a 48-thread block (lanes 32..47; 48..63 never exist)");
        for mode in 0..8u32 {
            let mut out = vec![0xffff_ffffu32; 48];
            let r = partial_warp::launch_cpu(&CpuExecutor::new(), LaunchConfig::new(1u32, 48u32), mode, &mut out);
            println!("  mode {mode}: {:?} lanes 0,31: {:#x} {:#x}; lanes 32..48: {:x?}", r.map_err(|e| e.to_string()), out[0], out[31], &out[32..]);
        }
    }
}
