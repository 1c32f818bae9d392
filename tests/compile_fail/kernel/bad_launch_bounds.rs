use ferrocuda_device::kernel;

#[kernel(launch_bounds(256, 2, 1))]
pub fn too_many_bounds(out: &mut [u32]) {
    out[0] = 1;
}

fn main() {}
