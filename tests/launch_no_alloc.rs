//! The launch path allocates nothing: a counting global allocator sees zero heap allocations
//! across thousands of typed launches (embedded module, explicit module, extended launch),
//! once the module is loaded and the kernel looked up.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use ferrocuda::{DeviceBuffer, JitOptions, LaunchConfig, Module, Stream};
use gpu_kernels::saxpy;
use test_kernels::launch_kinds::{empty, mark_blocks};

struct CountingAllocator;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator, counting calls.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

#[test]
fn typed_launches_do_not_touch_the_heap() {
    let Some(context) = common::gpu_or_skip("typed_launches_do_not_touch_the_heap") else { return };
    let stream = Stream::new(&context).unwrap();
    let x = DeviceBuffer::from_slice(&context, &[1.0f32; 256]).unwrap();
    let mut y = DeviceBuffer::<f32>::zeroed(&context, 256).unwrap();
    let mut blocks = DeviceBuffer::<u32>::zeroed(&context, 8).unwrap();
    // SAFETY: the PTX/cubin is this project's own build (kernels built by #[kernel], whose
    // fingerprints `launch_in` checks), or a module that is never launched through a typed launcher.
    let module = unsafe { Module::load_ptx(&context, "explicit", gpu_kernels::KERNELS.ptx_for(80).unwrap(), &JitOptions::new()) }.unwrap();
    let clustered = LaunchConfig::new(8u32, 32u32).with_cluster(2u32);
    let use_clusters = context.limits().cluster_launch;
    let mut round = |count: usize| {
        for _ in 0..count {
            empty::launch(&stream, (1u32, 32u32)).unwrap();
            saxpy::launch(&stream, (2u32, 128u32), 0.5, &x, &mut y).unwrap();
            saxpy::launch(&stream, (1u32, 128u32), 0.5, &x.slice(..100), &mut y.slice_mut(100..200)).unwrap();
            saxpy::launch_in(&module, &stream, (2u32, 128u32), 0.5, &x, &mut y).unwrap();
            if use_clusters {
                mark_blocks::launch(&stream, clustered, false, &mut blocks).unwrap();
            }
        }
    };
    round(2); // first launches load the embedded module and look the kernels up
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    round(2000);
    let allocations = ALLOCATIONS.load(Ordering::SeqCst) - before;
    stream.synchronize().unwrap();
    assert_eq!(allocations, 0, "the launch path allocated {allocations} times");
    // Per round, two launches add 0.5 to y[0] (the view launch writes y[100..200]).
    assert_eq!(y.to_vec().unwrap()[0], 2002.0 * 2.0 * 0.5, "every launch ran");
}
