use ferrocuda_device::kernel;

#[kernel(launch_bounds(256, 2, 1))]
pub unsafe fn too_many_bounds(out: *mut u32) {
    unsafe { *out = 1 };
}

fn main() {}
