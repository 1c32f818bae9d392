//! Audit 2026-11-27e, CPU-executor and host-only cases (no GPU needed). Safe code only.
//! `e_cpu [case]` (no argument: all of them).
#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use e_kernels::{cluster_exit_sync, dyn_split, elect_divergent, fill, plain_cluster_pdl, spin_flag};
use ferrocuda::LaunchConfig;
use ferrocuda::cpu::CpuExecutor;
use ferrocuda_kernels::attention::{Attention, Layout};
use ferrocuda_kernels::cpu;
use ferrocuda_kernels::rows::{AdamW, Rows};
use half::bf16;

fn e<T>(r: Result<T, impl std::fmt::Display>) -> String {
    match r {
        Ok(_) => "Ok".into(),
        Err(e) => format!("Err({e})"),
    }
}

fn show(v: &[u32]) -> String {
    v.iter().map(|&x| if x == u32::MAX { "-".to_string() } else { x.to_string() }).collect::<Vec<_>>().join("")
}

/// c1 (E-G1): `warpgroup::elect_one` with part of the warp absent, on the CPU executor.
fn c1() {
    for (mode, threads) in [(0u32, 32u32), (1, 32), (2, 32), (3, 48)] {
        let mut out = vec![u32::MAX; threads as usize];
        let ex = CpuExecutor::new().with_watchdog(Duration::from_secs(5));
        let r = elect_divergent::launch_cpu(&ex, LaunchConfig::new(1u32, threads), mode, &mut out);
        println!("c1 elect_divergent mode {mode}, block {threads}: {}\n   out (1 elected, 0 not, 2 other branch, - returned): {}", e(r), show(&out));
    }
    let mut out = vec![u32::MAX; 32];
    let ex = CpuExecutor::new().with_watchdog(Duration::from_secs(5));
    let r = e_kernels::shuffle_divergent::launch_cpu(&ex, LaunchConfig::new(1u32, 32u32), &mut out);
    println!("c1 control shuffle_divergent (warp::shuffle where elect_one was, mode 2's shape): {}\n   out: {:?}", e(r), &out[..]);
}

/// c2 (E-G2): `cluster::sync()` where threads >= live returned first.
fn c2() {
    for live in [32u32, 16] {
        let mut out = vec![u32::MAX; 64];
        let ex = CpuExecutor::new().with_watchdog(Duration::from_secs(5));
        let r = cluster_exit_sync::launch_cpu(&ex, LaunchConfig::new(2u32, 32u32), live, &mut out);
        println!("c2 cluster_exit_sync live {live}: {}\n   out[0] {} out[31] {} out[32] {}", e(r), out[0] as i64, out[31] as i64, out[32] as i64);
    }
}

/// c3 (E-G3): cluster and grid-dependency calls in a plain launch; a dynamic shared slice
/// split at an unaligned point, read as vectors.
fn c3() {
    let mut out = vec![u32::MAX; 64];
    let r = plain_cluster_pdl::launch_cpu(&CpuExecutor::new(), LaunchConfig::new(2u32, 32u32), &mut out);
    println!("c3 plain_cluster_pdl: {}; out[0] {} out[32] {}", e(r), out[0], out[32]);
    for mid in [4u32, 2] {
        let mut o = vec![u32::MAX; 32];
        let r = dyn_split::launch_cpu(&CpuExecutor::new(), LaunchConfig::new(1u32, 32u32).with_shared_bytes(64), mid, &mut o);
        println!("c3 dyn_split mid {mid}: {}; out[0] {}", e(r), o[0]);
    }
}

/// c4 (E-L1, CPU half): empty grids and blocks, cluster shapes.
fn c4() {
    for (label, cfg) in [
        ("grid 0", LaunchConfig::new(0u32, 32u32)),
        ("block 0", LaunchConfig::new(1u32, 0u32)),
        ("grid 16, cluster 16", LaunchConfig::new(16u32, 32u32).with_cluster(16u32)),
        ("grid 6, cluster 3", LaunchConfig::new(6u32, 32u32).with_cluster(3u32)),
        ("grid 4, cluster 2, cooperative", LaunchConfig::new(4u32, 32u32).with_cluster(2u32).cooperative()),
    ] {
        let mut b = vec![0u32; 4096];
        let r = fill::launch_cpu(&CpuExecutor::new(), cfg, 3, &mut b);
        println!("c4 fill, {label}: {}; threes {}", e(r), b.iter().filter(|&&x| x == 3).count());
    }
    let mut o = vec![0u32; 64];
    let r = cluster_exit_sync::launch_cpu(&CpuExecutor::new(), LaunchConfig::new(2u32, 32u32).cooperative(), 32, &mut o);
    println!("c4 cluster_exit_sync cooperative grid 2: {}; out[0] {}", e(r), o[0]);
}

/// c5: a kernel that never ends, on the CPU executor with a watchdog.
fn c5() {
    let mut flag = vec![0u32; 1];
    let t = Instant::now();
    let r = spin_flag::launch_cpu(&CpuExecutor::new().with_watchdog(Duration::from_secs(2)), LaunchConfig::new(1u32, 32u32), &mut flag);
    println!("c5 spin_flag (a flag nobody sets), watchdog 2 s: {} after {:?}", e(r), t.elapsed());
}

fn bf(n: usize, seed: u32) -> Vec<bf16> {
    (0..n).map(|i| bf16::from_f32((((i as u32).wrapping_mul(2654435761).wrapping_add(seed) >> 20) as f32 / 4096.0) - 0.5)).collect()
}

/// c6 (E-K5): the kernels library at zero and degenerate sizes on the CPU executor.
fn c6() {
    let ex = CpuExecutor::new();
    let hyper = AdamW { learning_rate: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 };
    println!("c6 adamw n 0: {}", e(cpu::adamw::<f32>(&ex, &mut [], &[], &mut [], &mut [], hyper, 1, 1.0)));
    println!("c6 adamw step 0: {}", e(cpu::adamw::<f32>(&ex, &mut [1.0], &[1.0], &mut [0.0], &mut [0.0], hyper, 0, 1.0)));
    let nan_hyper = AdamW { learning_rate: f32::NAN, ..hyper };
    let mut p = [1.0f32; 8];
    println!("c6 adamw lr NaN: {} -> params {:?}", e(cpu::adamw::<f32>(&ex, &mut p, &[1.0; 8], &mut [0.0; 8], &mut [0.0; 8], nan_hyper, 1, 1.0)), &p[..2]);
    let (mut o, mut r) = ([0f32; 3], [0f32; 3]);
    println!("c6 rmsnorm cols 1: {} -> {:?}", e(cpu::rmsnorm::<f32>(&ex, &[2.0, -3.0, 0.0], &[1.0], &mut o, &mut r, Rows { rows: 3, cols: 1 }, 1e-5)), o);
    println!("c6 rmsnorm cols 0: {}", e(cpu::rmsnorm::<f32>(&ex, &[], &[], &mut [], &mut [0.0; 3], Rows { rows: 3, cols: 0 }, 1e-5)));
    let (mut l, mut d) = ([0f32; 2], [0f32; 2]);
    println!(
        "c6 cross_entropy vocab 1 targets [0, 1]: {} -> losses {:?} dlogits {:?}",
        e(cpu::cross_entropy::<f32>(&ex, &[5.0, 5.0], &[0, 1], &mut l, &mut d, Rows { rows: 2, cols: 1 }, 1.0)),
        l,
        d
    );
    let mut s = [0f32; 4];
    println!("c6 softmax row of -inf: {} -> {:?}", e(cpu::softmax::<f32>(&ex, &[f32::NEG_INFINITY; 4], &mut s, Rows { rows: 1, cols: 4 })), s);
    let mut g = [1.0f32; 4];
    println!("c6 clip_by_global_norm norm_squared NaN: {} -> {:?}", e(cpu::clip_by_global_norm::<f32>(&ex, &mut g, &[f32::NAN], 1.0)), g);
    let shape = Attention { batch: 1, heads_q: 1, heads_kv: 1, seq_q: 4, seq_kv: 4, head_dim: 32, layout: Layout::Bhsd, causal: true, scale: Some(f32::NAN) };
    let (mut out, mut lse) = (vec![bf16::ZERO; 128], vec![0f32; 4]);
    let r = cpu::attention_forward(&ex, &bf(128, 1), &bf(128, 2), &bf(128, 3), &mut out, &mut lse, shape);
    println!("c6 attention scale NaN: {} -> out[0] {} lse[0] {}", e(r), out[0], lse[0]);
    let shape = Attention { scale: Some(f32::INFINITY), ..shape };
    let r = cpu::attention_forward(&ex, &bf(128, 1), &bf(128, 2), &bf(128, 3), &mut out, &mut lse, shape);
    println!("c6 attention scale inf: {} -> out[0] {} lse[0] {}", e(r), out[0], lse[0]);
}

/// c7 (E-M1): `#[kernel]` attribute arguments at their edges, launched on the CPU executor.
fn c7() {
    use e_badattr::{cd0, cd2x2x4, cd16, lb0, lb128_min64, lb4096};
    for block in [32u32, 1024] {
        let cfg = LaunchConfig::new(16u32, block);
        let n = 16 * block as usize;
        let mut o = vec![0u32; n];
        println!("c7 launch_bounds(0), block {block}: {}; ones {}", e(lb0::launch_cpu(&CpuExecutor::new(), cfg, &mut o)), o.iter().sum::<u32>());
        let mut o = vec![0u32; n];
        println!("c7 launch_bounds(4096), block {block}: {}; ones {}", e(lb4096::launch_cpu(&CpuExecutor::new(), cfg, &mut o)), o.iter().sum::<u32>());
        let mut o = vec![0u32; n];
        println!("c7 launch_bounds(128, 64), block {block}: {}; ones {}", e(lb128_min64::launch_cpu(&CpuExecutor::new(), cfg, &mut o)), o.iter().sum::<u32>());
    }
    let cfg = LaunchConfig::new(16u32, 32u32);
    let mut o = vec![0u32; 512];
    println!("c7 cluster_dims(0), grid 16: {}; ones {}", e(cd0::launch_cpu(&CpuExecutor::new(), cfg, &mut o)), o.iter().sum::<u32>());
    let mut o = vec![0u32; 512];
    println!("c7 cluster_dims(16), grid 16: {}; ones {}", e(cd16::launch_cpu(&CpuExecutor::new(), cfg, &mut o)), o.iter().sum::<u32>());
    let mut o = vec![0u32; 512];
    let cfg3 = LaunchConfig::new(ferrocuda::Dim3::new(2, 2, 4), ferrocuda::Dim3::new(32, 1, 1));
    println!("c7 cluster_dims(2, 2, 4), grid (2, 2, 4): {}; ones {}", e(cd2x2x4::launch_cpu(&CpuExecutor::new(), cfg3, &mut o)), o.iter().sum::<u32>());
}

fn main() {
    let case = std::env::args().nth(1);
    let all: [(&str, fn()); 7] = [("c1", c1), ("c2", c2), ("c3", c3), ("c4", c4), ("c5", c5), ("c6", c6), ("c7", c7)];
    for (name, f) in all {
        if case.as_deref().is_none_or(|c| c == name) {
            f();
        }
    }
}
