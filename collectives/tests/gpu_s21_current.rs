//! Session 21, G20R-4's class in this crate: the peer all-reduce and the NCCL communicator
//! called `Context::bind_to_thread`, which left their context current on the caller's thread
//! (a created context then got the CUDA runtime allocations of every other library there, and
//! lost them when it was destroyed; another context moved the runtime's current device). They
//! push their context for their own driver and NCCL calls and pop it again. One GPU; skip
//! without one (and fail under `REQUIRE_GPU=1`), the NCCL test also without NCCL.
//!
//! Run: `REQUIRE_GPU=1 cargo test --release -p ferrocuda-collectives --test gpu_s21_current -- --nocapture`.

use std::io::Write;

use ferrocuda_collectives::nccl::{self, Communicator, Config};
use ferrocuda_collectives::peer::PeerGroup;
use ferrocuda_host::{Context, DeviceBuffer, SchedulePolicy, Stream, sys};

fn gpu_or_skip(test: &str) -> Option<Context> {
    match Context::primary(0) {
        Ok(context) => Some(context),
        Err(e) => {
            assert!(std::env::var("REQUIRE_GPU").as_deref() != Ok("1"), "REQUIRE_GPU=1 but {test} cannot run: {e}");
            let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {e}");
            None
        }
    }
}

/// The thread's current driver context (null: none).
fn current_raw() -> sys::CUcontext {
    let mut raw = std::ptr::null_mut();
    // SAFETY: writes one handle.
    assert_eq!(unsafe { sys::cuCtxGetCurrent(&mut raw) }, sys::CUresult::CUDA_SUCCESS);
    raw
}

/// A peer group of one rank on a created context, used from a thread whose current context is
/// the primary one: after each call the primary context is current again, never the created one.
#[test]
fn g21_peer_all_reduce_leaves_the_threads_current_context_unchanged() {
    let Some(primary) = gpu_or_skip("g21_peer_all_reduce_leaves_the_threads_current_context_unchanged") else { return };
    primary.bind_to_thread().unwrap();
    let before = current_raw();
    let created = Context::create(0, SchedulePolicy::Auto).unwrap();
    let mut ranks = PeerGroup::new(std::slice::from_ref(&created), 1024).unwrap();
    assert_eq!(current_raw(), before, "PeerGroup::new left a context current");
    let mut rank = ranks.pop().unwrap();
    let stream = Stream::new(&created).unwrap();
    let x = DeviceBuffer::from_slice(&created, &[2.0f32; 1024]).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&created, 1024).unwrap();
    rank.all_reduce(&stream, x.slice(..), y.slice_mut(..)).unwrap();
    assert_eq!(current_raw(), before, "PeerRank::all_reduce left a context current");
    rank.check().unwrap();
    assert_eq!(current_raw(), before, "PeerRank::check left a context current");
    assert_eq!(y.to_vec().unwrap(), vec![2.0f32; 1024]);
    drop((rank, x, y, stream));
    assert_eq!(current_raw(), before, "the group's drop left a context current");
}

/// NCCL's setup and teardown on the primary context, from a thread whose current context is
/// another one (a created context, as another library's would be): it is current again after
/// each call (`Communicator::init_all` used to leave the primary context current).
#[test]
fn g21_nccl_setup_leaves_the_threads_current_context_unchanged() {
    const TEST: &str = "g21_nccl_setup_leaves_the_threads_current_context_unchanged";
    let Some(primary) = gpu_or_skip(TEST) else { return };
    if let Err(e) = nccl::version() {
        let _ = writeln!(std::io::stderr(), "SKIPPED {TEST}: {e}");
        return;
    }
    let other = Context::create(0, SchedulePolicy::Auto).unwrap();
    let _other_current = other.push_current().unwrap();
    let before = current_raw();
    assert_eq!(before, other.raw());
    let comms = Communicator::init_all(std::slice::from_ref(&primary), &Config::new()).unwrap();
    assert_eq!(current_raw(), before, "Communicator::init_all left its context current");
    drop(comms);
    assert_eq!(current_raw(), before, "the communicator's drop left its context current");
}
