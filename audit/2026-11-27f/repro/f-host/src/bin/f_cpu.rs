//! Audit 2026-11-27f CPU-executor cases (safe code only). `f_cpu [case]`.
#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use ferrocuda::LaunchConfig;
use ferrocuda::cpu::CpuExecutor;
use ferrocuda_kernels::attention::{Attention, Layout};
use half::bf16;

fn nb(block: u32, count: u32, live: u32) {
    let ex = CpuExecutor::new().with_watchdog(Duration::from_secs(3));
    let mut out = vec![0u32; block as usize];
    let t = Instant::now();
    let r = f_kernels::named_exit::launch_cpu(&ex, LaunchConfig::new(1u32, block), count, live, &mut out);
    println!(
        "nb block {block} count {count} live {live}: {:?} after {:?}\n   out: {}",
        r.map_err(|e| e.to_string()),
        t.elapsed(),
        out.iter().map(|x| x.to_string()).collect::<String>()
    );
}

/// The same with the default executor (no watchdog set): does it end?
fn nb_default(block: u32, count: u32, live: u32) {
    let mut out = vec![0u32; block as usize];
    let t = Instant::now();
    let r = f_kernels::named_exit::launch_cpu(&CpuExecutor::new(), LaunchConfig::new(1u32, block), count, live, &mut out);
    println!("nb_default block {block} count {count} live {live}: {:?} after {:?}", r.map_err(|e| e.to_string()), t.elapsed());
}

fn nb_mixed(count1: u32) {
    let ex = CpuExecutor::new().with_watchdog(Duration::from_secs(3));
    let mut out = vec![0u32; 64];
    let r = f_kernels::named_mixed::launch_cpu(&ex, LaunchConfig::new(1u32, 64u32), count1, &mut out);
    println!("nb_mixed counts 64/{count1}: {:?}\n   out: {}", r.map_err(|e| e.to_string()), out.iter().map(|x| x.to_string()).collect::<String>());
}

/// K2: a refused attention backward (bad last operand) writes nothing.
fn k2() {
    let ex = CpuExecutor::new();
    let shape = Attention { batch: 1, heads_q: 2, heads_kv: 1, seq_q: 20, seq_kv: 20, head_dim: 64, layout: Layout::Bhsd, causal: true, scale: None };
    let (ql, kl, rows) = (shape.q_len(), shape.kv_len(), shape.q_rows());
    let one = |n: usize| vec![bf16::from_f32(0.5); n];
    let sentinel = bf16::from_f32(-3.0);
    let (q, k, v, o, d_o, lse) = (one(ql), one(kl), one(kl), one(ql), one(ql), vec![0.0f32; rows]);
    let mut dq = vec![sentinel; ql];
    let mut dk = vec![sentinel; kl];
    let mut dv = vec![sentinel; kl - 1];
    let r = ferrocuda_kernels::cpu::attention_backward(&ex, &q, &k, &v, &o, &d_o, &lse, &mut dq, &mut dk, &mut dv, shape);
    let touched = dq.iter().chain(&dk).chain(&dv).filter(|&&x| x != sentinel).count();
    println!("k2 attention_backward with dv one short: {:?}; elements changed: {touched}", r.map_err(|e| e.to_string()));
}

fn main() {
    let which = std::env::args().nth(1).unwrap_or_default();
    let all = which.is_empty();
    if all || which == "nb" {
        nb(32, 32, 32); // control
        nb(64, 64, 64); // control
        nb(64, 64, 32); // a whole warp exited: GPU hangs (PTX exit releases only count-less barriers)
        nb(32, 32, 16); // half a warp exited: GPU completes (a warp arrives whole)
        nb(48, 64, 48); // partial last warp: GPU completes (it counts as a warp)
        nb(64, 64, 40); // warp 1 has 8 live lanes
        nb_mixed(64);
        nb_mixed(32);
    }
    if which == "nb_default" {
        let a: Vec<u32> = std::env::args().skip(2).map(|x| x.parse().unwrap()).collect();
        nb_default(a[0], a[1], a[2]);
    }
    if all || which == "k2" {
        k2();
    }
}
