//! CPU-executor cases of audit 2026-11-27c. Safe code only.
#![forbid(unsafe_code)]
use ferrocuda::cpu::CpuExecutor;
use ferrocuda::LaunchConfig;
use review_kernels::*;
use std::time::Duration;

fn show<T: std::fmt::Debug, E: std::fmt::Display>(case: &str, r: Result<T, E>) {
    match r {
        Ok(v) => println!("[{case}] Ok: {v:?}"),
        Err(e) => println!("[{case}] Err: {e}"),
    }
}

fn main() {
    let only = std::env::args().nth(1);
    let want = |c: &str| only.as_deref().map_or(true, |o| o == c);
    let ex = CpuExecutor::new();
    if want("r1") {
        let mut out = vec![0u32; 4];
        let r = r1_permuted_fields::launch_cpu(&ex, (1u32, 4u32), Pair { a: 1, b: 2 }, &mut out);
        show("r1 permuted fields (host build both sides)", r.map(|_| out.clone()));
    }
    if want("r2") {
        let x = vec![Elem { v: 41 }; 4];
        let mut out = vec![Elem::default(); 4];
        let r = r2_field_type_by_cfg::launch_cpu(&ex, (1u32, 4u32), &x, &mut out);
        show("r2 field type by cfg", r.map(|_| out.clone()));
    }
    if want("r3") {
        let x = vec![Pair { a: 1, b: 2 }; 2];
        let mut out = vec![Pair::default(); 2];
        let r = r3_generic_Pair::launch_cpu(&ex, (1u32, 2u32), &x, &mut out);
        show("r3 generic instance Pair", r.map(|_| out.clone()));
    }
    if want("r4") {
        let mut flag = vec![0u32; 2];
        let ex1 = CpuExecutor::new().with_workers(1).with_watchdog(Duration::from_secs(5));
        let r = r4_cross_block_flag::launch_cpu(&ex1, (2u32, 32u32), &mut flag);
        show("r4 cross-block flag, 1 worker", r.map(|_| flag.clone()));
    }
    if want("r4b") {
        let mut flag = vec![0u32; 2];
        let r = r4_cross_block_flag::launch_cpu(&ex, (2u32, 32u32), &mut flag);
        show("r4b cross-block flag, default workers", r.map(|_| flag.clone()));
    }
    if want("r20") {
        let mut counter = vec![0u32; 1];
        let mut out = vec![0u32; 4 * 32];
        let exw = CpuExecutor::new().with_watchdog(Duration::from_secs(5));
        let r = r20_grid_barrier::launch_cpu(&exw, (4u32, 32u32), 4, &mut counter, &mut out);
        show("r20 grid barrier over 4 blocks (default workers)", r.map(|_| counter.clone()));
        let mut counter = vec![0u32; 1];
        let r = r20_grid_barrier::launch_cpu(&exw, LaunchConfig::new(4u32, 32u32).cooperative(), 4, &mut counter, &mut out);
        show("r20b same, cooperative launch (all blocks co-resident by contract)", r.map(|_| counter.clone()));
    }
    if want("r21") {
        let ex1 = CpuExecutor::new().with_workers(1);
        let mut a = vec![0u32; 64];
        let r = r21_stash::launch_cpu(&ex1, (1u32, 1u32), 0, &mut a);
        show("r21 launch 1 (stash the AtomicSlice of `a`)", r);
        drop(a); // the host Vec is freed: the launch's borrow has ended
        let b = vec![0u32; 64]; // likely the same heap block
        let mut c = vec![0u32; 4];
        let r = r21_stash::launch_cpu(&ex1, (1u32, 1u32), 1, &mut c);
        show("r21 launch 2 (write through the stashed handle)", r);
        println!("[r21] b[0..2] = {:#x?} (0xbad = written through a freed buffer); c = {:?}", &b[..2], c);
    }
    if want("r22") {
        let mut out = vec![0u32; 32];
        let r = r22_static_plus_dynamic::launch_cpu(&ex, LaunchConfig::new(1u32, 32u32).with_shared_bytes(190 * 1024), &mut out);
        show("r22 48000 B static + 190 KiB dynamic shared (238 KiB > 227 KiB per block)", r.map(|_| out[0]));
        let r = r22_static_plus_dynamic::launch_cpu(&ex, LaunchConfig::new(1u32, 32u32).with_shared_bytes(228 * 1024), &mut out);
        show("r22b 228 KiB dynamic alone", r.map(|_| out[0]));
    }
    if want("r5") {
        let mut out = vec![0u32; 128];
        show("r5 launch_bounds(64) with 128 threads", r5_bounded::launch_cpu(&ex, (1u32, 128u32), &mut out));
    }
    if want("r6") {
        let mut out = vec![0u32; 64];
        show("r6 reqntid(128) with 64 threads", r6_exact::launch_cpu(&ex, (1u32, 64u32), &mut out));
    }
    if want("r7") {
        let mut out = vec![0u32; 96];
        show("r7 cluster_dims(2), grid 3", r7_cluster::launch_cpu(&ex, (3u32, 32u32), &mut out));
        let mut out = vec![0u32; 64];
        show("r7b cluster_dims(2) with explicit cluster 1", r7_cluster::launch_cpu(&ex, LaunchConfig::new(2u32, 32u32).with_cluster(1u32), &mut out));
    }
    if want("r8") {
        let mut out = vec![0u32; 32];
        show("r8 1 MiB local array", r8_big_local::launch_cpu(&ex, (1u32, 32u32), 5, &mut out).map(|_| out[0]));
    }
    if want("r9") {
        let mut out = vec![0u32; 32];
        let r = r9_dynamic_uninit::launch_cpu(&ex, LaunchConfig::new(1u32, 32u32).with_shared_bytes(128), &mut out);
        show("r9 dynamic shared read before write", r.map(|_| out[..4].to_vec()));
    }
    if want("r10") {
        let mut out = vec![0u32; 32];
        let r = r10_store_vs_atomic::launch_cpu(&ex, (1u32, 32u32), &mut out);
        show("r10 shared store racing shared atomic", r.map(|_| out[0]));
    }
    if want("r11") {
        let x: Vec<f32> = [f32::NAN, 3e9, -1.5, f32::NAN, 1e10, 2.5, -f32::INFINITY, 300.0, f32::NAN, f32::NAN, f32::NAN, 1.0000001]
            .to_vec();
        let mut out = vec![0u32; x.len()];
        let r = r11_numerics::launch_cpu(&ex, (1u32, 32u32), &x, &mut out);
        show("r11 numerics", r.map(|_| out.iter().map(|v| format!("{v:#x}")).collect::<Vec<_>>()));
    }
    if want("r12") {
        let mut out = vec![0u32; 64];
        let r = r12_two_barrier_sites::launch_cpu(&ex, (1u32, 64u32), &mut out);
        show("r12 two barrier sites", r.map(|_| out[..4].to_vec()));
    }
    if want("r13") {
        let mut out = vec![0u32; 4];
        show("r13 division by zero on odd threads", r13_panics::launch_cpu(&ex, (1u32, 4u32), 1, &mut out));
        let mut out = vec![0u32; 4];
        show("r13b same executor after the panic", r14_from_macro::launch_cpu(&ex, (1u32, 4u32), &mut out).map(|_| out.clone()));
    }
    if want("r15") {
        let mut a = vec![0u32; 4];
        let mut b = vec![0u32; 4];
        let _ = r15_static_counter::launch_cpu(&ex, (1u32, 4u32), &mut a);
        let _ = r15_static_counter::launch_cpu(&CpuExecutor::new(), (1u32, 4u32), &mut b);
        println!("[r15 static counter, two executors] {a:?} {b:?}");
    }
    if want("r16") {
        let mut out = vec![0u32; 64];
        let r = r16_loop_barrier::launch_cpu(&ex, (1u32, 64u32), &mut out);
        show("r16 barrier in thread-dependent loop", r.map(|_| out[..6].to_vec()));
    }
    if want("r17") {
        let mut out = vec![0u32; 4];
        show("r17 cfg_attr inline(never)", r17_cfg_attr_inline::launch_cpu(&ex, (1u32, 4u32), &mut out).map(|_| out[0]));
    }
    if want("r18") {
        let mut out = vec![0u32; 32];
        show("r18 deep frames", r18_deep_frames::launch_cpu(&ex, (1u32, 32u32), 9, &mut out).map(|_| out[0]));
    }
}
