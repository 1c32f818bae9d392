//! GPU cases of audit 2026-11-27c (one case per process: `review_gpu <case>`). Safe code only.
#![forbid(unsafe_code)]
use ferrocuda::{Context, DeviceBuffer, Event, LaunchConfig, Stream};
use review_kernels::*;
use std::time::Duration;

type R = Result<(), Box<dyn std::error::Error>>;

fn main() -> R {
    let case = std::env::args().nth(1).unwrap_or_default();
    let ctx = Context::primary(0)?;
    let s = Stream::non_blocking(&ctx)?;
    println!("== {case} on {:?}", ctx.device());
    match case.as_str() {
        "r1" => {
            let mut out = DeviceBuffer::<u32>::zeroed(&ctx, 4)?;
            let r = r1_permuted_fields::launch(&s, (1u32, 4u32), Pair { a: 1, b: 2 }, &mut out);
            println!("launch: {r:?}");
            s.synchronize()?;
            println!("out (want [1,1,1,1]) = {:?}", out.to_vec()?);
        }
        "r2" => {
            let x = DeviceBuffer::from_slice(&ctx, &[Elem { v: 41 }; 4])?;
            let mut out = DeviceBuffer::<Elem>::zeroed(&ctx, 4)?;
            let r = r2_field_type_by_cfg::launch(&s, (1u32, 4u32), &x, &mut out);
            println!("launch: {r:?}");
            s.synchronize()?;
            println!("out (want v=42) = {:?}", out.to_vec()?);
        }
        "r3" => {
            let x = DeviceBuffer::from_slice(&ctx, &[Pair { a: 1, b: 2 }; 2])?;
            let mut out = DeviceBuffer::<Pair>::zeroed(&ctx, 2)?;
            let r = r3_generic_Pair::launch(&s, (1u32, 2u32), &x, &mut out);
            println!("launch: {r:?}");
            s.synchronize()?;
            println!("out (want a=11,b=22) = {:?}", out.to_vec()?);
        }
        "r4" => {
            let mut flag = DeviceBuffer::<u32>::zeroed(&ctx, 2)?;
            r4_cross_block_flag::launch(&s, (2u32, 32u32), &mut flag)?;
            println!("sync: {:?}", s.synchronize_timeout(Duration::from_secs(10)));
            println!("flag = {:?}", flag.to_vec()?);
        }
        "r5" => {
            let mut out = DeviceBuffer::<u32>::zeroed(&ctx, 128)?;
            println!("launch_bounds(64) x128: {:?}", r5_bounded::launch(&s, (1u32, 128u32), &mut out));
            let mut out = DeviceBuffer::<u32>::zeroed(&ctx, 64)?;
            println!("reqntid(128) x64: {:?}", r6_exact::launch(&s, (1u32, 64u32), &mut out));
            let mut out = DeviceBuffer::<u32>::zeroed(&ctx, 96)?;
            println!("cluster(2) grid 3: {:?}", r7_cluster::launch(&s, (3u32, 32u32), &mut out));
            let mut out = DeviceBuffer::<u32>::zeroed(&ctx, 64)?;
            println!("cluster(2) cfg cluster 1: {:?}", r7_cluster::launch(&s, LaunchConfig::new(2u32, 32u32).with_cluster(1u32), &mut out));
            let mut out = DeviceBuffer::<u32>::zeroed(&ctx, 64)?;
            println!("cluster(2) grid 2 ok: {:?}", r7_cluster::launch(&s, (2u32, 32u32), &mut out).and_then(|_| s.synchronize()).and_then(|_| out.to_vec()).map(|v| v[0]));
        }
        "r8" => {
            let mut out = DeviceBuffer::<u32>::zeroed(&ctx, 32)?;
            let r = r8_big_local::launch(&s, (1u32, 32u32), 5, &mut out);
            println!("1 MiB local: {r:?}");
            if r.is_ok() {
                println!("sync: {:?} out0={:?}", s.synchronize(), out.to_vec().map(|v| v[0]));
            }
            let mut out = DeviceBuffer::<u32>::zeroed(&ctx, 32)?;
            let r = r18_deep_frames::launch(&s, (1u32, 32u32), 9, &mut out);
            println!("deep frames: {r:?} sync {:?} out0={:?}", s.synchronize(), out.to_vec().map(|v| v[0]));
        }
        "r9" => {
            // leave known values in shared memory, then read dynamic shared memory before writing
            let mut out = DeviceBuffer::<u32>::zeroed(&ctx, 64)?;
            r12_two_barrier_sites::launch(&s, (1u32, 64u32), &mut out)?;
            let mut out = DeviceBuffer::<u32>::zeroed(&ctx, 32)?;
            let r = r9_dynamic_uninit::launch(&s, LaunchConfig::new(1u32, 32u32).with_shared_bytes(128), &mut out);
            println!("launch {r:?} sync {:?}", s.synchronize());
            println!("dynamic shared before write: {:x?}", &out.to_vec()?[..8]);
        }
        "r10" => {
            let mut out = DeviceBuffer::<u32>::zeroed(&ctx, 32)?;
            for _ in 0..3 {
                r10_store_vs_atomic::launch(&s, (1u32, 32u32), &mut out)?;
                s.synchronize()?;
                println!("store vs atomic: {}", out.to_vec()?[0]);
            }
        }
        "r11" => {
            let xs = [f32::NAN, 3e9, -1.5, f32::NAN, 1e10, 2.5, -f32::INFINITY, 300.0, f32::NAN, f32::NAN, f32::NAN, 1.0000001];
            let x = DeviceBuffer::from_slice(&ctx, &xs)?;
            let mut out = DeviceBuffer::<u32>::zeroed(&ctx, xs.len())?;
            r11_numerics::launch(&s, (1u32, 32u32), &x, &mut out)?;
            s.synchronize()?;
            println!("numerics: {:x?}", out.to_vec()?);
            let mut out = DeviceBuffer::<u32>::zeroed(&ctx, 64)?;
            r12_two_barrier_sites::launch(&s, (1u32, 64u32), &mut out)?;
            println!("two sites: sync {:?} {:?}", s.synchronize_timeout(Duration::from_secs(5)), &out.to_vec()?[..4]);
            let mut out = DeviceBuffer::<u32>::zeroed(&ctx, 64)?;
            r16_loop_barrier::launch(&s, (1u32, 64u32), &mut out)?;
            println!("loop barrier: sync {:?} {:?}", s.synchronize_timeout(Duration::from_secs(5)), &out.to_vec()?[..6]);
            let mut a = DeviceBuffer::<u32>::zeroed(&ctx, 4)?;
            r15_static_counter::launch(&s, (1u32, 4u32), &mut a)?;
            r15_static_counter::launch(&s, (1u32, 4u32), &mut a)?;
            s.synchronize()?;
            println!("static counter 2nd launch: {:?}", a.to_vec()?);
            let mut o = DeviceBuffer::<u32>::zeroed(&ctx, 4)?;
            r14_from_macro::launch(&s, (1u32, 4u32), &mut o)?;
            r17_cfg_attr_inline::launch(&s, (1u32, 4u32), &mut a)?;
            s.synchronize()?;
            println!("macro kernel {:?} cfg_attr inline {:?}", o.to_vec()?, a.to_vec()?);
        }
        "cap_panic" => {
            let mut y = DeviceBuffer::<u32>::zeroed(&ctx, 32)?;
            r14_from_macro::launch(&s, (1u32, 32u32), &mut y)?; // loads the module before the capture
            s.synchronize()?;
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                s.capture(|st| {
                    r14_from_macro::launch(st, (1u32, 32u32), &mut y)?;
                    panic!("panic inside capture");
                })
            }));
            println!("capture with panic: panicked={} capturing now={:?}", r.is_err(), s.is_capturing());
            r14_from_macro::launch(&s, (1u32, 32u32), &mut y)?;
            println!("after: sync {:?} y0={:?}", s.synchronize(), y.to_vec().map(|v| v[0]));
        }
        "cap_alloc" => {
            let other = Stream::non_blocking(&ctx)?;
            let g = s.capture(|_st| {
                let b = DeviceBuffer::<u32>::zeroed(&ctx, 1024);
                println!("  zeroed(&ctx) in capture: {:?}", b.as_ref().map(|b| b.len()));
                let c = DeviceBuffer::<u32>::zeroed_async(&other, 1024);
                println!("  zeroed_async(other stream) in capture: {:?}", c.as_ref().map(|b| b.len()));
                let d = DeviceBuffer::from_slice(&ctx, &[1u32, 2, 3]);
                println!("  from_slice in capture: {:?}", d.as_ref().map(|b| b.to_vec()));
                Ok(())
            });
            println!("capture: {:?}", g.as_ref().map(|g| g.node_count()));
            println!("ctx sync {:?}", ctx.synchronize());
        }
        "cap_event" => {
            let other = Stream::non_blocking(&ctx)?;
            let ev = Event::new(&ctx)?;
            let mut y = DeviceBuffer::<u32>::zeroed(&ctx, 32)?;
            r14_from_macro::launch(&s, (1u32, 32u32), &mut y)?; // loads the module before the capture
            s.synchronize()?;
            y.fill(0)?;
            let g = s.capture(|st| {
                r14_from_macro::launch(st, (1u32, 32u32), &mut y)?;
                println!("  record in capture: {:?}", ev.record(st));
                println!("  other.wait_event(captured ev): {:?}", other.wait_event(&ev));
                println!("  ev.synchronize in capture: {:?}", ev.synchronize());
                println!("  ev.is_complete in capture: {:?}", ev.is_complete());
                Ok(())
            });
            println!("capture: {:?}", g.as_ref().map(|g| g.node_count()));
            println!("after: ev.synchronize {:?} other.sync {:?} y0={:?}", ev.synchronize(), other.synchronize(), y.to_vec().map(|v| v[0]));
        }
        "cap_forget" => {
            let s2 = Stream::non_blocking(&ctx)?;
            let y = DeviceBuffer::<u32>::zeroed(&ctx, 32)?;
            s2.begin_capture()?;
            std::mem::forget(s2);
            drop(y);
            let z = DeviceBuffer::<u32>::from_slice(&ctx, &[5u32; 4]);
            println!("alloc after leaked capture: {:?}", z.as_ref().map(|z| z.to_vec()));
            println!("ctx.synchronize: {:?}", ctx.synchronize());
            println!("deferred releases: {:?}", ctx.deferred_releases());
        }
        "guard" => {
            let other = Context::create(0, Default::default())?;
            let before = cudarc::driver::result::ctx::get_current()?;
            let ga = ctx.push_current()?;
            let gb = other.push_current()?;
            drop(ga);
            let mid = cudarc::driver::result::ctx::get_current()?;
            drop(gb);
            let after = cudarc::driver::result::ctx::get_current()?;
            println!(
                "before={before:?} primary={:?} created={:?}; after dropping guard A first: driver current={mid:?}; after both: {after:?}; Context::current()={:?}",
                ctx.raw(),
                other.raw(),
                Context::current().map(|c| c.raw())
            );
        }
        "cudarc_timeout" => {
            let cu_ctx = cudarc::driver::CudaContext::new(0)?;
            let cu_s = cu_ctx.new_stream()?;
            let fctx = ferrocuda::borrowed::cudarc::context(&cu_ctx)?;
            let fs = Stream::non_blocking(&fctx)?;
            let mut flag = DeviceBuffer::<u32>::zeroed(&fctx, 1)?;
            let mut y = cu_s.alloc_zeros::<u32>(1 << 20)?;
            cu_s.synchronize()?;
            let iters: u32 = std::env::args().nth(2).map_or(4_000_000, |a| a.parse().unwrap());
            let t0 = std::time::Instant::now();
            let r = ferrocuda::borrowed::cudarc::scope(|sc| -> Result<(), ferrocuda::Error> {
                let mut ys = sc.slice_mut(&mut y, &cu_s)?;
                r19_busy::launch(&fs, LaunchConfig::for_elements(1 << 20, 256), iters, &mut flag, &mut ys)?;
                println!("  timeout: {:?}", fs.synchronize_timeout(Duration::from_millis(50)));
                println!("  cudarc begin_capture: {:?}", cu_s.begin_capture(cudarc::driver::sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED));
                Ok(())
            });
            println!("scope: {r:?} at {:?}", t0.elapsed());
            let g = cu_s.end_capture(cudarc::driver::sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH);
            println!("cudarc end_capture: {:?}", g.as_ref().map(|g| g.is_some()));
            drop(g);
            drop(y); // cudarc frees on cu_s
            println!("y dropped (cudarc free queued) at {:?}, ferrocuda stream idle: {:?}", t0.elapsed(), fs.is_idle());
            let z = cu_s.alloc_zeros::<u32>(1 << 20);
            println!("alloc_zeros: {:?}", z.as_ref().map(|_| ()));
            let z = z?;
            println!("cu_s.synchronize: {:?}", cu_s.synchronize());
            let z0 = cu_s.clone_dtoh(&z);
            println!("clone_dtoh: {:?}", z0.as_ref().map(|_| ()));
            let z0 = z0?;
            println!("fresh cudarc buffer right after: nonzero={} at {:?}", z0.iter().filter(|&&v| v != 0).count(), t0.elapsed());
            while !fs.is_idle().unwrap_or(true) && t0.elapsed() < Duration::from_secs(25) {
                std::thread::sleep(Duration::from_millis(100));
            }
            let z1 = cu_s.clone_dtoh(&z)?;
            println!(
                "fresh cudarc buffer once the ferrocuda kernel ended: nonzero={} (0xDEAD = the ferrocuda kernel's write into freed memory) first={:x?} busy done={:?}",
                z1.iter().filter(|&&v| v != 0).count(),
                z1.get(0),
                fs.is_idle()
            );
        }
        "timeout_drop" => {
            let mut flag = DeviceBuffer::<u32>::zeroed(&ctx, 1)?;
            let mut out = DeviceBuffer::<u32>::zeroed(&ctx, 1024)?;
            let iters: u32 = std::env::args().nth(2).map_or(4_000_000, |a| a.parse().unwrap());
            r19_busy::launch(&s, (4u32, 256u32), iters, &mut flag, &mut out)?;
            let t0 = std::time::Instant::now();
            println!("timeout: {:?}", s.synchronize_timeout(Duration::from_millis(50)));
            drop(out);
            println!("drop after timeout returned at {:?}", t0.elapsed());
            println!("to_vec of flag after timeout: {:?}", flag.to_vec().map(|v| v[0]));
            println!("ctx.synchronize: {:?} at {:?}", ctx.synchronize(), t0.elapsed());
        }
        "panic" => {
            let mut out = DeviceBuffer::<u32>::zeroed(&ctx, 4)?;
            let r = r13_panics::launch(&s, (1u32, 4u32), 1, &mut out);
            println!("launch {r:?} sync: {:?}", s.synchronize());
            let mut o2 = DeviceBuffer::<u32>::zeroed(&ctx, 4);
            println!("after: alloc {:?}", o2.as_ref().map(|_| ()));
            if let Ok(o2) = o2.as_mut() {
                println!("launch after panic: {:?}", r14_from_macro::launch(&s, (1u32, 4u32), o2));
            }
        }
        "r22" => {
            let mut out = DeviceBuffer::<u32>::zeroed(&ctx, 32)?;
            let cfg = LaunchConfig::new(1u32, 32u32).with_shared_bytes(190 * 1024);
            println!("190 KiB dynamic, no opt-in: {:?}", r22_static_plus_dynamic::launch(&s, cfg, &mut out));
            let f = r22_static_plus_dynamic::function(&ctx)?;
            println!("opt-in to 190 KiB (+48000 B static): {:?}", f.set_max_dynamic_shared_bytes(190 * 1024));
            println!("launch after: {:?} sync {:?}", r22_static_plus_dynamic::launch(&s, cfg, &mut out), s.synchronize());
        }
        other => println!("unknown case {other}"),
    }
    Ok(())
}
