//! G20R-4: `Context::create` (safe) leaves ferrocuda's own context current on the thread, and
//! the CUDA runtime (libtorch, cuDNN, any C++ extension) then allocates in it: the runtime
//! uses the thread's current driver context when there is one, and calls `cudaSetDevice` only
//! when asked (PyTorch skips it when `cudaGetDevice` already names the device). Dropping the
//! ferrocuda `Context` destroys that memory under the other library, and the other library's
//! stale pointer can then land in a later allocation: here a ferrocuda buffer.
//!
//! ferrocuda is used through safe code only. The `unsafe` blocks are the other library's calls
//! (the runtime's C API, as libtorch makes them) and one read-only driver query.
//! Exit 0 = REPRODUCED (the runtime's allocation lives in ferrocuda's created context), 1 = not,
//! 2 = SKIPPED (no GPU or no libcudart).

use std::ffi::c_void;

use ferrocuda_host::{Context, Device, DeviceBuffer, SchedulePolicy, sys};

type Malloc = unsafe extern "C" fn(*mut *mut c_void, usize) -> i32;
type Free = unsafe extern "C" fn(*mut c_void) -> i32;
type Memset = unsafe extern "C" fn(*mut c_void, i32, usize) -> i32;
type DeviceSync = unsafe extern "C" fn() -> i32;
type GetDevice = unsafe extern "C" fn(*mut i32) -> i32;

const BYTES: usize = 4 << 20;

fn context_of(address: u64) -> (sys::CUresult, sys::CUcontext) {
    let mut ctx: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: writes one handle; `address` is only looked up.
    let r = unsafe { sys::cuPointerGetAttribute((&mut ctx as *mut sys::CUcontext).cast(), sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_CONTEXT, address) };
    (r, ctx)
}

fn main() {
    match Device::count() {
        Ok(n) if n >= 1 => {}
        other => {
            println!("SKIPPED g20r4: no GPU ({other:?})");
            std::process::exit(2);
        }
    }
    let names = ["libcudart.so", "/usr/local/cuda/lib64/libcudart.so", "libcudart.so.13", "libcudart.so.12"];
    // SAFETY: loading the CUDA runtime runs its initialisers only.
    let Some(rt) = names.iter().find_map(|n| unsafe { libloading::Library::new(*n) }.ok()) else {
        println!("SKIPPED g20r4: no libcudart ({names:?})");
        std::process::exit(2);
    };
    // SAFETY: the runtime's documented signatures.
    let (malloc, free, memset, sync, get_device) = unsafe {
        (
            *rt.get::<Malloc>(b"cudaMalloc").unwrap(),
            *rt.get::<Free>(b"cudaFree").unwrap(),
            *rt.get::<Memset>(b"cudaMemset").unwrap(),
            *rt.get::<DeviceSync>(b"cudaDeviceSynchronize").unwrap(),
            *rt.get::<GetDevice>(b"cudaGetDevice").unwrap(),
        )
    };

    // 1. The other library initialises on this thread (torch's first CUDA call): the primary
    //    context becomes current.
    // SAFETY: the runtime's API.
    let init = unsafe { free(std::ptr::null_mut()) };
    let primary = Context::primary(0).unwrap();
    println!("runtime init: {init}; primary context {:?}", primary.raw());

    // 2. ferrocuda makes a context of its own (safe), and a buffer in it.
    let created = Context::create(0, SchedulePolicy::Auto).unwrap();
    let ours = DeviceBuffer::<u8>::zeroed(&created, 16).unwrap();
    println!("ferrocuda created context {:?}", created.raw());

    // 3. The other library allocates, as libtorch does: cudaGetDevice says 0, so no
    //    cudaSetDevice (c10::cuda::SetDevice skips a redundant one), then cudaMalloc.
    let mut device = -1;
    let mut p: *mut c_void = std::ptr::null_mut();
    // SAFETY: the runtime's API.
    let (rd, rm) = unsafe { (get_device(&mut device), malloc(&mut p, BYTES)) };
    let (rc, owner) = context_of(p as u64);
    let in_created = rc == sys::CUresult::CUDA_SUCCESS && owner == created.raw();
    println!(
        "runtime: cudaGetDevice -> {rd} (device {device}); cudaMalloc({BYTES}) -> {rm} at {p:?}, whose context is {owner:?} ({})",
        if in_created {
            "ferrocuda's created context"
        } else if owner == primary.raw() {
            "the primary context"
        } else {
            "another"
        }
    );

    // 4. ferrocuda's handles go (safe): cuCtxDestroy frees the runtime's allocation with them.
    drop(ours);
    drop(created);
    let (rc2, _) = context_of(p as u64);
    println!("after dropping the ferrocuda Context: the runtime's pointer {p:?} is {rc2:?} to the driver");

    if in_created {
        println!("REPRODUCED g20r4: the runtime's allocation lived in ferrocuda's created context and died with its drop");
    }

    // 5. A new ferrocuda buffer of the same size in the primary context; then the other library
    //    uses its pointer as it would (it was told nothing).
    let Ok(victim) = DeviceBuffer::<u8>::zeroed(&primary, BYTES) else {
        println!("(could not allocate the second buffer)");
        std::process::exit(if in_created { 0 } else { 1 });
    };
    let reused = victim.as_device_ptr().address() == p as u64;
    // SAFETY: the runtime's API, on the pointer it handed out (from its point of view, live).
    let (rs, ry) = unsafe { (memset(p, 0xAB, BYTES), sync()) };
    let overwritten = match victim.to_vec() {
        Ok(seen) => seen.iter().filter(|&&b| b == 0xAB).count().to_string(),
        Err(e) => format!("(unknown: {e})"),
    };
    println!(
        "runtime: cudaMemset(stale {p:?}) -> {rs}, sync -> {ry}; the new ferrocuda buffer {} the stale address; {overwritten} of {BYTES} of its bytes overwritten",
        if reused { "reuses" } else { "does not reuse" }
    );
    // SAFETY: the runtime's API (an error is expected: the allocation is gone).
    let rf = unsafe { free(p) };
    println!("runtime: cudaFree(stale) -> {rf}");
    if in_created {
        std::process::exit(0);
    }
    println!("NOT REPRODUCED g20r4");
    std::process::exit(1);
}
